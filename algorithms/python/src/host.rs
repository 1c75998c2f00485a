//! One embedded CPython interpreter, and how calls into it are bounded in time.
//!
//! Every call has a budget (`init`, `on_report`, `state`: [`call_budget`]; loading a file: 10 s)
//! counted from when the interpreter starts it. A watchdog thread looks at the running call a
//! few times per budget; a call past its budget is *abandoned* — its caller gets
//! [`CallError::TimedOut`] — and the watchdog raises `TimeoutError` inside it
//! (`PyThreadState_SetAsyncExc`), again every 100 ms while it still runs. While an abandoned
//! call runs, every other call fails at once with [`CallError::Unavailable`] instead of queueing
//! behind it, and flows go to the fallback algorithm after repeated faults.
//!
//! Where a call runs is the [`Isolation`]:
//! - [`Isolation::Inline`] (the default): on the caller's thread, with no hand-off. A runaway
//!   Python loop is interrupted at its budget and the caller goes on, but Python blocked inside
//!   C (`time.sleep`, a blocking read), which nothing can interrupt, blocks the caller with it.
//! - [`Isolation::Thread`]: on the interpreter's own thread. The caller hands the call over and
//!   waits at most the budget, so it never stalls, whatever Python does. The hand-off polls
//!   briefly on both sides (yielding the core) before sleeping, so back-to-back reports cost
//!   little more than a context switch, but a report costs about twice the CPU of `Inline`.
//!
//! `Inline` is the default because it is what a controller written as the API intends (a pure
//! state machine) costs; `Thread` is for code that may block.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ccp_contract::{Action, CallError, FlowStart, ParamSpec, ParamValue, Report};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::api::{self, PyAction, PyFlowStart, PyParam, PyReport};

/// The default budget of one `init`, `on_report` or `state` call.
pub const DEFAULT_CALL_BUDGET: Duration = Duration::from_millis(10);

/// Budget of loading a file (executing the module, checking the class).
const LOAD_BUDGET: Duration = Duration::from_secs(10);

/// How long a caller spins for its answer before it sleeps on it, and how long the interpreter
/// thread spins for its next job.
const CALLER_SPIN: Duration = Duration::from_micros(50);
const WORKER_SPIN: Duration = Duration::from_micros(100);

/// Jobs waiting for the interpreter; a caller finding it full gets `Unavailable`.
const QUEUE_DEPTH: usize = 4096;

/// Longest traceback kept from one exception, bytes: a fault message is logged per fault.
const MAX_TRACEBACK_BYTES: usize = 4096;

/// How often the watchdog raises `TimeoutError` again in a call that caught the last one.
const REAP_RETRY: Duration = Duration::from_millis(100);

/// Where Python calls run (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// On the interpreter's thread: the caller waits at most the budget, whatever Python does.
    Thread,
    /// On the caller's thread: cheaper; Python blocked inside C blocks the caller too.
    Inline,
}

static INLINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Sets where every later Python call in this process runs.
pub fn set_isolation(isolation: Isolation) {
    INLINE.store(isolation == Isolation::Inline, Ordering::Relaxed);
}

pub fn isolation() -> Isolation {
    if INLINE.load(Ordering::Relaxed) {
        Isolation::Inline
    } else {
        Isolation::Thread
    }
}

/// Sets the budget of every later `init`, `on_report` and `state` call in this process.
pub fn set_call_budget(budget: Duration) {
    CALL_BUDGET_US.store((budget.as_micros() as u64).max(1), Ordering::Relaxed);
}

static CALL_BUDGET_US: AtomicU64 = AtomicU64::new(DEFAULT_CALL_BUDGET.as_micros() as u64);

pub fn call_budget() -> Duration {
    Duration::from_micros(CALL_BUDGET_US.load(Ordering::Relaxed))
}

/// What the interpreter thread is asked to do.
pub(crate) enum Work {
    Load { path: PathBuf, module_name: String, class: String },
    Init { instance: u64, class: usize, params: Vec<(&'static str, ParamValue)>, start: FlowStart },
    Report { instance: u64, report: Report },
    State { instance: u64 },
}

impl Work {
    fn budget(&self) -> Duration {
        match self {
            Work::Load { .. } => LOAD_BUDGET,
            _ => call_budget(),
        }
    }
}

/// A class the interpreter holds, as the loader needs it.
pub(crate) struct LoadedClass {
    pub class: usize,
    pub summary: String,
    pub reference: String,
    pub params: Vec<ParamSpec>,
}

pub(crate) enum Done {
    Loaded(LoadedClass),
    Action(Action),
    State(Vec<(String, f64)>),
}

type Answer = (u64, Result<Done, CallError>);

struct Job {
    seq: u64,
    work: Work,
    reply: Sender<Answer>,
}

/// The call the interpreter is running.
#[derive(Default)]
struct Current {
    seq: u64,
    started: Option<Instant>,
    budget: Duration,
    /// Python's thread identifier of the thread running it, for the watchdog.
    ident: u64,
    abandoned: bool,
}

struct Shared {
    current: Mutex<Current>,
    interpreter: Mutex<Interpreter>,
    /// Instances whose flows are gone, freed between calls.
    drops: Mutex<Vec<u64>>,
}

pub(crate) struct Host {
    jobs: SyncSender<Job>,
    shared: Arc<Shared>,
    seq: AtomicU64,
}

/// The process's host, started on first use.
pub(crate) fn host() -> Result<&'static Host, CallError> {
    static HOST: OnceLock<Result<Host, String>> = OnceLock::new();
    HOST.get_or_init(Host::start).as_ref().map_err(|e| CallError::Unavailable(e.clone()))
}

thread_local! {
    /// Each calling thread's answer channel, reused across calls; answers to abandoned calls
    /// that arrive late are told apart by sequence number and dropped.
    static ANSWERS: (Sender<Answer>, Receiver<Answer>) = mpsc::channel();
}

impl Host {
    fn start() -> Result<Host, String> {
        let (jobs, rx) = mpsc::sync_channel::<Job>(QUEUE_DEPTH);
        let shared = Arc::new(Shared { current: Mutex::default(), interpreter: Mutex::default(), drops: Mutex::default() });
        let (ready_tx, ready_rx) = mpsc::channel();
        let worker_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ccp-python".into())
            .spawn(move || worker(rx, worker_shared, ready_tx))
            .map_err(|e| format!("cannot start the Python interpreter thread: {e}"))?;
        ready_rx.recv().map_err(|_| "the Python interpreter thread died while starting".to_string())??;
        let watchdog_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ccp-python-watchdog".into())
            .spawn(move || watchdog(watchdog_shared))
            .map_err(|e| format!("cannot start the Python watchdog thread: {e}"))?;
        Ok(Host { jobs, shared, seq: AtomicU64::new(1) })
    }

    /// Frees an instance (its flow ended or its controller replaced it); never blocks.
    pub fn drop_instance(&self, instance: u64) {
        self.shared.drops.lock().unwrap_or_else(|e| e.into_inner()).push(instance);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.shared.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The abandoned call still running, if any, and for how long it has run.
    fn stuck(&self) -> Option<Duration> {
        let c = self.lock();
        if c.abandoned {
            c.started.map(|s| s.elapsed())
        } else {
            None
        }
    }

    /// Runs `work` on the interpreter thread and waits for its answer within its budget.
    pub fn call(&self, work: Work) -> Result<Done, CallError> {
        if let Some(running) = self.stuck() {
            return Err(CallError::Unavailable(format!(
                "the Python interpreter is still running a call abandoned {} ms ago",
                running.as_millis()
            )));
        }
        let budget = work.budget();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        if isolation() == Isolation::Inline {
            return run_call(&self.shared, seq, budget, work, Isolation::Inline);
        }
        ANSWERS.with(|(tx, rx)| {
            match self.jobs.try_send(Job { seq, work, reply: tx.clone() }) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    return Err(CallError::Unavailable(format!("{QUEUE_DEPTH} Python calls are already waiting")))
                }
                Err(TrySendError::Disconnected(_)) => {
                    return Err(CallError::Unavailable("the Python interpreter thread has ended".into()))
                }
            }
            let spin_until = Instant::now() + CALLER_SPIN;
            loop {
                let wait = match rx.try_recv() {
                    Ok((s, answer)) if s == seq => return answer,
                    Ok(_) => continue,
                    Err(TryRecvError::Disconnected) => unreachable!("this thread holds a sender"),
                    Err(TryRecvError::Empty) if Instant::now() < spin_until => {
                        std::thread::yield_now();
                        continue;
                    }
                    Err(TryRecvError::Empty) => self.wait_step(seq, budget)?,
                };
                match rx.recv_timeout(wait) {
                    Ok((s, answer)) if s == seq => return answer,
                    Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => unreachable!("this thread holds a sender"),
                }
            }
        })
    }

    /// How long to sleep for job `seq`'s answer; abandons it once it has run `budget`.
    fn wait_step(&self, seq: u64, budget: Duration) -> Result<Duration, CallError> {
        let mut c = self.lock();
        if c.seq != seq {
            if c.abandoned {
                // Queued behind an abandoned call: it may never start.
                return Err(CallError::Unavailable("the Python interpreter is still running an abandoned call".into()));
            }
            // Not started yet (another caller's job runs), or just finished: look again soon.
            return Ok(Duration::from_micros(200));
        }
        let ran = c.started.map_or(Duration::ZERO, |s| s.elapsed());
        if ran < budget {
            return Ok(budget - ran);
        }
        // The watchdog interrupts it.
        c.abandoned = true;
        Err(CallError::TimedOut { budget_us: budget.as_micros() as u64 })
    }
}

fn worker(rx: Receiver<Job>, shared: Arc<Shared>, ready: Sender<Result<(), String>>) {
    // SAFETY: not initialised yet (checked), and nothing else in this process initialises Python.
    unsafe {
        if pyo3::ffi::Py_IsInitialized() != 0 {
            let _ = ready.send(Err("a Python interpreter already runs in this process".into()));
            return;
        }
    }
    use crate::api::ccp_agent;
    pyo3::append_to_inittab!(ccp_agent);
    Python::initialize();
    let started = Python::attach(|py| -> PyResult<()> {
        // The agent's own `ccp_agent`, whatever a site-packages may hold; and what a fault's
        // traceback needs, imported now rather than inside the first faulty call's budget.
        py.import("ccp_agent")?;
        py.import("traceback")?;
        Ok(())
    });
    if let Err(e) = started {
        let _ = ready.send(Err(format!("the embedded Python interpreter failed to start: {e}")));
        return;
    }
    let _ = ready.send(Ok(()));
    loop {
        let spin_until = Instant::now() + WORKER_SPIN;
        let job = loop {
            match rx.try_recv() {
                Ok(job) => break Some(job),
                Err(TryRecvError::Disconnected) => break None,
                Err(TryRecvError::Empty) if Instant::now() < spin_until => std::thread::yield_now(),
                Err(TryRecvError::Empty) => break rx.recv().ok(),
            }
        };
        let Some(job) = job else { return };
        let budget = job.work.budget();
        let answer = run_call(&shared, job.seq, budget, job.work, Isolation::Thread);
        let _ = job.reply.send((job.seq, answer));
    }
}

/// Gives this thread a Python thread state that lives as long as the thread. Attaching then
/// only takes the interpreter lock; without it every attach creates a thread state and every
/// detach destroys it again, which costs more than a whole Python `on_report`.
fn keep_thread_state() {
    thread_local!(static KEPT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    if KEPT.with(|k| k.replace(true)) {
        return;
    }
    // SAFETY: the interpreter is initialised (the host started it) and this thread is not
    // attached (every attach in this module is scoped); the Ensure is never released, so the
    // state outlives each later attach, and SaveThread hands the lock back.
    unsafe {
        let _ = pyo3::ffi::PyGILState_Ensure();
        pyo3::ffi::PyEval_SaveThread();
    }
}

/// Runs one call on this thread as the running call the watchdog sees.
fn run_call(shared: &Shared, seq: u64, budget: Duration, work: Work, isolation: Isolation) -> Result<Done, CallError> {
    keep_thread_state();
    // The interpreter's state before the interpreter itself: a thread holding the latter while
    // it waits for the former would keep the call it waits for from ever finishing.
    let mut interpreter = shared.interpreter.lock().unwrap_or_else(|e| e.into_inner());
    Python::attach(|py| {
        // SAFETY: plain query of this thread's identifier.
        #[allow(clippy::useless_conversion)] // c_ulong is u64 here, not everywhere
        let ident = u64::from(unsafe { pyo3::ffi::PyThread_get_thread_ident() });
        {
            let mut c = shared.current.lock().unwrap_or_else(|e| e.into_inner());
            *c = Current { seq, started: Some(Instant::now()), budget, ident, abandoned: false };
        }
        let answer = interpreter.run(py, work);
        let drops = std::mem::take(&mut *shared.drops.lock().unwrap_or_else(|e| e.into_inner()));
        for id in drops {
            interpreter.instances.remove(&id);
        }
        let abandoned = {
            let mut c = shared.current.lock().unwrap_or_else(|e| e.into_inner());
            let abandoned = c.abandoned;
            *c = Current::default();
            abandoned
        };
        if !abandoned {
            return answer;
        }
        // A TimeoutError the watchdog aimed at this call but that arrived after it ended must
        // not hit the next one. SAFETY: attached; a null exception clears the pending one.
        unsafe { pyo3::ffi::PyThreadState_SetAsyncExc(ident as _, std::ptr::null_mut()) };
        match isolation {
            // Its caller has long had its timeout.
            Isolation::Thread => answer,
            Isolation::Inline => Err(CallError::TimedOut { budget_us: budget.as_micros() as u64 }),
        }
    })
}

/// How often the watchdog looks at the running call, at most (and at least four times a budget).
const WATCH_EVERY: Duration = Duration::from_millis(5);

/// Abandons calls past their budget and interrupts them: raises `TimeoutError` in the thread
/// running one, every [`REAP_RETRY`] while it runs, and says once when one runs on for long.
fn watchdog(shared: Arc<Shared>) {
    let mut warned_for = 0;
    // The call last interrupted, and when: the same call is interrupted again only every
    // REAP_RETRY, while a new call past its budget is interrupted as soon as it is seen.
    let mut last_raise: Option<(u64, Instant)> = None;
    loop {
        let overdue = {
            let mut c = shared.current.lock().unwrap_or_else(|e| e.into_inner());
            match c.started {
                Some(t) if t.elapsed() >= c.budget => {
                    c.abandoned = true;
                    Some((c.seq, t.elapsed()))
                }
                _ => None,
            }
        };
        if let Some((seq, ran)) = overdue {
            if last_raise.is_none_or(|(s, t)| s != seq || t.elapsed() >= REAP_RETRY) {
                // Attaching waits for the running call to yield the interpreter (every 5 ms of
                // bytecode); the call cannot end meanwhile, since it ends attached.
                Python::attach(|_py| {
                    let c = shared.current.lock().unwrap_or_else(|e| e.into_inner());
                    if c.seq == seq && c.abandoned {
                        // SAFETY: attached; the exception type is a static borrowed reference.
                        unsafe { pyo3::ffi::PyThreadState_SetAsyncExc(c.ident as _, pyo3::ffi::PyExc_TimeoutError) };
                    }
                });
                last_raise = Some((seq, Instant::now()));
            }
            if warned_for != seq && ran > Duration::from_secs(1) {
                warned_for = seq;
                tracing::warn!(
                    "a Python call abandoned past its budget is still running after {} ms (it catches TimeoutError or blocks in C); \
                     Python flows fault until it ends and go to the fallback algorithm",
                    ran.as_millis()
                );
            }
        }
        std::thread::sleep((call_budget() / 4).clamp(Duration::from_micros(500), WATCH_EVERY));
    }
}

/// The interpreter thread's state: loaded classes and live instances.
#[derive(Default)]
struct Interpreter {
    classes: Vec<Py<PyAny>>,
    instances: HashMap<u64, Py<PyAny>>,
}

impl Interpreter {
    fn run(&mut self, py: Python<'_>, work: Work) -> Result<Done, CallError> {
        match work {
            Work::Load { path, module_name, class } => self.load(py, &path, &module_name, &class).map(Done::Loaded),
            Work::Init { instance, class, params, start } => {
                let cls = self.classes[class].bind(py);
                let kwargs = PyDict::new(py);
                for (name, value) in &params {
                    let v = api::param_value(py, value).map_err(|e| raised(py, e))?;
                    kwargs.set_item(name, v).map_err(|e| raised(py, e))?;
                }
                let obj = cls.call((), Some(&kwargs)).map_err(|e| raised(py, e))?;
                self.instances.insert(instance, obj.clone().unbind());
                let flow =
                    Py::new(py, PyFlowStart::from_start(py, &start).map_err(|e| raised(py, e))?).map_err(|e| raised(py, e))?;
                let out = obj.call_method1(pyo3::intern!(py, "init"), (flow,)).map_err(|e| raised(py, e))?;
                action_of(&out, "init").map(Done::Action)
            }
            Work::Report { instance, report } => {
                let obj = self.instance(py, instance)?;
                let r = Py::new(py, PyReport::from_report(py, &report).map_err(|e| raised(py, e))?).map_err(|e| raised(py, e))?;
                let out = obj.call_method1(pyo3::intern!(py, "on_report"), (r,)).map_err(|e| raised(py, e))?;
                action_of(&out, "on_report").map(Done::Action)
            }
            Work::State { instance } => {
                let obj = self.instance(py, instance)?;
                let out = obj.call_method0("state").map_err(|e| raised(py, e))?;
                if out.is_none() {
                    return Ok(Done::State(Vec::new()));
                }
                let dict = out.cast::<PyDict>().map_err(|_| {
                    CallError::WrongType(format!("state() returned {}, expected a dict of name to number", type_name(&out)))
                })?;
                let mut vars = Vec::new();
                for (k, v) in dict.iter() {
                    let (Ok(name), Ok(value)) = (k.extract::<String>(), v.extract::<f64>()) else {
                        return Err(CallError::WrongType(format!(
                            "state() holds {}: {}, expected str: number",
                            type_name(&k),
                            type_name(&v)
                        )));
                    };
                    vars.push((name, value));
                }
                Ok(Done::State(vars))
            }
        }
    }

    fn instance<'py>(&self, py: Python<'py>, instance: u64) -> Result<Bound<'py, PyAny>, CallError> {
        self.instances
            .get(&instance)
            .map(|o| o.bind(py).clone())
            .ok_or_else(|| CallError::Raised("the instance was never built (its constructor or init raised)".into()))
    }

    fn load(&mut self, py: Python<'_>, path: &std::path::Path, module_name: &str, class: &str) -> Result<LoadedClass, CallError> {
        let util = py.import("importlib.util").map_err(|e| raised(py, e))?;
        let spec = util.call_method1("spec_from_file_location", (module_name, path)).map_err(|e| raised(py, e))?;
        if spec.is_none() {
            return Err(CallError::Raised(format!("{} cannot be loaded as a Python module", path.display())));
        }
        let module = util.call_method1("module_from_spec", (&spec,)).map_err(|e| raised(py, e))?;
        // Its folder joins the end of sys.path, so it may import modules next to it (never
        // shadowing the standard library or installed packages).
        let sys_path = py.import("sys").and_then(|s| s.getattr("path")).map_err(|e| raised(py, e))?;
        if let Some(dir) = path.parent().and_then(|d| d.to_str()) {
            if !sys_path.contains(dir).unwrap_or(true) {
                sys_path.call_method1("append", (dir,)).map_err(|e| raised(py, e))?;
            }
        }
        // In sys.modules while it runs, as importlib does: dataclasses and pickling look there.
        let modules = py.import("sys").and_then(|s| s.getattr("modules")).map_err(|e| raised(py, e))?;
        modules.set_item(module_name, &module).map_err(|e| raised(py, e))?;
        if let Err(e) = spec.getattr("loader").and_then(|l| l.call_method1("exec_module", (&module,))) {
            let _ = modules.del_item(module_name);
            return Err(raised(py, e));
        }
        let cls = module.getattr(class).map_err(|_| {
            let names: Vec<String> = module
                .dir()
                .map(|d| d.iter().filter_map(|n| n.extract::<String>().ok()).filter(|n| !n.starts_with('_')).collect())
                .unwrap_or_default();
            CallError::Raised(format!("{} defines no {class:?} (it defines: {})", path.display(), names.join(", ")))
        })?;
        if cls.cast::<pyo3::types::PyType>().is_err() {
            return Err(CallError::WrongType(format!("{class} in {} is a {}, not a class", path.display(), type_name(&cls))));
        }
        for method in ["init", "on_report"] {
            let ok = cls.getattr(method).map(|m| m.is_callable()).unwrap_or(false);
            if !ok {
                return Err(CallError::WrongType(format!("class {class} has no method {method}(self, …)")));
            }
        }
        if !cls.hasattr("state").unwrap_or(false) {
            // Duck-typed classes without the base's state(): give them one.
            let empty = py.eval(c"lambda self: {}", None, None).map_err(|e| raised(py, e))?;
            cls.setattr("state", empty).map_err(|e| raised(py, e))?;
        }
        let doc: Option<String> = cls.getattr("__doc__").ok().and_then(|d| d.extract().ok());
        let summary = doc.as_deref().and_then(|d| d.lines().map(str::trim).find(|l| !l.is_empty())).unwrap_or("").to_string();
        let reference: String = cls.getattr("reference").ok().and_then(|r| r.extract().ok()).unwrap_or_default();
        let mut params = Vec::new();
        if let Ok(declared) = cls.getattr("params") {
            let items = declared
                .try_iter()
                .map_err(|_| CallError::WrongType(format!("{class}.params must be a sequence of ccp_agent.Param")))?;
            for item in items {
                let item = item.map_err(|e| raised(py, e))?;
                let p = item.cast::<PyParam>().map_err(|_| {
                    CallError::WrongType(format!("{class}.params holds a {}, not a ccp_agent.Param", type_name(&item)))
                })?;
                let spec = p.get().spec(py).map_err(|e| CallError::WrongType(format!("{class}.params: {e}")))?;
                if params.iter().any(|s: &ParamSpec| s.name == spec.name) {
                    return Err(CallError::WrongType(format!("{class}.params declares {:?} twice", spec.name)));
                }
                params.push(spec);
            }
        }
        self.classes.push(cls.unbind());
        Ok(LoadedClass { class: self.classes.len() - 1, summary, reference, params })
    }
}

fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// What `init` or `on_report` returned, as an action: `None` is no change.
fn action_of(out: &Bound<'_, PyAny>, method: &str) -> Result<Action, CallError> {
    if out.is_none() {
        return Ok(Action::default());
    }
    let a = out.cast::<PyAction>().map_err(|_| {
        CallError::WrongType(format!("{method}() returned {}, expected ccp_agent.Action or None", type_name(out)))
    })?;
    a.borrow().to_action().map_err(CallError::WrongType)
}

/// An exception as a fault: its traceback, bounded.
fn raised(py: Python<'_>, e: PyErr) -> CallError {
    let text = py
        .import("traceback")
        .and_then(|tb| tb.call_method1("format_exception", (e.get_type(py), e.value(py), e.traceback(py))))
        .and_then(|lines| lines.extract::<Vec<String>>())
        .map(|lines| lines.concat())
        .unwrap_or_else(|_| e.to_string());
    let mut text = text.trim_end().to_string();
    if text.len() > MAX_TRACEBACK_BYTES {
        let mut cut = text.len() - MAX_TRACEBACK_BYTES;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = format!("…{}", &text[cut..]);
    }
    CallError::Raised(text)
}
