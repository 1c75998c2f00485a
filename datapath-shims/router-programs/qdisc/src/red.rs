//! RED-style ECN marking, the switch side (the congestion point, CP) of DCQCN: Zhu et al.,
//! "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1 and Fig. 5, with
//! the parameters of §5 (K_min = 5 KB, K_max = 200 KB, P_max = 1 %).
//!
//! On the arrival of an ECT packet, with q the *instantaneous* egress queue it finds in bytes
//! (not counting itself; DCQCN marks on the instantaneous queue, not RED's EWMA average):
//!
//!   q ≤ K_min          → no mark
//!   K_min < q < K_max  → CE with probability P_max·(q − K_min)/(K_max − K_min)
//!   q ≥ K_max          → CE
//!
//! so the probability ramps linearly to P_max just below K_max and jumps to 1 at K_max (Fig. 5).
//! [`RedAtDeparture`] applies the same rule when a packet leaves, to the queue it leaves behind,
//! as the HPCC authors' ns-3 switch does (`switch-node.cc`, `SwitchNotifyDequeue`): the mark then
//! reports the queue as it is now rather than as it was one queueing delay ago, which matters
//! when the queue is megabytes deep.
//! Not-ECT packets pass unmarked (they are tail-dropped only at the buffer limit). The draws come
//! from a seeded SplitMix64 stream ([`crate::rng`]), one draw per ECT arrival inside the ramp
//! only, so the same seed and the same arrivals give the same marks.

use crate::droptail::{DropTailWith, OnArrival};
use crate::rng::{Draw, SeedableRng, SplitMix64};
use crate::{Departure, Ecn, Fifo, Limit, Nanos, Outputs, Packet, ParamError, Qdisc};

/// DCQCN paper §5: K_min = 5 KB.
pub const DCQCN_PAPER_K_MIN_BYTES: u64 = 5_000;

/// DCQCN paper §5: K_max = 200 KB.
pub const DCQCN_PAPER_K_MAX_BYTES: u64 = 200_000;

/// DCQCN paper §5: P_max = 1 %.
pub const DCQCN_PAPER_P_MAX: f64 = 0.01;

/// Marking parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedParams {
    /// K_min: at or below this queue (bytes) nothing is marked.
    pub k_min_bytes: u64,
    /// K_max: at or above this queue (bytes) every ECT packet is marked.
    pub k_max_bytes: u64,
    /// P_max: the marking probability the ramp reaches just below K_max, in (0, 1].
    pub p_max: f64,
    /// Seed of the marking random source (runs are reproducible).
    pub seed: u64,
}

impl Default for RedParams {
    /// The DCQCN paper's §5 parameters, seed 1.
    fn default() -> Self {
        RedParams {
            k_min_bytes: DCQCN_PAPER_K_MIN_BYTES,
            k_max_bytes: DCQCN_PAPER_K_MAX_BYTES,
            p_max: DCQCN_PAPER_P_MAX,
            seed: 1,
        }
    }
}

impl RedParams {
    /// Checks 0 < K_min < K_max and 0 < P_max ≤ 1.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.k_min_bytes == 0 {
            return Err(ParamError::new("k_min_bytes", "K_min must be > 0 bytes"));
        }
        if self.k_max_bytes <= self.k_min_bytes {
            return Err(ParamError::new(
                "k_max_bytes",
                format!("K_max must exceed K_min ({} B), got {} B", self.k_min_bytes, self.k_max_bytes),
            ));
        }
        if !(self.p_max > 0.0 && self.p_max <= 1.0) {
            return Err(ParamError::new("p_max", format!("P_max must be in (0, 1], got {}", self.p_max)));
        }
        Ok(())
    }

    /// As [`RedParams::validate`], and K_min below a queue limit of `limit`, or it could never
    /// mark.
    pub fn validate_within(&self, limit: Limit) -> Result<(), ParamError> {
        self.validate()?;
        match limit {
            Limit::Bytes(max) if self.k_min_bytes >= max => Err(ParamError::new(
                "k_min_bytes",
                format!("K_min ({} B) must be below the buffer limit ({max} B), or it can never mark", self.k_min_bytes),
            )),
            _ => Ok(()),
        }
    }

    /// The marking probability for an ECT packet arriving to a queue of `bytes` (excluding it).
    pub fn probability(&self, bytes: u64) -> f64 {
        if bytes <= self.k_min_bytes {
            0.0
        } else if bytes >= self.k_max_bytes {
            1.0
        } else {
            self.p_max * (bytes - self.k_min_bytes) as f64 / (self.k_max_bytes - self.k_min_bytes) as f64
        }
    }
}

/// The decision for one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedDecision {
    Pass,
    Marked,
}

/// The marking rule on its own, for callers that keep their own queue (the simulator).
#[derive(Debug, Clone)]
pub struct RedMarker {
    params: RedParams,
    rng: SplitMix64,
}

impl RedMarker {
    pub fn new(params: RedParams) -> Result<RedMarker, ParamError> {
        params.validate()?;
        Ok(RedMarker { params, rng: SplitMix64::seed_from_u64(params.seed) })
    }

    pub fn params(&self) -> &RedParams {
        &self.params
    }

    /// Decides for a packet that sees a queue of `bytes` bytes (excluding itself: the queue it
    /// joins, or the one it leaves behind), marking it CE in place when it is ECT and the draw
    /// says so.
    pub fn decide<P: Packet>(&mut self, packet: &mut P, bytes: u64) -> RedDecision {
        if !packet.ecn().is_ect() {
            return RedDecision::Pass;
        }
        let mark = if bytes <= self.params.k_min_bytes {
            false
        } else if bytes >= self.params.k_max_bytes {
            true
        } else {
            self.rng.next_f64() < self.params.probability(bytes)
        };
        if mark {
            packet.set_ecn(Ecn::Ce);
            RedDecision::Marked
        } else {
            RedDecision::Pass
        }
    }
}

impl<P: Packet> OnArrival<P> for RedMarker {
    const NAME: &'static str = "red";

    fn admit(&mut self, _now: Nanos, packet: &mut P, fifo: &Fifo<P>, _out: &mut Outputs<P>) -> bool {
        self.decide(packet, fifo.len_bytes());
        true
    }
}

/// A drop-tail FIFO with RED-style ECN marking at enqueue (DCQCN's CP).
pub type Red<P> = DropTailWith<P, RedMarker>;

impl<P: Packet> Red<P> {
    pub fn new(limit: Limit, params: RedParams) -> Result<Red<P>, ParamError> {
        params.validate_within(limit)?;
        Ok(DropTailWith::with_rule(limit, RedMarker::new(params)?))
    }
}

/// A drop-tail FIFO with RED-style ECN marking at dequeue, on the bytes still queued behind the
/// departing packet (the HPCC authors' ns-3 switch).
#[derive(Debug)]
pub struct RedAtDeparture<P> {
    fifo: Fifo<P>,
    marker: RedMarker,
}

impl<P: Packet> RedAtDeparture<P> {
    pub fn new(limit: Limit, params: RedParams) -> Result<RedAtDeparture<P>, ParamError> {
        params.validate_within(limit)?;
        Ok(RedAtDeparture { fifo: Fifo::new(limit), marker: RedMarker::new(params)? })
    }
}

impl<P: Packet> Qdisc<P> for RedAtDeparture<P> {
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        self.fifo.push_or_drop(now, packet, out);
    }

    fn dequeue(&mut self, _now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        let mut d = self.fifo.pop()?;
        self.marker.decide(&mut d.packet, self.fifo.len_bytes());
        Some(d)
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        "red-at-departure"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::Qdisc;
    use crate::MTU_BYTES;

    const K_MIN: u64 = 100_000;
    const K_MAX: u64 = 400_000;

    fn marker(p_max: f64, seed: u64) -> RedMarker {
        RedMarker::new(RedParams { k_min_bytes: K_MIN, k_max_bytes: K_MAX, p_max, seed }).unwrap()
    }

    /// Marks among `n` ECT arrivals that each find a queue of `bytes`.
    fn marks_at(m: &mut RedMarker, bytes: u64, n: usize) -> usize {
        (0..n)
            .filter(|_| {
                let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
                let d = m.decide(&mut p, bytes);
                assert_eq!(d == RedDecision::Marked, p.ecn == Ecn::Ce, "decision and codepoint agree");
                d == RedDecision::Marked
            })
            .count()
    }

    #[test]
    fn no_marks_at_or_below_k_min() {
        let mut m = marker(1.0, 3);
        for bytes in [0, 1, K_MIN / 2, K_MIN] {
            assert_eq!(marks_at(&mut m, bytes, 10_000), 0, "queue {bytes} B");
        }
    }

    #[test]
    fn every_ect_packet_marked_at_or_above_k_max() {
        // Even with a tiny P_max: the ramp stops at K_max and the probability jumps to 1.
        let mut m = marker(0.001, 3);
        for bytes in [K_MAX, K_MAX + 1, 10 * K_MAX] {
            assert_eq!(marks_at(&mut m, bytes, 10_000), 10_000, "queue {bytes} B");
        }
        // Outside the ramp no draw is taken: `m` is still at the start of its stream.
        let below = marks_at(&mut m, K_MAX - 1, 10_000);
        assert_eq!(below, marks_at(&mut marker(0.001, 3), K_MAX - 1, 10_000));
        assert!(below < 100, "just below K_max the probability is ≈ P_max = 0.1 %: {below} of 10,000");
    }

    /// At the midpoint the probability is P_max/2 = 0.1. Over n = 100,000 Bernoulli draws the
    /// standard deviation of the fraction is √(0.1·0.9/n) ≈ 0.00095; the tolerance 0.005 is > 5σ.
    #[test]
    fn midpoint_marks_p_max_over_two() {
        let p_max = 0.2;
        let n = 100_000;
        let mut m = marker(p_max, 11);
        let frac = marks_at(&mut m, (K_MIN + K_MAX) / 2, n) as f64 / n as f64;
        assert!((frac - p_max / 2.0).abs() < 0.005, "marked fraction {frac}, want {} ± 0.005", p_max / 2.0);
        // A quarter of the way up the ramp: P_max/4 = 0.05 (σ ≈ 0.0007).
        let frac = marks_at(&mut m, K_MIN + (K_MAX - K_MIN) / 4, n) as f64 / n as f64;
        assert!((frac - p_max / 4.0).abs() < 0.004, "marked fraction {frac}, want {} ± 0.004", p_max / 4.0);
    }

    #[test]
    fn probability_is_the_linear_ramp() {
        let p = RedParams { k_min_bytes: K_MIN, k_max_bytes: K_MAX, p_max: 0.2, seed: 1 };
        assert_eq!(p.probability(K_MIN), 0.0);
        assert!((p.probability(250_000) - 0.1).abs() < 1e-12);
        assert!((p.probability(K_MAX - 1) - 0.2).abs() < 1e-6);
        assert_eq!(p.probability(K_MAX), 1.0);
    }

    #[test]
    fn not_ect_is_never_marked_nor_dropped() {
        let mut m = marker(1.0, 3);
        for bytes in [0, 250_000, K_MAX, 10 * K_MAX] {
            let mut p = TestPacket::new(MTU_BYTES, Ecn::NotEct);
            assert_eq!(m.decide(&mut p, bytes), RedDecision::Pass);
            assert_eq!(p.ecn, Ecn::NotEct);
        }
        // Through the queue too: nothing dropped below the limit.
        let mut q: Red<TestPacket> =
            Red::new(Limit::Unlimited, RedParams { k_min_bytes: 1000, k_max_bytes: 2000, p_max: 1.0, seed: 1 }).unwrap();
        let mut out = Outputs::new();
        for _ in 0..10 {
            q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::NotEct), &mut out);
        }
        assert!(out.is_empty());
        while let Some(d) = q.dequeue(0, &mut out) {
            assert_eq!(d.packet.ecn, Ecn::NotEct);
        }
    }

    #[test]
    fn parameters_are_validated() {
        let ok = RedParams { k_min_bytes: K_MIN, k_max_bytes: K_MAX, p_max: 0.2, seed: 1 };
        assert!(ok.validate().is_ok());
        assert!(RedParams::default().validate().is_ok());
        let err = |p: RedParams| RedMarker::new(p).unwrap_err().param;
        assert_eq!(err(RedParams { k_min_bytes: 0, ..ok }), "k_min_bytes");
        assert_eq!(err(RedParams { k_max_bytes: K_MIN, ..ok }), "k_max_bytes");
        assert_eq!(err(RedParams { k_max_bytes: K_MIN - 1, ..ok }), "k_max_bytes");
        for p_max in [0.0, -0.1, 1.01, f64::NAN] {
            assert_eq!(err(RedParams { p_max, ..ok }), "p_max", "P_max {p_max}");
        }
        assert!(RedMarker::new(RedParams { p_max: 1.0, ..ok }).is_ok());
        let r: Result<Red<TestPacket>, _> = Red::new(Limit::Bytes(K_MIN), ok);
        assert_eq!(r.unwrap_err().param, "k_min_bytes");
    }

    #[test]
    fn same_seed_same_marks() {
        let run = |seed: u64| -> Vec<bool> {
            let mut m = marker(0.5, seed);
            (0..2000u64)
                .map(|i| {
                    let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect1);
                    m.decide(&mut p, K_MIN + (i * 997) % (K_MAX - K_MIN)) == RedDecision::Marked
                })
                .collect()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43), "a different seed gives different marks");
    }

    #[test]
    fn queue_marks_on_the_backlog_it_finds() {
        // K_min = 2 packets, K_max = 4 (1500 B each): the first three arrivals find 0, 1500 and
        // 3000 B (≤ K_min) and pass; the fourth is in the ramp; the rest find ≥ K_max.
        let params = RedParams { k_min_bytes: 3000, k_max_bytes: 6000, p_max: 0.5, seed: 5 };
        let mut q: Red<TestPacket> = Red::new(Limit::Unlimited, params).unwrap();
        let mut out = Outputs::new();
        for _ in 0..8 {
            q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
        }
        let ce: Vec<bool> = (0..8).map(|_| q.dequeue(0, &mut out).unwrap().packet.ecn == Ecn::Ce).collect();
        assert_eq!(&ce[..3], &[false, false, false], "found 0, 1500, 3000 B: ≤ K_min");
        assert_eq!(&ce[4..], &[true, true, true, true], "found ≥ 6000 B: ≥ K_max");
        assert_eq!(q.name(), "red");
    }

    #[test]
    fn marking_at_departure_sees_the_queue_left_behind() {
        // Six packets queued, K_min 3 packets, K_max 4 (no ramp between): at arrival the fifth and sixth
        // find 4 and 5 ahead (marked); at departure the first and second leave 5 and 4 behind.
        let params = RedParams { k_min_bytes: 3 * MTU_BYTES as u64, k_max_bytes: 4 * MTU_BYTES as u64, p_max: 1.0, seed: 1 };
        let marks = |q: &mut dyn Qdisc<TestPacket>| -> Vec<bool> {
            let mut out = Outputs::new();
            for _ in 0..6 {
                q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
            }
            (0..6).map(|_| q.dequeue(0, &mut out).unwrap().packet.ecn == Ecn::Ce).collect()
        };
        let mut arrival: Red<TestPacket> = Red::new(Limit::Unlimited, params).unwrap();
        let mut departure: RedAtDeparture<TestPacket> = RedAtDeparture::new(Limit::Unlimited, params).unwrap();
        assert_eq!(marks(&mut arrival), [false, false, false, false, true, true]);
        assert_eq!(marks(&mut departure), [true, true, false, false, false, false]);
        assert!(RedAtDeparture::<TestPacket>::new(Limit::Unlimited, RedParams { p_max: 0.0, ..params }).is_err());
    }
}
