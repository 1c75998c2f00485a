//! Python blocked inside C (`time.sleep`) cannot be interrupted. With `Isolation::Thread` its
//! caller still gets a timeout after one budget, every later Python call fails at once instead of queueing behind
//! it, and the flows go to the fallback algorithm after repeated faults: the caller never stalls.

mod common;

use std::time::{Duration, Instant};

use ccp_contract::{CallError, Fault, FlowStart};
use common::*;

const BUDGET: Duration = Duration::from_millis(20);

#[test]
fn a_call_blocked_in_c_never_stalls_the_caller_and_flows_fall_back() {
    ccp_python::set_isolation(ccp_python::Isolation::Thread);
    let dir = tempfile::tempdir().unwrap();
    let sleepy = sleeper(dir.path());
    let flow = FlowStart::new(MSS, 10 * u64::from(MSS));
    let (mut a, _) = start(choose(&sleepy), &flow);
    let (mut b, _) = start(choose(&example("reno.py", "Reno")), &flow);
    ccp_python::set_call_budget(BUDGET);
    let mut slowest = Duration::ZERO;
    for i in 1..=10u64 {
        let now = i * 10_000;
        for c in [&mut a, &mut b] {
            let t = Instant::now();
            let out = c.on_report(&report(now, 14_480, 20_000), now);
            let took = t.elapsed();
            slowest = slowest.max(took);
            if now == 30_000 && c.choice().algorithm().ends_with("Sleepy") {
                assert!(matches!(out.fault, Some(Fault::Call(CallError::TimedOut { .. }))), "{out:?}");
            } else if now > 30_000 && i <= 6 {
                assert!(matches!(out.fault, Some(Fault::Call(CallError::Unavailable(_)))), "at {now}: {out:?}");
                assert!(took < Duration::from_millis(5), "a call behind the blocked one waited {took:?}");
            }
        }
    }
    assert!(slowest < BUDGET + Duration::from_millis(30), "slowest call {slowest:?}");
    // Four faults within the fault window: both flows are on the fallback, and it steers them.
    for c in [&mut a, &mut b] {
        assert_eq!(c.algorithm_name(), "reno");
        let before = c.cwnd_bytes();
        let out = c.on_report(&report(200_000, 14_480, 20_000), 200_000);
        assert_eq!(out.fault, None);
        assert!(c.cwnd_bytes() > before, "the fallback grows the window");
    }
    // A new Python flow starts anyway, on the datapath's window, without waiting.
    let t = Instant::now();
    let (c, out) = start(choose(&example("reno.py", "Reno")), &flow);
    assert!(t.elapsed() < Duration::from_millis(50));
    assert!(matches!(out.fault, Some(Fault::Call(CallError::Unavailable(_)))), "{out:?}");
    assert_eq!(c.cwnd_bytes(), 10 * u64::from(MSS));
}
