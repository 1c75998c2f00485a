//! Loading the attach object and running its programs: the iter/tcp switcher inside a network
//! namespace, and the sockops program on a cgroup.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use libbpf_rs::{Iter, IterOpts, MapHandle, Object, ObjectBuilder};

use super::filter::{Filter, RawFilter};
use crate::netns::Netns;
use crate::record::{pod_bytes, read_pod, Endpoint, Pod};
use crate::{Error, ATTACH_OBJECT};

/// What the switcher does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Record each selected socket's congestion control and switch it to ours.
    Attach = 1,
    /// Switch each selected socket on ours back to its recorded congestion control.
    Restore = 2,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawAttachCfg {
    pub filter: RawFilter,
    pub cc_name: [u8; 16],
    pub restore_default: [u8; 16],
    pub action: u32,
}
const _: () = assert!(size_of::<RawAttachCfg>() == 160);
// SAFETY: repr(C) of Pod fields and byte arrays, no implicit padding (124 + 32 + 4).
unsafe impl Pod for RawAttachCfg {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawFlowId {
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub family: u16,
    pub sport: u16,
    pub dport: u16,
    pub pad: u16,
}
const _: () = assert!(size_of::<RawFlowId>() == 40);
// SAFETY: repr(C) integers and byte arrays.
unsafe impl Pod for RawFlowId {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawSwitchResult {
    cookie: u64,
    id: RawFlowId,
    err: i32,
    state: u8,
    pad: [u8; 3],
    from: [u8; 16],
    to: [u8; 16],
}
const _: () = assert!(size_of::<RawSwitchResult>() == 88);
// SAFETY: repr(C) of Pod fields, integers and byte arrays.
unsafe impl Pod for RawSwitchResult {}

/// One socket the switcher acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switched {
    /// The namespace it lives in.
    pub netns: String,
    pub cookie: u64,
    pub local: Option<Endpoint>,
    pub remote: Option<Endpoint>,
    pub from: String,
    pub to: String,
    /// `bpf_setsockopt`'s error, when the switch failed.
    pub errno: Option<i32>,
}

fn name16(s: &str) -> [u8; 16] {
    let mut b = [0; 16];
    let n = s.len().min(15);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
    b
}

fn str16(b: &[u8; 16]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(16);
    String::from_utf8_lossy(&b[..end]).into_owned()
}

pub(crate) fn endpoint(family: u16, addr: &[u8; 16], port: u16) -> Option<Endpoint> {
    let addr = match i32::from(family) {
        libc::AF_INET => std::net::IpAddr::from([addr[0], addr[1], addr[2], addr[3]]),
        libc::AF_INET6 => std::net::IpAddr::from(*addr),
        _ => return None,
    };
    Some(Endpoint { addr, port })
}

/// One loaded instance of the attach object, configured for one operation.
pub(crate) struct AttachObject {
    object: Object,
}

fn bpf(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> Error {
    move |e| Error::Bpf(format!("{what}: {e}"))
}

impl AttachObject {
    /// Loads the programs in `progs`, configured with `filter`, sharing `prev_cc` (the
    /// congestion control's socket storage) when given.
    pub(crate) fn load(
        progs: &[&str],
        cc_name: &str,
        restore_default: &str,
        filter: &Filter,
        action: Action,
        prev_cc: Option<&MapHandle>,
    ) -> Result<AttachObject, Error> {
        let cfg = RawAttachCfg {
            filter: filter.encode().map_err(Error::Config)?,
            cc_name: name16(cc_name),
            restore_default: name16(restore_default),
            action: action as u32,
        };
        let mut open = ObjectBuilder::default().open_memory(ATTACH_OBJECT).map_err(bpf("opening the attach object"))?;
        for mut map in open.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            if name == "prev_cc" {
                if let Some(h) = prev_cc {
                    map.reuse_fd(h.as_fd()).map_err(bpf("sharing the previous-CC storage"))?;
                }
            } else if name.ends_with(".rodata") {
                let value = map.initial_value_mut().ok_or_else(|| Error::Bpf("the attach object has no settings".into()))?;
                if value.len() != size_of::<RawAttachCfg>() {
                    return Err(Error::Bpf(format!(
                        "attach settings are {} bytes, expected {}",
                        value.len(),
                        size_of::<RawAttachCfg>()
                    )));
                }
                value.copy_from_slice(pod_bytes(&cfg));
            }
        }
        for mut prog in open.progs_mut() {
            let wanted = progs.iter().any(|p| prog.name() == *p);
            prog.set_autoload(wanted);
        }
        let object = open.load().map_err(bpf("loading the attach programs"))?;
        Ok(AttachObject { object })
    }

    fn prog(&self, name: &str) -> Result<libbpf_rs::ProgramMut<'_>, Error> {
        self.object.progs_mut().find(|p| p.name() == name).ok_or_else(|| Error::Bpf(format!("no program {name}")))
    }

    /// Runs the switcher over the TCP sockets of `ns`.
    pub(crate) fn switch_in(&self, ns: &Netns) -> Result<Vec<Switched>, Error> {
        let link = self.prog("switch_cc")?.attach_iter_with_opts(IterOpts::None).map_err(bpf("attaching the iterator"))?;
        let bytes = ns
            .run(|| -> Result<Vec<u8>, Error> {
                // The iterator sees the sockets of the namespace it is created in.
                let mut it = Iter::new(&link).map_err(bpf("creating the iterator"))?;
                let mut buf = Vec::new();
                it.read_to_end(&mut buf)?;
                Ok(buf)
            })
            .map_err(Error::Io)??;
        Ok(bytes
            .chunks_exact(size_of::<RawSwitchResult>())
            .filter_map(read_pod::<RawSwitchResult>)
            .map(|r| Switched {
                netns: ns.path.display().to_string(),
                cookie: r.cookie,
                local: endpoint(r.id.family, &r.id.saddr, r.id.sport),
                remote: endpoint(r.id.family, &r.id.daddr, r.id.dport),
                from: str16(&r.from),
                to: str16(&r.to),
                errno: (r.err != 0).then_some(-r.err),
            })
            .collect())
    }

    /// Attaches the sockops program to `cgroup` and pins the link at `pin`, replacing an
    /// earlier attachment pinned there.
    pub(crate) fn attach_cgroup(&self, cgroup: &Path, pin: &Path) -> Result<(), Error> {
        // A user-named path: O_DIRECTORY refuses a FIFO (or anything else) without blocking.
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(cgroup)?;
        let mut link = self.prog("set_cc")?.attach_cgroup(dir.as_raw_fd()).map_err(bpf("attaching sockops to the cgroup"))?;
        if pin.exists() {
            std::fs::remove_file(pin)?;
        }
        link.pin(pin).map_err(bpf("pinning the sockops link"))?;
        Ok(())
    }

    /// Runs the filter on one flow id (the unit tests' window on the BPF filter).
    #[cfg(test)]
    pub(crate) fn probe_filter(&self, id: &RawFlowId) -> Result<bool, Error> {
        use libbpf_rs::ProgramInput;
        let mut ctx = pod_bytes(id).to_vec();
        let input = ProgramInput { context_in: Some(&mut ctx), ..Default::default() };
        let out = self.prog("filter_probe")?.test_run(input).map_err(bpf("running the filter probe"))?;
        Ok(out.return_value != 0)
    }
}
