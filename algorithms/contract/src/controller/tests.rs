use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::limits::{MAX_REPORT_ACKED_PKTS, MIN_REPORT_INTERVAL_US, REPORT_RTTS_RANGE};
use crate::report::RttStats;
use crate::PacketWindow;

/// An algorithm that plays back a script of behaviours, one per call.
#[derive(Clone)]
enum Step {
    Act(Action),
    Panic,
    Fail(CallError),
}

/// The script position is shared by every instance a factory makes, so a restarted algorithm
/// carries on where the faulty one stopped (a bug that reproduces), instead of replaying.
struct Scripted {
    steps: Arc<Vec<Step>>,
    at: Arc<AtomicUsize>,
}

impl Algorithm for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn init(&mut self, start: &FlowStart) -> Action {
        Action::cwnd(start.seed.as_ref().map_or(10_000.0, |s| s.cwnd_bytes as f64))
    }
    fn on_report(&mut self, r: &Report) -> Action {
        self.try_on_report(r).expect("a scripted failure reaches the controller through try_on_report")
    }
    fn try_on_report(&mut self, _: &Report) -> Result<Action, CallError> {
        let at = self.at.fetch_add(1, Ordering::SeqCst);
        let step = self.steps.get(at).cloned().unwrap_or(Step::Act(Action::default()));
        match step {
            Step::Act(a) => Ok(a),
            Step::Panic => panic!("scripted panic"),
            Step::Fail(e) => Err(e),
        }
    }
    fn state(&self) -> Vec<StateVar> {
        vec![StateVar { name: "at", value: self.at.load(Ordering::SeqCst) as f64 }]
    }
}

struct ScriptFactory(Arc<Vec<Step>>, Arc<AtomicUsize>);

impl AlgorithmFactory for ScriptFactory {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Scripted { steps: Arc::clone(&self.0), at: Arc::clone(&self.1) })
    }
}

/// The fallback of these tests: starts from the flow's window and adds one MSS per report.
struct Additive {
    cwnd: f64,
    mss: f64,
}

impl Algorithm for Additive {
    fn name(&self) -> &'static str {
        "additive"
    }
    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.cwnd = start.start_cwnd_bytes() as f64;
        Action::cwnd(self.cwnd)
    }
    fn on_report(&mut self, _: &Report) -> Action {
        self.cwnd += self.mss;
        Action::cwnd(self.cwnd)
    }
}

struct AdditiveFactory;

impl AlgorithmFactory for AdditiveFactory {
    fn name(&self) -> &'static str {
        "additive"
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Additive { cwnd: 0.0, mss: 1.0 })
    }
}

fn choice(steps: Vec<Step>) -> Choice {
    Choice::new(Arc::new(ScriptFactory(Arc::new(steps), Arc::default())), toml::Table::new(), "test")
}

fn additive() -> Choice {
    Choice::new(Arc::new(AdditiveFactory), toml::Table::new(), "fallback")
}

const CAPS: Capabilities = Capabilities {
    max_cwnd_bytes: 1 << 32,
    max_rate_bytes_per_s: 1 << 32,
    can_clear_pacing: false,
    per_rtt_reports: false,
    cwnd_packets: None,
};

fn flow() -> FlowStart {
    FlowStart::new(1000, 10_000)
}

fn report(now_us: u64) -> Report {
    Report {
        now_us,
        interval_us: 10_000,
        mss_bytes: 1000,
        acked_bytes: 5000,
        rtt: Some(RttStats { min_us: 20_000, max_us: 20_000, last_us: 20_000, srtt_us: 20_000, mean_us: 20_000, samples: 5 }),
        ..Report::default()
    }
}

fn start_with(steps: Vec<Step>, caps: Capabilities) -> (Controller, Outcome) {
    Controller::start(choice(steps), additive(), caps, Limits::default(), &flow(), 0)
}

fn start(steps: Vec<Step>) -> (Controller, Outcome) {
    start_with(steps, CAPS)
}

#[test]
fn first_command_carries_every_setting() {
    let (c, out) = start(vec![]);
    assert_eq!(out.command.cwnd_bytes, Some(10_000));
    assert_eq!(out.command.report, Some(ReportPolicy::EveryUs(10_000)));
    assert_eq!(c.cwnd_bytes(), 10_000);
    assert_eq!(out.command, c.settings().changes_from(None));
}

#[test]
fn unchanged_values_are_not_resent() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(20_000.0)), Step::Act(Action::cwnd(20_000.0))]);
    assert_eq!(c.on_report(&report(1), 1).command.cwnd_bytes, Some(20_000));
    assert!(c.on_report(&report(2), 2).command.is_empty());
}

#[test]
fn nan_infinite_and_nonpositive_windows_are_refused() {
    for bad in [f64::NAN, f64::INFINITY, -5.0, 0.0] {
        let (mut c, _) = start(vec![Step::Act(Action::cwnd(bad).with_pacing(Pacing::BytesPerSec(1e6)))]);
        let out = c.on_report(&report(1), 1);
        assert!(matches!(out.fault, Some(Fault::InvalidCwnd(_))), "{bad}: {out:?}");
        assert!(out.command.is_empty(), "the whole action is refused, pacing too");
        assert_eq!(c.cwnd_bytes(), 10_000, "the flow keeps its last sane window");
        assert_eq!(c.pacing(), None);
    }
}

#[test]
fn tiny_and_huge_windows_are_clamped() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(1.0)), Step::Act(Action::cwnd(1e30))]);
    let out = c.on_report(&report(1), 1);
    assert_eq!(out.command.cwnd_bytes, Some(2000), "two packets at MSS 1000");
    assert_eq!(out.clamped, 1);
    let out = c.on_report(&report(2), 2);
    assert_eq!(out.command.cwnd_bytes, Some(1 << 32));
}

#[test]
fn pacing_is_clamped_and_off_is_dropped_where_unsupported() {
    let (mut c, _) = start(vec![
        Step::Act(Action::default().with_pacing(Pacing::BytesPerSec(1.0))),
        Step::Act(Action::default().with_pacing(Pacing::Off)),
        Step::Act(Action::default().with_pacing(Pacing::BytesPerSec(f64::NAN))),
    ]);
    let out = c.on_report(&report(1), 1);
    assert_eq!(out.command.pacing, Some(PacingCommand::BytesPerSec(12_500)));
    assert!(c.on_report(&report(2), 2).command.is_empty());
    let out = c.on_report(&report(3), 3);
    assert!(matches!(out.fault, Some(Fault::InvalidPacingRate(_))));
    assert_eq!(c.pacing(), Some(PacingCommand::BytesPerSec(12_500)));
}

#[test]
fn pacing_off_reaches_datapaths_that_can_clear_it() {
    let caps = Capabilities { can_clear_pacing: true, ..CAPS };
    let (mut c, _) = start_with(
        vec![
            Step::Act(Action::default().with_pacing(Pacing::BytesPerSec(1e6))),
            Step::Act(Action::default().with_pacing(Pacing::Off)),
        ],
        caps,
    );
    c.on_report(&report(1), 1);
    assert_eq!(c.on_report(&report(2), 2).command.pacing, Some(PacingCommand::Off));
    assert_eq!(c.pacing(), Some(PacingCommand::Off));
}

#[test]
fn panic_keeps_window_restarts_then_falls_back() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(30_000.0)), Step::Panic, Step::Panic, Step::Panic, Step::Panic]);
    c.on_report(&report(1), 1);
    assert_eq!(c.cwnd_bytes(), 30_000);
    for i in 0..3 {
        let out = c.on_report(&report(2 + i), 2 + i);
        assert!(matches!(out.fault, Some(Fault::Panicked(ref m)) if m == "scripted panic"), "{out:?}");
        assert!(out.restarted, "a panicked instance is rebuilt");
        assert!(out.fell_back_to.is_none());
        assert_eq!(c.algorithm_name(), "scripted");
        assert_eq!(c.cwnd_bytes(), 30_000, "the rebuilt instance is seeded with the flow's window");
    }
    // The fourth fault inside the window exceeds max_faults = 3.
    let out = c.on_report(&report(10), 10);
    assert_eq!(out.fell_back_to, Some("additive"));
    assert_eq!(c.algorithm_name(), "additive");
    assert_eq!(c.cwnd_bytes(), 30_000, "the fallback continues from the flow's window");
    assert_eq!(c.total_faults(), 4);
    // And the fallback now drives the flow.
    assert_eq!(c.on_report(&report(11), 11).command.cwnd_bytes, Some(31_000));
}

#[test]
fn a_hosted_call_that_fails_is_a_fault_and_only_an_abandoned_one_rebuilds() {
    let raised = CallError::Raised("Traceback: ZeroDivisionError".into());
    let timed_out = CallError::TimedOut { budget_us: 10_000 };
    let (mut c, _) = start(vec![
        Step::Act(Action::cwnd(30_000.0)),
        Step::Fail(raised.clone()),
        Step::Fail(CallError::WrongType("int".into())),
        Step::Fail(timed_out.clone()),
        Step::Fail(CallError::Unavailable("busy".into())),
    ]);
    c.on_report(&report(1), 1);
    let out = c.on_report(&report(2), 2);
    assert_eq!(out.fault, Some(Fault::Call(raised)));
    assert!(!out.restarted, "an exception leaves the instance intact: it carries on");
    assert_eq!(out.command, Command::default(), "the flow keeps its last sane settings");
    assert!(!c.on_report(&report(3), 3).restarted);
    let out = c.on_report(&report(4), 4);
    assert_eq!(out.fault, Some(Fault::Call(timed_out)));
    assert!(out.restarted, "an abandoned call may still be changing the instance: it is rebuilt");
    assert_eq!(c.cwnd_bytes(), 30_000);
    // The fourth fault within the window hands the flow to the fallback, as a panic would.
    let out = c.on_report(&report(5), 5);
    assert_eq!(out.fell_back_to, Some("additive"));
    assert_eq!(c.cwnd_bytes(), 30_000);
}

#[test]
fn faults_outside_the_window_are_forgotten() {
    let (mut c, _) = start(vec![Step::Panic; 10]);
    for i in 0..10u64 {
        let out = c.on_report(&report(i), 61_000_000 * i);
        assert!(out.fault.is_some());
        assert!(out.fell_back_to.is_none());
    }
    assert_eq!(c.algorithm_name(), "scripted");
}

#[test]
fn per_rtt_reports_follow_the_rtt_where_the_datapath_cannot_count_rtts() {
    let steps = vec![Step::Act(Action::default().with_report(ReportPolicy::PerRtt { rtts: 1.0 }))];
    let (mut c, _) = start(steps);
    let out = c.on_report(&report(1), 1);
    assert_eq!(out.command.report, Some(ReportPolicy::EveryUs(20_000)));
    let mut r = report(2);
    r.rtt = Some(RttStats { srtt_us: 21_000, ..r.rtt.unwrap() });
    assert_eq!(c.on_report(&r, 2).command.report, None, "within 1/8: not resent");
    r.rtt = Some(RttStats { srtt_us: 40_000, ..r.rtt.unwrap() });
    assert_eq!(c.on_report(&r, 3).command.report, Some(ReportPolicy::EveryUs(40_000)));
}

#[test]
fn per_rtt_reports_go_as_such_to_datapaths_that_count_rtts() {
    let caps = Capabilities { per_rtt_reports: true, ..CAPS };
    let steps = vec![
        Step::Act(Action::default().with_report(ReportPolicy::PerRtt { rtts: 0.125 })),
        Step::Act(Action::default().with_report(ReportPolicy::PerRtt { rtts: 1e9 })),
    ];
    let (mut c, _) = start_with(steps, caps);
    assert_eq!(c.on_report(&report(1), 1).command.report, Some(ReportPolicy::PerRtt { rtts: 0.125 }));
    let mut r = report(2);
    r.rtt = Some(RttStats { srtt_us: 40_000, ..r.rtt.unwrap() });
    let out = c.on_report(&r, 2);
    assert_eq!(out.command.report, Some(ReportPolicy::PerRtt { rtts: REPORT_RTTS_RANGE.1 }));
    assert_eq!(out.clamped, 1);
}

#[test]
fn a_per_rtt_default_waits_for_an_rtt_on_datapaths_that_cannot_count_rtts() {
    let limits = Limits { default_report: ReportPolicy::PerRtt { rtts: 1.0 }, ..Limits::default() };
    let (c, out) = Controller::start(choice(vec![]), additive(), CAPS, limits.clone(), &flow(), 0);
    assert_eq!(out.command.report, Some(ReportPolicy::EveryUs(INTERVAL_BEFORE_RTT_US)));
    assert_eq!(c.settings().report, ReportPolicy::EveryUs(INTERVAL_BEFORE_RTT_US));
    let native = Capabilities { per_rtt_reports: true, ..CAPS };
    let (_, out) = Controller::start(choice(vec![]), additive(), native, limits, &flow(), 0);
    assert_eq!(out.command.report, Some(ReportPolicy::PerRtt { rtts: 1.0 }));
}

#[test]
fn invalid_per_rtt_policies_are_faults() {
    for bad in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
        let (mut c, _) = start(vec![Step::Act(Action::default().with_report(ReportPolicy::PerRtt { rtts: bad }))]);
        let out = c.on_report(&report(1), 1);
        assert!(matches!(out.fault, Some(Fault::InvalidReportRtts(_))), "{bad}: {out:?}");
        assert_eq!(c.settings().report, ReportPolicy::EveryUs(10_000));
    }
}

#[test]
fn report_interval_is_bounded() {
    let (mut c, _) = start(vec![Step::Act(Action::default().with_report(ReportPolicy::EveryUs(1)))]);
    let out = c.on_report(&report(1), 1);
    assert_eq!(out.command.report, Some(ReportPolicy::EveryUs(MIN_REPORT_INTERVAL_US)));
}

#[test]
fn swap_seeds_the_new_algorithm_from_the_flow() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(50_000.0))]);
    c.on_report(&report(1), 1);
    let out = c.swap(additive(), 2);
    assert_eq!(c.algorithm_name(), "additive");
    assert!(out.command.is_empty(), "{out:?}");
    assert_eq!(c.cwnd_bytes(), 50_000);
    assert_eq!(c.on_report(&report(2), 3).command.cwnd_bytes, Some(51_000));
}

#[test]
fn adopted_flow_starts_from_its_reported_window() {
    let mut f = flow();
    f.seed = Some(Seed { cwnd_bytes: 77_000, srtt_us: Some(20_000), ..Seed::default() });
    let (c, out) = Controller::start(additive(), additive(), CAPS, Limits::default(), &f, 0);
    assert_eq!(c.cwnd_bytes(), 77_000);
    assert_eq!(c.srtt_us(), Some(20_000));
    assert_eq!(out.command.cwnd_bytes, Some(77_000));
}

#[test]
fn settings_changes_name_only_what_differs() {
    let a = Settings {
        cwnd_bytes: 10,
        pacing: None,
        report: ReportPolicy::EveryUs(5),
        rtt_threshold_us: Some(7),
        report_acked_pkts: 0,
        ack_aggregation_bw_bytes_per_s: 0,
    };
    assert!(a.changes_from(Some(&a)).is_empty());
    let b = Settings { cwnd_bytes: 11, ..a };
    assert_eq!(b.changes_from(Some(&a)), Command { cwnd_bytes: Some(11), ..Command::default() });
    let all = a.changes_from(None);
    assert_eq!((all.cwnd_bytes, all.pacing, all.report, all.rtt_threshold_us), (Some(10), None, Some(a.report), Some(7)));
    assert_eq!(all.report_acked_pkts, None, "an off trigger is the datapath's default");
    let c = Settings { report_acked_pkts: 10, ..a };
    assert_eq!(c.changes_from(Some(&a)).report_acked_pkts, Some(10));
    assert_eq!(a.changes_from(Some(&c)).report_acked_pkts, Some(0), "turning it off is a change");
    assert_eq!(all.ack_aggregation_bw_bytes_per_s, None, "no measurement is the datapath's default");
    let d = Settings { ack_aggregation_bw_bytes_per_s: 1_000, ..a };
    assert_eq!(d.changes_from(Some(&a)).ack_aggregation_bw_bytes_per_s, Some(1_000));
    assert_eq!(d.changes_from(None).ack_aggregation_bw_bytes_per_s, Some(1_000));
    assert_eq!(a.changes_from(Some(&d)).ack_aggregation_bw_bytes_per_s, Some(0), "stopping it is a change");
}

#[test]
fn packet_report_triggers_are_kept_and_bounded() {
    let (mut c, _) = start(vec![
        Step::Act(Action::default().with_report_acked_pkts(10)),
        Step::Act(Action::default().with_report_acked_pkts(u32::MAX)),
        Step::Act(Action::default().with_report_acked_pkts(0)),
    ]);
    assert_eq!(c.on_report(&report(1), 1).command.report_acked_pkts, Some(10));
    assert_eq!(c.settings().report_acked_pkts, 10);
    let out = c.on_report(&report(2), 2);
    assert_eq!((out.command.report_acked_pkts, out.clamped), (Some(MAX_REPORT_ACKED_PKTS), 1));
    assert_eq!(c.on_report(&report(3), 3).command.report_acked_pkts, Some(0));
}

#[test]
fn a_swapped_algorithm_learns_whether_the_flow_negotiated_ecn() {
    let f = FlowStart { ecn: Some(true), ..flow() };
    let (mut c, _) = Controller::start(choice(vec![]), additive(), CAPS, Limits::default(), &f, 0);
    assert_eq!(c.seeded_start().ecn, Some(true));
    c.swap(additive(), 1);
    assert_eq!(c.seeded_start().ecn, Some(true));
}

#[test]
fn a_window_that_comes_to_the_same_packets_is_not_sent() {
    // MSS 1000: 10,000 B is 10 packets either way; the datapath holds 10.
    let steps = [10_400.0, 10_999.0, 11_000.0, 11_400.0, 11_600.0, 10_999.0];
    let run = |unit: Option<PacketWindow>| -> Vec<Option<u64>> {
        let script = steps.iter().map(|c| Step::Act(Action::cwnd(*c))).collect();
        let (mut c, _) = start_with(script, Capabilities { cwnd_packets: unit, ..CAPS });
        steps.iter().enumerate().map(|(i, _)| c.on_report(&report(i as u64 * 10_000), 0).command.cwnd_bytes).collect()
    };
    assert_eq!(
        run(Some(PacketWindow::Floor)),
        vec![None, None, Some(11_000), None, None, Some(10_999)],
        "floor: 10, 10, 11, 11, 11, 10 packets"
    );
    assert_eq!(
        run(Some(PacketWindow::Nearest)),
        vec![None, Some(10_999), None, None, Some(11_600), Some(10_999)],
        "nearest: 10, 11, 11, 11, 12, 11 packets"
    );
    assert_eq!(
        run(None),
        vec![Some(10_400), Some(10_999), Some(11_000), Some(11_400), Some(11_600), Some(10_999)],
        "a datapath in bytes gets every change"
    );
}

/// An algorithm that grows its window without end (a buggy or learned one) on a flow its window
/// does not limit: the datapath holds at most twice the flight (or the restart window), the
/// algorithm is not told, and a swap seeds the next algorithm from what the datapath held.
#[test]
fn a_window_the_flow_does_not_use_is_held_to_twice_its_flight() {
    let runaway: Vec<Step> = (1..=50).map(|i| Step::Act(Action::cwnd(1e6 * f64::from(i)))).collect();
    let (mut c, _) = start(runaway);
    let idle = |now_us: u64| Report { inflight_bytes: 15_000, cwnd_limited: false, ..report(now_us) };
    for i in 1..=20 {
        c.on_report(&idle(i * 10_000), i * 10_000);
        assert_eq!(c.cwnd_bytes(), 30_000, "report {i}");
    }
    assert_eq!(c.window_ceiling_bytes(), Some(30_000));
    // The application turns bulk: the 30 kB window fills, and the ceiling doubles once per SRTT
    // (20 ms) with the flight, however fast the reports come.
    let mut held = Vec::new();
    for i in 21..=30 {
        let bulk = Report { inflight_bytes: c.cwnd_bytes(), cwnd_limited: true, ..report(i * 10_000) };
        c.on_report(&bulk, i * 10_000);
        held.push(c.cwnd_bytes());
    }
    assert_eq!(held, [30_000, 60_000, 60_000, 120_000, 120_000, 240_000, 240_000, 480_000, 480_000, 960_000]);
    // Idle again: the 480 kB the flow had in flight within the in-use period still count.
    c.on_report(&idle(310_000), 310_000);
    assert_eq!(c.cwnd_bytes(), 960_000);
    c.swap(additive(), 310_000);
    assert_eq!(c.cwnd_bytes(), 960_000, "the new algorithm starts from the held window");
}

/// Datapaths that cannot tell report `cwnd_limited` (the default): nothing changes for them.
#[test]
fn reports_that_do_not_say_leave_the_window_alone() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(5e8))]);
    assert!(report(1).cwnd_limited);
    c.on_report(&report(1), 1);
    assert_eq!(c.cwnd_bytes(), 500_000_000);
    assert_eq!(c.window_ceiling_bytes(), None);
}

/// An algorithm hosted elsewhere, as the controller sees one: it takes reports ahead and answers
/// each when the controller gives it the same report. Its answer depends on the report's time:
/// 2 is a NaN window, 3 a call abandoned past its budget; beginning 99 panics.
#[derive(Default)]
struct Ahead {
    begun: std::collections::VecDeque<Report>,
    collected: Arc<AtomicUsize>,
}

impl Algorithm for Ahead {
    fn name(&self) -> &'static str {
        "ahead"
    }
    fn init(&mut self, _: &FlowStart) -> Action {
        Action::cwnd(20_000.0)
    }
    fn on_report(&mut self, r: &Report) -> Action {
        self.try_on_report(r).unwrap_or_default()
    }
    fn try_on_report(&mut self, r: &Report) -> Result<Action, CallError> {
        if let Some(begun) = self.begun.pop_front() {
            assert_eq!(&begun, r, "the controller collects what it began, in order");
            self.collected.fetch_add(1, Ordering::SeqCst);
        }
        match r.now_us {
            2 => Ok(Action::cwnd(f64::NAN)),
            3 => Err(CallError::TimedOut { budget_us: 10_000 }),
            t => Ok(Action::cwnd(20_000.0 + t as f64 * 1000.0)),
        }
    }
    fn begin_on_report(&mut self, r: &Report) -> bool {
        assert_ne!(r.now_us, 99, "a bug in the host");
        self.begun.push_back(r.clone());
        true
    }
    fn begun_ready(&self) -> bool {
        // Its answers come when the next report is begun.
        self.begun.len() != 1
    }
}

struct AheadFactory(Arc<AtomicUsize>);

impl AlgorithmFactory for AheadFactory {
    fn name(&self) -> &'static str {
        "ahead"
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Ahead { collected: Arc::clone(&self.0), ..Ahead::default() })
    }
}

#[test]
fn a_report_begun_ahead_is_decided_under_the_same_containment() {
    let (mut native, _) = start(vec![]);
    assert!(!native.begin_report(&report(1)), "a native algorithm runs where it is called");

    let collected = Arc::new(AtomicUsize::new(0));
    let hosted = Choice::new(Arc::new(AheadFactory(Arc::clone(&collected))), toml::Table::new(), "test");
    let (mut c, _) = Controller::start(hosted, additive(), CAPS, Limits::default(), &flow(), 0);
    assert!(c.begun_ready(), "nothing begun");
    assert!(c.begin_report(&report(1)));
    assert!(!c.begun_ready());
    assert!(c.begin_report(&report(2)), "two reports of a flow begin in order");
    assert!(c.begun_ready());
    let out = c.on_report(&report(1), 1);
    assert_eq!((out.fault, c.cwnd_bytes()), (None, 21_000));
    let out = c.on_report(&report(2), 2);
    assert!(matches!(out.fault, Some(Fault::InvalidCwnd(v)) if v.is_nan()), "{out:?}");
    assert_eq!(c.cwnd_bytes(), 21_000, "a begun report's action is sanitized like any other");
    assert_eq!(collected.load(Ordering::SeqCst), 2);

    assert!(c.begin_report(&report(3)));
    let out = c.on_report(&report(3), 3);
    assert_eq!(out.fault, Some(Fault::Call(CallError::TimedOut { budget_us: 10_000 })));
    assert!(out.restarted, "abandoned ahead as when called: rebuilt");
    assert_eq!(c.total_faults(), 2);

    // A host that panics while beginning is contained: the report is then decided when given.
    assert!(!c.begin_report(&report(99)));
    let out = c.on_report(&report(99), 99);
    assert_eq!((out.fault, c.cwnd_bytes()), (None, 119_000));
    assert_eq!(collected.load(Ordering::SeqCst), 3);
}

#[test]
fn aggregation_rates_are_kept_bounded_and_bad_ones_are_faults() {
    let (mut c, _) = start(vec![
        Step::Act(Action::default().with_ack_aggregation_bw(2_500_000.4)),
        Step::Act(Action::default().with_ack_aggregation_bw(f64::MAX)),
        Step::Act(Action::default().with_ack_aggregation_bw(0.0)),
        Step::Act(Action::default().with_ack_aggregation_bw(f64::NAN)),
        Step::Act(Action::default().with_ack_aggregation_bw(-1.0)),
    ]);
    assert_eq!(c.on_report(&report(1), 1).command.ack_aggregation_bw_bytes_per_s, Some(2_500_000));
    let out = c.on_report(&report(2), 2);
    assert_eq!(out.command.ack_aggregation_bw_bytes_per_s, Some(CAPS.max_rate_bytes_per_s), "clamped to the datapath's rates");
    assert_eq!(c.on_report(&report(3), 3).command.ack_aggregation_bw_bytes_per_s, Some(0), "0 stops it");
    for now in [4, 5] {
        let out = c.on_report(&report(now), now);
        assert!(matches!(out.fault, Some(Fault::InvalidAggregationRate(_))), "{out:?}");
        assert_eq!(c.settings().ack_aggregation_bw_bytes_per_s, 0);
    }
}
