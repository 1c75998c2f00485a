//! Issue 34 item 3: ccp-lab's QUIC schemes run real quinn connections through the emulator —
//! quinn's own Cubic (`quic-native:cubic`), the agent's Cubic steering them through libccp
//! (`quic:cubic`, agent mode: the run starts `ccp-agent` on its unix datapath) and in the
//! sender's process (`quic-embedded:cubic`) — one short cell each of the shipped
//! `configs/experiments/quic.toml`, plus a sized flow whose completion is recorded. Steering by
//! the agent is read from its own log (the flow it started, on the run's QUIC socket), not
//! inferred from throughput, which the sender's quinn Cubic fallback would also give.
//!
//! Needs root and /dev/net/tun; skips loudly without them.

mod common;

use std::path::Path;

use ccp_lab::output::RunRecord;
use ccp_lab::run::{run_experiment, RunOptions};

/// One run at a time: the emulator and the QUIC processes share two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Processes whose command line mentions `dir` (what a run leaves running, if anything).
fn processes_mentioning(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&needle))
        .collect()
}

fn run(file: &Path, out: &Path, schemes: &[&str], duration_s: f64) -> Vec<RunRecord> {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let loaded = ccp_lab::config::load(file).unwrap();
    let o = RunOptions {
        out: out.to_path_buf(),
        quiet: true,
        no_plots: true,
        agent: Some(common::agent_binary()),
        links: vec!["50mbit".into()],
        schemes: schemes.iter().map(|s| s.to_string()).collect(),
        duration_s: Some(duration_s),
        ..RunOptions::default()
    };
    let outcome = run_experiment(&loaded, &o).unwrap();
    for r in &outcome.records {
        assert!(r.ok, "{}: the run failed: {:?}", r.scheme, r.error);
        assert!(common::namespaces_with(&r.namespace_prefix).is_empty(), "namespaces of {} left", r.namespace_prefix);
    }
    assert!(processes_mentioning(out).is_empty(), "processes left running: {:?}", processes_mentioning(out));
    outcome.records
}

#[test]
fn quic_schemes_fill_a_fixed_link_and_the_agent_steers_its_scheme() {
    if !common::can_run("quic_schemes_fill_a_fixed_link_and_the_agent_steers_its_scheme") {
        return;
    }
    let out = common::scratch("quic-schemes");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/experiments/quic.toml");
    let records = run(&file, &out, &["quinn-cubic", "quic-agent-cubic", "quic-embedded-cubic"], 6.0);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r.flows.len(), 1, "{}: one flow", r.scheme);
        let f = &r.flows[0];
        eprintln!("{}: {:.1} Mbit/s, share {:.3}, cc {:?}", r.scheme, f.throughput_mbps, f.share_of_capacity, f.cc);
        assert_eq!(f.kind, "quic", "{}: the scheme's flow is a QUIC connection", r.scheme);
        // Backlogged Cubic with a BDP of buffer fills a 50 Mbit/s link; the share counts wire
        // bytes (QUIC's overhead estimated per datagram), so it is near 1 and not far above.
        assert!((0.85..=1.03).contains(&f.share_of_capacity), "{}: share {:.3}", r.scheme, f.share_of_capacity);
        let m = r.link_metrics.as_ref().unwrap();
        assert!(m.utilisation > 0.85, "{}: utilisation {:.3}", r.scheme, m.utilisation);
    }
    let cc: Vec<Option<&str>> = records.iter().map(|r| r.flows[0].cc.as_deref()).collect();
    assert_eq!(cc, [Some("quic-native:cubic"), Some("quic:cubic"), Some("quic-embedded:cubic")]);

    // The agent-mode run's own agent started the flow on the sender's libccp socket, with Cubic,
    // and reports reached it.
    let agent_run = out.join("runs/50mbit/solo/quic-agent-cubic/rep0");
    let log = std::fs::read_to_string(agent_run.join("agent.log")).unwrap();
    let started = log.lines().find(|l| l.contains("flow started")).unwrap_or_else(|| panic!("no flow started:\n{log}"));
    assert!(started.contains("ipc/quic5201") && started.contains("algorithm=\"cubic\""), "{started}");
    let trace = std::fs::read_to_string(agent_run.join("agent-trace.jsonl")).unwrap_or_default();
    assert!(trace.lines().count() > 100, "the agent's trace holds its reports: {} lines", trace.lines().count());
    // No other run started an agent.
    assert!(!out.join("runs/50mbit/solo/quinn-cubic/rep0/agent.log").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_sized_quic_flow_records_its_completion() {
    if !common::can_run("a_sized_quic_flow_records_its_completion") {
        return;
    }
    let out = common::scratch("quic-sized");
    let file = out.join("sized.toml");
    std::fs::write(
        &file,
        "duration_s = 8\nsample_interval_ms = 100\n[network]\nrtt_ms = 20\nbuffer_bdp = 1\n\
         [[links]]\nkind = \"fixed\"\nname = \"50mbit\"\nrate_mbps = 50\n\
         [[schemes]]\nname = \"q\"\ncc = \"quic-embedded:reno\"\n\
         [[flows]]\ncount = 1\nbytes = 5000000\n",
    )
    .unwrap();
    let records = run(&file, &out.join("out"), &["q"], 8.0);
    let f = &records[0].flows[0];
    // 5 MB at 50 Mbit/s is 0.8 s on the wire, plus process start, the handshake and slow start.
    let fct = f.completion_s.expect("the sized QUIC flow completed");
    assert!((0.8..4.0).contains(&fct), "completion {fct:.2} s");
    assert_eq!(f.size_bytes, Some(5_000_000));
    let _ = std::fs::remove_dir_all(&out);
}
