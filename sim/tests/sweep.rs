//! `ccp-sim sweep`: a tiny scenario over 2 loads × 2 variants gives a directory per run, the
//! expected sweep.csv rows, the same flows as `ccp-sim run` with the run's overrides; a failing
//! variant does not stop the others; bad --loads / --variant syntax gives clear errors.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{tiny_sweep_scenario, TINY_CDF, TINY_SWEEP};

/// A fresh directory with the scenario, its CDF and the sweep file.
fn setup(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccp-sim-sweep-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tiny.toml"), tiny_sweep_scenario("tiny.cdf")).unwrap();
    std::fs::write(dir.join("tiny.cdf"), TINY_CDF).unwrap();
    std::fs::write(dir.join("tiny-sweep.toml"), TINY_SWEEP).unwrap();
    dir
}

fn ccp_sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ccp-sim")).args(args).output().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// sweep.csv as rows of fields (no field here contains a comma except a quoted error, last).
fn rows(csv: &str) -> Vec<Vec<String>> {
    csv.lines().skip(1).map(|l| l.splitn(20, ',').map(str::to_string).collect()).collect()
}

#[test]
fn sweep_file_runs_every_variant_and_load() {
    let dir = setup("file");
    let out = dir.join("out");
    let o = ccp_sim(&["sweep", s(&dir.join("tiny-sweep.toml")), "--out", s(&out), "--jobs", "2", "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().next().unwrap(), ccp_sim::sweep::CSV_HEADER);
    let rows = rows(&csv);
    let mut flows_at = Vec::new();
    for (variant, load) in [("dctcp", "30"), ("dctcp", "60"), ("reno-droptail", "30"), ("reno-droptail", "60")] {
        let run = out.join(variant).join(format!("load{load}"));
        for f in ["summary.json", "flows.csv", "fct_buckets.csv", "overrides.txt"] {
            assert!(run.join(f).exists(), "{}/{f}", run.display());
        }
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
        let mine: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == variant && r[1] == load).collect();
        // One row per bucket of the run's summary, in its order, with its numbers.
        let buckets = summary["buckets"].as_array().unwrap();
        assert_eq!(mine.len(), buckets.len(), "{variant}@{load}");
        assert!(!mine.is_empty());
        for (r, b) in mine.iter().zip(buckets) {
            assert_eq!(r[2], b["class"].as_str().unwrap());
            assert_eq!(r[3], b["lo_bytes"].to_string());
            assert_eq!(r[5], b["flows"].to_string());
            let p99: f64 = r[8].parse().unwrap();
            assert!((p99 - b["slowdown_p99"].as_f64().unwrap()).abs() < 1e-3, "{variant}@{load}: {p99}");
            assert!(p99 >= 1.0);
            assert_eq!(r[12], summary["flows_total"].to_string());
            let (wall, events, eps): (f64, u64, f64) = (r[16].parse().unwrap(), r[17].parse().unwrap(), r[18].parse().unwrap());
            assert!(wall > 0.0 && events > 0 && eps > 0.0, "{r:?}");
            assert_eq!(r[19], "", "no error");
        }
        flows_at.push(summary["flows_total"].as_u64().unwrap());
        // The load and the variant reached the scenario.
        let overrides = std::fs::read_to_string(run.join("overrides.txt")).unwrap();
        assert!(overrides.lines().any(|l| l == format!("workload.random.load={}", load.parse::<f64>().unwrap() / 100.0)));
        assert_eq!(summary["algorithm"], if variant == "dctcp" { "dctcp" } else { "reno" });
    }
    // Twice the load, about twice the flows (same seed, same sizes).
    assert!(flows_at[1] > flows_at[0] * 3 / 2 && flows_at[3] > flows_at[2] * 3 / 2, "{flows_at:?}");
    assert_eq!(rows.iter().filter(|r| r[2] == "all").count(), 4 * 3, "3 buckets × 4 runs");

    // A sweep run is `ccp-sim run` with the run's overrides: identical flows.
    let run = out.join("reno-droptail").join("load60");
    let sets: Vec<String> =
        std::fs::read_to_string(run.join("overrides.txt")).unwrap().lines().skip(1).map(str::to_string).collect();
    let single = dir.join("single");
    let mut args = vec!["run".to_string(), s(&dir.join("tiny.toml")).into(), "--out".into(), s(&single).into(), "--quiet".into()];
    for o in &sets {
        args.push("--set".into());
        args.push(o.clone());
    }
    let o = Command::new(env!("CARGO_BIN_EXE_ccp-sim")).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(single.join("flows.csv")).unwrap(),
        std::fs::read_to_string(run.join("flows.csv")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_run_does_not_stop_the_others() {
    let dir = setup("fail");
    let out = dir.join("out");
    let o = ccp_sim(&[
        "sweep",
        s(&dir.join("tiny.toml")),
        "--out",
        s(&out),
        "--loads",
        "40",
        "--variant",
        "ok=switch.qdisc.k_pkts=10",
        "--variant",
        "broken=switch.qdisc.k_pkts=-5;transport.init_cwnd_pkts=2",
        "--quiet",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 of 2 runs failed"), "{err}");
    assert!(err.contains("variant `broken`, load 40 %"), "{err}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows = rows(&csv);
    assert!(rows.iter().any(|r| r[0] == "ok" && r[1] == "40" && r[2] == "all" && r[19].is_empty()), "{csv}");
    let bad: Vec<_> = rows.iter().filter(|r| r[0] == "broken").collect();
    assert_eq!(bad.len(), 1, "{csv}");
    assert!(bad[0][19].contains("`-5`") && bad[0][19].contains("switch.qdisc"), "{csv}");
    assert!(out.join("ok/load40/summary.json").exists());
    assert!(!out.join("broken/load40").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_syntax_gives_clear_errors() {
    let dir = setup("syntax");
    let scen = dir.join("tiny.toml");
    let out = dir.join("out");
    for (args, want) in [
        (vec!["--loads", "50,abc"], "`abc` is not a number"),
        (vec!["--loads", "50,,60"], "empty entry"),
        (vec!["--loads", "0"], "not a percentage in (0, 100]"),
        (vec!["--loads", "150"], "not a percentage in (0, 100]"),
        (vec!["--loads", "50,50"], "listed twice"),
        (vec!["--loads", "50", "--variant", "noequals"], "expected NAME='KEY=VALUE;KEY=VALUE'"),
        (vec!["--loads", "50", "--variant", "x=cc.algorithm"], "override `cc.algorithm` is not KEY=VALUE"),
        (vec!["--loads", "50", "--variant", "a b=seed=1"], "variant name `a b`"),
        (vec!["--loads", "50", "--variant", "a=seed=1", "--variant", "a=seed=2"], "variant `a` is defined twice"),
        (vec!["--loads", "50", "--only", "nope"], "--only: no variant `nope`"),
        (vec![], "has no loads"),
    ] {
        let mut all = vec!["sweep", s(&scen), "--out", s(&out), "--quiet"];
        all.extend(args.iter().copied());
        let o = ccp_sim(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
        assert!(!out.join("sweep.csv").exists(), "{args:?}: nothing runs");
    }
    // A sweep file with an unknown key names the file.
    let bad = dir.join("bad-sweep.toml");
    std::fs::write(&bad, "[sweep]\nscenario = \"tiny.toml\"\nloads = [50]\nlods = [1]\n").unwrap();
    let o = ccp_sim(&["sweep", s(&bad), "--out", s(&out), "--quiet"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("bad-sweep.toml") && err.contains("lods"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_sweep_runs_only_what_is_missing() {
    let dir = setup("resume");
    let out = dir.join("out");
    let file = dir.join("tiny-sweep.toml");
    let args = ["sweep", s(&file), "--out", s(&out), "--jobs", "2"];
    let o = ccp_sim(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let flows = std::fs::read_to_string(out.join("dctcp/load60/flows.csv")).unwrap();

    // Everything complete: nothing runs, and the rows come back from the runs' files exactly.
    let o = ccp_sim(&args);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && said.contains("4 of 4 runs already complete"), "{said}");
    assert!(said.contains("4 runs (4 skipped as complete, 0 failed); wrote"), "{said}");
    assert_eq!(std::fs::read_to_string(out.join("sweep.csv")).unwrap(), first);

    // A run killed half-way (no `done`, a truncated file) runs again, to the same flows.
    std::fs::remove_file(out.join("dctcp/load60/done")).unwrap();
    std::fs::write(out.join("dctcp/load60/flows.csv"), "id,cla").unwrap();
    let o = ccp_sim(&args);
    assert!(String::from_utf8_lossy(&o.stdout).contains("3 of 4 runs already complete"));
    assert_eq!(std::fs::read_to_string(out.join("dctcp/load60/flows.csv")).unwrap(), flows);
    let rows_again = rows(&std::fs::read_to_string(out.join("sweep.csv")).unwrap());
    for (a, b) in rows(&first).iter().zip(&rows_again) {
        if a[0] == "dctcp" && a[1] == "60" {
            assert_eq!(a[..16], b[..16], "all but the wall-clock columns");
        } else {
            assert_eq!(a, b);
        }
    }

    // Changed inputs (the CDF) or overrides: every run again.
    std::fs::write(dir.join("tiny.cdf"), "1000 0\n5000 50\n20000 70\n100000 95\n300000 100\n").unwrap();
    let o = ccp_sim(&args);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("already complete"));
    let o = ccp_sim(&[&args[..], &["--seed", "9"]].concat());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("already complete"));
    assert!(std::fs::read_to_string(out.join("dctcp/load30/done")).unwrap().contains("\nset seed=9\n"));
    let _ = std::fs::remove_dir_all(&dir);
}
