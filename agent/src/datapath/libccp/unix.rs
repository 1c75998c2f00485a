//! libccp IPC over unix datagram sockets, with portus's conventions.
//!
//! The agent binds `<dir>/<name>` (portus: `/tmp/ccp/portus`); each datapath binds its own
//! socket in the same directory and the agent replies to the path a datagram came from, so one
//! agent serves many datapaths. Datapaths written for portus 0.7 bind a bare name relative to
//! the socket directory; such sender paths are resolved against `dir`.
//!
//! The directory is created private (or shared with the configured group) and an existing one
//! that others could write is refused (`crate::permissions::prepare_socket_dir`). The agent
//! replies only to sockets directly inside it: a sender path must be a bare name, or
//! `<dir>/<name>` (as given or canonical); `..`, `.`, subdirectories and paths elsewhere are
//! refused (counted, logged at a bounded rate), so a datagram cannot make the root agent write
//! to an arbitrary socket on the host.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context};

use super::transport::{Received, Refusals, Transport};

pub struct UnixTransport {
    sock: mio::net::UnixDatagram,
    dir: PathBuf,
    /// `dir` with symbolic links resolved, as a datapath that canonicalizes its path sends it.
    canonical_dir: PathBuf,
    path: PathBuf,
    refusals: Refusals,
}

/// The path to reply to for a datagram from `sender`, when it names a socket directly inside
/// the socket directory (`dir` as configured, or `canonical_dir`); `None` otherwise.
pub fn reply_path(dir: &Path, canonical_dir: &Path, sender: &Path) -> Option<PathBuf> {
    let name = if sender.is_relative() {
        sender
    } else if let Ok(rest) = sender.strip_prefix(dir) {
        rest
    } else {
        sender.strip_prefix(canonical_dir).ok()?
    };
    let mut parts = name.components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) => Some(dir.join(n)),
        _ => None,
    }
}

impl UnixTransport {
    /// Binds `<dir>/<name>`, mode 0600 (0660 and `group` when given: datapaths run by members of
    /// that group may then talk to the agent).
    pub fn bind(dir: &Path, name: &str, group: Option<u32>) -> anyhow::Result<Self> {
        if name.is_empty() || name.contains('/') {
            bail!("unix socket name {name:?} must be a plain file name");
        }
        crate::permissions::prepare_socket_dir(dir, group)?;
        let canonical_dir = std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_socket() => {
                // A socket file is either a live agent or the leftover of a dead one.
                let probe = std::os::unix::net::UnixDatagram::unbound()?;
                if probe.connect(&path).is_ok() {
                    bail!("another process is already listening at {} (is an agent running?)", path.display());
                }
                std::fs::remove_file(&path).with_context(|| format!("removing stale socket {}", path.display()))?;
            }
            Ok(_) => bail!("{} exists and is not a socket; refusing to replace it", path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
        }
        let sock = crate::permissions::with_private_umask(|| mio::net::UnixDatagram::bind(&path))
            .with_context(|| format!("binding {}", path.display()))?;
        if let Some(gid) = group {
            crate::permissions::share_with_group(&path, gid)?;
        }
        Ok(UnixTransport {
            sock,
            dir: dir.to_path_buf(),
            canonical_dir,
            path,
            refusals: Refusals::new("unix sender path is not a socket directly inside the socket directory"),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnixTransport {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Transport for UnixTransport {
    type Addr = PathBuf;

    fn describe(&self) -> String {
        format!("unix:{}", self.path.display())
    }

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut self.sock, token, mio::Interest::READABLE)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<Received<PathBuf>>> {
        loop {
            match self.sock.recv_from(buf) {
                Ok((len, addr)) => {
                    let from = match addr.as_pathname() {
                        None => None,
                        Some(p) => match reply_path(&self.dir, &self.canonical_dir, p) {
                            Some(to) => Some(to),
                            None => {
                                self.refusals.refuse(&p.display(), std::time::Instant::now());
                                continue;
                            }
                        },
                    };
                    return Ok(Some(Received { len, from }));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn send(&mut self, to: &PathBuf, msg: &[u8]) -> io::Result<()> {
        let n = self.sock.send_to(msg, to)?;
        if n != msg.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, format!("short send: {n} of {} bytes", msg.len())));
        }
        Ok(())
    }

    fn addr_name(&self, addr: &PathBuf) -> String {
        addr.display().to_string()
    }

    fn refused(&self) -> u64 {
        self.refusals.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replies_go_only_to_sockets_directly_inside_the_socket_directory() {
        let (dir, canon) = (Path::new("/tmp/ccp"), Path::new("/private/tmp/ccp"));
        let ok = |s: &str| reply_path(dir, canon, Path::new(s));
        assert_eq!(ok("ccp-ebpf"), Some(PathBuf::from("/tmp/ccp/ccp-ebpf")), "portus 0.7: relative to the directory");
        assert_eq!(ok("/tmp/ccp/dp"), Some(PathBuf::from("/tmp/ccp/dp")));
        assert_eq!(ok("/private/tmp/ccp/dp"), Some(PathBuf::from("/tmp/ccp/dp")), "the canonical directory");
        for bad in [
            "../run/x.sock",
            "a/../../etc/x",
            "sub/dp",
            "./dp",
            "..",
            "/tmp/ccp/../x",
            "/tmp/ccp/sub/dp",
            "/tmp/ccp",
            "/tmp/ccp/",
            "/run/systemd/notify",
            "/tmp/ccpx/dp",
            "",
        ] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn datagrams_from_outside_the_directory_are_refused_and_counted() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        let mut t = UnixTransport::bind(&dir, "agent", None).unwrap();
        assert_eq!(std::fs::symlink_metadata(&dir).unwrap().permissions().mode() & 0o7777, 0o700);
        let outside = std::os::unix::net::UnixDatagram::bind(base.path().join("evil")).unwrap();
        let inside = std::os::unix::net::UnixDatagram::bind(dir.join("dp")).unwrap();
        let mut buf = [0u8; 64];
        outside.send_to(b"x", t.path()).unwrap();
        inside.send_to(b"hi", t.path()).unwrap();
        let got = t.recv(&mut buf).unwrap().expect("the datagram from inside");
        assert_eq!(&buf[..got.len], b"hi");
        assert_eq!(got.from, Some(dir.join("dp")));
        assert!(t.recv(&mut buf).unwrap().is_none());
        assert_eq!(t.refused(), 1);
    }

    #[test]
    fn a_directory_writable_by_others_is_refused_at_bind() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ccp");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = format!("{:#}", UnixTransport::bind(&dir, "agent", None).err().unwrap());
        assert!(e.contains("world-writable") && e.contains(&dir.display().to_string()), "{e}");
        assert!(!dir.join("agent").exists(), "nothing bound there");
    }
}
