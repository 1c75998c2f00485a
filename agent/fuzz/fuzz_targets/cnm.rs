//! Feeds arbitrary datagrams to the CNM listener's check, `ccp_agent::cnm::classify`, as
//! `CnmListener::read_batch` calls it: the sender's address, at most `RECV_BYTES` (256) bytes of
//! payload, and whether the datagram was longer (MSG_TRUNC). The first input byte picks the
//! sender (an allowed IPv4 address, the same as v4-mapped IPv6, or arbitrary IPv4/IPv6 taken from
//! the next bytes); the rest is the datagram.
//!
//! `classify` must never panic. A delivered notice must come from an allowed sender, be a
//! well-formed CNM that re-encodes to the very bytes received, about an IPv4 TCP flow whose
//! tuple and feedback are the CNM's. A drop must be for the first reason that applies, in the
//! documented order (sender, then payload).
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ccp_agent::clock::Clock;
use ccp_agent::cnm::{classify, Reason};
use ccp_cnm_wire::Cnm;
use ccp_contract::NetworkFeedback;
use ipnet::IpNet;
use libfuzzer_sys::fuzz_target;

/// The listener's receive buffer (cnm.rs `RECV_BYTES`).
const RECV_BYTES: usize = 256;
const ALLOWED: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 254);

fn allow_from() -> Vec<IpNet> {
    vec!["10.77.0.254/32".parse().unwrap(), "192.168.0.0/16".parse().unwrap(), "2001:db8::/32".parse().unwrap()]
}

fn v4(a: IpAddr) -> Option<Ipv4Addr> {
    match a {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(a) => a.to_ipv4_mapped(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let (from, datagram) = match pick & 3 {
        0 => (IpAddr::V4(ALLOWED), rest),
        1 => (IpAddr::V6(ALLOWED.to_ipv6_mapped()), rest),
        2 if rest.len() >= 4 => (IpAddr::V4(Ipv4Addr::new(rest[0], rest[1], rest[2], rest[3])), &rest[4..]),
        3 if rest.len() >= 16 => (IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&rest[..16]).unwrap())), &rest[16..]),
        _ => return,
    };
    // recvmsg into a RECV_BYTES buffer: longer datagrams arrive cut, with MSG_TRUNC.
    let truncated = datagram.len() > RECV_BYTES;
    let payload = &datagram[..datagram.len().min(RECV_BYTES)];
    let allow = allow_from();
    let canonical = v4(from).map_or(from, IpAddr::V4);
    let allowed = allow.iter().any(|n| n.contains(&canonical));

    // The codec on its own: whatever decodes re-encodes to the same bytes.
    let decoded = Cnm::decode(payload);
    if let Ok(cnm) = &decoded {
        let mut again = Vec::new();
        cnm.encode(&mut again);
        assert_eq!(again, payload);
        let _ = cnm.flow();
    }

    match classify(from, payload, truncated, &allow, Clock::start().now()) {
        Ok(n) => {
            assert!(allowed, "delivered from {from}, not in allow_from");
            assert!(!truncated);
            assert_eq!(n.from, canonical);
            let cnm = decoded.expect("a delivered CNM decodes");
            let flow = cnm.flow().expect("a delivered CNM names its flow");
            assert_eq!(flow.protocol, 6);
            let (src, dst) = (v4(flow.src).expect("IPv4 source"), v4(flow.dst).expect("IPv4 destination"));
            assert_eq!(n.tuple, ((IpAddr::V4(src), flow.src_port), (IpAddr::V4(dst), flow.dst_port)));
            assert!(flow.src_port != 0 || flow.dst_port != 0);
            assert_eq!(n.cpid, cnm.cpid);
            assert_eq!(
                n.feedback,
                NetworkFeedback::Qcn {
                    fb_quantized: cnm.qfb,
                    q_off_bytes: i64::from(cnm.q_off_bytes),
                    q_delta_bytes: i64::from(cnm.q_delta_bytes),
                }
            );
            assert!((1..=63).contains(&cnm.qfb));
            if let Some(age) = n.age_us {
                assert!(age <= 10_000_000);
            }
        }
        Err(d) => {
            assert!(!d.detail.is_empty());
            if !allowed {
                assert_eq!(d.reason, Reason::NotAllowed);
                return;
            }
            match d.reason {
                Reason::Malformed => {
                    let unusable = truncated
                        || match &decoded {
                            Err(_) => true,
                            Ok(c) => c.flow().is_none_or(|f| {
                                f.protocol == 6
                                    && v4(f.src).is_some()
                                    && v4(f.dst).is_some()
                                    && f.src_port == 0
                                    && f.dst_port == 0
                            }),
                        };
                    assert!(unusable, "dropped as malformed: {}", d.detail);
                }
                Reason::NotTcp => {
                    assert!(!truncated);
                    let f = decoded.as_ref().expect("decodes").flow().expect("has a flow");
                    assert_ne!(f.protocol, 6);
                }
                Reason::Ipv6 => {
                    assert!(!truncated);
                    let f = decoded.as_ref().expect("decodes").flow().expect("has a flow");
                    assert_eq!(f.protocol, 6);
                    assert!(v4(f.src).is_none() || v4(f.dst).is_none());
                }
                other => panic!("classify dropped for {other:?}: {}", d.detail),
            }
        }
    }
});
