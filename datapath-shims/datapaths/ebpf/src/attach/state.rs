//! What attach changed, so that detach (and a clean shutdown) can undo exactly that.
//!
//! A small JSON file, locked with flock(2) while it is read and rewritten: `ccp-agent attach`
//! and the agent itself may update it concurrently. It lives on tmpfs (/run) by default, like
//! the pins it refers to, so a reboot forgets both together.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::Error;

/// A namespace attach worked in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetnsRecord {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// The default congestion control before attach made ours the default, if it did.
    pub previous_default: Option<String>,
}

/// A cgroup with the sockops program attached.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupRecord {
    pub path: PathBuf,
    /// Where its link is pinned.
    pub pin: PathBuf,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct State {
    pub netns: Vec<NetnsRecord>,
    pub cgroups: Vec<CgroupRecord>,
    /// Attach put our name on the allowed list (and detach must take it off).
    pub allowed_added: bool,
}

impl State {
    pub fn is_empty(&self) -> bool {
        self.netns.is_empty() && self.cgroups.is_empty() && !self.allowed_added
    }

    pub fn netns_mut(&mut self, dev: u64, ino: u64) -> Option<&mut NetnsRecord> {
        self.netns.iter_mut().find(|n| n.dev == dev && n.ino == ino)
    }
}

/// The state file, locked for as long as this value lives.
pub struct Locked {
    file: File,
    path: PathBuf,
    pub state: State,
}

/// Opens and locks the state file, creating it (and its directory) when absent.
pub fn lock(path: &Path) -> Result<Locked, Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let state = if text.trim().is_empty() {
        State::default()
    } else {
        serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: unreadable attach state: {e}", path.display())))?
    };
    Ok(Locked { file, path: path.to_path_buf(), state })
}

impl Locked {
    /// Writes the state back (removing the file once there is nothing left to undo).
    pub fn save(mut self) -> Result<(), Error> {
        if self.state.is_empty() {
            std::fs::remove_file(&self.path)?;
            return Ok(());
        }
        let text = serde_json::to_string_pretty(&self.state).map_err(|e| Error::Config(e.to_string()))?;
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_an_empty_state_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/attach.json");
        let mut l = lock(&path).unwrap();
        assert!(l.state.is_empty());
        l.state.netns.push(NetnsRecord { path: "/run/netns/x".into(), dev: 4, ino: 99, previous_default: Some("bbr".into()) });
        l.state.cgroups.push(CgroupRecord { path: "/sys/fs/cgroup/unified/t".into(), pin: "/sys/fs/bpf/x/sockops-1".into() });
        l.save().unwrap();

        let mut l = lock(&path).unwrap();
        assert_eq!(l.state.netns_mut(4, 99).unwrap().previous_default.as_deref(), Some("bbr"));
        assert_eq!(l.state.cgroups.len(), 1);
        l.state = State::default();
        l.save().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("attach.json");
        std::fs::write(&path, "{not json").unwrap();
        assert!(lock(&path).is_err());
    }
}
