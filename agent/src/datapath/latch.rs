//! What a datapath holds of a flow's settings, next to what its controller wants: the one
//! desired/applied latch every adapter shares.
//!
//! The controller's `Settings` are what the flow should have; the latch remembers what the
//! datapath acknowledged (a successful send or map write). The difference is what to apply, and
//! a failed apply leaves it there, so the runtime's tick retries it instead of forgetting it.

use ccp_contract::{Command, Settings};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latch {
    /// `None`: the datapath holds nothing of ours (a new flow, or its registers were reset).
    applied: Option<Settings>,
}

impl Latch {
    /// The fields of `want` the datapath does not hold; empty when it is up to date.
    pub fn pending(&self, want: &Settings) -> Command {
        want.changes_from(self.applied.as_ref())
    }

    /// The datapath now holds `want`.
    pub fn applied(&mut self, want: Settings) {
        self.applied = Some(want);
    }

    /// The datapath lost what it held: everything must be applied again.
    pub fn reset(&mut self) {
        self.applied = None;
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
        }
    }

    #[test]
    fn everything_is_pending_until_applied_then_only_changes() {
        let mut l = Latch::default();
        let p = l.pending(&settings(10));
        assert_eq!(
            (p.cwnd_bytes, p.pacing, p.report),
            (Some(10), Some(PacingCommand::BytesPerSec(5)), Some(ReportPolicy::EveryUs(10)))
        );
        l.applied(settings(10));
        assert!(l.pending(&settings(10)).is_empty());
        assert_eq!(l.pending(&settings(20)).cwnd_bytes, Some(20));
        assert_eq!(l.pending(&settings(20)).pacing, None);
        l.reset();
        assert_eq!(l.pending(&settings(10)), settings(10).changes_from(None));
    }
}
