//! HULL's host pacer on the sender's side of the data direction (`--pacer`; specs/dc.md §3.4,
//! §7.2 H2 and H5–H7 on kernel flows). The model is [`ccp_qdisc::pacer`], the same the
//! simulator's hosts run, here in nanoseconds on the packets the sender's namespace writes,
//! before they reach the bottleneck queue: as the testbed's NetFPGA sat on the sender's wire in
//! front of the switch.
//!
//! What the router adds around the model:
//! - **Flows** are TCP connections, keyed by the hash of addresses and ports
//!   ([`crate::packet::flow_hash`]). A flow is associated when an ACK carrying ECN-Echo reaches
//!   the sender, i.e. when the router writes it to the sender's device ([`SenderPacer::on_ack`]):
//!   the sender-side pacer learns of it where and when the host does.
//! - **Input**: the sender's device has no line rate of its own, so packets enter the FIFO as
//!   they arrive; a packet that finds the FIFO full is dropped and counted (the hardware's FIFO
//!   has no way to push back on the host, unlike the simulator's flows, which wait).
//! - **Output**: released packets join the bottleneck queue when the router next wakes (its
//!   timer is never armed closer than 20 µs, about one token tick), beside the packets of flows
//!   that are not paced; neither class has priority (§8 A19b).

use ccp_qdisc::pacer::{Admit, Pacer, PacerSettings};
use ccp_qdisc::rng::{Draw, SeedableRng, SplitMix64};
use ccp_qdisc::{Nanos, MTU_BYTES, NANOS_PER_SEC};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::packet::{flow_hash, reverse_flow_hash, tcp_ece, IpPacket};

/// `--pacer`: the model's settings, the sending host's line rate (the token rate's ceiling) and
/// the seed of the association draws.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    pub settings: PacerSettings,
    pub line_rate_bps: f64,
    pub seed: u64,
}

/// What the pacer did, in the exit summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PacerSummary {
    /// Packets that went through the token bucket, and their bytes.
    pub packets: u64,
    pub bytes: u64,
    /// Flows put in the association table.
    pub associations: u64,
    /// Packets of associated flows dropped because the FIFO was full.
    pub dropped_full: u64,
    pub mean_delay_us: f64,
    pub max_delay_us: f64,
    pub peak_backlog_bytes: u64,
    /// The token rate at the end, Mbit/s.
    pub final_rate_mbps: f64,
}

/// The pacer of the sender's side.
#[derive(Debug)]
pub struct SenderPacer {
    core: Pacer<u64, IpPacket>,
    rng: SplitMix64,
    dropped_full: u64,
    /// What the bucket has released since the caller last took it (in release order).
    pub released: Vec<IpPacket>,
}

impl SenderPacer {
    /// A pacer from `cfg`; an error names the `--pacer-…` option that cannot work.
    pub fn new(cfg: &PacerConfig) -> Result<SenderPacer> {
        let params = cfg.settings.params(cfg.line_rate_bps, NANOS_PER_SEC, MTU_BYTES).map_err(|e| {
            let flag = match e.param {
                "depth_bytes" => "--pacer-depth-bytes",
                "tick_us" => "--pacer-tick-us",
                "beta_per_s" => "--pacer-beta-per-s",
                "associate_probability" => "--pacer-associate-probability",
                "line_rate" => "--pacer-line-rate-mbps",
                _ => "--pacer",
            };
            Error::param(flag, e.message)
        })?;
        Ok(SenderPacer {
            core: Pacer::new(params),
            rng: SplitMix64::seed_from_u64(cfg.seed),
            dropped_full: 0,
            released: Vec::new(),
        })
    }

    /// Runs the token ticks and rate updates due by `now` into [`SenderPacer::released`].
    pub fn advance(&mut self, now: Nanos) {
        self.core.advance(now, &mut self.released);
    }

    /// A packet from the sender: handed back if its flow is not paced (it goes on to the
    /// queue), else kept in the FIFO (or dropped when the FIFO is full). Call
    /// [`SenderPacer::advance`] to `now` first.
    pub fn arrive(&mut self, now: Nanos, packet: IpPacket) -> Option<IpPacket> {
        if tcp_ece(&packet.data).is_none() {
            return Some(packet);
        }
        let flow = flow_hash(&packet.data);
        if !self.core.associated(flow, now) {
            return Some(packet);
        }
        let bytes = packet.data.len() as u32;
        match self.core.admit(now, bytes) {
            Admit::Full => self.dropped_full += 1,
            // The input has no line rate here (entries take no time), so `At` never comes.
            Admit::Now | Admit::At(_) => self.core.enter(now, flow, packet, bytes, 0, &mut self.released),
        }
        None
    }

    /// An ACK reaches the sender: with ECN-Echo set, its flow may be associated (p_a).
    pub fn on_ack(&mut self, now: Nanos, data: &[u8]) {
        if tcp_ece(data) == Some(true) {
            if let Some(flow) = reverse_flow_hash(data) {
                let draw = self.rng.next_f64();
                self.core.on_ece(flow, now, draw);
            }
        }
    }

    /// When the pacer next needs to run (`None` while its FIFO is empty).
    pub fn next_event(&self) -> Option<Nanos> {
        self.core.next_event()
    }

    pub fn summary(&self) -> PacerSummary {
        let s = &self.core.stats;
        PacerSummary {
            packets: s.packets,
            bytes: s.bytes,
            associations: s.associations,
            dropped_full: self.dropped_full,
            mean_delay_us: if s.packets == 0 { 0.0 } else { s.delay_total as f64 / s.packets as f64 / 1e3 },
            max_delay_us: s.delay_max as f64 / 1e3,
            peak_backlog_bytes: s.peak_backlog_bytes,
            final_rate_mbps: self.core.rate_bytes_per_s() * 8.0 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::tests::ipv4;
    use ccp_qdisc::{Ecn, NANOS_PER_MS};

    /// A 1500-byte TCP data packet of the flow from port `sport` to 5201.
    fn data(sport: u16) -> Vec<u8> {
        let mut p = ipv4(1500, Ecn::Ect0);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p
    }

    /// Its ACK, with ECN-Echo when `ece`.
    fn ack(sport: u16, ece: bool) -> Vec<u8> {
        let mut a = ipv4(52, Ecn::NotEct);
        a[12..16].copy_from_slice(&[10, 77, 0, 2]);
        a[16..20].copy_from_slice(&[10, 77, 0, 1]);
        a[20..22].copy_from_slice(&5201u16.to_be_bytes());
        a[22..24].copy_from_slice(&sport.to_be_bytes());
        a[33] = if ece { 0x50 } else { 0x10 };
        a
    }

    fn pacer(p_a: f64) -> SenderPacer {
        let settings = PacerSettings { associate_probability: p_a, ..PacerSettings::default() };
        SenderPacer::new(&PacerConfig { settings, line_rate_bps: 1e9, seed: 1 }).unwrap()
    }

    #[test]
    fn only_flows_whose_acks_echo_ecn_are_paced() {
        let mut p = pacer(1.0);
        assert!(p.arrive(0, IpPacket::new(data(40000), 0, 0)).is_some(), "unassociated: passes");
        p.on_ack(0, &ack(40000, false));
        assert!(p.arrive(1, IpPacket::new(data(40000), 1, 1)).is_some(), "an ACK without ECN-Echo changes nothing");
        p.on_ack(2, &ack(40000, true));
        assert!(p.arrive(3, IpPacket::new(data(40000), 2, 3)).is_none(), "after ECN-Echo the flow is paced");
        assert!(p.arrive(3, IpPacket::new(data(40001), 3, 3)).is_some(), "another flow still passes");
        let mut udp = data(40000);
        udp[9] = 17;
        assert!(p.arrive(4, IpPacket::new(udp, 4, 4)).is_some(), "only TCP is paced");
        assert_eq!(p.summary().associations, 1);
        assert_eq!(p.released.len(), 1, "the full bucket let the first paced packet straight through");
    }

    #[test]
    fn a_paced_burst_leaves_at_the_token_rate() {
        let mut p = pacer(1.0);
        p.on_ack(0, &ack(40000, true));
        // 80 packets at once (120 KB, within the 128 KB FIFO): one bucket's worth leaves at once,
        // the rest at the token rate, which starts at line rate and follows what enters.
        for i in 0..80 {
            assert!(p.arrive(0, IpPacket::new(data(40000), i, 0)).is_none());
        }
        let at_once = p.released.len();
        assert!(at_once <= 3, "{at_once} released before any tick (3 KB bucket)");
        let mut last = 0;
        while let Some(t) = p.next_event() {
            p.advance(t);
            if p.released.len() == 80 {
                last = t;
                break;
            }
        }
        assert_eq!(p.released.len(), 80);
        let ids: Vec<u64> = p.released.iter().map(|x| x.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "released in order");
        // 120 KB at no more than 1 Gbit/s takes at least 0.96 ms.
        assert!(last >= 930_000, "the last left at {last} ns");
        // With nothing more entering, R decays by 7/8 per update toward β·Q (eq. 4.4), so a lone
        // burst drains over tens of milliseconds (29 ms here), not at line rate.
        assert!(last > 10 * NANOS_PER_MS && last < 100 * NANOS_PER_MS, "the last left at {last} ns");
        let s = p.summary();
        assert_eq!((s.packets, s.dropped_full, s.peak_backlog_bytes), (80, 0, 120_000 - 1500 * at_once as u64));
    }

    #[test]
    fn a_full_fifo_drops_and_counts() {
        let settings = PacerSettings { associate_probability: 1.0, fifo_bytes: 3_000, ..PacerSettings::default() };
        let mut p = SenderPacer::new(&PacerConfig { settings, line_rate_bps: 1e9, seed: 1 }).unwrap();
        p.on_ack(0, &ack(40000, true));
        for i in 0..6 {
            assert!(p.arrive(0, IpPacket::new(data(40000), i, 0)).is_none());
        }
        // Two leave at once (3 KB of tokens), two fit in the FIFO, two are dropped.
        assert_eq!((p.released.len(), p.summary().dropped_full), (2, 2));
    }

    #[test]
    fn settings_that_cannot_work_name_their_option() {
        let bad = |settings: PacerSettings, line_rate_bps: f64| {
            SenderPacer::new(&PacerConfig { settings, line_rate_bps, seed: 1 }).unwrap_err().to_string()
        };
        let d = PacerSettings::default();
        assert!(bad(d, 10e9).contains("--pacer-depth-bytes"), "{}", bad(d, 10e9));
        assert!(bad(PacerSettings { associate_probability: 2.0, ..d }, 1e9).contains("--pacer-associate-probability"));
        assert!(bad(PacerSettings { beta_per_s: -1.0, ..d }, 1e9).contains("--pacer-beta-per-s"));
        assert!(bad(d, 0.0).contains("--pacer-line-rate-mbps"));
    }
}
