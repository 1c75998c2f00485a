//! Network namespaces: naming them, finding them, and running code inside one.
//!
//! An iter/tcp iterator sees only the sockets of the namespace it was created in, sysctls under
//! /proc/sys/net are those of the opening task's namespace, and tc/netlink talks to its own: so
//! each of those runs on a short-lived thread that has joined the target namespace with
//! setns(2). The rest of the process never changes namespace.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A network namespace, identified by the (device, inode) of its nsfs file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    /// A path that names it: /run/netns/NAME, /proc/PID/ns/net, ...
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

impl Netns {
    /// Opens the namespace at `path` (checking that it is one). The path may come from a user
    /// (`ctl attach --netns PATH`): it is opened without blocking (a FIFO would block a plain
    /// open forever) and must be an nsfs file of a network namespace.
    pub fn open(path: &Path) -> io::Result<Netns> {
        let f = open_ns_file(path)?;
        let meta = f.metadata()?;
        let ns = Netns { path: path.to_path_buf(), dev: meta.dev(), ino: meta.ino() };
        // SAFETY: NS_GET_NSTYPE takes no argument and returns the namespace type.
        let ty = unsafe { libc::ioctl(f.as_raw_fd(), NS_GET_NSTYPE) };
        if ty != libc::CLONE_NEWNET {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a network namespace", path.display())));
        }
        Ok(ns)
    }

    /// The namespace of the calling thread.
    pub fn current() -> io::Result<Netns> {
        let mut ns = Netns::open(Path::new("/proc/thread-self/ns/net"))?;
        // A path that stays valid for other threads and processes.
        ns.path = PathBuf::from(format!("/proc/{}/ns/net", std::process::id()));
        Ok(ns)
    }

    pub fn same_as(&self, other: &Netns) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }

    /// Every network namespace that can be named: the ones `ip netns` manages, then those of
    /// running processes; one path per namespace.
    pub fn discover() -> Vec<Netns> {
        let mut seen: BTreeMap<(u64, u64), Netns> = BTreeMap::new();
        let mut add = |p: PathBuf| {
            if let Ok(ns) = Netns::open(&p) {
                seen.entry((ns.dev, ns.ino)).or_insert(ns);
            }
        };
        if let Ok(dir) = std::fs::read_dir("/run/netns") {
            for e in dir.flatten() {
                add(e.path());
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for e in dir.flatten() {
                if e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
                    add(e.path().join("ns/net"));
                }
            }
        }
        seen.into_values().collect()
    }

    /// Runs `f` on a thread inside this namespace and returns its result.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        if Netns::current().is_ok_and(|cur| cur.same_as(self)) {
            return Ok(f());
        }
        let file = open_ns_file(&self.path)?;
        let opened = file.metadata()?;
        if opened.dev() != self.dev || opened.ino() != self.ino {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} names another network namespace now", self.path.display()),
            ));
        }
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns on this thread only, with a valid nsfs fd; the thread ends
                // with the closure, taking the namespace change with it.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(f())
            })
            .join()
            .map_err(|_| io::Error::other("a thread running in another network namespace panicked"))?
        })
    }
}

/// Opens `path` read-only without blocking and without following it into anything but a
/// regular file (nsfs files are regular; FIFOs, devices, sockets and directories are refused).
fn open_ns_file(path: &Path) -> io::Result<File> {
    let f =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a network namespace", path.display())));
    }
    Ok(f)
}

/// `NS_GET_NSTYPE` from linux/nsfs.h: `_IO(0xb7, 0x3)`.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

impl std::fmt::Display for Netns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_namespace_is_found_and_runs_inline() {
        let cur = Netns::current().unwrap();
        assert!(Netns::discover().iter().any(|n| n.same_as(&cur)));
        let tid_outside = std::thread::current().id();
        let tid_inside = cur.run(|| std::thread::current().id()).unwrap();
        assert_eq!(tid_outside, tid_inside);
    }

    #[test]
    fn a_file_that_is_not_a_namespace_is_refused() {
        assert!(Netns::open(Path::new("/proc/self/status")).is_err());
        assert!(Netns::open(Path::new("/nonexistent/ns")).is_err());
        assert!(Netns::open(Path::new("/dev/null")).is_err());
        assert!(Netns::open(Path::new("/proc")).is_err());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("ccp-netns-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // A blocking open of a FIFO with no writer never returns: run it on a thread and
        // require an answer (the test hangs, and fails by timeout, if the open blocks).
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || tx.send(Netns::open(&p).is_err()).unwrap());
        let refused = rx.recv_timeout(std::time::Duration::from_secs(5));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(refused, Ok(true), "opening a FIFO as a namespace must fail at once");
    }
}
