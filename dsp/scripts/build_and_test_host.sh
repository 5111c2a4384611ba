#!/usr/bin/env bash
# Host build and tests of dsp/ (the CI entry point for the kernel):
#   1. Release + -Werror build into build/dsp-host, ctest
#   2. ASan + UBSan (+ LSan) build with clang-19 into build/dsp-asan, ctest
#   3. libFuzzer parser target into build/dsp-fuzz, run for
#      HEXFUSE_FUZZ_SECONDS (default 60) on a seed corpus of valid programs
# Exits non-zero on any failure. Run from anywhere.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DSP="$ROOT/dsp"
BUILD="${HEXFUSE_BUILD_ROOT:-$ROOT/build}"
FUZZ_SECONDS="${HEXFUSE_FUZZ_SECONDS:-60}"
CLANG="${HEXFUSE_CLANG:-clang-19}"
JOBS="${HEXFUSE_JOBS:-2}"

step() { printf '\n=== %s ===\n' "$*"; }

step "host Release build (-Werror)"
cmake -S "$DSP" -B "$BUILD/dsp-host" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEXFUSE_WERROR=ON
cmake --build "$BUILD/dsp-host" -j "$JOBS"
step "host tests"
ctest --test-dir "$BUILD/dsp-host" --output-on-failure -j "$JOBS"

step "ASan+UBSan build ($CLANG)"
CC="$CLANG" cmake -S "$DSP" -B "$BUILD/dsp-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHEXFUSE_SANITIZE=ON -DHEXFUSE_WERROR=ON -DHEXFUSE_BENCH=OFF
cmake --build "$BUILD/dsp-asan" -j "$JOBS"
step "ASan+UBSan tests"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$BUILD/dsp-asan" --output-on-failure -j "$JOBS"

step "fuzz the parser for ${FUZZ_SECONDS}s"
CC="$CLANG" cmake -S "$DSP" -B "$BUILD/dsp-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHEXFUSE_FUZZ=ON -DHEXFUSE_TESTS=OFF -DHEXFUSE_BENCH=OFF -DHEXFUSE_WERROR=ON
cmake --build "$BUILD/dsp-fuzz" -j "$JOBS" --target hexfuse_fuzz_parse hexfuse_make_seeds
"$DSP/scripts/run_fuzz.sh" "$BUILD/dsp-fuzz" "$FUZZ_SECONDS"

step "dsp host: all passed"
