#!/usr/bin/env bash
# Prints a directory holding the Linux kernel's BPF DCTCP (bpf_dctcp.c and bpf_tcp_helpers.h, the
# kernel tree's tools/testing/selftests/bpf/ selftest, GPL-2.0), for the DCTCP parity experiment
# and test (configs/experiments/parity-dctcp.toml, lab/tests/parity.rs). Never copied into the
# project: taken, in this order, from
#   1. $CCP_BPF_DCTCP_DIR;
#   2. a kernel tree at $KERNEL_SRC (its selftest files, copied flat into the cache);
#   3. ../shared/anchors/linux-bpf beside the repository (the copy the project's machines carry);
#   4. Debian's linux-source-6.1 package (the distribution's kernel tree), downloaded with apt and
#      the two files extracted into ~/.cache/ccp-agent/anchors/linux-bpf-debian (CCP_ANCHORS_CACHE
#      moves the cache), once.
# Exits 1 with a message on stderr when none works.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache="${CCP_ANCHORS_CACHE:-$HOME/.cache/ccp-agent/anchors}"
have() { [ -f "$1/bpf_dctcp.c" ] && [ -f "$1/bpf_tcp_helpers.h" ]; }

if [ -n "${CCP_BPF_DCTCP_DIR:-}" ]; then
    have "$CCP_BPF_DCTCP_DIR" || { echo "bpf-dctcp-source: CCP_BPF_DCTCP_DIR=$CCP_BPF_DCTCP_DIR has no bpf_dctcp.c and bpf_tcp_helpers.h" >&2; exit 1; }
    echo "$CCP_BPF_DCTCP_DIR"; exit 0
fi
if [ -n "${KERNEL_SRC:-}" ]; then
    s="$KERNEL_SRC/tools/testing/selftests/bpf"
    [ -f "$s/progs/bpf_dctcp.c" ] || { echo "bpf-dctcp-source: $s/progs/bpf_dctcp.c not found in KERNEL_SRC" >&2; exit 1; }
    out="$cache/linux-bpf-kernel-src"
    mkdir -p "$out" && cp "$s/progs/bpf_dctcp.c" "$s/bpf_tcp_helpers.h" "$out/"
    echo "$out"; exit 0
fi
if have "$repo/../shared/anchors/linux-bpf"; then
    (cd "$repo/../shared/anchors/linux-bpf" && pwd); exit 0
fi
out="$cache/linux-bpf-debian"
if have "$out"; then echo "$out"; exit 0; fi
command -v apt-get >/dev/null || { echo "bpf-dctcp-source: no source found and no apt-get to fetch Debian's linux-source" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkg=linux-source-6.1
(cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>&1) || {
    echo "bpf-dctcp-source: apt-get download $pkg failed (no source at CCP_BPF_DCTCP_DIR, KERNEL_SRC or ../shared/anchors either)" >&2
    exit 1
}
chmod 0755 "$tmp"
dpkg-deb --fsys-tarfile "$tmp"/"$pkg"_*.deb | tar -x -O --wildcards '*/linux-source-*.tar.xz' | xz -dc \
    | tar -x -C "$tmp" --wildcards '*/tools/testing/selftests/bpf/progs/bpf_dctcp.c' '*/tools/testing/selftests/bpf/bpf_tcp_helpers.h'
mkdir -p "$out"
cp "$tmp"/linux-source-*/tools/testing/selftests/bpf/progs/bpf_dctcp.c "$tmp"/linux-source-*/tools/testing/selftests/bpf/bpf_tcp_helpers.h "$out/"
echo "$out"
