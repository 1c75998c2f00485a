//! The emulated topology: a sender namespace `PFX-snd` and a receiver namespace `PFX-rcv`, each
//! with one TUN device (`ccp0`) whose other end is the router, and a default route through it.
//!
//! ```text
//!   PFX-snd                        router (this process)                      PFX-rcv
//!   10.77.0.1/32 ccp0 ──fd──▶ [down: qdisc ▸ link ▸ delay] ──fd──▶ ccp0 10.77.0.2/32
//!                     ◀──fd── [up:   link ▸ delay]        ◀──fd──
//! ```
//!
//! Ownership and cleanup: a lock file `/run/ccp-router/PFX.lock` (holding the owner's pid, locked
//! with flock while the owner lives) marks a prefix as ccp-router's. A second router with a live
//! owner's prefix is refused; namespaces left behind by a crashed owner (file present, lock free)
//! are deleted and recreated; namespaces of that name that ccp-router did not create are left
//! alone and refused. TUN devices are non-persistent, so they vanish with the descriptors even on
//! SIGKILL. Teardown (explicit or on drop) closes the devices, deletes the namespaces it created
//! and removes the lock file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::netns;
use crate::route;
use crate::tun::Tun;

/// Suffix of the sender's namespace.
pub const SENDER_SUFFIX: &str = "-snd";
/// Suffix of the receiver's namespace.
pub const RECEIVER_SUFFIX: &str = "-rcv";
/// Name of the TUN device inside each namespace.
pub const TUN_NAME: &str = "ccp0";
/// Where prefix lock files live.
pub const LOCK_DIR: &str = "/run/ccp-router";

/// Which end of the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
}

/// Addresses and names of a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyConfig {
    pub prefix: String,
    pub sender_addr: Ipv4Addr,
    pub receiver_addr: Ipv4Addr,
    /// Source address of packets the router itself originates (QCN notifications).
    pub router_addr: Ipv4Addr,
    /// Give both namespaces' default routes the `tcp_usec_ts` feature: their TCP connections
    /// then send microsecond timestamps (Linux ≥ 6.7; [`crate::route`]).
    pub tcp_usec_ts: bool,
}

impl TopologyConfig {
    /// Default addresses (10.77.0.1 sender, .2 receiver, .254 router); they exist only inside the
    /// two namespaces, so every topology can use the same ones.
    pub fn new(prefix: &str) -> TopologyConfig {
        TopologyConfig {
            prefix: prefix.to_string(),
            sender_addr: Ipv4Addr::new(10, 77, 0, 1),
            receiver_addr: Ipv4Addr::new(10, 77, 0, 2),
            router_addr: Ipv4Addr::new(10, 77, 0, 254),
            tcp_usec_ts: false,
        }
    }

    pub fn validate(&self) -> Result<()> {
        netns::validate_prefix(&self.prefix)?;
        let addrs = [self.sender_addr, self.receiver_addr, self.router_addr];
        if addrs.iter().enumerate().any(|(i, a)| addrs[i + 1..].contains(a)) {
            return Err(Error::param("--sender-addr/--receiver-addr/--router-addr", "the three addresses must differ"));
        }
        if addrs.iter().any(|a| a.is_unspecified() || a.is_loopback() || a.is_multicast() || a.is_broadcast()) {
            return Err(Error::param("--sender-addr/--receiver-addr/--router-addr", "addresses must be unicast, not loopback"));
        }
        Ok(())
    }

    pub fn sender_ns(&self) -> String {
        format!("{}{SENDER_SUFFIX}", self.prefix)
    }

    pub fn receiver_ns(&self) -> String {
        format!("{}{RECEIVER_SUFFIX}", self.prefix)
    }
}

/// The flock-held marker that a prefix belongs to a live ccp-router.
#[derive(Debug)]
struct PrefixLock {
    file: File,
    path: PathBuf,
}

impl PrefixLock {
    fn path(prefix: &str) -> PathBuf {
        Path::new(LOCK_DIR).join(format!("{prefix}.lock"))
    }

    /// Takes the lock. Returns it and the pid of a previous owner whose marker was left behind.
    fn acquire(prefix: &str) -> Result<(PrefixLock, Option<u32>)> {
        std::fs::create_dir_all(LOCK_DIR).map_err(|e| Error::io(format!("creating {LOCK_DIR}"), e))?;
        let path = PrefixLock::path(prefix);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let mut old = String::new();
        let _ = file.read_to_string(&mut old);
        let old_pid = old.trim().parse::<u32>().ok();
        // SAFETY: flock on a valid fd.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(Error::Topology(format!(
                "namespace prefix {prefix:?} is in use by a running ccp-router (pid {}); stop it or pick another prefix",
                old_pid.map_or_else(|| "unknown".to_string(), |p| p.to_string())
            )));
        }
        let me = std::process::id();
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| write!(file, "{me}"))
            .map_err(|e| Error::io("writing lock", e))?;
        Ok((PrefixLock { file, path }, old_pid.filter(|&p| p != me)))
    }

    fn release(self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.file);
    }
}

/// What [`cleanup_prefix`] removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CleanupReport {
    pub namespaces_deleted: Vec<String>,
}

/// A live topology; tears itself down on drop.
#[derive(Debug)]
pub struct Topology {
    config: TopologyConfig,
    sender_tun: Option<Tun>,
    receiver_tun: Option<Tun>,
    created: Vec<String>,
    lock: Option<PrefixLock>,
}

impl Topology {
    /// Creates both namespaces, their TUN devices, addresses and routes.
    pub fn create(config: TopologyConfig) -> Result<Topology> {
        config.validate()?;
        let (lock, previous_owner) = PrefixLock::acquire(&config.prefix)?;
        let mut topo = Topology { config, sender_tun: None, receiver_tun: None, created: Vec::new(), lock: Some(lock) };
        let names = [topo.config.sender_ns(), topo.config.receiver_ns()];
        for ns in &names {
            if !netns::exists(ns) {
                continue;
            }
            match previous_owner {
                Some(pid) => {
                    eprintln!(
                        "ccp-router: deleting namespace {ns}, left behind by a ccp-router (pid {pid}) that did not clean up"
                    );
                    netns::delete(ns)?;
                }
                None => {
                    topo.teardown();
                    return Err(Error::Topology(format!(
                        "network namespace {ns} already exists and no ccp-router created it; \
                         delete it (`ip netns delete {ns}`) or pick another --netns-prefix"
                    )));
                }
            }
        }
        // On any error below, `topo` is dropped and removes what was created so far.
        let sender = topo.build_side(Side::Sender)?;
        topo.sender_tun = Some(sender);
        let receiver = topo.build_side(Side::Receiver)?;
        topo.receiver_tun = Some(receiver);
        Ok(topo)
    }

    fn build_side(&mut self, side: Side) -> Result<Tun> {
        let (ns, addr) = match side {
            Side::Sender => (self.config.sender_ns(), self.config.sender_addr),
            Side::Receiver => (self.config.receiver_ns(), self.config.receiver_addr),
        };
        netns::add(&ns)?;
        self.created.push(ns.clone());
        let tun = netns::run_in(&ns, || -> Result<Tun> {
            // The TUN device has no link layer: keep it free of IPv6 autoconfiguration chatter
            // (router solicitations, MLD) that would otherwise cross the emulated link.
            netns::write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1")?;
            Tun::create(TUN_NAME)
        })??;
        netns::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        netns::ip(&["-n", &ns, "link", "set", TUN_NAME, "up"])?;
        netns::ip(&["-n", &ns, "addr", "add", &format!("{addr}/32"), "dev", TUN_NAME])?;
        netns::ip(&["-n", &ns, "route", "add", "default", "dev", TUN_NAME, "src", &addr.to_string()])?;
        if self.config.tcp_usec_ts {
            netns::run_in(&ns, move || route::set_default_route_features(TUN_NAME, addr, route::RTAX_FEATURE_TCP_USEC_TS))??;
        }
        Ok(tun)
    }

    pub fn config(&self) -> &TopologyConfig {
        &self.config
    }

    pub fn sender_ns(&self) -> String {
        self.config.sender_ns()
    }

    pub fn receiver_ns(&self) -> String {
        self.config.receiver_ns()
    }

    pub fn namespace(&self, side: Side) -> String {
        match side {
            Side::Sender => self.sender_ns(),
            Side::Receiver => self.receiver_ns(),
        }
    }

    /// The router's descriptor for a side's TUN device (duplicated, so the caller owns it).
    pub fn tun(&self, side: Side) -> Result<Tun> {
        let t = match side {
            Side::Sender => self.sender_tun.as_ref(),
            Side::Receiver => self.receiver_tun.as_ref(),
        };
        t.ok_or_else(|| Error::Topology("the topology was torn down".into()))?.try_clone()
    }

    /// A command that runs `program` inside a side's namespace (`ip netns exec NS program`).
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.namespace(side), program]);
        c
    }

    /// Runs `f` on a thread inside a side's namespace (to open sockets there).
    pub fn run_in<T: Send + 'static>(&self, side: Side, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        netns::run_in(&self.namespace(side), f)
    }

    /// Removes everything this topology created. Idempotent; errors are reported on stderr
    /// because teardown must carry on with the rest.
    pub fn teardown(&mut self) {
        self.sender_tun = None;
        self.receiver_tun = None;
        for ns in self.created.drain(..).rev() {
            let left = netns::pids(&ns);
            if !left.is_empty() {
                eprintln!("ccp-router: processes {left:?} are still inside {ns}; it disappears when they exit");
            }
            if let Err(e) = netns::delete(&ns) {
                eprintln!("ccp-router: teardown: {e}");
            }
        }
        if let Some(lock) = self.lock.take() {
            lock.release();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Removes a prefix's namespaces and lock file by name, unless a live ccp-router holds it: for
/// `ccp-router cleanup` and for tests that must clean up even after a failure.
pub fn cleanup_prefix(prefix: &str) -> Result<CleanupReport> {
    netns::validate_prefix(prefix)?;
    let (lock, _) = PrefixLock::acquire(prefix)?;
    let mut report = CleanupReport::default();
    let config = TopologyConfig::new(prefix);
    for ns in [config.sender_ns(), config.receiver_ns()] {
        if netns::exists(&ns) {
            netns::delete(&ns)?;
            report.namespaces_deleted.push(ns);
        }
    }
    lock.release();
    Ok(report)
}
