//! Reading what libccp hands a host's `DatapathOps` callbacks.
//!
//! libccp assigns each connection its sid but the crate does not expose it, and whether a
//! MEASURE is a report or a connection's close shows only in its bytes: hosts learn both by
//! reading the messages libccp sends ([`Sent::of`]). Log lines arrive with a bare
//! `enum ccp_log_level` ([`log_level`]).

use ccp_wire::msg_type::{CREATE, MEASURE, READY};

/// One message libccp sends to the agent, as far as a host needs to know it: a CREATE starts a
/// connection, a MEASURE with fields is a report, one without fields the close of a connection
/// libccp freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Ready,
    Create { sid: u32 },
    Report { sid: u32 },
    Close { sid: u32 },
    Other { typ: u16 },
}

impl Sent {
    /// Reads the `u16 type | u16 len | u32 sid` header (and a MEASURE's field count) without
    /// trusting the length; `None` for a message too short to have them.
    pub fn of(msg: &[u8]) -> Option<Sent> {
        let typ = u16::from_le_bytes(msg.get(0..2)?.try_into().ok()?);
        let sid = u32::from_le_bytes(msg.get(4..8)?.try_into().ok()?);
        Some(match typ {
            READY => Sent::Ready,
            CREATE => Sent::Create { sid },
            MEASURE if msg.get(12..16).is_some_and(|n| n != [0; 4]) => Sent::Report { sid },
            MEASURE => Sent::Close { sid },
            typ => Sent::Other { typ },
        })
    }

    /// The message type's name in libccp, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Sent::Ready => "READY",
            Sent::Create { .. } => "CREATE",
            Sent::Report { .. } | Sent::Close { .. } => "MEASURE",
            Sent::Other { .. } => "a message of unknown type",
        }
    }
}

/// The name of a level of `enum ccp_log_level` (TRACE, DEBUG, INFO, WARN, ERROR).
pub fn log_level(level: u32) -> &'static str {
    ["trace", "debug", "info", "warn"].get(level as usize).copied().unwrap_or("error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_without_trusting_the_length() {
        assert_eq!(Sent::of(&[0, 0, 96, 0, 7, 0, 0, 0]), Some(Sent::Create { sid: 7 }));
        assert_eq!(Sent::of(&[1, 0, 16]), None);
        assert_eq!(Sent::of(&[5, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Some(Sent::Ready));
    }

    #[test]
    fn a_measure_without_fields_is_a_close() {
        let measure = |fields: u8| [1, 0, 16, 0, 3, 0, 0, 0, 1, 0, 0, 0, fields, 0, 0, 0];
        assert_eq!(Sent::of(&measure(2)), Some(Sent::Report { sid: 3 }));
        assert_eq!(Sent::of(&measure(0)), Some(Sent::Close { sid: 3 }));
        assert_eq!(Sent::of(&measure(0)[..12]), Some(Sent::Close { sid: 3 }));
    }

    #[test]
    fn log_levels() {
        assert_eq!([0, 1, 2, 3, 4, 9].map(log_level), ["trace", "debug", "info", "warn", "error", "error"]);
    }
}
