//! libccp IPC over netlink, as ccp-kernel speaks it.
//!
//! ccp-kernel owns a `NETLINK_USERSOCK` kernel socket, multicasts datapath→agent messages to
//! group 22 and accepts agent→datapath messages unicast to port id 0 (the kernel). Every message
//! carries a 16-byte `nlmsghdr` in front of the libccp message. The agent binds an
//! automatically assigned port id, joins the group and replies to the sender's port id, which
//! is 0 for the kernel and lets a user-space peer stand in for ccp-kernel in tests.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{bail, Context};

use super::transport::{Received, Transport};

/// ccp-kernel's multicast group.
pub const CCP_MULTICAST_GROUP: u32 = 22;

const SOL_NETLINK: libc::c_int = 270;

pub struct NetlinkTransport {
    fd: OwnedFd,
    port_id: u32,
    group: u32,
    rx: Vec<u8>,
    tx: Vec<u8>,
}

fn sockaddr(port_id: u32) -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_nl = unsafe { zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa.nl_pid = port_id;
    sa
}

impl NetlinkTransport {
    pub fn bind(group: u32) -> anyhow::Result<Self> {
        if group == 0 || group > 32 {
            bail!("netlink multicast group {group} is out of range 1..=32");
        }
        // SAFETY: plain socket(2) call; the fd is owned below.
        let raw = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, libc::NETLINK_USERSOCK)
        };
        if raw < 0 {
            return Err(io::Error::last_os_error()).context("creating NETLINK_USERSOCK socket");
        }
        // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sa = sockaddr(0);
        // SAFETY: `sa` is a valid sockaddr_nl of the given length.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error()).context("binding netlink socket");
        }
        let grp: libc::c_int = group as libc::c_int;
        // SAFETY: NETLINK_ADD_MEMBERSHIP takes an int group number.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                (&grp as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("joining netlink multicast group {group} (needs root or CAP_NET_ADMIN)"));
        }
        let mut bound = sockaddr(0);
        let mut len = size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: getsockname writes at most `len` bytes into `bound`.
        let rc = unsafe { libc::getsockname(fd.as_raw_fd(), (&mut bound as *mut libc::sockaddr_nl).cast(), &mut len) };
        if rc < 0 {
            return Err(io::Error::last_os_error()).context("reading the netlink port id");
        }
        Ok(NetlinkTransport { fd, port_id: bound.nl_pid, group, rx: vec![0; 64 * 1024], tx: Vec::with_capacity(1024) })
    }

    /// The port id the kernel assigned to this socket.
    pub fn port_id(&self) -> u32 {
        self.port_id
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Transport for NetlinkTransport {
    type Addr = u32;

    fn describe(&self) -> String {
        format!("netlink:usersock/group{}/port{}", self.group, self.port_id)
    }

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut mio::unix::SourceFd(&self.raw()), token, mio::Interest::READABLE)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<Received<u32>>> {
        loop {
            let mut from = sockaddr(0);
            let mut len = size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            // SAFETY: the buffer and address pointers are valid for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.raw(),
                    self.rx.as_mut_ptr().cast(),
                    self.rx.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_nl).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            let datagram = &self.rx[..n as usize];
            let payload = match ccp_wire::netlink::unframe(datagram) {
                Ok(p) => p,
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("bad netlink frame from port {}: {e}", from.nl_pid),
                    ))
                }
            };
            let len = payload.len().min(buf.len());
            buf[..len].copy_from_slice(&payload[..len]);
            return Ok(Some(Received { len, from: Some(from.nl_pid) }));
        }
    }

    fn send(&mut self, to: &u32, msg: &[u8]) -> io::Result<()> {
        self.tx.clear();
        ccp_wire::netlink::frame(msg, &mut self.tx);
        let sa = sockaddr(*to);
        // SAFETY: the buffer and address are valid for the lengths passed.
        let n = unsafe {
            libc::sendto(
                self.raw(),
                self.tx.as_ptr().cast(),
                self.tx.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn addr_name(&self, addr: &u32) -> String {
        if *addr == 0 {
            "kernel".to_string()
        } else {
            format!("netlink-port-{addr}")
        }
    }
}
