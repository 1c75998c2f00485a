//! Topologies and routing.
//!
//! A topology is a list of nodes (hosts and switches) and bidirectional links. Each link becomes
//! two ports, one at each end; a port is the egress of its node toward the peer, and the peer
//! port is where its packets arrive. Routing is shortest-path with ECMP: for every switch and
//! destination host, the set of egress ports on a shortest path, chosen per flow by hash.

use std::collections::VecDeque;

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
        }
        t
    }

    /// Hop distance from every node to `dst`, not forwarding through hosts.
    fn distances_to(&self, dst: NodeId, adjacency: &[Vec<NodeId>]) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.nodes.len()];
        dist[dst as usize] = 0;
        let mut q = VecDeque::from([dst]);
        while let Some(n) = q.pop_front() {
            if n != dst && matches!(self.nodes[n as usize], NodeKind::Host(_)) {
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
                    .filter(|&&(_, peer)| dist[peer as usize] != u32::MAX && dist[peer as usize] + 1 == d)
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

    fn ports_of(t: &Topology) -> Vec<Vec<(PortId, NodeId)>> {
        let mut np = vec![Vec::new(); t.nodes.len()];
        for (i, l) in t.links.iter().enumerate() {
            np[l.a as usize].push((2 * i as PortId, l.b));
            np[l.b as usize].push((2 * i as PortId + 1, l.a));
        }
        np
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
