//! Name resolution, type checking and the semantic checks that need no code: every name is
//! mapped to the register it lives in, every expression gets a type, literals are checked to
//! fit an immediate, and register counts are checked against libccp's limits.
//!
//! Types follow portus where portus checks (arithmetic and comparisons on numbers, `&&`/`||`
//! on booleans, boolean `when` conditions) and go further where portus lets mistakes through:
//! an assignment must keep the variable's type, `if`/`!if` need a boolean condition, and `==`
//! compares two values of the same type (portus allows only numbers).

use std::collections::HashMap;

use ccp_wire::{limits, Primitive};

use crate::ast::{BinOp, Decl, Expr, ExprKind, Leaf, Literal, Source, Stmt, Target, Value, When};
use crate::error::{CompileError, Limit, Pos};
use crate::program::{ControlVar, ReportField, ValueType};

/// A register that a name resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Var {
    Report { index: u32, volatile: bool },
    Control { index: u32, volatile: bool },
    Local(u32),
    Primitive(Primitive),
    Micros,
    Cwnd,
    Rate,
}

/// A resolved expression leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operand {
    Imm(u32),
    Var(Var),
}

/// The checked program, ready for code generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checked {
    pub reports: Vec<ReportField>,
    pub controls: Vec<ControlVar>,
    pub whens: Vec<When<Operand, Var>>,
}

/// libccp's DEF handling reads a default of 0x3FFFFFFF as "+infinity" and stores 0xFFFFFFFF.
const LIBCCP_DEF_INFINITY_SENTINEL: u64 = 0x3FFF_FFFF;

pub(crate) fn check(source: &Source) -> Result<Checked, CompileError> {
    let mut checker = Checker { names: HashMap::new(), locals: 0 };
    for p in Primitive::ALL {
        let ty = if p.is_bool() { ValueType::Bool } else { ValueType::Num };
        checker.names.insert(p.name().to_string(), (Var::Primitive(p), ty));
    }
    for (name, var) in [("Micros", Var::Micros), ("Cwnd", Var::Cwnd), ("Rate", Var::Rate)] {
        checker.names.insert(name.to_string(), (var, ValueType::Num));
    }

    if source.reports.is_empty() {
        return Err(CompileError::limit(source.def_pos, Limit::NoReportFields, "no report fields declared"));
    }
    let mut reports = Vec::with_capacity(source.reports.len());
    for (index, decl) in source.reports.iter().enumerate() {
        if index >= limits::MAX_REPORT_REGS {
            return Err(CompileError::limit(decl.pos, Limit::ReportFields, "too many report fields"));
        }
        let (default, ty) = default_value(decl)?;
        let var = Var::Report { index: index as u32, volatile: decl.volatile };
        checker.declare(format!("Report.{}", decl.name), decl.pos, var, ty)?;
        reports.push(ReportField { name: decl.name.clone(), index, volatile: decl.volatile, default, ty });
    }
    let mut controls = Vec::with_capacity(source.controls.len());
    for (index, decl) in source.controls.iter().enumerate() {
        if index >= limits::MAX_CONTROL_REGS {
            return Err(CompileError::limit(decl.pos, Limit::Controls, "too many control variables"));
        }
        if decl.name.starts_with("Ack.") || decl.name.starts_with("Flow.") {
            return Err(CompileError::name(
                decl.pos,
                format!("`{}`: names starting with `Ack.` or `Flow.` are reserved for measurement primitives", decl.name),
            ));
        }
        let (default, ty) = default_value(decl)?;
        let index = index as u32;
        checker.declare(decl.name.clone(), decl.pos, Var::Control { index, volatile: decl.volatile }, ty)?;
        controls.push(ControlVar { name: decl.name.clone(), index, volatile: decl.volatile, default, ty });
    }

    let whens = source.whens.iter().map(|w| checker.when(w)).collect::<Result<Vec<_>, _>>()?;
    Ok(Checked { reports, controls, whens })
}

/// The register value a declaration's default produces, and the variable's type.
fn default_value(decl: &Decl) -> Result<(u64, ValueType), CompileError> {
    match decl.default {
        Literal::Num(LIBCCP_DEF_INFINITY_SENTINEL) => Err(CompileError::semantics(
            decl.default_pos,
            "libccp reads a default of 1073741823 (0x3FFFFFFF) as +infinity and stores 4294967295 instead; write +infinity, or another value",
        )),
        literal => {
            let (imm, ty) = immediate(literal, decl.default_pos)?;
            Ok((u64::from(imm), ty))
        }
    }
}

/// The 32-bit immediate for a literal, and its type.
fn immediate(literal: Literal, pos: Pos) -> Result<(u32, ValueType), CompileError> {
    match literal {
        Literal::Bool(b) => Ok((u32::from(b), ValueType::Bool)),
        Literal::Infinity => Ok((limits::INFINITY, ValueType::Num)),
        Literal::Num(n) => match u32::try_from(n) {
            Ok(v) if v <= limits::MAX_IMMEDIATE => Ok((v, ValueType::Num)),
            _ => Err(CompileError::limit(pos, Limit::Immediate, format!("number {n} does not fit an immediate"))),
        },
    }
}

struct Checker {
    /// Every name in scope: built-ins, declarations, and locals bound so far (in source order).
    names: HashMap<String, (Var, ValueType)>,
    locals: u32,
}

impl Checker {
    fn declare(&mut self, name: String, pos: Pos, var: Var, ty: ValueType) -> Result<(), CompileError> {
        if let Some((existing, _)) = self.names.get(&name) {
            let what = match existing {
                Var::Primitive(_) => "a measurement primitive",
                Var::Micros | Var::Cwnd | Var::Rate => "a built-in register",
                _ => "already declared",
            };
            return Err(CompileError::name(pos, format!("cannot declare `{name}`: it is {what}")));
        }
        self.names.insert(name, (var, ty));
        Ok(())
    }

    fn when(&mut self, when: &When<Leaf, Target>) -> Result<When<Operand, Var>, CompileError> {
        let (cond, ty) = self.expr(&when.cond)?;
        if ty != ValueType::Bool {
            return Err(CompileError::type_(
                when.cond.pos,
                "a `when` condition must be a boolean, found a number; compare it, as in `(> x 0)`",
            ));
        }
        let body = when.body.iter().map(|s| self.stmt(s)).collect::<Result<Vec<_>, _>>()?;
        Ok(When { cond, body, pos: when.pos })
    }

    fn stmt(&mut self, stmt: &Stmt<Leaf, Target>) -> Result<Stmt<Operand, Var>, CompileError> {
        match stmt {
            Stmt::Report(pos) => Ok(Stmt::Report(*pos)),
            Stmt::Fallthrough(pos) => Ok(Stmt::Fallthrough(*pos)),
            Stmt::Assign { target, value, pos } => {
                // The value first: a new local is not in scope in its own defining expression.
                let (value, ty) = self.value(value)?;
                let target = self.target(target, &value, ty)?;
                Ok(Stmt::Assign { target, value, pos: *pos })
            }
        }
    }

    fn value(&self, value: &Value<Leaf>) -> Result<(Value<Operand>, ValueType), CompileError> {
        match value {
            Value::Expr(e) => {
                let (e, ty) = self.expr(e)?;
                Ok((Value::Expr(e), ty))
            }
            Value::Ewma { weight, sample } => {
                let w = self.expect(weight, ValueType::Num, "the weight of `ewma`")?;
                if let ExprKind::Leaf(Operand::Imm(v)) = w.kind {
                    if v > 10 {
                        return Err(CompileError::semantics(
                            weight.pos,
                            format!("an `ewma` weight is in tenths (0 to 10) of the old value to keep, found {v}"),
                        ));
                    }
                }
                let s = self.expect(sample, ValueType::Num, "the sample of `ewma`")?;
                Ok((Value::Ewma { weight: w, sample: s }, ValueType::Num))
            }
            Value::Cond { negated, cond, value } => {
                let word = if *negated { "!if" } else { "if" };
                let c = self.expect(cond, ValueType::Bool, &format!("the condition of `{word}`"))?;
                let (v, ty) = self.expr(value)?;
                Ok((Value::Cond { negated: *negated, cond: c, value: v }, ty))
            }
        }
    }

    /// Resolves an assignment target, creating a local on first assignment.
    fn target(&mut self, target: &Target, value: &Value<Operand>, ty: ValueType) -> Result<Var, CompileError> {
        let name = &target.name;
        let Some(&(var, target_ty)) = self.names.get(name) else {
            return self.new_local(target, ty);
        };
        match var {
            Var::Primitive(_) => {
                return Err(CompileError::name(
                    target.pos,
                    format!("`{name}` is a measurement primitive and cannot be assigned"),
                ))
            }
            Var::Micros if !matches!(value, Value::Expr(Expr { kind: ExprKind::Leaf(Operand::Imm(0)), .. })) => {
                return Err(CompileError::semantics(
                    target.pos,
                    "`Micros` can only be restarted, with `(:= Micros 0)`: libccp sets its origin to now() - value, mixing nanoseconds and microseconds, so no other value reads back as written",
                ))
            }
            _ => {}
        }
        if target_ty != ty {
            return Err(CompileError::type_(
                target.pos,
                format!("`{name}` is {}, but the value assigned to it is {}", target_ty.article_name(), ty.article_name()),
            ));
        }
        Ok(var)
    }

    fn new_local(&mut self, target: &Target, ty: ValueType) -> Result<Var, CompileError> {
        let name = &target.name;
        if let Some(field) = name.strip_prefix("Report.") {
            return Err(CompileError::name(
                target.pos,
                format!("`{name}`: there is no report field `{field}`; declare it in `(def (Report ...))`"),
            ));
        }
        if name.contains('.') {
            return Err(CompileError::name(
                target.pos,
                format!("`{name}` is not declared: names with `.` must be declared in `(def ...)`, and undeclared locals cannot contain `.`"),
            ));
        }
        if self.names.contains_key(&format!("Report.{name}")) {
            return Err(CompileError::name(
                target.pos,
                format!(
                    "`{name}` would be a new local variable, but there is a report field of that name: write `Report.{name}`"
                ),
            ));
        }
        if self.locals as usize >= limits::MAX_LOCAL_REGS {
            return Err(CompileError::limit(target.pos, Limit::Locals, format!("`{name}` would be a 9th local variable")));
        }
        let var = Var::Local(self.locals);
        self.locals += 1;
        self.names.insert(name.clone(), (var, ty));
        Ok(var)
    }

    /// Checks `e` has type `want`; `what` describes the position for the message.
    fn expect(&self, e: &Expr<Leaf>, want: ValueType, what: &str) -> Result<Expr<Operand>, CompileError> {
        let (checked, ty) = self.expr(e)?;
        if ty != want {
            return Err(CompileError::type_(
                e.pos,
                format!("{what} must be {}, found {}", want.article_name(), ty.article_name()),
            ));
        }
        Ok(checked)
    }

    fn expr(&self, e: &Expr<Leaf>) -> Result<(Expr<Operand>, ValueType), CompileError> {
        let pos = e.pos;
        let (kind, ty) = match &e.kind {
            ExprKind::Leaf(Leaf::Lit(literal)) => {
                let (imm, ty) = immediate(*literal, pos)?;
                (ExprKind::Leaf(Operand::Imm(imm)), ty)
            }
            ExprKind::Leaf(Leaf::Name(name)) => {
                let (var, ty) = self.lookup(name, pos)?;
                (ExprKind::Leaf(Operand::Var(var)), ty)
            }
            ExprKind::Not(inner) => {
                let inner = self.expect(inner, ValueType::Bool, "the argument of `not`")?;
                (ExprKind::Not(Box::new(inner)), ValueType::Bool)
            }
            ExprKind::Binary(op, left, right) => {
                let sym = op.symbol();
                let (operand_ty, result_ty) = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Max | BinOp::Min | BinOp::WrappedMax => {
                        (Some(ValueType::Num), ValueType::Num)
                    }
                    BinOp::Gt | BinOp::Lt | BinOp::Ge | BinOp::Le => (Some(ValueType::Num), ValueType::Bool),
                    BinOp::And | BinOp::Or => (Some(ValueType::Bool), ValueType::Bool),
                    BinOp::Eq | BinOp::Ne => (None, ValueType::Bool),
                };
                let (l, r) = match operand_ty {
                    Some(want) => (
                        self.expect(left, want, &format!("the 1st argument of `{sym}`"))?,
                        self.expect(right, want, &format!("the 2nd argument of `{sym}`"))?,
                    ),
                    None => {
                        let (l, lt) = self.expr(left)?;
                        let (r, rt) = self.expr(right)?;
                        if lt != rt {
                            return Err(CompileError::type_(
                                pos,
                                format!(
                                    "`{sym}` compares values of one type, but found {} and {}",
                                    lt.article_name(),
                                    rt.article_name()
                                ),
                            ));
                        }
                        (l, r)
                    }
                };
                if *op == BinOp::Div && matches!(r.kind, ExprKind::Leaf(Operand::Imm(0))) {
                    return Err(CompileError::semantics(
                        right.pos,
                        "division by zero: libccp aborts the whole invocation (and its report) when it divides by 0",
                    ));
                }
                (ExprKind::Binary(*op, Box::new(l), Box::new(r)), result_ty)
            }
        };
        Ok((Expr { kind, pos }, ty))
    }

    fn lookup(&self, name: &str, pos: Pos) -> Result<(Var, ValueType), CompileError> {
        if let Some(&found) = self.names.get(name) {
            return Ok(found);
        }
        let hint = if let Some(field) = name.strip_prefix("Report.") {
            format!("there is no report field `{field}`")
        } else if self.names.contains_key(&format!("Report.{name}")) {
            format!("did you mean the report field `Report.{name}`?")
        } else if name.starts_with("Ack.") || name.starts_with("Flow.") {
            let all: Vec<_> = Primitive::ALL.iter().map(|p| p.name()).collect();
            format!("the primitives are {}", all.join(", "))
        } else {
            "expected a report field (`Report.x`), a control variable, a primitive, `Micros`, `Cwnd`, `Rate`, or a local assigned earlier in the program".to_string()
        };
        Err(CompileError::name(pos, format!("unknown name `{name}`: {hint}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::lexer::tokenize;
    use crate::parser::parse;

    fn check_src(src: &str) -> Result<Checked, CompileError> {
        check(&parse(tokenize(src))?)
    }

    fn err(src: &str) -> CompileError {
        check_src(src).unwrap_err()
    }

    #[test]
    fn declarations_get_indices_and_defaults() {
        let c = check_src(
            "(def (Report (volatile a +infinity) (b true)) (x 7) (volatile y false))
             (when true (report))",
        )
        .unwrap();
        assert_eq!(
            c.reports,
            vec![
                ReportField { name: "a".into(), index: 0, volatile: true, default: 0xFFFF_FFFF, ty: ValueType::Num },
                ReportField { name: "b".into(), index: 1, volatile: false, default: 1, ty: ValueType::Bool },
            ]
        );
        assert_eq!(
            c.controls,
            vec![
                ControlVar { name: "x".into(), index: 0, volatile: false, default: 7, ty: ValueType::Num },
                ControlVar { name: "y".into(), index: 1, volatile: true, default: 0, ty: ValueType::Bool },
            ]
        );
    }

    #[test]
    fn names_resolve_to_registers() {
        let c = check_src(
            "(def (Report (a 0)) (x 0))
             (when true (:= l (+ x Ack.bytes_acked)) (:= Report.a (max l Micros)) (:= Cwnd Rate))",
        )
        .unwrap();
        let body = &c.whens[0].body;
        let targets: Vec<_> = body
            .iter()
            .map(|s| match s {
                Stmt::Assign { target, .. } => *target,
                _ => panic!(),
            })
            .collect();
        assert_eq!(targets, vec![Var::Local(0), Var::Report { index: 0, volatile: false }, Var::Cwnd]);
        let Stmt::Assign { value: Value::Expr(e), .. } = &body[0] else { panic!() };
        let ExprKind::Binary(BinOp::Add, l, r) = &e.kind else { panic!() };
        assert_eq!(l.kind, ExprKind::Leaf(Operand::Var(Var::Control { index: 0, volatile: false })));
        assert_eq!(r.kind, ExprKind::Leaf(Operand::Var(Var::Primitive(Primitive::AckBytesAcked))));
    }

    #[test]
    fn type_errors() {
        let base = "(def (Report (a 0) (b false)) (c 0))";
        for (body, needle) in [
            ("(when 1 (report))", "condition must be a boolean"),
            ("(when (> Flow.was_timeout 1) (report))", "1st argument of `>` must be a number"),
            ("(when (&& true 1) (report))", "2nd argument of `&&` must be a boolean"),
            ("(when (== Report.b 1) (report))", "compares values of one type"),
            ("(when true (:= Report.a true))", "`Report.a` is a number, but the value assigned to it is a boolean"),
            ("(when true (:= Report.b (if Report.a 1)))", "condition of `if` must be a boolean"),
            ("(when true (:= Report.b (ewma 2 Ack.now)))", "is a boolean, but the value"),
            ("(when (not 3) (report))", "argument of `not` must be a boolean"),
            ("(when true (:= l 1) (:= l false))", "`l` is a number"),
        ] {
            let e = err(&format!("{base} {body}"));
            assert_eq!(e.kind, ErrorKind::Type, "{body}: {e}");
            assert!(e.message.contains(needle), "{body}: {e}");
        }
        // Improvements over portus: bool conditions from registers and bool equality are fine.
        check_src(&format!("{base} (when Flow.was_timeout (report)) (when (== Report.b Flow.was_timeout) (report))")).unwrap();
    }

    #[test]
    fn name_errors() {
        let base = "(def (Report (acked 0)) (ctl 0))";
        for (body, needle) in [
            ("(when (> x 0) (report))", "unknown name `x`"),
            ("(when (> acked 0) (report))", "did you mean the report field `Report.acked`"),
            ("(when (> Report.nope 0) (report))", "no report field `nope`"),
            ("(when (> Ack.bogus 0) (report))", "the primitives are Ack.bytes_acked"),
            ("(when true (:= Ack.now 0))", "measurement primitive and cannot be assigned"),
            ("(when true (:= Report.nope 0))", "no report field `nope`"),
            ("(when true (:= Control.numer 0))", "names with `.` must be declared"),
            ("(when true (:= acked 0))", "write `Report.acked`"),
            ("(when true (:= x (+ x 1)))", "unknown name `x`"),
        ] {
            let e = err(&format!("{base} {body}"));
            assert_eq!(e.kind, ErrorKind::Name, "{body}: {e}");
            assert!(e.message.contains(needle), "{body}: {e}");
        }
        for (def, needle) in [
            ("(def (Report (a 0) (a 1)))", "already declared"),
            ("(def (Report (a 0)) (Cwnd 0))", "built-in register"),
            ("(def (Report (a 0)) (Ack.now 0))", "reserved for measurement primitives"),
            ("(def (Report (a 0)) (x 0) (x 1))", "already declared"),
        ] {
            let e = err(&format!("{def} (when true (report))"));
            assert_eq!(e.kind, ErrorKind::Name, "{def}: {e}");
            assert!(e.message.contains(needle), "{def}: {e}");
        }
    }

    #[test]
    fn semantic_errors() {
        let base = "(def (Report (a 0)))";
        for (body, needle) in [
            ("(when true (:= Micros 5))", "(:= Micros 0)"),
            ("(when true (:= Micros Report.a))", "(:= Micros 0)"),
            ("(when true (:= Report.a (/ Report.a 0)))", "division by zero"),
            ("(when true (:= Report.a (ewma 11 Ack.now)))", "tenths"),
        ] {
            let e = err(&format!("{base} {body}"));
            assert_eq!(e.kind, ErrorKind::Semantics, "{body}: {e}");
            assert!(e.message.contains(needle), "{body}: {e}");
        }
        let e = err("(def (Report (a 1073741823))) (when true (report))");
        assert_eq!((e.kind, e.pos()), (ErrorKind::Semantics, Pos { line: 1, column: 17 }));
    }

    #[test]
    fn immediate_limits() {
        check_src("(def (Report (a 2147483647))) (when (< Report.a +infinity) (:= Report.a 2147483647))").unwrap();
        let e = err("(def (Report (a 0))) (when true (:= Report.a 2147483648))");
        assert_eq!((e.kind, e.pos()), (ErrorKind::Limit(Limit::Immediate), Pos { line: 1, column: 46 }));
        assert!(e.message.contains("below 2^31"), "{e}");
        let e = err("(def (Report (a 4294967295))) (when true (report))");
        assert_eq!(e.kind, ErrorKind::Limit(Limit::Immediate));
    }

    #[test]
    fn register_limits() {
        let e = err("(def (x 0)) (when true (report))");
        assert_eq!(e.kind, ErrorKind::Limit(Limit::NoReportFields));
        assert!(e.message.contains("flow closed"), "{e}");

        let fields: String = (0..111).map(|i| format!("(f{i} 0)")).collect();
        let e = err(&format!("(def (Report {fields})) (when true (report))"));
        assert_eq!(e.kind, ErrorKind::Limit(Limit::ReportFields));
        assert!(e.message.contains("110"), "{e}");
        let fields: String = (0..110).map(|i| format!("(f{i} 0)")).collect();
        check_src(&format!("(def (Report {fields})) (when true (report))")).unwrap();

        let ctls: String = (0..111).map(|i| format!("(c{i} 0)")).collect();
        let e = err(&format!("(def (Report (a 0)) {ctls}) (when true (report))"));
        assert_eq!(e.kind, ErrorKind::Limit(Limit::Controls));

        let locals: String = (0..9).map(|i| format!("(:= l{i} {i})")).collect();
        let e = err(&format!("(def (Report (a 0))) (when true {locals})"));
        assert_eq!(e.kind, ErrorKind::Limit(Limit::Locals));
        assert!(e.message.contains("`l8`"), "{e}");
    }
}
