//! Feeds arbitrary text to the agent's configuration loader, `AgentConfig::parse` (what `--config`
//! and `check-config` run). It must answer Ok or Err, never panic; an error must name the file
//! (and a line that exists); an accepted configuration must hold everything `resolve` promises,
//! build every algorithm it chose, and parse again to the same configuration.
#![no_main]

use std::time::Duration;

use ccp_agent::config::{AgentConfig, ConfigError, Overrides, MAX_PACING_RATE_FLOOR, MIN_PACING_RATE_FLOOR};
use ccp_agent::datapath::Kind;
use ccp_agent::flows::admission::FlowLimits;
use ccp_algorithms::registry;
use ccp_contract::{Choice, FlowStart, ReportPolicy, MAX_REPORT_INTERVAL_US, MIN_REPORT_INTERVAL_US};
use libfuzzer_sys::fuzz_target;

const NAME: &str = "fuzz.toml";

fn check_error(e: &ConfigError, text: &str) {
    // "fuzz.toml" or "fuzz.toml:LINE", LINE within the text.
    let rest = e.location.strip_prefix(NAME).unwrap_or_else(|| panic!("error location {:?} does not name the file", e.location));
    if let Some(line) = rest.strip_prefix(':') {
        let line: usize = line.parse().unwrap_or_else(|_| panic!("bad line in {:?}", e.location));
        assert!(line >= 1 && line <= text.matches('\n').count() + 1, "line {line} outside the text: {e}");
    } else {
        assert!(rest.is_empty(), "error location {:?}", e.location);
    }
    assert!(!e.message.is_empty());
}

fn check_choice(c: &Choice) {
    let info = registry::find(c.factory.name()).expect("a chosen algorithm is registered");
    info.configure(&c.params).expect("a chosen algorithm's parameters validate again");
    // Not inside the controller's containment: building an algorithm must not panic.
    let mut alg = c.factory.create();
    let _ = alg.init(&FlowStart::new(1448, 10 * 1448));
}

fn check_ok(cfg: &AgentConfig, text: &str) {
    cfg.datapath.check().expect("an accepted datapath section checks");
    Kind::find(&cfg.datapath.kind).expect("the datapath kind is known");
    let l = &cfg.limits;
    assert!(l.min_cwnd_pkts.is_finite() && (1.0..=1000.0).contains(&l.min_cwnd_pkts), "{l:?}");
    assert!(l.fault_window_us >= 1_000_000, "{l:?}");
    assert!((MIN_PACING_RATE_FLOOR..=MAX_PACING_RATE_FLOOR).contains(&l.min_pacing_rate_bytes_per_s), "{l:?}");
    let f = &cfg.flow_limits;
    let (lo, hi) = FlowLimits::RANGE;
    for v in [f.max_flows, f.max_flows_per_peer, f.max_flows_per_netns, f.max_flows_per_uid] {
        assert!((lo..=hi).contains(&v), "{f:?}");
    }
    match l.default_report {
        ReportPolicy::EveryUs(us) => assert!((MIN_REPORT_INTERVAL_US..=MAX_REPORT_INTERVAL_US).contains(&us), "{l:?}"),
        ReportPolicy::PerRtt { rtts } => assert!(rtts.is_finite() && rtts > 0.0, "{l:?}"),
    }
    assert!(cfg.flow_idle_timeout >= Duration::from_secs(1));
    if let Some(m) = cfg.metrics_listen {
        assert!(m.ip().is_loopback(), "metrics on {m}");
    }
    if let Some(c) = &cfg.cnm {
        assert!(!c.allow_from.is_empty());
        let (lo, hi) = ccp_agent::cnm::MAX_PER_PASS_RANGE;
        assert!((lo..=hi).contains(&c.max_per_pass));
        let (lo, hi) = ccp_agent::cnm::RECV_BUFFER_RANGE;
        assert!((lo..=hi).contains(&c.recv_buffer_bytes));
    }
    for alg in cfg.algorithm_params.keys() {
        assert!(registry::find(alg).is_some(), "[algorithms.{alg}] accepted");
    }
    check_choice(&cfg.policy.default);
    check_choice(&cfg.policy.fallback);
    for r in &cfg.policy.rules {
        assert!(!r.matcher.is_empty(), "rule {:?} matches everything", r.name);
        check_choice(&r.choice);
    }
    // Parsing is a function of the text.
    let again = AgentConfig::parse(NAME, text, &Overrides::default()).expect("accepted once, accepted again");
    assert_eq!(again.datapath, cfg.datapath);
    assert_eq!(again.limits, cfg.limits);
    assert_eq!(again.flow_limits, cfg.flow_limits);
    assert_eq!(again.control, cfg.control);
    assert_eq!(again.metrics_listen, cfg.metrics_listen);
    assert_eq!(again.cnm, cfg.cnm);
    assert_eq!(again.algorithm_params, cfg.algorithm_params);
    assert_eq!(again.policy.rules.len(), cfg.policy.rules.len());
}

fuzz_target!(|data: &[u8]| {
    // The loader reads the file with read_to_string: text that is not UTF-8 never reaches it.
    let Ok(text) = std::str::from_utf8(data) else { return };
    match AgentConfig::parse(NAME, text, &Overrides::default()) {
        Ok(cfg) => check_ok(&cfg, text),
        Err(e) => check_error(&e, text),
    }
});
