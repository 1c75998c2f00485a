//! Named network namespaces (`ip netns`, i.e. bind mounts under /run/netns), running code inside
//! one (a short-lived thread that `setns`es, since the namespace is per thread), and the `ip`
//! commands that configure them.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// Where `ip netns` keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Longest namespace prefix accepted: names stay readable and well under NAME_MAX.
pub const MAX_PREFIX_LEN: usize = 48;

/// Checks a namespace prefix: letters, digits, `-`, `_`, `.`, not starting with `-` or `.`.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    let ok_chars = prefix.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN || !ok_chars || prefix.starts_with(['-', '.']) {
        return Err(Error::param(
            "--netns-prefix",
            format!("{prefix:?}: use 1..{MAX_PREFIX_LEN} letters, digits, '-', '_' or '.', not starting with '-' or '.'"),
        ));
    }
    Ok(())
}

pub fn path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Runs `ip` with `args`; the error carries the command line and what it printed.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|e| Error::io("running `ip` (is iproute2 installed?)", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: format!("ip {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

pub fn add(name: &str) -> Result<()> {
    ip(&["netns", "add", name])
}

pub fn delete(name: &str) -> Result<()> {
    ip(&["netns", "delete", name])
}

/// PIDs of processes still inside namespace `name` (for warnings at teardown).
pub fn pids(name: &str) -> Vec<u32> {
    Command::new("ip")
        .args(["netns", "pids", name])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_default()
}

/// Runs `f` on a fresh thread that has joined namespace `name`. Sockets and TUN devices created
/// inside `f` stay in that namespace for their whole life, whichever thread later uses them.
pub fn run_in<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let p = path(name);
    let file = File::open(&p).map_err(|e| Error::io(format!("opening {}", p.display()), e))?;
    let name = name.to_string();
    std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || {
            // SAFETY: setns on a namespace fd affects only this thread.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::last_os(format!("setns into {name}")));
            }
            Ok(f())
        })
        .map_err(|e| Error::io("spawning a namespace thread", e))?
        .join()
        .map_err(|_| Error::Topology("a thread running inside a namespace panicked".into()))?
}

/// Writes a sysctl of the calling thread's network namespace (`/proc/sys/net/...` resolves per
/// thread), e.g. from inside [`run_in`].
pub fn write_sysctl(key_path: &str, value: &str) -> Result<()> {
    std::fs::write(key_path, value).map_err(|e| Error::io(format!("writing {key_path}"), e))
}
