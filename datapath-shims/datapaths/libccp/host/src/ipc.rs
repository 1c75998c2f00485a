//! The unix datagram socket between a libccp datapath and the CCP agent (libccp's standard IPC,
//! portus's `/tmp/ccp/<name>` convention).
//!
//! # Addresses
//! The agent's socket is `<dir>/<agent>` (portus binds `/tmp/ccp/portus`). Ours is
//! `<dir>/<name>`, bound one of two ways, because agents answer differently:
//! - portus 0.7 (what `generic_cong_avoid` 0.4 is built on) replies to `/tmp/ccp/<sender path>`,
//!   so the sender path must be *relative* to `/tmp/ccp`: we change into `<dir>`, bind the bare
//!   name and change back at once (the socket keeps the name it was bound with);
//! - portus 0.9 replies to the sender path as it is, which must then be absolute. ccp-agent
//!   accepts both.
//!
//! The socket is left unconnected, so a restarted agent is reached at once.
//!
//! # Permissions
//! Whoever can write the socket directory can replace the agent's socket or ours, so it is
//! created 0700 when missing, and an existing one is used only when it is a real directory
//! owned by us or root, not world-writable, and group-writable only with the sticky bit (the
//! agent's 01770 directory shared with its configured group); otherwise [`Channel::open`] fails
//! with the path, owner and mode and what to do. Our socket is 0600 whatever the umask: only
//! our user (and root, i.e. a root agent) can send to it. ccp-agent replies only to sockets
//! directly inside its socket directory, so ours must be there too.
//!
//! # Back-pressure
//! Linux queues at most `net.unix.max_dgram_qlen` datagrams per receiving socket (10 by
//! default), counted in messages, not bytes: a burst of per-ACK reports, or a thousand flows
//! starting at once, fills the agent's queue in no time. libccp's `send_msg` is synchronous and
//! a real user-space datapath blocks there, so a send that finds the agent's queue full waits a
//! bounded time ([`SEND_TIMEOUT`]) instead of silently losing the message. While it waits it
//! keeps reading its own socket: portus sends with blocking calls, and an agent blocked on our
//! full queue would never get back to reading its own, so both sides would stall. What is read
//! then is stashed and handed to libccp later, never from inside the callback (that would
//! re-enter libccp in the middle of `ccp_invoke`). After a send times out, sends stop waiting
//! until one succeeds, so a stuck agent cannot stall the datapath for long.
//!
//! # Is the agent there?
//! A send to a socket file nobody reads fails with `ECONNREFUSED` (`ENOENT` once it is gone);
//! [`Channel::agent_identity`] also tells a restarted agent (a new socket file) from the old one.
//! The libccp crate's `send_msg` reports success to C even when the send fails, so libccp never
//! retries READY or CREATE on its own: a datapath either waits for the agent before starting
//! libccp ([`Channel::wait_for_agent`]) or announces itself again when one appears.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest wait for room in the agent's queue before a message is dropped.
const SEND_TIMEOUT: Duration = Duration::from_millis(20);
/// How often a waiting send retries (the kernel cannot signal room in an unconnected peer's
/// queue, so the wait polls our own socket for this long between attempts).
const SEND_RETRY_INTERVAL: Duration = Duration::from_micros(200);
/// Large enough for any libccp message (`BIGGEST_MSG_SIZE` is 32678).
pub const MAX_DATAGRAM: usize = 64 * 1024;

/// How our socket's address is written (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Bind {
    /// The bare name, relative to the socket directory (portus 0.7, ccp-agent).
    Relative,
    /// The full path (portus 0.9, ccp-agent).
    Absolute,
}

/// Where the channel lives.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub dir: PathBuf,
    pub name: String,
    pub agent: String,
    pub bind: Bind,
}

/// The datapath's socket.
pub struct Channel {
    sock: UnixDatagram,
    agent_path: PathBuf,
    /// Absolute path of our socket file, removed on drop.
    bound_path: PathBuf,
    /// Datagrams read while a send was waiting, oldest first.
    stash: RefCell<VecDeque<Vec<u8>>>,
    scratch: RefCell<Vec<u8>>,
    /// A send timed out and none has succeeded since.
    agent_stuck: Cell<bool>,
}

/// Which socket file the agent reads: its inode and creation time (a file removed and created
/// again can get the same inode number back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentId {
    ino: u64,
    ctime_ns: i128,
}

/// True for send errors that mean nobody reads the agent's socket any more.
pub fn agent_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOENT | libc::ENOTCONN))
}

impl Channel {
    /// Creates the socket directory, removes a stale socket of ours, and binds.
    pub fn open(ep: &Endpoints) -> Result<Channel, String> {
        if ep.name.is_empty() || ep.name.contains('/') {
            return Err(format!("socket name {:?} must be a plain file name", ep.name));
        }
        prepare_socket_dir(&ep.dir)?;
        let dir = std::fs::canonicalize(&ep.dir).map_err(|e| format!("cannot resolve {}: {e}", ep.dir.display()))?;
        let bound_path = dir.join(&ep.name);
        remove_stale_socket(&bound_path)?;
        let sock = with_private_umask(|| match ep.bind {
            Bind::Absolute => UnixDatagram::bind(&bound_path),
            Bind::Relative => bind_relative(&dir, &ep.name),
        })
        .map_err(|e| format!("cannot bind {}: {e}", bound_path.display()))?;
        std::fs::set_permissions(&bound_path, std::fs::Permissions::from_mode(SOCKET_MODE))
            .map_err(|e| format!("cannot chmod {:o} {}: {e}", SOCKET_MODE, bound_path.display()))?;
        sock.set_nonblocking(true).map_err(|e| format!("cannot make the socket non-blocking: {e}"))?;
        Ok(Channel {
            sock,
            agent_path: dir.join(&ep.agent),
            bound_path,
            stash: RefCell::new(VecDeque::new()),
            scratch: RefCell::new(vec![0; MAX_DATAGRAM]),
            agent_stuck: Cell::new(false),
        })
    }

    pub fn agent_path(&self) -> &Path {
        &self.agent_path
    }

    pub fn bound_path(&self) -> &Path {
        &self.bound_path
    }

    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The agent's socket file if an agent reads it now, `None` otherwise. Another file is a
    /// restarted agent, which knows nothing of our flows.
    pub fn agent_identity(&self) -> Option<AgentId> {
        let meta = std::fs::metadata(&self.agent_path).ok().filter(|m| m.file_type().is_socket())?;
        let id = AgentId { ino: meta.ino(), ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()) };
        self.probe_agent().is_ok().then_some(id)
    }

    /// Waits up to `wait` until the agent's socket accepts datagrams, for a datapath that must
    /// not start libccp before an agent is there to hear READY and CREATE (see the module docs).
    pub fn wait_for_agent(&self, wait: Duration) -> Result<(), String> {
        let deadline = Instant::now() + wait;
        loop {
            match self.probe_agent() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "the agent's socket {} does not accept datagrams ({e}) after waiting {} ms; is the agent running?",
                        self.agent_path.display(),
                        wait.as_millis()
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Whether someone reads the agent's socket: connecting a datagram socket to it fails
    /// otherwise, and sends nothing.
    fn probe_agent(&self) -> io::Result<()> {
        UnixDatagram::unbound().and_then(|s| s.connect(&self.agent_path))
    }

    /// Sends one message to the agent, waiting a bounded time for room in its queue.
    pub fn send(&self, msg: &[u8]) -> io::Result<()> {
        let deadline = Instant::now() + SEND_TIMEOUT;
        loop {
            match self.sock.send_to(msg, &self.agent_path) {
                Ok(_) => {
                    self.agent_stuck.set(false);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    if self.agent_stuck.get() || now >= deadline {
                        self.agent_stuck.set(true);
                        return Err(e);
                    }
                    self.stash_incoming(SEND_RETRY_INTERVAL.min(deadline - now));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether datagrams read during a send wait for [`Channel::try_recv`] (ppoll cannot see them,
    /// so a loop checks this before it sleeps).
    pub fn has_stashed(&self) -> bool {
        !self.stash.borrow().is_empty()
    }

    /// The next datagram from the agent, without blocking (`WouldBlock` if there is none).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(msg) = self.stash.borrow_mut().pop_front() {
            let n = msg.len().min(buf.len());
            buf[..n].copy_from_slice(&msg[..n]);
            return Ok(n);
        }
        self.sock.recv(buf)
    }

    /// Waits up to `timeout` for datagrams and stashes everything readable.
    fn stash_incoming(&self, timeout: Duration) {
        if wait_readable(&[self.fd()], timeout) {
            let mut scratch = self.scratch.borrow_mut();
            while let Ok(n) = self.sock.recv(&mut scratch) {
                self.stash.borrow_mut().push_back(scratch[..n].to_vec());
            }
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.bound_path);
    }
}

/// Mode of our socket: only our user (and root) may send to it.
pub const SOCKET_MODE: u32 = 0o600;

/// Runs `f` (a bind) with a umask that never lets the socket exist with more than 0600, even
/// before its explicit chmod. The umask is per process; the bind happens at start-up.
fn with_private_umask<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: umask only swaps the process's file mode mask.
    let old = unsafe { libc::umask(0o177) };
    let out = f();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    out
}

/// Creates the socket directory 0700 when missing, or checks that nobody but us or root can
/// have prepared an existing one (see the module docs).
pub fn prepare_socket_dir(dir: &Path) -> Result<(), String> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot chmod 0700 {}: {e}", dir.display())),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => check_socket_dir(dir),
        Err(e) => Err(format!("cannot create socket directory {}: {e}", dir.display())),
    }
}

fn check_socket_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot inspect socket directory {}: {e}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    let what =
        format!("socket directory {} (owner uid {}, group gid {}, mode {:04o})", dir.display(), meta.uid(), meta.gid(), mode);
    let fix = "remove it (nothing else should use it) or choose another directory (--ipc-dir)";
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let why = if meta.file_type().is_symlink() {
        "it is a symbolic link, which whoever owns it can point anywhere".to_string()
    } else if !meta.is_dir() {
        "it is not a directory".to_string()
    } else if meta.uid() != euid && meta.uid() != 0 {
        format!("it belongs to another user (uid {}), who could replace the sockets in it", meta.uid())
    } else if mode & 0o002 != 0 {
        "it is world-writable, so any user could replace the sockets in it".to_string()
    } else if mode & 0o020 != 0 && mode & 0o1000 == 0 {
        "it is group-writable without the sticky bit, so group members could replace the sockets in it".to_string()
    } else {
        return Ok(());
    };
    Err(format!("refusing {what}: {why}; {fix}"))
}

/// Binds `name` inside `dir` under its relative name. The working directory is changed only for
/// the bind (the process is single-threaded here) and restored, so relative paths given on the
/// command line keep their meaning.
fn bind_relative(dir: &Path, name: &str) -> io::Result<UnixDatagram> {
    let back = std::env::current_dir()?;
    std::env::set_current_dir(dir)?;
    let bound = UnixDatagram::bind(name);
    std::env::set_current_dir(back)?;
    bound
}

/// Sleeps until one of `fds` is readable, `timeout` passed or a signal arrived; true if readable.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> bool {
    let mut pfds: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
    };
    // SAFETY: `pfds` and `ts` are valid for the call; a null sigmask keeps the current one.
    let ready = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    ready > 0 && pfds.iter().any(|p| p.revents & libc::POLLIN != 0)
}

/// Removes `path` if it is a socket; refuses to touch anything else.
fn remove_stale_socket(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot inspect {}: {e}", path.display())),
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|e| format!("cannot remove stale socket {}: {e}", path.display()))
        }
        Ok(_) => Err(format!("{} exists and is not a socket; refusing to replace it", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(dir: &Path, bind: Bind) -> Endpoints {
        Endpoints { dir: dir.to_path_buf(), name: "dp".into(), agent: "agent".into(), bind }
    }

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn the_directory_is_created_private_and_the_socket_is_0600_whatever_the_umask() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        // SAFETY: umask swap in a test, restored below.
        let old = unsafe { libc::umask(0) };
        let chans: Vec<Channel> = [Bind::Absolute, Bind::Relative]
            .into_iter()
            .enumerate()
            .map(|(i, bind)| Channel::open(&Endpoints { name: format!("dp{i}"), ..endpoints(&dir, bind) }))
            .collect::<Result<_, _>>()
            .unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        assert_eq!(mode_of(&dir), 0o700);
        for c in &chans {
            assert_eq!(mode_of(c.bound_path()), SOCKET_MODE, "{}", c.bound_path().display());
        }
        // The agent's directory shared with a group (01770) is accepted as it is.
        let shared = base.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1770)).unwrap();
        Channel::open(&endpoints(&shared, Bind::Absolute)).unwrap();
        assert_eq!(mode_of(&shared), 0o1770, "left as it was");
    }

    #[test]
    fn a_directory_others_could_write_is_refused_naming_path_owner_and_mode() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        std::fs::create_dir(&dir).unwrap();
        for (mode, why) in [(0o777, "world-writable"), (0o1777, "world-writable"), (0o770, "group-writable")] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Channel::open(&endpoints(&dir, Bind::Absolute)).err().unwrap();
            assert!(e.contains(why) && e.contains(&dir.display().to_string()) && e.contains(&format!("mode {mode:04o}")), "{e}");
            assert!(e.contains("owner uid") && e.contains("--ipc-dir"), "{e}");
            assert!(!dir.join("dp").exists(), "nothing bound");
        }
        let link = base.path().join("link");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = Channel::open(&endpoints(&link, Bind::Absolute)).err().unwrap();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn another_users_directory_is_refused() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: chown to another user needs root");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("theirs");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let e = Channel::open(&endpoints(&dir, Bind::Absolute)).err().unwrap();
        assert!(e.contains("another user") && e.contains("owner uid 65534") && e.contains("mode 0755"), "{e}");
        assert!(!dir.join("dp").exists());
    }

    #[test]
    fn a_relative_bind_shows_the_bare_name_to_the_agent_and_keeps_the_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let agent = UnixDatagram::bind(dir.path().join("agent")).unwrap();
        let cwd = std::env::current_dir().unwrap();
        let chan = Channel::open(&endpoints(dir.path(), Bind::Relative)).unwrap();
        assert_eq!(std::env::current_dir().unwrap(), cwd);
        chan.send(b"hello").unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = agent.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(from.as_pathname(), Some(Path::new("dp")));
        // A reply to the agent's view of our address, resolved in the socket directory.
        agent.send_to(b"back", dir.path().join("dp")).unwrap();
        assert_eq!(chan.try_recv(&mut buf).unwrap(), 4);
    }

    #[test]
    fn an_absolute_bind_shows_the_full_path_and_the_file_goes_with_the_channel() {
        let dir = tempfile::tempdir().unwrap();
        let agent = UnixDatagram::bind(dir.path().join("agent")).unwrap();
        let chan = Channel::open(&endpoints(dir.path(), Bind::Absolute)).unwrap();
        chan.send(b"x").unwrap();
        let mut buf = [0u8; 4];
        let (_, from) = agent.recv_from(&mut buf).unwrap();
        assert_eq!(from.as_pathname(), Some(chan.bound_path()));
        let path = chan.bound_path().to_path_buf();
        drop(chan);
        assert!(!path.exists());
    }

    #[test]
    fn the_agent_is_seen_coming_going_and_restarting() {
        let dir = tempfile::tempdir().unwrap();
        let chan = Channel::open(&endpoints(dir.path(), Bind::Absolute)).unwrap();
        assert_eq!(chan.agent_identity(), None);
        let agent = UnixDatagram::bind(dir.path().join("agent")).unwrap();
        let first = chan.agent_identity().expect("an agent reads its socket");
        drop(agent);
        assert_eq!(chan.agent_identity(), None, "the file stays, nobody reads it");
        let err = chan.send(b"x").unwrap_err();
        assert!(agent_gone(&err), "{err}");
        std::fs::remove_file(dir.path().join("agent")).unwrap();
        // A restart takes longer than the file system's timestamp granularity (a jiffy).
        std::thread::sleep(Duration::from_millis(20));
        let _agent = UnixDatagram::bind(dir.path().join("agent")).unwrap();
        let second = chan.agent_identity().expect("a restarted agent");
        assert_ne!(first, second);
    }

    #[test]
    fn a_full_agent_queue_times_out_and_later_sends_do_not_wait() {
        let dir = tempfile::tempdir().unwrap();
        let _agent = UnixDatagram::bind(dir.path().join("agent")).unwrap();
        let chan = Channel::open(&endpoints(dir.path(), Bind::Absolute)).unwrap();
        let mut sent = 0;
        let err = loop {
            match chan.send(&[0u8; 64]) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 100_000, "the queue never filled");
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let t0 = Instant::now();
        assert!(chan.send(&[0u8; 64]).is_err());
        assert!(t0.elapsed() < SEND_TIMEOUT, "a stuck agent does not make every send wait");
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("dp"), b"data").unwrap();
        let err = Channel::open(&endpoints(dir.path(), Bind::Absolute)).err().unwrap();
        assert!(err.contains("not a socket"), "{err}");
        assert!(Channel::open(&Endpoints { name: "a/b".into(), ..endpoints(dir.path(), Bind::Absolute) }).is_err());
    }
}
