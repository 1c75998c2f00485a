//! The transport's events: flows starting, NICs pulling packets, data and ACKs arriving,
//! delayed-ACK, retransmission and pacing timers, and BFC's per-queue pause.

use ccp_contract::{FlowStart, NetworkFeedback, Urgent};
use ccp_qdisc::Ecn;

use super::*;
use crate::cc::{rate, AckSample};
use crate::event::Event;
use crate::pacer::Admit;
use crate::packet::{Kind, Packet, NO_SACK};
use crate::sim::Sim;
use crate::time::to_us;

impl Sim {
    pub(crate) fn flow_start(&mut self, f: FlowId) {
        let now = self.q.now();
        let tp = self.tp;
        let choice = self.choice_for(&self.flows[f as usize].spec).clone();
        let flow = &mut self.flows[f as usize];
        flow.started = true;
        let src = flow.spec.src;
        let snd = Sender::new(&flow.spec, &tp, now);
        let start =
            FlowStart { now_us: to_us(now), mss_bytes: tp.mss, init_cwnd_bytes: snd.cwnd_bytes, ecn: Some(tp.ecn), seed: None };
        let (mut cc, init) = FlowCc::start(choice, self.fallback.clone(), self.ccp.limits.clone(), &start, now);
        cc.initial_rtt = self.ccp.initial_rtt;
        let nic_queue = self.free_nic_queue(src);
        let flow = &mut self.flows[f as usize];
        let host = &mut self.hosts[src as usize];
        host.senders.push(f);
        flow.state = Some(Box::new(FlowState { snd, rcv: Receiver::default(), cc, nic_queue, in_ready: false }));
        self.count_outcome(&init);
        self.deliver(f, init.command);
        if !self.ccp.per_ack {
            self.arm_report_timer(f);
        }
        self.wake(f);
    }

    /// The NIC queue for a new flow of host `h`: per-flow queues (specs/bfc.md §7), so the
    /// lowest id no live flow of the host holds, preferring one the first-hop switch does not
    /// have paused (a finished flow's queue can stay paused until its packets leave the switch).
    /// When every one of the host's `nic_queues` ids is taken (a host with more concurrent flows
    /// than the switch has pause counters for it), the flow shares the unpaused queue with the
    /// fewest flows (else the paused one with the fewest): a pause then stops every flow it
    /// should, where an id past the switch's counters could never be paused and its flow kept
    /// sending into a full buffer.
    fn free_nic_queue(&self, h: u32) -> u16 {
        let host = &self.hosts[h as usize];
        let mut used: Vec<u16> =
            host.senders.iter().filter_map(|&x| self.flows[x as usize].state.as_ref().map(|s| s.nic_queue)).collect();
        used.sort_unstable();
        let free = |q: &u16| used.binary_search(q).is_err();
        let mut first_free = None;
        for q in 0..host.nic_queues {
            if free(&q) {
                if !host.is_paused(q) {
                    return q;
                }
                first_free.get_or_insert(q);
            }
        }
        if let Some(q) = first_free {
            return q;
        }
        // Every id is taken: `used` is sorted, so its runs are the queues and their flow counts.
        let mut best: Option<(bool, usize, u16)> = None;
        for run in used.chunk_by(|a, b| a == b) {
            let key = (host.is_paused(run[0]), run.len(), run[0]);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best.map_or(0, |(_, _, q)| q)
    }

    /// Makes `f` eligible to send and kicks its host's NIC.
    pub(super) fn wake(&mut self, f: FlowId) {
        if let Some(nic) = self.make_ready(f) {
            self.start_tx(nic);
        }
    }

    /// Puts `f` on its host's ready list unless it is there or done; returns the host's NIC when
    /// it did (the caller kicks it, unless it is choosing the NIC's next packet right now).
    fn make_ready(&mut self, f: FlowId) -> Option<PortId> {
        let flow = &mut self.flows[f as usize];
        let st = flow.state.as_mut()?;
        if flow.sender_done || st.in_ready {
            return None;
        }
        st.in_ready = true;
        let host = &mut self.hosts[flow.spec.src as usize];
        host.ready.push_back(f);
        Some(host.nic)
    }

    /// The next packet host `h`'s NIC sends: the head of its queue (ACKs and what the pacer
    /// released), else a segment of the next ready flow. A segment of a flow the pacer has
    /// associated enters the pacer instead, and the search goes on.
    pub(crate) fn host_next_packet(&mut self, h: u32) -> Option<PacketId> {
        let now = self.q.now();
        let max_wire = self.tp.mss + self.tp.header + self.tp.int_overhead;
        self.advance_pacer(h);
        loop {
            if let Some(id) = self.hosts[h as usize].nic_fifo.pop_front() {
                return Some(id);
            }
            let f = self.hosts[h as usize].ready.pop_front()?;
            let host = &mut self.hosts[h as usize];
            let paced = host.pacer.as_mut().is_some_and(|p| p.associated(f, now));
            if let Some(p) = host.pacer.as_mut().filter(|_| paced) {
                match p.admit(now, max_wire) {
                    Admit::Now => {}
                    Admit::At(t) => {
                        self.blocked(f, Blocked::Pacing(t));
                        continue;
                    }
                    Admit::Full => {
                        p.waiting.push(f);
                        self.blocked(f, Blocked::Paused);
                        continue;
                    }
                }
            }
            match self.try_send(f) {
                Ok(id) if !paced => {
                    self.hosts[h as usize].ready.push_back(f);
                    return Some(id);
                }
                Ok(id) => {
                    let wire = self.arena.get(id).wire_bytes;
                    let host = &mut self.hosts[h as usize];
                    host.ready.push_back(f);
                    let mut released = std::mem::take(&mut self.pacer_released);
                    host.pacer.as_mut().expect("paced").enter(now, f, id, wire, &mut released);
                    host.nic_fifo.extend(released.drain(..));
                    self.pacer_released = released;
                    self.arm_pacer(h);
                }
                Err(why) => self.blocked(f, why),
            }
        }
    }

    /// `f` cannot send now: it leaves the ready list until what stopped it changes.
    fn blocked(&mut self, f: FlowId, why: Blocked) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.in_ready = false;
        match why {
            Blocked::Pacing(at) if !st.snd.pace_armed => {
                st.snd.pace_armed = true;
                self.q.schedule(at.max(now), Event::Pace { flow: f });
            }
            Blocked::NoData if st.snd.pipe_bytes < st.snd.cwnd_bytes => st.cc.note_app_limited(),
            Blocked::Window => st.cc.note_cwnd_limited(),
            _ => {}
        }
    }

    /// Brings host `h`'s pacer up to now: what it releases joins the NIC's queue, flows that
    /// waited for room in it are ready again (the caller kicks the NIC), and its next tick or
    /// update is scheduled.
    fn advance_pacer(&mut self, h: u32) {
        let now = self.q.now();
        let max_wire = self.tp.mss + self.tp.header + self.tp.int_overhead;
        let host = &mut self.hosts[h as usize];
        let Some(p) = host.pacer.as_mut() else { return };
        let mut released = std::mem::take(&mut self.pacer_released);
        p.advance(now, &mut released);
        host.nic_fifo.extend(released.drain(..));
        self.pacer_released = released;
        let waiting = if p.has_room(max_wire) { std::mem::take(&mut p.waiting) } else { Vec::new() };
        for f in waiting {
            self.make_ready(f);
        }
        self.arm_pacer(h);
    }

    fn arm_pacer(&mut self, h: u32) {
        let Some(p) = self.hosts[h as usize].pacer.as_mut() else { return };
        if let Some(t) = p.next_event() {
            if p.armed.is_none_or(|a| a > t) {
                p.armed = Some(t);
                self.q.schedule(t, Event::Pacer { host: h });
            }
        }
    }

    /// Host `h`'s pacer has a tick or rate update due.
    pub(crate) fn on_pacer_timer(&mut self, h: u32) {
        let now = self.q.now();
        let host = &mut self.hosts[h as usize];
        if let Some(p) = host.pacer.as_mut().filter(|p| p.armed == Some(now)) {
            p.armed = None;
        }
        let nic = host.nic;
        self.advance_pacer(h);
        self.start_tx(nic);
    }

    /// Builds and returns flow `f`'s next data packet, if it may send.
    fn try_send(&mut self, f: FlowId) -> Result<PacketId, Blocked> {
        let now = self.q.now();
        let tp = self.tp;
        let flow = &mut self.flows[f as usize];
        let st = flow.state.as_mut().ok_or(Blocked::NoData)?;
        if self.hosts[flow.spec.src as usize].is_paused(st.nic_queue) {
            return Err(Blocked::Paused);
        }
        let (seg, retx) = st.snd.next_segment(now, tp.mss)?;
        let payload = st.snd.payload(seg, tp.mss);
        let wire = payload + tp.header + tp.int_overhead;
        st.snd.on_transmit(seg, retx, now, tp.mss, wire);
        if retx {
            flow.retransmits += 1;
            self.counters.retransmits += 1;
        }
        if st.snd.rto_deadline.is_none() {
            let deadline = now + st.snd.rto;
            st.snd.rto_deadline = Some(deadline);
            if st.snd.rto_event.is_none_or(|e| e > deadline) {
                st.snd.rto_event = Some(deadline);
                self.q.schedule(deadline, Event::Rto { flow: f });
            }
        }
        let packet = Packet {
            kind: Kind::Data,
            ecn: if tp.ecn { Ecn::Ect0 } else { Ecn::NotEct },
            ece: false,
            upstream_q: st.nic_queue,
            priority: flow.spec.priority,
            flow: f,
            src: self.topo.hosts[flow.spec.src as usize],
            dst: self.topo.hosts[flow.spec.dst as usize],
            seq: seg,
            sack: NO_SACK,
            wire_bytes: wire,
            payload_bytes: payload,
            ts: now,
            ingress: 0,
            hash: flow.hash,
        };
        self.counters.injected += 1;
        self.counters.data_packets += 1;
        Ok(self.arena.alloc(packet))
    }

    /// A packet reached host `h`: handled now, or at the end of the host's interrupt-coalescing
    /// interval (which it starts if none is running).
    pub(crate) fn host_receive(&mut self, h: u32, id: PacketId) {
        if self.tp.rx_coalesce > 0 {
            let host = &mut self.hosts[h as usize];
            if host.rx_batch.is_empty() {
                self.q.after(self.tp.rx_coalesce, Event::RxInterrupt { host: h });
            }
            host.rx_batch.push(id);
            return;
        }
        self.handle_received(id);
    }

    /// Host `h`'s interrupt: its stack takes what arrived since the interval began, in order.
    pub(crate) fn on_rx_interrupt(&mut self, h: u32) {
        let batch = std::mem::take(&mut self.hosts[h as usize].rx_batch);
        for &id in &batch {
            self.handle_received(id);
        }
        let mut batch = batch;
        batch.clear();
        let host = &mut self.hosts[h as usize];
        if host.rx_batch.is_empty() {
            host.rx_batch = batch;
        }
    }

    /// The host's stack takes a packet that reached it.
    fn handle_received(&mut self, id: PacketId) {
        let p = *self.arena.get(id);
        let int = self.arena.int_on().then(|| self.arena.int(id));
        self.arena.free(id);
        self.counters.delivered += 1;
        if let Some(int) = int {
            self.take_int(&p, int);
        }
        match p.kind {
            Kind::Data => self.on_data(&p),
            Kind::Ack => self.on_ack(&p),
        }
    }

    /// INT (`[switch] int`): the receiver keeps a data packet's records for the ACKs it sends;
    /// the sender hands an ACK's records to the controller with the next report (with per-ACK
    /// reporting, this ACK's).
    fn take_int(&mut self, p: &Packet, int: ccp_contract::IntPath) {
        let flow = &mut self.flows[p.flow as usize];
        let Some(st) = flow.state.as_mut() else { return };
        match p.kind {
            Kind::Data => st.rcv.int = int,
            Kind::Ack if !flow.sender_done && !int.is_empty() => st.cc.set_feedback(NetworkFeedback::Int(int)),
            Kind::Ack => {}
        }
    }

    /// Queues an ACK at the receiver's host.
    fn send_ack(&mut self, f: FlowId, cum: u32, sack: u32, ece: bool, ts: Time) {
        let flow = &self.flows[f as usize];
        let packet = Packet {
            kind: Kind::Ack,
            ecn: Ecn::NotEct,
            ece,
            upstream_q: 0,
            priority: flow.spec.priority,
            flow: f,
            src: self.topo.hosts[flow.spec.dst as usize],
            dst: self.topo.hosts[flow.spec.src as usize],
            seq: cum,
            sack,
            wire_bytes: self.tp.ack_bytes,
            payload_bytes: 0,
            ts,
            ingress: 0,
            hash: flow.hash.rotate_left(16),
        };
        let id = self.arena.alloc(packet);
        if let Some(int) = self.arena.int_mut(id) {
            *int = flow.state.as_ref().map_or_else(Default::default, |st| st.rcv.int);
        }
        self.counters.injected += 1;
        self.counters.acks += 1;
        let host = &mut self.hosts[flow.spec.dst as usize];
        host.nic_fifo.push_back(id);
        let nic = host.nic;
        self.start_tx(nic);
    }

    /// The receiver: DCTCP's ECN-echo state machine over delayed ACKs (dc.md §2.2), immediate
    /// ACKs for out-of-order and duplicate segments and for the flow's last segment.
    fn on_data(&mut self, p: &Packet) {
        let now = self.q.now();
        let f = p.flow;
        let m = self.tp.delack_segments;
        let mss = self.tp.mss;
        let warm = now >= self.warmup;
        let flow = &mut self.flows[f as usize];
        let Some(st) = flow.state.as_mut() else { return };
        let ce = p.ecn == Ecn::Ce;
        let r = &mut st.rcv;
        let mut acks: [(u32, u32, bool, Time); 2] = [(0, 0, false, 0); 2];
        let mut n = 0;
        if p.seq < r.rcv_nxt {
            acks[0] = (r.rcv_nxt, NO_SACK, ce, p.ts);
            n = 1;
        } else if p.seq > r.rcv_nxt {
            if r.pending > 0 {
                acks[n] = (r.rcv_nxt, NO_SACK, r.ce_state, r.pending_ts);
                n += 1;
                r.pending = 0;
            }
            r.accept(p.seq);
            acks[n] = (r.rcv_nxt, p.seq, ce, p.ts);
            n += 1;
        } else {
            if ce != r.ce_state && r.pending > 0 {
                acks[n] = (r.rcv_nxt, NO_SACK, r.ce_state, r.pending_ts);
                n += 1;
                r.pending = 0;
            }
            r.ce_state = ce;
            let first = r.rcv_nxt;
            let advanced = r.accept(p.seq);
            let total = st.snd.total_segs;
            let bytes: u64 = (first..first + advanced).map(|s| u64::from(st.snd.payload(s, mss))).sum();
            flow.delivered_bytes += bytes;
            if warm {
                flow.measured_bytes += bytes;
            }
            r.pending += 1;
            r.pending_ts = p.ts;
            if advanced > 1 || r.pending >= m || r.rcv_nxt == total {
                acks[n] = (r.rcv_nxt, p.seq, ce, p.ts);
                n += 1;
                r.pending = 0;
            } else if !r.delack_armed {
                r.delack_armed = true;
                r.delack_deadline = Some(now + self.tp.delack_timeout);
                self.q.schedule(now + self.tp.delack_timeout, Event::DelayedAck { flow: f });
            } else if r.delack_deadline.is_none() {
                r.delack_deadline = Some(now + self.tp.delack_timeout);
            }
            if r.rcv_nxt == total && flow.finish.is_none() {
                flow.finish = Some(now);
                self.unfinished -= 1;
            }
        }
        for &(cum, sack, ece, ts) in &acks[..n] {
            self.send_ack(f, cum, sack, ece, ts);
        }
    }

    pub(crate) fn on_delayed_ack_timer(&mut self, f: FlowId) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        let r = &mut st.rcv;
        r.delack_armed = false;
        match r.delack_deadline {
            Some(d) if d > now => {
                r.delack_armed = true;
                self.q.schedule(d, Event::DelayedAck { flow: f });
            }
            Some(_) if r.pending > 0 => {
                r.delack_deadline = None;
                r.pending = 0;
                let (cum, ece, ts) = (r.rcv_nxt, r.ce_state, r.pending_ts);
                self.send_ack(f, cum, NO_SACK, ece, ts);
            }
            _ => r.delack_deadline = None,
        }
    }

    /// The sender processes an ACK: SACK, cumulative advance, loss detection, CWR/recovery
    /// state, RTT and rate samples, then reports and sends.
    fn on_ack(&mut self, p: &Packet) {
        let now = self.q.now();
        let f = p.flow;
        let tp = self.tp;
        let per_ack = self.ccp.per_ack;
        let urgent_on_ece = self.ccp.urgent_on_ece;
        let flow = &mut self.flows[f as usize];
        if flow.sender_done {
            return;
        }
        let Some(st) = flow.state.as_mut() else { return };
        if p.ece {
            if let Some(pacer) = self.hosts[flow.spec.src as usize].pacer.as_mut() {
                pacer.on_ece(f, now);
            }
        }
        let snd = &mut st.snd;
        let mut s = AckSample { ece: p.ece, ..AckSample::default() };
        let una_before = snd.snd_una;
        let cum = p.seq.min(snd.snd_nxt);
        // Selective acknowledgement of the segment that triggered the ACK — only when it lies
        // above the cumulative acknowledgement: the receiver names the segment in in-order ACKs
        // too, and counting it as SACKed there counted it twice (once here, once below).
        if p.sack != NO_SACK && p.sack >= cum.max(snd.snd_una) && p.sack < snd.snd_nxt {
            let len = u64::from(snd.payload(p.sack, tp.mss));
            let idx = (p.sack - snd.snd_una) as usize;
            let seg = snd.segs[idx];
            if seg.flags & SACKED == 0 {
                if seg.flags & IN_PIPE != 0 {
                    snd.pipe_bytes -= len;
                }
                snd.segs[idx].flags = (seg.flags | SACKED) & !(IN_PIPE | LOST);
                s.sacked_bytes += len;
                s.sacked_pkts += 1;
                if p.ece {
                    s.ce_bytes += len;
                    s.ce_pkts += 1;
                }
                Sender::rate_delivered(&mut snd.rate_basis, &mut snd.first_tx_time, &seg);
                snd.delivered += len;
                snd.highest_sacked = Some(snd.highest_sacked.map_or(p.sack, |h| h.max(p.sack)));
            }
        }
        // Cumulative acknowledgement.
        while snd.snd_una < cum {
            let seg = snd.segs.pop_front().expect("segment state for every outstanding segment");
            let len = u64::from(snd.payload(snd.snd_una, tp.mss));
            if seg.flags & SACKED == 0 {
                if seg.flags & IN_PIPE != 0 {
                    snd.pipe_bytes -= len;
                }
                if p.ece {
                    s.ce_bytes += len;
                    s.ce_pkts += 1;
                }
                Sender::rate_delivered(&mut snd.rate_basis, &mut snd.first_tx_time, &seg);
                snd.delivered += len;
                // Packets count at first delivery, as the kernel's `delivered` does: a segment
                // SACKed earlier was counted in `sacked_pkts` then.
                s.acked_pkts += 1;
            }
            s.acked_bytes += len;
            snd.snd_una += 1;
        }
        let progressed = snd.snd_una != una_before || s.sacked_pkts > 0;
        if progressed {
            snd.delivered_time = now;
            if p.ts <= now {
                s.rtt = Some(now - p.ts);
                snd.rtt_sample(now - p.ts, &tp);
                flow.rtt.record(now - p.ts);
            }
            let rb = snd.rate_basis;
            let ack_elapsed = now.saturating_sub(rb.prior_time);
            if rb.valid && rb.send_elapsed > 0 && ack_elapsed > 0 {
                let d = snd.delivered - rb.prior_delivered;
                s.rates = Some((rate(d, rb.send_elapsed), rate(d, ack_elapsed)));
            }
        }
        // Loss detection: unsacked segments with `dupthresh` sacked segments above them.
        if let Some(hs) = snd.highest_sacked {
            let mut seg = snd.loss_scan.max(snd.snd_una);
            while seg + tp.dupthresh <= hs {
                let idx = (seg - snd.snd_una) as usize;
                let flags = snd.segs[idx].flags;
                if flags & (SACKED | LOST | RETRANSMITTED) == 0 && flags & IN_PIPE != 0 {
                    snd.segs[idx].flags = (flags | LOST) & !IN_PIPE;
                    snd.pipe_bytes -= u64::from(snd.payload(seg, tp.mss));
                    snd.retx.push_back(seg);
                    s.lost_pkts += 1;
                }
                seg += 1;
            }
            snd.loss_scan = seg;
        }
        // Congestion state (the datapath's, reported as urgent state changes).
        if snd.recovery_until.is_some_and(|r| snd.snd_una >= r) {
            snd.recovery_until = None;
        }
        if snd.cwr_until.is_some_and(|r| snd.snd_una >= r) {
            snd.cwr_until = None;
        }
        if s.lost_pkts > 0 && snd.recovery_until.is_none() {
            snd.recovery_until = Some(snd.snd_nxt);
            st.cc.raise(Urgent::Loss);
        }
        if p.ece && progressed && snd.cwr_until.is_none() && snd.recovery_until.is_none() {
            snd.cwr_until = Some(snd.snd_nxt);
            if urgent_on_ece {
                st.cc.raise(Urgent::StateChange);
            }
        }
        // Retransmission timer: restart on forward progress, stop when nothing is outstanding.
        if snd.snd_una > una_before {
            snd.rto_deadline = (snd.snd_una < snd.snd_nxt).then_some(now + snd.rto);
            if let Some(d) = snd.rto_deadline {
                if snd.rto_event.is_none() {
                    snd.rto_event = Some(d);
                    self.q.schedule(d, Event::Rto { flow: f });
                }
            }
        }
        st.cc.on_ack(&s);
        let done = snd.done();
        if per_ack || st.cc.report_due() {
            self.report(f);
        }
        if done {
            self.sender_finished(f);
        } else {
            self.wake(f);
        }
    }

    /// The last segment is acknowledged: release the sender (and the flow's state once the
    /// receiver has everything too), and open the next back-to-back transfer if one follows.
    fn sender_finished(&mut self, f: FlowId) {
        let flow = &mut self.flows[f as usize];
        flow.sender_done = true;
        if let Some(st) = flow.state.take() {
            flow.reports = st.cc.reports;
        }
        let spec = flow.spec;
        let host = &mut self.hosts[spec.src as usize];
        host.senders.retain(|&x| x != f);
        host.ready.retain(|&x| x != f);
        if spec.then > 0 {
            self.open_flow(FlowSpec { start: self.q.now(), then: spec.then - 1, ..spec });
        }
    }

    pub(crate) fn on_rto_timer(&mut self, f: FlowId) {
        let now = self.q.now();
        let tp = self.tp;
        let flow = &mut self.flows[f as usize];
        let Some(st) = flow.state.as_mut() else { return };
        let snd = &mut st.snd;
        if snd.rto_event != Some(now) {
            return;
        }
        snd.rto_event = None;
        match snd.rto_deadline {
            None => return,
            Some(d) if d > now => {
                snd.rto_event = Some(d);
                self.q.schedule(d, Event::Rto { flow: f });
                return;
            }
            Some(_) => {}
        }
        // Timeout: everything unacknowledged is presumed lost and resent in order (go-back-N).
        snd.retx.clear();
        for i in 0..snd.segs.len() {
            let seg = &mut snd.segs[i];
            if seg.flags & SACKED == 0 {
                seg.flags = (seg.flags | LOST) & !(IN_PIPE | RETRANSMITTED);
                snd.retx.push_back(snd.snd_una + i as u32);
            }
        }
        snd.pipe_bytes = 0;
        snd.recovery_until = None;
        snd.cwr_until = None;
        snd.loss_scan = snd.snd_una;
        snd.rto = (snd.rto * 2).min(tp.rto_max);
        let deadline = now + snd.rto;
        snd.rto_deadline = Some(deadline);
        snd.rto_event = Some(deadline);
        self.q.schedule(deadline, Event::Rto { flow: f });
        flow.timeouts += 1;
        self.counters.timeouts += 1;
        st.cc.note_timeout();
        self.report(f);
        self.wake(f);
    }

    pub(crate) fn on_pace_timer(&mut self, f: FlowId) {
        if let Some(st) = self.flows[f as usize].state.as_mut() {
            st.snd.pace_armed = false;
            self.wake(f);
        }
    }

    /// A per-queue pause/resume reached host `h`'s NIC (BFC hook): flows on that NIC queue stop
    /// or resume.
    pub(crate) fn host_queue_control(&mut self, h: u32, queue: u16, paused: bool) {
        self.hosts[h as usize].set_paused(queue, paused);
        if !paused {
            let flows: Vec<FlowId> = self.hosts[h as usize].senders.clone();
            for f in flows {
                if self.flows[f as usize].state.as_ref().is_some_and(|s| s.nic_queue == queue) {
                    self.wake(f);
                }
            }
        }
    }
}
