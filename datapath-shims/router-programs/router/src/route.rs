//! Route features the `ip` of Debian 12 (iproute2 6.1) cannot set, written over rtnetlink.
//!
//! Linux 6.7 added microsecond TCP timestamps (TSval in µs instead of ms), chosen per route with
//! the `tcp_usec_ts` feature (`RTAX_FEATURE_TCP_USEC_TS`): a connection whose route has it sends
//! µs TSvals. Receivers that measure one-way delay from TSvals (the Inigo receiver) then see
//! µs rather than 1 ms of quantisation. iproute2 learned `features tcp_usec_ts` in 6.7, so the
//! default route is replaced here with one RTM_NEWROUTE message carrying the feature.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};

// <linux/netlink.h>, <linux/rtnetlink.h>: stable UAPI values.
const RTM_NEWROUTE: u16 = 24;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 2;
const RT_TABLE_MAIN: u8 = 254;
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_LINK: u8 = 253;
const RTN_UNICAST: u8 = 1;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTAX_FEATURES: u16 = 12;
/// `RTAX_FEATURE_TCP_USEC_TS`, Linux 6.7.
pub const RTAX_FEATURE_TCP_USEC_TS: u32 = 1 << 4;

const NLMSG_HDR_LEN: usize = 16;

fn push_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// The RTM_NEWROUTE request that replaces the main table's IPv4 default route with
/// `default dev <ifindex> src <src>` carrying `features`.
pub fn default_route_request(ifindex: u32, src: Ipv4Addr, features: u32, seq: u32) -> Vec<u8> {
    let mut msg = vec![0u8; NLMSG_HDR_LEN];
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags (u32).
    msg.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0, RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_LINK, RTN_UNICAST]);
    msg.extend_from_slice(&0u32.to_ne_bytes());
    push_attr(&mut msg, RTA_OIF, &ifindex.to_ne_bytes());
    push_attr(&mut msg, RTA_PREFSRC, &src.octets());
    let mut metrics = Vec::new();
    push_attr(&mut metrics, RTAX_FEATURES, &features.to_ne_bytes());
    push_attr(&mut msg, RTA_METRICS, &metrics);
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    msg[4..6].copy_from_slice(&RTM_NEWROUTE.to_ne_bytes());
    msg[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE).to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    msg
}

/// The errno of a netlink acknowledgement (0 for success), or a description of what was wrong
/// with the reply.
pub fn ack_errno(reply: &[u8]) -> std::result::Result<i32, String> {
    if reply.len() < NLMSG_HDR_LEN + 4 {
        return Err(format!("a {}-byte reply, shorter than an acknowledgement", reply.len()));
    }
    let kind = u16::from_ne_bytes([reply[4], reply[5]]);
    if kind != NLMSG_ERROR {
        return Err(format!("reply of type {kind}, not an acknowledgement"));
    }
    let err = i32::from_ne_bytes(reply[16..20].try_into().expect("4 bytes"));
    Ok(-err)
}

/// Replaces the calling thread's namespace's default route through `dev` with one that carries
/// `features` (call it inside the namespace, e.g. from [`crate::netns::run_in`]).
pub fn set_default_route_features(dev: &str, src: Ipv4Addr, features: u32) -> Result<()> {
    let what = format!("setting route features {features:#x} on the default route via {dev}");
    let name = std::ffi::CString::new(dev).map_err(|_| Error::param("device", format!("{dev:?} holds a NUL")))?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(Error::last_os(format!("{what}: no device {dev}")));
    }
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(Error::last_os(format!("{what}: netlink socket")));
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let req = default_route_request(ifindex, src, features, 1);
    // SAFETY: the buffer is valid for its length; a zeroed sockaddr_nl addresses the kernel.
    let sent = unsafe {
        let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
        kernel.nl_family = libc::AF_NETLINK as u16;
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent != req.len() as isize {
        return Err(Error::last_os(format!("{what}: sending the request")));
    }
    let mut reply = [0u8; 1024];
    // SAFETY: the buffer is valid for its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), reply.as_mut_ptr().cast(), reply.len(), 0) };
    if n < 0 {
        return Err(Error::last_os(format!("{what}: reading the acknowledgement")));
    }
    match ack_errno(&reply[..n as usize]) {
        Ok(0) => Ok(()),
        Ok(errno) => Err(Error::io(format!("{what} (tcp_usec_ts needs Linux ≥ 6.7)"), std::io::Error::from_raw_os_error(errno))),
        Err(e) => Err(Error::Topology(format!("{what}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_a_whole_aligned_netlink_message() {
        let m = default_route_request(7, Ipv4Addr::new(10, 77, 0, 1), RTAX_FEATURE_TCP_USEC_TS, 9);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(m.len() % 4, 0);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_NEWROUTE);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 9);
        // rtmsg: IPv4, default (dst_len 0), main table, link scope, unicast.
        assert_eq!(&m[16..24], &[libc::AF_INET as u8, 0, 0, 0, 254, 3, 253, 1]);
        // Attributes: OIF (8 bytes), PREFSRC (8), METRICS (4 + nested FEATURES of 8).
        assert_eq!(&m[28..32], &[8, 0, 4, 0]);
        assert_eq!(u32::from_ne_bytes(m[32..36].try_into().unwrap()), 7);
        assert_eq!(&m[36..40], &[8, 0, 7, 0]);
        assert_eq!(&m[40..44], &[10, 77, 0, 1]);
        assert_eq!(&m[44..48], &[12, 0, 8, 0]);
        assert_eq!(&m[48..52], &[8, 0, 12, 0]);
        assert_eq!(u32::from_ne_bytes(m[52..56].try_into().unwrap()), 0x10);
        assert_eq!(m.len(), 56);
    }

    #[test]
    fn acknowledgements_are_read_and_other_replies_named() {
        let mut ack = vec![0u8; 36];
        ack[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(ack_errno(&ack), Ok(0));
        ack[16..20].copy_from_slice(&(-libc::EINVAL).to_ne_bytes());
        assert_eq!(ack_errno(&ack), Ok(libc::EINVAL));
        ack[4..6].copy_from_slice(&24u16.to_ne_bytes());
        assert!(ack_errno(&ack).unwrap_err().contains("type 24"));
        assert!(ack_errno(&ack[..10]).unwrap_err().contains("shorter"));
    }
}
