#!/usr/bin/env bash
# The main job. Installs what is needed, builds, and runs:
#   ./run.sh [demo [ALGORITHM] [SECONDS]]   the self-contained demo (default)
#   ./run.sh agent [ARGS...]                the agent alone: `ccp-agent run ARGS`
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
cargo build --release --locked -p ccp-agent -p ccp-test-datapath
cmd=${1:-demo}
[ $# -gt 0 ] && shift
case "$cmd" in
    demo) exec ./scripts/demo-libccp.sh "$@" ;;
    agent) exec "${CARGO_TARGET_DIR:-target}/release/ccp-agent" run "$@" ;;
    *) echo "usage: ./run.sh [demo [ALGORITHM] [SECONDS] | agent [ARGS...]]" >&2; exit 2 ;;
esac
