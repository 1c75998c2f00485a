//! Per-report cost of a Python algorithm against the native one it ports, in one run, in each
//! isolation and at 1, 10 and 100 flows per batch.
//!
//! Every report goes through the containment controller, as in the agent, and a batch is driven
//! as the agent's flow table drives a batch of datapath events: each flow's report is begun
//! (`Controller::begin_report`), those not begun (native, or `Inline`) are decided at once, and
//! the begun ones once their answers are there, in order, sleeping until the interpreter thread
//! says they may be (`ccp_python::wake_on_answers`) — as the agent's loop sleeps when it has
//! nothing else to do, which is the worst case: a loop with native flows or more datapath events
//! to handle meanwhile does not sleep. Rounds alternate native Reno and the Python Reno in each
//! isolation, and the medians are compared. Wall time is what a report waits; CPU time counts
//! every thread of the process (with `Isolation::Thread` the interpreter thread runs the calls,
//! and each side pays for waking the other once a batch); the calling thread's own CPU time is
//! what the agent's loop would spend. Flows per core come from CPU time: a flow reporting every
//! 10 ms costs 100 reports a second. The ratios are against `Inline` at the same batch size in
//! the same run.
//!
//!     cargo bench -p ccp-python --bench per_report [-- --json results/python/bench.json]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ccp_contract::{Controller, FlowStart, Report};
use ccp_python::Isolation;
use common::*;

/// Reports per round, whatever the batch size.
const REPORTS: usize = 20_000;
const ROUNDS: usize = 7;
const BATCHES: [usize; 4] = [1, 10, 32, 100];
const REPORTS_PER_FLOW_PER_S: f64 = 100.0;
/// The target of issue 29: the default isolation at most this many times `Inline`'s CPU.
const TARGET_CPU_RATIO: f64 = 1.3;

fn cpu(clock: i32) -> Duration {
    let mut ts = libc_timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; the clock ids used exist on Linux.
    unsafe { clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

#[repr(C)]
struct libc_timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut libc_timespec) -> i32;
}

/// The interpreter thread's "answers may be there", as the agent's loop gets it.
#[derive(Default)]
struct Woken {
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Woken {
    fn wake(&self) {
        *self.flag.lock().unwrap() = true;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut woken = self.flag.lock().unwrap();
        while !*woken {
            woken = self.cv.wait(woken).unwrap();
        }
        *woken = false;
    }
}

/// One round of `flows` flows, each given `reports.len() / flows` reports, a batch being one
/// report of each flow: ns of wall time, CPU time and the calling thread's CPU time per report.
fn round(name: &str, flows: usize, reports: &[Report], woken: &Woken) -> (f64, f64, f64) {
    let start = FlowStart::new(MSS, 10 * u64::from(MSS));
    let mut cs: Vec<Controller> = (0..flows).map(|_| common::start(choose(name), &start).0).collect();
    let batches = reports.len() / flows;
    let mut begun = Vec::with_capacity(flows);
    let (w0, c0, t0) = (Instant::now(), cpu(CLOCK_PROCESS_CPUTIME_ID), cpu(CLOCK_THREAD_CPUTIME_ID));
    for r in &reports[..batches] {
        for (i, c) in cs.iter_mut().enumerate() {
            if c.begin_report(r) {
                begun.push(i);
            } else {
                let out = c.on_report(r, r.now_us);
                assert!(out.fault.is_none(), "{name}: {:?}", out.fault);
            }
        }
        for i in begun.drain(..) {
            while !cs[i].begun_ready() {
                woken.wait();
            }
            let out = cs[i].on_report(r, r.now_us);
            assert!(out.fault.is_none(), "{name}: {:?}", out.fault);
        }
    }
    let n = (batches * flows) as f64;
    let ns = |d: Duration| d.as_nanos() as f64 / n;
    (ns(w0.elapsed()), ns(cpu(CLOCK_PROCESS_CPUTIME_ID) - c0), ns(cpu(CLOCK_THREAD_CPUTIME_ID) - t0))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The rounds of one setup.
struct Series {
    what: &'static str,
    isolation: Option<Isolation>,
    flows: usize,
    wall: Vec<f64>,
    cpu: Vec<f64>,
    caller_cpu: Vec<f64>,
}

fn main() {
    // Relative to the workspace (cargo runs benches in the package's folder).
    let json = std::env::args()
        .skip_while(|a| a != "--json")
        .nth(1)
        .map(|p| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p));
    ccp_python::set_call_budget(Duration::from_secs(1));
    let reports = synthetic_reports(REPORTS, 7);
    let python = example("reno.py", "Reno");
    let woken = Arc::new(Woken::default());
    let wake: Arc<dyn Fn() + Send + Sync> = {
        let woken = Arc::clone(&woken);
        Arc::new(move || woken.wake())
    };
    ccp_python::wake_on_answers(&wake);
    round(&python, 1, &reports[..1000], &woken);
    let mut series = Vec::new();
    for flows in BATCHES {
        let series_of = |what, isolation| Series { what, isolation, flows, wall: vec![], cpu: vec![], caller_cpu: vec![] };
        series.push(series_of("native", None));
        for isolation in [Isolation::Inline, Isolation::Thread] {
            series.push(series_of("python", Some(isolation)));
        }
    }
    for _ in 0..ROUNDS {
        for s in series.iter_mut() {
            let (w, c, t) = match s.isolation {
                None => round("reno", s.flows, &reports, &woken),
                Some(i) => {
                    ccp_python::set_isolation(i);
                    round(&python, s.flows, &reports, &woken)
                }
            };
            s.wall.push(w);
            s.cpu.push(c);
            s.caller_cpu.push(t);
        }
    }
    let medians: Vec<(f64, f64, f64)> =
        series.iter().map(|s| (median(s.wall.clone()), median(s.cpu.clone()), median(s.caller_cpu.clone()))).collect();
    println!("per report, median of {ROUNDS} rounds of {REPORTS} reports through the controller, a batch = one report per flow:");
    println!(
        "  {:<22} {:>6} {:>8} {:>8} {:>11} {:>10} {:>10} {:>10}",
        "", "flows", "ns wall", "ns CPU", "of it caller", "CPU/inline", "CPU/native", "flows/core"
    );
    let mut rows = vec![];
    for (s, &(w, c, t)) in series.iter().zip(&medians) {
        let at = |what: &str, isolation: Option<Isolation>| {
            series
                .iter()
                .zip(&medians)
                .find(|(t, _)| t.flows == s.flows && t.what == what && t.isolation == isolation)
                .map(|(_, m)| *m)
        };
        let (_, native_cpu, _) = at("native", None).unwrap();
        let (_, inline_cpu, _) = at("python", Some(Isolation::Inline)).unwrap();
        let label = match s.isolation {
            None => "native reno".to_string(),
            Some(i) => format!("python reno.py, {}", format!("{i:?}").to_lowercase()),
        };
        let flows_per_core = 1e9 / (c * REPORTS_PER_FLOW_PER_S);
        let vs_inline = s.isolation.map(|_| c / inline_cpu);
        println!(
            "  {label:<22} {:>6} {w:>8.0} {c:>8.0} {t:>11.0} {:>10} {:>9.1}x {flows_per_core:>10.0}",
            s.flows,
            vs_inline.map_or(String::new(), |r| format!("{r:.2}x")),
            c / native_cpu
        );
        rows.push(serde_json::json!({
            "algorithm": if s.isolation.is_some() { "python reno.py" } else { "native reno" },
            "isolation": s.isolation.map(|i| format!("{i:?}").to_lowercase()),
            "flows_per_batch": s.flows,
            "ns_wall": w, "ns_cpu": c, "ns_cpu_caller_thread": t,
            "cpu_vs_inline": vs_inline,
            "cpu_vs_native": c / native_cpu,
            "flows_per_core_10ms": flows_per_core,
        }));
    }
    let thread_vs_inline: Vec<(usize, f64)> = rows
        .iter()
        .filter(|r| r["isolation"] == "thread")
        .map(|r| (r["flows_per_batch"].as_u64().unwrap() as usize, r["cpu_vs_inline"].as_f64().unwrap()))
        .collect();
    for (flows, ratio) in &thread_vs_inline {
        let verdict = if *ratio <= TARGET_CPU_RATIO { "met" } else { "missed" };
        println!("  thread (the default) at {flows:>3} flows per batch: {ratio:.2}x inline's CPU, target <= {TARGET_CPU_RATIO}x {verdict}");
    }
    if let Some(path) = json {
        let out = serde_json::json!({
            "reports_per_round": REPORTS, "rounds": ROUNDS,
            "target_cpu_vs_inline": TARGET_CPU_RATIO,
            "rows": rows,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n")
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("wrote {}", path.display());
    }
}
