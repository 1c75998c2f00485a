//! cgroup v2 paths: resolving what users write, and naming the ids the kernel reports.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Error;

/// Where the cgroup2 filesystem is mounted (/sys/fs/cgroup/unified on this hybrid setup).
pub fn root() -> Result<PathBuf, Error> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, fs) = (f.next()?, f.next()?, f.next()?);
            (fs == "cgroup2").then(|| PathBuf::from(at))
        })
        .next()
        .ok_or_else(|| Error::Config("no cgroup2 filesystem is mounted".into()))
}

/// A cgroup v2 directory: absolute, or relative to the cgroup2 mount.
pub fn dir(path: &Path) -> Result<PathBuf, Error> {
    let dir = if path.is_absolute() { path.to_path_buf() } else { root()?.join(path) };
    if !dir.is_dir() {
        return Err(Error::Config(format!("{} is not a cgroup directory", dir.display())));
    }
    Ok(dir)
}

/// Names cgroup ids (the inode numbers of cgroupfs directories) as paths from the cgroup2 root,
/// "/" for the root itself: the form rules match against.
pub struct Names {
    root: Option<PathBuf>,
    by_id: HashMap<u64, String>,
    scanned: Option<Instant>,
}

/// A miss rescans the hierarchy at most this often (ids of new cgroups appear with new flows).
const RESCAN: Duration = Duration::from_secs(1);
/// Deepest level scanned: deeper hierarchies are not worth a stall of the event loop.
const MAX_DEPTH: usize = 16;
/// Most cgroups one rescan visits, and the longest it takes: a user with a delegated subtree can
/// create cgroups by the hundred thousand, and the scan runs in the agent's loop. Past either,
/// the flows of cgroups not reached go without a cgroup name (their cgroup rules do not match).
const MAX_SCANNED: usize = 65_536;
const MAX_SCAN_TIME: Duration = Duration::from_millis(20);

impl Default for Names {
    fn default() -> Self {
        Names { root: root().ok(), by_id: HashMap::new(), scanned: None }
    }
}

impl Names {
    pub fn name(&mut self, id: u64) -> Option<String> {
        if id == 0 {
            return None;
        }
        if let Some(n) = self.by_id.get(&id) {
            return Some(n.clone());
        }
        if self.scanned.is_some_and(|t| t.elapsed() < RESCAN) {
            return None;
        }
        self.scanned = Some(Instant::now());
        self.by_id.clear();
        if let Some(root) = self.root.clone() {
            let started = Instant::now();
            self.scan(&root, &root, 0, started);
        }
        self.by_id.get(&id).cloned()
    }

    fn scan(&mut self, root: &Path, dir: &Path, depth: usize, started: Instant) {
        if self.by_id.len() >= MAX_SCANNED || started.elapsed() >= MAX_SCAN_TIME {
            return;
        }
        let Ok(meta) = std::fs::metadata(dir) else { return };
        let rel = dir.strip_prefix(root).map(|r| format!("/{}", r.display())).unwrap_or_else(|_| "/".into());
        self.by_id.insert(meta.ino(), rel);
        if depth >= MAX_DEPTH {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                self.scan(root, &e.path(), depth + 1, started);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_cgroup_is_named_slash() {
        let Ok(root) = root() else {
            eprintln!("SKIPPED the_root_cgroup_is_named_slash: no cgroup2 mount");
            return;
        };
        let id = std::fs::metadata(&root).unwrap().ino();
        assert_eq!(Names::default().name(id).as_deref(), Some("/"));
        assert_eq!(Names::default().name(0), None);
        assert!(dir(Path::new("/nonexistent-cgroup")).is_err());
        assert_eq!(dir(Path::new("")).unwrap(), root);
    }
}
