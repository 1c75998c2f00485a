//! Admission: how many flows the agent controls at once, in total and per source.
//!
//! Any local user can start TCP flows the eBPF datapath hands to the agent (a user namespace of
//! their own selects `ccp` for its loopback), and every controlled flow costs the agent memory
//! and a share of its loop. So flows are counted in total, per datapath peer (a libccp
//! datapath), per network namespace and per owner (uid: on the eBPF datapath the socket's owner;
//! on a libccp datapath the user whose process announced the flow, as the kernel vouches for it,
//! `datapath::libccp::transport`; ccp-kernel's flows, announced by the kernel, are root's); a
//! flow over any limit is refused: the agent does not control it, and the datapath's own
//! fallback (the eBPF program's Cubic or Reno) steers it, exactly as when the agent is away.
//! Nothing stalls. Root's flows (uid 0) are bounded by the total only: the per-uid limit is
//! there to keep one unprivileged user from taking the table from everyone else.
//!
//! A refused flow is remembered (up to `max_flows` of them) so that its later reports are
//! dropped at a hash lookup instead of being re-examined each time; it is examined again
//! [`Admission::RETRY_US`] after its refusal (so a flow refused while the table was full is
//! admitted once there is room), and forgotten when it closes or goes quiet for the idle timeout. Refusals are counted per limit and logged at most once per
//! [`LOG_EVERY`](crate::log_limit::LOG_EVERY) with the count since the last line.

use std::collections::HashMap;

use serde::Serialize;
use tracing::warn;

use super::FlowKey;
use crate::clock::Now;
use crate::datapath::FlowInfo;
use crate::log_limit::{LogLimit, LOG_EVERY};

/// `[safety]`'s flow limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowLimits {
    pub max_flows: usize,
    pub max_flows_per_peer: usize,
    pub max_flows_per_netns: usize,
    pub max_flows_per_uid: usize,
}

impl Default for FlowLimits {
    fn default() -> Self {
        FlowLimits { max_flows: 262_144, max_flows_per_peer: 131_072, max_flows_per_netns: 131_072, max_flows_per_uid: 16_384 }
    }
}

impl FlowLimits {
    /// The range every limit must lie in (a limit of 0 would refuse every flow).
    pub const RANGE: (usize, usize) = (1, 1 << 24);
}

/// Which limit refused a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Total,
    Peer,
    Netns,
    Uid,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::Total => "max_flows",
            Limit::Peer => "max_flows_per_peer",
            Limit::Netns => "max_flows_per_netns",
            Limit::Uid => "max_flows_per_uid",
        }
    }
}

/// Refusals by limit.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Refusals {
    pub max_flows: u64,
    pub max_flows_per_peer: u64,
    pub max_flows_per_netns: u64,
    pub max_flows_per_uid: u64,
    /// Reports of refused flows, dropped.
    pub reports_dropped: u64,
}

/// The keys a flow is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    peer: (usize, u32),
    netns: Option<u64>,
    /// `None` for root (the kernel's flows included) and for datapaths that do not say.
    uid: Option<u32>,
}

impl Owner {
    fn of(key: &FlowKey, info: &FlowInfo) -> Owner {
        Owner { peer: (key.0, key.1.peer), netns: info.netns_cookie, uid: info.uid.filter(|u| *u != 0) }
    }
}

#[derive(Debug, Default)]
pub struct Admission {
    limits: FlowLimits,
    admitted: HashMap<FlowKey, Owner>,
    per_peer: HashMap<(usize, u32), usize>,
    per_netns: HashMap<u64, usize>,
    per_uid: HashMap<u32, usize>,
    /// Refused flows: when they were refused and when they last reported (agent clock, µs).
    refused: HashMap<FlowKey, (u64, u64)>,
    pub refusals: Refusals,
    log: LogLimit,
}

fn bump<K: std::hash::Hash + Eq + Copy>(map: &mut HashMap<K, usize>, key: K, up: bool) {
    if up {
        *map.entry(key).or_default() += 1;
    } else if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

impl Admission {
    /// A refused flow is examined again this long after its refusal.
    pub const RETRY_US: u64 = 10_000_000;

    pub fn new(limits: FlowLimits) -> Admission {
        Admission { limits, ..Admission::default() }
    }

    pub fn limits(&self) -> FlowLimits {
        self.limits
    }

    /// New limits apply to flows that start from now on; admitted flows stay.
    pub fn set_limits(&mut self, limits: FlowLimits) {
        self.limits = limits;
    }

    /// Admits the flow, or says which limit refuses it (and remembers the refusal).
    pub fn admit(&mut self, key: FlowKey, info: &FlowInfo, now: Now) -> Result<(), Limit> {
        self.release(&key);
        let o = Owner::of(&key, info);
        let l = self.limits;
        let over = if self.admitted.len() >= l.max_flows {
            Some(Limit::Total)
        } else if self.per_peer.get(&o.peer).copied().unwrap_or(0) >= l.max_flows_per_peer {
            Some(Limit::Peer)
        } else if o.netns.is_some_and(|n| self.per_netns.get(&n).copied().unwrap_or(0) >= l.max_flows_per_netns) {
            Some(Limit::Netns)
        } else if o.uid.is_some_and(|u| self.per_uid.get(&u).copied().unwrap_or(0) >= l.max_flows_per_uid) {
            Some(Limit::Uid)
        } else {
            None
        };
        if let Some(limit) = over {
            self.refuse(key, info, limit, now);
            return Err(limit);
        }
        self.refused.remove(&key);
        bump(&mut self.per_peer, o.peer, true);
        if let Some(n) = o.netns {
            bump(&mut self.per_netns, n, true);
        }
        if let Some(u) = o.uid {
            bump(&mut self.per_uid, u, true);
        }
        self.admitted.insert(key, o);
        Ok(())
    }

    fn refuse(&mut self, key: FlowKey, info: &FlowInfo, limit: Limit, now: Now) {
        let r = &mut self.refusals;
        match limit {
            Limit::Total => r.max_flows += 1,
            Limit::Peer => r.max_flows_per_peer += 1,
            Limit::Netns => r.max_flows_per_netns += 1,
            Limit::Uid => r.max_flows_per_uid += 1,
        }
        if self.refused.len() < self.limits.max_flows || self.refused.contains_key(&key) {
            self.refused.insert(key, (now.agent_us, now.agent_us));
        }
        if let Some(not_logged) = self.log.allow(now.instant) {
            warn!(
                limit = limit.name(),
                src = ?info.src,
                dst = ?info.dst,
                uid = ?info.uid,
                netns_cookie = ?info.netns_cookie,
                refused = not_logged + 1,
                "refusing to control flows: the datapath's fallback steers them (raise [safety] {} if this is \
                 legitimate load; further refusals are logged at most every {}s)",
                limit.name(),
                LOG_EVERY.as_secs()
            );
        }
    }

    /// A report of a flow the table does not hold: true when it is a refused flow's (dropped,
    /// and counted). A refusal older than [`Admission::RETRY_US`] ends here: the flow's next
    /// report is examined afresh.
    pub fn is_refused(&mut self, key: &FlowKey, now: Now) -> bool {
        let now_us = now.agent_us;
        match self.refused.get_mut(key) {
            Some((at, _)) if now_us.saturating_sub(*at) >= Self::RETRY_US => {
                self.refused.remove(key);
                false
            }
            Some((_, seen)) => {
                *seen = now_us;
                self.refusals.reports_dropped += 1;
                true
            }
            None => false,
        }
    }

    /// Whether the adapter should treat the flow as known (a refused one must not be adopted
    /// again on every report).
    pub fn refused(&self, key: &FlowKey) -> bool {
        self.refused.contains_key(key)
    }

    /// The flow left the table, or closed: its place is free.
    pub fn release(&mut self, key: &FlowKey) {
        self.refused.remove(key);
        if let Some(o) = self.admitted.remove(key) {
            bump(&mut self.per_peer, o.peer, false);
            if let Some(n) = o.netns {
                bump(&mut self.per_netns, n, false);
            }
            if let Some(u) = o.uid {
                bump(&mut self.per_uid, u, false);
            }
        }
    }

    /// Forgets refusals not refreshed by a report for `idle_us`: such a flow is gone, or will be
    /// examined afresh when it reports.
    pub fn expire(&mut self, now: Now, idle_us: u64) {
        self.refused.retain(|_, (_, seen)| now.agent_us.saturating_sub(*seen) <= idle_us);
    }

    pub fn refused_now(&self) -> usize {
        self.refused.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::FlowRef;

    fn at(us: u64) -> Now {
        Now::at_us(us)
    }

    fn key(peer: u32, sid: u32) -> FlowKey {
        (0, FlowRef { peer, sid })
    }

    fn info(netns: u64, uid: u32) -> FlowInfo {
        FlowInfo { netns_cookie: Some(netns), uid: Some(uid), ..FlowInfo::default() }
    }

    fn limits(total: usize, peer: usize, netns: usize, uid: usize) -> FlowLimits {
        FlowLimits { max_flows: total, max_flows_per_peer: peer, max_flows_per_netns: netns, max_flows_per_uid: uid }
    }

    #[test]
    fn each_limit_refuses_the_flow_over_it_and_frees_its_place_on_release() {
        let mut a = Admission::new(limits(100, 100, 100, 2));
        assert_eq!(a.admit(key(0, 1), &info(7, 1000), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 2), &info(8, 1000), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 3), &info(9, 1000), at(0)), Err(Limit::Uid));
        // Another user, and root, are not held to uid 1000's count.
        assert_eq!(a.admit(key(0, 4), &info(9, 1001), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 5), &info(9, 0), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 6), &info(9, 0), at(0)), Ok(()));
        a.release(&key(0, 1));
        assert_eq!(a.admit(key(0, 3), &info(9, 1000), at(0)), Ok(()));
        assert_eq!(a.refusals.max_flows_per_uid, 1);

        let mut a = Admission::new(limits(100, 100, 1, 100));
        assert_eq!(a.admit(key(0, 1), &info(7, 5), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 2), &info(7, 6), at(0)), Err(Limit::Netns));
        assert_eq!(a.admit(key(0, 3), &info(8, 6), at(0)), Ok(()));

        let mut a = Admission::new(limits(100, 1, 100, 100));
        assert_eq!(a.admit(key(0, 1), &FlowInfo::default(), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 2), &FlowInfo::default(), at(0)), Err(Limit::Peer));
        assert_eq!(a.admit(key(1, 2), &FlowInfo::default(), at(0)), Ok(()));

        let mut a = Admission::new(limits(2, 100, 100, 100));
        assert_eq!(a.admit(key(0, 1), &info(1, 1), at(0)), Ok(()));
        assert_eq!(a.admit(key(1, 1), &info(2, 2), at(0)), Ok(()));
        assert_eq!(a.admit(key(2, 1), &info(3, 0), at(0)), Err(Limit::Total));
        assert_eq!(a.refusals.max_flows, 1);
    }

    #[test]
    fn a_refused_flow_is_remembered_until_it_goes_quiet_and_admitted_once_there_is_room() {
        let mut a = Admission::new(limits(1, 10, 10, 10));
        assert_eq!(a.admit(key(0, 1), &info(1, 1), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 2), &info(1, 1), at(0)), Err(Limit::Total));
        assert!(a.refused(&key(0, 2)));
        assert!(a.is_refused(&key(0, 2), at(5_000_000)));
        assert!(!a.is_refused(&key(0, 1), at(5_000_000)));
        assert_eq!(a.refusals.reports_dropped, 1);
        // Refreshed at 5 s: still remembered at 9 s with a 5 s idle timeout, gone at 11 s.
        a.expire(at(9_000_000), 5_000_000);
        assert!(a.refused(&key(0, 2)));
        a.expire(at(11_000_000), 5_000_000);
        assert!(!a.refused(&key(0, 2)));

        // Reported all along: examined again once RETRY_US has passed since the refusal.
        assert_eq!(a.admit(key(0, 3), &info(1, 1), at(20_000_000)), Err(Limit::Total));
        assert!(a.is_refused(&key(0, 3), at(20_000_000 + Admission::RETRY_US - 1)));
        a.release(&key(0, 1));
        assert!(!a.is_refused(&key(0, 3), at(20_000_000 + Admission::RETRY_US)));
        assert!(!a.refused(&key(0, 3)));
        assert_eq!(a.admit(key(0, 3), &info(1, 1), at(31_000_000)), Ok(()));
    }

    #[test]
    fn the_memory_of_refusals_is_bounded_by_max_flows() {
        let mut a = Admission::new(limits(4, 1 << 20, 1 << 20, 1 << 20));
        for sid in 0..4 {
            a.admit(key(0, sid), &FlowInfo::default(), at(0)).unwrap();
        }
        for sid in 4..1000 {
            assert_eq!(a.admit(key(0, sid), &FlowInfo::default(), at(0)), Err(Limit::Total));
        }
        assert_eq!(a.refused_now(), 4);
        assert_eq!(a.refusals.max_flows, 996);
    }

    #[test]
    fn admitting_a_flow_again_under_the_same_key_does_not_count_it_twice() {
        let mut a = Admission::new(limits(1, 10, 10, 10));
        assert_eq!(a.admit(key(0, 1), &info(1, 1), at(0)), Ok(()));
        assert_eq!(a.admit(key(0, 1), &info(1, 1), at(0)), Ok(()));
        a.release(&key(0, 1));
        assert!(a.per_uid.is_empty() && a.per_netns.is_empty() && a.per_peer.is_empty());
    }
}
