//! Inelastic UDP: datagrams at a mean rate, evenly spaced (constant bit rate) or with
//! exponential gaps (Poisson arrivals), and a sink that counts them.
//!
//! The sender keeps an absolute schedule (send time n = start + Σ gaps) rather than sleeping a
//! gap after each send, so oversleeping (HZ = 250, a busy core) delays packets but never lowers
//! the long-run rate: late packets go out back to back. A stall longer than [`MAX_LAG`] is
//! forgiven instead of being repaid as a burst that would not be CBR any more.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ccp_qdisc::rng::{Draw, SeedableRng, SplitMix64};

use super::{Clock, FlowSetup, FlowState, FlowThreads, PlanKind, UDP_OVERHEAD_BYTES};
use crate::error::{Error, Result};
use crate::netns;

/// Longest the schedule may fall behind before the backlog is dropped.
const MAX_LAG: Duration = Duration::from_millis(50);
/// Longest sleep between checks of the stop flag.
const MAX_SLEEP: Duration = Duration::from_millis(20);
/// Receive timeout of the sink (to check the stop flag).
const SINK_TIMEOUT: Duration = Duration::from_millis(100);

/// Binds the sink in the receiver's namespace and starts the sender in the sender's.
pub fn start(flow: &FlowSetup) -> Result<FlowThreads> {
    let PlanKind::Udp { rate_bps, packet_bytes, poisson_seed, on_off } = flow.plan.kind.clone() else {
        return Err(Error::Run(format!("flow {} is not a UDP flow", flow.plan.label)));
    };
    let addr = flow.addr;
    let sink = netns::run_in(&flow.ends.receiver_ns, move || {
        UdpSocket::bind(addr).map_err(|e| Error::io(format!("binding UDP {addr} in the receiver namespace"), e))
    })?;
    sink.set_read_timeout(Some(SINK_TIMEOUT)).map_err(|e| Error::io("UDP read timeout", e))?;
    let (ss, sc) = (flow.state.clone(), flow.clock.clone());
    let receiver = flow.spawn_receiver(move || {
        drain(&sink, &ss, &sc);
        Ok(())
    })?;
    let payload = (packet_bytes - UDP_OVERHEAD_BYTES) as usize;
    let mean_gap = f64::from(packet_bytes) * 8.0 / rate_bps;
    let (start, stop, state, clock) = (flow.plan.start, flow.plan.stop, flow.state.clone(), flow.clock.clone());
    let sender = flow.spawn_sender("snd", move || {
        let socket = UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect(addr).map(|_| s))
            .map_err(|e| Error::io(format!("UDP socket to {addr}"), e))?;
        let mut gaps = Gaps { mean_s: mean_gap, rng: poisson_seed.map(SplitMix64::seed_from_u64) };
        send(&socket, payload, &mut gaps, on_off, start, stop, &state, &clock);
        Ok(())
    })?;
    Ok(vec![receiver, sender])
}

/// Inter-departure times: constant, or exponential with a seeded generator.
struct Gaps {
    mean_s: f64,
    rng: Option<SplitMix64>,
}

impl Gaps {
    fn next(&mut self) -> Duration {
        let s = match &mut self.rng {
            Some(r) => r.exponential(self.mean_s),
            None => self.mean_s,
        };
        Duration::from_secs_f64(s)
    }
}

/// Sends until `stop` (or the clock stops): every gap, or with `on_off = (on, off)` only during
/// the first `on` of every `on + off` from `start`.
#[allow(clippy::too_many_arguments)]
fn send(
    socket: &UdpSocket,
    payload: usize,
    gaps: &mut Gaps,
    on_off: Option<(Duration, Duration)>,
    start: Duration,
    stop: Duration,
    state: &FlowState,
    clock: &Clock,
) {
    if !clock.sleep_until(start) {
        return;
    }
    let first = Instant::now();
    let buf = vec![0u8; payload];
    let wire = (payload as u32 + UDP_OVERHEAD_BYTES) as u64;
    let end = clock.t0 + stop;
    let mut next = Instant::now();
    while !clock.stopped() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if next > now {
            std::thread::sleep((next - now).min(MAX_SLEEP));
            continue;
        }
        if now - next > MAX_LAG {
            next = now;
        }
        if let Some((on, off)) = on_off {
            let period = (on + off).as_nanos().max(1);
            let phase = Duration::from_nanos(((now - first).as_nanos() % period) as u64);
            if phase >= on {
                // Off: resume at the next on-period, without a backlog to repay.
                next = now + (on + off - phase);
                continue;
            }
        }
        match socket.send(&buf) {
            Ok(_) => {
                state.tx_bytes.fetch_add(wire, Ordering::Relaxed);
            }
            Err(_) => {
                state.send_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        next += gaps.next();
    }
}

fn drain(sink: &UdpSocket, state: &FlowState, clock: &Clock) {
    let mut buf = vec![0u8; 65_536];
    while !clock.stopped() {
        match sink.recv(&mut buf) {
            Ok(n) => {
                state.rx_bytes.fetch_add(n as u64 + u64::from(UDP_OVERHEAD_BYTES), Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => {
                state.fail(format!("UDP sink: {e}"));
                return;
            }
        }
    }
}
