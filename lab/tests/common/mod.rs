//! Shared helpers of the network tests: the root check (they need namespaces and /dev/net/tun)
//! and scratch directories.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;

/// Whether the network tests can run; prints why not (so a skipped test is visible).
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no failure mode.
    let root = unsafe { libc::geteuid() } == 0;
    let tun = std::path::Path::new("/dev/net/tun").exists();
    if !(root && tun) {
        eprintln!("SKIPPED {test}: needs root and /dev/net/tun (CI runs as root)");
    }
    root && tun
}

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ccplab-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Namespaces whose name starts with `prefix`.
pub fn namespaces_with(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with(prefix)).collect())
        .unwrap_or_default()
}
