//! The unix datagram socket between this datapath and the agent (ccp-anchors §1.4).
//!
//! Our socket is bound to `<dir>/<name>` (or, with `--relative-bind`, to the bare name after a
//! chdir to `<dir>`), and every message goes to `<dir>/<agent>` with `sendto`. The socket is
//! deliberately left unconnected, so a restarted agent can reach us at once.
//!
//! # Back-pressure
//! Linux queues at most `net.unix.max_dgram_qlen` datagrams per receiving socket (10 by
//! default), counted in messages, not bytes. A burst of per-ACK reports, or a thousand flows
//! starting at once, fills the agent's queue in no time. libccp's `send_msg` is synchronous
//! and a real user-space datapath blocks there, so this one waits too (up to
//! [`SEND_TIMEOUT`]) instead of silently losing reports. While it waits it keeps reading its
//! own socket: an agent that is itself blocked sending replies into *our* 10-message queue
//! would otherwise never get back to reading, and both sides would stall. What it reads then
//! is stashed and handed to libccp afterwards; feeding it to libccp from inside the callback
//! would re-enter libccp in the middle of `ccp_invoke`. After a send times out (the agent is
//! stuck), later sends do not wait until one succeeds again, so a stuck agent cannot freeze
//! the emulation.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::Config;

/// Longest wait for room in the agent's queue before a message is dropped.
const SEND_TIMEOUT: Duration = Duration::from_millis(20);
/// How often a waiting send retries (the kernel cannot signal room in an unconnected peer's
/// queue, so the wait polls our own socket for this long between attempts).
const SEND_RETRY_INTERVAL: Duration = Duration::from_micros(200);
/// Large enough for any libccp message (`BIGGEST_MSG_SIZE` is 32678).
pub const MAX_DATAGRAM: usize = 64 * 1024;

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

impl Channel {
    /// Creates the socket directory, removes a stale socket left by an earlier run, and binds.
    pub fn open(cfg: &Config) -> Result<Channel, String> {
        std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("cannot create socket directory {}: {e}", cfg.dir.display()))?;
        let dir =
            std::fs::canonicalize(&cfg.dir).map_err(|e| format!("cannot resolve socket directory {}: {e}", cfg.dir.display()))?;
        let bound_path = dir.join(&cfg.name);
        remove_stale_socket(&bound_path)?;
        let bind_path = if cfg.relative_bind {
            // The agent then sees the bare name as our address (see `--relative-bind`).
            std::env::set_current_dir(&dir).map_err(|e| format!("cannot change directory to {}: {e}", dir.display()))?;
            PathBuf::from(&cfg.name)
        } else {
            bound_path.clone()
        };
        let sock = UnixDatagram::bind(&bind_path).map_err(|e| format!("cannot bind {}: {e}", bound_path.display()))?;
        sock.set_nonblocking(true).map_err(|e| format!("cannot make the socket non-blocking: {e}"))?;
        Ok(Channel {
            sock,
            agent_path: dir.join(&cfg.agent),
            bound_path,
            stash: RefCell::new(VecDeque::new()),
            scratch: RefCell::new(vec![0; MAX_DATAGRAM]),
            agent_stuck: Cell::new(false),
        })
    }

    pub fn agent_path(&self) -> &Path {
        &self.agent_path
    }

    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Waits until the agent's socket accepts datagrams.
    ///
    /// Waiting matters: the libccp crate's `send_msg` reports success to C even when the send
    /// fails, so libccp never retries READY or CREATE (its 100 ms CREATE retry only runs after
    /// a failed send), and an agent started later would never learn about our flows.
    pub fn wait_for_agent(&self, wait_us: u64) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_micros(wait_us);
        loop {
            let probe = UnixDatagram::unbound().and_then(|s| s.connect(&self.agent_path)).map_err(|e| e.to_string());
            match probe {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "the agent's socket {} does not accept datagrams ({e}) after waiting \
                         {} ms; is the agent running? (see --dir, --agent, --wait-agent-ms)",
                        self.agent_path.display(),
                        wait_us / 1000
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
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

    /// Whether datagrams read during a send are waiting for [`Channel::try_recv`].
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
        if wait_readable(self.fd(), u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX)) {
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

/// Sleeps until `fd` is readable, `timeout_ns` passed or a signal arrived; true if readable.
pub fn wait_readable(fd: RawFd, timeout_ns: u64) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout_ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
        // Always below 10^9, so it fits.
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `pfd` and `timeout` are valid for the call; a null sigmask keeps the current one.
    let ready = unsafe { libc::ppoll(&mut pfd, 1, &timeout, std::ptr::null()) };
    ready > 0 && pfd.revents & libc::POLLIN != 0
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
