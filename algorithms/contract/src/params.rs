//! Declared, validated algorithm parameters.
//!
//! Each algorithm declares its parameters once as a table of `ParamSpec`s (name, type, range,
//! default, unit, meaning). That table drives parsing of TOML parameters (with errors that name
//! the algorithm and the field), the `ccp-agent algorithms` listing, and the defaults.

use std::fmt;

/// One end of a numeric range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Inclusive(f64),
    Exclusive(f64),
    Unbounded,
}

impl Bound {
    fn admits_above(self, v: f64) -> bool {
        match self {
            Bound::Inclusive(b) => v >= b,
            Bound::Exclusive(b) => v > b,
            Bound::Unbounded => true,
        }
    }

    fn admits_below(self, v: f64) -> bool {
        match self {
            Bound::Inclusive(b) => v <= b,
            Bound::Exclusive(b) => v < b,
            Bound::Unbounded => true,
        }
    }
}

/// The type, range and default of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    Float { default: f64, min: Bound, max: Bound },
    Int { default: i64, min: i64, max: i64 },
    Bool { default: bool },
    Choice { default: &'static str, options: &'static [&'static str] },
}

/// Declaration of one algorithm parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    /// Unit of the value ("packets", "µs", "bytes/s", "" for dimensionless).
    pub unit: &'static str,
    /// What it means, and where the default comes from.
    pub doc: &'static str,
}

impl ParamSpec {
    pub const fn float(name: &'static str, default: f64, min: Bound, max: Bound, unit: &'static str, doc: &'static str) -> Self {
        ParamSpec { name, kind: ParamKind::Float { default, min, max }, unit, doc }
    }

    pub const fn int(name: &'static str, default: i64, min: i64, max: i64, unit: &'static str, doc: &'static str) -> Self {
        ParamSpec { name, kind: ParamKind::Int { default, min, max }, unit, doc }
    }

    pub const fn bool(name: &'static str, default: bool, doc: &'static str) -> Self {
        ParamSpec { name, kind: ParamKind::Bool { default }, unit: "", doc }
    }

    pub const fn choice(name: &'static str, default: &'static str, options: &'static [&'static str], doc: &'static str) -> Self {
        ParamSpec { name, kind: ParamKind::Choice { default, options }, unit: "", doc }
    }

    /// The same parameter with another description (a shared spec whose default means something
    /// particular to one algorithm).
    pub const fn with_doc(self, doc: &'static str) -> Self {
        ParamSpec { doc, ..self }
    }

    /// The default, as a value.
    pub fn default_value(&self) -> ParamValue {
        match self.kind {
            ParamKind::Float { default, .. } => ParamValue::Float(default),
            ParamKind::Int { default, .. } => ParamValue::Int(default),
            ParamKind::Bool { default } => ParamValue::Bool(default),
            ParamKind::Choice { default, .. } => ParamValue::Choice(default),
        }
    }

    /// Human description of the admissible values, e.g. "float in (0, 1]".
    pub fn range_text(&self) -> String {
        match self.kind {
            ParamKind::Float { min, max, .. } => {
                let lo = match min {
                    Bound::Inclusive(v) => format!("[{v}"),
                    Bound::Exclusive(v) => format!("({v}"),
                    Bound::Unbounded => "(-inf".to_string(),
                };
                let hi = match max {
                    Bound::Inclusive(v) => format!("{v}]"),
                    Bound::Exclusive(v) => format!("{v})"),
                    Bound::Unbounded => "inf)".to_string(),
                };
                format!("float in {lo}, {hi}")
            }
            ParamKind::Int { min, max, .. } => format!("integer in [{min}, {max}]"),
            ParamKind::Bool { .. } => "true or false".to_string(),
            ParamKind::Choice { options, .. } => format!("one of {}", options.join(", ")),
        }
    }

    fn check(&self, algorithm: &str, raw: &toml::Value) -> Result<ParamValue, ParamError> {
        let wrong_type = |expected: &'static str| ParamError::WrongType {
            algorithm: algorithm.to_string(),
            param: self.name.to_string(),
            expected,
            found: describe_toml(raw),
        };
        let out_of_range = |value: String| ParamError::OutOfRange {
            algorithm: algorithm.to_string(),
            param: self.name.to_string(),
            value,
            range: self.range_text(),
        };
        match self.kind {
            ParamKind::Float { min, max, .. } => {
                let v = match raw {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(i) => *i as f64,
                    _ => return Err(wrong_type("a number")),
                };
                if !v.is_finite() || !min.admits_above(v) || !max.admits_below(v) {
                    return Err(out_of_range(v.to_string()));
                }
                Ok(ParamValue::Float(v))
            }
            ParamKind::Int { min, max, .. } => {
                let v = match raw {
                    toml::Value::Integer(i) => *i,
                    _ => return Err(wrong_type("an integer")),
                };
                if v < min || v > max {
                    return Err(out_of_range(v.to_string()));
                }
                Ok(ParamValue::Int(v))
            }
            ParamKind::Bool { .. } => match raw {
                toml::Value::Boolean(b) => Ok(ParamValue::Bool(*b)),
                _ => Err(wrong_type("true or false")),
            },
            ParamKind::Choice { options, .. } => {
                let s = match raw {
                    toml::Value::String(s) => s.as_str(),
                    _ => return Err(wrong_type("a string")),
                };
                match options.iter().find(|o| **o == s) {
                    Some(o) => Ok(ParamValue::Choice(o)),
                    None => Err(out_of_range(format!("{s:?}"))),
                }
            }
        }
    }
}

/// Parameters several algorithms declare: one definition each, so that a name means the same
/// thing, in the same unit and range, wherever it appears.
pub mod shared {
    use super::{Bound, ParamSpec};
    use crate::limits::MIN_CWND_PKTS;

    /// The initial window, packets (RFC 6928: 10).
    pub const INIT_CWND_PKTS: ParamSpec = ParamSpec::float(
        "init_cwnd_pkts",
        10.0,
        Bound::Inclusive(MIN_CWND_PKTS),
        Bound::Inclusive(1000.0),
        "packets",
        "initial window for new flows (RFC 6928: 10); a flow the datapath started with its own window keeps it",
    );

    /// Header bytes per packet beyond the MSS in the wire bytes a configured link rate counts.
    /// 52: ccp-kernel's 1500 bytes per 1448-byte segment.
    pub const HEADER_BYTES_DEFAULT: f64 = 52.0;

    /// The bottleneck rate μ, Mbit/s of wire bytes; 0 = estimated.
    pub const MU_MBIT_PER_S: ParamSpec = ParamSpec::float(
        "mu_mbit_per_s",
        0.0,
        Bound::Inclusive(0.0),
        Bound::Inclusive(1.0e7),
        "Mbit/s",
        "bottleneck rate mu; 0 = estimate as the maximum EWMA-smoothed receive rate (Nimbus paper §3.1; emulations supplied it)",
    );

    /// The window of μ's maximum-receive-rate estimate, s; 0 = all-time.
    pub const MU_WINDOW_S: ParamSpec = ParamSpec::float(
        "mu_window_s",
        0.0,
        Bound::Inclusive(0.0),
        Bound::Inclusive(86_400.0),
        "s",
        "window of the maximum-receive-rate estimate of mu; 0 = all-time (the Nimbus authors' code)",
    );

    /// How a configured μ (wire bytes) is scaled to the payload bytes reports count.
    pub const HEADER_BYTES: ParamSpec = ParamSpec::float(
        "header_bytes",
        HEADER_BYTES_DEFAULT,
        Bound::Inclusive(0.0),
        Bound::Inclusive(1000.0),
        "bytes",
        "header bytes per packet beyond the MSS: a configured mu (wire bytes) is scaled by MSS/(MSS + this) to the payload bytes S and R count; 0 = mu counts payload",
    );
}

fn describe_toml(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer {i}"),
        toml::Value::Float(f) => format!("float {f}"),
        toml::Value::Boolean(b) => format!("boolean {b}"),
        toml::Value::Datetime(d) => format!("datetime {d}"),
        toml::Value::Array(_) => "an array".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}

/// A validated parameter value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamValue {
    Float(f64),
    Int(i64),
    Bool(bool),
    Choice(&'static str),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Bool(v) => write!(f, "{v}"),
            ParamValue::Choice(v) => write!(f, "{v}"),
        }
    }
}

/// Why a parameter set was rejected. Every variant names the algorithm and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("unknown algorithm {name:?} (known: {})", known.join(", "))]
    UnknownAlgorithm { name: String, known: Vec<&'static str> },
    #[error("algorithm {name:?} could not be loaded: {reason}")]
    Unavailable { name: String, reason: String },
    #[error("{algorithm}: unknown parameter {param:?} (known: {})", if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    UnknownParam { algorithm: String, param: String, known: Vec<&'static str> },
    #[error("{algorithm}: parameter {param:?} must be {expected}, found {found}")]
    WrongType { algorithm: String, param: String, expected: &'static str, found: String },
    #[error("{algorithm}: parameter {param:?} = {value} is out of range: must be {range}")]
    OutOfRange { algorithm: String, param: String, value: String, range: String },
    #[error("{algorithm}: parameter {param:?}: {reason}")]
    Invalid { algorithm: String, param: String, reason: String },
}

/// A full, validated parameter set for one algorithm: every declared parameter has a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    algorithm: &'static str,
    values: Vec<(&'static str, ParamValue)>,
}

impl Params {
    /// Every parameter at its default.
    pub fn defaults(algorithm: &'static str, specs: &'static [ParamSpec]) -> Self {
        Params { algorithm, values: specs.iter().map(|s| (s.name, s.default_value())).collect() }
    }

    /// Validates `table` against `specs`; missing parameters take their defaults.
    pub fn parse(algorithm: &'static str, specs: &'static [ParamSpec], table: &toml::Table) -> Result<Self, ParamError> {
        let mut params = Params::defaults(algorithm, specs);
        for (key, raw) in table {
            let Some(spec) = specs.iter().find(|s| s.name == key) else {
                return Err(ParamError::UnknownParam {
                    algorithm: algorithm.to_string(),
                    param: key.clone(),
                    known: specs.iter().map(|s| s.name).collect(),
                });
            };
            let value = spec.check(algorithm, raw)?;
            if let Some(slot) = params.values.iter_mut().find(|(n, _)| *n == spec.name) {
                slot.1 = value;
            }
        }
        Ok(params)
    }

    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    /// All values, in declaration order.
    pub fn values(&self) -> &[(&'static str, ParamValue)] {
        &self.values
    }

    fn get(&self, name: &str) -> ParamValue {
        match self.values.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => *v,
            // Reading an undeclared name is a bug in the algorithm's own code, caught by the
            // registry test that builds every algorithm from its defaults.
            None => panic!("{}: parameter {name:?} is read but not declared", self.algorithm),
        }
    }

    pub fn float(&self, name: &str) -> f64 {
        match self.get(name) {
            ParamValue::Float(v) => v,
            ParamValue::Int(v) => v as f64,
            other => panic!("{}: parameter {name:?} is {other:?}, not a number", self.algorithm),
        }
    }

    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            ParamValue::Int(v) => v,
            other => panic!("{}: parameter {name:?} is {other:?}, not an integer", self.algorithm),
        }
    }

    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            ParamValue::Bool(v) => v,
            other => panic!("{}: parameter {name:?} is {other:?}, not a bool", self.algorithm),
        }
    }

    pub fn choice(&self, name: &str) -> &'static str {
        match self.get(name) {
            ParamValue::Choice(v) => v,
            other => panic!("{}: parameter {name:?} is {other:?}, not a choice", self.algorithm),
        }
    }

    /// An error about a cross-field constraint, naming `param`.
    pub fn invalid(&self, param: &str, reason: impl Into<String>) -> ParamError {
        ParamError::Invalid { algorithm: self.algorithm.to_string(), param: param.to_string(), reason: reason.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec::float("g", 0.0625, Bound::Exclusive(0.0), Bound::Inclusive(1.0), "", "gain"),
        ParamSpec::int("init_cwnd_pkts", 10, 1, 1000, "packets", "initial window"),
        ParamSpec::bool("hystart", false, "use HyStart"),
        ParamSpec::choice("mode", "delay", &["delay", "competitive"], "mode"),
    ];

    fn table(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_fill_missing_fields() {
        let p = Params::parse("x", SPECS, &table("g = 0.5")).unwrap();
        assert_eq!(p.float("g"), 0.5);
        assert_eq!(p.int("init_cwnd_pkts"), 10);
        assert!(!p.bool("hystart"));
        assert_eq!(p.choice("mode"), "delay");
    }

    #[test]
    fn integer_accepted_for_float() {
        let p = Params::parse("x", SPECS, &table("g = 1")).unwrap();
        assert_eq!(p.float("g"), 1.0);
    }

    #[test]
    fn errors_name_algorithm_and_field() {
        let e = Params::parse("dctcp", SPECS, &table("gg = 0.5")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("dctcp") && msg.contains("\"gg\"") && msg.contains("known: g,"), "{msg}");

        let e = Params::parse("dctcp", SPECS, &table("g = 0.0")).unwrap_err();
        assert!(matches!(e, ParamError::OutOfRange { .. }), "{e}");
        assert!(e.to_string().contains("(0, 1]"), "{e}");

        let e = Params::parse("dctcp", SPECS, &table("init_cwnd_pkts = 2.5")).unwrap_err();
        assert!(matches!(e, ParamError::WrongType { .. }), "{e}");

        let e = Params::parse("dctcp", SPECS, &table("mode = \"fast\"")).unwrap_err();
        assert!(e.to_string().contains("one of delay, competitive"), "{e}");

        let e = Params::parse("dctcp", SPECS, &table("hystart = 1")).unwrap_err();
        assert!(e.to_string().contains("true or false"), "{e}");
    }

    #[test]
    fn non_finite_rejected() {
        let e = Params::parse("x", SPECS, &table("g = nan")).unwrap_err();
        assert!(matches!(e, ParamError::OutOfRange { .. }));
    }
}
