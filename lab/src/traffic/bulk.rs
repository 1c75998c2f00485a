//! Backlogged TCP: a receiver that counts what it gets and a sender that writes as fast as its
//! congestion control allows, from its start time until its stop time. The sender's socket is
//! published to the sampler for `TCP_INFO` (cwnd, RTT, delivery rate) every sample interval.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddrV4, TcpListener};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{lock, sock, Clock, FlowSetup, FlowState, FlowThreads, PlanKind};
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
    let PlanKind::Bulk { cc, receiver_cc } = flow.plan.kind.clone() else {
        return Err(Error::Run(format!("flow {} is not a bulk TCP flow", flow.plan.label)));
    };
    let addr = flow.addr;
    let listener = netns::run_in(&flow.ends.receiver_ns, move || sock::tcp_listen(addr, receiver_cc.as_deref()))?;
    listener.set_nonblocking(true).map_err(|e| Error::io("set_nonblocking", e))?;
    let (rs, rc) = (flow.state.clone(), flow.clock.clone());
    let receiver = flow.spawn_receiver(move || receive(listener, &rs, &rc))?;
    let (start, stop, state, clock) = (flow.plan.start, flow.plan.stop, flow.state.clone(), flow.clock.clone());
    let sender = flow.spawn_sender("snd", move || {
        send(addr, &cc, start, stop, &state, &clock);
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
            Ok(0) => break,
            Ok(n) => {
                state.rx_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

fn send(addr: SocketAddrV4, cc: &str, start: Duration, stop: Duration, state: &FlowState, clock: &Clock) {
    if !clock.sleep_until(start) {
        return;
    }
    let stream = match sock::tcp_connect(addr, Some(cc), CONNECT_TIMEOUT) {
        Ok(s) => s,
        Err(e) => {
            state.fail(e.to_string());
            return;
        }
    };
    if let Err(e) = stream
        .set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())
        .and_then(|_| sock::abort_on_close(&stream).map_err(|e| e.to_string()))
    {
        state.fail(format!("sender socket: {e}"));
        return;
    }
    *lock(&state.sender) = stream.try_clone().ok();
    let chunk = vec![0x5au8; WRITE_CHUNK];
    let mut writer = &stream;
    while !clock.past(stop) {
        match writer.write(&chunk) {
            Ok(n) => {
                state.tx_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => {
                if !clock.stopped() {
                    state.fail(format!("sending: {e}"));
                }
                return;
            }
        }
    }
    // The FIN ends the receiver's loop; the last close (with the sampler's copy) sends a RST.
    let _ = stream.shutdown(std::net::Shutdown::Write);
}
