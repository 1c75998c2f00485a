//! A loaded policy (model + manifest) as the registry and the controller see it: a factory that
//! names the manifest's fallback, and one [`OnnxAlgorithm`] per flow.
//!
//! Each report: the observer folds it in, the model runs on the observation, the action map turns
//! its output into an `Action`. The call is timed, and an answer later than the manifest's budget
//! is never applied (the flow keeps its settings for that report). A late answer right after
//! another late one is reported as [`CallError::Late`]; a lone late answer among timely ones
//! is the host's hiccup, not the model's cost, and only skips its report: on this virtual machine
//! one run in 4,000 to 20,000 of a 5–20 µs inference, and of plain arithmetic of 11 µs, takes
//! over 200 µs of thread CPU time, which would otherwise send some of a busy agent's flows to the
//! fallback every minute. An output that is not a number is
//! [`CallError::WrongType`], a failed inference [`CallError::Raised`]. The one containment
//! controller counts those as faults (the flow keeps its last sane settings) and, after repeated
//! ones, hands the flow to the fallback the manifest names.
//!
//! The clock is the host's, not the algorithm's: timing the inference is what hosting a learned
//! policy adds to the pure state machine, as the Python host times its calls. Inference runs on
//! the caller's thread — it is bounded computation that never blocks — so what is timed is the
//! CPU time the thread spends in it ([`crate::cpu_now`]), not the wall clock: a policy is not
//! faulted because the host preempted the agent mid-inference. A model whose
//! inference could never meet its budget is refused when it loads ([`crate::MAX_BUDGET_OVERRUN`]).
//! A process that must not depend on the host's speed (the simulator, the Gymnasium
//! environment) turns the deadline off ([`crate::set_deadline`]).

use std::sync::Arc;

use ccp_contract::{Action, Algorithm, AlgorithmFactory, CallError, Choice, FlowStart, Report, StateVar};

use crate::manifest::Manifest;
use crate::model::{Plan, Runner};
use crate::steering::Steering;

/// One model version with its manifest, shared by every flow that runs it.
pub struct Policy {
    pub manifest: Manifest,
    pub plan: Plan,
    /// Median inference cost (CPU time) measured when it loaded, µs.
    pub load_cost_us: f64,
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
        let m = &self.policy.manifest;
        Box::new(OnnxAlgorithm {
            name: self.name,
            policy: self.policy.clone(),
            steering: Steering::new(m),
            runner: Runner::new(&self.policy.plan, &m.observation.shape()),
            last_output: 0.0,
            last_cost_us: 0.0,
            late_streak: 0,
            late_total: 0,
        })
    }

    fn fallback(&self) -> Option<Choice> {
        Some(self.fallback.clone())
    }
}

pub struct OnnxAlgorithm {
    name: &'static str,
    policy: Arc<Policy>,
    steering: Steering,
    /// The flow's runner; the error when tract could not make one (every report then fails,
    /// and the controller hands the flow to the fallback).
    runner: Result<Runner, String>,
    last_output: f32,
    last_cost_us: f64,
    /// Late answers in a row (see the module docs), and in all.
    late_streak: u32,
    late_total: u64,
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
        Ok(self.steering.init(start))
    }

    fn try_on_report(&mut self, report: &Report) -> Result<Action, CallError> {
        let observation = self.steering.observe(report);
        let runner = self.runner.as_mut().map_err(|e| CallError::Unavailable(e.clone()))?;
        let t0 = crate::cpu_now();
        let output = runner.run(observation).map_err(CallError::Raised)?;
        let cost = crate::cpu_now().saturating_sub(t0);
        self.last_cost_us = cost.as_secs_f64() * 1e6;
        let budget_us = self.policy.manifest.budget_us;
        if crate::deadline_enforced() && cost.as_micros() > u128::from(budget_us) {
            self.late_streak += 1;
            self.late_total += 1;
            return match self.late_streak {
                1 => Ok(Action::default()),
                _ => Err(CallError::Late { budget_us, took_us: cost.as_micros() as u64 }),
            };
        }
        self.late_streak = 0;
        self.last_output = output;
        self.steering.act(report, output)
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "output", value: f64::from(self.last_output) },
            StateVar { name: "inference_us", value: self.last_cost_us },
            StateVar { name: "late_answers", value: self.late_total as f64 },
            StateVar { name: "cwnd_bytes", value: self.steering.cwnd_bytes() },
        ]
    }
}
