//! Annulus unit tests, numbered as annulus.md §13.2–§13.3.

use ccp_contract::Seed;
use proptest::prelude::*;

use super::*;
use crate::cubic::{Cubic, CubicConfig};
use crate::dctcp::{Dctcp, DctcpConfig};
use crate::test_support::{check_sane, reports};

const MSS: u32 = 1500;
const SRTT_US: u64 = 100;
const GBPS: f64 = 1e9 / 8.0; // bytes/s

use crate::test_support::rtt;

fn acks(now_us: u64, acked_bytes: u64) -> Report {
    Report {
        now_us,
        interval_us: 10,
        mss_bytes: MSS,
        acked_bytes,
        rtt: rtt(SRTT_US),
        inflight_bytes: 20_000,
        ..Report::default()
    }
}

/// ACKs that do not grow a window-based loop (application-limited), so only the near-source clock moves.
fn idle_acks(now_us: u64, acked_bytes: u64) -> Report {
    Report { app_limited: true, ..acks(now_us, acked_bytes) }
}

fn cnm(now_us: u64, qfb: u8) -> Report {
    Report {
        now_us,
        mss_bytes: MSS,
        feedback: Some(NetworkFeedback::Qcn { fb_quantized: qfb, q_off_bytes: 0, q_delta_bytes: 0 }),
        ..Report::default()
    }
}

fn dc(cfg: AnnulusConfig) -> AnnulusConfig {
    AnnulusConfig { class: Some(Class::Dc), ..cfg }
}

/// A DC flow whose DCTCP window gives `e2e_gbps` at SRTT_US, in congestion avoidance.
fn seeded(cfg: AnnulusConfig, e2e_gbps: f64) -> Annulus {
    let mut a = Annulus::new(cfg);
    let cwnd = (e2e_gbps * GBPS * SRTT_US as f64 / 1e6).round() as u64;
    a.init(&FlowStart {
        now_us: 0,
        mss_bytes: MSS,
        init_cwnd_bytes: 10 * u64::from(MSS),
        ecn: Some(true),
        seed: Some(Seed { cwnd_bytes: cwnd, srtt_us: Some(SRTT_US), ..Seed::default() }),
    });
    a
}

/// Activates the near-source loop at `gbps` without cutting (qFb 0), target `target_gbps`.
fn force_ns(a: &mut Annulus, target_gbps: f64, gbps: f64) {
    a.ns.on_cnm(0, target_gbps * GBPS, false, 0);
    a.ns.set_rate_bytes_per_s(gbps * GBPS);
    a.update_min();
}

fn gbps(bytes_per_s: f64) -> f64 {
    bytes_per_s / GBPS
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

// ----- §13.2 the near-source loop -----

#[test]
fn t08_decrease_max() {
    let mut a = seeded(dc(AnnulusConfig::default()), 10.0);
    a.on_report(&cnm(1, 63));
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 10.0 * 65.0 / 128.0), "{}", gbps(a.ns.rate_bytes_per_s()));
    assert!(close(gbps(a.ns.target_bytes_per_s()), 10.0));
}

#[test]
fn t09_decrease_floor() {
    let mut a = seeded(dc(AnnulusConfig::default()), 10.0);
    for i in 0..200 {
        a.on_report(&cnm(i, 63));
    }
    assert!(close(a.ns.rate_bytes_per_s() * 8.0, qcn::MIN_RATE_BPS));
}

#[test]
fn t10_activation_uses_actual_rate() {
    let cfg = AnnulusConfig { rp_dc: ns_rp(qcn::GD, 20.0, false), ..dc(AnnulusConfig::default()) };
    let mut a = seeded(cfg, 2.0);
    a.on_report(&cnm(1, 32));
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 1.5), "{}", gbps(a.ns.rate_bytes_per_s()));
}

#[test]
fn t11_no_increase_without_acks() {
    let mut a = seeded(dc(AnnulusConfig::default()), 2.0);
    a.on_report(&cnm(1, 32));
    let cut = a.ns.rate_bytes_per_s();
    for t in 1..=1000 {
        a.on_report(&Report { now_us: t * 1000, mss_bytes: MSS, rtt: rtt(SRTT_US), ..Report::default() });
    }
    assert_eq!(a.ns.rate_bytes_per_s(), cut);
}

#[test]
fn t12_fast_recovery_sequence() {
    // Through the wrapper: TR = 10, CR = 5, E2E at 10 Gbit/s (so the 2x-min pause is at 10).
    let cfg = AnnulusConfig { rp_dc: ns_rp(qcn::GD, 20.0, false), ..dc(AnnulusConfig::default()) };
    let mut a = seeded(cfg, 10.0);
    force_ns(&mut a, 10.0, 5.0);
    for (t, expected) in [7.5, 8.75, 9.375, 9.6875, 9.84375].into_iter().enumerate() {
        a.on_report(&idle_acks(t as u64 + 1, qcn::BC_LIMIT_BYTES as u64));
        assert!(close(gbps(a.ns.rate_bytes_per_s()), expected), "{} vs {expected}", gbps(a.ns.rate_bytes_per_s()));
        assert!(close(gbps(a.ns.target_bytes_per_s()), 10.0));
    }
    // Active increase runs in half cycles (annulus.md §4.2.2): TR = 10 + R_AI after 75 KB more.
    a.on_report(&idle_acks(10, qcn::BC_LIMIT_BYTES as u64 / 2));
    assert!(close(a.ns.target_bytes_per_s() * 8.0, 10e9 + qcn::R_AI_BPS));
}

#[test]
fn t13_ack_batching_invariance() {
    let run = |chunk: u64| {
        let mut a = seeded(dc(AnnulusConfig::default()), 10.0);
        a.on_report(&cnm(1, 40));
        let total = 3_000_000u64;
        let mut sent = 0;
        let mut t = 2;
        while sent < total {
            let n = chunk.min(total - sent);
            a.on_report(&idle_acks(t, n));
            sent += n;
            t += 1;
        }
        (a.ns.rate_bytes_per_s(), a.ns.target_bytes_per_s(), a.ns.cycles(), a.ns.counted_bytes())
    };
    let one = run(3_000_000);
    assert_eq!(one, run(300_000));
    assert_eq!(one, run(1500));
    assert!(one.2 > 5, "the trajectory left fast recovery: {one:?}");
}

#[test]
fn t14_deactivate_at_line_rate() {
    let mut a = seeded(dc(AnnulusConfig::default()), 10.0);
    a.on_report(&cnm(1, 1));
    assert!(a.ns.active());
    let mut t = 2;
    while a.ns.active() && t < 100_000 {
        a.on_report(&idle_acks(t, 150_000));
        t += 1;
    }
    assert!(!a.ns.active(), "never recovered");
    assert_eq!(a.ns.rate_bytes_per_s(), f64::INFINITY);
    // The pacing the loop set is handed back: DCTCP is not paced.
    let act = a.on_report(&idle_acks(t, 1500));
    assert_eq!(act.pacing, None, "pacing released once, not repeated");
}

#[test]
fn t15_flow_isolation() {
    let mut a = seeded(dc(AnnulusConfig::default()), 5.0);
    let mut b = seeded(dc(AnnulusConfig::default()), 5.0);
    let before = b.state();
    a.on_report(&cnm(1, 50));
    assert!(a.ns.active());
    assert_eq!(b.state(), before);
    assert!(!b.ns.active());
    b.on_report(&idle_acks(2, 1500));
    assert!(!b.ns.active());
}

#[test]
fn t16_per_class_gd() {
    let cfg = AnnulusConfig { rp_wan: ns_rp(1.0 / 256.0, 10.0, false), ..AnnulusConfig::default() };
    let mut d = seeded(AnnulusConfig { class: Some(Class::Dc), ..cfg }, 4.0);
    let mut w = seeded(AnnulusConfig { class: Some(Class::Wan), e2e_wan: E2eKind::Cubic, ..cfg }, 4.0);
    d.on_report(&cnm(1, 32));
    w.on_report(&cnm(1, 32));
    let cut = |a: &Annulus| 1.0 - gbps(a.ns.rate_bytes_per_s()) / 4.0;
    assert!(close(cut(&d), 0.25), "{}", cut(&d));
    assert!(close(cut(&w), 0.125), "{}", cut(&w));
}

// ----- §13.3 the wrapper -----

fn transparent<A: Algorithm>(cfg: AnnulusConfig, mut bare: A, reports: &[Report]) -> Result<(), TestCaseError> {
    let mut ann = Annulus::new(cfg);
    let start = FlowStart::new(MSS, 10 * u64::from(MSS));
    prop_assert_eq!(ann.init(&start), bare.init(&start));
    for r in reports {
        let (x, y) = (ann.on_report(r), bare.on_report(r));
        prop_assert_eq!(x, y, "at {:?}", r);
        check_sane(x.cwnd_bytes.or(Some(ann.e2e().cwnd_bytes())), r.mss_bytes, &ann.state())?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// 17: with no CNMs Annulus is its end-to-end algorithm, action for action (design goal 1).
    #[test]
    fn t17_transparency_no_cnm_dctcp(rs in reports(120)) {
        transparent(dc(AnnulusConfig::default()), Dctcp::new(DctcpConfig::default()), &rs)?;
    }

    #[test]
    fn t17_transparency_no_cnm_cubic(rs in reports(120)) {
        let cfg = AnnulusConfig { class: Some(Class::Wan), e2e_wan: E2eKind::Cubic, ..AnnulusConfig::default() };
        transparent(cfg, Cubic::new(CubicConfig::default()), &rs)?;
    }

    #[test]
    fn t17_transparency_no_cnm_bbr(rs in reports(120)) {
        let cfg = AnnulusConfig { class: Some(Class::Wan), ..AnnulusConfig::default() };
        transparent(cfg, crate::bbr::Bbr::new(crate::bbr::BbrConfig::default()), &rs)?;
    }

    /// Never a NaN, an infinite or a sub-floor window, whatever the reports and CNMs.
    #[test]
    fn sane_under_arbitrary_reports_and_cnms(rs in reports(120), qfbs in prop::collection::vec(any::<u8>(), 120)) {
        for e2e in [E2eKind::Dctcp, E2eKind::Cubic, E2eKind::Bbr] {
            let mut a = Annulus::new(AnnulusConfig { e2e_wan: e2e, ..AnnulusConfig::default() });
            a.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
            for (i, r) in rs.iter().enumerate() {
                let mut r = r.clone();
                if qfbs[i] % 3 == 0 {
                    r.feedback = Some(NetworkFeedback::Qcn { fb_quantized: qfbs[i] % 64, q_off_bytes: 0, q_delta_bytes: 0 });
                }
                let act = a.on_report(&r);
                if let Some(Pacing::BytesPerSec(p)) = act.pacing {
                    prop_assert!(p.is_finite() && p > 0.0, "pacing {}", p);
                }
                check_sane(Some(a.e2e().cwnd_bytes()), r.mss_bytes, &a.state())?;
            }
        }
    }
}

#[test]
fn t17_auto_class_picks_by_first_rtt() {
    let start = FlowStart::new(MSS, 10 * u64::from(MSS));
    let mut a = Annulus::new(AnnulusConfig::default());
    a.init(&start);
    assert_eq!(a.class(), None);
    a.on_report(&Report { now_us: 10, mss_bytes: MSS, acked_bytes: 1500, rtt: rtt(20), ..Report::default() });
    assert_eq!(a.class(), Some(Class::Dc));
    let mut w = Annulus::new(AnnulusConfig::default());
    w.init(&start);
    w.on_report(&Report { now_us: 10, mss_bytes: MSS, acked_bytes: 1500, rtt: rtt(20_000), ..Report::default() });
    assert_eq!(w.class(), Some(Class::Wan));
}

#[test]
fn t18_window_to_rate() {
    let mut a = Annulus::new(dc(AnnulusConfig::default()));
    a.init(&FlowStart {
        seed: Some(Seed { cwnd_bytes: 100_000, srtt_us: Some(10_000), ..Seed::default() }),
        ..FlowStart::new(MSS, 15_000)
    });
    assert!(close(a.e2e_rate() * 8.0, 80e6), "{}", a.e2e_rate() * 8.0);
}

#[test]
fn t19_growth_pause_e2e() {
    // (a) NS binding at 1 Gbit/s, E2E at 1.8: ACKs that would take E2E to ~2.5 clamp it to 2.0.
    let mut a = seeded(dc(AnnulusConfig::default()), 1.8);
    force_ns(&mut a, 1.0, 1.0);
    let mut free = seeded(dc(AnnulusConfig::default()), 1.8);
    free.on_report(&acks(1, 300_000));
    assert!(gbps(free.e2e_rate()) > 2.4, "the bare loop would grow to {}", gbps(free.e2e_rate()));
    let act = a.on_report(&acks(1, 300_000));
    assert!(close(gbps(a.e2e_rate()), 2.0), "{}", gbps(a.e2e_rate()));
    assert!(close(act.cwnd_bytes.unwrap(), 2.0 * GBPS * SRTT_US as f64 / 1e6));
    // (b) at the cap, more growth-inducing ACKs move E2E only as far as 2x the minimum moves
    // (here the near-source loop's own active increase), never past it.
    for t in 2..20 {
        a.on_report(&acks(t, 300_000));
        free.on_report(&acks(t, 300_000));
        let cap = 2.0 * a.ns.rate_bytes_per_s();
        assert!(a.e2e_rate() <= cap * (1.0 + 1e-12), "report {t}: {} > {}", gbps(a.e2e_rate()), gbps(cap));
    }
    assert!(gbps(free.e2e_rate()) > 3.0);
    // (c) an ECN-driven DCTCP cut still applies in full while paused: cwnd × (1 − α/2).
    let marked = Report { ce_bytes: 1500, ce_pkts: 1, ece_acks: 1, ..acks(30, 1500) };
    let before = a.e2e_rate();
    let alpha = a.state().iter().find(|v| v.name == "alpha").unwrap().value;
    assert!(alpha > 0.0 && alpha < 1.0);
    a.on_report(&marked);
    assert!(close(a.e2e_rate() / before, 1.0 - alpha / 2.0), "{} vs 1 - {alpha}/2", a.e2e_rate() / before);
}

#[test]
fn t20_growth_pause_ns() {
    // E2E binding at 1 Gbit/s (and not growing: app-limited ACKs); NS active at 1.9 toward 3.
    let mut a = seeded(dc(AnnulusConfig::default()), 1.0);
    force_ns(&mut a, 3.0, 1.9);
    a.on_report(&idle_acks(1, qcn::BC_LIMIT_BYTES as u64));
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 2.0), "clamped to 2x min: {}", gbps(a.ns.rate_bytes_per_s()));
    let (ctr, stage) = (a.ns.counted_bytes(), a.ns.cycles());
    for t in 2..200 {
        a.on_report(&idle_acks(t, 100_000));
    }
    assert_eq!((a.ns.counted_bytes(), a.ns.cycles()), (ctr, stage), "paused ACKs were banked");
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 2.0));
    // E2E rises to 1.5 (the gate reopens: 2.0 < 3.0): cycles resume from the saved counter.
    let cwnd_15 = 1.5 * GBPS * SRTT_US as f64 / 1e6;
    if let E2e::Classified(_, E2eLoop::Dctcp(d)) = &mut a.e2e {
        *d = Dctcp::new(DctcpConfig::default());
        d.init(&FlowStart {
            seed: Some(Seed { cwnd_bytes: cwnd_15 as u64, srtt_us: Some(SRTT_US), ..Seed::default() }),
            ..FlowStart::new(MSS, 15_000)
        });
    }
    a.update_min();
    a.on_report(&idle_acks(300, qcn::BC_LIMIT_BYTES as u64 - ctr as u64));
    assert_eq!(a.ns.cycles(), stage + 1);
}

#[test]
fn t21_proportional_drop_ns_to_e2e() {
    // A cut by f = 0.6 needs qFb·G_d = 0.4: qFb 32 with G_d = 0.4/32.
    let cfg = AnnulusConfig { rp_dc: ns_rp(0.4 / 32.0, 10.0, false), ..dc(AnnulusConfig::default()) };
    let mut a = seeded(cfg, 4.0);
    force_ns(&mut a, 2.0, 2.0); // NS binding at 2, E2E at 4
    let e2e_before = a.e2e_rate();
    a.on_report(&cnm(1, 32));
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 1.2), "{}", gbps(a.ns.rate_bytes_per_s()));
    assert!(close(a.e2e_rate() / e2e_before, 0.6), "{}", a.e2e_rate() / e2e_before);
}

#[test]
fn t22_proportional_drop_e2e_to_ns() {
    // E2E binding at 1 Gbit/s, NS at 1.5: a DCTCP cut by 0.8 (alpha 0.4) scales NS by 0.8.
    let cfg = DctcpConfig { alpha_init: 0.4, ..DctcpConfig::default() };
    let mut a = seeded(dc(AnnulusConfig::default()), 1.0);
    if let E2e::Classified(_, E2eLoop::Dctcp(d)) = &mut a.e2e {
        *d = Dctcp::new(cfg);
        d.init(&FlowStart {
            seed: Some(Seed { cwnd_bytes: 12_500, srtt_us: Some(SRTT_US), ..Seed::default() }),
            ..FlowStart::new(MSS, 15_000)
        });
    }
    force_ns(&mut a, 1.5, 1.5);
    a.on_report(&Report { ce_bytes: 1500, ce_pkts: 1, ece_acks: 1, ..acks(1, 1500) });
    assert!(close(gbps(a.e2e_rate()), 0.8), "{}", gbps(a.e2e_rate()));
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 1.2), "{}", gbps(a.ns.rate_bytes_per_s()));
    // A non-binding E2E cut does not move NS: NS binding at 0.3, E2E cut from 0.8 to 0.64.
    a.ns.set_rate_bytes_per_s(0.3 * GBPS);
    a.update_min();
    // Marks past the end of the first cut's CWR period (A7): a new congestion event.
    a.on_report(&Report { ce_bytes: 15_000, ce_pkts: 10, ece_acks: 10, ..acks(10_000, 30_000) });
    assert!(gbps(a.e2e_rate()) < 0.79, "E2E did not cut: {}", gbps(a.e2e_rate()));
    assert!(close(gbps(a.ns.rate_bytes_per_s()), 0.3));
}

#[test]
fn t24_literal_gating_skips_decreases_too() {
    // Literal Algorithm 1: E2E at >= 2x min skips its whole update, ECN cut included.
    let cfg = AnnulusConfig { gating: Gating::Literal, ..dc(AnnulusConfig::default()) };
    let mut a = seeded(cfg, 4.0);
    force_ns(&mut a, 1.0, 1.0);
    let before = a.e2e_rate();
    a.on_report(&Report { ce_bytes: 1500, ce_pkts: 1, ece_acks: 1, ..acks(1, 1500) });
    assert_eq!(a.e2e_rate(), before);
    // The recommended gating applies it.
    let mut g = seeded(dc(AnnulusConfig::default()), 4.0);
    force_ns(&mut g, 1.0, 1.0);
    g.on_report(&Report { ce_bytes: 1500, ce_pkts: 1, ece_acks: 1, ..acks(1, 1500) });
    assert!(g.e2e_rate() < before);
}

#[test]
fn paced_at_the_minimum_while_the_near_source_loop_is_active() {
    let mut a = seeded(dc(AnnulusConfig::default()), 4.0);
    let act = a.on_report(&cnm(1, 32));
    assert_eq!(act.pacing, Some(Pacing::BytesPerSec(3.0 * GBPS)));
    assert_eq!(act.cwnd_bytes, Some(3.0 * GBPS * SRTT_US as f64 / 1e6), "the CNM cut the window too (rule 2)");
    let always = AnnulusConfig { pacing: PacingMode::Always, ..dc(AnnulusConfig::default()) };
    let mut p = seeded(always, 4.0);
    let act = p.on_report(&acks(1, 1500));
    assert!(matches!(act.pacing, Some(Pacing::BytesPerSec(r)) if r > 3.9 * GBPS));
}

#[test]
fn a_window_loop_is_paced_at_the_near_source_rate_not_at_its_own() {
    // The near-source loop active but not binding (R_C at the growth cap, 2× the window's rate):
    // pacing at the window's own cwnd/srtt would keep the window from filling, so DCTCP would never
    // count as window-limited and never grow. The pacer is R_C; the window limits the rest.
    let mut a = seeded(dc(AnnulusConfig::default()), 4.0);
    force_ns(&mut a, 8.0, 8.0);
    let act = a.on_report(&acks(1, 1500));
    let e2e = a.e2e_rate();
    assert!((gbps(e2e) - 4.0).abs() < 0.01, "DCTCP's rate {}", gbps(e2e));
    match act.pacing {
        Some(Pacing::BytesPerSec(r)) => {
            assert!(close(gbps(r), gbps(a.ns.rate_bytes_per_s())) && r > 1.5 * e2e, "paced at {}", gbps(r))
        }
        p => panic!("{p:?}"),
    }
    // The paced profile: the lower of R_C and the kernel's 1.2 × cwnd/srtt (Linux, congestion
    // avoidance), never cwnd/srtt itself.
    let always = AnnulusConfig { pacing: PacingMode::Always, ..dc(AnnulusConfig::default()) };
    let mut p = seeded(always, 4.0);
    let act = p.on_report(&acks(1, 1500));
    let kernel = 1.2 * p.e2e_rate();
    assert!(matches!(act.pacing, Some(Pacing::BytesPerSec(r)) if close(r, kernel)), "{:?} vs {kernel}", act.pacing);
    force_ns(&mut p, 4.5, 4.5);
    let act = p.on_report(&acks(2, 1500));
    assert!(matches!(act.pacing, Some(Pacing::BytesPerSec(r)) if close(gbps(r), 4.5)), "{:?}", act.pacing);
    // BBR sets a pacing rate of its own: there the pacer is the minimum.
    let mut b = seeded(AnnulusConfig { class: Some(Class::Wan), ..AnnulusConfig::default() }, 4.0);
    b.on_report(&cnm(1, 32));
    let act = b.on_report(&acks(2, 1500));
    assert_eq!(act.pacing, Some(Pacing::BytesPerSec(b.min_rate)));
}

#[test]
fn the_optional_timer_recovers_a_flow_that_acknowledges_nothing() {
    // Without a timer (the paper) recovery waits for acknowledged bytes: none, no recovery.
    let mut plain = seeded(dc(AnnulusConfig::default()), 4.0);
    plain.on_report(&cnm(1, 32));
    let cut = plain.ns.rate_bytes_per_s();
    plain.on_report(&idle_acks(100_000, 0));
    assert_eq!(plain.ns.rate_bytes_per_s(), cut);
    // With 802.1Qau's 15 ms timer: one increase event per 15 ms after the CNM (fast recovery
    // halves the gap to R_T each time), then per 7.5 ms in active increase.
    let timed = AnnulusConfig { ns_timer_us: 15_000.0, ..dc(AnnulusConfig::default()) };
    let mut t = seeded(timed, 4.0);
    t.on_report(&cnm(1, 32));
    assert_eq!(t.ns.rate_bytes_per_s(), cut);
    let target = t.ns.target_bytes_per_s();
    t.on_report(&idle_acks(15_000, 0));
    assert_eq!(t.ns.cycles(), 0, "the first expiry is 15 ms after the CNM");
    t.on_report(&idle_acks(15_001, 0));
    assert_eq!(t.ns.cycles(), 1);
    assert!(close(t.ns.rate_bytes_per_s(), (cut + target) / 2.0));
    t.on_report(&idle_acks(15_001 + 4 * 15_000 + 2 * 7_500, 0));
    assert_eq!(t.ns.cycles(), 7, "4 more fast-recovery periods of 15 ms, then 2 of 7.5 ms");
    // A CNM restarts the timer.
    t.on_report(&cnm(100_000, 1));
    t.on_report(&idle_acks(114_000, 0));
    assert_eq!(t.ns.cycles(), 0);
    // A report after a very long silence runs a bounded number of expiries: enough to climb to
    // the growth cap (2× DCTCP's rate), where growth pauses.
    t.on_report(&idle_acks(u64::MAX / 2, 0));
    assert!(close(t.ns.rate_bytes_per_s(), 2.0 * t.e2e_rate()), "{} vs {}", t.ns.rate_bytes_per_s(), t.e2e_rate());
}

#[test]
fn without_the_near_source_loop_cnms_change_nothing() {
    let cfg = AnnulusConfig { near_source: false, ..dc(AnnulusConfig::default()) };
    let mut a = seeded(cfg, 4.0);
    let mut bare = seeded(dc(AnnulusConfig::default()), 4.0);
    let act = a.on_report(&cnm(1, 63));
    assert_eq!(act, bare.on_report(&Report { feedback: None, ..cnm(1, 63) }));
    assert!(!a.ns.active());
}
