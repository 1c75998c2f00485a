//! `ccp-dpdk send`: the loop that runs the sender's connections on a DPDK port.
//!
//! One thread, one loop, polling as DPDK programs do: receive a burst, hand each ACK to its
//! connection and its measurements to whoever steers the connection (libccp running the agent's
//! program, or the fallback), fire due timers, send what the windows allow, then read the
//! agent's socket. When a pass finds nothing to do it sleeps `--idle-sleep-us` (0: never), so an
//! idle or window-limited sender does not hold a CPU the receiver, the agent or an emulator on
//! the same host need.
//!
//! # The agent coming and going
//! Like the portus shim's: a connection has a libccp connection only while an agent reads its
//! socket. When the agent goes (a send finds its socket closed, the tick sees it gone or
//! replaced, or it has refused every message for `--silence-timeout-ms`), every libccp
//! connection is dropped and each connection continues on the fallback from the window it has.
//! When an agent is there again it gets READY and one CREATE per connection, with the current
//! window as the initial one, and steers from there.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ccp_libccp_host::datapath::{self as ccp, AgentPresence, Shared};
use ccp_libccp_host::errors::describe;
use ccp_libccp_host::ipc::{Channel, MAX_DATAGRAM};
use ccp_libccp_host::stop;
use ccp_user_tcp::conn::{Config as TcpConfig, Conn, State};
use ccp_user_tcp::fallback::Fallback;
use ccp_user_tcp::source::fill_pattern;
use ccp_user_tcp::wire::{self, Endpoints as WireEndpoints, Inbound};
use libccp::{Connection, Datapath};
use tracing::{debug, info, warn};

use crate::cli::{FallbackArg, SendArgs};
use crate::flows::{Flow, Steered};
use crate::neigh::Neigh;
use crate::output::{Line, Output};
use crate::port::{Port, PortConfig, PortStats, RxBatch, TxBatch, MAX_FRAME};

/// How often the agent is looked for and the counters refreshed.
const TICK: Duration = Duration::from_millis(100);
/// The agent's socket is read at least this often while there is traffic (a non-blocking
/// receive costs about a microsecond; a command waits at most this long, plus the pass under way).
const AGENT_POLL_US: u64 = 50;
/// Frames queued before they are handed to the device.
const TX_FLUSH: usize = 128;
/// Segments built per loop pass, across connections: a pass that sent a whole window of a fast
/// connection would leave ACKs waiting in the receive ring for as long (inflating every RTT
/// sample), so each pass sends at most this much and goes back to receiving.
const TX_BUDGET: u32 = 256;
/// How long a run waits for its connections to finish after --seconds (their FINs acked).
const LINGER: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub struct Stats {
    pub frames_in: u64,
    pub frames_bad: u64,
    pub frames_other: u64,
    pub frames_chained: u64,
    pub segments_unknown: u64,
    pub frames_out: u64,
    /// Passes that found the device's transmit ring full.
    pub tx_ring_full: u64,
    pub no_mbuf: u64,
    pub acks_to_agent: u64,
    pub acks_to_fallback: u64,
    pub no_program: u64,
    pub invoke_errors: u64,
    pub from_agent: u64,
    pub rejected: u64,
    pub table_full: u64,
    pub arp_replies: u64,
    /// Time spent handing ACKs to libccp (load the primitives, run the agent's program, send
    /// what it reports), ns, and the ACKs it was spent on.
    pub control_ns: u64,
    pub control_acks: u64,
    /// From the ACK whose invoke sent a report to the agent's next command for that connection
    /// arriving here, µs: the agent's reaction time as the datapath sees it.
    pub report_to_command_us: Samples,
    /// The device's own counters at the end of the run.
    pub port: PortStats,
}

/// Latency samples, the first [`Samples::CAP`] kept.
#[derive(Debug, Default)]
pub struct Samples(Vec<u32>);

impl Samples {
    const CAP: usize = 1 << 20;

    pub fn push(&mut self, v: u64) {
        if self.0.len() < Self::CAP {
            self.0.push(v.min(u64::from(u32::MAX)) as u32);
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The `q`-th percentile (0..=100), nearest rank; 0 without samples.
    pub fn percentile(&self, q: u32) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let rank = (v.len() * q.min(100) as usize).div_ceil(100).max(1);
        u64::from(v[rank - 1])
    }
}

pub fn run(args: &SendArgs) -> anyhow::Result<bool> {
    let port =
        Port::open(&PortConfig { eal_args: args.eal_args(), device: args.device(), rx_desc: 1024, tx_desc: 1024, mbufs: 16_383 })
            .map_err(anyhow::Error::msg)?;
    info!(mac = %fmt_mac(port.mac()), mtu = port.mtu(), "DPDK port started");
    stop::on_sigint_and_sigterm();
    if args.no_agent {
        let mut s = Sender::new(args, port, None, None);
        return Ok(s.run());
    }
    let shared = Rc::new(Shared::new(Channel::open(&args.endpoints()).map_err(anyhow::Error::msg)?));
    let (chan, present) = (&shared.chan, shared.agent().is_some());
    info!(socket = %chan.bound_path().display(), agent = %chan.agent_path().display(), present, "libccp IPC");
    if !present {
        info!("no agent yet: connections run on the fallback until one reads {}", chan.agent_path().display());
    }
    let connections = (args.flows as usize).clamp(1, ccp_libccp_host::table::MAX_CONNECTIONS);
    let dp = ccp::init_datapath(args.ipc.datapath_id, connections, &shared).map_err(anyhow::Error::msg)?;
    let mut s = Sender::new(args, port, Some(&dp), Some(shared));
    Ok(s.run())
}

struct Sender<'dp> {
    neigh: Neigh,
    flows: Vec<Flow<'dp>>,
    /// libccp's sids to connections.
    by_sid: HashMap<u32, usize>,
    /// The connection that sends first in the next pass.
    next_tx: usize,
    local_ip: std::net::Ipv4Addr,
    remote: SocketAddrV4,
    base_port: u16,
    dp: Option<&'dp Datapath>,
    shared: Option<Rc<Shared>>,
    datapath_id: u32,
    cong_alg: Option<String>,
    silence_timeout: Duration,
    idle_sleep: Duration,
    timed: Option<Duration>,
    rx: RxBatch,
    tx: TxBatch,
    recv_buf: Vec<u8>,
    msg_buf: Vec<u8>,
    t0: Instant,
    stats: Stats,
    out: Output,
    /// Last: fields drop in order, and the batches' mbufs must go back to the pool before the
    /// port's drop releases the EAL and the pool with it.
    port: Port,
}

impl<'dp> Sender<'dp> {
    fn new(args: &SendArgs, port: Port, dp: Option<&'dp Datapath>, shared: Option<Rc<Shared>>) -> Self {
        let t0 = Instant::now();
        let cfg = TcpConfig {
            mss_bytes: args.mss,
            init_cwnd_pkts: args.init_cwnd_pkts,
            ecn: !args.no_ecn,
            sack: !args.no_sack,
            ..TcpConfig::default()
        };
        // RFC 6528: initial sequence numbers an off-path host cannot guess.
        let seed = random_u32();
        let flows = (0..args.flows)
            .map(|i| {
                let isn = seed.wrapping_add(i.wrapping_mul(0x6A09_E667));
                let conn = Conn::new(&cfg, isn, args.bytes, 0);
                let mss = u32::from(args.mss);
                let init = args.init_cwnd_pkts.saturating_mul(mss);
                let fallback = match args.fallback {
                    FallbackArg::Reno => Fallback::new_reno(mss, init),
                    FallbackArg::Cubic => Fallback::new_cubic(mss, init),
                };
                Flow::new(conn, args.src_port.wrapping_add(i as u16), fallback)
            })
            .collect();
        let neigh = Neigh::new(port.mac(), args.ip, args.gateway.unwrap_or(*args.dst.ip()), args.dst_mac);
        Sender {
            neigh,
            flows,
            by_sid: HashMap::new(),
            next_tx: 0,
            local_ip: args.ip,
            remote: args.dst,
            base_port: args.src_port,
            dp,
            shared,
            datapath_id: args.ipc.datapath_id,
            cong_alg: args.ipc.cong_alg.clone(),
            silence_timeout: Duration::from_millis(args.silence_timeout_ms),
            idle_sleep: Duration::from_micros(args.idle_sleep_us),
            timed: args.bytes.is_none().then(|| Duration::from_secs(args.seconds.unwrap_or(10))),
            rx: RxBatch::default(),
            tx: TxBatch::default(),
            recv_buf: vec![0; MAX_DATAGRAM],
            msg_buf: Vec::with_capacity(MAX_DATAGRAM),
            t0,
            stats: Stats::default(),
            out: Output::new(args.json, args.per_flow, Duration::from_millis(args.report_ms)),
            port,
        }
    }

    fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    /// Runs until every connection has finished (or failed), --seconds are up, or a signal;
    /// whether every connection finished cleanly.
    fn run(&mut self) -> bool {
        let mut last_tick = Instant::now();
        let mut last_agent_poll = 0u64;
        let mut finishing_since: Option<Instant> = None;
        loop {
            let now = self.now_us();
            let mut busy = self.receive(now);
            busy |= self.timers(now);
            // The agent's commands are read before this pass sends, so they shape it.
            if self.shared.is_some() && now.saturating_sub(last_agent_poll) >= AGENT_POLL_US {
                last_agent_poll = now;
                self.serve_agent();
            }
            busy |= self.transmit(now);
            if self.shared.is_some() && !busy {
                self.serve_agent();
            }
            let wall = Instant::now();
            if wall.duration_since(last_tick) >= TICK {
                last_tick = wall;
                self.tick(wall);
            }
            if self.out.due(now) {
                self.out.line(now, &self.lines(), self.has_agent());
            }
            if stop::requested() {
                info!("stopping on a signal");
                break;
            }
            if self.flows.iter().all(|f| matches!(f.conn.state(), State::Closed | State::Failed(_))) {
                break;
            }
            if let Some(d) = self.timed {
                if self.t0.elapsed() >= d && finishing_since.is_none() {
                    finishing_since = Some(Instant::now());
                    for f in &mut self.flows {
                        f.conn.close();
                    }
                }
            }
            if finishing_since.is_some_and(|t| t.elapsed() >= LINGER) {
                warn!("connections did not finish within {} s of the end of the run", LINGER.as_secs());
                break;
            }
            if !busy && !self.idle_sleep.is_zero() {
                std::thread::sleep(self.idle_sleep);
            }
        }
        let now = self.now_us();
        self.stats.port = self.port.stats();
        self.out.summary(now, &self.lines(), &self.stats);
        self.flows.iter().all(|f| matches!(f.conn.state(), State::Closed | State::Established))
    }

    fn lines(&self) -> Vec<Line> {
        self.flows
            .iter()
            .map(|f| Line {
                port: f.local_port,
                acked: f.conn.stats().bytes_acked_total,
                cwnd: f.conn.cwnd_bytes(),
                srtt_us: f.conn.srtt_us(),
                retx: f.conn.stats().retx_segs,
                timeouts: f.conn.stats().timeouts,
                state: f.conn.state(),
                steered_by_agent: f.ccp.is_some(),
            })
            .collect()
    }

    /// One burst from the port.
    fn receive(&mut self, now: u64) -> bool {
        self.port.rx(&mut self.rx);
        let ack_at = Instant::now();
        let n = self.rx.len();
        for i in 0..n {
            self.stats.frames_in += 1;
            let parsed = match self.rx.frame(i) {
                Some(f) => wire::parse(f),
                None => {
                    self.stats.frames_chained += 1;
                    continue;
                }
            };
            match parsed {
                Ok(Inbound::Tcp(seg)) => {
                    let idx = usize::from(seg.dst_port.wrapping_sub(self.base_port));
                    let ours = seg.dst_ip == self.local_ip
                        && seg.src_ip == *self.remote.ip()
                        && seg.src_port == self.remote.port()
                        && idx < self.flows.len();
                    if !ours {
                        self.stats.segments_unknown += 1;
                        continue;
                    }
                    let was_established = self.flows[idx].conn.state() == State::Established;
                    if let Some(sample) = self.flows[idx].conn.on_segment(&seg, now) {
                        self.steer(idx, &sample, ack_at);
                    }
                    if !was_established && self.flows[idx].conn.state() == State::Established {
                        debug!(
                            port = self.flows[idx].local_port,
                            mss = self.flows[idx].conn.mss(),
                            ecn = self.flows[idx].conn.ecn_enabled(),
                            "connection established"
                        );
                        if self.has_agent() {
                            self.connect(idx);
                        }
                    }
                }
                Ok(Inbound::Arp(a)) => {
                    if let Some(reply) = self.neigh.on_arp(&a) {
                        self.send_arp(false, reply.target_mac, reply.target_ip);
                        self.stats.arp_replies += 1;
                    }
                }
                Ok(Inbound::Other) => self.stats.frames_other += 1,
                Err(e) => {
                    self.stats.frames_bad += 1;
                    debug!(error = %e, "dropping a malformed frame");
                }
            }
        }
        n > 0
    }

    fn steer(&mut self, idx: usize, sample: &ccp_user_tcp::conn::AckSample, ack_at: Instant) {
        let timed = self.flows[idx].ccp.as_ref().zip(self.shared.as_ref()).map(|(_, s)| (s.reports(), Instant::now()));
        let steered = self.flows[idx].control(sample);
        if let (Some((reports, t0)), Some(shared)) = (timed, &self.shared) {
            self.stats.control_ns += t0.elapsed().as_nanos() as u64;
            self.stats.control_acks += 1;
            if shared.reports() > reports {
                self.flows[idx].report_at = Some(ack_at);
            }
        }
        match steered {
            Steered::Fallback => self.stats.acks_to_fallback += 1,
            Steered::Agent => self.stats.acks_to_agent += 1,
            Steered::NoProgram => self.stats.no_program += 1,
            Steered::InvokeError(code) => {
                self.stats.invoke_errors += 1;
                if let Some(s) = &self.shared {
                    s.warn_throttled(&format!("libccp's program failed on an ACK: error {code}"));
                }
            }
        }
    }

    fn timers(&mut self, now: u64) -> bool {
        let mut fired = false;
        for idx in 0..self.flows.len() {
            if self.flows[idx].conn.next_timer_us().is_some_and(|t| t <= now) {
                fired = true;
                if let Some(sample) = self.flows[idx].conn.on_timer(now) {
                    self.steer(idx, &sample, Instant::now());
                }
            }
        }
        fired
    }

    fn transmit(&mut self, now: u64) -> bool {
        if self.neigh.request_due(now) {
            self.send_arp(true, [0xff; 6], self.neigh.peer_ip);
        }
        let Some(peer_mac) = self.neigh.peer_mac() else {
            self.flush();
            return false;
        };
        let mut budget = TX_BUDGET;
        let n = self.flows.len();
        // Round robin: the connection after the one that used up the budget goes first next
        // time, so the first ones in the table cannot take every pass.
        let start = self.next_tx;
        for k in 0..n {
            let idx = (start + k) % n;
            let ep = WireEndpoints {
                src_mac: self.neigh.our_mac,
                dst_mac: peer_mac,
                src_ip: self.local_ip,
                dst_ip: *self.remote.ip(),
                src_port: self.flows[idx].local_port,
                dst_port: self.remote.port(),
            };
            let (port, tx, stats) = (&self.port, &mut self.tx, &mut self.stats);
            let left = &mut budget;
            self.flows[idx].conn.poll_transmit(now, &mut |seg| {
                if *left == 0 {
                    return false;
                }
                if tx.len() >= TX_FLUSH {
                    stats.frames_out += port.tx(tx) as u64;
                    if tx.len() >= TX_FLUSH {
                        // The device's ring is full: what is queued waits for the next pass,
                        // and the connection keeps the segment for later.
                        stats.tx_ring_full += 1;
                        return false;
                    }
                }
                let Some(mut frame) = port.alloc(MAX_FRAME) else {
                    stats.no_mbuf += 1;
                    return false;
                };
                match wire::build_tcp(frame.buf(), &ep, seg, |payload| fill_pattern(seg.stream_offset, payload)) {
                    Ok(n) => {
                        frame.finish(n, tx);
                        *left -= 1;
                        true
                    }
                    Err(e) => {
                        warn!(error = %e, "building a segment failed");
                        false
                    }
                }
            });
            if budget == 0 {
                self.next_tx = (idx + 1) % n;
                break;
            }
        }
        let sent = TX_BUDGET - budget;
        self.flush();
        sent > 0
    }

    fn flush(&mut self) {
        self.stats.frames_out += self.port.tx(&mut self.tx) as u64;
    }

    fn send_arp(&mut self, request: bool, target_mac: [u8; 6], target_ip: std::net::Ipv4Addr) {
        let Some(mut frame) = self.port.alloc(64) else {
            self.stats.no_mbuf += 1;
            return;
        };
        let mac = self.neigh.our_mac;
        let dst = if request { [0; 6] } else { target_mac };
        match wire::build_arp(frame.buf(), request, mac, self.local_ip, dst, target_ip) {
            Ok(n) => frame.finish(n, &mut self.tx),
            Err(e) => warn!(error = %e, "building an ARP packet failed"),
        }
    }

    /// Starts the connection's libccp connection (CREATE to the agent).
    fn connect(&mut self, idx: usize) -> bool {
        let (Some(dp), Some(shared)) = (self.dp, self.shared.as_ref()) else { return false };
        let local = SocketAddrV4::new(self.local_ip, self.flows[idx].local_port);
        let flow = &mut self.flows[idx];
        if flow.ccp.is_some() || flow.conn.state() != State::Established {
            return true;
        }
        let info = flow.flow_info(local, self.remote, self.cong_alg.as_deref());
        match Connection::start(dp, ccp::Commanded::default(), info) {
            Ok(c) => {
                flow.sid = shared.take_create_sid().unwrap_or(0);
                self.by_sid.insert(flow.sid, idx);
                flow.ccp = Some(c);
                flow.waiting = false;
                debug!(port = flow.local_port, sid = flow.sid, cwnd = flow.conn.cwnd_bytes(), "libccp connection started");
                true
            }
            Err(e) => {
                if !flow.waiting {
                    self.stats.table_full += 1;
                    warn!(port = flow.local_port, error = %describe(&e), "libccp has no free connection: the connection stays on the fallback");
                }
                flow.waiting = true;
                false
            }
        }
    }

    /// Whether an agent steers the connections.
    fn has_agent(&self) -> bool {
        self.shared.as_ref().is_some_and(|s| s.agent().is_some())
    }

    /// Reads the agent's socket, and notices an agent whose socket went away under a send.
    fn serve_agent(&mut self) {
        self.read_agent();
        if let Some(shared) = self.shared.clone().filter(|s| s.take_agent_lost()) {
            shared.lose_agent(self, "a message found its socket closed");
        }
    }

    /// Hands every datagram from the agent to libccp, message by message, once checked; a
    /// command ends the wait of the report it answers.
    fn read_agent(&mut self) {
        let (Some(dp), Some(shared)) = (self.dp, self.shared.clone()) else { return };
        let (by_sid, flows, latencies) = (&self.by_sid, &mut self.flows, &mut self.stats.report_to_command_us);
        let got = ccp::read_agent(&shared, dp, &mut self.recv_buf, &mut self.msg_buf, |kind, sid| {
            if kind == "UPDATE_FIELDS" {
                if let Some(t) = by_sid.get(&sid).and_then(|&i| flows.get_mut(i)).and_then(|f| f.report_at.take()) {
                    latencies.push(t.elapsed().as_micros() as u64);
                }
            }
        });
        self.stats.from_agent += got.messages;
        self.stats.rejected += got.rejected;
    }

    fn tick(&mut self, now: Instant) {
        let Some(shared) = self.shared.clone() else { return };
        let (datapath_id, silence) = (self.datapath_id, self.silence_timeout);
        shared.follow_agent(self, datapath_id, now, 2 * TICK, silence);
        if self.has_agent() {
            for idx in 0..self.flows.len() {
                if self.flows[idx].waiting && !self.connect(idx) {
                    break;
                }
            }
        }
    }
}

impl AgentPresence for Sender<'_> {
    fn agent_gone(&mut self, why: &str) {
        for f in &mut self.flows {
            f.hand_to_fallback();
        }
        self.by_sid.clear();
        if let Some(s) = &self.shared {
            warn!(agent = %s.chan.agent_path().display(), "the CCP agent is gone ({why}): connections continue on the fallback until an agent returns");
        }
    }

    fn agent_back(&mut self) {
        let Some(shared) = self.shared.clone() else { return };
        info!(agent = %shared.chan.agent_path().display(), "a CCP agent is there: announcing the connections");
        for idx in 0..self.flows.len() {
            if self.flows[idx].conn.state() == State::Established && !self.connect(idx) {
                break;
            }
        }
    }
}

/// 32 bits from the kernel's random source (the clock and pid if it fails, which it does not on
/// Linux ≥ 3.17 once the pool is initialised).
fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom(2) writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 4 {
        u32::from_ne_bytes(b)
    } else {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        t ^ std::process::id().wrapping_mul(0x9E37_79B9)
    }
}

pub fn fmt_mac(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}
