//! CCP-style reporting: reports every interval (plus urgent ones) with the action arriving after
//! the agent delay, versus per-ACK in-datapath control.

mod common;

use std::path::Path;

use ccp_sim::config::load;

fn dctcp(overrides: &[&str]) -> ccp_sim::config::Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/dctcp-k20.toml");
    let mut o: Vec<String> = vec!["duration_ms=100".into(), "warmup_ms=20".into()];
    o.extend(overrides.iter().map(|s| s.to_string()));
    load(&path, &o).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn per_ack_mode_reports_on_every_ack() {
    let (_, r) = common::run(&dctcp(&[]));
    // Every ACK a sender received produced one report; ACKs still in the network did not.
    assert_eq!(r.counters.dropped_buffer, 0);
    assert!(r.counters.reports <= r.counters.acks);
    assert!(
        r.counters.reports >= r.counters.acks - r.packets_alive_at_end as u64,
        "{} reports, {} ACKs",
        r.counters.reports,
        r.counters.acks
    );
}

#[test]
fn interval_mode_reports_per_interval_plus_urgent_and_still_controls() {
    let (_, r) = common::run(&dctcp(&["cc.reporting=\"interval\"", "cc.report_interval_us=1000", "cc.agent_delay_us=20"]));
    let periodic = 2 * 100; // 2 flows × 100 ms / 1 ms
    assert!(r.counters.reports >= periodic as u64 - 4, "{} reports", r.counters.reports);
    // Urgent reports on the first ECN-Echo of each window come on top, but far fewer than ACKs.
    assert!(r.counters.reports < r.counters.acks / 5, "{} reports for {} ACKs", r.counters.reports, r.counters.acks);
    let goodput: f64 = r.flows.iter().map(|f| f.goodput_gbps).sum();
    assert!(goodput > 0.9, "{goodput}");
    assert!(r.ports[0].queue_p99_pkts < 60.0, "DCTCP through CCP still bounds the queue: {}", r.ports[0].queue_p99_pkts);
}

/// Reno asking for a report every ten packets acknowledged, and recording what each covers.
struct EveryTen(std::sync::Arc<std::sync::Mutex<Vec<u64>>>);

struct EveryTenAlg {
    inner: Box<dyn ccp_contract::Algorithm>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
}

impl ccp_contract::Algorithm for EveryTenAlg {
    fn name(&self) -> &'static str {
        "every_ten"
    }
    fn init(&mut self, s: &ccp_contract::FlowStart) -> ccp_contract::Action {
        self.inner.init(s).with_report_acked_pkts(10)
    }
    fn on_report(&mut self, r: &ccp_contract::Report) -> ccp_contract::Action {
        if r.urgent.is_none() {
            self.seen.lock().unwrap().push(r.acked_pkts + r.sacked_pkts);
        }
        self.inner.on_report(r)
    }
}

impl ccp_contract::AlgorithmFactory for EveryTen {
    fn name(&self) -> &'static str {
        "every_ten"
    }
    fn create(&self) -> Box<dyn ccp_contract::Algorithm> {
        let inner = ccp_algorithms::registry::configure("reno", &toml::Table::new()).unwrap().create();
        Box::new(EveryTenAlg { inner, seen: self.0.clone() })
    }
}

#[test]
fn a_packet_trigger_reports_every_n_packets_acknowledged() {
    // A 10 ms interval that never elapses between triggers on a 1 Gbit/s path.
    let loaded = dctcp(&["cc.reporting=\"interval\"", "cc.report_interval_us=10000"]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut sim = ccp_sim::Sim::with_algorithm(&loaded, std::sync::Arc::new(EveryTen(seen.clone()))).unwrap();
    sim.run(|_, _| {});
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 500, "{} reports", seen.len());
    // ACKs of one segment each (delayed_ack_segments = 1): every report covers exactly ten.
    let tens = seen.iter().filter(|&&n| n == 10).count();
    assert!(tens as f64 > 0.99 * seen.len() as f64, "{tens} of {} reports cover ten packets", seen.len());
}

/// Reno recording, over all reports, the packets delivered (`acked_pkts + sacked_pkts`), the
/// bytes cumulatively acknowledged and the packets SACKed.
struct Totals(std::sync::Arc<std::sync::Mutex<[u64; 3]>>);

struct TotalsAlg {
    inner: Box<dyn ccp_contract::Algorithm>,
    totals: std::sync::Arc<std::sync::Mutex<[u64; 3]>>,
}

impl ccp_contract::Algorithm for TotalsAlg {
    fn name(&self) -> &'static str {
        "totals"
    }
    fn init(&mut self, s: &ccp_contract::FlowStart) -> ccp_contract::Action {
        self.inner.init(s)
    }
    fn on_report(&mut self, r: &ccp_contract::Report) -> ccp_contract::Action {
        let mut t = self.totals.lock().unwrap();
        t[0] += r.acked_pkts + r.sacked_pkts;
        t[1] += r.acked_bytes;
        t[2] += r.sacked_pkts;
        drop(t);
        self.inner.on_report(r)
    }
}

impl ccp_contract::AlgorithmFactory for Totals {
    fn name(&self) -> &'static str {
        "totals"
    }
    fn create(&self) -> Box<dyn ccp_contract::Algorithm> {
        let inner = ccp_algorithms::registry::configure("reno", &toml::Table::new()).unwrap().create();
        Box::new(TotalsAlg { inner, totals: self.0.clone() })
    }
}

#[test]
fn packet_counts_count_each_segment_once_whether_sacked_or_cumulatively_acked() {
    // Reno over a small drop-tail buffer: losses, SACKs, and cumulative ACKs that close holes
    // over segments SACKed before. Delivered packets must equal the full-sized segments
    // cumulatively acknowledged, as the kernel's `delivered` does (DCTCP's and ABC's marked
    // fractions divide by it); counting a SACKed segment again at its cumulative ACK would not.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/tcp-droptail.toml");
    let overrides: Vec<String> = vec![
        "duration_ms=200".into(),
        "warmup_ms=20".into(),
        "switch.port_buffer_bytes=30000".into(),
        "cc.reporting=\"interval\"".into(),
        "cc.report_interval_us=200".into(),
    ];
    let loaded = load(&path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mss = u64::from(loaded.scenario.transport.mss_bytes);
    let totals = std::sync::Arc::new(std::sync::Mutex::new([0u64; 3]));
    let mut sim = ccp_sim::Sim::with_algorithm(&loaded, std::sync::Arc::new(Totals(totals.clone()))).unwrap();
    sim.run(|_, _| {});
    let [delivered, acked_bytes, sacked] = *totals.lock().unwrap();
    assert!(sacked > 100, "the run needs SACKed segments to test anything: {sacked}");
    // Segments SACKed but not yet cumulatively acknowledged at the end: at most a window's worth.
    let cumulative_segments = acked_bytes / mss;
    assert!(
        delivered >= cumulative_segments && delivered - cumulative_segments <= 300,
        "delivered {delivered} packets for {cumulative_segments} segments cumulatively acknowledged ({sacked} SACKed)"
    );
}
