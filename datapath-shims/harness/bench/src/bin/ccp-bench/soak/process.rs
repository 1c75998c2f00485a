//! The soak as a process: SIGINT and SIGTERM end it cleanly, its children die with it, a later
//! soak removes what a killed one left, and the agents' memory and open files come from /proc.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM end the soak early (cleanly) while this lives.
pub(super) struct Interrupts([libc::sighandler_t; 2]);

impl Interrupts {
    pub(super) fn install() -> Interrupts {
        INTERRUPTED.store(false, Ordering::Relaxed);
        let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { Interrupts([libc::signal(libc::SIGINT, handler), libc::signal(libc::SIGTERM, handler)]) }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        // SAFETY: restores the handlers found at install.
        unsafe {
            libc::signal(libc::SIGINT, self.0[0]);
            libc::signal(libc::SIGTERM, self.0[1]);
        }
    }
}

pub(super) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Puts a child in a process group of its own (a Ctrl-C at the terminal reaches ccp-bench
/// alone, which then stops everything in order) and has the kernel SIGTERM it should ccp-bench
/// die first. Children are spawned from the main thread, whose end is what the kernel watches.
pub(super) fn tie_to_this_process(cmd: &mut Command) {
    cmd.process_group(0);
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The process id in a soak name (`ccp-soak-PID…`), if it names one.
fn soak_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("ccp-soak-")?;
    rest.split('-').next()?.parse().ok()
}

/// Removes what a soak killed before it could clean up left: namespaces, pins, its directory.
pub(super) fn sweep_stale() {
    let dead = |name: &str| soak_pid(name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
    let names = |dir: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| dead(n)).collect())
            .unwrap_or_default()
    };
    for ns in names("/run/netns") {
        eprintln!("[soak] removing namespace {ns}, left by a soak that was killed");
        let _ = Command::new("ip").args(["netns", "del", &ns]).status();
    }
    for dir in ["/sys/fs/bpf", &std::env::temp_dir().display().to_string()] {
        for n in names(dir) {
            eprintln!("[soak] removing {dir}/{n}, left by a soak that was killed");
            let _ = std::fs::remove_dir_all(Path::new(dir).join(n));
        }
    }
}

/// Resident memory of a process, MiB.
pub(super) fn rss_mib(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Open files of a process.
pub(super) fn fds(pid: u32) -> Option<f64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soak_names_carry_their_process() {
        assert_eq!(soak_pid("ccp-soak-4242-flows-lo"), Some(4242));
        assert_eq!(soak_pid("ccp-soak-4242"), Some(4242));
        assert_eq!(soak_pid("ccp-soak-4242-x1y2z3"), Some(4242));
        assert_eq!(soak_pid("ccp-soak-logs-4242-x1y2z3"), None);
        assert_eq!(soak_pid("ccpebpf-bench-many-lo"), None);
        assert_eq!(soak_pid("ccp-soak-flows"), None);
    }
}
