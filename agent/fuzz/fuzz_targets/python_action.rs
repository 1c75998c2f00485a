//! What a Python algorithm returns, from the Python object to the contract's `Action`.
//!
//! One Python algorithm (`python_action.py`'s `Returns`, loaded through the registry as the
//! agent loads one) returns from `init`, `on_report` and `state` whatever this target built from
//! the input, and the calls go through the host as the controller makes them
//! (`Algorithm::try_init`, `try_on_report`, `state`), on the interpreter's thread (the agent's
//! default isolation; the report begun ahead, as the agent begins every Python report of a
//! batch, or not) or inline (as the simulator runs Python). The values: None, bools, ints of any size
//! (at and past every boundary of the fields, up to 2^65535), floats from any bit pattern (NaN,
//! infinities, subnormals), strings (lone surrogates too), bytes, lists, tuples, dicts, nested;
//! `Action`s built with arbitrary arguments or changed field by field afterwards (which skips the
//! constructor's check), the other API classes (`Report`, `FlowStart`, `RttStats`, `Param`) built
//! with odd fields, objects that are numbers only through `__float__` or `__index__` (or whose
//! conversions raise), int and float subclasses, an `Action` look-alike, a class, a module, an
//! exception, a function.
//!
//! Checked: never a panic, in Rust or raised into Python; building an `Action` or setting one of
//! its fields succeeds exactly when the value converts as Python converts it (`float()` for a
//! float field but never from a string, `operator.index()` within the field's range for an
//! integer one, only a bool for `pacing_off`, `None` for any optional field), reads back as that
//! conversion gives it, and otherwise raises a TypeError, ValueError, OverflowError (or, for a
//! name that is no field or a deletion, an AttributeError) leaving the field as it was; the
//! other API classes build or raise one of these. The host's answer is `Action::default()` for
//! None, the `Action`'s fields (NaN as NaN) for an `Action`, and `CallError::WrongType` for
//! anything else or for an `Action` that sets both of a contradictory pair; `state()` gives the
//! returned dict's items in order (as far as their names are interned) when every item is a str
//! and a number, nothing otherwise.
//!
//! Input: an option byte (bit 0: inline, else on the interpreter's thread; bit 1: the report
//! begun ahead), then the values of `init`, `on_report` and `state`, one after the other, each a
//! tree: a kind byte and what that kind reads (see `Builder::value`); a finished input reads as
//! zeros, which is None.
#![no_main]

use std::cell::RefCell;
use std::time::Duration;

use ccp_contract::{Action, Algorithm, CallError, FlowStart, Pacing, Report, ReportPolicy, StateVar};
use ccp_python::Isolation;
use libfuzzer_sys::fuzz_target;
use pyo3::exceptions::{PyAttributeError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

/// Nesting and size of one input's values: enough for every shape, small enough to stay fast.
const MAX_DEPTH: u32 = 4;
const MAX_NODES: u32 = 64;
const MAX_STR_BYTES: usize = 32;

/// How a field of `Action` converts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Float,
    Bool,
    U64,
    U32,
}

const FIELDS: [(&str, Kind); 8] = [
    ("cwnd_bytes", Kind::Float),
    ("pacing_rate_bytes_per_s", Kind::Float),
    ("pacing_off", Kind::Bool),
    ("report_every_us", Kind::U64),
    ("report_per_rtt", Kind::Float),
    ("rtt_threshold_us", Kind::U64),
    ("report_acked_pkts", Kind::U32),
    ("ack_aggregation_bw_bytes_per_s", Kind::Float),
];

/// A field's value as the model holds it.
#[derive(Clone, Copy, Debug)]
enum Val {
    Float(Option<f64>),
    Bool(bool),
    Int(Option<u64>),
}

fn same_f64(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        _ => false,
    }
}

fn same_val(a: Val, b: Val) -> bool {
    match (a, b) {
        (Val::Float(x), Val::Float(y)) => same_f64(x, y),
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Int(x), Val::Int(y)) => x == y,
        _ => false,
    }
}

fn same_action(a: &Action, b: &Action) -> bool {
    let pacing = match (a.pacing, b.pacing) {
        (None, None) | (Some(Pacing::Off), Some(Pacing::Off)) => true,
        (Some(Pacing::BytesPerSec(x)), Some(Pacing::BytesPerSec(y))) => same_f64(Some(x), Some(y)),
        _ => false,
    };
    let report = match (a.report, b.report) {
        (None, None) => true,
        (Some(ReportPolicy::EveryUs(x)), Some(ReportPolicy::EveryUs(y))) => x == y,
        (Some(ReportPolicy::PerRtt { rtts: x }), Some(ReportPolicy::PerRtt { rtts: y })) => same_f64(Some(x), Some(y)),
        _ => false,
    };
    same_f64(a.cwnd_bytes, b.cwnd_bytes)
        && pacing
        && report
        && a.rtt_threshold_us == b.rtt_threshold_us
        && a.report_acked_pkts == b.report_acked_pkts
        && same_f64(a.ack_aggregation_bw_bytes_per_s, b.ack_aggregation_bw_bytes_per_s)
}

/// The fields of one Python `Action`, as the model expects them.
#[derive(Clone, Copy, Debug)]
struct Fields([Val; 8]);

impl Default for Fields {
    fn default() -> Self {
        Fields(FIELDS.map(|(_, kind)| match kind {
            Kind::Float => Val::Float(None),
            Kind::Bool => Val::Bool(false),
            Kind::U64 | Kind::U32 => Val::Int(None),
        }))
    }
}

impl Fields {
    /// The contract's action, or None where the fields contradict each other (the host's
    /// WrongType).
    fn action(&self) -> Option<Action> {
        let [Val::Float(cwnd), Val::Float(rate), Val::Bool(off), Val::Int(every), Val::Float(per_rtt), Val::Int(threshold), Val::Int(acked), Val::Float(aggregation)] =
            self.0
        else {
            unreachable!("the model keeps each field's kind")
        };
        let pacing = match (rate, off) {
            (Some(_), true) => return None,
            (Some(r), false) => Some(Pacing::BytesPerSec(r)),
            (None, true) => Some(Pacing::Off),
            (None, false) => None,
        };
        let report = match (every, per_rtt) {
            (Some(_), Some(_)) => return None,
            (Some(us), None) => Some(ReportPolicy::EveryUs(us)),
            (None, Some(rtts)) => Some(ReportPolicy::PerRtt { rtts }),
            (None, None) => None,
        };
        Some(Action {
            cwnd_bytes: cwnd,
            pacing,
            report,
            rtt_threshold_us: threshold,
            report_acked_pkts: acked.map(|n| u32::try_from(n).expect("the model holds a u32 here")),
            ack_aggregation_bw_bytes_per_s: aggregation,
        })
    }
}

/// What the host must make of a returned value.
#[derive(Debug)]
enum Want {
    NoChange,
    Fields(Fields),
    WrongType,
}

/// What `state()` must give: the dict's items when all convert, else nothing.
#[derive(Debug)]
enum WantState {
    Empty,
    Items(Vec<(String, f64)>),
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let (taken, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        taken.to_vec()
    }

    fn u64(&mut self) -> u64 {
        let mut b = [0; 8];
        let taken = self.bytes(8);
        b[..taken.len()].copy_from_slice(&taken);
        u64::from_le_bytes(b)
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
}

/// Integers at and past the boundaries of the fields and of f64.
const BOUNDARY_INTS: [i128; 18] = [
    0,
    1,
    -1,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 53) + 1,
    (1 << 63) - 1,
    1 << 63,
    (1 << 64) - 1,
    1 << 64,
    (1 << 64) + 1,
    -(1 << 63),
    -(1 << 63) - 1,
    -(1 << 64),
    i128::MAX,
    i128::MIN,
];

const SPECIAL_FLOATS: [f64; 12] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    0.0,
    f64::MAX,
    f64::MIN_POSITIVE,
    5e-324,
    18446744073709551616.0,
    4294967296.0,
    0.5,
    -1.0,
];

const REPORT_KWARGS: [&str; 11] = [
    "now_us",
    "mss_bytes",
    "timeouts",
    "send_rate_bytes_per_s",
    "app_limited",
    "cwnd_limited",
    "rtt",
    "urgent",
    "feedback",
    "no_such_field",
    "lost_pkts",
];
const FLOW_START_KWARGS: [&str; 5] = ["mss_bytes", "init_cwnd_bytes", "now_us", "ecn", "seed"];
const RTT_KWARGS: [&str; 4] = ["min_us", "srtt_us", "samples", "p99_us"];
const DICT_KEYS: [&str; 4] = ["cwnd", "srtt_us", "", "x"];

/// The Python objects the target builds values from; one per process.
struct Harness {
    algorithm: Box<dyn Algorithm>,
    /// `python_action.py`, as the module `ccp_fuzz`.
    helpers: Py<PyModule>,
    api: Py<PyModule>,
    float: Py<PyAny>,
    index: Py<PyAny>,
}

/// pyo3 keeps each class's member table for the life of the process (one allocation per class,
/// made when the `ccp_agent` module starts): not a leak of the code under test.
#[no_mangle]
pub extern "C" fn __lsan_default_suppressions() -> *const std::ffi::c_char {
    c"leak:pyo3::pyclass::create_type_object::\n".as_ptr()
}

/// Leaks are looked for after each input that allocated more than it freed (libFuzzer's check),
/// not at exit: by then the interpreter's own objects, which Python's allocator keeps out of the
/// leak checker's sight, would all read as leaks. (With PYTHONMALLOC=malloc the checker sees them,
/// but then every input looks like a leak and is checked: 40 inputs/s.)
#[no_mangle]
pub extern "C" fn __lsan_default_options() -> *const std::ffi::c_char {
    c"leak_check_at_exit=0".as_ptr()
}

impl Harness {
    fn start() -> Harness {
        // A loaded machine must not turn a slow return into a timeout: the budget is not under test.
        ccp_python::set_call_budget(Duration::from_secs(600));
        ccp_python::register();
        let name = concat!("py:", env!("CARGO_MANIFEST_DIR"), "/fuzz_targets/python_action.py:Returns");
        let choice = ccp_algorithms::registry::choose(name, toml::Table::new(), "fuzz").unwrap_or_else(|e| panic!("{name}: {e}"));
        let algorithm = choice.factory.create();
        Python::attach(|py| -> PyResult<Harness> {
            Ok(Harness {
                algorithm,
                helpers: py.import("ccp_fuzz")?.unbind(),
                api: py.import("ccp_agent")?.unbind(),
                float: py.import("builtins")?.getattr("float")?.unbind(),
                index: py.import("operator")?.getattr("index")?.unbind(),
            })
        })
        .expect("the helpers import")
    }
}

/// Builds one input's values, checking every construction on the way.
struct Builder<'py> {
    py: Python<'py>,
    helpers: Bound<'py, PyModule>,
    api: Bound<'py, PyModule>,
    float: Bound<'py, PyAny>,
    index: Bound<'py, PyAny>,
    nodes: u32,
}

struct Built<'py> {
    obj: Bound<'py, PyAny>,
    want: Want,
}

impl<'py> Builder<'py> {
    fn helper(&self, name: &str) -> Bound<'py, PyAny> {
        self.helpers.getattr(name).expect("python_action.py defines it")
    }

    fn api_class(&self, name: &str) -> Bound<'py, PyAny> {
        self.api.getattr(name).expect("ccp_agent defines it")
    }

    fn any<T: IntoPyObject<'py>>(&self, v: T) -> Bound<'py, PyAny> {
        v.into_bound_py_any(self.py).unwrap_or_else(|_| panic!("a plain value converts"))
    }

    /// What a field of `kind` must hold after being given `v`; None: it must refuse `v`.
    fn converts(&self, kind: Kind, v: &Bound<'py, PyAny>) -> Option<Val> {
        if kind == Kind::Bool {
            return v.cast::<PyBool>().ok().map(|b| Val::Bool(b.is_true()));
        }
        if v.is_none() {
            return Some(if kind == Kind::Float { Val::Float(None) } else { Val::Int(None) });
        }
        if kind == Kind::Float {
            // float() parses text; a number field must not.
            if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() || v.is_instance_of::<PyByteArray>() {
                return None;
            }
            let f = self.float.call1((v,)).ok()?;
            return Some(Val::Float(Some(f.cast::<PyFloat>().expect("float() gives a float").value())));
        }
        let n = self.index.call1((v,)).ok()?;
        let max = if kind == Kind::U32 { u64::from(u32::MAX) } else { u64::MAX };
        if n.lt(0).ok()? || n.gt(max).ok()? {
            return None;
        }
        Some(Val::Int(Some(n.extract::<u64>().expect("an int in range converts"))))
    }

    fn describe(&self, v: &Bound<'py, PyAny>) -> String {
        let text = v.repr().map(|r| r.to_string()).unwrap_or_else(|e| format!("<repr raised {e}>"));
        let cut: String = text.chars().take(120).collect();
        let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        format!("{cut} ({ty})")
    }

    /// A refusal must be one of the errors a Python programmer expects from a bad argument.
    fn clean_error(&self, e: &PyErr, what: &str, attribute: bool) {
        let py = self.py;
        let ok = e.is_instance_of::<PyTypeError>(py)
            || e.is_instance_of::<PyValueError>(py)
            || e.is_instance_of::<PyOverflowError>(py)
            || (attribute && e.is_instance_of::<PyAttributeError>(py));
        assert!(ok, "{what} raised {e}, not a TypeError, ValueError or OverflowError");
    }

    fn check_fields(&self, action: &Bound<'py, PyAny>, fields: &Fields, what: &str) {
        for (i, (name, kind)) in FIELDS.iter().enumerate() {
            let r = action.getattr(*name).expect("an Action's field reads");
            let got = match kind {
                Kind::Bool => Val::Bool(r.cast::<PyBool>().expect("pacing_off reads as a bool").is_true()),
                Kind::Float if r.is_none() => Val::Float(None),
                Kind::Float => Val::Float(Some(r.cast_exact::<PyFloat>().expect("reads as a float").value())),
                _ if r.is_none() => Val::Int(None),
                _ => Val::Int(Some(r.extract::<u64>().expect("reads as an int"))),
            };
            assert!(same_val(got, fields.0[i]), "{what}: {name} reads {got:?}, expected {:?}", fields.0[i]);
        }
        let repr = action.repr().expect("an Action's repr").to_string();
        assert!(repr.starts_with("Action(") && repr.ends_with(')'), "{repr}");
    }

    /// One value and what the host must make of it, read from the input.
    fn value(&mut self, input: &mut Input, depth: u32) -> Built<'py> {
        const LEAVES: u8 = 11;
        const KINDS: u8 = 19;
        self.nodes += 1;
        let leaf_only = depth >= MAX_DEPTH || self.nodes >= MAX_NODES;
        let py = self.py;
        let kind = input.byte() % if leaf_only { LEAVES } else { KINDS };
        let obj = match kind {
            0 => return Built { obj: py.None().into_bound(py), want: Want::NoChange },
            1 => self.any(input.byte() & 1 != 0),
            2 => self.any(input.byte() as i8),
            3 => self.any(input.u64() as i64),
            4 => self.any(BOUNDARY_INTS[usize::from(input.byte()) % BOUNDARY_INTS.len()]),
            5 => {
                let (negative, exponent, offset) = (input.byte() & 1 != 0, input.u16(), input.byte() as i8);
                self.helper("big").call1((negative, exponent, offset)).expect("2**e + k")
            }
            6 => {
                let n = usize::from(input.byte() % 65);
                let bytes = PyBytes::new(py, &input.bytes(n));
                self.helper("int_from").call1((bytes,)).expect("int.from_bytes")
            }
            7 => self.any(f64::from_bits(input.u64())),
            8 => self.any(SPECIAL_FLOATS[usize::from(input.byte()) % SPECIAL_FLOATS.len()]),
            9 => self.string(input),
            10 => {
                let n = usize::from(input.byte()) % (MAX_STR_BYTES + 1);
                PyBytes::new(py, &input.bytes(n)).into_any()
            }
            11 | 12 => {
                let items: Vec<_> = (0..input.byte() % 5).map(|_| self.value(input, depth + 1).obj).collect();
                if kind == 11 {
                    PyList::new(py, items).expect("a list").into_any()
                } else {
                    PyTuple::new(py, items).expect("a tuple").into_any()
                }
            }
            13 => self.dict(input, depth),
            14 => return self.action_built(input, depth),
            15 => return self.action_changed(input, depth),
            16 => self.api_object(input, depth),
            17 => self.number_like(input, depth),
            _ => return self.other(input),
        };
        Built { obj, want: Want::WrongType }
    }

    fn string(&mut self, input: &mut Input) -> Bound<'py, PyAny> {
        let n = input.byte();
        if n & 0x80 != 0 {
            // Text that is no UTF-8: a lone surrogate.
            return self.helper("surrogate").call1((n & 0x7F,)).expect("chr");
        }
        let bytes = input.bytes(usize::from(n) % (MAX_STR_BYTES + 1));
        PyString::new(self.py, &String::from_utf8_lossy(&bytes)).into_any()
    }

    fn dict(&mut self, input: &mut Input, depth: u32) -> Bound<'py, PyAny> {
        let d = PyDict::new(self.py);
        for _ in 0..input.byte() % 5 {
            let key = match input.byte() % 4 {
                0 => self.any(DICT_KEYS[usize::from(input.byte()) % DICT_KEYS.len()]),
                1 => self.string(input),
                2 => self.value(input, depth + 1).obj,
                _ => self.any(input.byte()),
            };
            let key = if key.hash().is_ok() { key } else { self.any("unhashable") };
            let value = self.value(input, depth + 1).obj;
            d.set_item(key, value).expect("a hashable key");
        }
        d.into_any()
    }

    /// `Action(*args, **kwargs)` with fields, values and mistakes from the input.
    fn action_built(&mut self, input: &mut Input, depth: u32) -> Built<'py> {
        let py = self.py;
        let (given, mistakes) = (input.byte(), input.byte());
        let mut fields = Fields::default();
        let mut refused = false;
        let mut args = Vec::new();
        let kwargs = PyDict::new(py);
        if given & 0x80 != 0 {
            let v = self.value(input, depth + 1).obj;
            match self.converts(Kind::Float, &v) {
                Some(c) => fields.0[0] = c,
                None => refused = true,
            }
            args.push(v);
        }
        for (i, (name, kind)) in FIELDS.iter().enumerate() {
            if given & (1 << i) == 0 {
                continue;
            }
            let v = self.value(input, depth + 1).obj;
            match self.converts(*kind, &v) {
                Some(c) => fields.0[i] = c,
                None => refused = true,
            }
            // The window both by position and by name.
            refused |= i == 0 && given & 0x80 != 0;
            kwargs.set_item(*name, v).expect("a str key");
        }
        if mistakes & 1 != 0 {
            kwargs.set_item("cwnd", 1.0).expect("a str key");
            refused = true;
        }
        if mistakes & 2 != 0 {
            // A second positional argument: there is only the window.
            args.push(self.value(input, depth + 1).obj);
            if args.len() == 1 {
                args.push(py.None().into_bound(py));
            }
            refused = true;
        }
        let contradictory = fields.action().is_none();
        let described =
            format!("Action(*{args:?}, **{kwargs:?})", args = args.iter().map(|a| self.describe(a)).collect::<Vec<_>>());
        let result = self.api_class("Action").call(PyTuple::new(py, args).expect("a tuple"), Some(&kwargs));
        match result {
            Ok(action) => {
                assert!(!refused && !contradictory, "{described} was accepted: {}", self.describe(&action));
                self.check_fields(&action, &fields, &described);
                Built { obj: action, want: Want::Fields(fields) }
            }
            Err(e) => {
                assert!(refused || contradictory, "{described} raised {e}; expected {fields:?}");
                self.clean_error(&e, &described, false);
                Built { obj: e.value(py).clone().into_any(), want: Want::WrongType }
            }
        }
    }

    /// `Action()`, then fields set, misnamed and deleted one by one (setting a field skips the
    /// constructor's check, so the result may contradict itself).
    fn action_changed(&mut self, input: &mut Input, depth: u32) -> Built<'py> {
        let action = self.api_class("Action").call0().expect("Action()");
        let mut fields = Fields::default();
        for _ in 0..input.byte() % 6 {
            match usize::from(input.byte() % 9) {
                i @ 0..=6 => {
                    let (name, kind) = FIELDS[i];
                    let v = self.value(input, depth + 1).obj;
                    let what = format!("Action.{name} = {}", self.describe(&v));
                    match (self.converts(kind, &v), action.setattr(name, &v)) {
                        (Some(c), Ok(())) => fields.0[i] = c,
                        (None, Err(e)) => self.clean_error(&e, &what, false),
                        (Some(c), Err(e)) => panic!("{what} raised {e}; expected {c:?}"),
                        (None, Ok(())) => panic!("{what} was accepted, yet it does not convert"),
                    }
                }
                7 => {
                    let v = self.value(input, depth + 1).obj;
                    let e = action.setattr("cwnd", &v).expect_err("Action has no field cwnd");
                    self.clean_error(&e, "Action.cwnd = ...", true);
                }
                _ => {
                    let name = FIELDS[usize::from(input.byte()) % FIELDS.len()].0;
                    let e = action.delattr(name).expect_err("a field cannot be deleted");
                    self.clean_error(&e, &format!("del Action.{name}"), true);
                }
            }
        }
        self.check_fields(&action, &fields, "a changed Action");
        Built { obj: action, want: Want::Fields(fields) }
    }

    /// `Report`, `FlowStart`, `RttStats` or `Param` with odd arguments: built, or refused cleanly.
    fn api_object(&mut self, input: &mut Input, depth: u32) -> Bound<'py, PyAny> {
        let py = self.py;
        let kwargs = PyDict::new(py);
        let mut args = Vec::new();
        let (class, method) = match input.byte() % 4 {
            0 => {
                let name = REPORT_KWARGS[usize::from(input.byte()) % REPORT_KWARGS.len()];
                kwargs.set_item(name, self.value(input, depth + 1).obj).expect("a str key");
                ("Report", Some("has_loss"))
            }
            1 => {
                let name = FLOW_START_KWARGS[usize::from(input.byte()) % FLOW_START_KWARGS.len()];
                kwargs.set_item(name, self.value(input, depth + 1).obj).expect("a str key");
                ("FlowStart", Some("mss"))
            }
            2 => {
                let name = RTT_KWARGS[usize::from(input.byte()) % RTT_KWARGS.len()];
                kwargs.set_item(name, self.value(input, depth + 1).obj).expect("a str key");
                ("RttStats", None)
            }
            _ => {
                let which = input.byte();
                let name = if which & 1 != 0 { self.value(input, depth + 1).obj } else { self.any("p") };
                args.push(name);
                args.push(self.value(input, depth + 1).obj);
                for (bit, key) in [(2, "min"), (4, "max"), (8, "choices")] {
                    if which & bit != 0 {
                        kwargs.set_item(key, self.value(input, depth + 1).obj).expect("a str key");
                    }
                }
                ("Param", None)
            }
        };
        let what = format!("{class}({:?}, {kwargs:?})", args.iter().map(|a| self.describe(a)).collect::<Vec<_>>());
        match self.api_class(class).call(PyTuple::new(py, args).expect("a tuple"), Some(&kwargs)) {
            Ok(obj) => {
                obj.repr().unwrap_or_else(|e| panic!("repr of {what}: {e}"));
                if let Some(m) = method {
                    obj.call_method0(m).unwrap_or_else(|e| panic!("{what}.{m}(): {e}"));
                }
                obj
            }
            Err(e) => {
                self.clean_error(&e, &what, false);
                e.value(py).clone().into_any()
            }
        }
    }

    /// Numbers only through `__float__` or `__index__`, conversions that raise, and subclasses.
    fn number_like(&mut self, input: &mut Input, depth: u32) -> Bound<'py, PyAny> {
        let (class, arg) = match input.byte() % 5 {
            0 => ("FloatLike", Some(self.value(input, depth + 1).obj)),
            1 => ("IndexLike", Some(self.value(input, depth + 1).obj)),
            2 => ("Raising", None),
            3 => ("MyInt", Some(self.value(input, depth + 1).obj)),
            _ => ("MyFloat", Some(self.value(input, depth + 1).obj)),
        };
        let made = match arg {
            Some(a) => self.helper(class).call1((a,)),
            None => self.helper(class).call0(),
        };
        // int() and float() of a text or a NaN may refuse: then the refusal is the value.
        made.unwrap_or_else(|e| e.value(self.py).clone().into_any())
    }

    fn other(&mut self, input: &mut Input) -> Built<'py> {
        let py = self.py;
        let obj = match input.byte() % 8 {
            0 => self.helper("ActionLike").call0().expect("ActionLike()"),
            1 => self.api_class("Action"),
            2 => self.helpers.clone().into_any(),
            3 => PyValueError::new_err("fuzz").value(py).clone().into_any(),
            4 => self.helper("function"),
            5 => py.Ellipsis().into_bound(py),
            6 => py.NotImplemented().into_bound(py),
            _ => {
                let action = self.api_class("Action").call0().expect("Action()");
                return Built { obj: action, want: Want::Fields(Fields::default()) };
            }
        };
        Built { obj, want: Want::WrongType }
    }

    /// What `state()` must give for `v`.
    fn state_wanted(&self, v: &Bound<'py, PyAny>) -> WantState {
        let Ok(dict) = v.cast::<PyDict>() else { return WantState::Empty };
        let mut items = Vec::new();
        for (k, v) in dict.iter() {
            let name = k.extract::<String>();
            let value = if v.is_none() { None } else { self.converts(Kind::Float, &v) };
            match (name, value) {
                (Ok(name), Some(Val::Float(Some(value)))) => items.push((name, value)),
                _ => return WantState::Empty,
            }
        }
        WantState::Items(items)
    }
}

fn check(method: &str, got: Result<Action, CallError>, want: &Want) {
    match (want, got) {
        (Want::NoChange, Ok(a)) if same_action(&a, &Action::default()) => {}
        (Want::Fields(f), got) => match (f.action(), got) {
            (Some(want), Ok(a)) if same_action(&a, &want) => {}
            (None, Err(CallError::WrongType(m))) if m.contains("sets both") => {}
            (w, g) => panic!("{method}: expected {w:?} from {f:?}, got {g:?}"),
        },
        (Want::WrongType, Err(CallError::WrongType(m)))
            if m.contains(method) && m.contains("expected ccp_agent.Action or None") => {}
        (w, g) => panic!("{method}: expected {w:?}, got {g:?}"),
    }
}

fn check_state(got: &[StateVar], want: &WantState) {
    let items = match want {
        WantState::Empty => {
            assert!(got.is_empty(), "state(): expected nothing, got {got:?}");
            return;
        }
        WantState::Items(items) => items,
    };
    // Names past the interning cap are left out; the rest come in order.
    let mut rest = items.iter();
    for var in got {
        let found = rest.any(|(n, v)| n == var.name && same_f64(Some(*v), Some(var.value)));
        assert!(found, "state(): {var:?} is not among {items:?} in order");
    }
}

thread_local! {
    static HARNESS: RefCell<Option<Harness>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    HARNESS.with(|cell| {
        let mut slot = cell.borrow_mut();
        let h = slot.get_or_insert_with(Harness::start);
        let mut input = Input(data);
        let options = input.byte();
        let inline = options & 1 != 0;
        ccp_python::set_isolation(if inline { Isolation::Inline } else { Isolation::Thread });
        let (init, report, state) = Python::attach(|py| {
            let mut b = Builder {
                py,
                helpers: h.helpers.bind(py).clone(),
                api: h.api.bind(py).clone(),
                float: h.float.bind(py).clone(),
                index: h.index.bind(py).clone(),
                nodes: 0,
            };
            let init = b.value(&mut input, 0);
            let report = b.value(&mut input, 0);
            let state = b.value(&mut input, 0);
            let state_wanted = b.state_wanted(&state.obj);
            for (slot, v) in [("init_value", &init.obj), ("report_value", &report.obj), ("state_value", &state.obj)] {
                b.helpers.setattr(slot, v).expect("a module attribute");
            }
            (init.want, report.want, state_wanted)
        });
        let start = FlowStart::new(1448, 14_480);
        check("init", h.algorithm.try_init(&start), &init);
        let r = Report { mss_bytes: 1448, ..Report::default() };
        if options & 2 != 0 {
            // Only the interpreter's thread takes a report ahead.
            assert_eq!(h.algorithm.begin_on_report(&r), !inline);
        }
        check("on_report", h.algorithm.try_on_report(&r), &report);
        check_state(&h.algorithm.state(), &state);
        Python::attach(|py| {
            let helpers = h.helpers.bind(py);
            for slot in ["init_value", "report_value", "state_value"] {
                helpers.setattr(slot, py.None()).expect("a module attribute");
            }
        });
    });
});
