#!/usr/bin/env bash
# Builds the HPCC authors' ns-3 simulator (github.com/alibaba-edu/High-Precision-Congestion-Control,
# directory simulation/: ns-3.17 plus their RDMA NIC, PFC, switch MMU, HPCC/DCQCN/TIMELY/DCTCP code)
# into one binary, OUT_DIR/hpcc-third, which is the artifact's scratch/third.cc: an independent
# reference implementation of HPCC and DCQCN to compare ours against.
#   scripts/hpcc-artifact/build.sh SRC_DIR OUT_DIR
# SRC_DIR is the artifact's simulation/ directory as cloned; it is only read. Running the binary:
#   cd EXP_DIR && OUT_DIR/hpcc-third config.txt     (file names in config.txt are relative to the cwd)
#
# Why no waf: the artifact ships waf 1.7 build scripts that need python2 (print statements,
# `except X, e`), and its README asks for gcc-5; Debian 12 has neither. This script does what
# `./waf configure && ./waf build` would do for the modules third.cc needs, with make and g++ 12:
#   1. reads the modules' dependencies and source/header lists from the artifact's own
#      src/<module>/wscript files, plus the platform-conditional sources waf adds on Linux;
#   2. lays out OUT_DIR/include/ns3/ like waf's build/ns3/: the public headers (symlinks into
#      SRC_DIR), the generated <module>-module.h aggregators, and the configure-generated
#      core-config.h and config-store-config.h;
#   3. writes OUT_DIR/Makefile (one object per .cc under OUT_DIR/obj, header dependencies via -MMD,
#      so rebuilds are incremental) and runs it with at most 2 jobs, the compiler under nice -n 10.
# No source edits are needed: with the flags below, Debian 12's g++ 12.2 compiles these 10 modules and
# third.cc unchanged (SRC_DIR is never copied or modified). Flags mirror waf's default profile, which
# is what the README's `./waf configure` gives: -O2 -std=gnu++11, without NS3_ASSERT_ENABLE and
# NS3_LOG_ENABLE (those are waf's "debug" profile). EXTRA_CXXFLAGS is appended to the flags, e.g.
# -DNS3_ASSERT_ENABLE for the debug profile's NS_ASSERTs (builds and runs; use another OUT_DIR).
# -DNS3_LOG_ENABLE does not compile with g++ 12 (ambiguous operator<< on pointers in core's
# NS_LOG_FUNCTION) and is not supported. JOBS=1 builds serially.
set -euo pipefail

die() { echo "hpcc-artifact/build.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_DIR  (SRC_DIR = the artifact's simulation/ directory)"
SRC=$(cd "$1" 2>/dev/null && pwd) || die "SRC_DIR '$1' is not a directory"
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
[ "$OUT" != "$SRC" ] && [ "${OUT#"$SRC"/}" = "$OUT" ] || die "OUT_DIR must be outside SRC_DIR"

# --- Is SRC_DIR the artifact? ---------------------------------------------------------------------
for f in scratch/third.cc src/wscript src/core/wscript src/internet/model/rdma.h \
         src/point-to-point/model/rdma-hw.cc src/point-to-point/model/switch-mmu.cc \
         src/point-to-point/model/qbb-net-device.cc src/network/utils/int-header.h \
         src/applications/model/rdma-client.cc; do
    [ -f "$SRC/$f" ] || die "'$SRC' does not look like the HPCC artifact's simulation/ directory" \
        "(no $f); pass the simulation/ directory of alibaba-edu/High-Precision-Congestion-Control"
done

# --- Modules: the closure of what third.cc includes, over the wscripts' dependency lists ---------
# third.cc includes core-module.h, network's packet.h and error-model.h, internet-module.h and rdma.h,
# point-to-point's qbb-helper.h, switch-node.h, rdma-driver.h, sim-setting.h, applications-module.h.
ROOTS=(core network internet point-to-point applications)

wscript_of() { echo "$SRC/src/$1/wscript"; }
# The variable the module is bound to, e.g. `obj = bld.create_ns3_module('internet', [...])`.
module_var() { sed -n "s/^ *\([A-Za-z_]*\) *= *bld\.create_ns3_module('$1'.*/\1/p" "$(wscript_of "$1")"; }
module_deps() {
    sed -n "s/.*bld\.create_ns3_module('$1' *, *\[\(.*\)\]).*/\1/p" "$(wscript_of "$1")" | tr -d "' " | tr ',' '\n'
}
# The quoted entries of the `VAR.source = [ ... ]` list in a wscript, skipping commented-out lines.
wscript_list() {
    awk -v var="$2" '
        $0 ~ "^[ \t]*" var "\\.source[ \t]*=[ \t]*\\[" { inlist = 1; next }
        inlist && /^[ \t]*\]/ { exit }
        inlist && !/^[ \t]*#/ { while (match($0, /'\''[^'\'']*'\''/)) {
                                    print substr($0, RSTART + 1, RLENGTH - 2); $0 = substr($0, RSTART + RLENGTH) } }
    ' "$(wscript_of "$1")"
}

MODULES=()
declare -A SEEN=()
visit() {
    local m=$1 d
    [ -n "${SEEN[$m]:-}" ] && return
    SEEN[$m]=1
    [ -f "$(wscript_of "$m")" ] || die "module '$m' has no wscript in $SRC/src"
    [ -n "$(module_var "$m")" ] || die "no create_ns3_module('$m') in $(wscript_of "$m")"
    for d in $(module_deps "$m"); do visit "$d"; done
    MODULES+=("$m")      # post-order: dependencies first
}
for m in "${ROOTS[@]}"; do visit "$m"; done
echo "modules: ${MODULES[*]}"

# Sources and public headers per module, as waf selects them on Linux x86_64 with g++ and neither
# GTK, libxml2, MPI, NSC nor GSL (all optional, none used by third.cc); pthread and librt present.
declare -A SOURCES=() HEADERS=()
for m in "${MODULES[@]}"; do
    SOURCES[$m]=$(wscript_list "$m" "$(module_var "$m")")
    HEADERS[$m]=$(wscript_list "$m" headers)
    [ -n "${SOURCES[$m]}" ] || die "no sources parsed from $(wscript_of "$m")"
done
# core/wscript's conditional parts: not win32 -> unix wall clock; __uint128_t -> INT64X64_USE_128;
# pthread.h -> ENABLE_THREADING; librt and threading -> ENABLE_REAL_TIME.
SOURCES[core]+=$'\nmodel/unix-system-wall-clock-ms.cc\nmodel/int64x64-128.cc'
SOURCES[core]+=$'\nmodel/realtime-simulator-impl.cc\nmodel/wall-clock-synchronizer.cc'
SOURCES[core]+=$'\nmodel/system-thread.cc\nmodel/unix-fd-reader.cc\nmodel/unix-system-mutex.cc\nmodel/unix-system-condition.cc'
HEADERS[core]+=$'\nmodel/int64x64-128.h\nmodel/realtime-simulator-impl.h\nmodel/wall-clock-synchronizer.h'
HEADERS[core]+=$'\nmodel/unix-fd-reader.h\nmodel/system-mutex.h\nmodel/system-thread.h\nmodel/system-condition.h'

# Generated files are written only when their content changes, so make's mtimes stay meaningful.
put() {   # put FILE: stdin -> FILE, unless FILE already holds exactly that
    local tmp; tmp=$(mktemp "$1.XXXX")
    cat > "$tmp"
    if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

# --- Include tree: OUT_DIR/include/ns3 ------------------------------------------------------------
INC="$OUT/include/ns3"
mkdir -p "$INC"
declare -A WANT=()
for m in "${MODULES[@]}"; do
    while read -r h; do
        [ -n "$h" ] || continue
        [ -f "$SRC/src/$m/$h" ] || die "header $m/$h, listed in $m's wscript, is missing"
        b=$(basename "$h"); WANT[$b]=1
        [ "$(readlink "$INC/$b" 2>/dev/null)" = "$SRC/src/$m/$h" ] || ln -sfn "$SRC/src/$m/$h" "$INC/$b"
    done <<< "${HEADERS[$m]}"
    # As waf's gen_ns3_module_header task writes it: the module's public headers, sorted.
    WANT[$m-module.h]=1
    {
        printf '\n#ifdef NS3_MODULE_COMPILATION\n'
        printf '# error "Do not include ns3 module aggregator headers from other modules; these are meant only for end user scripts."\n'
        printf '#endif\n\n#ifndef NS3_MODULE_%s\n    \n\n// Module headers:\n' "$(echo "$m" | tr 'a-z-' 'A-Z_')"
        grep -v '^$' <<< "${HEADERS[$m]}" | xargs -n1 basename | LC_ALL=C sort | sed 's/.*/#include "&"/'
        printf '#endif\n'
    } | put "$INC/$m-module.h"
done
# What core/wscript's configure checks define on Debian 12 x86_64: __uint128_t but no uint128_t,
# hence INT64X64_USE_128; no sys/inttypes.h; the rest present.
WANT[core-config.h]=1
put "$INC/core-config.h" <<'EOF'
/* As waf's configure (src/core/wscript) writes it on Linux x86_64 with glibc; by build.sh. */
#ifndef _CORE_CONFIG_H_WAF
#define _CORE_CONFIG_H_WAF

#define HAVE___UINT128_T 1
#define INT64X64_USE_128 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_DIRENT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_GETENV 1
#define HAVE_SIGNAL_H 1
#define HAVE_PTHREAD_H 1
#define HAVE_RT 1

#endif /* _CORE_CONFIG_H_WAF */
EOF
# src/config-store/wscript: without GTK and libxml2 its configure header defines nothing.
WANT[config-store-config.h]=1
put "$INC/config-store-config.h" <<'EOF'
/* As waf's configure (src/config-store/wscript) writes it without GTK and libxml2; by build.sh. */
#ifndef _CONFIG_STORE_CONFIG_H_WAF
#define _CONFIG_STORE_CONFIG_H_WAF

#endif /* _CONFIG_STORE_CONFIG_H_WAF */
EOF
for f in "$INC"/*; do [ -n "${WANT[$(basename "$f")]:-}" ] || rm -f "$f"; done

# --- Makefile -------------------------------------------------------------------------------------
# Flags as waf's default profile gives them for g++: -O2 (cflags.py), -std=gnu++11 (cflags.py),
# -fstrict-aliasing (top wscript), -pthread (core's PTHREAD use), NS3_MODULE_COMPILATION for module
# sources. -w only silences warnings (mostly std::unary_function deprecations from the 2013 code).
# flags.txt changes only when the flags do, and every object depends on it.
printf '%s\n' "-O2 -std=gnu++11 -fstrict-aliasing -pthread -w ${EXTRA_CXXFLAGS:-}" | put "$OUT/flags.txt"
{
    echo "# Generated by scripts/hpcc-artifact/build.sh for $SRC; do not edit."
    echo "CXX := nice -n 10 g++"
    echo "CXXFLAGS := \$(shell cat flags.txt)"
    echo "CPPFLAGS := -I$OUT/include"
    echo "LDLIBS := -pthread -lrt"
    echo ".DEFAULT_GOAL := hpcc-third"
    objs=()
    for m in "${MODULES[@]}"; do
        while read -r s; do
            [ -n "$s" ] || continue
            o="obj/$m/${s%.cc}.o"
            objs+=("$o")
            echo "$o: $SRC/src/$m/$s flags.txt"
            printf '\t@mkdir -p $(@D)\n\t$(CXX) $(CXXFLAGS) $(CPPFLAGS) -DNS3_MODULE_COMPILATION -MMD -MP -c $< -o $@\n'
        done <<< "${SOURCES[$m]}"
    done
    objs+=("obj/scratch/third.o")
    echo "obj/scratch/third.o: $SRC/scratch/third.cc flags.txt"
    printf '\t@mkdir -p $(@D)\n\t$(CXX) $(CXXFLAGS) $(CPPFLAGS) -MMD -MP -c $< -o $@\n'
    echo "OBJS := ${objs[*]}"
    # Objects are linked directly, not through archives, so every module's static initialisers
    # (TypeId and GlobalValue registrations) are kept, as with waf's shared libraries.
    echo "hpcc-third: \$(OBJS)"
    printf '\t$(CXX) $(CXXFLAGS) -o $@ $(OBJS) $(LDLIBS)\n'
    echo "-include \$(OBJS:.o=.d)"
} | put "$OUT/Makefile"

JOBS=${JOBS:-2}
[ "$JOBS" = 1 ] || JOBS=2
echo "building $OUT/hpcc-third: make -j$JOBS, g++ under nice -n 10"
make -C "$OUT" -j"$JOBS" --no-print-directory hpcc-third
echo "built $OUT/hpcc-third"
