//! Which control-map slot holds each flow's entry.
//!
//! The program reads a flow's control entry from an array slot on every ACK (an array lookup is
//! inlined; a hash lookup would cost every ACK tens of ns). A flow's home slot is
//! `fid & (slots - 1)`, and fids are a counter: after `slots` flows have started, a new flow's
//! home is an older live flow's. Writing there would take the older flow's entry away (it fell
//! silently to the fallback before this table existed). So user space places entries: at home
//! when home is free, otherwise in a free slot, recording the move in the `ctrl_slot` hash map
//! (fid → slot) that the program consults only while its cached slot does not hold its entry.
//! Every entry also carries its fid, which the program checks, so a stale move or a slot reused
//! since is never applied to the wrong flow.
//!
//! This table is user space's view of the slots this agent instance wrote; a new instance starts
//! empty (a new epoch makes every older entry stale, so the slots are free to overwrite).

use std::collections::HashMap;

/// Where an entry goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub slot: u32,
    /// Not the home slot: the program must learn the slot from `ctrl_slot`.
    pub moved: bool,
    /// Placed by this call (the flow had no slot).
    pub new: bool,
}

#[derive(Debug)]
pub struct SlotTable {
    mask: u32,
    /// Slot → fid holding it (0: free).
    owner: Vec<u32>,
    /// Fid → slot, for flows that hold one.
    of: HashMap<u32, u32>,
    /// Where the search for a free slot resumes.
    cursor: u32,
    /// Flows placed away from home because another live flow held it.
    pub moves: u64,
}

impl SlotTable {
    /// `slots` must be a power of two.
    pub fn new(slots: u32) -> SlotTable {
        debug_assert!(slots.is_power_of_two());
        SlotTable { mask: slots - 1, owner: vec![0; slots as usize], of: HashMap::new(), cursor: 0, moves: 0 }
    }

    pub fn home(&self, fid: u32) -> u32 {
        fid & self.mask
    }

    /// The slot of `fid`, placing it if it has none; `None` when every slot is taken.
    pub fn place(&mut self, fid: u32) -> Option<Placement> {
        if let Some(&slot) = self.of.get(&fid) {
            return Some(Placement { slot, moved: slot != self.home(fid), new: false });
        }
        let home = self.home(fid);
        let slot = if self.owner[home as usize] == 0 {
            home
        } else {
            let n = self.owner.len() as u32;
            let free = (0..n).map(|i| (self.cursor + i) & self.mask).find(|s| self.owner[*s as usize] == 0)?;
            self.cursor = (free + 1) & self.mask;
            self.moves += 1;
            free
        };
        self.owner[slot as usize] = fid;
        self.of.insert(fid, slot);
        Some(Placement { slot, moved: slot != home, new: true })
    }

    /// The slot `fid` holds, if any.
    pub fn slot_of(&self, fid: u32) -> Option<u32> {
        self.of.get(&fid).copied()
    }

    /// Frees the slot of `fid`; returns it (with whether it was a moved one).
    pub fn free(&mut self, fid: u32) -> Option<Placement> {
        let slot = self.of.remove(&fid)?;
        self.owner[slot as usize] = 0;
        Some(Placement { slot, moved: slot != self.home(fid), new: false })
    }

    pub fn used(&self) -> usize {
        self.of.len()
    }

    pub fn capacity(&self) -> usize {
        self.owner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_go_home_when_it_is_free_and_elsewhere_when_a_live_flow_holds_it() {
        let mut t = SlotTable::new(4);
        assert_eq!(t.place(1), Some(Placement { slot: 1, moved: false, new: true }));
        assert_eq!(t.place(1), Some(Placement { slot: 1, moved: false, new: false }));
        // fid 5's home is 1, held by fid 1: it goes to the first free slot.
        assert_eq!(t.place(5), Some(Placement { slot: 0, moved: true, new: true }));
        assert_eq!(t.place(2), Some(Placement { slot: 2, moved: false, new: true }));
        // fid 4's home (0) is held by fid 5 now.
        assert_eq!(t.place(4), Some(Placement { slot: 3, moved: true, new: true }));
        // Full.
        assert_eq!(t.place(9), None);
        assert_eq!(t.free(1), Some(Placement { slot: 1, moved: false, new: false }));
        assert_eq!(t.place(9), Some(Placement { slot: 1, moved: false, new: true }));
        assert_eq!(t.moves, 2);
    }

    #[test]
    fn no_two_live_flows_ever_share_a_slot() {
        // Fids as the kernel hands them out (a counter), flows closing in a scrambled order.
        let mut t = SlotTable::new(64);
        let mut live: Vec<u32> = Vec::new();
        let mut next = 1u32;
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if live.len() < 64 && !(x >> 33).is_multiple_of(3) {
                let p = t.place(next).expect("a free slot while fewer than 64 flows live");
                assert!(p.new);
                live.push(next);
                next += 1;
            } else if !live.is_empty() {
                let i = (x >> 40) as usize % live.len();
                assert!(t.free(live.swap_remove(i)).is_some());
            }
            let mut slots: Vec<u32> = live.iter().map(|f| t.slot_of(*f).unwrap()).collect();
            slots.sort_unstable();
            slots.dedup();
            assert_eq!(slots.len(), live.len(), "two live flows share a slot");
        }
        assert!(t.moves > 0, "the run must exercise moves");
    }
}
