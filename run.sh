#!/usr/bin/env bash
# The main job. Installs what is needed, builds, and runs:
#   ./run.sh [compare [CCP-LAB RUN OPTIONS...]]  kernel Cubic and BBR, the agent's Copa and ABC and a
#                                            Python Vegas on the shipped LTE trace, 20 s each: a table
#                                            in the terminal and an HTML report (default; needs root;
#                                            configs/experiments/compare.toml)
#   ./run.sh demo [ALGORITHM] [SECONDS]      one kernel TCP flow through the emulated LTE link, steered
#                                            by ccp-agent on the eBPF datapath, live (needs root)
#   ./run.sh agent [ARGS...]                 the agent on this kernel: `ccp-agent run --datapath ebpf ARGS`
#   ./run.sh libccp-demo [ALGORITHM] [SECS]  the agent driving emulated flows of the real libccp library
#   ./run.sh dpdk-demo [ALGORITHM] [SECS]    the agent steering the DPDK datapath's user-space TCP sender
#                                            through an emulated link to a kernel receiver (needs root)
#   ./run.sh quic-demo [ALGORITHM] [SECS]    QUIC (quinn) transfers: the algorithm in-process, then steered
#                                            by ccp-agent, then quinn's own Cubic (needs root)
set -euo pipefail
cd "$(dirname "$0")"
cmd=${1:-compare}
[ $# -gt 0 ] && shift
case "$cmd" in
    compare|demo|agent|dpdk-demo|quic-demo)
        if [ "$(id -u)" -ne 0 ]; then
            echo "./run.sh $cmd needs root (network namespaces, BPF); try: sudo ./run.sh $cmd $*" >&2
            exit 1
        fi ;;
    libccp-demo) ;;
    *) echo "usage: ./run.sh [compare [OPTIONS...] | demo [ALGORITHM] [SECONDS] | agent [ARGS...] | libccp-demo [ALGORITHM] [SECONDS] | dpdk-demo [ALGORITHM] [SECONDS] | quic-demo [ALGORITHM] [SECONDS]]" >&2; exit 2 ;;
esac
./scripts/setup.sh
cargo build --release --locked -p ccp-agent -p ccp-router -p ccp-test-datapath -p ccp-dpdk -p ccp-quic -p ccp-quic-agent -p ccp-lab
bin="${CARGO_TARGET_DIR:-target}/release"
case "$cmd" in
    compare)
        trace=../shared/traces/Verizon-LTE-short.down
        if [ ! -f "$trace" ]; then
            echo "./run.sh compare needs the shipped LTE trace $trace (not found); ./run.sh demo runs on a fixed link without it" >&2
            exit 1
        fi
        exec "$bin/ccp-lab" run configs/experiments/compare.toml --report --agent "$bin/ccp-agent" "$@" ;;
    demo) exec ./scripts/demo-kernel.sh "$@" ;;
    agent) exec "$bin/ccp-agent" run --datapath ebpf "$@" ;;
    libccp-demo) exec ./scripts/demo-libccp.sh "$@" ;;
    dpdk-demo) exec ./scripts/demo-dpdk.sh "$@" ;;
    quic-demo) exec ./scripts/demo-quic.sh "$@" ;;
esac
