//! `ccp-sim run --record-reports FILE`: one JSON line per report a flow's algorithm is given,
//! `{"flow": INDEX, "report": REPORT}`, the report as `ccp_contract::Report` serialises and the
//! flow its index in the scenario: the line format of `ccp-agent run --record-reports`, so a
//! simulated run replays through any algorithm as a real one does.
//!
//! Written through a buffer flushed once a second (of wall time) and at the end.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccp_contract::Report;
use serde::Serialize;

const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub struct ReportRecord {
    path: PathBuf,
    out: BufWriter<File>,
    flushed: Instant,
    /// The first write error; recording stops there and [`ReportRecord::finish`] returns it.
    error: Option<String>,
}

impl ReportRecord {
    pub fn create(path: &Path) -> Result<ReportRecord, String> {
        let err = |e: std::io::Error| format!("creating report record {}: {e}", path.display());
        let f = File::create(path).map_err(err)?;
        Ok(ReportRecord { path: path.to_path_buf(), out: BufWriter::new(f), flushed: Instant::now(), error: None })
    }

    /// One line: `report` as flow `flow` (its index) is given it.
    pub fn record(&mut self, flow: u64, report: &Report) {
        if self.error.is_some() {
            return;
        }
        #[derive(Serialize)]
        struct Line<'a> {
            flow: u64,
            report: &'a Report,
        }
        let mut written = serde_json::to_writer(&mut self.out, &Line { flow, report })
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"));
        if written.is_ok() && self.flushed.elapsed() >= FLUSH_EVERY {
            self.flushed = Instant::now();
            written = self.out.flush();
        }
        if let Err(e) = written {
            self.error = Some(format!("writing report record {}: {e}", self.path.display()));
        }
    }

    /// Flushes what is buffered; `Err` names the first write that failed.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(format!("writing report record {}: {e}", self.path.display()));
            }
        }
        self.error.clone().map_or(Ok(()), Err)
    }
}
