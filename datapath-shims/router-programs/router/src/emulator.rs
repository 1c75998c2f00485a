//! The library face of `ccp-router run`: a topology plus a router running on its own thread,
//! stopped and torn down on drop. For Rust tests and experiment runners:
//!
//! ```no_run
//! use ccp_router::{Emulator, RouterConfig, TopologyConfig};
//! use ccp_qdisc::Limit;
//! let emu = Emulator::start(TopologyConfig::new("ccprt-doc"), RouterConfig::fixed(10e6, 20_000_000, Limit::Packets(100)))?;
//! // … run flows between emu.topology().sender_ns() and receiver_ns() …
//! let summary = emu.stop()?;
//! # Ok::<(), ccp_router::Error>(())
//! ```

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::thread::JoinHandle;

use crate::config::RouterConfig;
use crate::error::{Error, Result};
use crate::router::Router;
use crate::summary::Summary;
use crate::topology::{Topology, TopologyConfig};

pub struct Emulator {
    // Field order matters: the router thread is stopped (in Drop) before the topology goes.
    thread: Option<JoinHandle<Result<Summary>>>,
    stop: OwnedFd,
    start: ccp_qdisc::Nanos,
    topology: Topology,
}

impl Emulator {
    /// Creates the topology and starts forwarding. Returns once packets flow.
    pub fn start(topology: TopologyConfig, config: RouterConfig) -> Result<Emulator> {
        let topology = Topology::create(topology)?;
        let mut router = Router::new(&topology, config)?;
        // SAFETY: plain syscall; the fd is owned immediately.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::last_os("eventfd"));
        }
        // SAFETY: fd is fresh.
        let stop = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = stop.as_raw_fd();
        let start = router.start_time();
        let thread = std::thread::Builder::new()
            .name("ccp-router".into())
            .spawn(move || router.run(raw))
            .map_err(|e| Error::io("spawning the router thread", e))?;
        Ok(Emulator { thread: Some(thread), stop, start, topology })
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// When the emulated link's clock started (trace position 0), monotonic ns (see
    /// [`crate::clock::now`]).
    pub fn start_time(&self) -> ccp_qdisc::Nanos {
        self.start
    }

    /// Stops forwarding and returns the summary; the topology is torn down when `self` drops.
    pub fn stop(mut self) -> Result<Summary> {
        self.stop_thread().unwrap_or_else(|| Err(Error::Topology("the router already stopped".into())))
    }

    fn stop_thread(&mut self) -> Option<Result<Summary>> {
        let thread = self.thread.take()?;
        let one: u64 = 1;
        // SAFETY: an 8-byte write to our eventfd.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        Some(thread.join().unwrap_or_else(|_| Err(Error::Topology("the router thread panicked".into()))))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.stop_thread() {
            eprintln!("ccp-router: {e}");
        }
    }
}
