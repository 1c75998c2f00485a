//! A compiled program: what to install on a datapath, and the names the agent needs to read its
//! reports and update its control variables.

use std::fmt;

use ccp_wire::{implicit, Event, Install, Instr, Primitive, RegKind, UpdateField};

/// The two value types of the language. Booleans are stored as 0/1 in u64 registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    Num,
    Bool,
}

impl ValueType {
    /// "a number" / "a boolean", for messages.
    pub(crate) fn article_name(self) -> &'static str {
        match self {
            ValueType::Num => "a number",
            ValueType::Bool => "a boolean",
        }
    }
}

/// A `Report.<name>` register. libccp sends report registers `[0, n)` in every MEASURE, so
/// `index` is the field's position in a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportField {
    /// The name without the `Report.` prefix.
    pub name: String,
    pub index: usize,
    /// Reset to `default` after each report.
    pub volatile: bool,
    /// The value the register starts with (and is reset to, if volatile); `+infinity` is
    /// 0xFFFFFFFF, booleans are 0/1.
    pub default: u64,
    pub ty: ValueType,
}

/// A control variable: set by the program's default, updated by the agent with UPDATE_FIELDS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlVar {
    pub name: String,
    pub index: u32,
    /// Reset to `default` after each report.
    pub volatile: bool,
    /// See [`ReportField::default`].
    pub default: u64,
    pub ty: ValueType,
}

impl ControlVar {
    /// The register class the datapath knows this variable by.
    pub fn kind(&self) -> RegKind {
        if self.volatile {
            RegKind::VolatileControl
        } else {
            RegKind::NonVolatileControl
        }
    }
}

/// Why [`Program::control_update`] refused to build an update.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    #[error("the program has no control variable named `{0}` (and it is not `Cwnd` or `Rate`)")]
    UnknownControl(String),
    #[error("control variable `{name}` is a boolean, so it takes 0 or 1, not {value}")]
    NotABool { name: String, value: u64 },
    #[error("`{name}` is passed to the datapath as a u32, so {value} does not fit")]
    TooLargeForU32 { name: &'static str, value: u64 },
}

/// A compiled datapath program.
///
/// Invariants (established by [`crate::compile`]): at most 255 instructions; DEF instructions
/// first; events cover the rest contiguously; report fields are indices `0..n` with `n >= 1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub(crate) events: Vec<Event>,
    pub(crate) instrs: Vec<Instr>,
    pub(crate) reports: Vec<ReportField>,
    pub(crate) controls: Vec<ControlVar>,
}

impl Program {
    /// One event per `when` clause, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The DEF preamble followed by each clause's condition and body instructions.
    pub fn instrs(&self) -> &[Instr] {
        &self.instrs
    }

    /// Report fields in index order (the order of the values in a report).
    pub fn report_fields(&self) -> &[ReportField] {
        &self.reports
    }

    /// Position of a report field in a report's values; `name` may carry the `Report.` prefix.
    pub fn report_index(&self, name: &str) -> Option<usize> {
        let name = name.strip_prefix("Report.").unwrap_or(name);
        self.reports.iter().find(|f| f.name == name).map(|f| f.index)
    }

    /// Control variables in index order.
    pub fn controls(&self) -> &[ControlVar] {
        &self.controls
    }

    pub fn control(&self, name: &str) -> Option<&ControlVar> {
        self.controls.iter().find(|c| c.name == name)
    }

    /// The INSTALL message for this program. libccp wipes its program table when it receives
    /// `program_uid == 1` (its "agent restarted" convention).
    pub fn install(&self, program_uid: u32) -> Install {
        Install { program_uid, events: self.events.clone(), instrs: self.instrs.clone() }
    }

    /// An UPDATE_FIELDS / CHANGE_PROG entry setting control variable `name` to `value`.
    /// `Cwnd` and `Rate` are accepted too (libccp applies them at the flow's next invocation
    /// and hands them to the datapath as u32). Booleans take 0 or 1 only: `&&`, `||` and `==`
    /// compile to arithmetic that assumes it.
    pub fn control_update(&self, name: &str, value: u64) -> Result<UpdateField, UpdateError> {
        let implicit = match name {
            "Cwnd" => Some(("Cwnd", implicit::CWND)),
            "Rate" => Some(("Rate", implicit::RATE)),
            _ => None,
        };
        if let Some((name, index)) = implicit {
            if value > u64::from(u32::MAX) {
                return Err(UpdateError::TooLargeForU32 { name, value });
            }
            return Ok(UpdateField { kind: RegKind::Implicit, index, value });
        }
        let var = self.control(name).ok_or_else(|| UpdateError::UnknownControl(name.to_string()))?;
        if var.ty == ValueType::Bool && value > 1 {
            return Err(UpdateError::NotABool { name: var.name.clone(), value });
        }
        Ok(UpdateField { kind: var.kind(), index: var.index, value })
    }
}

/// An assembly listing, one instruction per line, for debugging and golden tests.
impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.events.iter().enumerate() {
            writeln!(
                f,
                "when #{i}: condition {}..{}, body {}..{}",
                e.flag_idx,
                e.flag_idx.saturating_add(e.num_flag_instrs),
                e.body_idx,
                e.body_idx.saturating_add(e.num_body_instrs)
            )?;
        }
        for (i, instr) in self.instrs.iter().enumerate() {
            writeln!(
                f,
                "{i:3}: {:<6} {} <- {}, {}",
                op_name(instr.op),
                RegName(instr.res),
                RegName(instr.left),
                RegName(instr.right)
            )?;
        }
        Ok(())
    }
}

fn op_name(op: ccp_wire::Op) -> &'static str {
    use ccp_wire::Op;
    match op {
        Op::Add => "add",
        Op::Bind => "bind",
        Op::Def => "def",
        Op::Div => "div",
        Op::Equiv => "eq",
        Op::Ewma => "ewma",
        Op::Gt => "gt",
        Op::If => "if",
        Op::Lt => "lt",
        Op::Max => "max",
        Op::MaxWrap => "maxw",
        Op::Min => "min",
        Op::Mul => "mul",
        Op::NotIf => "!if",
        Op::Sub => "sub",
    }
}

/// Register as written in listings: `vrep0`/`rep0` (volatile/non-volatile report), `vctl0`/`ctl0`,
/// `tmp0`, `local0`, `$flag`/`$fallthrough`/`$report`, `Micros`/`Cwnd`/`Rate`, primitive names,
/// and immediates as plain numbers.
struct RegName(ccp_wire::Reg);

impl fmt::Display for RegName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.0.index;
        match self.0.kind {
            RegKind::Immediate => write!(f, "{i}"),
            RegKind::VolatileReport => write!(f, "vrep{i}"),
            RegKind::NonVolatileReport => write!(f, "rep{i}"),
            RegKind::VolatileControl => write!(f, "vctl{i}"),
            RegKind::NonVolatileControl => write!(f, "ctl{i}"),
            RegKind::Tmp => write!(f, "tmp{i}"),
            RegKind::Local => write!(f, "local{i}"),
            RegKind::Primitive => match usize::try_from(i).ok().and_then(|i| Primitive::ALL.get(i)) {
                Some(p) => f.write_str(p.name()),
                None => write!(f, "prim{i}"),
            },
            RegKind::Implicit => match i {
                implicit::EXPR_FLAG => f.write_str("$flag"),
                implicit::SHOULD_FALLTHROUGH => f.write_str("$fallthrough"),
                implicit::SHOULD_REPORT => f.write_str("$report"),
                implicit::MICROS => f.write_str("Micros"),
                implicit::CWND => f.write_str("Cwnd"),
                implicit::RATE => f.write_str("Rate"),
                _ => write!(f, "implicit{i}"),
            },
        }
    }
}
