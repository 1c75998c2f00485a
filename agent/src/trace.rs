//! `--trace-flows FILE`: one JSON line per report, for experiments and debugging.
//!
//! Each line pairs what the datapath measured with what the controller decided and the
//! algorithm's own state (Nimbus's mode and η, DCTCP's α, …), so a run can be analysed without
//! instrumenting any algorithm. Written through a buffer flushed once a second and at exit.
//!
//! A report carrying network feedback adds `qcn_fb`, `qcn_q_off_bytes`, `qcn_q_delta_bytes`, and,
//! when a CNM brought it, `cnm_cpid`, `cnm_read_to_action_us` (the datagram read to the flow's
//! decision applied) and `cnm_sample_to_read_us` (the congestion point's sample to the read, for
//! a congestion point on this host's clock). Lines without feedback have none of these keys.
//!
//! `--record-reports FILE` ([`ReportRecord`]): one line per report an algorithm is given,
//! `{"flow": ID, "report": REPORT}` with the report exactly as `ccp_contract::Report` serialises,
//! so a run can be replayed through any algorithm. Buffered and flushed like the trace.
//!
//! Both files are created mode 0600 and never through a symbolic link ([`create_private`]): the
//! agent usually runs as root, and the files show every flow's traffic.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;
use ccp_contract::{Controller, NetworkFeedback, PacingCommand, Report, Urgent};
use serde::Serialize;
use tracing::warn;

pub struct FlowTrace {
    out: BufWriter<File>,
    failed: bool,
}

/// Where a report's network feedback came from and how fast it was acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CnmTrace {
    pub cpid: u32,
    pub read_to_action_us: u64,
    pub sample_to_read_us: Option<u64>,
}

#[derive(Serialize)]
struct Line<'a> {
    /// Datapath clock of the report, µs.
    t_us: u64,
    /// Agent clock since start, µs (comparable across flows and datapaths).
    agent_us: u64,
    flow: u64,
    algorithm: &'static str,
    /// The window the datapath was using.
    cwnd_bytes: u64,
    /// The window the agent commands (after this report).
    commanded_cwnd_bytes: u64,
    pacing_rate_bytes_per_s: Option<u64>,
    mss_bytes: u32,
    acked_bytes: u64,
    /// Delivered out of order (SACKed): during loss recovery the only sign a flow moves.
    sacked_bytes: u64,
    lost_pkts: u64,
    ce_pkts: u64,
    inflight_bytes: u64,
    /// Sent and not cumulatively acknowledged (`Report::unacked_bytes`; 0 where not reported).
    unacked_bytes: u64,
    /// The window limited the sender over the interval (`Report::cwnd_limited`).
    cwnd_limited: bool,
    app_limited: bool,
    /// The controller holds the algorithm's window to this while the flow does not fill it
    /// (`ccp_contract::ceiling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    window_ceiling_bytes: Option<u64>,
    srtt_us: Option<u64>,
    min_rtt_us: Option<u64>,
    send_rate_bytes_per_s: Option<u64>,
    recv_rate_bytes_per_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_delivery_rate_bytes_per_s: Option<u64>,
    /// ACK aggregation the datapath measured (`Report::extra_acked_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_acked_bytes: Option<u64>,
    urgent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qcn_fb: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qcn_q_off_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qcn_q_delta_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cnm_cpid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cnm_read_to_action_us: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cnm_sample_to_read_us: Option<u64>,
    state: std::collections::BTreeMap<&'static str, f64>,
}

impl FlowTrace {
    pub fn create(path: &Path) -> anyhow::Result<FlowTrace> {
        let f = create_private(path).with_context(|| format!("creating flow trace {}", path.display()))?;
        Ok(FlowTrace { out: BufWriter::new(f), failed: false })
    }

    /// One line: `now_us` is the agent's clock (µs since it started); `cnm` when a CNM brought
    /// the report.
    pub fn record(&mut self, now_us: u64, flow: u64, r: &Report, c: &Controller, cnm: Option<&CnmTrace>) {
        if self.failed {
            return;
        }
        let qcn = r.feedback.and_then(|fb| match fb {
            NetworkFeedback::Qcn { fb_quantized, q_off_bytes, q_delta_bytes } => Some((fb_quantized, q_off_bytes, q_delta_bytes)),
            // The agent's datapaths carry no INT; a trace line has no columns for it.
            NetworkFeedback::Int(_) => None,
        });
        let line = Line {
            t_us: r.now_us,
            agent_us: now_us,
            flow,
            algorithm: c.algorithm_name(),
            cwnd_bytes: r.cwnd_bytes,
            commanded_cwnd_bytes: c.cwnd_bytes(),
            pacing_rate_bytes_per_s: match c.pacing() {
                Some(PacingCommand::BytesPerSec(b)) => Some(b),
                _ => None,
            },
            mss_bytes: r.mss_bytes,
            acked_bytes: r.acked_bytes,
            sacked_bytes: r.sacked_bytes,
            lost_pkts: r.lost_pkts,
            ce_pkts: r.ce_pkts,
            inflight_bytes: r.inflight_bytes,
            unacked_bytes: r.unacked_bytes,
            cwnd_limited: r.cwnd_limited,
            app_limited: r.app_limited,
            window_ceiling_bytes: c.window_ceiling_bytes(),
            srtt_us: r.rtt.map(|x| x.srtt_us),
            min_rtt_us: r.rtt.map(|x| x.min_us),
            send_rate_bytes_per_s: r.send_rate_bytes_per_s,
            recv_rate_bytes_per_s: r.recv_rate_bytes_per_s,
            max_delivery_rate_bytes_per_s: r.max_delivery_rate_bytes_per_s,
            extra_acked_bytes: r.extra_acked_bytes,
            urgent: r.urgent.map(|u| match u {
                Urgent::Loss => "loss",
                Urgent::Timeout => "timeout",
                Urgent::StateChange => "state_change",
            }),
            qcn_fb: qcn.map(|q| q.0),
            qcn_q_off_bytes: qcn.map(|q| q.1),
            qcn_q_delta_bytes: qcn.map(|q| q.2),
            cnm_cpid: cnm.map(|x| x.cpid),
            cnm_read_to_action_us: cnm.map(|x| x.read_to_action_us),
            cnm_sample_to_read_us: cnm.and_then(|x| x.sample_to_read_us),
            state: c.algorithm_state().into_iter().map(|v| (v.name, v.value)).collect(),
        };
        let written =
            serde_json::to_writer(&mut self.out, &line).map_err(std::io::Error::from).and_then(|()| self.out.write_all(b"\n"));
        if let Err(e) = written {
            // A full disk must not take the agent down with it: stop tracing, keep controlling.
            warn!(error = %e, "flow trace write failed; tracing stops");
            self.failed = true;
        }
    }

    pub fn flush(&mut self) {
        if !self.failed {
            if let Err(e) = self.out.flush() {
                warn!(error = %e, "flow trace flush failed; tracing stops");
                self.failed = true;
            }
        }
    }
}

/// Creates (or truncates) `path` for writing, mode 0600 (an existing file is made 0600 too),
/// refusing a symbolic link in its place: whoever could write the directory could otherwise
/// point it at a file the agent would overwrite.
pub fn create_private(path: &Path) -> std::io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::other("it is a symbolic link; refusing to follow it"),
            _ => e,
        })?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

/// `--record-reports FILE`: see the module docs.
pub struct ReportRecord {
    out: BufWriter<File>,
    failed: bool,
}

impl ReportRecord {
    pub fn create(path: &Path) -> anyhow::Result<ReportRecord> {
        let f = create_private(path).with_context(|| format!("creating report record {}", path.display()))?;
        Ok(ReportRecord { out: BufWriter::new(f), failed: false })
    }

    /// One line: `report` as flow `flow`'s algorithm is given it.
    pub fn record(&mut self, flow: u64, report: &Report) {
        if self.failed {
            return;
        }
        #[derive(Serialize)]
        struct Line<'a> {
            flow: u64,
            report: &'a Report,
        }
        let written = serde_json::to_writer(&mut self.out, &Line { flow, report })
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"));
        if let Err(e) = written {
            warn!(error = %e, "report record write failed; recording stops");
            self.failed = true;
        }
    }

    pub fn flush(&mut self) {
        if !self.failed {
            if let Err(e) = self.out.flush() {
                warn!(error = %e, "report record flush failed; recording stops");
                self.failed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_contract::{RttStats, Urgent};
    use std::io::BufRead;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn recorded_reports_read_back_as_the_reports_given() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports.jsonl");
        let mut rec = ReportRecord::create(&path).unwrap();
        let a = Report { now_us: 10_000, mss_bytes: 1448, acked_bytes: 14_480, acked_pkts: 10, ..Report::default() };
        let b = Report {
            now_us: 20_000,
            lost_pkts: 2,
            urgent: Some(Urgent::Loss),
            rtt: Some(RttStats { min_us: 900, max_us: 2_000, srtt_us: 1_200, ..RttStats::default() }),
            send_rate_bytes_per_s: Some(1_000_000),
            ..a.clone()
        };
        rec.record(7, &a);
        rec.record(u64::MAX, &b);
        rec.flush();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let lines: Vec<String> = std::io::BufReader::new(File::open(&path).unwrap()).lines().map(Result::unwrap).collect();
        assert_eq!(lines.len(), 2);
        let back: Vec<ccp_contract::RecordedReport> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(
            back,
            vec![
                ccp_contract::RecordedReport { flow: 7, report: a.clone() },
                ccp_contract::RecordedReport { flow: u64::MAX, report: b }
            ]
        );
        // Exactly two keys, and the report alone parses as a ccp_contract::Report.
        let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
        assert_eq!(serde_json::from_value::<Report>(v["report"].clone()).unwrap(), a);
    }

    #[test]
    fn record_files_are_private_and_never_followed_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.jsonl");
        std::fs::write(&old, "stale\n").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o666)).unwrap();
        ReportRecord::create(&old).unwrap();
        assert_eq!(std::fs::metadata(&old).unwrap().mode() & 0o777, 0o600, "an existing file is made private");
        assert_eq!(std::fs::read(&old).unwrap(), b"", "and truncated");
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for e in [ReportRecord::create(&link).err().unwrap(), FlowTrace::create(&link).err().unwrap()] {
            let e = format!("{e:#}");
            assert!(e.contains("symbolic link") && e.contains(&link.display().to_string()), "{e}");
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"keep", "the link's target is untouched");
    }
}
