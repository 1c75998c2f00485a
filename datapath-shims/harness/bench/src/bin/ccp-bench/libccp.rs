//! The libccp part: one emulated workload (`ccp-test-datapath`, the real libccp C library driving
//! many TCP-like flows over unix-socket IPC) served in turn by ccp-agent's Reno, by ccp-agent's
//! Reno with generic_cong_avoid's 10-packet window floor, and by the anchor, portus 0.7 running
//! generic_cong_avoid 0.4.0's `reno`; repetitions interleaved.
//!
//! Each run gets a private socket directory. portus 0.7 binds `/tmp/ccp/portus`, hard-coded, so
//! it runs in a private mount namespace where that directory is bind-mounted on `/tmp/ccp` (as
//! tests/e2e/portus.rs does), and the datapath binds a relative name (`--relative-bind`), because
//! portus replies to `/tmp/ccp/<sender path>`. The namespace ends with the portus process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use ccp_bench_harness::figures::{mean, ratio};
use ccp_bench_harness::process::{process_cpu_s, Proc};
use serde::Serialize;

use crate::procs::{tail, Timed};
use crate::rows::{Row, Target};

/// The workload, the same for every agent.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub flows: u32,
    pub duration_ms: u64,
    pub rtt_ms: u32,
    /// Each flow's own bottleneck, Mbit/s.
    pub link_mbps: u32,
    pub repeat: u32,
}

pub struct Bins {
    pub agent: PathBuf,
    pub datapath: PathBuf,
    pub portus_reno: PathBuf,
}

/// Who serves the datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// ccp-agent's Reno with the contract's 2-packet floor (the libccp datapaths' default: one
    /// report per smoothed RTT, portus's clock).
    Reno,
    /// ccp-agent's Reno with `[safety] min_cwnd_pkts = 10`, generic_cong_avoid's floor.
    RenoFloor10,
    /// The same with `[reports] interval_us = 10000`: a report every 10 ms (the default before
    /// issue 37, and the eBPF datapath's).
    RenoFloor10Every10ms,
    /// The anchor.
    Portus,
}

const KINDS: [Kind; 4] = [Kind::Reno, Kind::RenoFloor10, Kind::RenoFloor10Every10ms, Kind::Portus];

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Reno => "reno",
            Kind::RenoFloor10 => "reno_floor10",
            Kind::RenoFloor10Every10ms => "reno_floor10_10ms",
            Kind::Portus => "portus",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Reno => "reno",
            Kind::RenoFloor10 => "reno, 10-pkt floor",
            Kind::RenoFloor10Every10ms => "reno, 10-pkt floor, 10 ms reports",
            Kind::Portus => "portus reno",
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub agent: &'static str,
    pub repetition: u32,
    /// utime + stime of the agent process just before it was stopped.
    pub agent_cpu_s: f64,
    pub flows_ended: u64,
    pub reports: u64,
    pub delivered_bytes: u64,
    /// delivered / (flows × link rate × duration).
    pub utilisation: f64,
    pub rtos: u64,
    pub lost_pkts: u64,
    pub retx_pkts: u64,
    pub invoke_errors: u64,
    pub datapath_wall_s: f64,
    pub datapath_cpu_s: f64,
    pub warn_lines: u64,
    pub agent_log_lines: u64,
    pub agent_us_per_report: f64,
    pub reports_per_agent_cpu_s: f64,
    pub reports_per_flow_s: f64,
}

/// One agent's runs together.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub agent: &'static str,
    pub runs: usize,
    pub agent_cpu_s: f64,
    pub reports: u64,
    pub agent_us_per_report: f64,
    pub reports_per_agent_cpu_s: f64,
    pub reports_per_flow_s: f64,
    pub utilisation: f64,
    pub rtos_per_run: f64,
    pub lost_pkts_per_run: f64,
    pub retx_pkts_per_run: f64,
    pub warn_lines_per_run: f64,
    pub datapath_wall_s: f64,
    pub datapath_cpu_s: f64,
    /// Agent and datapath CPU together over the bytes the flows delivered, ms per MB.
    pub cpu_ms_per_delivered_mb: f64,
}

fn write_private_dir(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// The agent of `kind` on socket directory `ipc`, its socket there.
fn start_agent(kind: Kind, bins: &Bins, dir: &Path, ipc: &Path) -> anyhow::Result<Proc> {
    let sock = ipc.join("portus");
    let mut agent = match kind {
        Kind::Reno | Kind::RenoFloor10 | Kind::RenoFloor10Every10ms => {
            // A configuration of our own for each, so /etc/ccp-agent/agent.toml never applies.
            let config = dir.join("agent.toml");
            let settings = match kind {
                Kind::RenoFloor10 => "[safety]\nmin_cwnd_pkts = 10\n",
                Kind::RenoFloor10Every10ms => "[safety]\nmin_cwnd_pkts = 10\n[reports]\ninterval_us = 10000\n",
                _ => "",
            };
            std::fs::write(&config, settings)?;
            let mut cmd = Command::new(&bins.agent);
            cmd.args(["--log-level", "info", "run", "-a", "reno", "--datapath", "unix", "--ipc-dir"])
                .arg(ipc)
                .args(["--no-control", "-c"])
                .arg(&config);
            Proc::spawn(cmd, format!("ccp-agent ({})", kind.label()))?
        }
        Kind::Portus => {
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg("mkdir -p /tmp/ccp && mount --bind \"$1\" /tmp/ccp && exec \"$2\"")
                .arg("sh")
                .arg(ipc)
                .arg(&bins.portus_reno);
            Proc::spawn(cmd, "the portus agent (generic_cong_avoid reno)")?
        }
    };
    agent.wait_for_path(&sock)?;
    Ok(agent)
}

/// A WARN line of either agent's log (tracing's level column; slog's for portus).
fn is_warn(line: &str) -> bool {
    line.contains("WARN")
}

fn run_once(kind: Kind, bins: &Bins, plan: &Plan, repetition: u32) -> anyhow::Result<Run> {
    let dir = tempfile::Builder::new().prefix("ccp-bench-libccp-").tempdir()?;
    let ipc = dir.path().join("ipc");
    write_private_dir(&ipc)?;
    let agent = start_agent(kind, bins, dir.path(), &ipc)?;

    let out_path = dir.path().join("datapath.jsonl");
    let err_path = dir.path().join("datapath.err");
    let mut cmd = Command::new(&bins.datapath);
    cmd.arg("--dir").arg(&ipc).args([
        "--flows",
        &plan.flows.to_string(),
        "--rtt-ms",
        &plan.rtt_ms.to_string(),
        "--link-mbps",
        &plan.link_mbps.to_string(),
        "--duration-ms",
        &plan.duration_ms.to_string(),
    ]);
    if kind == Kind::Portus {
        cmd.arg("--relative-bind");
    }
    cmd.stdout(Stdio::from(std::fs::File::create(&out_path)?)).stderr(Stdio::from(std::fs::File::create(&err_path)?));
    let dp = Timed::spawn(cmd, "ccp-test-datapath")?;
    let usage = dp.wait(Duration::from_millis(plan.duration_ms) + Duration::from_secs(60)).context("ccp-test-datapath")?;
    let agent_cpu_s = process_cpu_s(agent.pid());
    let (status, log) = agent.finish()?;

    let dp_err = std::fs::read_to_string(&err_path).unwrap_or_default();
    if usage.code != 0 {
        bail!("ccp-test-datapath exited with {} against {}:\n{}", usage.code, kind.label(), tail(&dp_err, 20));
    }
    // portus dies of the SIGTERM; ccp-agent must stop cleanly.
    if kind != Kind::Portus && !status.success() {
        bail!("ccp-agent ({}) did not stop cleanly ({status}):\n{}", kind.label(), tail(&log, 30));
    }

    let (mut flows_ended, mut reports, mut delivered, mut rtos, mut lost, mut retx, mut invoke_errors) = (0, 0, 0, 0, 0, 0, 0);
    let text = std::fs::read_to_string(&out_path)?;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("ccp-test-datapath wrote a bad JSON line: {line}"))?;
        if v["ev"] != "end" {
            continue;
        }
        let n = |k: &str| v[k].as_u64().with_context(|| format!("an end record without {k}: {line}"));
        flows_ended += 1;
        reports += n("reports")?;
        delivered += n("delivered_bytes")?;
        rtos += n("timeouts")?;
        lost += n("lost_pkts")?;
        retx += n("retx_pkts")?;
        invoke_errors += v["invoke_errors"].as_u64().unwrap_or(0);
    }
    if flows_ended != u64::from(plan.flows) {
        bail!("ccp-test-datapath ended {flows_ended} of {} flows against {}:\n{}", plan.flows, kind.label(), tail(&dp_err, 20));
    }
    let secs = plan.duration_ms as f64 / 1e3;
    let capacity = f64::from(plan.flows) * f64::from(plan.link_mbps) * 1e6 / 8.0 * secs;
    Ok(Run {
        agent: kind.key(),
        repetition,
        agent_cpu_s,
        flows_ended,
        reports,
        delivered_bytes: delivered,
        utilisation: ratio(delivered as f64, capacity),
        rtos,
        lost_pkts: lost,
        retx_pkts: retx,
        invoke_errors,
        datapath_wall_s: usage.wall_s,
        datapath_cpu_s: usage.cpu_s,
        warn_lines: log.lines().filter(|l| is_warn(l)).count() as u64,
        agent_log_lines: log.lines().count() as u64,
        agent_us_per_report: ratio(agent_cpu_s * 1e6, reports as f64),
        reports_per_agent_cpu_s: ratio(reports as f64, agent_cpu_s),
        reports_per_flow_s: ratio(reports as f64, f64::from(plan.flows) * secs),
    })
}

fn summarise(kind: Kind, runs: &[Run], plan: &Plan) -> Summary {
    let mine: Vec<&Run> = runs.iter().filter(|r| r.agent == kind.key()).collect();
    let of = |f: &dyn Fn(&Run) -> f64| mine.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let cpu: f64 = of(&|r| r.agent_cpu_s).iter().sum();
    let reports: u64 = mine.iter().map(|r| r.reports).sum();
    let flow_s = f64::from(plan.flows) * plan.duration_ms as f64 / 1e3 * mine.len() as f64;
    Summary {
        agent: kind.key(),
        runs: mine.len(),
        agent_cpu_s: cpu,
        reports,
        agent_us_per_report: ratio(cpu * 1e6, reports as f64),
        reports_per_agent_cpu_s: ratio(reports as f64, cpu),
        reports_per_flow_s: ratio(reports as f64, flow_s),
        utilisation: mean(&of(&|r| r.utilisation)),
        rtos_per_run: mean(&of(&|r| r.rtos as f64)),
        lost_pkts_per_run: mean(&of(&|r| r.lost_pkts as f64)),
        retx_pkts_per_run: mean(&of(&|r| r.retx_pkts as f64)),
        warn_lines_per_run: mean(&of(&|r| r.warn_lines as f64)),
        datapath_wall_s: mean(&of(&|r| r.datapath_wall_s)),
        datapath_cpu_s: mean(&of(&|r| r.datapath_cpu_s)),
        cpu_ms_per_delivered_mb: ratio(
            of(&|r| r.agent_cpu_s + r.datapath_cpu_s).iter().sum::<f64>() * 1e3,
            of(&|r| r.delivered_bytes as f64).iter().sum::<f64>() / 1e6,
        ),
    }
}

/// What the part hands back: rows, notes, everything measured.
pub struct Measured {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub raw: serde_json::Value,
}

pub fn run(bins: &Bins, plan: &Plan) -> anyhow::Result<Measured> {
    let mut runs = Vec::new();
    for rep in 1..=plan.repeat {
        for kind in KINDS {
            eprintln!("[libccp] run {rep}/{} with {}: {} flows, {} ms", plan.repeat, kind.label(), plan.flows, plan.duration_ms);
            let r = run_once(kind, bins, plan, rep).with_context(|| format!("libccp run {rep} with {}", kind.label()))?;
            eprintln!(
                "[libccp]   {} reports, agent CPU {:.2} s ({:.2} us/report), utilisation {:.1} %, {} RTOs, {} WARN lines; \
                 datapath {:.2} s wall, {:.2} s CPU",
                r.reports,
                r.agent_cpu_s,
                r.agent_us_per_report,
                100.0 * r.utilisation,
                r.rtos,
                r.warn_lines,
                r.datapath_wall_s,
                r.datapath_cpu_s
            );
            runs.push(r);
        }
    }
    let sums: Vec<Summary> = KINDS.iter().map(|k| summarise(*k, &runs, plan)).collect();
    let portus = &sums[3];
    let mut rows = Vec::new();
    let ccp = [(Kind::Reno, &sums[0]), (Kind::RenoFloor10, &sums[1]), (Kind::RenoFloor10Every10ms, &sums[2])];
    for (k, s) in ccp {
        // Issue 37: what the host pays, agent and the datapath serving it together, per byte
        // acknowledged: at most portus's.
        rows.push(
            Row::vs(
                format!("libccp.cpu_per_mb.{}", k.key()),
                format!("agent + datapath CPU per MB delivered ({})", k.label()),
                "ms/MB",
                s.cpu_ms_per_delivered_mb,
                portus.cpu_ms_per_delivered_mb,
            )
            .target(Target::RatioAtMost(1.0)),
        );
    }
    for (k, s) in ccp {
        rows.push(
            Row::vs(
                format!("libccp.us_per_report.{}", k.key()),
                format!("agent CPU per report ({})", k.label()),
                "us",
                s.agent_us_per_report,
                portus.agent_us_per_report,
            )
            .target(Target::RatioAtMost(0.5)),
        );
    }
    for (k, s) in ccp {
        rows.push(
            Row::vs(
                format!("libccp.reports_per_cpu_s.{}", k.key()),
                format!("reports per agent CPU-second ({})", k.label()),
                "",
                s.reports_per_agent_cpu_s,
                portus.reports_per_agent_cpu_s,
            )
            .target(Target::RatioAtLeast(2.0)),
        );
    }
    for (k, s) in ccp {
        rows.push(Row::vs(
            format!("libccp.reports_per_flow_s.{}", k.key()),
            format!("reports per flow-second ({})", k.label()),
            "/s",
            s.reports_per_flow_s,
            portus.reports_per_flow_s,
        ));
    }
    for (k, s) in ccp {
        rows.push(Row::vs(
            format!("libccp.utilisation.{}", k.key()),
            format!("link utilisation ({})", k.label()),
            "%",
            100.0 * s.utilisation,
            100.0 * portus.utilisation,
        ));
    }
    for (k, s) in ccp {
        rows.push(Row::vs(
            format!("libccp.rtos.{}", k.key()),
            format!("RTOs per run ({})", k.label()),
            "",
            s.rtos_per_run,
            portus.rtos_per_run,
        ));
    }
    for (k, s) in ccp {
        rows.push(Row::vs(
            format!("libccp.warn_lines.{}", k.key()),
            format!("WARN lines per run ({})", k.label()),
            "",
            s.warn_lines_per_run,
            portus.warn_lines_per_run,
        ));
    }
    let mut notes = vec![format!(
        "workload: ccp-test-datapath --flows {} --rtt-ms {} --link-mbps {} --duration-ms {}, {} run(s) per agent, interleaved; \
         anchor: generic_cong_avoid 0.4.0 reno on portus 0.7",
        plan.flows, plan.rtt_ms, plan.link_mbps, plan.duration_ms, plan.repeat
    )];
    for s in &sums {
        notes.push(format!(
            "{:<13} per run: {:.0} lost, {:.0} retransmitted pkts; datapath {:.2} s wall, {:.2} s CPU; agent {:.2} s CPU, {} reports in all",
            s.agent,
            s.lost_pkts_per_run,
            s.retx_pkts_per_run,
            s.datapath_wall_s,
            s.datapath_cpu_s,
            s.agent_cpu_s / s.runs.max(1) as f64,
            s.reports
        ));
    }
    let raw = serde_json::json!({ "plan": plan, "runs": runs, "summaries": sums });
    Ok(Measured { rows, notes, raw })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warn_lines_of_both_agents() {
        assert!(is_warn("2026-01-01T00:00:00.000000Z  WARN ccp_agent::runtime: datapath queue full"));
        assert!(is_warn("Nov 25 00:00:00.000 WARN something"));
        assert!(!is_warn("2026-01-01T00:00:00.000000Z  INFO ccp_agent: flow created"));
    }
}
