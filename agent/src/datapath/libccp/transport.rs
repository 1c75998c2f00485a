//! How libccp messages travel: a datagram transport with addressable peers.

use std::fmt::Debug;
use std::hash::Hash;
use std::io;

/// One received datagram: its length in the caller's buffer and its sender, when the sender
/// can be replied to (an unnamed unix socket cannot).
pub struct Received<A> {
    pub len: usize,
    pub from: Option<A>,
}

pub trait Transport {
    /// Address of a peer datapath.
    type Addr: Clone + Eq + Hash + Debug;

    fn describe(&self) -> String;

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()>;

    /// Receives one datagram's libccp payload into `buf`; `Ok(None)` when nothing is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<Received<Self::Addr>>>;

    /// Sends one libccp message (unframed) to `to`.
    fn send(&mut self, to: &Self::Addr, msg: &[u8]) -> io::Result<()>;

    fn addr_name(&self, addr: &Self::Addr) -> String;

    /// Datagrams dropped so far because of who sent them (see [`Refusals`]).
    fn refused(&self) -> u64 {
        0
    }
}

/// Counts datagrams a transport refuses by sender and logs them without flooding the log: the
/// first refusal at once, then at most one line per [`Refusals::LOG_EVERY`] with the count
/// since the last line. The senders are unprivileged, so one line per datagram would hand
/// them the log.
#[derive(Debug)]
pub struct Refusals {
    what: &'static str,
    total: u64,
    unlogged: u64,
    last_log: Option<std::time::Instant>,
}

impl Refusals {
    pub const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

    /// `what` names the rule, e.g. "netlink sender is not the kernel".
    pub fn new(what: &'static str) -> Refusals {
        Refusals { what, total: 0, unlogged: 0, last_log: None }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts one refusal of a datagram from `sender`; returns true when it was logged.
    pub fn refuse(&mut self, sender: &dyn std::fmt::Display, now: std::time::Instant) -> bool {
        self.total += 1;
        self.unlogged += 1;
        if self.last_log.is_some_and(|t| now.duration_since(t) < Self::LOG_EVERY) {
            return false;
        }
        tracing::warn!(
            rule = self.what,
            %sender,
            refused = self.unlogged,
            refused_total = self.total,
            "refusing datagrams (further refusals are logged at most every {}s)",
            Self::LOG_EVERY.as_secs()
        );
        self.unlogged = 0;
        self.last_log = Some(now);
        true
    }
}

/// True when a send error means the peer no longer exists (as opposed to a full buffer).
pub fn peer_is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ECONNREFUSED) | Some(libc::ENOTCONN))
}
