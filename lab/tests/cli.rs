//! The `ccp-lab` binary: a bad experiment file is refused with its file, line and key (exit 2);
//! `check` prints the matrix; Ctrl-C during a run tears the run down (exit 130, no namespace
//! left, the summary of what finished written).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ccp-lab");

const GOOD: &str = r#"
duration_s = 20
[network]
rtt_ms = 20
buffer_pkts = 50
[[links]]
kind = "fixed"
rate_mbps = 10
[[schemes]]
name = "reno"
cc = "kernel:reno"
"#;

#[test]
fn bad_files_are_refused_with_file_line_and_key() {
    let dir = common::scratch("cli-bad");
    let file = dir.join("bad.toml");
    std::fs::write(&file, GOOD.replace("buffer_pkts = 50", "buffer_pkts = 50\nbufer = 3")).unwrap();
    let out = Command::new(BIN).args(["check"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:6: network.bufer:", file.display())), "{err}");
    assert!(err.contains("unknown field"), "{err}");
    let out = Command::new(BIN).arg("run").arg(dir.join("missing.toml")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_prints_the_matrix() {
    let dir = common::scratch("cli-check");
    let file = dir.join("good.toml");
    std::fs::write(&file, GOOD).unwrap();
    let out = Command::new(BIN).arg("check").arg(&file).arg("--quick").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("OK") && text.contains("fixed-10mbps") && text.contains("kernel reno"), "{text}");
    assert!(text.contains("1 run(s)"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn interrupting_a_run_cleans_up() {
    if !common::can_run("interrupting_a_run_cleans_up") {
        return;
    }
    let dir = common::scratch("cli-int");
    let file = dir.join("long.toml");
    std::fs::write(&file, GOOD).unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--no-progress", "--no-plots", "-o"])
        .arg(dir.join("out"))
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("ccplab-{}-", child.id());
    let started = Instant::now();
    while common::namespaces_with(&prefix).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "the run never created its namespaces");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(started.elapsed() < Duration::from_secs(10), "the run did not stop promptly");
    assert!(common::namespaces_with(&prefix).is_empty(), "namespaces left: {:?}", common::namespaces_with(&prefix));
    assert!(dir.join("out/runs.csv").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shipped_experiments_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/experiments");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let checked_path = with_traces_present(&path);
        let out = Command::new(BIN).arg("check").arg(&checked_path).arg("--quick").output().unwrap();
        assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        if checked_path != path {
            std::fs::remove_dir_all(checked_path.parent().unwrap()).unwrap();
        }
        checked += 1;
    }
    assert!(checked >= 3, "expected the shipped experiments in {}", dir.display());
}

/// The shipped cellular experiments read the project's trace collection (`../shared/traces` next
/// to the checkout), which a clone elsewhere does not have. Everything else in such a file is
/// still checked: a copy points its trace directory at one synthetic mahimahi trace instead.
fn with_traces_present(config: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let dir = config.parent().unwrap();
    let missing: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path = \"")?.strip_suffix('"').map(str::to_string))
        .filter(|p| !dir.join(p).exists())
        .collect();
    if missing.is_empty() {
        return config.to_path_buf();
    }
    eprintln!("NOTE {}: trace paths {missing:?} are absent here; checking with a synthetic trace instead", config.display());
    let tmp = std::env::temp_dir().join(format!("ccp-lab-check-{}", std::process::id()));
    let traces = tmp.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    // 12 Mbit/s: one 1500-byte delivery opportunity per ms.
    std::fs::write(traces.join("synthetic.down"), (1..=1000).map(|t| format!("{t}\n")).collect::<String>()).unwrap();
    let mut copy = text.clone();
    for p in &missing {
        // A `trace_dir` link gets the directory, a `trace` link the file itself.
        let key = format!("path = \"{p}\"");
        let at = text.find(&key).unwrap();
        let kind = text[..at].rsplit("kind = \"").next().and_then(|k| k.split('"').next()).unwrap_or("");
        let with = if kind == "trace" { traces.join("synthetic.down") } else { traces.clone() };
        copy = copy.replace(&key, &format!("path = \"{}\"", with.display()));
    }
    // A Python scheme's file, or a learned policy's, is relative to the experiment file: anchor
    // it to the original's.
    let copy = copy.replace("\"agent:py:../", &format!("\"agent:py:{}/../", dir.display()));
    let copy = copy.replace("\"agent:onnx:../", &format!("\"agent:onnx:{}/../", dir.display()));
    let out = tmp.join(config.file_name().unwrap());
    std::fs::write(&out, copy).unwrap();
    out
}

/// `burstiness` describes trace files and an experiment's links (synthetic ones generated into a
/// scratch directory it removes), says a fixed rate has no trace, and names a missing file.
#[test]
fn burstiness_prints_the_signature_of_traces_and_of_an_experiments_links() {
    let dir = common::scratch("cli-burstiness");
    let trace = dir.join("bursty.trace");
    // 10 opportunities at ms 5, none until ms 60: one 20 ms window of three holds them all.
    std::fs::write(&trace, "5\n5\n5\n5\n5\n5\n5\n5\n5\n5\n60\n60\n").unwrap();
    let experiment = dir.join("bg.toml");
    let links = "[[links]]\nkind = \"burst_gap\"\nname = \"bg\"\nrate_mbps = 7.75\nburst_pkts = 6.3\nmax_burst_pkts = 26\nidle_pct = 50\nidle_ms = 100\nseed = 1\n";
    std::fs::write(&experiment, format!("{GOOD}{links}")).unwrap();
    let out = Command::new(BIN).arg("burstiness").arg(&trace).arg(&experiment).args(["--first-s", "65"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let line =
        |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {text}")).to_string();
    assert!(line(&trace.display().to_string()).contains("2.40 · 33.3 % · 10 · 6.0"), "{text}");
    assert!(line("bg ").contains(" · 26 · "), "the generated link's largest burst: {text}");
    assert!(line("fixed-10mbps").contains("no trace"), "{text}");
    let out = Command::new(BIN).arg("burstiness").arg(dir.join("missing.trace")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.trace"));
    std::fs::remove_dir_all(&dir).unwrap();
}
