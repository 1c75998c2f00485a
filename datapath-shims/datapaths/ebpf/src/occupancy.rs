//! What the maps pinned under a pin directory hold, read from another process: a soak watching
//! an agent counts live flows, control slots in use and entries moved away from their home slot,
//! and asks which live flows the program would find an entry in force for. Nothing is loaded
//! and nothing is written.
//!
//! The flows' socket storage (`flows`) cannot be listed from user space; its entries die with
//! their sockets. `flow_info` is written at a flow's init and deleted at its release, so it
//! counts the same flows and is the per-flow map that could outlive them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::control::{RawCtrl, RawKnobs};
use crate::instance::pinned_map;
use crate::record::{decode_create, read_pod, Endpoint};
use crate::{mono_ns, Error};

/// The pinned maps' contents at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// The epoch in the knobs: that of the agent running now, or of the last one.
    pub epoch: u32,
    /// Since the agent last wrote the knobs (its heartbeat), ns.
    pub heartbeat_age_ns: u64,
    /// Flows on the congestion control now: `flow_info`'s fids, each with the local end of the
    /// socket it was created for (which ties an entry to a connection the watcher knows).
    pub flows: BTreeMap<u32, Option<Endpoint>>,
    /// Control slots holding an entry, of any epoch.
    pub ctrl_used: usize,
    pub ctrl_capacity: usize,
    /// Entries placed away from their home slot (`ctrl_slot`).
    pub ctrl_moved: usize,
    /// Of `flows`, those whose entry the program finds and that carries the current epoch: the
    /// agent's command is in force (while its heartbeat is fresh).
    pub commanded: Vec<u32>,
}

/// Reads the maps of the instance pinned in `dir`.
pub fn pinned_occupancy(dir: &Path) -> Result<Occupancy, Error> {
    let knobs_map = pinned_map(dir, "knobs")?;
    let knobs = knobs_map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .ok()
        .flatten()
        .and_then(|v| read_pod::<RawKnobs>(&v))
        .unwrap_or_default();
    let info = pinned_map(dir, "flow_info")?;
    let flows: BTreeMap<u32, Option<Endpoint>> = keys(&info)
        .into_iter()
        .map(|fid| {
            let create = info.lookup(&fid.to_ne_bytes(), MapFlags::ANY).ok().flatten().and_then(|v| decode_create(&v));
            (fid, create.and_then(|c| c.local))
        })
        .collect();
    let ctrl_map = pinned_map(dir, "ctrl")?;
    let ctrl: Vec<RawCtrl> = (0..ctrl_map.max_entries())
        .map(|slot| {
            ctrl_map.lookup(&slot.to_ne_bytes(), MapFlags::ANY).ok().flatten().and_then(|v| read_pod(&v)).unwrap_or_default()
        })
        .collect();
    let moved_map = pinned_map(dir, "ctrl_slot")?;
    let moved: HashMap<u32, u32> = keys(&moved_map)
        .into_iter()
        .filter_map(|fid| {
            let v = moved_map.lookup(&fid.to_ne_bytes(), MapFlags::ANY).ok().flatten()?;
            Some((fid, u32::from_ne_bytes(v.get(..4)?.try_into().ok()?)))
        })
        .collect();
    let commanded = flows
        .keys()
        .copied()
        .filter(|&fid| in_force(fid, knobs.epoch, knobs.ctrl_mask, moved.get(&fid).copied(), &ctrl))
        .collect();
    Ok(Occupancy {
        epoch: knobs.epoch,
        heartbeat_age_ns: mono_ns().saturating_sub(knobs.heartbeat_ns),
        flows,
        ctrl_used: ctrl.iter().filter(|c| c.fid != 0).count(),
        ctrl_capacity: ctrl.len(),
        ctrl_moved: moved.len(),
        commanded,
    })
}

/// The u32 keys of a hash map.
fn keys(map: &MapHandle) -> Vec<u32> {
    map.keys().filter_map(|k| Some(u32::from_ne_bytes(k.get(..4)?.try_into().ok()?))).collect()
}

/// Whether the program finds flow `fid`'s entry with `epoch` (`find_ctrl` in ccp.bpf.c, less its
/// cached slot, which always holds one of these two): where `ctrl_slot` moved it, else at home,
/// passing over an earlier agent's entries.
fn in_force(fid: u32, epoch: u32, mask: u32, moved: Option<u32>, ctrl: &[RawCtrl]) -> bool {
    let at = |slot: u32| ctrl.get((slot & mask) as usize).filter(|c| c.fid == fid && c.epoch == epoch);
    epoch != 0 && (moved.and_then(at).is_some() || at(fid).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fid: u32, epoch: u32) -> RawCtrl {
        RawCtrl { fid, epoch, ..RawCtrl::default() }
    }

    #[test]
    fn an_entry_is_in_force_at_home_or_where_it_was_moved_with_the_current_epoch() {
        let mut ctrl = vec![RawCtrl::default(); 8];
        ctrl[5] = entry(13, 2); // 13's home (13 & 7)
        ctrl[1] = entry(21, 2); // moved: 21's home (5) is taken
        ctrl[6] = entry(14, 1); // an earlier agent's
        assert!(in_force(13, 2, 7, None, &ctrl));
        assert!(in_force(21, 2, 7, Some(1), &ctrl));
        assert!(!in_force(21, 2, 7, None, &ctrl), "not at home, and nothing says where");
        assert!(!in_force(14, 2, 7, None, &ctrl), "stale epoch");
        assert!(!in_force(22, 2, 7, None, &ctrl), "no entry");
        assert!(!in_force(13, 0, 7, None, &[entry(13, 0); 8]), "epoch 0 is no agent's");
        // After a restart: the earlier agent moved 21 to slot 1, the new one placed it at home.
        ctrl[5] = entry(21, 3);
        assert!(in_force(21, 3, 7, Some(1), &ctrl), "the earlier agent's entry where 21 was moved is passed over");
    }
}
