//! Who may talk to the agent's sockets.
//!
//! Sockets are created under a 0177 umask, so they never exist — not even for an instant —
//! with more than owner read/write; sharing with a group is an explicit chown + chmod 0660.

use std::ffi::CString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{bail, Context};

/// Runs `f` (a bind) with a umask that leaves new files at mode 0600 at most.
pub fn with_private_umask<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: umask only swaps the process's file mode mask; the agent binds at start-up,
    // before any other thread creates files.
    let old = unsafe { libc::umask(0o177) };
    let out = f();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    out
}

/// Gives `path` to group `gid` with mode 0660.
pub fn share_with_group(path: &Path, gid: u32) -> anyhow::Result<()> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).context("socket path")?;
    // SAFETY: chown on a NUL-terminated path; u32::MAX (-1) keeps the owner.
    if unsafe { libc::chown(c.as_ptr(), u32::MAX, gid) } != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("giving {} to group {gid}", path.display()));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).with_context(|| format!("chmod {}", path.display()))
}

/// Resolves a group name (or a numeric gid) to a gid.
pub fn resolve_group(name: &str) -> anyhow::Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let c = CString::new(name).with_context(|| format!("group name {name:?}"))?;
    // SAFETY: getgrnam returns a pointer into static storage or null; the gid is copied at once.
    let gr = unsafe { libc::getgrnam(c.as_ptr()) };
    if gr.is_null() {
        bail!("no such group {name:?}");
    }
    // SAFETY: non-null result of getgrnam.
    Ok(unsafe { (*gr).gr_gid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn sockets_are_private_unless_shared() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let _s = with_private_umask(|| std::os::unix::net::UnixDatagram::bind(&a)).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().mode() & 0o777, 0o600);
        share_with_group(&a, 0).unwrap();
        let m = std::fs::metadata(&a).unwrap();
        assert_eq!(m.mode() & 0o777, 0o660);
        assert_eq!(m.gid(), 0);
    }

    #[test]
    fn groups_resolve_by_name_or_number() {
        assert_eq!(resolve_group("0").unwrap(), 0);
        assert_eq!(resolve_group("root").unwrap(), 0);
        assert!(resolve_group("no-such-group-ccp").unwrap_err().to_string().contains("no such group"));
    }
}
