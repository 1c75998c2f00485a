//! The bpf filesystem that holds pinned maps and links.
//!
//! Nothing mounts it on this machine's kind; the conventional mount point is /sys/fs/bpf, and a
//! pin directory under it gets the filesystem mounted there on first use.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use crate::Error;

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
const MOUNT_POINT: &str = "/sys/fs/bpf";

fn is_bpffs(path: &Path) -> io::Result<bool> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statfs into a zeroed struct with a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

fn mount_bpffs(at: &Path) -> io::Result<()> {
    let target = CString::new(at.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: valid C strings; mounting a new bpf filesystem instance.
    let rc = unsafe { libc::mount(c"bpf".as_ptr(), target.as_ptr(), c"bpf".as_ptr(), 0, c"mode=0700".as_ptr().cast()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `dir` an existing directory on a bpf filesystem, mounting one at /sys/fs/bpf when
/// `dir` lies under it and nothing is mounted there yet.
pub fn ensure_dir(dir: &Path) -> Result<(), Error> {
    let mut existing = dir;
    while !existing.exists() {
        existing = existing.parent().unwrap_or(Path::new("/"));
    }
    if !is_bpffs(existing)? {
        if dir.starts_with(MOUNT_POINT) && existing == Path::new(MOUNT_POINT) {
            mount_bpffs(existing).map_err(|e| Error::Config(format!("mounting a bpf filesystem on {MOUNT_POINT}: {e}")))?;
        } else {
            return Err(Error::Config(format!(
                "{} is not on a bpf filesystem (mount one, or use a directory under {MOUNT_POINT})",
                dir.display()
            )));
        }
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    Ok(())
}
