//! What a policy sees and does for one flow, with the model left out: the observer that turns
//! reports into the model's input and the action map that turns its output into an `Action`.
//!
//! The agent's `onnx:` algorithm puts the ONNX model between the two ([`crate::OnnxAlgorithm`]);
//! the Gymnasium environment puts the Python side being trained there. One type serves both, so
//! a policy is trained on exactly what it is deployed with.

use ccp_contract::{Action, CallError, FlowStart, Report};

use crate::action_map::ActionMap;
use crate::features::Observer;
use crate::manifest::Manifest;

#[derive(Debug, Clone)]
pub struct Steering {
    observer: Observer,
    map: ActionMap,
}

impl Steering {
    pub fn new(manifest: &Manifest) -> Steering {
        Steering { observer: Observer::new(&manifest.observation), map: ActionMap::new(manifest.action, manifest.report) }
    }

    /// The flow starts (or is taken over: the seed's last report is its first observation).
    pub fn init(&mut self, start: &FlowStart) -> Action {
        self.observer.clear();
        if let Some(r) = start.seed.as_ref().and_then(|s| s.last_report.as_ref()) {
            self.observer.push(r);
        }
        self.map.init(start)
    }

    /// Folds `report` in; the model's input now.
    pub fn observe(&mut self, report: &Report) -> &[f32] {
        self.observer.push(report);
        self.observer.values()
    }

    /// The model's output `a` for the last report observed, as an `Action`; an output that is
    /// not a number is the model's fault and changes nothing.
    pub fn act(&mut self, report: &Report, a: f32) -> Result<Action, CallError> {
        self.map.apply(report, a).ok_or_else(|| CallError::WrongType(format!("the model's output is {a}, not a number")))
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.map.cwnd_bytes()
    }
}
