#!/usr/bin/env bash
# Installs everything hexfuse-onnx needs on a fresh Debian machine: the Hexagon cross
# toolchain and qemu-hexagon (apt), then the Python package with its test extras (pip).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v clang-19 >/dev/null || need_apt+=(clang-19)
command -v ld.lld-19 >/dev/null || need_apt+=(lld-19)
command -v llvm-objdump-19 >/dev/null || need_apt+=(llvm-19)
command -v clang-format-19 >/dev/null || need_apt+=(clang-format-19)
command -v qemu-hexagon >/dev/null || need_apt+=(qemu-user)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
[ -d /usr/lib/llvm-19/lib/clang/19/lib/linux ] || need_apt+=(libclang-rt-19-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${need_apt[@]}" >/dev/null
fi

command -v cargo >/dev/null || { echo "setup: cargo (Rust) is needed to build custom_ops/; install it with rustup" >&2; exit 1; }
if command -v rustup >/dev/null; then
  rustup component add clippy rustfmt >/dev/null 2>&1 || echo "setup: rustup could not add clippy/rustfmt (scripts/lint.sh needs them)" >&2
fi

echo "setup: installing hexfuse-onnx and its test and lint extras (pip)"
python3 -m pip install -q --disable-pip-version-check -e ".[test,dev,timeline,qnn]"
echo "setup: building the dsp kernel and the ONNX Runtime plugin (custom_ops/build.sh)"
bash custom_ops/build.sh
echo "setup: done"
