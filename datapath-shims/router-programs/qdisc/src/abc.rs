//! The ABC (Accel-Brake Control) router, exactly per specs/abc.md §6.
//!
//! On every dequeued ABC packet the router computes a target rate from the link capacity μ(t)
//! and the queuing delay x(t) (Eq. 2.1), turns it into the fraction of packets to leave as
//! "accelerate" using the *dequeue* rate cr(t) (Eq. 2.2: the key idea, since ACK clocking makes
//! the senders' rate one RTT later 2·cr·f), and spreads the accelerates deterministically with a
//! token bucket (Algorithm 1). Everything else is a plain drop-tail FIFO.
//!
//! Capacity: on a fixed-rate link μ is the link rate ([`Qdisc::on_link_rate`]); on a
//! trace-driven link it is the bytes of delivery opportunities the trace offered in the last T,
//! *including opportunities that found the queue empty* (§6.4 [A], §14.6), fed through
//! [`Qdisc::on_opportunity`]. PK-ABC, the thesis's perfect-knowledge oracle (§11, target 9), is
//! the same router with μ(t) taken over the future window (t + L − T, t + L], L one RTT
//! ([`Capacity::Future`]): the senders' rate answers a mark one RTT later, so that is the
//! capacity the mark should have aimed at. Only the capacity source differs; the link reports
//! opportunities L ahead ([`Qdisc::capacity_lookahead`]) and Eq. 2.1/2.2 and the token bucket are
//! the ones ABC uses.
//!
//! Encoding: a brake is CE (the "proxied" encoding of §4–5, the artifact's), so ECT(0) and ECT(1)
//! both mean accelerate and CE is never touched. ABC's native encoding (senders send ECT(1), the
//! router flips it to ECT(0)) was removed: the sender in this project (ccp-algorithms `abc`)
//! cannot read it — a `Report` counts CE echoes only, and the echo of an ECT(0) needs the NS bit
//! (AccECN's now) or AccECN's counters, which the kernel datapath cannot negotiate — so its brakes
//! would reach nobody.

use crate::window::SlidingWindow;
use crate::{secs, Departure, Ecn, Fifo, Limit, Nanos, Outputs, Packet, ParamError, Qdisc, NANOS_PER_MS};

/// How x(t), the queuing delay in Eq. 2.1, is measured (§6.4, §14.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayMeasure {
    /// x = (backlog + this packet) / μ(t): reacts at once when capacity drops (the
    /// recommendation and the artifact's definition, in bytes rather than packets).
    QueueOverCapacity,
    /// x = (backlog + this packet) / the capacity over the longer `window`: the time the backlog
    /// takes to drain at the link's mean rate. Not the paper's: a variant for links whose
    /// opportunities come in dense bursts between idle gaps of tens of ms to seconds (issue 32),
    /// where μ over T = 20 ms swings between ~0 and hundreds of Mbit/s and the first packets of
    /// each burst, finding μ(t) ≈ 0, see a huge x behind a small backlog and brake a flow far
    /// below the link's capacity. Trace-driven links only differ; a fixed rate is its own mean.
    /// Reacts to a lasting capacity drop over `window` instead of at once.
    QueueOverMeanCapacity { window: Nanos },
    /// x = the departing packet's sojourn time (lags by one queue's worth; for experiments).
    Sojourn,
}

/// How the capacity term of Eq. 2.1 turns into accelerate credit (abc.md §6.4 [A]). Both forms
/// give η·μ/2 of credit per unit of time; they differ in *when*, which matters on links whose
/// opportunities come in bursts between gaps (issue 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Credit {
    /// Eq. 2.2 as the thesis writes it: each departing ABC packet gets f = tr/(2·cr) with
    /// tr = η·μ(t) − (μ/δ)(x − d_t)^+. An opportunity the queue left unused raises μ(t), so it
    /// is credited to the packets dequeued in the T that follows — and lost if none is, as after
    /// a burst that found the queue empty and a gap longer than T.
    #[default]
    Window,
    /// The authors' artifact (`cellular_packet_queue.cc`): each departing ABC packet gets
    /// (η·cr − (μ/δ)(x − d_t)^+)/(2·cr), and each opportunity that finds the queue empty banks
    /// η/2 of credit at once (the bucket's cap applies at the next packet). The next burst then
    /// starts with the accelerates the last one left unused, whatever the gap. Trace-driven links
    /// only: a fixed-rate link has no opportunities to count, and keeps Eq. 2.2.
    PerOpportunity,
}

/// Where μ(t) on a trace-driven link comes from (abc.md §14 item 6). On a fixed-rate link both
/// are the link rate: its capacity ahead is the capacity now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Capacity {
    /// Opportunities in the last T, (t − T, t]: what a real router can know. ABC.
    #[default]
    Past,
    /// Opportunities in (t + lookahead − T, t + lookahead]: PK-ABC, with lookahead one RTT. An
    /// oracle only an emulator that knows its trace can be. This μ is used throughout Eq. 2.1,
    /// x = backlog/μ included (the thesis replaces μ(t), and x is defined through it); dividing
    /// the backlog by the present capacity instead made no measurable difference on the Fig.
    /// 2-7b setup (configs/experiments/abc-pk.toml).
    Future { lookahead: Nanos },
}

impl Capacity {
    /// How far ahead of a decision the marker reads the trace (0 for [`Capacity::Past`]).
    pub fn lookahead(self) -> Nanos {
        match self {
            Capacity::Past => 0,
            Capacity::Future { lookahead } => lookahead,
        }
    }
}

/// ABC router parameters (abc.md §2, §14).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AbcParams {
    /// η, target utilisation (< 1 to keep queues short). Default 0.98 (cellular emulation).
    pub eta: f64,
    /// δ, the time constant over which excess delay is drained. Default 133 ms (RTT 100 ms).
    pub delta: Nanos,
    /// d_t, queuing delay treated as normal batching. Default 50 ms (the artifact's cellular value).
    pub delay_threshold: Nanos,
    /// T, the sliding window for cr(t) and trace capacity μ(t). Default 20 ms (emulation).
    pub window: Nanos,
    /// Token bucket cap; must exceed 1 or f = 1 could never leave an accelerate. Default 5.
    pub token_limit: f64,
    /// Initial token count. Algorithm 1 starts at 0.
    pub initial_token: f64,
    pub delay_measure: DelayMeasure,
    /// μ(t) from the trace's past (ABC, the default) or future window (PK-ABC).
    pub capacity: Capacity,
    pub credit: Credit,
}

impl Default for AbcParams {
    fn default() -> Self {
        AbcParams {
            eta: 0.98,
            delta: 133 * NANOS_PER_MS,
            delay_threshold: 50 * NANOS_PER_MS,
            window: 20 * NANOS_PER_MS,
            token_limit: 5.0,
            initial_token: 0.0,
            delay_measure: DelayMeasure::QueueOverCapacity,
            capacity: Capacity::Past,
            credit: Credit::Window,
        }
    }
}

impl AbcParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if !(self.eta > 0.0 && self.eta <= 1.0) {
            return Err(ParamError::new("eta", format!("must be in (0, 1], got {}", self.eta)));
        }
        if self.delta == 0 {
            return Err(ParamError::new("delta", "must be > 0"));
        }
        if self.window == 0 {
            return Err(ParamError::new("window", "must be > 0"));
        }
        if self.delay_measure == (DelayMeasure::QueueOverMeanCapacity { window: 0 }) {
            return Err(ParamError::new("delay_window", "must be > 0"));
        }
        if !(self.token_limit > 1.0 && self.token_limit.is_finite()) {
            return Err(ParamError::new(
                "token_limit",
                format!(
                    "must be > 1 (with the strict `token > 1` test a limit of 1 brakes everything), got {}",
                    self.token_limit
                ),
            ));
        }
        if !(self.initial_token >= 0.0 && self.initial_token <= self.token_limit) {
            return Err(ParamError::new("initial_token", format!("must be in [0, token_limit], got {}", self.initial_token)));
        }
        if self.credit == Credit::PerOpportunity && self.capacity != Capacity::Past {
            return Err(ParamError::new(
                "credit",
                "per-opportunity credit counts opportunities as they happen: it needs the past capacity (not PK-ABC's future one)",
            ));
        }
        if self.capacity == (Capacity::Future { lookahead: 0 }) {
            return Err(ParamError::new(
                "lookahead",
                "must be > 0 with the future capacity (one RTT for PK-ABC); a lookahead of 0 is the past window",
            ));
        }
        Ok(())
    }
}

/// Eq. 2.1: tr = η·μ − (μ/δ)·(x − d_t)^+. Rates in any unit (the result is in the same unit);
/// times in seconds.
pub fn target_rate(eta: f64, mu: f64, delta_s: f64, x_s: f64, dt_s: f64) -> f64 {
    eta * mu - (mu / delta_s) * (x_s - dt_s).max(0.0)
}

/// Eq. 2.2 with the recommended clamps: f = clamp(tr / (2·cr), 0, 1); f = 1 when nothing was
/// dequeued recently (cr ≈ 0) and the target is positive.
pub fn accelerate_fraction(tr: f64, cr: f64) -> f64 {
    if cr <= 0.0 {
        return if tr > 0.0 { 1.0 } else { 0.0 };
    }
    (tr / (2.0 * cr)).clamp(0.0, 1.0)
}

/// Algorithm 1's deterministic marking: keeps the accelerate fraction at or below f with little
/// burstiness.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    token: f64,
    limit: f64,
}

impl TokenBucket {
    pub fn new(initial: f64, limit: f64) -> TokenBucket {
        TokenBucket { token: initial, limit }
    }

    /// Adds credit that no packet takes yet (the artifact's unused opportunity): uncapped until
    /// the next packet's [`TokenBucket::on_packet`].
    pub fn bank(&mut self, credit: f64) {
        self.token += credit;
    }

    /// Adds f for a departing ABC packet; if the packet could be an accelerate, returns whether it
    /// stays one (consuming a token). Packets that cannot be accelerates add but never consume.
    pub fn on_packet(&mut self, f: f64, accelerate_capable: bool) -> bool {
        self.token = (self.token + f).min(self.limit);
        if accelerate_capable && self.token > 1.0 {
            self.token -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What the marker did to a departing packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbcMark {
    /// Not-ECT: not an ABC packet, not counted, not marked.
    NotAbc,
    /// Left as an accelerate.
    Accelerate,
    /// Rewritten to a brake.
    Brake,
    /// An ABC packet that arrived CE (a brake already): counted in cr, never changed.
    Untouched,
}

/// The ABC marking core (per queue): rate estimators, Eq. 2.1/2.2 and the token bucket.
/// Usable on its own by a simulator port that keeps its own buffer.
#[derive(Debug, Clone)]
pub struct AbcMarker {
    params: AbcParams,
    dequeued: SlidingWindow,
    opportunities: SlidingWindow,
    /// The opportunities over [`DelayMeasure::QueueOverMeanCapacity`]'s window, when it is used.
    mean_opportunities: Option<SlidingWindow>,
    trace_driven: bool,
    link_rate: Option<f64>,
    bucket: TokenBucket,
    last_fraction: f64,
    /// The fraction of the link this marker's queue gets (1 alone; set by a scheduler that
    /// shares the link with a non-ABC queue, [`crate::abc_coexist`]).
    share: f64,
}

impl AbcMarker {
    pub fn new(params: AbcParams) -> Result<AbcMarker, ParamError> {
        params.validate()?;
        Ok(AbcMarker {
            params,
            dequeued: SlidingWindow::new(params.window),
            opportunities: SlidingWindow::new(params.window),
            mean_opportunities: match params.delay_measure {
                DelayMeasure::QueueOverMeanCapacity { window } => Some(SlidingWindow::new(window)),
                _ => None,
            },
            trace_driven: false,
            link_rate: None,
            bucket: TokenBucket::new(params.initial_token, params.token_limit),
            last_fraction: 1.0,
            share: 1.0,
        })
    }

    pub fn on_link_rate(&mut self, bytes_per_sec: f64) {
        self.link_rate = Some(bytes_per_sec);
    }

    /// A delivery opportunity of `bytes` at `at`. With [`Capacity::Future`] the link reports it
    /// up to the lookahead before `at` ([`AbcMarker::lookahead`]).
    pub fn on_opportunity(&mut self, at: Nanos, bytes: u32) {
        self.trace_driven = true;
        self.opportunities.add(at, u64::from(bytes));
        if let Some(w) = self.mean_opportunities.as_mut() {
            w.add(at, u64::from(bytes));
        }
    }

    /// An opportunity at `at` that the queue leaves unused (nothing had arrived by then): with
    /// [`Credit::PerOpportunity`] it banks η/2 of accelerate credit.
    pub fn on_idle_opportunity(&mut self, _at: Nanos) {
        if self.params.credit == Credit::PerOpportunity {
            self.bucket.bank(self.params.eta / 2.0);
        }
    }

    /// How long before an opportunity the marker needs to hear of it.
    pub fn lookahead(&self) -> Nanos {
        self.params.capacity.lookahead()
    }

    /// The whole link's capacity in bytes per second, if the link has said anything about it:
    /// the opportunities' rate over the window ending at `now` + lookahead (the past window for
    /// ABC, the future one for PK-ABC), or the fixed link rate.
    pub fn link_capacity(&mut self, now: Nanos) -> Option<f64> {
        if self.trace_driven {
            Some(self.opportunities.rate(now + self.lookahead()))
        } else {
            self.link_rate
        }
    }

    /// Sets the fraction of the link's transmission opportunities this queue gets (clamped to
    /// [0, 1]): Eq. 2.1 then aims at that share of μ (§7: "ABC's target-rate computation uses
    /// only ABC's share of the link").
    pub fn set_capacity_share(&mut self, share: f64) {
        self.share = if share.is_finite() { share.clamp(0.0, 1.0) } else { 1.0 };
    }

    /// μ(t) in bytes per second for this queue: the link's capacity times the queue's share.
    pub fn capacity(&mut self, now: Nanos) -> Option<f64> {
        let share = self.share;
        self.link_capacity(now).map(|mu| mu * share)
    }

    /// The capacity x(t) divides the backlog by, bytes per second: μ(t), or with
    /// [`DelayMeasure::QueueOverMeanCapacity`] the queue's share of the mean over its window.
    fn delay_capacity(&mut self, now: Nanos, mu: f64) -> f64 {
        match self.mean_opportunities.as_mut() {
            Some(w) if self.trace_driven => w.rate(now + self.params.capacity.lookahead()) * self.share,
            _ => mu,
        }
    }

    /// The accelerate fraction computed for the last ABC packet (for logs and tests).
    pub fn last_fraction(&self) -> f64 {
        self.last_fraction
    }

    /// Marks `packet`, departing at `now` with `backlog_after` bytes still queued behind it and a
    /// sojourn time of `sojourn`.
    pub fn on_dequeue<P: Packet>(&mut self, now: Nanos, packet: &mut P, backlog_after: u64, sojourn: Nanos) -> AbcMark {
        let ecn = packet.ecn();
        if !ecn.is_ect() {
            return AbcMark::NotAbc;
        }
        let len = packet.len_bytes();
        self.dequeued.add(now, u64::from(len));
        let Some(mu) = self.capacity(now) else {
            // No capacity information at all: nothing sensible to aim for, so leave marks alone.
            return AbcMark::Untouched;
        };
        let cr = self.dequeued.rate(now);
        let x = match self.params.delay_measure {
            DelayMeasure::QueueOverCapacity | DelayMeasure::QueueOverMeanCapacity { .. } => {
                let drain = self.delay_capacity(now, mu);
                // Zero capacity (an outage in the trace): the queue will never drain, infinite delay.
                if drain > 0.0 {
                    (backlog_after + u64::from(len)) as f64 / drain
                } else {
                    f64::INFINITY
                }
            }
            DelayMeasure::Sojourn => secs(sojourn),
        };
        let tr = match self.params.credit {
            // The capacity term's share of this packet is η·cr: the rest of η·μ was banked by
            // the opportunities that found the queue empty.
            Credit::PerOpportunity if self.trace_driven => {
                let brake = if mu > 0.0 {
                    target_rate(0.0, mu, secs(self.params.delta), x, secs(self.params.delay_threshold))
                } else {
                    f64::NEG_INFINITY
                };
                self.params.eta * cr + brake
            }
            _ if mu > 0.0 => target_rate(self.params.eta, mu, secs(self.params.delta), x, secs(self.params.delay_threshold)),
            _ => 0.0,
        };
        let f = accelerate_fraction(tr, cr);
        self.last_fraction = f;
        let capable = ecn != Ecn::Ce;
        if self.bucket.on_packet(f, capable) {
            AbcMark::Accelerate
        } else if capable {
            packet.set_ecn(Ecn::Ce);
            AbcMark::Brake
        } else {
            AbcMark::Untouched
        }
    }
}

/// The ABC router queue: a drop-tail FIFO whose departures go through [`AbcMarker`].
#[derive(Debug)]
pub struct Abc<P> {
    fifo: Fifo<P>,
    marker: AbcMarker,
}

impl<P: Packet> Abc<P> {
    pub fn new(limit: Limit, params: AbcParams) -> Result<Abc<P>, ParamError> {
        Ok(Abc { fifo: Fifo::new(limit), marker: AbcMarker::new(params)? })
    }

    /// The marker (its last accelerate fraction, its capacity).
    pub fn marker(&mut self) -> &mut AbcMarker {
        &mut self.marker
    }
}

impl<P: Packet> Qdisc<P> for Abc<P> {
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        self.fifo.push_or_drop(now, packet, out);
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        let mut d = self.fifo.pop()?;
        let backlog = self.fifo.len_bytes();
        self.marker.on_dequeue(now, &mut d.packet, backlog, now.saturating_sub(d.enqueued_at));
        Some(d)
    }

    fn on_link_rate(&mut self, _now: Nanos, bytes_per_sec: f64) {
        self.marker.on_link_rate(bytes_per_sec);
    }

    fn on_opportunity(&mut self, at: Nanos, bytes: u32) {
        self.marker.on_opportunity(at, bytes);
        // Without a lookahead the link reports each opportunity just before the dequeue it
        // allows: one that no packet had arrived for goes unused.
        if self.marker.lookahead() == 0 && self.fifo.head_enqueued_at().is_none_or(|h| h > at) {
            self.marker.on_idle_opportunity(at);
        }
    }

    fn capacity_lookahead(&self) -> Nanos {
        self.marker.lookahead()
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        "abc"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::{MTU_BYTES, NANOS_PER_SEC};

    const MBIT: f64 = 1e6 / 8.0; // bytes per second in one Mbit/s

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    // T1: target rate.
    #[test]
    fn t1_target_rate() {
        assert!(close(target_rate(0.98, 10.0, 0.133, 0.03, 0.05), 9.8, 1e-12));
        assert!(close(target_rate(0.98, 10.0, 0.133, 0.07, 0.05), 9.8 - (10.0 / 0.133) * 0.02, 1e-12));
        // The spec's figure, to its four decimals.
        assert!(close(target_rate(0.98, 10.0, 0.133, 0.07, 0.05), 8.2962, 5e-5));
    }

    // T2: marking fraction.
    #[test]
    fn t2_accelerate_fraction() {
        assert!(close(accelerate_fraction(9.8, 8.0), 0.6125, 1e-12));
        // 0.518515…: the spec prints it truncated to five decimals, hence one unit of the last.
        assert!(close(accelerate_fraction(target_rate(0.98, 10.0, 0.133, 0.07, 0.05), 8.0), 0.51851, 1e-5));
        assert_eq!(accelerate_fraction(9.8, 4.0), 1.0);
        assert_eq!(accelerate_fraction(target_rate(0.98, 10.0, 0.133, 0.5, 0.05), 8.0), 0.0);
        assert_eq!(accelerate_fraction(1.0, 0.0), 1.0);
        assert_eq!(accelerate_fraction(-1.0, 0.0), 0.0);
    }

    // T3: token bucket.
    #[test]
    fn t3_token_bucket_spreads_accelerates() {
        let mut b = TokenBucket::new(0.0, 5.0);
        let mut acc = 0usize;
        for n in 1..=10_000usize {
            if b.on_packet(0.3, true) {
                acc += 1;
            }
            assert!(acc <= (n as f64 * 0.3).floor() as usize + 1, "prefix {n} has {acc} accelerates");
        }
        assert!(acc.abs_diff(3000) <= 2, "{acc}");
    }

    #[test]
    fn t3_full_fraction_brakes_only_the_first() {
        let mut b = TokenBucket::new(0.0, 5.0);
        let marks: Vec<bool> = (0..20).map(|_| b.on_packet(1.0, true)).collect();
        assert!(!marks[0]);
        assert!(marks[1..].iter().all(|&m| m));
        let mut one = TokenBucket::new(0.0, 1.0);
        assert!((0..20).all(|_| !one.on_packet(1.0, true)), "tokenLimit 1 brakes everything");
    }

    // T3/T9: CE packets (a brake already, or a classic-ECN mark) keep their codepoint and spend no
    // token: like every ABC packet they add f (Algorithm 1), so the tokens they leave are there for
    // the next accelerate. Not-ECT packets are not ABC packets: they add nothing.
    #[test]
    fn t3_and_t9_ce_packets_are_never_changed_or_charged() {
        for capable in [Ecn::Ect0, Ecn::Ect1] {
            let params = AbcParams::default();
            let mut m = AbcMarker::new(params).unwrap();
            m.on_link_rate(10.0 * MBIT);
            let mut token = params.initial_token;
            for i in 0..20u64 {
                let mut p = TestPacket::new(MTU_BYTES, Ecn::Ce);
                assert_eq!(m.on_dequeue(i * NANOS_PER_MS, &mut p, 0, 0), AbcMark::Untouched);
                assert_eq!(p.ecn, Ecn::Ce, "CE must stay as it is");
                token = (token + m.last_fraction()).min(params.token_limit);
                assert_eq!(m.bucket.token, token, "CE packet {i} was charged a token");
            }
            assert!(token > 1.0, "a token was there to be charged ({token})");
            let mut p = TestPacket::new(MTU_BYTES, Ecn::NotEct);
            assert_eq!(m.on_dequeue(20 * NANOS_PER_MS, &mut p, 0, 0), AbcMark::NotAbc);
            assert_eq!((p.ecn, m.bucket.token), (Ecn::NotEct, token), "Not-ECT: untouched, adds nothing");
            // The next accelerate spends one of the tokens the CE packets left.
            let mut p = TestPacket::new(MTU_BYTES, capable);
            assert_eq!(m.on_dequeue(21 * NANOS_PER_MS, &mut p, 0, 0), AbcMark::Accelerate, "{capable:?}");
            assert_eq!((p.ecn, m.bucket.token), (capable, (token + m.last_fraction()).min(params.token_limit) - 1.0));
        }
        // Both ECT codepoints are accelerates, and a brake turns either into CE.
        for capable in [Ecn::Ect0, Ecn::Ect1] {
            let mut m = AbcMarker::new(AbcParams::default()).unwrap();
            m.on_link_rate(10.0 * MBIT);
            let mut p = TestPacket::new(MTU_BYTES, capable);
            assert_eq!(m.on_dequeue(0, &mut p, 0, 0), AbcMark::Brake, "token starts at 0: the first is braked");
            assert_eq!(p.ecn, Ecn::Ce, "{capable:?}");
        }
    }

    /// Offers ECT packets of 1500 B at `cr` bytes/s to an ABC queue on a link of capacity `mu` and
    /// returns the accelerate fraction over the second half of the run. The queue stays at most
    /// one packet long (delay far below d_t). With `opportunity_every`, the link is trace-driven:
    /// 1500 B opportunities at that spacing, packets leaving only at opportunities; otherwise it is
    /// a fixed-rate link that sends each packet as it arrives.
    fn measured_fraction(mu: f64, cr: f64, opportunity_every: Option<Nanos>) -> f64 {
        let mut q: Abc<TestPacket> = Abc::new(Limit::Packets(250), AbcParams::default()).unwrap();
        let mut out = Outputs::new();
        let duration = 4 * NANOS_PER_SEC;
        let gap = (f64::from(MTU_BYTES) / cr * NANOS_PER_SEC as f64) as Nanos;
        if opportunity_every.is_none() {
            q.on_link_rate(0, mu);
        }
        let mut next_opp = 0;
        let (mut acc, mut total) = (0u64, 0u64);
        let mut count = |t: Nanos, d: Option<Departure<TestPacket>>| {
            if let Some(d) = d {
                if t > duration / 2 {
                    total += 1;
                    acc += u64::from(d.packet.ecn == Ecn::Ect0);
                }
            }
        };
        let mut t = gap;
        while t < duration {
            q.enqueue(t, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
            match opportunity_every {
                None => count(t, q.dequeue(t, &mut out)),
                Some(every) => {
                    while next_opp <= t + gap {
                        q.on_opportunity(next_opp, MTU_BYTES);
                        if next_opp >= t {
                            count(next_opp, q.dequeue(next_opp, &mut out));
                        }
                        next_opp += every;
                    }
                }
            }
            t += gap;
        }
        acc as f64 / total as f64
    }

    // The acceptance test: capacity μ, dequeue rate cr, delay below d_t →
    // accelerate fraction min(η·μ/(2·cr), 1) within 1 %.
    #[test]
    fn accelerate_fraction_matches_eq_2_2_on_a_fixed_link() {
        let mu = 10.0 * MBIT;
        for ratio in [1.0, 0.9, 0.8, 0.6, 0.49, 0.3] {
            let cr = ratio * mu;
            let want = (0.98 * mu / (2.0 * cr)).min(1.0);
            let got = measured_fraction(mu, cr, None);
            assert!((got - want).abs() <= 0.01 * want, "cr = {ratio}·μ: got {got}, want {want}");
        }
    }

    #[test]
    fn accelerate_fraction_matches_eq_2_2_on_a_trace_driven_link() {
        // One 1500 B opportunity every 0.5 ms = 24 Mbit/s, counted over the 20 ms window.
        let every = NANOS_PER_MS / 2;
        let mu = f64::from(MTU_BYTES) * NANOS_PER_SEC as f64 / every as f64;
        for ratio in [1.0, 0.8, 0.6] {
            let cr = ratio * mu;
            let want = (0.98 * mu / (2.0 * cr)).min(1.0);
            let got = measured_fraction(mu, cr, Some(every));
            assert!((got - want).abs() <= 0.01 * want, "cr = {ratio}·μ: got {got}, want {want}");
        }
    }

    #[test]
    fn queue_above_threshold_lowers_the_fraction() {
        // μ = 10 Mbit/s; backlog so x = 70 ms (> d_t = 50 ms): tr = 8.2962 Mbit/s; cr = μ.
        let mu = 10.0 * MBIT;
        let mut m = AbcMarker::new(AbcParams::default()).unwrap();
        m.on_link_rate(mu);
        let gap = (f64::from(MTU_BYTES) / mu * NANOS_PER_SEC as f64) as Nanos;
        let backlog = (0.070 * mu) as u64 - u64::from(MTU_BYTES);
        for i in 1..=1000u64 {
            let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
            m.on_dequeue(i * gap, &mut p, backlog, 0);
        }
        let want = target_rate(0.98, 10.0, 0.133, 0.070, 0.05) / 20.0;
        assert!((m.last_fraction() - want).abs() < 0.01 * want, "{} vs {want}", m.last_fraction());
    }

    // T4: two ABC routers in series deliver the minimum accelerate fraction.
    #[test]
    fn t4_two_routers_in_series_deliver_the_minimum() {
        for (f1, f2) in [(0.4, 0.6), (0.6, 0.4)] {
            let mut r1 = TokenBucket::new(0.0, 5.0);
            let mut r2 = TokenBucket::new(0.0, 5.0);
            let n = 20_000;
            let mut delivered = 0;
            for _ in 0..n {
                let after_first = r1.on_packet(f1, true);
                if r2.on_packet(f2, after_first) {
                    delivered += 1;
                }
            }
            let frac = f64::from(delivered) / f64::from(n);
            assert!((frac - 0.4).abs() <= 0.01, "({f1}, {f2}) → {frac}");
        }
    }

    #[test]
    fn outage_brakes_everything() {
        let mut m = AbcMarker::new(AbcParams::default()).unwrap();
        m.on_opportunity(0, MTU_BYTES);
        let mut braked = 0;
        for i in 0..100u64 {
            let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
            // 100 ms past the last opportunity: μ = 0 over the window.
            if m.on_dequeue(100 * NANOS_PER_MS + i, &mut p, 0, 0) == AbcMark::Brake {
                braked += 1;
            }
        }
        assert_eq!(braked, 100);
    }

    /// A burst-gap link (issue 32): 26 opportunities in one millisecond every 100 ms (3.1 Mbit/s
    /// on average), and a flow that uses 12 of them (46 %): each burst drains the 12 packets that
    /// arrived during the gap. One accelerate per brake holds a window (each ACK adds one packet
    /// per accelerate and removes one per brake), so fewer accelerates than brakes shrink it.
    /// x = q/μ(t) over T = 20 ms finds the window all but empty at the start of every burst (the
    /// opportunity closing a 100 ms gap counts a fifth of a packet) and brakes the first packets
    /// outright, so the window shrinks every burst although the link is far from full. Over the
    /// mean capacity of 1 s, x = 12/0.26 ≈ 46 ms, below d_t: half or more accelerate. With the
    /// artifact's per-opportunity credit the 14 opportunities each burst leaves unused bank
    /// 14 × 0.49 (capped at 5) for the next burst, whose first packets then accelerate despite
    /// the brake term: more than half.
    #[test]
    fn a_burst_after_a_gap_brakes_a_flow_below_capacity_on_the_window_capacity_not_on_the_mean() {
        const BACKLOG: u64 = 12;
        let burst_at = |k: u64| (k * 100 + 1) * NANOS_PER_MS;
        let accelerates = |params: AbcParams| {
            let mut q: Abc<TestPacket> = Abc::new(Limit::Packets(250), params).unwrap();
            let mut out = Outputs::default();
            let mut marks = Vec::new();
            for k in 0..20 {
                for _ in 0..BACKLOG {
                    q.enqueue(burst_at(k) - NANOS_PER_MS, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
                }
                for _ in 0..26u64 {
                    q.on_opportunity(burst_at(k), MTU_BYTES);
                    if let Some(d) = q.dequeue(burst_at(k), &mut out) {
                        marks.push(d.packet.ecn() == Ecn::Ect0);
                    }
                }
            }
            marks[marks.len() - BACKLOG as usize..].iter().filter(|&&a| a).count()
        };
        let half = BACKLOG as usize / 2;
        let paper = accelerates(AbcParams::default());
        assert!(paper < half, "the paper's x brakes the flow down: {paper} accelerates of {BACKLOG}");
        let delay_measure = DelayMeasure::QueueOverMeanCapacity { window: 1000 * NANOS_PER_MS };
        let mean = accelerates(AbcParams { delay_measure, ..AbcParams::default() });
        assert!(mean >= half, "the mean's holds it: {mean} accelerates of {BACKLOG}");
        let banked = accelerates(AbcParams { credit: Credit::PerOpportunity, ..AbcParams::default() });
        assert!(banked > half, "the artifact's credit grows it: {banked} accelerates of {BACKLOG}");
        let pk =
            AbcParams { credit: Credit::PerOpportunity, capacity: Capacity::Future { lookahead: 1 }, ..AbcParams::default() };
        assert_eq!(pk.validate().unwrap_err().param, "credit");
        let e = AbcParams { delay_measure: DelayMeasure::QueueOverMeanCapacity { window: 0 }, ..AbcParams::default() };
        assert_eq!(e.validate().unwrap_err().param, "delay_window");
    }

    /// Opportunity times (ns) of a trace whose capacity doubles at 100 ms: one 1500 B
    /// opportunity per ms (12 Mbit/s) up to 100 ms, one per 0.5 ms (24 Mbit/s) after.
    fn step_up_schedule(until: Nanos) -> Vec<Nanos> {
        let step = 100 * NANOS_PER_MS;
        let mut t = Vec::new();
        let mut at = NANOS_PER_MS;
        while at <= until {
            t.push(at);
            at += if at < step { NANOS_PER_MS } else { NANOS_PER_MS / 2 };
        }
        t
    }

    /// Runs a marker over [`step_up_schedule`] as a trace-driven link would, honouring the
    /// marker's lookahead, with one ECT packet dequeued per ms (cr = 12 Mbit/s, empty queue) up
    /// to `until`; returns μ and the last accelerate fraction at `until`.
    fn mu_and_fraction_at(capacity: Capacity, until: Nanos) -> (f64, f64) {
        let mut m = AbcMarker::new(AbcParams { capacity, ..AbcParams::default() }).unwrap();
        let schedule = step_up_schedule(until + m.lookahead());
        let mut reported = schedule.iter().peekable();
        for t in (1..=until / NANOS_PER_MS).map(|ms| ms * NANOS_PER_MS) {
            while let Some(&&at) = reported.peek() {
                if at > t + m.lookahead() {
                    break;
                }
                m.on_opportunity(at, MTU_BYTES);
                reported.next();
            }
            let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
            m.on_dequeue(t, &mut p, 0, 0);
        }
        (m.capacity(until).unwrap(), m.last_fraction())
    }

    // PK-ABC: 50 ms into the run the last 20 ms offered 12 Mbit/s, while (130 ms, 150 ms], one
    // 100 ms RTT ahead, offers 24 Mbit/s. ABC aims at the first, PK-ABC at the second, with the
    // same Eq. 2.2: f = η·μ/(2·cr) with cr = 12 Mbit/s.
    #[test]
    fn future_capacity_reads_the_window_one_lookahead_ahead() {
        let rate_12_mbit = 1.5e6; // bytes per second
        let now = 50 * NANOS_PER_MS;
        let (mu, f) = mu_and_fraction_at(Capacity::Future { lookahead: 100 * NANOS_PER_MS }, now);
        assert!(close(mu, 2.0 * rate_12_mbit, 1e-6), "future μ {mu}");
        assert!(close(f, 0.98 * 2.0 * rate_12_mbit / (2.0 * rate_12_mbit), 1e-9), "future f {f}");
        // Straddling the step: (80 ms, 100 ms] + 10 ms → (90, 110]: 10 ms at each rate.
        let (mu, _) = mu_and_fraction_at(Capacity::Future { lookahead: 10 * NANOS_PER_MS }, 100 * NANOS_PER_MS);
        assert!(close(mu, 1.5 * rate_12_mbit, 1e-6), "straddling μ {mu}");
    }

    // The default is ABC's past window, unchanged: the same schedule gives μ = 12 Mbit/s and
    // f = η/2, and the queue asks its link for no lookahead.
    #[test]
    fn default_capacity_is_the_past_window() {
        assert_eq!(AbcParams::default().capacity, Capacity::Past);
        let q: Abc<TestPacket> = Abc::new(Limit::Packets(250), AbcParams::default()).unwrap();
        assert_eq!(Qdisc::<TestPacket>::capacity_lookahead(&q), 0);
        let pk = AbcParams { capacity: Capacity::Future { lookahead: 100 * NANOS_PER_MS }, ..AbcParams::default() };
        let q: Abc<TestPacket> = Abc::new(Limit::Packets(250), pk).unwrap();
        assert_eq!(Qdisc::<TestPacket>::capacity_lookahead(&q), 100 * NANOS_PER_MS);
        let (mu, f) = mu_and_fraction_at(Capacity::Past, 50 * NANOS_PER_MS);
        assert!(close(mu, 1.5e6, 1e-6), "past μ {mu}");
        assert!(close(f, 0.98 / 2.0, 1e-9), "past f {f}");
    }

    #[test]
    fn parameters_are_validated_by_name() {
        let e = AbcParams { capacity: Capacity::Future { lookahead: 0 }, ..AbcParams::default() }.validate().unwrap_err();
        assert_eq!(e.param, "lookahead");
        let e = AbcParams { token_limit: 1.0, ..AbcParams::default() }.validate().unwrap_err();
        assert_eq!(e.param, "token_limit");
        let e = AbcParams { eta: 1.5, ..AbcParams::default() }.validate().unwrap_err();
        assert_eq!(e.param, "eta");
    }
}
