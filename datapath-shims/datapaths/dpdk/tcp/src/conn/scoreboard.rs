//! The SACK scoreboard and the pipe (RFC 6675): every segment sent and not yet cumulatively
//! acknowledged, whether it is SACKed (RFC 2018; D-SACKs per RFC 2883 §4) or marked lost, and
//! the incrementally kept counts of what is in flight.

use super::ack::Delivery;
use super::Conn;

#[derive(Debug, Clone, Copy)]
pub(super) struct Seg {
    /// Stream sequence of the first byte.
    pub(super) start: u64,
    pub(super) len: u32,
    pub(super) fin: bool,
    pub(super) last_sent_us: u64,
    pub(super) xmits: u32,
    pub(super) sacked: bool,
    /// Marked lost and not yet retransmitted (not in the pipe).
    pub(super) lost: bool,
    pub(super) lost_by_timeout: bool,
    // Delivery-rate snapshot at the latest (re)transmission.
    pub(super) tx_delivered: u64,
    pub(super) tx_delivered_us: u64,
    pub(super) tx_first_sent_us: u64,
    pub(super) tx_app_limited: bool,
}

impl Seg {
    pub(super) fn end(&self) -> u64 {
        self.start + u64::from(self.len) + u64::from(self.fin)
    }
}

impl Conn {
    pub(super) fn outstanding(&self) -> bool {
        !self.scoreboard.is_empty()
    }

    /// Applies an ACK's SACK blocks (`new_una`: its cumulative point): blocks reporting
    /// duplicates go to RACK's reordering window, the others mark segments SACKed.
    pub(super) fn apply_sack_blocks(&mut self, blocks: &[(u32, u32)], new_una: u64, now_us: u64, d: &mut Delivery) {
        for (i, &(s32, e32)) in blocks.iter().enumerate() {
            let (s, e) = (self.unwrap_seq(s32), self.unwrap_seq(e32));
            if e <= s || e > i128::from(self.snd_nxt) || s < 0 {
                self.reject(|st| &mut st.rej_sack_blocks);
                continue;
            }
            // RFC 2883 §4: a first block below the cumulative ACK, or
            // inside the second block, reports a duplicate.
            let inside_next = i == 0
                && blocks.get(1).is_some_and(|&(s1, e1)| {
                    let (s1, e1) = (self.unwrap_seq(s1), self.unwrap_seq(e1));
                    s1 <= s && e <= e1
                });
            if e <= i128::from(new_una) || inside_next {
                self.on_dsack();
                continue;
            }
            self.mark_sacked(s as u64, e as u64, now_us, d);
        }
    }

    /// Removes the segments the cumulative ACK `new_una` covers, trimming one it covers in part.
    pub(super) fn ack_cumulative(&mut self, new_una: u64, now_us: u64, d: &mut Delivery) {
        while let Some(front) = self.scoreboard.front().copied() {
            if front.end() <= new_una {
                self.scoreboard.pop_front();
                if front.sacked {
                    self.sacked_pkts -= 1;
                } else {
                    self.on_delivered(&front, now_us, d);
                    d.acked_bytes += u64::from(front.len);
                    d.acked_pkts += 1;
                }
            } else if front.start < new_una {
                // The peer acknowledged part of a segment: trim it so a
                // retransmission starts where the peer needs it.
                let k = new_una - front.start;
                let f = self.scoreboard.front_mut().expect("front exists");
                f.start = new_una;
                f.len -= k as u32;
                if !f.sacked {
                    if f.lost {
                        // lost segments are outside the pipe already
                    } else {
                        self.inflight_bytes -= k;
                    }
                    d.acked_bytes += k;
                    self.delivered += k;
                    d.any = true;
                }
                break;
            } else {
                break;
            }
        }
    }

    /// Marks the segments lying wholly inside the SACK block [s, e),
    /// skipping the parts already known to be SACKed.
    fn mark_sacked(&mut self, s: u64, e: u64, now_us: u64, d: &mut Delivery) {
        let mut cursor = s;
        while cursor < e {
            if let Some((_, &covered_end)) = self.sacked_ranges.range(..=cursor).next_back().filter(|(_, &re)| re > cursor) {
                cursor = covered_end;
                continue;
            }
            let gap_end = self.sacked_ranges.range(cursor..).next().map_or(e, |(&ns, _)| ns.min(e));
            let first = self.scoreboard.partition_point(|g| g.end() <= cursor);
            for i in first..self.scoreboard.len() {
                let g = self.scoreboard[i];
                if g.start >= gap_end {
                    break;
                }
                if g.sacked || g.start < s || g.end() > e {
                    continue;
                }
                self.scoreboard[i].sacked = true;
                self.scoreboard[i].lost = false;
                self.sacked_pkts += 1;
                self.sacked_insert(g.start, g.end());
                self.on_delivered(&g, now_us, d);
                d.sacked_bytes += u64::from(g.len);
                d.sacked_pkts += 1;
            }
            cursor = gap_end;
        }
    }

    fn sacked_insert(&mut self, mut s: u64, mut e: u64) {
        if let Some((&ps, &pe)) = self.sacked_ranges.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.sacked_ranges.remove(&ps);
            }
        }
        while let Some((&ns, &ne)) = self.sacked_ranges.range(s..).next() {
            if ns > e {
                break;
            }
            e = e.max(ne);
            self.sacked_ranges.remove(&ns);
        }
        self.sacked_ranges.insert(s, e);
    }

    pub(super) fn sacked_trim_below(&mut self, una: u64) {
        while let Some((&s, &e)) = self.sacked_ranges.first_key_value() {
            if s >= una {
                break;
            }
            self.sacked_ranges.pop_first();
            if e > una {
                self.sacked_ranges.insert(una, e);
                break;
            }
        }
    }

    /// Bookkeeping shared by cumulative and selective delivery of `g` (its
    /// state before delivery).
    fn on_delivered(&mut self, g: &Seg, now_us: u64, d: &mut Delivery) {
        if g.lost {
            self.lost_pkts -= 1;
            self.lost_ends.remove(&g.end());
        } else {
            self.inflight_bytes -= u64::from(g.len);
            self.inflight_pkts -= 1;
            self.tsorted.remove(&(g.last_sent_us, g.end()));
        }
        self.delivered += u64::from(g.len);
        d.any = true;
        self.rack_on_delivered(g, now_us);
        d.note(g, now_us);
    }

    /// Takes the in-flight segment at `i` out of the pipe as lost (not by timeout); the caller
    /// has taken it out of `tsorted`.
    pub(super) fn mark_lost(&mut self, i: usize) {
        let g = &mut self.scoreboard[i];
        g.lost = true;
        g.lost_by_timeout = false;
        self.inflight_bytes -= u64::from(g.len);
        self.inflight_pkts -= 1;
        self.lost_pkts += 1;
        self.lost_ends.insert(g.end());
    }

    /// After an RTO: every segment neither SACKed nor already lost is lost, and nothing is in
    /// flight. Returns the segments newly marked.
    pub(super) fn mark_all_lost_by_timeout(&mut self) -> u32 {
        let mut newly = 0;
        for g in self.scoreboard.iter_mut() {
            if g.sacked || g.lost {
                continue;
            }
            g.lost = true;
            g.lost_by_timeout = true;
            self.lost_ends.insert(g.end());
            newly += 1;
        }
        self.lost_pkts += newly;
        self.stats.lost_marked += u64::from(newly);
        self.inflight_bytes = 0;
        self.inflight_pkts = 0;
        self.tsorted.clear();
        newly
    }

    /// Index of the lowest segment marked lost and not yet retransmitted.
    pub(super) fn first_lost(&self) -> Option<usize> {
        let end = *self.lost_ends.first()?;
        let i = self.scoreboard.partition_point(|g| g.end() < end);
        self.scoreboard.get(i).filter(|g| g.end() == end && g.lost && !g.sacked).map(|_| i)
    }

    /// Test hook: the incremental counters must equal a recount.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        use std::collections::{BTreeMap, BTreeSet};

        let mut bytes = 0u64;
        let mut pkts = 0u32;
        let mut lost = 0u32;
        let mut sacked = 0u32;
        let mut prev_end = self.snd_una;
        let mut keys = BTreeSet::new();
        for g in &self.scoreboard {
            if !g.sacked && !g.lost {
                keys.insert((g.last_sent_us, g.end()));
            }
            assert!(g.start >= prev_end || g.start == self.snd_una, "scoreboard ordered");
            prev_end = g.end();
            if g.sacked {
                sacked += 1;
            } else if g.lost {
                lost += 1;
            } else {
                bytes += u64::from(g.len);
                pkts += 1;
            }
        }
        assert_eq!(keys, self.tsorted, "tsorted holds exactly the in-flight segments");
        let mut ranges: BTreeMap<u64, u64> = BTreeMap::new();
        let mut open: Option<(u64, u64)> = None;
        for g in self.scoreboard.iter().filter(|g| g.sacked) {
            open = match open {
                Some((rs, re)) if re == g.start => Some((rs, g.end())),
                Some((rs, re)) => {
                    ranges.insert(rs, re);
                    Some((g.start, g.end()))
                }
                None => Some((g.start, g.end())),
            };
        }
        if let Some((rs, re)) = open {
            ranges.insert(rs, re);
        }
        assert_eq!(ranges, self.sacked_ranges, "sacked_ranges mirrors the SACKed segments");
        let lost_ends: BTreeSet<u64> = self.scoreboard.iter().filter(|g| g.lost && !g.sacked).map(|g| g.end()).collect();
        assert_eq!(lost_ends, self.lost_ends);
        assert_eq!(bytes, self.inflight_bytes);
        assert_eq!(pkts, self.inflight_pkts);
        assert_eq!(lost, self.lost_pkts);
        assert_eq!(sacked, self.sacked_pkts);
        assert!(self.snd_una <= self.snd_nxt);
    }
}
