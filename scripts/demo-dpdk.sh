#!/usr/bin/env bash
# Self-contained demo of the DPDK datapath: ccp-dpdk sends over net_af_xdp on a veth pair,
# through ccp-router's emulated link (20 ms, 50 Mbit/s, 100 packets), to a kernel TCP receiver
# that checks the stream, steered by ccp-agent. Prints goodput, RTT and window once a second.
#   scripts/demo-dpdk.sh [ALGORITHM] [SECONDS]     (defaults: cubic, 15; needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
ALG=${1:-cubic}
SECS=${2:-15}
BIN=${CARGO_TARGET_DIR:-target}/release
PFX=ccpdemo$$
dir=$(mktemp -d /tmp/ccp-dpdk-demo.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    scripts/dpdk-veth.sh down "$PFX" >/dev/null 2>&1 || true
    "$BIN/ccp-router" cleanup --netns-prefix "$PFX" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$BIN/ccp-router" run --netns-prefix "$PFX" --delay-ms 10 --rate-mbps 50 --queue-pkts 100 >"$dir/router.out" 2>"$dir/router.err" &
pids+=($!)
for _ in $(seq 50); do grep -q ready "$dir/router.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/router.out" || { echo "ccp-router did not start:"; cat "$dir/router.err"; exit 1; }
scripts/dpdk-veth.sh router "$PFX-snd" "$PFX" >/dev/null

"$BIN/ccp-agent" --log-level info run --datapath unix --algorithm "$ALG" --ipc-dir "$dir" --ipc-name agent \
    --control-socket "$dir/ctl.sock" 2>"$dir/agent.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$dir/agent" ] && break; sleep 0.1; done
[ -S "$dir/agent" ] || { echo "agent did not start:"; cat "$dir/agent.log"; exit 1; }

ip netns exec "$PFX-rcv" "$BIN/ccp-dpdk" sink --listen 10.77.0.2:5201 --count 1 >"$dir/sink.out" 2>"$dir/sink.err" &
pids+=($!)
sleep 0.3
echo "ccp-agent ($ALG) <- libccp <- ccp-dpdk (net_af_xdp) -> ccp-router 20 ms, 50 Mbit/s, 100 packets -> kernel receiver, ${SECS} s"
ip netns exec "$PFX-dp" "$BIN/ccp-dpdk" send --vdev "net_af_xdp0,iface=$PFX-a" --ip 10.98.0.2 --gateway 10.98.0.1 \
    --dst 10.77.0.2:5201 --ipc-dir "$dir" --agent agent --ipc-name dpdk --seconds "$SECS" 2>"$dir/dpdk.err" \
    || { echo "ccp-dpdk failed:"; grep -v '^lib' "$dir/dpdk.err" | tail -5; exit 1; }
for _ in $(seq 50); do [ -s "$dir/sink.out" ] && break; sleep 0.1; done
echo "receiver: $(cat "$dir/sink.out")"
