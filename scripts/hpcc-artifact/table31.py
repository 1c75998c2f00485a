#!/usr/bin/env python3
"""HPCC and DCQCN on the BFC thesis's Table 3.1 setup, in the HPCC authors' ns-3 simulator and in
ccp-sim, on the same flows.

The setup is configs/sim/bfc-table-3-1.toml: 16 senders and 4 receivers on a 100 Gbit/s dumbbell
(1 µs host links, a 2 µs bottleneck: an 8 µs base RTT), one long flow from host 0 to host 16, and
Facebook Hadoop cross traffic at 60 % of the bottleneck. `ccp-sim flows` prints the scenario's
flows; this script writes them, the topology and a config for the artifact's `scratch/third`
(`scripts/hpcc-artifact/build.sh` builds it), runs both simulators and prints, per simulator:

  - the long flow's throughput: its bytes / its completion time (the artifact writes only
    completed flows, so the long flow gets a size, `--long-mb`, and both sides measure it the
    same way), as a share of 100 Gbit/s;
  - the bottleneck queue (left switch → right switch) over [warm-up, end]: p50 / p99 in KB,
    sampled every 100 ns by the artifact and every 1 µs by ccp-sim;
  - cross flows completed after the warm-up, and their mean and p99 FCT.

The artifact's settings are its own `simulation/run.py` for a 100 Gbit/s NIC (`hp`, `dcqcn`,
`dcqcn_paper`); ccp-sim is given the same constants where it has them (`CC_SETTINGS` below), and
where the two models differ that is said there.

    scripts/hpcc-artifact/table31.py --artifact ~/.cache/ccp-agent/hpcc-artifact/build/hpcc-third \
        --cc hpcc --seed 1 [--duration-ms 100] [--long-mb 100] [--out DIR]
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SCENARIO = REPO / "configs" / "sim" / "bfc-table-3-1.toml"
SENDERS, RECEIVERS = 16, 4
LEFT, RIGHT = SENDERS + RECEIVERS, SENDERS + RECEIVERS + 1
# The artifact numbers a switch's devices from 1 in the order its links are listed: the left
# switch's 16 host links come first, so its link to the right switch is device 17.
BOTTLENECK_DEVICE = SENDERS + 1
LINE_GBPS = 100
# The artifact's base RTT here (its maxRtt: 2 × 4 µs of links and one 1,000 B packet's
# serialisation per hop, as third.cc computes it and prints: maxRtt=8240).
BASE_RTT_US = 8.24
PAYLOAD = 1000
DATA_PG, DPORT = 3, 100

# run.py's constants for bw = 100 (its config_template, the `hp`, `dcqcn` and `dcqcn_paper` cases).
ARTIFACT = {
    "hpcc": dict(mode=3, t_alpha=1, t_dec=4, t_inc=300, g=0.00390625, ai=40, hai=40, has_win=1,
                 vwin=1, fast_react=1, mi=0, int_multi=4, ack_prio=0),
    "dcqcn": dict(mode=1, t_alpha=1, t_dec=4, t_inc=300, g=0.00390625, ai=20, hai=200, has_win=0,
                  vwin=0, fast_react=0, mi=0, int_multi=1, ack_prio=1),
    "dcqcn_paper": dict(mode=1, t_alpha=50, t_dec=50, t_inc=55, g=0.00390625, ai=20, hai=200,
                        has_win=0, vwin=0, fast_react=0, mi=0, int_multi=1, ack_prio=1),
    # The same with the window HPCC's paper adds to DCQCN ("DCQCN+win"): at most a BDP in
    # flight, scaled with the rate (VAR_WIN).
    "dcqcn_vwin": dict(mode=1, t_alpha=1, t_dec=4, t_inc=300, g=0.00390625, ai=20, hai=200,
                       has_win=1, vwin=1, fast_react=0, mi=0, int_multi=1, ack_prio=0),
}
# ECN at 100 Gbit/s (run.py: K_min 100·bw/25 KB, K_max 400·bw/25 KB, P_max 0.2), the buffer
# 16·bw/50 MB, and the rate floor: MIN_RATE 1000 Mb/s.
KMIN_KB, KMAX_KB, PMAX = 100 * LINE_GBPS // 25, 400 * LINE_GBPS // 25, 0.2
BUFFER_MB = 16 * LINE_GBPS // 50
MIN_RATE_MBPS = 1000

# ccp-sim's side: the same constants in its terms. HPCC: W_AI is run.py's `ai` (40 Mbit/s at
# 100 G), maxStage 0 (MI_THRESH), INT of 42 B (the artifact's IntHeader: 5 hops × 8 B + 2 B),
# T = the base RTT, η = 0.95. DCQCN: RED at the same K_min/K_max/P_max, the same R_AI, R_HAI,
# rate floor, g, timer (RP_TIMER) and F (FAST_RECOVERY_TIMES 1). The two DCQCNs differ in form:
#   - the artifact's (its "Mellanox version", rdma-hw.cc) marks a CNP on every ACK of a marked
#     packet and cuts at most once per RATE_DECREASE_INTERVAL if one came; ours (the paper's NP)
#     makes at most one CNP per cnp_interval_us and cuts at each: cnp_interval_us = t_dec;
#   - the artifact updates α every ALPHA_RESUME_INTERVAL; ours every alpha_update_us, which must
#     exceed cnp_interval_us: max(t_alpha, t_dec + 1);
#   - the artifact's increase runs on its timer alone (no byte counter) and enters hyper increase
#     when the timer's stage passes F; ours (the paper's) needs both clocks past F: a byte counter
#     that never fires therefore leaves ours in additive increase.
# The artifact marks when a packet leaves its queue (switch-node.cc, SwitchNotifyDequeue), on the
# queue behind it; ccp-sim's RED marks at arrival unless told `at_departure` (--mark-at).
def red(at_departure):
    return (f'switch.qdisc={{kind="red",k_min_bytes={KMIN_KB * 1000},k_max_bytes={KMAX_KB * 1000},'
            f'p_max={PMAX},at_departure={"true" if at_departure else "false"}}}')


def ccp_sim_settings(cc, extra_params="", at_departure=True):
    a = ARTIFACT[cc]
    if cc == "hpcc":
        return ['switch.qdisc={kind="droptail"}', "switch.int=true", "switch.int_overhead_bytes=42",
                'cc.algorithm="hpcc"',
                f"cc.params={{base_rtt_us=8.0,line_rate_gbps={LINE_GBPS}.0,max_stage=0,"
                f"ai_rate_mbps={a['ai']}.0,eta=0.95{extra_params}}}"]
    # With a window: the artifact's is R_C × the largest base RTT (its log's maxRtt, 8,240 ns
    # here); ours is cwnd_gain × R_C × window_rtt_us (by default the SRTT, and gain 2).
    window = f",cwnd_gain=1.0,window_rtt_us={BASE_RTT_US}" if a["has_win"] else ""
    return [red(at_departure), 'cc.algorithm="dcqcn"',
            f"cc.params={{line_rate_gbps={LINE_GBPS}.0,min_rate_mbps={MIN_RATE_MBPS}.0,"
            f"g={a['g']},cnp_interval_us={a['t_dec']},"
            f"alpha_update_us={max(a['t_alpha'], a['t_dec'] + 1)},rate_timer_us={a['t_inc']},"
            f"fast_recovery_steps=1,rai_mbps={a['ai']}.0,rhai_mbps={a['hai']}.0,"
            f"byte_counter_bytes=1000000000000{window}{extra_params}}}"]


def common_settings(seed, duration_ms, long_bytes):
    """The scenario as the artifact runs it: one queue per port, the artifact's 32 MiB shared
    buffer and its dynamic PFC threshold (switch-mmu.cc: an ingress pauses its upstream past 1/8
    of the free shared buffer, resumes 3 KiB below), and no retransmission timer: the artifact's
    RDMA transport has none (PFC keeps the fabric lossless), while ccp-sim's 1 ms RTO fires
    spuriously behind the milliseconds of queue DCQCN builds without a window (seed 1: 1,870
    timeouts and 91,656 needless retransmissions, cross flows 1.6x slower)."""
    return [f"seed={seed}", f"duration_ms={duration_ms}", "switch.bfc.enabled=false",
            "switch.queues_per_port=1", f"switch.buffer_bytes={BUFFER_MB * 1024 * 1024}",
            "switch.pfc={enabled=true,free_fraction=0.125,resume_offset_bytes=3072}",
            "transport.rto_min_us=100000.0", "transport.rto_initial_us=100000.0",
            f'workload.flows=[{{src=0,dst={SENDERS},label="long",bytes={long_bytes}}}]']


def sets(items):
    return [x for s in items for x in ("--set", s)]


def write_artifact_inputs(d, flows, cc, duration_ms, warmup_ms, overrides=()):
    links = [(h, LEFT, 1) for h in range(SENDERS)] + [(LEFT, RIGHT, 2)]
    links += [(RIGHT, h, 1) for h in range(SENDERS, SENDERS + RECEIVERS)]
    with open(d / "topology.txt", "w") as f:
        f.write(f"{RIGHT + 1} 2 {len(links)}\n{LEFT} {RIGHT}\n")
        for a, b, us in links:
            f.write(f"{a} {b} {LINE_GBPS}Gbps {us / 1000:.3f}ms 0\n")
    flows = sorted(flows, key=lambda x: (x["start_ns"], x["id"]))
    with open(d / "flow.txt", "w") as f:
        f.write(f"{len(flows)}\n")
        for x in flows:
            f.write(f"{x['src']} {x['dst']} {DATA_PG} {DPORT} {x['bytes']} {x['start_ns'] / 1e9:.9f}\n")
    (d / "trace.txt").write_text("0\n")
    a = ARTIFACT[cc]
    ns = 1_000_000
    config = f"""ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE {PAYLOAD}
TOPOLOGY_FILE topology.txt
FLOW_FILE flow.txt
TRACE_FILE trace.txt
TRACE_OUTPUT_FILE mix.tr
FCT_OUTPUT_FILE fct.txt
PFC_OUTPUT_FILE pfc.txt
SIMULATOR_STOP_TIME {duration_ms / 1000:.6f}
CC_MODE {a['mode']}
ALPHA_RESUME_INTERVAL {a['t_alpha']}
RATE_DECREASE_INTERVAL {a['t_dec']}
CLAMP_TARGET_RATE 0
RP_TIMER {a['t_inc']}
EWMA_GAIN {a['g']}
FAST_RECOVERY_TIMES 1
RATE_AI {a['ai']}Mb/s
RATE_HAI {a['hai']}Mb/s
MIN_RATE {MIN_RATE_MBPS}Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN {a['has_win']}
GLOBAL_T 1
VAR_WIN {a['vwin']}
FAST_REACT {a['fast_react']}
U_TARGET 0.95
MI_THRESH {a['mi']}
INT_MULTI {a['int_multi']}
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.05
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO {a['ack_prio']}
LINK_DOWN 0 0 0
ENABLE_TRACE 0
KMAX_MAP 1 {LINE_GBPS * 10**9} {KMAX_KB}
KMIN_MAP 1 {LINE_GBPS * 10**9} {KMIN_KB}
PMAX_MAP 1 {LINE_GBPS * 10**9} {PMAX}
BUFFER_SIZE {BUFFER_MB}
QLEN_MON_FILE qlen.txt
QLEN_MON_START {warmup_ms * ns}
QLEN_MON_END {duration_ms * ns}
"""
    lines = config.splitlines()
    for o in overrides:
        key, _, value = o.partition("=")
        at = [i for i, l in enumerate(lines) if l.split()[0] == key]
        if not at or not value:
            sys.exit(f"--artifact-set {o}: expected KEY=VALUE with KEY one of the config's keys")
        lines[at[0]] = f"{key} {value}"
    (d / "config.txt").write_text("\n".join(lines) + "\n")


def percentile(hist, q):
    """The q-quantile of a histogram {value: count}."""
    total = sum(hist.values())
    if not total:
        return None
    seen = 0
    for v in sorted(hist):
        seen += hist[v]
        if seen >= q * total:
            return v
    return None


def artifact_queue(d):
    """The bottleneck's queue-length histogram (KB bins) from the artifact's last qlen dump (it
    dumps at multiples of 100 ms of simulated time: shorter runs have none)."""
    hist = {}
    for line in (d / "qlen.txt").read_text().splitlines():
        if line.startswith("time:"):
            hist = {}
            continue
        parts = line.split()
        if int(parts[0]) == LEFT and int(parts[1]) == BOTTLENECK_DEVICE:
            hist = {kb: int(c) for kb, c in enumerate(parts[2:]) if int(c)}
    return hist


def summarize(long_fct_ns, long_bytes, hist, fcts_us):
    """`fcts_us`: the completion times of the cross flows that started after the warm-up (FCTs,
    not slowdowns: the two simulators define a flow's ideal FCT differently)."""
    fcts_us = sorted(fcts_us)
    return {
        "long_share": long_bytes * 8 / long_fct_ns / LINE_GBPS if long_fct_ns else None,
        "queue_p50_kb": percentile(hist, 0.5),
        "queue_p99_kb": percentile(hist, 0.99),
        "cross_completed": len(fcts_us),
        "fct_mean_us": statistics.fmean(fcts_us) if fcts_us else None,
        "fct_p99_us": fcts_us[int(0.99 * (len(fcts_us) - 1))] if fcts_us else None,
    }


def run_artifact(binary, d, flows, long_bytes, warmup_ms):
    log = d / "artifact.log"
    with open(log, "w") as f:
        subprocess.run([str(binary), "config.txt"], cwd=d, stdout=f, stderr=subprocess.STDOUT, check=True)
    long_fct, fcts_us = None, []
    warm_ns = warmup_ms * 1_000_000
    for line in (d / "fct.txt").read_text().splitlines():
        sip, _dip, _sport, _dport, size, start, fct, _alone = line.split()
        src = (int(sip, 16) >> 8) & 0xFFFF
        if src == 0 and int(size) == long_bytes:
            long_fct = int(fct)
        elif int(start) >= warm_ns:
            fcts_us.append(int(fct) / 1000)
    return summarize(long_fct, long_bytes, artifact_queue(d), fcts_us)


def run_ccp_sim(sim, d, settings, long_bytes, warmup_ms):
    subprocess.run([str(sim), "run", str(SCENARIO), "--out", str(d), "--no-plots", "--quiet"]
                   + sets(settings + [f"warmup_ms={warmup_ms}"]), check=True)
    long_fct, fcts_us, goodput = None, [], None
    with open(d / "flows.csv") as f:
        for r in csv.DictReader(f):
            if r["label"] == "long":
                long_fct = float(r["fct_us"]) * 1000 if r["fct_us"] else None
                goodput = float(r["goodput_gbps"]) / LINE_GBPS
            elif r["fct_us"] and float(r["start_us"]) >= warmup_ms * 1000:
                fcts_us.append(float(r["fct_us"]))
    hist = {}
    with open(d / "queues.csv") as f:
        for r in csv.DictReader(f):
            if r["port"] == "left->right" and float(r["time_us"]) >= warmup_ms * 1000:
                kb = int(r["queue_bytes"]) // 1000
                hist[kb] = hist.get(kb, 0) + 1
    # Also its goodput over the run after the warm-up, which ccp-sim knows for an unfinished flow.
    return {**summarize(long_fct, long_bytes, hist, fcts_us), "long_goodput_share": goodput}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifact", required=True, type=Path, help="the artifact's scratch/third binary")
    ap.add_argument("--sim", type=Path, default=REPO / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "ccp-sim")
    ap.add_argument("--cc", choices=sorted(ARTIFACT), required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration-ms", type=int, default=100)
    ap.add_argument("--warmup-ms", type=int, default=5)
    ap.add_argument("--long-mb", type=float, default=100.0, help="the long flow's size, MB (1e6 B)")
    ap.add_argument("--out", type=Path, help="keep every file here (default: a temporary directory)")
    ap.add_argument("--only", choices=["artifact", "ccp-sim"], help="run one simulator")
    ap.add_argument("--artifact-set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a key of the artifact's config, e.g. RATE_HAI=20Mb/s (repeatable)")
    ap.add_argument("--mark-at", choices=["departure", "arrival"], default="departure",
                    help="where ccp-sim's RED marks (DCQCN): as the artifact (departure) or at arrival")
    ap.add_argument("--sim-set", action="append", default=[], metavar="KEY=VALUE",
                    help="more ccp-sim --set overrides, e.g. transport.rto_min_us=100000.0 (repeatable)")
    ap.add_argument("--params", default="", help="more cc.params for ccp-sim, e.g. ',alpha_init=0.5'")
    a = ap.parse_args()
    for p, what in ((a.artifact, "--artifact"), (a.sim, "--sim")):
        if not (p.is_file() and os.access(p, os.X_OK)):
            sys.exit(f"{what}: {p} is not an executable file")
    long_bytes = int(a.long_mb * 1e6)
    out = a.out or Path(tempfile.mkdtemp(prefix="hpcc-artifact-"))
    out.mkdir(parents=True, exist_ok=True)
    common = common_settings(a.seed, a.duration_ms, long_bytes)
    listing = subprocess.run([str(a.sim), "flows", str(SCENARIO)] + sets(common), capture_output=True,
                             text=True, check=True).stdout
    flows = []
    for line in listing.splitlines():
        fid, src, dst, size, start_ns = (int(x) for x in line.split())
        flows.append(dict(id=fid, src=src, dst=dst, bytes=size, start_ns=start_ns))
    if any(f["bytes"] == 0 for f in flows):
        sys.exit("a flow without a size: the artifact needs every flow's size")
    results = {}
    if a.only != "ccp-sim":
        d = out / f"artifact-{a.cc}"
        d.mkdir(exist_ok=True)
        write_artifact_inputs(d, flows, a.cc, a.duration_ms, a.warmup_ms, a.artifact_set)
        results["artifact"] = run_artifact(a.artifact, d, flows, long_bytes, a.warmup_ms)
    if a.only != "artifact":
        cc = "dcqcn" if a.cc.startswith("dcqcn") else "hpcc"
        settings = common + ccp_sim_settings(a.cc, a.params, a.mark_at == "departure") + a.sim_set
        results["ccp-sim"] = run_ccp_sim(a.sim, out / f"ccp-sim-{a.cc}", settings, long_bytes, a.warmup_ms)
        results["ccp-sim"]["algorithm"] = cc
        results["ccp-sim"]["red_marks_at"] = a.mark_at if cc == "dcqcn" else None
    print(json.dumps({"cc": a.cc, "seed": a.seed, "duration_ms": a.duration_ms, "flows": len(flows),
                      "out": str(out), **results}, indent=1))


if __name__ == "__main__":
    main()
