//! Test harness: a discrete-event path (fixed one-way delay, optional
//! bottleneck rate, per-packet drop / CE-mark / extra-delay decisions) and a
//! Linux-like receiver model (SYN-ACK options as configured, out-of-order
//! reassembly, an ACK per segment with up to 3 SACK blocks most recent first
//! (4 without timestamps), D-SACK for duplicates, RFC 3168 ECE latching until
//! CWR). Data frames travel as real frames (`build_tcp` → `parse`), so the
//! receiver's stream hash proves the bytes, not just the offsets, arrived.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::Ipv4Addr;

use crate::conn::{AckSample, Config, Conn, SegOut, State};
use crate::fallback::Fallback;
use crate::source::{fill_pattern, StreamHash};
use crate::wire::{build_tcp, parse, Endpoints, Inbound, TcpFlags, TcpIn};

pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Debug, Clone)]
pub(crate) struct PeerCfg {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack: bool,
    pub ts: bool,
    pub ecn: bool,
    /// Raw window field the peer advertises (scaled by `wscale`).
    pub window: u16,
    /// After our FIN, the peer closes too (so we must ACK its FIN).
    pub close_after_fin: bool,
    /// Linux-style delayed ACKs: every second in-order full segment, or after
    /// `DELACK_US`; immediately on out-of-order data, holes, CE/CWR and FIN.
    pub delayed_ack: bool,
}

const DELACK_US: u64 = 40_000;

impl Default for PeerCfg {
    fn default() -> Self {
        PeerCfg {
            mss: Some(1460),
            wscale: Some(7),
            sack: true,
            ts: true,
            ecn: true,
            window: 0xffff,
            close_after_fin: false,
            delayed_ack: false,
        }
    }
}

/// What the path knows about a data packet when deciding its fate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PktInfo {
    /// Index over all data- or FIN-bearing transmissions (0-based).
    pub n: u64,
    pub now_us: u64,
    pub stream_offset: u64,
    pub retransmission: bool,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PathAction {
    pub drop: bool,
    pub ce: bool,
    pub extra_delay_us: u64,
}

pub(crate) struct Peer {
    cfg: PeerCfg,
    isn: u32,
    irs: u32,
    synced: bool,
    sack_ok: bool,
    ts_ok: bool,
    ecn_ok: bool,
    ts_recent: u32,
    pub delivered: u64,
    pub hash: StreamHash,
    ooo: BTreeMap<u64, Vec<u8>>,
    /// Stream offset of a FIN that arrived ahead of a hole (Linux queues it
    /// out of order and SACKs its sequence slot).
    ooo_fin: Option<u64>,
    recent: Vec<u64>,
    ece_latched: bool,
    pub fin_received: bool,
    pub fin_sent: bool,
    pub ce_seen: u64,
    pub cwr_seen: u64,
    pub max_ooo_segments: usize,
    /// (ect, retransmission-by-offset-seen-before) per data segment received.
    pub ect_on_data: u64,
    pub ect_on_retx: u64,
    pub ect_on_non_data: u64,
    seen_offsets: BTreeMap<u64, u16>,
    held: bool,
    delack_gen: u64,
    pub delayed_acks_fired: u64,
}

impl Peer {
    fn new(cfg: PeerCfg) -> Peer {
        Peer {
            cfg,
            isn: 0x8000_0000,
            irs: 0,
            synced: false,
            sack_ok: false,
            ts_ok: false,
            ecn_ok: false,
            ts_recent: 0,
            delivered: 0,
            hash: StreamHash::new(),
            ooo: BTreeMap::new(),
            ooo_fin: None,
            recent: Vec::new(),
            ece_latched: false,
            fin_received: false,
            fin_sent: false,
            ce_seen: 0,
            cwr_seen: 0,
            max_ooo_segments: 0,
            ect_on_data: 0,
            ect_on_retx: 0,
            ect_on_non_data: 0,
            seen_offsets: BTreeMap::new(),
            held: false,
            delack_gen: 0,
            delayed_acks_fired: 0,
        }
    }

    fn tsval(now_us: u64) -> u32 {
        (now_us / 1000) as u32 + 5000
    }

    fn ack_seg(&self, now_us: u64) -> TcpIn {
        let mut t = TcpIn {
            seq: self.isn.wrapping_add(1).wrapping_add(u32::from(self.fin_sent)),
            ack: self.irs.wrapping_add(1).wrapping_add(self.delivered as u32).wrapping_add(u32::from(self.fin_received)),
            flags: TcpFlags { ack: true, ece: self.ecn_ok && self.ece_latched, ..TcpFlags::default() },
            window: self.cfg.window,
            ts: self.ts_ok.then_some((Self::tsval(now_us), self.ts_recent)),
            ..TcpIn::default()
        };
        if self.sack_ok {
            let max_blocks = if self.ts_ok { 3 } else { 4 };
            let intervals = self.intervals();
            for &start in &self.recent {
                if usize::from(t.sack_count) >= max_blocks {
                    break;
                }
                if let Some(&(s, e)) = intervals.iter().find(|(s, e)| *s <= start && start < *e) {
                    let blk = (self.off_to_seq(s), self.off_to_seq(e));
                    if !t.sack_blocks().contains(&blk) {
                        t.push_sack(blk);
                    }
                }
            }
        }
        t
    }

    fn off_to_seq(&self, off: u64) -> u32 {
        self.irs.wrapping_add(1).wrapping_add(off as u32)
    }

    fn intervals(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = Vec::new();
        let fin = self.ooo_fin.map(|f| (f, 1usize));
        let entries = self.ooo.iter().map(|(&s, d)| (s, d.len())).chain(fin);
        for (s, len) in entries {
            let e = s + len as u64;
            match v.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => v.push((s, e)),
            }
        }
        v
    }

    /// Handles one frame from the sender; returns the segments the peer sends back.
    fn on_frame(&mut self, frame: &[u8], now_us: u64) -> Vec<TcpIn> {
        let Ok(Inbound::Tcp(t)) = parse(frame) else { panic!("sender emitted an unparsable frame") };
        if t.flags.syn {
            self.irs = t.seq;
            self.synced = true;
            self.sack_ok = self.cfg.sack && t.sack_permitted;
            self.ts_ok = self.cfg.ts && t.ts.is_some();
            self.ecn_ok = self.cfg.ecn && t.flags.ece && t.flags.cwr;
            assert!(!t.ip_ce && frame[15] & 3 == 0, "RFC 3168: SYN must not be ECT");
            if let Some((v, _)) = t.ts {
                self.ts_recent = v;
            }
            let synack = TcpIn {
                seq: self.isn,
                ack: t.seq.wrapping_add(1),
                flags: TcpFlags { syn: true, ack: true, ece: self.ecn_ok, ..TcpFlags::default() },
                window: self.cfg.window,
                mss: self.cfg.mss,
                wscale: if t.wscale.is_some() { self.cfg.wscale } else { None },
                sack_permitted: self.sack_ok,
                ts: self.ts_ok.then_some((Self::tsval(now_us), self.ts_recent)),
                ..TcpIn::default()
            };
            return vec![synack];
        }
        assert!(self.synced);
        if let Some((v, _)) = t.ts {
            self.ts_recent = v;
        }
        let ect = frame[15] & 3 != 0;
        let len = u64::from(t.payload_len);
        let off = u64::from(t.seq.wrapping_sub(self.irs.wrapping_add(1)));
        if len == 0 && !t.flags.fin {
            if ect {
                self.ect_on_non_data += 1;
            }
            // Pure ACK (handshake completion, or ACK of our FIN): nothing to answer.
            return Vec::new();
        }
        if len > 0 {
            let again = self.seen_offsets.insert(off, t.payload_len).is_some();
            if ect {
                self.ect_on_data += 1;
                if again {
                    self.ect_on_retx += 1;
                }
            }
        } else if ect {
            self.ect_on_non_data += 1;
        }
        // RFC 3168 §6.1.3: CWR ends the ECE echo, a new CE starts it again.
        if t.flags.cwr {
            self.cwr_seen += 1;
            self.ece_latched = false;
        }
        if t.ip_ce {
            self.ce_seen += 1;
            self.ece_latched = true;
        }
        let payload = &frame[usize::from(t.payload_offset)..usize::from(t.payload_offset) + len as usize];
        let mut dsack = None;
        let holes_before = !self.ooo.is_empty() || self.ooo_fin.is_some();
        let mut in_order = false;
        if len > 0 {
            if off + len <= self.delivered {
                dsack = Some((t.seq, t.seq.wrapping_add(len as u32)));
            } else if off <= self.delivered {
                let skip = (self.delivered - off) as usize;
                self.hash.update(&payload[skip..]);
                self.delivered = off + len;
                self.drain();
                in_order = true;
            } else {
                self.ooo.entry(off).or_insert_with(|| payload.to_vec());
                self.recent.retain(|&s| s != off);
                self.recent.insert(0, off);
                self.recent.truncate(8);
                self.max_ooo_segments = self.max_ooo_segments.max(self.ooo.len());
            }
        }
        let mut out = Vec::new();
        if t.flags.fin && !self.fin_received {
            if off + len == self.delivered {
                self.fin_received = true;
                self.ooo_fin = None;
            } else if off + len > self.delivered {
                self.ooo_fin = Some(off + len);
                self.recent.retain(|&s| s != off + len);
                self.recent.insert(0, off + len);
                self.recent.truncate(8);
            }
        }
        let holes_after = !self.ooo.is_empty() || self.ooo_fin.is_some();
        let immediate =
            !self.cfg.delayed_ack || !in_order || holes_before || holes_after || t.flags.fin || t.ip_ce || t.flags.cwr;
        if !immediate && !self.held {
            self.held = true;
            self.delack_gen += 1;
            return Vec::new();
        }
        self.held = false;
        let mut a = self.ack_seg(now_us);
        if let Some(d) = dsack {
            // RFC 2883: the D-SACK block goes first.
            let rest: Vec<(u32, u32)> = a.sack_blocks().to_vec();
            a.sack_count = 0;
            a.push_sack(d);
            for b in rest.into_iter().take(2) {
                a.push_sack(b);
            }
        }
        out.push(a);
        if self.fin_received && self.cfg.close_after_fin && !self.fin_sent {
            let mut f = self.ack_seg(now_us);
            f.flags.fin = true;
            self.fin_sent = true;
            out.push(f);
        }
        out
    }

    /// The delayed-ACK timer: ACK a held segment if no later one did.
    fn on_delack(&mut self, gen: u64, now_us: u64) -> Option<TcpIn> {
        if self.held && gen == self.delack_gen {
            self.held = false;
            self.delayed_acks_fired += 1;
            return Some(self.ack_seg(now_us));
        }
        None
    }

    fn drain(&mut self) {
        while let Some((&s, _)) = self.ooo.first_key_value() {
            if s > self.delivered {
                break;
            }
            let d = self.ooo.remove(&s).expect("present");
            let e = s + d.len() as u64;
            if e > self.delivered {
                let skip = (self.delivered - s) as usize;
                self.hash.update(&d[skip..]);
                self.delivered = e;
            }
        }
        let delivered = self.delivered;
        if self.ooo_fin == Some(delivered) {
            self.ooo_fin = None;
            self.fin_received = true;
        }
        self.recent.retain(|&s| s >= delivered);
    }
}

enum Ev {
    ToPeer(Vec<u8>),
    ToSender(TcpIn),
    PeerDelack(u64),
}

pub(crate) enum Cc {
    Fixed,
    Fallback(Fallback),
}

pub(crate) struct Sim {
    pub conn: Conn,
    pub peer: Peer,
    pub now: u64,
    pub one_way_us: u64,
    /// Bottleneck in the data direction, bytes/s of frame bytes; 0 = none.
    pub bottleneck_bytes_per_s: u64,
    link_free_at: u64,
    pub path: Box<dyn FnMut(&PktInfo) -> PathAction>,
    /// Drop an ACK (by arrival order) when true.
    pub ack_drop: Box<dyn FnMut(u64, u64) -> bool>,
    pub cc: Cc,
    events: BinaryHeap<Reverse<(u64, u64, usize)>>,
    ev_store: Vec<Option<Ev>>,
    ev_seq: u64,
    data_pkts: u64,
    acks: u64,
    pub samples: Vec<AckSample>,
    pub departures: Vec<(u64, SegOut)>,
    pub max_inflight_over_cwnd: i64,
    ep: Endpoints,
}

impl Sim {
    pub fn new(cfg: &Config, peer: PeerCfg, isn: u32, total: Option<u64>, rtt_us: u64) -> Sim {
        Sim {
            conn: Conn::new(cfg, isn, total, 0),
            peer: Peer::new(peer),
            now: 0,
            one_way_us: rtt_us / 2,
            bottleneck_bytes_per_s: 0,
            link_free_at: 0,
            path: Box::new(|_| PathAction::default()),
            ack_drop: Box::new(|_, _| false),
            cc: Cc::Fixed,
            events: BinaryHeap::new(),
            ev_store: Vec::new(),
            ev_seq: 0,
            data_pkts: 0,
            acks: 0,
            samples: Vec::new(),
            departures: Vec::new(),
            max_inflight_over_cwnd: i64::MIN,
            ep: Endpoints {
                src_mac: [2, 0, 0, 0, 0, 1],
                dst_mac: [2, 0, 0, 0, 0, 2],
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: Ipv4Addr::new(10, 0, 0, 2),
                src_port: 40000,
                dst_port: 5001,
            },
        }
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.ev_store.push(Some(ev));
        self.ev_seq += 1;
        self.events.push(Reverse((at, self.ev_seq, self.ev_store.len() - 1)));
    }

    fn on_sample(&mut self, s: AckSample) {
        if let Cc::Fallback(f) = &mut self.cc {
            let c = f.on_sample(&s, u32::from(self.conn.mss()));
            self.conn.set_cwnd_bytes(c);
        }
        self.samples.push(s);
    }

    fn transmit(&mut self) {
        let mut out: Vec<SegOut> = Vec::new();
        self.conn.poll_transmit(self.now, &mut |s| {
            out.push(*s);
            true
        });
        self.conn.check_invariants();
        // After a poll, the pacer never claims a segment is due now: a caller
        // sleeping until next_send_us() cannot spin.
        let due = self.conn.next_send_us();
        assert!(due.is_none_or(|t| t > self.now), "next_send_us {due:?} at {}", self.now);
        let over = self.conn.bytes_in_flight() as i64 - i64::from(self.conn.cwnd_bytes());
        if !out.is_empty() {
            self.max_inflight_over_cwnd = self.max_inflight_over_cwnd.max(over);
        }
        for s in out {
            self.departures.push((self.now, s));
            let mut buf = vec![0u8; 2048];
            let n = build_tcp(&mut buf, &self.ep, &s, |p| fill_pattern(s.stream_offset, p)).expect("build");
            buf.truncate(n);
            let mut action = PathAction::default();
            if s.payload_len > 0 || s.flags.fin {
                let info = PktInfo {
                    n: self.data_pkts,
                    now_us: self.now,
                    stream_offset: s.stream_offset,
                    retransmission: s.retransmission,
                };
                self.data_pkts += 1;
                action = (self.path)(&info);
            }
            if action.drop {
                continue;
            }
            if action.ce && buf[15] & 3 != 0 {
                buf[15] |= 3;
                buf[24] = 0;
                buf[25] = 0;
                let c = crate::wire::internet_checksum(&buf[14..34]);
                buf[24..26].copy_from_slice(&c.to_be_bytes());
            }
            let mut depart = self.now;
            if self.bottleneck_bytes_per_s > 0 {
                let ser = (buf.len() as u64 * 1_000_000).div_ceil(self.bottleneck_bytes_per_s);
                depart = self.link_free_at.max(self.now) + ser;
                self.link_free_at = depart;
            }
            self.push(depart + self.one_way_us + action.extra_delay_us, Ev::ToPeer(buf));
        }
    }

    /// Runs until `stop` holds, nothing is left to do, or `t_end`.
    pub fn run(&mut self, t_end: u64, mut stop: impl FnMut(&Sim) -> bool) {
        loop {
            while let Some(&Reverse((at, _, idx))) = self.events.peek() {
                if at > self.now {
                    break;
                }
                self.events.pop();
                match self.ev_store[idx].take().expect("event once") {
                    Ev::ToPeer(frame) => {
                        let now = self.now;
                        let gen = self.peer.delack_gen;
                        let acks = self.peer.on_frame(&frame, now);
                        if self.peer.delack_gen != gen {
                            self.push(now + DELACK_US, Ev::PeerDelack(self.peer.delack_gen));
                        }
                        for a in acks {
                            self.send_ack(a);
                        }
                    }
                    Ev::PeerDelack(gen) => {
                        if let Some(a) = self.peer.on_delack(gen, self.now) {
                            self.send_ack(a);
                        }
                    }
                    Ev::ToSender(seg) => {
                        if let Some(s) = self.conn.on_segment(&seg, self.now) {
                            self.on_sample(s);
                        }
                        self.conn.check_invariants();
                    }
                }
            }
            if self.conn.next_timer_us().is_some_and(|t| t <= self.now) {
                if let Some(s) = self.conn.on_timer(self.now) {
                    self.on_sample(s);
                }
                self.conn.check_invariants();
            }
            self.transmit();
            if stop(self) {
                return;
            }
            let candidates = [
                self.events.peek().map(|Reverse((t, _, _))| *t),
                self.conn.next_timer_us(),
                self.conn.next_send_us().filter(|&t| t > self.now),
            ];
            let Some(next) = candidates.into_iter().flatten().min() else { return };
            if next > t_end {
                return;
            }
            self.now = next.max(self.now);
        }
    }

    fn send_ack(&mut self, a: TcpIn) {
        self.acks += 1;
        if (self.ack_drop)(self.acks, self.now) {
            return;
        }
        self.push(self.now + self.one_way_us, Ev::ToSender(a));
    }

    pub fn done(&self) -> bool {
        matches!(self.conn.state(), State::Closed | State::Failed(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::FailReason;
    use crate::source::pattern_hash;

    const RTT: u64 = 10_000;

    fn cfg() -> Config {
        Config::default()
    }

    fn bulk(sim: &mut Sim, total: u64) {
        sim.run(600_000_000, |s| s.done());
        assert_eq!(sim.conn.state(), State::Closed, "stats {:?}", sim.conn.stats());
        assert_eq!(sim.peer.delivered, total);
        assert_eq!(sim.peer.hash.finish(), pattern_hash(total));
        assert!(sim.peer.fin_received);
        // Documented allowance: one segment beyond cwnd (a tail loss probe,
        // or a single segment when cwnd < 1 MSS and nothing is in flight).
        assert!(sim.max_inflight_over_cwnd <= 1448, "{}", sim.max_inflight_over_cwnd);
    }

    fn sum_delivered(samples: &[AckSample]) -> (u64, u64) {
        samples.iter().fold((0, 0), |(a, m), s| (a + u64::from(s.bytes_acked), m + u64::from(s.bytes_misordered)))
    }

    #[test]
    fn handshake_negotiates_everything() {
        let mut sim = Sim::new(&cfg(), PeerCfg { mss: Some(1000), wscale: Some(9), ..PeerCfg::default() }, 1, Some(100_000), RTT);
        sim.run(1_000_000, |s| s.conn.state() != State::SynSent);
        let c = &sim.conn;
        assert_eq!(c.state(), State::Established);
        // MSS option 1000 includes the 12 timestamp option bytes on every segment.
        assert_eq!(c.mss(), 1000 - 12);
        assert_eq!(c.peer_wscale(), 9);
        assert!(c.sack_enabled() && c.timestamps_enabled() && c.ecn_enabled());
        // The SYN-ACK's window is not scaled.
        assert_eq!(c.peer_window_bytes(), 0xffff);
        assert_eq!(c.cwnd_bytes(), 10 * 988);
        assert_eq!(c.srtt_us(), Some(RTT as u32));
        let syn = sim.departures[0].1;
        assert!(syn.flags.syn && syn.flags.ece && syn.flags.cwr && !syn.ect);
        assert_eq!(syn.mss, Some(1460));
        assert!(syn.sack_permitted && syn.ts.is_some() && syn.wscale == Some(0));
        bulk(&mut sim, 100_000);
        // Every data segment is within the negotiated MSS.
        assert!(sim.departures.iter().all(|(_, s)| s.payload_len <= 988));
        // No data at all: SYN, then FIN right after the handshake.
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 1, Some(0), RTT);
        bulk(&mut sim, 0);
    }

    #[test]
    fn handshake_without_options_turns_them_off() {
        let peer = PeerCfg { mss: None, wscale: None, sack: false, ts: false, ecn: false, ..PeerCfg::default() };
        let mut sim = Sim::new(&cfg(), peer, 1, Some(10_000), RTT);
        sim.run(1_000_000, |s| s.conn.state() != State::SynSent);
        let c = &sim.conn;
        assert_eq!(c.mss(), 536);
        assert_eq!(c.peer_wscale(), 0);
        assert!(!c.sack_enabled() && !c.timestamps_enabled() && !c.ecn_enabled());
        bulk(&mut sim, 10_000);
        assert!(sim.departures.iter().skip(1).all(|(_, s)| !s.ect && s.ts.is_none() && !s.flags.ece && !s.flags.cwr));
    }

    #[test]
    fn mss_is_min_of_ours_and_theirs_without_timestamps() {
        let mut c = cfg();
        c.timestamps = false;
        for (theirs, expect) in [(1460u16, 1448u16), (1200, 1200), (9000, 1448)] {
            let mut sim = Sim::new(&c, PeerCfg { mss: Some(theirs), ..PeerCfg::default() }, 7, Some(0), RTT);
            sim.run(1_000_000, |s| s.conn.state() != State::SynSent);
            assert_eq!(sim.conn.mss(), expect);
        }
    }

    #[test]
    fn bulk_10mb_completes_with_accounting() {
        let total = 10_000_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 0xffff_f000, Some(total), RTT);
        sim.conn.set_cwnd_bytes(200 * 1448);
        bulk(&mut sim, total);
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!(a + m, total);
        assert_eq!(m, 0, "lossless path, nothing SACKed");
        assert_eq!(sim.conn.stats().bytes_acked_total, total);
        assert_eq!(sim.conn.stats().retx_segs, 0);
        assert_eq!(sim.samples.last().unwrap().bytes_pending, 0);
        // The sequence space wrapped (ISN near u32::MAX).
        assert!(sim.departures.iter().any(|(_, s)| s.seq < 0x1000_0000));
    }

    #[test]
    fn delayed_acks_stretch_acks_are_accounted() {
        let total = 3_000_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg { delayed_ack: true, ..PeerCfg::default() }, 77, Some(total), RTT);
        sim.cc = Cc::Fallback(Fallback::new_cubic(1448, 10 * 1448));
        let mut rng = 42u64;
        sim.path = Box::new(move |_| PathAction { drop: splitmix64(&mut rng).is_multiple_of(1000), ..PathAction::default() });
        bulk(&mut sim, total);
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!(a + m, total);
        // Most ACKs cover two segments (holes and recovery force immediate ACKs).
        let two = sim.samples.iter().filter(|s| s.packets_acked == 2).count();
        assert!(two > sim.samples.len() / 2, "{two} of {}", sim.samples.len());
        // RTT samples include at most the 40 ms delayed-ACK wait.
        assert!(sim.samples.iter().filter_map(|s| s.rtt_sample_us).all(|r| r >= RTT as u32 && r <= (RTT + DELACK_US) as u32));
        assert!(sim.conn.stats().retx_segs > 0);
    }

    #[test]
    fn peer_window_is_obeyed() {
        let total = 500_000u64;
        let peer = PeerCfg { wscale: Some(2), window: 2 * 1448, ..PeerCfg::default() };
        let mut sim = Sim::new(&cfg(), peer, 9, Some(total), RTT);
        sim.conn.set_cwnd_bytes(100 * 1448);
        let mut max_flight = 0;
        let mut t = 0;
        while !sim.done() && t < 10_000_000 {
            t += 1_000;
            sim.run(t, |_| false);
            max_flight = max_flight.max(sim.conn.bytes_in_flight());
        }
        bulk(&mut sim, total);
        // Window field 2896 scaled by 2^2 (the SYN-ACK's own field is unscaled).
        assert!(max_flight <= 4 * 2 * 1448, "{max_flight}");
        assert!(max_flight >= 6 * 1448, "{max_flight}");
    }

    #[test]
    fn close_ends_an_unlimited_stream() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 9, None, RTT);
        sim.run(50_000, |_| false);
        sim.conn.close();
        let sent = sim.conn.bytes_sent();
        assert!(sent > 0);
        sim.run(10_000_000, |s| s.done());
        assert_eq!(sim.conn.state(), State::Closed);
        assert_eq!(sim.peer.delivered, sent);
        assert_eq!(sim.peer.hash.finish(), pattern_hash(sent));
    }

    #[test]
    fn cwnd_is_obeyed_and_set_cwnd_takes_effect() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 3, Some(2_000_000), RTT);
        sim.run(1_000_000, |s| s.conn.state() == State::Established && !s.departures.is_empty());
        sim.conn.set_cwnd_bytes(4 * 1448);
        sim.run(300_000, |_| false);
        assert!(sim.max_inflight_over_cwnd <= 0, "{}", sim.max_inflight_over_cwnd);
        // 4 segments per RTT of 10 ms.
        let sent_before = sim.conn.stats().bytes_sent_total;
        let t0 = sim.now;
        sim.run(t0 + 100 * RTT, |_| false);
        let per_rtt = (sim.conn.stats().bytes_sent_total - sent_before) / 100;
        assert!((per_rtt as i64 - 4 * 1448).abs() <= 1448, "{per_rtt}");
        sim.conn.set_cwnd_bytes(40 * 1448);
        let sent_before = sim.conn.stats().bytes_sent_total;
        let t0 = sim.now;
        sim.run(t0 + 20 * RTT, |_| false);
        let per_rtt = (sim.conn.stats().bytes_sent_total - sent_before) / 20;
        assert!(per_rtt > 30 * 1448, "{per_rtt}");
        assert!(sim.max_inflight_over_cwnd <= 0);
        // A window below one MSS still lets one segment out at a time.
        sim.conn.set_cwnd_bytes(100);
        sim.run(sim.now + 10 * RTT, |_| false);
        assert!(sim.conn.bytes_in_flight() <= 1448);
        sim.run(600_000_000, |s| s.done());
        assert_eq!(sim.peer.hash.finish(), pattern_hash(2_000_000));
    }

    #[test]
    fn single_loss_fast_retransmit_no_rto() {
        let total = 300_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 11, Some(total), RTT);
        sim.conn.set_cwnd_bytes(20 * 1448);
        sim.path = Box::new(|p| PathAction { drop: p.n == 30, ..PathAction::default() });
        bulk(&mut sim, total);
        let st = sim.conn.stats();
        assert_eq!(st.timeouts, 0);
        assert_eq!(st.retx_segs, 1);
        assert_eq!(st.fast_retx, 1);
        let lost: Vec<_> = sim.samples.iter().filter(|s| s.lost_pkts_sample > 0).collect();
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].lost_pkts_sample, 1);
        assert!(!lost[0].was_timeout);
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!(a + m, total);
        assert!(m > 0);
    }

    #[test]
    fn multiple_losses_recovered_in_about_one_rtt() {
        let total = 600_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 11, Some(total), RTT);
        sim.conn.set_cwnd_bytes(40 * 1448);
        let drops = [100u64, 103, 107, 110, 115];
        sim.path = Box::new(move |p| PathAction {
            drop: !p.retransmission && drops.contains(&(p.stream_offset / 1448)),
            ..PathAction::default()
        });
        bulk(&mut sim, total);
        let st = sim.conn.stats();
        assert_eq!(st.timeouts, 0);
        assert_eq!(st.retx_segs, 5);
        let retx_times: Vec<u64> = sim.departures.iter().filter(|(_, s)| s.retransmission).map(|(t, _)| *t).collect();
        let span = retx_times.last().unwrap() - retx_times.first().unwrap();
        assert!(span <= 2 * RTT, "retransmissions spread over {span} µs");
        let lost: u32 = sim.samples.iter().map(|s| s.lost_pkts_sample).sum();
        assert_eq!(lost, 5);
    }

    #[test]
    fn loss_without_sack_uses_dupthresh() {
        let total = 300_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg { sack: false, ..PeerCfg::default() }, 11, Some(total), RTT);
        sim.conn.set_cwnd_bytes(20 * 1448);
        sim.path = Box::new(|p| PathAction { drop: p.n == 30 && !p.retransmission, ..PathAction::default() });
        bulk(&mut sim, total);
        assert_eq!(sim.conn.stats().timeouts, 0);
        assert!(sim.conn.stats().fast_retx >= 1);
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!((a, m), (total, 0));
    }

    #[test]
    fn multiple_losses_without_sack_use_newreno() {
        let total = 600_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg { sack: false, ..PeerCfg::default() }, 11, Some(total), RTT);
        sim.conn.set_cwnd_bytes(40 * 1448);
        let drops = [100u64, 103, 107];
        sim.path = Box::new(move |p| PathAction {
            drop: !p.retransmission && drops.contains(&(p.stream_offset / 1448)),
            ..PathAction::default()
        });
        bulk(&mut sim, total);
        let st = sim.conn.stats();
        assert_eq!(st.timeouts, 0, "{st:?}");
        // One hole per round trip, and only the holes are resent.
        assert_eq!(st.retx_segs, 3, "{st:?}");
        let lost: u32 = sim.samples.iter().map(|s| s.lost_pkts_sample).sum();
        assert_eq!(lost, 3);
    }

    #[test]
    fn blackout_rto_backoff_then_recovery() {
        let total = 400_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 11, Some(total), RTT);
        sim.cc = Cc::Fallback(Fallback::new_reno(1448, 10 * 1448));
        // Everything sent between 50 ms and 1.5 s is lost.
        sim.path = Box::new(|p| PathAction { drop: p.now_us >= 50_000 && p.now_us < 1_500_000, ..PathAction::default() });
        bulk(&mut sim, total);
        let st = sim.conn.stats();
        assert!(st.timeouts >= 3, "{st:?}");
        let to: Vec<&AckSample> = sim.samples.iter().filter(|s| s.was_timeout).collect();
        assert_eq!(to.len() as u64, st.timeouts);
        assert!(to[0].lost_pkts_sample > 0);
        // Exponential backoff: gaps between timeouts double.
        let gaps: Vec<u64> = to.windows(2).map(|w| w[1].now_us - w[0].now_us).collect();
        for g in gaps.windows(2) {
            assert!(g[1] >= 2 * g[0] - 1000 && g[1] <= 2 * g[0] + 1000, "{gaps:?}");
        }
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!(a + m, total);
    }

    fn lossy_transfer(seed: u64, loss_per_mille: u64, reorder_per_mille: u64, sack: bool, cubic: bool) -> Sim {
        let total = 1_000_000u64;
        let peer = PeerCfg { sack, delayed_ack: seed.is_multiple_of(2), ..PeerCfg::default() };
        let mut sim = Sim::new(&cfg(), peer, (seed as u32).wrapping_mul(0x9E37_79B9), Some(total), RTT);
        sim.cc = Cc::Fallback(if cubic { Fallback::new_cubic(1448, 10 * 1448) } else { Fallback::new_reno(1448, 10 * 1448) });
        let mut rng = seed;
        sim.path = Box::new(move |_| {
            let r = splitmix64(&mut rng);
            PathAction {
                drop: r % 1000 < loss_per_mille,
                extra_delay_us: if (r >> 20) % 1000 < reorder_per_mille { 3_000 } else { 0 },
                ce: false,
            }
        });
        bulk(&mut sim, total);
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!(a + m, total, "seed {seed}");
        if loss_per_mille >= 10 {
            assert!(sim.conn.stats().retx_segs > 0);
        }
        // Bounded receiver state: the reassembly queue never exceeds what was in flight.
        assert!(sim.peer.max_ooo_segments < 2000);
        sim
    }

    #[test]
    fn random_loss_and_reordering_keep_stream_intact() {
        for seed in [1u64, 2, 3, 4, 5] {
            let sim = lossy_transfer(seed, 10, 20, true, true);
            let st = sim.conn.stats();
            // 3 ms extra delay on a 10 ms path exceeds reo_wnd = min_rtt/4:
            // RACK notices the reordering, and spurious retransmissions come back as D-SACKs.
            assert!(st.reordering_events > 0, "seed {seed}: {st:?}");
            assert!(st.dsack_blocks > 0, "seed {seed}: {st:?}");
        }
        lossy_transfer(9, 10, 20, false, false);
    }

    #[test]
    fn reordering_widens_reo_wnd_after_dsack() {
        // No loss, 3 % of segments 3 ms late on a 10 ms path.
        let total = 3_000_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(total), RTT);
        sim.conn.set_cwnd_bytes(40 * 1448);
        let mut rng = 7u64;
        sim.path = Box::new(move |p| PathAction {
            extra_delay_us: if !p.retransmission && splitmix64(&mut rng) % 100 < 3 { 3_000 } else { 0 },
            ..PathAction::default()
        });
        bulk(&mut sim, total);
        let st = sim.conn.stats();
        assert!(st.reordering_events == 1 && st.dsack_blocks >= 1, "{st:?}");
        // ~60 late segments; only the first, before reordering was known, is resent.
        assert!(st.retx_segs <= 2, "{st:?}");
        assert_eq!(st.timeouts, 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        #[test]
        fn prop_lossy_paths_deliver_the_stream(
            seed in 0u64..u64::MAX, loss in 0u64..50, reorder in 0u64..100, sack: bool, cubic: bool,
        ) {
            let _ = lossy_transfer(seed, loss, reorder, sack, cubic);
        }
    }

    #[test]
    fn tail_loss_probe_avoids_rto() {
        let total = 100 * 1448u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 11, Some(total), RTT);
        sim.conn.set_cwnd_bytes(30 * 1448);
        // The first transmissions of the last three data segments and the FIN are lost.
        sim.path = Box::new(|p| PathAction { drop: !p.retransmission && p.stream_offset >= 97 * 1448, ..PathAction::default() });
        bulk(&mut sim, total);
        let st = sim.conn.stats();
        assert_eq!(st.timeouts, 0, "{st:?}");
        assert!(st.tlp_probes >= 1);
        assert!(st.retx_segs >= 3);
        let lost: u32 = sim.samples.iter().map(|s| s.lost_pkts_sample).sum();
        assert!(lost >= 2, "the probe's SACK lets RACK mark the rest: {lost}");
        // Retransmissions leave after the stream ran out: their samples are app-limited.
        let last = sim.samples.last().unwrap();
        assert!(last.rate_app_limited, "{last:?}");
        let n = sim.samples.len();
        assert!(sim.samples[..n / 2].iter().all(|s| !s.rate_app_limited));
        // Finished well before a 200 ms RTO could have fired.
        assert!(sim.now < 20 * RTT, "finished at {}", sim.now);
    }

    #[test]
    fn first_rto_follows_rfc6298() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 11, None, RTT);
        sim.conn.set_cwnd_bytes(10 * 1448);
        sim.run(200_000, |_| false);
        // Constant RTT: RTTVAR decays towards 0, so RTO = max(rto_min, SRTT + max(G, 4 RTTVAR)).
        assert_eq!(sim.conn.srtt_us(), Some(RTT as u32));
        assert_eq!(sim.conn.rto_us(), 200_000);
        // Cut the path: the first timeout fires one RTO after the last ACK restarted it.
        let t_cut = sim.now;
        sim.path = Box::new(|_| PathAction { drop: true, ..PathAction::default() });
        sim.run(t_cut + 2_000_000, |s| s.conn.stats().timeouts > 0);
        let t = sim.samples.iter().find(|s| s.was_timeout).expect("timeout").now_us;
        // The last ACKs arrive up to one RTT after the cut and restart the
        // timer; a tail loss probe 2 SRTT later restarts it once more (RFC 8985 §7.3).
        assert!(t >= t_cut + 200_000 && t <= t_cut + 200_000 + 3 * RTT + 2_000, "{} after cut", t - t_cut);
    }

    #[test]
    fn retransmitted_syn_offers_no_ecn() {
        let mut conn = Conn::new(&cfg(), 1000, None, 0);
        let mut syns = vec![];
        conn.poll_transmit(0, &mut |s| {
            syns.push(*s);
            true
        });
        let t = conn.next_timer_us().unwrap();
        assert_eq!(t, 1_000_000);
        conn.on_timer(t);
        conn.poll_transmit(t, &mut |s| {
            syns.push(*s);
            true
        });
        assert!(syns[0].flags.ece && syns[0].flags.cwr);
        assert!(!syns[1].flags.ece && !syns[1].flags.cwr && syns[1].retransmission);
        assert_eq!(conn.stats().syn_retx, 1);
        // A SYN-ACK with ECE (answering the first SYN) must not enable ECN now.
        let synack = TcpIn {
            seq: 5,
            ack: 1001,
            flags: TcpFlags { syn: true, ack: true, ece: true, ..TcpFlags::default() },
            window: 1000,
            ..TcpIn::default()
        };
        conn.on_segment(&synack, t + 100);
        assert_eq!(conn.state(), State::Established);
        assert!(!conn.ecn_enabled());
        // Karn: no RTT sample from a retransmitted SYN; RFC 6298 §5.7 RTO of 3 s.
        assert_eq!(conn.srtt_us(), None);
        assert_eq!(conn.rto_us(), 3_000_000);
    }

    #[test]
    fn bad_synack_and_stray_segments_in_syn_sent() {
        let mut conn = Conn::new(&cfg(), 1000, None, 0);
        conn.poll_transmit(0, &mut |_| true);
        let mut synack =
            TcpIn { seq: 5, ack: 999, flags: TcpFlags { syn: true, ack: true, ..TcpFlags::default() }, ..TcpIn::default() };
        conn.on_segment(&synack, 10);
        synack.flags = TcpFlags { rst: true, ack: true, ..TcpFlags::default() };
        conn.on_segment(&synack, 10);
        assert_eq!(conn.state(), State::SynSent);
        assert_eq!(conn.stats().rej_bad_synack, 1);
        assert_eq!(conn.stats().rej_bad_rst, 1);
        // A RST acknowledging our SYN is a refusal.
        synack.ack = 1001;
        conn.on_segment(&synack, 10);
        assert_eq!(conn.state(), State::Failed(FailReason::Reset));
    }

    #[test]
    fn a_stale_peer_connection_is_reset_and_the_retried_syn_opens_ours() {
        // The peer still holds an older connection of our four-tuple: it answers our SYN with
        // an ACK of that connection's sequence space (a challenge ACK), not a SYN-ACK.
        let mut conn = Conn::new(&cfg(), 1000, None, 0);
        let mut sent = vec![];
        conn.poll_transmit(0, &mut |s| {
            sent.push(*s);
            true
        });
        assert!(sent[0].flags.syn);
        let challenge =
            TcpIn { seq: 77_000, ack: 555_555, flags: TcpFlags { ack: true, ..TcpFlags::default() }, ..TcpIn::default() };
        assert!(conn.on_segment(&challenge, 100).is_none());
        sent.clear();
        conn.poll_transmit(100, &mut |s| {
            sent.push(*s);
            true
        });
        assert_eq!(sent.len(), 1, "a RST, and no SYN before the retransmission timer: {sent:?}");
        assert!(sent[0].flags.rst && !sent[0].flags.ack && !sent[0].flags.syn);
        assert_eq!(sent[0].seq, 555_555, "RFC 9293: <SEQ=SEG.ACK><CTL=RST>");
        assert_eq!(conn.stats().resets_sent, 1);
        assert_eq!(conn.state(), State::SynSent, "our connection lives on");
        // The SYN is retried on its timer, and a proper SYN-ACK opens the connection.
        let t = conn.next_timer_us().expect("the SYN's retransmission timer");
        conn.on_timer(t);
        sent.clear();
        conn.poll_transmit(t, &mut |s| {
            sent.push(*s);
            true
        });
        assert!(sent.iter().any(|s| s.flags.syn), "{sent:?}");
        let synack =
            TcpIn { seq: 9, ack: 1001, flags: TcpFlags { syn: true, ack: true, ..TcpFlags::default() }, ..TcpIn::default() };
        conn.on_segment(&synack, t + 100);
        assert_eq!(conn.state(), State::Established);
    }

    #[test]
    fn zero_window_is_probed() {
        let mut sim = Sim::new(&cfg(), PeerCfg { window: 0, ..PeerCfg::default() }, 5, Some(20_000), RTT);
        sim.run(150_000, |_| false);
        assert_eq!(sim.peer.delivered, 0, "nothing beyond a zero window before the persist timer");
        sim.run(3_000_000, |_| false);
        assert!(sim.conn.stats().zero_window_probes >= 1);
        assert!(sim.peer.delivered > 0);
        assert_eq!(sim.peer.hash.finish(), pattern_hash(sim.peer.delivered));
        assert!(!matches!(sim.conn.state(), State::Failed(_)));
    }

    #[test]
    fn peer_fin_is_acked() {
        let mut sim = Sim::new(&cfg(), PeerCfg { close_after_fin: true, ..PeerCfg::default() }, 5, Some(5000), RTT);
        bulk(&mut sim, 5000);
        sim.run(sim.now + 10 * RTT, |_| false);
        assert!(sim.peer.fin_sent);
        // The handshake ACK rides on the first data segment; the only pure ACK is for the peer's FIN.
        assert_eq!(sim.conn.stats().pure_acks_sent, 1, "{:?}", sim.conn.stats());
        let last = sim.departures.last().unwrap().1;
        assert!(last.flags.ack && !last.flags.fin && last.payload_len == 0);
        // The ACK covers the peer's FIN: peer ISN + 1 + 1.
        assert_eq!(last.ack, 0x8000_0002);
    }

    #[test]
    fn pacing_spaces_departures() {
        let mut c = cfg();
        c.pacing_burst_bytes = 0;
        let mut sim = Sim::new(&c, PeerCfg::default(), 5, Some(2_000_000), RTT);
        sim.conn.set_cwnd_bytes(1_000 * 1448);
        let rate = 10_000_000u64; // 10 MB/s
        sim.conn.set_rate_bytes_per_s(rate);
        bulk(&mut sim, 2_000_000);
        let data: Vec<(u64, u16)> =
            sim.departures.iter().filter(|(_, s)| s.payload_len > 0).map(|(t, s)| (*t, s.payload_len)).collect();
        for w in data.windows(2) {
            let min_gap = (u64::from(w[0].1) * 1_000_000).div_ceil(rate);
            assert!(w[1].0 - w[0].0 >= min_gap, "{:?} {:?}", w[0], w[1]);
        }
        let elapsed = data.last().unwrap().0 - data[0].0;
        let expect = 2_000_000 * 1_000_000 / rate;
        assert!(elapsed >= expect * 95 / 100 && elapsed <= expect * 105 / 100, "{elapsed} vs {expect}");
    }

    #[test]
    fn next_send_is_none_when_cwnd_limited() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, None, RTT);
        sim.conn.set_cwnd_bytes(2 * 1448);
        sim.conn.set_rate_bytes_per_s(100_000_000);
        sim.run(RTT + 500, |_| false);
        assert_eq!(sim.conn.bytes_in_flight(), 2 * 1448);
        assert_eq!(sim.conn.next_send_us(), None, "blocked by cwnd, not by the pacer");
        sim.conn.set_cwnd_bytes(4 * 1448);
        assert!(sim.conn.next_send_us().is_some());
        sim.conn.set_rate_bytes_per_s(0);
        assert_eq!(sim.conn.next_send_us(), None, "unpaced");
    }

    #[test]
    fn pacing_with_burst_allowance() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(1_000_000), RTT);
        sim.conn.set_cwnd_bytes(1_000 * 1448);
        let rate = 5_000_000u64;
        sim.conn.set_rate_bytes_per_s(rate);
        bulk(&mut sim, 1_000_000);
        let data: Vec<(u64, u64)> =
            sim.departures.iter().filter(|(_, s)| s.payload_len > 0).map(|(t, s)| (*t, u64::from(s.payload_len))).collect();
        // Over any span, bytes sent ≤ burst + one segment + elapsed * rate.
        let burst = u64::from(Config::default().pacing_burst_bytes) + 1448;
        for i in 0..data.len() {
            let mut bytes = 0;
            for j in i..data.len().min(i + 50) {
                bytes += data[j].1;
                let allowed = burst + (data[j].0 - data[i].0) * rate / 1_000_000 + 1448;
                assert!(bytes <= allowed, "i {i} j {j}: {bytes} > {allowed}");
            }
        }
    }

    #[test]
    fn ecn_ce_gives_ece_samples_and_cwr() {
        let total = 500_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(total), RTT);
        sim.conn.set_cwnd_bytes(20 * 1448);
        sim.path = Box::new(|p| PathAction { ce: p.n == 50 || p.n == 200, ..PathAction::default() });
        bulk(&mut sim, total);
        assert_eq!(sim.peer.ce_seen, 2);
        let ece: Vec<&AckSample> = sim.samples.iter().filter(|s| s.ecn_bytes > 0).collect();
        assert!(!ece.is_empty());
        assert!(ece.iter().all(|s| s.ecn_bytes == s.bytes_acked + s.bytes_misordered && s.ecn_packets > 0));
        // One CWR per CE episode, on new data.
        assert_eq!(sim.conn.stats().cwr_sent, 2);
        assert_eq!(sim.peer.cwr_seen, 2);
        let cwr: Vec<&SegOut> = sim.departures.iter().map(|(_, s)| s).filter(|s| s.flags.cwr && !s.flags.syn).collect();
        assert!(cwr.iter().all(|s| s.payload_len > 0 && !s.retransmission && s.ect));
        assert!(sim.peer.ect_on_data > 0);
        assert_eq!(sim.peer.ect_on_non_data, 0, "no ECT on pure ACKs / FIN");
        // The CWR leaves on the first data segment after the first ECE ACK.
        let first_ece = ece[0].now_us;
        let (t_cwr, _) = sim.departures.iter().find(|(_, s)| s.flags.cwr && !s.flags.syn).unwrap();
        assert_eq!(*t_cwr, first_ece);
        // The CE-marked segment is 50 segments in; its ECE comes back one RTT after it left.
        let ce_sent = sim.departures.iter().filter(|(_, s)| s.payload_len > 0).nth(50).unwrap().0;
        assert_eq!(first_ece, ce_sent + RTT);
    }

    #[test]
    fn no_ect_on_retransmissions() {
        let total = 300_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(total), RTT);
        sim.conn.set_cwnd_bytes(20 * 1448);
        sim.path = Box::new(|p| PathAction { drop: !p.retransmission && p.n % 37 == 5, ..PathAction::default() });
        bulk(&mut sim, total);
        assert!(sim.conn.stats().retx_segs > 0);
        assert_eq!(sim.peer.ect_on_retx, 0);
        assert!(sim.departures.iter().all(|(_, s)| !(s.retransmission && s.ect)));
    }

    #[test]
    fn rtt_samples_match_path_without_queueing() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(500_000), RTT);
        sim.conn.set_cwnd_bytes(10 * 1448);
        bulk(&mut sim, 500_000);
        let rtts: Vec<u32> = sim.samples.iter().filter_map(|s| s.rtt_sample_us).collect();
        assert!(rtts.len() > 100);
        assert!(rtts.iter().all(|&r| r.abs_diff(RTT as u32) <= 1), "{:?}", &rtts[..10]);
        assert_eq!(sim.conn.srtt_us(), Some(RTT as u32));
    }

    #[test]
    fn rate_incoming_tracks_bottleneck() {
        let total = 5_000_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(total), RTT);
        let bneck = 12_500_000u64; // 100 Mbit/s of frame bytes
        sim.bottleneck_bytes_per_s = bneck;
        sim.conn.set_cwnd_bytes(200 * 1448);
        bulk(&mut sim, total);
        // Payload share of each 1514-byte frame (1448 payload + 66 headers).
        let payload_rate = bneck * 1448 / 1514;
        let steady: Vec<u64> =
            sim.samples.iter().skip(sim.samples.len() / 4).take(sim.samples.len() / 2).map(|s| s.rate_incoming).collect();
        let nonzero: Vec<u64> = steady.iter().copied().filter(|&r| r > 0).collect();
        assert!(nonzero.len() > steady.len() / 2);
        for r in nonzero {
            let err = r.abs_diff(payload_rate) * 100 / payload_rate;
            assert!(err <= 10, "rate {r} vs {payload_rate}");
        }
    }

    #[test]
    fn rst_fails_the_flow() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, None, RTT);
        sim.run(100_000, |_| false);
        assert_eq!(sim.conn.state(), State::Established);
        let mut rst = sim.peer.ack_seg(sim.now);
        rst.flags = TcpFlags { rst: true, ..TcpFlags::default() };
        rst.seq = rst.seq.wrapping_add(1_000_000); // off-window: ignored
        assert!(sim.conn.on_segment(&rst, sim.now).is_none());
        assert_eq!(sim.conn.state(), State::Established);
        assert_eq!(sim.conn.stats().rej_bad_rst, 1);
        assert_eq!(sim.conn.stats().challenge_acks, 0);
        // In the window but not exact: a challenge ACK, the flow lives on.
        rst.seq = rst.seq.wrapping_sub(1_000_000 - 100);
        sim.conn.on_segment(&rst, sim.now);
        assert_eq!(sim.conn.state(), State::Established);
        assert_eq!(sim.conn.stats().challenge_acks, 1);
        let mut acks = vec![];
        sim.conn.set_cwnd_bytes(0);
        sim.conn.poll_transmit(sim.now, &mut |s| {
            acks.push(*s);
            true
        });
        assert_eq!(acks.len(), 1);
        assert!(acks[0].flags.ack && acks[0].payload_len == 0 && !acks[0].flags.rst);
        rst.seq = rst.seq.wrapping_sub(100);
        sim.conn.on_segment(&rst, sim.now);
        assert_eq!(sim.conn.state(), State::Failed(FailReason::Reset));
        assert_eq!(sim.conn.poll_transmit(sim.now, &mut |_| true), 0);
        assert_eq!(sim.conn.next_timer_us(), None);
    }

    #[test]
    fn emit_backpressure_does_not_consume_segments() {
        let mut conn = Conn::new(&cfg(), 5, None, 0);
        conn.poll_transmit(0, &mut |_| true);
        let synack = TcpIn {
            seq: 100,
            ack: 6,
            flags: TcpFlags { syn: true, ack: true, ..TcpFlags::default() },
            window: 65535,
            mss: Some(1460),
            ..TcpIn::default()
        };
        conn.on_segment(&synack, RTT);
        assert_eq!(conn.mss(), 1448);
        let mut got: Vec<SegOut> = vec![];
        let n = conn.poll_transmit(RTT, &mut |s| {
            if got.len() == 2 {
                return false;
            }
            got.push(*s);
            true
        });
        assert_eq!(n, 2);
        assert_eq!(conn.stats().segs_sent, 1 + 2);
        assert_eq!(conn.bytes_in_flight(), 2 * 1448);
        let mut more: Vec<SegOut> = vec![];
        conn.poll_transmit(RTT, &mut |s| {
            more.push(*s);
            true
        });
        assert_eq!(more.len(), 8, "the rest of the initial window");
        assert_eq!(more[0].stream_offset, 2 * 1448);
        assert_eq!(more[0].seq, got[1].seq.wrapping_add(1448));
        assert!(got.iter().chain(&more).all(|s| s.flags.ack && s.ack == 101));
    }

    #[test]
    fn syn_retries_exhausted() {
        let mut c = cfg();
        c.syn_retries = 2;
        let mut conn = Conn::new(&c, 1, None, 0);
        let mut now = 0;
        let mut syns = vec![];
        for _ in 0..10 {
            conn.poll_transmit(now, &mut |s| {
                assert!(s.flags.syn);
                syns.push(now);
                true
            });
            let Some(t) = conn.next_timer_us() else { break };
            now = t;
            conn.on_timer(now);
        }
        assert_eq!(conn.state(), State::Failed(FailReason::SynRetriesExhausted));
        assert_eq!(syns, vec![0, 1_000_000, 3_000_000]);
    }

    #[test]
    fn misbehaving_peer_is_counted_not_fatal() {
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 0xffff_ff00, None, RTT);
        sim.conn.set_cwnd_bytes(10 * 1448);
        sim.run(25_000, |_| false);
        let base = sim.peer.ack_seg(sim.now);
        let before = sim.conn.stats().clone();
        // ACK for data never sent.
        let mut a = base;
        a.ack = a.ack.wrapping_add(50_000_000);
        assert!(sim.conn.on_segment(&a, sim.now).is_none());
        // SACK blocks beyond snd_nxt, inverted, and empty.
        let mut b = base;
        b.sack_count = 0;
        b.push_sack((base.ack.wrapping_add(1_000_000), base.ack.wrapping_add(1_001_448)));
        b.push_sack((base.ack.wrapping_add(2896), base.ack.wrapping_add(1448)));
        b.push_sack((base.ack, base.ack));
        sim.conn.on_segment(&b, sim.now);
        // No ACK flag.
        let mut c = base;
        c.flags.ack = false;
        sim.conn.on_segment(&c, sim.now);
        // Zero window then window shrink.
        let mut z = base;
        z.window = 0;
        sim.conn.on_segment(&z, sim.now);
        let st = sim.conn.stats();
        assert_eq!(st.rej_ack_unsent, before.rej_ack_unsent + 1);
        assert_eq!(st.rej_sack_blocks, before.rej_sack_blocks + 3);
        assert_eq!(st.rej_no_ack_flag, before.rej_no_ack_flag + 1);
        assert!(st.window_shrinks > before.window_shrinks);
        assert!(st.rejected_segments >= before.rejected_segments + 5);
        assert_eq!(sim.conn.state(), State::Established);
        sim.conn.check_invariants();
        // The flow continues (zero window probes, then the real peer reopens).
        sim.run(sim.now + 3_000_000, |_| false);
        assert!(sim.peer.delivered > 0);
        assert_eq!(sim.peer.hash.finish(), pattern_hash(sim.peer.delivered));
    }

    #[test]
    fn ack_loss_is_tolerated() {
        let total = 500_000u64;
        let mut sim = Sim::new(&cfg(), PeerCfg::default(), 5, Some(total), RTT);
        sim.conn.set_cwnd_bytes(30 * 1448);
        sim.ack_drop = Box::new(|n, _| n % 3 == 0);
        bulk(&mut sim, total);
        let (a, m) = sum_delivered(&sim.samples);
        assert_eq!(a + m, total);
        // Later cumulative ACKs cover lost ones; only a lost final ACK (of the
        // FIN) can force a retransmission, and that carries no data.
        let st = sim.conn.stats();
        assert_eq!((st.retx_bytes, st.fast_retx), (0, 0), "{st:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Arbitrary peer segments (acks near and far, SACK blocks anywhere,
        /// any flags) interleaved with transmits and timers never panic and
        /// keep the scoreboard counters consistent.
        #[test]
        fn prop_garbage_segments_never_panic(ops in proptest::collection::vec((0u8..6, proptest::num::u32::ANY, proptest::num::u32::ANY, proptest::num::u32::ANY, 0u64..20_000), 1..200)) {
            let mut sim = Sim::new(&cfg(), PeerCfg::default(), 0xffff_f000, Some(3_000_000), RTT);
            sim.conn.set_cwnd_bytes(30 * 1448);
            sim.run(35_000, |_| false);
            let base = sim.peer.ack_seg(sim.now);
            let mut now = sim.now;
            for (kind, a, b, c, dt) in ops {
                now += dt;
                let mut t = base;
                t.ack = match kind {
                    0 => a,
                    _ => base.ack.wrapping_add(a % 200_000).wrapping_sub(50_000),
                };
                t.sack_count = 0;
                if kind >= 2 {
                    let s0 = base.ack.wrapping_add(b % 200_000);
                    t.push_sack((s0, s0.wrapping_add(c % 20_000)));
                    t.push_sack((c, b));
                }
                t.flags.ece = a & 1 == 1;
                t.flags.fin = kind == 3 && b & 1 == 1;
                t.flags.syn = kind == 4 && c & 1 == 1;
                t.flags.ack = c & 7 != 0;
                t.flags.rst = kind == 5 && a % 97 == 0;
                t.window = (b >> 16) as u16;
                t.payload_len = (c >> 20) as u16;
                t.seq = if kind == 5 { b } else { base.seq };
                let _ = sim.conn.on_segment(&t, now);
                sim.conn.check_invariants();
                if sim.conn.next_timer_us().is_some_and(|x| x <= now) {
                    let _ = sim.conn.on_timer(now);
                    sim.conn.check_invariants();
                }
                sim.conn.poll_transmit(now, &mut |seg| {
                    assert!(seg.payload_len <= 1448);
                    true
                });
                sim.conn.check_invariants();
            }
            // The counters reflect what was refused.
            let st = sim.conn.stats();
            proptest::prop_assert_eq!(
                st.rejected_segments,
                st.rej_ack_unsent + st.rej_old_ack + st.rej_no_ack_flag + st.rej_bad_synack + st.rej_bad_rst
                    + st.rej_after_close + st.rej_sack_blocks
            );
        }
    }
}
