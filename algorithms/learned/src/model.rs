//! A policy's ONNX model, loaded and optimised once (tract), and run once per report.
//!
//! The model takes one f32 input of the manifest's observation shape and the first value of its
//! first output is the action. Each flow runs its own `tract` state over the one shared plan.

use std::path::Path;
use std::sync::Arc;

use tract_onnx::prelude::*;

/// Largest model file loaded, bytes (a per-report policy is small; this bounds what a file can
/// make the agent, which runs as root, allocate).
pub const MAX_MODEL_BYTES: u64 = 64 << 20;

pub type Plan = Arc<TypedRunnableModel>;

/// Loads `file`, fixes its input to `shape` (f32) and optimises it into a runnable plan. The
/// error says what is wrong with the model, naming the file.
pub fn load(file: &Path, shape: &[usize]) -> Result<Plan, String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("{}: cannot read the model: {e}", file.display()))?;
    if meta.len() > MAX_MODEL_BYTES {
        return Err(format!("{}: {} bytes; a model is at most {MAX_MODEL_BYTES}", file.display(), meta.len()));
    }
    let at = |what: &str, e: TractError| format!("{}: {what}: {}", file.display(), chain(&e));
    let model = tract_onnx::onnx().model_for_path(file).map_err(|e| at("not an ONNX model tract can read", e))?;
    let inputs = model.input_outlets().map_err(|e| at("inputs", e))?.len();
    if inputs != 1 {
        return Err(format!("{}: the model has {inputs} inputs; a policy takes exactly one (the observation)", file.display()));
    }
    if model.output_outlets().map_err(|e| at("outputs", e))?.is_empty() {
        return Err(format!("{}: the model has no output", file.display()));
    }
    let fact = InferenceFact::dt_shape(f32::datum_type(), shape);
    let plan = model
        .with_input_fact(0, fact)
        .map_err(|e| at(&format!("the input cannot take the observation's shape {shape:?}"), e))?
        .into_optimized()
        .map_err(|e| at(&format!("does not type-check with an f32 input of shape {shape:?}"), e))?
        .into_runnable()
        .map_err(|e| at("cannot be planned", e))?;
    Ok(plan)
}

fn chain(e: &TractError) -> String {
    e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ")
}

/// One flow's runner of a plan.
///
/// A policy must answer a function of the observation it is given, as it did in training and as
/// the reference evaluator does; but some tract ops keep state between runs of one tract state
/// (its recurrent ops carry their hidden state over). So a model with such ops runs each time
/// from a fresh state; a model without (an MLP) reuses one, which saves its set-up per report.
#[derive(Debug)]
pub struct Runner {
    plan: Plan,
    state: TypedSimpleState,
    /// Whether an op of the model keeps state between runs.
    stateful: bool,
    shape: Vec<usize>,
}

impl Runner {
    pub fn new(plan: &Plan, shape: &[usize]) -> Result<Runner, String> {
        let state = plan.spawn().map_err(|e| chain(&e))?;
        let stateful = state.op_states.iter().any(Option::is_some);
        Ok(Runner { plan: plan.clone(), state, stateful, shape: shape.to_vec() })
    }

    /// Runs the model on `observation` (as many values as the shape holds); the first value of
    /// its first output.
    pub fn run(&mut self, observation: &[f32]) -> Result<f32, String> {
        let input = Tensor::from_shape(&self.shape, observation).map_err(|e| chain(&e))?;
        if self.stateful {
            self.state = self.plan.spawn().map_err(|e| chain(&e))?;
        }
        let outputs = self.state.run(tvec!(input.into_tvalue())).map_err(|e| chain(&e))?;
        let first = outputs.first().ok_or("the model returned no output")?;
        let value = first
            .to_plain_array_view::<f32>()
            .map_err(|_| format!("the model's output is {:?}, not f32", first.datum_type()))?
            .iter()
            .next()
            .copied()
            .ok_or("the model's first output is empty")?;
        Ok(value)
    }
}
