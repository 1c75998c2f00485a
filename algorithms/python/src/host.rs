//! One embedded CPython interpreter, and how calls into it are bounded in time.
//!
//! Every call has a budget (`init`, `on_report`, `state`: [`call_budget`]; loading a file: 10 s)
//! counted from when the interpreter starts it. A watchdog thread looks at the running call a
//! few times per budget; a call past it is *abandoned* — its caller gets
//! [`CallError::TimedOut`] — and the watchdog raises `TimeoutError` inside it
//! (`PyThreadState_SetAsyncExc`), again every 100 ms while it still runs. While an abandoned
//! call runs, every other call fails at once with [`CallError::Unavailable`] instead of queueing
//! behind it (one already queued is withdrawn), and flows go to the fallback algorithm after
//! repeated faults.
//!
//! Where a call runs is the [`Isolation`]:
//! - [`Isolation::Thread`] (the default): on the interpreter's own thread, so that no Python
//!   code, whatever it does, can hold the caller. A call is queued ([`Host::submit`], a
//!   [`Ticket`]); the thread runs its queue back to back, attached to the interpreter once for
//!   all of it, and sleeps only when it is empty. The caller either waits for the answer
//!   ([`Host::collect`]: at most the budget, and not at all behind an abandoned call), or goes on
//!   with other work and collects it once [`Host::ready`] says it would not wait: the agent
//!   begins every Python report of a batch of datapath events and decides each when its answer
//!   is there ([`crate::hosted`]), woken when answers may be there ([`wake_on_answers`]: the
//!   thread has run its queue empty, or the watchdog abandoned a call).
//! - [`Isolation::Inline`]: on the caller's thread, with no hand-off. A runaway Python loop is
//!   interrupted at its budget and the caller goes on, but Python blocked inside C
//!   (`time.sleep`, a blocking read, a slow import), which nothing can interrupt, blocks the
//!   caller with it. For a caller with nothing else to serve (the simulator).
//!
//! What the hand-off costs is a wake-up of each thread per run of the queue (a few µs of CPU on
//! a VM), so it depends on how many calls a run holds: one call per run costs about 2.7-2.8 times
//! `Inline`'s CPU with the Python Reno, ten 1.3-1.4 times, 32 or more 1.1-1.2 times
//! (`cargo bench -p ccp-python --bench per_report`; docs/python.md).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use ccp_contract::{Action, CallError, FlowStart, ParamSpec, ParamValue, Report};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::api::{self, PyAction, PyFlowStart, PyParam, PyReport};

/// The default budget of one `init`, `on_report` or `state` call.
pub const DEFAULT_CALL_BUDGET: Duration = Duration::from_millis(10);

/// Budget of loading a file (executing the module, checking the class).
const LOAD_BUDGET: Duration = Duration::from_secs(10);

/// How long a caller polls for its answer before it sleeps on it: a wake-up costs the caller a
/// few µs of CPU, which polling for an answer about to come costs less than.
const CALLER_SPIN: Duration = Duration::from_micros(2);

/// How long a caller sleeps at most, when no call runs, before it looks at its job again (the
/// interpreter thread wakes it as soon as its answer is there).
const BETWEEN_CALLS: Duration = Duration::from_millis(1);

/// Jobs waiting for the interpreter; a caller finding it full gets `Unavailable`.
const QUEUE_DEPTH: usize = 4096;

/// Longest traceback kept from one exception, bytes: a fault message is logged per fault.
const MAX_TRACEBACK_BYTES: usize = 4096;

/// How often the watchdog raises `TimeoutError` again in a call that caught the last one.
const REAP_RETRY: Duration = Duration::from_millis(100);

/// Where Python calls run (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// On the interpreter's thread: whatever Python does, a caller waits at most the budget (or
    /// not at all, if it collects answers once they are there).
    Thread,
    /// On the caller's thread: no hand-off; Python blocked inside C blocks the caller too.
    Inline,
}

static INLINE: AtomicBool = AtomicBool::new(false);

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

type Answer = Result<Done, CallError>;

/// A queued job's state, and where the interpreter thread leaves its answer.
#[derive(Default)]
struct Slot {
    /// `QUEUED`, then `RUNNING` and `ANSWERED`, or `WITHDRAWN` (never run).
    state: AtomicU8,
    answer: Mutex<Option<Answer>>,
}

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const WITHDRAWN: u8 = 2;
const ANSWERED: u8 = 3;

impl Slot {
    /// Whether the job may run (it was not withdrawn).
    fn start(&self) -> bool {
        self.state.compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Whether the job was withdrawn before it started.
    fn withdraw(&self) -> bool {
        self.state.compare_exchange(QUEUED, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn put(&self, answer: Answer) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
        self.state.store(ANSWERED, Ordering::Release);
    }

    fn take(&self) -> Option<Answer> {
        if self.state.load(Ordering::Acquire) != ANSWERED {
            return None;
        }
        self.answer.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

struct Job {
    seq: u64,
    budget: Duration,
    work: Work,
    slot: Arc<Slot>,
}

/// A call queued for the interpreter thread ([`Host::submit`]). [`Host::collect`] waits for its
/// answer; dropping it uncollected withdraws the call if it has not started.
pub(crate) struct Ticket {
    seq: u64,
    budget: Duration,
    slot: Arc<Slot>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.slot.withdraw();
    }
}

/// Jobs waiting for the interpreter thread, and callers waiting for answers.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// The interpreter thread sleeps for want of jobs: whoever queues one wakes it.
    idle: bool,
    /// Per caller asleep, the job whose answer wakes it.
    sleepers: Vec<u64>,
}

impl Queue {
    /// The first job whose answer wakes a caller; `u64::MAX` when none sleeps.
    fn wake_at(&self) -> u64 {
        self.sleepers.iter().copied().min().unwrap_or(u64::MAX)
    }
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

impl Current {
    /// Its caller has its timeout; the watchdog interrupts it.
    fn abandon(&mut self, shared: &Shared) {
        self.abandoned = true;
        shared.stuck.store(true, Ordering::Relaxed);
    }
}

struct Shared {
    current: Mutex<Current>,
    interpreter: Mutex<Interpreter>,
    /// Instances whose flows are gone, freed between calls.
    drops: Mutex<Vec<u64>>,
    queue: Mutex<Queue>,
    /// The last queued job the interpreter thread is done with (it takes them in `seq` order).
    done: AtomicU64,
    /// `Queue::wake_at`, for the interpreter thread to read without the lock: it stores `done`
    /// and then reads this, a caller going to sleep stores this and then reads `done`, so one
    /// of the two sees the other's (both sequentially consistent) and no wake-up is lost.
    wake_at: AtomicU64,
    /// `current.abandoned`, for a caller to read without the lock.
    stuck: AtomicBool,
    /// The interpreter thread has ended (it never does but by a bug): nothing answers.
    ended: AtomicBool,
    /// The interpreter thread sleeps here for jobs,
    queued: Condvar,
    /// and callers here for answers.
    answered: Condvar,
}

pub(crate) struct Host {
    shared: Arc<Shared>,
    seq: AtomicU64,
}

/// The process's host, started on first use.
pub(crate) fn host() -> Result<&'static Host, CallError> {
    static HOST: OnceLock<Result<Host, String>> = OnceLock::new();
    HOST.get_or_init(Host::start).as_ref().map_err(|e| CallError::Unavailable(e.clone()))
}

impl Host {
    fn start() -> Result<Host, String> {
        let shared = Arc::new(Shared {
            current: Mutex::default(),
            interpreter: Mutex::default(),
            drops: Mutex::default(),
            queue: Mutex::default(),
            done: AtomicU64::new(0),
            wake_at: AtomicU64::new(u64::MAX),
            stuck: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            queued: Condvar::new(),
            answered: Condvar::new(),
        });
        let (ready_tx, ready_rx) = mpsc::channel();
        let worker_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ccp-python".into())
            .spawn(move || worker(worker_shared, ready_tx))
            .map_err(|e| format!("cannot start the Python interpreter thread: {e}"))?;
        ready_rx.recv().map_err(|_| "the Python interpreter thread died while starting".to_string())??;
        let watchdog_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ccp-python-watchdog".into())
            .spawn(move || watchdog(watchdog_shared))
            .map_err(|e| format!("cannot start the Python watchdog thread: {e}"))?;
        Ok(Host { shared, seq: AtomicU64::new(1) })
    }

    /// Frees an instance (its flow ended or its controller replaced it); never blocks.
    pub fn drop_instance(&self, instance: u64) {
        self.shared.drops.lock().unwrap_or_else(|e| e.into_inner()).push(instance);
    }

    fn lock(&self) -> MutexGuard<'_, Current> {
        self.shared.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Unavailable` while an abandoned call still runs.
    fn refuse_if_stuck(&self) -> Result<(), CallError> {
        if !self.shared.stuck.load(Ordering::Relaxed) {
            return Ok(());
        }
        let c = self.lock();
        match c.started {
            Some(s) if c.abandoned => Err(CallError::Unavailable(format!(
                "the Python interpreter is still running a call abandoned {} ms ago",
                s.elapsed().as_millis()
            ))),
            _ => Ok(()),
        }
    }

    /// Runs `work` where the isolation says and waits for its answer within its budget.
    pub fn call(&self, work: Work) -> Result<Done, CallError> {
        if isolation() == Isolation::Inline {
            self.refuse_if_stuck()?;
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            return run_call(&self.shared, seq, work.budget(), work, Isolation::Inline);
        }
        self.collect(self.submit(work)?)
    }

    /// Queues `work` for the interpreter thread without waiting: it starts at once if the thread
    /// is free, and the answer waits for [`Host::collect`].
    pub fn submit(&self, work: Work) -> Result<Ticket, CallError> {
        self.refuse_if_stuck()?;
        if self.shared.ended.load(Ordering::Relaxed) {
            return Err(CallError::Unavailable("the Python interpreter thread has ended".into()));
        }
        let budget = work.budget();
        let slot = Arc::new(Slot::default());
        let mut q = self.queue();
        if q.jobs.len() >= QUEUE_DEPTH {
            return Err(CallError::Unavailable(format!("{QUEUE_DEPTH} Python calls are already waiting")));
        }
        // Taken with the queue held, so the queue is in `seq` order.
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        q.jobs.push_back(Job { seq, budget, work, slot: Arc::clone(&slot) });
        let wake = std::mem::take(&mut q.idle);
        drop(q);
        // Outside the lock, which the woken thread takes first thing.
        if wake {
            self.shared.queued.notify_one();
        }
        Ok(Ticket { seq, budget, slot })
    }

    /// Whether [`Host::collect`] would return at once: the answer is there, or an abandoned call
    /// runs (this one, timed out, or another, which this one waits behind: withdrawn).
    pub fn ready(&self, ticket: &Ticket) -> bool {
        ticket.slot.state.load(Ordering::Acquire) == ANSWERED
            || self.shared.stuck.load(Ordering::Relaxed)
            || self.shared.ended.load(Ordering::Relaxed)
    }

    /// Waits for a queued call's answer: at most until it has run its budget (then it is
    /// abandoned), and not at all behind an abandoned call (it is withdrawn: `Unavailable`).
    pub fn collect(&self, ticket: Ticket) -> Result<Done, CallError> {
        let spin_until = Instant::now() + CALLER_SPIN;
        loop {
            if let Some(answer) = ticket.slot.take() {
                return answer;
            }
            // Running: it may end before a sleep would.
            if ticket.slot.state.load(Ordering::Relaxed) == RUNNING && Instant::now() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            if self.shared.ended.load(Ordering::Relaxed) {
                return Err(CallError::Unavailable("the Python interpreter thread has ended".into()));
            }
            let Some(nap) = self.wait_step(&ticket)? else { continue };
            let mut q = self.queue();
            q.sleepers.push(ticket.seq);
            self.shared.wake_at.store(q.wake_at(), Ordering::SeqCst);
            if self.shared.done.load(Ordering::SeqCst) < ticket.seq {
                q = self.shared.answered.wait_timeout(q, nap).unwrap_or_else(|e| e.into_inner()).0;
            }
            if let Some(i) = q.sleepers.iter().position(|t| *t == ticket.seq) {
                q.sleepers.swap_remove(i);
            }
            self.shared.wake_at.store(q.wake_at(), Ordering::SeqCst);
        }
    }

    /// Where a queued job stands: how long its caller may sleep for it (`None`: look again now),
    /// or why it failed: it ran past its budget (abandoned now), or waits behind a call that did
    /// (withdrawn).
    fn wait_step(&self, ticket: &Ticket) -> Result<Option<Duration>, CallError> {
        let mut c = self.lock();
        let ran = c.started.map(|s| s.elapsed());
        if c.seq == ticket.seq {
            let ran = ran.unwrap_or_default();
            if c.abandoned || ran >= ticket.budget {
                // The watchdog interrupts it.
                c.abandon(&self.shared);
                return Err(CallError::TimedOut { budget_us: ticket.budget.as_micros() as u64 });
            }
            return Ok(Some(ticket.budget - ran));
        }
        if ran.is_some_and(|ran| ran >= c.budget) {
            // Another call past its budget: abandoned, as the watchdog is about to find it.
            c.abandon(&self.shared);
        }
        if c.abandoned {
            drop(c);
            if ticket.slot.withdraw() {
                return Err(CallError::Unavailable("the Python interpreter is still running an abandoned call".into()));
            }
            // Not waiting any more: answered just now.
            return Ok(None);
        }
        // Queued behind another call, or about to start.
        Ok(Some(ran.map_or(BETWEEN_CALLS, |ran| c.budget - ran)))
    }
}

/// Marks the interpreter thread ended if it unwinds, so callers stop waiting for it.
struct EndGuard<'a>(&'a Shared);

impl Drop for EndGuard<'_> {
    fn drop(&mut self) {
        self.0.ended.store(true, Ordering::Relaxed);
        self.0.answered.notify_all();
    }
}

fn worker(shared: Arc<Shared>, ready: Sender<Result<(), String>>) {
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
    let _end = EndGuard(&shared);
    let mut jobs = VecDeque::new();
    loop {
        {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            while q.jobs.is_empty() {
                q.idle = true;
                q = shared.queued.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::swap(&mut q.jobs, &mut jobs);
        }
        run_jobs(&shared, &mut jobs);
    }
}

/// Runs queued jobs back to back, attached once, until the queue is empty.
fn run_jobs(shared: &Shared, jobs: &mut VecDeque<Job>) {
    keep_thread_state();
    // The interpreter's state before the interpreter itself (see `run_call`).
    let mut interpreter = shared.interpreter.lock().unwrap_or_else(|e| e.into_inner());
    Python::attach(|py| loop {
        while let Some(job) = jobs.pop_front() {
            if job.slot.start() {
                let answer = run_attached(py, shared, &mut interpreter, job.seq, job.budget, job.work, Isolation::Thread);
                job.slot.put(answer);
            }
            shared.done.store(job.seq, Ordering::SeqCst);
            if shared.wake_at.load(Ordering::SeqCst) <= job.seq {
                // Taking the lock orders this after the sleeper's look at `done`; notifying
                // outside it spares the woken one from waiting for it.
                drop(shared.queue.lock().unwrap_or_else(|e| e.into_inner()));
                shared.answered.notify_all();
            }
        }
        let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.jobs.is_empty() {
            drop(q);
            wake_callers();
            return;
        }
        std::mem::swap(&mut q.jobs, jobs);
    });
}

/// Callers to tell when answers to calls they did not wait for may be there ([`wake_on_answers`]).
static WAKERS: Mutex<Vec<Weak<dyn Fn() + Send + Sync>>> = Mutex::new(Vec::new());

/// Calls `waker` whenever answers to queued calls may be there: the interpreter thread has run
/// its queue empty, or a call was abandoned (calls queued behind it then fail at once). A caller
/// that begins calls and goes on with other work rather than waiting for them
/// (`Controller::begun_ready`) looks at them again then. Kept until `waker` is dropped.
pub fn wake_on_answers(waker: &Arc<dyn Fn() + Send + Sync>) {
    WAKERS.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(waker));
}

fn wake_callers() {
    let mut wakers = WAKERS.lock().unwrap_or_else(|e| e.into_inner());
    wakers.retain(|w| match w.upgrade() {
        Some(wake) => {
            wake();
            true
        }
        None => false,
    });
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
    Python::attach(|py| run_attached(py, shared, &mut interpreter, seq, budget, work, isolation))
}

/// Runs one call on this thread, attached, as the running call the watchdog sees.
fn run_attached(
    py: Python<'_>,
    shared: &Shared,
    interpreter: &mut Interpreter,
    seq: u64,
    budget: Duration,
    work: Work,
    isolation: Isolation,
) -> Result<Done, CallError> {
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
        shared.stuck.store(false, Ordering::Relaxed);
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
                    c.abandon(&shared);
                    Some((c.seq, t.elapsed()))
                }
                _ => None,
            }
        };
        if let Some((seq, ran)) = overdue {
            if last_raise.is_none_or(|(s, _)| s != seq) {
                // Its caller, and callers of calls queued behind it, may stop waiting.
                wake_callers();
            }
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
