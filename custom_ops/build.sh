#!/usr/bin/env bash
# Build the dsp/ host kernel (CMake, Release) and the ONNX Runtime plugin (Rust, cargo), and
# put both shared libraries into hexfuse_onnx/_lib/ (git-ignored):
#   libhexfuse_ort.so   the custom-op library (register_custom_ops_library)
#   libhexfuse_host.so  the kernel's C API for Python ctypes (runtime.HostKernel) + the cDSP probe
# and, for tests only, libhexfuse_rpc_loopback.so (not in the wheel): a stand-in for libcdsprpc.so that runs the
# DSP-side FastRPC skeleton in process (HEXFUSE_CDSPRPC_LIB=<it> with backend=hexagon).
# The plugin is a Rust cdylib on ort-sys' C API declarations: ONNX Runtime hands it the API at
# RegisterCustomOps, so no ONNX Runtime headers or binaries are needed or downloaded.
# Needs: cmake, a C compiler, cargo (>= 1.92), and scipy-openblas32 (pip) for the BLAS.
#   HEXFUSE_BLAS_DIR=<dir>   root of scipy_openblas32 (default: asked from python3)
#   HEXFUSE_BUILD_DIR=<dir>  build folder (default: build/custom_ops, also for setup.py's builds)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${HEXFUSE_BUILD_DIR:-$root/build/custom_ops}"
out="$root/hexfuse_onnx/_lib"
mkdir -p "$build" "$out"
start=$SECONDS

command -v cargo >/dev/null || { echo "build.sh: cargo not found (install Rust with rustup)" >&2; exit 1; }

# Always name the BLAS: a wheel build links pip's temporary copy, and the CMake cache must not keep
# it for the next build (a changed BLAS path relinks everything that uses it).
blas_dir="${HEXFUSE_BLAS_DIR:-$(python3 -c 'import os, scipy_openblas32 as s; print(os.path.dirname(s.__file__))')}" ||
  { echo "build.sh: scipy-openblas32 not found for python3 (pip install scipy-openblas32)" >&2; exit 1; }

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# A cache from another generator or source tree cannot be reused.
if [[ -f "$build/CMakeCache.txt" ]] && ! grep -q "CMAKE_HOME_DIRECTORY:INTERNAL=$here\$" "$build/CMakeCache.txt"; then
  rm -rf "$build"
  mkdir -p "$build"
fi
cmake -S "$here" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DHEXFUSE_LIB_DIR="$out" -DHEXFUSE_BLAS_DIR="$blas_dir" \
      >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)"

# shellcheck disable=SC1091
source "$build/cargo-env.sh"
export HEXFUSE_NATIVE_LIB_DIR HEXFUSE_BLAS_LIB
export CARGO_TARGET_DIR="$build/cargo"
export RUSTFLAGS="${RUSTFLAGS:-} -D warnings"
cargo build --release --locked --manifest-path "$here/Cargo.toml"
install -m 0755 "$CARGO_TARGET_DIR/release/libhexfuse_ort.so" "$out/libhexfuse_ort.so"

ls -l "$out"
echo "build.sh: done in $((SECONDS - start)) s"
