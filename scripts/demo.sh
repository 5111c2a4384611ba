#!/usr/bin/env bash
# The main job on bundled zoo models: build them, rewrite (discover, choose, fuse), verify on
# stock ONNX Runtime, and write the fused models and JSON reports into build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
python3 -m models build two_branch mlp_chain gpt_decode_step -o "$out" >/dev/null
for name in two_branch mlp_chain gpt_decode_step; do
  echo "== $name"
  python3 -m hexfuse_onnx rewrite "$out/$name.onnx" -o "$out/$name.fused.onnx" --json "$out/$name.report.json" -q
done
echo "== fused models and reports are in $out/"
