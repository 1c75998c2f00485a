//! The congestion notification message (CNM) on the wire, as the router sends it: the UDP payload
//! of a datagram from the router to the sampled packet's source address, on a configured port
//! (default [`DEFAULT_CNM_PORT`]). This is our own L3 encoding (annulus.md §8.3 option 2); real
//! 802.1Qau CNMs are L2 frames that a routed emulator cannot carry.
//!
//! Layout (all integers big-endian), 32 bytes of header then up to 64 bytes of the sampled packet:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"QCNM"` |
//! | 4 | 1 | version = 1 |
//! | 5 | 1 | qFb: quantized feedback, 1..=63 (larger = more congested) |
//! | 6 | 1 | flags: bit 0 = standard quantization (F_b,max = Q_eq(1+2w)); clear = packets mode |
//! | 7 | 1 | sample_len: bytes of the sampled packet that follow, 0..=64 |
//! | 8 | 4 | F_b, bytes, signed, unquantized (rounded; saturated to i32) |
//! | 12 | 4 | Q_off = Q − Q_eq, bytes, signed |
//! | 16 | 4 | Q_δ = Q − Q_old, bytes, signed |
//! | 20 | 4 | congestion point id |
//! | 24 | 8 | sample time, ns on the router's monotonic clock |
//! | 32 | sample_len | the first bytes of the sampled IP packet (IP header + L4 ports) |
//!
//! The receiver recovers the flow (the sender's own outgoing 5-tuple, not reversed) from the
//! sampled bytes with [`Cnm::flow`]. The decoder validates everything and never panics.
//!
//! The sender is ccp-router, which builds CNMs from its congestion point's notifications
//! (`ccp_qdisc::qcn::CongestionNotification::to_cnm`); the receiver is the agent's CNM listener.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The magic at the start of every CNM.
pub const CNM_MAGIC: [u8; 4] = *b"QCNM";
/// The only version defined.
pub const CNM_VERSION: u8 = 1;
/// Bytes before the sampled packet copy.
pub const CNM_HEADER_LEN: usize = 32;
/// At most this many bytes of the sampled packet are copied (annulus.md: 64).
pub const CNM_MAX_SAMPLE_LEN: usize = 64;
/// UDP port CNMs go to unless configured otherwise.
pub const DEFAULT_CNM_PORT: u16 = 7470;
/// `flags` bit: the standard quantization produced `qfb`.
pub const FLAG_STANDARD_QUANTIZATION: u8 = 0b0000_0001;
/// The largest qFb: the feedback is quantized to 6 bits, and 0 is never sent.
pub const QFB_MAX: u8 = 63;

const IP_PROTO_TCP: u8 = 6;
const IP_PROTO_UDP: u8 = 17;

/// A decoded CNM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cnm {
    pub qfb: u8,
    pub flags: u8,
    pub fb_bytes: i32,
    pub q_off_bytes: i32,
    pub q_delta_bytes: i32,
    pub cpid: u32,
    pub timestamp_ns: u64,
    /// The first bytes of the sampled packet (≤ 64).
    pub sample: Vec<u8>,
}

/// Why bytes are not a CNM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CnmError {
    TooShort { len: usize },
    BadMagic,
    UnsupportedVersion(u8),
    QfbOutOfRange(u8),
    SampleTooLong(u8),
    LengthMismatch { declared: usize, actual: usize },
}

impl std::fmt::Display for CnmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CnmError::TooShort { len } => write!(f, "CNM too short: {len} bytes, the header alone is {CNM_HEADER_LEN}"),
            CnmError::BadMagic => write!(f, "not a CNM: bad magic"),
            CnmError::UnsupportedVersion(v) => write!(f, "unsupported CNM version {v}"),
            CnmError::QfbOutOfRange(q) => write!(f, "qFb {q} outside 1..=63"),
            CnmError::SampleTooLong(n) => write!(f, "sample length {n} exceeds {CNM_MAX_SAMPLE_LEN}"),
            CnmError::LengthMismatch { declared, actual } => {
                write!(f, "CNM declares {declared} sample bytes but carries {actual}")
            }
        }
    }
}

impl std::error::Error for CnmError {}

/// The flow a CNM is about: the sampled packet's addresses, protocol and ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// 0 when the protocol has no ports or the copy ends before them.
    pub src_port: u16,
    pub dst_port: u16,
}

impl Cnm {
    /// Appends the wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let sample = &self.sample[..self.sample.len().min(CNM_MAX_SAMPLE_LEN)];
        out.extend_from_slice(&CNM_MAGIC);
        out.push(CNM_VERSION);
        out.push(self.qfb);
        out.push(self.flags);
        out.push(sample.len() as u8);
        out.extend_from_slice(&self.fb_bytes.to_be_bytes());
        out.extend_from_slice(&self.q_off_bytes.to_be_bytes());
        out.extend_from_slice(&self.q_delta_bytes.to_be_bytes());
        out.extend_from_slice(&self.cpid.to_be_bytes());
        out.extend_from_slice(&self.timestamp_ns.to_be_bytes());
        out.extend_from_slice(sample);
    }

    /// Parses and validates a CNM (the whole UDP payload).
    pub fn decode(buf: &[u8]) -> Result<Cnm, CnmError> {
        if buf.len() < CNM_HEADER_LEN {
            return Err(CnmError::TooShort { len: buf.len() });
        }
        if buf[0..4] != CNM_MAGIC {
            return Err(CnmError::BadMagic);
        }
        if buf[4] != CNM_VERSION {
            return Err(CnmError::UnsupportedVersion(buf[4]));
        }
        let qfb = buf[5];
        if !(1..=QFB_MAX).contains(&qfb) {
            return Err(CnmError::QfbOutOfRange(qfb));
        }
        let sample_len = buf[7];
        if usize::from(sample_len) > CNM_MAX_SAMPLE_LEN {
            return Err(CnmError::SampleTooLong(sample_len));
        }
        let actual = buf.len() - CNM_HEADER_LEN;
        if actual != usize::from(sample_len) {
            return Err(CnmError::LengthMismatch { declared: usize::from(sample_len), actual });
        }
        let be32 = |o: usize| [buf[o], buf[o + 1], buf[o + 2], buf[o + 3]];
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&buf[24..32]);
        Ok(Cnm {
            qfb,
            flags: buf[6],
            fb_bytes: i32::from_be_bytes(be32(8)),
            q_off_bytes: i32::from_be_bytes(be32(12)),
            q_delta_bytes: i32::from_be_bytes(be32(16)),
            cpid: u32::from_be_bytes(be32(20)),
            timestamp_ns: u64::from_be_bytes(ts),
            sample: buf[CNM_HEADER_LEN..].to_vec(),
        })
    }

    /// The sampled packet's flow, if its copy holds a complete IPv4 or IPv6 header.
    pub fn flow(&self) -> Option<FlowTuple> {
        flow_of(&self.sample)
    }
}

/// Parses addresses, protocol and ports from the start of an IP packet.
pub fn flow_of(pkt: &[u8]) -> Option<FlowTuple> {
    let version = pkt.first()? >> 4;
    let (src, dst, protocol, l4) = match version {
        4 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            if ihl < 20 || pkt.len() < ihl {
                return None;
            }
            let a = |o: usize| IpAddr::V4(Ipv4Addr::new(pkt[o], pkt[o + 1], pkt[o + 2], pkt[o + 3]));
            (a(12), a(16), pkt[9], ihl)
        }
        6 => {
            if pkt.len() < 40 {
                return None;
            }
            let a = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&pkt[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            (a(8), a(24), pkt[6], 40)
        }
        _ => return None,
    };
    let (src_port, dst_port) = match protocol {
        IP_PROTO_TCP | IP_PROTO_UDP if pkt.len() >= l4 + 4 => {
            (u16::from_be_bytes([pkt[l4], pkt[l4 + 1]]), u16::from_be_bytes([pkt[l4 + 2], pkt[l4 + 3]]))
        }
        _ => (0, 0),
    };
    Some(FlowTuple { src, dst, protocol, src_port, dst_port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_packet() -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x45;
        p[9] = IP_PROTO_TCP;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        p[20..22].copy_from_slice(&40_000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p
    }

    fn cnm(qfb: u8, sample: Vec<u8>) -> Cnm {
        Cnm {
            qfb,
            flags: 0,
            fb_bytes: 25_123,
            q_off_bytes: -300,
            q_delta_bytes: 12_000,
            cpid: 1,
            timestamp_ns: 123_456_789,
            sample,
        }
    }

    // annulus.md §13.1 test 6: sample a TCP/IPv4 packet, parse the CNM at the host, recover the
    // exact 5-tuple and qFb (ccp-qdisc's `to_cnm` tests the CNM a congestion point makes).
    #[test]
    fn cnm_content_roundtrip() {
        let cnm = cnm(17, tcp_packet());
        let mut buf = Vec::new();
        cnm.encode(&mut buf);
        assert_eq!(buf.len(), CNM_HEADER_LEN + 60);
        let back = Cnm::decode(&buf).unwrap();
        assert_eq!(back, cnm);
        assert_eq!(back.fb_bytes, 25_123);
        assert_eq!(back.q_off_bytes, -300);
        let f = back.flow().unwrap();
        assert_eq!(f.src, IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)));
        assert_eq!(f.dst, IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)));
        assert_eq!((f.protocol, f.src_port, f.dst_port), (IP_PROTO_TCP, 40_000, 5201));
    }

    #[test]
    fn decoder_rejects_garbage_without_panicking() {
        let mut good = Vec::new();
        cnm(5, tcp_packet()).encode(&mut good);
        assert!(matches!(Cnm::decode(&good[..10]), Err(CnmError::TooShort { .. })));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(Cnm::decode(&bad), Err(CnmError::BadMagic));
        let mut bad = good.clone();
        bad[4] = 2;
        assert_eq!(Cnm::decode(&bad), Err(CnmError::UnsupportedVersion(2)));
        let mut bad = good.clone();
        bad[5] = 64;
        assert_eq!(Cnm::decode(&bad), Err(CnmError::QfbOutOfRange(64)));
        let mut bad = good.clone();
        bad[7] = 65;
        assert_eq!(Cnm::decode(&bad), Err(CnmError::SampleTooLong(65)));
        assert!(matches!(Cnm::decode(&good[..good.len() - 1]), Err(CnmError::LengthMismatch { .. })));
        // Every prefix and every single-byte corruption decodes or errors, never panics.
        for i in 0..good.len() {
            let _ = Cnm::decode(&good[..i]);
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut c = good.clone();
                c[i] = v;
                if let Ok(cnm) = Cnm::decode(&c) {
                    let _ = cnm.flow();
                }
            }
        }
    }

    #[test]
    fn flow_of_handles_short_and_odd_headers() {
        assert_eq!(flow_of(&[]), None);
        assert_eq!(flow_of(&[0x45; 10]), None);
        let mut p = tcp_packet();
        p[9] = 1; // ICMP: no ports
        assert_eq!(flow_of(&p).unwrap().src_port, 0);
        let mut v6 = vec![0u8; 44];
        v6[0] = 0x60;
        v6[6] = IP_PROTO_UDP;
        v6[40..42].copy_from_slice(&7u16.to_be_bytes());
        let f = flow_of(&v6).unwrap();
        assert_eq!((f.protocol, f.src_port), (IP_PROTO_UDP, 7));
    }
}
