//! What a datapath holds of a flow's settings, next to what its controller wants: the one
//! desired/applied latch every adapter shares.
//!
//! The controller's `Settings` are what the flow should have; the latch remembers which of them
//! the datapath is missing because an apply failed (or because it never had them, or lost them).
//! What is missing plus the controller's latest change is what to apply, and a failed apply
//! keeps it missing, so the runtime's tick retries it instead of forgetting it. In the common
//! case nothing is missing and the latest change is all there is to send: no per-report copy or
//! comparison of the settings.

use ccp_contract::{Command, Settings};

const CWND: u8 = 1;
const PACING: u8 = 2;
const REPORT: u8 = 4;
const RTT_THRESHOLD: u8 = 8;
const REPORT_ACKED_PKTS: u8 = 16;
const AGGREGATION: u8 = 32;
const ALL: u8 = CWND | PACING | REPORT | RTT_THRESHOLD | REPORT_ACKED_PKTS | AGGREGATION;

#[inline]
fn fields(c: &Command) -> u8 {
    let bit = |set: bool, b: u8| if set { b } else { 0 };
    bit(c.cwnd_bytes.is_some(), CWND)
        | bit(c.pacing.is_some(), PACING)
        | bit(c.report.is_some(), REPORT)
        | bit(c.rtt_threshold_us.is_some(), RTT_THRESHOLD)
        | bit(c.report_acked_pkts.is_some(), REPORT_ACKED_PKTS)
        | bit(c.ack_aggregation_bw_bytes_per_s.is_some(), AGGREGATION)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Latch {
    /// The fields the datapath may not hold as the controller last had them.
    missing: u8,
}

/// A new flow's datapath holds nothing of the agent's.
impl Default for Latch {
    fn default() -> Self {
        Latch { missing: ALL }
    }
}

impl Latch {
    /// The fields of `want` the datapath does not hold; empty when it is up to date. `change`
    /// is what the controller changed to arrive at `want` (empty when nothing did).
    #[inline]
    pub fn pending(&self, want: &Settings, change: &Command) -> Command {
        if self.missing == 0 {
            return *change;
        }
        let send = self.missing | fields(change);
        Command {
            cwnd_bytes: (send & CWND != 0).then_some(want.cwnd_bytes),
            pacing: want.pacing.filter(|_| send & PACING != 0),
            report: (send & REPORT != 0).then_some(want.report),
            rtt_threshold_us: want.rtt_threshold_us.filter(|_| send & RTT_THRESHOLD != 0),
            // Off is a datapath's default: one that holds nothing of ours needs no "off" (as in
            // `Settings::changes_from(None)`); one that missed a change may hold a trigger.
            report_acked_pkts: (send & REPORT_ACKED_PKTS != 0 && (want.report_acked_pkts > 0 || self.missing != ALL))
                .then_some(want.report_acked_pkts),
            ack_aggregation_bw_bytes_per_s: (send & AGGREGATION != 0
                && (want.ack_aggregation_bw_bytes_per_s > 0 || self.missing != ALL))
                .then_some(want.ack_aggregation_bw_bytes_per_s),
        }
    }

    /// The datapath now holds everything that was pending.
    #[inline]
    pub fn applied(&mut self) {
        self.missing = 0;
    }

    /// Applying `sent` failed: the datapath still misses those fields.
    #[inline]
    pub fn failed(&mut self, sent: &Command) {
        self.missing |= fields(sent);
    }

    /// The datapath lost what it held: everything must be applied again.
    #[inline]
    pub fn reset(&mut self) {
        self.missing = ALL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_contract::{PacingCommand, ReportPolicy};

    fn settings(cwnd_bytes: u64) -> Settings {
        Settings {
            cwnd_bytes,
            pacing: Some(PacingCommand::BytesPerSec(5)),
            report: ReportPolicy::EveryUs(10),
            rtt_threshold_us: None,
            report_acked_pkts: 0,
            ack_aggregation_bw_bytes_per_s: 0,
        }
    }

    #[test]
    fn everything_is_pending_until_applied_then_only_changes() {
        let mut l = Latch::default();
        let none = Command::default();
        assert_eq!(l.pending(&settings(10), &none), settings(10).changes_from(None));
        l.applied();
        assert!(l.pending(&settings(10), &none).is_empty());
        let change = settings(20).changes_from(Some(&settings(10)));
        assert_eq!(l.pending(&settings(20), &change), Command { cwnd_bytes: Some(20), ..Command::default() });
    }

    #[test]
    fn after_a_failure_what_the_datapath_misses_accumulates() {
        let mut l = Latch::default();
        l.applied();
        let first = settings(20).changes_from(Some(&settings(10)));
        l.failed(&first);
        // The controller moved on: a threshold now, the window unchanged since the failure.
        let later = Settings { rtt_threshold_us: Some(3), ..settings(20) };
        let last_change = later.changes_from(Some(&settings(20)));
        let p = l.pending(&later, &last_change);
        assert_eq!((p.cwnd_bytes, p.rtt_threshold_us, p.pacing, p.report), (Some(20), Some(3), None, None));
        l.applied();
        assert!(l.pending(&later, &Command::default()).is_empty());
        l.reset();
        assert_eq!(l.pending(&later, &Command::default()), later.changes_from(None));
    }
}
