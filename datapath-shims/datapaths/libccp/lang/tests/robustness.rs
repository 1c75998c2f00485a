//! The compiler never panics, and everything it accepts satisfies the invariants libccp needs.

mod common;

use ccp_lang::interp::Flow;
use ccp_lang::{compile, ErrorKind, Limit, Program};
use ccp_wire::{implicit, limits, Event, Install, Instr, Op, Reg, RegKind};
use common::{Features, Rng};
use proptest::prelude::*;

/// What every compiled program must satisfy for libccp to run it as written.
fn assert_valid(p: &Program) {
    let instrs = p.instrs();
    assert!(instrs.len() <= limits::MAX_INSTRUCTIONS);
    let num_defs = p.report_fields().len() + p.controls().len();
    assert!(!p.report_fields().is_empty());
    for (i, f) in p.report_fields().iter().enumerate() {
        assert_eq!(f.index, i);
    }
    for (i, c) in p.controls().iter().enumerate() {
        assert_eq!(c.index as usize, i);
    }
    assert!(instrs[..num_defs].iter().all(|i| i.op == Op::Def));
    assert!(instrs[num_defs..].iter().all(|i| i.op != Op::Def));
    let mut next = num_defs as u32;
    for e in p.events() {
        assert_eq!(e.flag_idx, next);
        assert!(e.num_flag_instrs >= 1);
        let last_flag = instrs[(e.flag_idx + e.num_flag_instrs - 1) as usize];
        assert_eq!((last_flag.res.kind, last_flag.res.index), (RegKind::Implicit, implicit::EXPR_FLAG));
        assert_eq!(e.body_idx, e.flag_idx + e.num_flag_instrs);
        next = e.body_idx + e.num_body_instrs;
    }
    assert_eq!(next as usize, instrs.len());
    for instr in instrs {
        assert!(!matches!(instr.res.kind, RegKind::Immediate | RegKind::Primitive));
        for r in [instr.res, instr.left, instr.right] {
            match r.kind {
                RegKind::Immediate => assert!(r.index <= limits::MAX_IMMEDIATE || r.index == limits::INFINITY),
                RegKind::Tmp => assert!((r.index as usize) < limits::MAX_TMP_REGS),
                RegKind::Local => assert!((r.index as usize) < limits::MAX_LOCAL_REGS),
                _ => {}
            }
        }
    }
    Flow::new(&p.install(1)).expect("the interpreter accepts every compiled program");
}

fn compile_checked(src: &str) {
    if let Ok(p) = compile(src) {
        assert_valid(&p);
    }
}

/// Random edits of a valid program: deletions, duplications and swaps of characters.
fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(4) {
        if chars.is_empty() {
            break;
        }
        let at = rng.below(chars.len() as u64) as usize;
        match rng.below(4) {
            0 => {
                chars.remove(at);
            }
            1 => chars.insert(at, *rng.pick(&['(', ')', ' ', '#', '0', 'x', '.', '\n'])),
            2 => {
                let other = rng.below(chars.len() as u64) as usize;
                chars.swap(at, other);
            }
            _ => {
                let c = chars[at];
                chars.insert(at, c);
            }
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(src in any::<String>()) {
        compile_checked(&src);
    }

    #[test]
    fn lisp_like_text_never_panics(src in "[()a-zA-Z0-9_. :=+*/<>!&|#\n-]{0,300}") {
        compile_checked(&src);
    }

    #[test]
    fn token_soup_never_panics(tokens in proptest::collection::vec(proptest::sample::select(vec![
        "(", ")", "(def", "(Report", "(when", "true", "false", "+infinity", "0", "7", "2147483648",
        "volatile", "x", "Report.x", "Ack.now", "Flow.was_timeout", "Micros", "Cwnd", ":=", "+", "-",
        "==", ">=", "&&", "not", "ewma", "if", "!if", "(report)", "(fallthrough)", "#c\n", "__x",
    ]), 0..120)) {
        compile_checked(&tokens.join(" "));
    }

    #[test]
    fn generated_programs_compile_and_run(seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let generated = common::program(&mut rng, Features { portus: false });
        let p = compile(&generated.source).unwrap_or_else(|e| panic!("{e}\n{}", generated.source));
        assert_valid(&p);
        let mut flow = Flow::new(&p.install(1)).unwrap();
        let mut now = 0;
        for _ in 0..50 {
            now += rng.below(5000);
            let out = flow.invoke(&common::primitives(&mut rng), now);
            if let Some(report) = out.report {
                prop_assert_eq!(report.len(), p.report_fields().len());
            }
        }
    }

    #[test]
    fn mutated_programs_never_panic(seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let generated = common::program(&mut rng, Features { portus: false });
        compile_checked(&mutate(&generated.source, &mut rng));
    }
}

/// Registers mostly within libccp's bounds, so that many programs get past `Flow::new`.
fn arb_reg(kinds: &'static [u8]) -> impl Strategy<Value = Reg> {
    (proptest::sample::select(kinds), prop_oneof![8 => 0u32..8, 1 => 0u32..120, 1 => any::<u32>()])
        .prop_map(|(kind, index)| Reg::new(RegKind::from_u8(kind).unwrap(), index))
}

fn arb_install() -> impl Strategy<Value = Install> {
    const ALL: &[u8] = &[0, 1, 2, 3, 4, 5, 6, 7, 8];
    const WRITABLE: &[u8] = &[0, 2, 3, 5, 6, 7, 8];
    let instr = (0u8..15, arb_reg(WRITABLE), arb_reg(ALL), arb_reg(ALL)).prop_map(|(op, res, left, right)| Instr {
        op: Op::from_u8(op).unwrap(),
        res,
        left,
        right,
    });
    let event = (0u32..12, 0u32..6, 0u32..12, 0u32..8).prop_map(|(flag_idx, num_flag_instrs, body_idx, num_body_instrs)| Event {
        flag_idx,
        num_flag_instrs,
        body_idx,
        num_body_instrs,
    });
    (proptest::collection::vec(event, 0..4), proptest::collection::vec(instr, 0..20)).prop_map(|(events, instrs)| Install {
        program_uid: 1,
        events,
        instrs,
    })
}

proptest! {
    /// The interpreter also runs foreign programs (portus' output): it must refuse or run any
    /// instruction list without panicking.
    #[test]
    fn interpreter_never_panics(install in arb_install(), seed in any::<u64>()) {
        if let Ok(mut flow) = Flow::new(&install) {
            let mut rng = Rng::new(seed);
            let mut now = 0;
            for _ in 0..20 {
                now += rng.below(10_000);
                flow.invoke(&common::primitives(&mut rng), now);
            }
        }
    }
}

#[test]
fn huge_and_deep_inputs_are_errors() {
    let deep = "(".repeat(100_000);
    assert_eq!(compile(&deep).unwrap_err().kind, ErrorKind::Limit(Limit::Nesting));
    let closes = ")".repeat(100_000);
    assert_eq!(compile(&closes).unwrap_err().kind, ErrorKind::Syntax);
    let long_body: String = (0..10_000).map(|_| "(:= Report.a (+ Report.a 1))").collect();
    let e = compile(&format!("(def (Report (a 0))) (when true {long_body})")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit(Limit::Instructions));
    assert!(e.message.contains("10002 instructions"), "{e}");
}
