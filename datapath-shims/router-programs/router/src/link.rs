//! The emulated link: when the queue may send. Three shapes:
//!
//! * **Unlimited**: a packet leaves as soon as it arrives (the default ACK direction).
//! * **Fixed rate**: a serialising link; a packet starts when the link is free and takes
//!   len/rate to send, so any packet size gets exactly the configured rate.
//! * **Trace** (mahimahi semantics): each trace line is an opportunity to send 1500 bytes. The
//!   head packet consumes the opportunity's bytes; what is left of an opportunity can carry
//!   further small packets (ACKs) but is lost when the queue runs dry; a packet larger than one
//!   opportunity spans several. Opportunities that find the queue empty are still reported to the
//!   queue discipline (ABC's capacity estimate counts them) and to the capacity accounting. A
//!   discipline that asks for a capacity lookahead L (PK-ABC) hears of every opportunity L
//!   before it happens: the link reads the trace ahead with a second cursor.
//!
//! The link works in *virtual* time: it is asked to catch up to `now` and gives every packet the
//! exact time it would have started and finished on a real link, however late the event loop
//! woke up. Lateness therefore never accumulates; the delay line releases each packet at its exact
//! finish time plus the propagation delay.

use std::sync::Arc;

use ccp_qdisc::{Departure, Nanos, Outputs, Packet, Qdisc, NANOS_PER_SEC};

use crate::trace::{Trace, TraceCursor, OPPORTUNITY_BYTES};

/// How a direction's link is shaped.
#[derive(Debug, Clone)]
pub enum LinkShape {
    Unlimited,
    Fixed { bits_per_sec: f64 },
    Trace(Arc<Trace>),
}

impl LinkShape {
    /// Capacity offered over `elapsed` ns from the start, bytes (`None` when unlimited).
    pub fn capacity_bytes(&self, elapsed: Nanos) -> Option<f64> {
        match self {
            LinkShape::Unlimited => None,
            LinkShape::Fixed { bits_per_sec } => Some(bits_per_sec / 8.0 * elapsed as f64 / NANOS_PER_SEC as f64),
            LinkShape::Trace(t) => Some(t.capacity_bytes(elapsed) as f64),
        }
    }
}

/// A packet that left the queue.
#[derive(Debug)]
pub struct Sent<P> {
    pub departure: Departure<P>,
    /// When it started transmission (left the queue).
    pub dequeued_at: Nanos,
    /// When its last byte left the link.
    pub finished_at: Nanos,
}

#[derive(Debug)]
enum State<P> {
    Unlimited,
    Fixed {
        bytes_per_sec: f64,
        /// When the link finishes its current packet, ns (fractional, so rounding never drifts).
        busy_until: f64,
    },
    Trace {
        trace: Arc<Trace>,
        /// The next opportunity to serve.
        cursor: TraceCursor,
        /// The next opportunity to report to the queue discipline: `cursor` itself without a
        /// lookahead, up to the lookahead ahead of it with one.
        report: TraceCursor,
        /// A packet larger than what was left of an opportunity: bytes still to send.
        in_service: Option<(Departure<P>, Nanos, u32)>,
    },
}

#[derive(Debug)]
pub struct Link<P> {
    state: State<P>,
}

impl<P: Packet> Link<P> {
    /// A link of `shape` whose time (trace position) starts at `start`.
    pub fn new(shape: &LinkShape, start: Nanos) -> Link<P> {
        let state = match shape {
            LinkShape::Unlimited => State::Unlimited,
            LinkShape::Fixed { bits_per_sec } => State::Fixed { bytes_per_sec: bits_per_sec / 8.0, busy_until: start as f64 },
            LinkShape::Trace(t) => {
                State::Trace { trace: Arc::clone(t), cursor: t.cursor(start), report: t.cursor(start), in_service: None }
            }
        };
        Link { state }
    }

    /// Tells the queue discipline about the link's capacity where that is a fixed rate.
    pub fn announce_rate(&self, now: Nanos, qdisc: &mut dyn Qdisc<P>) {
        if let State::Fixed { bytes_per_sec, .. } = self.state {
            qdisc.on_link_rate(now, bytes_per_sec);
        }
    }

    /// Serves the queue for every transmission opportunity up to `now`, appending what left to
    /// `sent`. Returns the trace opportunities that passed (used or not).
    pub fn serve(&mut self, now: Nanos, qdisc: &mut dyn Qdisc<P>, out: &mut Outputs<P>, sent: &mut Vec<Sent<P>>) -> u64 {
        match &mut self.state {
            State::Unlimited => {
                while let Some(t) = qdisc.head_enqueued_at().filter(|&t| t <= now) {
                    if let Some(d) = qdisc.dequeue(t, out) {
                        sent.push(Sent { departure: d, dequeued_at: t, finished_at: t });
                    }
                }
                0
            }
            State::Fixed { bytes_per_sec, busy_until } => {
                while let Some(head) = qdisc.head_enqueued_at() {
                    let start = busy_until.max(head as f64);
                    if start > now as f64 {
                        break;
                    }
                    let start_ns = start.ceil() as Nanos;
                    let Some(d) = qdisc.dequeue(start_ns, out) else { continue };
                    *busy_until = start + f64::from(d.packet.len_bytes()) * NANOS_PER_SEC as f64 / *bytes_per_sec;
                    sent.push(Sent { departure: d, dequeued_at: start_ns, finished_at: busy_until.ceil() as Nanos });
                }
                0
            }
            State::Trace { trace, cursor, report, in_service } => {
                let lookahead = qdisc.capacity_lookahead();
                let mut passed = 0;
                loop {
                    let t = trace.time_at(cursor);
                    if t > now {
                        break;
                    }
                    // Report this opportunity and, with a lookahead L, every one in (t, t + L]
                    // before the queue decides at t. Without one, only up to this opportunity:
                    // of several in the same millisecond the first dequeue sees only the first,
                    // as a link that reports opportunities as they happen.
                    while trace.ordinal(report) <= trace.ordinal(cursor)
                        || (lookahead > 0 && trace.time_at(report) <= t + lookahead)
                    {
                        qdisc.on_opportunity(trace.time_at(report), OPPORTUNITY_BYTES);
                        trace.advance(report);
                    }
                    trace.advance(cursor);
                    passed += 1;
                    let mut credit = OPPORTUNITY_BYTES;
                    while credit > 0 {
                        if in_service.is_none() {
                            // Only packets that had arrived by this opportunity may use it.
                            if qdisc.head_enqueued_at().is_none_or(|h| h > t) {
                                break;
                            }
                            let Some(d) = qdisc.dequeue(t, out) else { continue };
                            let len = d.packet.len_bytes();
                            *in_service = Some((d, t, len));
                        }
                        let Some((_, _, remaining)) = in_service.as_mut() else { break };
                        if *remaining > credit {
                            *remaining -= credit;
                            credit = 0;
                        } else {
                            credit -= *remaining;
                            if let Some((d, started, _)) = in_service.take() {
                                sent.push(Sent { departure: d, dequeued_at: started, finished_at: t });
                            }
                        }
                    }
                }
                passed
            }
        }
    }

    /// When the link next needs to run, given the queue's state (`None`: only when a packet arrives).
    pub fn next_wake(&self, qdisc: &dyn Qdisc<P>) -> Option<Nanos> {
        let head = qdisc.head_enqueued_at();
        match &self.state {
            State::Unlimited => head,
            State::Fixed { busy_until, .. } => head.map(|h| (busy_until.ceil() as Nanos).max(h)),
            State::Trace { trace, cursor, in_service, .. } => {
                (in_service.is_some() || head.is_some()).then(|| trace.time_at(cursor).max(head.unwrap_or(0)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_qdisc::droptail::DropTail;
    use ccp_qdisc::{Ecn, Limit, NANOS_PER_MS};
    use std::path::Path;

    #[derive(Debug)]
    struct P(u32);
    impl Packet for P {
        type FeedbackKey = ();
        fn len_bytes(&self) -> u32 {
            self.0
        }
        fn ecn(&self) -> Ecn {
            Ecn::NotEct
        }
        fn set_ecn(&mut self, _: Ecn) {}
        fn feedback_key(&self) {}
        fn flow_key(&self) -> u64 {
            0
        }
    }

    fn run(shape: LinkShape, arrivals: &[(Nanos, u32)], until: Nanos) -> Vec<(Nanos, Nanos, u32)> {
        let mut link = Link::new(&shape, 0);
        let mut q: DropTail<P> = DropTail::new(Limit::Unlimited);
        let mut out = Outputs::new();
        let mut sent = Vec::new();
        for &(t, len) in arrivals {
            link.serve(t, &mut q, &mut out, &mut sent);
            q.enqueue(t, P(len), &mut out);
            link.serve(t, &mut q, &mut out, &mut sent);
        }
        link.serve(until, &mut q, &mut out, &mut sent);
        sent.into_iter().map(|s| (s.dequeued_at, s.finished_at, s.departure.packet.0)).collect()
    }

    #[test]
    fn fixed_rate_serialises_exactly() {
        // 12 Mbit/s: 1500 B take 1 ms.
        let s = run(
            LinkShape::Fixed { bits_per_sec: 12e6 },
            &[(0, 1500), (0, 1500), (0, 750), (10 * NANOS_PER_MS, 1500)],
            NANOS_PER_SEC,
        );
        assert_eq!(
            s,
            vec![
                (0, NANOS_PER_MS, 1500),
                (NANOS_PER_MS, 2 * NANOS_PER_MS, 1500),
                (2 * NANOS_PER_MS, 2 * NANOS_PER_MS + NANOS_PER_MS / 2, 750),
                (10 * NANOS_PER_MS, 11 * NANOS_PER_MS, 1500),
            ]
        );
    }

    #[test]
    fn fixed_rate_has_no_rounding_drift() {
        // 1 Gbit/s of 1500 B packets: 12 µs each; 100,000 of them take exactly 1.2 s.
        let arrivals: Vec<(Nanos, u32)> = (0..100_000).map(|_| (0, 1500)).collect();
        let s = run(LinkShape::Fixed { bits_per_sec: 1e9 }, &arrivals, 10 * NANOS_PER_SEC);
        assert_eq!(s.last().unwrap().1, 1_200_000_000);
    }

    #[test]
    fn trace_opportunities_carry_1500_bytes() {
        let trace = Arc::new(Trace::parse(Path::new("t"), "1\n1\n2\n").unwrap());
        // Three MTU packets at 0: two leave at 1 ms, one at 2 ms; then 40 ACKs of 60 B arriving at
        // 2.5 ms share the next opportunity (25 fit in 1500 B) and the rest take the one after.
        let mut arrivals = vec![(0, 1500), (0, 1500), (0, 1500)];
        arrivals.extend((0..40).map(|_| (2 * NANOS_PER_MS + NANOS_PER_MS / 2, 60)));
        let s = run(LinkShape::Trace(trace), &arrivals, 10 * NANOS_PER_MS);
        let at: Vec<Nanos> = s.iter().map(|x| x.1 / NANOS_PER_MS).collect();
        assert_eq!(&at[..3], &[1, 1, 2]);
        // Period 2 ms: the next opportunities are at 3, 3, 4 ms.
        assert_eq!(at[3..].iter().filter(|&&t| t == 3).count(), 25 + 15);
    }

    #[test]
    fn trace_packets_larger_than_an_opportunity_span_several() {
        let trace = Arc::new(Trace::parse(Path::new("t"), "1\n").unwrap());
        let s = run(LinkShape::Trace(trace), &[(0, 4000), (0, 100)], 10 * NANOS_PER_MS);
        // 4000 B need opportunities at 1, 2, 3 ms; the 100 B packet uses the rest of the third.
        assert_eq!(s, vec![(NANOS_PER_MS, 3 * NANOS_PER_MS, 4000), (3 * NANOS_PER_MS, 3 * NANOS_PER_MS, 100)]);
    }

    #[test]
    fn arrivals_never_use_earlier_opportunities() {
        let trace = Arc::new(Trace::parse(Path::new("t"), "1\n").unwrap());
        let mut link = Link::new(&LinkShape::Trace(trace), 0);
        let mut q: DropTail<P> = DropTail::new(Limit::Unlimited);
        let (mut out, mut sent) = (Outputs::new(), Vec::new());
        // The loop woke late: opportunities at 1..=5 ms have passed, but the packet arrived at 4.5 ms.
        q.enqueue(4 * NANOS_PER_MS + NANOS_PER_MS / 2, P(1500), &mut out);
        assert_eq!(link.serve(5 * NANOS_PER_MS, &mut q, &mut out, &mut sent), 5);
        assert_eq!(sent[0].finished_at, 5 * NANOS_PER_MS);
    }

    /// What a link told its queue discipline, in order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Call {
        /// `on_opportunity` for an opportunity at this time, ms.
        Opportunity(Nanos),
        /// `dequeue` at this time, ms.
        Dequeue(Nanos),
    }

    /// A drop-tail queue that records the link's calls and asks for a capacity lookahead.
    struct Recorder {
        inner: DropTail<P>,
        lookahead: Nanos,
        calls: Vec<Call>,
    }

    impl Qdisc<P> for Recorder {
        fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
            self.inner.enqueue(now, packet, out);
        }
        fn dequeue(&mut self, now: Nanos, out: &mut Outputs<P>) -> Option<Departure<P>> {
            self.calls.push(Call::Dequeue(now / NANOS_PER_MS));
            self.inner.dequeue(now, out)
        }
        fn on_opportunity(&mut self, at: Nanos, _bytes: u32) {
            self.calls.push(Call::Opportunity(at / NANOS_PER_MS));
        }
        fn capacity_lookahead(&self) -> Nanos {
            self.lookahead
        }
        fn buffers(&self) -> &[ccp_qdisc::Fifo<P>] {
            self.inner.buffers()
        }
        fn name(&self) -> &'static str {
            "recorder"
        }
    }

    /// Three MTU packets at 0 on the trace "1 1 2" (period 2 ms) served up to 4 ms: the calls.
    fn calls_with_lookahead(lookahead: Nanos) -> (Vec<Call>, u64) {
        let trace = Arc::new(Trace::parse(Path::new("t"), "1\n1\n2\n").unwrap());
        let mut link = Link::new(&LinkShape::Trace(trace), 0);
        let mut q = Recorder { inner: DropTail::new(Limit::Unlimited), lookahead, calls: Vec::new() };
        let (mut out, mut sent) = (Outputs::new(), Vec::new());
        for _ in 0..3 {
            q.enqueue(0, P(1500), &mut out);
        }
        let passed = link.serve(4 * NANOS_PER_MS, &mut q, &mut out, &mut sent);
        (q.calls, passed)
    }

    // The default: each opportunity is reported just before it is served, one at a time even
    // within a millisecond, and the ones that find the queue empty are reported too.
    #[test]
    fn without_lookahead_each_opportunity_is_reported_as_it_is_served() {
        use Call::{Dequeue as D, Opportunity as O};
        let (calls, passed) = calls_with_lookahead(0);
        assert_eq!(calls, vec![O(1), D(1), O(1), D(1), O(2), D(2), O(3), O(3), O(4)]);
        assert_eq!(passed, 6);
    }

    // PK-ABC: with a lookahead of 2 ms, before the queue decides at t it has heard of every
    // opportunity up to t + 2 ms, and of none later; capacity accounting is unchanged.
    #[test]
    fn with_lookahead_the_link_reports_the_trace_ahead() {
        use Call::{Dequeue as D, Opportunity as O};
        let (calls, passed) = calls_with_lookahead(2 * NANOS_PER_MS);
        assert_eq!(calls, vec![O(1), O(1), O(2), O(3), O(3), D(1), D(1), O(4), D(2), O(5), O(5), O(6)]);
        assert_eq!(passed, 6);
    }

    /// An ECN-capable packet for the ABC queue.
    #[derive(Debug)]
    struct Ect(Ecn);
    impl Packet for Ect {
        type FeedbackKey = ();
        fn len_bytes(&self) -> u32 {
            1500
        }
        fn ecn(&self) -> Ecn {
            self.0
        }
        fn set_ecn(&mut self, ecn: Ecn) {
            self.0 = ecn;
        }
        fn feedback_key(&self) {}
        fn flow_key(&self) -> u64 {
            0
        }
    }

    /// Accelerates an ABC queue leaves among the packets it sends in (40 ms, 60 ms] on a trace
    /// that offers 12 Mbit/s up to 100 ms and 24 Mbit/s from 100 to 200 ms, with one packet
    /// arriving per ms (cr = 12 Mbit/s, no queue).
    fn accelerates_on_a_step_up(capacity: ccp_qdisc::abc::Capacity) -> usize {
        use ccp_qdisc::abc::{Abc, AbcParams};
        let text: String = (1..=100).map(|ms| format!("{ms}\n")).chain((101..=200).map(|ms| format!("{ms}\n{ms}\n"))).collect();
        let trace = Arc::new(Trace::parse(Path::new("step"), &text).unwrap());
        let mut link = Link::new(&LinkShape::Trace(trace), 0);
        let mut q: Abc<Ect> = Abc::new(Limit::Packets(250), AbcParams { capacity, ..AbcParams::default() }).unwrap();
        let (mut out, mut sent) = (Outputs::new(), Vec::new());
        for ms in 1..=60 {
            q.enqueue(ms * NANOS_PER_MS, Ect(Ecn::Ect0), &mut out);
            link.serve(ms * NANOS_PER_MS, &mut q, &mut out, &mut sent);
        }
        sent.iter().filter(|s| s.dequeued_at > 40 * NANOS_PER_MS && s.departure.packet.0 == Ecn::Ect0).count()
    }

    // End to end through the link: f = η·μ/(2·cr) is η/2 for ABC (μ = cr) and η for PK-ABC with
    // a 100 ms lookahead (μ = 2·cr ahead), over 20 packets.
    #[test]
    fn pk_abc_marks_for_the_capacity_one_lookahead_ahead() {
        use ccp_qdisc::abc::Capacity;
        let abc = accelerates_on_a_step_up(Capacity::Past);
        let pk = accelerates_on_a_step_up(Capacity::Future { lookahead: 100 * NANOS_PER_MS });
        assert!(abc.abs_diff(10) <= 1, "ABC: {abc} accelerates of 20 (f = 0.49)");
        assert!(pk >= 19, "PK-ABC: {pk} accelerates of 20 (f = 0.98)");
    }

    #[test]
    fn unlimited_sends_at_arrival() {
        let s = run(LinkShape::Unlimited, &[(5, 1500), (7, 60)], 100);
        assert_eq!(s, vec![(5, 5, 1500), (7, 7, 60)]);
    }
}
