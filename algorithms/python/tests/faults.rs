//! Python algorithms that misbehave are contained by the controller like a native algorithm's
//! panic: the flow keeps its last sane window, faults are counted with the Python traceback, and
//! repeated faults hand the flow to the fallback. Loading errors say what is wrong and where.
//! (A call that never returns is tests/runaway.rs; one blocked in C is tests/blocked.rs: each
//! stalls this process's one interpreter for a while, so each has a process of its own.)

mod common;

use std::time::{Duration, Instant};

use ccp_contract::{CallError, Fault, FlowStart, ParamError};
use common::*;

const HEADER: &str = "from ccp_agent import Action, Algorithm, Param\n";

fn flow() -> FlowStart {
    // These tests are about faults, not speed: a budget no loaded test machine misses.
    ccp_python::set_call_budget(Duration::from_secs(2));
    FlowStart::new(MSS, 10 * u64::from(MSS))
}

#[test]
fn raising_every_tenth_report_keeps_the_window_then_falls_back() {
    let dir = tempfile::tempdir().unwrap();
    let name = write_py(
        dir.path(),
        "flaky.py",
        "Flaky",
        &format!(
            "{HEADER}
class Flaky(Algorithm):
    def init(self, flow):
        self.n = 0
        self.cwnd = flow.start_cwnd_bytes
        return Action(self.cwnd)
    def on_report(self, report):
        self.n += 1
        if self.n % 10 == 0:
            raise ZeroDivisionError('report %d' % self.n)
        self.cwnd += report.mss_bytes
        return Action(self.cwnd)
"
        ),
    );
    let (mut c, _) = start(choose(&name), &flow());
    let mut faults = 0;
    for i in 1..=60u64 {
        let before = c.cwnd_bytes();
        let t = Instant::now();
        let out = c.on_report(&report(i * 10_000, 14_480, 20_000), i * 10_000);
        assert!(t.elapsed() < Duration::from_millis(50), "report {i} took {:?}", t.elapsed());
        if i % 10 == 0 && faults < 4 {
            faults += 1;
            match &out.fault {
                Some(Fault::Call(CallError::Raised(tb))) => {
                    assert!(tb.contains("ZeroDivisionError: report") && tb.contains("flaky.py"), "{tb}");
                    assert!(tb.contains("line 11"), "the traceback names the line: {tb}");
                }
                other => panic!("report {i}: {other:?}"),
            }
            assert!(!out.restarted, "an exception keeps the instance");
            assert_eq!(c.cwnd_bytes(), before, "a faulty report keeps the last sane window");
            if faults == 4 {
                assert_eq!(out.fell_back_to, Some("reno"), "the fourth fault within the window hands over");
            }
        } else {
            assert_eq!(out.fault, None, "report {i}");
            assert!(c.cwnd_bytes() > before || faults == 4, "report {i}: the flow keeps moving");
        }
    }
    assert_eq!(c.algorithm_name(), "reno");
    assert_eq!(c.total_faults(), 4);
}

#[test]
fn nan_wrong_types_and_contradictions_are_faults() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("return Action(float('nan'))", "invalid cwnd NaN"),
        ("return 5", "returned int, expected ccp_agent.Action or None"),
        ("return Action(-1.0)", "invalid cwnd"),
        (
            "a = Action(1e5); a.report_every_us = 1000; a.report_per_rtt = 1.0; return a",
            "both report_every_us and report_per_rtt",
        ),
        ("return self.no_such_attribute", "AttributeError"),
    ];
    for (i, (body, expect)) in cases.iter().enumerate() {
        let name = write_py(
            dir.path(),
            &format!("bad{i}.py"),
            "Bad",
            &format!("{HEADER}\nclass Bad(Algorithm):\n    def init(self, flow):\n        return Action(50000.0)\n    def on_report(self, report):\n        {body}\n"),
        );
        let (mut c, out) = start(choose(&name), &flow());
        assert_eq!(out.fault, None);
        let out = c.on_report(&report(10_000, 1448, 20_000), 10_000);
        let fault = out.fault.as_ref().unwrap_or_else(|| panic!("{body}: no fault"));
        assert!(fault.to_string().contains(expect), "{body}: {fault}");
        assert_eq!(c.cwnd_bytes(), 50_000, "{body}: the last sane window stays");
    }
}

#[test]
fn returning_none_changes_nothing_and_state_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let name = write_py(
        dir.path(),
        "quiet.py",
        "Quiet",
        "class Quiet:\n    \"\"\"Duck-typed: no base class, no params.\"\"\"\n    def init(self, flow):\n        self.seen = 0\n    def on_report(self, report):\n        self.seen += 1\n",
    );
    let (mut c, out) = start(choose(&name), &flow());
    assert_eq!(out.fault, None);
    let out = c.on_report(&report(10_000, 1448, 20_000), 10_000);
    assert_eq!((out.fault, out.command.cwnd_bytes), (None, None));
    assert_eq!(c.cwnd_bytes(), 10 * u64::from(MSS));
    assert!(c.algorithm_state().is_empty(), "a class without state() lists nothing");
    let info = ccp_algorithms::registry::resolve(&name).unwrap();
    assert_eq!(info.summary, "Duck-typed: no base class, no params.");
}

#[test]
fn a_constructor_or_init_that_raises_is_a_fault_and_the_flow_keeps_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let name = write_py(
        dir.path(),
        "ctor.py",
        "Ctor",
        &format!("{HEADER}\nclass Ctor(Algorithm):\n    def __init__(self, **p):\n        raise RuntimeError('no')\n    def on_report(self, r):\n        return None\n"),
    );
    let (mut c, out) = start(choose(&name), &flow());
    assert!(matches!(out.fault, Some(Fault::Call(CallError::Raised(ref tb))) if tb.contains("RuntimeError: no")), "{out:?}");
    assert_eq!(c.cwnd_bytes(), 10 * u64::from(MSS));
    let out = c.on_report(&report(10_000, 1448, 20_000), 10_000);
    assert!(out.fault.is_some(), "no instance, no answer");
}

#[test]
fn loading_errors_say_what_and_where() {
    ccp_python::register();
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("syntax.py", "def on_report(self r):\n", "SyntaxError"),
        ("noclass.py", "class Other:\n    pass\n", "defines no \"Missing\" (it defines: Other)"),
        ("nomethod.py", "class Missing:\n    def init(self, flow):\n        pass\n", "has no method on_report"),
        ("notclass.py", "Missing = 3\n", "is a int, not a class"),
        ("badparam.py", &format!("{HEADER}class Missing(Algorithm):\n    params = [Param('x', 'a')]\n    def on_report(self, r): pass\n"), "needs choices"),
        ("twice.py", &format!("{HEADER}class Missing(Algorithm):\n    params = [Param('x', 1.0), Param('x', 2.0)]\n    def on_report(self, r): pass\n"), "declares \"x\" twice"),
        ("raises.py", "raise ImportError('needs numpy')\n", "ImportError: needs numpy"),
    ];
    for (file, source, expect) in cases {
        let name = write_py(dir.path(), file, "Missing", source);
        let Err(err) = ccp_algorithms::registry::resolve(&name) else { panic!("{file} loaded") };
        assert!(matches!(err, ParamError::Unavailable { .. }), "{file}: {err}");
        assert!(err.to_string().contains(expect) && err.to_string().contains(file), "{file}: {err}");
    }
    let Err(err) = ccp_algorithms::registry::resolve("py:/no/such/file.py:X") else { panic!() };
    assert!(err.to_string().contains("/no/such/file.py"), "{err}");
    let Err(err) = ccp_algorithms::registry::resolve("py:file.py") else { panic!() };
    assert!(err.to_string().contains("py:path/to/file.py:ClassName"), "{err}");
}

#[test]
fn a_changed_file_is_a_new_version_for_new_flows_only() {
    let dir = tempfile::tempdir().unwrap();
    let source = |w: u32| {
        format!("{HEADER}class W(Algorithm):\n    def init(self, flow):\n        return Action({w}.0)\n    def on_report(self, r):\n        return Action({w}.0)\n")
    };
    let name = write_py(dir.path(), "w.py", "W", &source(30_000));
    let (mut old, _) = start(choose(&name), &flow());
    assert_eq!(old.cwnd_bytes(), 30_000);
    write_py(dir.path(), "w.py", "W", &source(40_000));
    let (new, _) = start(choose(&name), &flow());
    assert_eq!(new.cwnd_bytes(), 40_000, "a new flow gets the changed file");
    old.on_report(&report(10_000, 1448, 20_000), 10_000);
    assert_eq!(old.cwnd_bytes(), 30_000, "a running flow keeps the class it started with");
    let a = ccp_algorithms::registry::resolve(&name).unwrap();
    let b = ccp_algorithms::registry::resolve(&name).unwrap();
    assert!(std::ptr::eq(a, b), "an unchanged file is not loaded again");
    assert_eq!(a.name, format!("py:{}:W", dir.path().canonicalize().unwrap().join("w.py").display()));
}
