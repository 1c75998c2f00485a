//! Embedded mode: each quinn connection runs a registry algorithm in-process, inside the one
//! containment [`ccp_contract::Controller`] the agent and the simulator use.
//!
//! quinn calls the [`Controller`] trait synchronously from its connection state machine. Every
//! callback goes to the [`Fold`]; once an ACK frame is complete and a report is due, the report
//! goes to the containment controller, and the window it settles on is what `window()` returns
//! from then on. An algorithm's pacing rate is not applied: quinn paces on its own (a token bucket
//! refilled at 5/4 of the window per smoothed RTT), and its `Controller` trait has no rate to set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ccp_contract::{Capabilities, Choice, Controller as Containment, FlowStart, Limits, Outcome, ParamError, ReportPolicy, Seed};
use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

use crate::fold::{Due, Fold, Gauges};

/// What a quinn connection can carry: a window in bytes (quinn stops pacing above 4 GiB, so
/// windows stay below), no rate (quinn paces by itself), and no RTT counting of its own.
pub const CAPABILITIES: Capabilities = Capabilities {
    max_cwnd_bytes: u32::MAX as u64,
    max_rate_bytes_per_s: u64::MAX / 8,
    can_clear_pacing: true,
    per_rtt_reports: false,
    cwnd_packets: None,
};

/// RFC 9002 §7.2's initial window for datagrams of `mtu` bytes.
pub fn initial_window(mtu: u16) -> u64 {
    let mtu = u64::from(mtu);
    (10 * mtu).min(14_720.max(2 * mtu))
}

/// Counters over every connection a factory built, for an application's status line or a test.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub reports: AtomicU64,
    pub faults: AtomicU64,
    pub fallbacks: AtomicU64,
    pub swaps: AtomicU64,
}

/// The algorithm new connections get, and the swap every live one picks up at its next callback.
struct Board {
    choice: Mutex<Choice>,
    generation: AtomicU64,
}

/// Builds a CCP controller for every connection of a quinn endpoint
/// (`TransportConfig::congestion_controller_factory`).
pub struct CcpFactory {
    board: Arc<Board>,
    fallback: Choice,
    limits: Limits,
    counters: Arc<Counters>,
}

/// Swaps the algorithm of a factory's connections, live ones included, and reads its counters.
#[derive(Clone)]
pub struct CcpHandle {
    board: Arc<Board>,
    counters: Arc<Counters>,
}

impl CcpFactory {
    /// Connections run `algorithm` (any registry name, `py:…` where the binary registered it)
    /// with `params`; the registry's Cubic takes over from an algorithm that keeps faulting.
    pub fn new(algorithm: &str, params: toml::Table) -> Result<CcpFactory, ParamError> {
        let choice = ccp_algorithms::registry::choose(algorithm, params, "default")?;
        let fallback = ccp_algorithms::registry::choose("cubic", toml::Table::new(), "fallback")?;
        Ok(CcpFactory::with(choice, fallback, Limits::default()))
    }

    pub fn with(choice: Choice, fallback: Choice, limits: Limits) -> CcpFactory {
        CcpFactory {
            board: Arc::new(Board { choice: Mutex::new(choice), generation: AtomicU64::new(0) }),
            fallback,
            limits,
            counters: Arc::default(),
        }
    }

    pub fn handle(&self) -> CcpHandle {
        CcpHandle { board: self.board.clone(), counters: self.counters.clone() }
    }
}

impl CcpHandle {
    /// Every connection moves to `algorithm` at its next callback, seeded from its own state;
    /// new connections start with it.
    pub fn swap(&self, algorithm: &str, params: toml::Table) -> Result<(), ParamError> {
        let choice = ccp_algorithms::registry::choose(algorithm, params, "swap")?;
        *self.board.choice.lock().unwrap_or_else(|e| e.into_inner()) = choice;
        self.board.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    pub fn algorithm(&self) -> &'static str {
        self.board.choice.lock().unwrap_or_else(|e| e.into_inner()).algorithm()
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

impl ControllerFactory for CcpFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let window = initial_window(current_mtu);
        let start = FlowStart { ecn: None, ..FlowStart::new(u32::from(current_mtu), window) };
        Box::new(CcpController::start(self, now, start, window))
    }
}

/// One connection's algorithm, behind quinn's `Controller`.
pub struct CcpController {
    // Only touched through `&mut self` (`Mutex::get_mut`, no locking): the mutex is what makes
    // the algorithm, which is `Send` but not `Sync`, fit quinn's `Send + Sync` bound.
    flow: Mutex<Flow>,
    /// The window quinn reads through `&self`.
    window: u64,
    initial_window: u64,
    factory: Arc<CcpFactory>,
}

struct Flow {
    containment: Containment,
    fold: Fold,
    epoch: Instant,
    mss: u32,
    due: Due,
    generation: u64,
}

impl CcpController {
    fn start(factory: Arc<CcpFactory>, now: Instant, start: FlowStart, initial_window: u64) -> CcpController {
        let generation = factory.board.generation.load(Ordering::Acquire);
        let choice = factory.board.choice.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (containment, outcome) =
            Containment::start(choice, factory.fallback.clone(), CAPABILITIES, factory.limits.clone(), &start, 0);
        factory.counters.connections.fetch_add(1, Ordering::Relaxed);
        let mut flow = Flow {
            containment,
            fold: Fold::default(),
            epoch: now,
            mss: start.mss_bytes,
            due: Due { interval_us: 10_000, acked_pkts: 0 },
            generation,
        };
        let window = flow.apply(&outcome, &factory);
        CcpController { flow: Mutex::new(flow), window, initial_window, factory }
    }

    fn flow(&mut self) -> &mut Flow {
        self.flow.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs after every callback: a swap asked for, and the report that is due.
    fn settle(&mut self, now: Instant) {
        let factory = self.factory.clone();
        let flow = self.flow();
        let now_us = flow.us(now);
        let generation = factory.board.generation.load(Ordering::Acquire);
        let mut window = None;
        if generation != flow.generation {
            flow.generation = generation;
            let choice = factory.board.choice.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let outcome = flow.containment.swap(choice, now_us);
            factory.counters.swaps.fetch_add(1, Ordering::Relaxed);
            window = Some(flow.apply(&outcome, &factory));
        }
        if flow.fold.due(now_us, flow.due) {
            let cwnd_bytes = flow.containment.cwnd_bytes();
            let report = flow.fold.take(now_us, Gauges { mss_bytes: flow.mss, cwnd_bytes });
            let outcome = flow.containment.on_report(&report, now_us);
            factory.counters.reports.fetch_add(1, Ordering::Relaxed);
            window = Some(flow.apply(&outcome, &factory));
        }
        if let Some(w) = window {
            self.window = w;
        }
    }
}

impl Flow {
    fn us(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// Takes the controller's settings after `outcome`: the window, and when to report next.
    fn apply(&mut self, outcome: &Outcome, factory: &CcpFactory) -> u64 {
        if let Some(fault) = &outcome.fault {
            factory.counters.faults.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(algorithm = self.containment.algorithm_name(), "contained a fault: {fault}");
        }
        if let Some(to) = outcome.fell_back_to {
            factory.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("repeated faults: the connection fell back to {to}");
        }
        let s = self.containment.settings();
        self.due = Due {
            interval_us: match s.report {
                ReportPolicy::EveryUs(us) => us,
                // Not asked of a datapath without `per_rtt_reports`; kept sane all the same.
                ReportPolicy::PerRtt { rtts } => (rtts * self.fold.srtt_us().unwrap_or(100_000) as f64).max(1_000.0) as u64,
            },
            acked_pkts: s.report_acked_pkts,
        };
        s.cwnd_bytes.max(2 * u64::from(self.mss))
    }
}

impl Controller for CcpController {
    fn on_sent(&mut self, now: Instant, _bytes: u64, _last_packet_number: u64) {
        let flow = self.flow();
        let now_us = flow.us(now);
        flow.fold.tick(now_us);
        self.settle(now);
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, _app_limited: bool, rtt: &RttEstimator) {
        let flow = self.flow();
        let (now_us, sent_us) = (flow.us(now), flow.us(sent));
        // A frame handled after the last one closes it first: the report it completes goes out
        // before this frame's acks are folded.
        flow.fold.tick(now_us);
        self.settle(now);
        let srtt_us = rtt.get().as_micros() as u64;
        self.flow().fold.on_ack(now_us, sent_us, bytes, Some(srtt_us.max(1)));
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, _largest: Option<u64>) {
        let flow = self.flow();
        let now_us = flow.us(now);
        flow.fold.on_end_acks(now_us, in_flight, app_limited);
    }

    fn on_congestion_event(&mut self, now: Instant, _sent: Instant, persistent: bool, lost_bytes: u64) {
        let flow = self.flow();
        let (now_us, mss) = (flow.us(now), flow.mss);
        if lost_bytes == 0 {
            flow.fold.on_ecn_ce(now_us, mss);
        } else {
            flow.fold.on_loss(now_us, lost_bytes, persistent, mss);
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.flow().mss = u32::from(new_mtu);
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.window;
        m
    }

    /// A copy for a new path (quinn clones the controller on migration): the same algorithm,
    /// seeded from this connection's window and RTT, as a hot swap seeds it.
    fn clone_box(&self) -> Box<dyn Controller> {
        let flow = self.flow.lock().unwrap_or_else(|e| e.into_inner());
        let c = &flow.containment;
        let start = FlowStart {
            now_us: 0,
            mss_bytes: flow.mss,
            init_cwnd_bytes: c.cwnd_bytes(),
            ecn: None,
            seed: Some(Seed { cwnd_bytes: c.cwnd_bytes(), srtt_us: c.srtt_us(), ..Seed::default() }),
        };
        Box::new(CcpController::start(self.factory.clone(), Instant::now(), start, self.initial_window))
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
