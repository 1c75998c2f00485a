//! A loaded policy (model + manifest) as the registry and the controller see it: a factory that
//! names the manifest's fallback, and one [`OnnxAlgorithm`] per flow.
//!
//! Each report: the observer folds it in, the model runs on the observation, the action map turns
//! its output into an `Action`. The call is timed: an answer later than the manifest's budget is
//! discarded and reported as [`CallError::TimedOut`], an output that is not a number as
//! [`CallError::WrongType`], a failed inference as [`CallError::Raised`]. The one containment
//! controller counts those as faults (the flow keeps its last sane settings) and, after repeated
//! ones, hands the flow to the fallback the manifest names.
//!
//! The clock is the host's, not the algorithm's: timing the inference is what hosting a learned
//! policy adds to the pure state machine, as the Python host times its calls. Inference runs on
//! the caller's thread — it is bounded computation that never blocks — and a model whose
//! inference could never meet its budget is refused when it loads ([`crate::MAX_BUDGET_OVERRUN`]).
//! A process that must not depend on the host's speed (the simulator, the Gymnasium
//! environment) turns the deadline off ([`crate::set_deadline`]).

use std::sync::Arc;
use std::time::Instant;

use ccp_contract::{Action, Algorithm, AlgorithmFactory, CallError, Choice, FlowStart, Report, StateVar};

use crate::action_map::ActionMap;
use crate::features::Observer;
use crate::manifest::Manifest;
use crate::model::{Plan, Runner};

/// One model version with its manifest, shared by every flow that runs it.
pub struct Policy {
    pub manifest: Manifest,
    pub plan: Plan,
    /// Median inference cost measured when it loaded, µs.
    pub load_cost_us: f64,
}

impl Policy {
    /// A fresh observer, action map and runner for one flow.
    pub fn parts(&self) -> (Observer, ActionMap, Runner) {
        let m = &self.manifest;
        (Observer::new(&m.observation), ActionMap::new(m.action, m.report), Runner::new(&self.plan, &m.observation.shape()))
    }
}

pub struct OnnxFactory {
    pub(crate) name: &'static str,
    pub(crate) policy: Arc<Policy>,
    pub(crate) fallback: Choice,
}

impl AlgorithmFactory for OnnxFactory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn create(&self) -> Box<dyn Algorithm> {
        let (observer, map, runner) = self.policy.parts();
        Box::new(OnnxAlgorithm {
            name: self.name,
            policy: self.policy.clone(),
            observer,
            map,
            runner,
            last_output: 0.0,
            last_cost_us: 0.0,
        })
    }

    fn fallback(&self) -> Option<Choice> {
        Some(self.fallback.clone())
    }
}

pub struct OnnxAlgorithm {
    name: &'static str,
    policy: Arc<Policy>,
    observer: Observer,
    map: ActionMap,
    runner: Runner,
    last_output: f32,
    last_cost_us: f64,
}

impl Algorithm for OnnxAlgorithm {
    fn name(&self) -> &'static str {
        self.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.try_init(start).unwrap_or_default()
    }

    fn on_report(&mut self, report: &Report) -> Action {
        self.try_on_report(report).unwrap_or_default()
    }

    fn try_init(&mut self, start: &FlowStart) -> Result<Action, CallError> {
        self.observer.clear();
        if let Some(r) = start.seed.as_ref().and_then(|s| s.last_report.as_ref()) {
            self.observer.push(r);
        }
        Ok(self.map.init(start))
    }

    fn try_on_report(&mut self, report: &Report) -> Result<Action, CallError> {
        self.observer.push(report);
        let t0 = Instant::now();
        let output = self.runner.run(self.observer.values()).map_err(CallError::Raised)?;
        let cost = t0.elapsed();
        self.last_cost_us = cost.as_secs_f64() * 1e6;
        let budget_us = self.policy.manifest.budget_us;
        if crate::deadline_enforced() && cost.as_micros() > u128::from(budget_us) {
            return Err(CallError::TimedOut { budget_us });
        }
        self.last_output = output;
        self.map
            .apply(report, output)
            .ok_or_else(|| CallError::WrongType(format!("the model's output is {output}, not a number")))
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "output", value: f64::from(self.last_output) },
            StateVar { name: "inference_us", value: self.last_cost_us },
            StateVar { name: "cwnd_bytes", value: self.map.cwnd_bytes() },
        ]
    }
}
