#!/usr/bin/env bash
# run_qemu_tests.sh - run the Hexagon tests under qemu-hexagon (linux-user 7.2 or 10).
#
#   1. host check of the freestanding runtime's arithmetic (division helpers,
#      __hexagon_divdf3, float math) against the host's division and libm
#   2. the qemu image (v67 + HVX-128B): HVX integer kernels vs C references,
#      bit for bit, the hexfuse core on the coop platform, and the FastRPC
#      skeleton dispatcher called in a loopback (test_rpc_skel.elf: the same
#      remote_arg marshalling as FastRPC, no FastRPC transport); a probe that a
#      packet's slot-0 load sees its slot-1 store (an expected failure on 7.2)
#   3. the v68 and v73 images, integer parts: qemu >= 10 runs them as they are
#      (-cpu v68 / v73); qemu-hexagon 7.2 accepts ELF files up to v67 only, so
#      there a copy of each image gets its e_flags set to v67 and runs with
#      --int-only (same integer HVX code, v68/v73 codegen)
#   4. the v68+ float kernels: compiled, not run. A probe runs the float part of
#      the v68/v73 image (as in 3.) and shows qemu failing to decode it; if a
#      future qemu runs it, its results are counted instead.
#
# Builds the images first (dsp/scripts/build_hexagon.sh) when they are missing.
# Exit status non-zero on any mismatch; the last line is "N passed, N failed".
# Usage: dsp/scripts/run_qemu_tests.sh [BUILD_ROOT]   (default: <repo>/build)
set -uo pipefail

DSP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_DIR="$(cd "$DSP_DIR/.." && pwd)"
BUILD_ROOT="${1:-$REPO_DIR/build}"
QEMU="${QEMU_HEXAGON:-qemu-hexagon}"
TIMEOUT=300

passed=0
failed=0

if ! command -v "$QEMU" >/dev/null 2>&1; then
    echo "run_qemu_tests: $QEMU not found (Debian: apt-get install -y qemu-user)" >&2
    echo "0 passed, 1 failed"
    exit 2
fi

QEMU_VERSION=$("$QEMU" --version | sed -nE '1s/.*version ([0-9]+\.[0-9]+).*/\1/p')
# the CPU models this qemu knows ("-cpu help": v66 ... v73 on qemu 10; nothing on 7.2)
QEMU_CPUS=" $("$QEMU" -cpu help 2>/dev/null | awk '/^ +v[0-9]+$/ {print $1}' | tr '\n' ' ')"

need_build=0
for f in hexagon-qemu/test_hvx_kernels.elf hexagon-qemu/test_scheduler.elf hexagon-qemu/test_rpc_skel.elf \
         hexagon-qemu/probe_mem_noshuf.elf \
         hexagon-qemu/test_qeltwise.elf hexagon-v73/test_qeltwise.elf \
         hexagon-v68/test_hvx_kernels.elf hexagon-v73/test_hvx_kernels.elf; do
    [ -e "$BUILD_ROOT/$f" ] || need_build=1
done
if [ $need_build = 1 ]; then
    echo "== images missing: running build_hexagon.sh"
    "$DSP_DIR/scripts/build_hexagon.sh" "$BUILD_ROOT" || { echo "0 passed, 1 failed"; exit 1; }
fi
BUILD_ROOT="$(cd "$BUILD_ROOT" && pwd)"
WORK="$BUILD_ROOT/qemu-tests"
mkdir -p "$WORK"

# count "RESULT <name> passed=P failed=F" of one log; a run without it failed
collect() { # label log status
    local label=$1 log=$2 status=$3 line p f
    line=$(grep -E '^RESULT .* passed=[0-9]+ failed=[0-9]+' "$log" | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL $label: no RESULT line (exit status $status); last output:"
        tail -5 "$log" | sed 's/^/    /'
        failed=$((failed + 1))
        return
    fi
    p=$(sed -E 's/.*passed=([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*failed=([0-9]+).*/\1/' <<<"$line")
    if [ "$status" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p))
    failed=$((failed + f))
    printf '%-58s %5d passed, %d failed\n' "$label" "$p" "$f"
}

run_qemu() { # label log elf args...
    local label=$1 log=$2 status
    shift 2
    # in a subshell, so that the shell's own "Segmentation fault" notice of a
    # crashing qemu lands in the log and not on our output
    (timeout "$TIMEOUT" "$QEMU" "$@"; exit $?) >"$log" 2>&1
    status=$?
    grep -E '^(FAIL|ok  ) ' "$log" | sed 's/^/    /'
    grep -E '^     ' "$log" | sed 's/^ */    | /'
    collect "$label" "$log" "$status"
}

# copy of a Hexagon ELF with e_flags (offset 36) set to v67 (0x67)
relabel_v67() { # src dst
    cp "$1" "$2" && chmod +x "$2" &&
        printf '\x67\x00\x00\x00' | dd of="$2" bs=1 seek=36 count=4 conv=notrunc status=none
}

t0=$(date +%s)

echo "== 1. host check of the freestanding runtime arithmetic (dsp/hexagon/rt)"
HOSTCC="${HOSTCC:-clang-19}"
command -v "$HOSTCC" >/dev/null 2>&1 || HOSTCC=cc
if "$HOSTCC" -O2 -std=c11 -D_GNU_SOURCE -DHX_RT_PREFIX -Wall -Wextra -Werror -fno-builtin -ffp-contract=off \
    "$DSP_DIR/tests/qemu/check_rt_host.c" "$DSP_DIR/hexagon/rt/builtins.c" "$DSP_DIR/hexagon/rt/math_min.c" \
    -lm -o "$WORK/check_rt_host" >"$WORK/check_rt_host.build.log" 2>&1; then
    "$WORK/check_rt_host" >"$WORK/check_rt_host.log" 2>&1
    st=$?
    grep -E '^(FAIL|  )' "$WORK/check_rt_host.log" | sed 's/^ */    /'
    collect "host: rt division + math vs host libm" "$WORK/check_rt_host.log" $st
else
    cat "$WORK/check_rt_host.build.log"
    echo "FAIL host: check_rt_host did not build"
    failed=$((failed + 1))
fi

echo "== 2. qemu-hexagon: v67 + HVX-128B image"
Q="$BUILD_ROOT/hexagon-qemu"
run_qemu "qemu v67: HVX integer kernels vs C references" "$WORK/qemu_kernels.log" "$Q/test_hvx_kernels.elf"
run_qemu "qemu v67: hexfuse core, coop platform (scheduler)" "$WORK/qemu_scheduler.log" "$Q/test_scheduler.elf"
run_qemu "qemu v67: FastRPC skeleton dispatcher, loopback" "$WORK/qemu_rpc_skel.log" "$Q/test_rpc_skel.elf"
run_qemu "qemu v67: QAdd/QMul/QLut vs ref_qeltwise.h" "$WORK/qemu_qeltwise.log" "$Q/test_qeltwise.elf"
# qemu 7.2 drops a slot-1 store its slot-0 load must see (dsp/HEXAGON.md, "qemu 7.2 and 10"):
# an expected failure there, counted on any other version
if [ "${QEMU_VERSION%%.*}" = 7 ]; then
    log="$WORK/qemu_mem_noshuf.log"
    (timeout "$TIMEOUT" "$QEMU" "$Q/probe_mem_noshuf.elf"; exit $?) >"$log" 2>&1
    if grep -qx 'RESULT probe_mem_noshuf passed=1 failed=1' "$log"; then
        echo "KNOWN qemu $QEMU_VERSION bug: a slot-0 load misses its packet's slot-1 store after a predicated-off slot 1"
    else
        collect "qemu v67: slot-0 load sees its packet's slot-1 store" "$log" 0
    fi
else
    run_qemu "qemu v67: slot-0 load sees its packet's slot-1 store" "$WORK/qemu_mem_noshuf.log" "$Q/probe_mem_noshuf.elf"
fi

# the image of arch v to run: as built with -cpu v when this qemu knows v, else a copy relabelled v67
image_for() { # v name -> prints the qemu arguments before the image's own
    local v=$1 name=$2
    if [[ "$QEMU_CPUS" == *" $v "* ]]; then
        echo "-cpu $v $BUILD_ROOT/hexagon-$v/$name.elf"
    else
        relabel_v67 "$BUILD_ROOT/hexagon-$v/$name.elf" "$WORK/${name}_$v.elf" && echo "$WORK/${name}_$v.elf"
    fi
}
for v in v68 v73; do
    if [[ "$QEMU_CPUS" == *" $v "* ]]; then how="run as built, -cpu $v"; else how="copies relabelled v67"; fi
    echo "== 3. qemu-hexagon $QEMU_VERSION: $v images, integer parts ($how)"
    # shellcheck disable=SC2046  # image_for gives whitespace-free words
    run_qemu "qemu $v code: HVX integer kernels (--int-only)" "$WORK/${v}_kernels.log" \
        $(image_for "$v" test_hvx_kernels) --int-only
    run_qemu "qemu $v code: hexfuse core, coop platform" "$WORK/${v}_scheduler.log" $(image_for "$v" test_scheduler)
    run_qemu "qemu $v code: FastRPC skeleton dispatcher, loopback" "$WORK/${v}_rpc_skel.log" \
        $(image_for "$v" test_rpc_skel)
    run_qemu "qemu $v code: QAdd/QMul/QLut vs ref_qeltwise.h" "$WORK/${v}_qeltwise.log" $(image_for "$v" test_qeltwise)
done

echo "== 4. v68+ HVX float kernels (qf32/qf16)"
for v in v68 v73; do
    syms=$(llvm-nm-19 "$BUILD_ROOT/hexagon-$v/libhexfuse_hvx.a" 2>/dev/null |
        awk '$2 == "T" && $3 ~ /^hvx_(add_f32|mul_f32|matmul_f16)$/ {print $3}' | sort | tr '\n' ' ')
    if [ "$(wc -w <<<"$syms")" != 3 ]; then
        echo "FAIL $v: float kernels missing from libhexfuse_hvx.a (found: $syms)"
        failed=$((failed + 1))
        continue
    fi
    log="$WORK/${v}_float_probe.log"
    # shellcheck disable=SC2046
    (timeout "$TIMEOUT" "$QEMU" $(image_for "$v" test_hvx_kernels) --float-only; exit $?) >"$log" 2>&1
    st=$?
    if grep -qE '^RESULT ' "$log"; then
        collect "qemu $v: HVX float kernels (this qemu decodes them)" "$log" $st
    elif grep -q 'decode' "$log"; then
        echo "NOT RUN $v: ${syms}- compiled, not run: qemu-hexagon $QEMU_VERSION does not decode v68 HVX float"
        echo "        (probe: $(grep -m1 -oE 'decode[^ ]*: (assertion failed[^)]*\)|code should not be reached)' "$log" || echo "qemu aborts in its decoder") at the first qf32 packet)"
    else
        echo "NOT RUN $v: ${syms}- compiled, not run: qemu-hexagon $QEMU_VERSION does not decode v68 HVX float"
        echo "        (probe ended with status $st without a result: $(tail -1 "$log"))"
    fi
done

echo "== done in $(( $(date +%s) - t0 )) s (logs in $WORK)"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
