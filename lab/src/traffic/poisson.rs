//! Poisson TCP flows: flows of random size arriving at rate λ = load / mean size (Nimbus's
//! "x Mbit/s Poisson" cross traffic, ABC's short non-ABC flows), drawn from a seeded generator
//! ([`ccp_qdisc::rng`], as Poisson UDP's gaps are).
//!
//! Each arrival is a new connection with the configured congestion control: it writes its bytes,
//! half-closes, and is complete when the receiver's close comes back (so the completion time
//! covers delivery of every byte). The receiver is one thread polling every open connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccp_qdisc::rng::{Draw, SeedableRng, SplitMix64};

use super::{lock, sock, Clock, FlowSetup, FlowState, FlowThreads, PlanKind, ShortFlow};
use crate::error::{Error, Result};
use crate::netns;

/// A flow larger than the initial window (10 segments ≈ 15 KB) lasts several RTTs and responds
/// to congestion: elastic for ground truth (specs/nimbus.md §10, the CAIDA workload's rule).
pub const ELASTIC_MIN_BYTES: u64 = 15_000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Poll period of the receiver and of blocked senders.
const POLL_MS: libc::c_int = 20;
const CHUNK: usize = 64 * 1024;

/// Starts the receiver and the arrival generator.
pub fn start(flow: &FlowSetup) -> Result<FlowThreads> {
    let PlanKind::PoissonTcp { load_bps, mean_size_bytes, fixed_size, cc, max_concurrent, seed } = flow.plan.kind.clone() else {
        return Err(Error::Run(format!("flow {} is not a Poisson TCP generator", flow.plan.label)));
    };
    let addr = flow.addr;
    let listener = netns::run_in(&flow.ends.receiver_ns, move || sock::tcp_listen(addr, None))?;
    listener.set_nonblocking(true).map_err(|e| Error::io("set_nonblocking", e))?;
    let (rs, rc) = (flow.state.clone(), flow.clock.clone());
    let receiver = flow.spawn_receiver(move || {
        receive(&listener, &rs, &rc);
        Ok(())
    })?;
    let (start, stop, state, clock) = (flow.plan.start, flow.plan.stop, flow.state.clone(), flow.clock.clone());
    let mean_gap_s = mean_size_bytes as f64 * 8.0 / load_bps;
    let generator = flow.spawn_sender("gen", move || {
        let mut rng = SplitMix64::seed_from_u64(seed);
        let active = Arc::new(AtomicU32::new(0));
        let mut workers = Vec::new();
        let mut at = start;
        loop {
            at += Duration::from_secs_f64(rng.exponential(mean_gap_s));
            if at >= stop || !clock.sleep_until(at) {
                break;
            }
            let size = if fixed_size { mean_size_bytes } else { (rng.exponential(mean_size_bytes as f64).ceil() as u64).max(1) };
            if active.load(Ordering::Relaxed) >= max_concurrent {
                state.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            active.fetch_add(1, Ordering::Relaxed);
            let (st, cl, ac, cc) = (state.clone(), clock.clone(), active.clone(), cc.clone());
            // Spawned from this thread, the worker is in the sender's namespace too.
            let spawned = std::thread::Builder::new().name("poisson-flow".into()).spawn(move || {
                one_flow(addr, &cc, size, &st, &cl);
                ac.fetch_sub(1, Ordering::Relaxed);
            });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    active.fetch_sub(1, Ordering::Relaxed);
                    state.fail(format!("spawning a flow thread: {e}"));
                    break;
                }
            }
            workers.retain(|h| !h.is_finished());
        }
        for w in workers {
            let _ = w.join();
        }
        Ok(())
    })?;
    Ok(vec![receiver, generator])
}

/// One short flow: connect, write `size` bytes, half-close, wait for the receiver's close.
fn one_flow(addr: SocketAddrV4, cc: &str, size: u64, state: &FlowState, clock: &Clock) {
    let began = Instant::now();
    let start_s = clock.elapsed_s();
    let record = |completed: bool| ShortFlow { start_s, size_bytes: size, duration_s: began.elapsed().as_secs_f64(), completed };
    let mut stream = match sock::tcp_connect(addr, Some(cc), CONNECT_TIMEOUT) {
        Ok(s) => s,
        Err(e) => {
            if !clock.stopped() {
                state.fail(e.to_string());
            }
            return;
        }
    };
    let _ = stream.set_write_timeout(Some(Duration::from_millis(POLL_MS as u64)));
    let _ = stream.set_read_timeout(Some(Duration::from_millis(POLL_MS as u64)));
    let chunk = vec![0x33u8; CHUNK];
    let mut left = size;
    while left > 0 {
        if clock.stopped() {
            lock(&state.short_flows).push(record(false));
            return;
        }
        let n = left.min(CHUNK as u64) as usize;
        match stream.write(&chunk[..n]) {
            Ok(w) => {
                left -= w as u64;
                state.tx_bytes.fetch_add(w as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => {
                lock(&state.short_flows).push(record(false));
                return;
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                if clock.stopped() {
                    lock(&state.short_flows).push(record(false));
                    return;
                }
            }
            Err(_) => break,
        }
    }
    lock(&state.short_flows).push(record(true));
}

/// Accepts every connection and reads them all from one thread with poll(2); closes each one
/// when its sender has half-closed, which completes the sender's flow.
fn receive(listener: &TcpListener, state: &FlowState, clock: &Clock) {
    let mut conns: Vec<TcpStream> = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    while !clock.stopped() {
        loop {
            match listener.accept() {
                Ok((c, _)) => {
                    if c.set_nonblocking(true).is_ok() {
                        conns.push(c);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    state.fail(format!("accepting: {e}"));
                    return;
                }
            }
        }
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .chain(conns.iter().map(|c| c.as_raw_fd()))
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: a valid array of pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_MS) };
        conns.retain_mut(|c| loop {
            match c.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    state.rx_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        });
    }
}
