//! Messages from the agent, checked before libccp sees them.
//!
//! libccp 1.2 trusts the agent: it copies headers before checking sizes, indexes register arrays
//! with unchecked indices, and its instruction-count check is dead code, so a program of 256 or
//! more instructions overflows a heap array or makes `ccp_invoke` loop forever (ccp-anchors
//! §2.4) — in this process, on the path of every ACK. Each message is therefore decoded first by
//! `ccp-wire`, the project's validating codec, which enforces libccp's real limits; only
//! messages it accepts, of the three types a datapath takes, reach libccp, byte for byte.
//! Whatever is merely semantically wrong (an unknown sid, a full program table) is left to
//! libccp, so its own error code gets reported.

use ccp_wire::{decode, msg_type, DecodeError, Msg};

/// What to do with one message of a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Hand these bytes (exactly one message) to libccp.
    Libccp { kind: &'static str, sid: u32, bytes: &'a [u8] },
    /// Drop it, for this reason.
    Rejected(String),
}

fn kind(t: u16) -> &'static str {
    match t {
        msg_type::INSTALL => "INSTALL",
        msg_type::UPDATE_FIELDS => "UPDATE_FIELDS",
        msg_type::CHANGE_PROG => "CHANGE_PROG",
        msg_type::CREATE => "CREATE",
        msg_type::MEASURE => "MEASURE",
        msg_type::READY => "READY",
        _ => "unknown",
    }
}

/// Splits a datagram into its messages (libccp peers may send several in one) and judges each.
pub fn judge(datagram: &[u8]) -> Vec<Verdict<'_>> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        match decode(rest) {
            Ok((msg, used)) => {
                let (bytes, tail) = rest.split_at(used);
                rest = tail;
                out.push(match msg {
                    Msg::Install(_) | Msg::UpdateFields(_) | Msg::ChangeProg(_) => {
                        Verdict::Libccp { kind: kind(msg.msg_type()), sid: msg.sid(), bytes }
                    }
                    other => Verdict::Rejected(format!(
                        "a {} message (sid {}) is one a datapath sends, not one it takes",
                        kind(other.msg_type()),
                        other.sid()
                    )),
                });
            }
            Err(e) => {
                out.push(Verdict::Rejected(reason(&e)));
                match e.skip_len() {
                    Some(n) if n > 0 && n <= rest.len() => rest = &rest[n..],
                    _ => break,
                }
            }
        }
    }
    out
}

fn reason(e: &DecodeError) -> String {
    format!("a malformed or unsafe message: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_wire::{RegKind, UpdateField, UpdateFields};

    fn update(sid: u32, value: u64) -> Vec<u8> {
        let m = Msg::UpdateFields(UpdateFields {
            sid,
            fields: vec![UpdateField { kind: RegKind::Implicit, index: ccp_wire::implicit::CWND, value }],
        });
        m.to_bytes().unwrap()
    }

    #[test]
    fn valid_datapath_messages_pass_byte_for_byte_and_several_per_datagram_split() {
        let mut two = update(3, 14_480);
        two.extend(update(4, 28_960));
        let v = judge(&two);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0], Verdict::Libccp { kind: "UPDATE_FIELDS", sid: 3, bytes: &two[..25] });
        assert_eq!(v[1], Verdict::Libccp { kind: "UPDATE_FIELDS", sid: 4, bytes: &two[25..] });
    }

    #[test]
    fn unsafe_messages_never_reach_libccp() {
        // UPDATE_FIELDS writing control register 200 (libccp has 110 and does not check).
        let mut bad = update(3, 1);
        bad[12] = 0; // non-volatile control
        bad[13] = 200;
        let v = judge(&bad);
        assert!(matches!(&v[..], [Verdict::Rejected(r)] if r.contains("200")), "{v:?}");
        // A length beyond the datagram: nothing after it can be trusted.
        let v = judge(&[3, 0, 200, 0, 1, 0, 0, 0]);
        assert!(matches!(&v[..], [Verdict::Rejected(_)]), "{v:?}");
        // Junk of every length is judged without panicking.
        for len in 0..64u8 {
            let junk: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37)).collect();
            let _ = judge(&junk);
        }
    }

    #[test]
    fn messages_a_datapath_sends_are_refused_but_the_rest_of_the_datagram_is_kept() {
        let ready = Msg::Ready(ccp_wire::Ready { datapath_id: 1 }).to_bytes().unwrap();
        let mut d = ready.clone();
        d.extend(update(9, 1448));
        let v = judge(&d);
        assert!(matches!(&v[0], Verdict::Rejected(r) if r.contains("READY")));
        assert!(matches!(&v[1], Verdict::Libccp { sid: 9, .. }));
    }
}
