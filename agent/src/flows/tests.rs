//! The flow table against a recording datapath: lifecycle, the latch, retries, idle flows.

use std::collections::VecDeque;
use std::io;

use ccp_contract::{Capabilities, Command, Report, RttStats, Seed, Settings};

use super::*;
use crate::datapath::CloseReason;
use crate::rules::Policy;

#[derive(Default)]
struct Recorder {
    applied: Vec<(FlowRef, Settings, Command)>,
    /// Errors for the next applies, one each.
    fail: VecDeque<ApplyError>,
}

impl Datapath for Recorder {
    fn describe(&self) -> String {
        "recorder".into()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { max_cwnd_bytes: 1 << 32, max_rate_bytes_per_s: 1 << 32, can_clear_pacing: true, per_rtt_reports: false }
    }
    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> io::Result<()> {
        Ok(())
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, _: &mut Vec<DatapathEvent>) {}
    fn apply(&mut self, flow: FlowRef, want: &Settings, changed: &Command) -> Result<(), ApplyError> {
        if let Some(e) = self.fail.pop_front() {
            return Err(e);
        }
        self.applied.push((flow, *want, *changed));
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "recorder".into()
    }
}

fn table() -> FlowTable {
    let choose = |name| ccp_algorithms::registry::choose(name, toml::Table::new(), "test").unwrap();
    let policy = Policy { default: choose("reno"), rules: Vec::new(), fallback: choose("reno") };
    FlowTable::new(policy, Limits::default(), 1_000_000)
}

const FLOW: FlowRef = FlowRef { peer: 0, sid: 7 };

fn started(existing: Option<Seed>) -> DatapathEvent {
    DatapathEvent::FlowStarted {
        flow: FLOW,
        info: FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, existing, ..FlowInfo::default() },
    }
}

fn report(acked_bytes: u64) -> DatapathEvent {
    let rtt = RttStats { min_us: 20_000, max_us: 20_000, last_us: 20_000, srtt_us: 20_000, mean_us: 20_000, samples: 1 };
    DatapathEvent::Report {
        flow: FLOW,
        report: Report {
            mss_bytes: 1000,
            acked_bytes,
            acked_pkts: acked_bytes / 1000,
            rtt: Some(rtt),
            cwnd_bytes: 10_000,
            ..Report::default()
        },
    }
}

fn unreachable() -> ApplyError {
    ApplyError::Unreachable { flow: FLOW, source: io::Error::from_raw_os_error(libc::EAGAIN) }
}

#[test]
fn a_new_flow_gets_every_setting_then_only_changes() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), 0, None);
    assert!(t.contains(0, FLOW));
    let (_, want, changed) = dp.applied[0];
    assert_eq!(changed, want.changes_from(None), "the datapath holds nothing yet");
    assert_eq!(want.cwnd_bytes, 10_000);
    t.handle(0, &mut dp, report(0), 1, None);
    assert_eq!(dp.applied.len(), 1, "nothing acknowledged, nothing changed, nothing sent");
    t.handle(0, &mut dp, report(5000), 2, None);
    let (_, want, changed) = dp.applied[1];
    assert_eq!(changed, Command { cwnd_bytes: Some(15_000), ..Command::default() }, "slow start: only the window");
    assert_eq!(want.cwnd_bytes, 15_000);
    assert_eq!((t.counters.flows_started, t.counters.reports, t.counters.commands_sent), (1, 2, 2));
}

#[test]
fn a_failed_apply_is_kept_and_retried_until_it_lands() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), 0, None);
    dp.fail.push_back(unreachable());
    dp.fail.push_back(unreachable());
    t.handle(0, &mut dp, report(5000), 1, None);
    assert_eq!(dp.applied.len(), 1);
    t.retry(0, &mut dp);
    assert_eq!(dp.applied.len(), 1, "the second attempt failed too");
    t.retry(0, &mut dp);
    assert_eq!(dp.applied[1].2.cwnd_bytes, Some(15_000));
    t.retry(0, &mut dp);
    assert_eq!(dp.applied.len(), 2, "nothing left to retry");
    assert_eq!(t.counters.apply_errors, 2);
}

#[test]
fn an_unknown_flow_is_not_retried() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), 0, None);
    dp.fail.push_back(ApplyError::UnknownFlow(FLOW));
    t.handle(0, &mut dp, report(5000), 1, None);
    t.retry(0, &mut dp);
    assert_eq!(dp.applied.len(), 1);
}

#[test]
fn lost_settings_are_applied_again_in_full() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), 0, None);
    t.handle(0, &mut dp, DatapathEvent::SettingsLost { flow: FLOW }, 1, None);
    let (_, want, changed) = dp.applied[1];
    assert_eq!(changed, want.changes_from(None));
}

#[test]
fn an_adopted_flow_continues_from_its_state() {
    let (mut t, mut dp) = (table(), Recorder::default());
    let seed = Seed { cwnd_bytes: 77_000, srtt_us: Some(20_000), ..Seed::default() };
    t.handle(0, &mut dp, started(Some(seed)), 0, None);
    assert_eq!(dp.applied[0].1.cwnd_bytes, 77_000);
    assert_eq!(t.counters.flows_adopted, 1);
}

#[test]
fn a_reused_flow_id_is_a_new_flow_and_a_close_ends_it() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), 0, None);
    let first = t.get(&(0, FLOW)).unwrap().id;
    t.handle(0, &mut dp, started(None), 1, None);
    assert_eq!(t.len(), 1);
    assert_ne!(t.get(&(0, FLOW)).unwrap().id, first);
    t.handle(0, &mut dp, DatapathEvent::FlowClosed { flow: FLOW, reason: CloseReason::Closed }, 2, None);
    assert!(t.is_empty());
    t.handle(0, &mut dp, report(1000), 3, None);
    assert_eq!(t.counters.reports_for_unknown_flows, 1);
}

#[test]
fn silent_flows_are_forgotten_after_the_idle_timeout() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), 0, None);
    t.handle(0, &mut dp, report(1000), 500_000, None);
    assert!(t.expire(1_400_000).is_empty(), "silent for 0.9 s of 1 s");
    assert_eq!(t.expire(1_600_000), vec![(0, FLOW)]);
    assert!(t.is_empty());
    assert_eq!(t.counters.flows_forgotten, 1);
}
