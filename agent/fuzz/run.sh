#!/usr/bin/env bash
# Fuzz the agent's parsers: ./run.sh [TARGET|all] [RUNS]   (default: all targets, 10^7 inputs each)
#
# Targets: config (the TOML configuration), control (control-socket JSON lines), ringbuf (eBPF
# ring-buffer records), netlink (ccp-kernel datagrams through the libccp adapter), cnm (CNM
# datagrams), python_action (what a Python algorithm returns, through the host into Action). They
# run one after the other, at the lowest CPU priority; each starts from its seeds (seeds/TARGET)
# plus what earlier runs kept in corpus/TARGET, and a crash stops the script with the input saved
# under artifacts/TARGET/ (rerun it: cargo +nightly fuzz run -a TARGET FILE).
#
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz --version 0.13.2 --locked).
# On a shared machine, CARGO_BUILD_JOBS=1 ./run.sh keeps the first build to one core.
set -euo pipefail
cd "$(dirname "$0")"
targets=(config control ringbuf netlink cnm python_action)
which="${1:-all}"
runs="${2:-10000000}"
if [[ "$which" == all ]]; then
    selected=("${targets[@]}")
elif [[ " ${targets[*]} " == *" $which "* ]]; then
    selected=("$which")
else
    echo "unknown target $which (one of: ${targets[*]}, all)" >&2
    exit 2
fi
for t in "${selected[@]}"; do
    # Inputs long enough for the largest seed and a bit more; a CNM is at most 96 bytes (256 read).
    case "$t" in
        config) opts=(-max_len=16384 -dict=seeds/config.dict) ;;
        control) opts=(-max_len=8192 -dict=seeds/control.dict) ;;
        ringbuf) opts=(-max_len=512) ;;
        netlink) opts=(-max_len=4096) ;;
        cnm) opts=(-max_len=512) ;;
        python_action) opts=(-max_len=4096) ;;
    esac
    mkdir -p "corpus/$t"
    cp -n "seeds/$t"/* "corpus/$t/" 2>/dev/null || true
    echo "== $t: $runs inputs" >&2
    start=$SECONDS
    nice -n 19 cargo +nightly fuzz run -a "$t" "corpus/$t" -- -runs="$runs" -print_final_stats=1 "${opts[@]}"
    echo "== $t: done in $((SECONDS - start)) s" >&2
done
