//! The traffic tools through a real emulated link: CBR and Poisson UDP rate accuracy, a bulk
//! flow born with the chosen congestion control (sender and receiver), Poisson TCP flows that
//! complete, and a flow whose congestion control does not exist failing with a clear error.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use ccp_lab::traffic::{lock, sock, Endpoints, FlowPlan, PlanKind, Role, Traffic};
use ccp_qdisc::Limit;
use ccp_router::{Emulator, RouterConfig, TopologyConfig};

fn emulator(rate_mbps: f64) -> Emulator {
    let prefix = ccp_lab::netns::unique_prefix();
    Emulator::start(TopologyConfig::new(&prefix), RouterConfig::fixed(rate_mbps * 1e6, 10_000_000, Limit::Packets(200))).unwrap()
}

fn ends(emu: &Emulator) -> Endpoints {
    let t = emu.topology();
    Endpoints {
        sender_ns: t.sender_ns(),
        receiver_ns: t.receiver_ns(),
        receiver_addr: t.config().receiver_addr,
        work_dir: std::env::temp_dir(),
    }
}

fn plan(label: &str, kind: PlanKind, secs: f64) -> FlowPlan {
    FlowPlan { label: label.into(), role: Role::Cross, kind, start: Duration::ZERO, stop: Duration::from_secs_f64(secs) }
}

#[test]
fn udp_rates_are_accurate() {
    if !common::can_run("udp_rates_are_accurate") {
        return;
    }
    let emu = emulator(100.0);
    let plans = vec![
        plan("cbr", PlanKind::Udp { rate_bps: 10e6, packet_bytes: 1500, poisson_seed: None, on_off: None }, 3.0),
        plan("poisson", PlanKind::Udp { rate_bps: 5e6, packet_bytes: 1000, poisson_seed: Some(3), on_off: None }, 3.0),
    ];
    let mut t = Traffic::start(plans, &ends(&emu)).unwrap();
    std::thread::sleep(Duration::from_millis(3300));
    t.stop().unwrap();
    assert_eq!(t.first_error(), None);
    let mbps = |i: usize| t.states[i].rx_bytes.load(Ordering::Relaxed) as f64 * 8.0 / 3.0 / 1e6;
    let sent = |i: usize| t.states[i].tx_bytes.load(Ordering::Relaxed) as f64 * 8.0 / 3.0 / 1e6;
    eprintln!("cbr: sent {:.3} received {:.3} Mbit/s; poisson: sent {:.3} received {:.3}", sent(0), mbps(0), sent(1), mbps(1));
    assert!((mbps(0) - 10.0).abs() < 0.3, "CBR received {} Mbit/s, wanted 10 ± 3 %", mbps(0));
    assert!((sent(0) - 10.0).abs() < 0.2, "CBR sent {} Mbit/s", sent(0));
    assert!((mbps(1) - 5.0).abs() < 0.5, "Poisson received {} Mbit/s, wanted 5 ± 10 %", mbps(1));
    assert_eq!(t.states[0].send_failures.load(Ordering::Relaxed), 0);
    let summary = emu.stop().unwrap();
    assert_eq!(summary.down.counts.dropped_buffer, 0);
}

#[test]
fn bulk_flow_is_born_with_its_congestion_control() {
    if !common::can_run("bulk_flow_is_born_with_its_congestion_control") {
        return;
    }
    let emu = emulator(20.0);
    let plans = vec![plan(
        "reno",
        PlanKind::Bulk { cc: "reno".into(), receiver_cc: Some("cubic".into()), bytes: None, quic: None },
        10.0,
    )];
    let mut t = Traffic::start(plans, &ends(&emu)).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let s = t.states[0].clone();
    let sender_cc = lock(&s.sender).as_ref().map(|x| sock::congestion_control(x).unwrap());
    let receiver_cc = lock(&s.receiver).as_ref().map(|x| sock::congestion_control(x).unwrap());
    let info = t.sample()[0].tcp.expect("TCP_INFO of the sender");
    t.stop().unwrap();
    assert_eq!(sender_cc.as_deref(), Some("reno"));
    assert_eq!(receiver_cc.as_deref(), Some("cubic"), "accepted sockets inherit the listener's congestion control");
    assert!(info.cwnd_pkts > 0 && info.srtt_us >= 19_000, "{info:?}");
    let rx = s.rx_bytes.load(Ordering::Relaxed) as f64;
    assert!(rx * 8.0 / 1.5 > 10e6, "a 20 Mbit/s link should carry more than 10 Mbit/s after 1.5 s, got {}", rx * 8.0 / 1.5);
}

#[test]
fn unknown_congestion_control_fails_the_flow() {
    if !common::can_run("unknown_congestion_control_fails_the_flow") {
        return;
    }
    let emu = emulator(10.0);
    let plans = vec![plan("bad", PlanKind::Bulk { cc: "nosuchcc".into(), receiver_cc: None, bytes: None, quic: None }, 2.0)];
    let mut t = Traffic::start(plans, &ends(&emu)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let e = t.first_error().expect("the flow must fail");
    t.stop().unwrap();
    assert!(e.contains("flow bad") && e.contains("\"nosuchcc\"") && e.contains("registered: "), "{e}");
}

#[test]
fn poisson_tcp_flows_complete() {
    if !common::can_run("poisson_tcp_flows_complete") {
        return;
    }
    let emu = emulator(20.0);
    let kind = PlanKind::PoissonTcp {
        load_bps: 4e6,
        mean_size_bytes: 20_000,
        fixed_size: false,
        cc: "cubic".into(),
        max_concurrent: 64,
        seed: 9,
    };
    let mut t = Traffic::start(vec![plan("web", kind, 2.5)], &ends(&emu)).unwrap();
    std::thread::sleep(Duration::from_millis(3200));
    t.stop().unwrap();
    assert_eq!(t.first_error(), None);
    let flows = lock(&t.states[0].short_flows).clone();
    let done = flows.iter().filter(|f| f.completed).count();
    // λ = 4 Mbit/s / 160 kbit = 25 flows/s over 2.5 s: about 62.
    assert!((30..=100).contains(&flows.len()), "{} flows", flows.len());
    assert!(done * 10 >= flows.len() * 9, "{done} of {} completed", flows.len());
    let rx = t.states[0].rx_bytes.load(Ordering::Relaxed);
    let sizes: u64 = flows.iter().filter(|f| f.completed).map(|f| f.size_bytes).sum();
    assert!(rx >= sizes, "the receiver got {rx} bytes, completed flows hold {sizes}");
}

// On/off CBR sends at its rate while on and nothing while off: 10 Mbit/s for 300 ms of every
// 500 ms gives 6 Mbit/s on average, and a 100 ms sample late in an off-period sees no bytes.
#[test]
fn on_off_cbr_pauses_while_off() {
    if !common::can_run("on_off_cbr_pauses_while_off") {
        return;
    }
    let emu = emulator(100.0);
    let on_off = Some((Duration::from_millis(300), Duration::from_millis(200)));
    let plans = vec![plan("onoff", PlanKind::Udp { rate_bps: 10e6, packet_bytes: 1500, poisson_seed: None, on_off }, 3.0)];
    let mut t = Traffic::start(plans, &ends(&emu)).unwrap();
    let tx = || t.states[0].tx_bytes.load(Ordering::Relaxed);
    // Periods start when the sender does (≈ now): sample (380, 480] ms of the first period.
    std::thread::sleep(Duration::from_millis(380));
    let off_start = tx();
    std::thread::sleep(Duration::from_millis(100));
    let off_bytes = tx() - off_start;
    std::thread::sleep(Duration::from_millis(2820));
    let total = tx();
    t.stop().unwrap();
    assert_eq!(t.first_error(), None);
    assert!(off_bytes <= 3000, "{off_bytes} bytes sent while off");
    // 3 s = 6 on-periods of 300 ms at 10 Mbit/s: 2.25 MB.
    let mean_bps = total as f64 * 8.0 / 3.0;
    assert!((mean_bps / 6e6 - 1.0).abs() < 0.1, "mean {mean_bps} bit/s, want 6e6");
}
