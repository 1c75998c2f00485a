//! The 10 ms sample grid: fixed-size ring buffers of S, R, ẑ, μ̂ − R and the RTT.
//!
//! The FFT needs a uniform series, but reports arrive every ~10 ms on the datapath's schedule, not
//! on a grid. As the authors' implementation does (spec §3.4), each report advances a grid cursor:
//! every grid instant the report's time has reached gets the report's current values
//! (zero-order hold). Missed slots are filled with the latest values; a second report inside one
//! slot adds nothing. A gap longer than the ring is filled with at most one ring's worth of samples
//! and the cursor jumps, so a report's cost is bounded however large the gap.
//!
//! Memory is fixed at construction (no growth with the flow's age): the ring holds the FFT window,
//! the optional 2-RTT alignment slack and the "rate 5 s ago" look-up.

/// A fixed-capacity ring of f64 samples; the newest overwrite the oldest.
#[derive(Debug, Clone)]
pub struct Ring {
    buf: Box<[f64]>,
    /// Index of the next write.
    head: usize,
    len: usize,
}

impl Ring {
    pub fn new(capacity: usize) -> Self {
        Ring { buf: vec![0.0; capacity.max(1)].into_boxed_slice(), head: 0, len: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, v: f64) {
        self.buf[self.head] = v;
        // A compare instead of `%` (an integer division): every report writes five rings and the
        // sliding detector reads four samples back.
        self.head += 1;
        if self.head == self.buf.len() {
            self.head = 0;
        }
        self.len = (self.len + 1).min(self.buf.len());
    }

    /// The sample `k` places before the newest (k = 0: newest). Panics if k ≥ len.
    pub fn back(&self, k: usize) -> f64 {
        assert!(k < self.len, "ring: {k} back of {}", self.len);
        let cap = self.buf.len();
        // head + cap − 1 − k lies in [0, 2·cap) because k < len ≤ cap.
        let i = self.head + cap - 1 - k;
        self.buf[if i >= cap { i - cap } else { i }]
    }

    /// Sample `i` (0 = oldest) of the `n` samples ending `skip_newest` samples before the newest.
    pub fn window_at(&self, n: usize, skip_newest: usize, i: usize) -> f64 {
        self.back(skip_newest + n - 1 - i)
    }

    /// Copies the `out.len()` samples ending `skip_newest` before the newest into `out`, oldest
    /// first (at most two contiguous copies). Returns false (and copies nothing) if the ring holds
    /// too few samples.
    pub fn copy_window(&self, skip_newest: usize, out: &mut [f64]) -> bool {
        let n = out.len();
        if n + skip_newest > self.len {
            return false;
        }
        let cap = self.buf.len();
        // Physical index of the oldest sample wanted.
        let start = (self.head + 2 * cap - skip_newest - n) % cap;
        let first = n.min(cap - start);
        out[..first].copy_from_slice(&self.buf[start..start + first]);
        out[first..].copy_from_slice(&self.buf[..n - first]);
        true
    }
}

/// One grid sample.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    /// Send rate S, bytes/s.
    pub s: f64,
    /// Receive rate R, bytes/s.
    pub r: f64,
    /// Cross-traffic estimate ẑ, bytes/s.
    pub z: f64,
    /// μ̂ − R, bytes/s: our own receive rate seen as "the rest of the link" (its spectrum magnitude
    /// equals |FFT(R)| after mean removal).
    pub zout: f64,
    /// RTT, seconds.
    pub rtt_s: f64,
}

/// The grid and its series.
#[derive(Debug, Clone)]
pub struct History {
    slot_us: u64,
    next_slot_us: Option<u64>,
    /// Samples ever pushed: the absolute grid index of the next one.
    pushes: u64,
    pub s: Ring,
    pub r: Ring,
    pub z: Ring,
    pub zout: Ring,
    pub rtt: Ring,
}

impl History {
    pub fn new(slot_us: u64, capacity: usize) -> Self {
        History {
            slot_us: slot_us.max(1),
            next_slot_us: None,
            pushes: 0,
            s: Ring::new(capacity),
            r: Ring::new(capacity),
            z: Ring::new(capacity),
            zout: Ring::new(capacity),
            rtt: Ring::new(capacity),
        }
    }

    pub fn slot_us(&self) -> u64 {
        self.slot_us
    }

    pub fn slot_s(&self) -> f64 {
        self.slot_us as f64 / 1e6
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.z.len()
    }

    pub fn is_empty(&self) -> bool {
        self.z.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.z.capacity()
    }

    /// Samples ever pushed (the absolute grid index of the next sample).
    pub fn pushes(&self) -> u64 {
        self.pushes
    }

    fn push(&mut self, x: &Sample) {
        self.pushes += 1;
        self.s.push(x.s);
        self.r.push(x.r);
        self.z.push(x.z);
        self.zout.push(x.zout);
        self.rtt.push(x.rtt_s);
    }

    /// Zero-order hold of `x` onto every grid instant up to `now_us`. The first call starts the grid
    /// at `now_us`. Returns the number of grid samples pushed.
    pub fn advance(&mut self, now_us: u64, x: &Sample) -> usize {
        self.advance_with(now_us, x, |_| {})
    }

    /// `advance`, calling `before_push` with the history as it is just before each push (a
    /// sliding window over the grid needs the sample the push is about to overwrite).
    pub fn advance_with(&mut self, now_us: u64, x: &Sample, mut before_push: impl FnMut(&History)) -> usize {
        let mut next = *self.next_slot_us.get_or_insert(now_us);
        let mut pushed = 0;
        while now_us >= next && pushed < self.capacity() {
            before_push(self);
            self.push(x);
            pushed += 1;
            next = next.saturating_add(self.slot_us);
        }
        if now_us >= next {
            // A gap longer than the ring: the ring is now all `x`; realign the grid to now.
            next = now_us.saturating_add(self.slot_us);
        }
        self.next_slot_us = Some(next);
        pushed
    }

    /// R at index `len − n` of the series (n = 500: "5 s ago" on the 10 ms grid, as the authors'
    /// implementation reads it), or the oldest held when the history is shorter (spec A10).
    pub fn r_samples_ago(&self, n: usize) -> Option<f64> {
        Self::samples_ago(&self.r, n)
    }

    /// The RTT (s) at the same index as `r_samples_ago(n)`: the RTT the restored rate was
    /// measured at.
    pub fn rtt_samples_ago(&self, n: usize) -> Option<f64> {
        Self::samples_ago(&self.rtt, n)
    }

    fn samples_ago(ring: &Ring, n: usize) -> Option<f64> {
        if ring.is_empty() {
            return None;
        }
        Some(ring.back(n.saturating_sub(1).min(ring.len() - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(v: f64) -> Sample {
        Sample { s: v, r: v, z: v, zout: v, rtt_s: v }
    }

    #[test]
    fn ring_wraps_and_windows() {
        let mut r = Ring::new(4);
        for v in 0..6 {
            r.push(v as f64);
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.back(0), 5.0);
        assert_eq!(r.back(3), 2.0);
        let mut w = [0.0; 3];
        assert!(r.copy_window(0, &mut w));
        assert_eq!(w, [3.0, 4.0, 5.0]);
        assert!(r.copy_window(1, &mut w));
        assert_eq!(w, [2.0, 3.0, 4.0]);
        assert!(!r.copy_window(2, &mut w));
    }

    #[test]
    fn zero_order_hold_onto_the_grid() {
        let mut h = History::new(10_000, 64);
        assert_eq!(h.advance(1_000, &sample(1.0)), 1, "the first report starts the grid");
        assert_eq!(h.advance(9_000, &sample(2.0)), 0, "same slot: nothing");
        assert_eq!(h.advance(11_500, &sample(3.0)), 1);
        // A 35 ms gap: slots 21, 31 ms get the latest value (ZOH fills the gap).
        assert_eq!(h.advance(40_000, &sample(4.0)), 2);
        assert_eq!(h.len(), 4);
        assert_eq!([h.z.back(0), h.z.back(1), h.z.back(2), h.z.back(3)], [4.0, 4.0, 3.0, 1.0]);
        // Jittered 10 ms reports push exactly one sample each on average.
        let mut t = 40_000;
        let mut n = 0;
        for k in 0..1000u64 {
            t += 10_000 + (k % 7) * 300 - 900;
            n += h.advance(t, &sample(0.0));
        }
        let expect = (t - 41_000) / 10_000 + 1;
        assert!((n as i64 - expect as i64).abs() <= 1, "{n} vs {expect}");
    }

    #[test]
    fn huge_gap_is_bounded() {
        let mut h = History::new(10_000, 32);
        h.advance(0, &sample(1.0));
        assert_eq!(h.advance(u64::MAX / 3, &sample(2.0)), 32);
        assert_eq!(h.advance(u64::MAX / 3 + 5_000, &sample(3.0)), 0);
        assert_eq!(h.advance(u64::MAX / 3 + 10_000, &sample(3.0)), 1);
        assert_eq!(h.advance(u64::MAX, &sample(4.0)), 32);
        assert_eq!(h.advance(u64::MAX, &sample(4.0)), 32, "saturated clock: still bounded");
    }

    #[test]
    fn rate_restore_lookup() {
        // §15.2 test 24's look-up: 700 samples, R = 10e6 before 2.5 s and 5e6 after; 500 back is
        // index 200 (t = 2.0 s).
        let mut h = History::new(10_000, 1024);
        for i in 0..700u64 {
            let r = if i < 250 { 10e6 } else { 5e6 };
            h.advance(i * 10_000, &Sample { r, ..Sample::default() });
        }
        assert_eq!(h.len(), 700);
        assert_eq!(h.r_samples_ago(500), Some(10e6));
        assert_eq!(h.r.back(499), h.r_samples_ago(500).unwrap());
        assert_eq!(h.r_samples_ago(450), Some(5e6), "index 250: t = 2.5 s");
        assert_eq!(h.r_samples_ago(451), Some(10e6), "index 249");
        assert_eq!(h.r_samples_ago(5000), Some(10e6), "short history: the oldest");
        assert_eq!(History::new(10_000, 8).r_samples_ago(1), None);
    }
}
