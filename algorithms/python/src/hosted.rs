//! A Python algorithm instance as the controller sees it: an [`Algorithm`] whose calls are jobs
//! for the interpreter thread and whose failures are [`CallError`]s, so the one containment
//! controller counts them like a native algorithm's panics.
//!
//! With [`Isolation::Thread`] a report can be begun ahead ([`Algorithm::begin_on_report`]): its
//! call is queued for the interpreter thread at once, [`Algorithm::begun_ready`] says when its
//! answer is there, and the `try_on_report` for the same report collects it. A caller with many
//! flows thus never waits for a Python report: it begins, goes on, and decides when the answer is
//! there. Other calls (`init`, `state`) are waited for: at most a budget, and only until a stuck
//! call is known.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use ccp_contract::{Action, Algorithm, AlgorithmFactory, CallError, FlowStart, ParamValue, Report, StateVar};

use crate::host::{host, isolation, Done, Isolation, Ticket, Work};

/// Builds instances of one loaded class with one set of validated parameters.
pub struct PyFactory {
    pub(crate) name: &'static str,
    pub(crate) class: usize,
    pub(crate) params: Vec<(&'static str, ParamValue)>,
}

impl AlgorithmFactory for PyFactory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn create(&self) -> Box<dyn Algorithm> {
        static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);
        Box::new(PyAlgorithm {
            name: self.name,
            class: self.class,
            params: self.params.clone(),
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            pending_init: None,
            ahead: VecDeque::new(),
        })
    }
}

/// One flow's instance of a Python class. The Python object itself lives on the interpreter
/// thread, built by the first `init` job; dropping this frees it there.
pub struct PyAlgorithm {
    name: &'static str,
    class: usize,
    params: Vec<(&'static str, ParamValue)>,
    instance: u64,
    /// An `init` the interpreter could not run yet (busy with an abandoned call): it runs
    /// before the next report, so the instance is never used unbuilt.
    pending_init: Option<FlowStart>,
    /// Reports begun ahead, oldest first, each with its queued call.
    ahead: VecDeque<(Report, Ticket)>,
}

impl PyAlgorithm {
    fn run_init(&mut self) -> Result<Action, CallError> {
        let Some(start) = self.pending_init.clone() else { return Ok(Action::default()) };
        let work = Work::Init { instance: self.instance, class: self.class, params: self.params.clone(), start };
        match host()?.call(work) {
            Ok(done) => {
                self.pending_init = None;
                action(done)
            }
            Err(e @ CallError::Unavailable(_)) => Err(e),
            Err(e) => {
                // It ran and failed: the next report says whether the instance exists.
                self.pending_init = None;
                Err(e)
            }
        }
    }
}

fn action(done: Done) -> Result<Action, CallError> {
    match done {
        Done::Action(a) => Ok(a),
        _ => Err(CallError::Unavailable("the interpreter answered another kind of call".into())),
    }
}

impl Algorithm for PyAlgorithm {
    fn name(&self) -> &'static str {
        self.name
    }

    // The controller calls the fallible forms; these serve any caller that does not.
    fn init(&mut self, start: &FlowStart) -> Action {
        self.try_init(start).unwrap_or_default()
    }

    fn on_report(&mut self, report: &Report) -> Action {
        self.try_on_report(report).unwrap_or_default()
    }

    fn try_init(&mut self, start: &FlowStart) -> Result<Action, CallError> {
        self.pending_init = Some(start.clone());
        self.run_init()
    }

    fn try_on_report(&mut self, report: &Report) -> Result<Action, CallError> {
        let from_init = if self.pending_init.is_some() { self.run_init()? } else { Action::default() };
        let done = match self.ahead.pop_front() {
            Some((begun, ticket)) if begun == *report => host()?.collect(ticket),
            begun => {
                // A caller that broke the promise of `begin_on_report`: the reports begun are
                // withdrawn (those the interpreter ran stay run) and this one runs now.
                debug_assert!(begun.is_none(), "a report begun ahead was not the next given");
                self.ahead.clear();
                host()?.call(Work::Report { instance: self.instance, report: report.clone() })
            }
        };
        let a = action(done?)?;
        Ok(Action {
            cwnd_bytes: a.cwnd_bytes.or(from_init.cwnd_bytes),
            pacing: a.pacing.or(from_init.pacing),
            report: a.report.or(from_init.report),
            rtt_threshold_us: a.rtt_threshold_us.or(from_init.rtt_threshold_us),
            report_acked_pkts: a.report_acked_pkts.or(from_init.report_acked_pkts),
            ack_aggregation_bw_bytes_per_s: a.ack_aggregation_bw_bytes_per_s.or(from_init.ack_aggregation_bw_bytes_per_s),
        })
    }

    fn begin_on_report(&mut self, report: &Report) -> bool {
        // An instance whose init has not run yet is built by the next report, in order.
        if isolation() == Isolation::Inline || self.pending_init.is_some() {
            return false;
        }
        let Ok(h) = host() else { return false };
        match h.submit(Work::Report { instance: self.instance, report: report.clone() }) {
            Ok(ticket) => {
                self.ahead.push_back((report.clone(), ticket));
                true
            }
            // Busy with an abandoned call, or full: the report fails as fast when given.
            Err(_) => false,
        }
    }

    fn begun_ready(&self) -> bool {
        match (self.ahead.front(), host()) {
            (Some((_, ticket)), Ok(h)) => h.ready(ticket),
            _ => true,
        }
    }

    fn state(&self) -> Vec<StateVar> {
        if self.pending_init.is_some() {
            return Vec::new();
        }
        match host().and_then(|h| h.call(Work::State { instance: self.instance })) {
            Ok(Done::State(vars)) => {
                vars.into_iter().filter_map(|(n, value)| Some(StateVar { name: intern(&n)?, value })).collect()
            }
            _ => Vec::new(),
        }
    }
}

impl Drop for PyAlgorithm {
    fn drop(&mut self) {
        // Reports begun and never collected (the flow closed, or its algorithm was replaced,
        // while they waited) are withdrawn first: they must not run on a freed instance.
        self.ahead.clear();
        if let Ok(h) = host() {
            h.drop_instance(self.instance);
        }
    }
}

/// Distinct state-variable names kept; a class that invents names without end gets the first
/// ones only (the contract's names are `'static`).
const MAX_STATE_NAMES: usize = 4096;

fn intern(name: &str) -> Option<&'static str> {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return Some(n);
    }
    if names.len() >= MAX_STATE_NAMES {
        return None;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    Some(n)
}
