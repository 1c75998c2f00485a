//! The QCN congestion point (CP): specs/dc.md §4.2, §4.6, §4.7, §8 A20–A22, §9.3 and
//! specs/annulus.md §4.1, §6.1, §13.1.
//!
//! On a sampled arrival the CP computes F_b = Q_off + w·Q_δ (positive = congested, the thesis's
//! and Annulus's sign), with Q the instantaneous backlog excluding the arrival and Q_old the
//! backlog at the previous sample (updated on every sample). If F_b > 0 it sends a congestion
//! notification (CNM) carrying F_b quantized to 6 bits to the sampled packet's source. Here the
//! CNM is returned as a value in [`Outputs::notifications`]; the router puts it on the wire
//! ([`CongestionNotification::to_cnm`], the format is `ccp_cnm_wire`'s) and the simulator
//! schedules it.
//!
//! Quantities are in bytes internally; "packets" in the specs are 1500 B.

use ccp_cnm_wire::{Cnm, CNM_MAX_SAMPLE_LEN, FLAG_STANDARD_QUANTIZATION};

use crate::dctcp::{StepDecision, StepMarker};
use crate::droptail::{DropTailWith, OnArrival};
use crate::rng::{Draw, SeedableRng, SplitMix64};
use crate::{Fifo, Limit, Nanos, Outputs, Packet, ParamError, MTU_BYTES};

/// Largest 6-bit feedback value (what a CNM carries).
pub const QFB_MAX: u8 = ccp_cnm_wire::QFB_MAX;

/// 802.1Qau's sampling table: the next sampling interval in bytes by ⌊qFb/8⌋ (annulus.md §4.1
/// [Q]; dc.md writes 18.5 KB for the last bucket, annulus.md 18.75 KB = 150/8, which we use).
pub const QCN_SAMPLING_TABLE_BYTES: [u64; 8] = [150_000, 75_000, 50_000, 37_500, 30_000, 25_000, 21_500, 18_750];

/// The table interval is randomised uniformly within ±15 % (dc.md §4.7).
pub const QCN_SAMPLING_JITTER: f64 = 0.15;

/// How arrivals are chosen for sampling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Bernoulli with this probability per arriving packet (the thesis model: p_s = 1 %).
    Probability(f64),
    /// One sample every this many arriving bytes, the countdown carrying across packets
    /// (the Annulus testbed: 15 KB).
    Bytes(u64),
    /// 802.1Qau's table indexed by the last quantized feedback, randomised ±15 %.
    Table,
}

/// How F_b is mapped to the 6-bit value (dc.md §8 A20, annulus.md §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantization {
    /// Thesis mode: F_b in 1500 B packets, ⌈F_b⌉ capped at 63 (with G_d = 1/128 a value of 64
    /// would halve the rate).
    Packets,
    /// Standard mode: F_b saturated at F_b,max = Q_eq·(1 + 2w) and mapped linearly:
    /// clamp(⌈63·F_b/F_b,max⌉, 1, 63).
    Standard,
}

/// Congestion point parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QcnParams {
    /// Q_eq, the backlog the CP steers to. Default 22 packets (33,000 B; dc.md Fig 5.6).
    pub q_eq_bytes: u64,
    /// w, the weight on the queue derivative. Default 2.
    pub w: f64,
    pub sampling: Sampling,
    pub quantization: Quantization,
    /// Seed of the sampling random source (runs are reproducible).
    pub seed: u64,
}

impl Default for QcnParams {
    fn default() -> Self {
        QcnParams {
            q_eq_bytes: 22 * u64::from(MTU_BYTES),
            w: 2.0,
            sampling: Sampling::Probability(0.01),
            quantization: Quantization::Packets,
            seed: 1,
        }
    }
}

impl QcnParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if !(self.w >= 0.0 && self.w.is_finite()) {
            return Err(ParamError::new("w", format!("must be a finite number ≥ 0, got {}", self.w)));
        }
        match self.sampling {
            Sampling::Probability(p) if !(p > 0.0 && p <= 1.0) => {
                Err(ParamError::new("sampling", format!("the sampling probability must be in (0, 1], got {p}")))
            }
            Sampling::Bytes(0) => Err(ParamError::new("sampling", "the sampling interval must be > 0 bytes")),
            _ if self.quantization == Quantization::Standard && self.q_eq_bytes == 0 => {
                Err(ParamError::new("q_eq", "standard quantization needs Q_eq > 0 (F_b,max = Q_eq·(1+2w))"))
            }
            _ => Ok(()),
        }
    }

    /// F_b,max = Q_eq·(1 + 2w), bytes.
    pub fn fb_max_bytes(&self) -> f64 {
        self.q_eq_bytes as f64 * (1.0 + 2.0 * self.w)
    }
}

/// A congestion notification for the source of a sampled packet.
#[derive(Debug, Clone, PartialEq)]
pub struct CongestionNotification<K> {
    /// The sampled packet's feedback key (its source).
    pub key: K,
    /// The quantized feedback, 1..=63.
    pub qfb: u8,
    /// F_b unquantized, bytes.
    pub fb_bytes: f64,
    /// Q − Q_eq, bytes.
    pub q_off_bytes: i64,
    /// Q − Q_old, bytes.
    pub q_delta_bytes: i64,
    /// When the sample was taken.
    pub sampled_at: Nanos,
    /// How `qfb` was quantized (a reaction point's gain depends on it).
    pub quantization: Quantization,
}

fn saturate_i32(v: f64) -> i32 {
    if v.is_nan() {
        0
    } else {
        v.round().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
    }
}

impl<K> CongestionNotification<K> {
    /// The CNM that carries this notification about the packet whose first bytes are
    /// `sampled_packet`, from congestion point `cpid`.
    pub fn to_cnm(&self, cpid: u32, sampled_packet: &[u8]) -> Cnm {
        let clip = |v: i64| saturate_i32(v as f64);
        Cnm {
            qfb: self.qfb,
            flags: match self.quantization {
                Quantization::Standard => FLAG_STANDARD_QUANTIZATION,
                Quantization::Packets => 0,
            },
            fb_bytes: saturate_i32(self.fb_bytes),
            q_off_bytes: clip(self.q_off_bytes),
            q_delta_bytes: clip(self.q_delta_bytes),
            cpid,
            timestamp_ns: self.sampled_at,
            sample: sampled_packet[..sampled_packet.len().min(CNM_MAX_SAMPLE_LEN)].to_vec(),
        }
    }
}

/// Counters a CP keeps (annulus.md §8.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpStats {
    pub samples: u64,
    pub notifications: u64,
    pub qfb_histogram: Vec<u64>,
}

/// Quantizes F_b (bytes) to the 6-bit value; `None` when F_b ≤ 0 (no CNM: QCN has no positive
/// feedback).
pub fn quantize(fb_bytes: f64, quantization: Quantization, fb_max_bytes: f64) -> Option<u8> {
    if fb_bytes.is_nan() || fb_bytes <= 0.0 {
        return None;
    }
    let q = match quantization {
        Quantization::Packets => (fb_bytes / f64::from(MTU_BYTES)).ceil(),
        Quantization::Standard => (f64::from(QFB_MAX) * fb_bytes.min(fb_max_bytes) / fb_max_bytes).ceil(),
    };
    Some(q.clamp(1.0, f64::from(QFB_MAX)) as u8)
}

/// The congestion point on its own, for callers that keep their own queue (the simulator).
#[derive(Debug, Clone)]
pub struct CongestionPoint {
    params: QcnParams,
    q_old: u64,
    bytes_to_sample: f64,
    rng: SplitMix64,
    stats: CpStats,
}

impl CongestionPoint {
    pub fn new(params: QcnParams) -> Result<CongestionPoint, ParamError> {
        params.validate()?;
        let mut cp = CongestionPoint {
            params,
            q_old: 0,
            bytes_to_sample: 0.0,
            rng: SplitMix64::seed_from_u64(params.seed),
            stats: CpStats { qfb_histogram: vec![0; usize::from(QFB_MAX) + 1], ..CpStats::default() },
        };
        cp.bytes_to_sample = cp.next_interval(0);
        Ok(cp)
    }

    pub fn stats(&self) -> &CpStats {
        &self.stats
    }

    fn next_interval(&mut self, qfb: u8) -> f64 {
        match self.params.sampling {
            Sampling::Probability(_) => 0.0,
            Sampling::Bytes(m) => m as f64,
            Sampling::Table => {
                let base = QCN_SAMPLING_TABLE_BYTES[usize::from(qfb / 8).min(QCN_SAMPLING_TABLE_BYTES.len() - 1)] as f64;
                base * (1.0 - QCN_SAMPLING_JITTER + 2.0 * QCN_SAMPLING_JITTER * self.rng.next_f64())
            }
        }
    }

    /// Decides whether this arrival is a sample.
    fn sample(&mut self, len: u32) -> bool {
        match self.params.sampling {
            Sampling::Probability(p) => self.rng.next_f64() < p,
            Sampling::Bytes(_) | Sampling::Table => {
                self.bytes_to_sample -= f64::from(len);
                self.bytes_to_sample <= 0.0
            }
        }
    }

    /// A packet arrives to a queue holding `backlog_bytes` (excluding it): samples it per the
    /// sampling mode and returns a notification for its source if F_b > 0.
    pub fn on_arrival<P: Packet>(
        &mut self,
        now: Nanos,
        packet: &P,
        backlog_bytes: u64,
    ) -> Option<CongestionNotification<P::FeedbackKey>> {
        if !self.sample(packet.len_bytes()) {
            return None;
        }
        let cnm = self.take_sample(now, backlog_bytes, || packet.feedback_key());
        let qfb = cnm.as_ref().map_or(0, |c| c.qfb);
        let next = self.next_interval(qfb);
        self.bytes_to_sample += next;
        cnm
    }

    /// The sample itself: F_b from the current and the previous sampled backlog.
    fn take_sample<K>(&mut self, now: Nanos, q: u64, key: impl FnOnce() -> K) -> Option<CongestionNotification<K>> {
        self.stats.samples += 1;
        let q_off = q as i64 - self.params.q_eq_bytes as i64;
        let q_delta = q as i64 - self.q_old as i64;
        self.q_old = q;
        let fb = q_off as f64 + self.params.w * q_delta as f64;
        let qfb = quantize(fb, self.params.quantization, self.params.fb_max_bytes())?;
        self.stats.notifications += 1;
        self.stats.qfb_histogram[usize::from(qfb)] += 1;
        Some(CongestionNotification {
            key: key(),
            qfb,
            fb_bytes: fb,
            q_off_bytes: q_off,
            q_delta_bytes: q_delta,
            sampled_at: now,
            quantization: self.params.quantization,
        })
    }
}

/// What the Annulus switch does with an arrival: a QCN congestion point samples it and,
/// optionally, DCTCP step marking marks (or drops) it on the same queue.
#[derive(Debug)]
pub struct QcnArrival {
    cp: CongestionPoint,
    ecn: Option<StepMarker>,
}

impl<P: Packet> OnArrival<P> for QcnArrival {
    const NAME: &'static str = "qcn";

    fn admit(&mut self, now: Nanos, packet: &mut P, fifo: &Fifo<P>, out: &mut Outputs<P>) -> bool {
        // Sampled before the enqueue-or-drop decision, against the backlog the packet finds.
        if let Some(cnm) = self.cp.on_arrival(now, packet, fifo.len_bytes()) {
            out.notifications.push(cnm);
        }
        match self.ecn {
            Some(marker) => marker.on_arrival(packet, fifo.len_packets(), fifo.len_bytes()) != StepDecision::Drop,
            None => true,
        }
    }
}

/// A drop-tail FIFO with a QCN congestion point on arrivals and, optionally, DCTCP step marking
/// on the same queue (the Annulus switch configuration: QCN for the near-source loop, ECN for the
/// end-to-end one).
pub type Qcn<P> = DropTailWith<P, QcnArrival>;

impl<P: Packet> Qcn<P> {
    pub fn new(limit: Limit, params: QcnParams, ecn: Option<StepMarker>) -> Result<Qcn<P>, ParamError> {
        Ok(DropTailWith::with_rule(limit, QcnArrival { cp: CongestionPoint::new(params)?, ecn }))
    }

    pub fn stats(&self) -> &CpStats {
        self.rule().cp.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::Ecn;
    use crate::Qdisc;

    /// The first 60 bytes of a TCP/IPv4 packet 10.77.0.1:40000 → 10.77.0.2:5201.
    fn tcp_packet() -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x45;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        p[20..22].copy_from_slice(&40_000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p
    }

    // annulus.md §13.1 test 6: sample a TCP/IPv4 packet, parse the CNM at the host, recover the
    // exact 5-tuple and qFb.
    #[test]
    fn a_notification_travels_whole_in_its_cnm() {
        let n = CongestionNotification {
            key: (),
            qfb: 17,
            fb_bytes: 25_123.4,
            q_off_bytes: -300,
            q_delta_bytes: 12_000,
            sampled_at: 123_456_789,
            quantization: Quantization::Packets,
        };
        let cnm = n.to_cnm(1, &tcp_packet());
        assert_eq!(cnm.sample.len(), 60);
        let mut buf = Vec::new();
        cnm.encode(&mut buf);
        assert_eq!(buf.len(), ccp_cnm_wire::CNM_HEADER_LEN + 60);
        let back = Cnm::decode(&buf).unwrap();
        assert_eq!(back, cnm);
        assert_eq!((back.qfb, back.fb_bytes, back.q_off_bytes, back.q_delta_bytes), (17, 25_123, -300, 12_000));
        assert_eq!((back.cpid, back.timestamp_ns, back.flags), (1, 123_456_789, 0));
        let f = back.flow().unwrap();
        assert_eq!((f.src, f.dst), ("10.77.0.1".parse().unwrap(), "10.77.0.2".parse().unwrap()));
        assert_eq!((f.protocol, f.src_port, f.dst_port), (6, 40_000, 5201));
    }

    #[test]
    fn long_samples_are_truncated_to_64_bytes() {
        let n = CongestionNotification {
            key: (),
            qfb: 1,
            fb_bytes: 1.0,
            q_off_bytes: 0,
            q_delta_bytes: 0,
            sampled_at: 0,
            quantization: Quantization::Standard,
        };
        let cnm = n.to_cnm(7, &[0x45; 1500]);
        assert_eq!(cnm.sample.len(), CNM_MAX_SAMPLE_LEN);
        assert_eq!(cnm.flags, FLAG_STANDARD_QUANTIZATION);
    }

    const PKT: u64 = MTU_BYTES as u64;

    fn every_packet() -> QcnParams {
        QcnParams { sampling: Sampling::Probability(1.0), ..QcnParams::default() }
    }

    /// Takes a sample at backlog `q` (bytes) after priming Q_old with a sample at `q_old`.
    fn sample_pair(params: QcnParams, q_old: u64, q: u64) -> Option<CongestionNotification<u32>> {
        let mut cp = CongestionPoint::new(params).unwrap();
        let p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
        cp.on_arrival(0, &p, q_old);
        cp.on_arrival(1, &p, q)
    }

    // T-Q1 (dc.md §9.3): Q_eq = 22, w = 2, thesis quantization in packets.
    #[test]
    fn t_q1_fb_and_quantization_vectors() {
        let p = every_packet();
        let c = sample_pair(p, 26 * PKT, 30 * PKT).unwrap();
        assert_eq!(c.qfb, 16);
        assert_eq!(c.fb_bytes, 16.0 * PKT as f64);
        assert_eq!((c.q_off_bytes, c.q_delta_bytes), (8 * PKT as i64, 4 * PKT as i64));
        // Q = 22.5, Q_old = 22.4 → F_b = 0.7 → 1.
        assert_eq!(sample_pair(p, 33_600, 33_750).unwrap().qfb, 1);
        // Q = 20, Q_old = 25 → F_b = −12 → nothing.
        assert!(sample_pair(p, 25 * PKT, 20 * PKT).is_none());
        // Q = 60, Q_old = 30 → F_b = 98 → 63.
        assert_eq!(sample_pair(p, 30 * PKT, 60 * PKT).unwrap().qfb, 63);
    }

    #[test]
    fn t_q1_q_old_follows_every_sample() {
        let mut cp = CongestionPoint::new(every_packet()).unwrap();
        let p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
        // Q_old starts at 0: Q = 5 → F_b = −17 + 2·5 = −7, nothing sent, but Q_old becomes 5.
        assert!(cp.on_arrival(0, &p, 5 * PKT).is_none());
        // Q = 20 → F_b = −2 + 2·15 = 28.
        assert_eq!(cp.on_arrival(1, &p, 20 * PKT).unwrap().qfb, 28);
        // Q_old = 20; Q = 20 → F_b = −2: nothing, and Q_old stays 20.
        assert!(cp.on_arrival(2, &p, 20 * PKT).is_none());
        // Q = 23 → F_b = 1 + 2·3 = 7.
        assert_eq!(cp.on_arrival(3, &p, 23 * PKT).unwrap().qfb, 7);
        assert_eq!(cp.stats().samples, 4);
        assert_eq!(cp.stats().notifications, 2);
    }

    // annulus.md §13.1 test 1: Q = 150 KB, Q_eq = 100 KB, Q_old = 120 KB, w = 2 → F_b = 110 KB.
    #[test]
    fn annulus_fb_formula() {
        let params = QcnParams { q_eq_bytes: 100_000, quantization: Quantization::Standard, ..every_packet() };
        let c = sample_pair(params, 120_000, 150_000).unwrap();
        assert_eq!(c.fb_bytes, 110_000.0);
        // F_b,max = 500 KB → ⌈63·110/500⌉ = ⌈13.86⌉ = 14.
        assert_eq!(c.qfb, 14);
    }

    // annulus.md §13.1 test 5: quantization is monotone, saturates at 63, never sends 0.
    #[test]
    fn quantize_is_monotone_and_never_zero() {
        let max = QcnParams { quantization: Quantization::Standard, ..QcnParams::default() }.fb_max_bytes();
        assert_eq!(max, 33_000.0 * 5.0);
        let mut last = 0;
        for i in 1..=400_000u32 {
            let fb = f64::from(i) * 0.5;
            let q = quantize(fb, Quantization::Standard, max).unwrap();
            assert!(q >= last && (1..=63).contains(&q));
            last = q;
        }
        assert_eq!(quantize(max, Quantization::Standard, max), Some(63));
        assert_eq!(quantize(10.0 * max, Quantization::Standard, max), Some(63));
        assert_eq!(quantize(1e-9, Quantization::Standard, max), Some(1));
        assert_eq!(quantize(1e-9, Quantization::Packets, max), Some(1));
        assert_eq!(quantize(0.0, Quantization::Standard, max), None);
        assert_eq!(quantize(-5.0, Quantization::Packets, max), None);
    }

    // annulus.md §13.1 test 3: one sample per 15 KB, the countdown carrying across packets.
    #[test]
    fn sampling_fixed_15kb() {
        let params = QcnParams { sampling: Sampling::Bytes(15_000), ..QcnParams::default() };
        let count = |sizes: &mut dyn Iterator<Item = u32>| {
            let mut cp = CongestionPoint::new(params).unwrap();
            for len in sizes {
                cp.on_arrival(0, &TestPacket::new(len, Ecn::Ect0), 0);
            }
            cp.stats().samples
        };
        assert_eq!(count(&mut std::iter::repeat_n(1500, 1000)), 100);
        // Mixed sizes with the same 1.5 MB total: still 100.
        assert_eq!(count(&mut [500u32, 1000, 1500, 3000].iter().copied().cycle().take(1000)), 100);
    }

    // annulus.md §13.1 test 4: the table's mean interval per bucket, within the jitter bounds.
    #[test]
    fn sampling_table_intervals() {
        for (bucket, &base) in QCN_SAMPLING_TABLE_BYTES.iter().enumerate() {
            let mut cp = CongestionPoint::new(QcnParams { sampling: Sampling::Table, seed: 9, ..QcnParams::default() }).unwrap();
            let qfb = bucket as u8 * 8;
            let n = 2000;
            let intervals: Vec<f64> = (0..n).map(|_| cp.next_interval(qfb)).collect();
            let mean = intervals.iter().sum::<f64>() / f64::from(n);
            let b = base as f64;
            assert!(intervals.iter().all(|&i| i >= b * (1.0 - QCN_SAMPLING_JITTER) && i <= b * (1.0 + QCN_SAMPLING_JITTER)));
            assert!((mean - b).abs() < 0.02 * b, "bucket {bucket}: mean {mean}");
        }
    }

    #[test]
    fn bernoulli_sampling_rate() {
        let mut cp = CongestionPoint::new(QcnParams::default()).unwrap();
        let p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
        for _ in 0..100_000 {
            cp.on_arrival(0, &p, 0);
        }
        let s = cp.stats().samples as f64;
        assert!((s - 1000.0).abs() < 150.0, "{s}");
    }

    // annulus.md §13.1 test 7: a queue ramping up below Q_eq gets a CNM once w·ΔQ > Q_eq − Q.
    #[test]
    fn derivative_reacts_before_threshold() {
        let mut cp = CongestionPoint::new(every_packet()).unwrap();
        let p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
        cp.on_arrival(0, &p, 10 * PKT);
        // ΔQ = 5, Q_eq − Q = 7: 10 > 7 → CNM while still below Q_eq.
        let c = cp.on_arrival(1, &p, 15 * PKT).unwrap();
        assert_eq!(c.qfb, 3);
        assert!(c.q_off_bytes < 0);
    }

    #[test]
    fn qdisc_sends_to_the_sampled_source_and_can_also_step_mark() {
        use crate::dctcp::{NonEctPolicy, Threshold};
        let marker = StepMarker { k: Threshold::Packets(2), non_ect: NonEctPolicy::Pass };
        let mut q: Qcn<TestPacket> = Qcn::new(Limit::Packets(100), every_packet(), Some(marker)).unwrap();
        let mut out = Outputs::new();
        for src in 0..40u32 {
            q.enqueue(u64::from(src), TestPacket { len: MTU_BYTES, ecn: Ecn::Ect0, src }, &mut out);
        }
        // Backlog 30 packets at arrival 30 → F_b = 8 + 2 = 10 > 0.
        assert!(out.notifications.iter().any(|c| c.key == 30 && c.qfb == 10));
        // F_b = (n − 22) + 2·1 for the n-th arrival: positive from n = 21 on.
        assert!(out.notifications.iter().all(|c| c.key >= 21));
        assert_eq!(out.notifications.len(), 19);
        let mut marked = 0;
        while let Some(d) = q.dequeue(100, &mut out) {
            if d.packet.ecn == Ecn::Ce {
                marked += 1;
            }
        }
        assert_eq!(marked, 37, "arrivals finding more than 2 packets are marked");
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = QcnParams { sampling: Sampling::Probability(0.0), ..QcnParams::default() }.validate().unwrap_err();
        assert_eq!(e.param, "sampling");
        let e = QcnParams { w: -1.0, ..QcnParams::default() }.validate().unwrap_err();
        assert_eq!(e.param, "w");
    }
}
