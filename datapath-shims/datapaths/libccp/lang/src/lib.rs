//! A compiler for the CCP datapath program language (the small Lisp of portus' `lang` module),
//! targeting libccp 1.2's instruction set, plus a reference interpreter of libccp's machine.
//!
//! ```
//! let program = ccp_lang::compile(
//!     "(def (Report (volatile acked 0)) (interval_us 10000))
//!      (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (fallthrough))
//!      (when (> Micros interval_us) (report) (:= Micros 0))",
//! )?;
//! assert_eq!(program.report_index("acked"), Some(0));
//! let install = program.install(1);
//! let update = program.control_update("interval_us", 20_000)?;
//! # let _ = (install, update);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Passes: `lexer` (tokens) → `parser` (S-expressions, then the `ast`) → `typecheck` (names
//! to registers, types, limits that need no code) → `codegen` (instructions, tmp allocation,
//! the instruction limit) → [`Program`]. [`interp`] runs programs the way libccp does, for tests. The README describes the language as
//! accepted here and how it differs from portus.

mod ast;
mod codegen;
mod error;
pub mod interp;
mod lexer;
mod parser;
mod program;
mod typecheck;

pub use error::{CompileError, ErrorKind, Limit, Pos};
pub use program::{ControlVar, Program, ReportField, UpdateError, ValueType};

/// Compiles a datapath program. Never panics; every rejection is a [`CompileError`] with the
/// source position it is about.
pub fn compile(src: &str) -> Result<Program, CompileError> {
    let source = parser::parse(lexer::tokenize(src))?;
    let checked = typecheck::check(&source)?;
    codegen::generate(checked)
}
