//! The standard fold, executed by the reference interpreter of libccp's machine, against
//! synthetic ACKs: each report field must hold what the measurement contract says.

use std::time::{Duration, Instant};

use ccp_contract::Urgent;
use ccp_lang::interp::{Flow, Primitives};

use super::fold::{FlowDecoder, Fold, CTL_INTERVAL_US, CTL_MSS_BYTES, CTL_REPORT_PKTS_BELOW, CTL_RTT_THRESHOLD_US};

const NO_RTT: u64 = 0;

fn ack(bytes: u32, rtt_us: u64) -> Primitives {
    Primitives {
        bytes_acked: bytes,
        packets_acked: bytes / 1000,
        rtt_sample_us: rtt_us,
        bytes_in_flight: 20_000,
        packets_in_flight: 20,
        // Large, so that only the tests about the data-driven trigger see it fire.
        snd_cwnd: 10_000_000,
        bytes_pending: 50_000,
        ..Primitives::default()
    }
}

struct Harness {
    fold: Fold,
    flow: Flow,
    decoder: FlowDecoder,
    t0: Instant,
}

impl Harness {
    /// A flow just switched to the fold; its timer starts with an empty invocation at t = 0,
    /// as libccp starts `Micros` at the first invocation after CHANGE_PROG.
    fn new() -> Harness {
        let fold = Fold::compile().unwrap();
        let flow = Flow::new(&fold.program.install(1)).unwrap();
        let t0 = Instant::now();
        let mut h = Harness { decoder: FlowDecoder::new(1000, t0), fold, flow, t0 };
        assert!(h.invoke(ack(0, NO_RTT), 0).is_none());
        h
    }

    /// Invokes once at `now_us`; returns the decoded report if the fold sent one.
    fn invoke(&mut self, p: Primitives, now_us: u64) -> Option<ccp_contract::Report> {
        let out = self.flow.invoke(&p, now_us);
        assert!(out.error.is_none(), "the fold must never abort: {:?}", out.error);
        let fields = out.report?;
        assert_eq!(fields.len(), self.fold.layout.num_fields);
        Some(self.decoder.decode(&self.fold.layout, &fields, self.t0 + Duration::from_micros(now_us)))
    }
}

#[test]
fn fold_fits_libccp_and_reports_every_interval() {
    let mut h = Harness::new();
    let ack = |bytes, rtt| Primitives { snd_cwnd: 30_000, ..ack(bytes, rtt) };
    assert!(h.fold.program.instrs().len() <= ccp_wire::limits::MAX_INSTRUCTIONS);
    // With little data acknowledged, reports come only once Micros exceeds the interval (10 ms).
    for t in (1_000..10_000).step_by(1_000) {
        assert!(h.invoke(ack(300, 20_000), t).is_none(), "early report at {t}");
    }
    let r = h.invoke(ack(300, 20_000), 10_500).expect("report after the interval");
    assert_eq!(r.acked_bytes, 3_000);
    assert_eq!(r.urgent, None);
    // Volatile fields reset after the report; now an eighth of a window comes before the timer.
    // (An eighth of 30 packets is 3.75, below the 8-packet floor: 8 packets.)
    let r2 = (11_000..=21_000).step_by(1_000).find_map(|t| h.invoke(ack(2000, 20_000), t)).unwrap();
    assert_eq!(r2.acked_bytes, 2000 * 4);
}

#[test]
fn an_eighth_of_a_window_acknowledged_reports_early_but_not_too_often() {
    let mut h = Harness::new(); // interval 10 ms
    let ack = |bytes, rtt| Primitives { snd_cwnd: 100_000, ..ack(bytes, rtt) };
    // ACKs 5 ms after the last report: an eighth of the window (12,500 B, above the 8-packet
    // floor) triggers a report.
    let r = (0..20u64).find_map(|i| h.invoke(ack(1000, 20_000), 5_000 + i)).expect("early report");
    assert_eq!(r.acked_bytes, 13_000, "reported on the ACK that took it past an eighth of a window");
    // Inside interval/16 (625 µs) of that report, more data waits.
    assert!((0..20u64).all(|i| h.invoke(ack(1000, 20_000), 5_100 + i).is_none()));
    // After it, the next ACK over an eighth of a window reports.
    assert!(h.invoke(ack(1000, 20_000), 5_700).is_some());
}

#[test]
fn a_small_window_reports_every_eight_packets_not_every_ack() {
    // Interval 10 ms. Five packets of window: an eighth is less than one packet, so without the
    // packet floor every ACK (here one per 0.7 ms, beyond the interval/16 gap) would report.
    let mut h = Harness::new();
    let ack = |bytes, rtt| Primitives { snd_cwnd: 5_000, ..ack(bytes, rtt) };
    let reported: Vec<u64> = (1..=13u64).filter(|i| h.invoke(ack(1000, 20_000), i * 700).is_some()).collect();
    assert_eq!(reported, vec![8], "one report per eight packets acknowledged, none per ACK");
}

#[test]
fn rtt_statistics_ignore_acks_without_samples() {
    let mut h = Harness::new();
    let samples = [30_000, NO_RTT, 10_000, 20_000, NO_RTT];
    for (i, rtt) in samples.iter().enumerate() {
        assert!(h.invoke(ack(1000, *rtt), 1_000 + i as u64).is_none());
    }
    let r = h.invoke(ack(1000, 40_000), 20_000).unwrap();
    let rtt = r.rtt.expect("rtt stats");
    assert_eq!(rtt.samples, 4);
    assert_eq!(rtt.min_us, 10_000);
    assert_eq!(rtt.max_us, 40_000);
    assert_eq!(rtt.last_us, 40_000);
    assert_eq!(rtt.mean_us, 25_000);
    assert_eq!(rtt.srtt_us, 25_000, "the first report's SRTT is its mean");

    // An interval without any RTT sample reports none.
    let r = (21_000..40_000).step_by(1_000).find_map(|t| h.invoke(ack(1000, NO_RTT), t)).unwrap();
    assert_eq!(r.rtt, None);
}

#[test]
fn loss_and_timeout_report_at_once() {
    let mut h = Harness::new();
    h.invoke(ack(1000, 20_000), 1_000);
    let mut lossy = ack(1000, 20_000);
    lossy.lost_pkts_sample = 3;
    let r = h.invoke(lossy, 2_000).expect("urgent report on loss");
    assert_eq!(r.lost_pkts, 3);
    assert_eq!(r.urgent, Some(Urgent::Loss));
    assert_eq!(r.acked_bytes, 2000);

    let mut to = ack(0, NO_RTT);
    to.was_timeout = true;
    to.lost_pkts_sample = 20;
    let r = h.invoke(to, 3_000).expect("urgent report on timeout");
    assert_eq!(r.timeouts, 1);
    assert_eq!(r.urgent, Some(Urgent::Timeout), "a timeout wins over the loss it implies");
}

#[test]
fn ecn_counts_and_echoing_acks() {
    let mut h = Harness::new();
    for i in 0..10u64 {
        let mut p = ack(1000, 20_000);
        if i % 4 == 0 {
            p.ecn_bytes = 1000;
            p.ecn_packets = 1;
        }
        h.invoke(p, 1_000 + i);
    }
    let r = h.invoke(ack(1000, 20_000), 20_000).unwrap();
    assert_eq!(r.ce_bytes, 3000);
    assert_eq!(r.ce_pkts, 3);
    assert_eq!(r.ece_acks, 3);
}

#[test]
fn send_and_receive_rates_come_from_the_same_sample() {
    let mut h = Harness::new();
    let mut p = ack(1000, 20_000);
    p.rate_outgoing = 5_000_000;
    p.rate_incoming = 4_000_000;
    h.invoke(p, 1_000);
    // A later ACK with only one of the two rates must not break the pair.
    let mut q = ack(1000, 20_000);
    q.rate_outgoing = 9_000_000;
    q.rate_incoming = 0;
    let r = h.invoke(q, 20_000).unwrap();
    assert_eq!(r.send_rate_bytes_per_s, Some(5_000_000));
    assert_eq!(r.recv_rate_bytes_per_s, Some(4_000_000));
}

#[test]
fn the_fastest_delivery_rate_is_the_largest_lower_rate_of_any_sample() {
    let mut h = Harness::new();
    for (t, (out, inc)) in [(1_000, (5_000_000, 4_000_000)), (2_000, (6_000_000, 7_000_000)), (3_000, (2_000_000, 3_000_000))] {
        let mut p = ack(1000, 20_000);
        (p.rate_outgoing, p.rate_incoming) = (out, inc);
        h.invoke(p, t);
    }
    let r = h.invoke(ack(1000, 20_000), 20_000).unwrap();
    assert_eq!((r.send_rate_bytes_per_s, r.recv_rate_bytes_per_s), (Some(2_000_000), Some(3_000_000)), "the last pair");
    assert_eq!(r.max_delivery_rate_bytes_per_s, Some(6_000_000));
    // Volatile: the next report starts over, and has none without a sample.
    let r = h.invoke(ack(1000, 20_000), 40_000).unwrap();
    assert_eq!(r.max_delivery_rate_bytes_per_s, None);
}

#[test]
fn gauges_are_the_latest_values() {
    let mut h = Harness::new();
    let mut p = ack(1000, 20_000);
    p.snd_cwnd = 44_000;
    p.bytes_in_flight = 33_000;
    p.bytes_pending = 99_000;
    p.snd_rate = 1_250_000;
    let r = h.invoke(p, 20_000).unwrap();
    assert_eq!(r.cwnd_bytes, 44_000);
    assert_eq!(r.inflight_bytes, 33_000);
    assert_eq!(r.pending_bytes, 99_000);
    assert_eq!(r.pacing_rate_bytes_per_s, Some(1_250_000));
}

#[test]
fn rtt_threshold_counts_samples_above_it() {
    let mut h = Harness::new();
    let thresh = h.fold.program.control_update(CTL_RTT_THRESHOLD_US, 25_000).unwrap();
    h.flow.update_fields(&[thresh]).unwrap();
    for (i, rtt) in [20_000, 30_000, 26_000, NO_RTT, 25_000].iter().enumerate() {
        let mut p = ack(2000, *rtt); // two packets per ACK
        p.packets_acked = 2;
        h.invoke(p, 1_000 + i as u64);
    }
    let r = h.invoke(ack(0, 10_000), 20_000).unwrap();
    assert_eq!(r.rtt_samples_over_threshold, 2, "two ACKs above 25 ms, counted once each whatever they acknowledge");
}

#[test]
fn a_packet_trigger_reports_once_enough_packets_are_acknowledged() {
    let mut h = Harness::new();
    // Ten packets (CTL_REPORT_PKTS_BELOW holds one less: the language has no >=).
    let trigger = h.fold.program.control_update(CTL_REPORT_PKTS_BELOW, 9).unwrap();
    h.flow.update_fields(&[trigger]).unwrap();
    let mut reports = 0;
    for i in 0..30u64 {
        let mut p = ack(1448, 20_000);
        p.packets_acked = 1;
        // Far below the interval and below an eighth of the window: only the trigger reports.
        if h.invoke(p, 1_000 + i).is_some() {
            reports += 1;
        }
    }
    assert_eq!(reports, 3, "one report per ten packets");
}

#[test]
fn report_interval_is_a_control_variable() {
    let mut h = Harness::new();
    let upd = h.fold.program.control_update(CTL_INTERVAL_US, 50_000).unwrap();
    h.flow.update_fields(&[upd]).unwrap();
    assert!(h.invoke(ack(1000, 20_000), 30_000).is_none());
    assert!(h.invoke(ack(1000, 20_000), 45_000).is_none());
    assert!(h.invoke(ack(1000, 20_000), 55_000).is_some());
}

#[test]
fn no_arithmetic_fault_on_extreme_primitives() {
    let mut h = Harness::new();
    let p = Primitives {
        bytes_acked: u32::MAX,
        packets_acked: u32::MAX,
        bytes_misordered: u32::MAX,
        packets_misordered: u32::MAX,
        ecn_bytes: u32::MAX,
        ecn_packets: u32::MAX,
        lost_pkts_sample: 0,
        was_timeout: false,
        rtt_sample_us: u64::from(u32::MAX) - 1,
        rate_outgoing: u64::MAX,
        rate_incoming: u64::MAX,
        bytes_in_flight: u32::MAX,
        packets_in_flight: u32::MAX,
        snd_cwnd: u32::MAX,
        snd_rate: u64::MAX,
        bytes_pending: u32::MAX,
    };
    for t in 0..1000 {
        h.invoke(p, t * 100);
    }
}

/// Issue 29: the window limited the flow when, at an ACK, what was in flight before it left
/// less than one MSS of the window free. A bulk flow's ACKs (its whole 21-packet window in flight
/// before each) say so; a flow held to 5 packets by its application or its receiver does
/// not; one such ACK in an interval is enough; the MSS comes from a control variable.
#[test]
fn the_window_limits_when_less_than_an_mss_of_it_was_free() {
    let mut h = Harness::new();
    let mss = h.fold.program.control_update(CTL_MSS_BYTES, 1000).unwrap();
    h.flow.update_fields(&[mss]).unwrap();
    let full = Primitives { snd_cwnd: 21_000, bytes_in_flight: 20_000, bytes_acked: 1000, packets_acked: 1, ..ack(1000, 20_000) };
    let r = (0..30u64).find_map(|i| h.invoke(full, 1_000 + i * 1_000)).unwrap();
    assert!(r.cwnd_limited, "{r:?}");
    // One MSS free before the ACK: the sender could have sent more.
    let r = (0..30u64).find_map(|i| h.invoke(Primitives { bytes_in_flight: 19_000, ..full }, 40_000 + i * 1_000)).unwrap();
    assert!(!r.cwnd_limited, "{r:?}");
    let sparse =
        Primitives { snd_cwnd: 21_000, bytes_in_flight: 4_000, bytes_acked: 1000, packets_acked: 1, ..ack(1000, 20_000) };
    let r = (0..30u64).find_map(|i| h.invoke(sparse, 60_000 + i * 1_000)).unwrap();
    assert!(!r.cwnd_limited, "5 packets of a 21-packet window: {r:?}");
    // One full ACK in an interval is enough.
    let last = (0..30u64).map(|i| 100_000 + i * 1_000).find(|t| h.invoke(sparse, *t).is_some()).unwrap();
    assert!(h.invoke(Primitives { bytes_in_flight: 20_000, ..sparse }, last + 100).is_none());
    let r = (1..30u64).find_map(|i| h.invoke(sparse, last + i * 1_000)).unwrap();
    assert!(r.cwnd_limited);
    // With a 9000-byte MSS, 14 kB free of 21 kB is more than an MSS: not limited.
    let jumbo = h.fold.program.control_update(CTL_MSS_BYTES, 9000).unwrap();
    h.flow.update_fields(&[jumbo]).unwrap();
    let r = (0..30u64).find_map(|i| h.invoke(Primitives { bytes_in_flight: 6_000, ..sparse }, 200_000 + i * 1_000)).unwrap();
    assert!(!r.cwnd_limited);
    let r = (0..30u64).find_map(|i| h.invoke(Primitives { bytes_in_flight: 12_000, ..sparse }, 300_000 + i * 1_000)).unwrap();
    assert!(r.cwnd_limited, "less than 9000 B of the window free");
}

#[test]
fn the_mss_is_learnt_from_data_in_order_never_from_a_cumulative_ack_over_sacked_data() {
    let mut h = Harness::new(); // MSS 1000 at the start
    let pkts = |bytes: u32, pkts: u32| Primitives { packets_acked: pkts, snd_cwnd: 4_000, ..ack(bytes, 20_000) };
    // Path MTU discovery: packets of 1,400 bytes, in order, report after report.
    let r = (1..20u64).find_map(|i| h.invoke(pkts(1400, 1), i * 1_000)).unwrap();
    assert_eq!(r.mss_bytes, 1400);
    // A loss, then SACKs beyond the hole...
    let lost = Primitives { lost_pkts_sample: 1, ..pkts(0, 0) };
    assert_eq!(h.invoke(lost, 30_000).unwrap().mss_bytes, 1400);
    let sacked = Primitives { bytes_misordered: 14_000, packets_misordered: 10, ..pkts(0, 0) };
    let r = (31..60u64).find_map(|i| h.invoke(sacked, i * 1_000)).unwrap();
    assert_eq!(r.mss_bytes, 1400);
    // ...and the retransmission's ACK moves the cumulative point over all of it: 15 packets'
    // bytes, one packet newly delivered. That is no MSS of 21,000 bytes.
    let r = (60..90u64).find_map(|i| h.invoke(pkts(21_000, 1), i * 1_000)).unwrap();
    assert_eq!(r.acked_bytes, 21_000);
    assert_eq!(r.mss_bytes, 1400, "learnt only from data in order");
    // In order again, two reports in a row: learnt again.
    let r = (90..200u64).filter_map(|i| h.invoke(pkts(1200, 1), i * 1_000)).nth(1).unwrap();
    assert_eq!(r.mss_bytes, 1200);
}
