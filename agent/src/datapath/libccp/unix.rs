//! libccp IPC over unix datagram sockets, with portus's conventions.
//!
//! The agent binds `<dir>/<name>` (portus: `/tmp/ccp/portus`); each datapath binds its own
//! socket in the same directory and the agent replies to the path a datagram came from, so one
//! agent serves many datapaths. Datapaths written for portus 0.7 bind a bare name relative to
//! the socket directory; such sender paths are resolved against `dir`.
//!
//! The directory is created private (or shared with the configured group) and an existing one
//! that others could write is refused (`crate::permissions::prepare_socket_dir`). The agent
//! replies only to sockets directly inside it: a sender path must be a bare name, or
//! `<dir>/<name>` (as given or canonical); `..`, `.`, subdirectories and paths elsewhere are
//! refused (counted, logged at a bounded rate), so a datagram cannot make the root agent write
//! to an arbitrary socket on the host.
//!
//! # Sending: one connected socket per datapath
//! Replies go out through a socket connected to the datapath's, not through `sendto` on the
//! agent's own socket, for two reasons measured with 1,000 flows on one datapath (issue 19):
//! - `sendto` on an unconnected unix socket looks the path up on every datagram (a third of the
//!   agent's CPU went to `unix_find_other`);
//! - a datapath's queue holds `net.unix.max_dgram_qlen` datagrams (10 by default), so a burst of
//!   commands fills it, and only a connected sender can wait for room: poll reports it writable
//!   again once the datapath has read. A send that finds the queue full marks the peer blocked
//!   (`WouldBlock`, without a syscall until then) and [`Transport::writable_again`] says when it
//!   can take more.
//!
//! A datapath that connected its own socket to the agent's accepts datagrams from that socket
//! only (`EPERM` from any other), and connected sockets cost a descriptor each: for such a
//! datapath, and beyond [`MAX_CONNECTED_PEERS`], sends fall back to `sendto`, whose full queue is
//! retried after [`UNCONNECTED_RETRY`] (nothing signals room there).

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::transport::{pass_credentials, recv_with_uid, Received, Refusals, Transport};

/// Datapaths that get a connected socket of their own; the rest share `sendto`.
pub const MAX_CONNECTED_PEERS: usize = 1024;
/// How long a datapath reached by `sendto` is left alone after its queue was found full.
pub const UNCONNECTED_RETRY: Duration = Duration::from_millis(5);

/// How the agent reaches one datapath.
struct PeerSocket {
    /// `None`: through `sendto` on the agent's socket.
    connected: Option<mio::net::UnixDatagram>,
    /// A send found the datapath's queue full, at this time; none is tried until it has room.
    blocked_since: Option<Instant>,
}

pub struct UnixTransport {
    sock: mio::net::UnixDatagram,
    dir: PathBuf,
    /// `dir` with symbolic links resolved, as a datapath that canonicalizes its path sends it.
    canonical_dir: PathBuf,
    path: PathBuf,
    refusals: Refusals,
    peers: HashMap<PathBuf, PeerSocket>,
    /// Where connected sockets are registered for writability: the adapter's token.
    registry: Option<(mio::Registry, mio::Token)>,
    /// The last sender path and its reply path: datagrams mostly come from one datapath, and
    /// resolving the path is a tenth of the cost of a report.
    last_sender: Option<(PathBuf, PathBuf)>,
}

/// The path to reply to for a datagram from `sender`, when it names a socket directly inside
/// the socket directory (`dir` as configured, or `canonical_dir`); `None` otherwise.
pub fn reply_path(dir: &Path, canonical_dir: &Path, sender: &Path) -> Option<PathBuf> {
    let name = if sender.is_relative() {
        sender
    } else if let Ok(rest) = sender.strip_prefix(dir) {
        rest
    } else {
        sender.strip_prefix(canonical_dir).ok()?
    };
    let mut parts = name.components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) => Some(dir.join(n)),
        _ => None,
    }
}

impl UnixTransport {
    /// Binds `<dir>/<name>`, mode 0600 (0660 and `group` when given: datapaths run by members of
    /// that group may then talk to the agent).
    pub fn bind(dir: &Path, name: &str, group: Option<u32>) -> anyhow::Result<Self> {
        if name.is_empty() || name.contains('/') {
            bail!("unix socket name {name:?} must be a plain file name");
        }
        crate::permissions::prepare_socket_dir(dir, group)?;
        let canonical_dir = std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_socket() => {
                // A socket file is either a live agent or the leftover of a dead one.
                let probe = std::os::unix::net::UnixDatagram::unbound()?;
                if probe.connect(&path).is_ok() {
                    bail!("another process is already listening at {} (is an agent running?)", path.display());
                }
                std::fs::remove_file(&path).with_context(|| format!("removing stale socket {}", path.display()))?;
            }
            Ok(_) => bail!("{} exists and is not a socket; refusing to replace it", path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
        }
        let sock = crate::permissions::with_private_umask(|| mio::net::UnixDatagram::bind(&path))
            .with_context(|| format!("binding {}", path.display()))?;
        // Each datagram then says whose process sent it: flows are counted against that user
        // (transport.rs, "Who sent a datagram").
        pass_credentials(sock.as_raw_fd()).with_context(|| format!("SO_PASSCRED on {}", path.display()))?;
        if let Some(gid) = group {
            crate::permissions::share_with_group(&path, gid)?;
        }
        Ok(UnixTransport {
            sock,
            dir: dir.to_path_buf(),
            canonical_dir,
            path,
            refusals: Refusals::new("unix sender path is not a socket directly inside the socket directory"),
            peers: HashMap::new(),
            registry: None,
            last_sender: None,
        })
    }

    /// Sets up how to reach `to`: its connected socket when possible.
    fn peer(&mut self, to: &Path) -> io::Result<()> {
        let connected = if self.peers.len() < MAX_CONNECTED_PEERS { self.connect(to)? } else { None };
        self.peers.insert(to.to_path_buf(), PeerSocket { connected, blocked_since: None });
        Ok(())
    }

    /// A socket connected to `to` and registered for writability; `None` when only `sendto`
    /// will do (no descriptor left, no registry yet). A datapath that is not there is an error.
    fn connect(&mut self, to: &Path) -> io::Result<Option<mio::net::UnixDatagram>> {
        let sock = match std::os::unix::net::UnixDatagram::unbound() {
            Ok(s) => s,
            Err(_) => return Ok(None),
        };
        match sock.connect(to) {
            Ok(()) => {}
            Err(e) if super::transport::peer_is_gone(&e) => return Err(e),
            Err(_) => return Ok(None),
        }
        if sock.set_nonblocking(true).is_err() {
            return Ok(None);
        }
        let mut sock = mio::net::UnixDatagram::from_std(sock);
        let Some((registry, token)) = &self.registry else { return Ok(None) };
        if registry.register(&mut sock, *token, mio::Interest::WRITABLE).is_err() {
            return Ok(None);
        }
        Ok(Some(sock))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnixTransport {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The path a datagram came from, when its sender bound one: `None` for an unnamed socket and
/// for an abstract name (neither can be replied to in the socket directory).
fn sender_path(addr: &libc::sockaddr_un, addr_len: libc::socklen_t) -> Option<&Path> {
    let path_offset = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let n = (addr_len as usize).saturating_sub(path_offset).min(addr.sun_path.len());
    // SAFETY: `n` bytes of `sun_path` (c_char, the size of u8) lie within `addr`.
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(addr.sun_path.as_ptr().cast(), n) };
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(n);
    (end > 0).then(|| Path::new(std::ffi::OsStr::from_bytes(&bytes[..end])))
}

/// Which of `fds` have room to send now.
fn writable_now(fds: &mut [libc::pollfd]) -> io::Result<()> {
    // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd of the length passed.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Transport for UnixTransport {
    type Addr = PathBuf;

    fn describe(&self) -> String {
        format!("unix:{}", self.path.display())
    }

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut self.sock, token, mio::Interest::READABLE)?;
        self.registry = Some((registry.try_clone()?, token));
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Option<Received<PathBuf>>> {
        loop {
            // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
            let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
            let got = match recv_with_uid(self.sock.as_raw_fd(), buf, &mut addr) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let from = match sender_path(&addr, got.addr_len) {
                None => None,
                Some(p) => match &self.last_sender {
                    Some((sender, to)) if sender == p => Some(to.clone()),
                    _ => match reply_path(&self.dir, &self.canonical_dir, p) {
                        Some(to) => {
                            self.last_sender = Some((p.to_path_buf(), to.clone()));
                            Some(to)
                        }
                        None => {
                            self.refusals.refuse(&p.display(), now);
                            continue;
                        }
                    },
                },
            };
            return Ok(Some(Received { len: got.len, from, uid: got.uid }));
        }
    }

    fn send(&mut self, to: &PathBuf, msg: &[u8], now: Instant) -> io::Result<()> {
        if !self.peers.contains_key(to) {
            self.peer(to)?;
        }
        let sock = &self.sock;
        let peer = self.peers.get_mut(to).expect("made above");
        if peer.blocked_since.is_some() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut sent = match &peer.connected {
            Some(c) => c.send(msg),
            None => sock.send_to(msg, to),
        };
        if peer.connected.is_some() && sent.as_ref().err().and_then(io::Error::raw_os_error) == Some(libc::EPERM) {
            // The datapath's socket is connected to ours and hears only it.
            peer.connected = None;
            sent = sock.send_to(msg, to);
        }
        match sent {
            Ok(n) if n == msg.len() => Ok(()),
            Ok(n) => Err(io::Error::new(io::ErrorKind::WriteZero, format!("short send: {n} of {} bytes", msg.len()))),
            Err(e) => {
                if e.kind() == io::ErrorKind::WouldBlock {
                    peer.blocked_since = Some(now);
                }
                Err(e)
            }
        }
    }

    fn writable_again(&mut self, out: &mut Vec<PathBuf>, now: Instant) {
        // Called on every poll: nothing to do unless a send found a queue full.
        if !self.peers.values().any(|p| p.blocked_since.is_some()) {
            return;
        }
        let blocked: Vec<&PathBuf> = self.peers.iter().filter(|(_, p)| p.blocked_since.is_some()).map(|(a, _)| a).collect();
        let mut fds: Vec<libc::pollfd> = blocked
            .iter()
            .map(|a| libc::pollfd {
                fd: self.peers[*a].connected.as_ref().map_or(-1, |c| c.as_raw_fd()),
                events: libc::POLLOUT,
                revents: 0,
            })
            .collect();
        // A failed poll leaves every connected peer blocked until the next attempt.
        let _ = writable_now(&mut fds);
        let ready: Vec<PathBuf> = blocked
            .iter()
            .zip(&fds)
            .filter(|(a, fd)| match fd.fd {
                -1 => self.peers[**a].blocked_since.is_some_and(|t| now.duration_since(t) >= UNCONNECTED_RETRY),
                _ => fd.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0,
            })
            .map(|(a, _)| (*a).clone())
            .collect();
        for a in ready {
            if let Some(p) = self.peers.get_mut(&a) {
                p.blocked_since = None;
            }
            out.push(a);
        }
    }

    fn forget(&mut self, addr: &PathBuf) {
        if let Some(PeerSocket { connected: Some(mut c), .. }) = self.peers.remove(addr) {
            if let Some((registry, _)) = &self.registry {
                let _ = registry.deregister(&mut c);
            }
        }
    }

    fn addr_name(&self, addr: &PathBuf) -> String {
        addr.display().to_string()
    }

    fn refused(&self) -> u64 {
        self.refusals.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replies_go_only_to_sockets_directly_inside_the_socket_directory() {
        let (dir, canon) = (Path::new("/tmp/ccp"), Path::new("/private/tmp/ccp"));
        let ok = |s: &str| reply_path(dir, canon, Path::new(s));
        assert_eq!(ok("ccp-ebpf"), Some(PathBuf::from("/tmp/ccp/ccp-ebpf")), "portus 0.7: relative to the directory");
        assert_eq!(ok("/tmp/ccp/dp"), Some(PathBuf::from("/tmp/ccp/dp")));
        assert_eq!(ok("/private/tmp/ccp/dp"), Some(PathBuf::from("/tmp/ccp/dp")), "the canonical directory");
        for bad in [
            "../run/x.sock",
            "a/../../etc/x",
            "sub/dp",
            "./dp",
            "..",
            "/tmp/ccp/../x",
            "/tmp/ccp/sub/dp",
            "/tmp/ccp",
            "/tmp/ccp/",
            "/run/systemd/notify",
            "/tmp/ccpx/dp",
            "",
        ] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn datagrams_from_outside_the_directory_are_refused_and_counted() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        let mut t = UnixTransport::bind(&dir, "agent", None).unwrap();
        assert_eq!(std::fs::symlink_metadata(&dir).unwrap().permissions().mode() & 0o7777, 0o700);
        let outside = std::os::unix::net::UnixDatagram::bind(base.path().join("evil")).unwrap();
        let inside = std::os::unix::net::UnixDatagram::bind(dir.join("dp")).unwrap();
        let mut buf = [0u8; 64];
        outside.send_to(b"x", t.path()).unwrap();
        inside.send_to(b"hi", t.path()).unwrap();
        let got = t.recv(&mut buf, Instant::now()).unwrap().expect("the datagram from inside");
        assert_eq!(&buf[..got.len], b"hi");
        assert_eq!(got.from, Some(dir.join("dp")));
        assert!(t.recv(&mut buf, Instant::now()).unwrap().is_none());
        assert_eq!(t.refused(), 1);
    }

    #[test]
    fn a_directory_writable_by_others_is_refused_at_bind() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = format!("{:#}", UnixTransport::bind(&dir, "agent", None).err().unwrap());
        assert!(e.contains("world-writable") && e.contains(&dir.display().to_string()), "{e}");
        assert!(!dir.join("agent").exists(), "nothing bound there");
    }

    /// A transport registered for writability, and a datapath socket in its directory (the
    /// temporary directory and the poll must outlive the test).
    fn registered_with_a_datapath() -> (tempfile::TempDir, mio::Poll, UnixTransport, PathBuf, std::os::unix::net::UnixDatagram) {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        let mut t = UnixTransport::bind(&dir, "agent", None).unwrap();
        let poll = mio::Poll::new().unwrap();
        t.register(poll.registry(), mio::Token(0)).unwrap();
        let dp_path = dir.join("dp");
        let dp = std::os::unix::net::UnixDatagram::bind(&dp_path).unwrap();
        (base, poll, t, dp_path, dp)
    }

    /// A datapath that does not read fills its queue: the send after that says `WouldBlock`,
    /// and so does every later one without touching the socket, until the datapath has read;
    /// then `writable_again` names it. The datagrams arrive from a connected socket.
    #[test]
    fn a_full_datapath_queue_blocks_sends_until_it_has_room() {
        let (_base, _poll, mut t, dp_path, dp) = registered_with_a_datapath();
        let mut sent = 0;
        let err = loop {
            match t.send(&dp_path, b"m", Instant::now()) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 100_000, "the queue never filled");
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        assert!(t.peers[&dp_path].connected.is_some(), "sent through a connected socket");
        assert_eq!(t.send(&dp_path, b"m", Instant::now()).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let mut ready = Vec::new();
        t.writable_again(&mut ready, Instant::now());
        assert!(ready.is_empty(), "no room yet");
        let mut buf = [0u8; 8];
        let (n, from) = dp.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"m");
        assert!(from.as_pathname().is_none(), "from the unbound connected socket, not the agent's");
        t.writable_again(&mut ready, Instant::now());
        assert_eq!(ready, vec![dp_path.clone()]);
        t.send(&dp_path, b"m", Instant::now()).unwrap();
    }

    /// A datapath whose socket is connected to the agent's hears only the agent's socket: the
    /// transport falls back to `sendto` for it.
    #[test]
    fn a_datapath_connected_to_the_agent_is_reached_by_sendto() {
        let (_base, _poll, mut t, dp_path, dp) = registered_with_a_datapath();
        dp.connect(t.path()).unwrap();
        t.send(&dp_path, b"hello", Instant::now()).unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = dp.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(from.as_pathname(), Some(t.path()));
        assert!(t.peers[&dp_path].connected.is_none());
    }

    /// Each datagram says whose process sent it, as the kernel has it (claims of other uids, and
    /// flow limits by owner: agent/tests/libccp_flow_owners.rs).
    #[test]
    fn each_datagram_carries_the_senders_uid_from_the_kernel() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        let mut t = UnixTransport::bind(&dir, "agent", None).unwrap();
        let dp = std::os::unix::net::UnixDatagram::bind(dir.join("dp")).unwrap();
        let mut buf = [0u8; 64];
        dp.send_to(b"hi", t.path()).unwrap();
        let got = t.recv(&mut buf, Instant::now()).unwrap().expect("a datagram");
        // SAFETY: getuid cannot fail.
        assert_eq!(got.uid, Some(unsafe { libc::getuid() }));
        assert_eq!(got.from, Some(dir.join("dp")));
        // An abstract name is no path to reply to, like an unnamed socket.
        use std::os::linux::net::SocketAddrExt;
        let name = format!("ccp-test-abstract-{}", std::process::id());
        let abstract_name = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        std::os::unix::net::UnixDatagram::bind_addr(&abstract_name).unwrap().send_to(b"a", t.path()).unwrap();
        let got = t.recv(&mut buf, Instant::now()).unwrap().expect("a datagram");
        assert_eq!((got.len, got.from), (1, None));
    }
}
