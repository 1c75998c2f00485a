#!/usr/bin/env bash
# Fuzz the libccp wire decoder: ./run.sh [SECONDS] [LIBFUZZER OPTIONS...]  (default 60 s; 0: no
# time limit, e.g. ./run.sh 0 -runs=10000000 for 10^7 inputs). The corpus (corpus/decode) is
# kept between runs, so a long run can go in pieces.
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz --version 0.13.2 --locked).
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
mkdir -p corpus/decode
cp -n seeds/* corpus/decode/ 2>/dev/null || true
exec cargo +nightly fuzz run decode corpus/decode -- -max_total_time="$secs" -max_len=9000 "${@:2}"
