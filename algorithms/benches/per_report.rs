//! Per-report CPU cost of NimbusCC versus Reno (and Cubic), measured in the same run.
//!
//! Each algorithm is first driven through 20 s of plausible 10 ms reports (past NimbusCC's 10 s
//! detection start, so every measured NimbusCC report runs the full path: cross-traffic estimate,
//! grid update, η with its guards, mode logic, pulse). The benchmark then times `on_report` on
//! further reports with advancing datapath time. Criterion reports time per report; "reports/s per
//! core" is its reciprocal (the throughput line).
//!
//! NimbusCC is measured in each mode, pinned there (`switch_after_us` = ∞) so that the
//! competitive controller (Cubic, 5 Hz pulses) and the delay controller (BasicDelay, 6 Hz) are
//! both covered, and on each detector path: the default sliding DFT of the bins η reads, and the
//! reference FFT path (`SpectrumPath::Fft`: a full 512-point FFT per report), which is what every
//! report cost before issue 18 item 8.
//!
//! After the criterion groups, an interleaved comparison alternates blocks of 1 000 reports of
//! Reno, NimbusCC (sliding) and NimbusCC (FFT) for about two seconds per mode and prints the median
//! per-report time of each and their ratios to Reno: on a shared, loaded machine (this one has two
//! cores and concurrent builds) the sequential criterion measurements can see different load;
//! interleaving exposes all three to the same.
//!
//! Run: `cargo bench -p ccp-algorithms --bench per_report`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ccp_algorithms::cubic;
use ccp_algorithms::nimbus::cross_traffic::LinkRate;
use ccp_algorithms::nimbus::elasticity::SpectrumPath;
use ccp_algorithms::nimbus::mode::Mode;
use ccp_algorithms::nimbus::{NimbusCC, NimbusConfig};
use ccp_algorithms::reno::{Reno, RenoConfig};
use ccp_contract::{Algorithm, FlowStart, Report, RttStats};
use criterion::{criterion_group, Criterion, Throughput};

const MSS: u32 = 1448;
const REPORT_US: u64 = 10_000;
/// Reports before timing starts: 20 s, past NimbusCC's 10 s detection start.
const WARM_REPORTS: u64 = 20_000_000 / REPORT_US;

/// A plausible report `k` (10 ms apart): ~48 Mbit/s acknowledged, RTT wobbling around 60 ms,
/// send/receive rates from one rate sample, an occasional loss.
fn report(k: u64) -> Report {
    let wobble = (k % 20) as f64 / 20.0;
    let rtt_us = 55_000 + (10_000.0 * wobble) as u64;
    let recv = 6_000_000 + (k % 7) * 50_000;
    Report {
        now_us: k * REPORT_US,
        interval_us: REPORT_US,
        mss_bytes: MSS,
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
        send_rate_bytes_per_s: Some(recv + 100_000 + (k % 5) * 30_000),
        recv_rate_bytes_per_s: Some(recv),
        inflight_bytes: 400_000,
        cwnd_bytes: 600_000,
        ..Report::default()
    }
}

/// Rewrites only the fields of `r` that change per report (a full rebuild would cost as much as
/// Reno itself).
fn advance(r: &mut Report, k: u64) {
    r.now_us = k * REPORT_US;
    r.lost_pkts = u64::from(k % 500 == 499);
    r.recv_rate_bytes_per_s = Some(6_000_000 + (k % 7) * 50_000);
}

/// NimbusCC with μ configured, held in `mode` (no switch ever), on detector path `path`.
fn nimbus(mode: Mode, path: SpectrumPath) -> NimbusCC {
    NimbusCC::new(NimbusConfig {
        link_rate: LinkRate::Fixed(12e6),
        start_mode: mode,
        switch_after_us: u64::MAX,
        spectrum_path: path,
        ..NimbusConfig::default()
    })
}

fn var(alg: &dyn Algorithm, name: &str) -> f64 {
    alg.state().iter().find(|v| v.name == name).map_or(f64::NAN, |v| v.value)
}

/// `alg`, started and driven through the warm-up reports.
fn warmed(mut alg: Box<dyn Algorithm>) -> Box<dyn Algorithm> {
    alg.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
    for k in 1..=WARM_REPORTS {
        alg.on_report(&report(k));
    }
    alg
}

/// Panics unless a NimbusCC under test is in `mode` and evaluating η (so the full path is timed).
fn check_nimbus(alg: &dyn Algorithm, mode: Mode, what: &str) {
    assert_eq!(var(alg, "mode"), mode.code(), "{what}: not in {mode:?} mode");
    assert!(var(alg, "eta") > 0.0, "{what}: η is not being evaluated");
}

fn bench_alg(c: &mut Criterion, name: &str, alg: Box<dyn Algorithm>, pinned: Option<Mode>) {
    let mut alg = warmed(alg);
    let mut k = WARM_REPORTS;
    let mut r = report(k);
    let mut group = c.benchmark_group("per_report");
    group.throughput(Throughput::Elements(1));
    group.bench_function(name, |b| {
        b.iter(|| {
            k += 1;
            advance(&mut r, k);
            black_box(alg.on_report(black_box(&r)))
        })
    });
    group.finish();
    if let Some(mode) = pinned {
        check_nimbus(alg.as_ref(), mode, name);
    }
}

fn per_report(c: &mut Criterion) {
    bench_alg(c, "reno", Box::new(Reno::new(RenoConfig::default())), None);
    bench_alg(c, "cubic", Box::new(cubic::Cubic::new(cubic::CubicConfig::default())), None);
    for (mode, label) in [(Mode::Competitive, "competitive"), (Mode::Delay, "delay")] {
        for (path, suffix) in [(SpectrumPath::Sliding, ""), (SpectrumPath::Fft, "_fft")] {
            bench_alg(c, &format!("nimbus_{label}{suffix}"), Box::new(nimbus(mode, path)), Some(mode));
        }
    }
}

/// Medians of per-report times (ns) over alternating blocks of Reno, NimbusCC (sliding) and
/// NimbusCC (FFT) reports, with NimbusCC held in `mode`.
fn interleaved_ratio(mode: Mode) {
    const BLOCK: u64 = 1_000;
    let mut algs: [Box<dyn Algorithm>; 3] = [
        warmed(Box::new(Reno::new(RenoConfig::default()))),
        warmed(Box::new(nimbus(mode, SpectrumPath::Sliding))),
        warmed(Box::new(nimbus(mode, SpectrumPath::Fft))),
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    let block = |alg: &mut Box<dyn Algorithm>, k0: u64| {
        let mut r = report(k0);
        let start = Instant::now();
        for k in k0..k0 + BLOCK {
            advance(&mut r, k);
            black_box(alg.on_report(black_box(&r)));
        }
        start.elapsed().as_nanos() as f64 / BLOCK as f64
    };
    let mut k = WARM_REPORTS + 1;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        for (alg, t) in algs.iter_mut().zip(times.iter_mut()) {
            t.push(block(alg, k));
        }
        k += BLOCK;
    }
    check_nimbus(algs[1].as_ref(), mode, "sliding");
    check_nimbus(algs[2].as_ref(), mode, "FFT");
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let blocks = times[0].len();
    let [reno, sliding, fft] = times.each_mut().map(median);
    println!(
        "interleaved, {mode:?} mode ({blocks} blocks of {BLOCK}): reno {reno:.1} ns/report; nimbus sliding {sliding:.1} ns/report \
         ({:.0} reports/s/core) = {:.1}x reno; nimbus FFT (reference) {fft:.1} ns/report = {:.1}x reno; sliding/FFT {:.3}",
        1e9 / sliding,
        sliding / reno,
        fft / reno,
        sliding / fft
    );
}

criterion_group!(benches, per_report);

fn main() {
    benches();
    interleaved_ratio(Mode::Competitive);
    interleaved_ratio(Mode::Delay);
    Criterion::default().configure_from_args().final_summary();
}
