//! QCN feedback on the wire: the router turns a congestion point's notification into a UDP
//! datagram (payload: `ccp_cnm_wire::Cnm`) from the router's address to the sampled
//! packet's source, and writes it into the sender's TUN device as if it had come over the link.

use std::net::Ipv4Addr;

use ccp_cnm_wire::Cnm;

use crate::packet::internet_checksum;

const IPV4_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const IP_PROTO_UDP: u8 = 17;
/// Don't-fragment flag in the IPv4 flags/fragment field.
const IPV4_DONT_FRAGMENT: u16 = 0x4000;
const DEFAULT_TTL: u8 = 64;
/// DSCP CS6 (network control): CNMs are control traffic that must not wait behind data.
const DSCP_CS6_TOS: u8 = 0xc0;

/// An IPv4/UDP datagram from `src:port` to `dst:port` carrying `cnm`.
pub fn cnm_datagram(src: Ipv4Addr, dst: Ipv4Addr, port: u16, cnm: &Cnm) -> Vec<u8> {
    let mut payload = Vec::with_capacity(96);
    cnm.encode(&mut payload);
    udp_datagram(src, dst, port, port, &payload)
}

/// Builds an IPv4/UDP datagram with valid IP and UDP checksums.
pub fn udp_datagram(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let udp_len = UDP_HEADER_LEN + payload.len();
    let total = IPV4_HEADER_LEN + udp_len;
    let mut p = Vec::with_capacity(total);
    p.push(0x45);
    p.push(DSCP_CS6_TOS);
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]); // identification
    p.extend_from_slice(&IPV4_DONT_FRAGMENT.to_be_bytes());
    p.push(DEFAULT_TTL);
    p.push(IP_PROTO_UDP);
    p.extend_from_slice(&[0, 0]); // header checksum, below
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    let sum = internet_checksum(&p[..IPV4_HEADER_LEN], 0);
    p[10..12].copy_from_slice(&sum.to_be_bytes());

    p.extend_from_slice(&src_port.to_be_bytes());
    p.extend_from_slice(&dst_port.to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]); // UDP checksum, below
    p.extend_from_slice(payload);
    // Pseudo-header: source, destination, protocol, UDP length.
    let mut pseudo = 0u32;
    for w in [src.octets(), dst.octets()] {
        pseudo += u32::from(u16::from_be_bytes([w[0], w[1]])) + u32::from(u16::from_be_bytes([w[2], w[3]]));
    }
    pseudo += u32::from(IP_PROTO_UDP) + udp_len as u32;
    let csum = match internet_checksum(&p[IPV4_HEADER_LEN..], pseudo) {
        0 => 0xffff, // 0 means "no checksum" in UDP over IPv4
        c => c,
    };
    p[IPV4_HEADER_LEN + 6..IPV4_HEADER_LEN + 8].copy_from_slice(&csum.to_be_bytes());
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_qdisc::qcn::{CongestionNotification, Quantization};

    #[test]
    fn datagram_checksums_verify() {
        let n = CongestionNotification {
            key: (),
            qfb: 9,
            fb_bytes: 13_500.0,
            q_off_bytes: 1,
            q_delta_bytes: 2,
            sampled_at: 3,
            quantization: Quantization::Packets,
        };
        let cnm = n.to_cnm(1, &[0x45; 40]);
        let src = Ipv4Addr::new(10, 77, 0, 254);
        let dst = Ipv4Addr::new(10, 77, 0, 1);
        let p = cnm_datagram(src, dst, 7470, &cnm);
        assert_eq!(internet_checksum(&p[..20], 0), 0);
        let udp_len = p.len() - 20;
        let mut pseudo = 0u32;
        for w in [src.octets(), dst.octets()] {
            pseudo += u32::from(u16::from_be_bytes([w[0], w[1]])) + u32::from(u16::from_be_bytes([w[2], w[3]]));
        }
        pseudo += 17 + udp_len as u32;
        assert_eq!(internet_checksum(&p[20..], pseudo), 0);
        assert_eq!(Cnm::decode(&p[28..]).unwrap(), cnm);
    }
}
