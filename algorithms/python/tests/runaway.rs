//! A Python call that never returns costs its caller one budget, once: the caller gets a
//! timeout fault and goes on, the interpreter interrupts the loop with TimeoutError, and Python
//! flows run again. Nothing the caller drives — native flows, other Python flows — stalls.

mod common;

use std::time::{Duration, Instant};

use ccp_contract::{CallError, Fault, FlowStart};
use common::*;

const BUDGET: Duration = Duration::from_millis(20);

/// Both isolations, one after the other: the host is one per process.
#[test]
fn a_loop_that_never_ends_is_abandoned_interrupted_and_nothing_stalls() {
    for isolation in [ccp_python::Isolation::Thread, ccp_python::Isolation::Inline] {
        ccp_python::set_isolation(isolation);
        runaway_loop(isolation);
    }
}

fn runaway_loop(isolation: ccp_python::Isolation) {
    let dir = tempfile::tempdir().unwrap();
    let looping = write_py(
        dir.path(),
        "looping.py",
        "Looping",
        "from ccp_agent import Action, Algorithm
class Looping(Algorithm):
    def init(self, flow):
        self.cwnd = float(flow.start_cwnd_bytes)
        return Action(self.cwnd)
    def on_report(self, report):
        if report.now_us == 50_000:
            while True:
                pass
        self.cwnd += report.mss_bytes
        return Action(self.cwnd)
",
    );
    let flow = FlowStart::new(MSS, 10 * u64::from(MSS));
    let (mut bad, _) = start(choose(&looping), &flow);
    let (mut good, _) = start(choose(&example("reno.py", "Reno")), &flow);
    let (mut native, _) = start(choose("cubic"), &flow);
    ccp_python::set_call_budget(BUDGET);

    let mut slowest = Duration::ZERO;
    let mut timed_out = 0;
    let mut unavailable = 0;
    for i in 1..=100u64 {
        let now = i * 10_000;
        let r = report(now, 14_480, 20_000);
        for (which, c) in [("looping", &mut bad), ("reno.py", &mut good), ("cubic", &mut native)] {
            let before = c.cwnd_bytes();
            let t = Instant::now();
            let out = c.on_report(&r, now);
            slowest = slowest.max(t.elapsed());
            match out.fault {
                None => {}
                Some(Fault::Call(CallError::TimedOut { budget_us })) => {
                    assert_eq!((which, now, budget_us), ("looping", 50_000, BUDGET.as_micros() as u64));
                    assert!(out.restarted, "an abandoned instance is rebuilt");
                    timed_out += 1;
                }
                Some(Fault::Call(CallError::Unavailable(_))) => unavailable += 1,
                Some(f) => panic!("{which} at {now}: {f}"),
            }
            assert!(c.cwnd_bytes() >= before.min(c.cwnd_bytes()) && c.cwnd_bytes() > 0);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(timed_out, 1, "{isolation:?}: exactly the looping report timed out");
    // Inline, the watchdog finds the call past its budget within a quarter budget, then waits
    // for the loop to yield the interpreter (Python's 5 ms switch interval).
    let slack = match isolation {
        ccp_python::Isolation::Thread => Duration::from_millis(30),
        ccp_python::Isolation::Inline => BUDGET / 4 + Duration::from_millis(40),
    };
    assert!(slowest < BUDGET + slack, "{isolation:?}: a call took {slowest:?}; the budget is {BUDGET:?}");
    // The loop was interrupted: after it, both Python flows run faultlessly on Python.
    assert!(unavailable <= 3, "{unavailable} calls found the interpreter busy for long");
    assert_eq!(bad.algorithm_name(), choose(&looping).algorithm(), "the looping flow is back on its own algorithm");
    assert_eq!(good.algorithm_name(), choose(&example("reno.py", "Reno")).algorithm());
    assert_eq!(native.total_faults(), 0);
    let out = bad.on_report(&report(2_000_000, 14_480, 20_000), 2_000_000);
    assert_eq!(out.fault, None);
    assert!(out.command.cwnd_bytes.is_some(), "the rebuilt instance steers the flow");
}
