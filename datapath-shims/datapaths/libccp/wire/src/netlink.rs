//! The netlink framing ccp-kernel uses on `NETLINK_USERSOCK`.
//!
//! Every datagram between the agent and ccp-kernel carries one libccp message behind a 16-byte
//! `struct nlmsghdr`: `u32 nlmsg_len` (header included) · `u16 nlmsg_type` · `u16 nlmsg_flags` ·
//! `u32 nlmsg_seq` · `u32 nlmsg_pid`, in host (little-endian) order. The kernel sends with
//! `nlmsg_put(.., type NLMSG_DONE, flags 0)` and may pad the datagram to 4 bytes; for what the
//! agent sends it reads only the payload (`nlmsg_data`) and passes `nlmsg_len` to libccp as the
//! buffer size, ignoring type, flags, seq and pid. So, like portus, [`frame`] writes the length and
//! zeros, and [`unframe`] checks the length and ignores the other fields.

use crate::codec::DecodeError;

/// Size of `struct nlmsghdr`.
pub const NLMSG_HDR_LEN: usize = 16;

/// Appends `payload` to `out` behind a `nlmsghdr` whose length is `16 + payload.len()` and whose
/// other fields are 0. (libccp messages are at most 32 678 bytes; a payload too large for the u32
/// length field, which no socket would accept anyway, gets `u32::MAX`.)
pub fn frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(NLMSG_HDR_LEN.saturating_add(payload.len())).unwrap_or(u32::MAX);
    out.reserve(NLMSG_HDR_LEN + payload.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0u8; NLMSG_HDR_LEN - 4]);
    out.extend_from_slice(payload);
}

/// The payload of one netlink datagram: the bytes between the 16-byte header and `nlmsg_len`.
/// `nlmsg_len` must be at least 16 and at most `buf.len()`; bytes past it (alignment padding)
/// are ignored. Never panics.
pub fn unframe(buf: &[u8]) -> Result<&[u8], DecodeError> {
    let len: [u8; 4] = buf
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .filter(|_| buf.len() >= NLMSG_HDR_LEN)
        .ok_or(DecodeError::NetlinkShort { available: buf.len() })?;
    let nlmsg_len = u32::from_le_bytes(len);
    usize::try_from(nlmsg_len)
        .ok()
        .filter(|&n| n >= NLMSG_HDR_LEN)
        .and_then(|n| buf.get(NLMSG_HDR_LEN..n))
        .ok_or(DecodeError::NetlinkLen { nlmsg_len, available: buf.len() })
}
