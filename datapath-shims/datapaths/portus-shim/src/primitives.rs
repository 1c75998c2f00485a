//! From the kernel's per-ACK record to libccp's `ccp_primitives`, the way ccp-kernel fills them
//! (ccp-anchors §1.6), with two deliberate differences: rates use the flow's MSS where
//! ccp-kernel assumes 1500-byte packets, and ACKs without a valid rate sample are still invoked
//! (ccp-kernel skips them, and with them the losses they report); their rates stay at the last
//! valid sample, as ccp-kernel keeps them.

use ccp_ebpf::Ack;
use ccp_libccp_host::primitives::Primitives;

const US_PER_S: u64 = 1_000_000;

/// The send and receive rates of a flow's last valid rate sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rates {
    pub outgoing: u64,
    pub incoming: u64,
}

impl Rates {
    /// Takes the record's rate sample if it has one.
    pub fn update(&mut self, a: &Ack) {
        if a.rate_delivered == 0 || a.rate_snd_us == 0 || a.rate_rcv_us == 0 {
            return;
        }
        let bytes = u64::from(a.rate_delivered).saturating_mul(u64::from(a.mss)).saturating_mul(US_PER_S);
        self.outgoing = bytes / u64::from(a.rate_snd_us);
        self.incoming = bytes / u64::from(a.rate_rcv_us);
    }
}

fn times(pkts: u32, mss: u32) -> u32 {
    pkts.saturating_mul(mss)
}

/// The primitives of `a`, in libccp's units (bytes, packets, µs, bytes per second).
/// `snd_cwnd`/`snd_rate` are what the caller feeds back: the last values libccp commanded, or
/// the kernel's window before it commanded any.
pub fn of_ack(a: &Ack, rates: Rates, snd_cwnd: u32, snd_rate: u32) -> Primitives {
    Primitives {
        bytes_acked: u32::try_from(a.bytes_acked).unwrap_or(u32::MAX),
        packets_acked: a.packets_acked,
        bytes_misordered: times(a.packets_misordered, a.mss),
        packets_misordered: a.packets_misordered,
        ecn_bytes: times(a.ce_pkts, a.mss),
        ecn_packets: a.ce_pkts,
        lost_pkts_sample: a.lost_pkts,
        was_timeout: a.timeout,
        // 0: no sample (libccp hands programs `u32::MAX` then, so `min` folds ignore it).
        rtt_sample_us: a.rtt_us.map_or(0, u64::from),
        rate_outgoing: rates.outgoing,
        rate_incoming: rates.incoming,
        bytes_in_flight: times(a.inflight_pkts, a.mss),
        packets_in_flight: a.inflight_pkts,
        snd_cwnd,
        snd_rate: u64::from(snd_rate),
        bytes_pending: a.pending_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack() -> Ack {
        Ack {
            fid: 1,
            ts_ns: 1,
            bytes_acked: 2 * 1448,
            packets_acked: 2,
            packets_misordered: 1,
            ce_pkts: 1,
            lost_pkts: 0,
            rtt_us: Some(20_000),
            rate_delivered: 10,
            rate_snd_us: 10_000,
            rate_rcv_us: 20_000,
            inflight_pkts: 30,
            pending_bytes: 5_000,
            cwnd_pkts: 32,
            mss: 1448,
            timeout: false,
            fallback: false,
        }
    }

    #[test]
    fn an_ack_maps_to_libccp_units() {
        let mut rates = Rates::default();
        rates.update(&ack());
        let p = of_ack(&ack(), rates, 46_336, 0);
        assert_eq!((p.bytes_acked, p.packets_acked), (2_896, 2));
        assert_eq!((p.bytes_misordered, p.packets_misordered), (1448, 1));
        assert_eq!((p.ecn_bytes, p.ecn_packets, p.lost_pkts_sample, p.was_timeout), (1448, 1, 0, false));
        assert_eq!(p.rtt_sample_us, 20_000);
        // 10 packets of 1448 bytes over 10 ms sent and 20 ms acknowledged.
        assert_eq!((p.rate_outgoing, p.rate_incoming), (1_448_000, 724_000));
        assert_eq!((p.bytes_in_flight, p.packets_in_flight, p.bytes_pending), (43_440, 30, 5_000));
        assert_eq!((p.snd_cwnd, p.snd_rate), (46_336, 0));
    }

    #[test]
    fn rates_stay_at_the_last_valid_sample_and_a_missing_rtt_is_zero() {
        let mut rates = Rates::default();
        rates.update(&ack());
        let before = rates;
        let none = Ack { rate_delivered: 0, rtt_us: None, timeout: true, ..ack() };
        rates.update(&none);
        assert_eq!(rates, before);
        let p = of_ack(&none, rates, 1, 2);
        assert_eq!((p.rtt_sample_us, p.was_timeout, p.snd_rate), (0, true, 2));
    }

    #[test]
    fn huge_counts_saturate_instead_of_wrapping() {
        let a = Ack { bytes_acked: 1 << 40, inflight_pkts: u32::MAX, packets_misordered: u32::MAX, ..ack() };
        let p = of_ack(&a, Rates::default(), 0, 0);
        assert_eq!((p.bytes_acked, p.bytes_in_flight, p.bytes_misordered), (u32::MAX, u32::MAX, u32::MAX));
        let mut rates = Rates::default();
        rates.update(&Ack { rate_delivered: u32::MAX, mss: u32::MAX, rate_snd_us: 1, rate_rcv_us: 1, ..ack() });
        assert_eq!(rates.outgoing, u64::MAX, "saturates rather than overflowing");
    }
}
