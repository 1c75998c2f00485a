//! The simulator side of `ccp_agent.env.CcEnv`: one episode of ccp-sim on its own thread, in which
//! one flow — the learner — is controlled from Python, one report at a time.
//!
//! The learner's algorithm is what a learned policy is in the agent (`ccp_learned::OnnxAlgorithm`)
//! with the model replaced by the Python side: each report goes into a `ccp_learned::Observer`,
//! the observation crosses to Python, and the action value that comes back goes through a
//! `ccp_learned::ActionMap` to the flow's controller — so a policy is trained on exactly what it
//! will see and do in the agent. The simulator blocks while Python decides (the engine is
//! deterministic: same scenario, same actions, same episode), and Python waits for the next report
//! without holding the GIL.
//!
//! An episode ends when the simulation does (its `duration_ms`), when the learner's flow has sent
//! everything, or when Python lets go of it (a reset, or the environment dropped): the simulator
//! then stops at its next event.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ccp_contract::{Action, Algorithm, AlgorithmFactory, CallError, FlowStart, Report};
use ccp_learned::manifest::ActionSpec;
use ccp_learned::{Manifest, Steering};
use ccp_sim::config::{Loaded, Reporting};
use ccp_sim::time::{to_secs, Time};
use ccp_sim::Sim;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// What the simulator thread tells Python.
enum Message {
    /// The learner's flow exists: its path with empty queues.
    Started {
        bottleneck_bps: u64,
        base_rtt: Time,
    },
    /// A report on the learner's flow, with the observation it makes; an action is awaited.
    Report {
        observation: Vec<f32>,
        report: Box<Report>,
    },
    /// The episode is over (no action is awaited).
    Finished,
    Failed(String),
}

/// The two ends the learner's algorithm talks through, shared by every instance the controller
/// creates of it (it rebuilds one only after a panic).
struct Link {
    to_python: Sender<Message>,
    actions: Mutex<Receiver<f32>>,
    /// Set when Python let go of the episode: the simulator stops.
    released: Arc<AtomicBool>,
}

struct LearnerFactory {
    manifest: Manifest,
    link: Arc<Link>,
}

impl AlgorithmFactory for LearnerFactory {
    fn name(&self) -> &'static str {
        "ccp_agent.env"
    }

    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Learner { steering: Steering::new(&self.manifest), link: self.link.clone() })
    }
}

/// The learner's algorithm: `OnnxAlgorithm` with Python in the model's place.
struct Learner {
    steering: Steering,
    link: Arc<Link>,
}

impl Learner {
    /// The action value Python chose for `observation`; `None` once Python has let go of the
    /// episode.
    fn ask(link: &Link, observation: &[f32], report: &Report) -> Option<f32> {
        if link.released.load(Ordering::Relaxed) {
            return None;
        }
        let sent = link.to_python.send(Message::Report { observation: observation.to_vec(), report: Box::new(report.clone()) });
        let answer = sent.ok().and_then(|_| link.actions.lock().ok()?.recv().ok());
        if answer.is_none() {
            link.released.store(true, Ordering::Relaxed);
        }
        answer
    }
}

impl Algorithm for Learner {
    fn name(&self) -> &'static str {
        "ccp_agent.env"
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
        // An episode Python let go of changes nothing more: the simulator is stopping.
        let Some(a) = Learner::ask(&self.link, observation, report) else { return Ok(Action::default()) };
        self.steering.act(report, a)
    }
}

/// One episode: the simulator thread and the ends Python holds.
struct Episode {
    messages: Receiver<Message>,
    actions: Option<SyncSender<f32>>,
    released: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// An action is awaited for the last report.
    awaiting: bool,
    finished: bool,
}

impl Episode {
    fn release(&mut self) {
        self.released.store(true, Ordering::Relaxed);
        self.actions = None;
        if let Some(t) = self.thread.take() {
            // The learner wakes (its action channel closed) and the simulator stops at its next
            // event; a report it was sending meanwhile is dropped with the channel.
            let _ = t.join();
        }
        self.finished = true;
    }
}

impl Drop for Episode {
    fn drop(&mut self) {
        self.release();
    }
}

/// One episode of ccp-sim with one flow controlled from Python (`ccp_agent.env.CcEnv`'s engine).
///
/// `SimCore(scenario_toml, scenario_file, manifest_toml, manifest_file, entry, overrides)`: the
/// scenario with `overrides` (`key.path=value`, as `ccp-sim run --set`), whose `[[workload.flows]]`
/// entry `entry` is the learner (its `count` must be 1). `next(action)`
/// gives the action for the last report (none before the first) and returns the next report as
/// `(observation: bytes of float32, report: Report)`, or `None` when the episode is over.
#[pyclass(module = "ccp_agent._ccp_agent", name = "_SimCore")]
pub struct SimCore {
    episode: Mutex<Episode>,
    #[pyo3(get)]
    bottleneck_bps: u64,
    #[pyo3(get)]
    base_rtt_us: f64,
    #[pyo3(get)]
    observation_len: usize,
}

#[pymethods]
impl SimCore {
    #[new]
    fn new(
        py: Python<'_>,
        scenario_toml: &str,
        scenario_file: &str,
        manifest_toml: &str,
        manifest_file: &str,
        entry: usize,
        overrides: Vec<String>,
    ) -> PyResult<SimCore> {
        let manifest = Manifest::parse(manifest_toml, Path::new(manifest_file)).map_err(PyValueError::new_err)?;
        let loaded = ccp_sim::config::load_str(Path::new(scenario_file), scenario_toml, &overrides)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        if loaded.scenario.cc.reporting != Reporting::Interval {
            return Err(PyValueError::new_err(format!(
                "{scenario_file}: cc.reporting must be \"interval\": the learner acts on reports as the agent's policies do"
            )));
        }
        let flows = &loaded.scenario.workload.flows;
        match flows.get(entry) {
            None => {
                return Err(PyValueError::new_err(format!(
                    "{scenario_file}: workload.flows[{entry}] is the learner's flow; the scenario has {} entries",
                    flows.len()
                )))
            }
            Some(f) if f.count != 1 => {
                return Err(PyValueError::new_err(format!(
                    "{scenario_file}: workload.flows[{entry}] is the learner's flow: its count must be 1, not {}",
                    f.count
                )))
            }
            Some(_) => {}
        }
        let observation_len = manifest.observation.len();
        let (to_python, messages) = mpsc::channel();
        // One action at most is ever in flight: the learner asks for one per report.
        let (actions, from_python) = mpsc::sync_channel(1);
        let released = Arc::new(AtomicBool::new(false));
        let link = Arc::new(Link { to_python, actions: Mutex::new(from_python), released: released.clone() });
        let thread = std::thread::Builder::new()
            .name("ccp-env-sim".into())
            .spawn(move || run_episode(loaded, entry, manifest, link))
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the simulator thread: {e}")))?;
        let mut episode =
            Episode { messages, actions: Some(actions), released, thread: Some(thread), awaiting: false, finished: false };
        let messages = &mut episode.messages;
        match py.detach(move || messages.recv()) {
            Ok(Message::Started { bottleneck_bps, base_rtt }) => Ok(SimCore {
                episode: Mutex::new(episode),
                bottleneck_bps,
                base_rtt_us: to_secs(base_rtt) * 1e6,
                observation_len,
            }),
            Ok(Message::Failed(e)) => {
                episode.release();
                Err(PyValueError::new_err(e))
            }
            _ => {
                episode.release();
                Err(PyRuntimeError::new_err("the simulator thread ended before the episode started"))
            }
        }
    }

    /// Gives `action` for the last report (`None`: there was none yet) and runs the simulator
    /// to the learner's next report: `(observation, report)`, or `None` once the episode is over.
    #[pyo3(signature = (action=None))]
    fn next(&self, py: Python<'_>, action: Option<f32>) -> PyResult<Option<(Py<PyBytes>, ccp_python::api::PyReport)>> {
        let mut guard = self.lock()?;
        let episode = &mut *guard;
        if episode.finished {
            return Ok(None);
        }
        match (episode.awaiting, action) {
            (true, Some(a)) => {
                if !a.is_finite() {
                    return Err(PyValueError::new_err(format!("the action must be a finite number, not {a}")));
                }
                let sent = episode.actions.as_ref().is_some_and(|s| s.send(a).is_ok());
                if !sent {
                    episode.release();
                    return Err(PyRuntimeError::new_err("the simulator thread is gone"));
                }
                episode.awaiting = false;
            }
            (true, None) => return Err(PyValueError::new_err("a report awaits its action")),
            (false, Some(_)) => return Err(PyValueError::new_err("no report awaits an action yet")),
            (false, None) => {}
        }
        let messages = &mut episode.messages;
        let message = py.detach(move || messages.recv());
        match message {
            Ok(Message::Report { observation, report }) => {
                episode.awaiting = true;
                let bytes: Vec<u8> = observation.iter().flat_map(|v| v.to_ne_bytes()).collect();
                Ok(Some((PyBytes::new(py, &bytes).unbind(), ccp_python::api::PyReport::from_report(py, &report)?)))
            }
            Ok(Message::Finished) | Err(_) => {
                episode.release();
                Ok(None)
            }
            Ok(Message::Failed(e)) => {
                episode.release();
                Err(PyRuntimeError::new_err(e))
            }
            Ok(Message::Started { .. }) => Err(PyRuntimeError::new_err("the episode started twice")),
        }
    }

    /// Ends the episode now (the simulator thread stops at its next event and is joined).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut guard = self.lock()?;
        let episode: &mut Episode = &mut guard;
        py.detach(move || episode.release());
        Ok(())
    }
}

impl SimCore {
    /// The episode, for one caller at a time. Never waits: a caller waiting here would hold the
    /// GIL that the call in progress needs to return.
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Episode>> {
        self.episode.try_lock().map_err(|e| match e {
            std::sync::TryLockError::WouldBlock => PyRuntimeError::new_err("another thread is stepping this environment"),
            std::sync::TryLockError::Poisoned(_) => PyRuntimeError::new_err("a previous call panicked"),
        })
    }
}

/// The simulator thread: builds the episode's simulation with the learner on `entry` and runs
/// it until it ends, the learner's flow is done, or Python lets go.
fn run_episode(loaded: Loaded, entry: usize, manifest: Manifest, link: Arc<Link>) {
    let to_python = link.to_python.clone();
    let released = link.released.clone();
    let factory = Arc::new(LearnerFactory { manifest, link });
    let mut sim = match Sim::with_entry_algorithm(&loaded, entry, factory) {
        Ok(sim) => sim,
        Err(e) => {
            let _ = to_python.send(Message::Failed(format!("{}: {e}", loaded.file.display())));
            return;
        }
    };
    let Some(learner) = sim.flows.iter().position(|f| f.spec.entry == Some(entry as u32)) else {
        let _ = to_python.send(Message::Failed(format!("{}: workload.flows[{entry}] has no flow", loaded.file.display())));
        return;
    };
    let path = sim.base_path(learner as u32);
    if to_python.send(Message::Started { bottleneck_bps: path.bottleneck_bps, base_rtt: path.rtt }).is_err() {
        return;
    }
    sim.run_while(|_, _| {}, |sim| !released.load(Ordering::Relaxed) && !sim.flows[learner].sender_done);
    let _ = to_python.send(Message::Finished);
}

/// What a manifest (`ccp_learned::Manifest`, validated) declares to the environment: the
/// observation's shape without the batch axis, each value's clip (±), the feature names, and the
/// bounds of the action value (`window_multiplier`: ±clip; `rate`: 0 to max_mbps / scale_mbps).
#[pyfunction]
#[pyo3(name = "_manifest_spaces")]
pub fn manifest_spaces<'py>(py: Python<'py>, manifest_toml: &str, manifest_file: &str) -> PyResult<Bound<'py, PyDict>> {
    let m = Manifest::parse(manifest_toml, Path::new(manifest_file)).map_err(PyValueError::new_err)?;
    let o = &m.observation;
    let d = PyDict::new(py);
    d.set_item("shape", o.shape()[1..].to_vec())?;
    d.set_item("clips", (0..o.history).flat_map(|_| o.features.iter().map(|f| f.clip)).collect::<Vec<f64>>())?;
    d.set_item("features", o.features.iter().map(|f| f.feature.name()).collect::<Vec<_>>())?;
    d.set_item("history", o.history)?;
    let (kind, low, high) = match m.action {
        ActionSpec::WindowMultiplier { clip, .. } => ("window_multiplier", -clip, clip),
        ActionSpec::Rate { scale_mbps, max_mbps, .. } => ("rate", 0.0, max_mbps / scale_mbps),
    };
    d.set_item("action", kind)?;
    d.set_item("action_low", low)?;
    d.set_item("action_high", high)?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 30 Mbit/s, 20 ms dumbbell with 2 BDP of buffer and a competing Cubic flow; the learner
    /// is entry 0, run by `learner_cc` when given.
    fn scenario(learner_cc: Option<&str>) -> Loaded {
        let cc = learner_cc.map_or(String::new(), |a| format!("cc = {{ algorithm = \"{a}\" }}\n"));
        let text = format!(
            r#"
            duration_ms = 1500
            [topology]
            kind = "dumbbell"
            senders = 2
            receivers = 2
            host_gbps = 1.0
            host_delay_us = 1.0
            bottleneck_gbps = 0.03
            bottleneck_delay_us = 9998.0
            [switch]
            admission = "static"
            port_buffer_bytes = 150_000
            loss_pct = 0.1
            [transport]
            ecn = false
            [cc]
            algorithm = "cubic"
            reporting = "interval"
            initial_rtt_us = 20000.0
            [[workload.flows]]
            src = 0
            dst = 2
            {cc}
            [[workload.flows]]
            src = 1
            dst = 3
            start_us = 300000.0
            "#
        );
        ccp_sim::config::load_str(Path::new("equivalence.toml"), &text, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The point of the environment: a policy trained in it is given the same observations and
    /// has the same effect as when the agent runs it as `onnx:` (here in ccp-sim, through the
    /// same registry). The environment's learner, answered by the model, must give every flow
    /// the same reports as the deployed policy.
    #[test]
    fn the_learner_answered_by_a_model_runs_exactly_as_the_deployed_onnx_policy() {
        ccp_learned::register();
        ccp_learned::set_deadline(false);
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../learned/tests/models/mlp.onnx").canonicalize().unwrap();
        let dir = std::env::temp_dir().join(format!("ccp-env-equivalence-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();

        let deployed = scenario(Some(&format!("onnx:{}", model.display())));
        let mut sim = Sim::new(&deployed).unwrap();
        sim.record = Some(ccp_sim::record::ReportRecord::create(&dir.join("deployed.jsonl")).unwrap());
        sim.run(|_, _| {});
        sim.record.as_mut().unwrap().finish().unwrap();

        let policy = ccp_learned::load_policy(&model).unwrap();
        let (to_python, messages) = mpsc::channel();
        let (actions, from_python) = mpsc::sync_channel(1);
        let link = Arc::new(Link { to_python, actions: Mutex::new(from_python), released: Arc::new(AtomicBool::new(false)) });
        let factory = Arc::new(LearnerFactory { manifest: policy.manifest.clone(), link });
        let answered = std::thread::scope(|s| {
            let policy = &policy;
            let model_side = s.spawn(move || {
                let mut runner = ccp_learned::model::Runner::new(&policy.plan, &policy.manifest.observation.shape()).unwrap();
                let mut n = 0;
                while let Ok(Message::Report { observation, .. }) = messages.recv() {
                    if actions.send(runner.run(&observation).unwrap()).is_err() {
                        break;
                    }
                    n += 1;
                }
                n
            });
            let mut sim = Sim::with_entry_algorithm(&scenario(None), 0, factory).unwrap();
            sim.record = Some(ccp_sim::record::ReportRecord::create(&dir.join("trained.jsonl")).unwrap());
            sim.run(|_, _| {});
            sim.record.as_mut().unwrap().finish().unwrap();
            drop(sim);
            model_side.join().unwrap()
        });

        let deployed = std::fs::read_to_string(dir.join("deployed.jsonl")).unwrap();
        let trained = std::fs::read_to_string(dir.join("trained.jsonl")).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let learner_reports = deployed.lines().filter(|l| l.starts_with("{\"flow\":0,")).count();
        assert!(learner_reports > 50 && answered == learner_reports, "{answered} answers, {learner_reports} reports");
        assert!(deployed.lines().any(|l| l.starts_with("{\"flow\":1,")), "the competing flow ran");
        let mut windows: Vec<u64> = deployed
            .lines()
            .filter_map(|l| serde_json::from_str::<ccp_contract::RecordedReport>(l).ok())
            .filter(|r| r.flow == 0)
            .map(|r| r.report.cwnd_bytes)
            .collect();
        windows.sort_unstable();
        windows.dedup();
        assert!(windows.len() > 20, "the policy moved the window: {windows:?}");
        assert!(deployed == trained, "the two runs' reports differ");
    }
}
