//! The control socket: a unix stream socket the agent serves from its event loop.
//!
//! Access control is layered. The socket file is created with mode 0600 (0660 and the
//! configured group when one is set), under a umask that never lets it appear wider, so the
//! kernel refuses other users' `connect`. Every accepted connection is then checked again by
//! its peer credentials (`SO_PEERCRED`): root, the agent's own user, or a member of the group.
//!
//! What a connected client can hold is bounded: at most `MAX_PER_UID` connections per non-root
//! user; when all `MAX_CONNECTIONS` are taken the one idle longest is closed to make room (so
//! idle clients cannot lock out `ctl` and the unit's ExecReload); output a client does not read
//! may grow past one answer only up to `MAX_PENDING_OUTPUT`, and a client that reads nothing for
//! `STALL_TIMEOUT` is dropped (`tick`).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use tracing::{debug, warn};

use super::protocol::{Request, Response, MAX_REQUEST_BYTES};
use crate::permissions;

/// The listener's token; connections take `CONN_BASE + slot`.
pub const LISTENER: Token = Token(usize::MAX - 1);
const CONN_BASE: usize = 1 << 30;
const MAX_CONNECTIONS: usize = 64;
/// Connections one non-root user may hold.
const MAX_PER_UID: usize = 8;
/// Unread output a connection may hold beyond the answer being written.
const MAX_PENDING_OUTPUT: usize = 8 << 20;
/// A connection with output waiting that reads nothing for this long is dropped.
const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Who connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

struct Conn {
    stream: UnixStream,
    /// Which connection this is, whatever slot it holds (an answer that arrives later goes only
    /// to the connection that asked).
    serial: u64,
    uid: u32,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Close once the write buffer is flushed.
    closing: bool,
    /// The last request read or output written.
    last_active: Instant,
}

pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    group: Option<u32>,
    conns: Vec<Option<Conn>>,
    next_serial: u64,
}

fn peer_cred(stream: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED writes a ucred of at most `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCred { pid: cred.pid, uid: cred.uid, gid: cred.gid })
}

/// The supplementary groups of a process, from /proc.
fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Groups:"))
                .map(|l| l[7..].split_whitespace().filter_map(|g| g.parse().ok()).collect())
        })
        .unwrap_or_default()
}

impl ControlServer {
    /// Binds the control socket at `path`, readable and writable by its owner (and `group`).
    pub fn bind(path: &Path, group: Option<u32>) -> anyhow::Result<ControlServer> {
        if let Some(dir) = path.parent() {
            if !dir.exists() {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
            }
            // A directory someone else owns (say a /tmp/ccp-agent-UID planted by another user)
            // could have its socket swapped under us: refuse it.
            let owner = std::fs::metadata(dir).with_context(|| format!("checking {}", dir.display()))?.uid();
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if owner != me && owner != 0 {
                bail!(
                    "{} belongs to uid {owner}, not to this agent (uid {me}) or root; choose another --control-socket",
                    dir.display()
                );
            }
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    bail!("another agent is already serving the control socket {}", path.display());
                }
                std::fs::remove_file(path).with_context(|| format!("removing stale socket {}", path.display()))?;
            }
            Ok(_) => bail!("{} exists and is not a socket; refusing to replace it", path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
        }
        let listener = permissions::with_private_umask(|| UnixListener::bind(path))
            .with_context(|| format!("binding control socket {}", path.display()))?;
        if let Some(gid) = group {
            permissions::share_with_group(path, gid)?;
        }
        Ok(ControlServer { listener, path: path.to_path_buf(), group, conns: Vec::new(), next_serial: 0 })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn register(&mut self, registry: &Registry) -> io::Result<()> {
        registry.register(&mut self.listener, LISTENER, Interest::READABLE)
    }

    /// True for the listener's token and its connections' tokens.
    pub fn owns(token: Token) -> bool {
        token == LISTENER || (CONN_BASE..CONN_BASE + MAX_CONNECTIONS).contains(&token.0)
    }

    fn allowed(&self, peer: &PeerCred) -> bool {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        peer.uid == 0
            || peer.uid == me
            || self.group.is_some_and(|g| peer.gid == g || supplementary_groups(peer.pid).contains(&g))
    }

    /// Handles readiness on `token`; returns the complete requests received, each with the
    /// token to answer on. `now` (here and below): when the runtime took up the work, the time
    /// of the connections' activity.
    pub fn ready(&mut self, registry: &Registry, token: Token, now: Instant) -> Vec<(Token, Result<Request, String>)> {
        let mut requests = Vec::new();
        if token == LISTENER {
            self.accept(registry, now);
        } else if let Some(slot) = token.0.checked_sub(CONN_BASE) {
            self.read(slot, &mut requests, now);
            // With requests pending, `respond` writes (and closes if asked) once they are answered.
            if requests.is_empty() {
                self.flush(registry, slot, now);
            }
        }
        requests
    }

    fn accept(&mut self, registry: &Registry, now: Instant) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!(error = %e, "control socket accept failed");
                    return;
                }
            };
            let refuse = |stream: &mut UnixStream, why: &str| {
                let mut line = serde_json::to_vec(&Response::error(why)).unwrap_or_default();
                line.push(b'\n');
                let _ = stream.write(&line);
            };
            let peer = match peer_cred(&stream) {
                Ok(p) if self.allowed(&p) => p,
                Ok(p) => {
                    warn!(uid = p.uid, pid = p.pid, "control connection refused: not root, the agent's user or its group");
                    refuse(&mut stream, "permission denied");
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, "control connection refused: no peer credentials");
                    refuse(&mut stream, "permission denied");
                    continue;
                }
            };
            if peer.uid != 0 && self.conns.iter().flatten().filter(|c| c.uid == peer.uid).count() >= MAX_PER_UID {
                debug!(uid = peer.uid, "control connection refused: the user holds {MAX_PER_UID} already");
                refuse(&mut stream, &format!("too many control connections from uid {} (at most {MAX_PER_UID})", peer.uid));
                continue;
            }
            let slot = self.free_slot(registry);
            if let Err(e) = registry.register(&mut stream, Token(CONN_BASE + slot), Interest::READABLE) {
                warn!(error = %e, "control connection could not be registered");
                continue;
            }
            self.next_serial += 1;
            self.conns[slot] = Some(Conn {
                stream,
                serial: self.next_serial,
                uid: peer.uid,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                closing: false,
                last_active: now,
            });
        }
    }

    /// A free slot; when all are taken, the connection idle longest is closed for it.
    fn free_slot(&mut self, registry: &Registry) -> usize {
        if let Some(i) = self.conns.iter().position(Option::is_none) {
            return i;
        }
        if self.conns.len() < MAX_CONNECTIONS {
            self.conns.push(None);
            return self.conns.len() - 1;
        }
        let idlest = (0..self.conns.len()).min_by_key(|i| self.conns[*i].as_ref().map(|c| c.last_active)).unwrap_or(0);
        debug!(slot = idlest, "control connections full: closing the one idle longest");
        self.close(registry, idlest);
        idlest
    }

    /// Drops connections whose client has not read its output for `STALL_TIMEOUT`.
    pub fn tick(&mut self, registry: &Registry, now: Instant) {
        for slot in 0..self.conns.len() {
            let stalled = self.conns[slot]
                .as_ref()
                .is_some_and(|c| !c.wbuf.is_empty() && now.duration_since(c.last_active) >= STALL_TIMEOUT);
            if stalled {
                warn!(slot, "dropping a control client that has not read its answer for {}s", STALL_TIMEOUT.as_secs());
                self.close(registry, slot);
            }
        }
    }

    /// Reads what is available and splits it into requests. Stops reading (and marks the
    /// connection for closing once its answers are written) at EOF or at a line over the limit.
    fn read(&mut self, slot: usize, out: &mut Vec<(Token, Result<Request, String>)>, now: Instant) {
        let token = Token(CONN_BASE + slot);
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        let mut buf = [0u8; 4096];
        loop {
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    conn.closing = true;
                    break;
                }
                Ok(n) => {
                    conn.rbuf.extend_from_slice(&buf[..n]);
                    conn.last_active = now;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    conn.closing = true;
                    break;
                }
            }
            while let Some(nl) = conn.rbuf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = conn.rbuf.drain(..=nl).collect();
                let text = String::from_utf8_lossy(&line[..line.len() - 1]);
                if !text.trim().is_empty() {
                    out.push((token, serde_json::from_str::<Request>(&text).map_err(|e| format!("bad request: {e}"))));
                }
            }
            if conn.rbuf.len() > MAX_REQUEST_BYTES {
                out.push((token, Err(format!("request longer than {MAX_REQUEST_BYTES} bytes"))));
                conn.rbuf.clear();
                conn.closing = true;
                break;
            }
        }
    }

    /// The serial of the connection behind `token`, for an answer given later (`respond_later`).
    pub fn serial(&self, token: Token) -> Option<u64> {
        let slot = token.0.checked_sub(CONN_BASE)?;
        self.conns.get(slot)?.as_ref().map(|c| c.serial)
    }

    /// Queues `response` on the connection behind `token` if it is still the one with `serial`.
    pub fn respond_later(&mut self, registry: &Registry, token: Token, serial: u64, response: &Response, now: Instant) {
        if self.serial(token) == Some(serial) {
            self.respond(registry, token, response, now);
        }
    }

    /// Queues `response` on the connection behind `token`.
    pub fn respond(&mut self, registry: &Registry, token: Token, response: &Response, now: Instant) {
        let Some(slot) = token.0.checked_sub(CONN_BASE) else { return };
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        match serde_json::to_vec(response) {
            Ok(mut line) => {
                line.push(b'\n');
                if !conn.wbuf.is_empty() && conn.wbuf.len() + line.len() > MAX_PENDING_OUTPUT {
                    warn!(slot, pending_bytes = conn.wbuf.len(), "dropping a control client that does not read its answers");
                    self.close(registry, slot);
                    return;
                }
                conn.wbuf.extend_from_slice(&line);
            }
            Err(e) => warn!(error = %e, "could not serialise a control response"),
        }
        self.flush(registry, slot, now);
    }

    fn flush(&mut self, registry: &Registry, slot: usize, now: Instant) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        while !conn.wbuf.is_empty() {
            match conn.stream.write(&conn.wbuf) {
                Ok(0) => break,
                Ok(n) => {
                    conn.wbuf.drain(..n);
                    conn.last_active = now;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let _ =
                        registry.reregister(&mut conn.stream, Token(CONN_BASE + slot), Interest::READABLE | Interest::WRITABLE);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    conn.wbuf.clear();
                    conn.closing = true;
                }
            }
        }
        if conn.closing {
            self.close(registry, slot);
        }
    }

    fn close(&mut self, registry: &Registry, slot: usize) {
        if let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) {
            let _ = registry.deregister(&mut conn.stream);
            debug!(slot, "control connection closed");
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
