//! Per-report CPU cost of NimbusCC versus Reno (and Cubic), measured in the same run.
//!
//! Each algorithm is first driven through 20 s of plausible 10 ms reports (past NimbusCC's 10 s
//! detection start and 15 s switch timer, so every measured NimbusCC report runs the full path:
//! cross-traffic estimate, grid update, two 512-point FFTs, η, guards, mode logic, pulse). The
//! benchmark then times `on_report` on further reports with advancing datapath time. Criterion
//! reports time per report; "reports/s per core" is its reciprocal (the throughput line).
//!
//! After the criterion groups, an interleaved comparison alternates blocks of 1 000 NimbusCC and
//! 1 000 Reno reports for about two seconds and prints the median per-report time of each and
//! their ratio: on a shared, loaded machine (this one has two cores and concurrent builds) the
//! sequential criterion measurements can see different load; interleaving exposes both to the same.
//!
//! Run: `cargo bench -p ccp-algorithms --bench per_report`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ccp_algorithms::cubic;
use ccp_algorithms::nimbus::cross_traffic::LinkRate;
use ccp_algorithms::nimbus::{NimbusCC, NimbusConfig};
use ccp_algorithms::reno::{Reno, RenoConfig};
use ccp_contract::{Algorithm, FlowStart, Report, RttStats};
use criterion::{criterion_group, Criterion, Throughput};

const MSS: u32 = 1448;
const REPORT_US: u64 = 10_000;

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

fn bench_alg(c: &mut Criterion, name: &str, mut alg: Box<dyn Algorithm>) {
    alg.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
    let warm = 20_000_000 / REPORT_US;
    for k in 1..=warm {
        alg.on_report(&report(k));
    }
    let mut k = warm;
    let mut r = report(k);
    let mut group = c.benchmark_group("per_report");
    group.throughput(Throughput::Elements(1));
    group.bench_function(name, |b| {
        b.iter(|| {
            k += 1;
            // Only the fields that change per report are rewritten (a full rebuild would cost as
            // much as Reno itself).
            r.now_us = k * REPORT_US;
            r.lost_pkts = u64::from(k % 500 == 499);
            r.recv_rate_bytes_per_s = Some(6_000_000 + (k % 7) * 50_000);
            black_box(alg.on_report(black_box(&r)))
        })
    });
    group.finish();
}

fn per_report(c: &mut Criterion) {
    bench_alg(c, "reno", Box::new(Reno::new(RenoConfig::default())));
    bench_alg(c, "cubic", Box::new(cubic::Cubic::new(cubic::CubicConfig::default())));
    bench_alg(c, "nimbus", Box::new(NimbusCC::new(NimbusConfig { link_rate: LinkRate::Fixed(12e6), ..NimbusConfig::default() })));
    bench_alg(c, "nimbus_mu_estimated", Box::new(NimbusCC::new(NimbusConfig::default())));
}

/// Median of per-report times (ns) over alternating blocks of NimbusCC and Reno reports.
fn interleaved_ratio() {
    const BLOCK: u64 = 1_000;
    let mut nimbus: Box<dyn Algorithm> =
        Box::new(NimbusCC::new(NimbusConfig { link_rate: LinkRate::Fixed(12e6), ..NimbusConfig::default() }));
    let mut reno: Box<dyn Algorithm> = Box::new(Reno::new(RenoConfig::default()));
    let warm = 20_000_000 / REPORT_US;
    for alg in [&mut nimbus, &mut reno] {
        alg.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        for k in 1..=warm {
            alg.on_report(&report(k));
        }
    }
    let mut k = warm;
    let (mut t_nimbus, mut t_reno) = (vec![], vec![]);
    let block = |alg: &mut Box<dyn Algorithm>, k0: u64| {
        let mut r = report(k0);
        let start = Instant::now();
        for i in 0..BLOCK {
            r.now_us = (k0 + i) * REPORT_US;
            r.lost_pkts = u64::from((k0 + i) % 500 == 499);
            black_box(alg.on_report(black_box(&r)));
        }
        start.elapsed().as_nanos() as f64 / BLOCK as f64
    };
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        t_nimbus.push(block(&mut nimbus, k));
        t_reno.push(block(&mut reno, k));
        k += BLOCK;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (n, r) = (median(&mut t_nimbus), median(&mut t_reno));
    println!(
        "interleaved ({} blocks of {BLOCK}): nimbus {:.3} µs/report ({:.0} reports/s/core), reno {:.1} ns/report ({:.0} reports/s/core), ratio {:.0}x",
        t_reno.len(),
        n / 1e3,
        1e9 / n,
        r,
        1e9 / r,
        n / r
    );
}

criterion_group!(benches, per_report);

fn main() {
    benches();
    interleaved_ratio();
    Criterion::default().configure_from_args().final_summary();
}
