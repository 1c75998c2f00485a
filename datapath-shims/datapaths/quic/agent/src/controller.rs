//! Agent mode's quinn controller: ACK frames to the libccp thread, the agent's window back, and
//! quinn's own controller whenever the agent does not steer.
//!
//! Until the agent has commanded a window for the connection, and again from the moment it is
//! gone (killed, hung, restarted), the connection runs on quinn's own Cubic (or NewReno). quinn's
//! controllers cannot be given a window and a slow-start threshold, only an initial window, so a
//! hand-over starts a fresh one at the window the connection has: it continues from there, in
//! slow start until its first loss. A returning agent is announced the connection with that
//! window (CREATE) and steers from its first command.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ccp_libccp_host::primitives::Primitives;
use ccp_quic_core::frame::{FrameSample, Frames};
use quinn_proto::congestion::{Controller, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn_proto::RttEstimator;

use crate::steer::{Counters, Msg, Steered};

/// What libccp reads as "no RTT sample on this ACK" (the kernel datapath's convention; the
/// agent's fold program skips samples at or above 2·10⁹).
const NO_RTT_SAMPLE: u64 = u32::MAX as u64;

/// quinn's controller that steers a connection while the agent does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    Cubic,
    NewReno,
}

impl Fallback {
    fn build(self, now: Instant, mtu: u16, window: Option<u64>) -> Box<dyn Controller> {
        match self {
            Fallback::Cubic => {
                let mut c = CubicConfig::default();
                if let Some(w) = window {
                    c.initial_window(w);
                }
                Arc::new(c).build(now, mtu)
            }
            Fallback::NewReno => {
                let mut c = NewRenoConfig::default();
                if let Some(w) = window {
                    c.initial_window(w);
                }
                Arc::new(c).build(now, mtu)
            }
        }
    }
}

/// Builds agent-mode controllers; every connection becomes a flow of the agent.
///
/// quinn does not tell a controller factory which peer a connection is for, so the agent is
/// announced no addresses unless the factory was made for one path ([`AgentFactory::for_path`]):
/// then its connections carry that four-tuple, and the agent's rules by address and port apply.
pub struct AgentFactory {
    pub(crate) tx: SyncSender<Msg>,
    pub(crate) fallback: Fallback,
    /// Shared by a factory and the ones made from it for paths: ids stay unique.
    pub(crate) next_id: Arc<AtomicU64>,
    pub(crate) counters: Arc<Counters>,
    /// (local, remote) announced for every connection this factory builds.
    pub(crate) path: Option<(SocketAddr, SocketAddr)>,
}

impl AgentFactory {
    /// A factory on the same libccp thread whose connections are announced to the agent with
    /// this local and remote address (IPv4: libccp's CREATE has 32-bit address fields; an IPv6
    /// path is announced without addresses). Give it to the connections of that path, e.g.
    /// through `Endpoint::connect_with` with a transport config of their own.
    pub fn for_path(&self, local: SocketAddr, remote: SocketAddr) -> Arc<AgentFactory> {
        Arc::new(AgentFactory {
            tx: self.tx.clone(),
            fallback: self.fallback,
            next_id: self.next_id.clone(),
            counters: self.counters.clone(),
            path: Some((local, remote)),
        })
    }
}

impl ControllerFactory for AgentFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let fallback = self.fallback.build(now, current_mtu, None);
        let steered = Arc::new(Steered::default());
        let msg = Msg::Open {
            id,
            steered: steered.clone(),
            mss: u32::from(current_mtu),
            cwnd_bytes: fallback.window(),
            path: self.path,
        };
        self.send(msg);
        Box::new(AgentController {
            id,
            epoch: now,
            mtu: current_mtu,
            frames: Mutex::new(Frames::default()),
            fallback,
            steered,
            was_steered: false,
            inflight_bytes: 0,
            factory: self,
        })
    }
}

impl AgentFactory {
    /// Never blocks quinn: a full queue (the libccp thread stalled) drops the frame, and the
    /// agent's program sees the next one.
    fn send(&self, m: Msg) {
        match self.tx.try_send(m) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

pub struct AgentController {
    id: u64,
    epoch: Instant,
    mtu: u16,
    // Only touched through `&mut self` (`Mutex::get_mut`): the mutex makes it `Sync` for quinn.
    frames: Mutex<Frames>,
    fallback: Box<dyn Controller>,
    steered: Arc<Steered>,
    /// The agent steered at the last callback: a change starts the fallback afresh.
    was_steered: bool,
    inflight_bytes: u64,
    factory: Arc<AgentFactory>,
}

impl AgentController {
    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_micros() as u64
    }

    fn by_agent(&self) -> bool {
        self.steered.by_agent.load(Ordering::Acquire)
    }

    /// After every callback: a frame it closed goes to the agent; a hand-over from the agent
    /// starts quinn's controller at the window the connection has.
    fn settle(&mut self, now: Instant, closed: Option<FrameSample>) {
        let steered = self.by_agent();
        if self.was_steered && !steered {
            let w = self.steered.cwnd_bytes.load(Ordering::Acquire);
            self.fallback = self.factory.fallback.build(now, self.mtu, Some(w.max(2 * u64::from(self.mtu))));
        }
        self.was_steered = steered;
        if let Some(f) = closed {
            if let Some(inflight) = f.inflight_bytes {
                self.inflight_bytes = inflight;
            }
            let p = primitives(&f, self.window(), self.inflight_bytes, self.mtu);
            self.factory.send(Msg::Frame { id: self.id, primitives: p });
        }
    }

    fn frames(&mut self) -> &mut Frames {
        self.frames.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

/// libccp's per-ACK primitives from one frame.
fn primitives(f: &FrameSample, cwnd: u64, inflight: u64, mtu: u16) -> Primitives {
    let u = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let (send, recv) = f.rates.unwrap_or((0, 0));
    Primitives {
        bytes_acked: u(f.acked_bytes),
        packets_acked: u(f.acked_pkts),
        bytes_misordered: u(f.sacked_bytes),
        packets_misordered: u(f.sacked_pkts),
        ecn_bytes: u(f.ce_bytes),
        ecn_packets: u(f.ce_pkts),
        lost_pkts_sample: u(f.lost_pkts),
        was_timeout: f.persistent_congestion,
        rtt_sample_us: f.rtt_us.unwrap_or(NO_RTT_SAMPLE),
        rate_outgoing: send,
        rate_incoming: recv,
        bytes_in_flight: u(inflight),
        packets_in_flight: u(inflight / u64::from(mtu.max(1))),
        snd_cwnd: u(cwnd),
        snd_rate: 0,
        // Not known to a quinn controller: what is in flight.
        bytes_pending: u(inflight),
    }
}

impl Controller for AgentController {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        let now_us = self.us(now);
        let closed = self.frames().close_before(now_us);
        if !self.by_agent() {
            self.fallback.on_sent(now, bytes, last_packet_number);
        }
        self.settle(now, closed);
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        let (now_us, sent_us) = (self.us(now), self.us(sent));
        let srtt = rtt.get().as_micros() as u64;
        let closed = self.frames().on_ack(now_us, sent_us, bytes, Some(srtt.max(1)));
        if !self.by_agent() {
            self.fallback.on_ack(now, sent, bytes, app_limited, rtt);
        }
        self.settle(now, closed);
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, largest: Option<u64>) {
        let now_us = self.us(now);
        let closed = self.frames().on_end_acks(now_us, in_flight, app_limited);
        if !self.by_agent() {
            self.fallback.on_end_acks(now, in_flight, app_limited, largest);
        }
        self.settle(now, closed);
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, lost_bytes: u64) {
        let (now_us, mtu) = (self.us(now), u32::from(self.mtu));
        let closed = if lost_bytes == 0 {
            self.frames().on_ecn_ce(now_us, mtu)
        } else {
            self.frames().on_loss(now_us, lost_bytes, persistent, mtu)
        };
        if !self.by_agent() {
            self.fallback.on_congestion_event(now, sent, persistent, lost_bytes);
        }
        self.settle(now, closed);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = new_mtu;
        // libccp fixes a connection's MSS at CREATE; announcing the connection again would
        // restart the agent's algorithm (a CREATE is a new flow, in slow start), which cost 20
        // Cubic connections 58 % of their datagrams. The agent keeps the size at the start.
        self.fallback.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        if self.by_agent() {
            self.steered.cwnd_bytes.load(Ordering::Acquire)
        } else {
            self.fallback.window()
        }
    }

    /// A copy for a new path (quinn clones the controller on migration): a new flow of the agent.
    fn clone_box(&self) -> Box<dyn Controller> {
        self.factory.clone().build(Instant::now(), self.mtu)
    }

    fn initial_window(&self) -> u64 {
        self.fallback.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl Drop for AgentController {
    fn drop(&mut self) {
        self.factory.send(Msg::Close { id: self.id });
    }
}
