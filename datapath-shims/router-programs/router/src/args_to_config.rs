//! The translation of `ccp-router`'s arguments ([`LinkArgs`], [`RunArgs`]) into a
//! [`TopologyConfig`] and a [`RouterConfig`]: units, ranges, defaults, and which options belong
//! to which queue discipline. Every rejection names the offending option.

use std::path::PathBuf;
use std::sync::Arc;

use ccp_cnm_wire::DEFAULT_CNM_PORT;
use ccp_qdisc::abc::{AbcParams, Capacity, Credit, DelayMeasure};
use ccp_qdisc::abc_coexist::{Classifier, CoexistParams};
use ccp_qdisc::codel::CodelParams;
use ccp_qdisc::dctcp::{NonEctPolicy, StepMarker, Threshold};
use ccp_qdisc::pacer::PacerSettings;
use ccp_qdisc::qcn::{QcnParams, Quantization, Sampling};
use ccp_qdisc::{Limit, Nanos, MTU_BYTES, NANOS_PER_MS};

use crate::cli::{CapacityArg, CreditArg, DelayArg, LinkArgs, NonEctArg, QdiscArg, QuantArg, RunArgs};
use crate::config::{DirectionConfig, FeedbackConfig, PacerConfig, PhantomDrain, QdiscKind, RandomLoss, RouterConfig};
use crate::error::{Error, Result};
use crate::link::LinkShape;
use crate::pacer::SenderPacer;
use crate::topology::TopologyConfig;
use crate::trace::Trace;

/// Default buffer when neither --queue-pkts nor --queue-bytes is given, packets.
pub const DEFAULT_QUEUE_PKTS: usize = 1000;
/// Largest rate accepted, Mbit/s (well beyond what a user-space forwarder can do).
const MAX_RATE_MBPS: f64 = 100_000.0;
/// Largest one-way delay accepted, ms.
pub const MAX_DELAY_MS: f64 = 10_000.0;

/// Milliseconds (as given) to ns, checking range; errors name `flag`.
pub fn ms_to_ns(flag: &str, ms: f64, max_ms: f64) -> Result<Nanos> {
    if !ms.is_finite() || ms < 0.0 || ms > max_ms {
        return Err(Error::param(flag, format!("{ms} ms is outside 0..={max_ms} ms")));
    }
    Ok((ms * NANOS_PER_MS as f64).round() as Nanos)
}

fn positive_ms_to_ns(flag: &str, ms: f64) -> Result<Nanos> {
    let ns = ms_to_ns(flag, ms, MAX_DELAY_MS)?;
    if ns == 0 {
        return Err(Error::param(flag, "must be > 0"));
    }
    Ok(ns)
}

/// A rate in Mbit/s or "unlimited".
fn parse_rate(flag: &str, s: &str) -> Result<Option<f64>> {
    if s.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    let r: f64 = s.parse().map_err(|_| Error::param(flag, format!("{s:?} is not a number of Mbit/s or \"unlimited\"")))?;
    if !(r > 0.0 && r <= MAX_RATE_MBPS) {
        return Err(Error::param(flag, format!("{r} Mbit/s is outside (0, {MAX_RATE_MBPS}]")));
    }
    Ok(Some(r * 1e6))
}

fn shape(rate_flag: &str, rate: Option<&String>, trace_flag: &str, trace: Option<&PathBuf>, required: bool) -> Result<LinkShape> {
    match (rate, trace) {
        (Some(_), Some(_)) => Err(Error::param(rate_flag, format!("give either {rate_flag} or {trace_flag}, not both"))),
        (Some(r), None) => {
            Ok(parse_rate(rate_flag, r)?.map_or(LinkShape::Unlimited, |bits_per_sec| LinkShape::Fixed { bits_per_sec }))
        }
        (None, Some(t)) => Ok(LinkShape::Trace(Arc::new(Trace::load(t)?))),
        (None, None) if required => {
            Err(Error::param(rate_flag, format!("the sender → receiver link needs {rate_flag} or {trace_flag}")))
        }
        (None, None) => Ok(LinkShape::Unlimited),
    }
}

fn positive(flag: &str, v: f64) -> Result<f64> {
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(Error::param(flag, format!("{v} must be a positive number")))
    }
}

/// Parses `--qcn-sample`.
pub fn parse_sampling(s: &str) -> Result<Sampling> {
    let flag = "--qcn-sample";
    let bad = || Error::param(flag, format!("{s:?}: expected prob:P with 0 < P ≤ 1, bytes:N with N > 0, or table"));
    if s == "table" {
        return Ok(Sampling::Table);
    }
    let (kind, value) = s.split_once(':').ok_or_else(bad)?;
    match kind {
        "prob" => {
            let p: f64 = value.parse().map_err(|_| bad())?;
            if p > 0.0 && p <= 1.0 {
                Ok(Sampling::Probability(p))
            } else {
                Err(bad())
            }
        }
        "bytes" => match value.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Sampling::Bytes(n)),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// ABC's coexistence classifier: `ecn`, or `ports:FIRST-LAST` (or `ports:PORT`), the ABC flows'
/// destination ports. The error is the message for the option that gave it.
pub fn parse_classifier(text: &str) -> std::result::Result<Classifier, String> {
    let bad = || format!("{text:?}: use \"ecn\" or \"ports:FIRST-LAST\" (the ABC flows' destination ports)");
    if text == "ecn" {
        return Ok(Classifier::Ecn);
    }
    let range = text.strip_prefix("ports:").ok_or_else(bad)?;
    let (first, last) = range.split_once('-').unwrap_or((range, range));
    let (first, last) = (first.trim().parse::<u16>().map_err(|_| bad())?, last.trim().parse::<u16>().map_err(|_| bad())?);
    if first > last {
        return Err(format!("{text:?}: the port range is empty ({first} > {last})"));
    }
    Ok(Classifier::DstPorts { first, last })
}

impl LinkArgs {
    /// Options given that belong to another discipline than the chosen one.
    fn foreign_options(&self) -> Vec<&'static str> {
        let mut given: Vec<(&'static str, bool, &[QdiscArg])> = vec![
            ("--abc-eta", self.abc_eta.is_some(), &[QdiscArg::Abc]),
            ("--abc-delta-ms", self.abc_delta_ms.is_some(), &[QdiscArg::Abc]),
            ("--abc-dt-ms", self.abc_dt_ms.is_some(), &[QdiscArg::Abc]),
            ("--abc-window-ms", self.abc_window_ms.is_some(), &[QdiscArg::Abc]),
            ("--abc-token-limit", self.abc_token_limit.is_some(), &[QdiscArg::Abc]),
            ("--abc-delay", self.abc_delay.is_some(), &[QdiscArg::Abc]),
            ("--abc-delay-window-ms", self.abc_delay_window_ms.is_some(), &[QdiscArg::Abc]),
            ("--abc-credit", self.abc_credit.is_some(), &[QdiscArg::Abc]),
            ("--abc-capacity", self.abc_capacity.is_some(), &[QdiscArg::Abc]),
            ("--abc-lookahead-ms", self.abc_lookahead_ms.is_some(), &[QdiscArg::Abc]),
            ("--abc-coexist", self.abc_coexist.is_some(), &[QdiscArg::Abc]),
            ("--dctcp-k-pkts", self.dctcp_k_pkts.is_some(), &[QdiscArg::Dctcp, QdiscArg::Qcn]),
            ("--dctcp-k-bytes", self.dctcp_k_bytes.is_some(), &[QdiscArg::Dctcp, QdiscArg::Qcn]),
            ("--dctcp-non-ect", self.dctcp_non_ect.is_some(), &[QdiscArg::Dctcp, QdiscArg::Qcn]),
            ("--pq-drain-mbps", self.pq_drain_mbps.is_some(), &[QdiscArg::Phantom]),
            ("--pq-gamma", self.pq_gamma.is_some(), &[QdiscArg::Phantom]),
            ("--pq-threshold-bytes", self.pq_threshold_bytes.is_some(), &[QdiscArg::Phantom]),
            ("--pq-cap-bytes", self.pq_cap_bytes.is_some(), &[QdiscArg::Phantom]),
            ("--qcn-qeq-pkts", self.qcn_qeq_pkts.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-qeq-bytes", self.qcn_qeq_bytes.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-w", self.qcn_w.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-sample", self.qcn_sample.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-quant", self.qcn_quant.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-seed", self.qcn_seed.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-port", self.qcn_port.is_some(), &[QdiscArg::Qcn]),
            ("--qcn-feedback-delay-ms", self.qcn_feedback_delay_ms.is_some(), &[QdiscArg::Qcn]),
            ("--codel-target-ms", self.codel_target_ms.is_some(), &[QdiscArg::Codel]),
            ("--codel-interval-ms", self.codel_interval_ms.is_some(), &[QdiscArg::Codel]),
            ("--codel-ecn", self.codel_ecn, &[QdiscArg::Codel]),
        ];
        given.retain(|(_, present, owners)| *present && !owners.contains(&self.qdisc));
        given.into_iter().map(|(f, _, _)| f).collect()
    }

    fn qdisc_kind(&self, limit: Limit) -> Result<QdiscKind> {
        if let Some(f) = self.foreign_options().first() {
            return Err(Error::param(*f, format!("does not apply to --qdisc {}", self.qdisc_name())));
        }
        let step = |required: bool| -> Result<Option<StepMarker>> {
            let k = match (self.dctcp_k_pkts, self.dctcp_k_bytes) {
                (Some(k), _) => Threshold::Packets(k),
                (None, Some(k)) => Threshold::Bytes(k),
                (None, None) if required => {
                    return Err(Error::param(
                        "--dctcp-k-pkts",
                        "--qdisc dctcp needs a marking threshold (--dctcp-k-pkts or --dctcp-k-bytes)",
                    ))
                }
                (None, None) => return Ok(None),
            };
            let non_ect = match self.dctcp_non_ect {
                Some(NonEctArg::Drop) => NonEctPolicy::Drop,
                _ => NonEctPolicy::Pass,
            };
            let fits = match (k, limit) {
                (Threshold::Packets(k), Limit::Packets(max)) => k < max,
                (Threshold::Bytes(k), Limit::Bytes(max)) => k < max,
                _ => true,
            };
            if !fits {
                return Err(Error::param(
                    if self.dctcp_k_pkts.is_some() { "--dctcp-k-pkts" } else { "--dctcp-k-bytes" },
                    "the marking threshold must be below the buffer limit (--queue-pkts/--queue-bytes), or nothing is ever marked",
                ));
            }
            Ok(Some(StepMarker { k, non_ect }))
        };
        Ok(match self.qdisc {
            QdiscArg::Droptail => QdiscKind::DropTail,
            QdiscArg::Abc => {
                let d = AbcParams::default();
                let abc = AbcParams {
                    eta: self.abc_eta.unwrap_or(d.eta),
                    delta: self.abc_delta_ms.map(|v| positive_ms_to_ns("--abc-delta-ms", v)).transpose()?.unwrap_or(d.delta),
                    delay_threshold: self
                        .abc_dt_ms
                        .map(|v| ms_to_ns("--abc-dt-ms", v, MAX_DELAY_MS))
                        .transpose()?
                        .unwrap_or(d.delay_threshold),
                    window: self.abc_window_ms.map(|v| positive_ms_to_ns("--abc-window-ms", v)).transpose()?.unwrap_or(d.window),
                    token_limit: self.abc_token_limit.unwrap_or(d.token_limit),
                    initial_token: d.initial_token,
                    delay_measure: self.abc_delay_measure()?,
                    capacity: self.abc_capacity()?,
                    credit: match self.abc_credit {
                        Some(CreditArg::PerOpportunity) => Credit::PerOpportunity,
                        None | Some(CreditArg::Window) => Credit::Window,
                    },
                };
                match &self.abc_coexist {
                    None => QdiscKind::Abc(abc),
                    Some(c) => QdiscKind::AbcCoexist {
                        abc,
                        coexist: CoexistParams {
                            classifier: parse_classifier(c).map_err(|m| Error::param("--abc-coexist", m))?,
                            ..CoexistParams::default()
                        },
                    },
                }
            }
            QdiscArg::Dctcp => QdiscKind::Dctcp(step(true)?.ok_or_else(|| Error::param("--dctcp-k-pkts", "missing"))?),
            QdiscArg::Phantom => QdiscKind::Phantom {
                drain: match (self.pq_drain_mbps, self.pq_gamma) {
                    (Some(m), _) => PhantomDrain::BitsPerSec(positive("--pq-drain-mbps", m)? * 1e6),
                    (None, Some(g)) if g > 0.0 && g <= 1.0 => PhantomDrain::Gamma(g),
                    (None, Some(g)) => return Err(Error::param("--pq-gamma", format!("{g} is outside (0, 1]"))),
                    (None, None) => PhantomDrain::Gamma(0.95),
                },
                threshold_bytes: self.pq_threshold_bytes.unwrap_or(1000.0),
                cap_bytes: self.pq_cap_bytes,
            },
            QdiscArg::Qcn => {
                let d = QcnParams::default();
                let q_eq_bytes = match (self.qcn_qeq_pkts, self.qcn_qeq_bytes) {
                    (Some(p), _) if p >= 0.0 && p.is_finite() => (p * f64::from(MTU_BYTES)).round() as u64,
                    (Some(p), _) => return Err(Error::param("--qcn-qeq-pkts", format!("{p} must be ≥ 0"))),
                    (None, Some(b)) => b,
                    (None, None) => d.q_eq_bytes,
                };
                QdiscKind::Qcn {
                    params: QcnParams {
                        q_eq_bytes,
                        w: self.qcn_w.unwrap_or(d.w),
                        sampling: self.qcn_sample.as_deref().map(parse_sampling).transpose()?.unwrap_or(d.sampling),
                        quantization: match self.qcn_quant {
                            Some(QuantArg::Standard) => Quantization::Standard,
                            _ => Quantization::Packets,
                        },
                        seed: self.qcn_seed.unwrap_or(d.seed),
                    },
                    ecn: step(false)?,
                }
            }
            QdiscArg::Codel => {
                let d = CodelParams::default();
                QdiscKind::Codel(CodelParams {
                    target: self
                        .codel_target_ms
                        .map(|v| positive_ms_to_ns("--codel-target-ms", v))
                        .transpose()?
                        .unwrap_or(d.target),
                    interval: self
                        .codel_interval_ms
                        .map(|v| positive_ms_to_ns("--codel-interval-ms", v))
                        .transpose()?
                        .unwrap_or(d.interval),
                    max_packet_bytes: d.max_packet_bytes,
                    ecn: self.codel_ecn,
                })
            }
        })
    }

    /// `--abc-capacity` with `--abc-lookahead-ms`: the lookahead is required by `future` (there is
    /// no safe default: it should be the path's RTT) and meaningless without it.
    fn abc_delay_measure(&self) -> Result<DelayMeasure> {
        match (self.abc_delay, self.abc_delay_window_ms) {
            (Some(DelayArg::QueueMean), Some(ms)) => {
                Ok(DelayMeasure::QueueOverMeanCapacity { window: positive_ms_to_ns("--abc-delay-window-ms", ms)? })
            }
            (Some(DelayArg::QueueMean), None) => {
                Err(Error::param("--abc-delay-window-ms", "--abc-delay queue-mean needs the window of the mean capacity, ms"))
            }
            (_, Some(_)) => Err(Error::param("--abc-delay-window-ms", "only applies with --abc-delay queue-mean")),
            (Some(DelayArg::Sojourn), None) => Ok(DelayMeasure::Sojourn),
            (None | Some(DelayArg::Queue), None) => Ok(DelayMeasure::QueueOverCapacity),
        }
    }

    fn abc_capacity(&self) -> Result<Capacity> {
        match (self.abc_capacity, self.abc_lookahead_ms) {
            (None | Some(CapacityArg::Past), None) => Ok(Capacity::Past),
            (None | Some(CapacityArg::Past), Some(_)) => {
                Err(Error::param("--abc-lookahead-ms", "only applies with --abc-capacity future"))
            }
            (Some(CapacityArg::Future), None) => Err(Error::param(
                "--abc-lookahead-ms",
                "--abc-capacity future needs the lookahead, ms (PK-ABC: one RTT, e.g. 100)",
            )),
            (Some(CapacityArg::Future), Some(ms)) => {
                Ok(Capacity::Future { lookahead: positive_ms_to_ns("--abc-lookahead-ms", ms)? })
            }
        }
    }

    fn qdisc_name(&self) -> &'static str {
        match self.qdisc {
            QdiscArg::Droptail => "droptail",
            QdiscArg::Abc => "abc",
            QdiscArg::Dctcp => "dctcp",
            QdiscArg::Phantom => "phantom",
            QdiscArg::Qcn => "qcn",
            QdiscArg::Codel => "codel",
        }
    }

    pub fn topology_config(&self) -> Result<TopologyConfig> {
        let c = TopologyConfig {
            prefix: self.netns_prefix.clone(),
            sender_addr: self.sender_addr,
            receiver_addr: self.receiver_addr,
            router_addr: self.router_addr,
            tcp_usec_ts: self.tcp_usec_ts,
        };
        c.validate()?;
        Ok(c)
    }

    /// The router configuration (without log, summary or duration, which only `run` has).
    pub fn router_config(&self) -> Result<RouterConfig> {
        let limit = match (self.queue_pkts, self.queue_bytes) {
            (Some(0), _) => return Err(Error::param("--queue-pkts", "must be ≥ 1")),
            (Some(n), _) => Limit::Packets(n),
            (None, Some(b)) if b < u64::from(MTU_BYTES) => {
                return Err(Error::param("--queue-bytes", format!("{b} B cannot hold one {MTU_BYTES} B packet")))
            }
            (None, Some(b)) => Limit::Bytes(b),
            (None, None) => Limit::Packets(DEFAULT_QUEUE_PKTS),
        };
        let delay = ms_to_ns("--delay-ms", self.delay_ms, MAX_DELAY_MS)?;
        let delay_down = self.delay_ms_down.map(|d| ms_to_ns("--delay-ms-down", d, MAX_DELAY_MS)).transpose()?.unwrap_or(delay);
        let delay_up = self.delay_ms_up.map(|d| ms_to_ns("--delay-ms-up", d, MAX_DELAY_MS)).transpose()?.unwrap_or(delay);
        let down_shape = shape("--rate-mbps", self.rate_mbps.as_ref(), "--trace", self.trace.as_ref(), true)?;
        let up_shape =
            shape("--uplink-rate-mbps", self.uplink_rate_mbps.as_ref(), "--uplink-trace", self.uplink_trace.as_ref(), false)?;
        let qdisc = self.qdisc_kind(limit)?;
        // Fail here, naming the option, rather than when the router starts.
        qdisc.build(limit, &down_shape)?;
        let up_limit = if matches!(up_shape, LinkShape::Unlimited) { Limit::Unlimited } else { limit };
        let pacer = self.pacer_config(&down_shape)?;
        Ok(RouterConfig {
            down: DirectionConfig { shape: down_shape, delay: delay_down, limit, qdisc },
            up: DirectionConfig { shape: up_shape, delay: delay_up, limit: up_limit, qdisc: QdiscKind::DropTail },
            classes: crate::classes::parse_all(&self.class_delay)?,
            feedback: FeedbackConfig {
                port: self.qcn_port.unwrap_or(DEFAULT_CNM_PORT),
                delay: self
                    .qcn_feedback_delay_ms
                    .map(|d| ms_to_ns("--qcn-feedback-delay-ms", d, MAX_DELAY_MS))
                    .transpose()?
                    .unwrap_or(0),
            },
            log_csv: None,
            duration: None,
            realtime: self.realtime,
            loss: match self.loss_pct {
                None => None,
                Some(p) if p.is_finite() && (0.0..=50.0).contains(&p) => {
                    Some(RandomLoss { probability: p / 100.0, seed: self.loss_seed })
                }
                Some(p) => return Err(Error::param("--loss-pct", format!("{p} is not a percentage from 0 to 50"))),
            },
            pacer,
        })
    }

    /// `--pacer` and its options, checked here so that an error names the option.
    fn pacer_config(&self, down_shape: &LinkShape) -> Result<Option<PacerConfig>> {
        if !self.pacer {
            return Ok(None);
        }
        let line_rate_bps = match (self.pacer_line_rate_mbps, down_shape) {
            (Some(mbps), _) => mbps * 1e6,
            (None, LinkShape::Fixed { bits_per_sec }) => *bits_per_sec,
            (None, _) => {
                return Err(Error::param(
                    "--pacer-line-rate-mbps",
                    "the sending host's line rate is needed when the link has no fixed --rate-mbps",
                ))
            }
        };
        let d = PacerSettings::default();
        let settings = PacerSettings {
            beta_per_s: self.pacer_beta_per_s.unwrap_or(d.beta_per_s),
            associate_probability: self.pacer_associate_probability.unwrap_or(d.associate_probability),
            depth_bytes: self.pacer_depth_bytes.unwrap_or(d.depth_bytes),
            tick_us: self.pacer_tick_us.unwrap_or(d.tick_us),
            ..d
        };
        let cfg = PacerConfig { settings, line_rate_bps, seed: self.pacer_seed, per_flow: self.pacer_per_flow };
        SenderPacer::new(&cfg)?;
        Ok(Some(cfg))
    }
}

impl RunArgs {
    pub fn configs(&self) -> Result<(TopologyConfig, RouterConfig)> {
        let topo = self.link.topology_config()?;
        let mut router = self.link.router_config()?;
        router.log_csv = self.log_csv.clone();
        router.duration = self
            .duration_s
            .map(|s| {
                if s > 0.0 && s.is_finite() {
                    Ok((s * 1e9) as Nanos)
                } else {
                    Err(Error::param("--duration-s", format!("{s} must be a positive number of seconds")))
                }
            })
            .transpose()?;
        Ok((topo, router))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> RunArgs {
        let mut full = vec!["ccp-router", "run", "--netns-prefix", "t"];
        full.extend_from_slice(args);
        match Cli::try_parse_from(full).unwrap().command {
            Command::Run(r) => r,
            _ => unreachable!(),
        }
    }

    fn err(args: &[&str]) -> String {
        parse(args).configs().unwrap_err().to_string()
    }

    #[test]
    fn pacer_options_reach_the_config_and_their_errors_name_them() {
        let (_, r) = parse(&["--rate-mbps", "1000", "--pacer", "--pacer-beta-per-s", "64"]).configs().unwrap();
        let p = r.pacer.expect("--pacer");
        assert_eq!((p.line_rate_bps, p.settings.beta_per_s, p.settings.depth_bytes, p.per_flow), (1e9, 64.0, 3000, false));
        let (_, r) = parse(&["--rate-mbps", "100", "--pacer", "--pacer-per-flow"]).configs().unwrap();
        assert!(r.pacer.expect("--pacer").per_flow);
        assert!(parse(&["--rate-mbps", "10"]).configs().unwrap().1.pacer.is_none(), "off unless asked");
        let e = err(&["--rate-mbps", "10000", "--pacer"]);
        assert!(e.contains("--pacer-depth-bytes"), "16 µs of 10 Gbit/s overflows a 3 KB bucket: {e}");
        let e = err(&["--rate-mbps", "100", "--pacer", "--pacer-associate-probability", "1.5"]);
        assert!(e.contains("--pacer-associate-probability"), "{e}");
        let e = err(&["--rate-mbps", "100", "--pacer", "--pacer-line-rate-mbps", "0"]);
        assert!(e.contains("--pacer-line-rate-mbps"), "{e}");
        // The pacer's own options need --pacer.
        let full = ["ccp-router", "run", "--netns-prefix", "t", "--rate-mbps", "100", "--pacer-beta-per-s", "1"];
        assert!(Cli::try_parse_from(full).is_err());
    }

    #[test]
    fn the_contract_command_line_parses() {
        let r = parse(&["--delay-ms", "20", "--rate-mbps", "12", "--queue-pkts", "250", "--qdisc", "abc", "--abc-dt-ms", "60"]);
        let (t, c) = r.configs().unwrap();
        assert_eq!(t.sender_ns(), "t-snd");
        assert_eq!(c.down.delay, 20 * NANOS_PER_MS);
        assert_eq!(c.up.delay, 20 * NANOS_PER_MS);
        assert_eq!(c.down.limit, Limit::Packets(250));
        assert!(matches!(c.up.shape, LinkShape::Unlimited));
        match c.down.qdisc {
            QdiscKind::Abc(p) => assert_eq!(p.delay_threshold, 60 * NANOS_PER_MS),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn random_loss_is_a_percentage_with_a_seed() {
        let (_, c) = parse(&["--rate-mbps", "10", "--loss-pct", "1", "--loss-seed", "9"]).configs().unwrap();
        assert_eq!(c.loss, Some(RandomLoss { probability: 0.01, seed: 9 }));
        assert_eq!(parse(&["--rate-mbps", "10"]).configs().unwrap().1.loss, None);
        for bad in ["-1", "51", "NaN"] {
            let e = err(&["--rate-mbps", "10", &format!("--loss-pct={bad}")]);
            assert!(e.starts_with("--loss-pct:"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_qdisc_builds_with_defaults() {
        for q in ["droptail", "abc", "phantom", "qcn", "codel"] {
            parse(&["--rate-mbps", "10", "--qdisc", q]).configs().unwrap();
        }
        parse(&["--rate-mbps", "10", "--qdisc", "dctcp", "--dctcp-k-pkts", "20"]).configs().unwrap();
        parse(&["--rate-mbps", "10", "--qdisc", "qcn", "--dctcp-k-pkts", "20", "--qcn-sample", "bytes:15000"]).configs().unwrap();
    }

    #[test]
    fn bad_input_names_the_option() {
        assert!(err(&[]).starts_with("--rate-mbps:"));
        assert!(err(&["--rate-mbps=-3"]).starts_with("--rate-mbps:"));
        assert!(err(&["--rate-mbps", "fast"]).starts_with("--rate-mbps:"));
        assert!(err(&["--rate-mbps", "10", "--trace", "x"]).contains("not both"));
        assert!(err(&["--rate-mbps", "10", "--delay-ms=-1"]).starts_with("--delay-ms:"));
        assert!(err(&["--rate-mbps", "10", "--qdisc", "abc", "--abc-token-limit", "1"]).starts_with("--abc-token-limit:"));
        assert!(err(&["--rate-mbps", "10", "--abc-eta", "0.9"]).starts_with("--abc-eta: does not apply to --qdisc droptail"));
        assert!(err(&["--rate-mbps", "10", "--qdisc", "dctcp"]).starts_with("--dctcp-k-pkts:"));
        assert!(err(&["--rate-mbps", "10", "--qdisc", "dctcp", "--dctcp-k-pkts", "300", "--queue-pkts", "100"])
            .starts_with("--dctcp-k-pkts:"));
        assert!(err(&["--rate-mbps", "10", "--qdisc", "qcn", "--qcn-sample", "prob:2"]).starts_with("--qcn-sample:"));
        assert!(err(&["--trace", "/nonexistent/trace", "--qdisc", "phantom"]).contains("/nonexistent/trace"));
        assert!(err(&["--rate-mbps", "10", "--queue-bytes", "100"]).starts_with("--queue-bytes:"));
        assert!(err(&["--rate-mbps", "10", "--duration-s", "0"]).starts_with("--duration-s:"));
        let bad_prefix = Cli::try_parse_from(["ccp-router", "run", "--netns-prefix", "../x", "--rate-mbps", "1"]).unwrap();
        let Command::Run(r) = bad_prefix.command else { unreachable!() };
        assert!(r.configs().unwrap_err().to_string().starts_with("--netns-prefix:"));
    }

    #[test]
    fn abc_coexist_takes_a_classifier() {
        let coexist =
            |c: &str| parse(&["--rate-mbps", "96", "--qdisc", "abc", "--abc-coexist", c]).configs().map(|(_, c)| c.down.qdisc);
        match coexist("ports:5201-5203").unwrap() {
            QdiscKind::AbcCoexist { coexist, .. } => {
                assert_eq!(coexist.classifier, Classifier::DstPorts { first: 5201, last: 5203 });
                assert_eq!(coexist.top_k, 64);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            coexist("ecn").unwrap(),
            QdiscKind::AbcCoexist { coexist: CoexistParams { classifier: Classifier::Ecn, .. }, .. }
        ));
        assert_eq!(parse_classifier("ports:80"), Ok(Classifier::DstPorts { first: 80, last: 80 }));
        assert!(coexist("ports:9-1")
            .unwrap_err()
            .to_string()
            .starts_with("--abc-coexist: \"ports:9-1\": the port range is empty"));
        assert!(coexist("dscp").unwrap_err().to_string().starts_with("--abc-coexist: \"dscp\": use"));
        assert!(err(&["--rate-mbps", "10", "--abc-coexist", "ecn"]).starts_with("--abc-coexist: does not apply"));
    }

    #[test]
    fn abc_capacity_past_by_default_future_with_a_lookahead() {
        let abc = |extra: &[&str]| {
            let mut a = vec!["--rate-mbps", "10", "--qdisc", "abc"];
            a.extend_from_slice(extra);
            parse(&a).link.qdisc_kind(Limit::Packets(250))
        };
        let capacity = |extra: &[&str]| match abc(extra).unwrap() {
            QdiscKind::Abc(p) => p.capacity,
            other => panic!("{other:?}"),
        };
        assert_eq!(capacity(&[]), Capacity::Past);
        assert_eq!(capacity(&["--abc-capacity", "past"]), Capacity::Past);
        assert_eq!(
            capacity(&["--abc-capacity", "future", "--abc-lookahead-ms", "100"]),
            Capacity::Future { lookahead: 100 * NANOS_PER_MS }
        );
        let e = |extra: &[&str]| abc(extra).unwrap_err().to_string();
        assert!(e(&["--abc-capacity", "future"]).starts_with("--abc-lookahead-ms: --abc-capacity future needs"));
        assert!(e(&["--abc-lookahead-ms", "100"]).starts_with("--abc-lookahead-ms: only applies with --abc-capacity future"));
        assert!(e(&["--abc-capacity", "future", "--abc-lookahead-ms", "0"]).starts_with("--abc-lookahead-ms: must be > 0"));
        assert!(e(&["--abc-capacity", "future", "--abc-lookahead-ms=-5"]).starts_with("--abc-lookahead-ms:"));
        assert!(err(&["--rate-mbps", "10", "--abc-capacity", "future"]).starts_with("--abc-capacity: does not apply"));
    }

    #[test]
    fn abc_delay_over_the_mean_capacity_takes_its_window() {
        let abc = |extra: &[&str]| {
            let mut a = vec!["--rate-mbps", "10", "--qdisc", "abc"];
            a.extend_from_slice(extra);
            parse(&a).link.qdisc_kind(Limit::Packets(250))
        };
        match abc(&["--abc-delay", "queue-mean", "--abc-delay-window-ms", "500"]).unwrap() {
            QdiscKind::Abc(p) => assert_eq!(p.delay_measure, DelayMeasure::QueueOverMeanCapacity { window: 500 * NANOS_PER_MS }),
            other => panic!("{other:?}"),
        }
        let e = |extra: &[&str]| abc(extra).unwrap_err().to_string();
        assert!(e(&["--abc-delay", "queue-mean"]).starts_with("--abc-delay-window-ms: --abc-delay queue-mean needs"));
        assert!(e(&["--abc-delay-window-ms", "500"]).starts_with("--abc-delay-window-ms: only applies"));
        assert!(e(&["--abc-delay", "queue-mean", "--abc-delay-window-ms", "0"]).starts_with("--abc-delay-window-ms: must be > 0"));
    }

    #[test]
    fn abc_credit_is_window_by_default_or_per_opportunity() {
        let credit = |extra: &[&str]| {
            let mut a = vec!["--rate-mbps", "10", "--qdisc", "abc"];
            a.extend_from_slice(extra);
            match parse(&a).link.qdisc_kind(Limit::Packets(250)).unwrap() {
                QdiscKind::Abc(p) => p.credit,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(credit(&[]), Credit::Window);
        assert_eq!(credit(&["--abc-credit", "per-opportunity"]), Credit::PerOpportunity);
        assert!(err(&["--rate-mbps", "10", "--abc-credit", "window"]).starts_with("--abc-credit: does not apply"));
    }

    #[test]
    fn class_delays_parse_and_are_validated() {
        let r = parse(&[
            "--rate-mbps",
            "10",
            "--delay-ms",
            "15",
            "--class-delay",
            "dport=5201-5299:down=20,up=20",
            "--class-delay",
            "dst=10.77.0.2,proto=udp,dport=6000:1",
        ]);
        let (_, c) = r.configs().unwrap();
        assert_eq!(c.classes.len(), 2);
        assert_eq!(c.classes[0].to_string(), "dport=5201-5299:20");
        assert_eq!(c.classes[1].down, Some(NANOS_PER_MS));
        assert_eq!(c.down.delay, 15 * NANOS_PER_MS, "the default delay is unchanged");
        assert!(parse(&["--rate-mbps", "10"]).configs().unwrap().1.classes.is_empty());
        let e = err(&["--rate-mbps", "10", "--class-delay", "dport=5201-5299:1", "--class-delay", "dport=5250:2"]);
        assert!(e.starts_with("--class-delay: classes 1 (dport=5201-5299) and 2 (dport=5250) overlap"), "{e}");
        assert!(err(&["--rate-mbps", "10", "--class-delay", "dport=9-5:1"])
            .starts_with("--class-delay: \"dport=9-5:1\": dport: the range 9-5 is empty"));
        assert!(err(&["--rate-mbps", "10", "--class-delay", "dport=80:99999"]).contains("outside 0..=10000 ms"));
    }

    #[test]
    fn trace_errors_name_file_and_line() {
        let p = std::env::temp_dir().join(format!("ccp-router-cli-{}.trace", std::process::id()));
        std::fs::write(&p, "1\n2\nthree\n").unwrap();
        let e = err(&["--trace", p.to_str().unwrap()]);
        std::fs::remove_file(&p).unwrap();
        assert!(e.contains(&format!("{}:3:", p.display())), "{e}");
    }

    #[test]
    fn sampling_syntax() {
        assert_eq!(parse_sampling("prob:0.05").unwrap(), Sampling::Probability(0.05));
        assert_eq!(parse_sampling("bytes:15000").unwrap(), Sampling::Bytes(15000));
        assert_eq!(parse_sampling("table").unwrap(), Sampling::Table);
        assert!(parse_sampling("bytes:0").is_err());
        assert!(parse_sampling("often").is_err());
    }
}
