//! The shipped scenarios' outputs do not change: every file `ccp-sim run` writes, for each
//! scenario in `configs/sim/` (shortened so a debug build runs it in about a second, and with the
//! repository's Data Mining CDF where a scenario reads one from `../shared`) and for the BFC
//! Clos's disciplines, must match the checksums in `tests/golden/`. The event order is part of
//! the simulator's contract, so a faster engine has to give the same bytes; a change that is meant
//! to alter results (a bug fix) regenerates the checksums with
//!
//!     CCP_SIM_BLESS=1 cargo test -p ccp-sim --test golden_outputs
//!
//! and says in its commit why they changed. `wall_s` and `events_per_s` in `summary.json` measure
//! the machine, not the simulation, and are left out of its checksum.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha1::{Digest, Sha1};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The flow-size CDF in the repository, for the scenarios whose own (Facebook's, in
/// `../shared/workloads`) lives beside it: a clean clone must be able to run this test.
const LOCAL_CDF: &str = r#"workload.random.cdf="datamining_vl2.cdf""#;

/// Overrides that shorten the 128-host Clos (`leafspine-fb-dctcp.toml`) to 2 ms (~2 M events,
/// incast bursts included), with [`LOCAL_CDF`].
const CLOS_SHORT: &[&str] =
    &["duration_ms=2", "warmup_ms=0.1", "workload.random.stop_ms=1.9", "workload.incast.stop_us=1900.0", LOCAL_CDF];

/// Runs `file` with `overrides` and returns "name file checksum" lines, one per output file.
fn checksums(name: &str, file: &str, overrides: &[&str]) -> String {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = ccp_sim::config::load(&repo().join("configs/sim").join(file), &overrides).unwrap_or_else(|e| panic!("{e}"));
    let results = ccp_sim::run_loaded(&loaded).unwrap_or_else(|e| panic!("{name}: {e}"));
    let dir = std::env::temp_dir().join(format!("ccp-sim-golden-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut files = ccp_sim::output::write_data(&results, &dir).expect("write the outputs");
    files.sort();
    let mut out = String::new();
    for path in files {
        let mut bytes = std::fs::read(&path).expect("read an output back");
        let file_name = path.file_name().unwrap().to_string_lossy().to_string();
        if file_name == "summary.json" {
            // The text as written, less the two top-level timing lines (not re-serialised, so the
            // checksum does not depend on how a JSON library reads numbers back).
            let text = String::from_utf8(bytes).expect("summary.json is UTF-8");
            let timing = |l: &&str| l.starts_with("  \"wall_s\":") || l.starts_with("  \"events_per_s\":");
            assert_eq!(text.lines().filter(timing).count(), 2, "the timing fields moved");
            bytes = text.lines().filter(|l| !timing(l)).collect::<Vec<_>>().join("\n").into_bytes();
        }
        let _ = writeln!(out, "{name} {file_name} {:x}", Sha1::digest(&bytes));
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn check(name: &str, file: &str, overrides: &[&str]) {
    let got = checksums(name, file, overrides);
    let golden = repo().join("sim/tests/golden").join(format!("{name}.sha1"));
    if std::env::var_os("CCP_SIM_BLESS").is_some() {
        std::fs::write(&golden, &got).expect("write the golden checksums");
        return;
    }
    let want =
        std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{}: {e} (create it with CCP_SIM_BLESS=1)", golden.display()));
    if got != want {
        let changed: Vec<&str> = got.lines().filter(|l| !want.lines().any(|w| w == *l)).collect();
        panic!(
            "{name}: the outputs changed (engine changes must keep the event order; a deliberate change \
             regenerates tests/golden/ with CCP_SIM_BLESS=1 and says why):\n{}",
            changed.join("\n")
        );
    }
}

macro_rules! golden {
    ($($test:ident: $file:literal [$($o:literal),*];)*) => {$(
        #[test]
        fn $test() {
            check(stringify!($test), $file, &[$($o),*]);
        }
    )*};
}

golden! {
    dctcp_k20: "dctcp-k20.toml" ["duration_ms=20", "warmup_ms=5"];
    tcp_droptail: "tcp-droptail.toml" ["duration_ms=20", "warmup_ms=5"];
    dctcp_small_k: "dctcp-small-k.toml" ["duration_ms=10", "warmup_ms=2"];
    incast_dctcp: "incast-dctcp.toml" ["duration_ms=20"];
    hull_phantom: "hull-phantom.toml" ["duration_ms=20", "warmup_ms=5"];
    hull_pacer: "hull-pacer.toml" ["duration_ms=20", "warmup_ms=5"];
    qcn_dumbbell: "qcn-dumbbell.toml" ["duration_ms=20", "warmup_ms=5"];
    ccp_lowrtt_incast: "ccp-lowrtt-incast.toml" ["duration_ms=20"];
    bfc_table_3_1: "bfc-table-3-1.toml" ["duration_ms=1", "warmup_ms=0.2", r#"workload.random.cdf="datamining_vl2.cdf""#];
    ns3_crosscheck: "ns3-crosscheck.toml" ["duration_ms=100", "workload.random.stop_ms=50.0", r#"workload.random.cdf="datamining_vl2.cdf""#];
    cubic_slow_start: "cubic-slow-start.toml" ["duration_ms=300"];
    annulus_dumbbell: "annulus-dumbbell.toml" ["duration_ms=10", "warmup_ms=2"];
    annulus_table2: "annulus-table2.toml" ["duration_ms=10", "warmup_ms=2", "workload.random.stop_ms=10.0"];
    annulus_fabric: "annulus-fabric.toml" ["duration_ms=4", "warmup_ms=1", "workload.random.stop_ms=4.0"];
    annulus_t5: "annulus-t5.toml" ["duration_ms=5", "warmup_ms=1"];
    annulus_edge_caching: "annulus-edge-caching.toml" ["duration_ms=100"];
    inigo_incast_gige: "inigo-incast-gige.toml" ["duration_ms=200", "warmup_ms=50"];
}

/// The Clos with each discipline the BFC figure set compares (bfc-clos-sweep.toml's variants).
#[test]
fn clos_dctcp() {
    check("clos_dctcp", "leafspine-fb-dctcp.toml", CLOS_SHORT);
}

#[test]
fn clos_bfc() {
    let bfc = [
        "switch.bfc={hrtt_ns=2000}",
        "switch.queues_per_port=32",
        r#"switch.qdisc={kind="droptail"}"#,
        r#"cc.algorithm="constant""#,
        "cc.params={cwnd_pkts=100}",
    ];
    check("clos_bfc", "leafspine-fb-dctcp.toml", &[CLOS_SHORT, &bfc].concat());
}

/// BFC 128 (bfc-clos-sweep.toml's bfc128-* variants): the model's wide layout, beyond the P4's.
#[test]
fn clos_bfc128() {
    let bfc = [
        "switch.bfc={hrtt_ns=2000}",
        "switch.queues_per_port=128",
        r#"switch.qdisc={kind="droptail"}"#,
        r#"cc.algorithm="constant""#,
        "cc.params={cwnd_pkts=100}",
    ];
    check("clos_bfc128", "leafspine-fb-dctcp.toml", &[CLOS_SHORT, &bfc].concat());
}

#[test]
fn clos_dcqcn_pfc() {
    let dcqcn = [
        r#"switch.qdisc={kind="red",k_min_bytes=100000,k_max_bytes=400000,p_max=0.2}"#,
        "switch.pfc={enabled=true,xoff_bytes=400000,xon_bytes=350000}",
        r#"cc.algorithm="dcqcn""#,
        "cc.params={line_rate_gbps=100.0}",
    ];
    check("clos_dcqcn_pfc", "leafspine-fb-dctcp.toml", &[CLOS_SHORT, &dcqcn].concat());
}

#[test]
fn clos_hpcc_int() {
    let hpcc = [
        r#"switch.qdisc={kind="droptail"}"#,
        "switch.int=true",
        "switch.pfc={enabled=true,xoff_bytes=400000,xon_bytes=350000}",
        r#"cc.algorithm="hpcc""#,
        "cc.params={base_rtt_us=8.0,line_rate_gbps=100.0}",
    ];
    check("clos_hpcc_int", "leafspine-fb-dctcp.toml", &[CLOS_SHORT, &hpcc].concat());
}

#[test]
fn clos_ideal_fq() {
    let fq = [
        r#"switch.qdisc={kind="fq"}"#,
        "switch.buffer_bytes=1000000000",
        r#"cc.algorithm="constant""#,
        "cc.params={cwnd_pkts=100}",
    ];
    check("clos_ideal_fq", "leafspine-fb-dctcp.toml", &[CLOS_SHORT, &fq].concat());
}
