//! BFC (backpressure flow control) on ccp-sim switches: a [`SwitchHook`] that runs the
//! behavioural model of the P4 pipeline (`ccp-bfc-model`, the same registers and tables as
//! `p4-bfc/bfc_tna.p4`) on every packet. specs/bfc.md §5 (dynamic queue assignment), §6 (pause
//! counters and threshold), §12.1 (what the switch datapath provides); thesis Chapter 3.
//!
//! Mapping onto the simulator:
//! - `classify` runs the model's enqueue side (queue assignment, Th comparison, pause counter);
//!   `on_dequeue` runs the dequeue side. Of the model's per-packet metadata only the queue and
//!   the counterIncr bit travel with the packet through the queue ([`HookMeta`]): the rest
//!   (flow-table index, ports, length, upstream queue) are the packet's own fields, which the
//!   packet still has at departure, and are read back from it.
//!   The PAUSE it may produce is handed over in `on_enqueue`, which follows immediately.
//! - The simulator applies pause/resume messages to the upstream's queue flags itself and
//!   rewrites `upstream_q` at departure, so before each packet the model's `paused_q` register is
//!   refreshed from the egress queues' flags (what Tofino2's AFC state is to the P4).
//! - Control messages are never lost here, so the periodic bitmap (§6.3) is not sent; the model
//!   implements it, and its tests cover the repair of a lost RESUME.
//! - The model's pause counters have `UPSTREAM_Q_SLOTS` slots per ingress, and a NIC queue id at
//!   or above that would alias onto slot id mod slots, whose pause names the slot: such a queue
//!   could never be paused. So [`install`] gives hosts that many NIC queue ids: a flow gets its own
//!   queue while the host has fewer concurrent flows, and shares one beyond (Google's RPCs with
//!   incast reach ~960 per host).
//! - A scenario selects BFC with a `[switch.bfc]` table ([`crate::config::BfcConfig`]): building
//!   the [`Sim`] then runs [`install`], which puts BFC on every switch (by hand:
//!   [`Sim::set_switch_hook`]).

use ccp_bfc_model::{
    Bfc, BfcHeader, BfcMeta, Control, IngressPacket, CTRL_PAUSE, MAX_QUEUES_PER_PORT, NUM_PORTS, STICKY_NS, UPSTREAM_Q_SLOTS,
};

use crate::hook::{HookMeta, HookPacket, QueueControl, SwitchHook};
use crate::switch::Port;
use crate::time::{Time, PS_PER_NS};
use crate::topology::PortId;
use crate::Sim;

/// `BfcHook::local_of` for a port of another switch.
const NOT_LOCAL: u8 = u8::MAX;

/// BFC settings for one switch.
#[derive(Debug, Clone, Copy)]
pub struct BfcParams {
    /// Th multiplier in thousandths: 1000 = thesis, 1500 = artifact (§16.1).
    pub th_multiplier_permille: u32,
    /// Minimum idle time before a drained flow-table entry may move, ns (§16.8).
    pub sticky_ns: u32,
    /// 1-hop RTT for Th, ns; `None` = twice the longest propagation delay among the switch's
    /// links (the max over ingresses, §6.4, with no separate pipeline delay as in the thesis sim).
    pub hrtt_ns: Option<u64>,
    /// Seeds the model's queue-choice PRNG (mixed with the switch index).
    pub seed: u64,
}

impl BfcParams {
    /// The settings of a scenario's `[switch.bfc]` table; `seed` is the scenario's.
    pub fn from_config(c: &crate::config::BfcConfig, seed: u64) -> BfcParams {
        BfcParams {
            th_multiplier_permille: (c.th_multiplier * 1000.0).round() as u32,
            sticky_ns: c.sticky_ns,
            hrtt_ns: c.hrtt_ns,
            seed,
        }
    }
}

impl Default for BfcParams {
    fn default() -> Self {
        BfcParams { th_multiplier_permille: 1000, sticky_ns: STICKY_NS, hrtt_ns: None, seed: 1 }
    }
}

/// The BFC pipeline of one switch.
pub struct BfcHook {
    model: Bfc,
    /// Device port (simulator `PortId`) of each local port index.
    ports: Vec<PortId>,
    /// Local port index by device port ([`NOT_LOCAL`] for other switches' ports): the model's
    /// `port_index` table as a direct array, since it is consulted twice per packet.
    local_of: Vec<u8>,
    /// Controls produced in `classify`, delivered from `on_enqueue`.
    pending: Vec<Control>,
    scratch: Vec<Control>,
}

impl BfcHook {
    /// The hook for switch index `switch` of `sim`: every port of the switch goes into
    /// `port_index`, and each egress gets its `th_table` row for its own rate.
    pub fn new(sim: &Sim, switch: usize, params: &BfcParams) -> Result<BfcHook, String> {
        let node = *sim.topo.switches.get(switch).ok_or_else(|| format!("no switch {switch}"))?;
        let ports: Vec<PortId> = sim.ports.iter().enumerate().filter(|(_, p)| p.node == node).map(|(i, _)| i as PortId).collect();
        if ports.len() > NUM_PORTS as usize {
            return Err(format!("switch {switch} has {} ports; the BFC pipeline holds {NUM_PORTS}", ports.len()));
        }
        let queues = ports.iter().map(|&p| sim.ports[p as usize].queues().len()).min().unwrap_or(1);
        let data_queues = (queues as u32).clamp(1, MAX_QUEUES_PER_PORT);
        let seed = params.seed ^ (switch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut model = Bfc::new(data_queues, params.sticky_ns, seed);
        let hrtt_ns = params
            .hrtt_ns
            .unwrap_or_else(|| 2 * ports.iter().map(|&p| sim.ports[p as usize].delay).max().unwrap_or(0) / PS_PER_NS);
        for &p in &ports {
            let local = model.add_port(p).expect("checked against NUM_PORTS");
            model.install_th_row(local, hrtt_ns, sim.ports[p as usize].rate_bps, params.th_multiplier_permille);
        }
        let mut local_of = vec![NOT_LOCAL; sim.ports.len()];
        for &p in &ports {
            local_of[p as usize] = model.local_port(p).expect("added above");
        }
        Ok(BfcHook { model, ports, local_of, pending: Vec::new(), scratch: Vec::new() })
    }

    /// The model, for inspection.
    pub fn model(&self) -> &Bfc {
        &self.model
    }

    fn local(&self, port: PortId) -> u8 {
        let l = self.local_of[port as usize];
        assert_ne!(l, NOT_LOCAL, "port {port} is not a port of this switch");
        l
    }

    fn to_queue_control(&self, c: &Control) -> QueueControl {
        QueueControl { ingress: self.ports[usize::from(c.port)], queue: c.hdr.upstream_q, paused: c.hdr.op == CTRL_PAUSE }
    }
}

/// What the model's enqueue side sees of `packet`, arriving on local port `ingress` for `egress`.
fn ingress_packet(packet: &HookPacket, ingress: u8, egress: u8) -> IngressPacket {
    IngressPacket {
        ingress_port: ingress,
        egress_port: egress,
        flow_hash: packet.hash,
        bfc: BfcHeader { upstream_q: packet.upstream_q, ether_type: 0x0800 },
        len_bytes: packet.wire_bytes,
    }
}

/// What travels with a packet: its queue (bits 0-7) and counterIncr (bit 8).
fn pack(meta: &BfcMeta) -> HookMeta {
    HookMeta::from(meta.qid) | HookMeta::from(meta.counter_incr) << 8
}

/// The metadata `ingress` returned for `packet`, from the packet and what travelled with it.
fn unpack(model: &Bfc, packet: &HookPacket, ingress_port: u8, egress_port: u8, bits: HookMeta) -> BfcMeta {
    BfcMeta {
        flow_idx: model.flow_index(egress_port, packet.hash),
        qid: bits as u8,
        upstream_q_in: packet.upstream_q,
        counter_incr: bits >> 8 & 1 == 1,
        ingress_port,
        egress_port,
        len_bytes: packet.wire_bytes,
    }
}

/// Installs BFC on every switch of `sim`, and limits each host to as many NIC queue ids as its
/// first-hop switch has pause counters for one ingress.
pub fn install(sim: &mut Sim, params: &BfcParams) -> Result<(), String> {
    for s in 0..sim.topo.switches.len() {
        let hook = BfcHook::new(sim, s, params)?;
        sim.set_switch_hook(s, Box::new(hook));
    }
    sim.set_nic_queues(UPSTREAM_Q_SLOTS as u16);
    Ok(())
}

impl SwitchHook for BfcHook {
    fn classify(&mut self, now: Time, egress: &Port, packet: &HookPacket) -> (u16, HookMeta) {
        let (ingress, eg) = (self.local(packet.ingress), self.local(packet.egress));
        let paused = egress.paused_queues();
        self.model.set_paused_queues(eg, u128::from(paused.word(0)) | u128::from(paused.word(1)) << 64);
        let meta = self.model.ingress(now / PS_PER_NS, &ingress_packet(packet, ingress, eg), &mut self.pending);
        (u16::from(meta.qid), pack(&meta))
    }

    fn on_enqueue(&mut self, _now: Time, _egress: &Port, _queue: u16, _packet: &HookPacket, controls: &mut Vec<QueueControl>) {
        for c in std::mem::take(&mut self.pending) {
            controls.push(self.to_queue_control(&c));
        }
    }

    fn on_dequeue(&mut self, now: Time, _egress: &Port, _queue: u16, packet: &HookPacket, controls: &mut Vec<QueueControl>) {
        let (ingress, eg) = (self.local(packet.ingress), self.local(packet.egress));
        let meta = unpack(&self.model, packet, ingress, eg, packet.meta);
        let hdr = BfcHeader { upstream_q: packet.upstream_q, ether_type: 0x0800 };
        let mut out = std::mem::take(&mut self.scratch);
        self.model.egress(now / PS_PER_NS, &meta, hdr, &mut out);
        for c in out.drain(..) {
            controls.push(self.to_queue_control(&c));
        }
        self.scratch = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metadata read back at departure is what the model's enqueue side returned.
    #[test]
    fn metadata_survives_the_trip_through_the_queue() {
        let mut model = Bfc::new(31, STICKY_NS, 7);
        for p in 0..4 {
            model.add_port(p);
            model.install_th_row(p as u8, 2_000, 100_000_000_000, 1000);
        }
        let mut controls = Vec::new();
        for i in 0..200u32 {
            let hook = HookPacket {
                id: i,
                flow: i % 7,
                hash: (i % 7).wrapping_mul(0x9e37_79b9),
                wire_bytes: 1000 + i,
                upstream_q: (i % 5) as u16,
                priority: 0,
                ingress: i % 4,
                egress: (i + 1) % 4,
                meta: 0,
            };
            let (ing, eg) = (hook.ingress as u8, hook.egress as u8);
            let meta = model.ingress(u64::from(i) * 100, &ingress_packet(&hook, ing, eg), &mut controls);
            assert_eq!(unpack(&model, &hook, ing, eg, pack(&meta)), meta);
        }
        assert!(controls.iter().any(|c| c.hdr.op == CTRL_PAUSE), "some packets set counterIncr");
    }
}
