//! The adapter's own logic; its behaviour against the kernel is covered end to end
//! (tests/e2e/ebpf.rs).

use super::*;

#[test]
fn the_default_interval_means_per_rtt_only_when_asked() {
    assert_eq!(report_every(None, 10_000), ReportEvery::Micros(10_000));
    assert_eq!(report_every(Some(10_000), 10_000), ReportEvery::RttSixteenths(16));
    assert_eq!(report_every(Some(10_000), 5_000), ReportEvery::Micros(5_000));
    assert_eq!(report_every(None, u64::MAX), ReportEvery::Micros(u32::MAX));
}

#[test]
fn knobs_follow_the_section() {
    let cfg = EbpfSection { silence_timeout_ms: 250, report_per_rtt: true, ..EbpfSection::default() };
    let k = knobs(&cfg, 10_000);
    assert_eq!(k.silence_timeout, Duration::from_millis(250));
    assert_eq!(k.default_report, ReportEvery::RttSixteenths(16));
    assert_eq!(k.fallback, ccp_ebpf::Fallback::Cubic);
    let k = knobs(&EbpfSection::default(), 20_000);
    assert_eq!(k.default_report, ReportEvery::Micros(20_000));
    assert_eq!(k.wake_gap, Duration::from_micros(100));
}
