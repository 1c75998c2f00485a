//! Declared, validated algorithm parameters.
//!
//! Each algorithm declares its parameters once, with [`declare_params!`](crate::declare_params):
//! one line per parameter gives the field of its typed configuration and the parameter's
//! [`ParamSpec`] (type, range, default, unit, meaning). That one declaration produces
//!
//! - the struct with its typed fields (`f64`, integers, `bool`, or an enum made with
//!   [`param_choice!`](crate::param_choice) for a string choice),
//! - `PARAMS`, the spec table that drives parsing of TOML parameters (with errors that name the
//!   algorithm and the field), the `ccp-agent algorithms` listing and the defaults,
//! - `from_params`, which reads a validated [`Params`] into the struct, and
//! - `Default`, the declared defaults.
//!
//! The parameter's name is the field's name, so the code reads `cfg.beta`, never a string: a
//! misspelt parameter does not compile. The declaration is checked when the crate compiles: a
//! field type that does not fit the spec's kind (a `bool` field with a float spec, an integer
//! range wider than the field's type), a default outside its range or its choices, or a shared
//! spec declared under another name, is a compile error.
//!
//! Algorithms written in Python declare `Param`s at run time: they build [`ParamSpec`]s directly
//! and read [`Params::values`].

use std::fmt;

/// One end of a numeric range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Inclusive(f64),
    Exclusive(f64),
    Unbounded,
}

impl Bound {
    const fn admits_above(self, v: f64) -> bool {
        match self {
            Bound::Inclusive(b) => v >= b,
            Bound::Exclusive(b) => v > b,
            Bound::Unbounded => true,
        }
    }

    const fn admits_below(self, v: f64) -> bool {
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

    /// The spec `declare_params!` lists for `field`, a field of type `ty`: names a spec declared
    /// without a name, takes an enum's options, and refuses a declaration that does not fit
    /// (evaluated in a constant, so a refusal is a compile error naming the reason).
    pub const fn declare(self, field: &'static str, ty: FieldType) -> ParamSpec {
        let name = if self.name.is_empty() {
            field
        } else if str_eq(self.name, field) {
            self.name
        } else {
            panic!("a shared parameter spec is declared under a field of another name: the field must be named as the spec")
        };
        let kind = match (self.kind, ty) {
            (ParamKind::Float { default, min, max }, FieldType::Float) => {
                if !min.admits_above(default) || !max.admits_below(default) {
                    panic!("a float parameter's default lies outside its declared range");
                }
                self.kind
            }
            (ParamKind::Int { default, min, max }, FieldType::Int { min: type_min, max: type_max }) => {
                if min > max || default < min || default > max {
                    panic!("an integer parameter's default lies outside its declared range");
                }
                if min < type_min || max > type_max {
                    panic!("an integer parameter's declared range does not fit its field's type");
                }
                self.kind
            }
            (ParamKind::Bool { .. }, FieldType::Bool) => self.kind,
            (ParamKind::Choice { default, options }, FieldType::Choice(enum_options)) => {
                let options = match enum_options {
                    None => options,
                    Some(names) if options.is_empty() => names,
                    Some(names) => {
                        if !strs_eq(options, names) {
                            panic!("a choice parameter lists other options than its field's enum");
                        }
                        options
                    }
                };
                if options.is_empty() {
                    panic!("a choice parameter held by a &str field must list its options (Param::choice_of)");
                }
                if !strs_contain(options, default) {
                    panic!("a choice parameter's default is not one of its options");
                }
                ParamKind::Choice { default, options }
            }
            _ => panic!("a parameter's field type does not match its spec's kind (float: f64, int: an integer type, bool: bool, choice: a param_choice! enum or &'static str)"),
        };
        ParamSpec { name, kind, unit: self.unit, doc: self.doc }
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

/// Specs without a name, for [`declare_params!`](crate::declare_params): the field they declare
/// names them. Ranges and units as in [`ParamSpec`]'s constructors.
pub struct Param;

impl Param {
    pub const fn float(default: f64, min: Bound, max: Bound, unit: &'static str, doc: &'static str) -> ParamSpec {
        ParamSpec::float("", default, min, max, unit, doc)
    }

    pub const fn int(default: i64, min: i64, max: i64, unit: &'static str, doc: &'static str) -> ParamSpec {
        ParamSpec::int("", default, min, max, unit, doc)
    }

    pub const fn bool(default: bool, doc: &'static str) -> ParamSpec {
        ParamSpec::bool("", default, doc)
    }

    /// A choice held by a [`param_choice!`](crate::param_choice) enum: the options are the enum's.
    pub const fn choice(default: &'static str, doc: &'static str) -> ParamSpec {
        ParamSpec::choice("", default, &[], doc)
    }

    /// A choice held by a `&'static str` field, among `options`.
    pub const fn choice_of(default: &'static str, options: &'static [&'static str], doc: &'static str) -> ParamSpec {
        ParamSpec::choice("", default, options, doc)
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn strs_eq(a: &[&str], b: &[&str]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !str_eq(a[i], b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

const fn strs_contain(all: &[&str], s: &str) -> bool {
    let mut i = 0;
    while i < all.len() {
        if str_eq(all[i], s) {
            return true;
        }
        i += 1;
    }
    false
}

/// What a field of a [`declare_params!`](crate::declare_params) struct can hold; checked against
/// the field's spec when the crate compiles ([`ParamSpec::declare`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldType {
    Float,
    /// An integer type holding every value in `[min, max]`.
    Int {
        min: i64,
        max: i64,
    },
    Bool,
    /// A string choice: an enum's options (`Some`), or any declared options (`None`, a `&str`).
    Choice(Option<&'static [&'static str]>),
}

/// A type a declared parameter can be read into.
pub trait ParamField: Sized {
    const FIELD: FieldType;
    /// The field's value, or `None` when `value` is of another kind (a `Params` of other specs).
    fn from_value(value: ParamValue) -> Option<Self>;
}

impl ParamField for f64 {
    const FIELD: FieldType = FieldType::Float;
    fn from_value(value: ParamValue) -> Option<Self> {
        match value {
            ParamValue::Float(v) => Some(v),
            _ => None,
        }
    }
}

impl ParamField for bool {
    const FIELD: FieldType = FieldType::Bool;
    fn from_value(value: ParamValue) -> Option<Self> {
        match value {
            ParamValue::Bool(v) => Some(v),
            _ => None,
        }
    }
}

impl ParamField for &'static str {
    const FIELD: FieldType = FieldType::Choice(None);
    fn from_value(value: ParamValue) -> Option<Self> {
        match value {
            ParamValue::Choice(v) => Some(v),
            _ => None,
        }
    }
}

macro_rules! int_fields {
    ($($t:ty),*) => {$(
        impl ParamField for $t {
            // The declared range is checked to fit the type, so the conversion never fails.
            const FIELD: FieldType = FieldType::Int {
                min: if (<$t>::MIN as i128) < (i64::MIN as i128) { i64::MIN } else { <$t>::MIN as i64 },
                max: if (<$t>::MAX as i128) > (i64::MAX as i128) { i64::MAX } else { <$t>::MAX as i64 },
            };
            fn from_value(value: ParamValue) -> Option<Self> {
                match value {
                    ParamValue::Int(v) => <$t>::try_from(v).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
int_fields!(i64, u64, u32, usize);

/// Declares an algorithm's parameters once: the typed struct, its spec table `PARAMS`, its
/// `from_params` and its `Default` (see the [module docs](crate::params)).
///
/// ```
/// use ccp_contract::{declare_params, param_choice, Bound, Param, Params};
///
/// param_choice! {
///     pub enum Mode { Fast = "fast", Slow = "slow" }
/// }
///
/// declare_params! {
///     #[derive(Debug, Clone, Copy, PartialEq)]
///     pub struct ExampleConfig {
///         pub beta: f64 = Param::float(0.5, Bound::Exclusive(0.0), Bound::Exclusive(1.0), "", "decrease"),
///         pub rounds: u32 = Param::int(3, 1, 100, "rounds", "rounds to wait"),
///         pub ecn: bool = Param::bool(true, "react to ECN"),
///         pub mode: Mode = Param::choice("slow", "how fast"),
///     }
/// }
///
/// let cfg = ExampleConfig::default();
/// assert_eq!((cfg.beta, cfg.rounds, cfg.ecn, cfg.mode), (0.5, 3, true, Mode::Slow));
/// assert_eq!(ExampleConfig::PARAMS[3].name, "mode");
/// let table: toml::Table = "beta = 0.7\nmode = \"fast\"".parse().unwrap();
/// let p = Params::parse("example", ExampleConfig::PARAMS, &table).unwrap();
/// let cfg = ExampleConfig::from_params(&p).unwrap();
/// assert_eq!((cfg.beta, cfg.mode), (0.7, Mode::Fast));
/// ```
///
/// A misspelt parameter is a field that does not exist:
///
/// ```compile_fail,E0609
/// # use ccp_contract::{declare_params, Bound, Param};
/// declare_params! {
///     pub struct RenoLike {
///         pub beta: f64 = Param::float(0.5, Bound::Exclusive(0.0), Bound::Exclusive(1.0), "", "decrease"),
///     }
/// }
/// let decrease = RenoLike::default().bta;
/// ```
///
/// A field whose type does not fit its spec does not compile:
///
/// ```compile_fail,E0080
/// # use ccp_contract::{declare_params, Param};
/// declare_params! {
///     pub struct Wrong {
///         pub ecn: f64 = Param::bool(true, "react to ECN"),
///     }
/// }
/// let _ = Wrong::PARAMS;
/// ```
///
/// Nor does a shared spec under another name, or a default outside its range:
///
/// ```compile_fail,E0080
/// # use ccp_contract::{declare_params, params::shared};
/// declare_params! {
///     pub struct Renamed {
///         pub initial_window: f64 = shared::INIT_CWND_PKTS,
///     }
/// }
/// let _ = Renamed::PARAMS;
/// ```
///
/// ```compile_fail,E0080
/// # use ccp_contract::{declare_params, Bound, Param};
/// declare_params! {
///     pub struct OutOfRange {
///         pub gain: f64 = Param::float(2.0, Bound::Exclusive(0.0), Bound::Inclusive(1.0), "", "gain"),
///     }
/// }
/// let _ = OutOfRange::PARAMS;
/// ```
#[macro_export]
macro_rules! declare_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident : $ty:ty = $spec:expr
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }

        impl $name {
            /// The declared parameters, in declaration order.
            pub const PARAMS: &'static [$crate::ParamSpec] = &[
                $( $crate::ParamSpec::declare($spec, stringify!($field), <$ty as $crate::params::ParamField>::FIELD), )*
            ];

            /// Reads the fields from `params`, validated against [`Self::PARAMS`].
            pub fn from_params(params: &$crate::Params) -> Result<Self, $crate::ParamError> {
                Ok($name { $( $field: params.field::<$ty>(stringify!($field))?, )* })
            }
        }

        impl Default for $name {
            /// The declared defaults.
            fn default() -> Self {
                match Self::from_params(&$crate::Params::defaults(stringify!($name), Self::PARAMS)) {
                    Ok(config) => config,
                    // `PARAMS` checks each default against its field's type when it is compiled.
                    Err(e) => unreachable!("{e}"),
                }
            }
        }
    };
}

/// An enum for a string-choice parameter: each variant with its text. The enum derives
/// `Debug, Clone, Copy, PartialEq, Eq` and has `NAMES` (the options, in order) and `name()`;
/// a [`declare_params!`](crate::declare_params) field of its type declares its choice with
/// [`Param::choice`].
#[macro_export]
macro_rules! param_choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// The options, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The option's text.
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl $crate::params::ParamField for $name {
            const FIELD: $crate::params::FieldType = $crate::params::FieldType::Choice(Some(Self::NAMES));
            fn from_value(value: $crate::ParamValue) -> Option<Self> {
                match value {
                    $( $crate::ParamValue::Choice($text) => Some($name::$variant), )+
                    _ => None,
                }
            }
        }
    };
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

    /// The value of `name` as a field of type `T` ([`declare_params!`](crate::declare_params)'s
    /// `from_params`). An error only when these parameters were validated against other specs.
    pub fn field<T: ParamField>(&self, name: &str) -> Result<T, ParamError> {
        let value = self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        value
            .and_then(T::from_value)
            .ok_or_else(|| self.invalid(name, format!("is not declared as a {:?} among these parameters ({value:?})", T::FIELD)))
    }

    /// An error about a cross-field constraint, naming `param`.
    pub fn invalid(&self, param: &str, reason: impl Into<String>) -> ParamError {
        ParamError::Invalid { algorithm: self.algorithm.to_string(), param: param.to_string(), reason: reason.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::param_choice! {
        enum Mode { Delay = "delay", Competitive = "competitive" }
    }

    crate::declare_params! {
        #[derive(Debug, Clone, Copy, PartialEq)]
        struct Example {
            g: f64 = Param::float(0.0625, Bound::Exclusive(0.0), Bound::Inclusive(1.0), "", "gain"),
            init_cwnd_pkts: u32 = Param::int(10, 1, 1000, "packets", "initial window"),
            hystart: bool = Param::bool(false, "use HyStart"),
            mode: Mode = Param::choice("delay", "mode"),
            flavour: &'static str = Param::choice_of("plain", &["plain", "salted"], "flavour"),
        }
    }

    fn table(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    fn parse(algorithm: &'static str, s: &str) -> Result<Example, ParamError> {
        Example::from_params(&Params::parse(algorithm, Example::PARAMS, &table(s))?)
    }

    #[test]
    fn defaults_fill_missing_fields() {
        let p = parse("x", "g = 0.5").unwrap();
        assert_eq!(p, Example { g: 0.5, ..Example::default() });
        assert_eq!(
            Example::default(),
            Example { g: 0.0625, init_cwnd_pkts: 10, hystart: false, mode: Mode::Delay, flavour: "plain" }
        );
    }

    #[test]
    fn the_declaration_names_the_specs_and_takes_the_enums_options() {
        let names: Vec<_> = Example::PARAMS.iter().map(|s| s.name).collect();
        assert_eq!(names, ["g", "init_cwnd_pkts", "hystart", "mode", "flavour"]);
        assert_eq!(Example::PARAMS[3].kind, ParamKind::Choice { default: "delay", options: &["delay", "competitive"] });
        assert_eq!(Example::PARAMS[3].range_text(), "one of delay, competitive");
        assert_eq!(Mode::Competitive.name(), "competitive");
    }

    #[test]
    fn every_kind_parses_into_its_field() {
        let p = parse("x", "g = 1\ninit_cwnd_pkts = 4\nhystart = true\nmode = \"competitive\"\nflavour = \"salted\"").unwrap();
        assert_eq!(p, Example { g: 1.0, init_cwnd_pkts: 4, hystart: true, mode: Mode::Competitive, flavour: "salted" });
    }

    #[test]
    fn errors_name_algorithm_and_field() {
        let e = parse("dctcp", "gg = 0.5").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("dctcp") && msg.contains("\"gg\"") && msg.contains("known: g,"), "{msg}");

        let e = parse("dctcp", "g = 0.0").unwrap_err();
        assert!(matches!(e, ParamError::OutOfRange { .. }), "{e}");
        assert!(e.to_string().contains("(0, 1]"), "{e}");

        let e = parse("dctcp", "init_cwnd_pkts = 2.5").unwrap_err();
        assert!(matches!(e, ParamError::WrongType { .. }), "{e}");

        let e = parse("dctcp", "mode = \"fast\"").unwrap_err();
        assert!(e.to_string().contains("one of delay, competitive"), "{e}");

        let e = parse("dctcp", "hystart = 1").unwrap_err();
        assert!(e.to_string().contains("true or false"), "{e}");
    }

    #[test]
    fn non_finite_rejected() {
        let e = parse("x", "g = nan").unwrap_err();
        assert!(matches!(e, ParamError::OutOfRange { .. }));
    }

    /// Parameters validated against other specs are an error naming the field, never a panic.
    #[test]
    fn reading_parameters_of_other_specs_is_an_error() {
        const OTHER: &[ParamSpec] = &[ParamSpec::bool("g", true, "not a float")];
        let e = Example::from_params(&Params::defaults("other", OTHER)).unwrap_err();
        assert!(matches!(&e, ParamError::Invalid { param, .. } if param == "g"), "{e}");
    }

    #[test]
    fn integer_fields_admit_the_ranges_their_types_hold() {
        assert_eq!(<u32 as ParamField>::FIELD, FieldType::Int { min: 0, max: i64::from(u32::MAX) });
        assert_eq!(<u64 as ParamField>::FIELD, FieldType::Int { min: 0, max: i64::MAX });
        assert_eq!(<i64 as ParamField>::FIELD, FieldType::Int { min: i64::MIN, max: i64::MAX });
    }
}
