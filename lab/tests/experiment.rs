//! Whole experiments through the library: a tiny real run (2 s, kernel Cubic, fixed rate) with
//! every expected output; a run that fails mid-way (a cross flow with a congestion control the
//! kernel lacks) recorded as failed with its namespaces deleted; an agent scheme whose agent
//! does not exist failing with a clear message before any namespace exists, and so a scheme
//! whose receiver the agent lacks; leftover namespaces of a dead runner swept by name.

mod common;

use std::path::Path;

use ccp_lab::config;
use ccp_lab::run::{run_experiment, RunOptions};

const TINY: &str = r#"
duration_s = 2
sample_interval_ms = 100
[network]
rtt_ms = 20
buffer_pkts = 60
[[links]]
kind = "fixed"
name = "fixed-12"
rate_mbps = 12
[[schemes]]
name = "cubic"
cc = "kernel:cubic"
"#;

fn options(out: &Path) -> RunOptions {
    RunOptions { out: out.to_path_buf(), quiet: true, ..RunOptions::default() }
}

#[test]
fn tiny_experiment_writes_every_output() {
    if !common::can_run("tiny_experiment_writes_every_output") {
        return;
    }
    let dir = common::scratch("tiny");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let loaded = config::load(&file).unwrap();
    let out = dir.join("out");
    let outcome = run_experiment(&loaded, &options(&out)).unwrap();
    assert_eq!(outcome.records.len(), 1);
    let r = &outcome.records[0];
    assert!(r.ok, "{:?}", r.error);
    let m = r.link_metrics.as_ref().unwrap();
    assert!(m.utilisation > 0.7 && m.utilisation <= 1.01, "utilisation {}", m.utilisation);
    let q = m.queue_delay_ms.unwrap();
    assert!(q.p95 > 1.0 && q.p95 <= 60.0 * 1.0 + 5.0, "p95 {} ms (buffer 60 pkts = 60 ms)", q.p95);
    assert!(r.flows[0].mean_srtt_ms.unwrap() >= 20.0);
    let run = out.join("runs/fixed-12/solo/cubic/rep0");
    for f in ["run.json", "link.csv", "flows.csv"] {
        assert!(run.join(f).is_file(), "missing {f}");
    }
    assert!(!run.join("router.csv").exists(), "the packet log is deleted unless kept");
    for f in ["experiment.toml", "summary.csv", "summary.json", "averages.csv", "runs.csv"] {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    let link_csv = std::fs::read_to_string(run.join("link.csv")).unwrap();
    assert_eq!(link_csv.lines().count(), 1 + 20, "20 bins of 100 ms");
    let flows_csv = std::fs::read_to_string(run.join("flows.csv")).unwrap();
    assert!(flows_csv.lines().count() >= 19);
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["rows"][0]["scheme"], "cubic");
    assert_eq!(summary["rows"][0]["runs_ok"], 1);
    let run_json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["router"]["down"]["qdisc"], "droptail");
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        assert!(run.join("run.png").is_file());
        assert!(out.join("plots/scatter-fixed-12.png").is_file());
        assert!(out.join("plots/scatter-average-solo.png").is_file());
    }
    assert!(common::namespaces_with(&r.namespace_prefix).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_kept_packet_log_lands_in_the_run_directory() {
    if !common::can_run("a_kept_packet_log_lands_in_the_run_directory") {
        return;
    }
    let dir = common::scratch("keep");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY.replace("duration_s = 2", "duration_s = 1")).unwrap();
    let loaded = config::load(&file).unwrap();
    let out = dir.join("out");
    let o = RunOptions { keep_packet_logs: true, no_plots: true, ..options(&out) };
    let outcome = run_experiment(&loaded, &o).unwrap();
    let r = &outcome.records[0];
    assert!(r.ok, "{:?}", r.error);
    let log = std::fs::read_to_string(out.join("runs/fixed-12/solo/cubic/rep0/router.csv")).unwrap();
    assert!(log.starts_with("dir,id,len,arrival_ns") && log.lines().count() > 100, "{} lines", log.lines().count());
    // The scratch copy on tmpfs is gone, and the emulator kept up.
    let leftovers: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&r.namespace_prefix)).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(r.emulator_late_p99_ms.is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failing_run_is_recorded_and_cleaned_up() {
    if !common::can_run("a_failing_run_is_recorded_and_cleaned_up") {
        return;
    }
    let dir = common::scratch("failing");
    let file = dir.join("bad.toml");
    let text = format!(
        "{TINY}\n[[schemes]]\nname = \"ecn\"\ncc = \"kernel:reno\"\nsender_sysctls = {{ \"net.ipv4.tcp_ecn\" = 1 }}\n\
         [[scenarios]]\nname = \"broken\"\n[[scenarios.cross]]\nkind = \"tcp\"\ncc = \"nosuchcc\"\nstart_s = 0.5\n"
    );
    std::fs::write(&file, text).unwrap();
    let loaded = config::load(&file).unwrap();
    let out = dir.join("out");
    let outcome = run_experiment(&loaded, &options(&out)).unwrap();
    assert_eq!(outcome.records.len(), 2, "the matrix goes on after a failed run");
    for r in &outcome.records {
        assert!(!r.ok);
        let e = r.error.as_deref().unwrap();
        assert!(e.contains("nosuchcc"), "{e}");
        assert!(!r.namespace_prefix.is_empty());
        assert!(common::namespaces_with(&r.namespace_prefix).is_empty(), "namespaces of {} left behind", r.namespace_prefix);
    }
    assert_eq!(outcome.failed(), 2);
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(runs.lines().nth(1).unwrap().contains("nosuchcc"), "{runs}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_agent_scheme_without_an_agent_fails_clearly() {
    if !common::can_run("an_agent_scheme_without_an_agent_fails_clearly") {
        return;
    }
    let dir = common::scratch("noagent");
    let file = dir.join("agent.toml");
    std::fs::write(&file, TINY.replace("kernel:cubic", "agent:abc")).unwrap();
    let loaded = config::load(&file).unwrap();
    let mut o = options(&dir.join("out"));
    o.agent = Some(dir.join("no-such-ccp-agent"));
    let outcome = run_experiment(&loaded, &o).unwrap();
    let r = &outcome.records[0];
    assert!(!r.ok);
    let e = r.error.as_deref().unwrap();
    assert!(e.contains("ccp-agent binary") && e.contains("not found"), "{e}");
    assert!(r.namespace_prefix.is_empty(), "no namespace is created before the agent is ready");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_receiver_the_agent_lacks_fails_clearly_before_any_namespace() {
    if !common::can_run("a_receiver_the_agent_lacks_fails_clearly_before_any_namespace") {
        return;
    }
    let dir = common::scratch("noreceiver");
    let file = dir.join("rcv.toml");
    std::fs::write(&file, format!("{TINY}receiver = {{ kind = \"inigo\", mode = \"window\" }}\n")).unwrap();
    let loaded = config::load(&file).unwrap();
    // An agent from before `ccp-agent receiver` existed: clap refuses the subcommand.
    let old = dir.join("ccp-agent");
    std::fs::write(&old, "#!/bin/sh\necho \"error: unrecognized subcommand '$1'\" >&2\nexit 2\n").unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&old).status().unwrap();
    let mut o = options(&dir.join("out"));
    o.agent = Some(old);
    let outcome = run_experiment(&loaded, &o).unwrap();
    let r = &outcome.records[0];
    assert!(!r.ok);
    let e = r.error.as_deref().unwrap();
    assert!(e.contains("no `receiver` subcommand") && e.contains("unrecognized subcommand 'receiver'"), "{e}");
    assert!(r.namespace_prefix.is_empty(), "no namespace is created before the receiver is known to exist");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn leftovers_of_a_dead_runner_are_swept_by_name() {
    if !common::can_run("leftovers_of_a_dead_runner_are_swept_by_name") {
        return;
    }
    // A pid that existed and is gone.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let prefix = format!("ccplab-{pid}-0");
    for side in ["snd", "rcv"] {
        let ok = std::process::Command::new("ip").args(["netns", "add", &format!("{prefix}-{side}")]).status().unwrap().success();
        assert!(ok);
    }
    let removed = ccp_lab::netns::sweep_stale();
    assert!(removed.contains(&prefix), "{removed:?}");
    assert!(common::namespaces_with(&prefix).is_empty());
    // Our own (live) prefixes are never swept.
    let mine = ccp_lab::netns::unique_prefix();
    std::process::Command::new("ip").args(["netns", "add", &format!("{mine}-snd")]).status().unwrap();
    assert!(!ccp_lab::netns::sweep_stale().contains(&mine));
    ccp_router::cleanup_prefix(&mine).unwrap();
}
