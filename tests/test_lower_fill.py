"""Fills whose dims follow the input shapes: ConstantOfShape (an LSTM's zero state [batch, hidden] from
Shape -> Gather -> Concat of its input) and a constant Pad's slabs, each an EXPAND of one element, run on
the real host kernel against ONNX Runtime; through the pass with a symbolic batch, on the plugin at every
shape the rewrite verifies."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import HostKernel, init, needs_host, program_inputs, vi
from test_lower_exporter_ops import f32, opcodes, plugin_verified_pair, task_b_pair

from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Opcode

FILLS = {  # the value attribute (None: not given, float 0) and the output's type
    "absent": (None, TensorProto.FLOAT),
    "float": (np.array([0.25], np.float32), TensorProto.FLOAT),
    "float16": (np.array([-1.5], np.float16), TensorProto.FLOAT16),
    "int64": (np.array([-(2**40) - 7], np.int64), TensorProto.INT64),
    "int32": (np.array([-3], np.int32), TensorProto.INT32),
    "bool": (np.array([True]), TensorProto.BOOL),
}


def fill_pair(value: np.ndarray | None, elem: int, dims: list[int]) -> onnx.ModelProto:
    """Task B: ConstantOfShape of a shape known only at run time; its output's dims are the function's
    value_info, as the pass gives a body tensor it inferred in the whole model."""
    given = {} if value is None else {"value": numpy_helper.from_array(value)}
    node = helper.make_node("ConstantOfShape", ["shape"], ["yb"], name="fill", **given)
    m = task_b_pair([node], [vi("shape", [len(dims)], TensorProto.INT64)], [vi("yb", dims, elem)])
    m.functions[0].value_info.append(vi("yb", dims, elem))
    return m


@needs_host
@pytest.mark.parametrize("name", sorted(FILLS))
def test_a_fill_of_a_run_time_shape_is_one_expand_and_equals_ort(name: str) -> None:
    value, elem = FILLS[name]
    m = fill_pair(value, elem, [3, 70])
    assert opcodes(m) == [Opcode.RELU, Opcode.EXPAND] + [Opcode.CAST] * (elem == TensorProto.FLOAT16)
    feeds = {"x": f32(2, 4), "shape": np.array([3, 70], np.int64)}
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["yb"], feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))[1]
    assert got.dtype == want.dtype and got.shape == (3, 70)
    np.testing.assert_array_equal(got, want)


def test_a_fill_of_a_type_the_program_does_not_carry_is_refused_by_name() -> None:
    m = fill_pair(np.array([0.5], np.float64), TensorProto.DOUBLE, [3, 4])
    with pytest.raises(LoweringError, match="a fill of float64 is not carried"):
        lower_pair(m, m.graph.node[0])


def lstm_zero_state(value: float) -> onnx.GraphProto:
    """captcha_crnn's first LSTM step: h0 = ConstantOfShape([batch, 64]) from the input's Shape, then
    tanh(x W + h0 R) beside a vector branch over x. The value is not 0, so a fill that wrote nothing fails."""
    dims = [init("axis0", np.array(0, np.int64)), init("hidden", np.array([64], np.int64))]
    nodes = [
        helper.make_node("Shape", ["x"], ["a/shape"], name="a/shape"),
        helper.make_node("Gather", ["a/shape", "axis0"], ["a/batch"], name="a/gather", axis=0),
        helper.make_node("Unsqueeze", ["a/batch", "zero_axes"], ["a/batch1"], name="a/unsqueeze"),
        helper.make_node("Concat", ["a/batch1", "hidden"], ["a/dims"], name="a/concat", axis=0),
        helper.make_node(
            "ConstantOfShape", ["a/dims"], ["a/h0"], name="a/zeros", value=helper.make_tensor("v", 1, [1], [value])
        ),
        helper.make_node("MatMul", ["x", "w"], ["a/xw"], name="a/xw"),
        helper.make_node("MatMul", ["a/h0", "r"], ["a/hr"], name="a/hr"),
        helper.make_node("Add", ["a/xw", "a/hr"], ["a/sum"], name="a/add"),
        helper.make_node("Tanh", ["a/sum"], ["ya"], name="a/tanh"),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["b/m"], name="b/mul"),
        helper.make_node("ReduceMean", ["b/m"], ["yb"], name="b/mean", axes=[1], keepdims=1),
    ]
    inits = [init("w", f32(128, 64)), init("r", f32(64, 64)), init("zero_axes", np.array([0], np.int64)), *dims]
    outputs = [vi("ya", ["batch", 64]), vi("yb", ["batch", 1])]
    return helper.make_graph(nodes, "g", [vi("x", ["batch", 128])], outputs, initializer=inits)


@needs_host
def test_an_lstm_zero_state_over_a_symbolic_batch_pairs_and_matches_with_the_plugin(tmp_path) -> None:
    """Refused before ("runs only as shape arithmetic on values known when lowering": captcha_crnn 15
    candidates, kokoro 8); the batch stays symbolic and the plugin matches at every shape verified."""
    fused, result = plugin_verified_pair(tmp_path, lstm_zero_state(0.5))
    assert "a/zeros" in {n.name for n in fused}
    written = onnx.load(result.output)
    assert written.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def padded_branches() -> onnx.GraphProto:
    """basic_pitch's constant Pads over a symbolic batch (tf2onnx's before a Conv1D, read by a Reshape):
    [batch, 1, 40] padded 3 before and 2 after with -0.5, then a MatMul, beside a vector branch."""
    nodes = [
        helper.make_node("Pad", ["x", "pads", "pad_value"], ["a/padded"], name="a/pad"),
        helper.make_node("MatMul", ["a/padded", "w"], ["a/mm"], name="a/matmul"),
        helper.make_node("Relu", ["a/mm"], ["ya"], name="a/relu"),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["yb"], name="b/mul"),
    ]
    inits = [
        init("pads", np.array([0, 0, 3, 0, 0, 2], np.int64)),
        init("pad_value", np.array(-0.5, np.float32)),
        init("w", f32(45, 96)),
    ]
    outputs = [vi("ya", ["batch", 1, 96]), vi("yb", ["batch", 1, 40])]
    return helper.make_graph(nodes, "g", [vi("x", ["batch", 1, 40])], outputs, initializer=inits)


@needs_host
def test_a_constant_pad_over_a_symbolic_batch_pairs_and_matches_with_the_plugin(tmp_path) -> None:
    """Refused before ("a constant Pad not folded into a Conv is a CONCAT with constants of the input's
    dims", basic_pitch's 36 candidates): its slabs now follow the batch."""
    fused, result = plugin_verified_pair(tmp_path, padded_branches())
    assert "a/pad" in {n.name for n in fused}
    written = onnx.load(result.output)
    assert written.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
