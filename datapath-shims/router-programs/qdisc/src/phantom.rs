//! HULL's phantom queue (specs/dc.md §3.2, §8 A14, §9.2): a byte counter in series with the
//! egress link that drains at γ·C and marks ECT packets when the *virtual* backlog ahead of them
//! exceeds a threshold. It stores no packets and never delays or drops: it signals on link
//! utilisation approaching γ·C, before any real queue forms, leaving bandwidth headroom.

use crate::{secs, Departure, Ecn, Fifo, Limit, Nanos, Outputs, Packet, ParamError, Qdisc};

/// Phantom queue parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhantomParams {
    /// Drain rate of the virtual queue, bytes per second (γ·C; 950 Mbit/s on 1 Gbit/s links).
    pub drain_bytes_per_sec: f64,
    /// Mark when the virtual backlog ahead of a packet exceeds this (1 KB baseline).
    pub mark_threshold_bytes: f64,
    /// Optional cap on the counter so sustained overload cannot grow it without bound (not in
    /// the thesis; `None` = no cap).
    pub cap_bytes: Option<f64>,
}

impl PhantomParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if !(self.drain_bytes_per_sec > 0.0 && self.drain_bytes_per_sec.is_finite()) {
            return Err(ParamError::new("drain", "the phantom drain rate must be a positive finite rate"));
        }
        if !(self.mark_threshold_bytes >= 0.0 && self.mark_threshold_bytes.is_finite()) {
            return Err(ParamError::new("threshold", "the marking threshold must be ≥ 0 bytes"));
        }
        if let Some(cap) = self.cap_bytes {
            if cap.is_nan() || cap <= self.mark_threshold_bytes {
                return Err(ParamError::new("cap", "the counter cap must exceed the marking threshold"));
            }
        }
        Ok(())
    }
}

/// The virtual queue itself: call [`PhantomMarker::on_transmit`] for every packet the link sends.
#[derive(Debug, Clone)]
pub struct PhantomMarker {
    params: PhantomParams,
    backlog: f64,
    last_update: Option<Nanos>,
}

impl PhantomMarker {
    pub fn new(params: PhantomParams) -> Result<PhantomMarker, ParamError> {
        params.validate()?;
        Ok(PhantomMarker { params, backlog: 0.0, last_update: None })
    }

    /// Virtual backlog in bytes after draining up to `now`.
    pub fn backlog(&mut self, now: Nanos) -> f64 {
        self.drain(now);
        self.backlog
    }

    fn drain(&mut self, now: Nanos) {
        if let Some(last) = self.last_update {
            let elapsed = secs(now.saturating_sub(last));
            self.backlog = (self.backlog - self.params.drain_bytes_per_sec * elapsed).max(0.0);
        }
        self.last_update = Some(self.last_update.map_or(now, |l| l.max(now)));
    }

    /// A packet goes out at `now`: drain, compare the backlog ahead of it (before adding it, so a
    /// threshold below one MTU does not mark every packet after idle), mark if above, then count
    /// it. Returns whether it was marked.
    pub fn on_transmit<P: Packet>(&mut self, now: Nanos, packet: &mut P) -> bool {
        self.drain(now);
        let marked = self.backlog > self.params.mark_threshold_bytes && packet.ecn().is_ect();
        if marked {
            packet.set_ecn(Ecn::Ce);
        }
        self.backlog += f64::from(packet.len_bytes());
        if let Some(cap) = self.params.cap_bytes {
            self.backlog = self.backlog.min(cap);
        }
        marked
    }
}

/// A drop-tail FIFO (the physical queue, which does not mark) followed by a phantom queue on its
/// transmit side.
#[derive(Debug)]
pub struct Phantom<P> {
    fifo: Fifo<P>,
    marker: PhantomMarker,
}

impl<P: Packet> Phantom<P> {
    pub fn new(limit: Limit, params: PhantomParams) -> Result<Phantom<P>, ParamError> {
        Ok(Phantom { fifo: Fifo::new(limit), marker: PhantomMarker::new(params)? })
    }
}

impl<P: Packet> Qdisc<P> for Phantom<P> {
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        self.fifo.push_or_drop(now, packet, out);
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        let mut d = self.fifo.pop()?;
        self.marker.on_transmit(now, &mut d.packet);
        Some(d)
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        "phantom"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::MTU_BYTES;

    const GBIT: f64 = 1e9 / 8.0;

    fn baseline() -> PhantomMarker {
        PhantomMarker::new(PhantomParams { drain_bytes_per_sec: 0.95 * GBIT, mark_threshold_bytes: 1000.0, cap_bytes: None })
            .unwrap()
    }

    // T-H1: back-to-back 1500 B packets at 1 Gbit/s into a 950 Mbit/s phantom queue with a 1 KB
    // threshold: the backlog ahead of packet n+1 is 75·n B, and the first marked packet is #15.
    #[test]
    fn t_h1_first_mark_is_the_fifteenth_packet() {
        let mut pq = baseline();
        let packet_time: Nanos = 12_000; // 1500 B at 1 Gbit/s
        let mut first = None;
        for n in 1..=40u64 {
            let t = (n - 1) * packet_time;
            let ahead = pq.backlog(t);
            assert!((ahead - 75.0 * (n - 1) as f64).abs() < 1e-6, "packet {n}: backlog {ahead}");
            let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
            if pq.on_transmit(t, &mut p) && first.is_none() {
                first = Some(n);
            }
        }
        assert_eq!(first, Some(15));
    }

    // T-H2: evenly spaced packets at 900 Mbit/s (below the drain) are never marked; any input above
    // the drain rate eventually is.
    #[test]
    fn t_h2_marks_only_above_the_drain_rate() {
        let mut pq = baseline();
        let gap = (f64::from(MTU_BYTES) / (0.9 * GBIT) * 1e9) as Nanos;
        for n in 0..100_000u64 {
            let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
            assert!(!pq.on_transmit(n * gap, &mut p), "packet {n} marked below the drain rate");
        }
        let mut pq = baseline();
        let gap = (f64::from(MTU_BYTES) / (0.96 * GBIT) * 1e9) as Nanos;
        let marked = (0..10_000u64).any(|n| pq.on_transmit(n * gap, &mut TestPacket::new(MTU_BYTES, Ecn::Ect0)));
        assert!(marked);
    }

    // The test: the phantom queue marks only above its threshold.
    #[test]
    fn marks_only_when_the_virtual_backlog_exceeds_the_threshold() {
        let mut pq = baseline();
        for n in 0..200u64 {
            let t = n * 12_000;
            let ahead = pq.backlog(t);
            let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect1);
            let marked = pq.on_transmit(t, &mut p);
            assert_eq!(marked, ahead > 1000.0, "packet {n} with {ahead} B ahead");
            assert_eq!(p.ecn == Ecn::Ce, marked);
        }
    }

    /// Link rate of the T-H3 runs, bytes per second (the phantom drains at 95 % of it).
    const LINK_BYTES_PER_SEC: f64 = GBIT;
    /// How often a link whose queue held a packet back asks again, ns.
    const RETRY_NS: Nanos = 100;

    /// Serialization time of `bytes` on the T-H3 link, ns.
    fn tx_ns(bytes: u32) -> Nanos {
        (f64::from(bytes) / LINK_BYTES_PER_SEC * 1e9).round() as Nanos
    }

    /// Runs `arrivals` (time, packet) through a `Phantom` on a work-conserving link of
    /// LINK_BYTES_PER_SEC: the link takes a packet whenever it is idle and the queue holds one, and
    /// asks again every RETRY_NS if the queue holds it back. Returns each packet with the time its
    /// transmission started, in departure order.
    fn through_link(q: &mut Phantom<TestPacket>, arrivals: &[(Nanos, TestPacket)]) -> Vec<(Nanos, TestPacket)> {
        let mut out = Outputs::new();
        let mut sent = Vec::new();
        let (mut next, mut now, mut link_free_at) = (0, 0, 0);
        loop {
            while next < arrivals.len() && arrivals[next].0 <= now {
                q.enqueue(arrivals[next].0, arrivals[next].1.clone(), &mut out);
                next += 1;
            }
            if now >= link_free_at && q.len_packets() > 0 {
                if let Some(d) = q.dequeue(now, &mut out) {
                    link_free_at = now + tx_ns(d.packet.len);
                    sent.push((now, d.packet));
                }
            }
            let next_arrival = arrivals.get(next).map(|a| a.0);
            let next_service = (q.len_packets() > 0).then(|| link_free_at.max(now + RETRY_NS));
            match (next_arrival, next_service) {
                (None, None) => break,
                (a, s) => now = a.unwrap_or(Nanos::MAX).min(s.unwrap_or(Nanos::MAX)),
            }
        }
        assert!(out.is_empty(), "dropped or notified: {out:?}");
        sent
    }

    /// Transmission start times of a plain FIFO on the same link: a_n, or when the previous
    /// packet has finished, whichever is later.
    fn fifo_starts(arrivals: &[(Nanos, TestPacket)]) -> Vec<Nanos> {
        let mut free_at = 0;
        arrivals
            .iter()
            .map(|(a, p)| {
                let start = free_at.max(*a);
                free_at = start + tx_ns(p.len);
                start
            })
            .collect()
    }

    // T-H3: the phantom queue never delays or drops. Packets go through a `Phantom` on a 1 Gbit/s
    // link while its 950 Mbit/s virtual queue is far above the threshold: paced below the line
    // rate, each leaves the moment it arrives (output timestamps = input timestamps); in bursts
    // above the line rate, each leaves exactly when a plain FIFO would (only the physical queue
    // delays). Order is kept and Not-ECT packets are never marked.
    #[test]
    fn t_h3_never_delays_or_drops() {
        let params = PhantomParams { drain_bytes_per_sec: 0.95 * GBIT, mark_threshold_bytes: 1000.0, cap_bytes: Some(1e6) };
        let ecn_of = |n: u32| if n % 5 == 4 { Ecn::NotEct } else { Ecn::Ect0 };
        // Paced at 97 % of the line rate (above the drain, so the phantom marks); then bursts of 20
        // packets at twice the line rate every 250 µs (96 % on average): a real queue forms in
        // every burst and drains before the next.
        const BURST_PKTS: u32 = 20;
        const BURST_PERIOD_NS: Nanos = 250_000;
        let paced_gap = (tx_ns(MTU_BYTES) as f64 / 0.97) as Nanos;
        let paced: Vec<(Nanos, TestPacket)> =
            (0..2000u32).map(|n| (u64::from(n) * paced_gap, TestPacket { len: MTU_BYTES, ecn: ecn_of(n), src: n })).collect();
        let bursty: Vec<(Nanos, TestPacket)> = (0..2000u32)
            .map(|n| {
                let t = u64::from(n / BURST_PKTS) * BURST_PERIOD_NS + u64::from(n % BURST_PKTS) * tx_ns(MTU_BYTES) / 2;
                (t, TestPacket { len: MTU_BYTES, ecn: ecn_of(n), src: n })
            })
            .collect();
        for (name, arrivals) in [("paced", &paced), ("bursty", &bursty)] {
            let mut q: Phantom<TestPacket> = Phantom::new(Limit::Unlimited, params).unwrap();
            let sent = through_link(&mut q, arrivals);
            assert_eq!(sent.len(), arrivals.len(), "{name}: every packet leaves");
            let want = fifo_starts(arrivals);
            for ((start, p), (want_start, (arrived, _))) in sent.iter().zip(want.iter().zip(arrivals.iter())) {
                assert_eq!(*start, *want_start, "{name}: packet {} arrived at {arrived} ns", p.src);
            }
            let queued = sent.iter().zip(arrivals.iter()).filter(|((start, _), (arrived, _))| start > arrived).count();
            if name == "paced" {
                assert_eq!(queued, 0, "{name}: output timestamps = input timestamps");
            } else {
                assert!(queued > arrivals.len() / 2, "{name}: the physical queue held {queued} packets");
            }
            assert!(sent.iter().zip(arrivals.iter()).all(|((_, p), (_, a))| p.src == a.src), "{name}: order kept");
            assert!(sent.iter().all(|(_, p)| ecn_of(p.src) != Ecn::NotEct || p.ecn == Ecn::NotEct), "{name}: Not-ECT marked");
            let marked = sent.iter().filter(|(_, p)| p.ecn == Ecn::Ce).count();
            assert!(marked > arrivals.len() / 2, "{name}: the phantom queue was above its threshold ({marked} marked)");
        }
    }

    #[test]
    fn cap_must_exceed_threshold() {
        let e = PhantomParams { drain_bytes_per_sec: 1.0, mark_threshold_bytes: 10.0, cap_bytes: Some(5.0) }.validate();
        assert_eq!(e.unwrap_err().param, "cap");
    }
}
