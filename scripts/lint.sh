#!/usr/bin/env bash
# Every static check of the project; exits non-zero on the first that fails (scripts/test.sh runs it
# first). Python: ruff check, ruff format --check, mypy (all configured in pyproject.toml). Rust
# (custom_ops/): cargo fmt --check, cargo clippy -D warnings. C: clang-format --dry-run -Werror on
# the files listed in scripts/clang-format-files.txt, once a .clang-format exists.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
start=$SECONDS

echo "== ruff check"
ruff check --quiet .
echo "== ruff format --check"
ruff format --check --quiet .
echo "== mypy"
mypy   # packages and options: [tool.mypy] in pyproject.toml; cache in build/mypy_cache

echo "== cargo fmt --check"
cargo fmt --check --manifest-path custom_ops/Cargo.toml
echo "== cargo clippy -D warnings"
# build.rs links the dsp/ static libraries that custom_ops/build.sh builds with CMake and names in
# cargo-env.sh; clippy shares build.sh's target folder, so it only re-checks the crate.
build="${HEXFUSE_BUILD_DIR:-$root/build/custom_ops}"
blas_lib="$(sed -n "s/^HEXFUSE_BLAS_LIB='\(.*\)'$/\1/p" "$build/cargo-env.sh" 2>/dev/null || true)"
if [[ -z "$blas_lib" || ! -f "$blas_lib" ]]; then  # not built, or last built by pip against its temporary BLAS
  echo "lint.sh: no current build in $build: building the native libraries first (custom_ops/build.sh)"
  bash custom_ops/build.sh >/dev/null
fi
(
  # shellcheck disable=SC1091
  source "$build/cargo-env.sh"
  export HEXFUSE_NATIVE_LIB_DIR HEXFUSE_BLAS_LIB CARGO_TARGET_DIR="$build/cargo"
  cargo clippy --quiet --release --locked --all-targets --manifest-path custom_ops/Cargo.toml -- -D warnings
)

echo "== clang-format"
style_file=""
for f in .clang-format dsp/.clang-format; do
  [[ -f "$f" ]] && style_file="$f" && break
done
allowlist=scripts/clang-format-files.txt
if [[ -z "$style_file" ]]; then
  echo "lint.sh: no .clang-format yet: C formatting not checked"
else
  clang_format="$(command -v clang-format-19 || command -v clang-format || true)"
  [[ -n "$clang_format" ]] || { echo "lint.sh: clang-format not found (apt-get install clang-format-19)" >&2; exit 1; }
  mapfile -t c_files < <(grep -v '^\s*\(#\|$\)' "$allowlist")
  if [[ ${#c_files[@]} -eq 0 ]]; then
    echo "lint.sh: $allowlist lists no files: C formatting not checked"
  else
    "$clang_format" --dry-run -Werror "${c_files[@]}"
    echo "${#c_files[@]} C files formatted ($style_file)"
  fi
fi
echo "lint.sh: clean in $((SECONDS - start)) s"
