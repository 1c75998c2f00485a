#!/usr/bin/env bash
# Cross-checks ccp-sim against ns-3 3.37 on configs/sim/ns3-crosscheck.toml: same dumbbell, same
# flows (exported with `ccp-sim flows`), same TCP settings. Installs Debian's libns3-dev if needed
# (root), builds the ns-3 scenario with g++, runs both, and prints the FCT/throughput differences
# and the speed of each. Takes a few minutes; an experiment, not a CI test.
#   scripts/ns3-crosscheck/run.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-results/ns3-crosscheck}
mkdir -p "$out"
scenario=configs/sim/ns3-crosscheck.toml

if ! dpkg -s libns3-dev >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libns3-dev g++ pkg-config
fi

cargo build --release --locked -p ccp-sim
sim="${CARGO_TARGET_DIR:-target}/release/ccp-sim"

# Debian's ns3 pkg-config files carry a broken include flag ("-I/usr\;"), so the flags are given here.
g++ -O2 -std=c++17 -I/usr/include -I/usr/include/libxml2 scripts/ns3-crosscheck/dumbbell.cc -o "$out/ns3-dumbbell" \
    -lns3-core -lns3-network -lns3-internet -lns3-point-to-point -lns3-applications -lns3-traffic-control

"$sim" flows "$scenario" > "$out/flows.txt"
"$sim" run "$scenario" --out "$out/ccp-sim" --quiet
stats=$("$out/ns3-dumbbell" "$out/flows.txt" "$out/ns3-flows.csv")
echo "ns-3: $stats"
python3 scripts/ns3-crosscheck/compare.py "$out/ccp-sim" "$out/ns3-flows.csv" "$stats" | tee "$out/comparison.txt"
