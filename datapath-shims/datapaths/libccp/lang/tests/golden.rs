//! Golden tests: exact instruction sequences for portus' own compiler tests (as expected by
//! portus 0.9's `lang/datapath.rs`, translated to wire registers) and for programs the agent
//! relies on.

use ccp_lang::{compile, ErrorKind, Limit};
use ccp_wire::{implicit, Event, Instr, Op, Primitive, Reg, RegKind};

fn rep(i: u32) -> Reg {
    Reg::new(RegKind::NonVolatileReport, i)
}
fn ctl(i: u32) -> Reg {
    Reg::new(RegKind::NonVolatileControl, i)
}
fn tmp(i: u32) -> Reg {
    Reg::new(RegKind::Tmp, i)
}
fn local(i: u32) -> Reg {
    Reg::new(RegKind::Local, i)
}
fn prim(p: Primitive) -> Reg {
    Reg::new(RegKind::Primitive, p as u32)
}
fn imp(i: u32) -> Reg {
    Reg::new(RegKind::Implicit, i)
}
fn imm(v: u32) -> Reg {
    Reg::imm(v)
}
fn flag() -> Reg {
    imp(implicit::EXPR_FLAG)
}
fn ins(op: Op, res: Reg, left: Reg, right: Reg) -> Instr {
    Instr { op, res, left, right }
}
fn def(r: Reg, v: u32) -> Instr {
    ins(Op::Def, r, r, imm(v))
}
fn bind(r: Reg, v: Reg) -> Instr {
    ins(Op::Bind, r, r, v)
}
fn ev(flag_idx: u32, num_flag_instrs: u32, body_idx: u32, num_body_instrs: u32) -> Event {
    Event { flag_idx, num_flag_instrs, body_idx, num_body_instrs }
}

fn check(src: &str, events: &[Event], instrs: &[Instr]) {
    let p = compile(src).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.events(), events, "{src}\n{p}");
    assert_eq!(p.instrs(), instrs, "{src}\n{p}");
}

// --- portus lang/datapath.rs tests whose expected output is also ours -------------------

#[test]
fn portus_reg() {
    check(
        "(def (Report.foo 0)) (when true (bind Report.foo 4))",
        &[ev(1, 1, 2, 1)],
        &[def(rep(0), 0), bind(flag(), imm(1)), bind(rep(0), imm(4))],
    );
}

#[test]
fn portus_ewma() {
    check(
        "(def (Report.foo 0)) (when true (bind Report.foo (ewma 2 Flow.rate_outgoing)))",
        &[ev(1, 1, 2, 1)],
        &[def(rep(0), 0), bind(flag(), imm(1)), ins(Op::Ewma, rep(0), imm(2), prim(Primitive::FlowRateOutgoing))],
    );
}

#[test]
fn portus_infinity_if() {
    let rtt = prim(Primitive::FlowRttSampleUs);
    check(
        "(def (Report.foo +infinity)) (when true (bind Report.foo (if (< Flow.rtt_sample_us Report.foo) Flow.rtt_sample_us)))",
        &[ev(1, 1, 2, 2)],
        &[def(rep(0), 0xFFFF_FFFF), bind(flag(), imm(1)), ins(Op::Lt, tmp(0), rtt, rep(0)), ins(Op::If, rep(0), tmp(0), rtt)],
    );
}

#[test]
fn portus_control_def() {
    // portus' test declares only a control variable; a program without report fields is
    // rejected here (libccp would send empty reports, which mean "flow closed").
    let e = compile(
        "(def (Control.foo +infinity)) (when (< Flow.rtt_sample_us Control.foo) (bind Control.foo Flow.rtt_sample_us) (report))",
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit(Limit::NoReportFields));
    let rtt = prim(Primitive::FlowRttSampleUs);
    check(
        "(def (Report (r 0)) (Control.foo +infinity)) (when (< Flow.rtt_sample_us Control.foo) (bind Control.foo Flow.rtt_sample_us) (report))",
        &[ev(2, 1, 3, 2)],
        &[
            def(rep(0), 0),
            def(ctl(0), 0xFFFF_FFFF),
            ins(Op::Lt, flag(), rtt, ctl(0)),
            bind(ctl(0), rtt),
            bind(imp(implicit::SHOULD_REPORT), imm(1)),
        ],
    );
}

#[test]
fn portus_control_if_definition() {
    check(
        "(def (Report (r 0)) (controlFoo 0)) (when true (bind controlFoo (if (== controlFoo 0) (+ controlFoo 1))))",
        &[ev(2, 1, 3, 3)],
        &[
            def(rep(0), 0),
            def(ctl(0), 0),
            bind(flag(), imm(1)),
            ins(Op::Equiv, tmp(0), ctl(0), imm(0)),
            ins(Op::Add, tmp(1), ctl(0), imm(1)),
            ins(Op::If, ctl(0), tmp(0), tmp(1)),
        ],
    );
}

#[test]
fn portus_multiple_events() {
    check(
        "(def (Report.foo 0)) (when true (bind Report.foo 4)) (when (> 2 3) (bind Report.foo 5))",
        &[ev(1, 1, 2, 1), ev(3, 1, 4, 1)],
        &[def(rep(0), 0), bind(flag(), imm(1)), bind(rep(0), imm(4)), ins(Op::Gt, flag(), imm(2), imm(3)), bind(rep(0), imm(5))],
    );
}

#[test]
fn portus_commands() {
    check(
        "(def (Report.foo 0))
         (when true (bind Report.foo 4) (fallthrough))
         (when (> Micros 3000) (bind Report.foo 5) (report) (:= Micros 0))",
        &[ev(1, 1, 2, 2), ev(4, 1, 5, 3)],
        &[
            def(rep(0), 0),
            bind(flag(), imm(1)),
            bind(rep(0), imm(4)),
            bind(imp(implicit::SHOULD_FALLTHROUGH), imm(1)),
            ins(Op::Gt, flag(), imp(implicit::MICROS), imm(3000)),
            bind(rep(0), imm(5)),
            bind(imp(implicit::SHOULD_REPORT), imm(1)),
            bind(imp(implicit::MICROS), imm(0)),
        ],
    );
}

// --- portus tests where our output differs, and why both are valid ----------------------

/// portus: `BIND local0 <- 3; ADD tmp0 <- 2, local0; BIND rep0 <- tmp0` (5 instructions).
/// Ours writes the ADD straight into `Report.foo`: libccp reads an instruction's operands
/// before writing its result and writes nothing when it aborts, so the effect is the same.
#[test]
fn portus_intermediate() {
    check(
        "(def (Report.foo 0)) (when true (bind bar 3) (bind Report.foo (+ 2 bar)))",
        &[ev(1, 1, 2, 2)],
        &[def(rep(0), 0), bind(flag(), imm(1)), bind(local(0), imm(3)), ins(Op::Add, rep(0), imm(2), local(0))],
    );
}

/// portus numbers a tmp per operator (`ADD tmp0; ADD tmp1 <- tmp0, 3; BIND rep0 <- tmp1`);
/// ours reuses tmps as a stack and targets the assignment directly. Tmps are dead between
/// statements in both, so only the count of instructions and registers differs.
#[test]
fn portus_prog_reset_tmps() {
    check(
        "(def (Report.foo 0)) (when (> (+ 1 2) 3) (bind Report.foo (+ (+ 1 2) 3)) (bind Report.foo (+ (+ 4 5) 6)))",
        &[ev(1, 2, 3, 4)],
        &[
            def(rep(0), 0),
            ins(Op::Add, tmp(0), imm(1), imm(2)),
            ins(Op::Gt, flag(), tmp(0), imm(3)),
            ins(Op::Add, tmp(0), imm(1), imm(2)),
            ins(Op::Add, rep(0), tmp(0), imm(3)),
            ins(Op::Add, tmp(0), imm(4), imm(5)),
            ins(Op::Add, rep(0), tmp(0), imm(6)),
        ],
    );
}

/// portus orders DEFs alphabetically by name (`Control.state` before `Report.acked`); ours
/// emits report fields, then controls, in declaration order. libccp only counts report DEFs
/// and resets each register from its own DEF, so the order carries no meaning. The condition
/// is instruction-for-instruction portus' (`&&` is MUL of the two comparisons).
#[test]
fn portus_bool_ops() {
    check(
        "(def (Report.acked 0) (Control.state 0))
         (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (fallthrough))
         (when (&& (> Micros 3000000) (== Control.state 0)) (:= Control.state 1) (report))",
        &[ev(2, 1, 3, 2), ev(5, 3, 8, 2)],
        &[
            def(rep(0), 0),
            def(ctl(0), 0),
            bind(flag(), imm(1)),
            ins(Op::Add, rep(0), rep(0), prim(Primitive::AckBytesAcked)),
            bind(imp(implicit::SHOULD_FALLTHROUGH), imm(1)),
            ins(Op::Gt, tmp(0), imp(implicit::MICROS), imm(3_000_000)),
            ins(Op::Equiv, tmp(1), ctl(0), imm(0)),
            ins(Op::Mul, flag(), tmp(0), tmp(1)),
            bind(ctl(0), imm(1)),
            bind(imp(implicit::SHOULD_REPORT), imm(1)),
        ],
    );
}

// --- programs portus accepts (or panics on) that we reject with a reason ----------------

#[test]
fn portus_mistakes_are_errors() {
    // portus tests/twoflow.rs has this typo; portus silently makes `Control.numer` a local.
    let e = compile(
        "(def (Control.number 0) (Report.value 0))
         (when (> Control.number 0) (:= Report.value Control.number) (:= Control.numer 0) (report))",
    )
    .unwrap_err();
    assert_eq!((e.kind, e.line, e.column), (ErrorKind::Name, 2, 74));
    assert!(e.to_string().starts_with("2:74: `Control.numer` is not declared"), "{e}");

    // portus panics on a bare `if` statement.
    let e = compile("(def (Report (x 0))) (when true (if true (:= x 5)))").unwrap_err();
    assert_eq!((e.kind, e.line, e.column), (ErrorKind::Syntax, 1, 33));

    // portus' crate docs still show `(reset)`.
    let e = compile("(def (Report (x 0))) (when (> Micros 42000) (report) (reset))").unwrap_err();
    assert!(e.message.contains("(:= Micros 0)"), "{e}");
}

#[test]
fn comments_before_def() {
    let p = compile("# a fold\n# over two lines\n(def (Report (x 0))) # trailing\n(when true (report)) #end").unwrap();
    assert_eq!(p.instrs().len(), 3);
}

// --- the sample fold -----------------------------------------------------------------------

const SAMPLE: &str = "
(def (Report (volatile acked 0) (volatile rtt_min +infinity) (volatile lost 0) (volatile now 0)) (interval_us 10000))
(when true
  (:= Report.acked (+ Report.acked Ack.bytes_acked))
  (:= Report.rtt_min (min Report.rtt_min Flow.rtt_sample_us))
  (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
  (:= Report.now Ack.now)
  (fallthrough))
(when (> Ack.lost_pkts_sample 0) (report) (:= Micros 0))
(when (> Micros interval_us) (report) (:= Micros 0))
";

#[test]
fn sample_fold() {
    let p = compile(SAMPLE).unwrap();
    assert_eq!(
        p.to_string(),
        "\
when #0: condition 5..6, body 6..11
when #1: condition 11..12, body 12..14
when #2: condition 14..15, body 15..17
  0: def    vrep0 <- vrep0, 0
  1: def    vrep1 <- vrep1, 4294967295
  2: def    vrep2 <- vrep2, 0
  3: def    vrep3 <- vrep3, 0
  4: def    ctl0 <- ctl0, 10000
  5: bind   $flag <- $flag, 1
  6: add    vrep0 <- vrep0, Ack.bytes_acked
  7: min    vrep1 <- vrep1, Flow.rtt_sample_us
  8: add    vrep2 <- vrep2, Ack.lost_pkts_sample
  9: bind   vrep3 <- vrep3, Ack.now
 10: bind   $fallthrough <- $fallthrough, 1
 11: gt     $flag <- Ack.lost_pkts_sample, 0
 12: bind   $report <- $report, 1
 13: bind   Micros <- Micros, 0
 14: gt     $flag <- Micros, ctl0
 15: bind   $report <- $report, 1
 16: bind   Micros <- Micros, 0
"
    );
    assert_eq!(p.instrs().len(), 17);
    let names: Vec<_> = p.report_fields().iter().map(|f| (f.name.as_str(), f.index)).collect();
    assert_eq!(names, vec![("acked", 0), ("rtt_min", 1), ("lost", 2), ("now", 3)]);
    assert_eq!(p.report_index("Report.lost"), Some(2));
    let ctl = p.control("interval_us").unwrap();
    assert_eq!((ctl.index, ctl.default, ctl.volatile), (0, 10_000, false));
    let install = p.install(1);
    assert_eq!((install.program_uid, install.events.len(), install.instrs.len()), (1, 3, 17));
}

#[test]
fn control_updates() {
    let p = compile("(def (Report (x 0)) (a 1) (volatile b false)) (when true (report))").unwrap();
    let u = p.control_update("a", 1 << 40).unwrap();
    assert_eq!((u.kind, u.index, u.value), (RegKind::NonVolatileControl, 0, 1 << 40));
    let u = p.control_update("b", 1).unwrap();
    assert_eq!((u.kind, u.index, u.value), (RegKind::VolatileControl, 1, 1));
    assert!(p.control_update("b", 2).unwrap_err().to_string().contains("boolean"));
    assert!(p.control_update("c", 2).unwrap_err().to_string().contains("no control variable named `c`"));
    let u = p.control_update("Cwnd", 14_480).unwrap();
    assert_eq!((u.kind, u.index), (RegKind::Implicit, implicit::CWND));
    assert!(p.control_update("Rate", 1 << 32).unwrap_err().to_string().contains("u32"));
}
