#!/usr/bin/env bash
# Annulus in ccp-sim: every scheme on the two scenario families, then one markdown table each.
#   scripts/annulus-sim.sh table2 [OUT_DIR] [LOAD...]   configs/sim/annulus-table2.toml: all-DC, 5:1, 1:5,
#                                                       all-WAN at each offered load (default 0.7 1.0)
#   scripts/annulus-sim.sh fabric [OUT_DIR] [SECONDS]   configs/sim/annulus-fabric.toml: Data Mining and
#                                                       Facebook Hadoop at 80 % load (default 5 s each),
#                                                       for each seed in $SEEDS (default 1)
#   scripts/annulus-sim.sh edge [OUT_DIR]               configs/sim/annulus-edge-caching.toml: the 20:1
#                                                       WAN incast of 50 MB transfers (S7/S8), 5 back to
#                                                       back per server
#   scripts/annulus-sim.sh s6 [OUT_DIR] [DC_LOAD]       configs/sim/annulus-s6.toml: the 128-host fat-tree
#                                                       with its WAN edge (S6), Data Mining for 2 s and
#                                                       Facebook Hadoop for 1 s (arrivals stop 0.2 s
#                                                       before the end) at DC load 0.6 (the WAN class at
#                                                       0.8x, the external cross traffic filling the
#                                                       border->external links to 80 %), for each seed in
#                                                       $SEEDS; schemes annulus, annulus-e2e (no
#                                                       near-source loop), annulus-bc15k, dctcp, dcqcn,
#                                                       cubic (no ECN)
# Results go to OUT_DIR (default results/annulus-sim/<mode>); the tables are printed and written to
# OUT_DIR/table.md (TABLE_ONLY=1 re-tabulates OUT_DIR without running anything; CCP_SIM=path runs that
# binary instead of building this checkout's). The schemes: annulus (DCTCP for DC, BBR for WAN, plus the near-source loop),
# annulus-bc15k (its recovery cycle at 15 KB, spec A4's sensitivity), dctcp+bbr (the same flows
# without the near-source loop: the paper's baseline), and dctcp, dcqcn, dcqcn+pfc, cubic, bbr on
# every flow.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/annulus-sim.sh table2|fabric|edge [OUT_DIR] [...]}
shift
out=${1:-results/annulus-sim/$mode}
shift || true
# CCP_SIM: a ccp-sim binary to run instead of building this checkout's.
if [ -n "${CCP_SIM:-}" ]; then
  sim=$CCP_SIM
else
  cargo build --release -p ccp-sim --locked -q
  sim=target/release/ccp-sim
fi

line_rate=40.0
[ "$mode" != table2 ] && line_rate=10.0
declare -A schemes=(
  [annulus]=''
  [annulus-bc15k]="--set cc.params={line_rate_gbps=$line_rate,bc_limit_bytes=15000.0}"
  [dctcp+bbr]='--set cc.params.near_source=false'
  [dctcp]='--set cc.algorithm="dctcp" --set cc.params={}'
  [dcqcn]="--set cc.algorithm=\"dcqcn\" --set cc.params={line_rate_gbps=$line_rate}"
  [dcqcn+pfc]="--set cc.algorithm=\"dcqcn\" --set cc.params={line_rate_gbps=$line_rate} --set switch.pfc.enabled=true"
  [cubic]='--set cc.algorithm="cubic" --set cc.params={}'
  [bbr]='--set cc.algorithm="bbr" --set cc.params={}'
)
mkdir -p "$out"
run() { # dir, scenario, overrides...
  local dir=$1 scenario=$2
  shift 2
  "$sim" run "$scenario" --out "$dir" --no-plots --quiet "$@"
}

case ${TABLE_ONLY:+skip}$mode in
skip*) ;;
table2)
  loads=("$@")
  [ ${#loads[@]} -gt 0 ] || loads=(0.7 1.0)
  # 6 senders, then 6 receivers: the WAN distance is on the receivers' links (beyond the bottleneck).
  declare -A mixes=(
    [all-dc]='[2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0]'
    [mix-5to1]='[2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0,1000.0]'
    [mix-1to5]='[2.0,2.0,2.0,2.0,2.0,2.0,2.0,1000.0,1000.0,1000.0,1000.0,1000.0]'
    [all-wan]='[2.0,2.0,2.0,2.0,2.0,2.0,1000.0,1000.0,1000.0,1000.0,1000.0,1000.0]'
  )
  for load in "${loads[@]}"; do
    for mix in "${!mixes[@]}"; do
      for scheme in "${!schemes[@]}"; do
        # shellcheck disable=SC2086
        run "$out/load$load/$mix/$scheme" configs/sim/annulus-table2.toml --set "workload.random.load=$load" \
          --set "topology.host_delays_us=${mixes[$mix]}" ${schemes[$scheme]}
      done
    done
  done
  ;;
fabric)
  seconds=${1:-5}
  ms=$((seconds * 1000))
  declare -A workloads=([datamining]='datamining_vl2.cdf' [fb_hadoop]='../../../shared/workloads/fb_hadoop_hpcc.cdf')
  for seed in ${SEEDS:-1}; do
    for wl in "${!workloads[@]}"; do
      for scheme in "${!schemes[@]}"; do
        # shellcheck disable=SC2086
        run "$out/seed$seed/$wl/$scheme" configs/sim/annulus-fabric.toml --seed "$seed" --set "duration_ms=$ms" \
          --set "workload.random.stop_ms=$ms.0" --set "workload.random.cdf=\"${workloads[$wl]}\"" ${schemes[$scheme]}
      done
    done
  done
  ;;
s6)
  # The fabric's file sets Annulus's WAN loop to DCTCP (ns-2, §12 A5): annulus-e2e is it without the
  # near-source loop. Every class runs the scheme.
  declare -A s6_schemes=(
    [annulus]=''
    [annulus-e2e]='--set cc.params.near_source=false'
    [annulus-bc15k]='--set cc.params.bc_limit_bytes=15000.0'
    [dctcp]="${schemes[dctcp]}"
    [dcqcn]="${schemes[dcqcn]}"
    # ns-2's TCP CUBIC: SACK on drop-tail, no ECN (annulus.md §11).
    [cubic]='--set cc.algorithm="cubic" --set cc.params={ecn=false}'
  )
  dc=${1:-0.6}
  # The WAN class at a fifth of the dc class's bytes; the cross traffic brings the border's links
  # to the external hosts to 80 % (configs/sim/annulus-s6.toml's header).
  wan=$(python3 -c "print(round(0.8 * $dc, 4))")
  cross=$(python3 -c "print(round(0.8 - 0.4 * $dc, 4))")
  declare -A workloads=([datamining]='datamining_vl2.cdf 2000' [fb_hadoop]='../../../shared/workloads/fb_hadoop_hpcc.cdf 1000')
  for seed in ${SEEDS:-1}; do
    for wl in "${!workloads[@]}"; do
      read -r cdf ms <<<"${workloads[$wl]}"
      classes=()
      for i in 0 1 2; do
        classes+=(--set "workload.random[$i].cdf=\"$cdf\"" --set "workload.random[$i].stop_ms=$((ms - 200)).0")
      done
      for scheme in "${!s6_schemes[@]}"; do
        # shellcheck disable=SC2086
        run "$out/dc$dc/seed$seed/$wl/$scheme" configs/sim/annulus-s6.toml --seed "$seed" --set "duration_ms=$ms" \
          "${classes[@]}" --set "workload.random[0].load=$dc" --set "workload.random[1].load=$wan" \
          --set "workload.random[2].load=$cross" ${s6_schemes[$scheme]}
      done
    done
  done
  ;;
edge)
  for scheme in "${!schemes[@]}"; do
    # shellcheck disable=SC2086
    run "$out/$scheme" configs/sim/annulus-edge-caching.toml ${schemes[$scheme]}
  done
  ;;
*)
  echo "unknown mode $mode (table2, fabric, edge or s6)" >&2
  exit 2
  ;;
esac

python3 - "$mode" "$out" <<'PY' | tee "$out/table.md"
import csv, json, sys, pathlib
mode, root = sys.argv[1], pathlib.Path(sys.argv[2])

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")

def flows(d):
    return list(csv.DictReader(open(d / "flows.csv")))

if mode == "table2":
    print("| load | traffic | scheme | util | queue p99 KB | drops | DC RPC p99 ms | WAN RPC mean ms | RPCs done |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sorted(root.glob("load*/*/*/summary.json")):
        load, mix, scheme = s.parts[-4][4:], s.parts[-3], s.parts[-2]
        j = json.loads(s.read_text()); p = j["ports"][0]
        fl = flows(s.parent); done = [f for f in fl if f["fct_us"]]
        # The class is the receiver's access delay (the mixes above): WAN receivers are these hosts.
        wan_dst = {"all-dc": set(), "mix-5to1": {11}, "mix-1to5": {7, 8, 9, 10, 11}, "all-wan": set(range(6, 12))}[mix]
        dc = [float(f["fct_us"]) for f in done if int(f["dst"]) not in wan_dst]
        wan = [float(f["fct_us"]) for f in done if int(f["dst"]) in wan_dst]
        p99 = f"{pct(dc, 0.99)/1e3:.2f}" if dc else "–"
        wm = f"{sum(wan)/len(wan)/1e3:.2f}" if wan else "–"
        print(f"| {load} | {mix} | {scheme} | {p['utilization']:.3f} | {p['queue_p99_bytes']/1e3:.0f} | "
              f"{j['counters']['dropped_buffer']} | {p99} | {wm} | {len(done)}/{len(fl)} |")
elif mode == "edge":
    # S7 normalizes each scheme's mean and p99 transfer time to Cubic's; S8 is the loss rate.
    rows = {}
    for s in sorted(root.glob("*/summary.json")):
        j = json.loads(s.read_text()); c = j["counters"]
        fct = [float(f["fct_us"]) / 1e6 for f in flows(s.parent) if f["fct_us"]]
        rows[s.parent.name] = (fct, c["dropped_buffer"] / max(c["data_packets"], 1), j["ports"][0]["utilization"], j["flows_total"])
    base = rows.get("cubic", ([], 0, 0, 0))[0]
    ref = lambda xs, p: (sum(xs) / len(xs) if p is None else pct(xs, p)) if xs else float("nan")
    print("| scheme | transfers done | mean FCT s | p99 FCT s | mean / Cubic's | p99 / Cubic's | loss rate % | utilisation |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (fct, loss, util, total) in sorted(rows.items()):
        mean, p99 = ref(fct, None), ref(fct, 0.99)
        print(f"| {name} | {len(fct)}/{total} | {mean:.3f} | {p99:.3f} | {mean / ref(base, None):.3f} | {p99 / ref(base, 0.99):.3f} | "
              f"{100 * loss:.3f} | {util:.3f} |")
elif mode == "s6":
    # S6: the mean FCT of WAN flows. Every scheme draws the same flows (the workload is generated
    # before the run), so the means are also taken over the WAN flows every scheme of the cell
    # finished ("common"): a scheme that leaves its slow flows unfinished gains nothing. Then the
    # datacenter flows by size (S1-S5 on the same fabric, with the WAN traffic present).
    from collections import defaultdict
    cells = defaultdict(dict)
    for s in sorted(root.glob("dc*/seed*/*/*/summary.json")):
        dc, seed, wl, scheme = s.parts[-5][2:], s.parts[-4][4:], s.parts[-3], s.parts[-2]
        cells[(dc, seed, wl)][scheme] = (json.loads(s.read_text()), flows(s.parent))
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    fct = lambda fs: [float(f["fct_us"]) for f in fs if f["fct_us"]]
    print("| DC load | seed | workload | scheme | WAN done | WAN mean FCT ms | WAN p99 ms | WAN mean, common ms | vs best other | "
          "cross mean ms | border→ext util | border→ext drops | drops (all) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (dc, seed, wl), runs in sorted(cells.items()):
        done_by = [{f["id"] for f in fl if f["label"] == "wan" and f["fct_us"]} for j, fl in runs.values()]
        common = set.intersection(*done_by)
        common_mean = {k: mean([float(f["fct_us"]) / 1e3 for f in fl if f["id"] in common]) for k, (j, fl) in runs.items()}
        for k, (j, fl) in sorted(runs.items()):
            wan, cross = [f for f in fl if f["label"] == "wan"], [f for f in fl if f["label"] == "cross"]
            w = fct(wan)
            ext = [p for p in j["ports"] if p["name"].startswith("border->e")]
            others = [v for o, v in common_mean.items() if o not in (k, "annulus-e2e")]
            print(f"| {dc} | {seed} | {wl} | {k} | {len(w)}/{len(wan)} | {mean(w)/1e3:.2f} | {pct(w, 0.99)/1e3:.1f} | "
                  f"{common_mean[k]:.2f} | {common_mean[k] / min(others, default=float('nan')):.3f} | "
                  f"{mean(fct(cross))/1e3:.2f} | {mean([p['utilization'] for p in ext]):.3f} | "
                  f"{sum(p['drops'] for p in ext)} | {j['counters']['dropped_buffer']} |")
    # Where the WAN means differ: by size (slow start at a 20 ms RTT against a line-rate start)
    # and by direction (into the border's congested links, or out of the external hosts).
    bins = [("≤10K", 0, 10_000), ("10K-100K", 10_000, 100_000), ("100K-1M", 100_000, 1_000_000), (">1M", 1_000_000, 1 << 62)]
    print()
    print("| DC load | seed | workload | scheme | " + " | ".join(f"WAN {b[0]} ms" for b in bins) + " | DC→ext ms | ext→DC ms | WAN timeouts |")
    print("|---|---|---|---|" + "---|" * (len(bins) + 3))
    for (dc, seed, wl), runs in sorted(cells.items()):
        common = set.intersection(*[{f["id"] for f in fl if f["label"] == "wan" and f["fct_us"]} for j, fl in runs.values()])
        for k, (j, fl) in sorted(runs.items()):
            wan = [f for f in fl if f["id"] in common]
            ms = lambda fs: f"{mean([float(f['fct_us']) / 1e3 for f in fs]):.2f} ({len(fs)})"
            sizes = [ms([f for f in wan if lo < int(f["bytes"]) <= hi]) for _, lo, hi in bins]
            out_of_dc = [f for f in wan if int(f["src"]) < int(f["dst"])]
            into_dc = [f for f in wan if int(f["src"]) > int(f["dst"])]
            timeouts = sum(int(f["timeouts"]) for f in fl if f["label"] == "wan")
            print(f"| {dc} | {seed} | {wl} | {k} | " + " | ".join(sizes) + f" | {ms(out_of_dc)} | {ms(into_dc)} | {timeouts} |")
    print()
    print("| DC load | seed | workload | scheme | DC done | small p99.9 µs | small p99 µs | small mean µs | medium mean µs | "
          "large mean µs | all mean µs | all mean, common µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (dc, seed, wl), runs in sorted(cells.items()):
        common = set.intersection(*[{f["id"] for f in fl if f["label"] == "dc" and f["fct_us"]} for j, fl in runs.values()])
        for k, (j, fl) in sorted(runs.items()):
            dcf = [f for f in fl if f["label"] == "dc"]
            by = lambda lo, hi: fct([f for f in dcf if lo < int(f["bytes"]) <= hi])
            small, med, large = by(0, 10_000), by(10_000, 100_000), by(100_000, 1 << 62)
            everything = fct(dcf)
            cm = mean([float(f["fct_us"]) for f in dcf if f["id"] in common])
            print(f"| {dc} | {seed} | {wl} | {k} | {len(everything)}/{len(dcf)} | {pct(small, 0.999):.1f} | {pct(small, 0.99):.1f} | "
                  f"{mean(small):.1f} | {mean(med):.1f} | {mean(large):.0f} | {mean(everything):.0f} | {cm:.0f} |")
else:
    print("| seed | workload | scheme | small p99.9 FCT µs | small p99 µs | small mean µs | medium mean µs | large mean µs | all mean FCT µs | all mean slowdown | drops | done |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sorted(root.glob("seed*/*/*/summary.json")):
        seed, wl, scheme = s.parts[-4][4:], s.parts[-3], s.parts[-2]
        j = json.loads(s.read_text())
        fl = flows(s.parent); done = [f for f in fl if f["fct_us"]]
        by = lambda lo, hi: [float(f["fct_us"]) for f in done if lo < int(f["bytes"]) <= hi]
        small, med, large = by(0, 10_000), by(10_000, 100_000), by(100_000, 1 << 62)
        mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
        sd = mean([float(f["slowdown"]) for f in done if f["slowdown"]])
        everything = [float(f["fct_us"]) for f in done]
        print(f"| {seed} | {wl} | {scheme} | {pct(small, 0.999):.1f} | {pct(small, 0.99):.1f} | {mean(small):.1f} | {mean(med):.1f} | "
              f"{mean(large):.0f} | {mean(everything):.0f} | {sd:.2f} | {j['counters']['dropped_buffer']} | {len(done)}/{len(fl)} |")
PY
