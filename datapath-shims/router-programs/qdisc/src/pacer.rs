//! HULL's host pacer (specs/dc.md §3.4; thesis §4.1.3, §4.3.2–4.3.4, Table 4.3), shared by the
//! simulator's hosts and the router's sender side.
//!
//! HULL leaves bandwidth headroom with phantom queues and keeps the real queues near empty; what
//! still fills them are the hosts' line-rate bursts (LSO segments, ACKs coalesced by the
//! receiver's NIC). The pacer smooths the bursts of the flows that cause congestion and lets the
//! rest pass: a single token bucket behind a FIFO at the host's NIC, fed only by flows in its
//! *flow association table*.
//!
//! - **Association**: flows start unpaced. Each ECN-Echo ACK a flow receives puts it in the table
//!   with probability p_a (1/8), so a flow with k marked ACKs is paced with probability
//!   1 − (1 − p_a)^k and small flows rarely are. An entry ends after T_i without a packet of its
//!   flow; a full table evicts its least recently active entry (§8 A17).
//! - **Rate** (eq. 4.4): every T_r, `R ← (1 − η)·R + η·M_r/T_r + β·Q`, where M_r is the bytes
//!   that entered the bucket's FIFO in the interval and Q its backlog; β in 1/s (§8 A16). A
//!   constant paced input R* has the fixed point R = R*, Q = 0. R starts at line rate and is
//!   clamped to [min rate, line rate].
//! - **Tokens**: every tick (16 µs) the bucket gains R × tick, up to its depth (3 KB). The FIFO's
//!   head leaves while the bucket holds a positive balance, which may go negative by less than one
//!   packet: a full bucket releases at most depth + one MTU back to back (T-H5).
//! - **Input**: packets of associated flows enter the FIFO at most at line rate (the NetFPGA sat
//!   on the host's wire) and only while it has room for them ([`Pacer::admit`]); what a full FIFO
//!   means is the caller's (the simulator's flows wait, the router drops).
//!
//! Time is a count of caller units (`PacerParams::units_per_sec`: picoseconds in the simulator,
//! nanoseconds in the router) and runs on two fixed grids, the ticks and the rate updates
//! (multiples of their periods from time 0). The caller calls [`Pacer::advance`] before looking at
//! the pacer and wakes up at [`Pacer::next_event`] only while the FIFO holds packets: an idle pacer
//! needs no timer, and `advance` replays the grid it missed exactly (the token refills, and the
//! rate's decay with nothing entering in closed form). Random association draws come from the
//! caller, so the pacer holds no generator.

use std::collections::VecDeque;

use crate::ParamError;

/// T_r, µs (Table 4.3).
pub const RATE_INTERVAL_US: f64 = 64.0;
/// η (Table 4.3).
pub const ETA: f64 = 0.125;
/// β, 1/s (Table 4.3's 2^4, §8 A16).
pub const BETA_PER_S: f64 = 16.0;
/// p_a (Table 4.3).
pub const ASSOCIATE_PROBABILITY: f64 = 0.125;
/// T_i, µs (Table 4.3).
pub const IDLE_TIMEOUT_US: f64 = 10_000.0;
/// Flow association table entries (§8 A17).
pub const TABLE_ENTRIES: u32 = 64;
/// The NetFPGA's FIFO, bytes.
pub const FIFO_BYTES: u32 = 128_000;
/// The bucket's depth, bytes (Table 4.3).
pub const DEPTH_BYTES: u32 = 3_000;
/// Token refill period, µs (Table 4.3).
pub const TICK_US: f64 = 16.0;
/// The token rate's floor, Mbit/s (§8 A16).
pub const MIN_RATE_MBPS: f64 = 0.5;

/// The pacer's settings in natural units (Table 4.3's by default), for callers that take them
/// from a user: [`PacerSettings::params`] turns them into the model's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerSettings {
    /// T_r, µs.
    pub rate_interval_us: f64,
    pub eta: f64,
    /// β, 1/s.
    pub beta_per_s: f64,
    pub associate_probability: f64,
    /// T_i, µs.
    pub idle_timeout_us: f64,
    pub table_entries: u32,
    pub fifo_bytes: u32,
    pub depth_bytes: u32,
    pub tick_us: f64,
    pub min_rate_mbps: f64,
}

impl Default for PacerSettings {
    fn default() -> Self {
        PacerSettings {
            rate_interval_us: RATE_INTERVAL_US,
            eta: ETA,
            beta_per_s: BETA_PER_S,
            associate_probability: ASSOCIATE_PROBABILITY,
            idle_timeout_us: IDLE_TIMEOUT_US,
            table_entries: TABLE_ENTRIES,
            fifo_bytes: FIFO_BYTES,
            depth_bytes: DEPTH_BYTES,
            tick_us: TICK_US,
            min_rate_mbps: MIN_RATE_MBPS,
        }
    }
}

impl PacerSettings {
    /// What must hold whatever the line rate (`max_packet_bytes`: the largest packet the pacer
    /// must hold). An error names the field.
    pub fn check(&self, max_packet_bytes: u32) -> Result<(), ParamError> {
        let positive = |param: &'static str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(ParamError::new(param, format!("must be a positive number, got {v}")))
            }
        };
        positive("rate_interval_us", self.rate_interval_us)?;
        positive("tick_us", self.tick_us)?;
        positive("idle_timeout_us", self.idle_timeout_us)?;
        positive("min_rate_mbps", self.min_rate_mbps)?;
        if !(self.beta_per_s >= 0.0 && self.beta_per_s.is_finite()) {
            return Err(ParamError::new("beta_per_s", format!("must be ≥ 0, got {}", self.beta_per_s)));
        }
        if !(self.eta > 0.0 && self.eta <= 1.0) {
            return Err(ParamError::new("eta", format!("must be in (0, 1], got {}", self.eta)));
        }
        if !(0.0..=1.0).contains(&self.associate_probability) {
            return Err(ParamError::new(
                "associate_probability",
                format!("must be in [0, 1], got {}", self.associate_probability),
            ));
        }
        if self.table_entries == 0 {
            return Err(ParamError::new("table_entries", "must be ≥ 1"));
        }
        if self.depth_bytes == 0 {
            return Err(ParamError::new("depth_bytes", "must be ≥ 1"));
        }
        // Else an associated flow could never send.
        if self.fifo_bytes < max_packet_bytes {
            return Err(ParamError::new(
                "fifo_bytes",
                format!("must hold one full packet ({max_packet_bytes} bytes), got {}", self.fifo_bytes),
            ));
        }
        Ok(())
    }

    /// The model's parameters for a NIC of `line_rate_bps`, in units of `1 / units_per_sec`
    /// seconds, after [`PacerSettings::check`] and the check that the bucket can pass line rate.
    pub fn params(&self, line_rate_bps: f64, units_per_sec: u64, max_packet_bytes: u32) -> Result<PacerParams, ParamError> {
        self.check(max_packet_bytes)?;
        if !(line_rate_bps > 0.0 && line_rate_bps.is_finite()) {
            return Err(ParamError::new("line_rate", format!("must be a positive rate, got {line_rate_bps} bit/s")));
        }
        // A bucket that cannot hold one tick's tokens at line rate caps every paced flow below
        // it (the testbed's 3 KB and 16 µs suit 1 Gbit/s, not 10).
        let per_tick = line_rate_bps / 8.0 * self.tick_us * 1e-6;
        if f64::from(self.depth_bytes) + f64::from(max_packet_bytes) < per_tick {
            return Err(ParamError::new(
                "depth_bytes",
                format!(
                    "a tick's tokens at the {:.1} Mbit/s line rate are {per_tick:.0} bytes, more than the bucket's depth ({}) \
                     plus one packet: paced flows could never reach line rate (shorten the tick or deepen the bucket)",
                    line_rate_bps / 1e6,
                    self.depth_bytes
                ),
            ));
        }
        let units = |us: f64| (us * (units_per_sec as f64 / 1e6)).round() as u64;
        Ok(PacerParams {
            units_per_sec,
            rate_interval: units(self.rate_interval_us).max(1),
            eta: self.eta,
            beta_per_s: self.beta_per_s,
            associate_probability: self.associate_probability,
            idle_timeout: units(self.idle_timeout_us),
            table_entries: self.table_entries as usize,
            fifo_bytes: u64::from(self.fifo_bytes),
            depth_bytes: f64::from(self.depth_bytes),
            tick: units(self.tick_us).max(1),
            min_rate_bytes_per_s: self.min_rate_mbps * 1e6 / 8.0,
            line_rate_bytes_per_s: line_rate_bps / 8.0,
        })
    }
}

/// The pacer's settings in the caller's time units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerParams {
    /// Time units per second.
    pub units_per_sec: u64,
    /// T_r.
    pub rate_interval: u64,
    pub eta: f64,
    pub beta_per_s: f64,
    pub associate_probability: f64,
    /// T_i.
    pub idle_timeout: u64,
    pub table_entries: usize,
    pub fifo_bytes: u64,
    pub depth_bytes: f64,
    pub tick: u64,
    pub min_rate_bytes_per_s: f64,
    /// The NIC's line rate: the token rate's ceiling.
    pub line_rate_bytes_per_s: f64,
}

/// Whether a packet of an associated flow may enter the FIFO now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Now,
    /// The FIFO's input is still taking the previous packet.
    At(u64),
    /// No room.
    Full,
}

/// What a pacer did (times in its units).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PacerStats {
    pub packets: u64,
    pub bytes: u64,
    /// Flows put in a table (an ECN-Echo drawn for a flow not in it).
    pub associations: u64,
    /// Time packets spent in the FIFO, summed, and the longest.
    pub delay_total: u64,
    pub delay_max: u64,
    pub peak_backlog_bytes: u64,
}

impl PacerStats {
    pub fn add(&mut self, o: &PacerStats) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.associations += o.associations;
        self.delay_total += o.delay_total;
        self.delay_max = self.delay_max.max(o.delay_max);
        self.peak_backlog_bytes = self.peak_backlog_bytes.max(o.peak_backlog_bytes);
    }
}

#[derive(Debug, Clone)]
struct Held<H> {
    item: H,
    bytes: u32,
    entered: u64,
}

/// One host's pacer over flows keyed by `K`, holding packets (or handles to them) of type `H`.
#[derive(Debug)]
pub struct Pacer<K, H> {
    p: PacerParams,
    /// R_tb, bytes/s.
    rate: f64,
    tokens: f64,
    fifo: VecDeque<Held<H>>,
    backlog_bytes: u64,
    /// M_r: bytes that entered since the last rate update.
    entered_bytes: u64,
    input_free_at: u64,
    /// (flow, last packet or association), at most `table_entries`.
    table: Vec<(K, u64)>,
    next_tick: u64,
    next_update: u64,
    pub stats: PacerStats,
}

impl<K: Copy + Ord, H> Pacer<K, H> {
    pub fn new(p: PacerParams) -> Pacer<K, H> {
        Pacer {
            rate: p.line_rate_bytes_per_s,
            tokens: p.depth_bytes,
            fifo: VecDeque::new(),
            backlog_bytes: 0,
            entered_bytes: 0,
            input_free_at: 0,
            table: Vec::new(),
            next_tick: p.tick,
            next_update: p.rate_interval,
            stats: PacerStats::default(),
            p,
        }
    }

    pub fn params(&self) -> &PacerParams {
        &self.p
    }

    /// R_tb, bytes/s.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.rate
    }

    /// Packets in the FIFO.
    pub fn held_packets(&self) -> usize {
        self.fifo.len()
    }

    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    /// Flows in the association table (idle ones included until they are next looked at).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// Whether `flow`'s packets go through the bucket (ending its association if it has idled
    /// past T_i).
    pub fn associated(&mut self, flow: K, now: u64) -> bool {
        let Some(i) = self.table.iter().position(|&(f, _)| f == flow) else { return false };
        if now.saturating_sub(self.table[i].1) > self.p.idle_timeout {
            self.table.swap_remove(i);
            return false;
        }
        true
    }

    /// An ECN-Echo ACK reached `flow`'s sender, with `draw` uniform in [0, 1) from the caller's
    /// generator: below p_a the flow is (re)associated.
    pub fn on_ece(&mut self, flow: K, now: u64, draw: f64) {
        if draw >= self.p.associate_probability {
            return;
        }
        if self.associated(flow, now) {
            self.touch(flow, now);
            return;
        }
        let idle = self.p.idle_timeout;
        self.table.retain(|&(_, t)| now.saturating_sub(t) <= idle);
        if self.table.len() >= self.p.table_entries {
            let lru = (0..self.table.len()).min_by_key(|&i| (self.table[i].1, self.table[i].0)).expect("a full table");
            self.table.swap_remove(lru);
        }
        self.table.push((flow, now));
        self.stats.associations += 1;
    }

    fn touch(&mut self, flow: K, now: u64) {
        if let Some(e) = self.table.iter_mut().find(|(f, _)| *f == flow) {
            e.1 = now;
        }
    }

    /// Whether a packet of up to `bytes` may enter now (after [`Pacer::advance`] to `now`).
    pub fn admit(&self, now: u64, bytes: u32) -> Admit {
        if self.input_free_at > now {
            Admit::At(self.input_free_at)
        } else if !self.has_room(bytes) {
            Admit::Full
        } else {
            Admit::Now
        }
    }

    /// Whether a packet of `bytes` would fit in the FIFO.
    pub fn has_room(&self, bytes: u32) -> bool {
        self.backlog_bytes + u64::from(bytes) <= self.p.fifo_bytes
    }

    /// A packet of associated `flow` enters (after [`Pacer::admit`] said so); `input_time` is its
    /// serialization at line rate, which the FIFO's input takes. What the bucket releases at
    /// once goes to `released`.
    pub fn enter(&mut self, now: u64, flow: K, item: H, bytes: u32, input_time: u64, released: &mut Vec<H>) {
        self.fifo.push_back(Held { item, bytes, entered: now });
        self.backlog_bytes += u64::from(bytes);
        self.stats.peak_backlog_bytes = self.stats.peak_backlog_bytes.max(self.backlog_bytes);
        self.entered_bytes += u64::from(bytes);
        self.input_free_at = self.input_free_at.max(now) + input_time;
        self.touch(flow, now);
        self.release(now, released);
    }

    /// When the caller must call [`Pacer::advance`] next: the next tick or rate update while the
    /// FIFO holds packets (an empty pacer needs no wakeup).
    pub fn next_event(&self) -> Option<u64> {
        (!self.fifo.is_empty()).then(|| self.next_tick.min(self.next_update))
    }

    /// Runs every tick and rate update due at or before `now`, in time order (an update before a
    /// tick at the same instant), releasing into `released`.
    pub fn advance(&mut self, now: u64, released: &mut Vec<H>) {
        loop {
            let due = self.next_tick.min(self.next_update);
            if due > now {
                return;
            }
            if self.fifo.is_empty() && self.tokens >= self.p.depth_bytes {
                self.skip_idle(now);
                return;
            }
            if self.next_update <= self.next_tick {
                self.update_rate();
                self.next_update += self.p.rate_interval;
            } else {
                let dt = self.p.tick as f64 / self.p.units_per_sec as f64;
                self.tokens = (self.tokens + self.rate * dt).min(self.p.depth_bytes);
                self.release(self.next_tick, released);
                self.next_tick += self.p.tick;
            }
        }
    }

    /// Eq. 4.4.
    fn update_rate(&mut self) {
        let interval_s = self.p.rate_interval as f64 / self.p.units_per_sec as f64;
        let sample = self.entered_bytes as f64 / interval_s;
        let r = (1.0 - self.p.eta) * self.rate + self.p.eta * sample + self.p.beta_per_s * self.backlog_bytes as f64;
        self.rate = r.clamp(self.p.min_rate_bytes_per_s, self.p.line_rate_bytes_per_s);
        self.entered_bytes = 0;
    }

    /// An empty FIFO and a full bucket through `now`: ticks change nothing, and the rate updates
    /// after the first (which still counts what entered before) decay it by (1 − η) each.
    fn skip_idle(&mut self, now: u64) {
        if self.next_update <= now {
            let updates = (now - self.next_update) / self.p.rate_interval + 1;
            self.update_rate();
            let decay = (1.0 - self.p.eta).powf((updates - 1) as f64);
            self.rate = (self.rate * decay).max(self.p.min_rate_bytes_per_s);
            self.next_update += updates * self.p.rate_interval;
        }
        if self.next_tick <= now {
            self.next_tick += ((now - self.next_tick) / self.p.tick + 1) * self.p.tick;
        }
    }

    fn release(&mut self, now: u64, released: &mut Vec<H>) {
        while self.tokens > 0.0 {
            let Some(h) = self.fifo.pop_front() else { break };
            self.tokens -= f64::from(h.bytes);
            self.backlog_bytes -= u64::from(h.bytes);
            let delay = now - h.entered;
            self.stats.packets += 1;
            self.stats.bytes += u64::from(h.bytes);
            self.stats.delay_total += delay;
            self.stats.delay_max = self.stats.delay_max.max(delay);
            released.push(h.item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Draw, SeedableRng, SplitMix64};

    const NS_PER_US: u64 = 1_000;
    const NS_PER_SEC: u64 = 1_000_000_000;

    /// Table 4.3's pacer on a 1 Gbit/s NIC, in nanoseconds.
    fn params() -> PacerParams {
        PacerParams {
            units_per_sec: NS_PER_SEC,
            rate_interval: RATE_INTERVAL_US as u64 * NS_PER_US,
            eta: ETA,
            beta_per_s: BETA_PER_S,
            associate_probability: ASSOCIATE_PROBABILITY,
            idle_timeout: IDLE_TIMEOUT_US as u64 * NS_PER_US,
            table_entries: TABLE_ENTRIES as usize,
            fifo_bytes: u64::from(FIFO_BYTES),
            depth_bytes: f64::from(DEPTH_BYTES),
            tick: TICK_US as u64 * NS_PER_US,
            min_rate_bytes_per_s: MIN_RATE_MBPS * 1e6 / 8.0,
            line_rate_bytes_per_s: 1e9 / 8.0,
        }
    }

    #[test]
    fn settings_convert_to_the_callers_units_and_refuse_what_cannot_work() {
        assert_eq!(PacerSettings::default().params(1e9, NS_PER_SEC, 1500), Ok(params()));
        let e = |s: PacerSettings, rate: f64| s.params(rate, NS_PER_SEC, 1500).unwrap_err().param;
        let d = PacerSettings::default();
        assert_eq!(e(d, 10e9), "depth_bytes", "16 µs of 10 Gbit/s is 20 KB, more than 3 KB + a packet");
        assert!(PacerSettings { tick_us: 1.6, ..d }.params(10e9, NS_PER_SEC, 1500).is_ok(), "ticks scaled to 10 Gbit/s");
        assert_eq!(e(PacerSettings { eta: 0.0, ..d }, 1e9), "eta");
        assert_eq!(e(PacerSettings { associate_probability: 1.5, ..d }, 1e9), "associate_probability");
        assert_eq!(e(PacerSettings { fifo_bytes: 1000, ..d }, 1e9), "fifo_bytes");
        assert_eq!(e(PacerSettings { tick_us: f64::NAN, ..d }, 1e9), "tick_us");
        assert_eq!(e(PacerSettings { beta_per_s: -1.0, ..d }, 1e9), "beta_per_s");
        assert_eq!(e(PacerSettings { depth_bytes: 0, ..d }, 1e9), "depth_bytes");
        assert_eq!(e(d, 0.0), "line_rate");
    }

    fn pacer(p: PacerParams) -> Pacer<u32, u32> {
        Pacer::new(p)
    }

    /// 1500 B at 1 Gbit/s.
    const INPUT_NS: u64 = 12 * NS_PER_US;

    fn mbps(bytes_per_s: f64) -> f64 {
        bytes_per_s * 8.0 / 1e6
    }

    /// T-H4: a constant paced input of 500 Mbit/s, η = 1/8, β = 0, from line rate: 937.5,
    /// 671.80, 559.03 and 502.39 Mbit/s after 1, 8, 16 and 40 updates.
    #[test]
    fn the_rate_estimate_converges_on_the_paced_input() {
        let p = PacerParams { beta_per_s: 0.0, ..params() };
        let mut pc = pacer(p);
        let per_interval = 500e6 / 8.0 * (p.rate_interval as f64 / NS_PER_SEC as f64);
        let mut got = Vec::new();
        for k in 1..=40 {
            pc.entered_bytes = per_interval as u64;
            pc.update_rate();
            if [1, 8, 16, 40].contains(&k) {
                got.push(mbps(pc.rate));
            }
        }
        for (g, want) in got.iter().zip([937.5, 671.80, 559.03, 502.39]) {
            assert!((g - want).abs() < 0.01, "got {got:?}");
        }
    }

    /// T-H6: β·Q per update; β = 2^14 with a 64 KB backlog saturates at line rate.
    #[test]
    fn a_backlog_raises_the_rate_by_beta_times_q() {
        let mut pc = pacer(PacerParams { eta: 0.125, ..params() });
        pc.rate = 100e6 / 8.0;
        pc.backlog_bytes = 1_000;
        pc.update_rate();
        let want = 0.875 * 100e6 / 8.0 + 16.0 * 1_000.0;
        assert!((pc.rate - want).abs() < 1e-6);
        let mut big = pacer(PacerParams { beta_per_s: 16_384.0, ..params() });
        big.rate = 100e6 / 8.0;
        big.backlog_bytes = 64_000;
        big.update_rate();
        assert_eq!(big.rate, 1e9 / 8.0);
    }

    /// T-H5: a 64 KB line-rate burst into a pacer at R = 500 Mbit/s leaves at R, with no more
    /// than the bucket's depth plus one MTU ahead of the token rate at any moment.
    #[test]
    fn a_burst_leaves_at_the_token_rate_after_one_bucket() {
        // No rate update during the test: the rate stays at 500 Mbit/s.
        let p = PacerParams { rate_interval: 1_000_000 * NS_PER_US, ..params() };
        let mut pc = pacer(p);
        pc.rate = 500e6 / 8.0;
        let mut out = Vec::new();
        let mut times = Vec::new();
        let mut now = 0;
        for i in 0..43 {
            pc.advance(now, &mut out);
            assert_eq!(pc.admit(now, 1500), Admit::Now);
            pc.enter(now, 7, i, 1500, INPUT_NS, &mut out);
            times.extend(out.drain(..).map(|_| now));
            now = pc.input_free_at;
        }
        while let Some(t) = pc.next_event() {
            pc.advance(t, &mut out);
            times.extend(out.drain(..).map(|_| t));
        }
        assert_eq!(times.len(), 43);
        for (k, &t) in times.iter().enumerate() {
            let ahead = (k as f64 + 1.0) * 1500.0 - pc.rate * t as f64 / NS_PER_SEC as f64;
            assert!(ahead <= 3000.0 + 1500.0, "packet {k} at {t} ns: {ahead} B ahead of the rate");
        }
        let span_s = (times[42] - times[12]) as f64 / NS_PER_SEC as f64;
        let rate = 30.0 * 1500.0 * 8.0 / span_s / 1e6;
        assert!((rate - 500.0).abs() < 25.0, "released at {rate} Mbit/s");
    }

    /// The FIFO's input runs at line rate and its size bounds what waits.
    #[test]
    fn entry_is_limited_by_line_rate_and_room() {
        let mut pc = pacer(PacerParams { fifo_bytes: 3_000, ..params() });
        pc.tokens = -10_000.0;
        let mut out = Vec::new();
        pc.enter(0, 1, 0, 1500, INPUT_NS, &mut out);
        assert_eq!(pc.admit(0, 1500), Admit::At(INPUT_NS), "1500 B at 1 Gbit/s take 12 µs");
        pc.enter(INPUT_NS, 1, 1, 1500, INPUT_NS, &mut out);
        assert_eq!(pc.admit(2 * INPUT_NS, 1500), Admit::Full);
        assert!(out.is_empty());
        assert_eq!(pc.stats.peak_backlog_bytes, 3_000);
    }

    /// T-H7: per ECN-Echo the flow is chosen with p = 1/8, so it is paced after k of them with
    /// probability 1 − (7/8)^k; associations end after T_i idle; at most 64 entries.
    #[test]
    fn flows_are_associated_one_echo_in_eight_and_forgotten_when_idle() {
        let trials = 20_000;
        let mut rng = SplitMix64::seed_from_u64(1);
        for (k, want) in [(1, 0.125), (5, 0.487), (10, 0.737), (20, 0.931)] {
            let mut pc = pacer(params());
            let mut paced = 0;
            for flow in 0..trials {
                for _ in 0..k {
                    pc.on_ece(flow, 0, rng.next_f64());
                }
                if pc.associated(flow, 0) {
                    paced += 1;
                }
                pc.table.clear();
            }
            let got = f64::from(paced) / f64::from(trials);
            assert!((got - want).abs() < 0.01, "k = {k}: {got} vs {want}");
        }
        let mut pc = pacer(PacerParams { associate_probability: 1.0, ..params() });
        for f in 0..100 {
            pc.on_ece(f, u64::from(f) * NS_PER_US, rng.next_f64());
        }
        assert_eq!(pc.table_len(), 64, "the table holds 64 flows");
        assert!(!pc.associated(0, 100 * NS_PER_US), "the least recently active were evicted");
        assert!(pc.associated(99, 100 * NS_PER_US));
        let t_i = params().idle_timeout;
        assert!(!pc.associated(99, 99 * NS_PER_US + t_i + 1), "idle past T_i");
    }

    /// An idle pacer replays the grid it skipped: the same rate and tokens as one that ran every
    /// update and tick.
    #[test]
    fn skipping_an_idle_stretch_matches_running_through_it() {
        let p = params();
        let mut a = pacer(p);
        let mut b = pacer(p);
        let mut out = Vec::new();
        for pc in [&mut a, &mut b] {
            pc.tokens = -1_000.0;
            pc.enter(0, 1, 0, 1500, INPUT_NS, &mut out);
        }
        let end = 2 * 1000 * NS_PER_US + 3;
        a.advance(end, &mut out);
        let mut t = 0;
        while t < end {
            t = (t + NS_PER_US).min(end);
            b.advance(t, &mut out);
        }
        assert!(a.fifo.is_empty() && b.fifo.is_empty());
        assert!((a.rate - b.rate).abs() <= 1e-9 * b.rate, "{} vs {}", a.rate, b.rate);
        assert!(a.rate > 2.0 * p.min_rate_bytes_per_s, "the decay is not at its floor");
        assert_eq!((a.tokens, a.next_tick, a.next_update), (b.tokens, b.next_tick, b.next_update));
    }
}
