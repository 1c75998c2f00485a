//! The adapter's own logic; its behaviour against the kernel is covered end to end
//! (tests/e2e/ebpf.rs).

use ccp_contract::ReportPolicy;
use ccp_ebpf::ReportEvery;

use super::*;

#[test]
fn report_policies_reach_the_kernel_in_its_terms() {
    assert_eq!(settings::report_every(ReportPolicy::EveryUs(10_000)), ReportEvery::Micros(10_000));
    assert_eq!(settings::report_every(ReportPolicy::EveryUs(u64::MAX)), ReportEvery::Micros(u32::MAX));
    assert_eq!(settings::report_every(ReportPolicy::PerRtt { rtts: 1.0 }), ReportEvery::RttSixteenths(16));
    assert_eq!(settings::report_every(ReportPolicy::PerRtt { rtts: 0.125 }), ReportEvery::RttSixteenths(2));
    assert_eq!(settings::report_every(ReportPolicy::PerRtt { rtts: 0.001 }), ReportEvery::RttSixteenths(1));
}

#[test]
fn knobs_follow_the_section_and_the_default_policy() {
    let cfg = EbpfSettings { silence_timeout_ms: 250, ..EbpfSettings::default() };
    let k = cfg.knobs(ReportPolicy::PerRtt { rtts: 1.0 });
    assert_eq!(k.silence_timeout, Duration::from_millis(250));
    assert_eq!(k.default_report, ReportEvery::RttSixteenths(16));
    assert_eq!(k.fallback, ccp_ebpf::Fallback::Cubic);
    let k = EbpfSettings::default().knobs(ReportPolicy::EveryUs(20_000));
    assert_eq!(k.default_report, ReportEvery::Micros(20_000));
    assert_eq!(k.wake_gap, Duration::from_micros(100));
}

#[test]
fn a_busy_polling_agent_is_never_woken_for_an_ordinary_record() {
    let on: toml::Table = "busy_poll = true\nwake_gap_us = 50".parse().unwrap();
    let s = EbpfSettings::from_section(&on).unwrap();
    assert!(s.busy_poll);
    let k = s.knobs(ReportPolicy::EveryUs(10_000));
    assert_eq!(k.wake_gap, Duration::MAX, "wake_gap_us is ignored");
    assert!(!EbpfSettings::default().busy_poll);
}

#[test]
fn settings_become_a_whole_control_entry() {
    let want = Settings {
        cwnd_bytes: 0,
        pacing: Some(PacingCommand::Off),
        report: ReportPolicy::PerRtt { rtts: 2.0 },
        rtt_threshold_us: Some(u64::MAX),
        report_acked_pkts: 10,
        ack_aggregation_bw_bytes_per_s: 25_000_000,
    };
    let c = control(&want);
    assert_eq!(c.cwnd_bytes, Some(1), "a zero window is not a command anyone means");
    assert_eq!(c.pacing_bytes_per_s, None, "off clears pacing");
    assert_eq!(c.report, ReportEvery::RttSixteenths(32));
    assert_eq!(c.rtt_threshold_us, Some(u32::MAX));
    assert_eq!(c.report_acked_pkts, 10);
    assert_eq!(c.aggregation_bytes_per_s, 25_000_000);
    let paced = control(&Settings { pacing: Some(PacingCommand::BytesPerSec(1_000)), ..want });
    assert_eq!(paced.pacing_bytes_per_s, Some(1_000));
}

#[test]
fn sections_are_checked_and_name_the_bad_key() {
    let ok: toml::Table = "name = \"ccp2\"\nfallback = \"reno\"\nsilence_timeout_ms = 250".parse().unwrap();
    let s = EbpfSettings::from_section(&ok).unwrap();
    assert_eq!((s.name.as_str(), s.fallback, s.silence_timeout_ms), ("ccp2", ccp_ebpf::Fallback::Reno, 250));
    let typo: toml::Table = "nmae = \"x\"".parse().unwrap();
    assert!(EbpfSettings::from_section(&typo).unwrap_err().contains("nmae"));
    let bad: toml::Table = "ring_bytes = 1000".parse().unwrap();
    assert!(EbpfSettings::from_section(&bad).unwrap_err().contains("ring_bytes"));
    let long: toml::Table = "name = \"a_name_that_is_far_too_long\"".parse().unwrap();
    assert!(EbpfSettings::from_section(&long).unwrap_err().starts_with("name"));
}
