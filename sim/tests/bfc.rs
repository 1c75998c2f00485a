//! BFC on a ccp-sim switch through `ccp_sim::bfc` (the P4 pipeline's behavioural model as a
//! switch hook; specs/bfc.md §6, §17 S7-style drop check): two senders start at line rate with no
//! end-to-end congestion control into one 100 G egress. Without BFC the shared buffer overflows;
//! with BFC the egress queues stay near Th = HRTT·μ/N_active plus one hop-RTT of overshoot, and
//! nothing is dropped. The comparison the thesis makes (specs/bfc.md §15): on one small network,
//! DCTCP starting at line rate (initial window > 1 BDP) drops without PFC and PFC-pauses with it,
//! while pure BFC selected by `[switch.bfc]` in the scenario text holds the queue near Th with
//! neither drops nor PFC.

mod common;

use std::path::Path;

use ccp_sim::bfc::{install, BfcHook, BfcParams};
use ccp_sim::config::load_str;
use ccp_sim::hook::{HookMeta, HookPacket, QueueControl, SwitchHook};
use ccp_sim::switch::Port;
use ccp_sim::time::Time;
use ccp_sim::Sim;

const TWO_TO_ONE: &str = r#"
duration_ms = 5
stop_when_done = true

[topology]
kind = "star"
hosts = 3
link_gbps = 100.0
link_delay_us = 1.0

[switch]
buffer_bytes = 400_000
queues_per_port = 8

[cc]
algorithm = "constant"
params = { cwnd_pkts = 1000 }

[transport]
mss_bytes = 1000
rto_min_us = 1000.0
rto_initial_us = 1000.0

[workload.incast]
degree = 2
total_bytes = 4_000_000
interval_us = 100000.0
receiver = 2
bursts = 1

[output]
sample_interval_us = 1.0
monitor = ["sw0->h2"]
"#;

#[test]
fn bfc_holds_the_bottleneck_near_th_without_drops_where_plain_queues_drop() {
    let loaded = common::scenario(TWO_TO_ONE);
    let (_, plain) = common::run(&loaded);
    assert!(plain.counters.dropped_buffer > 0, "two 1 MB windows at line rate overflow a 400 KB buffer");

    let mut sim = Sim::new(&loaded).unwrap();
    install(&mut sim, &BfcParams::default()).unwrap();
    sim.run(|_, _| {});
    let r = sim.results("bfc", 1, &[], 1.0);
    assert_eq!(r.counters.dropped_buffer + r.counters.dropped_aqm, 0, "BFC: no drops");
    assert_eq!(r.flows_completed, 2);
    assert!(r.counters.queue_controls > 0, "pauses were sent");
    // Two active queues: Th = 2 µs × 100 Gb/s / 8 / 2 = 12.5 KB each. A pause acts one hop RTT
    // later, during which a queue grows at (100 − 50) Gb/s: about 12.5 KB more. So each queue
    // peaks near 25 KB, and the port (two queues) near 50 KB — an order of magnitude below the
    // unpaced 1 MB windows.
    let port = &r.ports[0];
    let th_total = 2.0 * 12_500.0;
    assert!(port.queue_max_bytes < 2.0 * (12_500.0 + 12_500.0) + 10_000.0, "max queue {} B", port.queue_max_bytes);
    assert!(port.queue_mean_bytes > 0.3 * th_total, "queue held near Th, not drained: mean {} B", port.queue_mean_bytes);
    assert!(port.utilization > 0.5, "utilization {}", port.utilization);
}

#[test]
fn every_switch_gets_a_pipeline_with_its_ports() {
    let loaded = common::scenario(TWO_TO_ONE);
    let sim = Sim::new(&loaded).unwrap();
    let hook = BfcHook::new(&sim, 0, &BfcParams::default()).unwrap();
    let m = hook.model();
    assert_eq!(m.port_index.len(), 3, "one local port per link of the star switch");
    assert_eq!(m.data_queues(), 8);
    // 1 µs links: HRTT = 2 µs, so Th(1) at 100 G is the thesis's 25 KB.
    assert_eq!(m.th_lookup(0, 1), Some(25_000));
    assert!(BfcHook::new(&sim, 1, &BfcParams::default()).is_err(), "the star has one switch");
}

/// Four senders start 1 MB each at line rate into one 100 G egress (star, 1 µs links: base RTT
/// 4 µs, BDP 50 KB), 1 KB MSS, 300 KB shared buffer (one congested port may hold about half), and
/// PFC as the backstop (XOFF at 45 KB per ingress) in every run — the same network for each
/// scheme, which supplies `[switch.qdisc]` and `[cc]`.
const LINE_RATE_NETWORK: &str = r#"
duration_ms = 5
stop_when_done = true

[topology]
kind = "star"
hosts = 5
link_gbps = 100.0
link_delay_us = 1.0

[transport]
mss_bytes = 1000
init_cwnd_pkts = 64
rto_min_us = 1000.0
rto_initial_us = 1000.0

[workload.incast]
degree = 4
total_bytes = 4_000_000
interval_us = 100000.0
receiver = 4
bursts = 1

[output]
sample_interval_us = 0.5
monitor = ["sw0->h4"]

[switch.pfc]
enabled = true
xoff_bytes = 45_000
xon_bytes = 40_000
"#;

/// DCTCP as the thesis runs it against BFC (specs/bfc.md §15): flows start at line rate with an
/// initial window of 64 packets (> 1 BDP), step marking at K = 30 KB.
const DCTCP: &str = r#"
[switch]
buffer_bytes = 300_000

[switch.qdisc]
kind = "dctcp"
k_bytes = 30_000

[cc]
algorithm = "dctcp"
"#;

/// Pure BFC (§1, §7) selected by the scenario file: `[switch.bfc]` with the thesis's 32 queues per
/// port, and hosts with no end-to-end congestion control — `constant` holds a 64-packet window
/// (> 1 BDP), so a flow sends at line rate whenever its NIC queue is not paused.
const BFC: &str = r#"
[switch]
buffer_bytes = 300_000
queues_per_port = 32

[switch.bfc]
th_multiplier = 1.0

[cc]
algorithm = "constant"
params = { cwnd_pkts = 64 }
"#;

#[test]
fn line_rate_start_dctcp_drops_or_pauses_where_scenario_file_bfc_holds_th() {
    let dctcp_text = format!("{LINE_RATE_NETWORK}{DCTCP}");
    let lossy = Path::new("lossy.toml");
    let dctcp_lossy = load_str(lossy, &dctcp_text, &["switch.pfc.enabled=false".into()]).unwrap();
    let (_, r) = common::run(&dctcp_lossy);
    assert!(r.counters.dropped_buffer > 0, "DCTCP without PFC: the line-rate start overflows the port");
    assert!(r.counters.marks > 0);

    let (_, dctcp) = common::run(&common::scenario(&dctcp_text));
    assert_eq!(dctcp.counters.dropped_buffer, 0, "with PFC nothing is dropped ...");
    assert!(dctcp.counters.pfc_frames > 0, "... because PFC pauses whole ingress links");
    assert_eq!(dctcp.flows_completed, 4);

    let bfc_loaded = common::scenario(&format!("{LINE_RATE_NETWORK}{BFC}"));
    let (sim, bfc) = common::run(&bfc_loaded);
    assert_eq!(bfc.counters.dropped_buffer + bfc.counters.dropped_aqm, 0, "BFC: no drops");
    assert_eq!(bfc.counters.pfc_frames, 0, "BFC: PFC never triggers");
    assert!(bfc.counters.queue_controls > 0, "BFC paused the senders' NIC queues");
    assert_eq!(bfc.flows_completed, 4);
    assert!(sim.ports.iter().all(|p| p.queues().len() <= 1 || p.queues().len() == 32), "32 queues on switch ports");

    // Four active queues: Th = HRTT·μ/N = 2 µs × 100 Gb/s / 8 / 4 = 6.25 KB each (25 KB for the
    // port). A pause acts about one hop RTT after Th is crossed, while a queue grows at
    // 100 − 25 Gb/s: 18.75 KB more. So the port peaks near 4 × 25 KB = 100 KB.
    let (port, dport) = (&bfc.ports[0], &dctcp.ports[0]);
    let th_port = 4.0 * 6_250.0;
    assert!(port.queue_max_bytes < 4.0 * (6_250.0 + 18_750.0) + 15_000.0, "BFC max queue {} B", port.queue_max_bytes);
    assert!(
        port.queue_mean_bytes > 0.5 * th_port && port.queue_mean_bytes < 3.0 * th_port,
        "BFC mean {} B",
        port.queue_mean_bytes
    );
    assert!(
        port.queue_max_bytes < 0.6 * dport.queue_max_bytes,
        "BFC {} B vs DCTCP+PFC {} B",
        port.queue_max_bytes,
        dport.queue_max_bytes
    );
    assert!(port.utilization > 0.8, "BFC utilization {}", port.utilization);
    // Per-packet queueing delay at the monitored egress (enqueue to start of transmission).
    assert!(port.queue_delay_p99_us > 0.0 && port.queue_delay_max_us >= port.queue_delay_p99_us);
    assert!(
        port.queue_delay_p99_us < dport.queue_delay_p99_us,
        "BFC {} µs vs DCTCP+PFC {} µs",
        port.queue_delay_p99_us,
        dport.queue_delay_p99_us
    );
}

/// h0 starts a 2 KB flow and a long flow at 0, and another long flow at 50 µs, after the short
/// one has finished: the two live long flows must hold different NIC queues (specs/bfc.md §7,
/// §12.2: per-flow NIC queues), or a pause aimed at one also stops the other. Numbering queues by
/// the host's live-flow count gave the third flow the second one's queue.
const NIC_QUEUE_REUSE: &str = r#"
duration_ms = 0.2

[topology]
kind = "star"
hosts = 3
link_gbps = 100.0
link_delay_us = 1.0

[cc]
algorithm = "constant"
params = { cwnd_pkts = 100 }

[transport]
mss_bytes = 1000

[[workload.flows]]
src = 0
dst = 2
bytes = 2000

[[workload.flows]]
src = 0
dst = 2

[[workload.flows]]
src = 0
dst = 1
start_us = 50.0
"#;

#[test]
fn live_flows_of_one_host_never_share_a_nic_queue() {
    let (sim, _) = common::run(&common::scenario(NIC_QUEUE_REUSE));
    assert!(sim.flows[0].sender_done, "the 2 KB flow finished before the third flow started");
    let q = |f: usize| sim.flows[f].state.as_ref().expect("long flows are live at the end").nic_queue;
    assert_ne!(q(1), q(2), "two live flows of h0 on one NIC queue");
}

/// Two hosts start `flows` flows of `bytes` each at line rate into a third through one 100 G star
/// switch with `queues` queues per port and BFC on; each flow is on a NIC queue of its own while
/// its host has fewer live flows than the switch has pause counters for one ingress (128).
fn two_hosts_into_one(queues: u16, buffer_bytes: u64, cwnd_pkts: u32, bytes: u64, flows: u32) -> String {
    let flow = |src: u32| format!("[[workload.flows]]\nsrc = {src}\ndst = 2\nbytes = {bytes}\ncount = {flows}\n");
    format!(
        r#"
duration_ms = 5
stop_when_done = true

[topology]
kind = "star"
hosts = 3
link_gbps = 100.0
link_delay_us = 1.0

[switch]
buffer_bytes = {buffer_bytes}
queues_per_port = {queues}

[switch.bfc]
hrtt_ns = 2000

[cc]
algorithm = "constant"
params = {{ cwnd_pkts = {cwnd_pkts} }}

[transport]
mss_bytes = 1000
rto_min_us = 1000.0
rto_initial_us = 1000.0

{}
{}"#,
        flow(0),
        flow(1)
    )
}

/// 150 flows of 100 KB per host: more concurrent flows per host than pause counters.
fn many_flows_per_host() -> String {
    two_hosts_into_one(8, 2_000_000, 1000, 100_000, 150)
}

/// A NIC queue id at or past the switch's pause counters for its ingress aliases onto a counter
/// whose pause names another id, so its flow could never be paused: with Google's RPCs and
/// incast (~960 concurrent flows per host) such flows kept sending into full buffers and BFC
/// dropped 1.2 M packets at 80 % load. Beyond 128 flows a host's flows share queues instead.
/// (This scenario drops packets either way: 300 flows at line rate, each an upstream queue that
/// can have a pause round-trip of packets in flight, overrun the buffer; what it checks is that
/// every flow is on a queue the switch can pause.)
#[test]
fn hosts_with_more_flows_than_pause_counters_share_queues_the_switch_can_pause() {
    // 20 µs in, every flow has started and none has finished.
    let early = many_flows_per_host().replace("duration_ms = 5\nstop_when_done = true", "duration_ms = 0.02");
    let (sim, _) = common::run(&common::scenario(&early));
    let mut max_queue = 0;
    let mut shared = false;
    for h in 0..2 {
        let queues: Vec<u16> =
            sim.flows.iter().filter(|f| f.spec.src == h).filter_map(|f| f.state.as_ref()).map(|s| s.nic_queue).collect();
        assert_eq!(queues.len(), 150, "host {h}'s flows are all live");
        max_queue = max_queue.max(*queues.iter().max().unwrap());
        let mut distinct = queues.clone();
        distinct.sort_unstable();
        distinct.dedup();
        shared |= distinct.len() < queues.len();
    }
    assert!(u32::from(max_queue) < ccp_bfc_model::UPSTREAM_Q_SLOTS, "NIC queue {max_queue} has no pause counter");
    assert!(shared, "150 flows on at most 128 queues share some");

    let (_, r) = common::run(&common::scenario(&many_flows_per_host()));
    assert_eq!(r.flows_completed, 300, "every flow finishes");
    assert!(r.counters.queue_controls > 0, "BFC paused the senders");
}

/// Records the queues BFC picks at the congested egress, passing everything else through.
struct QueuesUsed {
    inner: BfcHook,
    egress: ccp_sim::topology::PortId,
    used: std::rc::Rc<std::cell::RefCell<std::collections::BTreeSet<u16>>>,
}

impl SwitchHook for QueuesUsed {
    fn classify(&mut self, now: Time, egress: &Port, p: &HookPacket) -> (u16, HookMeta) {
        let (q, meta) = self.inner.classify(now, egress, p);
        if p.egress == self.egress {
            self.used.borrow_mut().insert(q);
        }
        (q, meta)
    }
    fn on_enqueue(&mut self, now: Time, egress: &Port, queue: u16, p: &HookPacket, controls: &mut Vec<QueueControl>) {
        self.inner.on_enqueue(now, egress, queue, p, controls)
    }
    fn on_dequeue(&mut self, now: Time, egress: &Port, queue: u16, p: &HookPacket, controls: &mut Vec<QueueControl>) {
        self.inner.on_dequeue(now, egress, queue, p, controls)
    }
}

/// The thesis's BFC 128 (specs/bfc.md §4 Q, target 8): with more active flows than the P4's 32
/// queues, 40 flows spread over more than 32 queues at the bottleneck, where 32 queues must make
/// some share; either way BFC pauses them without a drop.
#[test]
fn bfc_128_spreads_forty_flows_over_more_queues_than_the_p4_has() {
    for queues in [128u16, 32] {
        // 20 flows of 200 KB per host: 40 active flows at the bottleneck.
        let text = two_hosts_into_one(queues, 4_000_000, 100, 200_000, 20);
        let loaded = common::scenario(&text);
        let mut sim = Sim::new(&loaded).unwrap();
        let params = BfcParams::from_config(loaded.scenario.switch.bfc.as_ref().unwrap(), 1);
        install(&mut sim, &params).unwrap();
        let bottleneck =
            sim.ports.iter().position(|p| p.node == sim.topo.switches[0] && sim.ports[p.peer as usize].node == sim.topo.hosts[2]);
        let used = std::rc::Rc::default();
        let hook = QueuesUsed {
            inner: BfcHook::new(&sim, 0, &params).unwrap(),
            egress: bottleneck.unwrap() as _,
            used: std::rc::Rc::clone(&used),
        };
        sim.set_switch_hook(0, Box::new(hook));
        sim.run(|_, _| {});
        let r = sim.results("bfc", 1, &[], 1.0);
        let used = used.borrow();
        assert_eq!(r.flows_completed, 40, "{queues} queues");
        assert_eq!(r.counters.dropped_buffer + r.counters.dropped_aqm, 0, "{queues} queues: no drops");
        assert!(r.counters.queue_controls > 0, "{queues} queues: pauses were sent");
        if queues == 128 {
            // Not necessarily 40: a queue that drains between two packets of its flow is empty,
            // so a new flow may be given it (§5 assigns empty queues; the entry stays sticky).
            assert!(used.len() > 32, "40 flows on {} queues, no more than the P4's 32: {used:?}", used.len());
        } else {
            assert!(used.len() <= 32 && used.iter().all(|&q| q < 32), "{used:?}");
        }
    }
}
