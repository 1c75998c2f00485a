//! The `ccp_agent` Python module: the measurement contract as Python sees it.
//!
//! `Report`, `FlowStart`, `Seed`, `RttStats` and the network feedback types are read-only
//! snapshots with the Rust contract's field names and units (µs, bytes, bytes per second);
//! `Action` is what an algorithm returns; `Param` declares a parameter; `Algorithm` (plain
//! Python, `python/ccp_agent_base.py`) is the optional base class. The same module is built into
//! ccp-agent (where algorithms run) and into the `ccp_agent` wheel (`package/`, for type checking
//! and for unit-testing an algorithm with plain pytest).

use std::ffi::CString;

use ccp_contract::{
    Action, FlowStart, IntHop, NetworkFeedback, Pacing, ParamKind, ParamSpec, ParamValue, Report, ReportPolicy, RttStats, Seed,
    Urgent,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// RTT statistics of one report interval, µs.
#[pyclass(module = "ccp_agent", name = "RttStats", frozen, get_all)]
pub struct PyRttStats {
    pub min_us: u64,
    pub max_us: u64,
    pub last_us: u64,
    pub srtt_us: u64,
    pub mean_us: u64,
    pub samples: u32,
}

#[pymethods]
impl PyRttStats {
    #[new]
    #[pyo3(signature = (*, min_us=0, max_us=0, last_us=0, srtt_us=0, mean_us=0, samples=0))]
    fn new(min_us: u64, max_us: u64, last_us: u64, srtt_us: u64, mean_us: u64, samples: u32) -> Self {
        PyRttStats { min_us, max_us, last_us, srtt_us, mean_us, samples }
    }

    fn __repr__(&self) -> String {
        format!(
            "RttStats(min_us={}, max_us={}, last_us={}, srtt_us={}, mean_us={}, samples={})",
            self.min_us, self.max_us, self.last_us, self.srtt_us, self.mean_us, self.samples
        )
    }
}

impl From<RttStats> for PyRttStats {
    fn from(r: RttStats) -> Self {
        PyRttStats {
            min_us: r.min_us,
            max_us: r.max_us,
            last_us: r.last_us,
            srtt_us: r.srtt_us,
            mean_us: r.mean_us,
            samples: r.samples,
        }
    }
}

/// A QCN congestion notification for the flow (IEEE 802.1Qau): quantized feedback and the
/// congestion point's queue offset and change, bytes.
#[pyclass(module = "ccp_agent", name = "QcnFeedback", frozen, get_all)]
pub struct PyQcnFeedback {
    pub fb_quantized: u8,
    pub q_off_bytes: i64,
    pub q_delta_bytes: i64,
}

/// One hop of in-band network telemetry (HPCC): queue bytes, transmitted bytes, the hop's
/// timestamp (ns) and its link rate (bit/s).
#[pyclass(module = "ccp_agent", name = "IntHop", frozen, get_all)]
#[derive(Clone)]
pub struct PyIntHop {
    pub queue_bytes: u64,
    pub tx_bytes: u64,
    pub ts_ns: u64,
    pub rate_bps: u64,
}

/// In-band network telemetry echoed in the flow's ACKs: one `IntHop` per switch, in path order.
#[pyclass(module = "ccp_agent", name = "IntFeedback", frozen, get_all)]
pub struct PyIntFeedback {
    pub hops: Vec<PyIntHop>,
}

/// Fields of `Report` that are plain numbers, in the contract's order: one list serves the
/// conversion, the keyword constructor and `repr`.
macro_rules! plain_report_fields {
    ($m:ident) => {
        $m!(
            now_us: u64,
            interval_us: u64,
            mss_bytes: u32,
            acked_bytes: u64,
            acked_pkts: u64,
            sacked_bytes: u64,
            sacked_pkts: u64,
            lost_pkts: u64,
            timeouts: u32,
            ce_bytes: u64,
            ce_pkts: u64,
            ece_acks: u64,
            rtt_samples_over_threshold: u64,
            send_rate_bytes_per_s: Option<u64>,
            recv_rate_bytes_per_s: Option<u64>,
            max_delivery_rate_bytes_per_s: Option<u64>,
            extra_acked_bytes: Option<u64>,
            inflight_bytes: u64,
            unacked_bytes: u64,
            pending_bytes: u64,
            cwnd_bytes: u64,
            pacing_rate_bytes_per_s: Option<u64>,
            app_limited: bool,
            cwnd_limited: bool
        );
    };
}

macro_rules! define_report {
    ($($f:ident : $t:ty),*) => {
        /// What the datapath measured over one report interval (or at an urgent event), with the
        /// Rust contract's field names and units: times in µs, sizes in bytes, rates in bytes/s.
        /// `rtt` is `None` when the interval had no RTT sample; `urgent` is `"loss"`,
        /// `"timeout"`, `"state_change"` or `None`; `feedback` is a `QcnFeedback`, an
        /// `IntFeedback` or `None`.
        #[pyclass(module = "ccp_agent", name = "Report", frozen, get_all)]
        pub struct PyReport {
            $(pub $f: $t,)*
            // An object made once per report: an algorithm reads it more than once.
            pub rtt: Option<Py<PyRttStats>>,
            pub urgent: Option<&'static str>,
            pub feedback: Option<Py<PyAny>>,
        }

        impl PyReport {
            pub fn from_report(py: Python<'_>, r: &Report) -> PyResult<Self> {
                Ok(PyReport {
                    $($f: r.$f,)*
                    rtt: match r.rtt {
                        None => None,
                        Some(rtt) => Some(Py::new(py, PyRttStats::from(rtt))?),
                    },
                    urgent: r.urgent.map(urgent_name),
                    feedback: match &r.feedback {
                        None => None,
                        Some(f) => Some(feedback_object(py, f)?),
                    },
                })
            }

            /// Sets one plain field from a keyword argument; false if `name` is not one.
            fn set_plain(&mut self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
                match name {
                    $(stringify!($f) => self.$f = value.extract().map_err(|e| field_error(name, e))?,)*
                    _ => return Ok(false),
                }
                Ok(true)
            }

            fn plain_fields(&self) -> Vec<(&'static str, String)> {
                vec![$((stringify!($f), format!("{:?}", self.$f)),)*]
            }

            /// The contract's empty report: zeros, and a window that limits the flow.
            fn empty() -> Self {
                let r = Report::default();
                PyReport { $($f: r.$f,)* rtt: None, urgent: None, feedback: None }
            }
        }
    };
}

plain_report_fields!(define_report);

fn field_error(name: &str, e: PyErr) -> PyErr {
    PyTypeError::new_err(format!("Report field {name:?}: {e}"))
}

fn urgent_name(u: Urgent) -> &'static str {
    match u {
        Urgent::Loss => "loss",
        Urgent::Timeout => "timeout",
        Urgent::StateChange => "state_change",
    }
}

fn feedback_object(py: Python<'_>, f: &NetworkFeedback) -> PyResult<Py<PyAny>> {
    Ok(match *f {
        NetworkFeedback::Qcn { fb_quantized, q_off_bytes, q_delta_bytes } => {
            Py::new(py, PyQcnFeedback { fb_quantized, q_off_bytes, q_delta_bytes })?.into_any()
        }
        NetworkFeedback::Int(path) => {
            let hops = path
                .hops()
                .iter()
                .map(|h: &IntHop| PyIntHop {
                    queue_bytes: h.queue_bytes,
                    tx_bytes: h.tx_bytes,
                    ts_ns: h.ts_ns,
                    rate_bps: h.rate_bps,
                })
                .collect();
            Py::new(py, PyIntFeedback { hops })?.into_any()
        }
    })
}

#[pymethods]
impl PyReport {
    /// A report built by hand, for testing an algorithm: any field by keyword, the rest zero
    /// (and `cwnd_limited` true, as a datapath that cannot tell reports it).
    #[new]
    #[pyo3(signature = (**fields))]
    fn new(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut r = PyReport::empty();
        for (k, v) in fields.into_iter().flat_map(|d| d.iter()) {
            let name: String = k.extract()?;
            if r.set_plain(&name, &v)? {
                continue;
            }
            match name.as_str() {
                "rtt" => {
                    r.rtt = if v.is_none() {
                        None
                    } else {
                        Some(v.cast::<PyRttStats>().map_err(|e| field_error("rtt", e.into()))?.clone().unbind())
                    }
                }
                "urgent" => {
                    let u: Option<String> = v.extract().map_err(|e| field_error("urgent", e))?;
                    r.urgent = match u.as_deref() {
                        None => None,
                        Some("loss") => Some("loss"),
                        Some("timeout") => Some("timeout"),
                        Some("state_change") => Some("state_change"),
                        Some(other) => {
                            return Err(PyValueError::new_err(format!(
                                "Report field \"urgent\": {other:?} is not one of \"loss\", \"timeout\", \"state_change\""
                            )))
                        }
                    }
                }
                "feedback" => r.feedback = if v.is_none() { None } else { Some(v.unbind()) },
                other => return Err(PyTypeError::new_err(format!("Report has no field {other:?}"))),
            }
        }
        Ok(r)
    }

    /// The MSS as a float, never below 1.
    fn mss(&self) -> f64 {
        f64::from(self.mss_bytes.max(1))
    }

    /// Whether the interval saw a loss or a timeout.
    fn has_loss(&self) -> bool {
        self.lost_pkts > 0 || self.timeouts > 0
    }

    fn __repr__(&self) -> String {
        let mut parts: Vec<String> = self.plain_fields().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(r) = &self.rtt {
            parts.push(format!("rtt={}", r.get().__repr__()));
        }
        if let Some(u) = self.urgent {
            parts.push(format!("urgent={u:?}"));
        }
        format!("Report({})", parts.join(", "))
    }
}

/// Live state of a flow carried over from its previous algorithm (hot swap, attach, restart).
#[pyclass(module = "ccp_agent", name = "Seed", frozen, get_all)]
pub struct PySeed {
    pub cwnd_bytes: u64,
    pub pacing_rate_bytes_per_s: Option<u64>,
    pub srtt_us: Option<u64>,
    pub min_rtt_us: Option<u64>,
    pub last_report: Option<Py<PyReport>>,
}

/// What the agent knows about a flow when it hands it to the algorithm. `seed` is set when the
/// flow is not new (it ran under another algorithm); `start_cwnd_bytes` is the window to start
/// from either way.
#[pyclass(module = "ccp_agent", name = "FlowStart", frozen, get_all)]
pub struct PyFlowStart {
    pub now_us: u64,
    pub mss_bytes: u32,
    pub init_cwnd_bytes: u64,
    pub ecn: Option<bool>,
    pub seed: Option<Py<PySeed>>,
    pub start_cwnd_bytes: u64,
}

impl PyFlowStart {
    pub fn from_start(py: Python<'_>, s: &FlowStart) -> PyResult<Self> {
        let seed = match &s.seed {
            None => None,
            Some(seed) => Some(Py::new(py, seed_object(py, seed)?)?),
        };
        Ok(PyFlowStart {
            now_us: s.now_us,
            mss_bytes: s.mss_bytes,
            init_cwnd_bytes: s.init_cwnd_bytes,
            ecn: s.ecn,
            seed,
            start_cwnd_bytes: s.start_cwnd_bytes(),
        })
    }
}

fn seed_object(py: Python<'_>, s: &Seed) -> PyResult<PySeed> {
    let last_report = match &s.last_report {
        None => None,
        Some(r) => Some(Py::new(py, PyReport::from_report(py, r)?)?),
    };
    Ok(PySeed {
        cwnd_bytes: s.cwnd_bytes,
        pacing_rate_bytes_per_s: s.pacing_rate_bytes_per_s,
        srtt_us: s.srtt_us,
        min_rtt_us: s.min_rtt_us,
        last_report,
    })
}

#[pymethods]
impl PyFlowStart {
    /// A flow start built by hand, for testing an algorithm.
    #[new]
    #[pyo3(signature = (*, mss_bytes=1448, init_cwnd_bytes=14480, now_us=0, ecn=None))]
    fn new(mss_bytes: u32, init_cwnd_bytes: u64, now_us: u64, ecn: Option<bool>) -> Self {
        PyFlowStart { now_us, mss_bytes, init_cwnd_bytes, ecn, seed: None, start_cwnd_bytes: init_cwnd_bytes }
    }

    /// The MSS as a float, never below 1.
    fn mss(&self) -> f64 {
        f64::from(self.mss_bytes.max(1))
    }
}

/// What an algorithm asks of the datapath; every field left `None` stays as it is.
///
/// - `cwnd_bytes`: the congestion window, bytes.
/// - `pacing_rate_bytes_per_s`: pace at this rate; `pacing_off=True` stops pacing.
/// - `report_every_us` or `report_per_rtt` (not both): when the next reports come.
/// - `rtt_threshold_us`: the datapath counts RTT samples above it (`rtt_samples_over_threshold`).
/// - `report_acked_pkts`: also report after this many packets are acknowledged.
/// - `ack_aggregation_bw_bytes_per_s`: the datapath measures ACK aggregation against this rate
///   (`Report.extra_acked_bytes`); 0 stops it.
#[pyclass(module = "ccp_agent", name = "Action", get_all, set_all, from_py_object)]
#[derive(Clone, Default)]
pub struct PyAction {
    pub cwnd_bytes: Option<f64>,
    pub pacing_rate_bytes_per_s: Option<f64>,
    pub pacing_off: bool,
    pub report_every_us: Option<u64>,
    pub report_per_rtt: Option<f64>,
    pub rtt_threshold_us: Option<u64>,
    pub report_acked_pkts: Option<u32>,
    pub ack_aggregation_bw_bytes_per_s: Option<f64>,
}

#[pymethods]
impl PyAction {
    #[new]
    #[pyo3(signature = (cwnd_bytes=None, *, pacing_rate_bytes_per_s=None, pacing_off=false, report_every_us=None,
                        report_per_rtt=None, rtt_threshold_us=None, report_acked_pkts=None,
                        ack_aggregation_bw_bytes_per_s=None))]
    // One keyword argument per field of the Python class: the signature is the API.
    #[allow(clippy::too_many_arguments)]
    fn new(
        cwnd_bytes: Option<f64>,
        pacing_rate_bytes_per_s: Option<f64>,
        pacing_off: bool,
        report_every_us: Option<u64>,
        report_per_rtt: Option<f64>,
        rtt_threshold_us: Option<u64>,
        report_acked_pkts: Option<u32>,
        ack_aggregation_bw_bytes_per_s: Option<f64>,
    ) -> PyResult<Self> {
        let a = PyAction {
            cwnd_bytes,
            pacing_rate_bytes_per_s,
            pacing_off,
            report_every_us,
            report_per_rtt,
            rtt_threshold_us,
            report_acked_pkts,
            ack_aggregation_bw_bytes_per_s,
        };
        a.to_action().map_err(PyValueError::new_err)?;
        Ok(a)
    }

    fn __repr__(&self) -> String {
        let mut parts = Vec::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                parts.push(format!("{k}={v}"));
            }
        };
        put("cwnd_bytes", self.cwnd_bytes.map(|v| v.to_string()));
        put("pacing_rate_bytes_per_s", self.pacing_rate_bytes_per_s.map(|v| v.to_string()));
        put("pacing_off", self.pacing_off.then(|| "True".to_string()));
        put("report_every_us", self.report_every_us.map(|v| v.to_string()));
        put("report_per_rtt", self.report_per_rtt.map(|v| v.to_string()));
        put("rtt_threshold_us", self.rtt_threshold_us.map(|v| v.to_string()));
        put("report_acked_pkts", self.report_acked_pkts.map(|v| v.to_string()));
        put("ack_aggregation_bw_bytes_per_s", self.ack_aggregation_bw_bytes_per_s.map(|v| v.to_string()));
        format!("Action({})", parts.join(", "))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.extract::<PyAction>().is_ok_and(|o| o.to_action() == self.to_action())
    }
}

impl PyAction {
    /// The contract's action; an error names a contradiction (values themselves, NaN included,
    /// are the controller's to judge).
    pub fn to_action(&self) -> Result<Action, String> {
        let pacing = match (self.pacing_rate_bytes_per_s, self.pacing_off) {
            (Some(_), true) => return Err("an Action sets both pacing_rate_bytes_per_s and pacing_off".into()),
            (Some(r), false) => Some(Pacing::BytesPerSec(r)),
            (None, true) => Some(Pacing::Off),
            (None, false) => None,
        };
        let report = match (self.report_every_us, self.report_per_rtt) {
            (Some(_), Some(_)) => return Err("an Action sets both report_every_us and report_per_rtt".into()),
            (Some(us), None) => Some(ReportPolicy::EveryUs(us)),
            (None, Some(rtts)) => Some(ReportPolicy::PerRtt { rtts }),
            (None, None) => None,
        };
        Ok(Action {
            cwnd_bytes: self.cwnd_bytes,
            pacing,
            report,
            rtt_threshold_us: self.rtt_threshold_us,
            report_acked_pkts: self.report_acked_pkts,
            ack_aggregation_bw_bytes_per_s: self.ack_aggregation_bw_bytes_per_s,
        })
    }
}

/// A parameter an algorithm declares: ``Param(name, default, unit=..., min=..., max=...,
/// doc=...)``. The default's type sets the parameter's: float, int, bool, or str (then
/// ``choices`` lists the allowed values). ``min`` and ``max`` are inclusive. The agent validates
/// ``-p name=value`` and configuration tables against it, as for a native algorithm.
#[pyclass(module = "ccp_agent", name = "Param", frozen, get_all)]
pub struct PyParam {
    pub name: String,
    pub default: Py<PyAny>,
    pub unit: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub choices: Option<Vec<String>>,
    pub doc: String,
}

#[pymethods]
impl PyParam {
    #[new]
    #[pyo3(signature = (name, default, *, unit=String::new(), min=None, max=None, choices=None, doc=String::new()))]
    fn new(
        name: String,
        default: Bound<'_, PyAny>,
        unit: String,
        min: Option<f64>,
        max: Option<f64>,
        choices: Option<Vec<String>>,
        doc: String,
    ) -> PyResult<Self> {
        let p = PyParam { name, default: default.unbind(), unit, min, max, choices, doc };
        Python::attach(|py| p.declared(py)).map_err(PyValueError::new_err)?;
        Ok(p)
    }

    fn __repr__(&self) -> String {
        format!("Param({:?}, unit={:?})", self.name, self.unit)
    }
}

/// A parameter declaration, checked: its kind, with a str parameter's choices still the
/// declaration's own.
enum Declared {
    Kind(ParamKind),
    /// A str parameter whose default is `choices[default]`.
    Choice {
        default: usize,
    },
}

impl PyParam {
    /// The contract's parameter kind; the error says what is inconsistent. A str parameter's
    /// choices are leaked (they are `&'static` in the contract): the loader calls this once per
    /// class version, which bounds them.
    pub fn kind(&self, py: Python<'_>) -> Result<ParamKind, String> {
        let default = match self.declared(py)? {
            Declared::Kind(kind) => return Ok(kind),
            Declared::Choice { default } => default,
        };
        let choices = self.choices.as_deref().unwrap_or_default();
        let options: Vec<&'static str> = choices.iter().map(|c| &*Box::leak(c.clone().into_boxed_str())).collect();
        let options: &'static [&'static str] = Box::leak(options.into_boxed_slice());
        Ok(ParamKind::Choice { default: options[default], options })
    }

    /// The declaration checked, nothing leaked: what building a `Param` needs (Python code may
    /// build any number of them).
    fn declared(&self, py: Python<'_>) -> Result<Declared, String> {
        let d = self.default.bind(py);
        let name = &self.name;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("parameter name {name:?}: use letters, digits and underscores"));
        }
        let range = |lo: f64, hi: f64| -> Result<(), String> {
            if lo.is_nan() || hi.is_nan() || lo > hi {
                return Err(format!("parameter {name:?}: min {lo} is above max {hi}"));
            }
            Ok(())
        };
        // bool before int: Python's bool is an int.
        if let Ok(b) = d.cast::<pyo3::types::PyBool>() {
            if self.min.is_some() || self.max.is_some() || self.choices.is_some() {
                return Err(format!("parameter {name:?}: a bool takes no min, max or choices"));
            }
            return Ok(Declared::Kind(ParamKind::Bool { default: b.is_true() }));
        }
        if d.cast::<pyo3::types::PyInt>().is_ok() {
            let default: i64 = d.extract().map_err(|_| format!("parameter {name:?}: default does not fit 64 bits"))?;
            let min = self.min.map_or(i64::MIN, |v| v.ceil() as i64);
            let max = self.max.map_or(i64::MAX, |v| v.floor() as i64);
            range(min as f64, max as f64)?;
            if default < min || default > max {
                return Err(format!("parameter {name:?}: default {default} is outside [{min}, {max}]"));
            }
            return Ok(Declared::Kind(ParamKind::Int { default, min, max }));
        }
        if let Ok(f) = d.cast::<pyo3::types::PyFloat>() {
            let default = f.value();
            let (lo, hi) = (self.min.unwrap_or(f64::NEG_INFINITY), self.max.unwrap_or(f64::INFINITY));
            range(lo, hi)?;
            if !default.is_finite() || default < lo || default > hi {
                return Err(format!("parameter {name:?}: default {default} is outside [{lo}, {hi}]"));
            }
            let bound = |v: Option<f64>| v.map_or(ccp_contract::Bound::Unbounded, ccp_contract::Bound::Inclusive);
            return Ok(Declared::Kind(ParamKind::Float { default, min: bound(self.min), max: bound(self.max) }));
        }
        if let Ok(s) = d.extract::<String>() {
            let Some(choices) = &self.choices else {
                return Err(format!("parameter {name:?}: a str parameter needs choices=[...]"));
            };
            let Some(default) = choices.iter().position(|c| *c == s) else {
                return Err(format!("parameter {name:?}: default {s:?} is not one of its choices"));
            };
            return Ok(Declared::Choice { default });
        }
        Err(format!(
            "parameter {name:?}: default must be a float, int, bool or str, not {}",
            d.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    }

    /// The contract's declaration, with its strings made `'static` (leaked once per class
    /// version: the loader bounds how many versions there are).
    pub fn spec(&self, py: Python<'_>) -> Result<ParamSpec, String> {
        let kind = self.kind(py)?;
        let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
        Ok(ParamSpec { name: leak(&self.name), kind, unit: leak(&self.unit), doc: leak(&self.doc) })
    }
}

/// A validated parameter value as Python sees it.
pub fn param_value(py: Python<'_>, v: &ParamValue) -> PyResult<Py<PyAny>> {
    Ok(match v {
        ParamValue::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        ParamValue::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        ParamValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        ParamValue::Choice(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

/// The `ccp_agent` module.
#[pymodule]
pub fn ccp_agent(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyReport>()?;
    m.add_class::<PyRttStats>()?;
    m.add_class::<PyQcnFeedback>()?;
    m.add_class::<PyIntHop>()?;
    m.add_class::<PyIntFeedback>()?;
    m.add_class::<PyFlowStart>()?;
    m.add_class::<PySeed>()?;
    m.add_class::<PyAction>()?;
    m.add_class::<PyParam>()?;
    m.add("MIN_CWND_PKTS", ccp_contract::MIN_CWND_PKTS)?;
    let base = CString::new(include_str!("../python/ccp_agent_base.py")).expect("no NUL in the base source");
    m.py().run(&base, Some(&m.dict()), None)?;
    // Listed like the classes added above, for `from ccp_agent import *` (the wheel's package
    // re-exports the extension module that way).
    m.index()?.append("Algorithm")?;
    Ok(())
}
