#!/usr/bin/env bash
# The main job. Installs what is needed, builds, and runs:
#   ./run.sh [demo [ALGORITHM] [SECONDS]]    a kernel TCP flow through an emulated LTE link, steered by
#                                            ccp-agent on the eBPF datapath (default; needs root)
#   ./run.sh agent [ARGS...]                 the agent on this kernel: `ccp-agent run --datapath ebpf ARGS`
#   ./run.sh libccp-demo [ALGORITHM] [SECS]  the agent driving emulated flows of the real libccp library
#   ./run.sh dpdk-demo [ALGORITHM] [SECS]    the agent steering the DPDK datapath's user-space TCP sender
#                                            through an emulated link to a kernel receiver (needs root)
set -euo pipefail
cd "$(dirname "$0")"
cmd=${1:-demo}
[ $# -gt 0 ] && shift
case "$cmd" in
    demo|agent|dpdk-demo)
        if [ "$(id -u)" -ne 0 ]; then
            echo "./run.sh $cmd needs root (network namespaces, BPF); try: sudo ./run.sh $cmd $*" >&2
            exit 1
        fi ;;
    libccp-demo) ;;
    *) echo "usage: ./run.sh [demo [ALGORITHM] [SECONDS] | agent [ARGS...] | libccp-demo [ALGORITHM] [SECONDS] | dpdk-demo [ALGORITHM] [SECONDS]]" >&2; exit 2 ;;
esac
./scripts/setup.sh
cargo build --release --locked -p ccp-agent -p ccp-router -p ccp-test-datapath -p ccp-dpdk
case "$cmd" in
    demo) exec ./scripts/demo-kernel.sh "$@" ;;
    agent) exec "${CARGO_TARGET_DIR:-target}/release/ccp-agent" run --datapath ebpf "$@" ;;
    libccp-demo) exec ./scripts/demo-libccp.sh "$@" ;;
    dpdk-demo) exec ./scripts/demo-dpdk.sh "$@" ;;
esac
