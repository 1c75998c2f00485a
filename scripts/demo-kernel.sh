#!/usr/bin/env bash
# The newcomer demo: a real kernel bulk TCP flow on the `ccp` congestion control, steered by
# ccp-agent on the eBPF datapath, through ccp-router's emulated cellular link (two network
# namespaces, 50 ms each way, 250-packet buffer). Prints goodput, capacity, RTT and window once
# per second and writes a PNG plot. Needs root (namespaces, BPF).
#   scripts/demo-kernel.sh [ALGORITHM] [SECONDS]      (defaults: cubic, 30)
set -euo pipefail
cd "$(dirname "$0")/.."
ALG=${1:-cubic}
SECS=${2:-30}
QDISC=${QDISC:-droptail}
BIN=${CARGO_TARGET_DIR:-target}/release
TRACE=../shared/traces/Verizon-LTE-short.down
if [ -f "$TRACE" ]; then
    link=(--trace "$TRACE")
else
    echo "($TRACE not found: using a fixed 12 Mbit/s link instead)"
    link=(--rate-mbps 12)
fi
extra=()
[ "$QDISC" = droptail ] || extra+=(--qdisc "$QDISC" --ecn)
mkdir -p results
# A Python algorithm's name (py:path/file.py:Class) holds slashes and colons: the plot is named
# after its class.
plot="results/demo-$(printf '%s' "${ALG##*:}" | tr -c 'A-Za-z0-9_.-' '-').png"
"$BIN/ccp-router" demo --netns-prefix ccpdemo "${link[@]}" --delay-ms 50 --queue-pkts 250 "${extra[@]}" \
    --cc ccp --spawn "$BIN/ccp-agent --log-level warn run --datapath ebpf --algorithm $ALG" \
    --seconds "$SECS" --plot "$plot"
echo "plot: $plot"
