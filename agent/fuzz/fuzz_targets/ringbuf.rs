//! Feeds arbitrary bytes, as one ring-buffer sample, to the eBPF datapath's record decoders
//! (`ccp_ebpf::record::decode`, and `decode_per_ack` for instances loaded for per-ACK records).
//! Decoding must never panic; an accepted record must be of the kind, layout version and size
//! its header claims, fit the sample, and carry the header's and body's values at the offsets of
//! `src/bpf/ccp.h`; a refusal must name what the header says; and `decode_per_ack` must agree
//! with `decode` on everything but per-ACK records.
#![no_main]

use ccp_ebpf::record::{decode, decode_per_ack, DecodeError, PerAckRecord, Record, RECORD_VERSION};
use libfuzzer_sys::fuzz_target;

const KIND_CREATE: u8 = 1;
const KIND_REPORT: u8 = 2;
const KIND_CLOSE: u8 = 3;
const KIND_ACK: u8 = 4;

/// The structs' sizes (ccp.h; record.rs asserts them at compile time).
fn size_of_kind(kind: u8) -> Option<usize> {
    match kind {
        KIND_CREATE => Some(120),
        KIND_REPORT => Some(144),
        KIND_CLOSE => Some(32),
        KIND_ACK => Some(80),
        _ => None,
    }
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
}

/// The header of an accepted record of `kind`: version, kind, size, and that the sample holds it.
fn check_header(b: &[u8], kind: u8) {
    let size = size_of_kind(kind).unwrap();
    assert_eq!(b[0], RECORD_VERSION);
    assert_eq!(b[1], kind);
    assert_eq!(usize::from(u16_at(b, 2)), size);
    assert!(b.len() >= size, "{}-byte sample accepted as a {size}-byte record", b.len());
}

fn check_record(b: &[u8], r: &Record) {
    assert_eq!(r.fid(), u32_at(b, 4));
    assert_eq!(r.ts_ns(), u64_at(b, 8));
    match r {
        Record::Create(c) => {
            check_header(b, KIND_CREATE);
            assert_eq!(c.cookie.unwrap_or(0), u64_at(b, 16));
            assert_eq!(c.netns_cookie, u64_at(b, 24));
            assert_eq!(c.cgroup_id, u64_at(b, 32));
            let family = u16_at(b, 72);
            let ip = family == libc::AF_INET as u16 || family == libc::AF_INET6 as u16;
            assert_eq!(c.local.is_some(), ip);
            assert_eq!(c.remote.is_some(), ip);
            if let Some(l) = c.local {
                assert_eq!(l.port, u16_at(b, 74));
            }
            if let Some(r) = c.remote {
                assert_eq!(r.port, u16_at(b, 76));
            }
            assert_eq!(c.mss, u32_at(b, 80));
            assert_eq!(c.min_rtt_us.unwrap_or(u32::MAX), u32_at(b, 96));
            assert_eq!(c.prev_cc.is_none(), b[104] == 0);
            if let Some(cc) = &c.prev_cc {
                assert!(!cc.is_empty() && !cc.contains('\0'));
            }
        }
        Record::Report(k) => {
            check_header(b, KIND_REPORT);
            assert_eq!(k.start_ns, u64_at(b, 16));
            assert_eq!(k.acked_bytes, u64_at(b, 24));
            assert_eq!(k.pacing_rate, u64_at(b, 40));
            assert_eq!(k.acked_pkts, u32_at(b, 48));
            assert_eq!(k.mss, u32_at(b, 124));
            assert_eq!(k.ctrl_seq, u32_at(b, 128));
            assert_eq!(k.timeouts, u16_at(b, 132));
            assert_eq!(k.urgent.is_some(), (1..=3).contains(&b[134]));
            assert_eq!(k.ca_state, b[136]);
        }
        Record::Close(c) => {
            check_header(b, KIND_CLOSE);
            assert_eq!(c.bytes_acked, u64_at(b, 16));
            assert_eq!(c.lost, u32_at(b, 24));
        }
    }
}

fn check_error(b: &[u8], e: &DecodeError) {
    match *e {
        DecodeError::Short(n) => {
            assert_eq!(n, b.len());
            assert!(n < 16);
        }
        DecodeError::Version(v) => {
            assert_eq!(v, b[0]);
            assert_ne!(v, RECORD_VERSION);
        }
        DecodeError::Kind(k) => {
            assert_eq!(b[0], RECORD_VERSION);
            assert_eq!(k, b[1]);
        }
        DecodeError::Size { kind, claimed, len, expected } => {
            assert_eq!(b[0], RECORD_VERSION);
            assert_eq!(kind, b[1]);
            assert_eq!(claimed, u16_at(b, 2));
            assert_eq!(len, b.len());
            assert_eq!(Some(expected), size_of_kind(kind));
            assert!(usize::from(claimed) != expected || len < expected);
        }
    }
    // Its message formats.
    assert!(!e.to_string().is_empty());
}

fuzz_target!(|data: &[u8]| {
    let folded = decode(data);
    match &folded {
        Ok(r) => check_record(data, r),
        Err(e) => check_error(data, e),
    }
    match decode_per_ack(data) {
        Ok(PerAckRecord::Ack(a)) => {
            check_header(data, KIND_ACK);
            assert_eq!(a.fid, u32_at(data, 4));
            assert_eq!(a.ts_ns, u64_at(data, 8));
            assert_eq!(a.bytes_acked, u64_at(data, 16));
            assert_eq!(a.packets_acked, u32_at(data, 24));
            assert_eq!(a.rtt_us.unwrap_or(0), u32_at(data, 40));
            assert_eq!(a.mss, u32_at(data, 68));
            assert_eq!(a.timeout, data[72] & 1 != 0);
            assert_eq!(a.fallback, data[72] & 2 != 0);
            // decode refuses per-ACK records as an unknown kind.
            assert_eq!(folded, Err(DecodeError::Kind(KIND_ACK)));
        }
        Ok(PerAckRecord::Record(r)) => assert_eq!(folded, Ok(r)),
        Err(e) => {
            check_error(data, &e);
            if data.len() >= 16 && data[0] == RECORD_VERSION && data[1] == KIND_ACK {
                assert!(matches!(e, DecodeError::Size { kind: KIND_ACK, .. }), "{e:?}");
            } else {
                assert_eq!(folded, Err(e));
            }
        }
    }
});
