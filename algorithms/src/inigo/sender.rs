//! The kernel-faithful Inigo sender (spec §3.9): the fixed-point state machine of the author's
//! `tcp_inigo.c`, in packets, driven by ACKs — one at a time in the unit tests (the kernel's own
//! granularity), or a report's worth at a time in the agent (`super::Inigo`).
//!
//! Integer semantics throughout, exactly as [K]: α in [0, 1024] updated by
//! `α − min_not_zero(α, α >> 4) + (late << 6)/observed`; the late threshold
//! `rtt_min + rtt_min·174/1024` with a strict `>`; the sub-window reduction
//! `max(cwnd − ((cwnd·α) >> 11)/⌈cwnd/W_sub⌉, 2)`; +2 packets per window in congestion avoidance
//! (+1 when W_sub = 0); RTT counters reset only when a reduction begins.
//!
//! What the kernel does with PRR and `high_seq` the agent does with what a report carries: a
//! reduction sets cwnd to ssthresh at once and holds growth and further responses until the
//! packets in flight at the reduction have been acknowledged (spec §7.3) — the CWR hold-off that
//! keeps the kernel module's queues low (§3.5, edge behaviour 3).

use std::cmp::{max, min};

/// α's fixed-point scale: 1024 ≡ 1.0.
pub const ALPHA_MAX: u32 = 1024;
/// g = 2^-SHIFT_G = 1/16 (thesis App. A; [K] `inigo_shift_g`).
pub const SHIFT_G: u32 = 4;
/// The late-RTT threshold above RTT_min, /1024 (0.1699 ≈ 0.17; [K] `markthresh`).
pub const MARKTHRESH: u32 = 174;
/// RTT observations before the slow-start check runs ([K] `slowstart_rtt_observations_needed`).
pub const SS_OBS_NEEDED: u32 = 8;
/// Packets between sub-window responses ([K] `rtt_fairness`); 0 = once per window.
pub const W_SUB_DEFAULT: u32 = 10;
/// The range [K] clamps a non-zero W_sub to.
pub const W_SUB_RANGE: (u32, u32) = (3, 512);
/// α at the start in ECN mode (Linux DCTCP's `dctcp_alpha_on_init`); RTT mode starts at 0.
pub const ALPHA_ON_INIT_ECN: u32 = ALPHA_MAX;
/// RTT_min before the first sample, µs ([K]: 1 s; it never expires).
pub const RTT_MIN_INIT_US: u32 = 1_000_000;
/// No reduction leaves fewer packets.
pub const MIN_CWND_PKTS: u32 = 2;
/// "Infinite" ssthresh, as Linux's `TCP_INFINITE_SSTHRESH`.
pub const SSTHRESH_INFINITE: u32 = 0x7fff_ffff;

/// Which congestion signal drives the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// DCTCP's ECN-echo fraction, plus the slow-start exit on the first echo (§3.6).
    Ecn,
    /// The late-RTT fraction with the sub-window response (§3.2–3.5).
    Rtt,
}

ccp_contract::param_choice! {
    /// When an ECN-mode flow falls back to RTT mode mid-flow (§3.7, A-1).
    pub enum Fallback {
        /// A whole observation window with no ECE bytes, ≥ 2 late RTTs and ≥ 8 samples since the start.
        Intended = "intended",
        /// As published ([K] zeroes the ECE bytes before its check): ≥ 2 late RTTs in a window after
        /// the first 8 samples, marks or not (reproduction risk R-1).
        AsPublished = "as_published",
        /// Never.
        Off = "off",
    }
}

ccp_contract::param_choice! {
    /// When the congestion-avoidance response fires.
    pub enum Trigger {
        /// Whenever a multiple has been crossed since the last check: what reports of several ACKs
        /// allow, and immune to stretch ACKs.
        Crossing = "crossing",
        /// Only when the packet count lands exactly on a multiple of the interval ([K], per ACK).
        ExactMultiple = "exact",
    }
}

ccp_contract::param_choice! {
    /// What an RTT-mode update does when α > 0 but the sub-window reduction rounds to zero
    /// packets (α below ≈ 2048/W_sub; §3.5 edge behaviour 3, A-11).
    pub enum ZeroCut {
        /// Enter CWR anyway, as [K] (`inigo_enter_cwr` tests only α): growth holds for about
        /// an RTT per update until α decays to 0 — the freeze that produced the published numbers.
        Hold = "hold",
        /// Treat it as the no-op the thesis's formula makes it (§3.10): end slow start
        /// (ssthresh ≤ cwnd) but no CWR, no hold, counters kept as for α = 0. Not the module's.
        Skip = "skip",
    }
}

/// Congestion state, after Linux's: a reduction holds growth and responses until the data in
/// flight when it began is acknowledged; after a timeout the flow grows but does not reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaState {
    Open,
    Cwr,
    Recovery,
    Loss,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderConfig {
    pub w_sub: u32,
    pub shift_g: u32,
    pub markthresh: u32,
    pub ss_obs_needed: u32,
    pub fallback: Fallback,
    pub trigger: Trigger,
    /// ECN mode: α = 1024 on a retransmission timeout ([K] `inigo_clamp_alpha_on_loss`).
    pub clamp_alpha_on_loss: bool,
    pub zero_cut: ZeroCut,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            w_sub: W_SUB_DEFAULT,
            shift_g: SHIFT_G,
            markthresh: MARKTHRESH,
            ss_obs_needed: SS_OBS_NEEDED,
            fallback: Fallback::Intended,
            trigger: Trigger::ExactMultiple,
            clamp_alpha_on_loss: false,
            zero_cut: ZeroCut::Hold,
        }
    }
}

/// [K]'s W_sub: 0, or clamped to [3, 512].
pub fn clamp_w_sub(w_sub: u32) -> u32 {
    if w_sub == 0 {
        0
    } else {
        w_sub.clamp(W_SUB_RANGE.0, W_SUB_RANGE.1)
    }
}

/// Linux's `min_not_zero`.
fn min_not_zero(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, b) => b,
        (a, 0) => a,
        (a, b) => min(a, b),
    }
}

/// α ← (1 − g)·α + g·late/observed in [K]'s fixed point (§3.3); any α below 2^shift_g decays to 0.
pub fn update_alpha(alpha: u32, late: u64, observed: u64, shift_g: u32) -> u32 {
    let mut a = alpha - min_not_zero(alpha, alpha >> shift_g);
    if late > 0 {
        let add = (u128::from(late) << (10 - shift_g)) / u128::from(max(1, observed));
        a = min(u128::from(a) + add, u128::from(ALPHA_MAX)) as u32;
    }
    a
}

/// The sub-window reduction (§3.5): ≈ W_sub·α/2 packets, integer-truncated, floor 2.
pub fn rtt_ssthresh(cwnd: u32, alpha: u32, w_sub: u32) -> u32 {
    let nsub = if w_sub == 0 { 1 } else { cwnd.div_ceil(w_sub).max(1) };
    let cut = ((u64::from(cwnd) * u64::from(alpha)) >> 11) / u64::from(nsub);
    max(u64::from(cwnd).saturating_sub(cut), u64::from(MIN_CWND_PKTS)) as u32
}

/// DCTCP's reduction: cwnd·(1 − α/2), floor 2 (§3.6).
pub fn ecn_ssthresh(cwnd: u32, alpha: u32) -> u32 {
    let cut = (u64::from(cwnd) * u64::from(alpha)) >> 11;
    max(u64::from(cwnd).saturating_sub(cut), u64::from(MIN_CWND_PKTS)) as u32
}

/// The smallest α whose sub-window reduction is at least a packet (eq. 4.4 as the spec reads it).
pub fn alpha_min(w_sub: u32) -> u32 {
    let x = (2 * ALPHA_MAX).div_ceil(w_sub.max(1));
    x + x % 2
}

/// The late-RTT threshold for `rtt_min_us`: a sample above it is late (strict `>`).
pub fn late_threshold_us(rtt_min_us: u32, markthresh: u32) -> u32 {
    rtt_min_us.saturating_add(((u64::from(rtt_min_us) * u64::from(markthresh)) / 1024) as u32)
}

/// What one ACK (or one report of several) tells the sender, besides RTT observations.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Ack {
    /// Packets newly acknowledged, cumulatively or selectively.
    pub acked_pkts: u32,
    /// Bytes for ECN accounting: `snd_una`'s advance, a duplicate ACK as one MSS (§3.6).
    pub acked_bytes: u64,
    /// Bytes of the above that came with ECE (an ACK's whole advance when it carried ECE; a
    /// report's echoed bytes).
    pub ece_bytes: u64,
    /// The ACK carried ECE (or the report held echoes).
    pub ece: bool,
    /// The flow was limited by its window, not by the application (§7.1).
    pub cwnd_limited: bool,
    /// Packets in flight after the ACK: where a window of data, and a hold-off, ends.
    pub inflight_pkts: u32,
}

#[derive(Debug, Clone)]
pub struct Sender {
    pub cfg: SenderConfig,
    pub mode: Mode,
    pub alpha: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub cwnd_cnt: u32,
    pub ca_state: CaState,
    pub rtt_min_us: u32,
    pub rtts_late: u64,
    pub rtts_observed: u64,
    /// Packets still to be acknowledged before the current CWR/Recovery/Loss state ends.
    hold_pkts: u64,
    /// Crossing trigger: the packet count at the last check.
    last_check_cnt: u32,
    /// ECN mode: the observation window (packets to go) and its byte counters.
    window_pkts: u64,
    acked_bytes_ecn: u64,
    acked_bytes_total: u64,
    /// ECN mode: an ECE was seen in the current window (the slow-start exit fires once).
    window_saw_ece: bool,
    /// Reductions begun, α update points reached, and mode switches, for observability.
    pub reductions: u64,
    pub alpha_updates: u64,
    pub fell_back: bool,
}

impl Sender {
    /// A flow starting with `cwnd` packets; `ecn`: the connection negotiated ECN.
    pub fn new(cfg: SenderConfig, mode: Mode, cwnd: u32) -> Sender {
        Sender {
            cfg,
            mode,
            alpha: if mode == Mode::Ecn { ALPHA_ON_INIT_ECN } else { 0 },
            cwnd: cwnd.max(MIN_CWND_PKTS),
            ssthresh: SSTHRESH_INFINITE,
            cwnd_cnt: 0,
            ca_state: CaState::Open,
            rtt_min_us: RTT_MIN_INIT_US,
            rtts_late: 0,
            rtts_observed: 0,
            hold_pkts: 0,
            last_check_cnt: 0,
            window_pkts: u64::from(cwnd.max(1)),
            acked_bytes_ecn: 0,
            acked_bytes_total: 0,
            window_saw_ece: false,
            reductions: 0,
            alpha_updates: 0,
            fell_back: false,
        }
    }

    /// The threshold a late sample exceeds, for the current RTT_min.
    pub fn late_threshold_us(&self) -> u32 {
        late_threshold_us(self.rtt_min_us, self.cfg.markthresh)
    }

    /// Algorithm 1 for one RTT sample, per ACK (the kernel's `pkts_acked`). Invalid samples (0)
    /// change nothing.
    pub fn rtt_sample(&mut self, rtt_us: u32) {
        if rtt_us == 0 {
            return;
        }
        self.rtts_observed += 1;
        self.rtt_min_us = self.rtt_min_us.min(rtt_us);
        if rtt_us > self.late_threshold_us() {
            self.rtts_late += 1;
        }
    }

    /// RTT samples the datapath already tested against `late_threshold_us()`: `samples` of them,
    /// `late` above it, the smallest `min_us`.
    pub fn rtt_counted(&mut self, samples: u64, late: u64, min_us: Option<u32>) {
        if let Some(m) = min_us.filter(|&m| m > 0) {
            self.rtt_min_us = self.rtt_min_us.min(m);
        }
        self.rtts_observed = self.rtts_observed.saturating_add(samples);
        self.rtts_late = self.rtts_late.saturating_add(late.min(samples));
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd <= self.ssthresh
    }

    /// Begins a reduction to `ssthresh`, holding until the data in flight is acknowledged.
    fn reduce(&mut self, ssthresh: u32, state: CaState, inflight_pkts: u32) {
        self.ssthresh = ssthresh;
        self.cwnd = ssthresh.max(MIN_CWND_PKTS);
        self.ca_state = state;
        self.hold_pkts = u64::from(inflight_pkts.max(1));
        self.reductions += 1;
    }

    /// `inigo_init_cwnd_reduction` / `tcp_enter_cwr`: only from Open; resets the RTT counters
    /// (the only place they are reset) but not `cwnd_cnt`.
    fn enter_cwr(&mut self, inflight_pkts: u32) {
        if self.ca_state != CaState::Open {
            return;
        }
        let ss = match self.mode {
            Mode::Rtt => rtt_ssthresh(self.cwnd, self.alpha, self.cfg.w_sub),
            Mode::Ecn => ecn_ssthresh(self.cwnd, self.alpha),
        };
        if self.mode == Mode::Rtt && self.cfg.zero_cut == ZeroCut::Skip && ss >= self.cwnd {
            // Below cwnd, or slow start (cwnd ≤ ssthresh, as 4.3) would re-check α on every ACK.
            self.ssthresh = self.ssthresh.min(self.cwnd.saturating_sub(1)).max(MIN_CWND_PKTS);
            return;
        }
        self.rtts_late = 0;
        self.rtts_observed = 0;
        self.reduce(ss, CaState::Cwr, inflight_pkts);
    }

    /// One ACK, after its RTT observations (the kernel's order: ECN accounting, the reduction
    /// in progress, the ECE reaction, then growth and the RTT response).
    pub fn on_ack(&mut self, a: &Ack) {
        if self.mode == Mode::Ecn {
            self.ecn_accounting(a);
        }
        if self.ca_state != CaState::Open {
            self.hold_pkts = self.hold_pkts.saturating_sub(u64::from(a.acked_pkts));
            let was = self.ca_state;
            if self.hold_pkts == 0 {
                self.ca_state = CaState::Open;
            }
            // The ACK that ends a reduction does not grow the window (§3.9); after a timeout
            // the flow slow-starts throughout.
            if was != CaState::Loss {
                return;
            }
        }
        if self.mode == Mode::Ecn && a.ece && self.ca_state == CaState::Open {
            self.enter_cwr(a.inflight_pkts);
            return;
        }
        match self.mode {
            Mode::Rtt => self.cong_avoid(a),
            Mode::Ecn if a.cwnd_limited => self.reno_cong_avoid(a.acked_pkts),
            Mode::Ecn => {}
        }
    }

    /// §3.6: the observation window, the slow-start exit and the fallback check.
    fn ecn_accounting(&mut self, a: &Ack) {
        if a.ece {
            self.acked_bytes_ecn = self.acked_bytes_ecn.saturating_add(a.ece_bytes);
            if !self.window_saw_ece && self.cwnd < self.ssthresh {
                // The first echo of a window ends slow start at once; the DCTCP cut follows.
                self.ssthresh = self.cwnd;
            }
            self.window_saw_ece = true;
        }
        self.acked_bytes_total = self.acked_bytes_total.saturating_add(a.acked_bytes);
        self.window_pkts = self.window_pkts.saturating_sub(u64::from(a.acked_pkts));
        if self.window_pkts > 0 {
            return;
        }
        self.alpha = update_alpha(self.alpha, self.acked_bytes_ecn, self.acked_bytes_total, self.cfg.shift_g);
        let fall_back = match self.cfg.fallback {
            Fallback::Off => false,
            Fallback::Intended => self.acked_bytes_ecn == 0 && self.rtts_late > 1 && self.rtts_observed >= 8,
            Fallback::AsPublished => self.rtts_late > 1 && self.rtts_observed >= 8,
        };
        // rtts_observed is cumulative in ECN mode; the late count is per window.
        self.rtts_late = 0;
        self.acked_bytes_ecn = 0;
        self.acked_bytes_total = 0;
        self.window_saw_ece = false;
        self.window_pkts = u64::from(a.inflight_pkts.max(1));
        if fall_back {
            // α carries over; the datapath stops setting ECT where it can.
            self.mode = Mode::Rtt;
            self.fell_back = true;
        }
    }

    /// Reno growth for ECN mode (`tcp_reno_cong_avoid`).
    fn reno_cong_avoid(&mut self, acked: u32) {
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            let grown = min(self.cwnd.saturating_add(acked), self.ssthresh);
            acked -= grown - self.cwnd;
            self.cwnd = grown;
            if acked == 0 {
                return;
            }
        }
        let w = self.cwnd.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            self.cwnd = self.cwnd.saturating_add(1);
        }
        self.cwnd_cnt = self.cwnd_cnt.saturating_add(acked);
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            self.cwnd = self.cwnd.saturating_add(delta);
        }
    }

    /// `inigo_cong_avoid` (§3.4): slow start with the RTT check, then `cong_avoid_ai`.
    fn cong_avoid(&mut self, a: &Ack) {
        if !a.cwnd_limited {
            return;
        }
        let mut acked = a.acked_pkts;
        if self.in_slow_start() {
            if self.rtts_observed >= u64::from(self.cfg.ss_obs_needed) {
                self.alpha_updates += 1;
                self.alpha = update_alpha(self.alpha, self.rtts_late, self.rtts_observed, self.cfg.shift_g);
                if self.alpha > 0 {
                    self.enter_cwr(a.inflight_pkts);
                    return;
                }
            }
            let cap = self.ssthresh.saturating_add(1);
            let grown = min(self.cwnd.saturating_add(acked), cap);
            acked -= grown.saturating_sub(self.cwnd).min(acked);
            self.cwnd = grown.max(self.cwnd);
            if acked == 0 {
                return;
            }
        }
        self.cong_avoid_ai(self.cwnd, acked, a.inflight_pkts);
    }

    /// `inigo_cong_avoid_ai` (§3.5), with the configured trigger.
    fn cong_avoid_ai(&mut self, w: u32, acked: u32, inflight_pkts: u32) {
        if self.cwnd_cnt >= w {
            self.cwnd = self.cwnd.saturating_add(if self.cfg.w_sub != 0 { 2 } else { 1 });
            self.cwnd_cnt = 0;
            self.last_check_cnt = 0;
        }
        let interval = if self.cfg.w_sub != 0 { min(w, self.cfg.w_sub) } else { w }.max(1);
        // `is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
        #[allow(clippy::manual_is_multiple_of)]
        let landed = match self.cfg.trigger {
            Trigger::ExactMultiple => self.cwnd_cnt % interval == 0,
            Trigger::Crossing => self.cwnd_cnt / interval > self.last_check_cnt / interval,
        };
        self.last_check_cnt = self.cwnd_cnt;
        if self.cwnd_cnt >= interval && (landed || self.cwnd_cnt >= w) {
            self.alpha_updates += 1;
            self.alpha = update_alpha(self.alpha, self.rtts_late, self.rtts_observed, self.cfg.shift_g);
            if self.alpha > 0 {
                self.enter_cwr(inflight_pkts);
            }
        }
        if self.cwnd_cnt < w {
            self.cwnd_cnt = self.cwnd_cnt.saturating_add(acked);
        }
    }

    /// Fast retransmit (§3.8): the mode's ssthresh, once per congestion episode.
    pub fn on_loss(&mut self, inflight_pkts: u32) {
        if self.ca_state != CaState::Open {
            return;
        }
        let ss = match self.mode {
            Mode::Rtt => rtt_ssthresh(self.cwnd, self.alpha, self.cfg.w_sub),
            Mode::Ecn => ecn_ssthresh(self.cwnd, self.alpha),
        };
        self.reduce(ss, CaState::Recovery, inflight_pkts);
    }

    /// A retransmission timeout (§3.8): ssthresh per the mode, then slow start again from the
    /// smallest window — two packets, the contract's floor, where Linux uses one.
    pub fn on_rto(&mut self, inflight_pkts: u32) {
        if self.mode == Mode::Ecn && self.cfg.clamp_alpha_on_loss {
            self.alpha = ALPHA_MAX;
        }
        if self.ca_state != CaState::Loss {
            self.ssthresh = match self.mode {
                Mode::Rtt => rtt_ssthresh(self.cwnd, self.alpha, self.cfg.w_sub),
                Mode::Ecn => ecn_ssthresh(self.cwnd, self.alpha),
            };
        }
        self.cwnd = MIN_CWND_PKTS;
        self.cwnd_cnt = 0;
        self.last_check_cnt = 0;
        self.ca_state = CaState::Loss;
        self.hold_pkts = u64::from(inflight_pkts.max(1));
        self.reductions += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(mode: Mode) -> Sender {
        Sender::new(SenderConfig::default(), mode, 10)
    }

    fn one(pkts: u32) -> Ack {
        Ack { acked_pkts: pkts, acked_bytes: u64::from(pkts) * 1000, cwnd_limited: true, inflight_pkts: 1000, ..Ack::default() }
    }

    #[test]
    fn t_s1_late_threshold_is_strict() {
        assert_eq!(late_threshold_us(1000, MARKTHRESH), 1169);
        let mut s = sender(Mode::Rtt);
        s.rtt_sample(1000);
        s.rtt_sample(1169);
        assert_eq!(s.rtts_late, 0, "1169 is not late");
        s.rtt_sample(1170);
        assert_eq!(s.rtts_late, 1);
        let mut s = sender(Mode::Rtt);
        s.rtt_sample(4000);
        s.rtt_sample(4679);
        assert_eq!(s.rtts_late, 0);
        s.rtt_sample(4680);
        assert_eq!((s.rtts_late, s.rtts_observed), (1, 3));
    }

    #[test]
    fn t_s2_rtt_min_starts_at_a_second_ignores_invalid_samples_and_never_rises() {
        let mut s = sender(Mode::Rtt);
        assert_eq!(s.rtt_min_us, 1_000_000);
        s.rtt_sample(0);
        assert_eq!((s.rtt_min_us, s.rtts_observed), (1_000_000, 0));
        s.rtt_sample(5000);
        s.rtt_sample(9000);
        assert_eq!(s.rtt_min_us, 5000);
        s.rtt_counted(3, 1, Some(7000));
        assert_eq!(s.rtt_min_us, 5000);
    }

    #[test]
    fn t_s3_alpha_updates() {
        let mut a = 0;
        let ups: Vec<u32> = (0..12)
            .map(|_| {
                a = update_alpha(a, 10, 10, SHIFT_G);
                a
            })
            .collect();
        assert_eq!(ups, [64, 124, 181, 234, 284, 331, 375, 416, 454, 490, 524, 556]);
        for _ in 0..200 {
            a = update_alpha(a, 10, 10, SHIFT_G);
        }
        assert_eq!(a, 1024);
        let mut decay = vec![];
        let mut a = 1024;
        let mut n = 0;
        while a > 0 {
            a = update_alpha(a, 0, 10, SHIFT_G);
            decay.push(a);
            n += 1;
        }
        assert_eq!(&decay[..10], &[960, 900, 844, 792, 743, 697, 654, 614, 576, 540]);
        assert_eq!(n, 75, "1024 decays to 0 in exactly 75 updates");
        assert_eq!((update_alpha(15, 0, 1, 4), update_alpha(16, 0, 1, 4), update_alpha(17, 0, 1, 4)), (0, 15, 16));
        assert_eq!((update_alpha(0, 8, 8, 4), update_alpha(0, 1, 8, 4), update_alpha(0, 1, 100, 4)), (64, 8, 0));
    }

    #[test]
    fn t_s4_sub_window_ssthresh() {
        for (cwnd, alpha, w_sub, want) in [
            (100, 512, 10, 98),
            (101, 512, 10, 99),
            (7, 1024, 10, 4),
            (40, 64, 10, 40),
            (200, 300, 10, 199),
            (200, 1024, 10, 195),
            (20, 1024, 10, 15),
            (1000, 1024, 10, 995),
            (100, 512, 0, 75),
            (2, 1024, 10, 2),
        ] {
            assert_eq!(rtt_ssthresh(cwnd, alpha, w_sub), want, "cwnd {cwnd}, α {alpha}, W_sub {w_sub}");
        }
    }

    #[test]
    fn t_s5_ecn_ssthresh() {
        assert_eq!((ecn_ssthresh(200, 300), ecn_ssthresh(10, 1024), ecn_ssthresh(3, 1024)), (171, 5, 2));
    }

    #[test]
    fn t_s6_ecn_alpha_over_bytes_once_per_window() {
        let mut s = sender(Mode::Ecn);
        assert_eq!(s.alpha, 1024);
        // The first window is the initial 10 packets: 2500 of 10 000 bytes echoed.
        let ece = Ack { ece: true, ece_bytes: 2500, acked_bytes: 2500, acked_pkts: 3, inflight_pkts: 20, cwnd_limited: true };
        let plain = Ack { acked_bytes: 7500, acked_pkts: 7, inflight_pkts: 20, cwnd_limited: true, ..Ack::default() };
        s.ecn_accounting(&ece);
        assert_eq!(s.alpha, 1024, "the window is not over");
        s.ecn_accounting(&plain);
        assert_eq!(s.alpha, 976);
        assert_eq!(s.window_pkts, 20, "the next window is what was in flight at its start");
    }

    #[test]
    fn t_s7_slow_start_in_rtt_mode() {
        // Seven samples, all late: no check yet, normal doubling.
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 40);
        s.rtt_sample(1000);
        for _ in 0..6 {
            s.rtt_sample(5000);
        }
        s.on_ack(&one(1));
        assert_eq!((s.cwnd, s.ca_state, s.alpha), (41, CaState::Open, 0));
        // Eight late samples: α = 64, a reduction of zero packets, the counters reset, the
        // hold-off begins.
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 40);
        s.rtt_min_us = 1000;
        for _ in 0..8 {
            s.rtt_sample(5000);
        }
        s.on_ack(&Ack { inflight_pkts: 40, ..one(1) });
        assert_eq!((s.alpha, s.ssthresh, s.cwnd, s.ca_state), (64, 40, 40, CaState::Cwr));
        assert_eq!((s.rtts_late, s.rtts_observed), (0, 0));
        // Held for the 40 packets in flight, then ssthresh + 1, then +2 per window.
        for _ in 0..40 {
            s.on_ack(&one(1));
        }
        assert_eq!((s.ca_state, s.cwnd), (CaState::Open, 40));
        s.on_ack(&one(1));
        assert_eq!(s.cwnd, 41, "slow start to ssthresh + 1");
        // With no late samples α stays 0 and slow start goes on.
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 10);
        for _ in 0..100 {
            s.rtt_sample(1000);
            s.on_ack(&one(1));
        }
        assert_eq!((s.alpha, s.cwnd, s.ssthresh), (0, 110, SSTHRESH_INFINITE));
    }

    #[test]
    fn t_s8_congestion_avoidance_adds_two_per_window() {
        let mut s = sender(Mode::Rtt);
        s.ssthresh = 5;
        for _ in 0..11 {
            s.on_ack(&one(1));
        }
        assert_eq!((s.cwnd, s.cwnd_cnt), (12, 1), "+2 on the 11th ACK");
        let mut s = Sender::new(SenderConfig { w_sub: 0, ..SenderConfig::default() }, Mode::Rtt, 10);
        s.ssthresh = 5;
        for _ in 0..11 {
            s.on_ack(&one(1));
        }
        assert_eq!(s.cwnd, 11, "+1 once per window");
    }

    #[test]
    fn t_s9_sub_window_response_holds_and_resets_rtt_counters_only() {
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 100);
        s.ssthresh = 50;
        s.alpha = 512;
        s.rtt_min_us = 1000;
        let mut acks = 0;
        while s.ca_state == CaState::Open {
            s.rtt_sample(2000);
            s.on_ack(&Ack { inflight_pkts: 50, ..one(1) });
            acks += 1;
            assert!(acks < 20);
        }
        assert_eq!(acks, 11, "the check at cwnd_cnt = 10 runs on the 11th ACK");
        assert_eq!((s.cwnd, s.ssthresh), (rtt_ssthresh(100, s.alpha, 10), s.ssthresh));
        assert_eq!((s.rtts_late, s.rtts_observed), (0, 0));
        assert_eq!(s.cwnd_cnt, 11, "cwnd_cnt is not reset (and still counts the ACK that reduced)");
        let held = s.cwnd;
        for _ in 0..49 {
            s.rtt_sample(2000);
            s.on_ack(&one(1));
        }
        assert_eq!((s.ca_state, s.cwnd), (CaState::Cwr, held), "no growth or response while held");
        s.on_ack(&one(1));
        assert_eq!(s.ca_state, CaState::Open);
    }

    #[test]
    fn t_s10_nothing_happens_when_not_cwnd_limited() {
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 40);
        s.alpha = 512;
        s.rtt_min_us = 1000;
        for _ in 0..100 {
            s.rtt_sample(5000);
            s.on_ack(&Ack { cwnd_limited: false, ..one(1) });
        }
        assert_eq!((s.cwnd, s.alpha, s.ssthresh, s.cwnd_cnt), (40, 512, SSTHRESH_INFINITE, 0));
        assert_eq!(s.rtts_observed, 100, "RTT samples are still counted");
    }

    #[test]
    fn t_s11_mode_selection_sets_the_initial_alpha() {
        assert_eq!(sender(Mode::Ecn).alpha, 1024);
        assert_eq!(sender(Mode::Rtt).alpha, 0);
    }

    #[test]
    fn t_s12_fallback_variants() {
        let window = |s: &mut Sender, ece_bytes: u64| {
            s.rtt_min_us = 1000;
            for _ in 0..10 {
                s.rtt_sample(3000);
            }
            s.ecn_accounting(&Ack {
                acked_pkts: 10,
                acked_bytes: 10_000,
                ece_bytes,
                ece: ece_bytes > 0,
                inflight_pkts: 10,
                cwnd_limited: true,
            });
        };
        let cfg = |fallback| SenderConfig { fallback, ..SenderConfig::default() };
        let mut s = Sender::new(cfg(Fallback::Intended), Mode::Ecn, 10);
        window(&mut s, 0);
        assert_eq!(s.mode, Mode::Rtt, "no marks, late RTTs: the switch never marks");
        assert_eq!(s.alpha, update_alpha(1024, 0, 10_000, 4), "α carries over");
        let mut s = Sender::new(cfg(Fallback::Intended), Mode::Ecn, 10);
        window(&mut s, 1000);
        assert_eq!(s.mode, Mode::Ecn, "marks arrive: ECN works");
        let mut s = Sender::new(cfg(Fallback::AsPublished), Mode::Ecn, 10);
        window(&mut s, 1000);
        assert_eq!(s.mode, Mode::Rtt, "as published, marks do not prevent the switch");
        let mut s = Sender::new(cfg(Fallback::Off), Mode::Ecn, 10);
        window(&mut s, 0);
        assert_eq!(s.mode, Mode::Ecn);
    }

    #[test]
    fn t_s13_first_echo_of_a_window_ends_slow_start() {
        let mut s = Sender::new(SenderConfig::default(), Mode::Ecn, 40);
        let ece = Ack { ece: true, ece_bytes: 1000, inflight_pkts: 40, ..one(1) };
        s.on_ack(&ece);
        assert_eq!(s.ca_state, CaState::Cwr);
        assert_eq!(s.ssthresh, ecn_ssthresh(40, 1024), "the DCTCP cut follows the slow-start exit");
        let before = (s.ssthresh, s.cwnd);
        s.on_ack(&ece);
        assert_eq!((s.ssthresh, s.cwnd), before, "a second echo in the window does nothing more");
        // In congestion avoidance the exit does nothing.
        let mut s = Sender::new(SenderConfig::default(), Mode::Ecn, 40);
        s.ssthresh = 20;
        s.ecn_accounting(&ece);
        assert_eq!(s.ssthresh, 20);
    }

    #[test]
    fn t_s14_loss_and_timeout() {
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 100);
        s.on_loss(50);
        assert_eq!((s.ssthresh, s.cwnd, s.ca_state), (100, 100, CaState::Recovery), "α = 0: no backoff (faithful)");
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 100);
        s.alpha = 1024;
        s.on_loss(50);
        assert_eq!(s.ssthresh, 95);
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 100);
        s.alpha = 1024;
        s.on_rto(50);
        assert_eq!((s.cwnd, s.ssthresh, s.ca_state), (2, 95, CaState::Loss));
        let mut s = Sender::new(SenderConfig { clamp_alpha_on_loss: true, ..SenderConfig::default() }, Mode::Ecn, 100);
        s.alpha = 10;
        s.on_rto(50);
        assert_eq!(s.alpha, 1024);
    }

    #[test]
    fn t_s15_alpha_sensitivity() {
        for (w_sub, want) in [(20, 104), (3, 684), (10, 206), (512, 4)] {
            let a = alpha_min(w_sub);
            assert_eq!(a, want, "W_sub {w_sub}");
            assert!((w_sub * a) / 2048 >= 1);
        }
    }

    /// Kernel-faithful edge behaviours of §3.5, one packet per ACK unless noted, no reductions
    /// (no late samples: α stays 0 and only the update points are counted).
    #[test]
    fn t_s18_edge_behaviours() {
        let points = |start: u32, pkts: u32, acks: u32, trigger: Trigger| -> (Vec<(u32, u32)>, Sender) {
            let mut s = Sender::new(SenderConfig { trigger, ..SenderConfig::default() }, Mode::Rtt, start);
            s.ssthresh = 1;
            let mut hits = vec![];
            for i in 1..=acks {
                let (before, cwnd) = (s.alpha_updates, s.cwnd);
                s.on_ack(&Ack { acked_pkts: pkts, cwnd_limited: true, inflight_pkts: 1000, ..Ack::default() });
                if s.alpha_updates > before {
                    hits.push((i, cwnd));
                }
            }
            (hits, s)
        };
        let (at10, _) = points(10, 1, 30, Trigger::ExactMultiple);
        assert_eq!(at10.first(), Some(&(21, 12)), "from cwnd 10 the first update point is the 21st ACK, at cwnd 12");
        let (at12, _) = points(12, 1, 15, Trigger::ExactMultiple);
        assert_eq!(at12.first().map(|h| h.0), Some(11));
        assert_eq!(points(40, 2, 60, Trigger::ExactMultiple).0.len(), 10);
        assert_eq!(points(40, 3, 60, Trigger::ExactMultiple).0.len(), 4);
        assert_eq!(points(40, 7, 60, Trigger::ExactMultiple).0.len(), 0, "stretch ACKs skip every update point");
        assert!(!points(40, 7, 60, Trigger::Crossing).0.is_empty(), "crossing still fires");
    }

    /// `zero_cut = "skip"`: the slow-start exit of T-S7 with α = 64, a zero-packet cut, ends slow
    /// start without CWR, and congestion avoidance grows the window on at once (where "hold"
    /// holds it for the 40 packets in flight, T-S7); a cut of a packet or more is taken as with
    /// "hold".
    #[test]
    fn zero_cuts_can_skip_the_hold() {
        let skip = SenderConfig { zero_cut: ZeroCut::Skip, ..SenderConfig::default() };
        let mut s = Sender::new(skip, Mode::Rtt, 40);
        s.rtt_min_us = 1000;
        for _ in 0..8 {
            s.rtt_sample(5000);
        }
        s.on_ack(&Ack { inflight_pkts: 40, ..one(1) });
        assert_eq!((s.alpha, s.ssthresh, s.cwnd, s.ca_state, s.reductions), (64, 39, 40, CaState::Open, 0));
        assert_eq!((s.rtts_late, s.rtts_observed), (8, 8), "counters kept, as when α = 0");
        for _ in 0..45 {
            s.rtt_sample(1000);
            s.on_ack(&Ack { inflight_pkts: 40, ..one(1) });
        }
        assert_eq!((s.ca_state, s.reductions), (CaState::Open, 0), "no CWR while α decays");
        assert!(s.cwnd >= 42, "congestion avoidance from the first ACK: +2 per window, cwnd {}", s.cwnd);
        // α = 1024 at cwnd 40 cuts half a sub-window's share: a real reduction, held as with "hold".
        let mut s = Sender::new(skip, Mode::Rtt, 40);
        s.ssthresh = 1;
        s.alpha = 1024;
        s.enter_cwr(40);
        assert!(s.cwnd < 40 && s.ca_state == CaState::Cwr, "{} {:?}", s.cwnd, s.ca_state);
    }

    #[test]
    fn t_s18_alpha_decays_through_repeated_holds_after_the_slow_start_exit() {
        let mut s = Sender::new(SenderConfig::default(), Mode::Rtt, 40);
        s.rtt_min_us = 1000;
        for _ in 0..8 {
            s.rtt_sample(5000);
        }
        s.on_ack(&Ack { inflight_pkts: 40, ..one(1) });
        assert_eq!((s.alpha, s.ca_state), (64, CaState::Cwr));
        let mut holds = 1;
        for _ in 0..5000 {
            s.rtt_sample(1000);
            s.on_ack(&Ack { inflight_pkts: 40, ..one(1) });
            if s.ca_state == CaState::Cwr && s.reductions > holds {
                holds = s.reductions;
            }
            if s.alpha == 0 {
                break;
            }
        }
        assert_eq!(s.alpha, 0);
        assert!((15..=30).contains(&holds), "≈ 22 CWR episodes while α decays from 64: {holds}");
        // Held at ssthresh throughout; the ACK whose update finds α = 0 slow-starts by one.
        assert_eq!((s.ssthresh, s.cwnd), (40, 41));
    }

    #[test]
    fn counters_saturate_instead_of_overflowing() {
        let mut s = sender(Mode::Rtt);
        s.rtt_counted(u64::MAX, u64::MAX, Some(100));
        s.rtt_counted(u64::MAX, u64::MAX, Some(100));
        assert_eq!(s.rtts_observed, u64::MAX);
        assert!(update_alpha(0, u64::MAX, 1, SHIFT_G) <= ALPHA_MAX);
    }
}
