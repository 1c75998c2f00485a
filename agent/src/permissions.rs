//! Who may talk to the agent's sockets.
//!
//! Sockets are created under a 0177 umask, so they never exist — not even for an instant —
//! with more than owner read/write; sharing with a group is an explicit chown + chmod 0660.
//!
//! A socket directory (`/tmp/ccp`) is created 0700, or 01770 owned by the configured group
//! (members bind their own reply sockets there; the sticky bit keeps them from removing or
//! replacing anyone else's, the agent's included). An existing one is used only when it is a
//! real directory owned by the agent's user or root, not world-writable, and group-writable
//! only as such a sticky directory of the configured group; anything else is refused with an
//! error that says what is wrong and what to do, never used as found.

use std::ffi::CString;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
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

/// Creates the socket directory `dir` (0700; 01770 owned by `group` when given) or checks an
/// existing one (see the module docs).
pub fn prepare_socket_dir(dir: &Path, group: Option<u32>) -> anyhow::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let mode = if group.is_some() { 0o1770 } else { 0o700 };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            if let Some(gid) = group {
                chown(dir, u32::MAX, gid)?;
            }
            // Explicitly, whatever the umask: DirBuilder's mode is masked by it.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("chmod {:o} {}", mode, dir.display()))?;
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => check_socket_dir(dir, group),
        Err(e) => Err(e).with_context(|| format!("creating socket directory {}", dir.display())),
    }
}

/// Refuses a socket directory that someone other than the agent's user (or root) could have
/// prepared for it: see the module docs.
pub fn check_socket_dir(dir: &Path, group: Option<u32>) -> anyhow::Result<()> {
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("checking socket directory {}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    let what =
        format!("socket directory {} (owner uid {}, group gid {}, mode {:04o})", dir.display(), meta.uid(), meta.gid(), mode);
    let fix = "remove it (nothing else should use it) or choose another directory (`--ipc-dir` / [datapath.unix] dir)";
    if meta.file_type().is_symlink() {
        bail!("refusing {what}: it is a symbolic link, which whoever owns it can point anywhere; {fix}");
    }
    if !meta.is_dir() {
        bail!("refusing {what}: it is not a directory; {fix}");
    }
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid && meta.uid() != 0 {
        bail!("refusing {what}: it belongs to another user (uid {}), who could replace the sockets in it; {fix}", meta.uid());
    }
    if mode & 0o002 != 0 {
        bail!("refusing {what}: it is world-writable, so any user could replace the sockets in it; {fix}, or chmod o-w it");
    }
    if mode & 0o020 != 0 {
        let shared = group == Some(meta.gid()) && mode & 0o1000 != 0;
        if !shared {
            bail!(
                "refusing {what}: it is group-writable{}; {fix}, or chmod g-w it",
                match group {
                    Some(gid) => format!(" and not a sticky (01770) directory of the configured group {gid}"),
                    None => " and no group is configured".to_string(),
                }
            );
        }
    }
    Ok(())
}

fn chown(path: &Path, uid: u32, gid: u32) -> anyhow::Result<()> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).context("path")?;
    // SAFETY: chown on a NUL-terminated path; u32::MAX (-1) keeps that id.
    if unsafe { libc::chown(c.as_ptr(), uid, gid) } != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("chown {uid}:{gid} {}", path.display()));
    }
    Ok(())
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

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn is_root() -> bool {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_missing_socket_dir_is_created_private_whatever_the_umask() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a/ccp");
        // SAFETY: umask swap in a test; restored below (other tests create files 0600 anyway).
        let old = unsafe { libc::umask(0) };
        let r = prepare_socket_dir(&dir, None);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        r.unwrap();
        assert_eq!(mode_of(&dir), 0o700);
        // SAFETY: geteuid cannot fail.
        assert_eq!(std::fs::metadata(&dir).unwrap().uid(), unsafe { libc::geteuid() });
        prepare_socket_dir(&dir, None).expect("our own private directory is accepted again");
    }

    #[test]
    fn a_shared_socket_dir_is_sticky_and_group_owned() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        prepare_socket_dir(&dir, Some(0)).unwrap();
        assert_eq!(mode_of(&dir), 0o1770);
        assert_eq!(std::fs::metadata(&dir).unwrap().gid(), 0);
        prepare_socket_dir(&dir, Some(0)).expect("accepted again with the same group");
        let e = prepare_socket_dir(&dir, None).unwrap_err().to_string();
        assert!(e.contains("group-writable") && e.contains("no group is configured"), "{e}");
    }

    #[test]
    fn writable_by_others_is_refused_naming_path_owner_and_mode() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        std::fs::create_dir(&dir).unwrap();
        for (mode, why) in
            [(0o777, "world-writable"), (0o1777, "world-writable"), (0o770, "group-writable"), (0o1770, "group-writable")]
        {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = prepare_socket_dir(&dir, None).unwrap_err().to_string();
            assert!(e.contains(why), "{mode:o}: {e}");
            assert!(
                e.contains(&dir.display().to_string()) && e.contains(&format!("mode {mode:04o}")) && e.contains("owner uid"),
                "{e}"
            );
            assert!(e.contains("remove it"), "says what to do: {e}");
        }
        // Group-writable without the sticky bit is refused even for the configured group.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let gid = std::fs::metadata(&dir).unwrap().gid();
        assert!(prepare_socket_dir(&dir, Some(gid)).is_err());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_socket_dir(&dir, None).expect("0755 of our own is fine");
    }

    #[test]
    fn another_users_dir_a_symlink_or_a_file_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let file = base.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(prepare_socket_dir(&file, None).unwrap_err().to_string().contains("not a directory"));
        let real = base.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(prepare_socket_dir(&link, None).unwrap_err().to_string().contains("symbolic link"));
        if !is_root() {
            eprintln!("SKIPPED: chown to another user needs root");
            return;
        }
        let theirs = base.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        chown(&theirs, 65534, 65534).unwrap();
        let e = prepare_socket_dir(&theirs, None).unwrap_err().to_string();
        assert!(e.contains("another user") && e.contains("owner uid 65534") && e.contains("mode 0700"), "{e}");
    }

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
