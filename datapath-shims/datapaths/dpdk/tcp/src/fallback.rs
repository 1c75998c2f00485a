//! The in-process congestion control that steers a flow while no CCP agent
//! does: Reno (RFC 5681, with RFC 3465 byte counting) and Cubic (RFC 9438).
//! Both consume the same `AckSample`s the agent would get and return the
//! window in bytes; they can take over a running flow via `resume`.
//!
//! A loss event is an ACK or timeout that marked segments lost, or an ACK
//! with ECE (RFC 3168 §6.1.2 treats it like a loss). The window is cut at
//! most once per round: after a cut, the bytes that were outstanding then
//! (≈ the prior window) must be delivered before another cut counts — the
//! samples carry no sequence numbers, so this stands in for the recovery point.
//!
//! Cubic uses integer arithmetic except for a few f64 multiplications: no
//! `powf`/`ln` (libccp's exported `log` symbol shadows libm's).

use crate::conn::AckSample;

/// RFC 3465 §2.2: slow start may grow by at most L = 2 MSS per ACK.
const ABC_LIMIT_SEGS: u32 = 2;
/// RFC 5681 §3.1: ssthresh never falls below 2 MSS.
const MIN_SSTHRESH_SEGS: u32 = 2;
/// In congestion avoidance a flow counts as window-limited when what was in flight before the
/// ACK came within this many segments of the window.
const CA_LIMITED_SLACK_SEGS: u32 = 3;

/// Whether the window, not the receiver or the application, held the flow back when this ACK
/// arrived: only then may the window grow (RFC 7661 §4.1; Linux's `tcp_is_cwnd_limited`).
/// Without this a receiver-limited flow's window would grow on every ACK without bound and
/// hand a huge burst to whatever follows. In slow start the window may grow up to twice what
/// was in flight, as Linux allows.
fn cwnd_limited(s: &AckSample, cwnd: u32, mss: u32, slow_start: bool) -> bool {
    let before = u64::from(s.bytes_in_flight) + u64::from(s.bytes_acked) + u64::from(s.bytes_misordered);
    if slow_start {
        2 * before >= u64::from(cwnd)
    } else {
        before + u64::from(CA_LIMITED_SLACK_SEGS * mss) >= u64::from(cwnd)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reno {
    cwnd: u32,
    ssthresh: u32,
    ca_acc: u64,
    recovery_left: Option<u64>,
}

impl Reno {
    pub fn new(init_cwnd_bytes: u32) -> Reno {
        Reno { cwnd: init_cwnd_bytes, ssthresh: u32::MAX, ca_acc: 0, recovery_left: None }
    }

    pub fn cwnd_bytes(&self) -> u32 {
        self.cwnd
    }

    pub fn ssthresh_bytes(&self) -> u32 {
        self.ssthresh
    }

    pub fn in_recovery(&self) -> bool {
        self.recovery_left.is_some()
    }

    pub fn resume(&mut self, cwnd_bytes: u32) {
        self.cwnd = cwnd_bytes;
        self.ca_acc = 0;
        self.recovery_left = None;
    }

    pub fn on_sample(&mut self, s: &AckSample, mss: u32) -> u32 {
        let mss = mss.max(1);
        let delivered = u64::from(s.bytes_acked) + u64::from(s.bytes_misordered);
        if s.was_timeout {
            // RFC 5681 §3.1 eq. (4): ssthresh = max(FlightSize/2, 2 MSS), cwnd = 1 MSS.
            self.ssthresh = (self.cwnd / 2).max(MIN_SSTHRESH_SEGS * mss);
            self.recovery_left = Some(u64::from(self.cwnd));
            self.cwnd = mss;
            self.ca_acc = 0;
            return self.cwnd;
        }
        // The ACK that ends recovery still belongs to the reduced round: no growth on it.
        let was_in_recovery = self.recovery_left.is_some();
        if let Some(left) = self.recovery_left {
            let left = left.saturating_sub(delivered);
            self.recovery_left = (left > 0).then_some(left);
        }
        let loss_event = s.lost_pkts_sample > 0 || s.ecn_bytes > 0;
        if loss_event && self.recovery_left.is_none() {
            self.ssthresh = (self.cwnd / 2).max(MIN_SSTHRESH_SEGS * mss);
            self.recovery_left = Some(u64::from(self.cwnd).max(1));
            self.cwnd = self.ssthresh;
            self.ca_acc = 0;
            return self.cwnd;
        }
        if was_in_recovery || !cwnd_limited(s, self.cwnd, mss, self.cwnd < self.ssthresh) {
            return self.cwnd;
        }
        if self.cwnd < self.ssthresh {
            let inc = delivered.min(u64::from(ABC_LIMIT_SEGS * mss)) as u32;
            self.cwnd = self.cwnd.saturating_add(inc).min(self.ssthresh.max(self.cwnd));
            if self.cwnd >= self.ssthresh {
                self.ca_acc = 0;
            }
        } else {
            // RFC 5681 §3.1: about one MSS per window's worth of deliveries.
            self.ca_acc += delivered;
            if self.ca_acc >= u64::from(self.cwnd) {
                self.ca_acc -= u64::from(self.cwnd);
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
        self.cwnd
    }
}

/// Integer cube root (floor) by bisection; exact for all u128 inputs.
pub fn icbrt_u128(v: u128) -> u64 {
    let (mut lo, mut hi) = (0u128, 1u128 << 43);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if mid.checked_mul(mid).and_then(|sq| sq.checked_mul(mid)).is_some_and(|cube| cube <= v) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo as u64
}

/// RFC 9438 constants as fractions: beta_cubic = 7/10, C = 4/10 (segments, seconds).
const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
const C_NUM: u128 = 4;
const C_DEN: u128 = 10;
const US_PER_S: u128 = 1_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Cubic {
    cwnd: u32,
    ssthresh: u32,
    /// W_max in bytes (the window before the last cut).
    w_max: u64,
    /// Time origin of the current congestion-avoidance epoch.
    epoch_us: Option<u64>,
    k_us: u64,
    origin: u64,
    /// Reno-friendly estimate W_est (RFC 9438 §4.3) and its fractional part.
    w_est: u64,
    est_acc: u64,
    min_rtt_us: Option<u64>,
    recovery_left: Option<u64>,
}

impl Cubic {
    pub fn new(init_cwnd_bytes: u32) -> Cubic {
        Cubic {
            cwnd: init_cwnd_bytes,
            ssthresh: u32::MAX,
            w_max: 0,
            epoch_us: None,
            k_us: 0,
            origin: 0,
            w_est: 0,
            est_acc: 0,
            min_rtt_us: None,
            recovery_left: None,
        }
    }

    pub fn cwnd_bytes(&self) -> u32 {
        self.cwnd
    }

    pub fn ssthresh_bytes(&self) -> u32 {
        self.ssthresh
    }

    pub fn resume(&mut self, cwnd_bytes: u32) {
        self.cwnd = cwnd_bytes;
        self.epoch_us = None;
        self.recovery_left = None;
    }

    fn cut(&mut self, mss: u32) {
        let cwnd = u64::from(self.cwnd);
        // RFC 9438 §4.7 fast convergence: below the last plateau, release more.
        self.w_max = if cwnd < self.w_max { cwnd * (BETA_DEN + BETA_NUM) / (2 * BETA_DEN) } else { cwnd };
        self.ssthresh = ((cwnd * BETA_NUM / BETA_DEN) as u32).max(MIN_SSTHRESH_SEGS * mss);
        self.epoch_us = None;
    }

    pub fn on_sample(&mut self, s: &AckSample, mss: u32) -> u32 {
        let mss = mss.max(1);
        if let Some(rtt) = s.rtt_sample_us {
            let rtt = u64::from(rtt);
            self.min_rtt_us = Some(self.min_rtt_us.map_or(rtt, |m| m.min(rtt)));
        }
        let delivered = u64::from(s.bytes_acked) + u64::from(s.bytes_misordered);
        if s.was_timeout {
            self.cut(mss);
            self.recovery_left = Some(u64::from(self.cwnd));
            self.cwnd = mss;
            return self.cwnd;
        }
        // The ACK that ends recovery still belongs to the reduced round: no growth on it.
        let was_in_recovery = self.recovery_left.is_some();
        if let Some(left) = self.recovery_left {
            let left = left.saturating_sub(delivered);
            self.recovery_left = (left > 0).then_some(left);
        }
        let loss_event = s.lost_pkts_sample > 0 || s.ecn_bytes > 0;
        if loss_event && self.recovery_left.is_none() {
            let prior = u64::from(self.cwnd).max(1);
            self.cut(mss);
            self.cwnd = self.ssthresh;
            self.recovery_left = Some(prior);
            return self.cwnd;
        }
        if was_in_recovery || delivered == 0 || !cwnd_limited(s, self.cwnd, mss, self.cwnd < self.ssthresh) {
            return self.cwnd;
        }
        if self.cwnd < self.ssthresh {
            let inc = delivered.min(u64::from(ABC_LIMIT_SEGS * mss)) as u32;
            self.cwnd = self.cwnd.saturating_add(inc).min(self.ssthresh.max(self.cwnd));
            return self.cwnd;
        }
        self.congestion_avoidance(delivered, mss, s.now_us);
        self.cwnd
    }

    fn congestion_avoidance(&mut self, delivered: u64, mss: u32, now_us: u64) {
        let cwnd = u64::from(self.cwnd);
        let mss64 = u64::from(mss);
        let epoch = match self.epoch_us {
            Some(e) => e,
            None => {
                self.epoch_us = Some(now_us);
                if cwnd < self.w_max {
                    // K = cbrt((W_max - cwnd) / C) in seconds, here in µs.
                    let gap_segs_scaled = u128::from(self.w_max - cwnd) * C_DEN * US_PER_S * US_PER_S * US_PER_S;
                    self.k_us = icbrt_u128(gap_segs_scaled / (C_NUM * u128::from(mss64)));
                    self.origin = self.w_max;
                } else {
                    self.k_us = 0;
                    self.origin = cwnd;
                }
                self.w_est = cwnd;
                self.est_acc = 0;
                now_us
            }
        };
        // RFC 9438 §4.2: aim at the curve one RTT ahead.
        let t_us = now_us.saturating_sub(epoch) + self.min_rtt_us.unwrap_or(0);
        let dt = (t_us as f64 - self.k_us as f64) / 1e6;
        let delta_bytes = C_NUM as f64 / C_DEN as f64 * dt * dt * dt * mss64 as f64;
        let target = (self.origin as f64 + delta_bytes).max(0.0);
        // RFC 9438 §4.2: the target is clamped to [cwnd, 1.5 cwnd].
        let target = (target.min(1.5 * cwnd as f64)) as u64;
        let mut new_cwnd = cwnd;
        if target > cwnd {
            new_cwnd = cwnd + ((target - cwnd) * delivered / cwnd.max(1)).max(1);
        }
        // RFC 9438 §4.3: alpha = 3(1-beta)/(1+beta) = 9/17 MSS per window.
        self.est_acc += delivered * 9;
        let per_mss = cwnd.max(1) * 17;
        if self.est_acc >= per_mss {
            let segs = self.est_acc / per_mss;
            self.w_est += segs * mss64;
            self.est_acc -= segs * per_mss;
        }
        if self.w_est > new_cwnd {
            new_cwnd = self.w_est;
        }
        self.cwnd = new_cwnd.min(u64::from(u32::MAX)) as u32;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    Reno(Reno),
    Cubic(Cubic),
}

impl Fallback {
    pub fn new_reno(mss: u32, init_cwnd_bytes: u32) -> Fallback {
        Fallback::Reno(Reno::new(init_cwnd_bytes.max(mss)))
    }

    pub fn new_cubic(mss: u32, init_cwnd_bytes: u32) -> Fallback {
        Fallback::Cubic(Cubic::new(init_cwnd_bytes.max(mss)))
    }

    /// Take over a running flow at its current window (slow start is not
    /// re-entered unless the flow was still below ssthresh).
    pub fn resume(&mut self, cwnd_bytes: u32) {
        match self {
            Fallback::Reno(r) => r.resume(cwnd_bytes),
            Fallback::Cubic(c) => c.resume(cwnd_bytes),
        }
    }

    pub fn on_sample(&mut self, s: &AckSample, mss: u32) -> u32 {
        match self {
            Fallback::Reno(r) => r.on_sample(s, mss),
            Fallback::Cubic(c) => c.on_sample(s, mss),
        }
    }

    pub fn cwnd_bytes(&self) -> u32 {
        match self {
            Fallback::Reno(r) => r.cwnd_bytes(),
            Fallback::Cubic(c) => c.cwnd_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    /// An ACK of `bytes` to a sender that keeps its window full (what was in flight before it:
    /// the whole window).
    fn ack_of(f: &Fallback, bytes: u32, now_us: u64) -> AckSample {
        AckSample {
            bytes_acked: bytes,
            packets_acked: 1,
            rtt_sample_us: Some(10_000),
            bytes_in_flight: f.cwnd_bytes().saturating_sub(bytes),
            now_us,
            ..AckSample::default()
        }
    }

    fn loss(now_us: u64) -> AckSample {
        AckSample { lost_pkts_sample: 1, now_us, ..AckSample::default() }
    }

    /// One round: every segment of the current window is acked individually.
    fn round(f: &mut Fallback, now_us: u64) -> u32 {
        let segs = f.cwnd_bytes() / MSS;
        for _ in 0..segs {
            f.on_sample(&ack_of(f, MSS, now_us), MSS);
        }
        f.cwnd_bytes()
    }

    #[test]
    fn reno_slow_start_doubles_per_round() {
        let mut f = Fallback::new_reno(MSS, 10 * MSS);
        assert_eq!(round(&mut f, 0), 20 * MSS);
        assert_eq!(round(&mut f, 0), 40 * MSS);
    }

    #[test]
    fn reno_halves_once_per_loss_event_then_grows_one_mss_per_round() {
        let mut f = Fallback::new_reno(MSS, 40 * MSS);
        assert_eq!(f.on_sample(&loss(0), MSS), 20 * MSS);
        // Further losses in the same round do not cut again.
        assert_eq!(f.on_sample(&loss(0), MSS), 20 * MSS);
        // Deliver the prior window (40 MSS) to leave recovery; no growth meanwhile.
        for _ in 0..40 {
            assert_eq!(f.on_sample(&ack_of(&f, MSS, 0), MSS), 20 * MSS);
        }
        // Congestion avoidance: +1 MSS per window's worth of ACKs.
        assert_eq!(round(&mut f, 0), 21 * MSS);
        assert_eq!(round(&mut f, 0), 22 * MSS);
        // A new loss event after recovery cuts again.
        assert_eq!(f.on_sample(&loss(0), MSS), 11 * MSS);
    }

    #[test]
    fn reno_timeout_goes_to_one_mss_and_slow_starts() {
        let mut f = Fallback::new_reno(MSS, 40 * MSS);
        let t = AckSample { was_timeout: true, lost_pkts_sample: 40, ..AckSample::default() };
        assert_eq!(f.on_sample(&t, MSS), MSS);
        if let Fallback::Reno(r) = &f {
            assert_eq!(r.ssthresh_bytes(), 20 * MSS);
        }
    }

    #[test]
    fn reno_ece_is_a_loss_event() {
        let mut f = Fallback::new_reno(MSS, 40 * MSS);
        let s = AckSample { bytes_acked: MSS, ecn_bytes: MSS, ecn_packets: 1, ..AckSample::default() };
        assert_eq!(f.on_sample(&s, MSS), 20 * MSS);
    }

    #[test]
    fn a_window_that_is_not_the_limit_does_not_grow() {
        for mut f in [Fallback::new_reno(MSS, 10 * MSS), Fallback::new_cubic(MSS, 10 * MSS)] {
            // The receiver holds the flow at 3 segments in flight: slow start must not run the
            // window up past twice that.
            for _ in 0..100 {
                let s = AckSample { bytes_acked: MSS, packets_acked: 1, bytes_in_flight: 2 * MSS, ..AckSample::default() };
                f.on_sample(&s, MSS);
            }
            assert_eq!(f.cwnd_bytes(), 10 * MSS, "{f:?}");
            // Window-limited again: it grows.
            assert!(round(&mut f, 0) > 10 * MSS, "{f:?}");
        }
    }

    #[test]
    fn resume_takes_over_window() {
        let mut f = Fallback::new_cubic(MSS, 10 * MSS);
        f.resume(77 * MSS);
        assert_eq!(f.cwnd_bytes(), 77 * MSS);
    }

    #[test]
    fn cubic_cuts_to_seven_tenths_and_follows_the_cubic_curve() {
        let mut f = Fallback::new_cubic(MSS, 100 * MSS);
        assert_eq!(f.on_sample(&loss(0), MSS), 70 * MSS);
        // Leave recovery: deliver the prior window.
        for _ in 0..100 {
            assert_eq!(f.on_sample(&ack_of(&f, MSS, 1), MSS), 70 * MSS);
        }
        // K = cbrt((100 - 70) / 0.4) s ≈ 4.217 s.
        let k_s = 4.217_163;
        // One sample per 100 ms delivering a whole window: each moves cwnd
        // onto W_cubic(t + RTT) (RTT = 10 ms), as long as that is above the
        // Reno-friendly estimate (which grows ~0.53 MSS per call here).
        let mut epoch = None;
        let mut now = 100_000u64;
        let mut checked = 0;
        while now < 7_000_000 {
            let cwnd = f.cwnd_bytes();
            let got = f.on_sample(&ack_of(&f, cwnd, now), MSS);
            let e = *epoch.get_or_insert(now);
            let t = (now - e) as f64 / 1e6 + 0.01;
            let w_cubic = (100.0 + 0.4 * (t - k_s) * (t - k_s) * (t - k_s)) * f64::from(MSS);
            let expect = w_cubic.min(1.5 * f64::from(cwnd)).max(f64::from(cwnd));
            let reno_est = 70.0 * f64::from(MSS) + (checked as f64 + 1.0) * 0.53 * f64::from(MSS);
            if expect > reno_est + f64::from(MSS) {
                assert!((f64::from(got) - expect).abs() <= 1.5 * f64::from(MSS), "t {t}: cwnd {got} vs W_cubic {expect}");
            }
            checked += 1;
            now += 100_000;
        }
        if let Fallback::Cubic(c) = &f {
            assert!(c.k_us.abs_diff(4_217_163) < 1_000, "K {}", c.k_us);
        }
        // Concave then convex: well beyond W_max after K + 2.8 s.
        assert!(f.cwnd_bytes() > 105 * MSS, "{}", f.cwnd_bytes());
    }

    #[test]
    fn cubic_fast_convergence_lowers_wmax() {
        let mut c = Cubic::new(100 * MSS);
        c.on_sample(&loss(0), MSS);
        assert_eq!(c.w_max, 100 * u64::from(MSS));
        c.recovery_left = None;
        c.on_sample(&loss(1), MSS);
        // cwnd 70 < W_max 100: W_max = 70 * 1.7 / 2 = 59.5
        assert_eq!(c.w_max, 59_500);
        assert_eq!(c.cwnd_bytes(), 49 * MSS);
    }

    #[test]
    fn icbrt_exact() {
        for v in [0u128, 1, 7, 8, 9, 26, 27, 28, 1 << 60, u128::MAX] {
            let r = u128::from(icbrt_u128(v));
            assert!(r * r * r <= v);
            let above = (r + 1).checked_mul(r + 1).and_then(|sq| sq.checked_mul(r + 1));
            assert!(above.is_none_or(|c| c > v));
        }
    }
}
