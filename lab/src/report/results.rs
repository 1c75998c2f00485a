//! What every reader produces, whatever wrote the directory: runs (one per link × scenario ×
//! scheme × repetition, failed ones included), the emulator's calibration per link, and every
//! problem met while reading — a file missing, empty or not what it should be — so the report
//! can say what it could not show instead of failing.

use std::path::PathBuf;

/// One result directory given to the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub dir: PathBuf,
    /// The experiment's (or simulated scenario's) name.
    pub name: String,
    /// What kind of directory it is ("ccp-lab experiment", "ccp-sim sweep", …).
    pub kind: &'static str,
    pub description: Option<String>,
}

/// Which program wrote a run (its time series are in different files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Lab,
    Sim,
}

/// Metrics some runs have besides throughput and delay: the report adds a column for each one
/// that any run of a link has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Extra {
    /// Nimbus: fraction of instants classified right.
    Accuracy,
    /// Jain's index over the scheme's flows' throughputs.
    Jain,
    /// The Inigo thesis's indices (specs/inigo.md §9.2).
    JainIdeal,
    GoodputIndex,
    LatencyIndex,
    RetxPct,
    DropPct,
    /// Cross traffic's throughput, Mbit/s.
    CrossMbps,
    /// ccp-sim: flows completed, %.
    CompletedPct,
}

impl Extra {
    pub const ALL: [Extra; 9] = [
        Extra::Accuracy,
        Extra::Jain,
        Extra::JainIdeal,
        Extra::GoodputIndex,
        Extra::LatencyIndex,
        Extra::RetxPct,
        Extra::DropPct,
        Extra::CrossMbps,
        Extra::CompletedPct,
    ];

    /// A column heading.
    pub fn label(self) -> &'static str {
        match self {
            Extra::Accuracy => "accuracy %",
            Extra::Jain => "JFI",
            Extra::JainIdeal => "JFI (ideal)",
            Extra::GoodputIndex => "goodput index",
            Extra::LatencyIndex => "latency index",
            Extra::RetxPct => "re-TX %",
            Extra::DropPct => "drop %",
            Extra::CrossMbps => "cross Mbit/s",
            Extra::CompletedPct => "flows done %",
        }
    }

    /// A value as the table shows it.
    pub fn format(self, v: f64) -> String {
        match self {
            Extra::Accuracy => format!("{:.1}", v * 100.0),
            Extra::Jain | Extra::JainIdeal | Extra::GoodputIndex | Extra::LatencyIndex => format!("{v:.3}"),
            Extra::RetxPct | Extra::DropPct => format!("{v:.2}"),
            Extra::CrossMbps | Extra::CompletedPct => format!("{v:.1}"),
        }
    }
}

/// The emulated path a run had besides its link's capacity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setup {
    pub rtt_ms: Option<f64>,
    pub buffer_pkts: Option<u32>,
    /// Where the link came from (a trace file, "fixed 48 Mbit/s", a simulated port).
    pub link_source: String,
}

/// One run as the report needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Index into [`Results::sources`].
    pub source: usize,
    pub origin: Origin,
    pub link: String,
    pub scenario: String,
    pub scheme: String,
    pub repetition: u32,
    pub ok: bool,
    pub error: Option<String>,
    pub setup: Setup,
    /// The scheme's parameters in one line (congestion control, its parameters, the router).
    pub description: String,
    /// A command that runs this cell again.
    pub command: Option<String>,
    /// The scheme's flows together, Mbit/s over the measurement window.
    pub throughput_mbps: Option<f64>,
    pub utilisation: Option<f64>,
    pub capacity_mbps: Option<f64>,
    /// Queueing delay at the bottleneck (one way), ms: the `delay_percentile`th percentile.
    pub delay_ms: Option<f64>,
    pub delay_percentile: u8,
    pub delay_p50_ms: Option<f64>,
    pub extras: Vec<(Extra, f64)>,
    /// Why the emulator, not the scheme, limited this run (empty: it did not).
    pub limited: Vec<String>,
    /// The run's directory.
    pub dir: PathBuf,
}

impl Run {
    /// A run with nothing measured yet.
    pub fn new(source: usize, origin: Origin, link: &str, scenario: &str, scheme: &str, dir: PathBuf) -> Run {
        Run {
            source,
            origin,
            link: link.to_string(),
            scenario: scenario.to_string(),
            scheme: scheme.to_string(),
            repetition: 0,
            ok: false,
            error: None,
            setup: Setup::default(),
            description: String::new(),
            command: None,
            throughput_mbps: None,
            utilisation: None,
            capacity_mbps: None,
            delay_ms: None,
            delay_percentile: 95,
            delay_p50_ms: None,
            extras: Vec::new(),
            limited: Vec::new(),
            dir,
        }
    }

    pub fn extra(&self, e: Extra) -> Option<f64> {
        self.extras.iter().find(|(k, _)| *k == e).map(|&(_, v)| v)
    }

    /// Whether the run can be placed on the throughput–delay plane.
    pub fn plotted(&self) -> bool {
        self.ok && self.throughput_mbps.is_some() && self.delay_ms.is_some()
    }
}

/// The emulator's own ceiling on a link: a fixed-rate pipe at the link's peak, filled with UDP
/// (`ccp-lab run --calibrate`).
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub source: usize,
    pub link: String,
    pub ok: bool,
    pub error: Option<String>,
    /// The pipe's rate, Mbit/s.
    pub peak_mbps: Option<f64>,
    pub delivered_mbps: Option<f64>,
    pub utilisation: Option<f64>,
    pub late_p99_ms: Option<f64>,
    pub dropped_write: u64,
}

/// Below this utilisation of a fixed pipe at its peak, the emulator cannot carry the link.
pub const CALIBRATION_MIN_UTILISATION: f64 = 0.95;

impl Calibration {
    /// Why the emulator could not carry the link at its peak (empty: it could).
    pub fn shortfalls(&self) -> Vec<String> {
        let mut v = Vec::new();
        if !self.ok {
            v.push(format!("calibration failed: {}", self.error.as_deref().unwrap_or("no reason recorded")));
            return v;
        }
        if let Some(u) = self.utilisation.filter(|&u| u < CALIBRATION_MIN_UTILISATION) {
            v.push(format!("delivered only {:.1} % of the pipe", u * 100.0));
        }
        if let Some(l) = self.late_p99_ms.filter(|&l| l > super::LATE_LIMIT_MS) {
            v.push(format!("late by {l:.1} ms at p99"));
        }
        if self.dropped_write > 0 {
            v.push(format!("{} packets not written", self.dropped_write));
        }
        v
    }
}

/// Something the report could not read, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: PathBuf,
    pub what: String,
}

/// Everything read from the directories given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    pub sources: Vec<Source>,
    pub runs: Vec<Run>,
    pub calibrations: Vec<Calibration>,
    pub problems: Vec<Problem>,
}

impl Results {
    pub fn problem(&mut self, path: impl Into<PathBuf>, what: impl Into<String>) {
        self.problems.push(Problem { path: path.into(), what: what.into() });
    }
}
