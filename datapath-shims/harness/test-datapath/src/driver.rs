//! The real-time event loop tying the flow model, libccp and the output together.
//!
//! libccp's clock is the real monotonic clock, so the emulation runs in real time: the loop
//! sleeps (in `ppoll` on the agent socket) until the earliest flow event is due (but at most
//! once per `--tick-us`) or the agent sends something, hands agent messages to libccp as they
//! arrive, and processes due events in time order across all flows. Each ACK becomes one
//! `load_primitives` + `invoke`; whatever window and rate libccp commands are applied to the
//! flow before it sends again.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Stdout;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ccp_libccp_host::errors::describe;
use ccp_libccp_host::ipc::{self, Channel};
use ccp_libccp_host::primitives::{to_libccp, Primitives};
use ccp_libccp_host::stop;
use libccp::{Connection, Datapath, FlowInfo, LibccpError};

use crate::ccp::{self, Commanded, Shared};
use crate::cli::Config;
use crate::guard::{self, Header};
use crate::model::{Flow, FlowSpec, Link, Measurement, Outcome, Stats, NS_PER_US};
use crate::output::{JsonLines, Value};

/// Longest single sleep, so a stop signal that lands just before `ppoll` is still seen soon.
const MAX_SLEEP_NS: u64 = 100_000_000;
/// Events handled between two looks at the agent socket when the loop is behind.
const EVENTS_PER_SOCKET_CHECK: u32 = 256;

/// Runs the whole emulation: bind, wait for the agent, init libccp, loop, close.
pub fn run(cfg: &Config) -> Result<(), String> {
    let chan = Rc::new(Channel::open(&cfg.endpoints())?);
    chan.wait_for_agent(Duration::from_micros(cfg.wait_agent_us))
        .map_err(|e| format!("{e} (see --dir, --agent, --wait-agent-ms)"))?;
    let shared = Rc::new(Shared::default());
    let dp = ccp::init_datapath(cfg.datapath_id, &chan, Rc::clone(&shared))?;
    // SIGINT/SIGTERM end the run like `--duration-ms` does, so the agent still sees every flow
    // close.
    stop::on_sigint_and_sigterm();

    let mut emu = Emulation::new(cfg, &dp, &chan, shared);
    let outcome = emu.run_loop();
    let reason = match &outcome {
        Ok(reason) => reason,
        Err(_) => "error",
    };
    let closed = emu.close_all(reason);
    outcome.and(closed)
}

/// One flow and its libccp connection.
struct Slot<'dp> {
    flow: Flow,
    conn: Option<Connection<'dp, Commanded>>,
    sid: u32,
    /// Last window/rate libccp commanded (what the flow uses and what goes back as
    /// `snd_cwnd`/`snd_rate`).
    cwnd: u32,
    rate: u32,
    next_ns: Option<u64>,
    invoke_errors: u64,
    ended: bool,
    /// When the flow is replaced by a new one (`--flow-life-ms`).
    life_end_ns: Option<u64>,
}

impl Slot<'_> {
    fn new(flow: Flow, life_end_ns: Option<u64>) -> Self {
        let mut slot = Slot {
            cwnd: flow.spec().init_cwnd_bytes,
            next_ns: None,
            flow,
            conn: None,
            sid: 0,
            rate: 0,
            invoke_errors: 0,
            ended: false,
            life_end_ns,
        };
        slot.schedule();
        slot
    }

    /// The flow's next event, or the end of its life if that comes first.
    fn schedule(&mut self) {
        self.next_ns = match (self.flow.next_event_ns(), self.life_end_ns) {
            (Some(e), Some(l)) => Some(e.min(l)),
            (e, l) => e.or(l),
        };
    }
}

struct Emulation<'a, 'dp> {
    cfg: &'a Config,
    dp: &'dp Datapath,
    chan: &'a Channel,
    shared: Rc<Shared>,
    slots: Vec<Slot<'dp>>,
    /// (time, slot) of every slot's next event, earliest first; an entry whose time is no
    /// longer its slot's `next_ns` is stale and skipped. Ties go to the lowest slot.
    queue: BinaryHeap<Reverse<(u64, usize)>>,
    links: Vec<Link>,
    out: JsonLines<Stdout>,
    /// The first output error; later writes are skipped.
    out_error: Option<String>,
    epoch: Instant,
    recv_buf: Vec<u8>,
    /// While no connection has been freed, libccp must hand out sids 1, 2, 3, … in start
    /// order; anything else means its connection table was not zeroed.
    sids_sequential: bool,
    connections_started: u32,
}

impl<'a, 'dp> Emulation<'a, 'dp> {
    fn new(cfg: &'a Config, dp: &'dp Datapath, chan: &'a Channel, shared: Rc<Shared>) -> Self {
        let (flows, links) = build_flows(cfg);
        let n = flows.len() as u64;
        let slots: Vec<Slot> = flows
            .into_iter()
            .enumerate()
            .map(|(i, flow)| {
                let life_end_ns = first_life_ns(cfg.flow_life_us, i as u64, n).map(|l| flow.spec().start_ns + l);
                Slot::new(flow, life_end_ns)
            })
            .collect();
        let queue = slots.iter().enumerate().filter_map(|(i, s)| s.next_ns.map(|t| Reverse((t, i)))).collect();
        Emulation {
            cfg,
            dp,
            chan,
            shared,
            slots,
            queue,
            links,
            out: JsonLines::new(std::io::stdout()),
            out_error: None,
            epoch: Instant::now(),
            recv_buf: vec![0; ipc::MAX_DATAGRAM],
            sids_sequential: true,
            connections_started: 0,
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Loops until the run ends; returns why ("duration", "signal" or "done").
    fn run_loop(&mut self) -> Result<&'static str, String> {
        let end_ns = self.cfg.duration_us.saturating_mul(NS_PER_US);
        loop {
            if stop::requested() {
                return Ok("signal");
            }
            let now = self.now_ns();
            if now >= end_ns {
                return Ok("duration");
            }
            self.drain_socket();
            let mut until_socket_check = EVENTS_PER_SOCKET_CHECK;
            while let Some((i, t)) = self.earliest() {
                if t > now || t >= end_ns {
                    break;
                }
                self.handle(i, t)?;
                until_socket_check -= 1;
                if until_socket_check == 0 {
                    self.drain_socket();
                    until_socket_check = EVENTS_PER_SOCKET_CHECK;
                }
            }
            if self.slots.iter().all(|s| s.ended) {
                return Ok("done");
            }
            self.flush()?;
            // Wake for the next event, but at most once per tick: waking per ACK costs a
            // context switch each (most of the CPU time), while handling a tick's events
            // together only delays them in real time; their model timestamps stay exact.
            let next = self.earliest().map_or(end_ns, |(_, t)| t.min(end_ns));
            let wake_at = next.max(now + self.cfg.tick_us * NS_PER_US);
            let wait_ns = wake_at.saturating_sub(self.now_ns()).min(MAX_SLEEP_NS);
            // Messages stashed while a send waited are not visible to ppoll.
            if wait_ns > 0 && !self.chan.has_stashed() {
                ipc::wait_readable(&[self.chan.fd()], Duration::from_nanos(wait_ns));
            }
        }
    }

    /// The flow with the earliest pending event and that event's time.
    fn earliest(&mut self) -> Option<(usize, u64)> {
        while let Some(&Reverse((t, i))) = self.queue.peek() {
            if self.slots[i].next_ns == Some(t) {
                return Some((i, t));
            }
            self.queue.pop();
        }
        None
    }

    /// Recomputes slot `i`'s next event and queues it.
    fn reschedule(&mut self, i: usize) {
        self.slots[i].schedule();
        if let Some(t) = self.slots[i].next_ns {
            self.queue.push(Reverse((t, i)));
        }
    }

    /// Handles flow `i`'s next event, due at `t`.
    fn handle(&mut self, i: usize, t: u64) -> Result<(), String> {
        if self.slots[i].life_end_ns.is_some_and(|end| end <= t) {
            self.renew(i, t);
            return Ok(());
        }
        match self.slots[i].flow.step(&mut self.links) {
            Outcome::Started => self.start_connection(i, t)?,
            Outcome::Measure(m) => self.on_measurement(i, t, &m),
            Outcome::Stats(s) => self.on_stats(i, t, &s),
            Outcome::Internal => {}
        }
        self.reschedule(i);
        Ok(())
    }

    /// Ends flow `i`'s life: its connection closes and a new flow, starting now, takes its
    /// place (on an emptied link of its own, unless the link is shared).
    fn renew(&mut self, i: usize, t: u64) {
        self.close(i, t, "life");
        let mut spec = self.slots[i].flow.spec().clone();
        spec.start_ns = t;
        // Scripted losses and timeouts already past belong to the old flow.
        spec.loss_at_ns.retain(|&at| at >= t);
        spec.timeout_at_ns.retain(|&at| at >= t);
        if let (Some(l), false) = (spec.link, self.cfg.shared_link) {
            self.links[l] = self.links[l].emptied();
        }
        let life_ns = self.cfg.flow_life_us.unwrap_or(0).saturating_mul(NS_PER_US);
        self.slots[i] = Slot::new(Flow::new(spec), Some(t.saturating_add(life_ns)));
        self.reschedule(i);
    }

    fn start_connection(&mut self, i: usize, t: u64) -> Result<(), String> {
        let cfg = self.cfg;
        let spec = self.slots[i].flow.spec().clone();
        // The CLI guarantees src_port + flows - 1 <= 65535.
        let src_port = cfg.src_port.saturating_add(i as u16);
        let (src_ip, src_port_field, dst_ip, dst_port_field) = if cfg.net_order {
            // As ccp-kernel: the raw big-endian socket fields, read as host integers.
            (
                u32::from_ne_bytes(cfg.src_ip.octets()),
                u32::from(src_port.to_be()),
                u32::from_ne_bytes(cfg.dst_ip.octets()),
                u32::from(cfg.dst_port.to_be()),
            )
        } else {
            (u32::from(cfg.src_ip), u32::from(src_port), u32::from(cfg.dst_ip), u32::from(cfg.dst_port))
        };
        let info = FlowInfo::default().with_mss(spec.mss).with_init_cwnd(spec.init_cwnd_bytes);
        let mut info = info.with_four_tuple(src_ip, src_port_field, dst_ip, dst_port_field);
        if let Some(alg) = &cfg.cong_alg {
            info = info.with_cong_alg(alg).map_err(|e| format!("cannot use --cong-alg {alg}: {e}"))?;
        }
        let commanded = Commanded { cwnd: spec.init_cwnd_bytes, rate: 0 };
        let conn = Connection::start(self.dp, commanded, info)
            .map_err(|e| format!("libccp could not start flow {i} (its table holds 1024 connections): {e}"))?;
        self.slots[i].conn = Some(conn);
        // libccp holds a CREATE back (LIBCCP_CREATE_PENDING) when the connection slot sent one
        // less than 100 ms before, and sends it from a later invoke: until then the sid is
        // unknown, and the flow is announced then.
        if let Some(sid) = self.shared.take_create_sid() {
            if self.sids_sequential {
                self.connections_started += 1;
                if sid != self.connections_started {
                    self.shared.diag(&format!(
                        "libccp assigned sid {sid} where {} was expected: its connection table \
                         was not zeroed (see ccp::pin_mmap_threshold)",
                        self.connections_started
                    ));
                }
            }
            self.announce(i, t, sid);
        }
        self.slots[i].flow.send(t, &mut self.links);
        Ok(())
    }

    /// Flow `i`'s CREATE went out with `sid`: its start record.
    fn announce(&mut self, i: usize, t: u64, sid: u32) {
        let cfg = self.cfg;
        self.slots[i].sid = sid;
        let spec = self.slots[i].flow.spec().clone();
        self.emit(
            t,
            sid,
            "start",
            &[
                ("flow", (i as u64).into()),
                ("src_port", u32::from(cfg.src_port.saturating_add(i as u16)).into()),
                ("dst_port", u32::from(cfg.dst_port).into()),
                ("rtt_us", (spec.rtt_ns / NS_PER_US).into()),
                ("mss", spec.mss.into()),
                ("init_cwnd_bytes", spec.init_cwnd_bytes.into()),
                ("bytes", spec.bytes.unwrap_or(0).into()),
            ],
        );
    }

    fn on_measurement(&mut self, i: usize, t: u64, m: &Measurement) {
        let slot = &mut self.slots[i];
        let Some(conn) = slot.conn.as_mut() else {
            return;
        };
        let sid = slot.sid;
        self.shared.retry_create(sid, self.chan);
        conn.load_primitives(to_libccp(&Primitives {
            bytes_acked: m.bytes_acked,
            packets_acked: m.packets_acked,
            ecn_bytes: m.ecn_bytes,
            ecn_packets: m.ecn_packets,
            lost_pkts_sample: m.lost_pkts_sample,
            was_timeout: m.timeout.is_some(),
            rtt_sample_us: m.rtt_sample_us,
            rate_outgoing: m.rate_outgoing,
            rate_incoming: m.rate_incoming,
            bytes_in_flight: m.bytes_in_flight,
            packets_in_flight: m.packets_in_flight,
            bytes_pending: m.bytes_pending,
            snd_cwnd: slot.cwnd,
            snd_rate: u64::from(slot.rate),
            // Acknowledgements are SACK-like: nothing is ever misordered (see the README).
            bytes_misordered: 0,
            packets_misordered: 0,
        }));
        match conn.invoke() {
            Ok(()) => {}
            Err(LibccpError::LibccpProgIsNull) => self.shared.diag(
                "invoke: no datapath program for this flow yet (libccp error -96); \
                 waiting for the agent's INSTALL and CHANGE_PROG",
            ),
            Err(e) => {
                slot.invoke_errors += 1;
                self.shared.diag(&format!("invoke for sid {sid} failed: {}", describe(&e)));
            }
        }
        let (cwnd, rate) = (conn.cwnd, conn.rate);
        let sid = match (sid, self.shared.take_create_sid()) {
            (0, Some(sent)) => {
                self.announce(i, t, sent);
                sent
            }
            _ => sid,
        };
        let slot = &mut self.slots[i];
        let cwnd_changed = cwnd != slot.cwnd;
        let rate_changed = rate != slot.rate;
        slot.cwnd = cwnd;
        slot.rate = rate;
        slot.flow.set_cwnd(cwnd);
        slot.flow.set_rate(rate);

        if let Some(timeout) = m.timeout {
            self.emit(
                t,
                sid,
                "timeout",
                &[("cause", timeout.cause.as_str().into()), ("requeued_pkts", timeout.requeued_pkts.into())],
            );
        }
        if m.lost_pkts_sample > 0 {
            let total = self.slots[i].flow.totals().lost_pkts;
            self.emit(
                t,
                sid,
                "loss",
                &[
                    ("lost_pkts", m.lost_pkts_sample.into()),
                    ("overflow_pkts", m.lost_overflow.into()),
                    ("scripted_pkts", m.lost_scripted.into()),
                    ("total_lost_pkts", total.into()),
                ],
            );
        }
        if cwnd_changed {
            self.emit(t, sid, "cwnd", &[("cwnd_bytes", cwnd.into())]);
        }
        if rate_changed {
            self.emit(t, sid, "rate", &[("rate_bytes_per_s", rate.into())]);
        }
        self.slots[i].flow.send(t, &mut self.links);
        if self.slots[i].flow.done_ns().is_some() {
            self.close(i, t, "done");
        }
    }

    fn on_stats(&mut self, i: usize, t: u64, s: &Stats) {
        let slot = &self.slots[i];
        let (sid, cwnd, rate) = (slot.sid, slot.cwnd, slot.rate);
        let tput_kbps = if s.interval_ns == 0 {
            0
        } else {
            u64::try_from(u128::from(s.interval_bytes) * 8_000_000 / u128::from(s.interval_ns)).unwrap_or(u64::MAX)
        };
        self.emit(
            t,
            sid,
            "stats",
            &[
                ("delivered_bytes", s.delivered_bytes.into()),
                ("interval_us", (s.interval_ns / NS_PER_US).into()),
                ("tput_kbps", tput_kbps.into()),
                ("inflight_bytes", s.inflight_bytes.into()),
                ("inflight_pkts", s.inflight_pkts.into()),
                ("queue_pkts", s.queue_pkts.into()),
                ("rtt_us", s.last_rtt_us.into()),
                ("cwnd_bytes", cwnd.into()),
                ("rate_bytes_per_s", rate.into()),
            ],
        );
        if s.interval_marked_pkts > 0 {
            self.emit(
                t,
                sid,
                "mark",
                &[
                    ("marked_pkts", s.interval_marked_pkts.into()),
                    ("acked_pkts", s.interval_acked_pkts.into()),
                    ("total_marked_pkts", s.total_marked_pkts.into()),
                ],
            );
        }
    }

    /// Frees flow `i`'s connection (libccp sends the agent the close message) and reports it.
    fn close(&mut self, i: usize, t: u64, reason: &str) {
        let slot = &mut self.slots[i];
        if slot.ended {
            return;
        }
        slot.ended = true;
        if slot.conn.take().is_none() {
            return;
        }
        self.shared.forget_create(slot.sid);
        self.sids_sequential = false;
        let slot = &self.slots[i];
        let totals = slot.flow.totals().clone();
        let start_ns = slot.flow.spec().start_ns;
        let fct_us = slot.flow.done_ns().map_or(0, |done| (done - start_ns) / NS_PER_US);
        let (sid, invoke_errors) = (slot.sid, slot.invoke_errors);
        let reports = self.shared.take_reports(sid);
        self.emit(
            t,
            sid,
            "end",
            &[
                ("reason", reason.into()),
                ("fct_us", fct_us.into()),
                ("delivered_bytes", totals.delivered_bytes.into()),
                ("sent_pkts", totals.sent_pkts.into()),
                ("retx_pkts", totals.retx_pkts.into()),
                ("lost_pkts", totals.lost_pkts.into()),
                ("marked_pkts", totals.marked_pkts.into()),
                ("timeouts", totals.timeouts.into()),
                ("reports", reports.into()),
                ("invoke_errors", invoke_errors.into()),
            ],
        );
    }

    /// Closes every flow still open, flushes, and returns the first output error if any.
    fn close_all(&mut self, reason: &str) -> Result<(), String> {
        let t = self.now_ns();
        for i in 0..self.slots.len() {
            self.close(i, t, reason);
        }
        self.flush()
    }

    fn emit(&mut self, t_ns: u64, sid: u32, ev: &str, fields: &[(&str, Value)]) {
        if self.cfg.quiet && !matches!(ev, "start" | "end") {
            return;
        }
        if self.out_error.is_none() {
            if let Err(e) = self.out.record(t_ns / NS_PER_US, sid, ev, fields) {
                self.out_error = Some(format!("cannot write to stdout: {e}"));
            }
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.out_error.is_none() {
            if let Err(e) = self.out.flush() {
                self.out_error = Some(format!("cannot write to stdout: {e}"));
            }
        }
        self.out_error.clone().map_or(Ok(()), Err)
    }

    /// Hands every datagram waiting on the socket to libccp.
    fn drain_socket(&mut self) {
        loop {
            match self.chan.try_recv(&mut self.recv_buf) {
                Ok(n) => self.deliver(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.shared.diag(&format!("receiving from the agent failed: {e}"));
                    return;
                }
            }
        }
    }

    fn deliver(&mut self, n: usize) {
        let mut offset = 0;
        while offset < n {
            let len = match guard::first_message_len(&self.recv_buf[offset..n]) {
                Ok(len) => len,
                Err(why) => {
                    self.shared.diag(&format!("ignored a malformed datagram from the agent: {why}"));
                    return;
                }
            };
            let msg = &mut self.recv_buf[offset..offset + len];
            offset += len;
            let Some(hdr) = Header::parse(msg) else {
                continue;
            };
            let what = guard::type_name(hdr.typ);
            if let Err(why) = guard::check(msg) {
                self.shared.diag(&format!("rejected {what} for sid {} before libccp saw it: {why}", hdr.sid));
                continue;
            }
            match self.dp.recv_msg(msg) {
                Ok(()) => {}
                Err(LibccpError::OtherError(_)) if hdr.typ == guard::CHANGE_PROG => {
                    // libccp returns a positive byte count in this case, which the crate
                    // cannot map.
                    let uid = msg.get(8..12).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                    self.shared
                        .diag(&format!("libccp ignored CHANGE_PROG for sid {}: program uid {uid} is not installed", hdr.sid));
                }
                Err(e) => self.shared.diag(&format!("libccp rejected {what} for sid {}: {}", hdr.sid, describe(&e))),
            }
        }
    }
}

/// The flows and bottlenecks the configuration describes.
fn build_flows(cfg: &Config) -> (Vec<Flow>, Vec<Link>) {
    let to_ns = |us: &u64| us.saturating_mul(NS_PER_US);
    let init_cwnd_bytes = cfg.init_cwnd_pkts.saturating_mul(cfg.mss);
    let links = match cfg.link_kbps {
        None => Vec::new(),
        Some(kbps) if cfg.shared_link => {
            let max_rtt = cfg.rtts_us.iter().copied().max().unwrap_or(0);
            let queue = cfg.queue_pkts.unwrap_or_else(|| bdp_pkts(max_rtt, kbps, cfg.mss));
            vec![Link::new(kbps, queue, cfg.ecn_k)]
        }
        Some(kbps) => cfg
            .rtts_us
            .iter()
            .map(|&rtt| {
                let queue = cfg.queue_pkts.unwrap_or_else(|| bdp_pkts(rtt, kbps, cfg.mss));
                Link::new(kbps, queue, cfg.ecn_k)
            })
            .collect(),
    };
    let flows = (0..cfg.flows)
        .map(|i| {
            Flow::new(FlowSpec {
                start_ns: cfg.stagger_us.saturating_mul(i as u64).saturating_mul(NS_PER_US),
                rtt_ns: to_ns(&cfg.rtts_us[i]),
                mss: cfg.mss,
                init_cwnd_bytes,
                bytes: cfg.flow_bytes,
                ack_every: cfg.ack_every,
                link: cfg.link_kbps.map(|_| if cfg.shared_link { 0 } else { i }),
                loss_at_ns: cfg.loss_at_us.iter().map(to_ns).collect(),
                timeout_at_ns: cfg.timeout_at_us.iter().map(to_ns).collect(),
                mark_ppm: cfg.mark_ppm,
            })
        })
        .collect();
    (flows, links)
}

/// How long flow `i` of `n` lives before its first replacement: `(i + 1) / n` of a life, so
/// the flows are replaced evenly spread, `n` per life.
fn first_life_ns(life_us: Option<u64>, i: u64, n: u64) -> Option<u64> {
    let life_ns = u128::from(life_us?) * u128::from(NS_PER_US);
    u64::try_from(life_ns * u128::from(i + 1) / u128::from(n.max(1))).ok()
}

/// One bandwidth-delay product in packets, at least 2.
fn bdp_pkts(rtt_us: u64, kbps: u64, mss: u32) -> u64 {
    let bdp_bytes = u128::from(rtt_us) * u128::from(kbps) / 8_000;
    let pkts = bdp_bytes.div_ceil(u128::from(mss.max(1)));
    u64::try_from(pkts).unwrap_or(u64::MAX).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdp() {
        // 96 Mbit/s × 20 ms = 240 kB = 166 packets of 1448 bytes (rounded up).
        assert_eq!(bdp_pkts(20_000, 96_000, 1448), 166);
        assert_eq!(bdp_pkts(10, 1, 1448), 2);
    }

    #[test]
    fn first_lives_are_spread_over_one_life() {
        assert_eq!(first_life_ns(None, 0, 4), None);
        let ends: Vec<u64> = (0..4).map(|i| first_life_ns(Some(1_000), i, 4).unwrap()).collect();
        assert_eq!(ends, vec![250_000, 500_000, 750_000, 1_000_000]);
    }

    #[test]
    fn builds_shared_and_separate_links() {
        let cfg = Config {
            flows: 3,
            rtts_us: vec![10_000, 20_000, 40_000],
            link_kbps: Some(8_000),
            shared_link: true,
            ..Config::default()
        };
        let (flows, links) = build_flows(&cfg);
        assert_eq!(links.len(), 1);
        assert!(flows.iter().all(|f| f.spec().link == Some(0)));
        let (flows, links) = build_flows(&Config { shared_link: false, stagger_us: 500, ..cfg });
        assert_eq!(links.len(), 3);
        let starts: Vec<u64> = flows.iter().map(|f| f.spec().start_ns).collect();
        assert_eq!(starts, vec![0, 500_000, 1_000_000]);
        assert_eq!(flows[2].spec().link, Some(2));
    }
}
