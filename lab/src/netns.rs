//! Working inside the emulator's network namespaces: unique prefixes for runs, threads that
//! live in a namespace (traffic generators), sysctls set for a run and restored after it, and
//! sweeping namespaces left behind by a runner that was killed.
//!
//! Traffic runs on threads that `setns` into a namespace rather than in `ip netns exec`
//! processes: a thread is cheap to start at a flow's exact start time, shares the counters the
//! sampler reads, and its sockets set `TCP_CONGESTION` before `connect` (what iperf3 cannot do).
//! Threads spawned by such a thread inherit its namespace, so a generator can fan out.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use crate::error::{Error, Result};

/// Namespace prefixes of this runner: `ccplab-<pid>-<n>`.
pub const PREFIX_STEM: &str = "ccplab";

static NEXT_PREFIX: AtomicU32 = AtomicU32::new(0);

/// A prefix no other run (of this or any other live runner) uses.
pub fn unique_prefix() -> String {
    format!("{PREFIX_STEM}-{}-{}", std::process::id(), NEXT_PREFIX.fetch_add(1, Ordering::Relaxed))
}

/// A congestion control name no other run of any live runner registers: `ccpl<pid>x<n>` (at
/// most 15 characters). struct_ops names are global, so two agents — two runners, or a runner
/// and a developer's `ccp-agent` on the default `ccp` — must never share one.
pub fn unique_cc_name() -> String {
    unique_name("ccpl")
}

/// The same for the receiver's CE echo: `ccpr<pid>x<n>`.
pub fn unique_echo_name() -> String {
    unique_name("ccpr")
}

fn unique_name(stem: &str) -> String {
    format!("{stem}{}x{}", std::process::id() % 100_000, NEXT_CC.fetch_add(1, Ordering::Relaxed) % 100_000)
}

static NEXT_CC: AtomicU32 = AtomicU32::new(0);

/// The runner pid encoded in one of our namespace names (`ccplab-<pid>-<n>-snd`).
fn owner_pid(ns: &str) -> Option<(u32, String)> {
    let rest = ns.strip_prefix(PREFIX_STEM)?.strip_prefix('-')?;
    let base = rest.strip_suffix("-snd").or_else(|| rest.strip_suffix("-rcv"))?;
    let (pid, n) = base.split_once('-')?;
    n.parse::<u32>().ok()?;
    Some((pid.parse().ok()?, format!("{PREFIX_STEM}-{base}")))
}

/// Deletes, by name, the namespaces of runners that no longer exist. Returns the prefixes
/// removed. Live runners' namespaces are left alone.
pub fn sweep_stale() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(ccp_router::netns::NETNS_DIR) else { return Vec::new() };
    let mut prefixes: Vec<String> = dir
        .flatten()
        .filter_map(|e| owner_pid(&e.file_name().to_string_lossy()))
        .filter(|(pid, _)| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        .map(|(_, prefix)| prefix)
        .collect();
    prefixes.sort();
    prefixes.dedup();
    // Packet logs a killed runner left on tmpfs (`<prefix>-router.csv`, see run/execute.rs).
    for dir in ["/dev/shm".into(), std::env::temp_dir()] {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(base) = name.strip_suffix("-router.csv") else { continue };
            if let Some((pid, _)) = owner_pid(&format!("{base}-snd")) {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    sweep_stale_pins();
    prefixes.retain(|p| match ccp_router::cleanup_prefix(p) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("ccp-lab: could not remove leftover namespaces {p}-*: {e}");
            false
        }
    });
    prefixes
}

/// The runner pid (mod 100,000) in an agent's pin directory name `ccpl<pid>x<n>`.
fn pin_owner(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("ccpl")?.split_once('x')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Removes the pin directories (`/sys/fs/bpf/ccpl…`) of agents that were killed before they
/// could empty them. A directory is stale when its congestion control is no longer registered
/// (nothing holds it), the runner its name encodes is gone, and it is over a minute old (an
/// agent that is starting has pinned its maps before it registers).
fn sweep_stale_pins() {
    let registered = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default();
    let registered: Vec<&str> = registered.split_whitespace().collect();
    for e in std::fs::read_dir("/sys/fs/bpf").into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = pin_owner(&name) else { continue };
        let old = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|a| a.as_secs() > 60);
        if registered.contains(&name.as_str()) || std::path::Path::new(&format!("/proc/{pid}")).exists() || !old {
            continue;
        }
        for f in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(f.path());
        }
        if let Err(err) = std::fs::remove_dir(e.path()) {
            eprintln!("ccp-lab: could not remove leftover pins {}: {err}", e.path().display());
        }
    }
}

/// Spawns a named thread that joins namespace `ns` and runs `f` there.
pub fn spawn_in<T: Send + 'static>(
    ns: &str,
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<JoinHandle<Result<T>>> {
    let path = ccp_router::netns::path(ns);
    let file = File::open(&path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(name.chars().take(15).collect())
        .spawn(move || {
            // SAFETY: setns on a namespace descriptor affects only this thread.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::last_os(format!("joining network namespace {ns}")));
            }
            f()
        })
        .map_err(|e| Error::io("spawning a traffic thread", e))
}

/// Runs `f` inside namespace `ns` and waits for it.
pub fn run_in<T: Send + 'static>(ns: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    spawn_in(ns, "ccplab-ns", f)?.join().map_err(|_| Error::Run(format!("a thread inside {ns} panicked")))?
}

fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

/// sysctls set in namespaces for one run, restored (in reverse order) on [`Sysctls::restore`]
/// or drop. Most `net.` keys die with the namespace anyway; the few global ones must not outlive
/// the run.
#[derive(Debug, Default)]
pub struct Sysctls {
    /// (namespace, key, previous value)
    set: Vec<(String, String, String)>,
}

impl Sysctls {
    /// Sets `key = value` inside `ns`, remembering the old value.
    pub fn set(&mut self, ns: &str, key: &str, value: &str) -> Result<()> {
        let (path, value_owned) = (sysctl_path(key), value.to_string());
        let key_owned = key.to_string();
        let old = run_in(ns, move || {
            let old = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading sysctl {key_owned}"), e))?;
            std::fs::write(&path, &value_owned)
                .map_err(|e| Error::io(format!("setting sysctl {key_owned} = {value_owned:?}"), e))?;
            Ok(old.trim().to_string())
        })
        .map_err(|e| Error::Run(format!("in namespace {ns}: {e}")))?;
        self.set.push((ns.to_string(), key.to_string(), old));
        Ok(())
    }

    /// Puts every value back; namespaces that are already gone need nothing.
    pub fn restore(&mut self) {
        while let Some((ns, key, old)) = self.set.pop() {
            if !ccp_router::netns::exists(&ns) {
                continue;
            }
            let path = sysctl_path(&key);
            let restored = run_in(&ns, move || std::fs::write(&path, &old).map_err(|e| Error::io("restoring", e)));
            if let Err(e) = restored {
                eprintln!("ccp-lab: restoring sysctl {key} in {ns}: {e}");
            }
        }
    }
}

impl Drop for Sysctls {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Whether this process may create namespaces and TUN devices (root).
pub fn have_privileges() -> bool {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_unique_and_ours() {
        let a = unique_prefix();
        let b = unique_prefix();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("ccplab-{}-", std::process::id())));
        assert_eq!(owner_pid(&format!("{a}-snd")), Some((std::process::id(), a.clone())));
        assert_eq!(owner_pid("ccplab-12-3-rcv"), Some((12, "ccplab-12-3".into())));
        assert_eq!(owner_pid("ccplab-12-x-rcv"), None);
        assert_eq!(owner_pid("ccprt-12-3-rcv"), None);
        assert_eq!(owner_pid("ccplab-12-3-other"), None);
        ccp_router::netns::validate_prefix(&a).unwrap();
        let (c, d) = (unique_cc_name(), unique_cc_name());
        assert_ne!(c, d);
        assert!(c.len() <= crate::config::MAX_CC_NAME && c.starts_with("ccpl"), "{c}");
        assert_eq!(pin_owner(&c), Some(std::process::id() % 100_000));
        assert_eq!(pin_owner("ccpl12x3"), Some(12));
        assert_eq!(pin_owner("ccplab-12-3"), None);
        assert_eq!(pin_owner("ccpl12x"), None);
    }

    #[test]
    fn sysctl_paths() {
        assert_eq!(sysctl_path("net.ipv4.tcp_ecn"), "/proc/sys/net/ipv4/tcp_ecn");
    }
}
