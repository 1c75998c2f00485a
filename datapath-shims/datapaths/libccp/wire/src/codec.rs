//! Encoding and decoding of libccp messages.
//!
//! Why a codec of our own: portus's parser panics or stops its runtime on malformed datagrams,
//! and libccp trusts every count and register index it is sent (it writes kernel memory with
//! them). This codec sits between the two: [`decode`] accepts any byte string without panicking
//! and without allocating more than the message's own length justifies, and [`Msg::encode`]
//! refuses anything libccp would misread or mis-execute. Both directions run the same content
//! checks, so a message `decode` accepts always encodes again and decodes to itself.
//!
//! Layouts (little-endian; verified against libccp 1.2 `serialize.h`/`ccp.c`/`machine.c` and
//! portus 0.9 `serialize/*.rs`, `lang/serialize.rs`). Every message starts with the 8-byte header
//! `u16 type | u16 len (whole message) | u32 sock_id`; offsets below count from the message start.
//!
//! | type | name | body | total |
//! |---|---|---|---|
//! | 0 | CREATE | `u32 init_cwnd, mss, src_ip, src_port, dst_ip, dst_port` @8, `char congAlg[64]` @32 | 96 |
//! | 1 | MEASURE | `u32 program_uid` @8, `u32 num_fields` @12, `u64 fields[n]` @16 | 16 + 8n |
//! | 2 | INSTALL | `u32 program_uid, num_events, num_instrs` @8, `Event[E]` @20, `Instr[I]` | 20 + 16(E+I) |
//! | 3 | UPDATE_FIELDS | `u32 num_updates` @8, `Update[n]` @12 | 12 + 13n |
//! | 4 | CHANGE_PROG | `u32 program_uid` @8, `u32 num_updates` @12, `Update[n]` @16 | 16 + 13n |
//! | 5 | READY | `u32 datapath_id` @8 | 12 |
//!
//! * `Event` (`struct ExpressionMsg`, 16 B): `u32 flag_idx, num_flag_instrs, body_idx, num_body_instrs`.
//! * `Instr` (`struct InstructionMsg`, `packed, aligned(4)`, 16 B with no padding): `u8 opcode` @0,
//!   `u8 res_type` @1, `u32 res` @2, `u8 left_type` @6, `u32 left` @7, `u8 right_type` @11, `u32 right` @12.
//! * `Update` (`struct UpdateField`, `packed, aligned(1)`, 13 B): `u8 reg_type` @0, `u32 reg_index` @1, `u64 value` @5.
//!
//! libccp quirks the checks account for:
//! * UPDATE_FIELDS' count is read as one `char` (see [`limits::MAX_UPDATE_FIELDS`]): at most 127 updates.
//! * libccp's instruction-count check runs before the count is read (dead code) and its
//!   interpreter walks instructions with a `u8`: at most [`limits::MAX_INSTRUCTIONS`] (255), and every
//!   event range must end inside the instruction list, or `ccp_invoke` loops forever.
//! * Register indices are never bounds-checked by libccp: each must be below libccp's array size.
//! * INSTALL's and READY's sock_id is ignored by libccp (portus uses 0, its tests 1): it is not
//!   kept when decoding and is encoded as 0.
//! * Immediates must be below 2^31 or be `0xffffffff` (+infinity), as portus emits them.
//! * A congAlg that is not UTF-8 is decoded lossily, and a name is at most 63 bytes (a longer
//!   decoded name, e.g. one without NUL, is cut at a character boundary): a weird name must not
//!   drop a flow, and the encoder never emits a name without its NUL (portus panics on one).

use std::fmt;
use std::iter::FusedIterator;

use crate::msg::{msg_type, ChangeProg, Create, Install, Measure, Msg, Ready, UpdateField, UpdateFields};
use crate::program::{implicit, limits, Event, Instr, Op, Primitive, Reg, RegKind};

/// Size of the libccp message header.
pub const HEADER_LEN: usize = 8;
const CREATE_LEN: usize = 96;
const READY_LEN: usize = 12;
const MEASURE_FIXED: usize = 16;
const INSTALL_FIXED: usize = 20;
const UPDATE_FIELDS_FIXED: usize = 12;
const CHANGE_PROG_FIXED: usize = 16;
const EVENT_LEN: usize = 16;
const INSTR_LEN: usize = 16;
const UPDATE_LEN: usize = 13;

fn type_name(msg_type: &u16) -> &'static str {
    match *msg_type {
        msg_type::CREATE => "CREATE",
        msg_type::MEASURE => "MEASURE",
        msg_type::INSTALL => "INSTALL",
        msg_type::UPDATE_FIELDS => "UPDATE_FIELDS",
        msg_type::CHANGE_PROG => "CHANGE_PROG",
        msg_type::READY => "READY",
        _ => "unknown",
    }
}

/// Which operand of an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    Result,
    Left,
    Right,
}

/// Where in a message a register sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// An operand of the instruction with this index.
    Instr { index: usize, operand: Operand },
    /// The register of the update (UPDATE_FIELDS / CHANGE_PROG) with this index.
    Update(usize),
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Instr { index, operand } => {
                let which = match operand {
                    Operand::Result => "result",
                    Operand::Left => "left",
                    Operand::Right => "right",
                };
                write!(f, "instruction {index} {which} register")
            }
            Slot::Update(index) => write!(f, "update {index}"),
        }
    }
}

/// The two instruction ranges of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventPart {
    Condition,
    Body,
}

impl fmt::Display for EventPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventPart::Condition => "condition",
            EventPart::Body => "body",
        })
    }
}

/// Something in a message's contents that libccp would misread or mis-execute. Shared by
/// [`DecodeError::Content`] and [`EncodeError::Content`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("{count} {what} exceed the limit of {max}")]
    TooMany { what: &'static str, count: u64, max: usize },
    #[error("instruction {instr}: unknown opcode {opcode} (valid: 0..=14)")]
    Opcode { instr: usize, opcode: u8 },
    #[error("{slot}: unknown register type {kind} (valid: 0..=8)")]
    RegType { slot: Slot, kind: u8 },
    #[error("{slot}: {kind:?} index {index} out of range (libccp has {available})")]
    RegIndex { slot: Slot, kind: RegKind, index: u32, available: usize },
    #[error("{slot}: immediate {value:#x} is neither below 2^31 nor +infinity (0xffffffff)")]
    Immediate { slot: Slot, value: u32 },
    #[error("instruction {instr}: result register is {kind:?}, which is read-only")]
    ReadOnlyResult { instr: usize, kind: RegKind },
    #[error("event {event}: {part} instructions {start}..{start}+{count} reach past the {num_instrs} instructions")]
    EventRange { event: usize, part: EventPart, start: u32, count: u32, num_instrs: usize },
    #[error("update {update}: libccp only updates control registers, Cwnd and Rate, not {kind:?} {index}")]
    UpdateTarget { update: usize, kind: RegKind, index: u32 },
}

/// Why a byte string is not a valid libccp message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated libccp header: {available} bytes, need 8")]
    ShortHeader { available: usize },
    #[error("{} message (type {msg_type}): header length {len} is shorter than the 8-byte header", type_name(.msg_type))]
    LenBelowHeader { msg_type: u16, len: u16 },
    #[error("{} message (type {msg_type}): header length {len} exceeds the {available} bytes received", type_name(.msg_type))]
    LenBeyondBuffer { msg_type: u16, len: u16, available: usize },
    /// A message type this codec does not know; skip `len` bytes to reach the next message.
    #[error("unknown message type {msg_type} ({len} bytes)")]
    UnknownType { msg_type: u16, len: u16 },
    #[error("{} message: length {len} cannot hold its fixed fields ({min} bytes)", type_name(.msg_type))]
    TooShort { msg_type: u16, len: u16, min: usize },
    #[error("{} message: header length {len}, but its counts make it {expected} bytes", type_name(.msg_type))]
    LenMismatch { msg_type: u16, len: u16, expected: usize },
    #[error("{} message ({len} bytes), byte {offset}: {error}", type_name(.msg_type))]
    Content { msg_type: u16, len: u16, offset: usize, error: ContentError },
    #[error("netlink datagram of {available} bytes is shorter than the 16-byte nlmsghdr")]
    NetlinkShort { available: usize },
    #[error("netlink nlmsg_len {nlmsg_len} is outside 16..={available} (the datagram's size)")]
    NetlinkLen { nlmsg_len: u32, available: usize },
}

impl DecodeError {
    /// How many bytes the failed message occupied, when its header's length can be trusted
    /// (the header was complete and its length within the buffer): a caller can skip that many
    /// bytes and go on with the next message. `None` when the rest of the buffer is unusable.
    pub fn skip_len(&self) -> Option<usize> {
        match self {
            DecodeError::UnknownType { len, .. }
            | DecodeError::TooShort { len, .. }
            | DecodeError::LenMismatch { len, .. }
            | DecodeError::Content { len, .. } => Some(usize::from(*len)),
            DecodeError::ShortHeader { .. }
            | DecodeError::LenBelowHeader { .. }
            | DecodeError::LenBeyondBuffer { .. }
            | DecodeError::NetlinkShort { .. }
            | DecodeError::NetlinkLen { .. } => None,
        }
    }
}

/// Why a message cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("{} message: {error}", type_name(.msg_type))]
    Content { msg_type: u16, error: ContentError },
    #[error("CREATE message: congestion-algorithm name is {len} bytes; at most 63 fit with the NUL")]
    CongAlgTooLong { len: usize },
    #[error("CREATE message: congestion-algorithm name has a NUL byte at {pos}")]
    CongAlgNul { pos: usize },
    #[error("CREATE message: empty congestion-algorithm name (use None)")]
    CongAlgEmpty,
    #[error("{} message would be {len} bytes, over libccp's limit of {max}", type_name(.msg_type))]
    TooLong { msg_type: u16, len: usize, max: usize },
}

// ---------------------------------------------------------------------------------------------
// Content checks, shared by the decoder and the encoder.

/// How many registers of a kind libccp has (`None` for immediates, which carry a value).
fn reg_capacity(kind: RegKind) -> Option<usize> {
    Some(match kind {
        RegKind::Immediate => return None,
        RegKind::NonVolatileControl | RegKind::VolatileControl => limits::MAX_CONTROL_REGS,
        RegKind::Implicit => limits::MAX_IMPLICIT_REGS,
        RegKind::Local => limits::MAX_LOCAL_REGS,
        RegKind::Primitive => Primitive::ALL.len(),
        RegKind::VolatileReport | RegKind::NonVolatileReport => limits::MAX_REPORT_REGS,
        RegKind::Tmp => limits::MAX_TMP_REGS,
    })
}

fn index_below(index: u32, available: usize) -> bool {
    usize::try_from(index).is_ok_and(|i| i < available)
}

fn check_count(what: &'static str, count: usize, max: usize) -> Result<(), ContentError> {
    if count > max {
        return Err(ContentError::TooMany { what, count: count as u64, max });
    }
    Ok(())
}

fn check_reg(slot: Slot, reg: Reg) -> Result<(), ContentError> {
    match reg_capacity(reg.kind) {
        None if reg.index <= limits::MAX_IMMEDIATE || reg.index == limits::INFINITY => Ok(()),
        None => Err(ContentError::Immediate { slot, value: reg.index }),
        Some(available) if index_below(reg.index, available) => Ok(()),
        Some(available) => Err(ContentError::RegIndex { slot, kind: reg.kind, index: reg.index, available }),
    }
}

fn check_instr(index: usize, instr: &Instr) -> Result<(), ContentError> {
    if matches!(instr.res.kind, RegKind::Immediate | RegKind::Primitive) {
        return Err(ContentError::ReadOnlyResult { instr: index, kind: instr.res.kind });
    }
    for (operand, reg) in [(Operand::Result, instr.res), (Operand::Left, instr.left), (Operand::Right, instr.right)] {
        check_reg(Slot::Instr { index, operand }, reg)?;
    }
    Ok(())
}

fn check_event(index: usize, event: &Event, num_instrs: usize) -> Result<(), ContentError> {
    for (part, start, count) in
        [(EventPart::Condition, event.flag_idx, event.num_flag_instrs), (EventPart::Body, event.body_idx, event.num_body_instrs)]
    {
        if u64::from(start) + u64::from(count) > num_instrs as u64 {
            return Err(ContentError::EventRange { event: index, part, start, count, num_instrs });
        }
    }
    Ok(())
}

fn check_update(index: usize, update: &UpdateField) -> Result<(), ContentError> {
    let slot = Slot::Update(index);
    match update.kind {
        RegKind::NonVolatileControl | RegKind::VolatileControl => check_reg(slot, Reg::new(update.kind, update.index)),
        RegKind::Implicit if update.index == implicit::CWND || update.index == implicit::RATE => Ok(()),
        kind => Err(ContentError::UpdateTarget { update: index, kind, index: update.index }),
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding.

/// Decodes the one message at the start of `buf`, returning it and the bytes it occupied (its
/// header's length; anything after that is left for the caller).
///
/// Never panics. The header's length must lie between 8 and `buf.len()` and equal exactly the
/// size the message's counts imply; counts, opcodes, register types and indices, immediates,
/// event ranges and update targets must all be within libccp's limits (see the module docs).
/// On an error, [`DecodeError::skip_len`] tells whether the next message can still be found.
pub fn decode(buf: &[u8]) -> Result<(Msg, usize), DecodeError> {
    let header: [u8; HEADER_LEN] =
        buf.get(..HEADER_LEN).and_then(|h| h.try_into().ok()).ok_or(DecodeError::ShortHeader { available: buf.len() })?;
    let msg_type = u16::from_le_bytes([header[0], header[1]]);
    let len = u16::from_le_bytes([header[2], header[3]]);
    let sid = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let total = usize::from(len);
    if total < HEADER_LEN {
        return Err(DecodeError::LenBelowHeader { msg_type, len });
    }
    let msg = buf.get(..total).ok_or(DecodeError::LenBeyondBuffer { msg_type, len, available: buf.len() })?;
    let mut r = Reader { msg, pos: HEADER_LEN, msg_type, len };
    let decoded = match msg_type {
        msg_type::CREATE => Msg::Create(decode_create(&mut r, sid)?),
        msg_type::MEASURE => Msg::Measure(decode_measure(&mut r, sid)?),
        msg_type::INSTALL => Msg::Install(decode_install(&mut r)?),
        msg_type::UPDATE_FIELDS => Msg::UpdateFields(decode_update_fields(&mut r, sid)?),
        msg_type::CHANGE_PROG => Msg::ChangeProg(decode_change_prog(&mut r, sid)?),
        msg_type::READY => Msg::Ready(decode_ready(&mut r)?),
        _ => return Err(DecodeError::UnknownType { msg_type, len }),
    };
    Ok((decoded, total))
}

/// Decodes every message in `buf` (libccp peers may put several in one datagram), in order.
///
/// After an error whose message length can be trusted ([`DecodeError::skip_len`]) decoding goes
/// on with the next message; after any other error the iterator ends.
pub fn decode_all(buf: &[u8]) -> DecodeAll<'_> {
    DecodeAll { rest: buf }
}

/// Iterator returned by [`decode_all`].
#[derive(Debug, Clone)]
pub struct DecodeAll<'a> {
    rest: &'a [u8],
}

impl Iterator for DecodeAll<'_> {
    type Item = Result<Msg, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let (item, used) = match decode(self.rest) {
            Ok((msg, used)) => (Ok(msg), used),
            Err(e) => {
                let used = e.skip_len().unwrap_or(self.rest.len());
                (Err(e), used)
            }
        };
        self.rest = self.rest.get(used..).unwrap_or_default();
        Some(item)
    }
}

impl FusedIterator for DecodeAll<'_> {}

/// A checked little-endian cursor over one message (offsets count from the message start).
struct Reader<'a> {
    msg: &'a [u8],
    pos: usize,
    msg_type: u16,
    len: u16,
}

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self.pos.checked_add(N).and_then(|end| self.msg.get(self.pos..end)).and_then(|s| <[u8; N]>::try_from(s).ok());
        match bytes {
            Some(b) => {
                self.pos += N;
                Ok(b)
            }
            None => Err(self.too_short(self.pos.saturating_add(N))),
        }
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(u8::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn too_short(&self, min: usize) -> DecodeError {
        DecodeError::TooShort { msg_type: self.msg_type, len: self.len, min }
    }

    /// The message must at least hold its fixed fields.
    fn require(&self, min: usize) -> Result<(), DecodeError> {
        if self.msg.len() < min {
            return Err(self.too_short(min));
        }
        Ok(())
    }

    /// The header's length must be exactly what the message's counts imply.
    fn expect_len(&self, expected: usize) -> Result<(), DecodeError> {
        if self.msg.len() != expected {
            return Err(DecodeError::LenMismatch { msg_type: self.msg_type, len: self.len, expected });
        }
        Ok(())
    }

    fn content(&self, offset: usize, error: ContentError) -> DecodeError {
        DecodeError::Content { msg_type: self.msg_type, len: self.len, offset, error }
    }

    /// Reads a u32 count and checks it against `max`, before anything is sized by it.
    fn count(&mut self, what: &'static str, max: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        let raw = self.u32()?;
        usize::try_from(raw)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| self.content(at, ContentError::TooMany { what, count: raw.into(), max }))
    }

    fn reg(&mut self, slot: Slot) -> Result<Reg, DecodeError> {
        let at = self.pos;
        let kind = self.u8()?;
        let index = self.u32()?;
        let kind = RegKind::from_u8(kind).ok_or_else(|| self.content(at, ContentError::RegType { slot, kind }))?;
        Ok(Reg::new(kind, index))
    }

    fn updates(&mut self, n: usize) -> Result<Vec<UpdateField>, DecodeError> {
        let mut updates = Vec::with_capacity(n);
        for index in 0..n {
            let at = self.pos;
            let reg = self.reg(Slot::Update(index))?;
            let update = UpdateField { kind: reg.kind, index: reg.index, value: self.u64()? };
            check_update(index, &update).map_err(|e| self.content(at, e))?;
            updates.push(update);
        }
        Ok(updates)
    }
}

fn decode_create(r: &mut Reader<'_>, sid: u32) -> Result<Create, DecodeError> {
    r.expect_len(CREATE_LEN)?;
    Ok(Create {
        sid,
        init_cwnd: r.u32()?,
        mss: r.u32()?,
        src_ip: r.u32()?,
        src_port: r.u32()?,
        dst_ip: r.u32()?,
        dst_port: r.u32()?,
        cong_alg: cong_alg_from_field(&r.array::<{ limits::CONG_ALG_BYTES }>()?),
    })
}

/// The name up to the first NUL (all 64 bytes if there is none), lossily converted to UTF-8 and
/// cut at a character boundary to at most 63 bytes, so that it can be encoded again.
fn cong_alg_from_field(field: &[u8; limits::CONG_ALG_BYTES]) -> Option<String> {
    let raw = field.split(|&b| b == 0).next().unwrap_or_default();
    if raw.is_empty() {
        return None;
    }
    let mut name = String::from_utf8_lossy(raw).into_owned();
    if name.len() > limits::MAX_CONG_ALG_LEN {
        let cut = (0..=limits::MAX_CONG_ALG_LEN).rev().find(|&i| name.is_char_boundary(i));
        name.truncate(cut.unwrap_or(0));
    }
    Some(name)
}

fn decode_measure(r: &mut Reader<'_>, sid: u32) -> Result<Measure, DecodeError> {
    r.require(MEASURE_FIXED)?;
    let program_uid = r.u32()?;
    let n = r.count("report fields", limits::MAX_REPORT_REGS)?;
    r.expect_len(MEASURE_FIXED + 8 * n)?;
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        fields.push(r.u64()?);
    }
    Ok(Measure { sid, program_uid, fields })
}

fn decode_install(r: &mut Reader<'_>) -> Result<Install, DecodeError> {
    r.require(INSTALL_FIXED)?;
    let program_uid = r.u32()?;
    let num_events = r.count("events", limits::MAX_EVENTS)?;
    let num_instrs = r.count("instructions", limits::MAX_INSTRUCTIONS)?;
    r.expect_len(INSTALL_FIXED + EVENT_LEN * num_events + INSTR_LEN * num_instrs)?;

    let mut events = Vec::with_capacity(num_events);
    for index in 0..num_events {
        let at = r.pos;
        let event = Event { flag_idx: r.u32()?, num_flag_instrs: r.u32()?, body_idx: r.u32()?, num_body_instrs: r.u32()? };
        check_event(index, &event, num_instrs).map_err(|e| {
            let field = match e {
                ContentError::EventRange { part: EventPart::Body, .. } => 8,
                _ => 0,
            };
            r.content(at + field, e)
        })?;
        events.push(event);
    }

    let mut instrs = Vec::with_capacity(num_instrs);
    for index in 0..num_instrs {
        let at = r.pos;
        let opcode = r.u8()?;
        let op = Op::from_u8(opcode).ok_or_else(|| r.content(at, ContentError::Opcode { instr: index, opcode }))?;
        let instr = Instr {
            op,
            res: r.reg(Slot::Instr { index, operand: Operand::Result })?,
            left: r.reg(Slot::Instr { index, operand: Operand::Left })?,
            right: r.reg(Slot::Instr { index, operand: Operand::Right })?,
        };
        check_instr(index, &instr).map_err(|e| r.content(at + instr_error_offset(&e), e))?;
        instrs.push(instr);
    }
    Ok(Install { program_uid, events, instrs })
}

/// Offset, within a 16-byte instruction, of the register type byte an error is about.
fn instr_error_offset(e: &ContentError) -> usize {
    let operand = match e {
        ContentError::ReadOnlyResult { .. } => Operand::Result,
        ContentError::RegIndex { slot: Slot::Instr { operand, .. }, .. }
        | ContentError::Immediate { slot: Slot::Instr { operand, .. }, .. } => *operand,
        _ => return 0,
    };
    match operand {
        Operand::Result => 1,
        Operand::Left => 6,
        Operand::Right => 11,
    }
}

fn decode_update_fields(r: &mut Reader<'_>, sid: u32) -> Result<UpdateFields, DecodeError> {
    r.require(UPDATE_FIELDS_FIXED)?;
    let n = r.count("updates", limits::MAX_UPDATE_FIELDS)?;
    r.expect_len(UPDATE_FIELDS_FIXED + UPDATE_LEN * n)?;
    Ok(UpdateFields { sid, fields: r.updates(n)? })
}

fn decode_change_prog(r: &mut Reader<'_>, sid: u32) -> Result<ChangeProg, DecodeError> {
    r.require(CHANGE_PROG_FIXED)?;
    let program_uid = r.u32()?;
    let n = r.count("updates", limits::MAX_CHANGE_PROG_UPDATES)?;
    r.expect_len(CHANGE_PROG_FIXED + UPDATE_LEN * n)?;
    Ok(ChangeProg { sid, program_uid, updates: r.updates(n)? })
}

fn decode_ready(r: &mut Reader<'_>) -> Result<Ready, DecodeError> {
    r.expect_len(READY_LEN)?;
    Ok(Ready { datapath_id: r.u32()? })
}

// ---------------------------------------------------------------------------------------------
// Encoding.

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_reg(out: &mut Vec<u8>, reg: Reg) {
    out.push(reg.kind as u8);
    put_u32(out, reg.index);
}

fn put_updates(out: &mut Vec<u8>, updates: &[UpdateField]) {
    for u in updates {
        put_reg(out, Reg::new(u.kind, u.index));
        put_u64(out, u.value);
    }
}

/// Checks the total length, then writes the header.
fn put_header(out: &mut Vec<u8>, msg_type: u16, len: usize, sid: u32) -> Result<(), EncodeError> {
    let len16 = u16::try_from(len).ok().filter(|_| len <= limits::MAX_MSG_BYTES).ok_or(EncodeError::TooLong {
        msg_type,
        len,
        max: limits::MAX_MSG_BYTES,
    })?;
    out.reserve(len);
    out.extend_from_slice(&msg_type.to_le_bytes());
    out.extend_from_slice(&len16.to_le_bytes());
    put_u32(out, sid);
    Ok(())
}

fn cong_alg_field(name: Option<&str>) -> Result<[u8; limits::CONG_ALG_BYTES], EncodeError> {
    let mut field = [0u8; limits::CONG_ALG_BYTES];
    if let Some(name) = name {
        if name.is_empty() {
            return Err(EncodeError::CongAlgEmpty);
        }
        if let Some(pos) = name.bytes().position(|b| b == 0) {
            return Err(EncodeError::CongAlgNul { pos });
        }
        let dst = field
            .get_mut(..name.len())
            .filter(|_| name.len() <= limits::MAX_CONG_ALG_LEN)
            .ok_or(EncodeError::CongAlgTooLong { len: name.len() })?;
        dst.copy_from_slice(name.as_bytes());
    }
    Ok(field)
}

fn encode_content(msg_type: u16) -> impl Fn(ContentError) -> EncodeError {
    move |error| EncodeError::Content { msg_type, error }
}

fn check_updates(msg_type: u16, updates: &[UpdateField], max: usize) -> Result<(), EncodeError> {
    check_count("updates", updates.len(), max).map_err(encode_content(msg_type))?;
    for (i, u) in updates.iter().enumerate() {
        check_update(i, u).map_err(encode_content(msg_type))?;
    }
    Ok(())
}

impl Msg {
    /// The message's type number on the wire (see [`msg_type`]).
    pub fn msg_type(&self) -> u16 {
        match self {
            Msg::Create(_) => msg_type::CREATE,
            Msg::Measure(_) => msg_type::MEASURE,
            Msg::Install(_) => msg_type::INSTALL,
            Msg::UpdateFields(_) => msg_type::UPDATE_FIELDS,
            Msg::ChangeProg(_) => msg_type::CHANGE_PROG,
            Msg::Ready(_) => msg_type::READY,
        }
    }

    /// The header's sock_id: the flow's id, or 0 for INSTALL and READY, which concern the whole
    /// datapath (libccp ignores their sock_id).
    pub fn sid(&self) -> u32 {
        match self {
            Msg::Create(m) => m.sid,
            Msg::Measure(m) => m.sid,
            Msg::UpdateFields(m) => m.sid,
            Msg::ChangeProg(m) => m.sid,
            Msg::Install(_) | Msg::Ready(_) => 0,
        }
    }

    /// Appends the message's wire form to `out`, after checking that libccp will read it as
    /// meant (the same checks [`decode`] applies, plus the congAlg rules). On error `out` is
    /// left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let t = self.msg_type();
        match self {
            Msg::Create(m) => {
                let field = cong_alg_field(m.cong_alg.as_deref())?;
                put_header(out, t, CREATE_LEN, m.sid)?;
                for v in [m.init_cwnd, m.mss, m.src_ip, m.src_port, m.dst_ip, m.dst_port] {
                    put_u32(out, v);
                }
                out.extend_from_slice(&field);
            }
            Msg::Measure(m) => {
                check_count("report fields", m.fields.len(), limits::MAX_REPORT_REGS).map_err(encode_content(t))?;
                put_header(out, t, MEASURE_FIXED + 8 * m.fields.len(), m.sid)?;
                put_u32(out, m.program_uid);
                put_u32(out, m.fields.len() as u32);
                for &f in &m.fields {
                    put_u64(out, f);
                }
            }
            Msg::Install(m) => {
                let (ne, ni) = (m.events.len(), m.instrs.len());
                check_count("events", ne, limits::MAX_EVENTS).map_err(encode_content(t))?;
                check_count("instructions", ni, limits::MAX_INSTRUCTIONS).map_err(encode_content(t))?;
                for (i, e) in m.events.iter().enumerate() {
                    check_event(i, e, ni).map_err(encode_content(t))?;
                }
                for (i, instr) in m.instrs.iter().enumerate() {
                    check_instr(i, instr).map_err(encode_content(t))?;
                }
                put_header(out, t, INSTALL_FIXED + EVENT_LEN * ne + INSTR_LEN * ni, 0)?;
                for v in [m.program_uid, ne as u32, ni as u32] {
                    put_u32(out, v);
                }
                for e in &m.events {
                    for v in [e.flag_idx, e.num_flag_instrs, e.body_idx, e.num_body_instrs] {
                        put_u32(out, v);
                    }
                }
                for instr in &m.instrs {
                    out.push(instr.op as u8);
                    for reg in [instr.res, instr.left, instr.right] {
                        put_reg(out, reg);
                    }
                }
            }
            Msg::UpdateFields(m) => {
                check_updates(t, &m.fields, limits::MAX_UPDATE_FIELDS)?;
                put_header(out, t, UPDATE_FIELDS_FIXED + UPDATE_LEN * m.fields.len(), m.sid)?;
                put_u32(out, m.fields.len() as u32);
                put_updates(out, &m.fields);
            }
            Msg::ChangeProg(m) => {
                check_updates(t, &m.updates, limits::MAX_CHANGE_PROG_UPDATES)?;
                put_header(out, t, CHANGE_PROG_FIXED + UPDATE_LEN * m.updates.len(), m.sid)?;
                put_u32(out, m.program_uid);
                put_u32(out, m.updates.len() as u32);
                put_updates(out, &m.updates);
            }
            Msg::Ready(m) => {
                put_header(out, t, READY_LEN, 0)?;
                put_u32(out, m.datapath_id);
            }
        }
        Ok(())
    }

    /// The message's wire form in a new buffer (see [`Msg::encode`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }
}
