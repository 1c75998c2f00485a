#!/usr/bin/env python3
"""Compares a ccp-sim run with its ns-3 replay: FCT percentiles per flow-size bucket, per-flow
FCT ratios, goodput of large flows, and simulation speed.

usage: compare.py CCP_SIM_OUT_DIR NS3_FLOWS_CSV NS3_STATS_LINE
"""
import csv
import json
import sys

BUCKETS = [(0, 10_000), (10_001, 100_000), (100_001, 1_000_000), (1_000_001, None)]


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = max(1, min(len(xs), -(-len(xs) * p // 100)))
    return xs[int(k) - 1]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main():
    out_dir, ns3_csv, ns3_stats = sys.argv[1], sys.argv[2], sys.argv[3]
    ours = {int(r["id"]): r for r in csv.DictReader(open(f"{out_dir}/flows.csv"))}
    ns3 = {int(r["id"]): r for r in csv.DictReader(open(ns3_csv))}
    summary = json.load(open(f"{out_dir}/summary.json"))
    stats = dict(kv.split("=") for kv in ns3_stats.split())

    print(f"flows: ccp-sim {len(ours)} ({sum(1 for r in ours.values() if r['fct_us'])} done), "
          f"ns-3 {len(ns3)} ({sum(1 for r in ns3.values() if float(r['fct_us']) >= 0)} done)")
    print(f"{'bucket (bytes)':>22} {'n':>5} | {'FCT mean µs':>23} {'diff':>7} | {'FCT p50 µs':>23} {'diff':>7} | {'FCT p99 µs':>23} {'diff':>7}")
    for lo, hi in BUCKETS:
        ids = [i for i, r in ours.items() if int(r["bytes"]) >= lo and (hi is None or int(r["bytes"]) <= hi)]
        a = [float(ours[i]["fct_us"]) for i in ids if ours[i]["fct_us"]]
        b = [float(ns3[i]["fct_us"]) for i in ids if float(ns3[i]["fct_us"]) >= 0]
        cells = []
        for f in (mean, lambda x: pct(x, 50), lambda x: pct(x, 99)):
            x, y = f(a), f(b)
            cells.append(f"{x:>10.1f} vs {y:>10.1f} {100 * (x - y) / y:>+6.1f}%")
        label = f"{lo}..{hi if hi else ''}"
        print(f"{label:>22} {len(ids):>5} | " + " | ".join(cells))

    ratios = sorted(float(ours[i]["fct_us"]) / float(ns3[i]["fct_us"])
                    for i in ours if ours[i]["fct_us"] and float(ns3[i]["fct_us"]) > 0)
    print(f"per-flow FCT ratio ccp-sim/ns-3: p10 {pct(ratios, 10):.3f}, median {pct(ratios, 50):.3f}, p90 {pct(ratios, 90):.3f}")

    big = [i for i, r in ours.items() if int(r["bytes"]) > 1_000_000]
    gp_a = mean([int(ours[i]["bytes"]) * 8 / float(ours[i]["fct_us"]) / 1e3 for i in big])
    gp_b = mean([int(ns3[i]["bytes"]) * 8 / float(ns3[i]["fct_us"]) / 1e3 for i in big if float(ns3[i]["fct_us"]) > 0])
    print(f"mean goodput of flows > 1 MB: ccp-sim {gp_a:.3f} Gbit/s, ns-3 {gp_b:.3f} Gbit/s ({100 * (gp_a - gp_b) / gp_b:+.1f}%)")
    span_a = summary["simulated_s"]
    span_b = float(stats["sim_s"])
    print(f"makespan (last completion): ccp-sim {span_a:.4f} s, ns-3 {span_b:.4f} s")

    ev_a, wall_a = summary["events"], summary["wall_s"]
    ev_b, wall_b = int(stats["events"]), float(stats["wall_s"])
    print(f"ccp-sim: {ev_a} events in {wall_a:.3f} s = {ev_a / wall_a / 1e6:.2f} M events/s")
    print(f"ns-3:    {ev_b} events in {wall_b:.3f} s = {ev_b / wall_b / 1e6:.3f} M events/s")
    print(f"events/s ratio {ev_a / wall_a / (ev_b / wall_b):.1f}x; wall-clock ratio (ns-3 / ccp-sim) {wall_b / wall_a:.1f}x")


if __name__ == "__main__":
    main()
