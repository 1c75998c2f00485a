#!/usr/bin/env bash
# Many QUIC connections through many hot swaps (embedded mode): one ccp-quic endpoint with
# CONNECTIONS connections through ccp-router (200 Mbit/s, 20 ms, 670 packets = 2 BDP) for 10 s,
# once without swaps and once with SWAPS swaps (every 0.45 s, Reno and Cubic in turn). Prints
# each run's summary (connections complete, swaps taken, faults) and the longest pause of each
# stream at the receiver (p50 / p95 / max).
#   scripts/quic-swaps.sh [CONNECTIONS] [SWAPS]     (defaults: 100, 20; needs root and a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100}
SWAPS=${2:-20}
BIN=${CARGO_TARGET_DIR:-target}/release
PFX=ccpqsw$$
dir=$(mktemp -d /tmp/ccp-quic-swaps.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    "$BIN/ccp-router" cleanup --netns-prefix "$PFX" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$BIN/ccp-router" run --netns-prefix "$PFX" --delay-ms 10 --rate-mbps 200 --queue-pkts 670 >"$dir/router.out" 2>"$dir/router.err" &
pids+=($!)
for _ in $(seq 50); do grep -q ready "$dir/router.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/router.out" || { echo "ccp-router did not start:"; cat "$dir/router.err"; exit 1; }

run() { # NAME SWAP-ARGS...
    local name=$1
    shift
    ip netns exec "$PFX-rcv" "$BIN/ccp-quic" recv --listen 10.77.0.2:4433 --cert-out "$dir/cert.der" --streams "$N" \
        >"$dir/recv.out" 2>"$dir/recv.err" &
    local rx=$!
    for _ in $(seq 50); do [ -s "$dir/recv.out" ] && break; sleep 0.1; done
    ip netns exec "$PFX-snd" "$BIN/ccp-quic" send --dst 10.77.0.2:4433 --cert "$dir/cert.der" --seconds 10 \
        --connections "$N" --cc cubic --report-ms 0 --send-window 16777216 "$@" >"$dir/send.out" \
        || { echo "ccp-quic send failed"; cat "$dir/recv.err"; exit 1; }
    wait "$rx" || true
    echo "== $name"
    grep '"summary"' "$dir/send.out"
    python3 - "$dir/recv.out" <<'PY'
import json, sys
streams = [json.loads(l) for l in open(sys.argv[1]) if '"stream"' in l]
gaps = sorted(s["max_gap_ms"] for s in streams)
pct = lambda q: gaps[min(len(gaps) - 1, int(len(gaps) * q))]
print(f"{len(streams)} streams read whole; longest pause per stream, ms: p50 {pct(0.5):.0f}, p95 {pct(0.95):.0f}, max {gaps[-1]:.0f}")
PY
}

run "no swaps"
swaps=()
for i in $(seq 1 "$SWAPS"); do
    alg=cubic
    [ $((i % 2)) -eq 1 ] && alg=reno
    swaps+=(--swap-at "$(python3 -c "print(round(0.45 * $i, 2))"):$alg")
done
run "$SWAPS swaps" "${swaps[@]}"
