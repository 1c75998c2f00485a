//! The six libccp message types, as plain data. Encoding and decoding live in `codec`.

use crate::program::{Event, Instr, RegKind};

/// Message type numbers on the wire.
pub mod msg_type {
    pub const CREATE: u16 = 0;
    pub const MEASURE: u16 = 1;
    pub const INSTALL: u16 = 2;
    pub const UPDATE_FIELDS: u16 = 3;
    pub const CHANGE_PROG: u16 = 4;
    pub const READY: u16 = 5;
}

/// A new flow (datapath → agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    pub sid: u32,
    /// Initial congestion window, bytes.
    pub init_cwnd: u32,
    pub mss: u32,
    /// Addresses and ports exactly as the datapath sent them (ccp-kernel: network byte order).
    pub src_ip: u32,
    pub src_port: u32,
    pub dst_ip: u32,
    pub dst_port: u32,
    /// The congestion-algorithm name the datapath asked for, if any (≤ 63 bytes).
    pub cong_alg: Option<String>,
}

/// A report of a flow's program registers (datapath → agent). Zero fields means the flow closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measure {
    pub sid: u32,
    pub program_uid: u32,
    pub fields: Vec<u64>,
}

impl Measure {
    /// libccp signals a closed flow with a MEASURE that carries no fields and program uid 0
    /// (`ccp_connection_free`).
    pub fn is_close(&self) -> bool {
        self.fields.is_empty() && self.program_uid == 0
    }

    /// A report with no fields from a real program: libccp computes a program's field count
    /// lazily (`reset_state`), so the first report a flow sends after its program table was
    /// rewritten under it carries nothing. It is not a close.
    pub fn is_empty_report(&self) -> bool {
        self.fields.is_empty() && self.program_uid != 0
    }
}

/// A datapath program (agent → datapath). Installing `program_uid == 1` wipes the datapath's
/// program table first (libccp's restart convention).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    pub program_uid: u32,
    pub events: Vec<Event>,
    pub instrs: Vec<Instr>,
}

/// One register update inside UPDATE_FIELDS / CHANGE_PROG (13 bytes on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateField {
    pub kind: RegKind,
    pub index: u32,
    pub value: u64,
}

/// Set control registers or Cwnd/Rate of a flow (agent → datapath).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateFields {
    pub sid: u32,
    pub fields: Vec<UpdateField>,
}

/// Switch a flow to an installed program, with initial register values (agent → datapath).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeProg {
    pub sid: u32,
    pub program_uid: u32,
    pub updates: Vec<UpdateField>,
}

/// A datapath announcing itself (datapath → agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub datapath_id: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Create(Create),
    Measure(Measure),
    Install(Install),
    UpdateFields(UpdateFields),
    ChangeProg(ChangeProg),
    Ready(Ready),
}
