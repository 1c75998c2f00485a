//! Router-side datapath programs as queue disciplines.
//!
//! Each discipline is a deterministic state machine: the caller passes the current time in
//! nanoseconds, hands packets in with [`Qdisc::enqueue`] and asks for them back with
//! [`Qdisc::dequeue`] whenever its link can send. Nothing here reads a clock, sends a packet or
//! draws from an unseeded random source, so the same code runs in the user-space router
//! (`ccp-router`), in the packet-level simulator and in unit tests with exact expectations.
//!
//! What a discipline needs to know about a packet is the small [`Packet`] trait: its length, its
//! ECN codepoint (read and write), and a key naming its source for congestion messages (QCN).
//! The queue records enqueue times itself, so packets carry no timestamp field.
//!
//! Side effects that are not "a packet leaves" come back as values in [`Outputs`]: dropped
//! packets (so the caller can log or account them) and congestion notifications (so the router
//! can put them on the wire and the simulator can schedule them as events).
//!
//! Link capacity is pushed in, never measured: a fixed-rate link calls [`Qdisc::on_link_rate`]
//! when its rate is set or changes; a trace-driven link calls [`Qdisc::on_opportunity`] for every
//! delivery opportunity, used or not (ABC's capacity estimate counts both), and does so
//! [`Qdisc::capacity_lookahead`] ahead of time for a discipline that reads the trace's future
//! (PK-ABC, the ABC oracle).

pub mod abc;
pub mod abc_coexist;
pub mod codel;
pub mod dctcp;
pub mod droptail;
pub mod fair_queue;
pub mod fifo;
pub mod pacer;
pub mod phantom;
pub mod qcn;
pub mod red;
pub mod rng;
pub mod space_saving;
pub mod window;

pub use fifo::{Fifo, Limit};

/// Time in nanoseconds on the caller's clock. Only differences matter.
pub type Nanos = u64;

/// Nanoseconds in one second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Nanoseconds in one millisecond.
pub const NANOS_PER_MS: u64 = 1_000_000;

/// The full-sized packet the specs count in when a parameter is given "in packets" (1500 B).
pub const MTU_BYTES: u32 = 1500;

/// A discipline parameter out of its valid range: names the parameter so the router's command
/// line (or an experiment file) can say exactly what to fix.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamError {
    pub param: &'static str,
    pub message: String,
}

impl ParamError {
    pub fn new(param: &'static str, message: impl Into<String>) -> ParamError {
        ParamError { param, message: message.into() }
    }
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.param, self.message)
    }
}

impl std::error::Error for ParamError {}

/// Seconds as f64 from nanoseconds (for the specs' formulas, which are in seconds).
pub fn secs(ns: Nanos) -> f64 {
    ns as f64 / NANOS_PER_SEC as f64
}

/// The two-bit ECN field of an IP header (RFC 3168 bit order: value = the field's integer value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// `00`: not ECN-capable; AQMs drop instead of marking (or leave alone).
    NotEct,
    /// `01`: ECT(1). An ABC router reads it, like ECT(0), as "accelerate" (brakes are CE).
    Ect1,
    /// `10`: ECT(0). Classic ECN senders send this, ABC senders on kernel TCP among them.
    Ect0,
    /// `11`: congestion experienced.
    Ce,
}

impl Ecn {
    /// Decodes the two low bits of `bits`.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit value as it appears in the IP header.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// True for every codepoint but Not-ECT: the transport said it understands marks.
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }
}

/// What a queue discipline needs from a packet. Implementations: the router's raw IP packet
/// (which fixes the IPv4 checksum in `set_ecn`), the simulator's packet struct, test packets.
pub trait Packet {
    /// Identifies where a congestion notification about this packet must go (QCN sends to the
    /// source of the sampled packet). The router uses a copy of the packet's first header bytes,
    /// the simulator a host or flow id.
    type FeedbackKey: Clone + std::fmt::Debug;

    /// Length on the wire, bytes (the IP packet for the router).
    fn len_bytes(&self) -> u32;

    /// The current ECN codepoint.
    fn ecn(&self) -> Ecn;

    /// Rewrites the ECN codepoint (and whatever checksum covers it).
    fn set_ecn(&mut self, ecn: Ecn);

    /// The key a congestion notification about this packet is addressed with.
    fn feedback_key(&self) -> Self::FeedbackKey;

    /// Names the packet's transport flow, for disciplines that count flows (ABC's coexistence
    /// scheduler): a hash of the 5-tuple for the router, the flow id in the simulator. Packets of
    /// one flow must share it; different flows should rarely collide.
    fn flow_key(&self) -> u64;

    /// The transport destination port (TCP or UDP), if the packet has one: an operator's
    /// classification rule can name a port range.
    fn dst_port(&self) -> Option<u16> {
        None
    }
}

/// A packet handed back by [`Qdisc::dequeue`], with the time it was enqueued (so the caller can
/// log its sojourn time without the packet carrying a timestamp).
#[derive(Debug)]
pub struct Departure<P> {
    pub packet: P,
    pub enqueued_at: Nanos,
}

/// Why a discipline dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The buffer limit (packets or bytes) was reached on arrival.
    BufferFull,
    /// An active queue management decision (CoDel's control law, or a marking discipline told to
    /// drop non-ECT packets it would have marked).
    Aqm,
}

/// A dropped packet, handed back so the caller can log and account it.
#[derive(Debug)]
pub struct Dropped<P> {
    pub packet: P,
    pub reason: DropReason,
    /// When it was enqueued, for packets dropped from inside the queue (CoDel); `None` for packets
    /// refused on arrival.
    pub enqueued_at: Option<Nanos>,
}

/// Everything a discipline produced besides the departing packet. The caller drains it after
/// every call (or lets it accumulate and drains it when convenient).
#[derive(Debug)]
pub struct Outputs<P: Packet> {
    pub drops: Vec<Dropped<P>>,
    pub notifications: Vec<qcn::CongestionNotification<P::FeedbackKey>>,
}

impl<P: Packet> Default for Outputs<P> {
    fn default() -> Self {
        Outputs { drops: Vec::new(), notifications: Vec::new() }
    }
}

impl<P: Packet> Outputs<P> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.drops.is_empty() && self.notifications.is_empty()
    }
}

/// A queue discipline: a buffer plus the marking, dropping and feedback logic of one router
/// program. Object safe, so a router can pick one at run time.
pub trait Qdisc<P: Packet> {
    /// Offers an arriving packet at time `now`. A refused packet comes back in `out.drops`;
    /// congestion notifications triggered by the arrival go to `out.notifications`.
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>);

    /// The link can start sending a packet at time `now`: returns the packet to send, if any.
    /// Packets the discipline drops on the way (CoDel) go to `out.drops`.
    fn dequeue(&mut self, now: Nanos, out: &mut Outputs<P>) -> Option<Departure<P>>;

    /// The link's rate changed (or was set), bytes per second. Fixed-rate links call this once at
    /// start; the simulator calls it whenever a port's speed changes.
    fn on_link_rate(&mut self, _now: Nanos, _bytes_per_sec: f64) {}

    /// A trace-driven link offers a delivery opportunity of `bytes` at `at`, whether or not the
    /// queue has anything to send. Called in order of `at`, before the `dequeue` at `at`, and
    /// before every `dequeue` at a time ≥ `at` − [`Qdisc::capacity_lookahead`]. With no
    /// lookahead exactly one opportunity is reported per dequeue opportunity, just before it (so
    /// `at` is then the current time).
    fn on_opportunity(&mut self, _at: Nanos, _bytes: u32) {}

    /// How far ahead of time the discipline wants to hear of a trace-driven link's opportunities
    /// (0: as they happen). Only an emulator can honour it: it is an oracle's view of the link.
    fn capacity_lookahead(&self) -> Nanos {
        0
    }

    /// The buffers: every discipline here is one [`Fifo`] (or, for a scheduler, several) plus
    /// the logic around it, so the buffer queries below come from them.
    fn buffers(&self) -> &[Fifo<P>];

    /// Packets in the buffers.
    fn len_packets(&self) -> usize {
        self.buffers().iter().map(Fifo::len_packets).sum()
    }

    /// Bytes in the buffers.
    fn len_bytes(&self) -> u64 {
        self.buffers().iter().map(Fifo::len_bytes).sum()
    }

    /// Enqueue time of the earliest packet at the head of a buffer, if any (a link uses it to
    /// know when a packet could have started transmission; a scheduler serves only packets that
    /// had arrived by the time it is asked).
    fn head_enqueued_at(&self) -> Option<Nanos> {
        self.buffers().iter().filter_map(Fifo::head_enqueued_at).min()
    }

    /// A short name for logs and summaries.
    fn name(&self) -> &'static str;
}

#[cfg(test)]
pub(crate) mod test_packet {
    //! A minimal packet for unit tests: a length, an ECN field and a source id.
    use super::{Ecn, Packet};

    #[derive(Debug, Clone, PartialEq)]
    pub struct TestPacket {
        pub len: u32,
        pub ecn: Ecn,
        pub src: u32,
    }

    impl TestPacket {
        pub fn new(len: u32, ecn: Ecn) -> TestPacket {
            TestPacket { len, ecn, src: 0 }
        }
    }

    impl Packet for TestPacket {
        type FeedbackKey = u32;

        fn len_bytes(&self) -> u32 {
            self.len
        }

        fn ecn(&self) -> Ecn {
            self.ecn
        }

        fn set_ecn(&mut self, ecn: Ecn) {
            self.ecn = ecn;
        }

        fn feedback_key(&self) -> u32 {
            self.src
        }

        fn flow_key(&self) -> u64 {
            u64::from(self.src)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ecn;

    #[test]
    fn ecn_bits_roundtrip() {
        for b in 0..4u8 {
            assert_eq!(Ecn::from_bits(b).bits(), b);
        }
        assert_eq!(Ecn::from_bits(0b1111_1101), Ecn::Ect1);
        assert!(!Ecn::NotEct.is_ect());
        assert!(Ecn::Ce.is_ect());
    }
}
