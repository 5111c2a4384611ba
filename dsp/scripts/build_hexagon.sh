#!/usr/bin/env bash
# build_hexagon.sh - build the Hexagon variants of dsp/ with clang-19 + lld-19:
#
#   build/hexagon-v68   -mv68 -mhvx -mhvx-length=128b   (compile + link, not runnable here)
#   build/hexagon-v73   -mv73 -mhvx -mhvx-length=128b   (compile + link, not runnable here)
#   build/hexagon-qemu  -mv67 HVX-128B freestanding test images for qemu-hexagon
#
# Warnings are errors. The FastRPC skeleton dispatcher + methods (dsp/hexagon/skel)
# compile without the SDK (on the coop core, test image test_rpc_skel.elf). The
# QuRT platform and libhexfuse_rpc_skel.so are built only when HEXAGON_SDK_ROOT
# is set (and the SDK is there); otherwise this says so. Usage:
#   dsp/scripts/build_hexagon.sh [BUILD_ROOT]      (default: <repo>/build)
set -euo pipefail

DSP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_DIR="$(cd "$DSP_DIR/.." && pwd)"
BUILD_ROOT="${1:-$REPO_DIR/build}"
mkdir -p "$BUILD_ROOT"
BUILD_ROOT="$(cd "$BUILD_ROOT" && pwd)"

missing=()
for tool in clang-19 ld.lld-19 llvm-ar-19 llvm-ranlib-19 cmake; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "build_hexagon: missing tools: ${missing[*]} (Debian: apt-get install -y clang-19 lld-19 llvm-19 cmake)" >&2
    exit 2
fi
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

built=()
t0=$(date +%s)
for variant in v68 v73 qemu; do
    dir="$BUILD_ROOT/hexagon-$variant"
    echo "== hexagon-$variant: configure + build ($dir)"
    cmake -S "$DSP_DIR/hexagon" -B "$dir" "${generator[@]}" \
        -DCMAKE_TOOLCHAIN_FILE="$DSP_DIR/cmake/hexagon-$variant.cmake" \
        -DCMAKE_BUILD_TYPE=Release -DHEXFUSE_WERROR=ON \
        -DHEXAGON_SDK_ROOT="${HEXAGON_SDK_ROOT:-}" >"$dir.configure.log" 2>&1 ||
        { cat "$dir.configure.log"; echo "build_hexagon: configure of hexagon-$variant FAILED" >&2; exit 1; }
    cmake --build "$dir" --parallel "$(nproc 2>/dev/null || echo 2)" >"$dir.build.log" 2>&1 ||
        { cat "$dir.build.log"; echo "build_hexagon: build of hexagon-$variant FAILED" >&2; exit 1; }
    built+=("$variant")
done

echo
echo "== Hexagon build summary ($(( $(date +%s) - t0 )) s, clang: $(clang-19 --version | head -1))"
for variant in "${built[@]}"; do
    dir="$BUILD_ROOT/hexagon-$variant"
    case $variant in
        qemu) what="v67 + HVX-128B freestanding, runs under qemu-hexagon" ;;
        *)    what="$variant + HVX-128B, compiled and linked, NOT run (qemu-hexagon 7.2 has no v68+ HVX float)" ;;
    esac
    echo "hexagon-$variant: $what"
    for f in "$dir"/lib*.a "$dir"/*.elf; do
        [ -e "$f" ] || continue
        echo "    built $(basename "$f") ($(stat -c %s "$f") bytes)"
    done
    if [ "$variant" != qemu ]; then
        n=$(llvm-nm-19 "$dir/libhexfuse_hvx.a" 2>/dev/null | grep -c ' T hvx_.*_f\(32\|16\)$' || true)
        echo "    v68+ float HVX kernels in libhexfuse_hvx.a: $n (hvx_add_f32, hvx_mul_f32, hvx_matmul_f16)"
    fi
    if ! grep -q '^core=ON' "$dir/hexfuse_build_info.txt"; then
        echo "    hexfuse core (coop platform): NOT built (dsp/src core files missing)"
    fi
    if grep -q '^rpc_skel=ON' "$dir/hexfuse_build_info.txt"; then
        echo "    FastRPC skeleton (skel/hexfuse_rpc_skel.c + hexfuse_rpc_imp.c, no SDK): compiled on the coop core;"
        echo "      run under qemu as a loopback (test_rpc_skel.elf), never through FastRPC, never on a device"
    fi
done
if [ -n "${HEXAGON_SDK_ROOT:-}" ] && [ -d "${HEXAGON_SDK_ROOT}" ]; then
    echo "QuRT/FastRPC: configured with HEXAGON_SDK_ROOT=$HEXAGON_SDK_ROOT (see the v68/v73 build logs)"
    echo "HMX: not built (no HMX kernel in this tree yet)"
else
    echo "QuRT platform + libhexfuse_rpc_skel.so + HMX: not built (HEXAGON_SDK_ROOT not set; qurt.h is SDK-only)"
fi
