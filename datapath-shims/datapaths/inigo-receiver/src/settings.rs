//! What an operator chooses: the mode and the receiver's parameters (spec inigo.md §4, §5, §13).

use std::fmt;

use serde::Serialize;

use crate::layout::{self, RawSettings};
use crate::Error;

/// What the receiver does about late segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Set CE on late ECN-capable data segments before TCP sees them (spec §4.4): the receiving
    /// TCP echoes ECE, and an ECN sender sees "virtual switch marks".
    Mark,
    /// Cap the window advertised in outgoing ACKs with α_RFD's DCTCP-style sub-window control
    /// (spec §4.3): works with any sender, ECN or not.
    Window,
}

/// Where the receive-side delta R of the RFD comes from (spec A-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RfdSource {
    /// Local arrival times (µs): the forward delay the thesis defines (default).
    Arrival,
    /// TSecr deltas, as the published patch (reproduces it; tracks the reverse path instead).
    Tsecr,
}

/// What the receiver's slow start does on its first late segment (spec A-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SsExit {
    /// Halve rcv_cwnd and set the receiver's ssthresh to it ([R], default).
    Halve,
    /// Only set the receiver's ssthresh to rcv_cwnd ([R4.2]).
    Hold,
}

/// How RTT_min is read from the kernel's receive-side RTT estimate (spec A-3, risk R-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RttScale {
    /// `rcv_rtt_est.rtt_us >> 3`: the estimate in µs, as `tcpi_rcv_rtt` reports it (default).
    Actual,
    /// `rcv_rtt_est.rtt_us` as stored, i.e. 8× the estimate, as the published patch read it: the
    /// late threshold is 8× larger. Reproduces [R]'s receiver results.
    X8,
}

/// The receiver's settings; every one can be replaced on a live instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settings {
    pub mode: Mode,
    /// Late when D_total > RTT_min · pct / 100 (strict), plus the tick slack. Default 17.
    pub threshold_pct: u32,
    pub rfd_source: RfdSource,
    /// Window mode: α and the cap are updated every `fairness` · MSS bytes (0: every rcv_cwnd
    /// bytes). Default 10, as the thesis's experiments.
    pub fairness: u32,
    /// Marking mode: clear CE on segments that are not late, as the published patch did. Off by
    /// default: it erases real switch marks, hiding real congestion from the sender.
    pub clear_ce: bool,
    /// RTT_min += 1 µs per segment whose RTT sample exceeds it, as the patch did. Off by default.
    pub rtt_min_creep: bool,
    pub rtt_scale: RttScale,
    pub ss_exit: SsExit,
    /// µs per TSval tick for connections without µs timestamps (Linux: 1 ms). Default 1000.
    pub ts_tick_us: u32,
    /// Add one TSval tick to the late threshold of connections without µs timestamps (ours, on
    /// by default). Their TSvals round the send time down to the tick, so D_total runs up to a
    /// tick above the queueing delay; with the slack, late means a queue above RTT_min · pct/100.
    /// Off: the spec's rule, which at small RTTs (threshold below a tick) judges segments late
    /// with no queue at all.
    pub tick_slack: bool,
    /// Window mode: an α cut also sets the receiver's ssthresh to the new rcv_cwnd, as a DCTCP
    /// sender's cut sets its ssthresh (the thesis: "in a fashion similar to algorithms 3 and 5"),
    /// and rcv_cwnd = ssthresh counts as congestion avoidance. Ours; off is [R]'s accounting, in
    /// which a cut leaves rcv_cwnd below ssthresh, so the next late segment halves again (a
    /// ratchet) and α = 0 grows by whole intervals (slow start).
    pub cut_ssthresh: bool,
    /// Window mode: multiply rcv_cwnd by rebase/1024 (floor 2·MSS) whenever D_total would go
    /// negative; 0 = off (the patch's default).
    pub rebase: u32,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            mode: Mode::Mark,
            threshold_pct: 17,
            rfd_source: RfdSource::Arrival,
            fairness: 10,
            clear_ce: false,
            rtt_min_creep: false,
            rtt_scale: RttScale::Actual,
            ss_exit: SsExit::Halve,
            ts_tick_us: 1000,
            tick_slack: true,
            cut_ssthresh: false,
            rebase: 0,
        }
    }
}

/// Settings fixed when an instance is created (they size its maps): changing them means
/// `disable` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capacity {
    /// Connections with state at once (LRU beyond that). Default 16384.
    pub max_conns: u32,
}

impl Default for Capacity {
    fn default() -> Capacity {
        Capacity { max_conns: 16384 }
    }
}

impl Settings {
    /// Refuses values the programs cannot use, naming the option.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what: &str, why: &str| Err(Error::Settings(format!("{what}: {why}")));
        if self.threshold_pct == 0 || self.threshold_pct > 1000 {
            return bad("threshold-pct", "must be 1..=1000 (percent of RTT_min)");
        }
        if self.fairness > 4096 {
            return bad("fairness", "must be 0..=4096 (MSS per sub-window; 0 = the whole window)");
        }
        if self.ts_tick_us == 0 || self.ts_tick_us > 1_000_000 {
            return bad("ts-tick-us", "must be 1..=1000000");
        }
        if self.rebase > 1024 {
            return bad("rebase", "must be 0..=1024 (x/1024; 0 = off)");
        }
        Ok(())
    }

    pub(crate) fn to_raw(&self, raw: &mut RawSettings) {
        raw.mode = match self.mode {
            Mode::Mark => layout::MODE_MARK,
            Mode::Window => layout::MODE_WINDOW,
        };
        raw.rfd_source = match self.rfd_source {
            RfdSource::Arrival => layout::RFD_ARRIVAL,
            RfdSource::Tsecr => layout::RFD_TSECR,
        };
        raw.threshold_pct = self.threshold_pct;
        raw.fairness = self.fairness;
        raw.flags = (if self.clear_ce { layout::F_CLEAR_CE } else { 0 })
            | (if self.rtt_min_creep { layout::F_RTT_CREEP } else { 0 })
            | (if self.ss_exit == SsExit::Hold { layout::F_SS_HOLD } else { 0 })
            | (if self.rtt_scale == RttScale::X8 { layout::F_RTT_X8 } else { 0 })
            | (if self.tick_slack { 0 } else { layout::F_NO_TICK_SLACK })
            | (if self.cut_ssthresh { layout::F_CUT_SSTHRESH } else { 0 });
        raw.ts_tick_us = self.ts_tick_us;
        raw.rebase = self.rebase;
    }

    pub(crate) fn from_raw(raw: &RawSettings) -> Settings {
        Settings {
            mode: if raw.mode == layout::MODE_WINDOW { Mode::Window } else { Mode::Mark },
            threshold_pct: raw.threshold_pct,
            rfd_source: if raw.rfd_source == layout::RFD_TSECR { RfdSource::Tsecr } else { RfdSource::Arrival },
            fairness: raw.fairness,
            clear_ce: raw.flags & layout::F_CLEAR_CE != 0,
            rtt_min_creep: raw.flags & layout::F_RTT_CREEP != 0,
            rtt_scale: if raw.flags & layout::F_RTT_X8 != 0 { RttScale::X8 } else { RttScale::Actual },
            ss_exit: if raw.flags & layout::F_SS_HOLD != 0 { SsExit::Hold } else { SsExit::Halve },
            ts_tick_us: raw.ts_tick_us,
            tick_slack: raw.flags & layout::F_NO_TICK_SLACK == 0,
            cut_ssthresh: raw.flags & layout::F_CUT_SSTHRESH != 0,
            rebase: raw.rebase,
        }
    }

    /// "name old → new" for every setting that differs from `other`.
    pub fn changes_from(&self, other: &Settings) -> Vec<String> {
        let a = self.fields();
        let b = other.fields();
        a.iter().zip(b.iter()).filter(|(x, y)| x.1 != y.1).map(|(new, old)| format!("{} {} -> {}", new.0, old.1, new.1)).collect()
    }

    fn fields(&self) -> [(&'static str, String); 12] {
        [
            ("mode", format!("{:?}", self.mode).to_lowercase()),
            ("threshold-pct", self.threshold_pct.to_string()),
            ("rfd-source", format!("{:?}", self.rfd_source).to_lowercase()),
            ("fairness", self.fairness.to_string()),
            ("clear-ce", self.clear_ce.to_string()),
            ("rtt-min-creep", self.rtt_min_creep.to_string()),
            ("rtt-scale", format!("{:?}", self.rtt_scale).to_lowercase()),
            ("ss-exit", format!("{:?}", self.ss_exit).to_lowercase()),
            ("ts-tick-us", self.ts_tick_us.to_string()),
            ("tick-slack", (if self.tick_slack { "on" } else { "off" }).to_string()),
            ("cut-ssthresh", (if self.cut_ssthresh { "on" } else { "off" }).to_string()),
            ("rebase", self.rebase.to_string()),
        ]
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.fields().iter().map(|(k, v)| format!("{k} {v}")).collect();
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_map_layout() {
        let s = Settings {
            mode: Mode::Window,
            threshold_pct: 20,
            rfd_source: RfdSource::Tsecr,
            fairness: 0,
            clear_ce: true,
            rtt_min_creep: true,
            rtt_scale: RttScale::X8,
            ss_exit: SsExit::Hold,
            ts_tick_us: 1,
            tick_slack: false,
            cut_ssthresh: true,
            rebase: 512,
        };
        let mut raw = RawSettings::default();
        s.to_raw(&mut raw);
        assert_eq!(Settings::from_raw(&raw), s);
        let mut raw = RawSettings::default();
        Settings::default().to_raw(&mut raw);
        assert_eq!(Settings::from_raw(&raw), Settings::default());
        assert!(Settings::default().tick_slack);
        assert_eq!(raw.flags, 0, "the defaults set no flag: each flag is a departure from them");
    }

    #[test]
    fn changes_name_each_differing_setting() {
        let old = Settings::default();
        let new = Settings { mode: Mode::Window, threshold_pct: 25, ..Settings::default() };
        assert_eq!(new.changes_from(&old), vec!["mode mark -> window", "threshold-pct 17 -> 25"]);
        assert!(old.changes_from(&old).is_empty());
        let literal = Settings { tick_slack: false, ..Settings::default() };
        assert_eq!(literal.changes_from(&old), vec!["tick-slack on -> off"]);
    }

    #[test]
    fn out_of_range_values_are_refused_by_name() {
        let e = Settings { threshold_pct: 0, ..Settings::default() }.validate().unwrap_err().to_string();
        assert!(e.contains("threshold-pct"), "{e}");
        assert!(Settings { rebase: 2000, ..Settings::default() }.validate().is_err());
        assert!(Settings::default().validate().is_ok());
    }
}
