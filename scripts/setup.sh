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

# qemu-hexagon >= 10 runs v68/v73 images as built (-cpu v73); Debian bookworm ships 7.2, which runs
# them only relabelled v67 (dsp/scripts/run_qemu_tests.sh handles both). On bookworm, take qemu-user
# from bookworm-backports unless HEXFUSE_QEMU_BACKPORTS=0; if that fails, 7.2 stays.
qemu_major() { qemu-hexagon --version 2>/dev/null | sed -nE '1s/.*version ([0-9]+)\..*/\1/p'; }
if [ "${HEXFUSE_QEMU_BACKPORTS:-1}" != 0 ] && [ "$(qemu_major)" -lt 10 ] 2>/dev/null &&
   grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
      $sudo_cmd tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
  fi
  echo "setup: installing qemu-user from bookworm-backports (qemu-hexagon >= 10)"
  if $sudo_cmd apt-get update -q >/dev/null &&
     DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q -t bookworm-backports qemu-user >/dev/null; then
    echo "setup: $(qemu-hexagon --version | head -1)"
  else
    echo "setup: qemu-user from bookworm-backports not installed; keeping $(qemu-hexagon --version | head -1)" >&2
  fi
fi

command -v cargo >/dev/null || { echo "setup: cargo (Rust) is needed to build custom_ops/; install it with rustup" >&2; exit 1; }
if command -v rustup >/dev/null; then
  rustup component add clippy rustfmt >/dev/null 2>&1 || echo "setup: rustup could not add clippy/rustfmt (scripts/lint.sh needs them)" >&2
fi

echo "setup: installing hexfuse-onnx and its test and lint extras (pip)"
# HEXFUSE_SKIP_NATIVE: setup.py would build the native libraries here against pip's temporary BLAS,
# and build.sh below builds them again against python3's (a changed BLAS path relinks everything).
HEXFUSE_SKIP_NATIVE=1 python3 -m pip install -q --disable-pip-version-check -e ".[test,dev,timeline,qnn]"
echo "setup: building the dsp kernel and the ONNX Runtime plugin (custom_ops/build.sh)"
bash custom_ops/build.sh
echo "setup: done"
