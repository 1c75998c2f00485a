use super::*;

fn hdr(kind: u8, size: usize, fid: u32) -> RawHdr {
    RawHdr { version: RECORD_VERSION, kind, size: size as u16, fid, ts_ns: 5_000_000 }
}

fn report() -> RawReport {
    RawReport {
        hdr: hdr(KIND_REPORT, size_of::<RawReport>(), 7),
        start_ns: 4_000_000,
        acked_bytes: 14_480,
        rtt_sum_us: 60_000,
        pacing_rate: 1_000_000,
        acked_pkts: 10,
        sacked_pkts: 2,
        lost_pkts: 1,
        ce_pkts: 3,
        ece_acks: 1,
        acks: 4,
        rtt_min_us: 10_000,
        rtt_max_us: 30_000,
        rtt_last_us: 20_000,
        rtt_samples: 3,
        rtt_over_samples: 5,
        srtt_us: 21_000,
        rate_delivered: 10,
        rate_snd_us: 9_000,
        rate_rcv_us: 10_000,
        inflight_pkts: 8,
        pending_bytes: 100_000,
        cwnd_pkts: 12,
        ssthresh: 0x7fff_ffff,
        mss: 1448,
        ctrl_seq: 3,
        timeouts: 0,
        urgent: 2,
        flags: RF_APP_LIMITED | RF_PACED,
        ca_state: 3,
        pad: [0; 3],
        unacked_pkts: 11,
        rate_max_delivered: 12,
        rate_max_us: 9_500,
        extra_acked_pkts: 0,
        pad2: 0,
    }
}

#[test]
fn a_report_decodes_field_by_field() {
    let raw = report();
    let Record::Report(r) = decode(pod_bytes(&raw)).unwrap() else { panic!("not a report") };
    assert_eq!((r.fid, r.ts_ns, r.start_ns), (7, 5_000_000, 4_000_000));
    assert_eq!((r.acked_bytes, r.acked_pkts, r.sacked_pkts, r.lost_pkts), (14_480, 10, 2, 1));
    assert_eq!((r.ce_pkts, r.ece_acks, r.acks), (3, 1, 4));
    assert_eq!((r.rtt_min_us, r.rtt_max_us, r.rtt_last_us, r.rtt_sum_us, r.rtt_samples), (10_000, 30_000, 20_000, 60_000, 3));
    assert_eq!((r.rtt_over_samples, r.srtt_us), (5, 21_000));
    assert_eq!((r.rate_delivered, r.rate_snd_us, r.rate_rcv_us), (10, 9_000, 10_000));
    assert_eq!((r.rate_max_delivered, r.rate_max_us), (12, 9_500));
    assert_eq!((r.inflight_pkts, r.unacked_pkts, r.pending_bytes, r.cwnd_pkts, r.mss), (8, 11, 100_000, 12, 1448));
    assert_eq!((r.pacing_rate, r.paced, r.app_limited, r.fallback), (1_000_000, true, true, false));
    assert_eq!((r.ctrl_seq, r.urgent, r.ca_state), (3, Some(Urgent::Loss), 3));
    assert!(r.cwnd_limited, "a record without CCP_RF_WINDOW_UNUSED (an older instance's too) reads as limited");
    let unused = RawReport { flags: RF_WINDOW_UNUSED, ..raw };
    let Record::Report(r) = decode(pod_bytes(&unused)).unwrap() else { panic!("not a report") };
    assert!(!r.cwnd_limited && !r.app_limited && !r.paced);
    assert_eq!(r.extra_acked_pkts, None, "not measured without CCP_RF_EXTRA_ACKED");
    let measured = RawReport { flags: RF_EXTRA_ACKED, extra_acked_pkts: 0, ..raw };
    let Record::Report(r) = decode(pod_bytes(&measured)).unwrap() else { panic!("not a report") };
    assert_eq!(r.extra_acked_pkts, Some(0), "a measured zero is not 'unmeasured'");
    let measured = RawReport { flags: RF_EXTRA_ACKED, extra_acked_pkts: 17, ..raw };
    let Record::Report(r) = decode(pod_bytes(&measured)).unwrap() else { panic!("not a report") };
    assert_eq!(r.extra_acked_pkts, Some(17));
}

#[test]
fn a_report_of_an_instance_built_before_the_aggregation_field_decodes_without_it() {
    let raw = RawReport { flags: RF_EXTRA_ACKED, extra_acked_pkts: 17, ..report() };
    let mut old = pod_bytes(&raw)[..REPORT_SIZE_BEFORE_EXTRA_ACKED].to_vec();
    old[2..4].copy_from_slice(&(REPORT_SIZE_BEFORE_EXTRA_ACKED as u16).to_ne_bytes());
    // An older instance never sets the flag; the field is cut off in any case.
    old[std::mem::offset_of!(RawReport, flags)] = 0;
    let Record::Report(r) = decode(&old).unwrap() else { panic!("not a report") };
    assert_eq!(r.extra_acked_pkts, None);
    assert_eq!((r.rate_max_delivered, r.rate_max_us, r.unacked_pkts), (12, 9_500, 11), "the fields before it as written");
}

#[test]
fn a_report_of_an_instance_built_before_the_fastest_sample_decodes_without_it() {
    let raw = report();
    let mut old = pod_bytes(&raw)[..REPORT_SIZE_BEFORE_RATE_MAX].to_vec();
    old[2..4].copy_from_slice(&(REPORT_SIZE_BEFORE_RATE_MAX as u16).to_ne_bytes());
    let Record::Report(r) = decode(&old).unwrap() else { panic!("not a report") };
    assert_eq!((r.rate_max_delivered, r.rate_max_us), (0, 0));
    assert_eq!((r.rate_delivered, r.unacked_pkts, r.ca_state), (10, 11, 3), "the fields before it as written");
    // A size between the two layouts is still refused.
    old[2..4].copy_from_slice(&148u16.to_ne_bytes());
    old.extend_from_slice(&[0; 4]);
    assert!(matches!(decode(&old), Err(DecodeError::Size { .. })));
}

#[test]
fn a_create_decodes_addresses_and_names() {
    let mut raw = RawCreate {
        hdr: hdr(KIND_CREATE, size_of::<RawCreate>(), 9),
        cookie: 0,
        family: libc::AF_INET as u16,
        sport: 40000,
        dport: 5201,
        flags: CF_EXISTING,
        mss: 1448,
        cwnd_pkts: 10,
        min_rtt_us: u32::MAX,
        ..RawCreate::default()
    };
    raw.saddr[..4].copy_from_slice(&[10, 0, 0, 1]);
    raw.daddr[..4].copy_from_slice(&[10, 0, 0, 2]);
    raw.prev_cc[..5].copy_from_slice(b"cubic");
    let Record::Create(c) = decode(pod_bytes(&raw)).unwrap() else { panic!("not a create") };
    assert_eq!(c.local, Some(Endpoint { addr: "10.0.0.1".parse().unwrap(), port: 40000 }));
    assert_eq!(c.remote, Some(Endpoint { addr: "10.0.0.2".parse().unwrap(), port: 5201 }));
    assert!(c.existing);
    assert_eq!((c.cookie, c.min_rtt_us), (None, None));
    assert_eq!(c.prev_cc.as_deref(), Some("cubic"));

    raw.family = libc::AF_INET6 as u16;
    raw.saddr = "fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
    raw.prev_cc = [0; 16];
    raw.cookie = 77;
    let c = decode_create(pod_bytes(&raw)).unwrap();
    assert_eq!(c.local.unwrap().addr, "fd00::1".parse::<IpAddr>().unwrap());
    assert_eq!((c.cookie, c.prev_cc), (Some(77), None));
    raw.family = 1; // AF_UNIX: no endpoints
    assert_eq!(decode_create(pod_bytes(&raw)).unwrap().local, None);
}

#[test]
fn a_close_decodes() {
    let raw = RawClose { hdr: hdr(KIND_CLOSE, size_of::<RawClose>(), 3), bytes_acked: 1 << 40, lost: 12, pad: 0 };
    assert_eq!(
        decode(pod_bytes(&raw)).unwrap(),
        Record::Close(Close { fid: 3, ts_ns: 5_000_000, bytes_acked: 1 << 40, lost: 12 })
    );
}

fn ack() -> RawAck {
    RawAck {
        hdr: hdr(KIND_ACK, size_of::<RawAck>(), 11),
        bytes_acked: 2_896,
        packets_acked: 2,
        packets_misordered: 1,
        ce_pkts: 1,
        lost_pkts: 3,
        rtt_us: 20_500,
        rate_delivered: 20,
        rate_snd_us: 19_000,
        rate_rcv_us: 20_000,
        inflight_pkts: 30,
        pending_bytes: 1 << 20,
        cwnd_pkts: 32,
        mss: 1448,
        flags: AF_FALLBACK,
        pad: [0; 7],
    }
}

#[test]
fn an_ack_decodes_field_by_field_and_only_for_a_per_ack_consumer() {
    let raw = ack();
    let PerAckRecord::Ack(a) = decode_per_ack(pod_bytes(&raw)).unwrap() else { panic!("not an ack") };
    assert_eq!((a.fid, a.ts_ns, a.bytes_acked), (11, 5_000_000, 2_896));
    assert_eq!((a.packets_acked, a.packets_misordered, a.ce_pkts, a.lost_pkts), (2, 1, 1, 3));
    assert_eq!((a.rtt_us, a.rate_delivered, a.rate_snd_us, a.rate_rcv_us), (Some(20_500), 20, 19_000, 20_000));
    assert_eq!((a.inflight_pkts, a.pending_bytes, a.cwnd_pkts, a.mss), (30, 1 << 20, 32, 1448));
    assert_eq!((a.timeout, a.fallback), (false, true));

    let mut raw = ack();
    raw.rtt_us = 0;
    raw.flags = AF_TIMEOUT;
    let PerAckRecord::Ack(a) = decode_per_ack(pod_bytes(&raw)).unwrap() else { panic!("not an ack") };
    assert_eq!((a.rtt_us, a.timeout, a.fallback), (None, true, false));

    // The folded consumer (the agent) does not take per-ACK records; the per-ACK one takes
    // everything else as ordinary records.
    assert_eq!(decode(pod_bytes(&raw)), Err(DecodeError::Kind(KIND_ACK)));
    let close = RawClose { hdr: hdr(KIND_CLOSE, size_of::<RawClose>(), 3), ..RawClose::default() };
    assert!(matches!(decode_per_ack(pod_bytes(&close)), Ok(PerAckRecord::Record(Record::Close(_)))));
    assert!(matches!(decode_per_ack(&pod_bytes(&raw)[..79]), Err(DecodeError::Size { .. })));
    let mut raw = ack();
    raw.hdr.version = 2;
    assert_eq!(decode_per_ack(pod_bytes(&raw)), Err(DecodeError::Version(2)));
}

#[test]
fn malformed_records_are_errors() {
    assert_eq!(decode(&[]), Err(DecodeError::Short(0)));
    assert_eq!(decode(&[1; 15]), Err(DecodeError::Short(15)));
    let mut raw = report();
    raw.hdr.version = 2;
    assert_eq!(decode(pod_bytes(&raw)), Err(DecodeError::Version(2)));
    let mut raw = report();
    raw.hdr.kind = 9;
    assert_eq!(decode(pod_bytes(&raw)), Err(DecodeError::Kind(9)));
    let raw = report();
    let bytes = pod_bytes(&raw);
    assert!(matches!(decode(&bytes[..100]), Err(DecodeError::Size { .. })));
    let mut raw = report();
    raw.hdr.size = 32; // a report that claims a close's size
    assert!(matches!(decode(pod_bytes(&raw)), Err(DecodeError::Size { .. })));
    // A close record is never mistaken for a create.
    let close = RawClose { hdr: hdr(KIND_CLOSE, size_of::<RawClose>(), 3), ..RawClose::default() };
    assert_eq!(decode_create(pod_bytes(&close)), None);
}

#[test]
fn decoding_arbitrary_bytes_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for len in 0..400 {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let _ = decode(&bytes);
        let _ = decode_per_ack(&bytes);
        let mut with_hdr = bytes.clone();
        if with_hdr.len() >= 2 {
            with_hdr[0] = RECORD_VERSION;
            with_hdr[1] = (len % 5) as u8;
            let _ = decode(&with_hdr);
            let _ = decode_per_ack(&with_hdr);
        }
    }
}
