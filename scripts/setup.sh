#!/usr/bin/env bash
# Installs everything ccp-agent needs to build and test on Debian 12, idempotently.
# Called by ./run.sh and ./test.sh; safe to run by hand.
set -euo pipefail

APT_PACKAGES=(
    clang llvm libclang-dev          # libccp's bindgen (test datapath); the BPF datapath's objects
    libelf-dev zlib1g-dev pkg-config make gcc
    libbpf-dev                       # libbpf's headers for BPF sources built at run time (ccp-lab's
                                     # bpf: anchors, e.g. the kernel's bpf_dctcp.c)
    bpftool                          # vmlinux.h from the running kernel's BTF (ccp-ebpf's build)
    iproute2 iperf3 ethtool          # network tests (ethtool: veth offloads off for DPDK's vdevs)
    libdpdk-dev dpdk                 # the DPDK datapath (ccp-dpdk): DPDK 22.11 with net_af_xdp/net_af_packet
    fonts-dejavu-core                # label font for ccp-router's PNG plots (demo)
    python3-dev python3-venv         # Python algorithms: libpython for the agent (pyo3), the wheel's venv
    chromium                         # ccp-lab's report test opens the HTML report in headless Chromium
    systemd libseccomp-dev           # the unit's SystemCallFilter: systemd-analyze expands its groups,
                                     # libseccomp loads it for the e2e tests (tests/src/syscall_filter.rs)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Rust: the workspace needs 1.85 or newer.
if ! command -v cargo >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
        rustup toolchain install stable --profile minimal
    else
        echo "setup: no Rust toolchain found; install rustup (https://rustup.rs) and re-run" >&2
        exit 1
    fi
fi
ver=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n' 1.85.0 "$ver" | sort -V | head -n1)" != 1.85.0 ]; then
    echo "setup: rustc $ver is too old; updating stable" >&2
    rustup update stable
fi
if ! cargo clippy --version >/dev/null 2>&1; then
    rustup component add clippy
fi

# The CCP project's reference algorithms for the portus end-to-end test (tests/e2e/portus.rs):
# generic_cong_avoid 0.4.0's `reno` and `cubic` (portus 0.7), pinned with the crate's own lock
# file, built once into a cache outside the clone. CCP_PORTUS_ROOT moves it; the test finds it
# there (or through CCP_PORTUS_BIN_DIR).
PORTUS_ROOT="${CCP_PORTUS_ROOT:-$HOME/.cache/ccp-agent/portus}"
if ! grep -qs '"generic_cong_avoid 0.4.0 ' "$PORTUS_ROOT/.crates2.json" \
    || [ ! -x "$PORTUS_ROOT/bin/reno" ] || [ ! -x "$PORTUS_ROOT/bin/cubic" ]; then
    echo "setup: building generic_cong_avoid 0.4.0 (portus reno/cubic) into $PORTUS_ROOT"
    t0=$(date +%s)
    # Its own target directory: never the workspace's, whose lock file does not apply.
    build_dir=$(mktemp -d)
    CARGO_TARGET_DIR="$build_dir" cargo install --locked --quiet generic_cong_avoid --version =0.4.0 \
        --features bin --root "$PORTUS_ROOT"
    rm -rf "$build_dir"
    echo "setup: generic_cong_avoid built in $(($(date +%s) - t0)) s"
fi

# The independent implementations the parity experiments run beside ours (issue 31: the Nimbus
# authors' nimbus, the CCP authors' bbr), built from ../shared/anchors (CCP_ANCHORS_DIR) into
# ~/.cache/ccp-agent/anchors (CCP_ANCHORS_CACHE) — only where that folder exists: a clean clone,
# as in CI, has none, and the tests that need them then skip, saying so. A failed build does not
# fail the setup.
ANCHORS_DIR="${CCP_ANCHORS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/../shared/anchors}"
if [ -d "$ANCHORS_DIR" ]; then
    CCP_ANCHORS_DIR="$ANCHORS_DIR" "$(dirname "$0")/anchors.sh" \
        || echo "setup: building the anchors failed; the parity experiments' portus schemes cannot run" >&2
fi
