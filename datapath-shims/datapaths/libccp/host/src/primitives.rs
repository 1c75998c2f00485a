//! What libccp's program sees on one ACK, from the host's measurements.
//!
//! libccp's `struct ccp_primitives` is described once, as [`Primitives`] in `ccp-lang`'s
//! reference interpreter, which runs the same programs for tests: a host fills that struct and
//! hands it over with [`to_libccp`], so the real library and the model are fed the same fields
//! with the same types. (The libccp crate's own builder would otherwise be a third description.)

use libccp::Primitives as LibccpPrimitives;

pub use ccp_lang::interp::Primitives;

/// The libccp crate's form of `p`, for `Connection::load_primitives`.
pub fn to_libccp(p: &Primitives) -> LibccpPrimitives {
    LibccpPrimitives::default()
        .with_bytes_acked(p.bytes_acked)
        .with_packets_acked(p.packets_acked)
        .with_bytes_misordered(p.bytes_misordered)
        .with_packets_misordered(p.packets_misordered)
        .with_ecn_bytes(p.ecn_bytes)
        .with_ecn_packets(p.ecn_packets)
        .with_lost_pkts_sample(p.lost_pkts_sample)
        .with_was_timeout(p.was_timeout)
        .with_rtt_sample_us(p.rtt_sample_us)
        .with_rate_outgoing(p.rate_outgoing)
        .with_rate_incoming(p.rate_incoming)
        .with_bytes_in_flight(p.bytes_in_flight)
        .with_packets_in_flight(p.packets_in_flight)
        .with_snd_cwnd(p.snd_cwnd)
        .with_snd_rate(p.snd_rate)
        .with_bytes_pending(p.bytes_pending)
}
