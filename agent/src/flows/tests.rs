//! The flow table against a recording datapath: lifecycle, the latch, retries, idle flows.

use std::collections::VecDeque;
use std::io;

use ccp_contract::{Capabilities, Command, Report, RttStats, Seed, Settings};

use super::*;
use crate::datapath::CloseReason;

/// `us` into a test's run.
fn at(us: u64) -> Now {
    Now::at_us(us)
}
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
        Capabilities {
            max_cwnd_bytes: 1 << 32,
            max_rate_bytes_per_s: 1 << 32,
            can_clear_pacing: true,
            per_rtt_reports: false,
            cwnd_packets: None,
        }
    }
    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> io::Result<()> {
        Ok(())
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, _: &mut Vec<DatapathEvent>, _: usize, _: Now) -> usize {
        0
    }
    fn apply(&mut self, flow: FlowRef, want: &Settings, changed: &Command, _: Now) -> Result<(), ApplyError> {
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
    t.handle(0, &mut dp, started(None), at(0), None);
    assert!(t.contains(0, FLOW));
    let (_, want, changed) = dp.applied[0];
    assert_eq!(changed, want.changes_from(None), "the datapath holds nothing yet");
    assert_eq!(want.cwnd_bytes, 10_000);
    t.handle(0, &mut dp, report(0), at(1), None);
    assert_eq!(dp.applied.len(), 1, "nothing acknowledged, nothing changed, nothing sent");
    t.handle(0, &mut dp, report(5000), at(2), None);
    let (_, want, changed) = dp.applied[1];
    assert_eq!(changed, Command { cwnd_bytes: Some(15_000), ..Command::default() }, "slow start: only the window");
    assert_eq!(want.cwnd_bytes, 15_000);
    assert_eq!((t.counters.flows_started, t.counters.reports, t.counters.commands_sent), (1, 2, 2));
}

#[test]
fn a_failed_apply_is_kept_and_retried_until_it_lands() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), at(0), None);
    dp.fail.push_back(unreachable());
    dp.fail.push_back(unreachable());
    t.handle(0, &mut dp, report(5000), at(1), None);
    assert_eq!(dp.applied.len(), 1);
    t.retry(0, &mut dp, at(2));
    assert_eq!(dp.applied.len(), 1, "the second attempt failed too");
    t.retry(0, &mut dp, at(3));
    assert_eq!(dp.applied[1].2.cwnd_bytes, Some(15_000));
    t.retry(0, &mut dp, at(4));
    assert_eq!(dp.applied.len(), 2, "nothing left to retry");
    assert_eq!(t.counters.apply_errors, 2);
}

#[test]
fn an_unknown_flow_is_not_retried() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), at(0), None);
    dp.fail.push_back(ApplyError::UnknownFlow(FLOW));
    t.handle(0, &mut dp, report(5000), at(1), None);
    t.retry(0, &mut dp, at(2));
    assert_eq!(dp.applied.len(), 1);
}

#[test]
fn lost_settings_are_applied_again_in_full() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), at(0), None);
    t.handle(0, &mut dp, DatapathEvent::SettingsLost { flow: FLOW }, at(1), None);
    let (_, want, changed) = dp.applied[1];
    assert_eq!(changed, want.changes_from(None));
}

#[test]
fn an_adopted_flow_continues_from_its_state() {
    let (mut t, mut dp) = (table(), Recorder::default());
    let seed = Seed { cwnd_bytes: 77_000, srtt_us: Some(20_000), ..Seed::default() };
    t.handle(0, &mut dp, started(Some(seed)), at(0), None);
    assert_eq!(dp.applied[0].1.cwnd_bytes, 77_000);
    assert_eq!(t.counters.flows_adopted, 1);
}

#[test]
fn a_reused_flow_id_is_a_new_flow_and_a_close_ends_it() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), at(0), None);
    let first = t.get(&(0, FLOW)).unwrap().id;
    t.handle(0, &mut dp, started(None), at(1), None);
    assert_eq!(t.len(), 1);
    assert_ne!(t.get(&(0, FLOW)).unwrap().id, first);
    t.handle(0, &mut dp, DatapathEvent::FlowClosed { flow: FLOW, reason: CloseReason::Closed }, at(2), None);
    assert!(t.is_empty());
    t.handle(0, &mut dp, report(1000), at(3), None);
    assert_eq!(t.counters.reports_for_unknown_flows, 1);
}

#[test]
fn silent_flows_are_forgotten_after_the_idle_timeout() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started(None), at(0), None);
    t.handle(0, &mut dp, report(1000), at(500_000), None);
    assert!(t.expire(at(1_400_000)).is_empty(), "silent for 0.9 s of 1 s");
    assert_eq!(t.expire(at(1_600_000)), vec![(0, FLOW)]);
    assert!(t.is_empty());
    assert_eq!(t.counters.flows_forgotten, 1);
}

// Network feedback (CNMs): lookup by 5-tuple, the report it becomes, the clock it carries.

const SRC: (std::net::IpAddr, u16) = (std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 77, 0, 1)), 40_000);
const DST: (std::net::IpAddr, u16) = (std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 77, 0, 2)), 5201);

fn started_at(flow: FlowRef, netns_cookie: Option<u64>) -> DatapathEvent {
    DatapathEvent::FlowStarted {
        flow,
        info: FlowInfo {
            mss_bytes: 1000,
            init_cwnd_bytes: 10_000,
            src: Some(SRC),
            dst: Some(DST),
            netns_cookie,
            ..FlowInfo::default()
        },
    }
}

fn qcn(fb: u8) -> NetworkFeedback {
    NetworkFeedback::Qcn { fb_quantized: fb, q_off_bytes: 3000, q_delta_bytes: -100 }
}

fn report_at(flow: FlowRef, now_us: u64, acked_bytes: u64) -> DatapathEvent {
    let DatapathEvent::Report { report, .. } = report(acked_bytes) else { unreachable!() };
    DatapathEvent::Report {
        flow,
        report: Report { now_us, inflight_bytes: 7_000, pacing_rate_bytes_per_s: Some(123_456), ..report },
    }
}

/// An algorithm that keeps every report it is given and, like a QCN reaction point, cuts its
/// window by qFb/128 on network feedback.
#[derive(Clone, Default)]
struct Seen(std::sync::Arc<std::sync::Mutex<Vec<Report>>>);

impl Seen {
    fn last(&self) -> Report {
        self.0.lock().unwrap().last().cloned().expect("a report was given")
    }
}

struct Recording {
    seen: Seen,
    cwnd: f64,
}

impl ccp_contract::Algorithm for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn init(&mut self, start: &ccp_contract::FlowStart) -> ccp_contract::Action {
        self.cwnd = start.init_cwnd_bytes as f64;
        ccp_contract::Action::cwnd(self.cwnd)
    }
    fn on_report(&mut self, r: &Report) -> ccp_contract::Action {
        self.seen.0.lock().unwrap().push(r.clone());
        match r.feedback {
            Some(ccp_contract::NetworkFeedback::Qcn { fb_quantized, .. }) => {
                self.cwnd *= 1.0 - f64::from(fb_quantized) / 128.0;
                ccp_contract::Action::cwnd(self.cwnd)
            }
            Some(ccp_contract::NetworkFeedback::Int(_)) | None => ccp_contract::Action::default(),
        }
    }
}

impl ccp_contract::AlgorithmFactory for Seen {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn create(&self) -> Box<dyn ccp_contract::Algorithm> {
        Box::new(Recording { seen: self.clone(), cwnd: 0.0 })
    }
}

fn recording_table() -> (FlowTable, Seen) {
    let seen = Seen::default();
    let mut t = table();
    t.policy.default = ccp_contract::Choice::new(std::sync::Arc::new(seen.clone()), toml::Table::new(), "test");
    (t, seen)
}

#[test]
fn feedback_finds_its_flow_by_the_senders_tuple_and_namespace() {
    let (mut t, mut dp) = (table(), Recorder::default());
    let other = FlowRef { peer: 0, sid: 8 };
    t.handle(0, &mut dp, started_at(FLOW, Some(1)), at(0), None);
    assert_eq!(t.lookup(&(SRC, DST), Some(1)), Lookup::Found((0, FLOW)));
    assert_eq!(t.lookup(&(SRC, DST), None), Lookup::Found((0, FLOW)), "a socket that cannot say matches any");
    assert_eq!(t.lookup(&(DST, SRC), Some(1)), Lookup::Unknown, "the reverse direction is another flow");
    assert_eq!(t.lookup(&(SRC, DST), Some(2)), Lookup::OtherNetns);
    // The same tuple in a second namespace: each namespace finds its own.
    t.handle(0, &mut dp, started_at(other, Some(2)), at(0), None);
    assert_eq!(t.lookup(&(SRC, DST), Some(2)), Lookup::Found((0, other)));
    assert_eq!(t.lookup(&(SRC, DST), None), Lookup::Ambiguous, "nothing tells them apart");
    // Closing and forgetting take the flow out of the index.
    t.handle(0, &mut dp, DatapathEvent::FlowClosed { flow: other, reason: CloseReason::Closed }, at(1), None);
    assert_eq!(t.lookup(&(SRC, DST), None), Lookup::Found((0, FLOW)));
    assert_eq!(t.expire(at(10_000_000)), vec![(0, FLOW)]);
    assert_eq!(t.lookup(&(SRC, DST), Some(1)), Lookup::Unknown);
    // A flow whose datapath gave no addresses is not indexed.
    t.handle(0, &mut dp, started(None), at(0), None);
    assert_eq!(t.lookup(&(SRC, DST), None), Lookup::Unknown);
}

#[test]
fn a_reused_flow_id_moves_the_index_to_the_new_flow() {
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    t.handle(0, &mut dp, started(None), at(1), None);
    assert_eq!(t.lookup(&(SRC, DST), None), Lookup::Unknown, "the old flow's tuple left with it");
}

#[test]
fn feedback_is_a_report_of_gauges_with_zero_counters_on_the_datapaths_clock() {
    let ((mut t, seen), mut dp) = (recording_table(), Recorder::default());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    t.handle(0, &mut dp, report_at(FLOW, 5_000_000, 5000), at(100_000), None);
    let acked_before = t.get(&(0, FLOW)).unwrap().totals.acked_bytes;
    let d = t.network_feedback((0, FLOW), &mut dp, qcn(20), at(103_000), None).unwrap();
    let r = seen.last();
    assert_eq!(d.report.as_ref(), Some(&r), "delivered with the report the controller was given, for the trace");
    assert_eq!(r.feedback, Some(ccp_contract::NetworkFeedback::Qcn { fb_quantized: 20, q_off_bytes: 3000, q_delta_bytes: -100 }));
    assert_eq!(r.now_us, 5_003_000, "the last report's time plus the agent's 3 ms since it arrived");
    assert_eq!((r.interval_us, r.urgent), (0, None));
    assert_eq!((r.acked_bytes, r.acked_pkts, r.sacked_bytes, r.lost_pkts, r.timeouts, r.ce_pkts), (0, 0, 0, 0, 0, 0));
    assert_eq!((r.rtt, r.send_rate_bytes_per_s), (None, None), "no new samples");
    assert_eq!((r.cwnd_bytes, r.inflight_bytes, r.mss_bytes), (10_000, 7_000, 1000), "the last report's gauges");
    assert_eq!(r.pacing_rate_bytes_per_s, Some(123_456));
    let f = t.get(&(0, FLOW)).unwrap();
    assert_eq!((f.cnms, f.totals.acked_bytes), (1, acked_before), "nothing counted twice");
    assert_eq!(t.counters.feedback_reports, 1);
    assert_eq!(t.status_page(&[Box::new(Recorder::default()) as Box<dyn Datapath>], at(0), 0, usize::MAX)[0].cnms, 1);
    // Two CNMs in the same microsecond: time stands still, never goes back.
    t.network_feedback((0, FLOW), &mut dp, qcn(20), at(103_000), None).unwrap();
    assert_eq!(seen.last().now_us, 5_003_000);
}

#[test]
fn a_datapath_report_older_than_the_feedback_is_raised_to_its_time() {
    let ((mut t, seen), mut dp) = (recording_table(), Recorder::default());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    t.handle(0, &mut dp, report_at(FLOW, 5_000_000, 5000), at(100_000), None);
    t.network_feedback((0, FLOW), &mut dp, qcn(20), at(110_000), None).unwrap();
    // A report the datapath closed at 5.004 s that reached the agent only now.
    t.handle(0, &mut dp, report_at(FLOW, 5_004_000, 1000), at(111_000), None);
    assert_eq!(seen.last().now_us, 5_010_000);
    assert_eq!(t.counters.feedback_clock_clamps, 1);
    // Later reports are the datapath's own again.
    t.handle(0, &mut dp, report_at(FLOW, 5_020_000, 1000), at(121_000), None);
    assert_eq!(seen.last().now_us, 5_020_000);
    assert_eq!(t.counters.feedback_clock_clamps, 1);
}

#[test]
fn feedback_before_the_first_report_travels_with_it() {
    // The datapath's clock is unknown until its first report: no report at time 0 is made.
    let ((mut t, seen), mut dp) = (recording_table(), Recorder::default());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    let given = seen.0.lock().unwrap().len();
    let held = t.network_feedback((0, FLOW), &mut dp, qcn(30), at(1_000), None).unwrap();
    assert_eq!(held, Delivered { report: None, action: false }, "no report to trace");
    t.network_feedback((0, FLOW), &mut dp, qcn(63), at(1_500), None).unwrap();
    assert_eq!(seen.0.lock().unwrap().len(), given, "nothing reached the controller yet");
    assert_eq!((t.counters.feedback_held, t.counters.feedback_reports), (2, 0));
    t.handle(0, &mut dp, report_at(FLOW, 7_000_000, 3000), at(2_000), None);
    let r = seen.last();
    assert_eq!(r.now_us, 7_000_000, "on the datapath's clock");
    assert_eq!(r.acked_bytes, 3000, "the datapath's own counters");
    assert_eq!(
        r.feedback,
        Some(ccp_contract::NetworkFeedback::Qcn { fb_quantized: 63, q_off_bytes: 3000, q_delta_bytes: -100 }),
        "the latest held feedback"
    );
    // Held once: the next report carries none.
    t.handle(0, &mut dp, report_at(FLOW, 7_010_000, 3000), at(12_000), None);
    assert_eq!(seen.last().feedback, None);
    assert!(t.network_feedback((0, FlowRef { peer: 0, sid: 99 }), &mut dp, qcn(1), at(1_000), None).is_none());
}

#[test]
fn the_decision_on_feedback_is_applied_at_once() {
    // Reno ignores CNMs: a decision that changes nothing sends nothing.
    let (mut t, mut dp) = (table(), Recorder::default());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    let sent = dp.applied.len();
    let d = t.network_feedback((0, FLOW), &mut dp, qcn(63), at(1_000), None).unwrap();
    assert!(!d.action);
    assert_eq!(dp.applied.len(), sent);
    // A reaction point's cut goes to the datapath before network_feedback returns.
    let ((mut t, _), mut dp) = (recording_table(), Recorder::default());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    t.handle(0, &mut dp, report_at(FLOW, 5_000_000, 0), at(500), None);
    let d = t.network_feedback((0, FLOW), &mut dp, qcn(64), at(1_000), None).unwrap();
    assert!(d.action);
    let (flow, want, changed) = dp.applied.last().copied().unwrap();
    assert_eq!((flow, want.cwnd_bytes, changed.cwnd_bytes), (FLOW, 5_000, Some(5_000)));
    assert_eq!(t.counters.commands_sent, 2);
}

#[test]
fn status_rows_come_in_pages_in_a_stable_order() {
    let (mut t, mut dp) = (table(), Recorder::default());
    for sid in [5, 1, 9] {
        let info = FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, ..FlowInfo::default() };
        t.handle(0, &mut dp, DatapathEvent::FlowStarted { flow: FlowRef { peer: 0, sid }, info }, at(0), None);
    }
    let adapters = [Box::new(Recorder::default()) as Box<dyn Datapath>];
    let sids = |rows: Vec<FlowStatus>| rows.iter().map(|r| r.sid).collect::<Vec<_>>();
    assert_eq!(sids(t.status_page(&adapters, at(0), 0, usize::MAX)), vec![1, 5, 9]);
    assert_eq!(sids(t.status_page(&adapters, at(0), 1, 1)), vec![5]);
    assert_eq!(sids(t.status_page(&adapters, at(0), 2, 10)), vec![9]);
    assert!(t.status_page(&adapters, at(0), 3, 10).is_empty());
}

/// Settings held back by a full queue go out when the peer has room, in turns: a round stops at
/// the first refusal (no storm of failing applies) and the next round starts where it stopped,
/// so no flow waits behind the others for good.
#[test]
fn backpressured_settings_go_out_in_turns_when_the_peer_has_room() {
    let (mut t, mut dp) = (table(), Recorder::default());
    let flow = |sid| FlowRef { peer: 0, sid };
    for sid in 1..=4 {
        let info = FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, ..FlowInfo::default() };
        dp.fail.push_back(ApplyError::Backpressure(flow(sid)));
        t.handle(0, &mut dp, DatapathEvent::FlowStarted { flow: flow(sid), info }, at(0), None);
    }
    assert!(dp.applied.is_empty());
    assert_eq!((t.counters.apply_deferred, t.counters.apply_errors), (4, 0));
    let applied = |dp: &Recorder| dp.applied.iter().map(|(f, _, _)| f.sid).collect::<Vec<_>>();

    // Room for two: 1 and 2 get through, 3 finds the queue full again and 4 is not even tried.
    let mut script: VecDeque<Option<ApplyError>> = VecDeque::from([None, None, Some(ApplyError::Backpressure(flow(3)))]);
    let mut gate = Gate { inner: &mut dp, script: &mut script };
    t.handle(0, &mut gate, DatapathEvent::Writable { peer: 0 }, at(1), None);
    assert_eq!(applied(&dp), vec![1, 2]);
    assert_eq!(t.counters.apply_deferred, 5, "one more refusal, not one per waiting flow");
    // The next round starts at 3, and 4 goes too.
    t.handle(0, &mut dp, DatapathEvent::Writable { peer: 0 }, at(2), None);
    assert_eq!(applied(&dp), vec![1, 2, 3, 4]);
    t.handle(0, &mut dp, DatapathEvent::Writable { peer: 0 }, at(3), None);
    assert_eq!(dp.applied.len(), 4, "nothing left waiting");
}

/// A datapath whose applies follow a script (`None`: through to the recorder).
struct Gate<'a> {
    inner: &'a mut Recorder,
    script: &'a mut VecDeque<Option<ApplyError>>,
}

impl Datapath for Gate<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn register(&mut self, r: &mio::Registry, t: mio::Token) -> io::Result<()> {
        self.inner.register(r, t)
    }
    fn poll_events(&mut self, k: &dyn Fn(FlowRef) -> bool, o: &mut Vec<DatapathEvent>, b: usize, now: Now) -> usize {
        self.inner.poll_events(k, o, b, now)
    }
    fn apply(&mut self, flow: FlowRef, want: &Settings, changed: &Command, now: Now) -> Result<(), ApplyError> {
        match self.script.pop_front().flatten() {
            Some(e) => Err(e),
            None => self.inner.apply(flow, want, changed, now),
        }
    }
    fn peer_name(&self, p: u32) -> String {
        self.inner.peer_name(p)
    }
}

#[test]
fn the_report_record_holds_every_report_the_algorithm_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reports.jsonl");
    let ((mut t, seen), mut dp) = (recording_table(), Recorder::default());
    t.record = Some(ReportRecord::create(&path).unwrap());
    t.handle(0, &mut dp, started_at(FLOW, None), at(0), None);
    t.handle(0, &mut dp, report_at(FLOW, 5_000_000, 5000), at(100_000), None);
    t.network_feedback((0, FLOW), &mut dp, qcn(20), at(103_000), None).unwrap();
    t.handle(0, &mut dp, report_at(FLOW, 5_010_000, 3000), at(110_000), None);
    t.handle(0, &mut dp, report_at(FlowRef { peer: 9, sid: 9 }, 5_010_000, 1), at(110_000), None);
    t.record.as_mut().unwrap().flush();
    let id = t.get(&(0, FLOW)).unwrap().id;
    let lines: Vec<ccp_contract::RecordedReport> =
        std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let given = seen.0.lock().unwrap().clone();
    assert_eq!(given.len(), 3, "two datapath reports and one of network feedback; none for an unknown flow");
    assert_eq!(lines, given.into_iter().map(|report| ccp_contract::RecordedReport { flow: id, report }).collect::<Vec<_>>());
}

/// What the algorithms of `batch_table` did, in order.
type Log = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// An algorithm that logs its calls: `hosted` ones begin reports ahead, as a Python one does on
/// its interpreter thread, and have their answers when `ready` says; the window is 10,000 bytes
/// plus the last report's acknowledged bytes.
struct Logged {
    name: &'static str,
    hosted: bool,
    ready: std::sync::Arc<std::sync::atomic::AtomicBool>,
    log: Log,
}

impl ccp_contract::Algorithm for Logged {
    fn name(&self) -> &'static str {
        self.name
    }
    fn init(&mut self, _: &ccp_contract::FlowStart) -> ccp_contract::Action {
        ccp_contract::Action::cwnd(10_000.0)
    }
    fn on_report(&mut self, r: &Report) -> ccp_contract::Action {
        self.log.lock().unwrap().push(format!("decide {} {}", self.name, r.acked_bytes));
        ccp_contract::Action::cwnd(10_000.0 + r.acked_bytes as f64)
    }
    fn begin_on_report(&mut self, r: &Report) -> bool {
        if self.hosted {
            self.log.lock().unwrap().push(format!("begin {} {}", self.name, r.acked_bytes));
        }
        self.hosted
    }
    fn begun_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Relaxed)
    }
    fn state(&self) -> Vec<ccp_contract::StateVar> {
        self.log.lock().unwrap().push(format!("state {}", self.name));
        vec![ccp_contract::StateVar { name: "x", value: 1.0 }]
    }
}

struct LoggedFactory(&'static str, bool, std::sync::Arc<std::sync::atomic::AtomicBool>, Log);

impl ccp_contract::AlgorithmFactory for LoggedFactory {
    fn name(&self) -> &'static str {
        self.0
    }
    fn create(&self) -> Box<dyn ccp_contract::Algorithm> {
        Box::new(Logged { name: self.0, hosted: self.1, ready: self.2.clone(), log: self.3.clone() })
    }
}

/// Flows that say `cong_alg = "py"` get a hosted algorithm, the others a native one; the hosted
/// answers are there while `ready` says so.
fn batch_table(log: &Log, ready: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> FlowTable {
    let logged = |name, hosted| {
        let factory = LoggedFactory(name, hosted, ready.clone(), log.clone());
        ccp_contract::Choice::new(std::sync::Arc::new(factory), toml::Table::new(), "test")
    };
    let rule = crate::rules::Rule {
        name: "python".into(),
        matcher: crate::rules::Matcher { cong_alg: Some("py".into()), ..Default::default() },
        choice: logged("py", true),
    };
    let policy = Policy { default: logged("native", false), rules: vec![rule], fallback: logged("native", false) };
    FlowTable::new(policy, Limits::default(), 1_000_000)
}

fn start_batch_flow(t: &mut FlowTable, dp: &mut Recorder, flow: FlowRef, python: bool) {
    let cong_alg = python.then(|| "py".to_string());
    let info = FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, cong_alg, ..FlowInfo::default() };
    t.handle(0, dp, DatapathEvent::FlowStarted { flow, info }, at(0), None);
}

#[test]
fn a_batch_begins_hosted_reports_decides_them_after_the_others_and_keeps_each_flows_order() {
    let (log, ready) = (Log::default(), std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)));
    let (mut t, mut dp) = (batch_table(&log, &ready), Recorder::default());
    let (py, native) = (FlowRef { peer: 0, sid: 1 }, FlowRef { peer: 0, sid: 2 });
    start_batch_flow(&mut t, &mut dp, py, true);
    start_batch_flow(&mut t, &mut dp, native, false);
    dp.applied.clear();
    let mut batch = vec![
        report_at(py, 1, 1000),
        report_at(native, 1, 1000),
        report_at(py, 2, 2000),
        DatapathEvent::SettingsLost { flow: py },
        report_at(py, 3, 3000),
        report_at(native, 2, 2000),
        DatapathEvent::FlowClosed { flow: py, reason: CloseReason::Closed },
        report_at(native, 3, 3000),
    ];
    t.handle_batch(0, &mut dp, &mut batch, at(1), None);
    assert!(batch.is_empty() && !t.has_waiting());
    assert_eq!(
        *log.lock().unwrap(),
        [
            "begin py 1000",
            "decide native 1000",
            "begin py 2000",
            "decide native 2000",
            "decide native 3000",
            // The Python flow's reports in order, then its lost settings and what follows them,
            // whole (the report after them is not begun ahead).
            "decide py 1000",
            "decide py 2000",
            "decide py 3000",
        ]
    );
    let windows: Vec<(u32, u64)> = dp.applied.iter().map(|(f, want, _)| (f.sid, want.cwnd_bytes)).collect();
    assert_eq!(windows, [(2, 11_000), (2, 12_000), (2, 13_000), (1, 11_000), (1, 12_000), (1, 12_000), (1, 13_000)]);
    assert!(!t.contains(0, py), "its close came last");
    assert_eq!((t.counters.reports, t.counters.flows_closed), (6, 1));
}

#[test]
fn reports_wait_for_their_answers_without_holding_up_other_flows() {
    let (log, ready) = (Log::default(), std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let (mut t, mut dp) = (batch_table(&log, &ready), Recorder::default());
    let (py, native) = (FlowRef { peer: 0, sid: 1 }, FlowRef { peer: 0, sid: 2 });
    start_batch_flow(&mut t, &mut dp, py, true);
    start_batch_flow(&mut t, &mut dp, native, false);
    for acked in [1000, 2000] {
        t.handle_batch(0, &mut dp, &mut vec![report_at(py, acked, acked), report_at(native, acked, acked)], at(acked), None);
    }
    assert_eq!(*log.lock().unwrap(), ["begin py 1000", "decide native 1000", "begin py 2000", "decide native 2000"]);
    assert!(t.has_waiting());
    assert_eq!(t.counters.reports, 4, "counted as they came");
    t.settle(0, &mut dp, at(2500), None);
    assert_eq!(log.lock().unwrap().len(), 4, "nothing is decided before its answer is there");
    // A status does not ask a flow with a report out for its state (it would wait for it).
    let adapters = [Box::new(Recorder::default()) as Box<dyn Datapath>];
    let states: Vec<usize> = t.status_page(&adapters, at(2500), 0, 10).iter().map(|r| r.state.len()).collect();
    assert_eq!(states, [0, 1]);
    assert_eq!(log.lock().unwrap()[4..], ["state native"]);
    log.lock().unwrap().truncate(4);

    ready.store(true, std::sync::atomic::Ordering::Relaxed);
    t.settle(0, &mut dp, at(3000), None);
    assert_eq!(log.lock().unwrap()[4..], ["decide py 1000", "decide py 2000"]);
    assert!(!t.has_waiting());
    assert_eq!(t.get(&(0, py)).unwrap().controller.cwnd_bytes(), 12_000);

    // Network feedback follows the reports before it: they are decided first, answer or not.
    ready.store(false, std::sync::atomic::Ordering::Relaxed);
    log.lock().unwrap().clear();
    t.handle_batch(0, &mut dp, &mut vec![report_at(py, 4000, 3000)], at(4000), None);
    t.network_feedback((0, py), &mut dp, qcn(20), at(4500), None).unwrap();
    assert_eq!(*log.lock().unwrap(), ["begin py 3000", "decide py 3000", "decide py 0"]);
    assert!(!t.has_waiting());
}
