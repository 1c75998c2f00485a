//! libccp IPC over netlink, as ccp-kernel speaks it.
//!
//! ccp-kernel owns a `NETLINK_USERSOCK` kernel socket, multicasts datapath→agent messages to
//! group 22 and accepts agent→datapath messages unicast to port id 0 (the kernel). Every message
//! carries a 16-byte `nlmsghdr` in front of the libccp message. The agent binds an
//! automatically assigned port id, joins the group and replies to the sender's port id, which
//! is 0 for the kernel.
//!
//! `NETLINK_USERSOCK` has no permission check on unicast sends: any local user can send to the
//! agent's port id. So only messages from the kernel (`nl_pid == 0`, i.e. ccp-kernel) are
//! accepted; a user-space peer standing in for ccp-kernel (tests, a user-space datapath over
//! netlink) must be allowed explicitly (`[datapath.netlink] allow_user_peers = true`). Refused
//! datagrams are counted and logged at a bounded rate.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{bail, Context};

use super::transport::{pass_credentials, recv_with_uid, Received, Refusals, Transport};

/// ccp-kernel's multicast group.
pub const CCP_MULTICAST_GROUP: u32 = 22;

const SOL_NETLINK: libc::c_int = 270;

pub struct NetlinkTransport {
    fd: OwnedFd,
    port_id: u32,
    group: u32,
    rx: Vec<u8>,
    tx: Vec<u8>,
    allow_user_peers: bool,
    refusals: Refusals,
}

/// How a netlink peer is named in logs and status: the kernel, or a user-space port.
pub fn port_name(nl_pid: u32) -> String {
    if nl_pid == 0 {
        "kernel".to_string()
    } else {
        format!("netlink-port-{nl_pid}")
    }
}

/// Whether a datagram from netlink port id `nl_pid` may be heard: the kernel always, a
/// user-space socket only when allowed.
pub fn sender_allowed(nl_pid: u32, allow_user_peers: bool) -> bool {
    nl_pid == 0 || allow_user_peers
}

fn sockaddr(port_id: u32) -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_nl = unsafe { zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa.nl_pid = port_id;
    sa
}

impl NetlinkTransport {
    /// Binds and joins `group`; `allow_user_peers` also accepts messages from user-space
    /// netlink sockets (see the module docs).
    pub fn bind(group: u32, allow_user_peers: bool) -> anyhow::Result<Self> {
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
        // The kernel's messages carry uid 0 (its flows count as root's); a user-space peer's,
        // when allowed, its own (transport.rs, "Who sent a datagram").
        pass_credentials(fd.as_raw_fd()).context("SO_PASSCRED on the netlink socket")?;
        let mut bound = sockaddr(0);
        let mut len = size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: getsockname writes at most `len` bytes into `bound`.
        let rc = unsafe { libc::getsockname(fd.as_raw_fd(), (&mut bound as *mut libc::sockaddr_nl).cast(), &mut len) };
        if rc < 0 {
            return Err(io::Error::last_os_error()).context("reading the netlink port id");
        }
        Ok(NetlinkTransport {
            fd,
            port_id: bound.nl_pid,
            group,
            rx: vec![0; 64 * 1024],
            tx: Vec::with_capacity(1024),
            allow_user_peers,
            refusals: Refusals::new(
                "netlink sender is a user-space socket, not the kernel (set [datapath.netlink] allow_user_peers to accept one)",
            ),
        })
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

    fn recv(&mut self, buf: &mut [u8], now: std::time::Instant) -> io::Result<Option<Received<u32>>> {
        loop {
            let mut from = sockaddr(0);
            let got = match recv_with_uid(self.raw(), &mut self.rx, &mut from) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if !sender_allowed(from.nl_pid, self.allow_user_peers) {
                self.refusals.refuse(&format_args!("netlink port {}", from.nl_pid), now);
                continue;
            }
            let datagram = &self.rx[..got.len];
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
            return Ok(Some(Received { len, from: Some(from.nl_pid), uid: got.uid }));
        }
    }

    fn send(&mut self, to: &u32, msg: &[u8], _now: std::time::Instant) -> io::Result<()> {
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
        port_name(*addr)
    }

    fn refused(&self) -> u64 {
        self.refusals.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::libccp::transport::Refusals;
    use std::time::{Duration, Instant};

    #[test]
    fn only_the_kernel_is_heard_unless_user_peers_are_allowed() {
        assert!(sender_allowed(0, false));
        assert!(!sender_allowed(1, false));
        assert!(!sender_allowed(u32::MAX, false));
        assert!(sender_allowed(4242, true));
    }

    #[test]
    fn refusals_are_all_counted_but_logged_at_a_bounded_rate() {
        let mut r = Refusals::new("test");
        let t0 = Instant::now();
        assert!(r.refuse(&"a", t0), "the first is logged at once");
        let logged = (1..10_000u64).filter(|i| r.refuse(&"a", t0 + Duration::from_micros(*i))).count();
        assert_eq!(logged, 0);
        assert!(r.refuse(&"a", t0 + crate::log_limit::LOG_EVERY));
        assert_eq!(r.total(), 10_001);
    }

    /// A user-space NETLINK_USERSOCK socket sending to `to`.
    fn user_socket() -> OwnedFd {
        // SAFETY: plain socket/bind calls; the fd is owned at once.
        unsafe {
            let raw = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_USERSOCK);
            assert!(raw >= 0, "{}", io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(raw);
            let sa = sockaddr(0);
            assert_eq!(libc::bind(raw, (&sa as *const libc::sockaddr_nl).cast(), size_of::<libc::sockaddr_nl>() as u32), 0);
            fd
        }
    }

    fn send_create(from: &OwnedFd, to: u32) {
        let msg = ccp_wire::Msg::Create(ccp_wire::Create {
            sid: 9,
            init_cwnd: 14480,
            mss: 1448,
            src_ip: 1,
            src_port: 2,
            dst_ip: 3,
            dst_port: 4,
            cong_alg: None,
        });
        let mut framed = Vec::new();
        ccp_wire::netlink::frame(&msg.to_bytes().unwrap(), &mut framed);
        let sa = sockaddr(to);
        // SAFETY: valid buffer and address.
        let n = unsafe {
            libc::sendto(
                from.as_raw_fd(),
                framed.as_ptr().cast(),
                framed.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        assert_eq!(n, framed.len() as isize, "{}", io::Error::last_os_error());
    }

    #[test]
    fn a_create_from_a_user_space_socket_is_refused_by_default() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: joining a NETLINK_USERSOCK group needs root");
            return;
        }
        let user = user_socket();
        let mut buf = vec![0u8; 1024];

        let mut strict = NetlinkTransport::bind(CCP_MULTICAST_GROUP, false).unwrap();
        send_create(&user, strict.port_id());
        assert!(strict.recv(&mut buf, Instant::now()).unwrap().is_none(), "the user-space CREATE is dropped");
        assert_eq!(strict.refused(), 1);

        let mut open = NetlinkTransport::bind(CCP_MULTICAST_GROUP, true).unwrap();
        send_create(&user, open.port_id());
        let got = open.recv(&mut buf, Instant::now()).unwrap().expect("heard when user peers are allowed");
        assert!(matches!(ccp_wire::decode(&buf[..got.len]).unwrap().0, ccp_wire::Msg::Create(c) if c.sid == 9));
        assert_ne!(got.from, Some(0));
        assert_eq!(got.uid, Some(0), "the sending process's uid, as the kernel has it");
        assert_eq!(open.refused(), 0);
    }
}
