//! Inigo through the contract: reports in, actions out (the per-ACK machine has its own tests in
//! `sender.rs` and `literal.rs`).

use proptest::prelude::*;

use super::*;
use crate::test_support::{check_sane, reports};
use ccp_contract::{RttStats, Seed};

const MSS: u32 = 1000;
const MSS_F: f64 = MSS as f64;

fn inigo(params: &str) -> Box<dyn Algorithm> {
    INFO.configure(&params.parse().unwrap()).unwrap().create()
}

fn start(ecn: Option<bool>) -> FlowStart {
    FlowStart { ecn, ..FlowStart::new(MSS, 10 * u64::from(MSS)) }
}

/// A report of `pkts` packets acknowledged, `late` of `samples` RTT samples late, window-limited.
fn report(now_us: u64, pkts: u64, samples: u32, late: u64, cwnd_bytes: u64) -> Report {
    Report {
        now_us,
        interval_us: 1000,
        mss_bytes: MSS,
        acked_bytes: pkts * u64::from(MSS),
        acked_pkts: pkts,
        rtt: (samples > 0).then_some(RttStats {
            min_us: 4000,
            max_us: 6000,
            last_us: 5000,
            srtt_us: 5000,
            mean_us: 5000,
            samples,
        }),
        rtt_samples_over_threshold: late,
        inflight_bytes: cwnd_bytes,
        pending_bytes: cwnd_bytes * 4,
        cwnd_bytes,
        ..Report::default()
    }
}

fn cwnd_pkts(a: &Action) -> f64 {
    a.cwnd_bytes.unwrap() / MSS_F
}

#[test]
fn it_asks_for_a_report_every_w_sub_packets_and_per_rtt() {
    let mut a = inigo("");
    let init = a.init(&start(None));
    assert_eq!(init.report_acked_pkts, Some(10));
    assert_eq!(init.report, Some(ReportPolicy::PerRtt { rtts: 1.0 }));
    assert_eq!(init.cwnd_bytes, Some(10.0 * MSS_F));
    assert_eq!(init.rtt_threshold_us, None, "no RTT_min yet, nothing is late");
    let mut b = inigo("w_sub = 20");
    assert_eq!(b.init(&start(None)).report_acked_pkts, Some(20));
    let mut c = inigo("w_sub = 1");
    assert_eq!(c.init(&start(None)).report_acked_pkts, Some(3), "clamped to [3, 512] as the module does");
}

#[test]
fn the_late_threshold_follows_rtt_min_and_is_sent_only_when_it_changes() {
    let mut a = inigo("");
    a.init(&start(None));
    let first = a.on_report(&report(1000, 10, 10, 0, 20 * u64::from(MSS)));
    assert_eq!(first.rtt_threshold_us, Some(4679), "4000 + 4000·174/1024");
    assert_eq!(a.on_report(&report(2000, 10, 10, 0, 20 * u64::from(MSS))).rtt_threshold_us, None);
    let mut lower = report(3000, 10, 10, 0, 20 * u64::from(MSS));
    lower.rtt.as_mut().unwrap().min_us = 2000;
    assert_eq!(a.on_report(&lower).rtt_threshold_us, Some(2339));
    let mut higher = report(4000, 10, 10, 0, 20 * u64::from(MSS));
    higher.rtt.as_mut().unwrap().min_us = 9000;
    assert_eq!(a.on_report(&higher).rtt_threshold_us, None, "RTT_min never rises");
}

#[test]
fn mode_follows_the_connections_ecn_negotiation_unless_forced() {
    let state = |a: &dyn Algorithm, name: &str| a.state().iter().find(|v| v.name == name).unwrap().value;
    for (params, ecn, rtt_mode, alpha) in [
        ("", Some(true), 0.0, 1.0),
        ("", Some(false), 1.0, 0.0),
        ("", None, 1.0, 0.0),
        ("mode = \"ecn\"", None, 0.0, 1.0),
        ("mode = \"rtt\"", Some(true), 1.0, 0.0),
    ] {
        let mut a = inigo(params);
        a.init(&start(ecn));
        assert_eq!((state(a.as_ref(), "rtt_mode"), state(a.as_ref(), "alpha")), (rtt_mode, alpha), "{params:?} {ecn:?}");
    }
}

#[test]
fn late_rtts_end_slow_start_and_a_reduction_holds_for_the_data_in_flight() {
    let mut a = inigo("");
    a.init(&start(Some(false)));
    // Slow start, nothing late: doubling per window of reports.
    let mut w = cwnd_pkts(&a.on_report(&report(1000, 10, 10, 0, 10_000)));
    assert_eq!(w, 20.0);
    w = cwnd_pkts(&a.on_report(&report(2000, 10, 10, 0, 20_000)));
    assert_eq!(w, 30.0);
    // All late: α = 64 and the first α > 0 is a reduction (of zero packets at this α).
    let cut = cwnd_pkts(&a.on_report(&report(3000, 10, 10, 10, 30_000)));
    assert_eq!(cut, f64::from(rtt_ssthresh(30, 64, 10)));
    // Held: 29 more packets (the flight at the cut was 30) bring no growth at all.
    let held = a.on_report(&report(4000, 29, 29, 0, 30_000));
    assert_eq!(cwnd_pkts(&held), cut);
    // The 30th packet ends the hold-off; growth resumes, in congestion avoidance.
    let after = cwnd_pkts(&a.on_report(&report(5000, 1, 1, 0, 30_000)));
    assert!(after <= cut + 1.0, "{after}");
}

#[test]
fn an_app_limited_flow_changes_nothing() {
    let mut a = inigo("");
    a.init(&start(Some(false)));
    for i in 0..50 {
        let mut r = report(1000 * (i + 1), 10, 10, 10, 10_000);
        r.app_limited = true;
        let act = a.on_report(&r);
        assert_eq!(cwnd_pkts(&act), 10.0);
    }
}

#[test]
fn ecn_mode_cuts_by_alpha_over_two_on_an_echo() {
    let mut a = inigo("");
    a.init(&start(Some(true)));
    let mut r = report(1000, 5, 5, 0, 10_000);
    r.ece_acks = 1;
    r.ce_pkts = 1;
    r.ce_bytes = 1000;
    // α starts at 1: the first echo halves the window, and ends slow start.
    assert_eq!(cwnd_pkts(&a.on_report(&r)), 5.0);
}

#[test]
fn losses_and_timeouts() {
    let mut a = inigo("");
    a.init(&start(Some(false)));
    let mut loss = report(1000, 0, 0, 0, 10_000);
    loss.lost_pkts = 1;
    loss.urgent = Some(ccp_contract::Urgent::Loss);
    assert_eq!(cwnd_pkts(&a.on_report(&loss)), 10.0, "α = 0: no backoff on fast retransmit (faithful, §3.8)");
    let mut rto = report(2000, 0, 0, 0, 10_000);
    rto.timeouts = 1;
    assert_eq!(cwnd_pkts(&a.on_report(&rto)), 2.0, "a timeout collapses the window to the contract's floor");
}

#[test]
fn a_seeded_flow_continues_from_its_window_in_congestion_avoidance() {
    let mut a = inigo("");
    let s =
        FlowStart { seed: Some(Seed { cwnd_bytes: 80_000, min_rtt_us: Some(3000), ..Seed::default() }), ..start(Some(false)) };
    let init = a.init(&s);
    assert_eq!(cwnd_pkts(&init), 80.0);
    assert_eq!(init.rtt_threshold_us, Some(late_threshold_us(3000, MARKTHRESH).into()));
    let next = cwnd_pkts(&a.on_report(&report(1000, 10, 10, 0, 80_000)));
    assert!(next <= 82.0, "not slow start: {next}");
}

/// One report per ACK with the exact trigger is the kernel's machine, step for step.
#[test]
fn per_ack_reports_with_the_exact_trigger_match_the_kernel_machine() {
    let mut a = inigo("trigger = \"exact\"");
    a.init(&start(Some(false)));
    let mut k = Sender::new(SenderConfig::default(), Mode::Rtt, 10);
    let mut flight = 10u64;
    for i in 0..3000u64 {
        // Late in bursts, as a queue would make them.
        let late = u64::from((i / 200) % 2 == 1 && i % 3 == 0);
        let r = report(1000 * (i + 1), 1, 1, late, flight * u64::from(MSS));
        let w = cwnd_pkts(&a.on_report(&r));
        k.rtt_counted(1, late, Some(4000));
        k.on_ack(&Ack { acked_pkts: 1, acked_bytes: 1000, cwnd_limited: true, inflight_pkts: flight as u32, ..Ack::default() });
        assert_eq!(w, f64::from(k.cwnd), "ACK {i}");
        flight = u64::from(k.cwnd);
    }
    assert!(k.reductions > 5, "the trace exercised reductions: {}", k.reductions);
}

#[test]
fn the_literal_variant_runs_through_the_contract() {
    let run = |late: u64| {
        let mut a = inigo("variant = \"literal\"");
        a.init(&start(Some(false)));
        let mut w = 10.0;
        for i in 0..300u64 {
            w = cwnd_pkts(&a.on_report(&report(1000 * (i + 1), 10, 10, late, (w * MSS_F) as u64)));
        }
        w
    };
    let (clean, late) = (run(0), run(5));
    assert!(late < 0.5 * clean, "late RTTs hold the window down: {late} against {clean}");
}

proptest! {
    #[test]
    fn every_action_is_sane(rs in reports(64), ecn in prop::option::of(any::<bool>()), literal in any::<bool>()) {
        let mut a = inigo(if literal { "variant = \"literal\"" } else { "" });
        check_sane(a.init(&start(ecn)).cwnd_bytes, MSS, &a.state())?;
        for r in &rs {
            let act = a.on_report(r);
            check_sane(act.cwnd_bytes, r.mss_bytes.max(1), &a.state())?;
            if let Some(t) = act.rtt_threshold_us {
                prop_assert!(t > 0);
            }
        }
    }
}
