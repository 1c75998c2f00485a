//! Reports to the flow's controller (on its timer, urgently, on a QCN notification) and its
//! changes reaching the sender, at once or after the agent delay.

use ccp_contract::{Command, NetworkFeedback, Outcome, PacingCommand};

use super::*;
use crate::cc::Gauges;
use crate::event::Event;
use crate::sim::Sim;

impl Sim {
    pub(super) fn arm_report_timer(&mut self, f: FlowId) {
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        if st.cc.timer_armed {
            return;
        }
        st.cc.timer_armed = true;
        let at = st.cc.last_report + st.cc.interval(st.snd.srtt);
        self.q.schedule(at.max(self.q.now()), Event::Report { flow: f });
    }

    pub(crate) fn on_report_timer(&mut self, f: FlowId) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.cc.timer_armed = false;
        let due = st.cc.last_report + st.cc.interval(st.snd.srtt);
        if now >= due {
            self.report(f);
        }
        self.arm_report_timer(f);
    }

    /// Sends a report for flow `f` now and routes the algorithm's action to the datapath.
    pub(super) fn report(&mut self, f: FlowId) {
        let now = self.q.now();
        let mss = self.tp.mss;
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        let snd = &st.snd;
        let pending = if snd.total_segs == u32::MAX {
            snd.pipe_bytes + UNBOUNDED_BACKLOG_BYTES
        } else {
            let acked: u64 = u64::from(snd.snd_una) * u64::from(mss);
            self.flows[f as usize].spec.bytes.unwrap_or(0).saturating_sub(acked)
        };
        let st = self.flows[f as usize].state.as_mut().expect("checked above");
        let g = Gauges {
            mss,
            inflight_bytes: st.snd.pipe_bytes,
            unacked_bytes: st.snd.unacked_bytes(mss),
            pending_bytes: pending,
            cwnd_bytes: st.snd.cwnd_bytes,
            pacing: st.snd.pacing,
            srtt: st.snd.srtt,
            cwnd_limited: st.snd.cwnd_limited(mss),
        };
        let report = st.cc.build_report(now, &g);
        if let Some(r) = self.record.as_mut() {
            r.record(u64::from(f), &report);
        }
        let outcome = st.cc.decide(&report, now);
        self.counters.reports += 1;
        self.count_outcome(&outcome);
        self.deliver(f, outcome.command);
    }

    pub(super) fn count_outcome(&mut self, o: &Outcome) {
        self.counters.algorithm_faults += u64::from(o.fault.is_some());
        self.counters.fallbacks += u64::from(o.fell_back_to.is_some());
        self.counters.clamped_values += u64::from(o.clamped);
    }

    /// Applies a change now, or after the agent delay.
    pub(super) fn deliver(&mut self, f: FlowId, change: Command) {
        if change.is_empty() {
            return;
        }
        if self.ccp.agent_delay == 0 {
            self.apply(f, &change);
            return;
        }
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.cc.pending.push_back(change);
        self.q.after(self.ccp.agent_delay, Event::ApplyAction { flow: f });
    }

    pub(crate) fn on_apply_action(&mut self, f: FlowId) {
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        if let Some(c) = st.cc.pending.pop_front() {
            self.apply(f, &c);
        }
    }

    fn apply(&mut self, f: FlowId, c: &Command) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        if let Some(w) = c.cwnd_bytes {
            st.snd.cwnd_bytes = w;
        }
        if let Some(p) = c.pacing {
            st.snd.pacing = match p {
                PacingCommand::Off => None,
                PacingCommand::BytesPerSec(r) => Some(r as f64),
            };
            st.snd.next_send_at = st.snd.next_send_at.min(now);
        }
        if st.cc.apply_reporting(c) && !self.ccp.per_ack {
            self.arm_report_timer(f);
        }
        self.wake(f);
    }

    pub(crate) fn on_cnm(&mut self, f: FlowId, qfb: u8, q_off: i32, q_delta: i32) {
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.cc.set_feedback(NetworkFeedback::Qcn {
            fb_quantized: qfb,
            q_off_bytes: i64::from(q_off),
            q_delta_bytes: i64::from(q_delta),
        });
        self.report(f);
    }
}
