//! The simulation engine: state, the event loop, and the network side (switching, links, PFC,
//! sampling). Hosts and their transport are in `transport/`, whose events are further `impl Sim` blocks.

use std::sync::Arc;

use ccp_contract::{AlgorithmFactory, Choice, IntHop, Limits, ReportPolicy};
use ccp_qdisc::{DropReason, Ecn, Limit, Outputs};

use crate::config::{FlowCcConfig, Loaded, Reporting, Scenario, Scheduler};
use crate::event::{Event, EventQueue};
use crate::hook::{HashQueues, HookMeta, HookPacket, PriorityQueues, QueueControl, SwitchHook};
use crate::pacer::{Pacer, PacerStats};
use crate::packet::{Arena, Kind, PacketId, Queued};
use crate::rng::{Rng, Stream};
use crate::stats::{Counters, Samples};
use crate::switch::{make_qdisc, BufferPolicy, EgressQueue, LinkLoss, Port, SwitchState};
use crate::time::{from_us, to_ns, tx_time, Time, PS_PER_MS, PS_PER_SEC};
use crate::topology::{NodeId, NodeKind, PortId, Routes, Topology};
use crate::transport::{Flow, FlowId, HostState, TransportParams};
use crate::workload::{self, FlowClass, FlowSpec, SizeCdf};

/// Bytes of a control frame on the wire (PFC PAUSE, BFC pause/resume, QCN CNM): a minimum
/// Ethernet frame.
pub const CONTROL_FRAME_BYTES: u32 = 64;

/// What replaces an algorithm that keeps faulting, as in the agent's default configuration.
pub const FALLBACK_ALGORITHM: &str = "reno";

/// How the datapath reports to the controller, resolved.
#[derive(Debug, Clone)]
pub struct CcParams {
    pub per_ack: bool,
    /// The controller's limits, with the report policy flows start with.
    pub limits: Limits,
    pub agent_delay: Time,
    pub urgent_on_ece: bool,
    /// The RTT per-RTT report intervals count before a flow's first sample.
    pub initial_rtt: Time,
}

/// Congestion controls that replace `[cc]`'s for some flows (`cc = {…}` on a
/// `[[workload.flows]]` entry, `[workload.random]` or `[workload.incast]`), resolved through the
/// registry, and the explicit entries' labels.
#[derive(Clone, Default)]
pub struct FlowOverrides {
    /// Per `[[workload.flows]]` entry.
    pub explicit_cc: Vec<Option<Choice>>,
    /// Per random class.
    pub random_cc: Vec<Option<Choice>>,
    pub incast_cc: Option<Choice>,
    /// Per `[[workload.flows]]` entry.
    pub labels: Vec<Option<String>>,
    /// Per random class.
    pub random_labels: Vec<Option<String>>,
}

impl FlowOverrides {
    /// Resolves a scenario's overrides (already validated by `config::validate`).
    pub fn from_scenario(s: &Scenario) -> Result<FlowOverrides, String> {
        let choose = |c: &Option<FlowCcConfig>, origin: String| -> Result<Option<Choice>, String> {
            c.as_ref()
                .map(|c| ccp_algorithms::registry::choose(&c.algorithm, c.params.clone(), origin).map_err(|e| e.to_string()))
                .transpose()
        };
        let w = &s.workload;
        Ok(FlowOverrides {
            explicit_cc: w
                .flows
                .iter()
                .enumerate()
                .map(|(i, f)| choose(&f.cc, format!("workload.flows[{i}].cc")))
                .collect::<Result<_, _>>()?,
            random_cc: w
                .random_classes()
                .iter()
                .enumerate()
                .map(|(i, r)| choose(&r.cc, format!("{}.cc", w.random_key(i))))
                .collect::<Result<_, _>>()?,
            incast_cc: choose(&w.incast.as_ref().and_then(|r| r.cc.clone()), "workload.incast.cc".into())?,
            ..Self::labels_only(s)
        })
    }

    /// Only the labels (every flow runs one algorithm).
    fn labels_only(s: &Scenario) -> FlowOverrides {
        let w = &s.workload;
        FlowOverrides {
            labels: w.flows.iter().map(|f| f.label.clone()).collect(),
            random_labels: w.random_classes().iter().map(|r| r.label.clone()).collect(),
            ..FlowOverrides::default()
        }
    }
}

/// A whole simulation.
pub struct Sim {
    pub(crate) q: EventQueue,
    pub(crate) arena: Arena,
    pub topo: Topology,
    pub ports: Vec<Port>,
    pub(crate) routes: Routes,
    pub(crate) switches: Vec<SwitchState>,
    pub(crate) hosts: Vec<HostState>,
    pub flows: Vec<Flow>,
    pub(crate) buffer: BufferPolicy,
    pub(crate) tp: TransportParams,
    pub(crate) ccp: CcParams,
    /// The algorithm flows run (unless overridden), and the one that replaces it where it keeps
    /// faulting.
    pub(crate) choice: Choice,
    pub(crate) fallback: Choice,
    /// Per-flow algorithm overrides and labels.
    pub(crate) overrides: FlowOverrides,
    pub(crate) ecmp_salt: u64,
    /// Reused scratch space for discipline outputs and hook controls (no per-event allocation).
    out: Outputs<Queued>,
    controls: Vec<QueueControl>,
    pub(crate) pacer_released: Vec<PacketId>,
    pub counters: Counters,
    pub samples: Samples,
    pub end: Time,
    pub warmup: Time,
    stop_when_done: bool,
    /// Flows with a size that have not completed, and whether any flow is unbounded.
    pub(crate) unfinished: usize,
    has_unbounded: bool,
    pub(crate) stopped_early: bool,
    /// Every report given to a flow's algorithm, when recording (`--record-reports`).
    pub record: Option<crate::record::ReportRecord>,
}

/// A flow's path with every queue empty ([`Sim::base_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasePath {
    /// The slowest link's rate on the data's way, bit/s.
    pub bottleneck_bps: u64,
    /// The round trip, ps.
    pub rtt: Time,
}

/// 64-bit mix (the SplitMix64 finalizer), for hashing flows onto ECMP paths and queues.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Sim {
    /// Builds a simulation from a loaded scenario: topology, switches, hosts and every flow.
    pub fn new(loaded: &Loaded) -> Result<Sim, String> {
        let s = &loaded.scenario;
        Sim::with_choice(loaded, Sim::scenario_choice(s)?, FlowOverrides::from_scenario(s)?)
    }

    /// `[cc]`'s algorithm.
    fn scenario_choice(s: &Scenario) -> Result<Choice, String> {
        ccp_algorithms::registry::choose(&s.cc.algorithm, s.cc.params.clone(), "scenario").map_err(|e| e.to_string())
    }

    /// As [`Sim::new`], with the flows of `[[workload.flows]]` entry `entry` controlled by
    /// `factory`'s algorithm; every other flow keeps its own (its `cc` override, else `[cc]`'s).
    /// The Gymnasium environment runs its learner so, beside the scenario's other traffic.
    pub fn with_entry_algorithm(loaded: &Loaded, entry: usize, factory: Arc<dyn AlgorithmFactory>) -> Result<Sim, String> {
        let s = &loaded.scenario;
        let mut overrides = FlowOverrides::from_scenario(s)?;
        let n = overrides.explicit_cc.len();
        let slot = overrides.explicit_cc.get_mut(entry).ok_or_else(|| format!("workload.flows has {n} entries, no [{entry}]"))?;
        *slot = Some(Choice::new(factory, toml::Table::new(), format!("workload.flows[{entry}]")));
        Sim::with_choice(loaded, Sim::scenario_choice(s)?, overrides)
    }

    /// As [`Sim::new`], with every flow controlled by `factory`'s algorithm instead of the
    /// scenario's (an algorithm outside the registry, or an instrumented one in tests); per-flow
    /// `cc` overrides are ignored too.
    pub fn with_algorithm(loaded: &Loaded, factory: Arc<dyn AlgorithmFactory>) -> Result<Sim, String> {
        let overrides = FlowOverrides::labels_only(&loaded.scenario);
        Sim::with_choice(loaded, Choice::new(factory, toml::Table::new(), "with_algorithm"), overrides)
    }

    fn with_choice(loaded: &Loaded, choice: Choice, overrides: FlowOverrides) -> Result<Sim, String> {
        let s = &loaded.scenario;
        let topo = Topology::build(&s.topology);
        let end = (s.duration_ms * PS_PER_MS as f64) as Time;
        let mut tp = TransportParams::from_config(&s.transport);
        if s.switch.int {
            tp.int_overhead = s.switch.int_overhead_bytes;
        }
        let mut random = Vec::new();
        for (i, r) in s.workload.random_classes().iter().enumerate() {
            let cdf = SizeCdf::load(&loaded.base_dir().join(&r.cdf))?;
            let (pairs, reference_bps) =
                topo.pairs_for(r.pairs, r.receiver).map_err(|e| format!("{}.{e}", s.workload.random_key(i)))?;
            random.push((r, cdf, pairs, reference_bps));
        }
        // An incast is a datacenter pattern: among the datacenter's hosts.
        let dc_hosts = topo.edge.map_or(topo.hosts.len() as u32, |e| e.dc_hosts);
        let ccp = CcParams {
            per_ack: s.cc.reporting == Reporting::PerAck,
            limits: crate::cc::limits(ReportPolicy::EveryUs((s.cc.report_interval_us.round() as u64).max(1))),
            agent_delay: from_us(s.cc.agent_delay_us),
            urgent_on_ece: s.cc.urgent_on_ece,
            initial_rtt: from_us(s.cc.initial_rtt_us),
        };
        let mut sim = Sim::assemble(topo, loaded, tp, ccp, choice, overrides, end)?;
        if let Some(b) = s.switch.bfc.as_ref().filter(|b| b.enabled) {
            crate::bfc::install(&mut sim, &crate::bfc::BfcParams::from_config(b, s.seed))
                .map_err(|e| format!("switch.bfc: {e}"))?;
        }
        // Flow ids in this order: explicit flows, each random class, incast flows.
        for spec in workload::explicit(&s.workload.flows) {
            sim.add_flow(spec);
        }
        for (i, (r, cdf, pairs, reference_bps)) in random.iter().enumerate() {
            for spec in workload::random(r, i as u32, cdf, *reference_bps, *pairs, s.seed, end) {
                sim.add_flow(spec);
            }
        }
        if let Some(inc) = &s.workload.incast {
            for spec in workload::incast(inc, dc_hosts, s.seed, end) {
                sim.add_flow(spec);
            }
        }
        Ok(sim)
    }

    fn assemble(
        topo: Topology,
        loaded: &Loaded,
        tp: TransportParams,
        ccp: CcParams,
        choice: Choice,
        overrides: FlowOverrides,
        end: Time,
    ) -> Result<Sim, String> {
        let s = &loaded.scenario;
        let mut ports = Vec::with_capacity(topo.links.len() * 2);
        let mut node_ports: Vec<Vec<(PortId, NodeId)>> = vec![Vec::new(); topo.nodes.len()];
        for l in &topo.links {
            let (pa, pb) = (ports.len() as PortId, ports.len() as PortId + 1);
            let name = |x: NodeId, y: NodeId| format!("{}->{}", topo.names[x as usize], topo.names[y as usize]);
            ports.push(Port::new(name(l.a, l.b), l.a, pb, l.rate_bps, l.delay));
            ports.push(Port::new(name(l.b, l.a), l.b, pa, l.rate_bps, l.delay));
            node_ports[l.a as usize].push((pa, l.b));
            node_ports[l.b as usize].push((pb, l.a));
        }
        let mss_wire = tp.mss + tp.header;
        let queue_limit = s.switch.queue_buffer_bytes.map_or(Limit::Unlimited, Limit::Bytes);
        let peers: Vec<NodeId> = ports.iter().map(|p| p.node).collect();
        for (id, port) in ports.iter_mut().enumerate() {
            if let NodeKind::Switch(_) = topo.nodes[port.node as usize] {
                let qdisc = match &s.switch.border_qdisc {
                    Some(q) if topo.edge.is_some_and(|e| e.border == port.node) => q,
                    _ => &s.switch.qdisc,
                };
                let queues = (0..s.switch.queues_per_port)
                    .map(|q| {
                        let seed = Rng::stream(s.seed, Stream::Qcn, (id as u64) << 16 | u64::from(q)).next_u64();
                        EgressQueue { qdisc: make_qdisc(qdisc, queue_limit, port.rate_bps, mss_wire, seed) }
                    })
                    .collect();
                port.set_queues(queues, s.switch.scheduler);
                let to_host = matches!(topo.nodes[peers[port.peer as usize] as usize], NodeKind::Host(_));
                if s.switch.loss_pct > 0.0 && to_host {
                    let rng = Rng::stream(s.seed, Stream::RandomLoss, id as u64);
                    port.loss = Some(LinkLoss::new(s.switch.loss_pct / 100.0, rng));
                }
            }
        }
        let routes = Routes::compute(&topo, &node_ports);
        for (h, &node) in topo.hosts.iter().enumerate() {
            if node_ports[node as usize].len() != 1 {
                return Err(format!("host {h} must have exactly one link"));
            }
        }
        let switches = topo
            .switches
            .iter()
            .map(|&node| {
                let hook: Box<dyn SwitchHook> = match s.switch.scheduler {
                    Scheduler::RoundRobin => Box::new(HashQueues),
                    Scheduler::StrictPriority => Box::new(PriorityQueues),
                };
                SwitchState { node, buffer_used: 0, peak_buffer: 0, hook }
            })
            .collect();
        let pacer = s.pacer.as_ref().filter(|p| p.enabled);
        let max_wire = tp.mss + tp.header + tp.int_overhead;
        let hosts = topo
            .hosts
            .iter()
            .enumerate()
            .map(|(h, &node)| {
                let nic = node_ports[node as usize][0].0;
                let mut host = HostState::new(node, nic);
                if let Some(c) = pacer {
                    let rate_bps = ports[nic as usize].rate_bps;
                    // The rest was checked with the scenario; what depends on the host's line rate
                    // is whether the bucket can pass it.
                    let params = c.settings().params(rate_bps as f64, PS_PER_SEC, max_wire).map_err(|e| match e.param {
                        "depth_bytes" => format!("pacer.depth_bytes, pacer.tick_us: {}", e.message),
                        p => format!("pacer.{p}: {}", e.message),
                    })?;
                    host.pacer = Some(Pacer::new(params, rate_bps, Rng::stream(s.seed, Stream::Pacer, h as u64)));
                }
                Ok(host)
            })
            .collect::<Result<Vec<_>, String>>()?;
        let monitor = s.output.monitor.clone().unwrap_or_else(|| topo.default_monitor.clone());
        let mut monitored = Vec::new();
        for name in &monitor {
            match ports.iter().position(|p| &p.name == name) {
                Some(i) => monitored.push(i as PortId),
                None => {
                    return Err(format!("output.monitor: no port named {name:?} (ports are named like \"{}\")", ports[0].name))
                }
            }
        }
        for &p in &monitored {
            ports[p as usize].stats.delays_ns = Some(Vec::new());
        }
        let names = monitored.iter().map(|&p| ports[p as usize].name.clone()).collect();
        let mut samples = Samples::new(from_us(s.output.sample_interval_us), monitored, names, topo.switches.len());
        if s.switch.scheduler == Scheduler::StrictPriority {
            samples = samples.per_queue(usize::from(s.switch.queues_per_port));
        }
        Ok(Sim {
            q: EventQueue::with_slot_shift(crate::event::slot_shift_for(topo.links.iter().map(|l| l.delay).max().unwrap_or(0))),
            arena: if s.switch.int { Arena::with_int() } else { Arena::new() },
            topo,
            ports,
            routes,
            switches,
            hosts,
            flows: Vec::new(),
            buffer: BufferPolicy::from_config(&s.switch),
            tp,
            ccp,
            choice,
            overrides,
            fallback: ccp_algorithms::registry::choose(FALLBACK_ALGORITHM, toml::Table::new(), "fallback")
                .map_err(|e| e.to_string())?,
            ecmp_salt: Rng::stream(s.seed, Stream::Ecmp, 0).next_u64(),
            out: Outputs::new(),
            controls: Vec::new(),
            pacer_released: Vec::new(),
            counters: Counters::default(),
            samples,
            end,
            warmup: (s.warmup_ms * PS_PER_MS as f64) as Time,
            stop_when_done: s.stop_when_done,
            unfinished: 0,
            has_unbounded: false,
            stopped_early: false,
            record: None,
        })
    }

    /// Adds a flow (before or during the run; its start must not be in the past), and counts the
    /// back-to-back transfers that will follow it (`spec.then`) as unfinished already, so that
    /// `stop_when_done` does not stop between one transfer and the next.
    pub fn add_flow(&mut self, spec: FlowSpec) -> FlowId {
        if spec.bytes.is_some() {
            self.unfinished += 1 + spec.then as usize;
        } else {
            self.has_unbounded = true;
        }
        self.open_flow(spec)
    }

    /// Opens a flow that `add_flow` has counted: the next transfer of a back-to-back chain.
    pub(crate) fn open_flow(&mut self, spec: FlowSpec) -> FlowId {
        let id = self.flows.len() as FlowId;
        let hash = mix64(u64::from(id) ^ self.ecmp_salt) as u32;
        self.flows.push(Flow::new(spec, hash));
        self.q.schedule(spec.start.max(self.q.now()), Event::FlowStart { flow: id });
        id
    }

    /// The algorithm a flow runs: its override, else `[cc]`'s.
    pub fn choice_for(&self, spec: &FlowSpec) -> &Choice {
        let o = &self.overrides;
        let over = match spec.class {
            FlowClass::Explicit => spec.entry.and_then(|i| o.explicit_cc.get(i as usize)).and_then(Option::as_ref),
            FlowClass::Random => spec.entry.and_then(|i| o.random_cc.get(i as usize)).and_then(Option::as_ref),
            FlowClass::Incast => o.incast_cc.as_ref(),
        };
        over.unwrap_or(&self.choice)
    }

    /// The path flow `f`'s data takes and the one its ACKs take back: the data's slowest link
    /// and the round trip with every queue empty (propagation, and one data packet's and one
    /// ACK's serialisation at each hop), as the flow's ECMP hash routes them.
    pub fn base_path(&self, f: FlowId) -> BasePath {
        let flow = &self.flows[f as usize];
        let data_bytes = self.tp.mss + self.tp.header + self.tp.int_overhead;
        let mut bottleneck_bps = u64::MAX;
        let mut rtt = 0;
        let legs = [(flow.spec.src, flow.spec.dst, data_bytes, true), (flow.spec.dst, flow.spec.src, self.tp.ack_bytes, false)];
        for (from, to, bytes, forward) in legs {
            let mut port = self.hosts[from as usize].nic;
            for _ in 0..self.ports.len() {
                let p = &self.ports[port as usize];
                if forward {
                    bottleneck_bps = bottleneck_bps.min(p.rate_bps);
                }
                rtt += p.delay + tx_time(bytes, p.rate_bps);
                let s = match self.topo.nodes[self.ports[p.peer as usize].node as usize] {
                    NodeKind::Host(_) => break,
                    NodeKind::Switch(s) => s,
                };
                let hops = self.routes.next_hops(s, to);
                if hops.is_empty() {
                    break;
                }
                port = hops[(mix64(u64::from(flow.hash) ^ u64::from(s)) % hops.len() as u64) as usize];
            }
        }
        BasePath { bottleneck_bps, rtt }
    }

    /// A flow's label: its explicit entry's or its random class's.
    pub fn label_of(&self, spec: &FlowSpec) -> Option<&str> {
        let labels = match spec.class {
            FlowClass::Explicit => &self.overrides.labels,
            FlowClass::Random => &self.overrides.random_labels,
            FlowClass::Incast => return None,
        };
        spec.entry.and_then(|i| labels.get(i as usize)).and_then(|l| l.as_deref())
    }

    /// Limits every host to NIC queue ids below `n` (what its first-hop switch can pause).
    pub fn set_nic_queues(&mut self, n: u16) {
        for h in &mut self.hosts {
            h.nic_queues = n.max(1);
        }
    }

    /// Replaces a switch's hook (BFC and other per-hop schemes).
    pub fn set_switch_hook(&mut self, switch: usize, hook: Box<dyn SwitchHook>) {
        self.switches[switch].hook = hook;
    }

    pub fn now(&self) -> Time {
        self.q.now()
    }

    pub fn events_processed(&self) -> u64 {
        self.q.processed()
    }

    /// Packets alive in the network (queued, on a link, or waiting to be sent by a host).
    pub fn packets_alive(&self) -> usize {
        self.arena.live()
    }

    pub fn peak_packets_alive(&self) -> usize {
        self.arena.peak()
    }

    /// Runs to the end time (or until every sized flow completed, with `stop_when_done`).
    /// `progress` is called every 65,536 events with the simulated time and the events so far.
    pub fn run(&mut self, progress: impl FnMut(Time, u64)) {
        self.run_while(progress, |_| true);
    }

    /// As [`Sim::run`], asking `go_on` after every event whether to continue: when it answers
    /// false the run returns there, its clock where that event left it (the Gymnasium
    /// environment ends an episode it no longer needs this way). True when the run went to its
    /// end.
    pub fn run_while(&mut self, mut progress: impl FnMut(Time, u64), mut go_on: impl FnMut(&Sim) -> bool) -> bool {
        if self.samples.interval > 0 {
            self.q.schedule(self.q.now(), Event::Sample);
        }
        const PROGRESS_EVERY: u64 = 1 << 16;
        let mut halted = false;
        while let Some(ev) = self.q.pop_until(self.end) {
            self.dispatch(ev);
            if self.stop_when_done && self.unfinished == 0 && !self.has_unbounded {
                self.stopped_early = true;
                break;
            }
            if !go_on(self) {
                halted = true;
                break;
            }
            if self.q.processed().is_multiple_of(PROGRESS_EVERY) {
                progress(self.q.now(), self.q.processed());
            }
        }
        if !self.stopped_early && !halted {
            self.q.advance_to(self.end);
        }
        let now = self.q.now();
        for p in &mut self.ports {
            if p.pfc_paused {
                p.stats.pfc_paused_time += now - p.pfc_paused_since;
                p.pfc_paused_since = now;
            }
        }
        progress(now, self.q.processed());
        !halted
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::Arrive { port, packet } => {
                let node = self.ports[port as usize].node;
                match self.topo.nodes[node as usize] {
                    NodeKind::Host(h) => self.host_receive(h, packet),
                    NodeKind::Switch(s) => self.switch_receive(s, port, packet),
                }
            }
            Event::TxDone { port } => {
                self.ports[port as usize].busy = false;
                self.start_tx(port);
            }
            Event::FlowStart { flow } => self.flow_start(flow),
            Event::Rto { flow } => self.on_rto_timer(flow),
            Event::Pace { flow } => self.on_pace_timer(flow),
            Event::Report { flow } => self.on_report_timer(flow),
            Event::DelayedAck { flow } => self.on_delayed_ack_timer(flow),
            Event::ApplyAction { flow } => self.on_apply_action(flow),
            Event::Cnm { flow, qfb, q_off_bytes, q_delta_bytes } => self.on_cnm(flow, qfb, q_off_bytes, q_delta_bytes),
            Event::Pfc { port, paused } => {
                let now = self.q.now();
                self.ports[port as usize].set_pfc_paused(now, paused);
                if !paused {
                    self.start_tx(port);
                }
            }
            Event::QueueControl { port, queue, paused } => self.on_queue_control(port, queue, paused),
            Event::Pacer { host } => self.on_pacer_timer(host),
            Event::RxInterrupt { host } => self.on_rx_interrupt(host),
            Event::Sample => self.sample(),
        }
    }

    /// A packet arrived at switch `s` through `ingress`: route, admit, enqueue.
    fn switch_receive(&mut self, s: u32, ingress: PortId, id: PacketId) {
        let now = self.q.now();
        let p = self.arena.get_mut(id);
        p.ingress = ingress;
        let p = *p;
        let dst_host = match self.topo.nodes[p.dst as usize] {
            NodeKind::Host(h) => h,
            NodeKind::Switch(_) => unreachable!("packets are addressed to hosts"),
        };
        let hops = self.routes.next_hops(s, dst_host);
        if hops.is_empty() {
            self.drop_packet(id, None, DropReason::BufferFull);
            return;
        }
        let egress = hops[(mix64(u64::from(p.hash) ^ u64::from(s)) % hops.len() as u64) as usize];
        let sw = &mut self.switches[s as usize];
        let port = &self.ports[egress as usize];
        if !self.buffer.admits(sw.buffer_used, port.queued_bytes, p.wire_bytes) {
            self.drop_packet(id, Some(egress), DropReason::BufferFull);
            return;
        }
        let mut hp = HookPacket {
            id,
            flow: p.flow,
            hash: p.hash,
            wire_bytes: p.wire_bytes,
            upstream_q: p.upstream_q,
            priority: p.priority,
            ingress,
            egress,
            meta: 0,
        };
        let (queue, meta) = sw.hook.classify(now, port, &hp);
        let queue = queue.min(port.queues().len() as u16 - 1);
        hp.meta = meta;
        sw.hook.on_enqueue(now, port, queue, &hp, &mut self.controls);
        self.account(s, egress, ingress, i64::from(p.wire_bytes));
        let q = Queued { id, wire_bytes: p.wire_bytes, flow: p.flow, ecn: p.ecn, meta };
        self.ports[egress as usize].enqueue(usize::from(queue), now, q, &mut self.out);
        self.drain_outputs(s, egress, queue);
        self.send_controls();
        self.start_tx(egress);
    }

    /// Adds (or removes, with negative `bytes`) a packet's bytes to the shared buffer, the egress
    /// port and the ingress port's PFC counter, pausing or resuming the upstream as needed.
    fn account(&mut self, s: u32, egress: PortId, ingress: PortId, bytes: i64) {
        let sw = &mut self.switches[s as usize];
        sw.buffer_used = sw.buffer_used.checked_add_signed(bytes).expect("buffer accounting");
        sw.peak_buffer = sw.peak_buffer.max(sw.buffer_used);
        let used = sw.buffer_used;
        let e = &mut self.ports[egress as usize];
        e.queued_bytes = e.queued_bytes.checked_add_signed(bytes).expect("port accounting");
        let Some(pfc) = self.buffer.pfc else { return };
        let (xoff, xon) = pfc.at(self.buffer.buffer_bytes, used);
        let now = self.q.now();
        let i = &mut self.ports[ingress as usize];
        i.ingress_bytes = i.ingress_bytes.checked_add_signed(bytes).expect("ingress accounting");
        let send = if !i.pause_sent && i.ingress_bytes > xoff {
            i.stats.pfc_pauses_sent += 1;
            Some(true)
        } else if i.pause_sent && i.ingress_bytes <= xon {
            Some(false)
        } else {
            None
        };
        if let Some(paused) = send {
            i.pause_sent = paused;
            let at = now + i.delay + tx_time(CONTROL_FRAME_BYTES, i.rate_bps);
            self.counters.pfc_frames += 1;
            self.q.schedule(at, Event::Pfc { port: i.peer, paused });
        }
    }

    /// Handles what a discipline produced: drops (already accounted, so un-account them) and QCN
    /// notifications (sent to the flow's source over the reverse path).
    fn drain_outputs(&mut self, s: u32, egress: PortId, queue: u16) {
        while let Some(d) = self.out.drops.pop() {
            let id = d.packet.id;
            let p = *self.arena.get(id);
            self.account(s, egress, p.ingress, -i64::from(p.wire_bytes));
            let hp = self.hook_packet(id, egress, d.packet.meta);
            let sw = &mut self.switches[s as usize];
            sw.hook.on_dequeue(self.q.now(), &self.ports[egress as usize], queue, &hp, &mut self.controls);
            self.drop_packet(id, Some(egress), d.reason);
        }
        while let Some(n) = self.out.notifications.pop() {
            let flow = n.key;
            let src = self.flows[flow as usize].spec.src;
            let delay = self.control_delay(self.switches[s as usize].node, src, self.flows[flow as usize].hash);
            self.counters.cnms += 1;
            let clamp = |v: i64| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
            self.q.schedule(
                self.q.now() + delay,
                Event::Cnm { flow, qfb: n.qfb, q_off_bytes: clamp(n.q_off_bytes), q_delta_bytes: clamp(n.q_delta_bytes) },
            );
        }
    }

    fn hook_packet(&self, id: PacketId, egress: PortId, meta: HookMeta) -> HookPacket {
        let p = self.arena.get(id);
        HookPacket {
            id,
            flow: p.flow,
            hash: p.hash,
            wire_bytes: p.wire_bytes,
            upstream_q: p.upstream_q,
            priority: p.priority,
            ingress: p.ingress,
            egress,
            meta,
        }
    }

    /// Sends the queue pause/resume messages hooks produced to the upstream devices.
    fn send_controls(&mut self) {
        while let Some(c) = self.controls.pop() {
            let i = &self.ports[c.ingress as usize];
            let at = self.q.now() + i.delay + tx_time(CONTROL_FRAME_BYTES, i.rate_bps);
            self.counters.queue_controls += 1;
            self.q.schedule(at, Event::QueueControl { port: i.peer, queue: c.queue, paused: c.paused });
        }
    }

    fn on_queue_control(&mut self, port: PortId, queue: u16, paused: bool) {
        let node = self.ports[port as usize].node;
        match self.topo.nodes[node as usize] {
            NodeKind::Switch(_) => {
                self.ports[port as usize].set_queue_paused(usize::from(queue), paused);
                if !paused {
                    self.start_tx(port);
                }
            }
            NodeKind::Host(h) => self.host_queue_control(h, queue, paused),
        }
    }

    /// Control-message latency from switch node `from` to host `h`: propagation plus one
    /// minimum frame's serialization per hop, along the flow's ECMP path (high priority, so no
    /// queueing: dc.md §8 A26).
    fn control_delay(&self, from: NodeId, h: u32, hash: u32) -> Time {
        let mut node = from;
        let mut delay = 0;
        for _ in 0..self.topo.nodes.len() {
            let s = match self.topo.nodes[node as usize] {
                NodeKind::Host(_) => break,
                NodeKind::Switch(s) => s,
            };
            let hops = self.routes.next_hops(s, h);
            if hops.is_empty() {
                break;
            }
            let port = &self.ports[hops[(mix64(u64::from(hash) ^ u64::from(s)) % hops.len() as u64) as usize] as usize];
            delay += port.delay + tx_time(CONTROL_FRAME_BYTES, port.rate_bps);
            node = self.ports[port.peer as usize].node;
        }
        delay
    }

    /// Starts serializing the next packet on `port` if it is idle and not paused.
    pub(crate) fn start_tx(&mut self, port: PortId) {
        let p = &self.ports[port as usize];
        if p.busy || p.pfc_paused {
            return;
        }
        let node = p.node;
        let id = match self.topo.nodes[node as usize] {
            NodeKind::Host(h) => self.host_next_packet(h),
            NodeKind::Switch(s) => self.switch_dequeue(s, port),
        };
        let Some(id) = id else { return };
        let (wire, kind) = {
            let pk = self.arena.get(id);
            (pk.wire_bytes, pk.kind)
        };
        let p = &mut self.ports[port as usize];
        if kind == Kind::Data && matches!(self.topo.nodes[node as usize], NodeKind::Switch(_)) {
            // INT (HPCC §3.1): this egress's queue after the packet left, the bytes it sent
            // before it, the time and the rate; beyond MAX_INT_HOPS hops the record is full.
            if let Some(int) = self.arena.int_mut(id) {
                int.push(IntHop {
                    queue_bytes: p.queued_bytes,
                    tx_bytes: p.stats.tx_bytes,
                    ts_ns: to_ns(self.q.now()),
                    rate_bps: p.rate_bps,
                });
            }
        }
        let t = tx_time(wire, p.rate_bps);
        p.busy = true;
        p.stats.tx_bytes += u64::from(wire);
        p.stats.tx_packets += 1;
        let lost = kind == Kind::Data && p.loss.as_mut().is_some_and(|l| l.lose());
        let (peer, delay) = (p.peer, p.delay);
        self.q.after(t, Event::TxDone { port });
        if lost {
            self.counters.dropped_random += 1;
            self.arena.free(id);
        } else {
            self.q.after(t + delay, Event::Arrive { port: peer, packet: id });
        }
    }

    /// Takes the next packet from a switch port's queues, writing back what the discipline
    /// changed and releasing its buffer.
    fn switch_dequeue(&mut self, s: u32, port: PortId) -> Option<PacketId> {
        let now = self.q.now();
        let dequeued = self.ports[port as usize].dequeue(now, &mut self.out);
        self.drain_outputs(s, port, 0);
        let (queue, d) = dequeued?;
        if now >= self.warmup {
            if let Some(delays) = &mut self.ports[port as usize].stats.delays_ns {
                delays.push(to_ns(now).saturating_sub(d.enqueued_at).min(u64::from(u32::MAX)) as u32);
            }
        }
        let id = d.packet.id;
        let p = self.arena.get_mut(id);
        if d.packet.ecn == Ecn::Ce && p.ecn != Ecn::Ce {
            self.ports[port as usize].stats.marks += 1;
            self.counters.marks += 1;
        }
        p.ecn = d.packet.ecn;
        let (ingress, wire) = (p.ingress, p.wire_bytes);
        self.account(s, port, ingress, -i64::from(wire));
        let hp = self.hook_packet(id, port, d.packet.meta);
        let sw = &mut self.switches[s as usize];
        sw.hook.on_dequeue(now, &self.ports[port as usize], queue, &hp, &mut self.controls);
        self.arena.get_mut(id).upstream_q = queue;
        self.send_controls();
        Some(id)
    }

    /// Drops a packet, counting it against `port` when a switch port refused it.
    pub(crate) fn drop_packet(&mut self, id: PacketId, port: Option<PortId>, reason: DropReason) {
        if let Some(p) = port {
            self.ports[p as usize].stats.drops += 1;
        }
        match reason {
            DropReason::BufferFull => self.counters.dropped_buffer += 1,
            DropReason::Aqm => self.counters.dropped_aqm += 1,
        }
        self.arena.free(id);
    }

    /// Records monitored queues, link counters and switch buffers.
    fn sample(&mut self) {
        let now = self.q.now();
        self.samples.record(now, &self.ports, &self.switches);
        if now + self.samples.interval <= self.end {
            self.q.after(self.samples.interval, Event::Sample);
        }
    }

    /// What the hosts' pacers did, summed (`None` without `[pacer]`).
    pub fn pacer_stats(&self) -> Option<PacerStats> {
        let mut pacers = self.hosts.iter().filter_map(|h| h.pacer.as_ref()).peekable();
        pacers.peek()?;
        Some(pacers.fold(PacerStats::default(), |mut sum, p| {
            sum.add(p.stats());
            sum
        }))
    }

    /// Packets waiting in hosts' NIC queues, pacers and interrupt batches, for checks.
    pub fn host_nic_backlog(&self) -> usize {
        self.hosts.iter().map(|h| h.nic_fifo.len() + h.rx_batch.len() + h.pacer.as_ref().map_or(0, |p| p.held_packets())).sum()
    }
}
