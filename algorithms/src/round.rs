//! A "window of data" without sequence numbers: the round that DCTCP's α, its CWR period and
//! HyStart++'s RTT rounds are counted in.
//!
//! The thesis, Linux and RFC 9406 delimit a round by sequence numbers: it ends when snd_una passes
//! the snd_nxt recorded when it began. Reports carry no snd_una/snd_nxt, but at the end of a report
//! snd_nxt − snd_una is the data in flight (`Report::inflight_bytes`) and snd_una advances by exactly
//! the bytes newly cumulatively acknowledged (`Report::acked_bytes`). So a round that starts at the
//! end of a report ends once the bytes acknowledged since then reach the bytes in flight at its
//! start: the data-driven equivalent of the sequence-number rule, exact whenever the fold's counters
//! are. A round is at least one MSS (a round that starts with nothing in flight ends at the next
//! acknowledgement, as Linux's does). Datapaths without a usable in-flight count can use one
//! smoothed RTT of datapath time instead (`WindowMode::Srtt`).

ccp_contract::param_choice! {
    /// What delimits a window of data.
    pub enum WindowMode {
        /// Until the bytes in flight at the window's start have been acknowledged.
        Inflight = "inflight",
        /// One smoothed RTT of datapath time.
        Srtt = "srtt",
    }
}

/// Where an open window of data ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WindowEnd {
    /// Once this many more bytes have been cumulatively acknowledged.
    Acked { remaining_bytes: f64 },
    /// At this datapath time, µs.
    At { end_us: u64 },
}

impl WindowEnd {
    /// A window starting now, with `inflight_bytes` outstanding.
    pub(crate) fn open(mode: WindowMode, inflight_bytes: f64, mss: f64, now_us: u64, srtt_us: u64) -> Self {
        match mode {
            WindowMode::Inflight => Self::of_data(inflight_bytes, mss),
            WindowMode::Srtt => WindowEnd::At { end_us: now_us.saturating_add(srtt_us) },
        }
    }

    /// A window of data starting now, with `inflight_bytes` outstanding (at least one MSS): for
    /// callers that always delimit rounds by data.
    pub(crate) fn of_data(inflight_bytes: f64, mss: f64) -> Self {
        WindowEnd::Acked { remaining_bytes: inflight_bytes.max(mss) }
    }

    /// Bytes still to be acknowledged before the window ends (`None` for a window in time).
    pub(crate) fn remaining_bytes(&self) -> Option<f64> {
        match self {
            WindowEnd::Acked { remaining_bytes } => Some(*remaining_bytes),
            WindowEnd::At { .. } => None,
        }
    }

    /// Credits one report; true once the window is over.
    pub(crate) fn credit(&mut self, acked_bytes: u64, now_us: u64) -> bool {
        match self {
            WindowEnd::Acked { remaining_bytes } => {
                *remaining_bytes -= acked_bytes as f64;
                *remaining_bytes <= 0.0
            }
            WindowEnd::At { end_us } => now_us >= *end_us,
        }
    }
}
