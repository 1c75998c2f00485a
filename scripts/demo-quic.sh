#!/usr/bin/env bash
# Self-contained demo of the QUIC datapath: one QUIC stream (quinn) at a time through ccp-router's
# emulated link (20 ms, 50 Mbit/s, 84 packets = 1 BDP) to ccp-quic recv — its congestion control
# the algorithm run in-process (embedded mode), then the same algorithm in ccp-agent steering the
# connection through libccp (agent mode), then quinn's own Cubic for comparison. Prints window,
# RTT and losses once a second, and each receiver's goodput.
#   scripts/demo-quic.sh [ALGORITHM] [SECONDS]     (defaults: cubic, 10; needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
ALG=${1:-cubic}
SECS=${2:-10}
BIN=${CARGO_TARGET_DIR:-target}/release
PFX=ccpquic$$
dir=$(mktemp -d /tmp/ccp-quic-demo.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    "$BIN/ccp-router" cleanup --netns-prefix "$PFX" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$BIN/ccp-router" run --netns-prefix "$PFX" --delay-ms 10 --rate-mbps 50 --queue-pkts 84 >"$dir/router.out" 2>"$dir/router.err" &
pids+=($!)
for _ in $(seq 50); do grep -q ready "$dir/router.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/router.out" || { echo "ccp-router did not start:"; cat "$dir/router.err"; exit 1; }

transfer() { # SENDER CC-ARGS...
    local sender=$1
    shift
    ip netns exec "$PFX-rcv" "$BIN/ccp-quic" recv --listen 10.77.0.2:4433 --cert-out "$dir/cert.der" --streams 1 \
        >"$dir/recv.out" 2>"$dir/recv.err" &
    local rx=$!
    for _ in $(seq 50); do [ -s "$dir/recv.out" ] && break; sleep 0.1; done
    ip netns exec "$PFX-snd" "$BIN/$sender" send --dst 10.77.0.2:4433 --cert "$dir/cert.der" --seconds "$SECS" "$@" \
        || { echo "$sender send failed"; cat "$dir/recv.err"; exit 1; }
    wait "$rx" || true
    echo "receiver: $(tail -1 "$dir/recv.out")"
    echo
}

echo "== embedded: ccp-quic ($ALG, in-process) -> ccp-router 20 ms, 50 Mbit/s, 84 packets -> ccp-quic recv, ${SECS} s"
transfer ccp-quic --cc "$ALG"

echo "== agent mode: ccp-agent ($ALG) <- libccp <- ccp-quic-agent -> the same link"
"$BIN/ccp-agent" --log-level warn run --datapath unix --algorithm "$ALG" --ipc-dir "$dir" --ipc-name agent \
    --control-socket "$dir/ctl.sock" 2>"$dir/agent.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$dir/agent" ] && break; sleep 0.1; done
[ -S "$dir/agent" ] || { echo "agent did not start:"; cat "$dir/agent.log"; exit 1; }
transfer ccp-quic-agent --ipc-dir "$dir" --agent agent

echo "== quinn's own Cubic on the same link"
transfer ccp-quic --native cubic
