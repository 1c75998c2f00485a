//! Raw IP packets as the router sees them on its TUN devices, made into `ccp_qdisc::Packet`s:
//! ECN read and rewritten in place (IPv4 header checksum recomputed), and the first header bytes
//! kept as the QCN feedback key so a congestion notification can name the flow. A flow is its
//! addresses, protocol and ports (ABC's coexistence scheduler counts flows and may classify by
//! destination port).

use std::hash::{Hash, Hasher};

use ccp_cnm_wire::CNM_MAX_SAMPLE_LEN;
use ccp_qdisc::{Ecn, Nanos, Packet};

/// Minimum IPv4 header length, bytes.
const IPV4_MIN_HEADER: usize = 20;
/// IPv6 fixed header length, bytes.
const IPV6_HEADER: usize = 40;

/// One packet read from a TUN device.
#[derive(Debug)]
pub struct IpPacket {
    /// The whole IP packet.
    pub data: Vec<u8>,
    /// Sequence number per direction, for the per-packet log.
    pub id: u64,
    /// When it reached the queue: read from the TUN device, or with `--pacer` released by the
    /// pacer of a paced flow (the pacer models the sending host, upstream of the router).
    pub arrival: Nanos,
    /// Its ECN codepoint on arrival (to tell what the queue discipline changed).
    pub ecn_in: Ecn,
}

/// The first bytes of a sampled packet (IP header and L4 ports): enough to address a CNM to its
/// source and let the sender find the flow.
#[derive(Debug, Clone)]
pub struct SampledHeader {
    pub bytes: [u8; CNM_MAX_SAMPLE_LEN],
    pub len: u8,
}

impl SampledHeader {
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The IPv4 source address, if this is an IPv4 packet.
    pub fn ipv4_source(&self) -> Option<std::net::Ipv4Addr> {
        let b = self.as_slice();
        (b.len() >= IPV4_MIN_HEADER && b[0] >> 4 == 4).then(|| std::net::Ipv4Addr::new(b[12], b[13], b[14], b[15]))
    }
}

impl IpPacket {
    pub fn new(data: Vec<u8>, id: u64, arrival: Nanos) -> IpPacket {
        let ecn_in = ecn_of(&data);
        IpPacket { data, id, arrival, ecn_in }
    }
}

/// The IP version nibble, if the packet is long enough to have a header of that version.
fn version(data: &[u8]) -> Option<u8> {
    match data.first()? >> 4 {
        4 if data.len() >= IPV4_MIN_HEADER => Some(4),
        6 if data.len() >= IPV6_HEADER => Some(6),
        _ => None,
    }
}

/// The ECN codepoint of an IP packet (Not-ECT for anything that is not IP).
pub fn ecn_of(data: &[u8]) -> Ecn {
    match version(data) {
        Some(4) => Ecn::from_bits(data[1]),
        Some(6) => Ecn::from_bits(data[1] >> 4),
        _ => Ecn::NotEct,
    }
}

/// IP protocol numbers whose first four payload bytes are the source and destination ports.
const TCP: u8 = 6;
const UDP: u8 = 17;

/// The protocol and the offset of the transport header: IPv4 first fragments with their options
/// skipped, IPv6 packets whose next header is the transport itself (extension headers are not
/// walked).
fn transport(data: &[u8]) -> Option<(u8, usize)> {
    match version(data)? {
        4 => {
            let fragment_offset = u16::from_be_bytes([data[6], data[7]]) & 0x1fff;
            (fragment_offset == 0).then_some(())?;
            Some((data[9], usize::from(data[0] & 0x0f) * 4))
        }
        _ => Some((data[6], IPV6_HEADER)),
    }
}

/// The transport ports (source, destination) of a TCP or UDP packet (see [`transport`] for
/// which packets have them here).
pub fn ports_of(data: &[u8]) -> Option<(u16, u16)> {
    let (proto, l4) = transport(data)?;
    if proto != TCP && proto != UDP {
        return None;
    }
    let p = data.get(l4..l4 + 4)?;
    Some((u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])))
}

/// The TCP ECN-Echo flag: `Some(set)` for a TCP segment, `None` for anything else.
pub fn tcp_ece(data: &[u8]) -> Option<bool> {
    const ECE: u8 = 0x40;
    let (proto, l4) = transport(data)?;
    (proto == TCP).then_some(())?;
    data.get(l4 + 13).map(|flags| flags & ECE != 0)
}

/// A hash of the packet's flow: addresses, protocol and ports (addresses alone for other
/// protocols; the whole header region for what is not IP).
pub fn flow_hash(data: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match version(data) {
        Some(4) => (&data[12..20], data[9]).hash(&mut h),
        Some(6) => (&data[8..40], data[6]).hash(&mut h),
        _ => data[..data.len().min(CNM_MAX_SAMPLE_LEN)].hash(&mut h),
    }
    ports_of(data).hash(&mut h);
    h.finish()
}

/// [`flow_hash`] of the opposite direction of the packet's flow (addresses and ports swapped):
/// for an ACK, the hash of the data packets it acknowledges (`None` for what is not IP).
pub fn reverse_flow_hash(data: &[u8]) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match version(data)? {
        4 => {
            let swapped: Vec<u8> = [&data[16..20], &data[12..16]].concat();
            (&swapped[..], data[9]).hash(&mut h);
        }
        _ => {
            let swapped: Vec<u8> = [&data[24..40], &data[8..24]].concat();
            (&swapped[..], data[6]).hash(&mut h);
        }
    }
    ports_of(data).map(|(s, d)| (d, s)).hash(&mut h);
    Some(h.finish())
}

/// Rewrites the ECN codepoint, keeping the IPv4 header checksum valid.
pub fn set_ecn(data: &mut [u8], ecn: Ecn) {
    match version(data) {
        Some(4) => {
            data[1] = (data[1] & !0b11) | ecn.bits();
            let ihl = (usize::from(data[0] & 0x0f) * 4).clamp(IPV4_MIN_HEADER, data.len());
            data[10] = 0;
            data[11] = 0;
            let sum = internet_checksum(&data[..ihl], 0);
            data[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        Some(6) => data[1] = (data[1] & 0b1100_1111) | (ecn.bits() << 4),
        _ => {}
    }
}

/// The RFC 1071 one's-complement checksum of `bytes`, starting from a partial `initial` sum.
pub fn internet_checksum(bytes: &[u8], initial: u32) -> u16 {
    let mut sum = initial;
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Packet for IpPacket {
    type FeedbackKey = SampledHeader;

    fn len_bytes(&self) -> u32 {
        self.data.len() as u32
    }

    fn ecn(&self) -> Ecn {
        ecn_of(&self.data)
    }

    fn set_ecn(&mut self, ecn: Ecn) {
        set_ecn(&mut self.data, ecn);
    }

    fn feedback_key(&self) -> SampledHeader {
        let len = self.data.len().min(CNM_MAX_SAMPLE_LEN);
        let mut bytes = [0u8; CNM_MAX_SAMPLE_LEN];
        bytes[..len].copy_from_slice(&self.data[..len]);
        SampledHeader { bytes, len: len as u8 }
    }

    fn flow_key(&self) -> u64 {
        flow_hash(&self.data)
    }

    fn dst_port(&self) -> Option<u16> {
        ports_of(&self.data).map(|(_, dst)| dst)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal IPv4/TCP packet of `len` bytes with a valid header checksum.
    pub fn ipv4(len: usize, ecn: Ecn) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = ecn.bits();
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        let sum = internet_checksum(&p[..20], 0);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p
    }

    #[test]
    fn ecn_rewrite_keeps_the_checksum_valid() {
        for from in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce] {
            for to in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce] {
                let mut p = IpPacket::new(ipv4(1500, from), 0, 0);
                assert_eq!(p.ecn(), from);
                p.set_ecn(to);
                assert_eq!(p.ecn(), to);
                assert_eq!(internet_checksum(&p.data[..20], 0), 0, "a valid header sums to zero");
                assert_eq!(p.data[1] & !0b11, 0, "DSCP untouched");
            }
        }
    }

    #[test]
    fn ipv6_traffic_class_and_garbage() {
        let mut p = vec![0u8; 60];
        p[0] = 0x6a; // version 6, traffic class high nibble 0xa
        p[1] = 0x50; // traffic class low nibble 0x5 → ECN = 01
        assert_eq!(ecn_of(&p), Ecn::Ect1);
        set_ecn(&mut p, Ecn::Ce);
        assert_eq!((p[0], p[1]), (0x6a, 0x70));
        let mut junk = vec![0xffu8; 3];
        assert_eq!(ecn_of(&junk), Ecn::NotEct);
        set_ecn(&mut junk, Ecn::Ce);
        assert_eq!(junk, vec![0xff; 3]);
    }

    /// An IPv4/TCP packet with these ports (20-byte header, ports right after it).
    fn tcp(src_port: u16, dst_port: u16) -> Vec<u8> {
        let mut p = ipv4(60, Ecn::NotEct);
        p[20..22].copy_from_slice(&src_port.to_be_bytes());
        p[22..24].copy_from_slice(&dst_port.to_be_bytes());
        p
    }

    #[test]
    fn ports_and_flow_keys() {
        let a = IpPacket::new(tcp(40000, 5201), 0, 0);
        assert_eq!(a.dst_port(), Some(5201));
        assert_eq!(a.flow_key(), IpPacket::new(tcp(40000, 5201), 9, 9).flow_key(), "same flow, same key");
        assert_ne!(a.flow_key(), IpPacket::new(tcp(40001, 5201), 0, 0).flow_key());
        // IPv4 options move the ports.
        let mut opt = tcp(1, 2);
        opt[0] = 0x46;
        opt.splice(20..20, [1u8; 4]);
        assert_eq!(ports_of(&opt), Some((1, 2)));
        // A later fragment has no ports; neither has ICMP nor a truncated header.
        let mut frag = tcp(1, 2);
        frag[7] = 1;
        assert_eq!(ports_of(&frag), None);
        let mut icmp = tcp(1, 2);
        icmp[9] = 1;
        assert_eq!(ports_of(&icmp), None);
        assert_eq!(ports_of(&tcp(1, 2)[..22]), None);
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        v6[6] = UDP;
        v6[40..44].copy_from_slice(&[0, 7, 0, 9]);
        assert_eq!(ports_of(&v6), Some((7, 9)));
        assert_eq!(ports_of(&[0xff; 3]), None);
    }

    /// An ACK of `data`'s flow: addresses and ports swapped, TCP flags `flags`.
    fn ack_of(data: &[u8], flags: u8) -> Vec<u8> {
        let mut a = ipv4(52, Ecn::NotEct);
        a[12..16].copy_from_slice(&data[16..20]);
        a[16..20].copy_from_slice(&data[12..16]);
        a[20..22].copy_from_slice(&data[22..24]);
        a[22..24].copy_from_slice(&data[20..22]);
        a[33] = flags;
        a
    }

    #[test]
    fn an_ack_names_the_data_flow_it_acknowledges_and_its_ecn_echo() {
        let data = tcp(40000, 5201);
        let ack = ack_of(&data, 0x50);
        assert_eq!(reverse_flow_hash(&ack), Some(flow_hash(&data)), "the ACK's reverse is the data flow");
        assert_ne!(reverse_flow_hash(&ack_of(&tcp(40001, 5201), 0x10)), Some(flow_hash(&data)), "another flow");
        assert_ne!(flow_hash(&ack), flow_hash(&data), "the two directions differ");
        assert_eq!((tcp_ece(&ack), tcp_ece(&ack_of(&data, 0x10))), (Some(true), Some(false)), "ACK|ECE, then ACK alone");
        let mut udp = ack.clone();
        udp[9] = UDP;
        assert_eq!(tcp_ece(&udp), None, "UDP has no ECN-Echo");
        assert_eq!(tcp_ece(&ack[..30]), None, "a truncated header has no flags");
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        v6[6] = TCP;
        v6[8..24].copy_from_slice(&[1; 16]);
        v6[24..40].copy_from_slice(&[2; 16]);
        v6[40..44].copy_from_slice(&[0, 7, 0, 9]);
        let mut v6_ack = v6.clone();
        v6_ack[8..24].copy_from_slice(&[2; 16]);
        v6_ack[24..40].copy_from_slice(&[1; 16]);
        v6_ack[40..44].copy_from_slice(&[0, 9, 0, 7]);
        v6_ack[53] = 0x40;
        assert_eq!(reverse_flow_hash(&v6_ack), Some(flow_hash(&v6)));
        assert_eq!(tcp_ece(&v6_ack), Some(true));
        assert_eq!(reverse_flow_hash(&[0xff; 3]), None);
    }

    #[test]
    fn feedback_key_copies_at_most_64_bytes() {
        let p = IpPacket::new(ipv4(1500, Ecn::Ect0), 0, 0);
        let k = p.feedback_key();
        assert_eq!(k.len, 64);
        assert_eq!(k.ipv4_source(), Some(std::net::Ipv4Addr::new(10, 77, 0, 1)));
        let short = IpPacket::new(ipv4(40, Ecn::Ect0), 0, 0);
        assert_eq!(short.feedback_key().len, 40);
    }
}
