//! The receiver's CE echo: a tiny BPF congestion control (`src/bpf/ce_echo.bpf.c`) for the
//! receiving sockets of a run, which ACKs every change of CE state at once and sets ECE exactly
//! on the ACKs that cover CE packets (DCTCP's receiver). With it the sender's `delivered_ce`
//! counts CE packets one for one; without it, classic ECN repeats ECE for about an RTT per mark.
//!
//! Loaded per run under a run-unique name (struct_ops names are global), registered through a
//! BPF link held by [`CeEcho`]: dropping it unregisters the name, and so does the runner's death.

use libbpf_rs::{Link, MapCore, Object, ObjectBuilder};

use crate::error::{Error, Result};

/// The compiled object (build.rs).
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ce_echo.bpf.o"));
/// The struct_ops map in the object.
const STRUCT_OPS_MAP: &str = "ce_echo";
/// Offset of `name` in `struct tcp_congestion_ops` (after eleven function pointers, as in
/// `ccp-ebpf`); checked against the compiled-in name before it is overwritten.
const NAME_OFFSET: usize = 88;
const COMPILED_NAME: &[u8] = b"ccp_ce_echo\0";

/// What the echo saw over a run (from its counters map).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EchoCounts {
    /// Data packets that arrived with CE.
    pub ce_pkts: u64,
    /// ECN-capable data packets that arrived without CE.
    pub not_ce_pkts: u64,
    /// Changes of CE state (each forced an immediate ACK).
    pub state_changes: u64,
}

/// A registered CE-echo congestion control.
pub struct CeEcho {
    name: String,
    // Field order: the link unregisters before the object is freed.
    _link: Link,
    object: Object,
}

impl std::fmt::Debug for CeEcho {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CeEcho").field("name", &self.name).finish()
    }
}

impl CeEcho {
    /// Loads and registers the echo under `name` (≤ 15 characters, not registered yet).
    pub fn register(name: &str) -> Result<CeEcho> {
        crate::config::check_cc_name("", name).map_err(|(_, m)| Error::Unavailable(m))?;
        if crate::agent::cc_registered(name) {
            return Err(Error::Unavailable(format!("congestion control {name} is already registered")));
        }
        let bpf = |what: &str| {
            let what = what.to_string();
            move |e: libbpf_rs::Error| Error::Unavailable(format!("CE echo: {what}: {e}"))
        };
        let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(bpf("opening the BPF object"))?;
        for mut map in open.maps_mut() {
            if map.name().to_string_lossy() != STRUCT_OPS_MAP {
                continue;
            }
            let value = map.initial_value_mut().ok_or_else(|| Error::Unavailable("CE echo: no struct_ops value".into()))?;
            let field = value
                .get_mut(NAME_OFFSET..NAME_OFFSET + COMPILED_NAME.len().max(16))
                .filter(|f| f.starts_with(COMPILED_NAME))
                .ok_or_else(|| Error::Unavailable("CE echo: tcp_congestion_ops layout differs from this loader's".into()))?;
            field.fill(0);
            field[..name.len()].copy_from_slice(name.as_bytes());
        }
        let mut object = open.load().map_err(bpf("loading (does this kernel have BPF struct_ops?)"))?;
        let link = object
            .maps_mut()
            .find(|m| m.name().to_string_lossy() == STRUCT_OPS_MAP)
            .ok_or_else(|| Error::Unavailable("CE echo: the object has no struct_ops map".into()))?
            .attach_struct_ops()
            .map_err(bpf("registering the congestion control"))?;
        Ok(CeEcho { name: name.to_string(), _link: link, object })
    }

    /// The congestion control name receiving sockets select.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The counters so far.
    pub fn counts(&self) -> EchoCounts {
        let Some(map) = self.object.maps().find(|m| m.name().to_string_lossy() == "echo_counters") else {
            return EchoCounts::default();
        };
        let get = |i: u32| -> u64 {
            map.lookup(&i.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes))
                .unwrap_or(0)
        };
        EchoCounts { ce_pkts: get(0), not_ce_pkts: get(1), state_changes: get(2) }
    }
}
