//! How libccp messages travel: a datagram transport with addressable peers, and who sent each
//! datagram.
//!
//! # Who sent a datagram
//! Flows are limited per owner (`[safety] max_flows_per_uid`, `crate::flows::admission`), and a
//! libccp datapath's CREATE says nothing of the socket it speaks for: a flow belongs to the user
//! whose process announced it. That uid is taken from the kernel, not from the datagram: the
//! agent's socket asks for the sender's credentials (`SO_PASSCRED`), and the kernel attaches
//! the sending process's real uid to every datagram (`SCM_CREDENTIALS`). A sender may attach
//! credentials of its own, but the kernel accepts only its own real, effective or saved uid
//! unless it holds `CAP_SETUID`, so no user can make its flows count against another's. (The
//! owner of the sender's socket file would not do: a user can bind a name, unlink it and let
//! another user's datapath bind the same name, after which its datagrams still carry that name.)
//! The kernel's own messages (ccp-kernel over netlink) carry uid 0: kernel flows count as root's,
//! against the total only, for a CREATE from ccp-kernel does not name the socket's owner. (A
//! user given subordinate uids, `/etc/subuid`, can send as any of them from a user namespace, as
//! it can own sockets as them on the eBPF datapath: each counts as a user of its own.)

use std::fmt::Debug;
use std::hash::Hash;
use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;
use std::time::Instant;

use crate::log_limit::{LogLimit, LOG_EVERY};

/// One received datagram: its length in the caller's buffer and its sender, when the sender
/// can be replied to (an unnamed unix socket cannot).
pub struct Received<A> {
    pub len: usize,
    pub from: Option<A>,
    /// The uid of the process that sent it, as the kernel vouches for it (module docs); `None`
    /// where the transport cannot tell.
    pub uid: Option<u32>,
}

pub trait Transport {
    /// Address of a peer datapath.
    type Addr: Clone + Eq + Hash + Debug;

    fn describe(&self) -> String;

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()>;

    /// Receives one datagram's libccp payload into `buf`; `Ok(None)` when nothing is waiting.
    /// `now` (here and below): the time of the adapter's batch.
    fn recv(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Option<Received<Self::Addr>>>;

    /// Sends one libccp message (unframed) to `to`. `WouldBlock` when `to`'s queue is full:
    /// the message was not sent, and nothing more is until `writable_again` names `to`.
    fn send(&mut self, to: &Self::Addr, msg: &[u8], now: Instant) -> io::Result<()>;

    /// Appends the peers that refused a send for a full queue and have room again.
    fn writable_again(&mut self, _out: &mut Vec<Self::Addr>, _now: Instant) {}

    /// Drops what the transport keeps for a peer that is gone.
    fn forget(&mut self, _addr: &Self::Addr) {}

    fn addr_name(&self, addr: &Self::Addr) -> String;

    /// Datagrams dropped so far because of who sent them (see [`Refusals`]).
    fn refused(&self) -> u64 {
        0
    }
}

/// Counts datagrams a transport refuses by sender and logs them without flooding the log (see
/// [`crate::log_limit`]): the senders are unprivileged, so one line per datagram would hand
/// them the log.
#[derive(Debug)]
pub struct Refusals {
    what: &'static str,
    total: u64,
    log: LogLimit,
}

impl Refusals {
    /// `what` names the rule, e.g. "netlink sender is not the kernel".
    pub fn new(what: &'static str) -> Refusals {
        Refusals { what, total: 0, log: LogLimit::default() }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts one refusal of a datagram from `sender`; returns true when it was logged.
    pub fn refuse(&mut self, sender: &dyn std::fmt::Display, now: Instant) -> bool {
        self.total += 1;
        let Some(not_logged) = self.log.allow(now) else { return false };
        tracing::warn!(
            rule = self.what,
            %sender,
            refused = not_logged + 1,
            refused_total = self.total,
            "refusing datagrams (further refusals are logged at most every {}s)",
            LOG_EVERY.as_secs()
        );
        true
    }
}

/// Asks the kernel to attach the sender's credentials to every datagram `fd` receives from now
/// on (`SO_PASSCRED`).
pub fn pass_credentials(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: SO_PASSCRED takes an int flag; the pointer and length describe `on`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One datagram read by [`recv_with_uid`].
pub struct Datagram {
    /// Its length in the caller's buffer (longer datagrams are cut, as by `recvfrom`).
    pub len: usize,
    /// The length of the sender's address written into the caller's `addr`.
    pub addr_len: libc::socklen_t,
    /// The sender's uid from its `SCM_CREDENTIALS`: present on every datagram once
    /// [`pass_credentials`] is set (a datagram queued before then reads as the overflow uid,
    /// 65534, which the kernel gives where it has none).
    pub uid: Option<u32>,
}

/// Receives one datagram from the non-blocking socket `fd` (`recvmsg(2)`), with its sender's
/// address in `addr` (a `sockaddr_un`, `sockaddr_nl`, ...) and its credentials.
///
/// The control buffer has room for the credentials only: descriptors a sender attaches
/// (`SCM_RIGHTS`) do not fit, so the kernel closes them instead of installing them here; any
/// that did arrive would be closed at once.
pub fn recv_with_uid<S>(fd: RawFd, buf: &mut [u8], addr: &mut S) -> io::Result<Datagram> {
    // In u64s, so that the buffer is aligned for cmsghdr.
    let mut control = [0u64; CREDENTIALS_SPACE.div_ceil(8)];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: msghdr is plain old data; all-zero is a valid value, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (addr as *mut S).cast();
    msg.msg_namelen = size_of::<S>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CREDENTIALS_SPACE as _;
    // SAFETY: every pointer in `msg` is valid for the length given with it, for the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut uid = None;
    // SAFETY: the CMSG_* walk stays within `msg.msg_controllen` bytes of `control`, which
    // the kernel filled; each header is checked before its data is read.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            let data_len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if data_len >= size_of::<libc::ucred>() => {
                    uid = Some(std::ptr::read_unaligned(data.cast::<libc::ucred>()).uid);
                }
                (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                    for i in 0..data_len / size_of::<libc::c_int>() {
                        libc::close(std::ptr::read_unaligned(data.cast::<libc::c_int>().add(i)));
                    }
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(Datagram { len: n as usize, addr_len: msg.msg_namelen, uid })
}

/// Control buffer room for one `SCM_CREDENTIALS` message and nothing else.
// SAFETY: CMSG_SPACE is arithmetic on its argument.
const CREDENTIALS_SPACE: usize = unsafe { libc::CMSG_SPACE(size_of::<libc::ucred>() as libc::c_uint) } as usize;

/// True when a send error means the peer no longer exists (as opposed to a full buffer).
pub fn peer_is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ECONNREFUSED) | Some(libc::ENOTCONN))
}
