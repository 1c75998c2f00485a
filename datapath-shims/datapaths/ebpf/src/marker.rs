//! ECN CE marking on a device's egress, for a kernel without marking qdiscs.
//!
//! A tc (clsact egress) program sets CE on one packet in `every` that is ECN-capable; it has no
//! queue to look at, so the marked fraction is fixed. Enough to exercise ECN feedback end to end.
//! The filter lives in a network namespace: attach and detach run inside it (tc is netlink).

use std::os::fd::{AsFd, BorrowedFd};

use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder, TcHook, TcHookBuilder, TC_EGRESS};

use crate::netns::Netns;
use crate::{Error, MARKER_OBJECT};

/// A CE marker attached to one device; detached on drop.
pub struct CeMarker {
    netns: Netns,
    ifindex: i32,
    object: Object,
}

fn bpf(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> Error {
    move |e| Error::Bpf(format!("{what}: {e}"))
}

fn ifindex(name: &str) -> Result<i32, Error> {
    let c = std::ffi::CString::new(name).map_err(|_| Error::Config(format!("bad device name {name:?}")))?;
    // SAFETY: a valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(Error::Io(std::io::Error::last_os_error()));
    }
    i32::try_from(idx).map_err(|_| Error::Config(format!("ifindex of {name} out of range")))
}

impl CeMarker {
    /// Marks one ECN-capable packet in `every` leaving `device` in `netns`.
    pub fn attach(netns: &Netns, device: &str, every: u32) -> Result<CeMarker, Error> {
        let mut open = ObjectBuilder::default().open_memory(MARKER_OBJECT).map_err(bpf("opening the marker"))?;
        for mut map in open.maps_mut() {
            if map.name().to_string_lossy().ends_with(".rodata") {
                let v = map.initial_value_mut().ok_or_else(|| Error::Bpf("marker has no settings".into()))?;
                let field = v.get_mut(..4).ok_or_else(|| Error::Bpf("marker settings too short".into()))?;
                field.copy_from_slice(&every.max(1).to_ne_bytes());
            }
        }
        let object = open.load().map_err(bpf("loading the marker"))?;
        let prog = object.progs().find(|p| p.name() == "mark_ce").ok_or_else(|| Error::Bpf("no mark_ce program".into()))?;
        let fd = prog.as_fd();
        let ifindex = netns
            .run(|| -> Result<i32, Error> {
                let ifindex = ifindex(device)?;
                let mut hook = hook(fd, ifindex, true);
                hook.create().map_err(bpf("creating the clsact qdisc"))?;
                hook.attach().map_err(bpf("attaching the marker"))?;
                Ok(ifindex)
            })
            .map_err(Error::Io)??;
        Ok(CeMarker { netns: netns.clone(), ifindex, object })
    }

    /// Packets seen and packets marked so far.
    pub fn counts(&self) -> (u64, u64) {
        let Some(bss) = self.object.maps().find(|m| m.name().to_string_lossy().ends_with(".bss")) else {
            return (0, 0);
        };
        let v = bss.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).ok().flatten().unwrap_or_default();
        let word = |i: usize| v.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes);
        (word(0), word(1))
    }
}

fn hook(fd: BorrowedFd<'_>, ifindex: i32, replace: bool) -> TcHook {
    let mut builder = TcHookBuilder::new(fd);
    builder.ifindex(ifindex).replace(replace).handle(1).priority(1);
    builder.hook(TC_EGRESS)
}

impl Drop for CeMarker {
    fn drop(&mut self) {
        let Some(prog) = self.object.progs().find(|p| p.name() == "mark_ce") else { return };
        let (fd, ifindex) = (prog.as_fd(), self.ifindex);
        // The device (or its namespace) may already be gone, taking the filter with it.
        let _ = self.netns.run(move || {
            let _ = hook(fd, ifindex, false).detach();
        });
    }
}
