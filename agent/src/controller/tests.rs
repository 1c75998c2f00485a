use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use ccp_algorithms::{RttStats, StateVar};

/// An algorithm that plays back a script of behaviours, one per call.
#[derive(Clone)]
enum Step {
    Act(Action),
    Panic,
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
    fn on_report(&mut self, _: &Report) -> Action {
        let at = self.at.fetch_add(1, Ordering::SeqCst);
        let step = self.steps.get(at).cloned().unwrap_or(Step::Act(Action::default()));
        match step {
            Step::Act(a) => a,
            Step::Panic => panic!("scripted panic"),
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

fn choice(steps: Vec<Step>) -> Choice {
    Choice {
        factory: Arc::new(ScriptFactory(Arc::new(steps), Arc::default())),
        params: toml::Table::new(),
        origin: "test".into(),
    }
}

fn reno() -> Choice {
    Choice::configure("reno", toml::Table::new(), "fallback").unwrap()
}

const CAPS: Capabilities = Capabilities { max_cwnd_bytes: 1 << 32, max_rate_bytes_per_s: 1 << 32, can_clear_pacing: false };

fn info() -> FlowInfo {
    FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, ..FlowInfo::default() }
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

fn start(steps: Vec<Step>) -> (Controller, Outcome) {
    Controller::start(choice(steps), reno(), CAPS, Limits::default(), &info())
}

#[test]
fn first_command_sets_window_and_report_interval() {
    let (c, out) = start(vec![]);
    assert_eq!(out.command.cwnd_bytes, Some(10_000));
    assert_eq!(out.command.report_interval_us, Some(10_000));
    assert_eq!(c.cwnd_bytes(), 10_000);
}

#[test]
fn unchanged_values_are_not_resent() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(20_000.0)), Step::Act(Action::cwnd(20_000.0))]);
    let now = Instant::now();
    assert_eq!(c.on_report(&report(1), now).command.cwnd_bytes, Some(20_000));
    assert!(c.on_report(&report(2), now).command.is_empty());
}

#[test]
fn nan_infinite_and_nonpositive_windows_are_refused() {
    for bad in [f64::NAN, f64::INFINITY, -5.0, 0.0] {
        let (mut c, _) = start(vec![Step::Act(Action::cwnd(bad))]);
        let out = c.on_report(&report(1), Instant::now());
        assert!(matches!(out.fault, Some(Fault::InvalidCwnd(_))), "{bad}: {out:?}");
        assert!(out.command.is_empty());
        assert_eq!(c.cwnd_bytes(), 10_000, "the flow keeps its last sane window");
    }
}

#[test]
fn tiny_and_huge_windows_are_clamped() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(1.0)), Step::Act(Action::cwnd(1e30))]);
    let out = c.on_report(&report(1), Instant::now());
    assert_eq!(out.command.cwnd_bytes, Some(2000), "two packets at MSS 1000");
    assert_eq!(out.clamped, 1);
    let out = c.on_report(&report(2), Instant::now());
    assert_eq!(out.command.cwnd_bytes, Some(1 << 32));
}

#[test]
fn pacing_is_clamped_and_off_is_dropped_where_unsupported() {
    let (mut c, _) = start(vec![
        Step::Act(Action::default().with_pacing(Pacing::BytesPerSec(1.0))),
        Step::Act(Action::default().with_pacing(Pacing::Off)),
        Step::Act(Action::default().with_pacing(Pacing::BytesPerSec(f64::NAN))),
    ]);
    let out = c.on_report(&report(1), Instant::now());
    assert_eq!(out.command.pacing, Some(PacingCommand::BytesPerSec(12_500)));
    assert!(c.on_report(&report(2), Instant::now()).command.is_empty());
    let out = c.on_report(&report(3), Instant::now());
    assert!(matches!(out.fault, Some(Fault::InvalidPacingRate(_))));
    assert_eq!(c.pacing(), Some(PacingCommand::BytesPerSec(12_500)));
}

#[test]
fn panic_keeps_window_restarts_then_falls_back() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(30_000.0)), Step::Panic, Step::Panic, Step::Panic, Step::Panic]);
    let now = Instant::now();
    c.on_report(&report(1), now);
    assert_eq!(c.cwnd_bytes(), 30_000);
    for i in 0..3 {
        let out = c.on_report(&report(2 + i), now);
        assert!(matches!(out.fault, Some(Fault::Panicked(ref m)) if m == "scripted panic"), "{out:?}");
        assert!(out.restarted, "a panicked instance is rebuilt");
        assert!(out.fell_back_to.is_none());
        assert_eq!(c.algorithm_name(), "scripted");
        assert_eq!(c.cwnd_bytes(), 30_000, "the rebuilt instance is seeded with the flow's window");
    }
    // The fourth fault inside the window exceeds max_faults = 3.
    let out = c.on_report(&report(10), now);
    assert_eq!(out.fell_back_to, Some("reno"));
    assert_eq!(c.algorithm_name(), "reno");
    assert_eq!(c.cwnd_bytes(), 30_000, "the fallback continues from the flow's window");
    assert_eq!(c.total_faults(), 4);
    // And reno now drives the flow.
    assert!(c.on_report(&report(11), now).command.cwnd_bytes.is_some_and(|w| w > 30_000));
}

#[test]
fn faults_outside_the_window_are_forgotten() {
    let (mut c, _) = start(vec![Step::Panic]);
    let t0 = Instant::now();
    for i in 0..10u64 {
        let out = c.on_report(&report(i), t0 + Duration::from_secs(61 * i));
        assert!(out.fell_back_to.is_none());
    }
    assert_eq!(c.algorithm_name(), "scripted");
}

#[test]
fn per_rtt_reports_follow_the_rtt() {
    let steps = vec![Step::Act(Action::default().with_report(ReportPolicy::PerRtt { rtts: 1.0 }))];
    let (mut c, _) = start(steps);
    let out = c.on_report(&report(1), Instant::now());
    assert_eq!(out.command.report_interval_us, Some(20_000));
    let mut r = report(2);
    r.rtt = Some(RttStats { srtt_us: 21_000, ..r.rtt.unwrap() });
    assert_eq!(c.on_report(&r, Instant::now()).command.report_interval_us, None, "within 1/8: not resent");
    r.rtt = Some(RttStats { srtt_us: 40_000, ..r.rtt.unwrap() });
    assert_eq!(c.on_report(&r, Instant::now()).command.report_interval_us, Some(40_000));
}

#[test]
fn report_interval_is_bounded() {
    let (mut c, _) = start(vec![Step::Act(Action::default().with_report(ReportPolicy::EveryUs(1)))]);
    let out = c.on_report(&report(1), Instant::now());
    assert_eq!(out.command.report_interval_us, Some(MIN_REPORT_INTERVAL_US));
}

#[test]
fn swap_seeds_the_new_algorithm_from_the_flow() {
    let (mut c, _) = start(vec![Step::Act(Action::cwnd(50_000.0))]);
    c.on_report(&report(1), Instant::now());
    let out = c.swap(reno(), Instant::now());
    assert_eq!(c.algorithm_name(), "reno");
    assert!(out.command.is_empty() || out.command.cwnd_bytes == Some(50_000), "{out:?}");
    assert_eq!(c.cwnd_bytes(), 50_000);
    // Reno, seeded, continues in congestion avoidance.
    let out = c.on_report(&report(2), Instant::now());
    let w = out.command.cwnd_bytes.unwrap();
    assert!(w > 50_000 && w < 50_200, "{w}");
}

#[test]
fn adopted_flow_starts_from_its_reported_window() {
    let mut i = info();
    i.existing = Some(Seed { cwnd_bytes: 77_000, srtt_us: Some(20_000), ..Seed::default() });
    let (c, _) = Controller::start(reno(), reno(), CAPS, Limits::default(), &i);
    assert_eq!(c.cwnd_bytes(), 77_000);
    assert_eq!(c.srtt_us(), Some(20_000));
}
