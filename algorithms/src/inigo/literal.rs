//! The thesis-literal Inigo sender (spec §3.10), for ablation: floating-point α and window, as
//! the thesis's algorithm boxes read when a byte- or fractional window is available.
//!
//! - every ACK: late marking (done by the datapath against the threshold the agent sets);
//! - every window of data: α ← (1 − g)·α + g·late/observed (Alg. 2), counters reset;
//! - every W_sub acknowledged packets: if α > 0, cwnd ← cwnd − W_sub·α/2, with no hold-off (Alg. 5);
//! - every acknowledged packet in congestion avoidance: cwnd ← cwnd + 2/cwnd;
//! - slow start: after ≥ 8 samples the first α > 0 cuts W_sub·α/2 and sets ssthresh = cwnd (Alg. 3);
//! - ECN mode: DCTCP per window (cwnd·(1 − α/2), once per window) plus the slow-start exit.
//!
//! Its total reduction per round trip is DCTCP's W·α/2, the thesis's stated intent; it is not
//! what produced the published numbers (that is `sender.rs`).

use super::sender::{Mode, MIN_CWND_PKTS};

/// Reductions applied one by one per report at most this many times (a report of more sub-windows
/// applies the rest as one step).
const MAX_STEPS: u32 = 1024;

/// DCTCP's per-ACK update (Alg. 4) for one ACK: W + 1/W − (ECN ? α/2 : 0).
pub fn dctcp_per_ack(w: f64, alpha: f64, ecn: bool) -> f64 {
    w + 1.0 / w - if ecn { alpha / 2.0 } else { 0.0 }
}

/// DCTCP's once-per-window cut: W·(1 − α/2).
pub fn per_window_cut(w: f64, alpha: f64) -> f64 {
    w * (1.0 - alpha / 2.0)
}

/// One sub-window reduction (Alg. 5): W_sub·α/2 packets.
pub fn sub_window_cut(w_sub: u32, alpha: f64) -> f64 {
    f64::from(w_sub) * alpha / 2.0
}

/// A report's worth of what the literal sender needs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Batch {
    pub acked_pkts: f64,
    pub samples: f64,
    pub late: f64,
    pub ece: bool,
    pub ece_fraction: f64,
    pub inflight_pkts: f64,
    pub cwnd_limited: bool,
    pub loss: bool,
    pub timeout: bool,
}

#[derive(Debug, Clone)]
pub struct Literal {
    pub mode: Mode,
    pub w_sub: u32,
    pub g: f64,
    pub ss_obs_needed: f64,
    pub cwnd: f64,
    pub ssthresh: f64,
    pub alpha: f64,
    late: f64,
    observed: f64,
    /// Packets since the last sub-window point.
    sub_cnt: f64,
    /// Packets left in the current window of data.
    window_left: f64,
    /// ECN mode: echoed fraction accumulated over the window, and whether it cut in it.
    ece_sum: f64,
    acked_sum: f64,
    cut_this_window: bool,
}

impl Literal {
    pub fn new(mode: Mode, w_sub: u32, g: f64, ss_obs_needed: u32, cwnd: f64) -> Literal {
        Literal {
            mode,
            w_sub: w_sub.max(1),
            g,
            ss_obs_needed: f64::from(ss_obs_needed),
            cwnd: cwnd.max(f64::from(MIN_CWND_PKTS)),
            ssthresh: f64::INFINITY,
            alpha: if mode == Mode::Ecn { 1.0 } else { 0.0 },
            late: 0.0,
            observed: 0.0,
            sub_cnt: 0.0,
            window_left: cwnd.max(1.0),
            ece_sum: 0.0,
            acked_sum: 0.0,
            cut_this_window: false,
        }
    }

    fn floor(&mut self) {
        self.cwnd = self.cwnd.max(f64::from(MIN_CWND_PKTS));
    }

    pub fn on_batch(&mut self, b: &Batch) {
        self.late += b.late.min(b.samples);
        self.observed += b.samples;
        if b.timeout {
            self.ssthresh = (self.cwnd - sub_window_cut(self.w_sub, self.alpha)).max(f64::from(MIN_CWND_PKTS));
            self.cwnd = 1.0;
            self.floor();
            return;
        }
        if b.loss {
            let cut = match self.mode {
                Mode::Rtt => sub_window_cut(self.w_sub, self.alpha),
                Mode::Ecn => self.cwnd * self.alpha / 2.0,
            };
            self.cwnd -= cut;
            self.floor();
            self.ssthresh = self.cwnd;
        }
        match self.mode {
            Mode::Rtt => self.rtt_batch(b),
            Mode::Ecn => self.ecn_batch(b),
        }
        self.floor();
    }

    fn end_of_window(&mut self, b: &Batch) -> bool {
        self.window_left -= b.acked_pkts;
        if self.window_left > 0.0 {
            return false;
        }
        self.window_left = b.inflight_pkts.max(1.0);
        true
    }

    fn rtt_batch(&mut self, b: &Batch) {
        if !b.cwnd_limited {
            return;
        }
        if self.cwnd < self.ssthresh {
            if self.observed >= self.ss_obs_needed {
                self.alpha = (1.0 - self.g) * self.alpha + self.g * self.late / self.observed.max(1.0);
                self.late = 0.0;
                self.observed = 0.0;
                if self.alpha > 0.0 {
                    self.cwnd -= sub_window_cut(self.w_sub, self.alpha);
                    self.floor();
                    self.ssthresh = self.cwnd;
                    return;
                }
            }
            self.cwnd += b.acked_pkts;
            return;
        }
        if self.end_of_window(b) {
            self.alpha = ((1.0 - self.g) * self.alpha + self.g * self.late / self.observed.max(1.0)).clamp(0.0, 1.0);
            self.late = 0.0;
            self.observed = 0.0;
        }
        // +2/cwnd per packet and −W_sub·α/2 per W_sub packets, interleaved as they come.
        let steps = b.acked_pkts.ceil().clamp(0.0, f64::from(MAX_STEPS));
        if steps == 0.0 {
            return;
        }
        let per_step = b.acked_pkts / steps;
        for _ in 0..steps as u32 {
            self.cwnd += 2.0 * per_step / self.cwnd;
            self.sub_cnt += per_step;
            let points = (self.sub_cnt / f64::from(self.w_sub)).floor();
            if points >= 1.0 {
                self.sub_cnt -= points * f64::from(self.w_sub);
                if self.alpha > 0.0 {
                    self.cwnd -= points * sub_window_cut(self.w_sub, self.alpha);
                    self.floor();
                }
            }
        }
    }

    fn ecn_batch(&mut self, b: &Batch) {
        self.ece_sum += b.ece_fraction * b.acked_pkts;
        self.acked_sum += b.acked_pkts;
        if b.ece && !self.cut_this_window {
            if self.cwnd < self.ssthresh {
                self.ssthresh = self.cwnd;
            }
            self.cwnd = per_window_cut(self.cwnd, self.alpha);
            self.ssthresh = self.cwnd;
            self.cut_this_window = true;
        } else if b.cwnd_limited {
            if self.cwnd < self.ssthresh {
                self.cwnd += b.acked_pkts;
            } else {
                self.cwnd += b.acked_pkts / self.cwnd;
            }
        }
        if self.end_of_window(b) {
            let f = if self.acked_sum > 0.0 { (self.ece_sum / self.acked_sum).clamp(0.0, 1.0) } else { 0.0 };
            self.alpha = (1.0 - self.g) * self.alpha + self.g * f;
            self.ece_sum = 0.0;
            self.acked_sum = 0.0;
            self.cut_this_window = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_s16_thesis_arithmetic() {
        let a = 300.0 / 1024.0;
        assert!((dctcp_per_ack(200.0, a, true) - 199.8585).abs() < 1e-3);
        assert!((per_window_cut(200.0, a) - 170.70).abs() < 1e-2);
        assert_eq!(super::super::sender::ecn_ssthresh(200, 300), 171, "Linux's integer version");
        // A window's sub-window cuts add up to DCTCP's W·α/2.
        let w = 200.0;
        let total: f64 = (0..(200 / 10)).map(|_| sub_window_cut(10, a)).sum();
        assert!((total - w * a / 2.0).abs() < 1e-9);
    }

    #[test]
    fn sub_window_cuts_come_every_w_sub_packets_without_hold_off() {
        let mut l = Literal::new(Mode::Rtt, 10, 1.0 / 16.0, 8, 100.0);
        l.ssthresh = 50.0;
        l.alpha = 0.5;
        let b = Batch { acked_pkts: 10.0, inflight_pkts: 100.0, cwnd_limited: true, ..Batch::default() };
        l.on_batch(&b);
        // +2/cwnd ten times, then one cut of 10·0.5/2 = 2.5.
        assert!((l.cwnd - (100.0 + 0.2 - 2.5)).abs() < 0.01, "{}", l.cwnd);
        l.on_batch(&b);
        assert!((l.cwnd - (100.0 + 0.4 - 5.0)).abs() < 0.02, "{}", l.cwnd);
    }

    #[test]
    fn slow_start_exits_on_the_first_positive_alpha_after_eight_samples() {
        let mut l = Literal::new(Mode::Rtt, 10, 1.0 / 16.0, 8, 40.0);
        l.on_batch(&Batch { acked_pkts: 7.0, samples: 7.0, late: 7.0, cwnd_limited: true, ..Batch::default() });
        assert_eq!(l.cwnd, 47.0, "seven samples: still doubling");
        l.on_batch(&Batch { acked_pkts: 1.0, samples: 1.0, late: 1.0, cwnd_limited: true, ..Batch::default() });
        let alpha = 1.0 / 16.0;
        assert!((l.alpha - alpha).abs() < 1e-12);
        assert!((l.cwnd - (47.0 - 10.0 * alpha / 2.0)).abs() < 1e-9);
        assert_eq!(l.ssthresh, l.cwnd);
    }
}
