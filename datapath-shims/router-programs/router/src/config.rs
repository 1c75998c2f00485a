//! What a router run is configured with, independent of how it was asked for (command line,
//! library call from a test or an experiment runner), and building the queue disciplines.

use std::path::PathBuf;

use ccp_cnm_wire::DEFAULT_CNM_PORT;
use ccp_qdisc::abc::{Abc, AbcParams};
use ccp_qdisc::abc_coexist::{AbcCoexist, CoexistParams};
use ccp_qdisc::codel::{Codel, CodelParams};
use ccp_qdisc::dctcp::{Dctcp, StepMarker};
use ccp_qdisc::droptail::DropTail;
use ccp_qdisc::phantom::{Phantom, PhantomParams};
use ccp_qdisc::qcn::{Qcn, QcnParams};
use ccp_qdisc::{Limit, Nanos, Qdisc};

use crate::classes::ClassDelay;
use crate::error::{Error, Result};
use crate::link::LinkShape;
pub use crate::pacer::PacerConfig;
use crate::packet::IpPacket;

/// The phantom queue's drain rate: absolute, or a fraction γ of a fixed link rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PhantomDrain {
    BitsPerSec(f64),
    Gamma(f64),
}

/// Which queue discipline a direction runs, with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum QdiscKind {
    DropTail,
    Abc(AbcParams),
    /// ABC with non-ABC packets in a second queue (abc.md §7).
    AbcCoexist {
        abc: AbcParams,
        coexist: CoexistParams,
    },
    Dctcp(StepMarker),
    Phantom {
        drain: PhantomDrain,
        threshold_bytes: f64,
        cap_bytes: Option<f64>,
    },
    Qcn {
        params: QcnParams,
        ecn: Option<StepMarker>,
    },
    Codel(CodelParams),
}

impl QdiscKind {
    pub fn name(&self) -> &'static str {
        match self {
            QdiscKind::DropTail => "droptail",
            QdiscKind::Abc(_) => "abc",
            QdiscKind::AbcCoexist { .. } => "abc-coexist",
            QdiscKind::Dctcp(_) => "dctcp",
            QdiscKind::Phantom { .. } => "phantom",
            QdiscKind::Qcn { .. } => "qcn",
            QdiscKind::Codel(_) => "codel",
        }
    }

    /// Builds the discipline for a link of `shape`; parameter errors name the discipline's
    /// command-line option family (`--abc-…`, `--qcn-…`).
    pub fn build(&self, limit: Limit, shape: &LinkShape) -> Result<Box<dyn Qdisc<IpPacket> + Send>> {
        let named = |prefix: &'static str| move |e: ccp_qdisc::ParamError| Error::param(cli_flag(prefix, e.param), e.message);
        Ok(match self {
            QdiscKind::DropTail => Box::new(DropTail::new(limit)),
            QdiscKind::Abc(p) => Box::new(Abc::new(limit, *p).map_err(named("abc"))?),
            QdiscKind::AbcCoexist { abc, coexist } => Box::new(AbcCoexist::new(limit, *abc, *coexist).map_err(named("abc"))?),
            QdiscKind::Dctcp(m) => Box::new(Dctcp::new(limit, *m).map_err(named("dctcp"))?),
            QdiscKind::Phantom { drain, threshold_bytes, cap_bytes } => {
                let bps = match (drain, shape) {
                    (PhantomDrain::BitsPerSec(b), _) => *b,
                    (PhantomDrain::Gamma(g), LinkShape::Fixed { bits_per_sec }) => g * bits_per_sec,
                    (PhantomDrain::Gamma(_), _) => {
                        return Err(Error::param(
                            "--pq-gamma",
                            "a drain rate relative to the link needs a fixed --rate-mbps; give --pq-drain-mbps instead",
                        ))
                    }
                };
                let params = PhantomParams {
                    drain_bytes_per_sec: bps / 8.0,
                    mark_threshold_bytes: *threshold_bytes,
                    cap_bytes: *cap_bytes,
                };
                Box::new(Phantom::new(limit, params).map_err(named("pq"))?)
            }
            QdiscKind::Qcn { params, ecn } => Box::new(Qcn::new(limit, *params, *ecn).map_err(named("qcn"))?),
            QdiscKind::Codel(p) => Box::new(Codel::new(limit, *p).map_err(named("codel"))?),
        })
    }
}

/// The command-line option that sets a discipline parameter (so library errors name the flag a
/// user would change).
fn cli_flag(prefix: &str, param: &str) -> String {
    let suffix = match (prefix, param) {
        ("abc", "delta") => "delta-ms",
        ("abc", "window") => "window-ms",
        ("abc", "lookahead") => "lookahead-ms",
        ("abc", "token_limit" | "initial_token") => "token-limit",
        ("abc", "classifier" | "top_k" | "demand_inflation" | "weight_interval" | "min_weight") => "coexist",
        ("pq", "drain") => "drain-mbps",
        ("pq", "threshold") => "threshold-bytes",
        ("pq", "cap") => "cap-bytes",
        ("qcn", "sampling") => "sample",
        ("qcn", "q_eq") => "qeq-bytes",
        ("codel", "target") => "target-ms",
        ("codel", "interval") => "interval-ms",
        ("dctcp", "k") => "k-pkts",
        (_, other) => other,
    };
    format!("--{prefix}-{}", suffix.replace('_', "-"))
}

/// One direction of the emulated path.
#[derive(Debug, Clone)]
pub struct DirectionConfig {
    pub shape: LinkShape,
    /// One-way propagation delay.
    pub delay: Nanos,
    pub limit: Limit,
    pub qdisc: QdiscKind,
}

impl DirectionConfig {
    /// An unshaped direction: no rate limit, no queue, just the delay.
    pub fn unlimited(delay: Nanos) -> DirectionConfig {
        DirectionConfig { shape: LinkShape::Unlimited, delay, limit: Limit::Unlimited, qdisc: QdiscKind::DropTail }
    }

    pub fn describe_link(&self) -> String {
        match &self.shape {
            LinkShape::Unlimited => "unlimited".into(),
            LinkShape::Fixed { bits_per_sec } => format!("fixed {} Mbit/s", bits_per_sec / 1e6),
            LinkShape::Trace(t) => format!("trace {} (mean {:.3} Mbit/s)", t.path().display(), t.mean_rate_bps() / 1e6),
        }
    }
}

/// Where QCN notifications go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackConfig {
    /// UDP port on the sending host.
    pub port: u16,
    /// Extra delay before a notification reaches the sender (0: the congestion point sits next to
    /// the sender, as Annulus's ToR does; the queue is at the sender's end of the link).
    pub delay: Nanos,
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        FeedbackConfig { port: DEFAULT_CNM_PORT, delay: 0 }
    }
}

/// A whole router run.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Sender → receiver (the shaped data direction).
    pub down: DirectionConfig,
    /// Receiver → sender (ACKs; unlimited unless given a rate or trace).
    pub up: DirectionConfig,
    pub feedback: FeedbackConfig,
    /// Per-flow-class one-way delays (`--class-delay`), overriding `down.delay`/`up.delay` for
    /// the packets they match; disjoint, checked by [`crate::classes::validate`]. Empty: every
    /// packet gets its direction's delay.
    pub classes: Vec<ClassDelay>,
    pub log_csv: Option<PathBuf>,
    /// Stop by itself after this long.
    pub duration: Option<Nanos>,
    /// Run the event loop under SCHED_FIFO for timing accuracy on a loaded machine.
    pub realtime: bool,
    /// Random loss on the data direction (`--loss-pct`), before the queue.
    pub loss: Option<RandomLoss>,
    /// HULL's pacer on the sender's side of the data direction (`--pacer`), after the random
    /// loss and before the queue.
    pub pacer: Option<PacerConfig>,
}

/// Independent random loss: each packet arriving at the data direction's queue is dropped with
/// `probability`, from a seeded stream (the same seed drops the same arrivals). netem is not
/// available where the project is tested; this is its `loss random` for the emulated link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomLoss {
    pub probability: f64,
    pub seed: u64,
}

impl RandomLoss {
    /// The loss as a threshold on a uniform 64-bit draw.
    pub fn threshold(&self) -> u64 {
        (self.probability.clamp(0.0, 1.0) * u64::MAX as f64) as u64
    }
}

impl RouterConfig {
    /// A fixed-rate data direction with a drop-tail queue, an unlimited ACK direction, and
    /// `delay` each way.
    pub fn fixed(rate_bps: f64, delay: Nanos, limit: Limit) -> RouterConfig {
        RouterConfig {
            down: DirectionConfig {
                shape: LinkShape::Fixed { bits_per_sec: rate_bps },
                delay,
                limit,
                qdisc: QdiscKind::DropTail,
            },
            up: DirectionConfig::unlimited(delay),
            feedback: FeedbackConfig::default(),
            classes: Vec::new(),
            log_csv: None,
            duration: None,
            realtime: false,
            loss: None,
            pacer: None,
        }
    }
}
