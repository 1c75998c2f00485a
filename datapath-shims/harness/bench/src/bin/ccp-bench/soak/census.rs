//! Lost and frozen flows: what a datapath runs against what the agent lists and hears.
//!
//! A census takes three snapshots of a datapath's flows around the agent's flow rows: A, then
//! `settle` later B, then the rows, then C. A flow in all three (the same incarnation: libccp
//! hands a freed sid out again) ran the whole time, for at least `settle`, and was running while
//! the rows were read; flows that start or close meanwhile are not judged. Of those:
//!
//! - **lost**: the agent does not list it.
//! - **frozen**: the agent lists it, but its last report is older than `settle` (or it never
//!   reported) although the flow sends all the time; or, on the kernel datapath, the program
//!   finds no control entry of the running agent for it, so the agent's commands do not reach it
//!   (it runs the fallback while the agent lists it).
//!
//! The other way round, a **ghost** is a flow the agent lists that the datapath ran in none of
//! the three snapshots (closed, and the agent never heard of it).

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

/// A datapath's flows at one moment: id (sid or fid) → incarnation (when the flow started, for
/// ids a datapath reuses; 0 where ids are never reused).
pub type Snapshot = BTreeMap<u32, u64>;

/// One flow as the agent lists it.
#[derive(Debug, Clone, Copy)]
pub struct Listed {
    pub id: u32,
    /// None: no report yet.
    pub report_age_ms: Option<u64>,
}

/// What one census found on one datapath.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Flows judged.
    pub checked: usize,
    /// (id, incarnation).
    pub lost: Vec<(u32, u64)>,
    pub frozen: Vec<(u32, u64)>,
    /// Of `frozen`, those frozen because no entry of the running agent is in force.
    pub uncommanded: usize,
    /// Flows the agent lists that ran in none of the snapshots.
    pub ghosts: usize,
}

/// Judges the flows in `a`, `b` and `c` against the agent's `rows`; `commanded`: the kernel
/// flows with an entry of the running agent in force (None where the datapath cannot tell).
pub fn judge(
    a: &Snapshot,
    b: &Snapshot,
    c: &Snapshot,
    rows: &[Listed],
    commanded: Option<&HashSet<u32>>,
    settle_ms: u64,
) -> Verdict {
    let listed: BTreeMap<u32, Option<u64>> = rows.iter().map(|r| (r.id, r.report_age_ms)).collect();
    let mut v = Verdict::default();
    for (id, inc) in a {
        if b.get(id) != Some(inc) || c.get(id) != Some(inc) {
            continue;
        }
        v.checked += 1;
        match listed.get(id) {
            None => v.lost.push((*id, *inc)),
            Some(age) => {
                let silent = age.is_none_or(|ms| ms > settle_ms);
                let uncommanded = commanded.is_some_and(|set| !set.contains(id));
                if silent || uncommanded {
                    v.frozen.push((*id, *inc));
                    v.uncommanded += usize::from(uncommanded && !silent);
                }
            }
        }
    }
    v.ghosts = rows.iter().filter(|r| !a.contains_key(&r.id) && !b.contains_key(&r.id) && !c.contains_key(&r.id)).count();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(ids: &[(u32, u64)]) -> Snapshot {
        ids.iter().copied().collect()
    }

    fn listed(id: u32, age: Option<u64>) -> Listed {
        Listed { id, report_age_ms: age }
    }

    #[test]
    fn only_flows_running_throughout_are_judged() {
        let a = snap(&[(1, 0), (2, 0), (3, 10), (4, 0)]);
        // 2 closed before B; 3's sid was handed out again; 4 closed while the rows were read.
        let b = snap(&[(1, 0), (3, 20), (4, 0), (5, 0)]);
        let c = snap(&[(1, 0), (3, 20), (5, 0)]);
        let v = judge(&a, &b, &c, &[listed(2, Some(10)), listed(9, Some(10))], None, 5_000);
        assert_eq!(v.checked, 1);
        assert_eq!(v.lost, vec![(1, 0)]);
        // 2 ran in A; 9 in no snapshot: the agent lists a flow the datapath does not have.
        assert_eq!(v.ghosts, 1);
    }

    #[test]
    fn lost_frozen_and_uncommanded() {
        let all = snap(&[(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]);
        let rows = [listed(1, Some(40)), listed(2, Some(7_000)), listed(3, None), listed(5, Some(10))];
        let v = judge(&all, &all, &all, &rows, None, 5_000);
        assert_eq!((v.checked, v.lost.clone(), v.frozen.clone(), v.uncommanded), (5, vec![(4, 0)], vec![(2, 0), (3, 0)], 0));
        // On the kernel datapath 5 also runs without the agent's entry.
        let commanded: HashSet<u32> = [1, 2].into_iter().collect();
        let v = judge(&all, &all, &all, &rows, Some(&commanded), 5_000);
        assert_eq!(v.frozen, vec![(2, 0), (3, 0), (5, 0)]);
        assert_eq!(v.uncommanded, 1);
    }
}
