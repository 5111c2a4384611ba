"""What a twenty-first stranger hit: a graph network (caustic-nmr's PaiNN) whose atom count is axis 0
of a 1-D input read before the input the user gives with --shape."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from hexfuse_onnx import graph
from hexfuse_onnx.errors import ModelError


def _atoms_model() -> onnx.ModelProto:
    """element [num_atoms] first, pos [num_atoms, 3] second: y = pos * element, per atom."""
    nodes = [
        helper.make_node("Cast", ["element"], ["e"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["e", "one"], ["e2"]),
        helper.make_node("Mul", ["pos", "e2"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("element", TensorProto.INT64, ["num_atoms"]),
        helper.make_tensor_value_info("pos", TensorProto.FLOAT, ["num_atoms", 3]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["num_atoms", 3])]
    one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    g = helper.make_graph(nodes, "g", inputs, out, [one])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_hint_binds_a_dim_an_earlier_input_holds_at_its_default() -> None:
    # before: "--shape gives dim 'num_atoms' two values, 1 and 160" (element's default batch of 1)
    binding = graph.representative_binding(_atoms_model(), {"pos": [160, 3]}, "m.onnx")
    assert binding.symbols["num_atoms"] == 160
    assert binding.inputs["element"] == [160]


def test_two_hints_that_disagree_are_still_refused() -> None:
    with pytest.raises(ModelError, match="--shape gives dim 'num_atoms' two values, 7 and 160"):
        graph.representative_binding(_atoms_model(), {"pos": [160, 3], "element": [7]}, "m.onnx")
