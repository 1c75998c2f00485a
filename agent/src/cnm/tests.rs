//! Classification of CNM datagrams, throttled logging, and the listener on loopback: budgets per
//! pass, overflow counting, truncation.

use std::net::{Ipv6Addr, UdpSocket};

use super::*;

const SRC: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 254);

/// The first 40 bytes of an IPv4 packet of protocol `proto` from SRC:40000 to DST:5201.
fn ipv4_sample(proto: u8) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[9] = proto;
    p[12..16].copy_from_slice(&SRC.octets());
    p[16..20].copy_from_slice(&DST.octets());
    p[20..22].copy_from_slice(&40_000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5201u16.to_be_bytes());
    p
}

fn cnm_bytes(qfb: u8, sample: &[u8]) -> Vec<u8> {
    let cnm = Cnm {
        qfb,
        flags: 0,
        fb_bytes: 3000,
        q_off_bytes: 1500,
        q_delta_bytes: 750,
        cpid: 9,
        timestamp_ns: 0,
        sample: sample.to_vec(),
    };
    let mut out = Vec::new();
    cnm.encode(&mut out);
    out
}

fn allow() -> Vec<IpNet> {
    vec!["10.77.0.254/32".parse().unwrap(), "127.0.0.1/32".parse().unwrap()]
}

/// The read time of every datagram here.
fn now() -> Now {
    Now::at_us(0)
}

fn classify_from(from: Ipv4Addr, payload: &[u8]) -> Result<Notice, Dropped> {
    classify(IpAddr::V4(from), payload, false, &allow(), now())
}

#[test]
fn a_valid_cnm_names_the_senders_own_tuple_and_carries_the_feedback() {
    let n = classify_from(ROUTER, &cnm_bytes(17, &ipv4_sample(6))).unwrap();
    assert_eq!(n.tuple, ((SRC.into(), 40_000), (DST.into(), 5201)), "the sample's direction, not reversed");
    assert_eq!(n.feedback, NetworkFeedback::Qcn { fb_quantized: 17, q_off_bytes: 1500, q_delta_bytes: 750 });
    assert_eq!((n.cpid, n.from), (9, IpAddr::V4(ROUTER)));
    assert_eq!(n.age_us, None, "a timestamp of 0 is not this host's clock of now");
}

#[test]
fn the_allow_list_is_checked_before_the_payload() {
    let e = classify_from(Ipv4Addr::new(10, 77, 0, 3), &cnm_bytes(17, &ipv4_sample(6))).unwrap_err();
    assert_eq!(e.reason, Reason::NotAllowed);
    // Garbage from a stranger is "not allowed", never "malformed": it is not even parsed.
    let e = classify_from(Ipv4Addr::new(192, 0, 2, 1), b"garbage").unwrap_err();
    assert_eq!(e.reason, Reason::NotAllowed);
    // A v4-mapped source is its IPv4 address.
    let mapped = IpAddr::V6(ROUTER.to_ipv6_mapped());
    assert!(classify(mapped, &cnm_bytes(1, &ipv4_sample(6)), false, &allow(), now()).is_ok());
    // An empty allow-list admits nothing (config refuses it; the check does not depend on that).
    let e = classify(IpAddr::V4(ROUTER), &cnm_bytes(1, &ipv4_sample(6)), false, &[], now()).unwrap_err();
    assert_eq!(e.reason, Reason::NotAllowed);
}

#[test]
fn malformed_datagrams_are_named() {
    let good = cnm_bytes(5, &ipv4_sample(6));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"QCNM".to_vec(), "too short"),
        (
            {
                let mut b = good.clone();
                b[0] = b'X';
                b
            },
            "magic",
        ),
        (
            {
                let mut b = good.clone();
                b[4] = 2;
                b
            },
            "version",
        ),
        (
            {
                let mut b = good.clone();
                b[5] = 0;
                b
            },
            "qFb",
        ),
        (good[..good.len() - 1].to_vec(), "declares"),
        (cnm_bytes(5, &[]), "no complete IP header"),
        (cnm_bytes(5, &ipv4_sample(6)[..22]), "before the TCP ports"),
    ];
    for (bytes, why) in cases {
        let e = classify_from(ROUTER, &bytes).unwrap_err();
        assert_eq!(e.reason, Reason::Malformed, "{why}: {e:?}");
        assert!(e.detail.contains(why), "{why}: {}", e.detail);
    }
    let e = classify(IpAddr::V4(ROUTER), &good, true, &allow(), now()).unwrap_err();
    assert_eq!(e.reason, Reason::Malformed, "a truncated datagram");
}

#[test]
fn non_tcp_and_ipv6_samples_are_dropped_by_reason() {
    assert_eq!(classify_from(ROUTER, &cnm_bytes(5, &ipv4_sample(17))).unwrap_err().reason, Reason::NotTcp);
    let mut v6 = vec![0u8; 44];
    v6[0] = 0x60;
    v6[6] = 6;
    v6[8..24].copy_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
    v6[24..40].copy_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
    v6[40..42].copy_from_slice(&40_000u16.to_be_bytes());
    let e = classify_from(ROUTER, &cnm_bytes(5, &v6)).unwrap_err();
    assert_eq!(e.reason, Reason::Ipv6, "{e:?}");
    // IPv6 with v4-mapped addresses names an IPv4 flow.
    v6[8..24].copy_from_slice(&SRC.to_ipv6_mapped().octets());
    v6[24..40].copy_from_slice(&DST.to_ipv6_mapped().octets());
    v6[42..44].copy_from_slice(&5201u16.to_be_bytes());
    assert_eq!(classify_from(ROUTER, &cnm_bytes(5, &v6)).unwrap().tuple, ((SRC.into(), 40_000), (DST.into(), 5201)));
}

#[test]
fn a_timestamp_on_this_hosts_clock_gives_the_cnms_age() {
    let mut bytes = cnm_bytes(5, &ipv4_sample(6));
    let sampled = now().mono_ns - 3_000_000;
    bytes[24..32].copy_from_slice(&sampled.to_be_bytes());
    let age = classify_from(ROUTER, &bytes).unwrap().age_us.unwrap();
    assert!((3_000..1_000_000).contains(&age), "{age}");
    bytes[24..32].copy_from_slice(&(now().mono_ns + 1_000_000_000).to_be_bytes());
    assert_eq!(classify_from(ROUTER, &bytes).unwrap().age_us, None, "a clock ahead of ours is another host's");
}

#[test]
fn every_reason_has_its_own_counter() {
    let mut c = CnmCounters::default();
    for (i, r) in Reason::ALL.iter().enumerate() {
        for _ in 0..=i {
            *c.slot(*r) += 1;
        }
    }
    for (i, r) in Reason::ALL.iter().enumerate() {
        assert_eq!(c.get(*r), i as u64 + 1, "{}", r.name());
    }
    let json = serde_json::to_value(c).unwrap();
    for r in Reason::ALL {
        let key = if r == Reason::ReceiveError { "receive_errors" } else { r.name() };
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
}

fn loopback(max_per_pass: usize, recv_buffer_bytes: usize) -> CnmListener {
    CnmListener::bind(&CnmConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        netns: None,
        allow_from: vec!["127.0.0.1/32".parse().unwrap()],
        max_per_pass,
        recv_buffer_bytes,
    })
    .unwrap()
}

/// Reads until the socket is drained (the test sends everything before reading).
fn drain(l: &mut CnmListener) -> (Vec<Notice>, usize) {
    let mut out = Vec::new();
    let mut passes = 0;
    loop {
        l.read_batch(&mut out, now());
        passes += 1;
        if !l.pending() {
            return (out, passes);
        }
    }
}

#[test]
fn the_listener_reads_a_bounded_batch_per_pass() {
    let mut l = loopback(4, DEFAULT_RECV_BUFFER_BYTES);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let good = cnm_bytes(3, &ipv4_sample(6));
    for _ in 0..10 {
        tx.send_to(&good, l.local_addr()).unwrap();
    }
    tx.send_to(b"not a cnm", l.local_addr()).unwrap();
    tx.send_to(&[0u8; 1000], l.local_addr()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut out = Vec::new();
    l.read_batch(&mut out, now());
    assert_eq!(out.len(), 4, "one pass reads max_per_pass datagrams");
    assert!(l.pending(), "and says more may be waiting");
    let (rest, passes) = drain(&mut l);
    assert_eq!(rest.len(), 6);
    assert_eq!(passes, 3, "4 + 4 + the last 4 (two of them bad), then nothing");
    let c = l.counters;
    assert_eq!((c.received, c.malformed, c.deferred_passes), (12, 2, 3));
    assert!(l.netns_cookie().is_some(), "this kernel names the socket's namespace");
}

#[test]
fn a_full_receive_buffer_is_counted_not_silent() {
    let mut l = loopback(4096, RECV_BUFFER_RANGE.0);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let good = cnm_bytes(3, &ipv4_sample(6));
    for _ in 0..2000 {
        let _ = tx.send_to(&good, l.local_addr());
    }
    let (got, _) = drain(&mut l);
    // The kernel reports the drops with the next datagram it delivers.
    tx.send_to(&good, l.local_addr()).unwrap();
    let (last, _) = drain(&mut l);
    let c = l.counters;
    assert_eq!(got.len() + last.len(), c.received as usize);
    assert_eq!(c.received + c.socket_overflows, 2001, "{c:?}");
    assert!(c.socket_overflows > 0, "a 4 KiB buffer cannot hold 2000 datagrams: {c:?}");
}

#[test]
fn binding_a_port_in_use_says_who_to_ask() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let e = CnmListener::bind(&CnmConfig {
        listen: taken.local_addr().unwrap(),
        netns: None,
        allow_from: allow(),
        max_per_pass: 1,
        recv_buffer_bytes: DEFAULT_RECV_BUFFER_BYTES,
    })
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("another process holds UDP port") && e.contains("ss -ulpn"), "{e}");
    let e = CnmListener::bind(&CnmConfig {
        listen: "127.0.0.1:7470".parse().unwrap(),
        netns: Some("/nonexistent/ns".into()),
        allow_from: allow(),
        max_per_pass: 1,
        recv_buffer_bytes: DEFAULT_RECV_BUFFER_BYTES,
    })
    .err()
    .unwrap();
    assert!(format!("{e:#}").contains("cnm.netns /nonexistent/ns"), "{e:#}");
}
