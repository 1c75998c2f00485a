//! The emulated link: when the queue may send. Three shapes:
//!
//! * **Unlimited**: a packet leaves as soon as it arrives (the default ACK direction).
//! * **Fixed rate**: a serialising link; a packet starts when the link is free and takes
//!   len/rate to send, so any packet size gets exactly the configured rate.
//! * **Trace** (mahimahi semantics): each trace line is an opportunity to send 1500 bytes. The
//!   head packet consumes the opportunity's bytes; what is left of an opportunity can carry
//!   further small packets (ACKs) but is lost when the queue runs dry; a packet larger than one
//!   opportunity spans several. Opportunities that find the queue empty are still reported to the
//!   queue discipline (ABC's capacity estimate counts them) and to the capacity accounting.
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
        cursor: TraceCursor,
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
            LinkShape::Trace(t) => State::Trace { trace: Arc::clone(t), cursor: t.cursor(start), in_service: None },
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
            State::Trace { trace, cursor, in_service } => {
                let mut passed = 0;
                loop {
                    let t = trace.time_at(cursor);
                    if t > now {
                        break;
                    }
                    trace.advance(cursor);
                    passed += 1;
                    qdisc.on_opportunity(t, OPPORTUNITY_BYTES);
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
            State::Trace { trace, cursor, in_service } => {
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

    #[test]
    fn unlimited_sends_at_arrival() {
        let s = run(LinkShape::Unlimited, &[(5, 1500), (7, 60)], 100);
        assert_eq!(s, vec![(5, 5, 1500), (7, 7, 60)]);
    }
}
