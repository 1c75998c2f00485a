//! What a learned policy costs per report, beside native Cubic in the same run (issue 36 item 2).
//!
//! Each algorithm runs inside the one containment `Controller`, as the agent and the simulator
//! run it, over plausible 10 ms reports. Blocks of reports alternate between Cubic, the MLP
//! (2×64) and the GRU (32) test models so that all three see the same load on a shared machine;
//! the table gives the median per-report time, its ratio to Cubic, the heap allocations per
//! report (a counting allocator), and the flows one core could steer at one report per 10 ms if
//! it did nothing else (10 ms over the per-report cost: an upper bound, the agent's datapath work
//! per report comes on top).
//!
//! Run: `cargo bench -p ccp-learned --bench per_report` (release; the test models'
//! manifests ask for 200 µs, which a debug build does not meet).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ccp_contract::{Capabilities, Choice, Controller, FlowStart, Limits, Report, RttStats};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const REPORT_US: u64 = 10_000;
const BLOCK: u64 = 200;
const SECONDS_PER_ALGORITHM: f64 = 3.0;

fn report(k: u64) -> Report {
    let rtt_us = 55_000 + (k % 20) * 500;
    Report {
        now_us: k * REPORT_US,
        interval_us: REPORT_US,
        mss_bytes: 1448,
        acked_bytes: 60_000,
        acked_pkts: 41,
        lost_pkts: u64::from(k % 500 == 499),
        rtt: Some(RttStats {
            min_us: rtt_us - 2_000,
            max_us: rtt_us + 2_000,
            last_us: rtt_us,
            srtt_us: rtt_us,
            mean_us: rtt_us,
            samples: 20,
        }),
        inflight_bytes: 80 * 1448,
        cwnd_bytes: 80 * 1448,
        send_rate_bytes_per_s: Some(6_100_000),
        recv_rate_bytes_per_s: Some(6_000_000),
        ..Report::default()
    }
}

fn start(choice: Choice) -> Controller {
    let caps = Capabilities {
        max_cwnd_bytes: 1 << 30,
        max_rate_bytes_per_s: 1 << 40,
        can_clear_pacing: true,
        per_rtt_reports: true,
        cwnd_packets: None,
    };
    let fallback = ccp_algorithms::registry::choose("reno", toml::Table::new(), "fallback").unwrap();
    Controller::start(choice, fallback, caps, Limits::default(), &FlowStart::new(1448, 10 * 1448), 0).0
}

struct Subject {
    label: &'static str,
    controller: Controller,
    next: u64,
    per_report_ns: Vec<f64>,
    allocs: u64,
    reports: u64,
    faults: u64,
}

impl Subject {
    fn block(&mut self) {
        let a0 = ALLOCS.load(Ordering::Relaxed);
        let t0 = Instant::now();
        for _ in 0..BLOCK {
            self.next += 1;
            let out = self.controller.on_report(&report(self.next), self.next * REPORT_US);
            if let Some(f) = out.fault {
                if self.faults == 0 {
                    eprintln!("{}: first fault at report {}: {f}", self.label, self.next);
                }
                self.faults += 1;
            }
        }
        self.per_report_ns.push(t0.elapsed().as_nanos() as f64 / BLOCK as f64);
        self.allocs += ALLOCS.load(Ordering::Relaxed) - a0;
        self.reports += BLOCK;
    }

    fn median_ns(&self) -> f64 {
        let mut v = self.per_report_ns.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
}

fn main() {
    ccp_learned::register();
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models");
    let choose =
        |name: &str| ccp_algorithms::registry::choose(name, toml::Table::new(), "bench").unwrap_or_else(|e| panic!("{e}"));
    let onnx = |file: &str| choose(&format!("onnx:{}", models.join(file).display()));
    let mut subjects = vec![
        Subject {
            label: "cubic (native)",
            controller: start(choose("cubic")),
            next: 0,
            per_report_ns: vec![],
            allocs: 0,
            reports: 0,
            faults: 0,
        },
        Subject {
            label: "onnx MLP 2x64",
            controller: start(onnx("mlp.onnx")),
            next: 0,
            per_report_ns: vec![],
            allocs: 0,
            reports: 0,
            faults: 0,
        },
        Subject {
            label: "onnx GRU 32",
            controller: start(onnx("gru.onnx")),
            next: 0,
            per_report_ns: vec![],
            allocs: 0,
            reports: 0,
            faults: 0,
        },
    ];
    // Warm every path (and the policies' history) before timing.
    for s in &mut subjects {
        for _ in 0..5 {
            s.block();
        }
        s.per_report_ns.clear();
        s.allocs = 0;
        s.reports = 0;
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs_f64(SECONDS_PER_ALGORITHM * subjects.len() as f64) {
        for s in &mut subjects {
            s.block();
        }
    }
    let base = subjects[0].median_ns();
    println!("per report, inside the Controller, {} blocks of {BLOCK} interleaved:", subjects[0].per_report_ns.len());
    println!(
        "{:<16} {:>12} {:>9} {:>14} {:>20} {:>8}",
        "algorithm", "ns/report", "× cubic", "allocs/report", "flows/core @10 ms", "faults"
    );
    for s in &subjects {
        let ns = s.median_ns();
        println!(
            "{:<16} {:>12.0} {:>9.1} {:>14.1} {:>20.0} {:>8}",
            s.label,
            ns,
            ns / base,
            s.allocs as f64 / s.reports as f64,
            REPORT_US as f64 * 1e3 / ns,
            s.faults
        );
    }
}
