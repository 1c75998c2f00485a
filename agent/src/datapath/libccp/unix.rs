//! libccp IPC over unix datagram sockets, with portus's conventions.
//!
//! The agent binds `<dir>/<name>` (portus: `/tmp/ccp/portus`); each datapath binds its own path
//! and the agent replies to whatever path a datagram came from, so one agent serves many
//! datapaths. Datapaths written for portus 0.7 bind a path relative to the socket directory;
//! such sender paths are resolved against `dir`.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::transport::{Received, Transport};

pub struct UnixTransport {
    sock: mio::net::UnixDatagram,
    dir: PathBuf,
    path: PathBuf,
}

impl UnixTransport {
    /// Binds `<dir>/<name>`, mode 0600 (0660 and `group` when given: datapaths run by members of
    /// that group may then talk to the agent).
    pub fn bind(dir: &Path, name: &str, group: Option<u32>) -> anyhow::Result<Self> {
        if name.is_empty() || name.contains('/') {
            bail!("unix socket name {name:?} must be a plain file name");
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating socket directory {}", dir.display()))?;
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
        Ok(UnixTransport { sock, dir: dir.to_path_buf(), path })
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
        match self.sock.recv_from(buf) {
            Ok((len, addr)) => {
                let from = addr.as_pathname().map(|p| if p.is_relative() { self.dir.join(p) } else { p.to_path_buf() });
                Ok(Some(Received { len, from }))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
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
}
