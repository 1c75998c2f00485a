//! Helpers shared by the algorithms' unit tests: random report sequences for property tests and the
//! sanity check every algorithm must pass after every report.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use ccp_contract::{Report, RttStats, StateVar};

/// Counters and gauges: mostly ordinary values, often zero, sometimes absurd.
fn amount() -> impl Strategy<Value = u64> {
    prop_oneof![3 => Just(0u64), 2 => 1u64..20, 4 => 0u64..2_000_000, 1 => any::<u64>()]
}

fn rare(common: u64) -> impl Strategy<Value = u64> {
    prop_oneof![6 => Just(0u64), 2 => 1u64..=common, 1 => any::<u64>()]
}

/// One report without its time, and the time step before it.
fn step_and_report(marks: bool) -> impl Strategy<Value = (u64, Report)> {
    let mss = prop_oneof![Just(0u32), Just(1u32), 536u32..9001, Just(u32::MAX)];
    let timeouts = prop_oneof![12 => Just(0u32), 1 => 1u32..3, 1 => any::<u32>()];
    let rtt = prop_oneof![1 => Just(None), 4 => amount().prop_map(Some)];
    let step = prop_oneof![Just(0u64), 0u64..300_000, any::<u64>().prop_map(|s| s >> 20)];
    let ce = if marks { (amount(), amount(), amount()).boxed() } else { Just((0u64, 0u64, 0u64)).boxed() };
    (step, mss, amount(), amount(), rare(3), timeouts, ce, rtt, amount(), any::<bool>()).prop_map(
        |(
            step,
            mss_bytes,
            acked_bytes,
            sacked_bytes,
            lost_pkts,
            timeouts,
            (ce_bytes, ce_pkts, ece_acks),
            srtt,
            inflight_bytes,
            app_limited,
        )| {
            let rtt = srtt.map(|us| RttStats { min_us: us, max_us: us, last_us: us, srtt_us: us, mean_us: us, samples: 1 });
            let report = Report {
                interval_us: step,
                mss_bytes,
                acked_bytes,
                acked_pkts: acked_bytes / u64::from(mss_bytes.max(1)),
                sacked_bytes,
                lost_pkts,
                timeouts,
                ce_bytes,
                ce_pkts,
                ece_acks,
                rtt,
                inflight_bytes,
                app_limited,
                ..Report::default()
            };
            (step, report)
        },
    )
}

/// Random report sequences of up to `max_len` reports with monotonic (saturating) time.
/// `marks = false` leaves every ECN field zero.
pub fn reports_with(max_len: usize, marks: bool) -> impl Strategy<Value = Vec<Report>> {
    prop::collection::vec(step_and_report(marks), 0..max_len).prop_map(|steps| {
        let mut now = 0u64;
        steps
            .into_iter()
            .map(|(step, mut r)| {
                now = now.saturating_add(step);
                r.now_us = now;
                r
            })
            .collect()
    })
}

pub fn reports(max_len: usize) -> impl Strategy<Value = Vec<Report>> {
    reports_with(max_len, true)
}

/// RTT statistics of one sample of `us` microseconds (min = max = last = srtt = mean).
pub fn rtt(us: u64) -> Option<RttStats> {
    Some(RttStats { min_us: us, max_us: us, last_us: us, srtt_us: us, mean_us: us, samples: 1 })
}

/// The window is set, finite and at least two packets of `mss`; no state variable is NaN, and only
/// ssthresh may be infinite (no congestion event yet).
pub fn check_sane(cwnd_bytes: Option<f64>, mss: u32, state: &[StateVar]) -> Result<(), TestCaseError> {
    let Some(cwnd) = cwnd_bytes else {
        return Err(TestCaseError::fail("no window in the action"));
    };
    prop_assert!(cwnd.is_finite(), "cwnd {cwnd}");
    let floor = 2.0 * f64::from(mss.max(1));
    prop_assert!(cwnd >= floor * (1.0 - 1e-12), "cwnd {cwnd} below two packets ({floor})");
    for v in state {
        prop_assert!(!v.value.is_nan(), "{} is NaN", v.name);
        prop_assert!(v.value.is_finite() || v.name.starts_with("ssthresh"), "{} = {}", v.name, v.value);
    }
    Ok(())
}
