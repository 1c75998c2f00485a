//! The kernel's folded records in the measurement contract's terms.
//!
//! The BPF fold counts in packets where the kernel does (delivered, SACKed, lost, CE); bytes are
//! packets times the report's MSS, as ccp-kernel reports them. The send and delivery rates come from
//! the interval's last valid rate sample, over the same packets; the fastest delivery rate from its
//! fastest sample. The smoothed RTT is the kernel's.

use std::net::IpAddr;

use ccp_contract::{Report, RttStats, Seed, Urgent};
use ccp_ebpf::{Create, Endpoint, KernelReport};

use crate::datapath::FlowInfo;

/// Bytes per second for `pkts` packets of `mss` bytes over `us` microseconds.
fn rate(pkts: u32, mss: u32, us: u32) -> Option<u64> {
    if pkts == 0 || us == 0 {
        return None;
    }
    let r = u128::from(pkts) * u128::from(mss) * 1_000_000 / u128::from(us);
    Some(u64::try_from(r).unwrap_or(u64::MAX))
}

pub fn to_report(k: &KernelReport) -> Report {
    let mss = u64::from(k.mss.max(1));
    let rtt = (k.rtt_samples > 0).then(|| {
        let mean = k.rtt_sum_us / u64::from(k.rtt_samples);
        RttStats {
            min_us: u64::from(k.rtt_min_us),
            max_us: u64::from(k.rtt_max_us),
            last_us: u64::from(k.rtt_last_us),
            srtt_us: if k.srtt_us > 0 { u64::from(k.srtt_us) } else { mean },
            mean_us: mean,
            samples: k.rtt_samples,
        }
    });
    let send = rate(k.rate_delivered, k.mss, k.rate_snd_us);
    let recv = rate(k.rate_delivered, k.mss, k.rate_rcv_us);
    let both = send.is_some() && recv.is_some();
    Report {
        now_us: k.ts_ns / 1000,
        interval_us: k.ts_ns.saturating_sub(k.start_ns) / 1000,
        mss_bytes: k.mss,
        acked_bytes: k.acked_bytes,
        acked_pkts: u64::from(k.acked_pkts),
        sacked_bytes: u64::from(k.sacked_pkts) * mss,
        sacked_pkts: u64::from(k.sacked_pkts),
        lost_pkts: u64::from(k.lost_pkts),
        timeouts: u32::from(k.timeouts),
        ce_bytes: u64::from(k.ce_pkts) * mss,
        ce_pkts: u64::from(k.ce_pkts),
        ece_acks: u64::from(k.ece_acks),
        rtt,
        rtt_samples_over_threshold: u64::from(k.rtt_over_samples),
        send_rate_bytes_per_s: send.filter(|_| both),
        recv_rate_bytes_per_s: recv.filter(|_| both),
        max_delivery_rate_bytes_per_s: rate(k.rate_max_delivered, k.mss, k.rate_max_us),
        extra_acked_bytes: k.extra_acked_pkts.map(|p| u64::from(p) * mss),
        inflight_bytes: u64::from(k.inflight_pkts) * mss,
        unacked_bytes: u64::from(k.unacked_pkts) * mss,
        pending_bytes: u64::from(k.pending_bytes),
        cwnd_bytes: u64::from(k.cwnd_pkts) * mss,
        pacing_rate_bytes_per_s: k.paced.then_some(k.pacing_rate),
        app_limited: k.app_limited,
        cwnd_limited: k.cwnd_limited,
        urgent: k.urgent.map(|u| match u {
            ccp_ebpf::Urgent::StateChange => Urgent::StateChange,
            ccp_ebpf::Urgent::Loss => Urgent::Loss,
            ccp_ebpf::Urgent::Timeout => Urgent::Timeout,
        }),
        feedback: None,
    }
}

/// The contract's flow addresses are IPv4; a v4-mapped IPv6 address is one too.
fn end(e: Option<Endpoint>) -> Option<(IpAddr, u16)> {
    let e = e?;
    match e.addr {
        IpAddr::V6(a) => Some((a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4), e.port)),
        v4 => Some((v4, e.port)),
    }
}

/// What the agent learns from a create record. A flow switched here mid-flow (attach, or a
/// restarted agent's re-attach) continues from its current window.
pub fn flow_info(c: &Create, cgroup: Option<String>) -> FlowInfo {
    let mss = c.mss.max(1);
    let cwnd = u64::from(c.cwnd_pkts) * u64::from(mss);
    FlowInfo {
        mss_bytes: mss,
        init_cwnd_bytes: cwnd,
        src: end(c.local),
        dst: end(c.remote),
        // The congestion control the flow ran before attach: a rule can keep it in the family.
        cong_alg: c.prev_cc.clone(),
        cgroup,
        ecn: Some(c.ecn),
        uid: Some(c.uid),
        netns_cookie: Some(c.netns_cookie),
        existing: c.existing.then(|| Seed {
            cwnd_bytes: cwnd,
            pacing_rate_bytes_per_s: None,
            srtt_us: (c.srtt_us > 0).then_some(u64::from(c.srtt_us)),
            min_rtt_us: c.min_rtt_us.map(u64::from),
            last_report: None,
        }),
    }
}

/// What the agent knows of a running flow it did not see start (an agent restart): the create
/// record the kernel kept, if any, and the first report, which seeds its controller.
pub fn adopted_info(c: Option<&Create>, cgroup: Option<String>, first: &Report) -> FlowInfo {
    let mut info = c.map(|c| flow_info(c, cgroup)).unwrap_or_default();
    info.mss_bytes = first.mss_bytes.max(1);
    info.init_cwnd_bytes = first.cwnd_bytes;
    info.existing = Some(Seed {
        cwnd_bytes: first.cwnd_bytes,
        pacing_rate_bytes_per_s: first.pacing_rate_bytes_per_s,
        srtt_us: first.rtt.map(|r| r.srtt_us),
        min_rtt_us: first.rtt.map(|r| r.min_us),
        last_report: Some(first.clone()),
    });
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kreport() -> KernelReport {
        KernelReport {
            fid: 1,
            ts_ns: 12_000_000,
            start_ns: 2_000_000,
            acked_bytes: 144_800,
            acked_pkts: 100,
            sacked_pkts: 4,
            lost_pkts: 2,
            timeouts: 0,
            ce_pkts: 10,
            ece_acks: 3,
            acks: 50,
            rtt_min_us: 20_000,
            rtt_max_us: 26_000,
            rtt_last_us: 21_000,
            rtt_sum_us: 220_000,
            rtt_samples: 10,
            rtt_over_samples: 7,
            srtt_us: 21_500,
            rate_delivered: 100,
            rate_snd_us: 20_000,
            rate_rcv_us: 25_000,
            rate_max_delivered: 120,
            rate_max_us: 24_000,
            extra_acked_pkts: Some(9),
            inflight_pkts: 30,
            unacked_pkts: 36,
            pending_bytes: 1_000_000,
            cwnd_pkts: 32,
            ssthresh: 20,
            mss: 1448,
            pacing_rate: 5_000_000,
            paced: true,
            app_limited: false,
            cwnd_limited: false,
            fallback: false,
            ctrl_seq: 4,
            urgent: Some(ccp_ebpf::Urgent::Loss),
            ca_state: 3,
        }
    }

    #[test]
    fn every_contract_field_is_filled() {
        let r = to_report(&kreport());
        assert_eq!((r.now_us, r.interval_us, r.mss_bytes), (12_000, 10_000, 1448));
        assert_eq!((r.acked_bytes, r.acked_pkts), (144_800, 100));
        assert_eq!((r.sacked_bytes, r.sacked_pkts, r.lost_pkts, r.timeouts), (4 * 1448, 4, 2, 0));
        assert_eq!((r.ce_bytes, r.ce_pkts, r.ece_acks), (10 * 1448, 10, 3));
        let rtt = r.rtt.unwrap();
        assert_eq!(
            (rtt.min_us, rtt.max_us, rtt.last_us, rtt.srtt_us, rtt.mean_us, rtt.samples),
            (20_000, 26_000, 21_000, 21_500, 22_000, 10)
        );
        assert_eq!(r.rtt_samples_over_threshold, 7);
        // 100 packets of 1448 bytes over 20 ms sent and 25 ms acknowledged.
        assert_eq!(r.send_rate_bytes_per_s, Some(7_240_000));
        assert_eq!(r.recv_rate_bytes_per_s, Some(5_792_000));
        // The fastest sample: 120 packets over 24 ms.
        assert_eq!(r.max_delivery_rate_bytes_per_s, Some(7_240_000));
        assert_eq!(r.extra_acked_bytes, Some(9 * 1448));
        assert_eq!((r.inflight_bytes, r.unacked_bytes, r.pending_bytes), (30 * 1448, 36 * 1448, 1_000_000));
        assert_eq!(r.cwnd_bytes, 32 * 1448);
        assert_eq!(r.pacing_rate_bytes_per_s, Some(5_000_000));
        assert!(!r.app_limited);
        assert!(!r.cwnd_limited);
        assert!(to_report(&KernelReport { cwnd_limited: true, ..kreport() }).cwnd_limited);
        assert_eq!(r.urgent, Some(Urgent::Loss));
        assert!(r.has_loss());
    }

    #[test]
    fn absent_samples_stay_absent() {
        let k = KernelReport {
            rtt_samples: 0,
            rate_delivered: 0,
            rate_max_delivered: 0,
            rate_max_us: 0,
            extra_acked_pkts: None,
            paced: false,
            srtt_us: 0,
            urgent: None,
            ..kreport()
        };
        let r = to_report(&k);
        assert_eq!(r.rtt, None);
        assert_eq!((r.send_rate_bytes_per_s, r.recv_rate_bytes_per_s, r.max_delivery_rate_bytes_per_s), (None, None, None));
        assert_eq!(r.extra_acked_bytes, None);
        assert_eq!(r.pacing_rate_bytes_per_s, None);
        assert_eq!(r.urgent, None);
        // A zero MSS from a broken record does not zero the byte counts' scale into nonsense.
        let r = to_report(&KernelReport { mss: 0, sacked_pkts: 3, ..k });
        assert_eq!(r.sacked_bytes, 3);
        // A clock that went backwards gives an empty interval, not an underflow.
        let r = to_report(&KernelReport { start_ns: 20_000_000, ..k });
        assert_eq!(r.interval_us, 0);
    }

    fn create(existing: bool) -> Create {
        Create {
            fid: 3,
            ts_ns: 1,
            cookie: Some(9),
            netns_cookie: 1,
            cgroup_id: 1,
            local: Some(Endpoint { addr: "::ffff:10.0.0.1".parse().unwrap(), port: 40000 }),
            remote: Some(Endpoint { addr: "10.0.0.2".parse().unwrap(), port: 5201 }),
            existing,
            ecn: true,
            mss: 1448,
            cwnd_pkts: 40,
            ssthresh: 20,
            srtt_us: 20_000,
            min_rtt_us: Some(19_000),
            uid: 1000,
            prev_cc: Some("cubic".into()),
        }
    }

    #[test]
    fn a_switched_flow_is_seeded_and_a_new_one_is_not() {
        let info = flow_info(&create(true), Some("/test".into()));
        assert_eq!(info.src, Some(("10.0.0.1".parse().unwrap(), 40000)));
        assert_eq!(info.dst, Some(("10.0.0.2".parse().unwrap(), 5201)));
        assert_eq!(info.cong_alg.as_deref(), Some("cubic"));
        assert_eq!(info.cgroup.as_deref(), Some("/test"));
        assert_eq!(info.ecn, Some(true));
        assert_eq!(info.uid, Some(1000));
        let seed = info.existing.unwrap();
        assert_eq!((seed.cwnd_bytes, seed.srtt_us, seed.min_rtt_us), (40 * 1448, Some(20_000), Some(19_000)));
        assert!(flow_info(&create(false), None).existing.is_none());
        let v6 = Create { local: Some(Endpoint { addr: "fd00::1".parse().unwrap(), port: 1 }), ..create(false) };
        // IPv6 ends are carried whole (an IPv4-mapped one as IPv4, above), so rules can match them.
        assert_eq!(flow_info(&v6, None).src, Some(("fd00::1".parse().unwrap(), 1)));
    }

    #[test]
    fn an_adopted_flow_is_seeded_from_its_first_report() {
        let first = to_report(&kreport());
        let info = adopted_info(None, None, &first);
        let seed = info.existing.unwrap();
        assert_eq!(seed.cwnd_bytes, 32 * 1448);
        assert_eq!(seed.pacing_rate_bytes_per_s, Some(5_000_000));
        assert_eq!(seed.srtt_us, Some(21_500));
        assert_eq!(seed.last_report.as_ref(), Some(&first));
        let info = adopted_info(Some(&create(false)), None, &first);
        assert_eq!(info.dst, Some(("10.0.0.2".parse().unwrap(), 5201)));
        assert_eq!(info.init_cwnd_bytes, 32 * 1448);
    }
}
