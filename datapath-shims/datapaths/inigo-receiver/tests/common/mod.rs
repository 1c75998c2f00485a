//! Crafted Ethernet/IPv4/IPv6/TCP frames for BPF_PROG_TEST_RUN, and checks of what the programs
//! left in them (ECN bits, windows, checksums).
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};

pub const ETH: usize = 14;
pub const NOT_ECT: u8 = 0;
pub const ECT1: u8 = 1;
pub const ECT0: u8 = 2;
pub const CE: u8 = 3;
pub const ACK: u8 = 0x10;
pub const PSH: u8 = 0x08;
pub const SYN: u8 = 0x02;
pub const FIN: u8 = 0x01;
pub const RST: u8 = 0x04;

/// The setup and CI run as root; without it these tests say loudly why they do nothing.
pub fn skip_without_root(test: &str) -> bool {
    if !ccp_inigo_receiver::is_root() {
        eprintln!("SKIPPED {test}: needs root (BPF_PROG_TEST_RUN, sockets in namespaces, TCX)");
        return true;
    }
    false
}

/// Where the Timestamps option sits among the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsLayout {
    /// NOP NOP TS (Linux).
    Aligned,
    /// MSS-less but with a SACK-permitted-like filler first: kind 4 len 2, then TS, then NOP NOP.
    Unaligned,
}

#[derive(Debug, Clone)]
pub struct Seg {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub ts: Option<(u32, u32)>,
    pub ts_layout: TsLayout,
    pub ecn: u8,
    pub payload: usize,
}

impl Seg {
    /// A data segment from `src` to `dst` with timestamps, ECT(0), 1448 bytes.
    pub fn data(src: &str, dst: &str, tsval: u32, tsecr: u32) -> Seg {
        Seg {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq: 1000,
            ack: 1,
            flags: ACK | PSH,
            window: 502,
            ts: Some((tsval, tsecr)),
            ts_layout: TsLayout::Aligned,
            ecn: ECT0,
            payload: 1448,
        }
    }

    /// A pure ACK from `src` to `dst`, advertising `window` (unscaled field value).
    pub fn ack(src: &str, dst: &str, window: u16) -> Seg {
        Seg { flags: ACK, window, payload: 0, ecn: NOT_ECT, ..Seg::data(src, dst, 7, 9) }
    }

    pub fn ecn(mut self, ecn: u8) -> Seg {
        self.ecn = ecn;
        self
    }

    pub fn frame(&self) -> Vec<u8> {
        frame(self)
    }
}

fn csum_add(sum: &mut u32, bytes: &[u8]) {
    for c in bytes.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_be_bytes([c[0], 0]) };
        *sum += u32::from(w);
    }
}

fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn tcp_bytes(s: &Seg) -> Vec<u8> {
    let mut opts = Vec::new();
    if let Some((v, e)) = s.ts {
        match s.ts_layout {
            TsLayout::Aligned => opts.extend([1, 1, 8, 10]),
            TsLayout::Unaligned => opts.extend([4, 2, 8, 10]),
        }
        opts.extend(v.to_be_bytes());
        opts.extend(e.to_be_bytes());
        if s.ts_layout == TsLayout::Unaligned {
            opts.extend([1, 1]);
        }
    }
    while opts.len() % 4 != 0 {
        opts.push(0);
    }
    let doff = (20 + opts.len()) / 4;
    let mut t = Vec::new();
    t.extend(s.src.port().to_be_bytes());
    t.extend(s.dst.port().to_be_bytes());
    t.extend(s.seq.to_be_bytes());
    t.extend(s.ack.to_be_bytes());
    t.push((doff as u8) << 4);
    t.push(s.flags);
    t.extend(s.window.to_be_bytes());
    t.extend([0, 0, 0, 0]); // checksum, urgent pointer
    t.extend(opts);
    t.extend((0..s.payload).map(|i| (i % 251) as u8));
    t
}

fn pseudo_sum(src: IpAddr, dst: IpAddr, len: usize) -> u32 {
    let mut sum = 0;
    match (src, dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            csum_add(&mut sum, &a.octets());
            csum_add(&mut sum, &b.octets());
            csum_add(&mut sum, &[0, 6]);
            csum_add(&mut sum, &(len as u16).to_be_bytes());
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            csum_add(&mut sum, &a.octets());
            csum_add(&mut sum, &b.octets());
            csum_add(&mut sum, &(len as u32).to_be_bytes());
            csum_add(&mut sum, &[0, 0, 0, 6]);
        }
        _ => panic!("mixed address families"),
    }
    sum
}

/// Ethernet + IP + TCP with valid checksums.
pub fn frame(s: &Seg) -> Vec<u8> {
    let mut tcp = tcp_bytes(s);
    let mut sum = pseudo_sum(s.src.ip(), s.dst.ip(), tcp.len());
    csum_add(&mut sum, &tcp);
    let c = fold(sum);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    match (s.src.ip(), s.dst.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            f.extend([0x08, 0x00]);
            let mut ip = vec![0x45, s.ecn & 3];
            ip.extend(((20 + tcp.len()) as u16).to_be_bytes());
            ip.extend([0x12, 0x34, 0x40, 0x00, 64, 6, 0, 0]);
            ip.extend(a.octets());
            ip.extend(b.octets());
            let mut sum = 0;
            csum_add(&mut sum, &ip);
            let c = fold(sum);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend(ip);
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            f.extend([0x86, 0xdd]);
            // version 6, traffic class 0x0?: DSCP 0, ECN in bits 4-5 of byte 1; flow label 0x12345.
            f.extend([0x60, ((s.ecn & 3) << 4) | 0x01, 0x23, 0x45]);
            f.extend((tcp.len() as u16).to_be_bytes());
            f.extend([6, 64]);
            f.extend(a.octets());
            f.extend(b.octets());
        }
        _ => panic!("mixed address families"),
    }
    f.extend(tcp);
    f
}

pub fn is_v4(f: &[u8]) -> bool {
    f[12] == 0x08 && f[13] == 0x00
}

fn tcp_off(f: &[u8]) -> usize {
    if is_v4(f) {
        ETH + usize::from(f[ETH] & 0xf) * 4
    } else {
        ETH + 40
    }
}

pub fn ecn_of(f: &[u8]) -> u8 {
    if is_v4(f) {
        f[ETH + 1] & 3
    } else {
        (f[ETH + 1] >> 4) & 3
    }
}

/// Everything but the ECN bits of the IP header's traffic class / TOS byte(s).
pub fn dscp_bytes(f: &[u8]) -> (u8, u8) {
    if is_v4(f) {
        (f[ETH], f[ETH + 1] & !3)
    } else {
        (f[ETH], f[ETH + 1] & !0x30)
    }
}

pub fn window_of(f: &[u8]) -> u16 {
    let t = tcp_off(f);
    u16::from_be_bytes([f[t + 14], f[t + 15]])
}

/// The IPv4 header checksum verifies (IPv6 has none).
pub fn ip_checksum_ok(f: &[u8]) -> bool {
    if !is_v4(f) {
        return true;
    }
    let ihl = usize::from(f[ETH] & 0xf) * 4;
    let mut sum = 0;
    csum_add(&mut sum, &f[ETH..ETH + ihl]);
    fold(sum) == 0
}

/// The TCP checksum verifies over the pseudo-header and segment.
pub fn tcp_checksum_ok(f: &[u8]) -> bool {
    let t = tcp_off(f);
    let (src, dst): (IpAddr, IpAddr) = if is_v4(f) {
        let a: [u8; 4] = f[ETH + 12..ETH + 16].try_into().unwrap();
        let b: [u8; 4] = f[ETH + 16..ETH + 20].try_into().unwrap();
        (a.into(), b.into())
    } else {
        let a: [u8; 16] = f[ETH + 8..ETH + 24].try_into().unwrap();
        let b: [u8; 16] = f[ETH + 24..ETH + 40].try_into().unwrap();
        (a.into(), b.into())
    };
    let seg = &f[t..];
    let mut sum = pseudo_sum(src, dst, seg.len());
    csum_add(&mut sum, seg);
    fold(sum) == 0
}
