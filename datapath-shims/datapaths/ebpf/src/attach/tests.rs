//! The BPF filter held to the semantics `Filter::matches` spells out (needs root: it loads the
//! attach object and runs its filter probe).

use std::net::IpAddr;

use super::filter::Filter;
use super::programs::{Action, AttachObject, RawFlowId};

fn id(local: (&str, u16), remote: (&str, u16)) -> (RawFlowId, (IpAddr, u16), (IpAddr, u16)) {
    let l: IpAddr = local.0.parse().unwrap();
    let r: IpAddr = remote.0.parse().unwrap();
    let mut raw = RawFlowId { sport: local.1, dport: remote.1, ..RawFlowId::default() };
    match (l, r) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            raw.family = libc::AF_INET as u16;
            raw.saddr[..4].copy_from_slice(&a.octets());
            raw.daddr[..4].copy_from_slice(&b.octets());
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            raw.family = libc::AF_INET6 as u16;
            raw.saddr = a.octets();
            raw.daddr = b.octets();
        }
        _ => panic!("mixed families"),
    }
    (raw, (l, local.1), (r, remote.1))
}

#[test]
fn the_kernel_filter_agrees_with_the_documented_semantics() {
    if !crate::is_root() {
        eprintln!("SKIPPED the_kernel_filter_agrees_with_the_documented_semantics: needs root to load BPF programs");
        return;
    }
    let filters = [
        Filter::all(),
        Filter { ports: vec![5201], ..Filter::default() },
        Filter { ports: vec![80, 443, 5201], ..Filter::default() },
        Filter { nets: vec!["10.0.0.0/8".parse().unwrap()], ..Filter::default() },
        Filter { nets: vec!["10.1.2.3".parse().unwrap(), "fd00::/8".parse().unwrap()], ..Filter::default() },
        Filter { ports: vec![5201], nets: vec!["192.168.0.0/17".parse().unwrap()], ..Filter::default() },
        Filter { nets: vec!["0.0.0.0/0".parse().unwrap()], ..Filter::default() },
        Filter { nets: vec!["10.0.0.1/31".parse().unwrap()], ..Filter::default() },
    ];
    let flows = [
        id(("10.0.0.1", 40000), ("10.0.0.2", 5201)),
        id(("10.1.2.3", 5201), ("192.168.127.1", 40001)),
        id(("192.168.128.1", 5201), ("192.168.1.1", 9)),
        id(("172.16.0.1", 443), ("8.8.8.8", 50000)),
        id(("10.0.0.0", 1), ("10.0.0.3", 2)),
        id(("fd12::1", 5201), ("2001:db8::1", 1234)),
        id(("2001:db8::1", 80), ("2001:db8::2", 1234)),
    ];
    for f in &filters {
        let obj = AttachObject::load(&["filter_probe"], "ccp", "cubic", f, Action::Attach, None).expect("load attach object");
        for (raw, l, r) in &flows {
            let kernel = obj.probe_filter(raw).unwrap();
            assert_eq!(kernel, f.matches(*l, *r), "filter {f:?} on {l:?} <-> {r:?}");
        }
    }
}
