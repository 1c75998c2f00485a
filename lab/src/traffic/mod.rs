//! Traffic: the flows of one run, as threads inside the emulator's namespaces.
//!
//! * [`bulk`]: backlogged TCP sender/receiver pairs with a chosen congestion control set before
//!   connect (the scheme's flows and long-lived cross flows);
//! * [`cbr`]: UDP at a constant bit rate, or with Poisson packet arrivals (inelastic);
//! * [`poisson`]: TCP flows of random size arriving as a Poisson process at an offered load;
//! * [`quic`]: a QUIC scheme's bulk flows, as quinn connections of the QUIC datapath's tools.
//!
//! Every flow shares a [`FlowState`] with the sampler: byte counters, the sending socket for
//! `TCP_INFO`, and the first error (a flow that cannot connect or set its congestion control
//! fails the run instead of quietly measuring nothing). Receivers bind before any sender starts.

pub mod bulk;
pub mod cbr;
pub mod poisson;
pub mod quic;
pub mod sock;

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::netns;
pub use sock::TcpInfo;

/// First port used by the flows of a run (each flow gets its own).
const BASE_PORT: u16 = 5201;
/// IPv4 + UDP headers.
pub const UDP_OVERHEAD_BYTES: u32 = 28;
/// Wire bytes per TCP payload byte for full segments on this path (MTU 1500: 1448 bytes of
/// payload under IPv4 + TCP + timestamps), to compare TCP goodput with link throughput.
pub const TCP_WIRE_PER_PAYLOAD: f64 = 1500.0 / 1448.0;
/// Longest a blocked thread waits before checking whether to stop.
const POLL: Duration = Duration::from_millis(100);

/// The receiver's port of the run's flow number `index` (plans in order; the scheme's come
/// first), which is also the destination port of its sender.
pub fn port_of(index: usize) -> Option<u16> {
    u16::try_from(index).ok().and_then(|i| BASE_PORT.checked_add(i))
}

/// Whose flow it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The scheme under test.
    Scheme,
    /// Cross traffic.
    Cross,
}

/// What a flow does.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanKind {
    /// A backlogged TCP flow, or with `bytes` one that sends that many bytes and ends (its
    /// completion time recorded as a [`ShortFlow`]). With `quic`, the flow is a QUIC connection
    /// ([`quic`]) and `cc`/`receiver_cc` do not apply.
    Bulk { cc: String, receiver_cc: Option<String>, bytes: Option<u64>, quic: Option<quic::QuicPlan> },
    /// UDP at `rate_bps` (IP bytes), packets of `packet_bytes` (IP), evenly spaced or with
    /// exponential gaps.
    Udp { rate_bps: f64, packet_bytes: u32, poisson_seed: Option<u64>, on_off: Option<(Duration, Duration)> },
    /// TCP flows arriving at `load_bps / mean_size` per second.
    PoissonTcp { load_bps: f64, mean_size_bytes: u64, fixed_size: bool, cc: String, max_concurrent: u32, seed: u64 },
}

impl PlanKind {
    /// A short type name for outputs.
    pub fn type_name(&self) -> &'static str {
        match self {
            PlanKind::Bulk { quic: Some(_), .. } => "quic",
            PlanKind::Bulk { .. } => "tcp",
            PlanKind::Udp { poisson_seed: None, on_off: Some(_), .. } => "on_off_udp",
            PlanKind::Udp { poisson_seed: None, .. } => "cbr",
            PlanKind::Udp { poisson_seed: Some(_), .. } => "poisson_udp",
            PlanKind::PoissonTcp { .. } => "poisson_tcp",
        }
    }

    /// The congestion control of a TCP plan, or the scheme's `cc` of a QUIC one.
    pub fn cc(&self) -> Option<String> {
        match self {
            PlanKind::Bulk { quic: Some(q), .. } => Some(q.cc.to_string()),
            PlanKind::Bulk { cc, .. } | PlanKind::PoissonTcp { cc, .. } => Some(cc.clone()),
            PlanKind::Udp { .. } => None,
        }
    }

    /// Wire bytes per byte received (UDP counts IP bytes already).
    pub fn wire_per_payload(&self) -> f64 {
        match self {
            PlanKind::Udp { .. } => 1.0,
            PlanKind::Bulk { quic: Some(_), .. } => quic::QUIC_WIRE_PER_PAYLOAD,
            PlanKind::Bulk { .. } | PlanKind::PoissonTcp { .. } => TCP_WIRE_PER_PAYLOAD,
        }
    }
}

/// One flow (or flow generator) of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowPlan {
    pub label: String,
    pub role: Role,
    pub kind: PlanKind,
    /// Offsets from the start of traffic.
    pub start: Duration,
    pub stop: Duration,
}

/// A completed (or cut-off) flow of a Poisson TCP generator, or a fixed-size bulk flow.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ShortFlow {
    /// Since the start of traffic, s.
    pub start_s: f64,
    pub size_bytes: u64,
    /// Flow completion time, s (until the receiver's close arrived), or until it was cut off.
    pub duration_s: f64,
    pub completed: bool,
}

/// What a flow's threads share with the sampler.
#[derive(Debug, Default)]
pub struct FlowState {
    /// Bytes received: TCP payload, or UDP IP bytes.
    pub rx_bytes: AtomicU64,
    /// Bytes handed to the socket (same units).
    pub tx_bytes: AtomicU64,
    /// Datagrams the sender's kernel refused (UDP: ENOBUFS when the TUN queue is full).
    pub send_failures: AtomicU64,
    /// Arrivals skipped because `max_concurrent` flows were in progress (Poisson TCP).
    pub skipped: AtomicU64,
    pub sender: Mutex<Option<TcpStream>>,
    pub receiver: Mutex<Option<TcpStream>>,
    pub short_flows: Mutex<Vec<ShortFlow>>,
    error: Mutex<Option<String>>,
}

impl FlowState {
    /// Records the first error of this flow.
    pub fn fail(&self, message: String) {
        let mut e = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        if e.is_none() {
            *e = Some(message);
        }
    }

    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Locks a mutex even if a traffic thread panicked while holding it (the data is counters and
/// sockets: still meaningful).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where flows go.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub sender_ns: String,
    pub receiver_ns: String,
    pub receiver_addr: Ipv4Addr,
    /// Where flows keep their files (the run's directory): QUIC flows' certificates, sockets
    /// and logs.
    pub work_dir: std::path::PathBuf,
}

/// A flow about to start: its plan, where it goes, and what its threads share.
pub struct FlowSetup<'a> {
    pub plan: &'a FlowPlan,
    pub ends: &'a Endpoints,
    /// The receiver's address with this flow's own port.
    pub addr: SocketAddrV4,
    pub state: Arc<FlowState>,
    pub clock: Clock,
}

/// The threads of a started flow; each returns its own error (flow failures go to
/// [`FlowState::fail`]).
pub type FlowThreads = Vec<JoinHandle<Result<()>>>;

impl FlowSetup<'_> {
    /// Starts the receiving thread. It stays in the caller's namespace: the socket it reads was
    /// bound in the receiver's already, before any sender starts.
    fn spawn_receiver(&self, f: impl FnOnce() -> Result<()> + Send + 'static) -> Result<JoinHandle<Result<()>>> {
        std::thread::Builder::new()
            .name(format!("rcv-{}", self.plan.label).chars().take(15).collect())
            .spawn(f)
            .map_err(|e| Error::io("spawning a receiver thread", e))
    }

    /// Starts a thread in the sender's namespace, named `{what}-{label}`.
    fn spawn_sender(&self, what: &str, f: impl FnOnce() -> Result<()> + Send + 'static) -> Result<JoinHandle<Result<()>>> {
        netns::spawn_in(&self.ends.sender_ns, &format!("{what}-{}", self.plan.label), f)
    }
}

/// What a thread needs to know about time and stopping.
#[derive(Debug, Clone)]
pub struct Clock {
    /// Start of traffic.
    pub t0: Instant,
    pub stop: Arc<AtomicBool>,
}

impl Clock {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps until `t0 + at`, waking to check the stop flag. False if asked to stop.
    pub fn sleep_until(&self, at: Duration) -> bool {
        let deadline = self.t0 + at;
        loop {
            if self.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            std::thread::sleep((deadline - now).min(POLL));
        }
    }

    /// Whether `t0 + at` has passed (or stopping was asked).
    pub fn past(&self, at: Duration) -> bool {
        self.stopped() || Instant::now() >= self.t0 + at
    }

    pub fn elapsed_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }
}

/// One sample of one flow.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FlowSample {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// The sending socket's TCP_INFO, for bulk TCP flows once connected.
    pub tcp: Option<TcpInfo>,
    /// The receiving socket's TCP_INFO (its CE counters show what the receiver saw, to compare
    /// with what the sender was told).
    pub receiver_tcp: Option<TcpInfo>,
}

/// The running traffic of one run.
pub struct Traffic {
    pub plans: Vec<FlowPlan>,
    pub states: Vec<Arc<FlowState>>,
    clock: Clock,
    threads: Vec<JoinHandle<Result<()>>>,
}

impl Traffic {
    /// Binds every receiver, then starts every sender thread. Times count from now.
    pub fn start(plans: Vec<FlowPlan>, ends: &Endpoints) -> Result<Traffic> {
        let clock = Clock { t0: Instant::now(), stop: Arc::new(AtomicBool::new(false)) };
        let states: Vec<Arc<FlowState>> = plans.iter().map(|_| Arc::new(FlowState::default())).collect();
        let mut traffic = Traffic { plans: plans.clone(), states: states.clone(), clock: clock.clone(), threads: Vec::new() };
        for (i, (plan, state)) in plans.iter().zip(&states).enumerate() {
            let port = port_of(i).ok_or_else(|| Error::Run("too many flows".into()))?;
            // On error, `traffic` drops and stops what already started.
            let start = match &plan.kind {
                PlanKind::Bulk { quic: Some(_), .. } => quic::start,
                PlanKind::Bulk { .. } => bulk::start,
                PlanKind::Udp { .. } => cbr::start,
                PlanKind::PoissonTcp { .. } => poisson::start,
            };
            let setup = FlowSetup {
                plan,
                ends,
                addr: SocketAddrV4::new(ends.receiver_addr, port),
                state: state.clone(),
                clock: clock.clone(),
            };
            let handles = start(&setup)?;
            traffic.threads.extend(handles);
        }
        Ok(traffic)
    }

    /// When traffic started.
    pub fn t0(&self) -> Instant {
        self.clock.t0
    }

    /// A snapshot of every flow.
    pub fn sample(&self) -> Vec<FlowSample> {
        self.states
            .iter()
            .map(|s| FlowSample {
                rx_bytes: s.rx_bytes.load(Ordering::Relaxed),
                tx_bytes: s.tx_bytes.load(Ordering::Relaxed),
                tcp: lock(&s.sender).as_ref().and_then(|st| sock::tcp_info(st).ok()),
                receiver_tcp: lock(&s.receiver).as_ref().and_then(|st| sock::tcp_info(st).ok()),
            })
            .collect()
    }

    /// The first error of any flow, named.
    pub fn first_error(&self) -> Option<String> {
        self.plans.iter().zip(&self.states).find_map(|(p, s)| s.error().map(|e| format!("flow {}: {e}", p.label)))
    }

    /// Stops every thread and waits for them. Returns the first error (a thread's own error or
    /// a panic), after everything has stopped.
    pub fn stop(&mut self) -> Result<()> {
        self.clock.stop.store(true, Ordering::Relaxed);
        let mut first = None;
        for t in self.threads.drain(..) {
            let r = t.join().unwrap_or_else(|_| Err(Error::Run("a traffic thread panicked".into())));
            if let (Err(e), None) = (r, &first) {
                first = Some(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("ccp-lab: stopping traffic: {e}");
        }
    }
}
