//! Datapath programs as libccp executes them: events (`when` clauses) over a flat instruction list.
//!
//! These are the wire-level types shared by the codec (INSTALL messages) and the compiler
//! (`ccp-lang`). Semantics follow libccp's `machine.c`.

/// Instruction opcodes (libccp `enum FoldOp`, wire value in the comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    Add = 0,
    Bind = 1,
    /// Declares a report/control register's default: `DEF left := right` (only at the start).
    Def = 2,
    Div = 3,
    Equiv = 4,
    /// `res := (left·res + (10−left)·right)/10`, or `right` when `res` is 0.
    Ewma = 5,
    Gt = 6,
    /// `if left { res := right }`
    If = 7,
    Lt = 8,
    Max = 9,
    /// Max under u32 sequence-number wrap-around.
    MaxWrap = 10,
    Min = 11,
    Mul = 12,
    /// `if !left { res := right }`
    NotIf = 13,
    Sub = 14,
}

impl Op {
    pub const ALL: [Op; 15] = [
        Op::Add,
        Op::Bind,
        Op::Def,
        Op::Div,
        Op::Equiv,
        Op::Ewma,
        Op::Gt,
        Op::If,
        Op::Lt,
        Op::Max,
        Op::MaxWrap,
        Op::Min,
        Op::Mul,
        Op::NotIf,
        Op::Sub,
    ];

    pub fn from_u8(v: u8) -> Option<Op> {
        Op::ALL.get(usize::from(v)).copied()
    }
}

/// Register classes (libccp `*_REG` defines, wire value in the comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RegKind {
    /// Control variable, keeps its value across reports.
    NonVolatileControl = 0,
    /// The register's 32-bit field *is* the value.
    Immediate = 1,
    /// `__eventFlag`(0), `__shouldFallthrough`(1), `__shouldReport`(2), `Micros`(3), `Cwnd`(4), `Rate`(5).
    Implicit = 2,
    /// Variables bound inside a `when` body.
    Local = 3,
    /// Read-only measurements (`Ack.*`, `Flow.*`); see `Primitive`.
    Primitive = 4,
    /// Report field reset to its default after each report.
    VolatileReport = 5,
    /// Report field that keeps its value across reports.
    NonVolatileReport = 6,
    /// Scratch registers for expression evaluation.
    Tmp = 7,
    /// Control variable reset to its default after each report.
    VolatileControl = 8,
}

impl RegKind {
    pub fn from_u8(v: u8) -> Option<RegKind> {
        Some(match v {
            0 => RegKind::NonVolatileControl,
            1 => RegKind::Immediate,
            2 => RegKind::Implicit,
            3 => RegKind::Local,
            4 => RegKind::Primitive,
            5 => RegKind::VolatileReport,
            6 => RegKind::NonVolatileReport,
            7 => RegKind::Tmp,
            8 => RegKind::VolatileControl,
            _ => return None,
        })
    }
}

/// Implicit register indices.
pub mod implicit {
    pub const EXPR_FLAG: u32 = 0;
    pub const SHOULD_FALLTHROUGH: u32 = 1;
    pub const SHOULD_REPORT: u32 = 2;
    pub const MICROS: u32 = 3;
    pub const CWND: u32 = 4;
    pub const RATE: u32 = 5;
}

/// Primitive (per-ACK measurement) register indices, with their language names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Primitive {
    AckBytesAcked = 0,
    AckBytesMisordered = 1,
    AckEcnBytes = 2,
    AckEcnPackets = 3,
    AckLostPktsSample = 4,
    AckNow = 5,
    AckPacketsAcked = 6,
    AckPacketsMisordered = 7,
    FlowBytesInFlight = 8,
    FlowBytesPending = 9,
    FlowPacketsInFlight = 10,
    FlowRateIncoming = 11,
    FlowRateOutgoing = 12,
    FlowRttSampleUs = 13,
    FlowWasTimeout = 14,
}

impl Primitive {
    pub const ALL: [Primitive; 15] = [
        Primitive::AckBytesAcked,
        Primitive::AckBytesMisordered,
        Primitive::AckEcnBytes,
        Primitive::AckEcnPackets,
        Primitive::AckLostPktsSample,
        Primitive::AckNow,
        Primitive::AckPacketsAcked,
        Primitive::AckPacketsMisordered,
        Primitive::FlowBytesInFlight,
        Primitive::FlowBytesPending,
        Primitive::FlowPacketsInFlight,
        Primitive::FlowRateIncoming,
        Primitive::FlowRateOutgoing,
        Primitive::FlowRttSampleUs,
        Primitive::FlowWasTimeout,
    ];

    /// The name programs use for it, e.g. `Ack.bytes_acked`.
    pub fn name(self) -> &'static str {
        match self {
            Primitive::AckBytesAcked => "Ack.bytes_acked",
            Primitive::AckBytesMisordered => "Ack.bytes_misordered",
            Primitive::AckEcnBytes => "Ack.ecn_bytes",
            Primitive::AckEcnPackets => "Ack.ecn_packets",
            Primitive::AckLostPktsSample => "Ack.lost_pkts_sample",
            Primitive::AckNow => "Ack.now",
            Primitive::AckPacketsAcked => "Ack.packets_acked",
            Primitive::AckPacketsMisordered => "Ack.packets_misordered",
            Primitive::FlowBytesInFlight => "Flow.bytes_in_flight",
            Primitive::FlowBytesPending => "Flow.bytes_pending",
            Primitive::FlowPacketsInFlight => "Flow.packets_in_flight",
            Primitive::FlowRateIncoming => "Flow.rate_incoming",
            Primitive::FlowRateOutgoing => "Flow.rate_outgoing",
            Primitive::FlowRttSampleUs => "Flow.rtt_sample_us",
            Primitive::FlowWasTimeout => "Flow.was_timeout",
        }
    }

    /// True for boolean primitives.
    pub fn is_bool(self) -> bool {
        matches!(self, Primitive::FlowWasTimeout)
    }

    pub fn from_name(name: &str) -> Option<Primitive> {
        Primitive::ALL.iter().copied().find(|p| p.name() == name)
    }
}

/// A register operand: its class and index (for immediates, the value itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reg {
    pub kind: RegKind,
    pub index: u32,
}

impl Reg {
    pub const fn new(kind: RegKind, index: u32) -> Self {
        Reg { kind, index }
    }
    pub const fn imm(value: u32) -> Self {
        Reg { kind: RegKind::Immediate, index: value }
    }
}

/// One instruction: `res := op(left, right)` (16 bytes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Instr {
    pub op: Op,
    pub res: Reg,
    pub left: Reg,
    pub right: Reg,
}

/// A `when` clause: its condition instructions (which must leave the result in the implicit
/// `__eventFlag` register) and its body instructions, as absolute indices into the program's
/// instruction list (16 bytes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Event {
    pub flag_idx: u32,
    pub num_flag_instrs: u32,
    pub body_idx: u32,
    pub num_body_instrs: u32,
}

/// libccp's hard limits (libccp 1.2 `serialize.h`, `machine.c`), enforced by the codec and the compiler.
pub mod limits {
    /// libccp walks instructions with a `u8` index: a program whose instructions reach index 256
    /// makes `ccp_invoke` loop forever (measured), so 255 is the real ceiling.
    pub const MAX_INSTRUCTIONS: usize = 255;
    pub const MAX_EVENTS: usize = 256;
    pub const MAX_REPORT_REGS: usize = 110;
    pub const MAX_CONTROL_REGS: usize = 110;
    pub const MAX_TMP_REGS: usize = 8;
    pub const MAX_LOCAL_REGS: usize = 8;
    pub const MAX_IMPLICIT_REGS: usize = 6;
    /// Immediates travel in a u32 slot; portus and the DEF "infinity" convention keep them below 2^31.
    pub const MAX_IMMEDIATE: u32 = (1 << 31) - 1;
    /// The value libccp stores for "+infinity" (`(u64)~0U`).
    pub const INFINITY: u32 = u32::MAX;
    /// libccp's `BIGGEST_MSG_SIZE`.
    pub const MAX_MSG_BYTES: usize = 32678;
    /// Usable program slots per datapath lifetime (a 10-slot table with an off-by-one).
    pub const MAX_PROGRAMS_PER_DATAPATH: usize = 9;
    /// Length of the CREATE message's congestion-algorithm name field, including the NUL.
    pub const CONG_ALG_BYTES: usize = 64;
    /// Longest congestion-algorithm name the codec carries: the field minus its terminating NUL
    /// (portus panics on a name that fills all 64 bytes).
    pub const MAX_CONG_ALG_LEN: usize = CONG_ALG_BYTES - 1;
    /// Updates in one UPDATE_FIELDS message. libccp reads that count as `(u32)*buf` through a
    /// `char *` (`check_update_fields_msg`): only the low byte of the u32, sign-extended where
    /// `char` is signed (x86-64 user space, so 128..=255 become ~4e9 and are refused as
    /// `LIBCCP_UPDATE_TOO_MANY`) and taken as is where it is unsigned (kernels since 6.2, ARM),
    /// then capped at `MAX_MUTABLE_REG` (222). Up to 127 every build reads the count as sent.
    pub const MAX_UPDATE_FIELDS: usize = 127;
    /// Updates in one CHANGE_PROG message: read as a whole u32 (`memcpy` of `ChangeProgMsg`)
    /// and capped at libccp's `MAX_MUTABLE_REG`.
    pub const MAX_CHANGE_PROG_UPDATES: usize = 222;
}
