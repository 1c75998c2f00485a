//! Flow plans shared by the metrics' unit tests.

use std::time::Duration;

use crate::traffic::{FlowPlan, PlanKind, Role};

pub(super) fn plan(label: &str, role: Role, kind: PlanKind, start: u64, stop: u64) -> FlowPlan {
    FlowPlan { label: label.into(), role, kind, start: Duration::from_secs(start), stop: Duration::from_secs(stop) }
}

pub(super) fn bulk() -> PlanKind {
    PlanKind::Bulk { cc: "cubic".into(), receiver_cc: None, bytes: None, quic: None }
}
