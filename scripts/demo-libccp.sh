#!/usr/bin/env bash
# Self-contained demo: ccp-agent controls three emulated flows of a datapath that links the
# real libccp C library, sharing one 48 Mbit/s bottleneck with a 40 ms RTT. Prints per-second
# throughput, window and RTT of each flow, then the link utilisation and fairness.
#   scripts/demo-libccp.sh [ALGORITHM] [SECONDS]     (defaults: cubic, 15)
set -euo pipefail
cd "$(dirname "$0")/.."
ALG=${1:-cubic}
SECS=${2:-15}
BIN=${CARGO_TARGET_DIR:-target}/release
dir=$(mktemp -d /tmp/ccp-demo.XXXXXX)
agent_pid=""
cleanup() {
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$BIN/ccp-agent" --log-level info run --algorithm "$ALG" --ipc-dir "$dir" --ipc-name agent 2>"$dir/agent.log" &
agent_pid=$!
for _ in $(seq 50); do [ -S "$dir/agent" ] && break; sleep 0.1; done
[ -S "$dir/agent" ] || { echo "agent did not start:"; cat "$dir/agent.log"; exit 1; }

echo "ccp-agent ($ALG) ← libccp datapath: 3 flows (starting 3 s apart), shared 48 Mbit/s, 40 ms RTT, 200-packet buffer, ${SECS} s"
"$BIN/ccp-test-datapath" --dir "$dir" --name dp --agent agent --flows 3 --stagger-ms 3000 --shared-link \
    --link-mbps 48 --rtt-ms 40 --queue-pkts 200 --duration-ms $((SECS * 1000)) 2>"$dir/dp.err" | python3 -u scripts/demo_table.py 48 3
kill "$agent_pid" && wait "$agent_pid" || true
agent_pid=""
echo
echo "agent: $(grep -o 'counters=.*' "$dir/agent.log" | tail -1)"
