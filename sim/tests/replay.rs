//! `ccp-sim replay`: a recorded run's reports fed back to its own algorithm give back the windows
//! the datapath applied in that run; errors name the file and line.

use std::path::Path;

use ccp_sim::record::ReportRecord;
use ccp_sim::replay::{replay, ReplayOptions};

fn record_dctcp_run(path: &Path) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/dctcp-k20.toml");
    let loaded = ccp_sim::config::load(&file, &["duration_ms=20".into(), "warmup_ms=5".into()]).unwrap();
    ccp_sim::run_loaded_recording(&loaded, Some(ReportRecord::create(path).unwrap()), |_, _, _| {}).unwrap();
}

fn opts(flow: u64) -> ReplayOptions {
    ReplayOptions { flow, algorithm: "dctcp".into(), params: toml::Table::new(), init_cwnd_pkts: 10, every: 1, from_us: 0 }
}

#[test]
fn replaying_the_recorded_algorithm_gives_back_the_windows_it_set() {
    let dir = std::env::temp_dir().join(format!("ccp-sim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("reports.jsonl");
    record_dctcp_run(&rec);
    let text = std::fs::read_to_string(&rec).unwrap();
    let reports: Vec<ccp_contract::Report> = text
        .lines()
        .map(|l| serde_json::from_str::<ccp_contract::RecordedReport>(l).unwrap())
        .filter(|r| r.flow == 0)
        .map(|r| r.report)
        .collect();
    let mut out = Vec::new();
    let fed = replay(text.as_bytes(), "reports.jsonl", &opts(0), &mut out).unwrap();
    assert_eq!(fed as usize, reports.len());
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), reports.len(), "--every 1 prints every report");
    assert!(reports.iter().any(|r| r.ce_pkts > 0), "the run marked: DCTCP's cuts are part of what is checked");
    // The window decided after report k is the one the datapath reports using at report k + 1
    // (rounded to whole bytes).
    let mut window = None;
    for (k, line) in lines.iter().enumerate().take(reports.len() - 1) {
        if let Some(c) = line["cwnd_bytes"].as_f64() {
            window = Some(c);
        }
        if let Some(w) = window {
            assert_eq!(reports[k + 1].cwnd_bytes, w.round() as u64, "report {}: the replay decided {w}", k + 1);
        }
        assert!(line["state"]["alpha"].is_number());
    }
    // --every and --from-us thin the output, not the input.
    let mut out = Vec::new();
    let thin = ReplayOptions { every: 10, from_us: 10_000, ..opts(0) };
    assert_eq!(replay(text.as_bytes(), "reports.jsonl", &thin, &mut out).unwrap(), fed);
    let printed = String::from_utf8(out).unwrap().lines().count();
    assert!(printed > 0 && printed < lines.len() / 10 + 1, "{printed} of {}", lines.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_line_or_a_missing_flow_is_an_error_that_says_where() {
    let good = r#"{"flow":0,"report":{"now_us":10,"mss_bytes":1460,"acked_bytes":1460}}"#;
    let mut out = Vec::new();
    let e = replay(format!("{good}\n{{\"flow\":0,\"report\":{{\"now_us\":\"x\"}}}}\n").as_bytes(), "r.jsonl", &opts(0), &mut out)
        .unwrap_err();
    assert!(e.starts_with("r.jsonl:2: not a recorded report"), "{e}");
    let e = replay(format!("{good}\n").as_bytes(), "r.jsonl", &opts(3), &mut Vec::new()).unwrap_err();
    assert_eq!(e, "r.jsonl: no report of flow 3");
    let e = replay(good.as_bytes(), "r.jsonl", &ReplayOptions { algorithm: "nonesuch".into(), ..opts(0) }, &mut Vec::new())
        .unwrap_err();
    assert!(e.contains("nonesuch"), "{e}");
    // Lines of other flows are skipped unparsed; this flow's are fed.
    assert_eq!(replay(format!("{{\"flow\":1,garbage\n{good}\n").as_bytes(), "r.jsonl", &opts(0), &mut Vec::new()).unwrap(), 1);
}
