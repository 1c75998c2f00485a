//! The manifest beside a policy (`model.onnx` → `model.toml`): what the policy observes, what its
//! output means, how long one inference may take, and which classic algorithm takes a flow over
//! when the policy keeps failing. Every error names the file and the field.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::features::Feature;

/// Largest manifest read, bytes.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 10;
/// Longest history a policy may observe, reports.
pub const MAX_HISTORY: usize = 256;
/// Most features per report.
pub const MAX_FEATURES: usize = 64;
/// The default inference deadline, µs.
pub const DEFAULT_BUDGET_US: u64 = 200;

/// A validated manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub file: PathBuf,
    pub summary: String,
    pub reference: String,
    /// Longest one inference may take before its answer is discarded as a fault, µs.
    pub budget_us: u64,
    /// The classic algorithm a flow goes to after repeated faults, with its parameters.
    pub fallback: String,
    pub fallback_params: toml::Table,
    pub observation: Observation,
    pub action: ActionSpec,
    pub report: ReportEvery,
}

/// How the model's input is built from the last `history` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub history: usize,
    pub layout: Layout,
    pub features: Vec<Normalised>,
}

impl Observation {
    /// Values per observation: history × features.
    pub fn len(&self) -> usize {
        self.history * self.features.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The model input's shape.
    pub fn shape(&self) -> Vec<usize> {
        match self.layout {
            Layout::Flat => vec![1, self.len()],
            Layout::Sequence => vec![1, self.history, self.features.len()],
        }
    }
}

/// The model input's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `[1, history × features]`, oldest report first (an MLP).
    Flat,
    /// `[1, history, features]`: batch, time, feature (a recurrent policy).
    Sequence,
}

/// One feature with its normalisation: `clamp((x − offset) / scale, −clip, clip)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalised {
    pub feature: Feature,
    pub offset: f64,
    pub scale: f64,
    pub clip: f64,
}

impl Normalised {
    #[inline]
    pub fn apply(&self, x: f64) -> f64 {
        ((x - self.offset) / self.scale).clamp(-self.clip, self.clip)
    }
}

/// What the model's (first) output means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ActionSpec {
    /// Aurora's multiplicative rule, on the window: with `a` clamped to ±`clip`,
    /// `cwnd × (1 + step·a)` for `a ≥ 0`, `cwnd / (1 − step·a)` below.
    WindowMultiplier { step: f64, clip: f64, min_cwnd_pkts: f64, max_cwnd_pkts: f64 },
    /// A target rate, `a × scale_mbps` clamped to [`min_mbps`, `max_mbps`]: paced at that rate,
    /// with a window of `window_gain` rate × RTT (so the rate, not the window, limits the flow).
    Rate { scale_mbps: f64, min_mbps: f64, max_mbps: f64, window_gain: f64 },
}

/// How often the policy acts: the report policy it asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReportEvery {
    Rtts(f64),
    IntervalUs(u64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    budget_us: Option<u64>,
    fallback: String,
    #[serde(default)]
    fallback_params: toml::Table,
    observation: RawObservation,
    action: RawAction,
    #[serde(default)]
    report: Option<RawReport>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObservation {
    history: usize,
    #[serde(default = "flat")]
    layout: Layout,
    features: Vec<RawFeature>,
}

fn flat() -> Layout {
    Layout::Flat
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFeature {
    name: String,
    #[serde(default)]
    offset: f64,
    #[serde(default = "one")]
    scale: f64,
    #[serde(default = "default_clip")]
    clip: f64,
}

fn one() -> f64 {
    1.0
}

/// Normalised features are clipped here unless the manifest says otherwise: a policy trained on
/// one range of links must not be fed a value a thousand times outside it.
fn default_clip() -> f64 {
    10.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "snake_case")]
enum RawAction {
    WindowMultiplier {
        #[serde(default = "aurora_step")]
        step: f64,
        #[serde(default = "one")]
        clip: f64,
        #[serde(default = "min_pkts")]
        min_cwnd_pkts: f64,
        #[serde(default = "max_pkts")]
        max_cwnd_pkts: f64,
    },
    Rate {
        scale_mbps: f64,
        #[serde(default = "min_mbps")]
        min_mbps: f64,
        max_mbps: f64,
        #[serde(default = "two")]
        window_gain: f64,
    },
}

/// Aurora's δ (Jay et al., ICML 2019, §4: rate change factor 0.025).
fn aurora_step() -> f64 {
    0.025
}
fn min_pkts() -> f64 {
    ccp_contract::MIN_CWND_PKTS
}
fn max_pkts() -> f64 {
    1e6
}
fn min_mbps() -> f64 {
    0.1
}
fn two() -> f64 {
    2.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReport {
    #[serde(default)]
    rtts: Option<f64>,
    #[serde(default)]
    interval_us: Option<u64>,
}

/// The manifest of a model: the same path with `.toml` for its extension.
pub fn manifest_path(model: &Path) -> PathBuf {
    model.with_extension("toml")
}

impl Manifest {
    /// Reads and validates the manifest at `file`.
    pub fn load(file: &Path) -> Result<Manifest, String> {
        let meta = std::fs::metadata(file).map_err(|e| format!("{}: cannot read the manifest: {e}", file.display()))?;
        if meta.len() > MAX_MANIFEST_BYTES {
            return Err(format!("{}: {} bytes; a manifest is at most {MAX_MANIFEST_BYTES}", file.display(), meta.len()));
        }
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        Manifest::parse(&text, file)
    }

    /// Parses manifest text; `file` names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Manifest, String> {
        let at = |field: &str, why: String| format!("{}: {field}: {why}", file.display());
        let raw: Raw = toml::from_str(text).map_err(|e| format!("{}: {}", file.display(), e.to_string().trim_end()))?;
        let budget_us = raw.budget_us.unwrap_or(DEFAULT_BUDGET_US);
        if !(1..=1_000_000).contains(&budget_us) {
            return Err(at("budget_us", format!("{budget_us} is outside 1..=1000000 µs")));
        }
        if raw.fallback.contains(':') {
            return Err(at(
                "fallback",
                format!("{:?}: the fallback must be a built-in algorithm (it takes over when the policy fails)", raw.fallback),
            ));
        }
        if ccp_algorithms::registry::find(&raw.fallback).is_none() {
            return Err(at("fallback", format!("{:?} is not a known algorithm", raw.fallback)));
        }
        let o = raw.observation;
        if !(1..=MAX_HISTORY).contains(&o.history) {
            return Err(at("observation.history", format!("{} is outside 1..={MAX_HISTORY}", o.history)));
        }
        if o.features.is_empty() || o.features.len() > MAX_FEATURES {
            return Err(at("observation.features", format!("{} features; give 1..={MAX_FEATURES}", o.features.len())));
        }
        let mut features = Vec::with_capacity(o.features.len());
        for (i, f) in o.features.iter().enumerate() {
            let field = |k: &str| format!("observation.features[{i}].{k}");
            let feature = Feature::from_name(&f.name).ok_or_else(|| {
                at(&field("name"), format!("{:?} is not a feature; the features are: {}", f.name, Feature::names().join(", ")))
            })?;
            if !f.offset.is_finite() {
                return Err(at(&field("offset"), format!("{} is not finite", f.offset)));
            }
            if !(f.scale.is_finite() && f.scale != 0.0) {
                return Err(at(&field("scale"), format!("{} must be finite and non-zero", f.scale)));
            }
            if !(f.clip.is_finite() && f.clip > 0.0) {
                return Err(at(&field("clip"), format!("{} must be finite and positive", f.clip)));
            }
            features.push(Normalised { feature, offset: f.offset, scale: f.scale, clip: f.clip });
        }
        let positive = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(at(field, format!("{v} must be finite and positive")))
            }
        };
        let action = match raw.action {
            RawAction::WindowMultiplier { step, clip, min_cwnd_pkts, max_cwnd_pkts } => {
                positive("action.step", step)?;
                if step * clip >= 1.0 {
                    return Err(at("action.step", format!("step × clip = {} must stay below 1 (a cut below zero)", step * clip)));
                }
                positive("action.clip", clip)?;
                if !(min_cwnd_pkts >= ccp_contract::MIN_CWND_PKTS && min_cwnd_pkts.is_finite()) {
                    return Err(at(
                        "action.min_cwnd_pkts",
                        format!("{min_cwnd_pkts} is below the floor {}", ccp_contract::MIN_CWND_PKTS),
                    ));
                }
                if !(max_cwnd_pkts.is_finite() && max_cwnd_pkts >= min_cwnd_pkts) {
                    return Err(at("action.max_cwnd_pkts", format!("{max_cwnd_pkts} is below min_cwnd_pkts {min_cwnd_pkts}")));
                }
                ActionSpec::WindowMultiplier { step, clip, min_cwnd_pkts, max_cwnd_pkts }
            }
            RawAction::Rate { scale_mbps, min_mbps, max_mbps, window_gain } => {
                positive("action.scale_mbps", scale_mbps)?;
                positive("action.min_mbps", min_mbps)?;
                positive("action.window_gain", window_gain)?;
                if !(max_mbps.is_finite() && max_mbps >= min_mbps) {
                    return Err(at("action.max_mbps", format!("{max_mbps} is below min_mbps {min_mbps}")));
                }
                ActionSpec::Rate { scale_mbps, min_mbps, max_mbps, window_gain }
            }
        };
        let report = match raw.report {
            None => ReportEvery::Rtts(1.0),
            Some(RawReport { rtts: Some(r), interval_us: None }) => {
                let (lo, hi) = (0.1, 100.0);
                if !(lo..=hi).contains(&r) {
                    return Err(at("report.rtts", format!("{r} is outside {lo}..={hi}")));
                }
                ReportEvery::Rtts(r)
            }
            Some(RawReport { rtts: None, interval_us: Some(us) }) => {
                if !(ccp_contract::MIN_REPORT_INTERVAL_US..=ccp_contract::MAX_REPORT_INTERVAL_US).contains(&us) {
                    return Err(at(
                        "report.interval_us",
                        format!(
                            "{us} is outside {}..={}",
                            ccp_contract::MIN_REPORT_INTERVAL_US,
                            ccp_contract::MAX_REPORT_INTERVAL_US
                        ),
                    ));
                }
                ReportEvery::IntervalUs(us)
            }
            Some(_) => return Err(at("report", "give exactly one of rtts and interval_us".into())),
        };
        Ok(Manifest {
            file: file.to_path_buf(),
            summary: raw.summary.unwrap_or_default(),
            reference: raw.reference.unwrap_or_default(),
            budget_us,
            fallback: raw.fallback,
            fallback_params: raw.fallback_params,
            observation: Observation { history: o.history, layout: o.layout, features },
            action,
            report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        fallback = "cubic"
        [observation]
        history = 4
        features = [{ name = "rtt_ratio", offset = 1.0 }, { name = "delivery_rate_mbps", scale = 100.0 }]
        [action]
        kind = "window_multiplier"
    "#;

    #[test]
    fn a_minimal_manifest_takes_the_documented_defaults() {
        let m = Manifest::parse(GOOD, Path::new("m.toml")).unwrap();
        assert_eq!(m.budget_us, DEFAULT_BUDGET_US);
        assert_eq!(m.report, ReportEvery::Rtts(1.0));
        assert_eq!(m.observation.shape(), vec![1, 8]);
        assert_eq!(m.action, ActionSpec::WindowMultiplier { step: 0.025, clip: 1.0, min_cwnd_pkts: 2.0, max_cwnd_pkts: 1e6 });
        assert_eq!(m.observation.features[0].apply(3.0), 2.0);
        assert_eq!(m.observation.features[0].apply(1e9), 10.0, "clipped");
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let cases = [
            (GOOD.replace("rtt_ratio", "rtt_ratoi"), "observation.features[0].name"),
            (GOOD.replace("scale = 100.0", "scale = 0.0"), "observation.features[1].scale"),
            (GOOD.replace("history = 4", "history = 0"), "observation.history"),
            (GOOD.replace("\"cubic\"", "\"bogus\""), "fallback"),
            (GOOD.replace("\"cubic\"", "\"py:x.py:X\""), "fallback"),
            (GOOD.replace("window_multiplier", "warp"), "kind"),
            (format!("budget_us = 0\n{GOOD}"), "budget_us"),
            (GOOD.replace("kind = \"window_multiplier\"", "kind = \"window_multiplier\"\nstep = 0.5\nclip = 2.0"), "action.step"),
            (format!("{GOOD}\n[report]\nrtts = 1.0\ninterval_us = 5000\n"), "report"),
            (format!("colour = 1\n{GOOD}"), "colour"),
        ];
        for (text, field) in cases {
            let err = Manifest::parse(&text, Path::new("/x/model.toml")).unwrap_err();
            assert!(err.starts_with("/x/model.toml: ") && err.contains(field), "{field}: {err}");
        }
    }
}
