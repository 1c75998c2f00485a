//! The program as written, after parsing. Expressions and statements are generic over their
//! leaves and assignment targets so that the type checker can produce the same shapes with
//! names resolved to registers (`typecheck::Operand`, `typecheck::Var`) for code generation.

use crate::error::Pos;

/// A literal as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Literal {
    Num(u64),
    Bool(bool),
    /// `+infinity`: libccp stores it as `u32::MAX` (0xFFFFFFFF), not `u64::MAX`.
    Infinity,
}

/// A leaf of a parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Leaf {
    Lit(Literal),
    Name(String),
}

/// Binary operators, including the sugar (`>=`, `<=`, `!=`) that code generation expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    WrappedMax,
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    And,
    Or,
}

impl BinOp {
    /// The canonical spelling, for error messages.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Max => "max",
            BinOp::Min => "min",
            BinOp::WrappedMax => "wrapped_max",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Gt => ">",
            BinOp::Lt => "<",
            BinOp::Ge => ">=",
            BinOp::Le => "<=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expr<L> {
    pub kind: ExprKind<L>,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExprKind<L> {
    Leaf(L),
    Binary(BinOp, Box<Expr<L>>, Box<Expr<L>>),
    Not(Box<Expr<L>>),
}

/// The right-hand side of `:=`. `ewma`, `if` and `!if` read or conditionally keep the target's
/// old value, so they only exist as the whole value of an assignment, never inside expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value<L> {
    Expr(Expr<L>),
    /// `(ewma weight sample)`: target := (weight·target + (10−weight)·sample)/10, or sample
    /// when target is 0.
    Ewma {
        weight: Expr<L>,
        sample: Expr<L>,
    },
    /// `(if cond value)` (`negated` false) or `(!if cond value)` (`negated` true).
    Cond {
        negated: bool,
        cond: Expr<L>,
        value: Expr<L>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stmt<L, T> {
    Assign { target: T, value: Value<L>, pos: Pos },
    Report(Pos),
    Fallthrough(Pos),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct When<L, T> {
    pub cond: Expr<L>,
    pub body: Vec<Stmt<L, T>>,
    pub pos: Pos,
}

/// A parsed assignment target: the name and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub name: String,
    pub pos: Pos,
}

/// One `(name default)` or `(volatile name default)` declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decl {
    /// For report fields, the name without the `Report.` prefix.
    pub name: String,
    pub volatile: bool,
    pub default: Literal,
    pub pos: Pos,
    pub default_pos: Pos,
}

/// A parsed program: the `(def ...)` and the `(when ...)` clauses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    pub reports: Vec<Decl>,
    pub controls: Vec<Decl>,
    pub def_pos: Pos,
    pub whens: Vec<When<Leaf, Target>>,
}
