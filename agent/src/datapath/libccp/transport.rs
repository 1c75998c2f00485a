//! How libccp messages travel: a datagram transport with addressable peers.

use std::fmt::Debug;
use std::hash::Hash;
use std::io;
use std::time::Instant;

use crate::log_limit::{LogLimit, LOG_EVERY};

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

/// True when a send error means the peer no longer exists (as opposed to a full buffer).
pub fn peer_is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ECONNREFUSED) | Some(libc::ENOTCONN))
}
