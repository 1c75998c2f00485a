//! Reports whose algorithm runs elsewhere, off the loop. A batch of datapath events is handled
//! as [`FlowTable::handle`] handles them one by one, except that a report whose algorithm runs
//! on another thread — Python on its interpreter thread (`ccp_python::Isolation::Thread`) — is
//! begun ([`ccp_contract::Controller::begin_report`]) and decided once its answer is there
//! ([`FlowTable::settle`]), never waited for: native flows, other datapaths and the control
//! socket go on meanwhile, whatever the Python code does. The interpreter thread wakes the loop
//! when answers may be there (`ccp_python::wake_on_answers`, the runtime's Python waker). A call
//! stuck past its budget (Python blocked inside C) is abandoned by the interpreter's watchdog,
//! which makes its answer — a timeout — and those queued behind it — the interpreter is busy —
//! ready at once; the flows then fall back after repeated faults, as any faulty algorithm's do.
//!
//! A flow's own events stay in order. While one of its reports waits, its later reports are begun
//! behind it, and any other event of the flow (a close, its id re-used, lost settings) waits
//! whole, with all the flow's events after it. What a report does to the flow's bookkeeping
//! (counters, the feedback clock, the report record: `accept`) happens in event order either
//! way; only the controller's decision and what it applies come later. Network feedback for a
//! flow with reports waiting decides them first, waiting for their answers (`settle_flow`): the
//! report it makes must come after theirs. A swap does not wait: the reports still waiting are
//! decided by the algorithm swapped in.

use std::collections::hash_map::Entry;
use std::collections::VecDeque;

use super::*;

/// What a flow has waiting.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Waiting {
    items: u32,
    /// An event that is not a report waits: the flow's later events wait whole behind it.
    whole: bool,
}

/// What waits, in event order.
pub(super) enum Later {
    /// An accepted report, begun (or behind one that was).
    Decide(FlowKey, Report),
    Event(DatapathEvent),
}

impl FlowTable {
    /// The datapath events in `events` (drained) for the flows of adapter `dp`; what is
    /// ready is decided before it returns, the rest when `settle` finds it ready.
    pub fn handle_batch(
        &mut self,
        dp: usize,
        adapter: &mut dyn Datapath,
        events: &mut Vec<DatapathEvent>,
        now: Now,
        mut trace: Option<&mut FlowTrace>,
    ) {
        let mut queue = self.pending.remove(&dp).unwrap_or_default();
        for ev in events.drain(..) {
            let key = flow_of(&ev).map(|f| (dp, f));
            let waiting = key.and_then(|k| self.waiting.get(&k)).copied();
            match (ev, waiting) {
                (DatapathEvent::Report { flow, report }, None | Some(Waiting { whole: false, .. })) => {
                    let key = (dp, flow);
                    let Some(report) = self.accept(key, report, now) else { continue };
                    let Some(f) = self.flows.get_mut(&key) else { continue };
                    if f.controller.begin_report(&report) || waiting.is_some() {
                        self.waiting.entry(key).or_default().items += 1;
                        queue.push_back(Later::Decide(key, report));
                    } else {
                        self.decide(key, adapter, &report, now, trace.as_deref_mut());
                    }
                }
                (ev, None) => self.handle(dp, adapter, ev, now, trace.as_deref_mut()),
                (ev, Some(_)) => {
                    if let Some(w) = key.and_then(|k| self.waiting.get_mut(&k)) {
                        w.items += 1;
                        w.whole = true;
                    }
                    queue.push_back(Later::Event(ev));
                }
            }
        }
        if !queue.is_empty() {
            self.pending.insert(dp, queue);
        }
        self.settle(dp, adapter, now, trace);
    }

    /// Decides, in order, what waits for adapter `dp`'s flows, up to the first report whose
    /// answer is not there yet (the interpreter answers in the order reports were begun).
    pub fn settle(&mut self, dp: usize, adapter: &mut dyn Datapath, now: Now, mut trace: Option<&mut FlowTrace>) {
        let Some(mut queue) = self.pending.remove(&dp) else { return };
        while let Some(item) = queue.front() {
            if let Later::Decide(key, _) = item {
                if !self.flows.get(key).is_none_or(|f| f.controller.begun_ready()) {
                    break;
                }
            }
            let Some(item) = queue.pop_front() else { break };
            self.run_later(dp, adapter, item, now, trace.as_deref_mut());
        }
        if !queue.is_empty() {
            self.pending.insert(dp, queue);
        }
    }

    /// Whether anything waits for an answer.
    pub fn has_waiting(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Decides what waits for flow `key`, waiting for the answers.
    pub(super) fn settle_flow(&mut self, key: FlowKey, adapter: &mut dyn Datapath, now: Now, mut trace: Option<&mut FlowTrace>) {
        if !self.waiting.contains_key(&key) {
            return;
        }
        let Some(queue) = self.pending.remove(&key.0) else { return };
        let mut rest = VecDeque::with_capacity(queue.len());
        for item in queue {
            let mine = match &item {
                Later::Decide(k, _) => *k == key,
                Later::Event(ev) => flow_of(ev) == Some(key.1),
            };
            if mine {
                self.run_later(key.0, adapter, item, now, trace.as_deref_mut());
            } else {
                rest.push_back(item);
            }
        }
        if !rest.is_empty() {
            self.pending.insert(key.0, rest);
        }
    }

    fn run_later(&mut self, dp: usize, adapter: &mut dyn Datapath, item: Later, now: Now, trace: Option<&mut FlowTrace>) {
        let key = match &item {
            Later::Decide(key, _) => Some(*key),
            Later::Event(ev) => flow_of(ev).map(|f| (dp, f)),
        };
        if let Some(Entry::Occupied(mut w)) = key.map(|k| self.waiting.entry(k)) {
            w.get_mut().items -= 1;
            if w.get().items == 0 {
                w.remove();
            }
        }
        match item {
            Later::Decide(key, report) => self.decide(key, adapter, &report, now, trace),
            Later::Event(ev) => self.handle(dp, adapter, ev, now, trace),
        }
    }
}

/// The flow an event is about, if one.
fn flow_of(ev: &DatapathEvent) -> Option<FlowRef> {
    match ev {
        DatapathEvent::FlowStarted { flow, .. }
        | DatapathEvent::Report { flow, .. }
        | DatapathEvent::FlowClosed { flow, .. }
        | DatapathEvent::SettingsLost { flow } => Some(*flow),
        DatapathEvent::Writable { .. } => None,
    }
}
