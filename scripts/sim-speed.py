#!/usr/bin/env python3
"""ccp-sim's engine speed against an earlier commit's, in one sitting.

Builds ccp-sim at BASE (a git revision, in a temporary worktree with its own cached target
directory) and at the working tree, then runs each scenario below with both binaries, interleaved
(A B A B ...), and prints per scenario the median wall time per simulated millisecond, the median
events/s, and the ratio new/base. It also checks that both binaries wrote the same files (all but
the timing fields of summary.json, and fields summary.json gained after the base, which are named):
a faster engine must give the same results.

    scripts/sim-speed.py --base 51fa749 [--reps 3] [--only bfc-clos,dctcp-clos]
    scripts/sim-speed.py --base-bin /path/to/old/ccp-sim   # skip building the base

Runs are single-threaded; keep the machine otherwise quiet, and quote the medians.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "configs" / "sim"

# The 128-host Clos at 80 % load for 4 ms (arrivals for 3 ms), as bfc-clos-sweep.toml runs it.
CLOS = ["duration_ms=4", "workload.random.stop_ms=3.0", "workload.incast.stop_us=3000.0",
        "workload.incast.bursts=0", "workload.random.load=0.8"]
BFC = ['switch.bfc={hrtt_ns=2000}', "switch.queues_per_port=32", 'switch.qdisc={kind="droptail"}',
       'cc.algorithm="constant"', "cc.params={cwnd_pkts=100}"]
SCENARIOS = {
    "bfc-clos": ("leafspine-fb-dctcp.toml", CLOS + BFC),
    "dctcp-clos": ("leafspine-fb-dctcp.toml", CLOS),
    "hpcc-clos": ("leafspine-fb-dctcp.toml", CLOS + [
        'switch.qdisc={kind="droptail"}', "switch.int=true",
        "switch.pfc={enabled=true,xoff_bytes=400000,xon_bytes=350000}", 'cc.algorithm="hpcc"',
        "cc.params={base_rtt_us=8.0,line_rate_gbps=100.0}"]),
    "annulus-fabric": ("annulus-fabric.toml", []),
    "dctcp-dumbbell": ("dctcp-k20.toml", []),
    # The dumbbell scripts/ns3-crosscheck/run.sh replays in ns-3 (1,209 Hadoop flows, 10 s).
    "ns3-crosscheck": ("ns3-crosscheck.toml", []),
}
TIMING = ("wall_s", "events_per_s")


def build(rev, target_dir):
    """ccp-sim at `rev` (None: the working tree) in release; returns the binary's path."""
    cmd = ["cargo", "build", "--release", "--locked", "-p", "ccp-sim"]
    if rev is None:
        subprocess.run(cmd, cwd=REPO, check=True)
        return REPO / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "ccp-sim"
    tree = Path(tempfile.mkdtemp(prefix="ccp-sim-speed-"))
    try:
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(cmd + ["--target-dir", str(target_dir)], cwd=tree, check=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
        shutil.rmtree(tree, ignore_errors=True)
    return target_dir / "release" / "ccp-sim"


def run(binary, scenario, overrides, out):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(binary), "run", str(SIM / scenario), "--out", str(out), "--no-plots", "--quiet", "--json"]
    for o in overrides:
        cmd += ["--set", o]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{binary} {scenario}: exit {p.returncode}\n{p.stderr}")
    s = json.loads(p.stdout)
    return s["wall_s"], s["events"], s["simulated_s"]


def drop_added(base, new, added):
    """`new` without the keys `base` lacks (fields a later summary.json gained), recursively;
    their names go into `added`."""
    if isinstance(base, dict) and isinstance(new, dict):
        added.update(k for k in new if k not in base)
        return {k: drop_added(base[k], v, added) for k, v in new.items() if k in base}
    if isinstance(base, list) and isinstance(new, list) and len(base) == len(new):
        return [drop_added(x, y, added) for x, y in zip(base, new)]
    return new


def same_outputs(a, b, added):
    names = sorted(os.listdir(a))
    if names != sorted(os.listdir(b)):
        return f"different files: {names} vs {sorted(os.listdir(b))}"
    for n in names:
        x, y = (Path(a) / n).read_bytes(), (Path(b) / n).read_bytes()
        if n == "summary.json":
            x, y = (json.loads(v) for v in (x, y))
            for k in TIMING:
                x.pop(k, None)
                y.pop(k, None)
            y = drop_added(x, y, added)
        if x != y:
            return f"{n} differs"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="git revision to compare against (built in a temporary worktree)")
    ap.add_argument("--base-bin", type=Path, help="an already built base ccp-sim instead of --base")
    ap.add_argument("--new-bin", type=Path, help="an already built new ccp-sim instead of the working tree's")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", help="comma-separated scenarios: " + ",".join(SCENARIOS))
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "ccp-sim-speed")
    a = ap.parse_args()
    if (a.base is None) == (a.base_bin is None):
        ap.error("give exactly one of --base REV and --base-bin PATH")
    names = a.only.split(",") if a.only else list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            ap.error(f"--only: no scenario {n!r} (have {', '.join(SCENARIOS)})")

    base = a.base_bin or build(a.base, REPO / "target" / "sim-speed-base")
    new = a.new_bin or build(None, None)
    print(f"base {base}\nnew  {new}\n{a.reps} interleaved runs each; medians\n")
    print(f"{'scenario':<16} {'events':>11} {'base ms/sim-ms':>15} {'new ms/sim-ms':>14} "
          f"{'base Mev/s':>11} {'new Mev/s':>10} {'speed-up':>9}  outputs")
    failed = False
    for n in names:
        scenario, overrides = SCENARIOS[n]
        walls = {"base": [], "new": []}
        events = {}
        sim_ms = None
        for _ in range(a.reps):
            for label, binary in (("base", base), ("new", new)):
                wall, ev, sim_s = run(binary, scenario, overrides, a.out / n / label)
                walls[label].append(wall)
                events[label] = ev
                sim_ms = sim_s * 1000
        added = set()
        diff = same_outputs(a.out / n / "base", a.out / n / "new", added)
        failed |= diff is not None
        wb, wn = statistics.median(walls["base"]), statistics.median(walls["new"])
        print(f"{n:<16} {events['new']:>11,} {1000 * wb / sim_ms:>15.4g} {1000 * wn / sim_ms:>14.4g} "
              f"{events['base'] / wb / 1e6:>11.2f} {events['new'] / wn / 1e6:>10.2f} {wb / wn:>8.2f}×  "
              f"{'identical' if diff is None else 'DIFFERENT: ' + diff}"
              + (f" (summary.json fields added since the base, not compared: {', '.join(sorted(added))})" if added else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
