//! The eBPF and portus-shim parts: `ccp-ebpf-bench` and `ccp-libccp-shim-bench` run as they are
//! (each measures its anchors itself, in the same run), with `--json`; their rows come from that
//! JSON. A field missing from it is an error naming the field, so a change of either
//! benchmark's output cannot turn into a silent zero here.

use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;

use crate::procs::Timed;
use crate::rows::{Row, Target};

/// Runs `bin args --json FILE` (its tables go to our stderr, beside its progress) and returns
/// what it wrote.
pub fn run(bin: &Path, args: &[String], timeout: Duration) -> anyhow::Result<Value> {
    let dir = tempfile::Builder::new().prefix("ccp-bench-sub-").tempdir()?;
    let json = dir.path().join("out.json");
    let name = bin.file_name().map_or_else(|| bin.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut cmd = Command::new(bin);
    cmd.args(args).arg("--json").arg(&json);
    cmd.stdout(Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?));
    eprintln!("[{name}] {}", args.join(" "));
    let usage = Timed::spawn(cmd, &name)?.wait(timeout).with_context(|| name.clone())?;
    if usage.code != 0 {
        bail!("{name} {} exited with {} (its output is above, on stderr)", args.join(" "), usage.code);
    }
    let text = std::fs::read_to_string(&json).with_context(|| format!("{name} wrote no {}", json.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{name}'s JSON"))
}

/// The number at `path` (`a.b.c`) of `v`.
fn num(v: &Value, path: &str) -> anyhow::Result<f64> {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    let x = cur.as_f64().with_context(|| format!("no number at {path} in the benchmark's JSON"))?;
    if !x.is_finite() {
        bail!("{path} is {x} in the benchmark's JSON");
    }
    Ok(x)
}

/// Rows of `ccp-ebpf-bench` (parts bulk and flows).
pub fn ebpf_rows(v: &Value) -> anyhow::Result<(Vec<Row>, Vec<String>)> {
    let mut rows = Vec::new();
    let mut notes = vec!["anchors: the kernel's own cubic and reno, one bulk iperf3 flow each, in the same run; \
         ccp-agent: Reno on the `ccp` struct_ops congestion control, 10 ms reports"
        .to_string()];
    for path in ["veth", "loopback"] {
        let gbps = num(v, &format!("{path}.ccp_10ms.gbps"))?;
        for anchor in ["cubic", "reno"] {
            // Issue 19: at least 0.97x the kernel's own, both algorithms, both paths.
            rows.push(
                Row::vs(
                    format!("ebpf.{path}.gbps_vs_{anchor}"),
                    format!("{path} throughput vs kernel {anchor}"),
                    "Gbit/s",
                    gbps,
                    num(v, &format!("{path}.{anchor}_gbps"))?,
                )
                .target(Target::RatioAtLeast(0.97)),
            );
        }
    }
    for path in ["veth", "loopback"] {
        let key = format!("ebpf.{path}.bpf_ns_per_ack");
        let ns = num(v, &format!("{path}.ccp_10ms.bpf_ns_per_ack"))?;
        // A ccp-ebpf-bench that also runs the kernel's Reno as a BPF congestion control gives
        // the per-ACK cost an anchor; the target stays absolute.
        let row = match v[path].get("bpf_reno_ns_per_ack") {
            Some(_) => Row::vs(
                key,
                format!("{path} BPF cost per ACK vs kernel reno as BPF"),
                "ns",
                ns,
                num(v, &format!("{path}.bpf_reno_ns_per_ack"))?,
            ),
            None => Row::alone(key, format!("{path} BPF cost per ACK"), "ns", ns),
        };
        rows.push(row.target(Target::AtMost(80.0)));
    }
    let flows = num(v, "many_flows.flows")?;
    rows.push(
        Row::alone(
            "ebpf.many_flows.us_per_report",
            format!("{flows:.0}-flow agent CPU per report"),
            "us",
            num(v, "many_flows.agent_us_per_report")?,
        )
        .target(Target::AtMost(1.0)),
    );
    rows.push(
        Row::alone(
            "ebpf.many_flows.latency_p99_us",
            format!("{flows:.0}-flow report latency p99"),
            "us",
            num(v, "many_flows.latency_p99_us")?,
        )
        .target(Target::AtMost(100.0)),
    );
    for path in ["veth", "loopback"] {
        notes.push(format!(
            "{path}: per-RTT reports {:.2}x cubic, {:.2}x reno, BPF {:.0} ns/ACK; 10 ms reports: latency p50 {:.0} us, p99 {:.0} us",
            num(v, &format!("{path}.ccp_per_rtt.ratio_vs_cubic"))?,
            num(v, &format!("{path}.ccp_per_rtt.ratio_vs_reno"))?,
            num(v, &format!("{path}.ccp_per_rtt.bpf_ns_per_ack"))?,
            num(v, &format!("{path}.ccp_10ms.latency_p50_us"))?,
            num(v, &format!("{path}.ccp_10ms.latency_p99_us"))?,
        ));
    }
    notes.push(format!(
        "{flows:.0} flows: {:.0} reports/s, agent {:.1} % of a core, latency p50 {:.0} us, {:.0} ring drops",
        num(v, "many_flows.reports_per_s")?,
        num(v, "many_flows.agent_cpu_pct_of_a_core")?,
        num(v, "many_flows.latency_p50_us")?,
        num(v, "many_flows.ring_drops")?,
    ));
    Ok((rows, notes))
}

/// Rows of `ccp-libccp-shim-bench` (a JSON array, one object per path).
pub fn shim_rows(v: &Value) -> anyhow::Result<(Vec<Row>, Vec<String>)> {
    let paths = v.as_array().context("ccp-libccp-shim-bench's JSON is not an array of paths")?;
    if paths.is_empty() {
        bail!("ccp-libccp-shim-bench measured no path");
    }
    let mut rows = Vec::new();
    let mut notes = vec!["ccp-agent column: ccp-libccp-shim (the eBPF datapath's ACKs through the real libccp) \
         driven by portus reno; anchor: the kernel's reno in the same run"
        .to_string()];
    for p in paths {
        let path = p["path"].as_str().context("a path without a name in ccp-libccp-shim-bench's JSON")?;
        // ms per 10,000 ACKs = 1000 us / 10,000 ACKs: a tenth is us per ACK.
        rows.push(
            Row::alone(
                format!("shim.{path}.cpu_us_per_ack"),
                format!("{path} shim CPU per ACK"),
                "us",
                num(p, "shim_cpu_ms_per_10k_acks")? / 10.0,
            )
            .target(Target::AtMost(3.0)),
        );
        rows.push(Row::alone(
            format!("shim.{path}.cpu_us_per_ack_net_of_idle"),
            format!("{path} shim CPU per ACK, net of idle"),
            "us",
            num(p, "shim_cpu_ms_per_10k_acks_net_of_idle")? / 10.0,
        ));
        rows.push(Row::vs(
            format!("shim.{path}.gbps_vs_kernel_reno"),
            format!("{path} throughput vs kernel reno"),
            "Gbit/s",
            num(p, "portus_reno_gbps")?,
            num(p, "kernel_reno_gbps")?,
        ));
        notes.push(format!(
            "{path}: {:.0} ACKs/s, shim {:.1} % of a CPU (idle {:.2} %), portus {:.3} us/ACK; ccp-agent (eBPF) {:.2}x kernel reno; \
             {:.0} ring drops, {:.0} invoke errors",
            num(p, "acks_per_s")?,
            num(p, "shim_cpu_pct")?,
            num(p, "shim_idle_cpu_pct")?,
            num(p, "portus_cpu_ms_per_10k_acks")? / 10.0,
            num(p, "ratio_agent_vs_kernel")?,
            num(p, "ring_drops")?,
            num(p, "invoke_errors")?,
        ));
    }
    Ok((rows, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_field_is_named() {
        let v = serde_json::json!({ "veth": { "cubic_gbps": 1.0 } });
        let e = ebpf_rows(&v).unwrap_err().to_string();
        assert!(e.contains("veth.ccp_10ms.gbps"), "{e}");
        assert_eq!(num(&v, "veth.cubic_gbps").unwrap(), 1.0);
    }

    #[test]
    fn shim_figures_per_ack() {
        let p = serde_json::json!([{
            "path": "veth", "shim_cpu_ms_per_10k_acks": 25.0, "shim_cpu_ms_per_10k_acks_net_of_idle": 20.0,
            "portus_reno_gbps": 0.9, "kernel_reno_gbps": 0.95, "acks_per_s": 1e5, "shim_cpu_pct": 20.0,
            "shim_idle_cpu_pct": 0.5, "portus_cpu_ms_per_10k_acks": 1.0, "ratio_agent_vs_kernel": 1.0,
            "ring_drops": 0, "invoke_errors": 0
        }]);
        let (rows, _) = shim_rows(&p).unwrap();
        assert_eq!(rows[0].key, "shim.veth.cpu_us_per_ack");
        assert!((rows[0].ccp_agent - 2.5).abs() < 1e-9);
        assert_eq!(rows[0].met, Some(true));
    }
}
