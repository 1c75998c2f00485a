//! What a finished soak prints and writes: each series' trends as rows, the lost and frozen
//! flows against their target of 0, and notes on what ran and what went wrong.

use std::collections::{BTreeMap, HashSet};

use super::series::{at_phase, trend, Trend};
use super::{kernel_flows, libccp_flows, CensusRecord, Kind, RestartRecord, Soak};
use super::{CENSUS_EVERY, FD_SLACK, GRACE, KERNEL_CHUNK_BYTES, KERNEL_EVERY, SETTLE};
use crate::rows::{Row, Target};

/// One series the rows report.
struct Reported {
    key: &'static str,
    label: &'static str,
    unit: &'static str,
    per_h: &'static str,
}

const REPORTED: [Reported; 9] = [
    Reported { key: "libccp_agent.rss_mib", label: "libccp agent RSS", unit: "MiB", per_h: "MiB/h" },
    Reported { key: "libccp_agent.fds", label: "libccp agent open files", unit: "", per_h: "/h" },
    Reported { key: "libccp_agent.log_lines_per_min", label: "libccp agent log lines/min", unit: "/min", per_h: "/min per h" },
    Reported { key: "ebpf_agent.rss_mib", label: "eBPF agent RSS", unit: "MiB", per_h: "MiB/h" },
    Reported { key: "ebpf_agent.fds", label: "eBPF agent open files", unit: "", per_h: "/h" },
    Reported { key: "ebpf_agent.log_lines_per_min", label: "eBPF agent log lines/min", unit: "/min", per_h: "/min per h" },
    Reported { key: "maps.flow_info", label: "flow_info entries", unit: "", per_h: "/h" },
    Reported { key: "maps.ctrl_used", label: "control slots in use", unit: "", per_h: "/h" },
    Reported { key: "maps.ctrl_moved", label: "ctrl_slot entries (moved slots)", unit: "", per_h: "/h" },
];

/// The rows and notes of a finished run.
pub(super) struct Report<'a, 'p> {
    pub(super) soak: &'a Soak<'p>,
    pub(super) seconds: f64,
    pub(super) setup_s: f64,
    pub(super) was_interrupted: bool,
}

impl Report<'_, '_> {
    pub(super) fn rows_and_notes(
        &self,
        kernel: &kernel_flows::Tally,
        libccp: &libccp_flows::Tally,
        shutdown: &BTreeMap<&str, bool>,
        pins_left: bool,
        flow_info_left: Option<usize>,
    ) -> (Vec<Row>, Vec<String>) {
        let (s, plan) = (self.soak, self.soak.plan);
        let warmup = plan.warmup().as_secs_f64();
        let mut rows = Vec::new();
        let mut trends: Vec<(&Reported, Trend)> = Vec::new();
        for r in &REPORTED {
            let t = trend(s.samples.get(r.key), warmup);
            rows.push(Row::alone(
                format!("soak.{}.slope_per_h", r.key),
                format!("{}: slope within lives", r.label),
                r.per_h,
                t.slope_per_h,
            ));
            rows.push(Row::alone(
                format!("soak.{}.drift_per_h", r.key),
                format!("{}: drift across lives", r.label),
                r.per_h,
                t.drift_per_h,
            ));
            rows.push(Row::alone(format!("soak.{}.min", r.key), format!("{}: min", r.label), r.unit, t.min));
            rows.push(Row::alone(format!("soak.{}.max", r.key), format!("{}: max", r.label), r.unit, t.max));
            trends.push((r, t));
        }
        let phase = plan.fd_phase().as_secs_f64();
        for (key, label) in [("libccp_agent", "libccp agent"), ("ebpf_agent", "eBPF agent")] {
            let at = at_phase(s.samples.get(&format!("{key}.fds")), phase);
            let spread = at.iter().copied().fold(f64::NEG_INFINITY, f64::max) - at.iter().copied().fold(f64::INFINITY, f64::min);
            rows.push(
                Row::alone(
                    format!("soak.{key}.fds_spread_at_phase"),
                    format!("{label} open files, spread across lives {phase:.0} s into each"),
                    "",
                    if at.is_empty() { 0.0 } else { spread },
                )
                .target(Target::AtMost(FD_SLACK)),
            );
        }
        // Each flow found lost (frozen) once, however many censuses found it.
        let distinct = |f: &dyn Fn(&CensusRecord) -> &[(u32, u64)]| {
            s.censuses.iter().flat_map(|c| f(c).iter().copied()).collect::<HashSet<_>>().len() as f64
        };
        for (key, label, n) in [
            ("soak.libccp.lost", "libccp flows lost", distinct(&|c| &c.libccp.lost)),
            ("soak.libccp.frozen", "libccp flows frozen", distinct(&|c| &c.libccp.frozen)),
            ("soak.ebpf.lost", "kernel flows lost", distinct(&|c| &c.ebpf.lost)),
            ("soak.ebpf.frozen", "kernel flows frozen", distinct(&|c| &c.ebpf.frozen)),
        ] {
            rows.push(Row::alone(key, label, "", n).target(Target::AtMost(0.0)));
        }

        let left = flow_info_left.unwrap_or(0) as f64;
        rows.push(Row::alone("soak.ebpf.flow_info_left", "flow_info entries left once every kernel flow closed", "", left));

        let ready = |f: fn(&RestartRecord) -> f64| s.restarts.iter().map(f).fold(0.0, f64::max);
        let judged = |f: fn(&CensusRecord) -> usize| s.censuses.iter().map(f).sum::<usize>();
        let mut notes = vec![
            format!(
                "{:.1} min{} ({:.1} s setup): {} libccp flows (ccp-test-datapath: 50 ms, 0.2 Mbit/s, 12-packet buffer each) and {} kernel flows \
                 (loopback of a namespace of its own, {} B every {} ms each), each replaced after {:.0} s: {:.0} flows opened and closed per s \
                 in all; `ctl swap --all` reno/cubic every {} s ({} requests, {} failed, {} flows swapped); both agents killed with SIGKILL \
                 every {} s ({} restarts, answering again within {:.0} ms libccp, {:.0} ms eBPF at most)",
                self.seconds / 60.0,
                if self.was_interrupted { ", INTERRUPTED" } else { "" },
                self.setup_s,
                plan.flows,
                plan.flows,
                KERNEL_CHUNK_BYTES,
                KERNEL_EVERY.as_millis(),
                plan.life().as_secs_f64(),
                plan.churn_per_s,
                plan.swap_every_s,
                s.swaps.requests,
                s.swaps.failed,
                s.swaps.flows_swapped,
                plan.restart_every_s,
                s.restarts.len(),
                ready(|r| r.libccp_ready_ms),
                ready(|r| r.ebpf_ready_ms),
            ),
            format!(
                "slopes: least squares over the samples (every {} s) at least {:.0} s into each life, one intercept per life (a restart's \
                 reset is no trend); drift: each life's mean against time (what survives restarts); min/max over every sample",
                plan.sample_every_s, warmup
            ),
            format!(
                "{} censuses (every {} s, {} s after each restart, at the end) judged {} libccp and {} kernel flows running for {} s or more: \
                 lost = the agent does not list it; frozen = no report for {} s, or (kernel) no entry of the running agent in force; \
                 the agents listed {} libccp and {} kernel flows the datapath did not run (ghosts, all censuses)",
                s.censuses.len(),
                CENSUS_EVERY.as_secs(),
                GRACE.as_secs(),
                judged(|c| c.libccp.checked),
                judged(|c| c.ebpf.checked),
                SETTLE.as_secs(),
                SETTLE.as_secs(),
                judged(|c| c.libccp.ghosts),
                judged(|c| c.ebpf.ghosts),
            ),
            format!(
                "kernel flows: {} opened, {} closed, {} opens refused while the agent was down (its name unregistered), {} other errors{}; \
                 libccp flows: {} started, {} ended ({} without a report), {} reports, {} RTOs",
                kernel.opened,
                kernel.closed,
                kernel.refused_unregistered,
                kernel.open_errors,
                kernel.last_error.as_deref().map(|e| format!(" (last: {e})")).unwrap_or_default(),
                libccp.started,
                libccp.ended,
                libccp.ended_without_reports,
                libccp.ended_reports,
                libccp.timeouts,
            ),
            format!(
                "WARN/ERROR lines: libccp agent {}, eBPF agent {}; clean shutdown: libccp {}, eBPF {}{}",
                s.rig.agent(Kind::Libccp).warnings(),
                s.rig.agent(Kind::Ebpf).warnings(),
                shutdown.get("libccp").copied().unwrap_or(false),
                shutdown.get("ebpf").copied().unwrap_or(false),
                if pins_left { "; !!! the eBPF agent left its pins" } else { "" }
            ),
        ];
        for c in s.censuses.iter().filter(|c| {
            !c.libccp.lost.is_empty() || !c.libccp.frozen.is_empty() || !c.ebpf.lost.is_empty() || !c.ebpf.frozen.is_empty()
        }) {
            notes.push(format!(
                "!!! census {} at {:.0} s: libccp lost {:?} frozen {:?}; kernel lost {:?} frozen {:?} (sid/fid, start µs; first 5 each)",
                c.label,
                c.at_s,
                &c.libccp.lost[..c.libccp.lost.len().min(5)],
                &c.libccp.frozen[..c.libccp.frozen.len().min(5)],
                &c.ebpf.lost[..c.ebpf.lost.len().min(5)],
                &c.ebpf.frozen[..c.ebpf.frozen.len().min(5)],
            ));
        }
        if left > 0.0 {
            notes.push(format!(
                "!!! {left:.0} flow_info entries outlived their sockets of {} kernel flows closed: the kernel never called the congestion \
                 control's release for them (no close record either: the agent lists them, silent, until its idle timeout); \
                 see docs/performance.md",
                kernel.closed
            ));
        }
        if let Some(e) = &s.swaps.last_error {
            notes.push(format!("!!! last failed swap: {e}"));
        }
        (rows, notes)
    }
}
