//! The libccp thread: one per process, owning libccp, the socket to the agent and every
//! connection's libccp connection.
//!
//! quinn calls its controllers from the application's runtime; libccp wants one thread that
//! owns it (its connections borrow the datapath, its callbacks share state through an `Rc`).
//! So controllers only send this thread messages — a connection opened, an ACK frame's
//! primitives, a connection closed — over a bounded channel that never blocks them, and read back
//! what the agent commanded from their [`Steered`] cell. The thread runs libccp's program on each
//! frame, hands the agent's messages to libccp once `ccp-wire` has checked them, and follows the
//! agent as it comes and goes exactly as the DPDK datapath does (`Shared::follow_agent`): when it
//! goes, every connection is told, and its controller hands the window to quinn's own Cubic; when
//! one is there again it gets READY and a CREATE per connection with the window it has now.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccp_libccp_host::datapath::{self as ccp, AgentPresence, Commanded, Shared};
use ccp_libccp_host::errors::describe;
use ccp_libccp_host::ipc::{wait_readable, Channel, Endpoints, MAX_DATAGRAM};
use ccp_libccp_host::primitives::{to_libccp, Primitives};
use libccp::{Connection, Datapath, FlowInfo, LibccpError};
use tracing::{debug, info, warn};

/// How often the agent is looked for.
const TICK: Duration = Duration::from_millis(100);
/// How long the thread sleeps on the agent's socket before it takes the frames queued meanwhile:
/// the most a frame waits to reach libccp. Controllers never wake the thread: on this machine a
/// wake-up per frame cost the sender 4.2× quinn's own CPU per datagram (a channel receive that
/// sleeps is woken by every send); polling the queue costs a fixed 2,000 wake-ups a second.
const POLL: Duration = Duration::from_micros(500);

/// What the agent commanded for one connection, shared by its controller and this thread.
#[derive(Debug, Default)]
pub struct Steered {
    /// The agent steers the connection: it has a libccp connection and the agent commanded a
    /// window for it. Cleared when the agent goes.
    pub by_agent: AtomicBool,
    /// The last window commanded, bytes.
    pub cwnd_bytes: AtomicU64,
    /// The connection's libccp socket id (0: none).
    pub sid: AtomicU64,
}

/// What controllers tell the thread.
pub enum Msg {
    Open {
        id: u64,
        steered: Arc<Steered>,
        mss: u32,
        cwnd_bytes: u64,
        /// (local, remote), when the factory knew its path.
        path: Option<(SocketAddr, SocketAddr)>,
    },
    /// One ACK frame's primitives (`snd_cwnd` is the window the connection runs now).
    Frame {
        id: u64,
        primitives: Primitives,
    },
    Close {
        id: u64,
    },
}

/// What the thread counts, for the tool's summary.
#[derive(Debug, Default)]
pub struct Counters {
    /// Connections the agent steers now.
    pub steered_now: AtomicU64,
    pub frames_to_agent: AtomicU64,
    pub frames_unsteered: AtomicU64,
    pub dropped: AtomicU64,
    pub from_agent: AtomicU64,
    pub rejected: AtomicU64,
    pub invoke_errors: AtomicU64,
    pub agents_lost: AtomicU64,
    pub table_full: AtomicU64,
    /// From the frame whose invoke sent a report to the agent's next command for that
    /// connection arriving, µs: the agent's reaction time as the datapath sees it (at most
    /// [`LATENCY_SAMPLES`] kept).
    pub report_to_command_us: Mutex<Vec<u64>>,
}

/// Report-to-command samples kept.
pub const LATENCY_SAMPLES: usize = 100_000;

/// How the thread reaches the agent.
#[derive(Debug, Clone)]
pub struct Config {
    pub endpoints: Endpoints,
    pub datapath_id: u32,
    pub cong_alg: Option<String>,
    /// An agent that refuses every message this long hangs: its connections go to the fallback.
    pub silence: Duration,
    /// libccp connection slots.
    pub connections: usize,
}

struct Conn<'dp> {
    steered: Arc<Steered>,
    /// When the frame whose invoke sent the latest report was handled (until the agent's next
    /// command).
    report_at: Option<Instant>,
    mss: u32,
    cwnd_bytes: u64,
    path: Option<(SocketAddr, SocketAddr)>,
    ccp: Option<Connection<'dp, Commanded>>,
    waiting: bool,
}

struct Steer<'dp> {
    dp: &'dp Datapath,
    shared: Rc<Shared>,
    cfg: Config,
    conns: HashMap<u64, Conn<'dp>>,
    by_sid: HashMap<u32, u64>,
    counters: Arc<Counters>,
    recv_buf: Vec<u8>,
    msg_buf: Vec<u8>,
}

/// Runs the thread until every sender of `rx` is gone. Fails only when the socket or libccp
/// cannot be set up.
pub fn run(cfg: Config, rx: Receiver<Msg>, counters: Arc<Counters>, ready: impl FnOnce(Result<(), String>)) {
    let chan = match Channel::open(&cfg.endpoints) {
        Ok(c) => c,
        Err(e) => return ready(Err(e)),
    };
    let shared = Rc::new(Shared::new(chan));
    let dp = match ccp::init_datapath(cfg.datapath_id, cfg.connections, &shared) {
        Ok(dp) => dp,
        Err(e) => return ready(Err(e)),
    };
    ready(Ok(()));
    let mut s = Steer {
        dp: &dp,
        shared,
        cfg,
        conns: HashMap::new(),
        by_sid: HashMap::new(),
        counters,
        recv_buf: vec![0; MAX_DATAGRAM],
        msg_buf: Vec::with_capacity(MAX_DATAGRAM),
    };
    let mut next_tick = Instant::now();
    loop {
        // The agent's socket wakes the thread at once; frames are taken as they queued.
        wait_readable(&[s.shared.chan.fd()], POLL);
        loop {
            match rx.try_recv() {
                Ok(m) => s.handle(m),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        s.serve_agent();
        let now = Instant::now();
        if now >= next_tick {
            s.tick(now);
            next_tick = now + TICK;
        }
    }
}

impl<'dp> Steer<'dp> {
    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Open { id, steered, mss, cwnd_bytes, path } => {
                self.conns.insert(id, Conn { steered, report_at: None, mss, cwnd_bytes, path, ccp: None, waiting: false });
                if self.shared.agent().is_some() {
                    self.connect(id);
                }
            }
            Msg::Frame { id, primitives } => self.frame(id, &primitives),
            Msg::Close { id } => {
                // Dropping the libccp connection sends the agent its close.
                if let Some(c) = self.conns.remove(&id) {
                    self.by_sid.remove(&(c.steered.sid.load(Ordering::Relaxed) as u32));
                    self.unsteer(&c);
                }
            }
        }
    }

    /// Runs the agent's program on one frame, and publishes what it commanded.
    fn frame(&mut self, id: u64, p: &Primitives) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.cwnd_bytes = u64::from(p.snd_cwnd);
        let Some(ccp) = c.ccp.as_mut() else {
            self.counters.frames_unsteered.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // libccp's Cwnd register starts from its own last command (a lagging value fed back
        // would make it re-issue that and undo the agent: ebpf-datapath pitfall G).
        let before: Commanded = **ccp;
        let mut p = *p;
        p.snd_cwnd = before.cwnd.unwrap_or(p.snd_cwnd);
        ccp.load_primitives(to_libccp(&p));
        let reports = self.shared.reports();
        let invoked = ccp.invoke();
        if self.shared.reports() > reports && c.report_at.is_none() {
            c.report_at = Some(Instant::now());
        }
        match invoked {
            Ok(()) => {
                self.counters.frames_to_agent.fetch_add(1, Ordering::Relaxed);
            }
            Err(LibccpError::LibccpProgIsNull) => {}
            Err(e) => {
                self.counters.invoke_errors.fetch_add(1, Ordering::Relaxed);
                self.shared.warn_throttled(&format!("libccp's program failed: {}", describe(&e)));
            }
        }
        let now: Commanded = **ccp;
        if let Some(cwnd) = now.cwnd {
            // A command below one datagram still sends one: a zero window would stall the
            // connection with nothing to clock the next command in.
            c.steered.cwnd_bytes.store(u64::from(cwnd).max(u64::from(c.mss)), Ordering::Release);
            if !c.steered.by_agent.swap(true, Ordering::AcqRel) {
                self.counters.steered_now.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Starts a connection's libccp connection (CREATE to the agent, with its current window).
    fn connect(&mut self, id: u64) -> bool {
        let Some(c) = self.conns.get_mut(&id) else { return true };
        if c.ccp.is_some() {
            return true;
        }
        let init_cwnd = u32::try_from(c.cwnd_bytes).unwrap_or(u32::MAX);
        // libccp's CREATE carries IPv4 addresses in host order (the agent reads user-space
        // datapaths' four-tuples that way); an IPv6 path goes without.
        let tuple = match c.path {
            Some((SocketAddr::V4(l), SocketAddr::V4(r))) => Some((u32::from(*l.ip()), l.port(), u32::from(*r.ip()), r.port())),
            _ => None,
        };
        let info = || {
            let i = FlowInfo::default().with_mss(c.mss).with_init_cwnd(init_cwnd);
            match tuple {
                Some((lip, lport, rip, rport)) => i.with_four_tuple(lip, u32::from(lport), rip, u32::from(rport)),
                None => i,
            }
        };
        let info = match &self.cfg.cong_alg {
            Some(name) => info().with_cong_alg(name).unwrap_or_else(|_| info()),
            None => info(),
        };
        match Connection::start(self.dp, Commanded::default(), info) {
            Ok(conn) => {
                let sid = self.shared.take_create_sid().unwrap_or(0);
                c.steered.sid.store(u64::from(sid), Ordering::Relaxed);
                self.by_sid.insert(sid, id);
                c.ccp = Some(conn);
                c.waiting = false;
                debug!(id, sid, init_cwnd, "libccp connection started");
                true
            }
            Err(e) => {
                if !c.waiting {
                    self.counters.table_full.fetch_add(1, Ordering::Relaxed);
                    warn!(id, error = %describe(&e), "libccp has no free connection: the connection stays on the fallback");
                }
                c.waiting = true;
                false
            }
        }
    }

    fn unsteer(&self, c: &Conn<'_>) {
        c.steered.sid.store(0, Ordering::Relaxed);
        if c.steered.by_agent.swap(false, Ordering::AcqRel) {
            self.counters.steered_now.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn serve_agent(&mut self) {
        self.read_agent();
        if self.shared.take_agent_lost() {
            let shared = self.shared.clone();
            shared.lose_agent(self, "a message found its socket closed");
        }
    }

    /// Hands every datagram from the agent to libccp, message by message, once checked; a
    /// command ends the wait of the report it answers.
    fn read_agent(&mut self) {
        let (by_sid, conns, counters) = (&self.by_sid, &mut self.conns, &self.counters);
        let got = ccp::read_agent(&self.shared, self.dp, &mut self.recv_buf, &mut self.msg_buf, |kind, sid| {
            if kind == "UPDATE_FIELDS" {
                command_arrived(by_sid, conns, counters, sid);
            }
        });
        self.counters.from_agent.fetch_add(got.messages, Ordering::Relaxed);
        self.counters.rejected.fetch_add(got.rejected, Ordering::Relaxed);
    }

    fn tick(&mut self, now: Instant) {
        let shared = self.shared.clone();
        let (datapath_id, silence) = (self.cfg.datapath_id, self.cfg.silence);
        shared.follow_agent(self, datapath_id, now, 2 * TICK, silence);
        if shared.agent().is_some() {
            let waiting: Vec<u64> = self.conns.iter().filter(|(_, c)| c.waiting).map(|(id, _)| *id).collect();
            for id in waiting {
                if !self.connect(id) {
                    break;
                }
            }
        }
    }
}

impl AgentPresence for Steer<'_> {
    fn agent_gone(&mut self, why: &str) {
        self.counters.agents_lost.fetch_add(1, Ordering::Relaxed);
        for c in self.conns.values_mut() {
            c.ccp = None;
            c.waiting = false;
            c.report_at = None;
        }
        self.by_sid.clear();
        for c in self.conns.values() {
            self.unsteer(c);
        }
        warn!(agent = %self.shared.chan.agent_path().display(), "the CCP agent is gone ({why}): connections continue on quinn's own controller until an agent returns");
    }

    fn agent_back(&mut self) {
        info!(agent = %self.shared.chan.agent_path().display(), "a CCP agent is there: announcing the connections");
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            if !self.connect(id) {
                break;
            }
        }
    }
}

/// The agent's command for `sid` arrived: the time since the report it answers.
fn command_arrived(by_sid: &HashMap<u32, u64>, conns: &mut HashMap<u64, Conn<'_>>, counters: &Counters, sid: u32) {
    let reported = by_sid.get(&sid).and_then(|id| conns.get_mut(id)).and_then(|c| c.report_at.take());
    if let Some(t) = reported {
        let mut v = counters.report_to_command_us.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < LATENCY_SAMPLES {
            v.push(t.elapsed().as_micros() as u64);
        }
    }
}
