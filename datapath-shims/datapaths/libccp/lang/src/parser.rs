//! Parsing in two steps: tokens are read into S-expressions (iteratively, so deep nesting
//! cannot overflow the stack), then S-expressions are interpreted as the program's forms with
//! errors that name the expected form.

use crate::ast::{BinOp, Decl, Expr, ExprKind, Leaf, Literal, Source, Stmt, Target, Value, When};
use crate::error::{CompileError, Limit, Pos};
use crate::lexer::{Token, TokenKind};

/// Deepest parenthesis nesting accepted. Later passes recurse on the tree, so this bounds their
/// stack use; real programs nest a handful of levels (8 scratch registers cap useful depth).
pub(crate) const MAX_NESTING: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
enum SExp {
    Atom(String, Pos),
    List(Vec<SExp>, Pos),
}

impl SExp {
    fn pos(&self) -> Pos {
        match self {
            SExp::Atom(_, pos) | SExp::List(_, pos) => *pos,
        }
    }
}

/// Reads the token stream into top-level S-expressions.
fn read(tokens: Vec<Token>) -> Result<Vec<SExp>, CompileError> {
    let mut top = Vec::new();
    // Lists being read, innermost last, each with the position of its `(`.
    let mut open: Vec<(Vec<SExp>, Pos)> = Vec::new();
    for token in tokens {
        let done = match token.kind {
            TokenKind::Open => {
                if open.len() >= MAX_NESTING {
                    return Err(CompileError::limit(token.pos, Limit::Nesting, "parentheses nested too deeply"));
                }
                open.push((Vec::new(), token.pos));
                continue;
            }
            TokenKind::Close => match open.pop() {
                Some((items, pos)) => SExp::List(items, pos),
                None => return Err(CompileError::syntax(token.pos, "unexpected `)`: there is no `(` for it to close")),
            },
            TokenKind::Atom(text) => SExp::Atom(text, token.pos),
        };
        match open.last_mut() {
            Some((items, _)) => items.push(done),
            None => top.push(done),
        }
    }
    match open.pop() {
        Some((_, pos)) => {
            Err(CompileError::syntax(pos, "this `(` is never closed: expected a matching `)` before the end of the program"))
        }
        None => Ok(top),
    }
}

/// Parses a whole program: `(def ...)` followed by one or more `(when ...)`.
pub(crate) fn parse(tokens: Vec<Token>) -> Result<Source, CompileError> {
    let items = read(tokens)?;
    let mut items = items.into_iter();
    let Some(first) = items.next() else {
        return Err(CompileError::syntax(
            Pos { line: 1, column: 1 },
            "empty program: expected `(def ...)` followed by one or more `(when ...)` clauses",
        ));
    };
    let def_pos = first.pos();
    let (reports, controls) = match &first {
        SExp::List(list, _) if head(list) == Some("def") => parse_def(&list[1..])?,
        other => return Err(CompileError::syntax(other.pos(), "a program must start with `(def (Report ...) ...)`")),
    };
    let mut whens = Vec::new();
    for item in items {
        match &item {
            SExp::List(list, pos) if head(list) == Some("when") => whens.push(parse_when(&list[1..], *pos)?),
            SExp::List(list, pos) if head(list) == Some("def") => {
                return Err(CompileError::syntax(*pos, "only one `(def ...)` is allowed, and it must come first"))
            }
            other => return Err(CompileError::syntax(other.pos(), "expected a `(when condition statement...)` clause")),
        }
    }
    if whens.is_empty() {
        return Err(CompileError::syntax(
            def_pos,
            "expected at least one `(when condition statement...)` clause after `(def ...)`",
        ));
    }
    Ok(Source { reports, controls, def_pos, whens })
}

fn head(list: &[SExp]) -> Option<&str> {
    match list.first() {
        Some(SExp::Atom(word, _)) => Some(word.as_str()),
        _ => None,
    }
}

/// Interprets the items of `(def ...)`: returns (report fields, control variables).
fn parse_def(items: &[SExp]) -> Result<(Vec<Decl>, Vec<Decl>), CompileError> {
    let mut reports = Vec::new();
    let mut controls = Vec::new();
    let mut report_struct: Option<Pos> = None;
    for item in items {
        let SExp::List(list, pos) = item else {
            return Err(CompileError::syntax(
                item.pos(),
                "expected a declaration: `(Report ...)`, `(name default)` or `(volatile name default)`",
            ));
        };
        if head(list) == Some("Report") {
            if let Some(first) = report_struct {
                return Err(CompileError::syntax(
                    *pos,
                    format!("a second `(Report ...)`: report fields are all declared in the one at {first}"),
                ));
            }
            report_struct = Some(*pos);
            for field in &list[1..] {
                let decl = parse_decl(field)?;
                if decl.name.contains('.') {
                    return Err(CompileError::name(
                        decl.pos,
                        format!("report field names cannot contain `.`: `{}` would be read as `Report.{}`", decl.name, decl.name),
                    ));
                }
                reports.push(decl);
            }
        } else {
            let mut decl = parse_decl(item)?;
            // portus' older form `(def (Report.foo 0))` declares a report field outside `(Report ...)`.
            match decl.name.strip_prefix("Report.") {
                Some(field) if field.contains('.') => {
                    return Err(CompileError::name(decl.pos, format!("report field names cannot contain `.`: `{field}`")))
                }
                Some(field) => {
                    decl.name = field.to_string();
                    reports.push(decl);
                }
                None => controls.push(decl),
            }
        }
    }
    Ok((reports, controls))
}

fn parse_decl(item: &SExp) -> Result<Decl, CompileError> {
    const EXPECTED: &str =
        "expected a declaration `(name default)` or `(volatile name default)`, where default is a number, true, false or +infinity";
    let SExp::List(list, pos) = item else {
        return Err(CompileError::syntax(item.pos(), EXPECTED));
    };
    let (volatile, name, default) = match list.as_slice() {
        [name, default] => (false, name, default),
        [SExp::Atom(word, _), name, default] if word == "volatile" => (true, name, default),
        _ => return Err(CompileError::syntax(*pos, EXPECTED)),
    };
    let SExp::Atom(name_text, name_pos) = name else {
        return Err(CompileError::syntax(name.pos(), "expected a variable name"));
    };
    check_name_shape(name_text, *name_pos)?;
    let SExp::Atom(default_text, default_pos) = default else {
        return Err(CompileError::syntax(default.pos(), "a default must be a literal: a number, true, false or +infinity"));
    };
    let Some(literal) = parse_literal(default_text, *default_pos)? else {
        return Err(CompileError::syntax(
            *default_pos,
            format!("a default must be a literal (a number, true, false or +infinity), found `{default_text}`"),
        ));
    };
    Ok(Decl { name: name_text.clone(), volatile, default: literal, pos: *name_pos, default_pos: *default_pos })
}

/// `Ok(None)` when the atom is not a literal at all (it may be a name).
fn parse_literal(text: &str, pos: Pos) -> Result<Option<Literal>, CompileError> {
    match text {
        "true" => Ok(Some(Literal::Bool(true))),
        "false" => Ok(Some(Literal::Bool(false))),
        "+infinity" => Ok(Some(Literal::Infinity)),
        _ if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => match text.parse::<u64>() {
            Ok(n) => Ok(Some(Literal::Num(n))),
            Err(_) => Err(CompileError::limit(pos, Limit::Immediate, format!("number `{text}` is too large"))),
        },
        _ if text.strip_prefix('-').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit())) => {
            Err(CompileError::syntax(
                pos,
                format!("negative number `{text}`: registers are unsigned, so only 0 and up can be written"),
            ))
        }
        _ => Ok(None),
    }
}

/// Names are `[A-Za-z_][A-Za-z0-9_]*` segments joined by `.`; `__` prefixes are reserved for
/// libccp's internal registers (`__eventFlag`, ...), as in portus.
fn check_name_shape(text: &str, pos: Pos) -> Result<(), CompileError> {
    let well_formed = text.split('.').all(|segment| {
        let mut chars = segment.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    if !well_formed {
        return Err(CompileError::syntax(
            pos,
            format!(
                "`{text}` is not a name: expected letters, digits and `_`, starting with a letter or `_`, in `.`-separated parts"
            ),
        ));
    }
    if text.starts_with("__") {
        return Err(CompileError::name(
            pos,
            format!("`{text}`: names starting with `__` are reserved for libccp's internal registers"),
        ));
    }
    if text == "true" || text == "false" {
        return Err(CompileError::name(pos, format!("`{text}` is a literal, not a name")));
    }
    Ok(())
}

fn binop(word: &str) -> Option<BinOp> {
    Some(match word {
        "+" | "add" => BinOp::Add,
        "-" | "sub" => BinOp::Sub,
        "*" | "mul" => BinOp::Mul,
        "/" | "div" => BinOp::Div,
        "max" => BinOp::Max,
        "min" => BinOp::Min,
        "wrapped_max" => BinOp::WrappedMax,
        "==" | "eq" => BinOp::Eq,
        "!=" => BinOp::Ne,
        ">" | "gt" => BinOp::Gt,
        "<" | "lt" => BinOp::Lt,
        ">=" => BinOp::Ge,
        "<=" => BinOp::Le,
        "&&" | "and" => BinOp::And,
        "||" | "or" => BinOp::Or,
        _ => return None,
    })
}

fn is_statement_word(word: &str) -> bool {
    matches!(word, ":=" | "bind" | "report" | "fallthrough")
}

fn is_assignment_only_word(word: &str) -> bool {
    matches!(word, "ewma" | "if" | "!if")
}

fn arity(list: &[SExp], pos: Pos, name: &str, expected: usize) -> Result<(), CompileError> {
    let found = list.len().saturating_sub(1);
    if found == expected {
        return Ok(());
    }
    let plural = if expected == 1 { "" } else { "s" };
    Err(CompileError::syntax(pos, format!("`{name}` takes {expected} argument{plural}, found {found}")))
}

fn parse_when(items: &[SExp], pos: Pos) -> Result<When<Leaf, Target>, CompileError> {
    let Some((cond, body)) = items.split_first() else {
        return Err(CompileError::syntax(pos, "`(when)` needs a condition: expected `(when condition statement...)`"));
    };
    let cond = parse_expr(cond)?;
    let body = body.iter().map(parse_stmt).collect::<Result<Vec<_>, _>>()?;
    Ok(When { cond, body, pos })
}

fn parse_expr(sexp: &SExp) -> Result<Expr<Leaf>, CompileError> {
    let (list, pos) = match sexp {
        SExp::Atom(text, pos) => return parse_leaf(text, *pos).map(|leaf| Expr { kind: ExprKind::Leaf(leaf), pos: *pos }),
        SExp::List(list, pos) => (list.as_slice(), *pos),
    };
    let Some(word) = head(list) else {
        return Err(CompileError::syntax(pos, "expected an operator after `(`, as in `(+ a b)`"));
    };
    if let Some(op) = binop(word) {
        arity(list, pos, word, 2)?;
        let left = parse_expr(&list[1])?;
        let right = parse_expr(&list[2])?;
        return Ok(Expr { kind: ExprKind::Binary(op, Box::new(left), Box::new(right)), pos });
    }
    match word {
        "not" | "!" => {
            arity(list, pos, word, 1)?;
            let inner = parse_expr(&list[1])?;
            Ok(Expr { kind: ExprKind::Not(Box::new(inner)), pos })
        }
        w if is_assignment_only_word(w) => Err(CompileError::syntax(
            pos,
            format!("`{w}` keeps or reads the old value of what it is assigned to, so it can only be the whole value of an assignment: `(:= target ({w} a b))`"),
        )),
        w if is_statement_word(w) => Err(CompileError::syntax(
            pos,
            format!("`{w}` is a statement, not an expression: it can only appear directly in a `(when ...)` body"),
        )),
        w => Err(CompileError::syntax(
            pos,
            format!("unknown operator `{w}`: expected one of + - * / == != > < >= <= && || max min wrapped_max not"),
        )),
    }
}

fn parse_leaf(text: &str, pos: Pos) -> Result<Leaf, CompileError> {
    if let Some(literal) = parse_literal(text, pos)? {
        return Ok(Leaf::Lit(literal));
    }
    if binop(text).is_some_and(|_| !text.starts_with(|c: char| c.is_ascii_alphabetic())) || matches!(text, "!" | ":=" | "!if") {
        return Err(CompileError::syntax(
            pos,
            format!("`{text}` is an operator: apply it inside parentheses, as in `({text} a b)`"),
        ));
    }
    check_name_shape(text, pos)?;
    Ok(Leaf::Name(text.to_string()))
}

fn parse_stmt(sexp: &SExp) -> Result<Stmt<Leaf, Target>, CompileError> {
    const EXPECTED: &str = "expected a statement: `(:= name value)`, `(report)` or `(fallthrough)`";
    let SExp::List(list, pos) = sexp else {
        return Err(CompileError::syntax(sexp.pos(), EXPECTED));
    };
    let pos = *pos;
    let Some(word) = head(list) else {
        return Err(CompileError::syntax(pos, EXPECTED));
    };
    match word {
        ":=" | "bind" => {
            arity(list, pos, word, 2)?;
            let SExp::Atom(name, name_pos) = &list[1] else {
                return Err(CompileError::syntax(list[1].pos(), format!("the target of `{word}` must be a variable name")));
            };
            check_name_shape(name, *name_pos)?;
            let target = Target { name: name.clone(), pos: *name_pos };
            let value = parse_value(&list[2])?;
            Ok(Stmt::Assign { target, value, pos })
        }
        "report" => {
            arity(list, pos, word, 0)?;
            Ok(Stmt::Report(pos))
        }
        "fallthrough" => {
            arity(list, pos, word, 0)?;
            Ok(Stmt::Fallthrough(pos))
        }
        "reset" => Err(CompileError::syntax(pos, "`(reset)` is obsolete syntax: restart the timer with `(:= Micros 0)`")),
        w if is_assignment_only_word(w) => Err(CompileError::syntax(
            pos,
            format!("`({w} ...)` is not a statement: assign its result, as in `(:= target ({w} a b))`"),
        )),
        w if binop(w).is_some() || w == "not" || w == "!" => {
            Err(CompileError::syntax(pos, format!("`({w} ...)` computes a value that would be discarded: {EXPECTED}")))
        }
        w => Err(CompileError::syntax(pos, format!("unknown statement `{w}`: {EXPECTED}"))),
    }
}

fn parse_value(sexp: &SExp) -> Result<Value<Leaf>, CompileError> {
    if let SExp::List(list, pos) = sexp {
        match head(list) {
            Some(word @ "ewma") => {
                arity(list, *pos, word, 2)?;
                return Ok(Value::Ewma { weight: parse_expr(&list[1])?, sample: parse_expr(&list[2])? });
            }
            Some(word @ ("if" | "!if")) => {
                arity(list, *pos, word, 2)?;
                return Ok(Value::Cond { negated: word == "!if", cond: parse_expr(&list[1])?, value: parse_expr(&list[2])? });
            }
            _ => {}
        }
    }
    parse_expr(sexp).map(Value::Expr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::lexer::tokenize;

    fn parse_src(src: &str) -> Result<Source, CompileError> {
        parse(tokenize(src))
    }

    fn p(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    fn name(s: &str, pos: Pos) -> Expr<Leaf> {
        Expr { kind: ExprKind::Leaf(Leaf::Name(s.into())), pos }
    }

    fn num(n: u64, pos: Pos) -> Expr<Leaf> {
        Expr { kind: ExprKind::Leaf(Leaf::Lit(Literal::Num(n))), pos }
    }

    #[test]
    fn defs_reports_and_controls_in_source_order() {
        let src = "(def (Bar 0) (Report (Foo 0) (volatile Baz +infinity)) (Qux true) (volatile Qux2 0) (Report.old 3))
                   (when true (report))";
        let s = parse_src(src).unwrap();
        let reports: Vec<_> = s.reports.iter().map(|d| (d.name.as_str(), d.volatile, d.default)).collect();
        assert_eq!(
            reports,
            vec![("Foo", false, Literal::Num(0)), ("Baz", true, Literal::Infinity), ("old", false, Literal::Num(3)),]
        );
        let controls: Vec<_> = s.controls.iter().map(|d| (d.name.as_str(), d.volatile, d.default)).collect();
        assert_eq!(
            controls,
            vec![("Bar", false, Literal::Num(0)), ("Qux", false, Literal::Bool(true)), ("Qux2", true, Literal::Num(0))]
        );
    }

    #[test]
    fn when_with_nested_expression() {
        let s = parse_src("(def (Report (a 0)))\n(when (> (+ a 1) 2) (:= Report.a (ewma 2 x)) (fallthrough))").unwrap();
        assert_eq!(s.whens.len(), 1);
        let w = &s.whens[0];
        assert_eq!(w.pos, p(2, 1));
        assert_eq!(
            w.cond,
            Expr {
                kind: ExprKind::Binary(
                    BinOp::Gt,
                    Box::new(Expr {
                        kind: ExprKind::Binary(BinOp::Add, Box::new(name("a", p(2, 13))), Box::new(num(1, p(2, 15)))),
                        pos: p(2, 10),
                    }),
                    Box::new(num(2, p(2, 18))),
                ),
                pos: p(2, 7),
            }
        );
        assert_eq!(
            w.body,
            vec![
                Stmt::Assign {
                    target: Target { name: "Report.a".into(), pos: p(2, 25) },
                    value: Value::Ewma { weight: num(2, p(2, 40)), sample: name("x", p(2, 42)) },
                    pos: p(2, 21),
                },
                Stmt::Fallthrough(p(2, 46)),
            ]
        );
    }

    #[test]
    fn aliases_and_sugar() {
        let s = parse_src("(def (Report (a 0))) (when (and (ge_is_not_an_alias) x) (report))");
        assert_eq!(s.unwrap_err().kind, ErrorKind::Syntax);
        let s = parse_src("(def (Report (a 0))) (when (or (not x) (>= a 1)) (bind y (!if c 1)))").unwrap();
        let ExprKind::Binary(BinOp::Or, l, r) = &s.whens[0].cond.kind else { panic!() };
        assert!(matches!(l.kind, ExprKind::Not(_)));
        assert!(matches!(r.kind, ExprKind::Binary(BinOp::Ge, _, _)));
        assert!(matches!(&s.whens[0].body[0], Stmt::Assign { value: Value::Cond { negated: true, .. }, .. }));
    }

    fn err(src: &str) -> CompileError {
        parse_src(src).unwrap_err()
    }

    #[test]
    fn structural_errors_have_positions() {
        assert_eq!(err("").pos(), p(1, 1));
        let e = err("(def (Report (a 0)))\n  (when true (report)");
        assert_eq!((e.pos(), e.kind), (p(2, 3), ErrorKind::Syntax));
        assert!(e.message.contains("never closed"), "{e}");
        let e = err("(def (Report (a 0))))");
        assert_eq!(e.pos(), p(1, 21));
        let e = err("(when true (report))");
        assert!(e.message.contains("must start with `(def"), "{e}");
        let e = err("(def (Report (a 0)))");
        assert!(e.message.contains("at least one `(when"), "{e}");
        let e = err("(def (Report (a 0))) (when true (report)) (def (x 0))");
        assert!(e.message.contains("only one `(def"), "{e}");
        let e = err("(def (Report (a 0)) (Report (b 0))) (when true (report))");
        assert!(e.message.contains("second `(Report"), "{e}");
    }

    #[test]
    fn statement_errors() {
        let e = err("(def (Report (a 0))) (when true (if true (:= a 5)))");
        assert!(e.message.contains("not a statement"), "{e}");
        assert_eq!(e.pos(), p(1, 33));
        let e = err("(def (Report (a 0))) (when true (+ 3 4))");
        assert!(e.message.contains("discarded"), "{e}");
        let e = err("(def (Report (a 0))) (when true (reset))");
        assert!(e.message.contains("(:= Micros 0)"), "{e}");
        let e = err("(def (Report (a 0))) (when true (:= (x) 1))");
        assert!(e.message.contains("must be a variable name"), "{e}");
        let e = err("(def (Report (a 0))) (when true (report 1))");
        assert!(e.message.contains("takes 0 arguments, found 1"), "{e}");
    }

    #[test]
    fn expression_errors() {
        let e = err("(def (Report (a 0))) (when (+ 1 2 3) (report))");
        assert!(e.message.contains("`+` takes 2 arguments, found 3"), "{e}");
        let e = err("(def (Report (a 0))) (when (foo 1 2) (report))");
        assert!(e.message.contains("unknown operator `foo`"), "{e}");
        let e = err("(def (Report (a 0))) (when true (:= a (+ (if c 1) 2)))");
        assert!(e.message.contains("whole value of an assignment"), "{e}");
        let e = err("(def (Report (a 0))) (when (report) (report))");
        assert!(e.message.contains("is a statement"), "{e}");
        let e = err("(def (Report (a 0))) (when true (:= a -5))");
        assert!(e.message.contains("negative"), "{e}");
        let e = err("(def (Report (a 0))) (when true (:= a +))");
        assert!(e.message.contains("is an operator"), "{e}");
        let e = err("(def (Report (a 0))) (when true (:= a 99999999999999999999999))");
        assert_eq!(e.kind, ErrorKind::Limit(Limit::Immediate));
        let e = err("(def (Report (a 0))) (when () (report))");
        assert!(e.message.contains("expected an operator"), "{e}");
    }

    #[test]
    fn name_errors() {
        let e = err("(def (Report (__x 0))) (when true (report))");
        assert_eq!(e.kind, ErrorKind::Name);
        let e = err("(def (Report (a.b 0))) (when true (report))");
        assert!(e.message.contains("cannot contain `.`"), "{e}");
        let e = err("(def (Report (a 0)) (1x 0)) (when true (report))");
        assert!(e.message.contains("is not a name"), "{e}");
        let e = err("(def (Report (a b))) (when true (report))");
        assert!(e.message.contains("must be a literal"), "{e}");
    }

    #[test]
    fn nesting_limit() {
        let deep = format!("(def (Report (a 0))) (when {}true{} (report))", "(not ".repeat(200), ")".repeat(200));
        let e = err(&deep);
        assert_eq!(e.kind, ErrorKind::Limit(Limit::Nesting));
        assert!(e.message.contains(&MAX_NESTING.to_string()), "{e}");
    }
}
