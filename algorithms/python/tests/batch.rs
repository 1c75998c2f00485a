//! Reports begun ahead (`Controller::begin_report`), as the agent begins every Python report of
//! a batch of datapath events before deciding them: the answers are the ones a call made at once
//! gives, in each flow's order; and a call that blocks in C costs the batch one budget, once —
//! the rest of the batch's Python reports fail at once, the next batch's too, until the flows
//! fall back. (Its stuck call keeps this process's one interpreter busy, hence a file of its own.)

mod common;

use std::time::{Duration, Instant};

use ccp_contract::{CallError, Controller, Fault, FlowStart, Report};
use common::*;

const BUDGET: Duration = Duration::from_millis(20);

/// Begins every flow's reports of a batch, then decides them, flow by flow, in order.
fn batch(flows: &mut [Controller], reports: &[&[Report]]) -> Vec<Vec<Option<Fault>>> {
    for (c, rs) in flows.iter_mut().zip(reports) {
        for r in rs.iter() {
            // Not begun (the interpreter is stuck): decided at once below, as the agent does.
            c.begin_report(r);
        }
    }
    flows.iter_mut().zip(reports).map(|(c, rs)| rs.iter().map(|r| c.on_report(r, r.now_us).fault).collect()).collect()
}

#[test]
fn reports_begun_ahead_get_the_answers_of_calls_made_at_once_and_a_blocked_one_costs_one_budget() {
    ccp_python::set_isolation(ccp_python::Isolation::Thread);
    // Beginning is a hand-off, not a call: a budget no loaded machine misses until the stuck part.
    ccp_python::set_call_budget(Duration::from_secs(2));
    let flow = FlowStart::new(MSS, 10 * u64::from(MSS));
    let reno = example("reno.py", "Reno");

    // Three Python Renos, two reports each per batch, against the native Reno called at once.
    let reports = synthetic_reports(600, 11);
    let mut python: Vec<Controller> = (0..3).map(|_| start(choose(&reno), &flow).0).collect();
    let mut native: Vec<Controller> = (0..3).map(|_| start(choose("reno"), &flow).0).collect();
    for pair in reports.chunks(2) {
        let faults = batch(&mut python, &[pair, pair, pair]);
        assert!(faults.iter().flatten().all(Option::is_none), "{faults:?}");
        for (p, n) in python.iter().zip(native.iter_mut()) {
            for r in pair {
                n.on_report(r, r.now_us);
            }
            assert_eq!(p.settings(), n.settings(), "at {} µs", pair[1].now_us);
        }
    }
    // A flow that ends with a report begun and not decided: the report is withdrawn, nothing waits.
    let mut gone = start(choose(&reno), &flow).0;
    assert!(gone.begin_report(&reports[0]));
    drop(gone);
    let t = Instant::now();
    assert!(batch(&mut python[..1], &[&reports[..1]])[0][0].is_none());
    assert!(t.elapsed() < Duration::from_millis(100));

    // One flow's call blocks in C in the middle of a batch of four Python flows.
    let dir = tempfile::tempdir().unwrap();
    let sleepy = sleeper(dir.path());
    let mut flows: Vec<Controller> = [&reno, &sleepy, &reno, &reno].iter().map(|n| start(choose(n), &flow).0).collect();
    ccp_python::set_call_budget(BUDGET);
    let mut slowest = Duration::ZERO;
    for i in 1..=6u64 {
        let one = [report(i * 10_000, 14_480, 20_000)];
        let t = Instant::now();
        let faults = batch(&mut flows, &[&one, &one, &one, &one]);
        let took = t.elapsed();
        slowest = slowest.max(took);
        match i {
            1 | 2 => assert!(faults.iter().flatten().all(Option::is_none), "{faults:?}"),
            3 => {
                // The flow before it was answered; it timed out; the two behind it were withdrawn.
                assert_eq!(faults[0][0], None);
                assert_eq!(faults[1][0], Some(Fault::Call(CallError::TimedOut { budget_us: BUDGET.as_micros() as u64 })));
                for f in &faults[2..] {
                    assert!(matches!(f[0], Some(Fault::Call(CallError::Unavailable(_)))), "{faults:?}");
                }
                assert!(took >= BUDGET, "the batch waited {took:?} for its stuck call");
            }
            _ => {
                for f in &faults {
                    assert!(matches!(f[0], Some(Fault::Call(CallError::Unavailable(_)))), "at {i}: {faults:?}");
                }
                assert!(took < Duration::from_millis(5), "a batch after the stuck one waited {took:?}");
            }
        }
    }
    assert!(slowest < BUDGET + Duration::from_millis(30), "slowest batch {slowest:?}");
    // Four faults within the fault window hand a flow to the fallback; the first flow, answered
    // in the stuck batch, has had three.
    assert_eq!(flows[0].algorithm_name(), choose(&reno).algorithm());
    let out = flows[0].on_report(&report(70_000, 14_480, 20_000), 70_000);
    assert!(matches!(out.fault, Some(Fault::Call(CallError::Unavailable(_)))), "{out:?}");
    for c in &mut flows {
        assert_eq!(c.algorithm_name(), "reno");
        let out = c.on_report(&report(200_000, 14_480, 20_000), 200_000);
        assert_eq!(out.fault, None, "the fallback steers it");
    }
}
