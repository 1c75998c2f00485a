//! A fat-tree with a WAN edge (Annulus's ns-2 fabric, annulus.md §9.4): random traffic in
//! classes (`[[workload.random]]`) between datacenter hosts, across the border and among the
//! external hosts, each with its own label and RTO floor; the border router's own discipline.

mod common;

use std::path::Path;

use ccp_sim::config::load_str;
use ccp_sim::stats::FlowRecord;
use ccp_sim::Results;

/// 2 pods × (2 ToRs × 2 hosts, 2 aggregation switches), 2 cores: hosts 0–7; 3 external hosts
/// (8–10) 200 µs beyond the border router on aggregation switch 0 of each pod. DCTCP marking at
/// 5 packets inside the datacenter, none on the border router. `{classes}` is filled in per test.
const EDGE: &str = r#"
duration_ms = 30
seed = 3

[topology]
kind = "fat_tree"
pods = 2
tors_per_pod = 2
aggs_per_pod = 2
hosts_per_tor = 2
cores = 2
link_gbps = 10.0
host_delay_us = 1.0
fabric_delay_us = 1.0
external = { hosts = 3, border_links_per_pod = 1, delay_us = 200.0 }

[switch]
admission = "static"
port_buffer_bytes = 300_000

[switch.qdisc]
kind = "dctcp"
k_pkts = 5

[switch.border_qdisc]
kind = "droptail"

[transport]
rto_min_us = 1000.0
rto_initial_us = 1000.0

[cc]
algorithm = "dctcp"

{classes}

[output]
monitor = ["tor0.0->agg0.0", "agg0.0->core0", "agg0.0->border", "border->e0", "border->e1", "border->e2", "border->agg1.0"]
"#;

const DC: &str = r#"
[[workload.random]]
label = "dc"
pairs = "internal"
cdf = "{cdf}"
load = 0.7
stop_ms = 20.0
"#;

const WAN_AND_CROSS: &str = r#"
[[workload.random]]
label = "wan"
pairs = "wan"
cdf = "{cdf}"
load = 0.6
stop_ms = 20.0
rto_min_us = 50_000.0

[[workload.random]]
label = "cross"
pairs = "external"
cdf = "{cdf}"
load = 0.6
stop_ms = 20.0
rto_min_us = 50_000.0
cc = { algorithm = "cubic" }
"#;

fn run(classes: &str) -> Results {
    common::run(&common::scenario(&EDGE.replace("{classes}", classes))).1
}

fn labelled<'a>(r: &'a Results, label: &str) -> Vec<&'a FlowRecord> {
    r.flows.iter().filter(|f| f.label.as_deref() == Some(label)).collect()
}

#[test]
fn each_random_class_draws_its_own_endpoints_label_and_algorithm() {
    let r = run(&format!("{DC}{WAN_AND_CROSS}"));
    let (dc, wan, cross) = (labelled(&r, "dc"), labelled(&r, "wan"), labelled(&r, "cross"));
    assert!(dc.len() > 20 && wan.len() > 5 && cross.len() > 5, "{} / {} / {}", dc.len(), wan.len(), cross.len());
    assert_eq!(dc.len() + wan.len() + cross.len(), r.flows.len(), "every random flow carries its class's label");
    let external = |h: u32| h >= 8;
    assert!(dc.iter().all(|f| !external(f.src) && !external(f.dst)), "dc flows stay inside the datacenter");
    assert!(wan.iter().all(|f| external(f.src) != external(f.dst)), "a WAN flow has exactly one external end");
    assert!(wan.iter().any(|f| external(f.src)) && wan.iter().any(|f| external(f.dst)), "WAN flows run both ways");
    assert!(cross.iter().all(|f| external(f.src) && external(f.dst)), "cross traffic stays beyond the border");
    assert!(cross.iter().all(|f| f.algorithm == "cubic") && wan.iter().all(|f| f.algorithm == "dctcp"));
    // The WAN class's loss recovery waits out its 50 ms floor: none of its flows times out in a
    // 30 ms run, whatever the border drops.
    assert!(wan.iter().chain(&cross).all(|f| f.timeouts == 0));
}

#[test]
fn adding_classes_leaves_the_first_ones_flows_unchanged() {
    let alone = run(DC);
    let with_edge = run(&format!("{DC}{WAN_AND_CROSS}"));
    let drawn = |r: &Results| -> Vec<(u32, u32, Option<u64>, u64)> {
        labelled(r, "dc").iter().map(|f| (f.src, f.dst, f.bytes, (f.start_us * 1e3) as u64)).collect()
    };
    assert_eq!(drawn(&alone), drawn(&with_edge));
}

#[test]
fn the_border_router_takes_its_own_discipline() {
    let r = run(&format!("{DC}{WAN_AND_CROSS}"));
    let port = |name: &str| r.ports.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no port {name}"));
    let border: Vec<_> = ["border->e0", "border->e1", "border->e2", "border->agg1.0"].map(port).into();
    assert!(border.iter().map(|p| p.throughput_gbps).sum::<f64>() > 1.0, "the edge carries traffic");
    assert!(border.iter().all(|p| p.marks == 0), "ECN on intra-DC switches only");
    let inside = ["tor0.0->agg0.0", "agg0.0->core0", "agg0.0->border"].map(port);
    assert!(inside.iter().map(|p| p.marks).sum::<u64>() > 0, "the datacenter's ports mark at K = 5 packets");
}

#[test]
fn edge_classes_need_an_edge_and_errors_name_the_class() {
    let load = |text: &str, sets: &[&str]| {
        let text = text.replace("{cdf}", &common::test_cdf().display().to_string());
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load_str(Path::new("test.toml"), &text, &sets).map(|_| ()).map_err(|e| e.to_string())
    };
    let edge = EDGE.replace("{classes}", &format!("{DC}{WAN_AND_CROSS}"));
    assert_eq!(load(&edge, &[]), Ok(()));
    let no_edge = edge.replace("external = { hosts = 3, border_links_per_pod = 1, delay_us = 200.0 }", "");
    let e = load(&no_edge, &[]).unwrap_err();
    assert!(e.contains("`switch.border_qdisc`") && e.contains("border router"), "{e}");
    let e = load(&no_edge.replace("[switch.border_qdisc]\nkind = \"droptail\"", ""), &[]).unwrap_err();
    assert!(e.contains("`workload.random[1].pairs`") && e.contains("topology.external"), "{e}");
    // A class is set by its index; a bad one is named.
    assert_eq!(load(&edge, &["workload.random[2].load=0.3"]), Ok(()));
    let e = load(&edge, &["workload.random[2].load=7"]).unwrap_err();
    assert!(e.contains("workload.random[2].load") && e.contains("(0, 1.5)"), "{e}");
    let e = load(&edge, &["workload.random.load=0.3"]).unwrap_err();
    assert!(e.contains("`random` is a list of tables: name one, as `random[0]`"), "{e}");
    let e = load(&edge, &["workload.random[5].load=0.3"]).unwrap_err();
    assert!(e.contains("has 3 items, no [5]"), "{e}");
    let e = load(&edge, &["workload.random[1].rto_min_us=5e7"]).unwrap_err();
    assert!(e.contains("workload.random[1].rto_min_us"), "{e}");
    let e = load(&edge, &["workload.random[0].label=\"a b\""]).unwrap_err();
    assert!(e.contains("workload.random[0].label"), "{e}");
    let e = load(&edge, &["topology.external.border_links_per_pod=3"]).unwrap_err();
    assert!(e.contains("must be 1 to aggs_per_pod (2)"), "{e}");
    let e = load(&edge, &["topology.cores=3"]).unwrap_err();
    assert!(e.contains("do not split evenly"), "{e}");
    let e = load(&EDGE.replace("{classes}", "[workload]\nrandom = []"), &[]).unwrap_err();
    assert!(e.contains("an empty list"), "{e}");
    let e = load(&edge.replace("pairs = \"wan\"", "pairs = \"moon\""), &[]).unwrap_err();
    assert!(e.contains("class [1]") && e.contains("moon"), "{e}");
}
