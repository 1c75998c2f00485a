//! Backlogged TCP: a receiver that counts what it gets and a sender that writes as fast as its
//! congestion control allows, from its start time until its stop time. The sender's socket is
//! published to the sampler for `TCP_INFO` (cwnd, RTT, delivery rate) every sample interval.
//!
//! With a size (`bytes`), the sender writes that many bytes, half-closes and waits for the
//! receiver's close (which the receiver sends when it has read everything): the flow's completion
//! time, from before its connect to that close as for Poisson TCP flows, is recorded as a
//! [`ShortFlow`] (cut off at the stop time or the end of the run: `completed = false`).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddrV4, TcpListener};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{lock, sock, Clock, FlowSetup, FlowState, FlowThreads, PlanKind, ShortFlow};
use crate::error::{Error, Result};
use crate::netns;

/// Bytes per write() of the sender.
const WRITE_CHUNK: usize = 64 * 1024;
/// Bytes per read() of the receiver.
const READ_CHUNK: usize = 256 * 1024;
/// How long a connect may take (the path's RTT is at most a few hundred ms).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Accept polling period while waiting for the sender.
const ACCEPT_POLL: Duration = Duration::from_millis(5);
/// Blocked reads and writes wake this often to check the stop flag.
const IO_TIMEOUT: Duration = Duration::from_millis(100);

/// Binds the receiver (now, in the receiver's namespace) and starts both threads.
pub fn start(flow: &FlowSetup) -> Result<FlowThreads> {
    let PlanKind::Bulk { cc, receiver_cc, bytes, quic: None } = flow.plan.kind.clone() else {
        return Err(Error::Run(format!("flow {} is not a bulk TCP flow", flow.plan.label)));
    };
    let addr = flow.addr;
    let listener = netns::run_in(&flow.ends.receiver_ns, move || sock::tcp_listen(addr, receiver_cc.as_deref()))?;
    listener.set_nonblocking(true).map_err(|e| Error::io("set_nonblocking", e))?;
    let (rs, rc) = (flow.state.clone(), flow.clock.clone());
    let receiver = flow.spawn_receiver(move || receive(listener, &rs, &rc))?;
    let (start, stop, state, clock) = (flow.plan.start, flow.plan.stop, flow.state.clone(), flow.clock.clone());
    let sender = flow.spawn_sender("snd", move || {
        send(addr, &cc, (start, stop), bytes, &state, &clock);
        Ok(())
    })?;
    Ok(vec![receiver, sender])
}

fn receive(listener: TcpListener, state: &FlowState, clock: &Clock) -> Result<()> {
    let mut conn = loop {
        if clock.stopped() {
            return Ok(());
        }
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_POLL),
            Err(e) => {
                state.fail(format!("accepting: {e}"));
                return Ok(());
            }
        }
    };
    let setup = conn.set_nonblocking(false).and_then(|_| conn.set_read_timeout(Some(IO_TIMEOUT)));
    if let Err(e) = setup {
        state.fail(format!("receiver socket: {e}"));
        return Ok(());
    }
    *lock(&state.receiver) = conn.try_clone().ok();
    let mut buf = vec![0u8; READ_CHUNK];
    while !clock.stopped() {
        match conn.read(&mut buf) {
            Ok(0) => {
                // The sender half-closed: answer with our FIN now (the sampler's copy of the
                // socket would otherwise keep it open), which completes a sized flow.
                let _ = conn.shutdown(std::net::Shutdown::Write);
                break;
            }
            Ok(n) => {
                state.rx_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

fn send(addr: SocketAddrV4, cc: &str, (start, stop): (Duration, Duration), size: Option<u64>, state: &FlowState, clock: &Clock) {
    if !clock.sleep_until(start) {
        return;
    }
    let began = Instant::now();
    let start_s = clock.elapsed_s();
    let record = |completed: bool| {
        if let Some(size_bytes) = size {
            let f = ShortFlow { start_s, size_bytes, duration_s: began.elapsed().as_secs_f64(), completed };
            lock(&state.short_flows).push(f);
        }
    };
    let stream = match sock::tcp_connect(addr, Some(cc), CONNECT_TIMEOUT) {
        Ok(s) => s,
        Err(e) => {
            state.fail(e.to_string());
            return;
        }
    };
    if let Err(e) = stream
        .set_write_timeout(Some(IO_TIMEOUT))
        .and_then(|()| stream.set_read_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| e.to_string())
        .and_then(|_| sock::abort_on_close(&stream).map_err(|e| e.to_string()))
    {
        state.fail(format!("sender socket: {e}"));
        return;
    }
    *lock(&state.sender) = stream.try_clone().ok();
    let chunk = vec![0x5au8; WRITE_CHUNK];
    let mut writer = &stream;
    let mut left = size.unwrap_or(u64::MAX);
    while left > 0 && !clock.past(stop) {
        let n = left.min(WRITE_CHUNK as u64) as usize;
        match writer.write(&chunk[..n]) {
            Ok(n) => {
                state.tx_bytes.fetch_add(n as u64, Ordering::Relaxed);
                left -= n as u64;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => {
                if !clock.stopped() {
                    state.fail(format!("sending: {e}"));
                }
                record(false);
                return;
            }
        }
    }
    // The FIN ends the receiver's loop; the last close (with the sampler's copy) sends a RST.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if size.is_none() {
        return;
    }
    if left > 0 {
        record(false);
        return;
    }
    // A sized flow is complete when the receiver, having read every byte, closes its side.
    let mut reader = &stream;
    let mut byte = [0u8; 1];
    loop {
        match reader.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                if clock.past(stop) {
                    record(false);
                    return;
                }
            }
            Err(_) => {
                record(false);
                return;
            }
        }
    }
    record(true);
}
