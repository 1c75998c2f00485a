//! Shared helpers for the router's network tests: capability checks that skip loudly, unique
//! namespace prefixes cleaned up by name even when a test fails, and a lock that keeps tests
//! with real flows from sharing the 2 CPUs (which would skew rate and delay figures).

#![allow(dead_code)] // each test binary uses a subset

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Prefix of every namespace the tests create: `ccprt-<pid>-<n>`.
pub const TEST_PREFIX: &str = "ccprt";

static NEXT: AtomicU32 = AtomicU32::new(0);
static NETWORK: Mutex<()> = Mutex::new(());

/// Why network tests cannot run here, if they cannot.
pub fn missing_capability() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root (network namespaces and TUN devices need it)".into());
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is absent".into());
    }
    if std::process::Command::new("ip").arg("-V").output().is_err() {
        return Some("`ip` (iproute2) is not installed".into());
    }
    None
}

/// Skips the calling test loudly when the machine lacks what network tests need.
#[macro_export]
macro_rules! require_network {
    () => {
        if let Some(why) = common::missing_capability() {
            eprintln!("SKIPPED {}: {why}", module_path!());
            return;
        }
    };
}

/// A unique prefix whose namespaces are deleted by name when the guard drops (after whatever
/// used them, if declared first).
pub struct Prefix {
    pub name: String,
}

impl Prefix {
    pub fn new() -> Prefix {
        Prefix { name: format!("{TEST_PREFIX}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)) }
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        if let Err(e) = ccp_router::cleanup_prefix(&self.name) {
            eprintln!("cleanup of {}: {e}", self.name);
        }
    }
}

/// Serialises tests that push real traffic.
pub fn network_lock() -> MutexGuard<'static, ()> {
    NETWORK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn netns_exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}
