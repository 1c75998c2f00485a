//! Compile errors: every error carries the source position it is about and says what was
//! expected, so a rejected program can be fixed without reading the compiler.

use std::fmt;

/// A position in the source text (1-based line and column; columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// What class of problem a [`CompileError`] reports, for callers (and tests) that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Malformed text: parentheses, unknown operators, wrong number of arguments, bad literals.
    Syntax,
    /// A name that is undefined, reserved, declared twice, or used where it cannot be.
    Name,
    /// A boolean where a number is required or vice versa.
    Type,
    /// A libccp limit the program would exceed (see [`Limit`]).
    Limit(Limit),
    /// Well-formed and well-typed, but libccp would not do what the text says.
    Semantics,
}

/// The datapath limits the compiler enforces. Each one exists because libccp 1.2 misbehaves
/// (hangs, drops writes, truncates, or misreads) past it, mostly without any error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// ≤ 255 instructions: libccp walks a clause with a `u8` index, so an index of 256 wraps and
    /// `ccp_invoke` loops forever.
    Instructions,
    /// ≤ 8 scratch registers live at once: libccp silently drops writes to tmp registers ≥ 8.
    TmpRegisters,
    /// ≤ 8 locals: libccp silently drops writes to local registers ≥ 8.
    Locals,
    /// ≤ 110 report fields (`MAX_REPORT_REG`, sized to fit one MEASURE message).
    ReportFields,
    /// ≤ 110 control variables (`MAX_CONTROL_REG`).
    Controls,
    /// Immediates travel in a 32-bit slot and portus' convention keeps them below 2^31;
    /// only `+infinity` (sent as 0xFFFFFFFF) is above.
    Immediate,
    /// At least one report field: a MEASURE with zero fields means "flow closed" to the agent.
    NoReportFields,
    /// Parenthesis nesting deeper than the compiler accepts (it recurses on nesting).
    Nesting,
}

impl Limit {
    /// A short description that names the limit, used in error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Limit::Instructions => "at most 255 instructions per program (libccp loops forever at 256)",
            Limit::TmpRegisters => "at most 8 scratch registers live at once (libccp drops writes to tmp registers >= 8)",
            Limit::Locals => "at most 8 local variables (libccp drops writes to local registers >= 8)",
            Limit::ReportFields => "at most 110 report fields (libccp MAX_REPORT_REG)",
            Limit::Controls => "at most 110 control variables (libccp MAX_CONTROL_REG)",
            Limit::Immediate => "number literals must be below 2^31 (2147483648), or +infinity",
            Limit::NoReportFields => "at least one report field (a report with no fields means \"flow closed\")",
            Limit::Nesting => "parentheses nested at most 128 deep",
        }
    }
}

/// Why a program was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct CompileError {
    pub line: u32,
    pub column: u32,
    pub kind: ErrorKind,
    pub message: String,
}

impl CompileError {
    pub(crate) fn new(pos: Pos, kind: ErrorKind, message: impl Into<String>) -> Self {
        CompileError { line: pos.line, column: pos.column, kind, message: message.into() }
    }

    pub(crate) fn syntax(pos: Pos, message: impl Into<String>) -> Self {
        Self::new(pos, ErrorKind::Syntax, message)
    }

    pub(crate) fn name(pos: Pos, message: impl Into<String>) -> Self {
        Self::new(pos, ErrorKind::Name, message)
    }

    pub(crate) fn type_(pos: Pos, message: impl Into<String>) -> Self {
        Self::new(pos, ErrorKind::Type, message)
    }

    pub(crate) fn semantics(pos: Pos, message: impl Into<String>) -> Self {
        Self::new(pos, ErrorKind::Semantics, message)
    }

    /// An error for exceeding `limit`; the message names the limit after `what`.
    pub(crate) fn limit(pos: Pos, limit: Limit, what: impl fmt::Display) -> Self {
        Self::new(pos, ErrorKind::Limit(limit), format!("{what}; the limit is {}", limit.describe()))
    }

    /// The position the error is about.
    pub fn pos(&self) -> Pos {
        Pos { line: self.line, column: self.column }
    }
}
