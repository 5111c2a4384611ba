#!/usr/bin/env bash
# The main job on bundled models, written into build/demo/ (fused models and JSON reports):
#  1. an LLM serving two requests at once: the committed Llama- and GPT-2-style exports
#     (models/exported/) as one prefill request and one decode request, paired layer by layer
#     (colocate --hybrid), modelled for the Hexagon v73 target;
#  2. pairs inside one model (zoo builders), chosen for the host target: on hexagon-v73 these
#     small graphs save less than one kernel call costs, so the pass rightly leaves them unfused.
# Every written model passed the full checker and matched its original on stock ONNX Runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
for name in llama_dynamo gpt2_dynamo; do
  echo "== $name: one prefill and one decode request together (colocate --hybrid, hexagon-v73)"
  python3 -m hexfuse_onnx colocate --hybrid "models/exported/$name.onnx" -o "$out/${name}_hybrid.fused.onnx" \
    --json "$out/${name}_hybrid.report.json" -q
done
python3 -m models build two_branch gpt_decode_step -o "$out" >/dev/null
for name in two_branch gpt_decode_step; do
  echo "== $name: independent branches inside one model (rewrite --target host)"
  python3 -m hexfuse_onnx rewrite "$out/$name.onnx" -o "$out/$name.fused.onnx" --target host \
    --json "$out/$name.report.json" -q
done
echo "== fused models and reports are in $out/"
