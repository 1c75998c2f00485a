#!/usr/bin/env bash
# Builds the independent implementations the parity experiments run beside ours (issue 31 item 4):
# `nimbus` from the Nimbus paper authors' ccp-nimbus (portus 0.8) and `bbr` from the CCP authors'
# ccp-bbr (portus 0.6), into a cache outside the clone, as setup.sh does for generic_cong_avoid.
# Their code is never copied into the project: it is built from a path.
#
#   scripts/anchors.sh            # idempotent: rebuilds an anchor only when its source changed
#
# CCP_ANCHORS_DIR   where the anchors are (default: ../shared/anchors beside the repository)
# CCP_ANCHORS_CACHE the cache (default: ~/.cache/ccp-agent/anchors); binaries go to its bin/,
#                   which is where ccp-lab's `portus:` schemes look by default
#
# The anchors folder stays unmodified: each anchor is copied to a temporary build directory and
# built there with `cargo build --release --locked`. ccp-bbr ships a Cargo.lock; ccp-nimbus does
# not, so the first build generates one in the build directory and keeps it in the cache
# (locks/ccp-nimbus.Cargo.lock), and later builds reuse it: the versions are fixed from then on.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
ANCHORS_DIR="${CCP_ANCHORS_DIR:-$repo/../shared/anchors}"
CACHE="${CCP_ANCHORS_CACHE:-$HOME/.cache/ccp-agent/anchors}"

if [ ! -d "$ANCHORS_DIR" ]; then
    echo "anchors: no anchors directory at $ANCHORS_DIR: set CCP_ANCHORS_DIR to the folder holding" \
        "ccp-nimbus/ and ccp-bbr/ (copies of github.com/ccp-project/nimbus and .../bbr)" >&2
    exit 1
fi
ANCHORS_DIR=$(cd "$ANCHORS_DIR" && pwd)
mkdir -p "$CACHE/bin" "$CACHE/locks" "$CACHE/stamps"

# A digest of an anchor's source tree, so a changed anchor is rebuilt.
digest() {
    (cd "$1" && find . -type f -not -path './target/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# build FOLDER BINARY: the anchor's binary into $CACHE/bin unless already built from this source.
build() {
    local folder=$1 bin=$2
    local src="$ANCHORS_DIR/$folder"
    if [ ! -f "$src/Cargo.toml" ]; then
        echo "anchors: $src/Cargo.toml is missing: $ANCHORS_DIR has no $folder anchor" >&2
        exit 1
    fi
    local sum stamp="$CACHE/stamps/$folder"
    sum=$(digest "$src")
    if [ -x "$CACHE/bin/$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
        return
    fi
    echo "anchors: building $bin from $src into $CACHE/bin"
    local t0 build_dir
    t0=$(date +%s)
    build_dir=$(mktemp -d)
    # shellcheck disable=SC2064 # expand now: the directory of this build
    trap "rm -rf '$build_dir'" RETURN
    cp -r "$src" "$build_dir/src"
    chmod -R u+w "$build_dir/src"     # the anchors may be read-only; the copy gets a lock file
    rm -rf "$build_dir/src/target"
    if [ ! -f "$build_dir/src/Cargo.lock" ]; then
        if [ -f "$CACHE/locks/$folder.Cargo.lock" ]; then
            cp "$CACHE/locks/$folder.Cargo.lock" "$build_dir/src/Cargo.lock"
        else
            (cd "$build_dir/src" && cargo generate-lockfile --quiet)
            cp "$build_dir/src/Cargo.lock" "$CACHE/locks/$folder.Cargo.lock"
            echo "anchors: $folder has no Cargo.lock; generated one, kept as $CACHE/locks/$folder.Cargo.lock"
        fi
    fi
    # Its own target directory and no workspace: the project's lock file and settings do not apply.
    (cd "$build_dir/src" && CARGO_TARGET_DIR="$build_dir/target" cargo build --release --locked --quiet --bin "$bin")
    install -m 0755 "$build_dir/target/release/$bin" "$CACHE/bin/$bin"
    echo "$sum" >"$stamp"
    echo "anchors: $bin built in $(($(date +%s) - t0)) s"
}

build ccp-nimbus nimbus
build ccp-bbr bbr
