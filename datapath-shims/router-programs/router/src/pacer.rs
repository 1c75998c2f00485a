//! HULL's host pacer on the sender's side of the data direction (`--pacer`; specs/dc.md §3.4,
//! §7.2 H2 and H5–H7 on kernel flows). The model is [`ccp_qdisc::pacer`], the same the
//! simulator's hosts run, here in nanoseconds on the packets the sender's namespace writes,
//! before they reach the bottleneck queue: as the testbed's NetFPGA sat on the sender's wire in
//! front of the switch.
//!
//! The sending namespace is one host: by default one pacer serves all of its flows. With
//! `--pacer-per-flow` each flow gets a pacer of its own, as if every flow ran on a host of its
//! own (the testbed's static flows came from distinct servers).
//!
//! What the router adds around the model:
//! - **Flows** are TCP connections, keyed by the hash of addresses and ports
//!   ([`crate::packet::flow_hash`]). A flow is associated when an ACK carrying ECN-Echo reaches
//!   the sender, i.e. when the router writes it to the sender's device ([`SenderPacer::on_ack`]):
//!   the sender-side pacer learns of it where and when the host does.
//! - **Input**: the sender's device has no line rate of its own (a TUN device), so packets enter
//!   the FIFO as they arrive; a packet that finds the FIFO full is dropped and counted (the
//!   hardware's FIFO has no way to push back on the host, unlike the simulator's flows, which
//!   wait). Unpaced packets, too, reach the queue as fast as the kernel writes them, where the
//!   testbed's NIC serialized them at line rate: without the pacer the emulated host is
//!   burstier than the testbed's, and with it the token rate (at most the line rate) is the
//!   only limit.
//! - **Output**: released packets join the bottleneck queue when the router next wakes (its
//!   timer is never armed closer than 20 µs, about one token tick), beside the packets of flows
//!   that are not paced; neither class has priority (§8 A19b).

use std::collections::BTreeMap;

use ccp_qdisc::pacer::{Admit, Pacer, PacerParams, PacerSettings, PacerStats};
use ccp_qdisc::rng::{Draw, SeedableRng, SplitMix64};
use ccp_qdisc::{Nanos, MTU_BYTES, NANOS_PER_SEC};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::packet::{flow_hash, reverse_flow_hash, tcp_ece, IpPacket};

/// `--pacer`: the model's settings, the sending host's line rate (the token rate's ceiling), the
/// seed of the association draws, and whether each flow has a pacer of its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    pub settings: PacerSettings,
    pub line_rate_bps: f64,
    pub seed: u64,
    /// Each TCP flow paced as if it ran on a host of its own (the testbed's static flows came
    /// from distinct servers, each with its pacer); else one pacer for every flow of the
    /// sender, as on one host.
    pub per_flow: bool,
}

/// What the pacer did, in the exit summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PacerSummary {
    /// Pacers at the end: 1 for the host's, or the per-flow ones.
    pub pacers: usize,
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
    /// The token rate at the end, Mbit/s (the mean over per-flow pacers).
    pub final_rate_mbps: f64,
}

/// Per-flow pacers at most (`per_flow`): a sender opening more flows than this has the rest
/// unpaced until idle pacers are reclaimed.
pub const MAX_FLOW_PACERS: usize = 1024;

/// The pacer of the sender's side: one for the sending host, or one per flow.
#[derive(Debug)]
pub struct SenderPacer {
    params: PacerParams,
    per_flow: bool,
    /// Keyed by flow with `per_flow`, else the host's alone under key 0.
    pacers: BTreeMap<u64, Pacer<u64, IpPacket>>,
    /// What reclaimed per-flow pacers had done.
    retired: PacerStats,
    rng: SplitMix64,
    dropped_full: u64,
    /// What the buckets have released since the caller last took it (in release order per
    /// pacer).
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
        let mut pacers = BTreeMap::new();
        if !cfg.per_flow {
            pacers.insert(0, Pacer::new(params));
        }
        Ok(SenderPacer {
            params,
            per_flow: cfg.per_flow,
            pacers,
            retired: PacerStats::default(),
            rng: SplitMix64::seed_from_u64(cfg.seed),
            dropped_full: 0,
            released: Vec::new(),
        })
    }

    fn key(&self, flow: u64) -> u64 {
        if self.per_flow {
            flow
        } else {
            0
        }
    }

    /// Runs the token ticks and rate updates due by `now` into [`SenderPacer::released`].
    pub fn advance(&mut self, now: Nanos) {
        for p in self.pacers.values_mut() {
            p.advance(now, &mut self.released);
        }
    }

    /// A packet from the sender: handed back if its flow is not paced (it goes on to the
    /// queue), else kept in the FIFO (or dropped when the FIFO is full). Call
    /// [`SenderPacer::advance`] to `now` first.
    pub fn arrive(&mut self, now: Nanos, packet: IpPacket) -> Option<IpPacket> {
        if tcp_ece(&packet.data).is_none() {
            return Some(packet);
        }
        let flow = flow_hash(&packet.data);
        let key = self.key(flow);
        let Some(pacer) = self.pacers.get_mut(&key) else { return Some(packet) };
        if !pacer.associated(flow, now) {
            return Some(packet);
        }
        let bytes = packet.data.len() as u32;
        match pacer.admit(now, bytes) {
            Admit::Full => self.dropped_full += 1,
            // The input has no line rate here (entries take no time), so `At` never comes.
            Admit::Now | Admit::At(_) => pacer.enter(now, flow, packet, bytes, 0, &mut self.released),
        }
        None
    }

    /// An ACK reaches the sender: with ECN-Echo set, its flow may be associated (p_a).
    pub fn on_ack(&mut self, now: Nanos, data: &[u8]) {
        if tcp_ece(data) != Some(true) {
            return;
        }
        let Some(flow) = reverse_flow_hash(data) else { return };
        let draw = self.rng.next_f64();
        let key = self.key(flow);
        if !self.pacers.contains_key(&key) {
            if draw >= self.params.associate_probability || !self.make_room(now) {
                return;
            }
            self.pacers.insert(key, Pacer::new(self.params));
        }
        self.pacers.get_mut(&key).expect("present").on_ece(flow, now, draw);
    }

    /// Whether a per-flow pacer may be added, reclaiming idle ones (empty FIFO, association
    /// expired) when the cap is reached.
    fn make_room(&mut self, now: Nanos) -> bool {
        if self.pacers.len() < MAX_FLOW_PACERS {
            return true;
        }
        let retired = &mut self.retired;
        self.pacers.retain(|&flow, p| {
            let idle = p.held_packets() == 0 && !p.associated(flow, now);
            if idle {
                retired.add(&p.stats);
            }
            !idle
        });
        self.pacers.len() < MAX_FLOW_PACERS
    }

    /// When the pacer next needs to run (`None` while every FIFO is empty).
    pub fn next_event(&self) -> Option<Nanos> {
        self.pacers.values().filter_map(Pacer::next_event).min()
    }

    pub fn summary(&self) -> PacerSummary {
        let mut s = self.retired;
        for p in self.pacers.values() {
            s.add(&p.stats);
        }
        let rates: Vec<f64> = self.pacers.values().map(|p| p.rate_bytes_per_s() * 8.0 / 1e6).collect();
        PacerSummary {
            pacers: self.pacers.len(),
            packets: s.packets,
            bytes: s.bytes,
            associations: s.associations,
            dropped_full: self.dropped_full,
            mean_delay_us: if s.packets == 0 { 0.0 } else { s.delay_total as f64 / s.packets as f64 / 1e3 },
            max_delay_us: s.delay_max as f64 / 1e3,
            peak_backlog_bytes: s.peak_backlog_bytes,
            final_rate_mbps: if rates.is_empty() { 0.0 } else { rates.iter().sum::<f64>() / rates.len() as f64 },
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
        SenderPacer::new(&PacerConfig { settings, line_rate_bps: 1e9, seed: 1, per_flow: false }).unwrap()
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
    fn per_flow_pacers_pace_each_flow_on_its_own() {
        let settings = PacerSettings { associate_probability: 1.0, ..PacerSettings::default() };
        let cfg = PacerConfig { settings, line_rate_bps: 1e9, seed: 1, per_flow: true };
        let mut p = SenderPacer::new(&cfg).unwrap();
        assert_eq!(p.summary().pacers, 0, "no pacer until a flow is associated");
        for sport in [40000, 40001] {
            p.on_ack(0, &ack(sport, true));
        }
        assert_eq!(p.summary().pacers, 2);
        // Each flow's first two packets leave on its own full bucket; one pacer for both would
        // let two through in all.
        for sport in [40000, 40001] {
            for i in 0..4 {
                assert!(p.arrive(0, IpPacket::new(data(sport), i, 0)).is_none());
            }
        }
        assert_eq!(p.released.len(), 4);
        assert_eq!(p.summary().associations, 2);
        let mut host = pacer(1.0);
        for sport in [40000, 40001] {
            host.on_ack(0, &ack(sport, true));
            for i in 0..4 {
                assert!(host.arrive(0, IpPacket::new(data(sport), i, 0)).is_none());
            }
        }
        assert_eq!((host.released.len(), host.summary().pacers), (2, 1), "one host, one bucket");
    }

    #[test]
    fn per_flow_pacers_are_bounded_and_idle_ones_reclaimed() {
        let settings = PacerSettings { associate_probability: 1.0, ..PacerSettings::default() };
        let mut p = SenderPacer::new(&PacerConfig { settings, line_rate_bps: 1e9, seed: 1, per_flow: true }).unwrap();
        for sport in 0..(MAX_FLOW_PACERS as u16 + 10) {
            p.on_ack(0, &ack(sport, true));
        }
        assert_eq!(p.summary().pacers, MAX_FLOW_PACERS, "capped");
        // After T_i (10 ms) every association has expired and the FIFOs are empty.
        p.on_ack(20 * NANOS_PER_MS, &ack(60000, true));
        let s = p.summary();
        assert_eq!(s.pacers, 1, "the idle ones were reclaimed for the new flow");
        assert_eq!(s.associations, MAX_FLOW_PACERS as u64 + 1, "their counts kept");
    }

    #[test]
    fn a_full_fifo_drops_and_counts() {
        let settings = PacerSettings { associate_probability: 1.0, fifo_bytes: 3_000, ..PacerSettings::default() };
        let mut p = SenderPacer::new(&PacerConfig { settings, line_rate_bps: 1e9, seed: 1, per_flow: false }).unwrap();
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
            SenderPacer::new(&PacerConfig { settings, line_rate_bps, seed: 1, per_flow: false }).unwrap_err().to_string()
        };
        let d = PacerSettings::default();
        assert!(bad(d, 10e9).contains("--pacer-depth-bytes"), "{}", bad(d, 10e9));
        assert!(bad(PacerSettings { associate_probability: 2.0, ..d }, 1e9).contains("--pacer-associate-probability"));
        assert!(bad(PacerSettings { beta_per_s: -1.0, ..d }, 1e9).contains("--pacer-beta-per-s"));
        assert!(bad(d, 0.0).contains("--pacer-line-rate-mbps"));
    }
}
