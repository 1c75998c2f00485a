//! The per-CPU event counters (`enum inigo_counter`), summed over CPUs.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::layout::{COUNTERS, FIRST_EGRESS, NUM_COUNTERS};

/// One counter: `enum inigo_counter`, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    InPackets = 0,
    InTcp,
    InData,
    InTimestamps,
    InNoTimestamps,
    InNonEcn,
    InNoSocket,
    InInit,
    InZeroDelta,
    InLate,
    InCeSet,
    InCeAlready,
    InCeCleared,
    InSsExits,
    InWindowUpdates,
    InBusy,
    OutPackets,
    OutTcp,
    OutAcks,
    OutCapped,
    OutNoState,
}

const _: () = assert!(Counter::OutPackets as usize == FIRST_EGRESS);
const _: () = assert!(Counter::OutNoState as usize + 1 == NUM_COUNTERS);

/// Every counter of an instance (or of a test run), summed over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub values: [u64; NUM_COUNTERS],
}

impl Default for Counters {
    fn default() -> Counters {
        Counters { values: [0; NUM_COUNTERS] }
    }
}

impl Counters {
    pub fn get(&self, c: Counter) -> u64 {
        self.values[c as usize]
    }

    /// `self - earlier`, counter by counter (saturating).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut out = Counters::default();
        for (i, v) in out.values.iter_mut().enumerate() {
            *v = self.values[i].saturating_sub(earlier.values[i]);
        }
        out
    }

    /// (name, value, meaning) of the ingress counters, then of the egress ones.
    pub fn ingress(&self) -> impl Iterator<Item = (&'static str, u64, &'static str)> + '_ {
        (0..FIRST_EGRESS).map(|i| (COUNTERS[i].0, self.values[i], COUNTERS[i].1))
    }

    pub fn egress(&self) -> impl Iterator<Item = (&'static str, u64, &'static str)> + '_ {
        (FIRST_EGRESS..NUM_COUNTERS).map(|i| (COUNTERS[i].0, self.values[i], COUNTERS[i].1))
    }
}

struct Direction<'a>(Vec<(&'static str, u64, &'a str)>);

impl Serialize for Direction<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v, _) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `{"ingress": {"packets": N, ...}, "egress": {...}}`, in the programs' order.
impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("ingress", &Direction(self.ingress().collect()))?;
        m.serialize_entry("egress", &Direction(self.egress().collect()))?;
        m.end()
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "ingress (arriving segments):")?;
        for (k, v, what) in self.ingress() {
            writeln!(f, "  {k:<16} {v:>12}  {what}")?;
        }
        writeln!(f, "egress (outgoing ACKs):")?;
        for (k, v, what) in self.egress() {
            writeln!(f, "  {k:<16} {v:>12}  {what}")?;
        }
        Ok(())
    }
}
