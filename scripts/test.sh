#!/usr/bin/env bash
# Every test of the project: the dsp kernel's C tests (host, sanitizers, fuzzing), the Hexagon
# builds and the qemu-hexagon tests, then the Python tests. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

run_if_present() {  # a part that is not in the tree yet is reported, not faked
  if [ -f "$1" ]; then
    echo "== $1"
    bash "$1"
  else
    echo "== $1: not present in this tree, skipped"
  fi
}

run_if_present dsp/scripts/build_and_test_host.sh
run_if_present dsp/scripts/build_hexagon.sh
run_if_present dsp/scripts/run_qemu_tests.sh
echo "== custom_ops/build.sh (the ONNX Runtime plugin the plugin tests load)"
bash custom_ops/build.sh >/dev/null

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
