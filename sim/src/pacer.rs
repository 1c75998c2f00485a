//! HULL's host pacer in the simulator's hosts (specs/dc.md §3.4): the model is
//! [`ccp_qdisc::pacer`], shared with ccp-router's sender side, run here in picoseconds. What a
//! simulated host adds around it:
//!
//! - **Where it sits**: packets of associated flows enter the FIFO at most at line rate and only
//!   while it has room for them: a flow whose packet does not fit waits (the hardware's 128 KB
//!   FIFO pushed back on the host); released packets join the NIC's queue in release order beside
//!   the packets that bypass the pacer, neither class having priority (§8 A19b).
//! - **Its draws**: association draws come from the host's own seeded stream.
//! - **Its timer**: the simulator schedules an event at [`Pacer::next_event`] only while the FIFO
//!   holds packets, and remembers the one it has armed.

use ccp_qdisc::pacer::PacerParams;
pub use ccp_qdisc::pacer::{Admit, PacerStats};

use crate::packet::PacketId;
use crate::rng::Rng;
use crate::time::{tx_time, Time};
use crate::transport::FlowId;

/// One host's pacer.
#[derive(Debug)]
pub struct Pacer {
    core: ccp_qdisc::pacer::Pacer<FlowId, PacketId>,
    line_rate_bps: u64,
    rng: Rng,
    /// The pacer event the simulator has scheduled, if any.
    pub armed: Option<Time>,
    /// Flows waiting for room in the FIFO.
    pub waiting: Vec<FlowId>,
}

impl Pacer {
    /// A pacer with `params` (in picoseconds) on a NIC of `line_rate_bps`.
    pub fn new(params: PacerParams, line_rate_bps: u64, rng: Rng) -> Pacer {
        Pacer { core: ccp_qdisc::pacer::Pacer::new(params), line_rate_bps, rng, armed: None, waiting: Vec::new() }
    }

    pub fn stats(&self) -> &PacerStats {
        &self.core.stats
    }

    /// Packets in the FIFO.
    pub fn held_packets(&self) -> usize {
        self.core.held_packets()
    }

    /// Whether `flow`'s packets go through the bucket.
    pub fn associated(&mut self, flow: FlowId, now: Time) -> bool {
        self.core.associated(flow, now)
    }

    /// An ECN-Echo ACK reached `flow`'s sender: with probability p_a the flow is (re)associated.
    pub fn on_ece(&mut self, flow: FlowId, now: Time) {
        let draw = self.rng.uniform();
        self.core.on_ece(flow, now, draw);
    }

    /// Whether a packet of up to `bytes` may enter now (after [`Pacer::advance`] to `now`).
    pub fn admit(&self, now: Time, bytes: u32) -> Admit {
        self.core.admit(now, bytes)
    }

    /// Whether a packet of `bytes` would fit in the FIFO.
    pub fn has_room(&self, bytes: u32) -> bool {
        self.core.has_room(bytes)
    }

    /// A packet of associated `flow` enters, at line rate; what the bucket releases at once goes
    /// to `released`.
    pub fn enter(&mut self, now: Time, flow: FlowId, id: PacketId, bytes: u32, released: &mut Vec<PacketId>) {
        self.core.enter(now, flow, id, bytes, tx_time(bytes, self.line_rate_bps), released);
    }

    /// When the simulator must call [`Pacer::advance`] next (`None` while the FIFO is empty).
    pub fn next_event(&self) -> Option<Time> {
        self.core.next_event()
    }

    /// Runs every tick and rate update due by `now`, releasing into `released`.
    pub fn advance(&mut self, now: Time, released: &mut Vec<PacketId>) {
        self.core.advance(now, released);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PacerConfig;
    use crate::rng::Stream;
    use crate::time::{PS_PER_SEC, PS_PER_US};

    fn params() -> PacerParams {
        PacerConfig::default().settings().params(1e9, PS_PER_SEC, 1500).unwrap()
    }

    /// Table 4.3's settings, in picoseconds, are the shared model's constants.
    #[test]
    fn the_scenario_defaults_are_the_testbeds() {
        let p = params();
        assert_eq!((p.rate_interval, p.tick, p.idle_timeout), (64 * PS_PER_US, 16 * PS_PER_US, 10_000 * PS_PER_US));
        assert_eq!((p.eta, p.beta_per_s, p.associate_probability), (0.125, 16.0, 0.125));
        assert_eq!((p.table_entries, p.fifo_bytes, p.depth_bytes), (64, 128_000, 3_000.0));
        assert_eq!((p.min_rate_bytes_per_s, p.line_rate_bytes_per_s), (62_500.0, 125e6));
    }

    /// The FIFO's input runs at the host's line rate, in simulator time.
    #[test]
    fn entry_takes_a_packets_serialization_at_line_rate() {
        let mut pc = Pacer::new(params(), 1_000_000_000, Rng::stream(1, Stream::Pacer, 0));
        let mut out = Vec::new();
        for i in 0..3 {
            pc.enter(0, 1, i, 1500, &mut out);
        }
        assert_eq!(out.len(), 2, "a full 3 KB bucket lets two 1500 B packets through at once");
        assert_eq!(pc.admit(0, 1500), Admit::At(36 * PS_PER_US), "three 1500 B packets at 1 Gbit/s take 36 µs");
    }
}
