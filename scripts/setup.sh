#!/usr/bin/env bash
# Installs everything ccp-agent needs to build and test on Debian 12, idempotently.
# Called by ./run.sh and ./test.sh; safe to run by hand.
set -euo pipefail

APT_PACKAGES=(
    clang llvm libclang-dev          # libccp's bindgen (test datapath); the BPF datapath's objects
    libelf-dev zlib1g-dev pkg-config make gcc
    bpftool                          # vmlinux.h from the running kernel's BTF (ccp-ebpf's build)
    iproute2 iperf3                  # network tests
    fonts-dejavu-core                # label font for ccp-router's PNG plots (demo)
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
