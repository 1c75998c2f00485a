//! One loaded, registered instance of the congestion control, and the maps it shares.
//!
//! Registration is a `bpf_link` (`.struct_ops.link`, vendored libbpf): it lasts exactly as long
//! as this process holds the link, so a crash unregisters the name at once. Flows already on the
//! congestion control keep running on the orphaned instance, and because every map they use is
//! pinned under `pin_dir`, a restarted agent loads its new instance on the *same* maps: the
//! orphan's reports arrive on the new ring, its flows read the new agent's control entries, and
//! the new agent re-adopts them as their reports come in. A new epoch makes the previous agent's
//! control entries stale, so adopted flows run the fallback until the new agent commands them.

use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, OpenObject};

use crate::control::{Control, Knobs, RawCtrl, RawKnobs};
use crate::record::{decode, decode_create, decode_per_ack, pod_bytes, read_pod, Create, DecodeError, PerAckRecord, Record};
use crate::ringbuf::RingBuf;
use crate::slots::SlotTable;
use crate::{available_congestion_controls, mono_ns, Error, CCP_OBJECT};

/// Maps shared through pins, by their names in the object.
const PINNED: &[&str] = &["events", "ctrl", "ctrl_slot", "flow_info", "knobs", "shared", "counters", "flows", "prev_cc"];
/// The struct_ops map (the `tcp_congestion_ops` value) in the object.
const STRUCT_OPS_MAP: &str = "ccp";
/// Offset of `name` in `struct tcp_congestion_ops` (after eleven function pointers); checked
/// against the compiled-in name before it is overwritten.
const NAME_OFFSET: usize = 88;
const COMPILED_NAME: &[u8] = b"ccp\0";
/// Longest congestion control name the kernel accepts (TCP_CA_NAME_MAX - 1).
pub const MAX_NAME_LEN: usize = 15;

/// What an instance sends per flow besides its creation and close (`enum ccp_records`).
///
/// A property of the whole instance, not of a flow: a ring has one consumer, which either folds
/// nothing (a libccp shim runs libccp's own fold per ACK) or wants the kernel's fold (the agent),
/// and a flow must be in the right mode from its first ACK, before any control entry exists. It
/// is fixed at load time, so the verifier removes the other mode's code from the per-ACK path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Records {
    /// One report per interval (or per RTT) plus urgent ones: `Record::Report`.
    #[default]
    Folded,
    /// One record per ACK plus one per retransmission timeout: `PerAckRecord::Ack`.
    PerAck,
}

impl Records {
    fn raw(self) -> u32 {
        match self {
            Records::Folded => 0,
            Records::PerAck => 1,
        }
    }
}

/// How to load the congestion control.
#[derive(Debug, Clone)]
pub struct Config {
    /// The name flows select with TCP_CONGESTION.
    pub name: String,
    /// Directory on a bpf filesystem for the shared maps.
    pub pin_dir: PathBuf,
    /// Ring buffer size, bytes (a power of two, at least a page).
    pub ring_bytes: u32,
    /// Control slots and flow-info entries: the most flows the agent can steer at once
    /// (rounded up to a power of two).
    pub max_flows: u32,
    pub knobs: Knobs,
}

/// Per-CPU counters of the BPF programs, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    pub acks: u64,
    pub preinit_acks: u64,
    pub records: u64,
    pub ring_drops: u64,
    pub wakeups: u64,
    pub fallback_acks: u64,
    pub no_storage: u64,
}

/// Run-time statistics of one BPF program (`kernel.bpf_stats_enabled` must be on).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProgStats {
    pub name: String,
    pub id: u32,
    pub run_cnt: u64,
    pub run_time_ns: u64,
}

/// A loaded and registered congestion control.
pub struct Instance {
    config: Config,
    records: Records,
    epoch: u32,
    adopted: bool,
    // Field order is drop order: unregister first, then the maps and programs.
    link: Option<Link>,
    ring: RingBuf,
    ctrl: MapHandle,
    ctrl_slot: MapHandle,
    slots: SlotTable,
    flow_info: MapHandle,
    knobs: MapHandle,
    counters: MapHandle,
    prev_cc: MapHandle,
    object: Object,
}

/// Checks a congestion control name the way the kernel will.
pub fn validate_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::Config(format!(
            "congestion control name {name:?} must be 1-{MAX_NAME_LEN} printable ASCII characters"
        )));
    }
    Ok(())
}

fn libbpf(what: &str) -> impl FnOnce(libbpf_rs::Error) -> Error + '_ {
    move |e| Error::Bpf(format!("{what}: {e}"))
}

/// Control slots: `max_flows` rounded up to a power of two (the program masks fids).
fn ctrl_slots(config: &Config) -> u32 {
    config.max_flows.clamp(1, 1 << 24).next_power_of_two()
}

impl Instance {
    /// Loads the congestion control on the maps pinned under `pin_dir` (creating them when
    /// absent) and registers it, with folded reports.
    pub fn load(config: Config) -> Result<Instance, Error> {
        Self::load_with(config, Records::Folded)
    }

    /// As `load`, sending `records`.
    pub fn load_with(config: Config, records: Records) -> Result<Instance, Error> {
        validate_name(&config.name)?;
        if !config.ring_bytes.is_power_of_two() || config.ring_bytes < 4096 {
            return Err(Error::Config(format!("ring size {} is not a power of two of at least 4096", config.ring_bytes)));
        }
        if available_congestion_controls()?.iter().any(|n| n == &config.name) {
            return Err(Error::AlreadyRegistered(config.name.clone()));
        }
        crate::bpffs::ensure_dir(&config.pin_dir)?;

        let open = Self::open(&config, records)?;
        let stale = Self::incompatible_pins(&open, &config.pin_dir);
        let open = if stale.is_empty() {
            open
        } else {
            // Another version's maps: its flows keep them (and its fallback) until they close.
            tracing::warn!(pins = ?stale, dir = %config.pin_dir.display(), "pinned maps do not match this version; starting on fresh maps");
            for name in PINNED {
                let _ = fs::remove_file(config.pin_dir.join(name));
            }
            drop(open);
            Self::open(&config, records)?
        };
        let adopted = config.pin_dir.join("knobs").exists();
        let object = open.load().map_err(libbpf("loading the congestion control"))?;

        let handle = |name: &str| -> Result<MapHandle, Error> {
            let map =
                object.maps().find(|m| m.name() == name).ok_or_else(|| Error::Bpf(format!("the object has no map {name}")))?;
            MapHandle::try_from(&map).map_err(libbpf("duplicating a map handle"))
        };
        let ctrl = handle("ctrl")?;
        let ctrl_slot = handle("ctrl_slot")?;
        let slots = SlotTable::new(ctrl_slots(&config));
        let flow_info = handle("flow_info")?;
        let knobs = handle("knobs")?;
        let counters = handle("counters")?;
        let prev_cc = handle("prev_cc")?;
        let events = handle("events")?;
        let ring = RingBuf::new(events.as_fd(), events.max_entries()).map_err(Error::Io)?;

        // A new epoch makes the previous agent's control entries stale.
        let previous: Option<RawKnobs> =
            knobs.lookup(&0u32.to_ne_bytes(), MapFlags::ANY).ok().flatten().and_then(|v| read_pod(&v));
        let epoch = previous.map_or(0, |k| k.epoch).wrapping_add(1).max(1);
        let mut inst = Instance {
            config,
            records,
            epoch,
            adopted,
            link: None,
            ring,
            ctrl,
            ctrl_slot,
            slots,
            flow_info,
            knobs,
            counters,
            prev_cc,
            object,
        };
        inst.heartbeat()?;
        if adopted {
            // The previous agent's moved-slot records died with its slot table: nothing would
            // ever delete those of flows it placed away from home that are now placed at home
            // or gone, and the map fills until no flow can be moved (seen in the soak).
            let stale = inst.forget_moved_slots();
            if stale > 0 {
                tracing::info!(entries = stale, "cleared the previous agent's moved control slots");
            }
        }

        let link = inst
            .object
            .maps_mut()
            .find(|m| m.name() == STRUCT_OPS_MAP)
            .ok_or_else(|| Error::Bpf("the object has no struct_ops map".into()))?
            .attach_struct_ops()
            .map_err(|e| {
                if available_congestion_controls().is_ok_and(|l| l.iter().any(|n| n == &inst.config.name)) {
                    Error::AlreadyRegistered(inst.config.name.clone())
                } else {
                    Error::Bpf(format!("registering the congestion control: {e}"))
                }
            })?;
        inst.link = Some(link);
        Ok(inst)
    }

    fn open(config: &Config, records: Records) -> Result<OpenObject, Error> {
        let mut open = ObjectBuilder::default().open_memory(CCP_OBJECT).map_err(libbpf("opening the BPF object"))?;
        for mut map in open.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            match name.as_str() {
                STRUCT_OPS_MAP => {
                    let value = map.initial_value_mut().ok_or_else(|| Error::Bpf("struct_ops map has no value".into()))?;
                    let field = value
                        .get_mut(NAME_OFFSET..NAME_OFFSET + MAX_NAME_LEN + 1)
                        .filter(|f| f.starts_with(COMPILED_NAME))
                        .ok_or_else(|| Error::Bpf("tcp_congestion_ops layout differs from what this loader expects".into()))?;
                    field.fill(0);
                    field[..config.name.len()].copy_from_slice(config.name.as_bytes());
                }
                "events" => map.set_max_entries(config.ring_bytes).map_err(libbpf("sizing the ring"))?,
                "ctrl" | "ctrl_slot" | "flow_info" => {
                    map.set_max_entries(ctrl_slots(config)).map_err(libbpf("sizing the maps"))?
                }
                n if n.ends_with(".rodata") => {
                    let value = map.initial_value_mut().ok_or_else(|| Error::Bpf("the object has no settings".into()))?;
                    let len = value.len();
                    let field: &mut [u8; 4] =
                        value.try_into().map_err(|_| Error::Bpf(format!("the object's settings are {len} bytes, expected 4")))?;
                    *field = records.raw().to_ne_bytes();
                }
                _ => {}
            }
            if PINNED.contains(&name.as_str()) {
                map.set_pin_path(config.pin_dir.join(&name)).map_err(libbpf("setting a pin path"))?;
            }
        }
        Ok(open)
    }

    /// Pinned maps that libbpf would refuse to reuse for `open`'s definitions.
    fn incompatible_pins(open: &OpenObject, dir: &Path) -> Vec<String> {
        let mut stale = Vec::new();
        for map in open.maps() {
            let name = map.name().to_string_lossy().into_owned();
            let path = dir.join(&name);
            if !PINNED.contains(&name.as_str()) || !path.exists() {
                continue;
            }
            let ok = MapHandle::from_pinned_path(&path).is_ok_and(|h| {
                h.map_type() == map.map_type()
                    && h.key_size() == map.key_size()
                    && h.value_size() == map.value_size()
                    && h.max_entries() == map.max_entries()
                    && h.info().is_ok_and(|i| i.info.map_flags == map.map_flags())
            });
            if !ok {
                stale.push(name);
            }
        }
        stale
    }

    /// The congestion control's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// This agent instance's epoch (stamped into every control entry).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// What the instance sends per flow.
    pub fn records(&self) -> Records {
        self.records
    }

    /// True when the maps came from a previous instance (an agent restart).
    pub fn adopted_maps(&self) -> bool {
        self.adopted
    }

    /// The pollable descriptor: readable when a record woke the consumer.
    pub fn ring_fd(&self) -> BorrowedFd<'_> {
        self.ring.as_fd()
    }

    /// Tells the programs the agent is alive (and re-states the knobs).
    pub fn heartbeat(&self) -> Result<(), Error> {
        let raw = self.config.knobs.encode(self.epoch, mono_ns(), ctrl_slots(&self.config));
        self.knobs.update(&0u32.to_ne_bytes(), pod_bytes(&raw), MapFlags::ANY).map_err(libbpf("writing the knobs"))
    }

    /// Decodes every record in the ring.
    pub fn drain(&mut self, mut each: impl FnMut(Result<Record, DecodeError>)) -> Result<usize, Error> {
        self.ring.drain(|bytes| each(decode(bytes))).map_err(Error::Io)
    }

    /// Decodes at most `max` records, leaving the rest in the ring for the next call.
    pub fn drain_at_most(&mut self, max: usize, mut each: impl FnMut(Result<Record, DecodeError>)) -> Result<usize, Error> {
        self.ring.drain_at_most(max, |bytes| each(decode(bytes))).map_err(Error::Io)
    }

    /// Decodes every record in the ring of an instance loaded with `Records::PerAck`.
    pub fn drain_per_ack(&mut self, mut each: impl FnMut(Result<PerAckRecord, DecodeError>)) -> Result<usize, Error> {
        self.ring.drain(|bytes| each(decode_per_ack(bytes))).map_err(Error::Io)
    }

    /// Writes a flow's control entry; the program applies it at the flow's next ACK. The entry
    /// goes to the flow's slot (`crate::slots`): its home, or a free one when another live flow
    /// holds that; `Error::SlotsFull` when every slot is taken (the flow stays on the fallback).
    pub fn set_control(&mut self, fid: u32, control: &Control, seq: u32) -> Result<(), Error> {
        let p = self.slots.place(fid).ok_or(Error::SlotsFull(self.slots.capacity()))?;
        if p.new && p.moved {
            // The program must be able to find the entry before it is there to find.
            if let Err(e) = self.ctrl_slot.update(&fid.to_ne_bytes(), &p.slot.to_ne_bytes(), MapFlags::ANY) {
                self.slots.free(fid);
                return Err(libbpf("recording a moved control slot")(e));
            }
        }
        let raw = control.encode(fid, self.epoch, seq);
        self.ctrl.update(&p.slot.to_ne_bytes(), pod_bytes(&raw), MapFlags::ANY).map_err(libbpf("writing a control entry"))
    }

    /// Deletes every `ctrl_slot` record (at load on maps a previous agent left): returns how many.
    fn forget_moved_slots(&self) -> usize {
        let fids: Vec<Vec<u8>> = self.ctrl_slot.keys().collect();
        fids.iter().filter(|fid| self.ctrl_slot.delete(fid).is_ok()).count()
    }

    /// Slots in use by this instance's entries, moves made so far, and the capacity.
    pub fn slot_usage(&self) -> (usize, u64, usize) {
        (self.slots.used(), self.slots.moves, self.slots.capacity())
    }

    /// Frees a flow's control slot (the flow falls back, or is gone), unless another flow's
    /// entry holds it now.
    pub fn clear_control(&mut self, fid: u32) {
        let (slot, moved) = match self.slots.free(fid) {
            Some(p) => (p.slot, p.moved),
            None => (self.slots.home(fid), false),
        };
        if moved {
            let _ = self.ctrl_slot.delete(&fid.to_ne_bytes());
        }
        let slot = slot.to_ne_bytes();
        let ours = self
            .ctrl
            .lookup(&slot, MapFlags::ANY)
            .ok()
            .flatten()
            .and_then(|v| read_pod::<RawCtrl>(&v))
            .is_some_and(|c| c.fid == fid);
        if ours {
            let _ = self.ctrl.update(&slot, pod_bytes(&RawCtrl::default()), MapFlags::ANY);
        }
    }

    /// The create record of a live flow, kept for an agent that did not see it start.
    pub fn flow_info(&self, fid: u32) -> Option<Create> {
        self.flow_info.lookup(&fid.to_ne_bytes(), MapFlags::ANY).ok().flatten().and_then(|v| decode_create(&v))
    }

    /// How many flows run on this congestion control now (the kernel keeps a create record per
    /// live flow and deletes it on release).
    pub fn live_flows(&self) -> usize {
        self.flow_info.keys().count()
    }

    pub fn counters(&self) -> Counters {
        sum_counters(&self.counters)
    }

    /// Run-time statistics of the congestion control's programs.
    pub fn prog_stats(&self) -> Vec<ProgStats> {
        self.object.progs().filter_map(|p| crate::progstats::of(p.name().to_string_lossy().as_ref(), p.as_fd())).collect()
    }

    /// The socket storage holding each attached flow's previous congestion control, for an
    /// `attach::Attacher` in this process.
    pub fn prev_cc_map(&self) -> Result<MapHandle, Error> {
        MapHandle::try_from(&self.prev_cc).map_err(libbpf("duplicating the previous-CC map"))
    }

    /// Unregisters the congestion control. Flows still on it keep running on the orphaned
    /// instance (and its fallback) until they close.
    pub fn unregister(&mut self) {
        self.link = None;
    }

    /// Removes the pins: for a clean shutdown after every flow was moved off. A crashed agent
    /// leaves them for its successor.
    pub fn unpin(&self) {
        for name in PINNED {
            let _ = fs::remove_file(self.config.pin_dir.join(name));
        }
    }

    /// The pin directory, for other pinned objects (sockops links).
    pub fn pin_dir(&self) -> &Path {
        &self.config.pin_dir
    }
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").field("name", &self.config.name).field("epoch", &self.epoch).finish_non_exhaustive()
    }
}

/// The counters of the instance whose maps are pinned in `dir` (one running in another process).
pub fn pinned_counters(dir: &Path) -> Result<Counters, Error> {
    Ok(sum_counters(&pinned_map(dir, "counters")?))
}

fn sum_counters(map: &MapHandle) -> Counters {
    let mut sums = [0u64; 7];
    for (i, s) in sums.iter_mut().enumerate() {
        if let Ok(Some(per_cpu)) = map.lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY) {
            *s = per_cpu.iter().filter_map(|v| v.get(..8)?.try_into().ok()).map(u64::from_ne_bytes).sum();
        }
    }
    Counters {
        acks: sums[0],
        preinit_acks: sums[1],
        records: sums[2],
        ring_drops: sums[3],
        wakeups: sums[4],
        fallback_acks: sums[5],
        no_storage: sums[6],
    }
}

/// Reads one map of a pinned instance without loading anything (for `detach` run while no agent
/// runs).
pub(crate) fn pinned_map(dir: &Path, name: &str) -> io::Result<MapHandle> {
    MapHandle::from_pinned_path(dir.join(name)).map_err(|e| io::Error::other(e.to_string()))
}
