//! What the Gymnasium environment (`ccp_agent.env`) needs of the engine: random loss on every
//! switch-to-host link (`[switch] loss_pct`), a run it can stop, a learner's algorithm beside the
//! scenario's own, a flow's empty-queue path, and per-RTT reports before the first RTT sample
//! that count a WAN's RTT (`[cc] initial_rtt_us`).

mod common;

use std::sync::{Arc, Mutex};

use ccp_contract::{Action, Algorithm, AlgorithmFactory, FlowStart, Report};
use ccp_sim::time::PS_PER_US;
use ccp_sim::Sim;

/// One flow at 100 Mbit/s over a 2 ms round trip with a buffer too large to fill: every loss
/// is a random one.
const LOSSY_LINK: &str = r#"
duration_ms = 2000
seed = 7

[topology]
kind = "dumbbell"
senders = 2
receivers = 2
host_gbps = 1.0
host_delay_us = 10.0
bottleneck_gbps = 0.1
bottleneck_delay_us = 480.0

[switch]
buffer_bytes = 50_000_000
loss_pct = 2.0

[transport]
ecn = false

[cc]
algorithm = "cubic"
reporting = "interval"

[[workload.flows]]
src = 0
dst = 2
"#;

#[test]
fn about_loss_pct_of_the_data_packets_are_lost_and_counted() {
    let loaded = common::scenario(LOSSY_LINK);
    let (sim, r) = common::run(&loaded);
    let c = &r.counters;
    let last_hop = sim.ports.iter().find(|p| p.name == "right->h2").expect("the receiver's link");
    let sent = last_hop.stats.tx_packets;
    assert!(sent > 10_000, "{sent} packets");
    let share = c.dropped_random as f64 / sent as f64;
    // Binomial: the standard deviation of the share is 0.0014 at 10,000 packets.
    assert!((share - 0.02).abs() < 0.005, "{} of {sent} lost: {share}", c.dropped_random);
    assert_eq!(c.dropped_buffer, 0, "every loss is random");
    assert!(c.retransmits >= c.dropped_random - sim.packets_alive() as u64, "the transport repairs them");
    assert_eq!(c.injected, c.delivered + c.dropped_random + sim.packets_alive() as u64);
    let other = sim.ports.iter().filter(|p| p.name != "right->h2" && p.loss.is_some()).count();
    assert_eq!(other, 3, "every switch port towards a host loses (two per switch), none other");
}

#[test]
fn no_loss_draws_nothing_and_writes_nothing() {
    let loaded = common::scenario(&LOSSY_LINK.replace("loss_pct = 2.0", "loss_pct = 0.0"));
    let (sim, r) = common::run(&loaded);
    assert!(sim.ports.iter().all(|p| p.loss.is_none()));
    assert_eq!(r.counters.dropped_random, 0);
    let summary = serde_json::to_string(&r.counters).unwrap();
    assert!(!summary.contains("dropped_random"), "{summary}");
    assert!(!toml::to_string(&loaded.scenario).unwrap().contains("loss_pct"));
    for bad in ["100.0", "-1.0", "nan"] {
        let text = LOSSY_LINK.replace("loss_pct = 2.0", &format!("loss_pct = {bad}"));
        let e = ccp_sim::config::load_str(std::path::Path::new("t.toml"), &text, &[]).unwrap_err().to_string();
        assert!(e.contains("switch.loss_pct"), "{e}");
    }
}

#[test]
fn the_base_path_is_the_bottleneck_and_the_empty_queue_round_trip() {
    let loaded = common::scenario(LOSSY_LINK);
    let sim = Sim::new(&loaded).unwrap();
    let path = sim.base_path(0);
    assert_eq!(path.bottleneck_bps, 100_000_000);
    // 2 × (10 + 480 + 10) µs of propagation; 1500 B at 1, 0.1 and 1 Gbit/s (12 + 120 + 12 µs)
    // one way, a 64 B ACK (0.512 + 5.12 + 0.512 µs) the other.
    let expected_ps = 1000 * PS_PER_US + 144 * PS_PER_US + 6_144_000;
    assert_eq!(path.rtt, expected_ps);
}

/// Asks for a report per RTT and notes when each comes.
struct Noting(Arc<Mutex<Vec<u64>>>);

impl Algorithm for Noting {
    fn name(&self) -> &'static str {
        "noting"
    }
    fn init(&mut self, _: &FlowStart) -> Action {
        Action::cwnd(20_000.0).with_report(ccp_contract::ReportPolicy::PerRtt { rtts: 1.0 })
    }
    fn on_report(&mut self, r: &Report) -> Action {
        self.0.lock().unwrap().push(r.now_us);
        Action::default()
    }
}

struct NotingFactory(Arc<Mutex<Vec<u64>>>);

impl AlgorithmFactory for NotingFactory {
    fn name(&self) -> &'static str {
        "noting"
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Noting(self.0.clone()))
    }
}

#[test]
fn one_entry_runs_a_given_algorithm_and_a_run_stops_when_asked() {
    let two = format!("{LOSSY_LINK}\n[[workload.flows]]\nsrc = 1\ndst = 3\ncc = {{ algorithm = \"reno\" }}\n");
    let loaded = common::scenario(&two);
    let reports = Arc::new(Mutex::new(Vec::new()));
    let mut sim = Sim::with_entry_algorithm(&loaded, 0, Arc::new(NotingFactory(reports.clone()))).unwrap();
    let finished = sim.run_while(|_, _| {}, |_| reports.lock().unwrap().len() < 10);
    assert!(!finished);
    assert_eq!(reports.lock().unwrap().len(), 10, "stopped at the event that gave the 10th report");
    assert!(sim.now() < sim.end);
    let names: Vec<_> = sim.flows.iter().map(|f| f.state.as_ref().map(|s| s.cc.name())).collect();
    assert_eq!(names, [Some("noting"), Some("reno")], "entry 1 keeps its own algorithm");
    assert!(Sim::with_entry_algorithm(&loaded, 2, Arc::new(NotingFactory(reports))).is_err());
}

#[test]
fn before_the_first_rtt_sample_a_per_rtt_interval_counts_the_initial_rtt() {
    let first_reports = |initial: Option<&str>| {
        let mut text = LOSSY_LINK.replace("loss_pct = 2.0", "loss_pct = 0.0").replace("duration_ms = 2000", "duration_ms = 5");
        if let Some(us) = initial {
            text = text.replace("reporting = \"interval\"", &format!("reporting = \"interval\"\ninitial_rtt_us = {us}"));
        }
        let times = Arc::new(Mutex::new(Vec::new()));
        let mut sim = Sim::with_entry_algorithm(&common::scenario(&text), 0, Arc::new(NotingFactory(times.clone()))).unwrap();
        sim.run(|_, _| {});
        let t = times.lock().unwrap().clone();
        t
    };
    // The path's RTT is 1.14 ms: within 5 ms, the default's 100 µs interval reports ~11 times
    // before the first sample; a 1 ms initial RTT, once.
    let default = first_reports(None);
    assert_eq!(&default[..3], &[100, 200, 300], "{default:?}");
    let wan = first_reports(Some("1000.0"));
    assert_eq!(wan[0], 1000, "{wan:?}");
    assert!(wan.len() <= 5 && default.len() > 10, "{wan:?} {default:?}");
    let e = ccp_sim::config::load_str(
        std::path::Path::new("t.toml"),
        &LOSSY_LINK.replace("reporting = \"interval\"", "reporting = \"interval\"\ninitial_rtt_us = 0.0"),
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cc.initial_rtt_us"), "{e}");
}
