#!/usr/bin/env python3
"""HULL's figures in ccp-sim (specs/dc.md §7.2): the testbed's H2, H5, H6, H7, H8 over
configs/sim/hull-pacer.toml, its dynamic workload's H9-H11 (Table 4.4) over
configs/sim/hull-dynamic.toml, its TCP-QoS comparison H12 (Table 4.5) over configs/sim/hull-qos.toml,
and the ns-2 fat-tree's H14 over configs/sim/hull-fattree.toml.

Every cell is the median over seeds (the seed moves the pacers' association draws) of a 500 ms run
(100 ms warm-up) on a 1 Gbit/s star, the flows into one receiver port whose queueing delay is the
"switch latency". The hosts coalesce interrupts (`--coalesce`, µs) unless it is 0.

    scripts/hull-table.py                      # every table, 3 seeds, 50 µs coalescing
    scripts/hull-table.py --only h6 --coalesce 25
    scripts/hull-table.py --quick              # one seed, 200 ms runs, fewer cells (a smoke run)
    scripts/hull-table.py --only h9            # Table 4.4: 4 schemes x 3 loads x 3 seeds of 30 s
    scripts/hull-table.py --only h12           # Table 4.5: TCP-QoS and HULL, 2 buffers x 3 seeds of 30 s

Prints markdown tables. Targets (dc.md §7.2): H2 DCTCP's throughput gap below the drain <= 10 % of
line rate (thesis 6-8 %, TCP-ECN 17-26 %); H5 paced latency floors avg/p99 within 2x of 5/21 us;
H6 throughput ~770 Mbit/s unpaced -> ~870 paced, pacer delay rising sharply for beta < 16; H7
DCTCP-30K ~20x below TCP in average latency, DCTCP-6K-Pacer ~6x below that, the PQ 2-3x below that
for < 4 flows, p99 PQ ~30 us / 6K-Pacer ~100 us / 30K > 300 us, PQ throughput ~870 Mbit/s; H8 MTU
300 B (a 5x larger BDP in packets) below MTU 1500 in latency at every N;
H9 HULL's switch latency >= 5x below DCTCP-30K's, avg and p99; H10 >= 40 % / >= 60 % below
DCTCP-6K-Pacer's (thesis 46-58 % / 69-78 %); H11 HULL's 10 MB FCT above the best scheme's within
10 points of eq. 4.3 with gamma = 0.87 (+19 / +28 / +48 % at 20 / 40 / 60 % load); H12 (ordering)
TCP-QoS's switch latency a little below HULL's, a 15 KB buffer making TCP-QoS's 10 MB FCT 2.4x
longer and HULL's no longer, HULL's 1 KB FCT >= 33 % below TCP-QoS's (65 % at p99).
"""

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "configs" / "sim" / "hull-pacer.toml"
FATTREE = REPO / "configs" / "sim" / "hull-fattree.toml"
DYNAMIC = REPO / "configs" / "sim" / "hull-dynamic.toml"
QOS = REPO / "configs" / "sim" / "hull-qos.toml"


def pq(drain, thresh_kb):
    return f'switch.qdisc={{kind="phantom",drain_fraction={drain},mark_threshold_bytes={thresh_kb * 1000.0}}}'


def dctcp_k(k_kb):
    return f'switch.qdisc={{kind="dctcp",k_bytes={int(k_kb * 1000)}}}'


NO_PACER = "pacer.enabled=false"
# TCP: Reno over a drop-tail port that may take the Triumph's ~700 KB (dc.md §6.3).
TCP = ['switch.qdisc={kind="droptail"}', "switch.buffer_bytes=4000000", "switch.admission=\"static\"",
       "switch.port_buffer_bytes=700000", 'cc.algorithm="reno"', "cc.params={ecn=false}", "transport.ecn=false"]


def flows(n):
    """n long flows from hosts 0..n-1 into host n."""
    entries = ",".join(f"{{src={i},dst={n}}}" for i in range(n))
    return [f"topology.hosts={n + 1}", f"workload.flows=[{entries}]", f'output.monitor=["sw0->h{n}"]']


class Runner:
    def __init__(self, binary, seeds, coalesce, quick):
        self.binary, self.seeds, self.coalesce, self.quick = binary, seeds, coalesce, quick
        self.tmp = Path(tempfile.mkdtemp(prefix="hull-table-"))
        self.n = 0

    def one(self, overrides, seed, scenario=SCENARIO):
        self.n += 1
        out = self.tmp / str(self.n)
        cmd = [str(self.binary), "run", str(scenario), "--out", str(out), "--no-plots", "--quiet", "--json",
               "--set", f"seed={seed}"]
        if scenario == SCENARIO:
            cmd += ["--set", f"transport.rx_coalesce_us={self.coalesce}"]
            if self.quick:
                cmd += ["--set", "duration_ms=200", "--set", "warmup_ms=50"]
        elif scenario == DYNAMIC:
            cmd += ["--set", f"transport.rx_coalesce_us={self.coalesce}"]
            if self.quick:
                cmd += ["--set", "duration_ms=3000", "--set", "workload.random.stop_ms=2500.0"]
        elif scenario == QOS:
            cmd += ["--set", f"transport.rx_coalesce_us={self.coalesce}"]
            if self.quick:
                cmd += ["--set", "duration_ms=3000"] + [f"--set=workload.random[{i}].stop_ms=2500.0" for i in (0, 1)]
        elif self.quick:
            cmd += ["--set", "duration_ms=30", "--set", "warmup_ms=5", "--set", "workload.random.stop_ms=25.0"]
        for o in overrides:
            cmd += ["--set", o]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"ccp-sim failed ({' '.join(overrides)}):\n{p.stderr}")
        s = json.loads(p.stdout)
        s["out_dir"] = out
        if scenario != SCENARIO:
            return s
        port = s["ports"][0]
        pacer = s.get("pacer") or {}
        return {
            "mbps": port["throughput_gbps"] * 1000.0,
            "mean_us": port["queue_delay_mean_us"],
            "p99_us": port["queue_delay_p99_us"],
            "pacer_us": pacer.get("mean_delay_us", 0.0),
        }

    def cell(self, overrides):
        runs = [self.one(overrides, seed) for seed in range(1, self.seeds + 1)]
        return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def h2(r, quick):
    drains = [0.7, 0.95] if quick else [0.6, 0.7, 0.8, 0.9, 0.95]
    print("\n### H2 (Fig 4.2): 2 flows, PQ threshold 6 KB, pacer on; throughput gap below the drain, % of line rate\n")
    print("| drain Mbit/s | DCTCP Mbit/s | DCTCP gap | TCP-ECN (Reno) Mbit/s | TCP-ECN gap |")
    print("|---:|---:|---:|---:|---:|")
    for d in drains:
        a = r.cell([pq(d, 6)])
        b = r.cell([pq(d, 6), 'cc.algorithm="reno"'])
        print(f"| {d * 1000:.0f} | {a['mbps']:.0f} | {d * 100 - a['mbps'] / 10:.1f} % "
              f"| {b['mbps']:.0f} | {d * 100 - b['mbps'] / 10:.1f} % |")


def h5(r, quick):
    thresholds = [1, 6, 30] if quick else [1, 3, 6, 15, 30]
    drains = [0.95] if quick else [0.9, 0.95]
    print("\n### H5 (Fig 4.5): 2 DCTCP flows, PQ threshold and drain swept, paced and unpaced\n")
    print("| drain | threshold | paced Mbit/s | paced avg / p99 µs | unpaced Mbit/s | unpaced avg / p99 µs |")
    print("|---:|---:|---:|---:|---:|---:|")
    for d in drains:
        for t in thresholds:
            a = r.cell([pq(d, t)])
            b = r.cell([pq(d, t), NO_PACER])
            print(f"| {d * 1000:.0f} | {t} KB | {a['mbps']:.0f} | {a['mean_us']:.1f} / {a['p99_us']:.1f} "
                  f"| {b['mbps']:.0f} | {b['mean_us']:.1f} / {b['p99_us']:.1f} |")


def h6(r, quick):
    betas = [1, 16, 16384] if quick else [1, 4, 16, 64, 256, 1024, 4096, 16384]
    print("\n### H6 (Fig 4.6): PQ 950 Mbit/s, 1 KB; β swept\n")
    print("| β (1/s) | throughput Mbit/s | switch avg / p99 µs | mean pacer delay µs |")
    print("|---:|---:|---:|---:|")
    a = r.cell([pq(0.95, 1), NO_PACER])
    print(f"| no pacer | {a['mbps']:.0f} | {a['mean_us']:.1f} / {a['p99_us']:.1f} | – |")
    for b in betas:
        c = r.cell([pq(0.95, 1), f"pacer.beta_per_s={b}.0"])
        print(f"| 2^{b.bit_length() - 1} | {c['mbps']:.0f} | {c['mean_us']:.1f} / {c['p99_us']:.1f} | {c['pacer_us']:.0f} |")


def h7(r, quick):
    ns = [2, 8] if quick else [2, 4, 6, 8]
    schemes = [
        ("TCP (Reno, drop-tail 700 KB)", TCP + [NO_PACER]),
        ("DCTCP-30K", [dctcp_k(30), NO_PACER]),
        ("DCTCP-6K-Pacer", [dctcp_k(6)]),
        ("DCTCP-PQ950-Pacer (HULL)", [pq(0.95, 1)]),
    ]
    print("\n### H7 (Fig 4.8): N static flows; switch latency avg / p99 µs, throughput Mbit/s\n")
    print("| scheme | " + " | ".join(f"N = {n}" for n in ns) + " |")
    print("|---|" + "---:|" * len(ns))
    for name, o in schemes:
        cells = [r.cell(o + flows(n)) for n in ns]
        print(f"| {name} | " + " | ".join(f"{c['mean_us']:.1f} / {c['p99_us']:.1f} ({c['mbps']:.0f})" for c in cells) + " |")


def h8(r, quick):
    ns = [2, 8] if quick else [2, 4, 6, 8, 10]
    mtus = [(1500, []), (300, ["transport.mss_bytes=260"])]
    print("\n### H8 (Fig 4.9): PQ 800 Mbit/s, 6 KB, pacer on; N static flows, MTU 1500 vs 300 B; "
          "switch latency avg / p99 µs (throughput Mbit/s)\n")
    print("| MTU | " + " | ".join(f"N = {n}" for n in ns) + " |")
    print("|---|" + "---:|" * len(ns))
    for mtu, o in mtus:
        cells = [r.cell([pq(0.8, 6)] + o + flows(n)) for n in ns]
        print(f"| {mtu} B | " + " | ".join(f"{c['mean_us']:.1f} / {c['p99_us']:.1f} ({c['mbps']:.0f})" for c in cells) + " |")


def h14(r, quick):
    schemes = [
        ("TCP (Reno, drop-tail)", ['switch.qdisc={kind="droptail"}', 'cc.algorithm="reno"', "cc.params={ecn=false}",
                                   "transport.ecn=false", NO_PACER]),
        ("DCTCP (K = 65 packets)", ['switch.qdisc={kind="dctcp",k_pkts=65}', NO_PACER]),
        ("PQ 9.5 G, 1.5 KB, no pacer", [NO_PACER]),
        ("HULL (PQ 9.5 G, 1.5 KB, pacer)", []),
    ]
    print(f"\n### H14 (Figs 4.13-4.14): {FATTREE.name}, 192 servers, 15 % load; FCT µs by size "
          f"(mean / p99), seed 1{'' if quick else ', 300 ms, arrivals for 250 ms'}\n")
    print("| scheme | ≤ 10 KB | 10–100 KB | 100 KB–10 MB | > 10 MB (done/started) | drops |")
    print("|---|---:|---:|---:|---:|---:|")
    timing = [] if quick else ["duration_ms=300", "workload.random.stop_ms=250.0"]
    for name, o in schemes:
        s = r.one(timing + o, 1, FATTREE)
        cells = [f"{b['fct_mean_us']:.1f} / {b['fct_p99_us']:.1f}" for b in s["buckets"][:3]]
        big = s["buckets"][3]
        cells.append(f"{big['fct_mean_us'] / 1000:.2f} / {big['fct_p99_us'] / 1000:.2f} ms ({big['completed']}/{big['flows']})")
        print(f"| {name} | " + " | ".join(cells) + f" | {s['counters']['dropped_buffer']} |")


def pct(xs, q):
    """The q-th percentile of xs (nearest rank), 0 for none."""
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def mean(xs):
    """The mean of xs, NaN for none."""
    return statistics.mean(xs) if xs else float("nan")


def triple(xs):
    """avg / p90 / p99, as Table 4.4 gives them."""
    return f"{statistics.mean(xs):.1f} / {pct(xs, 90):.1f} / {pct(xs, 99):.1f}" if xs else "–"


def dynamic(r, overrides, scenario=DYNAMIC, column="queue_bytes"):
    """One cell of the dynamic workload, all seeds pooled: the receiver port's sampled latency
    (µs; `column` of queues.csv, the whole port or one priority's queue) after the warm-up, the
    1 KB and 10 MB FCTs of the flows that started after it (µs, ms), 10 MB flows started, drops."""
    lat, small, big, started, drops = [], [], [], 0, 0
    for seed in range(1, r.seeds + 1):
        s = r.one(overrides, seed, scenario)
        warm_us = s["warmup_s"] * 1e6
        drops += s["counters"]["dropped_buffer"]
        with open(s["out_dir"] / "queues.csv") as f:
            lat += [int(q[column]) * 8 / 1000.0 for q in csv.DictReader(f)
                    if q["port"] == "sw0->h4" and float(q["time_us"]) >= warm_us]
        with open(s["out_dir"] / "flows.csv") as f:
            for fl in csv.DictReader(f):
                if float(fl["start_us"]) < warm_us:
                    continue
                done = fl["fct_us"] != ""
                if fl["bytes"] == "1000" and done:
                    small.append(float(fl["fct_us"]))
                elif fl["bytes"] == "10000000":
                    started += 1
                    if done:
                        big.append(float(fl["fct_us"]) / 1000.0)
    return lat, small, big, started, drops


def h9(r, quick):
    """Table 4.4: the memcached-like workload, all seeds pooled. Switch latency is the receiver
    port's queue sampled every 100 us after the warm-up (what the testbed's 1 ms pings saw, less
    the ping's own store-and-forward), 1 KB and 10 MB FCTs are of the flows that started after
    the warm-up and finished."""
    loads = [0.4] if quick else [0.2, 0.4, 0.6]
    schemes = [
        ("TCP-DropTail", TCP + [NO_PACER]),
        ("DCTCP-30K", [dctcp_k(30), NO_PACER]),
        ("DCTCP-6K-Pacer", [dctcp_k(6)]),
        ("DCTCP-PQ950-Pacer (HULL)", []),
    ]
    print(f"\n### H9-H11 (Table 4.4): {DYNAMIC.name}, 80 % 1 KB / 20 % 10 MB into one 1 Gbit/s port; "
          f"avg / p90 / p99 over {r.seeds} seed(s) pooled\n")
    print("| load | scheme | switch latency µs | 1 KB FCT µs | 10 MB FCT ms (done/started) | drops |")
    print("|---:|---|---:|---:|---:|---:|")
    verdicts = []
    for load in loads:
        cells = {}
        for name, o in schemes:
            lat, small, big, started, drops = dynamic(r, o + [f"workload.random.load={load}"])
            cells[name] = (lat, small, big)
            print(f"| {load * 100:.0f} % | {name} | {triple(lat)} | {triple(small)} | {triple(big)} "
                  f"({len(big)}/{started}) | {drops} |")
        hull, k30, k6 = (cells[n][0] for n in ("DCTCP-PQ950-Pacer (HULL)", "DCTCP-30K", "DCTCP-6K-Pacer"))
        theory = {0.2: 19, 0.4: 28, 0.6: 48}[load]
        best = min(statistics.mean(c[2]) for c in cells.values() if c[2])
        slow = 100 * (statistics.mean(cells["DCTCP-PQ950-Pacer (HULL)"][2]) / best - 1)
        verdicts.append(
            f"- {load * 100:.0f} %: H9 DCTCP-30K / HULL avg {statistics.mean(k30) / max(statistics.mean(hull), 1e-9):.1f}x, "
            f"p99 {pct(k30, 99) / max(pct(hull, 99), 1e-9):.1f}x (target >= 5x); "
            f"H10 below DCTCP-6K-Pacer avg {100 * (1 - statistics.mean(hull) / statistics.mean(k6)):.0f} %, "
            f"p99 {100 * (1 - pct(hull, 99) / max(pct(k6, 99), 1e-9)):.0f} % (>= 40 / >= 60); "
            f"H11 HULL's 10 MB FCT +{slow:.0f} % over the best (theory +{theory}, within 10 points)")
    print()
    print("\n".join(verdicts))


def h12(r, quick):
    """Table 4.5: TCP-QoS (1 KB responses in a strict high-priority queue, Reno over drop-tail)
    against HULL at 40 % load, with the Triumph's buffer ("large": up to 700 KB per port) and with
    10 packets per port and priority ("small"). QoS's switch latency is its high-priority queue's
    (the testbed's pings went through that class)."""
    small_buffer = ["switch.queue_buffer_bytes=15000"]
    schemes = [
        ("Large", "TCP-QoS", [], QOS, "q1_bytes"),
        ("Large", "HULL", [], DYNAMIC, "queue_bytes"),
        ("Small (15 KB)", "TCP-QoS", small_buffer, QOS, "q1_bytes"),
        ("Small (15 KB)", "HULL", small_buffer, DYNAMIC, "queue_bytes"),
    ]
    print(f"\n### H12 (Table 4.5): 40 % load, TCP-QoS ({QOS.name}) vs HULL ({DYNAMIC.name}); "
          f"avg / p90 / p99 over {r.seeds} seed(s) pooled\n")
    print("| buffer | scheme | switch latency µs | 1 KB FCT µs | 10 MB FCT ms (done/started) | drops |")
    print("|---|---|---:|---:|---:|---:|")
    cells = {}
    for buf, name, o, scenario, column in schemes:
        lat, small, big, started, drops = dynamic(r, o, scenario, column)
        cells[(buf, name)] = (lat, small, big)
        print(f"| {buf} | {name} | {triple(lat)} | {triple(small)} | {triple(big)} ({len(big)}/{started}) | {drops} |")
    ql, hl = cells[("Large", "TCP-QoS")], cells[("Large", "HULL")]
    qs, hs = cells[("Small (15 KB)", "TCP-QoS")], cells[("Small (15 KB)", "HULL")]
    print()
    print(f"- switch latency, large buffer: TCP-QoS {mean(ql[0]):.1f} µs, HULL {mean(hl[0]):.1f} µs "
          f"(thesis 6.4 and 6.9: similar)")
    print(f"- small buffer: TCP-QoS's 10 MB FCT {mean(qs[2]) / mean(ql[2]):.2f}x its large-buffer one (thesis 2.4x), "
          f"HULL's {mean(hs[2]) / mean(hl[2]):.2f}x (thesis 1.00x)")
    print(f"- large buffer, 1 KB FCT: HULL {100 * (1 - mean(hl[1]) / mean(ql[1])):.0f} % below TCP-QoS on average, "
          f"{100 * (1 - pct(hl[1], 99) / max(pct(ql[1], 99), 1e-9)):.0f} % at p99 (thesis 33 % and 65 %)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "ccp-sim"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--coalesce", type=float, default=50.0, help="hosts' interrupt coalescing, µs (0: off)")
    ap.add_argument("--only", default="h2,h5,h6,h7,h8,h9,h12,h14")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if not Path(a.bin).exists():
        sys.exit(f"{a.bin} not found: cargo build --release -p ccp-sim")
    seeds = 1 if a.quick else a.seeds
    r = Runner(a.bin, seeds, a.coalesce, a.quick)
    print(f"ccp-sim, {seeds} seed(s), interrupt coalescing {a.coalesce:g} µs; H2-H7 on {SCENARIO.name}"
          + (", quick (200 ms runs)" if a.quick else ", 500 ms runs"))
    tables = {"h2": h2, "h5": h5, "h6": h6, "h7": h7, "h8": h8, "h9": h9, "h12": h12, "h14": h14}
    for name in a.only.split(","):
        if name not in tables:
            sys.exit(f"--only: unknown table {name!r} ({', '.join(tables)})")
        tables[name](r, a.quick)


if __name__ == "__main__":
    main()
