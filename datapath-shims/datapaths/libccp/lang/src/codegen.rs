//! Instruction selection for libccp's machine (`machine.c`).
//!
//! Conventions, shared with portus where they coincide:
//! - The program starts with one DEF per report field (index order), then one per control
//!   variable: `DEF res=r, left=r, right=imm(default)`. libccp finds a register's class (and so
//!   its volatility) in `left` and its default in `right`; DEFs are never executed as part of a
//!   clause.
//! - Each `when` is an event: condition instructions whose last one writes the implicit
//!   `__eventFlag` register (a leaf condition becomes `BIND flag <- flag, x`), then the body.
//! - `(report)` / `(fallthrough)` are `BIND __shouldReport|__shouldContinue <- 1`.
//! - An assignment writes its target from the expression's last instruction directly (portus
//!   computes into a scratch register and adds a BIND; both are equivalent because libccp reads
//!   all operands before it writes a result, and an aborted instruction writes nothing). A leaf
//!   value is `BIND target <- target, x`.
//! - `&&` is MUL and `||` is ADD of 0/1 values; `not x` is `x == 0`; `a >= b` is `(a < b) == 0`,
//!   `a <= b` is `(a > b) == 0`, `a != b` is `(a == b) == 0`.
//! - Scratch (tmp) registers are a stack per statement: a result reuses its first operand's
//!   register, so a statement needs as many as its expression's nesting requires (portus numbers
//!   one per operator instead). Both are valid: tmps are dead between statements.

use ccp_wire::{implicit, limits, Event, Instr, Op, Reg, RegKind};

use crate::ast::{BinOp, Expr, ExprKind, Stmt, Value};
use crate::error::{CompileError, Limit, Pos};
use crate::program::Program;
use crate::typecheck::{Checked, Operand, Var};

pub(crate) fn generate(checked: Checked) -> Result<Program, CompileError> {
    let mut gen = Gen { instrs: Vec::new(), origins: Vec::new(), next_tmp: 0 };
    // At most 110 + 110 DEFs, so the preamble alone cannot exceed the instruction limit.
    for field in &checked.reports {
        let kind = if field.volatile { RegKind::VolatileReport } else { RegKind::NonVolatileReport };
        gen.def(Reg::new(kind, field.index as u32), field.default);
    }
    for control in &checked.controls {
        gen.def(Reg::new(control.kind(), control.index), control.default);
    }

    let mut events = Vec::with_capacity(checked.whens.len());
    for when in &checked.whens {
        let flag_idx = gen.instrs.len();
        gen.next_tmp = 0;
        gen.value(&when.cond, Some(FLAG))?;
        let body_idx = gen.instrs.len();
        for stmt in &when.body {
            gen.next_tmp = 0;
            gen.stmt(stmt)?;
        }
        let end = gen.instrs.len();
        events.push(Event {
            flag_idx: flag_idx as u32,
            num_flag_instrs: (body_idx - flag_idx) as u32,
            body_idx: body_idx as u32,
            num_body_instrs: (end - body_idx) as u32,
        });
    }

    if let Some(&pos) = gen.origins.get(limits::MAX_INSTRUCTIONS) {
        return Err(CompileError::limit(
            pos,
            Limit::Instructions,
            format!("the program compiles to {} instructions, and the 256th comes from here", gen.instrs.len()),
        ));
    }
    Ok(Program { events, instrs: gen.instrs, reports: checked.reports, controls: checked.controls })
}

const FLAG: Reg = Reg::new(RegKind::Implicit, implicit::EXPR_FLAG);
const ZERO: Reg = Reg::imm(0);
const ONE: Reg = Reg::imm(1);

fn var_reg(var: Var) -> Reg {
    match var {
        Var::Report { index, volatile: true } => Reg::new(RegKind::VolatileReport, index),
        Var::Report { index, volatile: false } => Reg::new(RegKind::NonVolatileReport, index),
        Var::Control { index, volatile: true } => Reg::new(RegKind::VolatileControl, index),
        Var::Control { index, volatile: false } => Reg::new(RegKind::NonVolatileControl, index),
        Var::Local(index) => Reg::new(RegKind::Local, index),
        Var::Primitive(p) => Reg::new(RegKind::Primitive, p as u32),
        Var::Micros => Reg::new(RegKind::Implicit, implicit::MICROS),
        Var::Cwnd => Reg::new(RegKind::Implicit, implicit::CWND),
        Var::Rate => Reg::new(RegKind::Implicit, implicit::RATE),
    }
}

fn operand_reg(operand: Operand) -> Reg {
    match operand {
        Operand::Imm(v) => Reg::imm(v),
        Operand::Var(var) => var_reg(var),
    }
}

struct Gen {
    instrs: Vec<Instr>,
    /// The source position each instruction was generated for, to place a limit error.
    origins: Vec<Pos>,
    /// The lowest free tmp register; tmps below it hold live intermediate results.
    next_tmp: u32,
}

impl Gen {
    fn emit(&mut self, pos: Pos, op: Op, res: Reg, left: Reg, right: Reg) {
        self.instrs.push(Instr { op, res, left, right });
        self.origins.push(pos);
    }

    fn def(&mut self, reg: Reg, default: u64) {
        // Defaults were checked to fit an immediate (or be +infinity, 0xFFFFFFFF).
        let imm = u32::try_from(default).unwrap_or(limits::INFINITY);
        // DEFs never reach the instruction limit (see `generate`), so their origin is never shown.
        self.emit(Pos { line: 0, column: 0 }, Op::Def, reg, reg, Reg::imm(imm));
    }

    fn alloc_tmp(&mut self, pos: Pos) -> Result<Reg, CompileError> {
        if self.next_tmp as usize >= limits::MAX_TMP_REGS {
            return Err(CompileError::limit(
                pos,
                Limit::TmpRegisters,
                "this expression needs a 9th scratch register; split it with a local, as in `(:= part (...))`",
            ));
        }
        let reg = Reg::new(RegKind::Tmp, self.next_tmp);
        self.next_tmp += 1;
        Ok(reg)
    }

    fn stmt(&mut self, stmt: &Stmt<Operand, Var>) -> Result<(), CompileError> {
        match stmt {
            Stmt::Report(pos) => {
                let r = Reg::new(RegKind::Implicit, implicit::SHOULD_REPORT);
                self.emit(*pos, Op::Bind, r, r, ONE);
            }
            Stmt::Fallthrough(pos) => {
                let r = Reg::new(RegKind::Implicit, implicit::SHOULD_FALLTHROUGH);
                self.emit(*pos, Op::Bind, r, r, ONE);
            }
            Stmt::Assign { target, value, pos } => {
                let target = var_reg(*target);
                match value {
                    Value::Expr(e) => {
                        self.value(e, Some(target))?;
                    }
                    Value::Ewma { weight, sample } => {
                        let w = self.value(weight, None)?;
                        let s = self.value(sample, None)?;
                        self.emit(*pos, Op::Ewma, target, w, s);
                    }
                    Value::Cond { negated, cond, value } => {
                        let c = self.value(cond, None)?;
                        let v = self.value(value, None)?;
                        let op = if *negated { Op::NotIf } else { Op::If };
                        self.emit(*pos, op, target, c, v);
                    }
                }
            }
        }
        Ok(())
    }

    /// Evaluates `e`. With `dest`, the result is written there and `dest` is returned; without,
    /// the result is left in a leaf's own register or in a fresh tmp, which stays allocated.
    fn value(&mut self, e: &Expr<Operand>, dest: Option<Reg>) -> Result<Reg, CompileError> {
        let base = self.next_tmp;
        match &e.kind {
            ExprKind::Leaf(operand) => {
                let reg = operand_reg(*operand);
                match dest {
                    Some(d) => {
                        self.emit(e.pos, Op::Bind, d, d, reg);
                        Ok(d)
                    }
                    None => Ok(reg),
                }
            }
            ExprKind::Not(inner) => {
                let x = self.value(inner, None)?;
                self.next_tmp = base;
                let res = self.result_reg(dest, e.pos)?;
                self.emit(e.pos, Op::Equiv, res, x, ZERO);
                Ok(res)
            }
            ExprKind::Binary(op, left, right) => {
                let l = self.value(left, None)?;
                let r = self.value(right, None)?;
                // Operands are read before the result is written, so their tmps can be reused.
                self.next_tmp = base;
                let res = self.result_reg(dest, e.pos)?;
                let direct = match op {
                    BinOp::Add | BinOp::Or => Op::Add,
                    BinOp::Sub => Op::Sub,
                    BinOp::Mul | BinOp::And => Op::Mul,
                    BinOp::Div => Op::Div,
                    BinOp::Max => Op::Max,
                    BinOp::Min => Op::Min,
                    BinOp::WrappedMax => Op::MaxWrap,
                    BinOp::Eq => Op::Equiv,
                    BinOp::Gt => Op::Gt,
                    BinOp::Lt => Op::Lt,
                    BinOp::Ge | BinOp::Le | BinOp::Ne => {
                        let inverse = match op {
                            BinOp::Ge => Op::Lt,
                            BinOp::Le => Op::Gt,
                            _ => Op::Equiv,
                        };
                        // The inverse goes to a tmp (the result's own, when it is one), so
                        // `dest` is written only by the last instruction.
                        let scratch = if dest.is_some() { self.alloc_tmp(e.pos)? } else { res };
                        self.emit(e.pos, inverse, scratch, l, r);
                        self.next_tmp = if dest.is_some() { base } else { base + 1 };
                        self.emit(e.pos, Op::Equiv, res, scratch, ZERO);
                        return Ok(res);
                    }
                };
                self.emit(e.pos, direct, res, l, r);
                Ok(res)
            }
        }
    }

    fn result_reg(&mut self, dest: Option<Reg>, pos: Pos) -> Result<Reg, CompileError> {
        match dest {
            Some(d) => Ok(d),
            None => self.alloc_tmp(pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{ErrorKind, Limit};

    fn listing(src: &str) -> String {
        crate::compile(src).unwrap_or_else(|e| panic!("{e}")).to_string()
    }

    #[test]
    fn leaf_condition_and_assignment() {
        assert_eq!(
            listing("(def (Report (volatile a 0))) (when true (:= Report.a 4))"),
            "when #0: condition 1..2, body 2..3
  0: def    vrep0 <- vrep0, 0
  1: bind   $flag <- $flag, 1
  2: bind   vrep0 <- vrep0, 4
"
        );
    }

    #[test]
    fn compound_results_go_straight_to_their_target() {
        assert_eq!(
            listing("(def (Report (a 0))) (when (> Ack.lost_pkts_sample 0) (:= Report.a (+ Report.a Ack.bytes_acked)) (report))"),
            "when #0: condition 1..2, body 2..4
  0: def    rep0 <- rep0, 0
  1: gt     $flag <- Ack.lost_pkts_sample, 0
  2: add    rep0 <- rep0, Ack.bytes_acked
  3: bind   $report <- $report, 1
"
        );
    }

    #[test]
    fn tmps_are_a_stack() {
        assert_eq!(
            listing("(def (Report (a 0))) (when true (:= Report.a (+ (* 1 2) (- (/ 8 4) (min 3 4)))))"),
            "when #0: condition 1..2, body 2..7
  0: def    rep0 <- rep0, 0
  1: bind   $flag <- $flag, 1
  2: mul    tmp0 <- 1, 2
  3: div    tmp1 <- 8, 4
  4: min    tmp2 <- 3, 4
  5: sub    tmp1 <- tmp1, tmp2
  6: add    rep0 <- tmp0, tmp1
"
        );
    }

    #[test]
    fn sugar_expands_to_existing_ops() {
        assert_eq!(
            listing("(def (Report (a false)) (c 0)) (when (>= Micros c) (:= Report.a (|| (!= c 1) (not (<= c 2)))))"),
            "when #0: condition 2..4, body 4..10
  0: def    rep0 <- rep0, 0
  1: def    ctl0 <- ctl0, 0
  2: lt     tmp0 <- Micros, ctl0
  3: eq     $flag <- tmp0, 0
  4: eq     tmp0 <- ctl0, 1
  5: eq     tmp0 <- tmp0, 0
  6: gt     tmp1 <- ctl0, 2
  7: eq     tmp1 <- tmp1, 0
  8: eq     tmp1 <- tmp1, 0
  9: add    rep0 <- tmp0, tmp1
"
        );
    }

    #[test]
    fn ewma_if_and_commands() {
        assert_eq!(
            listing(
                "(def (Report (volatile a 0) (b +infinity)) (volatile k true))
                 (when Flow.was_timeout (:= Report.a (ewma 2 Flow.rate_outgoing)) (:= Report.b (!if k (+ Report.b 1))) (fallthrough))
                 (when (&& k (< Ack.now 5)) (:= Cwnd (* Cwnd 2)) (:= Micros 0))"
            ),
            "when #0: condition 3..4, body 4..8
when #1: condition 8..10, body 10..12
  0: def    vrep0 <- vrep0, 0
  1: def    rep1 <- rep1, 4294967295
  2: def    vctl0 <- vctl0, 1
  3: bind   $flag <- $flag, Flow.was_timeout
  4: ewma   vrep0 <- 2, Flow.rate_outgoing
  5: add    tmp0 <- rep1, 1
  6: !if    rep1 <- vctl0, tmp0
  7: bind   $fallthrough <- $fallthrough, 1
  8: lt     tmp0 <- Ack.now, 5
  9: mul    $flag <- vctl0, tmp0
 10: mul    Cwnd <- Cwnd, 2
 11: bind   Micros <- Micros, 0
"
        );
    }

    #[test]
    fn tmp_limit() {
        // A right-leaning chain keeps every left operand live: 8 tmps fit, 9 do not.
        fn chain(n: usize) -> String {
            let mut e = "1".to_string();
            for _ in 0..n {
                e = format!("(+ (+ 1 1) {e})");
            }
            format!("(def (Report (a 0))) (when true (:= Report.a {e}))")
        }
        crate::compile(&chain(8)).unwrap();
        let e = crate::compile(&chain(9)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit(Limit::TmpRegisters));
        assert!(e.message.contains("at most 8 scratch registers"), "{e}");
    }

    #[test]
    fn instruction_limit() {
        // 1 DEF + 1 flag + n bodies.
        let prog = |n: usize| {
            let body: String = (0..n).map(|_| "(:= Report.a 1)\n").collect();
            format!("(def (Report (a 0)))\n(when true\n{body})")
        };
        assert_eq!(crate::compile(&prog(253)).unwrap().instrs().len(), 255);
        let e = crate::compile(&prog(254)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit(Limit::Instructions));
        // Statement 254 is on line 256; its BIND comes from the value `1` in column 14.
        assert_eq!((e.line, e.column), (256, 14));
        assert!(e.message.contains("256 instructions"), "{e}");
        assert!(e.message.contains("loops forever"), "{e}");
    }
}
