//! Space-Saving (Metwally, Agrawal and El Abbadi, "Efficient computation of frequent and top-k
//! elements in data streams", ICDT 2005): the K heaviest keys of a stream in O(K) memory. ABC's
//! coexistence scheduler (specs/abc.md §7) uses it to find each queue's largest flows.
//!
//! Each of the K counters holds a key, a count and the count's possible overestimate (`error`).
//! A tracked key adds its weight to its counter. An untracked key takes over the counter with the
//! smallest count c: its count becomes c + weight and its error c, since up to c of that count may
//! belong to the keys it evicted. The guarantee: for every tracked key,
//! `count − error ≤ true weight ≤ count`, and every key heavier than the smallest count is tracked.
//!
//! Counts here are byte counts that decay exponentially ([`SpaceSaving::decay`]): a rate
//! estimate with a time constant τ is then count / τ. Decaying every counter and every error by
//! the same factor keeps the guarantee, for the decayed true weights.

/// One tracked key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counter {
    pub key: u64,
    /// Upper bound on the key's (decayed) weight.
    pub count: f64,
    /// How much of `count` may belong to keys evicted before this one.
    pub error: f64,
}

impl Counter {
    /// Lower bound on the key's weight: what it certainly carried.
    pub fn guaranteed(&self) -> f64 {
        (self.count - self.error).max(0.0)
    }
}

/// The top-K summary.
#[derive(Debug, Clone)]
pub struct SpaceSaving {
    counters: Vec<Counter>,
    k: usize,
}

impl SpaceSaving {
    /// A summary tracking `k` keys (at least one).
    pub fn new(k: usize) -> SpaceSaving {
        let k = k.max(1);
        SpaceSaving { counters: Vec::with_capacity(k), k }
    }

    /// Adds `weight` (≥ 0) to `key`.
    pub fn add(&mut self, key: u64, weight: f64) {
        if let Some(c) = self.counters.iter_mut().find(|c| c.key == key) {
            c.count += weight;
            return;
        }
        if self.counters.len() < self.k {
            self.counters.push(Counter { key, count: weight, error: 0.0 });
            return;
        }
        // K is small (16): a scan beats keeping a heap ordered under decay.
        let smallest = self.counters.iter_mut().min_by(|a, b| a.count.total_cmp(&b.count)).expect("k ≥ 1 counters once full");
        let floor = smallest.count;
        *smallest = Counter { key, count: floor + weight, error: floor };
    }

    /// Multiplies every count and error by `factor` (in [0, 1]): exponential forgetting.
    pub fn decay(&mut self, factor: f64) {
        for c in &mut self.counters {
            c.count *= factor;
            c.error *= factor;
        }
    }

    /// The tracked keys, in no particular order.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Draw, SeedableRng, SplitMix64};
    use std::collections::HashMap;

    #[test]
    fn heavy_keys_are_tracked_among_many_light_ones_and_bounded_both_ways() {
        let mut rng = SplitMix64::seed_from_u64(7);
        let mut s = SpaceSaving::new(16);
        let mut truth: HashMap<u64, f64> = HashMap::new();
        for i in 0..200_000u64 {
            // Six heavy keys carry 60 % of the weight; the rest is spread over 10,000 keys.
            let key = if rng.next_f64() < 0.6 { i % 6 } else { 100 + (rng.next_f64() * 10_000.0) as u64 };
            s.add(key, 1500.0);
            *truth.entry(key).or_default() += 1500.0;
        }
        for heavy in 0..6u64 {
            let c = s.counters().iter().find(|c| c.key == heavy).unwrap_or_else(|| panic!("heavy key {heavy} lost"));
            let t = truth[&heavy];
            assert!(c.guaranteed() <= t && t <= c.count, "key {heavy}: {} ≤ {t} ≤ {}", c.guaranteed(), c.count);
            assert!(c.error < 0.05 * t, "key {heavy}: error {} against {t}", c.error);
        }
        for c in s.counters() {
            let t = truth[&c.key];
            assert!(c.guaranteed() <= t + 1e-6 && t <= c.count + 1e-6, "{c:?} vs {t}");
        }
    }

    #[test]
    fn an_untracked_key_takes_the_smallest_counter_with_its_count_as_error() {
        let mut s = SpaceSaving::new(2);
        s.add(1, 10.0);
        s.add(2, 3.0);
        s.add(3, 1.0);
        let mut c = s.counters().to_vec();
        c.sort_by_key(|c| c.key);
        assert_eq!(c, vec![Counter { key: 1, count: 10.0, error: 0.0 }, Counter { key: 3, count: 4.0, error: 3.0 }]);
        assert_eq!(c[1].guaranteed(), 1.0);
    }

    #[test]
    fn decay_scales_counts_and_errors_alike() {
        let mut s = SpaceSaving::new(1);
        s.add(1, 8.0);
        s.add(2, 2.0);
        s.decay(0.5);
        assert_eq!(s.counters(), &[Counter { key: 2, count: 5.0, error: 4.0 }]);
    }
}
