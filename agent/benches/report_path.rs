//! The agent's per-report CPU cost on the libccp path, against the bare codec in the same run:
//! - `decode`: parse one MEASURE datagram (the floor every agent pays);
//! - `report_path`: parse it, turn the fold's fields into a `Report`, run the flow's controller
//!   (Reno, containment and sanitizing included), take what the datapath does not hold yet from
//!   the flow's latch and encode the resulting UPDATE_FIELDS.
//!
//! `cargo bench -p ccp-agent --bench report_path` prints both; the ratio is the overhead of
//! everything the agent adds on top of reading the bytes.

use std::hint::black_box;
use std::time::Instant;

use ccp_agent::datapath::libccp::fold::{FlowDecoder, Fold};
use ccp_agent::flows::latch::Latch;
use ccp_contract::{Capabilities, Controller, FlowStart, Limits};
use ccp_wire::{implicit, Measure, Msg, RegKind, UpdateField, UpdateFields};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn measure_datagram(fold: &Fold, i: u64) -> Vec<u8> {
    let mut fields = vec![0u64; fold.program.report_fields().len()];
    let mut set = |name: &str, v: u64| fields[fold.program.report_index(name).unwrap()] = v;
    set("acked_bytes", 14_480);
    set("acked_pkts", 10);
    set("rtt_samples", 10);
    set("rtt_sum_us", 200_000);
    set("rtt_min_us", 19_000);
    set("rtt_max_us", 21_000);
    set("rtt_last_us", 20_000);
    set("send_rate", 6_000_000);
    set("recv_rate", 5_900_000);
    set("inflight_bytes", 100_000);
    set("cwnd_bytes", 144_800);
    set("cwnd_limited", 1);
    set("now_us", 10_000 * i);
    Msg::Measure(Measure { sid: 1, program_uid: 1, fields }).to_bytes().unwrap()
}

fn bench(c: &mut Criterion) {
    let fold = Fold::compile().unwrap();
    let datagrams: Vec<Vec<u8>> = (1..=1024).map(|i| measure_datagram(&fold, i)).collect();
    let mut g = c.benchmark_group("per_report");
    g.throughput(Throughput::Elements(1));

    let mut i = 0;
    g.bench_function("decode", |b| {
        b.iter(|| {
            i = (i + 1) % datagrams.len();
            black_box(ccp_wire::decode(black_box(&datagrams[i])).unwrap());
        })
    });

    let choice = ccp_algorithms::registry::choose("reno", toml::Table::new(), "bench").unwrap();
    let caps = Capabilities {
        max_cwnd_bytes: u32::MAX as u64,
        max_rate_bytes_per_s: u32::MAX as u64,
        can_clear_pacing: false,
        per_rtt_reports: false,
        cwnd_packets: Some(ccp_contract::PacketWindow::Floor),
    };
    let (mut controller, _) =
        Controller::start(choice.clone(), choice, caps, Limits::default(), &FlowStart::new(1448, 14_480), 0);
    let mut latch = Latch::default();
    latch.applied();
    let t0 = Instant::now();
    let mut decoder = FlowDecoder::new(1448, t0);
    let mut out = Vec::with_capacity(256);
    let mut j = 0;
    g.bench_function("report_path", |b| {
        b.iter(|| {
            j = (j + 1) % datagrams.len();
            let (msg, _) = ccp_wire::decode(&datagrams[j]).unwrap();
            let Msg::Measure(m) = msg else { unreachable!() };
            let report = decoder.decode(&fold.layout, &m.fields, t0);
            let outcome = controller.on_report(&report, j as u64);
            let want = controller.settings();
            if let Some(cwnd) = latch.pending(want, &outcome.command).cwnd_bytes {
                out.clear();
                let upd = UpdateField { kind: RegKind::Implicit, index: implicit::CWND, value: cwnd.min(u32::MAX as u64) };
                Msg::UpdateFields(UpdateFields { sid: 1, fields: vec![upd] }).encode(&mut out).unwrap();
                latch.applied();
            }
            black_box(&out);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
