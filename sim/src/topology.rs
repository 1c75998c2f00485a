//! Topologies and routing.
//!
//! A topology is a list of nodes (hosts and switches) and bidirectional links. Each link becomes
//! two ports, one at each end; a port is the egress of its node toward the peer, and the peer
//! port is where its packets arrive. Routing is shortest-path with ECMP: for every switch and
//! destination host, the set of egress ports on a shortest path, chosen per flow by hash.

use std::collections::VecDeque;

use crate::config::PairClass;
use crate::config::TopologyConfig;
use crate::time::{from_us, Time};
use crate::workload::Pairs;

pub type NodeId = u32;
pub type PortId = u32;

/// Gigabits per second to bits per second.
pub const BPS_PER_GBPS: f64 = 1e9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Index into the host list.
    Host(u32),
    /// Index into the switch list.
    Switch(u32),
}

/// One bidirectional link: same rate and propagation delay both ways.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    pub a: NodeId,
    pub b: NodeId,
    pub rate_bps: u64,
    pub delay: Time,
}

/// A built topology, before any simulation state.
#[derive(Debug, Clone)]
pub struct Topology {
    pub nodes: Vec<NodeKind>,
    pub names: Vec<String>,
    /// Node id of each host, by host index.
    pub hosts: Vec<NodeId>,
    /// Node id of each switch, by switch index.
    pub switches: Vec<NodeId>,
    pub links: Vec<LinkSpec>,
    /// Capacity that "load" is a fraction of, bits/s (see `RandomConfig::load`).
    pub load_reference_bps: f64,
    /// How random flows pick endpoints.
    pub pairs: Pairs,
    /// Ports sampled by default, by name.
    pub default_monitor: Vec<String>,
    /// A fat-tree's WAN edge: its border router, the hosts beyond it, and the capacities WAN
    /// and external loads refer to.
    pub edge: Option<Edge>,
}

/// A fat-tree's WAN edge, as random flows see it.
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    /// The border router, whose ports take `switch.border_qdisc`.
    pub border: NodeId,
    /// Hosts 0..dc_hosts are the datacenter's; the next `external_hosts` are beyond the border.
    pub dc_hosts: u32,
    pub external_hosts: u32,
    /// Capacity of the pods' links to the border router, bits/s (one direction).
    pub border_bps: f64,
    /// Capacity of the external hosts' links, bits/s (one direction).
    pub external_bps: f64,
}

impl Topology {
    fn add(&mut self, kind: NodeKind, name: String) -> NodeId {
        self.nodes.push(kind);
        self.names.push(name);
        (self.nodes.len() - 1) as NodeId
    }

    fn host(&mut self, name: String) -> NodeId {
        let id = self.add(NodeKind::Host(self.hosts.len() as u32), name);
        self.hosts.push(id);
        id
    }

    fn switch(&mut self, name: String) -> NodeId {
        let id = self.add(NodeKind::Switch(self.switches.len() as u32), name);
        self.switches.push(id);
        id
    }

    fn link(&mut self, a: NodeId, b: NodeId, gbps: f64, delay_us: f64) {
        self.links.push(LinkSpec { a, b, rate_bps: (gbps * BPS_PER_GBPS) as u64, delay: from_us(delay_us) });
    }

    fn empty() -> Topology {
        Topology {
            nodes: Vec::new(),
            names: Vec::new(),
            hosts: Vec::new(),
            switches: Vec::new(),
            links: Vec::new(),
            load_reference_bps: 0.0,
            pairs: Pairs::Any { hosts: 0 },
            default_monitor: Vec::new(),
            edge: None,
        }
    }

    /// Builds the topology a scenario declares.
    pub fn build(cfg: &TopologyConfig) -> Topology {
        let mut t = Topology::empty();
        match *cfg {
            TopologyConfig::Dumbbell {
                senders,
                receivers,
                host_gbps,
                host_delay_us,
                ref host_delays_us,
                bottleneck_gbps,
                bottleneck_delay_us,
            } => {
                let hosts: Vec<NodeId> = (0..senders + receivers).map(|i| t.host(format!("h{i}"))).collect();
                let left = t.switch("left".into());
                let right = t.switch("right".into());
                for (i, &h) in hosts.iter().enumerate() {
                    let sender = (i as u32) < senders;
                    let sw = if sender { left } else { right };
                    // The host's own delay when given (validated: one per sender, or one per host).
                    let delay = host_delays_us.as_ref().and_then(|d| d.get(i).copied()).unwrap_or(host_delay_us);
                    t.link(h, sw, host_gbps, delay);
                }
                t.link(left, right, bottleneck_gbps, bottleneck_delay_us);
                t.load_reference_bps = bottleneck_gbps * BPS_PER_GBPS;
                t.pairs = Pairs::LeftToRight { senders, receivers };
                t.default_monitor = vec!["left->right".into()];
            }
            TopologyConfig::Star { hosts, link_gbps, link_delay_us } => {
                let hs: Vec<NodeId> = (0..hosts).map(|i| t.host(format!("h{i}"))).collect();
                let sw = t.switch("sw0".into());
                for &h in &hs {
                    t.link(h, sw, link_gbps, link_delay_us);
                }
                t.load_reference_bps = f64::from(hosts) * link_gbps * BPS_PER_GBPS;
                t.pairs = Pairs::Any { hosts };
                t.default_monitor = (0..hosts).map(|i| format!("sw0->h{i}")).collect();
            }
            TopologyConfig::LeafSpine { tors, hosts_per_tor, spines, host_gbps, core_gbps, link_delay_us } => {
                let mut tor_ids = Vec::new();
                for r in 0..tors {
                    let hs: Vec<NodeId> = (0..hosts_per_tor).map(|i| t.host(format!("h{}", r * hosts_per_tor + i))).collect();
                    let tor = t.switch(format!("tor{r}"));
                    for h in hs {
                        t.link(h, tor, host_gbps, link_delay_us);
                    }
                    tor_ids.push(tor);
                }
                let spine_ids: Vec<NodeId> = (0..spines).map(|s| t.switch(format!("spine{s}"))).collect();
                for &tor in &tor_ids {
                    for &sp in &spine_ids {
                        t.link(tor, sp, core_gbps, link_delay_us);
                    }
                }
                t.load_reference_bps = f64::from(tors * spines) * core_gbps * BPS_PER_GBPS;
                t.pairs = Pairs::Any { hosts: tors * hosts_per_tor };
                t.default_monitor = vec!["tor0->h0".into(), "tor0->spine0".into(), "spine0->tor1".into()];
            }
            TopologyConfig::FatTree {
                pods,
                tors_per_pod,
                aggs_per_pod,
                hosts_per_tor,
                cores,
                link_gbps,
                host_delay_us,
                fabric_delay_us,
                ref external,
            } => {
                let core_ids: Vec<NodeId> = (0..cores).map(|c| t.switch(format!("core{c}"))).collect();
                let cores_per_agg = cores / aggs_per_pod;
                let mut pod_aggs = Vec::new();
                for p in 0..pods {
                    let aggs: Vec<NodeId> = (0..aggs_per_pod).map(|a| t.switch(format!("agg{p}.{a}"))).collect();
                    for r in 0..tors_per_pod {
                        let tor = t.switch(format!("tor{p}.{r}"));
                        let first = (p * tors_per_pod + r) * hosts_per_tor;
                        for i in 0..hosts_per_tor {
                            let h = t.host(format!("h{}", first + i));
                            t.link(h, tor, link_gbps, host_delay_us);
                        }
                        for &agg in &aggs {
                            t.link(tor, agg, link_gbps, fabric_delay_us);
                        }
                    }
                    for (a, &agg) in aggs.iter().enumerate() {
                        for &core in &core_ids[a * cores_per_agg as usize..][..cores_per_agg as usize] {
                            t.link(agg, core, link_gbps, fabric_delay_us);
                        }
                    }
                    pod_aggs.push(aggs);
                }
                let dc_hosts = pods * tors_per_pod * hosts_per_tor;
                t.load_reference_bps = f64::from(pods * aggs_per_pod * cores_per_agg) * link_gbps * BPS_PER_GBPS;
                t.pairs = Pairs::Any { hosts: dc_hosts };
                t.default_monitor = vec!["tor0.0->h0".into(), "tor0.0->agg0.0".into(), "agg0.0->core0".into()];
                if let Some(e) = external {
                    let border = t.switch("border".into());
                    for aggs in &pod_aggs {
                        for &agg in &aggs[..e.border_links_per_pod as usize] {
                            t.link(agg, border, link_gbps, fabric_delay_us);
                        }
                    }
                    let gbps = e.link_gbps.unwrap_or(link_gbps);
                    for i in 0..e.hosts {
                        let h = t.host(format!("e{i}"));
                        t.link(h, border, gbps, e.delay_us);
                    }
                    t.edge = Some(Edge {
                        border,
                        dc_hosts,
                        external_hosts: e.hosts,
                        border_bps: f64::from(pods * e.border_links_per_pod) * link_gbps * BPS_PER_GBPS,
                        external_bps: f64::from(e.hosts) * gbps * BPS_PER_GBPS,
                    });
                    t.default_monitor.extend(["agg0.0->border".into(), "border->e0".into()]);
                }
            }
        }
        t
    }

    /// How flows of `class` pick endpoints, and the capacity their `load` is a fraction of. With
    /// a `receiver` every flow goes to that host from any other, and the load is of its link.
    pub fn pairs_for(&self, class: Option<PairClass>, receiver: Option<u32>) -> Result<(Pairs, f64), String> {
        if let Some(receiver) = receiver {
            let Pairs::Any { hosts } = self.pairs else {
                return Err(
                    "receiver: needs a topology whose random flows run between any two hosts (star, leaf-spine, fat-tree)".into(),
                );
            };
            if receiver >= hosts || hosts < 2 {
                return Err(format!("receiver: must be one of the {hosts} hosts, with another to send"));
            }
            let node = self.hosts[receiver as usize];
            let link = self.links.iter().find(|l| l.a == node || l.b == node).ok_or("receiver: the host has no link")?;
            return Ok((Pairs::Into { hosts, receiver }, link.rate_bps as f64));
        }
        let edge = || self.edge.ok_or_else(|| "pairs: needs a topology with an external edge (`topology.external`)".to_string());
        Ok(match class {
            // A fat-tree's default pairs are its datacenter hosts already.
            None | Some(PairClass::Internal) => (self.pairs, self.load_reference_bps),
            Some(PairClass::Wan) => {
                let e = edge()?;
                (Pairs::Wan { dc_hosts: e.dc_hosts, external_hosts: e.external_hosts }, e.border_bps)
            }
            Some(PairClass::External) => {
                let e = edge()?;
                if e.external_hosts < 2 {
                    return Err("pairs: external pairs need at least 2 external hosts".into());
                }
                (Pairs::External { first: e.dc_hosts, hosts: e.external_hosts }, e.external_bps)
            }
        })
    }

    /// Whether node `n` may forward packets on their way to host node `dst`: not a host, nor the
    /// border router toward a datacenter host (the fabric's own paths carry its traffic; through
    /// the border, a path between two pods is as short as through a core).
    fn forwards_toward(&self, n: NodeId, dst: NodeId) -> bool {
        match self.nodes[n as usize] {
            NodeKind::Host(_) => false,
            NodeKind::Switch(_) => match (self.edge, self.nodes[dst as usize]) {
                (Some(e), NodeKind::Host(h)) if e.border == n => h >= e.dc_hosts,
                _ => true,
            },
        }
    }

    /// Hop distance from every node to `dst` over nodes that forward toward it.
    fn distances_to(&self, dst: NodeId, adjacency: &[Vec<NodeId>]) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.nodes.len()];
        dist[dst as usize] = 0;
        let mut q = VecDeque::from([dst]);
        while let Some(n) = q.pop_front() {
            if n != dst && !self.forwards_toward(n, dst) {
                continue;
            }
            for &m in &adjacency[n as usize] {
                if dist[m as usize] == u32::MAX {
                    dist[m as usize] = dist[n as usize] + 1;
                    q.push_back(m);
                }
            }
        }
        dist
    }
}

/// Per-switch, per-destination ECMP next hops, as egress port lists.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    hosts: usize,
    /// `starts[s * hosts + h] .. starts[s * hosts + h + 1]` indexes `ports`.
    starts: Vec<u32>,
    ports: Vec<PortId>,
}

impl Routes {
    /// Computes routes given, per node, its ports as (port id, peer node).
    pub fn compute(topo: &Topology, node_ports: &[Vec<(PortId, NodeId)>]) -> Routes {
        let adjacency: Vec<Vec<NodeId>> = node_ports.iter().map(|ps| ps.iter().map(|&(_, n)| n).collect()).collect();
        let hosts = topo.hosts.len();
        let mut next: Vec<Vec<Vec<PortId>>> = vec![vec![Vec::new(); hosts]; topo.switches.len()];
        for (h, &dst) in topo.hosts.iter().enumerate() {
            let dist = topo.distances_to(dst, &adjacency);
            for (s, &sw) in topo.switches.iter().enumerate() {
                let d = dist[sw as usize];
                if d == u32::MAX {
                    continue;
                }
                next[s][h] = node_ports[sw as usize]
                    .iter()
                    .filter(|&&(_, peer)| {
                        dist[peer as usize] != u32::MAX
                            && dist[peer as usize] + 1 == d
                            && (peer == dst || topo.forwards_toward(peer, dst))
                    })
                    .map(|&(p, _)| p)
                    .collect();
            }
        }
        let mut r = Routes { hosts, starts: vec![0], ports: Vec::new() };
        for per_switch in next {
            for ports in per_switch {
                r.ports.extend(ports);
                r.starts.push(r.ports.len() as u32);
            }
        }
        r
    }

    /// The egress ports of switch `s` toward host `h` (empty when unreachable).
    pub fn next_hops(&self, s: u32, h: u32) -> &[PortId] {
        let i = s as usize * self.hosts + h as usize;
        &self.ports[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per node, its ports as (port id, peer), numbered as the simulator numbers them.
    pub(super) fn ports_of(t: &Topology) -> Vec<Vec<(PortId, NodeId)>> {
        let mut np = vec![Vec::new(); t.nodes.len()];
        for (i, l) in t.links.iter().enumerate() {
            np[l.a as usize].push((2 * i as PortId, l.b));
            np[l.b as usize].push((2 * i as PortId + 1, l.a));
        }
        np
    }

    #[test]
    fn a_fixed_receiver_takes_its_own_link_as_the_load_reference() {
        let star = Topology::build(&TopologyConfig::Star { hosts: 10, link_gbps: 1.0, link_delay_us: 25.0 });
        assert_eq!(star.pairs_for(None, None).unwrap(), (Pairs::Any { hosts: 10 }, 10e9), "all host links");
        assert_eq!(star.pairs_for(None, Some(4)).unwrap(), (Pairs::Into { hosts: 10, receiver: 4 }, 1e9), "h4's link");
        assert!(star.pairs_for(None, Some(10)).unwrap_err().contains("one of the 10 hosts"));
        let dumbbell = Topology::build(&TopologyConfig::Dumbbell {
            senders: 2,
            receivers: 2,
            host_gbps: 10.0,
            host_delay_us: 1.0,
            host_delays_us: None,
            bottleneck_gbps: 1.0,
            bottleneck_delay_us: 5.0,
        });
        let e = dumbbell.pairs_for(None, Some(3)).unwrap_err();
        assert!(e.starts_with("receiver: ") && e.contains("any two hosts"), "{e}");
    }

    #[test]
    fn leaf_spine_has_ecmp_across_every_spine() {
        let cfg = TopologyConfig::LeafSpine {
            tors: 8,
            hosts_per_tor: 16,
            spines: 8,
            host_gbps: 100.0,
            core_gbps: 100.0,
            link_delay_us: 1.0,
        };
        let t = Topology::build(&cfg);
        assert_eq!((t.hosts.len(), t.switches.len(), t.links.len()), (128, 16, 128 + 64));
        let r = Routes::compute(&t, &ports_of(&t));
        // ToR 0 to a host in rack 3: 8 uplinks; to its own host: one port.
        assert_eq!(r.next_hops(0, 3 * 16).len(), 8);
        assert_eq!(r.next_hops(0, 5).len(), 1);
        // A spine to any host: one downlink.
        assert_eq!(r.next_hops(8, 100).len(), 1);
        assert_eq!(t.load_reference_bps, 64.0 * 100e9);
    }

    #[test]
    fn dumbbell_routes_through_the_bottleneck() {
        let cfg = TopologyConfig::Dumbbell {
            senders: 2,
            receivers: 3,
            host_gbps: 10.0,
            host_delay_us: 1.0,
            host_delays_us: None,
            bottleneck_gbps: 1.0,
            bottleneck_delay_us: 5.0,
        };
        let t = Topology::build(&cfg);
        let np = ports_of(&t);
        let r = Routes::compute(&t, &np);
        let bottleneck = 2 * (t.links.len() as PortId - 1);
        assert_eq!(r.next_hops(0, 4), &[bottleneck]);
        assert_eq!(r.next_hops(1, 0), &[bottleneck + 1]);
    }

    #[test]
    fn dumbbell_hosts_can_have_their_own_delay() {
        let cfg = |host_delays_us| TopologyConfig::Dumbbell {
            senders: 2,
            receivers: 1,
            host_gbps: 10.0,
            host_delay_us: 1.0,
            host_delays_us,
            bottleneck_gbps: 1.0,
            bottleneck_delay_us: 5.0,
        };
        let delays = |t: Topology| t.links.iter().map(|l| l.delay).collect::<Vec<_>>();
        assert_eq!(delays(Topology::build(&cfg(None))), [from_us(1.0), from_us(1.0), from_us(1.0), from_us(5.0)]);
        assert_eq!(
            delays(Topology::build(&cfg(Some(vec![2.0, 500.0])))),
            [from_us(2.0), from_us(500.0), from_us(1.0), from_us(5.0)],
            "senders get their own delays, the receiver keeps host_delay_us"
        );
        assert_eq!(
            delays(Topology::build(&cfg(Some(vec![2.0, 3.0, 4000.0])))),
            [from_us(2.0), from_us(3.0), from_us(4000.0), from_us(5.0)],
            "one per host: the receiver's too"
        );
    }
}

#[cfg(test)]
mod fat_tree_tests {
    use super::tests::ports_of;
    use super::*;
    use crate::config::ExternalEdge;

    /// The annulus.md §9.4 fabric: 4 pods × (4 ToRs × 8 hosts, 4 aggregation switches), 8 cores.
    fn annulus_fabric(external: Option<ExternalEdge>) -> TopologyConfig {
        TopologyConfig::FatTree {
            pods: 4,
            tors_per_pod: 4,
            aggs_per_pod: 4,
            hosts_per_tor: 8,
            cores: 8,
            link_gbps: 10.0,
            host_delay_us: 1.0,
            fabric_delay_us: 1.25,
            external,
        }
    }

    fn switch(t: &Topology, name: &str) -> u32 {
        let node = t.names.iter().position(|n| n == name).unwrap() as NodeId;
        match t.nodes[node as usize] {
            NodeKind::Switch(s) => s,
            NodeKind::Host(_) => panic!("{name} is a host"),
        }
    }

    fn peers(t: &Topology, np: &[Vec<(PortId, NodeId)>], sw: &str, ports: &[PortId]) -> Vec<String> {
        let node = t.switches[switch(t, sw) as usize];
        let mut names: Vec<String> = ports
            .iter()
            .map(|p| {
                let &(_, peer) = np[node as usize].iter().find(|(q, _)| q == p).unwrap();
                t.names[peer as usize].clone()
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_fat_tree_oversubscribes_four_to_one_and_spreads_over_its_cores() {
        let t = Topology::build(&annulus_fabric(None));
        // 128 hosts; 8 cores + 4 × (4 aggregation + 4 ToR) switches; host, ToR–agg and agg–core links.
        assert_eq!((t.hosts.len(), t.switches.len(), t.links.len()), (128, 40, 128 + 64 + 32));
        assert_eq!(t.load_reference_bps, 32.0 * 10e9, "the aggregation–core capacity");
        let np = ports_of(&t);
        let r = Routes::compute(&t, &np);
        // A ToR to a host of another pod: all 4 aggregation switches; that agg to its 2 cores.
        assert_eq!(peers(&t, &np, "tor0.0", r.next_hops(switch(&t, "tor0.0"), 40)), ["agg0.0", "agg0.1", "agg0.2", "agg0.3"]);
        assert_eq!(peers(&t, &np, "agg0.1", r.next_hops(switch(&t, "agg0.1"), 40)), ["core2", "core3"]);
        // Within the pod, never up to a core.
        assert_eq!(peers(&t, &np, "agg0.1", r.next_hops(switch(&t, "agg0.1"), 9)), ["tor0.1"]);
        assert_eq!(peers(&t, &np, "core3", r.next_hops(switch(&t, "core3"), 40)), ["agg1.1"]);
    }

    #[test]
    fn the_border_router_carries_only_wan_traffic() {
        let edge = ExternalEdge { hosts: 8, border_links_per_pod: 2, link_gbps: None, delay_us: 10_000.0 };
        let t = Topology::build(&annulus_fabric(Some(edge)));
        assert_eq!(t.hosts.len(), 136);
        assert_eq!(t.names[t.hosts[128] as usize], "e0");
        let e = t.edge.unwrap();
        assert_eq!((e.dc_hosts, e.external_hosts, e.border_bps, e.external_bps), (128, 8, 80e9, 80e9));
        let np = ports_of(&t);
        let r = Routes::compute(&t, &np);
        // Between pods through the cores only, although the border is as few hops away.
        assert_eq!(peers(&t, &np, "agg0.0", r.next_hops(switch(&t, "agg0.0"), 40)), ["core0", "core1"]);
        // Out of the datacenter through the pod's border-linked aggregation switches.
        assert_eq!(peers(&t, &np, "tor0.0", r.next_hops(switch(&t, "tor0.0"), 128)), ["agg0.0", "agg0.1"]);
        assert_eq!(peers(&t, &np, "agg0.0", r.next_hops(switch(&t, "agg0.0"), 130)), ["border"]);
        // In from the edge straight to the destination's pod.
        assert_eq!(peers(&t, &np, "border", r.next_hops(switch(&t, "border"), 40)), ["agg1.0", "agg1.1"]);
        let delay_to = |name: &str| t.links.iter().find(|l| t.names[l.a as usize] == name).unwrap().delay;
        assert_eq!(delay_to("e3"), from_us(10_000.0));
    }
}
