//! Checks on agent → datapath messages before they reach libccp.
//!
//! libccp 1.2 trusts the agent: it `memcpy`s headers before checking sizes, never checks that
//! a message is as long as its counts claim, indexes register arrays with unchecked indices,
//! and its instruction-count check is dead code, so a program with 256 or more instructions
//! overflows a heap array or makes `ccp_invoke` loop forever (ccp-anchors §2.4). A test
//! datapath exists to exercise agents that may be buggy, so every message is checked here
//! first: a bad one is reported on stderr instead of corrupting this process or hanging it.
//! Anything that is merely semantically wrong (unknown type, unknown sid, table full, …) is
//! left to libccp, so its own error code gets reported.

/// Message types (libccp `serialize.h`).
pub const CREATE: u16 = 0;
pub const MEASURE: u16 = 1;
pub const INSTALL: u16 = 2;
pub const UPDATE_FIELDS: u16 = 3;
pub const CHANGE_PROG: u16 = 4;
pub const READY: u16 = 5;

pub const HEADER_LEN: usize = 8;
const INSTALL_FIXED_LEN: usize = HEADER_LEN + 12;
const UPDATE_FIXED_LEN: usize = HEADER_LEN + 4;
const CHANGE_FIXED_LEN: usize = HEADER_LEN + 8;
const EVENT_LEN: usize = 16;
const INSTR_LEN: usize = 16;
const UPDATE_LEN: usize = 13;

/// libccp iterates instructions with a `u8` index: every index must stay below 256.
const MAX_INSTRUCTIONS: u64 = 255;
const MAX_EVENTS: u64 = 256;
/// libccp reads the update count of UPDATE_FIELDS as one signed byte.
const MAX_UPDATES_IN_UPDATE_FIELDS: u64 = 127;
const MAX_UPDATES_IN_CHANGE_PROG: u64 = 222;

// Register types and the sizes of the arrays libccp indexes with them.
const REG_NONVOLATILE_CONTROL: u8 = 0;
const REG_IMPLICIT: u8 = 2;
const REG_LOCAL: u8 = 3;
const REG_VOLATILE_REPORT: u8 = 5;
const REG_NONVOLATILE_REPORT: u8 = 6;
const REG_TMP: u8 = 7;
const REG_VOLATILE_CONTROL: u8 = 8;
const NUM_CONTROL: u32 = 110;
const NUM_REPORT: u32 = 110;
const NUM_IMPLICIT: u32 = 6;
const NUM_LOCAL: u32 = 8;
const NUM_TMP: u32 = 8;

/// The 8-byte header every message starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub typ: u16,
    pub len: u16,
    pub sid: u32,
}

impl Header {
    pub fn parse(buf: &[u8]) -> Option<Header> {
        Some(Header {
            typ: u16::from_le_bytes(buf.get(0..2)?.try_into().ok()?),
            len: u16::from_le_bytes(buf.get(2..4)?.try_into().ok()?),
            sid: u32_at(buf, 4)?,
        })
    }
}

/// A readable name for a message type.
pub fn type_name(typ: u16) -> &'static str {
    match typ {
        CREATE => "CREATE",
        MEASURE => "MEASURE",
        INSTALL => "INSTALL",
        UPDATE_FIELDS => "UPDATE_FIELDS",
        CHANGE_PROG => "CHANGE_PROG",
        READY => "READY",
        _ => "message of unknown type",
    }
}

/// The length of the first message in `buf` (datagrams normally hold exactly one).
pub fn first_message_len(buf: &[u8]) -> Result<usize, String> {
    let hdr = Header::parse(buf).ok_or_else(|| format!("{} bytes are too short for a header", buf.len()))?;
    let len = usize::from(hdr.len);
    if len < HEADER_LEN {
        return Err(format!("header length {len} is shorter than the header"));
    }
    if len > buf.len() {
        return Err(format!("header length {len} exceeds the {} bytes received", buf.len()));
    }
    Ok(len)
}

/// Checks one complete message (exactly its header's length).
pub fn check(msg: &[u8]) -> Result<(), String> {
    let Some(hdr) = Header::parse(msg) else {
        return Err("shorter than a header".to_string());
    };
    match hdr.typ {
        INSTALL => check_install(msg),
        UPDATE_FIELDS => {
            let n = counted(msg, UPDATE_FIXED_LEN, HEADER_LEN, UPDATE_LEN, "update")?;
            if n > MAX_UPDATES_IN_UPDATE_FIELDS {
                return Err(format!("{n} updates; libccp reads the count as one signed byte (at most 127)"));
            }
            check_updates(&msg[UPDATE_FIXED_LEN..])
        }
        CHANGE_PROG => {
            let n = counted(msg, CHANGE_FIXED_LEN, HEADER_LEN + 4, UPDATE_LEN, "update")?;
            if n > MAX_UPDATES_IN_CHANGE_PROG {
                return Err(format!("{n} updates; libccp allows at most 222"));
            }
            check_updates(&msg[CHANGE_FIXED_LEN..])
        }
        _ => Ok(()),
    }
}

/// Checks that `msg` is exactly `fixed + count * item` bytes, where the `u32` count sits at
/// `count_at`, and returns the count.
fn counted(msg: &[u8], fixed: usize, count_at: usize, item: usize, what: &str) -> Result<u64, String> {
    let n = u32_at(msg, count_at).ok_or_else(|| format!("{} bytes are too short for the {what} count", msg.len()))?;
    let expected = fixed as u64 + u64::from(n) * item as u64;
    if msg.len() as u64 != expected {
        return Err(format!("length {} does not match {n} {what}s ({expected} bytes expected)", msg.len()));
    }
    Ok(u64::from(n))
}

fn check_updates(updates: &[u8]) -> Result<(), String> {
    for (i, u) in updates.chunks_exact(UPDATE_LEN).enumerate() {
        let typ = u[0];
        let index = u32_at(u, 1).unwrap_or(u32::MAX);
        let is_control = typ == REG_NONVOLATILE_CONTROL || typ == REG_VOLATILE_CONTROL;
        if is_control && index >= NUM_CONTROL {
            return Err(format!("update {i} writes control register {index}; libccp has {NUM_CONTROL}"));
        }
    }
    Ok(())
}

fn check_install(msg: &[u8]) -> Result<(), String> {
    if msg.len() < INSTALL_FIXED_LEN {
        return Err(format!("{} bytes are too short for INSTALL", msg.len()));
    }
    let num_events = u64::from(u32_at(msg, HEADER_LEN + 4).unwrap_or(u32::MAX));
    let num_instrs = u64::from(u32_at(msg, HEADER_LEN + 8).unwrap_or(u32::MAX));
    if num_instrs > MAX_INSTRUCTIONS {
        return Err(format!(
            "{num_instrs} instructions; libccp handles at most {MAX_INSTRUCTIONS} (more overflow \
             its program table or make ccp_invoke loop forever)"
        ));
    }
    if num_events > MAX_EVENTS {
        return Err(format!("{num_events} events; libccp allows at most {MAX_EVENTS}"));
    }
    let expected = INSTALL_FIXED_LEN as u64 + (num_events + num_instrs) * EVENT_LEN as u64;
    if msg.len() as u64 != expected {
        return Err(format!(
            "length {} does not match {num_events} events and {num_instrs} instructions \
             ({expected} bytes expected)",
            msg.len()
        ));
    }
    let events_end = INSTALL_FIXED_LEN + num_events as usize * EVENT_LEN;
    for (i, ev) in msg[INSTALL_FIXED_LEN..events_end].chunks_exact(EVENT_LEN).enumerate() {
        let field = |k: usize| u64::from(u32_at(ev, 4 * k).unwrap_or(u32::MAX));
        for (start, count, what) in [(field(0), field(1), "condition"), (field(2), field(3), "body")] {
            if start + count > num_instrs {
                return Err(format!("event {i}'s {what} spans instructions {start}..{} of {num_instrs}", start + count));
            }
        }
    }
    for (i, ins) in msg[events_end..].chunks_exact(INSTR_LEN).enumerate() {
        for (typ_at, role) in [(1, "result"), (6, "left"), (11, "right")] {
            let typ = ins[typ_at];
            let index = u32_at(ins, typ_at + 1).unwrap_or(u32::MAX);
            let limit = match typ {
                REG_NONVOLATILE_CONTROL | REG_VOLATILE_CONTROL => Some(NUM_CONTROL),
                REG_VOLATILE_REPORT | REG_NONVOLATILE_REPORT => Some(NUM_REPORT),
                REG_IMPLICIT => Some(NUM_IMPLICIT),
                REG_LOCAL => Some(NUM_LOCAL),
                REG_TMP => Some(NUM_TMP),
                // Immediates (1) carry a value, not an index; unknown primitives (4) read as
                // 0; unknown types are rejected by libccp itself.
                _ => None,
            };
            if let Some(limit) = limit.filter(|&limit| index >= limit) {
                return Err(format!(
                    "instruction {i}'s {role} register (type {typ}) has index {index}; libccp \
                     has {limit}"
                ));
            }
        }
    }
    Ok(())
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libccp 1.2.0's own unit-test program: `(def (volatile Report.foo 0)) (when true
    /// (:= Report.foo (+ Report.foo Ack.bytes_acked)) (report))`.
    #[rustfmt::skip]
    fn install() -> Vec<u8> {
        vec![
            2, 0, 116, 0, 0, 0, 0, 0,                       // INSTALL, len 116, sid 0
            1, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0,             // uid 1, 1 event, 5 instructions
            1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0,
            2, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0,
            1, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0,
            0, 7, 0, 0, 0, 0, 5, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            1, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 7, 0, 0, 0, 0,
            1, 2, 2, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0, 0,
        ]
    }

    #[test]
    fn accepts_valid_messages() {
        assert_eq!(check(&install()), Ok(()));
        #[rustfmt::skip]
        let update = [3, 0, 25, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 4, 0, 0, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(check(&update), Ok(()));
        #[rustfmt::skip]
        let change = [4, 0, 29, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0,
                      2, 4, 0, 0, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(check(&change), Ok(()));
        assert_eq!(check(&[9, 0, 8, 0, 0, 0, 0, 0]), Ok(()), "left to libccp");
    }

    #[test]
    fn splits_and_rejects_bad_framing() {
        let mut two = install();
        two.extend(install());
        assert_eq!(first_message_len(&two), Ok(116));
        assert!(first_message_len(&[2, 0, 8]).is_err());
        assert!(first_message_len(&[2, 0, 4, 0, 0, 0, 0, 0]).is_err());
        assert!(first_message_len(&install()[..100]).is_err());
    }

    #[test]
    fn rejects_dangerous_installs() {
        let mut too_many = install();
        too_many[16..20].copy_from_slice(&256u32.to_le_bytes());
        assert!(check(&too_many).unwrap_err().contains("256 instructions"));

        let mut short = install();
        short[16] = 6; // claims one more instruction than it carries
        assert!(check(&short).unwrap_err().contains("does not match"));

        let mut span = install();
        span[32] = 4; // the body starts at 2 and now has 4 instructions: past the 5 there are
        assert!(check(&span).unwrap_err().contains("body spans"));

        let mut reg = install();
        reg[36 + 16 + 7] = 200; // the condition's left register: implicit 200
        assert!(check(&reg).unwrap_err().contains("index 200"));
    }

    #[test]
    fn rejects_bad_updates() {
        #[rustfmt::skip]
        let control = [3, 0, 25, 0, 1, 0, 0, 0, 1, 0, 0, 0, 8, 110, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        assert!(check(&control).unwrap_err().contains("control register 110"));
        let truncated = [3, 0, 20, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 4, 0, 0, 0, 1, 0, 0];
        assert!(check(&truncated).unwrap_err().contains("does not match"));
        let mut many = vec![3, 0, 0, 0, 1, 0, 0, 0, 128, 0, 0, 0];
        many.extend(std::iter::repeat_n([2, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0], 128).flatten());
        assert!(check(&many).unwrap_err().contains("signed byte"));
    }
}
