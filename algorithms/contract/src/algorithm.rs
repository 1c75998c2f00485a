//! The `Algorithm` trait: a congestion controller as a pure, deterministic state machine.
//!
//! Data flows one way: datapath → `Report` → `Algorithm::on_report` → `Action` → datapath.
//! An algorithm owns no sockets, reads no clocks and knows no datapath: time comes in the report,
//! so the same code runs under the agent, in the simulator and in unit tests.

use crate::action::Action;
use crate::report::Report;

/// What the agent knows about a flow when it hands it to an algorithm.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowStart {
    /// Datapath clock at the start, microseconds (0 when the datapath has not said yet).
    pub now_us: u64,
    pub mss_bytes: u32,
    /// The window the datapath started the flow with, bytes.
    pub init_cwnd_bytes: u64,
    /// Whether the connection negotiated ECN, where the datapath knows (`None`: it does not say).
    pub ecn: Option<bool>,
    /// Present when the flow is not new: it was running under another algorithm (hot swap,
    /// attach of an existing kernel flow, adoption after an agent restart).
    pub seed: Option<Seed>,
}

/// Live state of a flow carried over from its previous controller.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Seed {
    pub cwnd_bytes: u64,
    pub pacing_rate_bytes_per_s: Option<u64>,
    pub srtt_us: Option<u64>,
    pub min_rtt_us: Option<u64>,
    /// The flow's most recent report, if any arrived yet.
    pub last_report: Option<Report>,
}

impl FlowStart {
    #[inline]
    pub fn new(mss_bytes: u32, init_cwnd_bytes: u64) -> Self {
        FlowStart { now_us: 0, mss_bytes, init_cwnd_bytes, ecn: None, seed: None }
    }

    #[inline]
    pub fn mss(&self) -> f64 {
        f64::from(self.mss_bytes.max(1))
    }

    /// The window to start from: the seeded window when there is one, else the datapath's initial window.
    #[inline]
    pub fn start_cwnd_bytes(&self) -> u64 {
        self.seed.as_ref().map_or(self.init_cwnd_bytes, |s| s.cwnd_bytes)
    }
}

/// One named piece of an algorithm's live state, for `ccp-agent ctl status` and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct StateVar {
    pub name: &'static str,
    pub value: f64,
}

/// Why a call into an algorithm hosted in another runtime (an embedded interpreter) failed.
/// Native algorithms never produce one: their only failure is a panic.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The hosted code raised; the message carries its traceback.
    Raised(String),
    /// The call returned something that is not an action.
    WrongType(String),
    /// The call ran past its time budget and was abandoned; the instance is rebuilt.
    TimedOut { budget_us: u64 },
    /// The call finished, after its time budget: its answer was discarded (the instance is
    /// intact). A learned policy's inference, timed on the caller's thread.
    Late { budget_us: u64, took_us: u64 },
    /// The host could not run the call now (its interpreter is still busy with an abandoned call).
    Unavailable(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Raised(m) => write!(f, "raised: {m}"),
            CallError::WrongType(m) => write!(f, "returned the wrong type: {m}"),
            CallError::TimedOut { budget_us } => write!(f, "ran past its {budget_us} µs budget and was abandoned"),
            CallError::Late { budget_us, took_us } => {
                write!(f, "answered after {took_us} µs, past its {budget_us} µs budget; the answer was discarded")
            }
            CallError::Unavailable(m) => write!(f, "could not run: {m}"),
        }
    }
}

/// A congestion control algorithm instance controlling one flow.
///
/// Implementations must be deterministic functions of their inputs. They may panic or return
/// nonsense only by bug: the agent contains both (the flow keeps its last sane window).
pub trait Algorithm: Send {
    /// The registry name of this algorithm.
    fn name(&self) -> &'static str;

    /// Called exactly once, before the first report. Returns the initial window, report policy, etc.
    fn init(&mut self, start: &FlowStart) -> Action;

    /// Called for every report on the flow, in order.
    fn on_report(&mut self, report: &Report) -> Action;

    /// Named internal state for observability (e.g. `ssthresh_bytes`, `alpha`). Optional.
    fn state(&self) -> Vec<StateVar> {
        Vec::new()
    }

    /// What the controller calls instead of [`Algorithm::init`]: an algorithm hosted in another
    /// runtime overrides this to report a failure that is not a panic. Native ones never do.
    fn try_init(&mut self, start: &FlowStart) -> Result<Action, CallError> {
        Ok(self.init(start))
    }

    /// What the controller calls instead of [`Algorithm::on_report`] (see [`Algorithm::try_init`]).
    fn try_on_report(&mut self, report: &Report) -> Result<Action, CallError> {
        Ok(self.on_report(report))
    }

    /// Starts the call for `report` now, elsewhere, for the [`Algorithm::try_on_report`] that
    /// follows to collect; whether it did. An algorithm hosted in another runtime overrides this
    /// so that a caller driving many flows can start their reports and go on with other work
    /// while they run ([`crate::Controller::begin_report`]). The caller promises that the next
    /// `try_on_report` is given this same report (several may be begun, and are then given in
    /// the order begun). Native algorithms run where they are called and never start anything
    /// ahead.
    fn begin_on_report(&mut self, _report: &Report) -> bool {
        false
    }

    /// Whether the `try_on_report` for the oldest report begun ahead would return at once (its
    /// answer is there, or its failure is known); true when none is begun.
    fn begun_ready(&self) -> bool {
        true
    }
}

/// Builds algorithm instances from an already validated configuration.
pub trait AlgorithmFactory: Send + Sync {
    fn name(&self) -> &'static str;
    fn create(&self) -> Box<dyn Algorithm>;

    /// The algorithm that replaces this one on a flow where it keeps faulting, when it names its
    /// own (a learned policy's manifest names the classic algorithm it hands flows to); `None`
    /// leaves the choice to the caller's configured fallback.
    fn fallback(&self) -> Option<crate::Choice> {
        None
    }
}
