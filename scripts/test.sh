#!/usr/bin/env bash
# Every test of the project: the static checks (scripts/lint.sh), the dsp kernel's C tests (host,
# sanitizers, fuzzing), the Hexagon builds and the qemu-hexagon tests, the ONNX Runtime plugin
# build and its Rust unit tests, then all the Python tests, slow ones included.
# Exits non-zero on any failure. Extra arguments go to pytest.
# HEXFUSE_TEST_WORKERS: pytest's worker processes (pytest-xdist); default the CPUs this process may
# use, at most 4 (each worker loads its own models); 0 runs pytest in this one process.
set -euo pipefail
cd "$(dirname "$0")/.."

workers="${HEXFUSE_TEST_WORKERS:-$(nproc)}"
if ! [[ "$workers" =~ ^[0-9]+$ ]]; then
  echo "test.sh: HEXFUSE_TEST_WORKERS='$workers' is not a number of workers (0: pytest in one process)" >&2
  exit 2
fi
[ -n "${HEXFUSE_TEST_WORKERS:-}" ] || [ "$workers" -le 4 ] || workers=4
if [ "$workers" -gt 0 ] && ! python3 -c "import xdist" 2>/dev/null; then
  echo "test.sh: pytest-xdist is not installed: run scripts/setup.sh, or set HEXFUSE_TEST_WORKERS=0" >&2
  exit 2
fi

echo "== scripts/lint.sh"
bash scripts/lint.sh
echo "== dsp: host build, ctest, ASan/UBSan ctest, parser fuzzing"
bash dsp/scripts/build_and_test_host.sh
echo "== dsp: Hexagon v68/v73 and qemu builds"
bash dsp/scripts/build_hexagon.sh
echo "== dsp: qemu-hexagon tests"
bash dsp/scripts/run_qemu_tests.sh
echo "== custom_ops/build.sh (the ONNX Runtime plugin the plugin tests load)"
bash custom_ops/build.sh >/dev/null
echo "== cargo test (the plugin's Rust unit tests)"
(
  build="${HEXFUSE_BUILD_DIR:-$PWD/build/custom_ops}"
  # shellcheck disable=SC1091
  source "$build/cargo-env.sh"
  export HEXFUSE_NATIVE_LIB_DIR HEXFUSE_BLAS_LIB CARGO_TARGET_DIR="$build/cargo"
  cargo test --quiet --release --locked --manifest-path custom_ops/Cargo.toml
)

echo "== pytest (HEXFUSE_TEST_WORKERS=$workers)"
# worksteal: each worker starts on its own contiguous share of the tests, so a module's fixtures are
# mostly made once, and a worker that runs out takes half of what another has left
parallel=()
[ "$workers" -eq 0 ] || parallel=(-n "$workers" --dist worksteal)
set +e
python3 -m pytest -q "${parallel[@]}" "$@"
status=$?
set -e
if [ $status -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit $status
