//! The per-packet CSV log (`--log-csv`): one row per packet when its fate is known (delivered or
//! dropped), times in ns since the router started.
//!
//! Columns: `dir,id,len,arrival_ns,dequeue_ns,finish_ns,release_ns,written_ns,queue_delay_ns,ecn_in,ecn_out,outcome`
//! * `dir`: `down` (sender → receiver) or `up`;
//! * `arrival_ns`: when the packet reached the queue (read from the TUN device; a paced flow's
//!   when `--pacer` released it, so `queue_delay_ns` is the bottleneck's alone);
//! * `dequeue_ns`: start of transmission; `finish_ns`: last byte left the link;
//!   `release_ns`: scheduled delivery (finish + propagation); `written_ns`: actual delivery;
//! * `ecn_in`/`ecn_out`: the ECN field on arrival and on departure (`not-ect`, `ect1`, `ect0`, `ce`),
//!   so marks are `ecn_in != ecn_out`;
//! * `outcome`: `delivered`, `dropped_buffer`, `dropped_aqm` or `dropped_write`.
//!
//! Fields that do not apply to an outcome are empty.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use ccp_qdisc::{Ecn, Nanos};

use crate::error::{Error, Result};

pub const CSV_HEADER: &str =
    "dir,id,len,arrival_ns,dequeue_ns,finish_ns,release_ns,written_ns,queue_delay_ns,ecn_in,ecn_out,outcome";

/// What happened to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    DroppedBuffer,
    DroppedAqm,
    DroppedWrite,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::DroppedBuffer => "dropped_buffer",
            Outcome::DroppedAqm => "dropped_aqm",
            Outcome::DroppedWrite => "dropped_write",
        }
    }
}

fn ecn_name(e: Ecn) -> &'static str {
    match e {
        Ecn::NotEct => "not-ect",
        Ecn::Ect1 => "ect1",
        Ecn::Ect0 => "ect0",
        Ecn::Ce => "ce",
    }
}

/// One row; times are absolute monotonic ns (the log subtracts its start).
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub dir: &'static str,
    pub id: u64,
    pub len: usize,
    pub arrival: Nanos,
    pub dequeue: Option<Nanos>,
    pub finish: Option<Nanos>,
    pub release: Option<Nanos>,
    pub written: Option<Nanos>,
    pub ecn_in: Ecn,
    pub ecn_out: Ecn,
    pub outcome: Outcome,
}

pub struct CsvLog {
    out: BufWriter<File>,
    start: Nanos,
    path: String,
}

impl CsvLog {
    pub fn create(path: &Path, start: Nanos) -> Result<CsvLog> {
        let file = File::create(path).map_err(|e| Error::io(format!("--log-csv {}", path.display()), e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        writeln!(out, "{CSV_HEADER}").map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(CsvLog { out, start, path: path.display().to_string() })
    }

    pub fn write(&mut self, r: &Row) -> Result<()> {
        let rel = |t: Option<Nanos>| t.map(|t| t.saturating_sub(self.start).to_string()).unwrap_or_default();
        let queue = r.dequeue.map(|d| d.saturating_sub(r.arrival).to_string()).unwrap_or_default();
        writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            r.dir,
            r.id,
            r.len,
            r.arrival.saturating_sub(self.start),
            rel(r.dequeue),
            rel(r.finish),
            rel(r.release),
            rel(r.written),
            queue,
            ecn_name(r.ecn_in),
            ecn_name(r.ecn_out),
            r.outcome.as_str()
        )
        .map_err(|e| Error::io(format!("writing {}", self.path), e))
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(format!("writing {}", self.path), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_relative_and_complete() {
        let dir = std::env::temp_dir().join(format!("ccp-router-log-{}", std::process::id()));
        let mut log = CsvLog::create(&dir, 1000).unwrap();
        log.write(&Row {
            dir: "down",
            id: 7,
            len: 1500,
            arrival: 1100,
            dequeue: Some(1200),
            finish: Some(1300),
            release: Some(2300),
            written: Some(2310),
            ecn_in: Ecn::Ect0,
            ecn_out: Ecn::Ce,
            outcome: Outcome::Delivered,
        })
        .unwrap();
        log.write(&Row {
            dir: "down",
            id: 8,
            len: 1500,
            arrival: 1100,
            dequeue: None,
            finish: None,
            release: None,
            written: None,
            ecn_in: Ecn::NotEct,
            ecn_out: Ecn::NotEct,
            outcome: Outcome::DroppedBuffer,
        })
        .unwrap();
        log.flush().unwrap();
        let text = std::fs::read_to_string(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines[1], "down,7,1500,100,200,300,1300,1310,100,ect0,ce,delivered");
        assert_eq!(lines[2], "down,8,1500,100,,,,,,not-ect,not-ect,dropped_buffer");
        assert_eq!(lines[1].split(',').count(), CSV_HEADER.split(',').count());
    }
}
