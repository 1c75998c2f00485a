//! ABC (Accel-Brake Control) sender: an explicit window controller for paths whose bottleneck
//! router marks every packet "accelerate" or "brake" (Goyal et al., NSDI 2020; thesis §2.3–2.4;
//! specs/abc.md §3).
//!
//! Model: the router picks the fraction f of accelerates so that, through ACK clocking, the
//! arrival rate one RTT later equals its target rate. The sender follows blindly, per acknowledged
//! segment: accelerate → w + 1 + 1/w, brake → w − 1 + 1/w (Eq. 2.3; the 1/w is additive increase
//! for fairness). A window's worth of ACKs with accelerate fraction f takes w to 2fw + 1, and a
//! steady f holds w at 1/(1 − 2f).
//!
//! Encoding: only the "proxied" encoding of §4–5 — the router marks brake as CE, and a
//! DCTCP-style receiver echoes each CE precisely — so the CE-marked delivered segments
//! (`Report::ce_pkts`) are brakes and the other delivered segments accelerates. ABC's native
//! encoding (ECT(1) accelerate, ECT(0) brake, echoed in the NS bit) is not implemented, and the
//! router (ccp-qdisc `abc`) no longer offers it: a `Report` counts CE echoes only and has no
//! field for an ECT(0) echo, the NS bit is AccECN's now, and this kernel cannot negotiate AccECN,
//! whose counters could carry one. A router writing ECT(0) brakes would send marks no sender
//! reads. The receiver must echo precisely: with a stock classic-ECN receiver, ECE repeats from a
//! mark until the sender's CWR, so about an RTT of segments per mark read as brakes and the
//! window collapses (ccp-lab's CE echo, `lab/src/bpf/ce_echo.bpf.c`, is such a receiver).
//!
//! Assumption: no classic-ECN bottleneck on the path (§5's deployment caveat (b); §4's proxied
//! networks). A CE from a classic-ECN AQM is indistinguishable from a brake, so it is read as
//! one, and the Cubic window below never sees it, unlike §3.4's w_nonabc, which reacts to classic
//! ECN. With such an AQM as the bottleneck, the window stops growing only once about half the
//! packets are marked (a window's worth of ACKs takes w to 2fw + 1), and w_cubic, which reacts to
//! loss alone, never backs off.
//!
//! Coexistence (§3.4): a second, Cubic window reacts to losses (never to marks, which are brakes);
//! the flow uses min(w_abc, w_cubic), and both windows are capped at 2·in-flight + 5 packets so the
//! window that is not in control cannot run away. w_abc ignores loss. There is no slow start for
//! w_abc: it starts at the initial window and accelerates at most double it per RTT.
//!
//! Reports, not ACKs: the datapath folds a report interval's ACKs into counts, A accelerated and
//! B braked segments (N = A + B), and the order of the marks is lost, so the per-segment rule
//! cannot be replayed; folding per ACK would need the marks in order from the datapath (a
//! contract change). `accel_brake` walks the chord instead: N steps of w ← w + (A − B)/N + 1/w,
//! the net floored at min_cwnd. That is exact when a report of at most `MAX_STEPS` segments
//! carries one kind of mark. With both, orders differ in where the 1/w terms are taken and in
//! which brakes a run spends against the floor. In packets, with w the window at the start of
//! the report and m = min_cwnd, the chord ends within
//!
//! ```text
//! ρ + (A·B + N·ρ) / (lo_o·lo_c),   ρ = (m − (w − B))⁺,   lo_o = max(m, w − B),
//!                                  lo_c = max(m, w − (B − A)⁺)
//! ```
//!
//! of the per-segment result in every order. Derivation: the ±1 steps sum to A − B in every
//! order, so only the floor's raises and the 1/w terms differ. A walk reflected at m is raised by
//! (m − its lowest point)⁺ in all, and no walk goes below w − B, so each path's raises total
//! within [0, ρ]. Let D_i be how far the chord lies above an order's walk before segment i: all
//! brakes first gives the pointwise largest D, all accelerates first the smallest, each summing
//! to ±A·B over the report, and the raises move D by at most ρ. The gap e between the summed 1/w
//! terms evolves as e ← e·(1 − c_i) − D_i·c_i, where c_i = 1/(w_chord·w_order) lies in
//! (0, 1/(lo_o·lo_c)] (lo_o and lo_c are the lowest windows the order and the chord can reach,
//! and lo_o·lo_c ≥ 1), so |e| ≤ max(ΣD⁺, ΣD⁻)/(lo_o·lo_c). Away from the floor (w − B ≥ m) the
//! bound is A·B / ((w − B)·(w − (B − A)⁺)): 0.5 packets for w = 100, A = B = 50, of which all
//! brakes first reaches 0.38; at the default interval, a report of an eighth of a steady window,
//! below 0.005 packets, against that report's 1/8 packet of additive increase. Reports of more
//! than `MAX_STEPS` segments walk the chord in `MAX_STEPS` steps of k = N/`MAX_STEPS` segments,
//! which adds at most N·k·(1 + 1/lo_c)/lo_c². The paper reacts per ACK, so the flow asks for a
//! report every eighth of an RTT (§10.1).

use std::sync::Arc;

use crate::cubic::{Cubic, CubicConfig};
use crate::window::RenoBased;
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Pacing, Param, ParamError, Params,
    Report, ReportPolicy, StateVar,
};

/// Most chord steps per report: beyond this many segments a step covers several, which bounds the
/// per-report cost at a price the header bounds.
const MAX_STEPS: f64 = 1024.0;
/// Pacing rate multiplier over cwnd/sRTT when pacing is on (the artifact's ≈ 2·cwnd/RTT, §3.5).
const PACING_GAIN: f64 = 2.0;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "abc",
    summary: "ABC accel-brake sender: w ± 1 + 1/w per accelerate/brake (brake = CE), min with a Cubic window",
    reference: "Goyal et al., ABC, NSDI 2020; Goyal thesis §2.3–2.4 (specs/abc.md §3–5)",
    params: AbcConfig::PARAMS,
    build,
};

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct AbcConfig {
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS.with_doc("initial w_abc and w_cubic (§3.5: IW = 10, no slow start)"),
        pub min_cwnd_pkts: f64 = Param::float(
            5.0,
            Bound::Inclusive(1.0),
            Bound::Inclusive(100.0),
            "packets",
            "floor of w_abc under brakes (§3.5: the artifact's 5; the agent never goes below 2 MSS anyway)",
        ),
        pub cap_extra_pkts: f64 = Param::float(
            5.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(100.0),
            "packets",
            "both windows are capped at 2·in-flight + this (§3.4; thesis 0, artifact 5; §14.11 recommends 5)",
        ),
        pub coexist: bool = Param::bool(true, "run the Cubic window for non-ABC bottlenecks and use min(w_abc, w_cubic) (§3.4)"),
        pub pacing: bool = Param::bool(false, "pace at 2·cwnd/sRTT (§3.5: optional; ABC is ACK-clocked)"),
        pub report_rtts: f64 = Param::float(
            0.125,
            Bound::Inclusive(0.1),
            Bound::Inclusive(1.0),
            "RTTs",
            "report interval in RTTs (§10.1: every ACK, or at least every 1/8 RTT)",
        ),
    }
}

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let cfg = AbcConfig::from_params(p)?;
    if cfg.min_cwnd_pkts > cfg.init_cwnd_pkts {
        return Err(p.invalid("min_cwnd_pkts", format!("must not exceed init_cwnd_pkts ({})", cfg.init_cwnd_pkts)));
    }
    Ok(Arc::new(cfg))
}

impl AlgorithmFactory for AbcConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Abc::new(*self))
    }
}

pub struct Abc {
    cfg: AbcConfig,
    mss: f64,
    /// The accel/brake window, bytes.
    w_abc: f64,
    /// The legacy window for non-ABC bottlenecks (reacts to loss only).
    cubic: Cubic,
    srtt_us: u64,
}

impl Abc {
    pub fn new(cfg: AbcConfig) -> Self {
        // CE means brake here, never classic congestion (no classic-ECN bottleneck is assumed,
        // see the header): the Cubic window must not see it.
        let cubic = Cubic::new(CubicConfig { init_cwnd_pkts: cfg.init_cwnd_pkts, ecn: false, ..CubicConfig::default() });
        Abc { cfg, mss: 1448.0, w_abc: 0.0, cubic, srtt_us: 0 }
    }

    /// Eq. 2.3 over `segments` acknowledged segments of which a fraction `brake_frac` were
    /// braked, along the chord (see the header for why, and for its error against the unknown
    /// order): per segment w ← w + (1 − 2·brake_frac) + 1/w, with 1/w taken on the window before
    /// the step as the equation reads (§3.6's pseudocode divides by the updated window; the spec's
    /// T5 vectors — 20.704 after ten accelerates from 10 — follow the equation), and a net brake
    /// floored at min_cwnd before the increase is added.
    fn accel_brake(&mut self, segments: f64, brake_frac: f64) {
        if segments <= 0.0 {
            return;
        }
        let steps = segments.ceil().clamp(1.0, MAX_STEPS);
        let per_step = segments / steps;
        let floor = self.cfg.min_cwnd_pkts * self.mss;
        let mut w = self.w_abc;
        for _ in 0..steps as usize {
            let increase = self.mss * per_step * self.mss / w;
            let net = per_step * (1.0 - 2.0 * brake_frac) * self.mss;
            w += net;
            if net < 0.0 {
                w = w.max(floor);
            }
            w += increase;
        }
        self.w_abc = w;
    }

    fn cwnd(&self) -> f64 {
        if self.cfg.coexist {
            self.w_abc.min(self.cubic.cwnd_bytes())
        } else {
            self.w_abc
        }
    }

    fn action(&self) -> Action {
        let cwnd = self.cwnd();
        let mut a = Action::cwnd(cwnd);
        if self.cfg.pacing && self.srtt_us > 0 {
            a = a.with_pacing(Pacing::BytesPerSec(PACING_GAIN * cwnd * 1e6 / self.srtt_us as f64));
        }
        a
    }
}

impl Algorithm for Abc {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        // A seeded flow keeps its window in both controllers; a new one starts at IW (no slow start).
        self.w_abc = match &start.seed {
            Some(seed) => seed.cwnd_bytes as f64,
            None => self.cfg.init_cwnd_pkts * self.mss,
        }
        .max(self.cfg.min_cwnd_pkts * self.mss);
        self.srtt_us = start.seed.as_ref().and_then(|s| s.srtt_us).unwrap_or(0);
        self.cubic.init(start);
        self.action().with_report(ReportPolicy::PerRtt { rtts: self.cfg.report_rtts })
    }

    fn on_report(&mut self, r: &Report) -> Action {
        if r.mss_bytes > 0 {
            self.mss = r.mss();
        }
        if let Some(rtt) = r.rtt {
            self.srtt_us = rtt.srtt_us;
        }
        let (segments, braked) = r.delivered_and_marked_segments();
        self.accel_brake(segments, if segments > 0.0 { braked / segments } else { 0.0 });

        // The marks were brakes, not congestion (the header's no-classic-ECN-bottleneck assumption).
        let legacy = Report { ce_bytes: 0, ce_pkts: 0, ece_acks: 0, ..r.clone() };
        self.cubic.on_report(&legacy);

        let cap = (2.0 * r.inflight_bytes as f64 / self.mss + self.cfg.cap_extra_pkts) * self.mss;
        self.w_abc = self.w_abc.min(cap).max(self.cfg.min_cwnd_pkts * self.mss);
        self.cubic.cap_cwnd(cap);
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.cwnd() },
            StateVar { name: "w_abc_bytes", value: self.w_abc },
            StateVar { name: "w_cubic_bytes", value: self.cubic.cwnd_bytes() },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_sane, reports};
    use ccp_contract::RttStats;
    use proptest::prelude::*;

    const MSS: u32 = 1000;
    const MSS_F: f64 = MSS as f64;

    fn abc(cfg: AbcConfig) -> Abc {
        let mut a = Abc::new(cfg);
        a.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        a
    }

    /// One report acknowledging `segments`, `braked` of them CE, with plenty in flight.
    fn rep(segments: f64, braked: f64) -> Report {
        Report {
            now_us: 1,
            mss_bytes: MSS,
            acked_bytes: (segments * MSS_F) as u64,
            ce_bytes: (braked * MSS_F) as u64,
            // Byte-only reports (fractional segments): packet counts are left at zero.
            inflight_bytes: 1_000_000,
            rtt: Some(RttStats {
                min_us: 100_000,
                max_us: 100_000,
                last_us: 100_000,
                srtt_us: 100_000,
                mean_us: 100_000,
                samples: 1,
            }),
            ..Report::default()
        }
    }

    fn pure() -> AbcConfig {
        AbcConfig { coexist: false, min_cwnd_pkts: 1.0, ..AbcConfig::default() }
    }

    #[test]
    fn t5_ten_accelerates_and_ten_brakes() {
        // w = 10 packets, ten 1-MSS accelerate ACKs, per-ACK 1/w terms: 20.704 (specs/abc.md §15 T5).
        let mut a = abc(pure());
        for _ in 0..10 {
            a.on_report(&rep(1.0, 0.0));
        }
        // To the spec's three decimals (20.70435…).
        assert!((a.w_abc / MSS_F - 20.704).abs() < 5e-4, "{}", a.w_abc / MSS_F);
        // The same ten ACKs in one report give the same window (marks do not change order).
        let mut b = abc(pure());
        b.on_report(&rep(10.0, 0.0));
        assert!((b.w_abc - a.w_abc).abs() < 1e-6);

        // Ten brakes without a floor: 1.955 packets.
        let mut a = abc(pure());
        for _ in 0..10 {
            a.on_report(&rep(1.0, 1.0));
        }
        assert!((a.w_abc / MSS_F - 1.955).abs() < 5e-4, "{}", a.w_abc / MSS_F);
        // With min_cwnd = 5: floor, then additive increase ≈ 5.2.
        let mut a = abc(AbcConfig { coexist: false, ..AbcConfig::default() });
        for _ in 0..10 {
            a.on_report(&rep(1.0, 1.0));
        }
        assert!((a.w_abc / MSS_F - 5.2).abs() < 0.01, "{}", a.w_abc / MSS_F);
    }

    #[test]
    fn t5_byte_counting_two_mss_ack_equals_two_one_mss_acks() {
        let mut one = abc(pure());
        one.on_report(&rep(2.0, 0.0));
        let mut two = abc(pure());
        two.on_report(&rep(1.0, 0.0));
        two.on_report(&rep(1.0, 0.0));
        assert!((one.w_abc - two.w_abc).abs() / two.w_abc < 0.01);
    }

    #[test]
    fn a_window_of_acks_with_accelerate_fraction_f_gives_2fw_plus_1() {
        for f in [0.25, 0.5, 0.75] {
            let mut a = abc(AbcConfig { coexist: false, min_cwnd_pkts: 1.0, init_cwnd_pkts: 100.0, ..AbcConfig::default() });
            a.w_abc = 100.0 * MSS_F;
            a.on_report(&rep(100.0, 100.0 * (1.0 - f)));
            let expect = 2.0 * f * 100.0 + 1.0;
            assert!((a.w_abc / MSS_F - expect).abs() / expect < 0.02, "f={f}: {} vs {expect}", a.w_abc / MSS_F);
        }
    }

    /// Eq. 2.3 segment by segment in a known order (`true` = brake), in packets: what the sender
    /// would do if the datapath kept the marks' order.
    fn per_segment(mut w: f64, brakes: &[bool], floor: f64) -> f64 {
        for &brake in brakes {
            let increase = 1.0 / w;
            w = if brake { (w - 1.0).max(floor) } else { w + 1.0 };
            w += increase;
        }
        w
    }

    /// The chord: one report of `a` accelerates and `b` brakes from `w` packets.
    fn chord(w: f64, a: usize, b: usize, floor: f64) -> f64 {
        let mut x = abc(AbcConfig { coexist: false, min_cwnd_pkts: floor, ..AbcConfig::default() });
        x.w_abc = w * MSS_F;
        let n = (a + b) as f64;
        x.accel_brake(n, b as f64 / n);
        x.w_abc / MSS_F
    }

    /// The header's bound on |chord − per-segment| over every order, packets.
    fn order_error_bound(w: f64, a: usize, b: usize, floor: f64) -> f64 {
        let (a, b) = (a as f64, b as f64);
        let n = a + b;
        let rho = (floor - (w - b)).max(0.0);
        let lo_order = floor.max(w - b);
        let lo_chord = floor.max(w - (b - a).max(0.0));
        // Walking the chord in steps of several segments, for reports longer than MAX_STEPS.
        let coarse_steps = if n > MAX_STEPS { n * (n / MAX_STEPS) * (1.0 + 1.0 / lo_chord) / (lo_chord * lo_chord) } else { 0.0 };
        rho + (a * b + n * rho) / (lo_order * lo_chord) + coarse_steps
    }

    /// `a` accelerates and `b` brakes (`true`), one kind after the other.
    fn marks(a: usize, b: usize, brakes_first: bool) -> Vec<bool> {
        let (first, second) = if brakes_first { (b, a) } else { (a, b) };
        let mut m = vec![brakes_first; first];
        m.extend(std::iter::repeat_n(!brakes_first, second));
        m
    }

    /// Checks the chord against a shuffled order and both extreme orders (all brakes first, all
    /// accelerates first), and that a report of one kind of mark is exact.
    fn check_orders(w: f64, a: usize, b: usize, floor: f64, shuffled: &[bool]) -> Result<(), TestCaseError> {
        let agg = chord(w, a, b, floor);
        let bound = order_error_bound(w, a, b, floor);
        for order in [shuffled, &marks(a, b, true)[..], &marks(a, b, false)[..]] {
            let exact = per_segment(w, order, floor);
            let err = (agg - exact).abs();
            prop_assert!(err <= bound + 1e-9 * exact, "w {w} A {a} B {b} m {floor}: off by {err}, bound {bound}");
            // A report longer than MAX_STEPS takes steps of several segments, so even one kind of
            // mark is only within the coarse-step bound, not exact.
            if (a == 0 || b == 0) && (a + b) as f64 <= MAX_STEPS {
                prop_assert!(err <= 1e-9 * exact, "one kind of mark must be exact: off by {err}");
            }
        }
        Ok(())
    }

    /// Report sizes of up to `max_marks` of each kind, a floor, a window at or above it (a third
    /// of the cases start at the floor), and the marks in a random order.
    fn report_in_random_order(max_marks: usize, max_above: f64) -> impl Strategy<Value = (f64, usize, usize, f64, Vec<bool>)> {
        (1.0..10.0f64, prop_oneof![Just(0.0), 0.0..20.0f64, 0.0..max_above], 0..=max_marks, 0..=max_marks).prop_flat_map(
            |(floor, above, a, b)| {
                let mut m = vec![false; a];
                m.extend(std::iter::repeat_n(true, b));
                (Just(floor + above), Just(a), Just(b), Just(floor), Just(m).prop_shuffle())
            },
        )
    }

    proptest! {
        #[test]
        fn a_report_in_any_order_ends_within_the_bound_of_the_chord(
            (w, a, b, floor, order) in report_in_random_order(300, 400.0)
        ) {
            prop_assume!(a + b > 0);
            check_orders(w, a, b, floor, &order)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn a_report_longer_than_max_steps_ends_within_the_bound_of_the_chord(
            (w, a, b, floor, order) in report_in_random_order(3000, 3000.0)
        ) {
            prop_assume!(a + b > 0);
            check_orders(w, a, b, floor, &order)?;
        }
    }

    #[test]
    fn the_worst_order_reaches_most_of_the_order_bound() {
        // If the bound were loose, an aggregation off by a fraction of it would still pass the
        // property above; the extreme orders show it is nearly reached, away from the floor
        // (w − B ≥ m, where the window spends its time) and against it.
        for (w, a, b, floor, at_least) in [
            (100.0, 50, 50, 1.0, 0.7),
            (100.0, 30, 10, 1.0, 0.8),
            (100.0, 10, 30, 1.0, 0.75),
            (400.0, 50, 50, 1.0, 0.9),
            (5.0, 2, 2, 5.0, 0.6),
        ] {
            let bound = order_error_bound(w, a, b, floor);
            let agg = chord(w, a, b, floor);
            let worst = [true, false]
                .into_iter()
                .map(|brakes_first| (agg - per_segment(w, &marks(a, b, brakes_first), floor)).abs())
                .fold(0.0, f64::max);
            assert!(worst >= at_least * bound, "w {w} A {a} B {b} m {floor}: worst order {worst}, bound {bound}");
        }
        // The header's example: 0.5 packets, of which all brakes first reaches 0.38.
        assert!((order_error_bound(100.0, 50, 50, 1.0) - 0.5).abs() < 1e-12);
        let brakes_first = (chord(100.0, 50, 50, 1.0) - per_segment(100.0, &marks(50, 50, true), 1.0)).abs();
        assert!((brakes_first - 0.38).abs() < 0.005, "{brakes_first}");
    }

    #[test]
    fn t6_steady_state_window_is_one_over_one_minus_two_f() {
        // Per-ACK simulation: ACKs arrive one at a time, accelerate with a token bucket at rate f.
        for (f, expect) in [(0.45, 10.0), (0.475, 20.0), (0.49, 50.0)] {
            let mut a = abc(AbcConfig { coexist: false, min_cwnd_pkts: 1.0, ..AbcConfig::default() });
            let mut token = 0.0;
            let mut sum = 0.0;
            let n = 200_000;
            for i in 0..n {
                token += f;
                let accel = token >= 1.0;
                if accel {
                    token -= 1.0;
                }
                a.on_report(&rep(1.0, if accel { 0.0 } else { 1.0 }));
                if i >= n / 2 {
                    sum += a.w_abc / MSS_F;
                }
            }
            let mean = sum / (n / 2) as f64;
            assert!((mean - expect).abs() / expect < 0.05, "f={f}: mean w {mean}, expected {expect}");
        }
    }

    #[test]
    fn t8_effective_window_is_the_minimum_and_loss_only_hits_cubic() {
        let mut a = abc(AbcConfig::default());
        // Accelerates grow w_abc; w_cubic slow-starts on the same ACKs.
        for _ in 0..5 {
            a.on_report(&rep(10.0, 0.0));
        }
        let mut lossy = rep(0.0, 0.0);
        lossy.lost_pkts = 3;
        lossy.now_us = 2;
        let w_abc_before = a.w_abc;
        let act = a.on_report(&lossy);
        assert_eq!(a.w_abc, w_abc_before, "loss does not touch w_abc");
        assert!(a.cubic.cwnd_bytes() < w_abc_before, "loss cut the Cubic window");
        assert_eq!(act.cwnd_bytes, Some(a.w_abc.min(a.cubic.cwnd_bytes())));
        assert_eq!(act.cwnd_bytes, Some(a.cubic.cwnd_bytes()));
    }

    #[test]
    fn t8_brakes_are_not_congestion_for_the_cubic_window() {
        let mut a = abc(AbcConfig::default());
        let before = a.cubic.cwnd_bytes();
        a.on_report(&rep(10.0, 10.0));
        assert!(a.cubic.cwnd_bytes() >= before, "a brake (CE) must not cut w_cubic");
        assert!(a.w_abc < 10.0 * MSS_F, "but it brakes w_abc");
    }

    #[test]
    fn t8_windows_are_capped_at_twice_in_flight_plus_five() {
        let mut a = abc(AbcConfig::default());
        // A wired bottleneck keeps 20 packets in flight while the ABC router says accelerate.
        for i in 0..50 {
            let mut r = rep(20.0, 0.0);
            r.inflight_bytes = 20 * u64::from(MSS);
            r.now_us = 1 + i * 100_000;
            a.on_report(&r);
            assert!(a.w_abc <= 45.0 * MSS_F + 1e-6, "w_abc {} over the cap", a.w_abc / MSS_F);
            assert!(a.cubic.cwnd_bytes() <= 45.0 * MSS_F + 1e-6);
        }
    }

    #[test]
    fn sacked_segments_and_their_brakes_count_once() {
        // Loss recovery: 10 segments SACKed, all braked, nothing cumulatively acked yet.
        let mut a = abc(pure());
        a.w_abc = 40.0 * MSS_F;
        let mut sacked = rep(0.0, 0.0);
        sacked.sacked_pkts = 10;
        sacked.sacked_bytes = 10 * u64::from(MSS);
        sacked.ce_pkts = 10;
        sacked.ce_bytes = 10 * u64::from(MSS);
        a.on_report(&sacked);
        let after_brakes = a.w_abc / MSS_F;
        assert!((after_brakes - (40.0 - 10.0 + 10.0 / 35.0)).abs() < 0.05, "{after_brakes}");
        // The retransmission fills the hole: one new segment delivered, 11 segments' bytes
        // cumulatively acked. Only the new segment counts (an accelerate), not the SACKed ten.
        let mut cum = rep(11.0, 0.0);
        cum.acked_pkts = 1;
        a.on_report(&cum);
        let grown = a.w_abc / MSS_F - after_brakes;
        assert!((grown - (1.0 + 1.0 / after_brakes)).abs() < 1e-3, "grew {grown} packets");
        // Packet counts win over bytes, and more CE than segments is clamped.
        let mut r = rep(4.0, 0.0);
        r.acked_pkts = 2;
        r.ce_pkts = 3;
        assert_eq!(r.delivered_and_marked_segments(), (2.0, 2.0));
        assert_eq!(rep(2.5, 1.0).delivered_and_marked_segments(), (2.5, 1.0));
    }

    #[test]
    fn asks_for_reports_every_eighth_rtt() {
        let mut a = Abc::new(AbcConfig::default());
        let act = a.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        assert_eq!(act.report, Some(ReportPolicy::PerRtt { rtts: 0.125 }));
    }

    #[test]
    fn pacing_is_twice_cwnd_over_srtt() {
        let mut a = abc(AbcConfig { pacing: true, coexist: false, ..AbcConfig::default() });
        let act = a.on_report(&rep(0.0, 0.0));
        let Some(Pacing::BytesPerSec(r)) = act.pacing else { panic!("{act:?}") };
        assert!((r - 2.0 * a.w_abc / 0.1).abs() < 1e-6);
    }

    proptest! {
        #[test]
        fn never_nan_or_below_floor(rs in reports(64), coexist in any::<bool>(), pacing in any::<bool>()) {
            let mut a = Abc::new(AbcConfig { coexist, pacing, ..AbcConfig::default() });
            let act = a.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
            check_sane(act.cwnd_bytes, MSS, &a.state())?;
            for r in &rs {
                let act = a.on_report(r);
                check_sane(act.cwnd_bytes, r.mss_bytes, &a.state())?;
                if let Some(Pacing::BytesPerSec(rate)) = act.pacing {
                    prop_assert!(rate.is_finite() && rate > 0.0, "pacing {rate}");
                }
            }
        }
    }
}
