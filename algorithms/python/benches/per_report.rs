//! Per-report cost of a Python algorithm against the native one it ports, in one run.
//!
//! Both go through the containment controller, as in the agent, over the same report sequence;
//! rounds alternate native Reno and the Python Reno in each isolation, and the medians are
//! compared. Wall time is what a report waits; CPU time counts every thread (with
//! `Isolation::Thread` the caller spins briefly for the interpreter's answer), so flows per core
//! come from CPU time: a flow reporting every 10 ms costs 100 reports a second.
//!
//!     cargo bench -p ccp-python --bench per_report [-- --json results/python/bench.json]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use ccp_contract::FlowStart;
use common::*;

const REPORTS: usize = 20_000;
const ROUNDS: usize = 7;
const REPORTS_PER_FLOW_PER_S: f64 = 100.0;

fn process_cpu() -> Duration {
    let mut ts = libc_timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_PROCESS_CPUTIME_ID exists on Linux.
    unsafe { clock_gettime(2, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[repr(C)]
struct libc_timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut libc_timespec) -> i32;
}

/// One round: ns of wall and CPU time per report.
fn round(name: &str, reports: &[ccp_contract::Report]) -> (f64, f64) {
    let flow = FlowStart::new(MSS, 10 * u64::from(MSS));
    let (mut c, _) = start(choose(name), &flow);
    let (w0, c0) = (Instant::now(), process_cpu());
    for r in reports {
        let out = c.on_report(r, r.now_us);
        assert!(out.fault.is_none(), "{name}: {:?}", out.fault);
    }
    let n = reports.len() as f64;
    (w0.elapsed().as_nanos() as f64 / n, (process_cpu() - c0).as_nanos() as f64 / n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    use ccp_python::Isolation;
    // Relative to the workspace (cargo runs benches in the package's folder).
    let json = std::env::args()
        .skip_while(|a| a != "--json")
        .nth(1)
        .map(|p| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p));
    ccp_python::set_call_budget(Duration::from_secs(1));
    let reports = synthetic_reports(REPORTS, 7);
    let python = example("reno.py", "Reno");
    round(&python, &reports[..1000]);
    let mut native = (vec![], vec![]);
    let mut py: Vec<(Isolation, Vec<f64>, Vec<f64>)> =
        [Isolation::Thread, Isolation::Inline].into_iter().map(|i| (i, vec![], vec![])).collect();
    for _ in 0..ROUNDS {
        let (w, c) = round("reno", &reports);
        native.0.push(w);
        native.1.push(c);
        for (isolation, wall, cpu) in py.iter_mut() {
            ccp_python::set_isolation(*isolation);
            let (w, c) = round(&python, &reports);
            wall.push(w);
            cpu.push(c);
        }
    }
    let (nw, nc) = (median(native.0), median(native.1));
    println!("per report, median of {ROUNDS} rounds of {REPORTS} reports through the controller:");
    println!("  native reno               {nw:>8.0} ns wall  {nc:>8.0} ns CPU");
    let mut rows = vec![];
    for (isolation, wall, cpu) in py {
        let (pw, pc) = (median(wall), median(cpu));
        let flows_per_core = 1e9 / (pc * REPORTS_PER_FLOW_PER_S);
        println!("  python reno.py, {:<8} {pw:>8.0} ns wall  {pc:>8.0} ns CPU   {:>6.1}x / {:>6.1}x native   {flows_per_core:>6.0} flows per core at 10 ms reports",
            format!("{isolation:?}"), pw / nw, pc / nc);
        rows.push(serde_json::json!({
            "isolation": format!("{isolation:?}").to_lowercase(),
            "python_ns_wall": pw, "python_ns_cpu": pc,
            "ratio_wall": pw / nw, "ratio_cpu": pc / nc,
            "flows_per_core_10ms": flows_per_core,
            "target_5us_cpu": if pc <= 5_000.0 { "met" } else { "missed" },
        }));
    }
    println!("  targets: <= 5 us per report, >= 2000 flows per core");
    if let Some(path) = json {
        let out = serde_json::json!({
            "reports_per_round": REPORTS, "rounds": ROUNDS,
            "native_ns_wall": nw, "native_ns_cpu": nc,
            "python": rows,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n")
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("wrote {}", path.display());
    }
}
