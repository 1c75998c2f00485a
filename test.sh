#!/usr/bin/env bash
# The test command: installs what is needed, builds everything, runs every test.
# Tests that need root (network namespaces, netlink) run when this runs as root, and say
# loudly why they are skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
# The Python with Ray that `ccp-sim sweep --executor ray` and its test (sim/tests/sweep_ray.rs, which
# starts a two-node Ray cluster on the loopback) use.
CCP_SIM_PYTHON="$(./scripts/ray-venv.sh | tail -n 1)"
export CCP_SIM_PYTHON
# The kernel developers' BPF DCTCP (bpf_dctcp.c) for the DCTCP parity test (lab/tests/parity.rs):
# from ../shared/anchors, a kernel tree at KERNEL_SRC, or Debian's linux-source package.
if CCP_BPF_DCTCP_DIR="$(./scripts/bpf-dctcp-source.sh)"; then
    export CCP_BPF_DCTCP_DIR
else
    echo "test.sh: no bpf_dctcp.c found; the DCTCP parity test will say it skipped" >&2
    unset CCP_BPF_DCTCP_DIR
fi
# Incremental caches roughly double the target directory and a clean run never reuses them.
export CARGO_INCREMENTAL=0
df -h . | sed 's/^/test.sh: disk: /'
cargo build --workspace --all-targets --locked
# --no-fail-fast: one run reports every failing test target, not only the first. Each failing
# test then runs once more, alone; the run passes only if each passes then, and those are printed
# as FLAKY by name (scripts/rerun-failed-tests.py: why, and when it refuses to rerun).
test_log="$(mktemp)"
if ! cargo test --workspace --locked --no-fail-fast -- --test-threads=2 2>&1 | tee "$test_log"; then
    ./scripts/rerun-failed-tests.py "$test_log"
fi
rm -f "$test_log"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The ccp_agent Python package (maturin wheel) and its pytest suite.
./scripts/python-package.sh
