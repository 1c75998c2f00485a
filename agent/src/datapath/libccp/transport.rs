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
}

/// True when a send error means the peer no longer exists (as opposed to a full buffer).
pub fn peer_is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ECONNREFUSED) | Some(libc::ENOTCONN))
}
