#!/usr/bin/env bash
# run_fuzz.sh BUILD_DIR [SECONDS]: runs the libFuzzer parser target for a
# bounded time on a fresh seed corpus of valid programs. Non-zero exit on a
# crash, leak, sanitizer report or timeout of one input. dsp/fuzz/regressions holds inputs that
# once crashed a kernel: they join the corpus, so each runs first, every time.
set -euo pipefail
BUILD_DIR="$1"
SECONDS_TO_RUN="${2:-${HEXFUSE_FUZZ_SECONDS:-60}}"
WORK="$BUILD_DIR/fuzz-run"
REGRESSIONS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz/regressions" && pwd)"
rm -rf "$WORK"
mkdir -p "$WORK/seeds" "$WORK/corpus" "$WORK/artifacts"
"$BUILD_DIR/fuzz/hexfuse_make_seeds" "$WORK/seeds"
"$BUILD_DIR/fuzz/hexfuse_fuzz_parse" \
  -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$WORK/artifacts/" \
  "$WORK/corpus" "$WORK/seeds" "$REGRESSIONS" >"$WORK/fuzz.log" 2>&1 && status=0 || status=$?
tail -n 25 "$WORK/fuzz.log"
if [ "$status" -ne 0 ]; then
  echo "fuzzer failed (status $status); artifacts in $WORK/artifacts" >&2
  exit "$status"
fi
echo "fuzzer: no crash in ${SECONDS_TO_RUN}s"
