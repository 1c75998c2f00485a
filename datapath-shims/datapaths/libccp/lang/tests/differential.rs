//! Differential tests against portus 0.9's compiler: for programs both accept, our instruction
//! list and portus' must behave identically under libccp's semantics. Both are run by
//! `ccp_lang::interp` on the same random primitive sequences, timings and control updates, and
//! every invocation must produce the same report (compared field by field, by name, since DEF
//! order and thus nothing else about register layout is shared), the same cwnd/rate, and the
//! same kind of runtime error.
//!
//! portus' `Bin` is read through its serializer (its `Instr`/`Op` types are not nameable
//! outside the crate), i.e. exactly the bytes portus would send in an INSTALL.

mod common;

use std::collections::HashMap;

use ccp_lang::interp::{Flow, InvokeOutcome};
use ccp_lang::Program;
use ccp_wire::{Event, Install, Instr, Op, Reg, RegKind, UpdateField};
use common::{Features, Rng};
use proptest::prelude::*;

struct Portus {
    install: Install,
    report_index: HashMap<String, usize>,
    controls: HashMap<String, (RegKind, u32)>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn reg_at(bytes: &[u8], at: usize) -> Reg {
    Reg::new(RegKind::from_u8(bytes[at]).expect("register class"), u32_at(bytes, at + 1))
}

/// Compiles with portus and decodes its serialized program; names are resolved through `ours`.
fn portus(src: &str, ours: &Program) -> Portus {
    let (bin, scope) = portus::lang::compile(src.as_bytes(), &[]).unwrap_or_else(|e| panic!("portus: {e}\n{src}"));
    let bytes = bin.serialize().unwrap_or_else(|e| panic!("portus serialize: {e}\n{src}"));
    let num_events = bin.events.len();
    let events = (0..num_events)
        .map(|e| Event {
            flag_idx: u32_at(&bytes, 16 * e),
            num_flag_instrs: u32_at(&bytes, 16 * e + 4),
            body_idx: u32_at(&bytes, 16 * e + 8),
            num_body_instrs: u32_at(&bytes, 16 * e + 12),
        })
        .collect();
    let instrs = bytes[16 * num_events..]
        .chunks(16)
        .map(|b| Instr { op: Op::from_u8(b[0]).expect("opcode"), res: reg_at(b, 1), left: reg_at(b, 6), right: reg_at(b, 11) })
        .collect();
    let mut report_index = HashMap::new();
    for f in ours.report_fields() {
        match scope.get(&format!("Report.{}", f.name)) {
            Some(portus::lang::Reg::Report(i, _, _)) => report_index.insert(f.name.clone(), usize::from(*i)),
            other => panic!("portus has no report field {}: {other:?}", f.name),
        };
    }
    let mut controls = HashMap::new();
    for c in ours.controls() {
        match scope.get(&c.name) {
            Some(portus::lang::Reg::Control(i, _, volatile)) => {
                let kind = if *volatile { RegKind::VolatileControl } else { RegKind::NonVolatileControl };
                controls.insert(c.name.clone(), (kind, u32::from(*i)))
            }
            other => panic!("portus has no control {}: {other:?}", c.name),
        };
    }
    Portus { install: Install { program_uid: 1, events, instrs }, report_index, controls }
}

/// An outcome with the report as (name, value) pairs in our field order.
fn normalize(out: InvokeOutcome, index: impl Fn(&str) -> usize, ours: &Program) -> String {
    let report = out.report.map(|r| ours.report_fields().iter().map(|f| (f.name.clone(), r[index(&f.name)])).collect::<Vec<_>>());
    let error = out.error.map(|e| format!("{e:?}").split_whitespace().next().unwrap_or("").to_string());
    format!("report {report:?} cwnd {:?} rate {:?} error {error:?}", out.cwnd, out.rate)
}

/// Runs both compilations side by side for `steps` invocations; returns the first divergence.
fn run_both(src: &str, seed: u64, steps: usize) -> Result<(), String> {
    let ours = ccp_lang::compile(src).map_err(|e| format!("ours: {e}"))?;
    let theirs = portus(src, &ours);
    let mut a = Flow::new(&ours.install(1)).map_err(|e| format!("ours: {e}"))?;
    let mut b = Flow::new(&theirs.install).map_err(|e| format!("portus output refused: {e}"))?;
    let mut rng = Rng::new(seed);
    let mut now = rng.below(1_000_000);
    for step in 0..steps {
        if rng.chance(15) {
            if let Some(c) = ours.controls().get(rng.below(ours.controls().len().max(1) as u64) as usize) {
                let value = match c.ty {
                    ccp_lang::ValueType::Bool => rng.below(2),
                    ccp_lang::ValueType::Num if rng.chance(20) => rng.next(),
                    ccp_lang::ValueType::Num => rng.below(50),
                };
                let (kind, index) = theirs.controls[&c.name];
                a.update_fields(&[ours.control_update(&c.name, value).unwrap()]).unwrap();
                b.update_fields(&[UpdateField { kind, index, value }]).unwrap();
            }
        }
        if rng.chance(5) {
            let cwnd = ours.control_update("Cwnd", rng.below(100_000)).unwrap();
            a.update_fields(&[cwnd]).unwrap();
            b.update_fields(&[cwnd]).unwrap();
        }
        now += match rng.below(4) {
            0 => 0,
            1 => rng.below(100),
            _ => rng.below(20_000),
        };
        let prims = common::primitives(&mut rng);
        let oa = normalize(a.invoke(&prims, now), |n| ours.report_index(n).unwrap(), &ours);
        let ob = normalize(b.invoke(&prims, now), |n| theirs.report_index[n], &ours);
        if oa != ob {
            return Err(format!("step {step} (now {now}, {prims:?}):\n ours:   {oa}\n portus: {ob}"));
        }
    }
    Ok(())
}

/// portus' own example and test programs, and folds like the ones the agent runs.
const PROGRAMS: &[&str] = &[
    // The sample fold from the design discussion.
    "(def (Report (volatile acked 0) (volatile rtt_min +infinity) (volatile lost 0) (volatile now 0)) (interval_us 10000))
     (when true
       (:= Report.acked (+ Report.acked Ack.bytes_acked))
       (:= Report.rtt_min (min Report.rtt_min Flow.rtt_sample_us))
       (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
       (:= Report.now Ack.now)
       (fallthrough))
     (when (> Ack.lost_pkts_sample 0) (report) (:= Micros 0))
     (when (> Micros interval_us) (report) (:= Micros 0))",
    // portus tests/basic.rs
    "(def (Report.acked 0) (Control.num_invoked 0) (Report.cwnd 0) (Report.rate 0))
     (when true
       (:= Report.acked (+ Report.acked Ack.bytes_acked))
       (:= Control.num_invoked (+ Control.num_invoked 1))
       (:= Report.cwnd Cwnd)
       (:= Report.rate Rate)
       (fallthrough))
     (when (== Control.num_invoked 20) (report))",
    // portus tests/volatile.rs
    "(def (volatile foo1 0) (Report (volatile foo 0) (bar 0) (volatile sum 0)) (bar1 0))
     (when true
       (:= Report.foo (+ Report.foo 1))
       (:= Report.bar (+ Report.bar 1))
       (:= foo1 (+ foo1 1))
       (:= bar1 (+ bar1 1))
       (:= Report.sum (+ foo1 bar1))
       (fallthrough))
     (when (== Report.foo 10) (report))",
    // portus tests/timing.rs
    "(def (Report.acked 0) (Control.state 0) (Report.cwnd 0) (Report.rate 0))
     (when true (:= Report.acked Ack.bytes_acked) (:= Report.cwnd Cwnd) (:= Report.rate Rate) (fallthrough))
     (when (&& (> Micros 3000000) (== Control.state 0)) (:= Control.state 1) (report))",
    // portus tests/update.rs
    "(def (Report.acked 0) (Report.cwnd 0) (Report.rate 0))
     (when true (:= Report.acked Ack.bytes_acked) (:= Report.cwnd Cwnd) (:= Report.rate Rate) (fallthrough))
     (when (== Cwnd 42) (report))
     (when (> Micros 10000000) (report))",
    // portus tests/preset.rs
    "(def (Report (testFoo 0)) (foo 0)) (when true (:= Report.testFoo foo) (report))",
    // portus lib.rs doc example, with the obsolete `(reset)` replaced.
    "(def (Report (volatile minrtt +infinity)))
     (when true (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us)) (fallthrough))
     (when (> Micros 42000) (report) (:= Micros 0))",
    // portus lang/datapath.rs unit tests
    "(def (Report.foo 0)) (when (> (+ 1 2) 3) (bind Report.foo (+ (+ 1 2) 3)) (bind Report.foo (+ (+ 4 5) 6)))",
    "(def (Report.foo 0)) (when true (bind bar 3) (bind Report.foo (+ 2 bar)))",
    "(def (Report.foo +infinity)) (when true (bind Report.foo (if (< Flow.rtt_sample_us Report.foo) Flow.rtt_sample_us)))",
    "(def (Report.foo 0)) (when true (bind Report.foo (ewma 2 Flow.rate_outgoing)))",
    "(def (Report (r 0)) (controlFoo 0)) (when true (bind controlFoo (if (== controlFoo 0) (+ controlFoo 1))) (:= Report.r controlFoo) (report))",
    "(def (Report.foo 0)) (when true (bind Report.foo 4) (fallthrough)) (when (> Micros 3000) (bind Report.foo 5) (report) (:= Micros 0))",
    // Arithmetic that can abort, ewma, if/!if, wrapped_max, bools, Cwnd/Rate writes.
    "(def (Report (volatile seq 0) (volatile srtt 0) (volatile loss false) (volatile diff 0) (volatile q 0)) (volatile gain 2) (on true))
     (when true
       (:= Report.seq (wrapped_max Report.seq Ack.bytes_acked))
       (:= Report.srtt (ewma 8 Flow.rtt_sample_us))
       (:= Report.loss (!if Report.loss (> Ack.lost_pkts_sample 0)))
       (:= Report.diff (- Flow.bytes_in_flight Ack.bytes_acked))
       (:= Report.q (/ Flow.rate_outgoing Ack.packets_acked))
       (fallthrough))
     (when (&& on (|| Flow.was_timeout (> Report.q 1000)))
       (:= Cwnd (* Cwnd gain))
       (:= Rate (max Rate Flow.rate_incoming))
       (report))
     (when (> Micros 5000) (report) (:= Micros 0))",
];

#[test]
fn portus_programs_behave_identically() {
    for (i, src) in PROGRAMS.iter().enumerate() {
        for seed in 0..20 {
            if let Err(e) = run_both(src, seed * 1000 + i as u64, 300) {
                panic!("program {i}, seed {seed}: {e}\n{src}\nours:\n{}", ccp_lang::compile(src).unwrap());
            }
        }
    }
}

/// Where our conventions coincide with portus', the instruction lists are identical.
#[test]
fn identical_where_conventions_coincide() {
    for src in [
        "(def (Report.foo 0)) (when true (bind Report.foo 4))",
        "(def (Report.foo 0)) (when true (bind Report.foo (ewma 2 Flow.rate_outgoing)))",
        "(def (Report.foo +infinity)) (when true (bind Report.foo (if (< Flow.rtt_sample_us Report.foo) Flow.rtt_sample_us)))",
        "(def (Report.foo 0)) (when true (bind Report.foo 4)) (when (> 2 3) (bind Report.foo 5))",
        "(def (Report.foo 0)) (when true (bind Report.foo 4) (fallthrough)) (when (> Micros 3000) (bind Report.foo 5) (report) (:= Micros 0))",
        "(def (Report (r 0)) (controlFoo 0)) (when true (bind controlFoo (if (== controlFoo 0) (+ controlFoo 1))))",
        // portus orders DEFs by name; with a control named after `Report.*` in byte order its
        // order is ours (reports, then controls).
        "(def (Report (r 0)) (foo +infinity)) (when (< Flow.rtt_sample_us foo) (bind foo Flow.rtt_sample_us) (report))",
    ] {
        let ours = ccp_lang::compile(src).unwrap();
        let theirs = portus(src, &ours);
        assert_eq!(ours.events(), theirs.install.events.as_slice(), "{src}");
        assert_eq!(ours.instrs(), theirs.install.instrs.as_slice(), "{src}");
    }
}

/// Where they differ (assignments computed straight into their target, tmps reused as a
/// stack, DEFs in declaration rather than alphabetical order), ours is never longer.
#[test]
fn never_longer_than_portus() {
    for src in PROGRAMS {
        let ours = ccp_lang::compile(src).unwrap();
        let theirs = portus(src, &ours);
        assert!(ours.instrs().len() <= theirs.install.instrs.len(), "{src}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Random well-typed programs in the subset portus compiles correctly.
    #[test]
    fn random_programs_behave_identically(seed in any::<u64>()) {
        let generated = common::program(&mut Rng::new(seed), Features { portus: true });
        if let Err(e) = run_both(&generated.source, seed, 60) {
            panic!("{e}\n{}\nours:\n{}", generated.source, ccp_lang::compile(&generated.source).unwrap());
        }
    }
}
