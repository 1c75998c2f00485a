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
//!
//! The configuration file is read only when nobody but root or the agent's own user can have
//! written it: [`open_trusted_file`] refuses a file (after symbolic links) that another user owns
//! or that group or others may write, and one whose directory they could replace it in. A Python
//! algorithm file passes the same check ([`check_python_file`]) before it is loaded, because
//! loading it runs it with the agent's privileges.

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

/// Opens `path` (a configuration file) for reading after checking that nobody but root or the
/// agent's user can have written what it reads: see [`check_trusted_file`]. The checks are made
/// on the file opened, so it cannot be swapped between the check and the read; the open does
/// not block (a FIFO is refused, not waited on). `Err` is a message naming the path, its owner
/// and mode and what to do; an I/O failure (no such file) reads "cannot read: …".
pub fn open_trusted_file(path: &Path) -> Result<std::fs::File, String> {
    open_trusted(path, "configuration file")
}

/// [`check_trusted_file`] for a Python algorithm file (`py:FILE:Class`), which the agent
/// executes when it loads the class: set as `ccp_python::loader::set_file_check`.
pub fn check_python_file(path: &Path) -> Result<(), String> {
    open_trusted(path, "Python algorithm file").map(drop)
}

/// The check of a learned policy's model and manifest (`onnx:`), as of a Python file.
pub fn check_algorithm_file(path: &Path) -> Result<(), String> {
    open_trusted(path, "learned policy file").map(drop)
}

/// [`open_trusted_file`] for a file of `kind` ("configuration file"), as errors name it.
fn open_trusted(path: &Path, kind: &str) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let real = std::fs::canonicalize(path).map_err(|e| format!("cannot read: {e}"))?;
    let shown = match std::path::absolute(path) {
        Ok(abs) if abs == real => path.display().to_string(),
        _ => format!("{} (-> {})", path.display(), real.display()),
    };
    if let Some(dir) = real.parent() {
        let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read: {}: {e}", dir.display()))?;
        check_trusted_dir(kind, &shown, dir, &meta)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&real)
        .map_err(|e| format!("cannot read: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    check_trusted_meta(kind, &shown, &real, &meta)?;
    Ok(file)
}

/// Refuses a file that someone other than root or the agent's user could have written: it (the
/// target, when `path` is a symbolic link) must be a regular file owned by root or the agent's
/// effective user and writable by neither group nor others, in a directory owned by one of those
/// two and writable by nobody else (unless sticky, as /tmp: then only a file's owner can replace
/// it). Applied as root and not: an unprivileged agent that reads a file others can write does
/// what they say just the same.
pub fn check_trusted_file(path: &Path) -> Result<(), String> {
    open_trusted_file(path).map(drop)
}

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// `shown`: the path as given (and its target); `real`: the file itself, for the fix.
fn check_trusted_meta(kind: &str, shown: &str, real: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let mode = meta.mode() & 0o7777;
    let what = format!("{kind} {shown} (owner uid {}, mode {mode:04o})", meta.uid());
    if !meta.is_file() {
        return Err(format!("refusing {what}: it is not a regular file"));
    }
    let euid = euid();
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(format!(
            "refusing {what}: it belongs to another user (uid {}), who could change what the agent does; only root's \
             or the agent's own (uid {euid}) files are read. Fix: chown {} {}",
            meta.uid(),
            if euid == 0 { "root".to_string() } else { euid.to_string() },
            real.display()
        ));
    }
    if mode & 0o022 != 0 {
        let (how, who) = if mode & 0o002 != 0 {
            ("world-writable", "any user".to_string())
        } else {
            ("group-writable", format!("members of its group (gid {})", meta.gid()))
        };
        return Err(format!(
            "refusing {what}: it is {how}, so {who} could change what the agent does. Fix: chmod go-w {}",
            real.display()
        ));
    }
    Ok(())
}

fn check_trusted_dir(kind: &str, shown: &str, dir: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let mode = meta.mode() & 0o7777;
    let what = format!("{kind} {shown}: its directory {} (owner uid {}, mode {mode:04o})", dir.display(), meta.uid());
    let euid = euid();
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(format!(
            "refusing {what} belongs to another user (uid {}), who could replace the file. Fix: keep the {kind} \
             in a directory of root's (or the agent's user's), such as /etc/ccp-agent",
            meta.uid()
        ));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "refusing {what} is {} without the sticky bit, so others could replace the file. Fix: chmod go-w {}",
            if mode & 0o002 != 0 { "world-writable" } else { "group-writable" },
            dir.display()
        ));
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

    fn config_in(dir: &Path, mode: u32) -> std::path::PathBuf {
        let f = dir.join("agent.toml");
        std::fs::write(&f, "[default]\nalgorithm = \"reno\"\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    #[test]
    fn a_config_only_its_owner_can_write_is_trusted() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o600, 0o400, 0o444] {
            let f = config_in(dir.path(), mode);
            check_trusted_file(&f).unwrap_or_else(|e| panic!("{mode:o}: {e}"));
        }
        // What std::fs::write leaves under the usual umask 022, as tests and the lab write them.
        let f = dir.path().join("written.toml");
        std::fs::write(&f, "").unwrap();
        assert_eq!(mode_of(&f) & 0o022, 0, "umask 022 assumed here");
        check_trusted_file(&f).unwrap();
    }

    #[test]
    fn a_config_writable_by_group_or_others_is_refused_with_path_owner_mode_and_fix() {
        let dir = tempfile::tempdir().unwrap();
        for (mode, why) in
            [(0o666, "world-writable"), (0o664, "group-writable"), (0o620, "group-writable"), (0o602, "world-writable")]
        {
            let f = config_in(dir.path(), mode);
            let e = check_trusted_file(&f).unwrap_err();
            assert!(e.contains(why), "{mode:o}: {e}");
            assert!(
                e.contains(&f.display().to_string()) && e.contains(&format!("mode {mode:04o}")) && e.contains("owner uid"),
                "{e}"
            );
            assert!(e.contains(&format!("chmod go-w {}", f.display())), "says how to fix it: {e}");
        }
    }

    #[test]
    fn a_config_in_a_directory_others_can_write_is_refused_unless_sticky() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("conf");
        std::fs::create_dir(&dir).unwrap();
        let f = config_in(&dir, 0o644);
        for mode in [0o777, 0o775, 0o770] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = check_trusted_file(&f).unwrap_err();
            assert!(e.contains("without the sticky bit") && e.contains(&format!("mode {mode:04o}")), "{mode:o}: {e}");
            assert!(e.contains(&format!("chmod go-w {}", dir.display())), "{e}");
        }
        // A sticky directory (as /tmp, 1777 owned by root): only a file's owner can replace it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_trusted_file(&f).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        check_trusted_file(&f).unwrap();
    }

    #[test]
    fn tmp_itself_is_an_acceptable_directory() {
        let meta = std::fs::metadata("/tmp").unwrap();
        if meta.uid() != 0 || meta.mode() & 0o1000 == 0 {
            eprintln!("SKIPPED: /tmp is not the usual root-owned sticky directory here");
            return;
        }
        let f = tempfile::Builder::new().suffix(".toml").tempfile_in("/tmp").unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        check_trusted_file(f.path()).unwrap();
    }

    #[test]
    fn a_symlink_is_judged_by_its_target() {
        let base = tempfile::tempdir().unwrap();
        let real_dir = base.path().join("real");
        std::fs::create_dir(&real_dir).unwrap();
        let target = config_in(&real_dir, 0o644);
        let link = base.path().join("link.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        check_trusted_file(&link).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_trusted_file(&link).unwrap_err();
        assert!(e.contains(&link.display().to_string()) && e.contains(&target.display().to_string()), "names both: {e}");
        // The target's directory counts, not the link's.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&real_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_trusted_file(&link).unwrap_err().contains("without the sticky bit"));
    }

    #[test]
    fn a_missing_file_a_directory_or_a_fifo_is_not_read() {
        let base = tempfile::tempdir().unwrap();
        let e = check_trusted_file(&base.path().join("none.toml")).unwrap_err();
        assert!(e.starts_with("cannot read"), "{e}");
        assert!(check_trusted_file(base.path()).unwrap_err().contains("not a regular file"));
        let fifo = base.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening a FIFO with no writer would block: the open is non-blocking and it is refused.
        assert!(check_trusted_file(&fifo).unwrap_err().contains("not a regular file"));
    }

    #[test]
    fn another_users_config_or_directory_is_refused() {
        if !is_root() {
            eprintln!("SKIPPED: chown to another user needs root");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let f = config_in(base.path(), 0o644);
        chown(&f, 65534, 65534).unwrap();
        let e = check_trusted_file(&f).unwrap_err();
        assert!(e.contains("another user (uid 65534)") && e.contains("chown root"), "{e}");
        chown(&f, 0, 0).unwrap();
        let dir = base.path().join("theirs");
        std::fs::create_dir(&dir).unwrap();
        let g = config_in(&dir, 0o644);
        chown(&dir, 65534, 65534).unwrap();
        let e = check_trusted_file(&g).unwrap_err();
        assert!(e.contains("its directory") && e.contains("owner uid 65534"), "{e}");
    }

    #[test]
    fn a_python_file_is_checked_like_a_config_and_named_as_such() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("cc");
        std::fs::create_dir(&dir).unwrap();
        let f = dir.join("mine.py");
        std::fs::write(&f, "class Mine: pass\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        check_python_file(&f).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o664)).unwrap();
        let e = check_python_file(&f).unwrap_err();
        assert!(e.starts_with("refusing Python algorithm file") && e.contains("group-writable"), "{e}");
        assert!(e.contains(&format!("chmod go-w {}", f.display())), "says how to fix it: {e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_python_file(&f).unwrap_err();
        assert!(e.contains("its directory") && e.contains("without the sticky bit"), "{e}");
        assert!(e.contains(&format!("chmod go-w {}", dir.display())), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_python_file(&f).expect("a sticky directory is fine");
        assert!(check_python_file(&dir).unwrap_err().contains("not a regular file"));
    }

    #[test]
    fn groups_resolve_by_name_or_number() {
        assert_eq!(resolve_group("0").unwrap(), 0);
        assert_eq!(resolve_group("root").unwrap(), 0);
        assert!(resolve_group("no-such-group-ccp").unwrap_err().to_string().contains("no such group"));
    }
}
