//! The soak's kernel flows: a steady population of TCP connections over the loopback of the
//! soak's own network namespace, on the agent's congestion control, each writing one segment
//! every `every` and replaced by a new connection after `life` (the first lives spread over one
//! life, so as many close and open every second). One thread does everything: it opens, closes,
//! writes, accepts and reads; the data rate is so low that reading every half second never fills
//! a receive buffer.
//!
//! While the agent is down its congestion control is not registered: a new connection cannot
//! select it (ENOENT), so opening waits for the next tick and the population dips until the
//! agent is back. Flows already open keep running on the orphaned program's fallback.

use std::collections::{BTreeSet, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccp_bench_harness::tcp::connect;
use ccp_ebpf::netns::Netns;
use serde::Serialize;

/// How often the thread wakes.
const TICK: Duration = Duration::from_millis(20);
/// How often the receiving ends are read.
const READ_EVERY: Duration = Duration::from_millis(500);
/// Connections opened per tick at most: the listener's backlog must hold them until they are
/// accepted, later in the tick (a full backlog leaves `connect` waiting for SYN retransmits).
const OPEN_PER_TICK: usize = 64;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub flows: usize,
    pub life: Duration,
    pub every: Duration,
    pub chunk_bytes: usize,
    pub cc: String,
}

/// What the flows did so far.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub open: usize,
    pub opened: u64,
    pub closed: u64,
    /// Opens refused because the congestion control was not registered (the agent was down).
    pub refused_unregistered: u64,
    pub open_errors: u64,
    pub bytes_written: u64,
    /// Writes that found the send buffer full.
    pub writes_blocked: u64,
    pub last_error: Option<String>,
    /// Local ports of the connections open now.
    #[serde(skip)]
    pub live_ports: BTreeSet<u16>,
}

struct Conn {
    stream: TcpStream,
    port: u16,
    expires: Instant,
    next_write: Instant,
}

/// The running flows; stopped (every connection closed) by `stop` or on drop.
pub struct KernelFlows {
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl KernelFlows {
    pub fn start(ns: Netns, plan: Plan) -> KernelFlows {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let (s, t) = (Arc::clone(&stop), Arc::clone(&tally));
        let thread = std::thread::spawn(move || ns.run(|| run(&plan, &s, &t))?);
        KernelFlows { stop, tally, thread: Some(thread) }
    }

    pub fn tally(&self) -> Tally {
        self.tally.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Closes every connection; the thread's error, if it failed.
    pub fn stop(mut self) -> anyhow::Result<Tally> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().map_err(|_| anyhow::anyhow!("the kernel flows' thread panicked"))??;
        }
        Ok(self.tally())
    }

    /// Whether the thread still runs (it ends only on an error before `stop`).
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for KernelFlows {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Makes the thread's tally (with `open` connections) what `KernelFlows::tally` returns.
fn publish(tally: &Mutex<Tally>, t: &mut Tally, open: usize) {
    t.open = open;
    if let Ok(mut shared) = tally.lock() {
        *shared = t.clone();
    }
}

fn run(plan: &Plan, stop: &AtomicBool, tally: &Mutex<Tally>) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").context("listen")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let n = plan.flows;
    let t0 = Instant::now();
    let mut conns: VecDeque<Conn> = VecDeque::with_capacity(n);
    let mut accepted: Vec<TcpStream> = Vec::with_capacity(n);
    let mut buf = vec![0u8; 1 << 16];
    let data = vec![1u8; plan.chunk_bytes];
    let mut t = Tally::default();
    let mut last_read = t0;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        // Expiries only grow (the first lives end within one life, later ones a life after
        // their start), so the oldest is always in front.
        let mut expired = Vec::new();
        while conns.front().is_some_and(|c| c.expires <= now) {
            if let Some(c) = conns.pop_front() {
                t.live_ports.remove(&c.port);
                expired.push(c);
            }
            t.closed += 1;
        }
        if !expired.is_empty() {
            // Published before the sockets close: a port a census sees live was not closing yet
            // (closing one while it still counted as live would judge it frozen, since the
            // kernel's release clears its control entry before its flow_info).
            publish(tally, &mut t, conns.len());
            drop(expired);
        }
        for _ in 0..n.saturating_sub(conns.len()).min(OPEN_PER_TICK) {
            match connect(addr, &plan.cc) {
                Ok(stream) => {
                    stream.set_nonblocking(true)?;
                    let port = stream.local_addr()?.port();
                    t.live_ports.insert(port);
                    let k = t.opened;
                    t.opened += 1;
                    // The first population's lives end spread over one life; every later one a
                    // whole life after it opened.
                    let life = if k < n as u64 { plan.life.mul_f64((k + 1) as f64 / n as f64) } else { plan.life };
                    let offset = plan.every.mul_f64((k % 16) as f64 / 16.0);
                    conns.push_back(Conn { stream, port, expires: now + life, next_write: now + offset });
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    t.refused_unregistered += 1;
                    break;
                }
                Err(e) => {
                    t.open_errors += 1;
                    t.last_error = Some(format!("connect: {e}"));
                    break;
                }
            }
        }
        loop {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(true)?;
                    accepted.push(s);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("accept"),
            }
        }
        for c in conns.iter_mut().filter(|c| c.next_write <= now) {
            match c.stream.write(&data) {
                Ok(w) => t.bytes_written += w as u64,
                Err(e) if e.kind() == ErrorKind::WouldBlock => t.writes_blocked += 1,
                Err(e) => t.last_error = Some(format!("write: {e}")),
            }
            c.next_write += plan.every;
        }
        if now.duration_since(last_read) >= READ_EVERY {
            last_read = now;
            // A receiving end whose peer closed reads 0 and goes.
            accepted.retain_mut(|s| loop {
                match s.read(&mut buf) {
                    Ok(0) => break false,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
                    Err(_) => break false,
                }
            });
        }
        publish(tally, &mut t, conns.len());
        if let Some(wait) = (now + TICK).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}
