//! The issue's "Done when" figures, measured with real kernel TCP through the emulator. Not part
//! of CI (they take ~1 minute and depend on the machine's load); run them on a release build:
//!
//! ```text
//! cargo test --release -p ccp-router --test figures -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Each prints one `FIGURE` line and asserts the issue's threshold.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccp_qdisc::{Limit, NANOS_PER_MS};
use ccp_router::tcp::{wire_bytes_per_segment, BulkReceiver, BulkSender};
use ccp_router::{clock, Emulator, LinkShape, RouterConfig, Side, TopologyConfig, Trace};
use common::{network_lock, Prefix};

const PORT: u16 = 5201;

/// A trace shipped in ../shared/traces, if present.
fn shipped_trace(name: &str) -> Option<Arc<Trace>> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/traces").join(name);
    Trace::load(&p).ok().map(Arc::new)
}

/// Delivered rate on a real cellular trace, saturated by a kernel Cubic flow behind a deep
/// buffer, against the trace's capacity over the same interval.
#[test]
#[ignore]
fn figure_trace_rate_accuracy() {
    require_network!();
    let _net = network_lock();
    let Some(trace) = shipped_trace("Verizon-LTE-short.down") else {
        eprintln!("SKIPPED: ../shared/traces/Verizon-LTE-short.down not present");
        return;
    };
    let prefix = Prefix::new();
    let mut cfg = RouterConfig::fixed(1.0, 20 * NANOS_PER_MS, Limit::Packets(1000));
    cfg.down.shape = LinkShape::Trace(Arc::clone(&trace));
    let emu = Emulator::start(TopologyConfig::new(&prefix.name), cfg).unwrap();
    let receiver = BulkReceiver::listen_with_rcvbuf(emu.topology(), PORT, Some(8 << 20)).unwrap();
    let sender = BulkSender::connect(emu.topology(), PORT, Some("cubic")).unwrap();
    std::thread::sleep(Duration::from_secs(5));
    let at = |emu: &Emulator| clock::now() - emu.start_time();
    let (b0, e0) = (receiver.bytes(), at(&emu));
    std::thread::sleep(Duration::from_secs(30));
    let (b1, e1) = (receiver.bytes(), at(&emu));
    let info = sender.info().unwrap();
    drop(sender);
    drop(receiver);
    let summary = emu.stop().unwrap();
    // The receiver sees data one propagation delay after the link delivers it.
    let lag = 20 * NANOS_PER_MS;
    let capacity = (trace.capacity_bytes(e1 - lag) - trace.capacity_bytes(e0 - lag)) as f64;
    let delivered = (b1 - b0) as f64 * f64::from(wire_bytes_per_segment(&info)) / f64::from(info.mss);
    let ratio = delivered / capacity;
    eprintln!("{}", summary.to_text());
    println!(
        "FIGURE trace rate: Verizon-LTE-short.down, 30 s saturated by kernel cubic: delivered {:.3} Mbit/s vs capacity {:.3} Mbit/s = {:.2} %",
        delivered * 8.0 / ((e1 - e0) as f64 / 1e9) / 1e6,
        capacity * 8.0 / ((e1 - e0) as f64 / 1e9) / 1e6,
        ratio * 100.0
    );
    assert!((ratio - 1.0).abs() <= 0.02, "delivered/capacity = {ratio}");
}

/// Added-delay error: 500 TCP round trips on an idle 20 ms-RTT path (external view), and the
/// router's own write lateness under a saturating flow.
#[test]
#[ignore]
fn figure_added_delay_error() {
    require_network!();
    let _net = network_lock();
    let prefix = Prefix::new();
    let one_way = 10 * NANOS_PER_MS;
    let emu =
        Emulator::start(TopologyConfig::new(&prefix.name), RouterConfig::fixed(100e6, one_way, Limit::Packets(1000))).unwrap();
    let topo = emu.topology();
    let addr = SocketAddr::from((topo.config().receiver_addr, PORT + 1));
    let listener = topo.run_in(Side::Receiver, move || TcpListener::bind(addr)).unwrap().unwrap();
    let echo = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_nodelay(true).unwrap();
        let mut b = [0u8; 1];
        while c.read_exact(&mut b).is_ok() && c.write_all(&b).is_ok() {}
    });
    let mut client = topo.run_in(Side::Sender, move || TcpStream::connect(addr)).unwrap().unwrap();
    client.set_nodelay(true).unwrap();
    let mut errors_us: Vec<f64> = (0..500)
        .map(|_| {
            let t = Instant::now();
            client.write_all(&[1]).unwrap();
            let mut b = [0u8; 1];
            client.read_exact(&mut b).unwrap();
            let e = (t.elapsed().as_nanos() as f64 - 2.0 * one_way as f64) / 2.0 / 1000.0;
            std::thread::sleep(Duration::from_millis(3));
            e
        })
        .collect();
    drop(client);
    echo.join().unwrap();
    errors_us.sort_by(f64::total_cmp);
    let pct = |p: f64| errors_us[((errors_us.len() as f64 * p) as usize).min(errors_us.len() - 1)];
    println!(
        "FIGURE added delay, idle path, one way from 500 TCP round trips: p50 {:.0} µs, p95 {:.0} µs, p99 {:.0} µs",
        pct(0.5),
        pct(0.95),
        pct(0.99)
    );
    let idle_p50 = pct(0.5);
    // Now load the same path with a bulk flow and read the router's own lateness.
    let receiver = BulkReceiver::listen(topo, PORT).unwrap();
    let sender = BulkSender::connect(topo, PORT, Some("cubic")).unwrap();
    std::thread::sleep(Duration::from_secs(10));
    drop(sender);
    drop(receiver);
    let summary = emu.stop().unwrap();
    let e = summary.down.delay_error_ms.unwrap();
    println!(
        "FIGURE added delay, 100 Mbit/s saturated by kernel cubic, router write lateness over {} packets: p50 {:.3} ms, p95 {:.3} ms, p99 {:.3} ms",
        e.count, e.p50, e.p95, e.p99
    );
    assert!(idle_p50 <= 500.0 && e.p50 <= 0.5);
}

/// Forwarding at a fixed 500 Mbit/s with kernel cubic, and the most an unlimited link carries.
#[test]
#[ignore]
fn figure_forwarding_rate() {
    require_network!();
    let _net = network_lock();
    for rate in [Some(500e6), None] {
        let prefix = Prefix::new();
        let mut cfg = RouterConfig::fixed(rate.unwrap_or(1.0), 5 * NANOS_PER_MS, Limit::Packets(2000));
        if rate.is_none() {
            cfg.down.shape = LinkShape::Unlimited;
        }
        let emu = Emulator::start(TopologyConfig::new(&prefix.name), cfg).unwrap();
        let receiver = BulkReceiver::listen(emu.topology(), PORT).unwrap();
        let sender = BulkSender::connect(emu.topology(), PORT, Some("cubic")).unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let (b0, t0) = (receiver.bytes(), Instant::now());
        std::thread::sleep(Duration::from_secs(8));
        let (b1, t1) = (receiver.bytes(), Instant::now());
        let info = sender.info().unwrap();
        drop(sender);
        drop(receiver);
        let summary = emu.stop().unwrap();
        let wire =
            (b1 - b0) as f64 * 8.0 / (t1 - t0).as_secs_f64() * f64::from(wire_bytes_per_segment(&info)) / f64::from(info.mss);
        let e = summary.down.delay_error_ms.unwrap();
        match rate {
            Some(r) => {
                println!(
                    "FIGURE forwarding at fixed {:.0} Mbit/s, kernel cubic, 8 s: {:.1} Mbit/s on the wire ({:.1} %), delay error p50 {:.3} ms p99 {:.3} ms",
                    r / 1e6,
                    wire / 1e6,
                    wire / r * 100.0,
                    e.p50,
                    e.p99
                );
                assert!(wire >= 0.98 * r, "{wire}");
            }
            None => println!(
                "FIGURE forwarding, unlimited link, kernel cubic, 8 s: {:.1} Mbit/s on the wire, delay error p50 {:.3} ms p99 {:.3} ms",
                wire / 1e6,
                e.p50,
                e.p99
            ),
        }
    }
}
