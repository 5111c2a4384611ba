#!/usr/bin/env bash
# Every test of the project: the static checks (scripts/lint.sh), the dsp kernel's C tests (host,
# sanitizers, fuzzing), the Hexagon builds and the qemu-hexagon tests, the ONNX Runtime plugin
# build and its Rust unit tests, then all the Python tests, slow ones included.
# Exits non-zero on any failure. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

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

echo "== pytest"
set +e
python3 -m pytest -q "$@"
status=$?
set -e
if [ $status -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit $status
