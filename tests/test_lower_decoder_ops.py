"""Lowerings the exported decoders' blocks and norms need (Pow, Reciprocal, Expand to a computed
shape, shape arithmetic folded, FastGelu), each checked on the real dsp/ host kernel against ONNX Runtime."""

from __future__ import annotations

import struct

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from test_lower import (
    _op_records,
    assert_matches_ort_on_the_host_kernel,
    init,
    needs_host,
    pair_model,
    program_inputs,
    vi,
)

from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Opcode
from hexfuse_onnx.runtime import HostKernel

SHAPE = [2, 3, 8]


def unary_pair(nodes_b: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    """Task A a Relu over x, task B the given nodes from z (and the initializers) to yb (both [2,3,8])."""
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    inits = inits or []
    inputs_b = [vi("z", SHAPE)] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return pair_model(a, nodes_b, [vi("x", SHAPE)], inputs_b, [vi("ya", SHAPE)], [vi("yb", SHAPE)], inits, opset=17)


def opcodes(m: onnx.ModelProto) -> list[int]:
    return [struct.unpack_from("<H", p, 0)[0] for p in _op_records(lower_pair(m, m.graph.node[0]))]


@needs_host
@pytest.mark.parametrize(
    ("exponent", "ops"),
    [
        (2.0, [Opcode.MUL]),
        (3.0, [Opcode.MUL, Opcode.MUL]),
        (0.5, [Opcode.SQRT]),
        (-1.0, [Opcode.DIV]),
        (-0.5, [Opcode.SQRT, Opcode.DIV]),  # a norm's rsqrt: Pow(mean + eps, -0.5) (hama_asr)
    ],
)
def test_pow_runs_as_products_roots_or_divisions(exponent: float, ops: list[Opcode]) -> None:
    # the exporters' form: Pow(x, scalar constant); fractional and negative exponents on x*x + 1 (real, finite)
    positive = [
        helper.make_node("Mul", ["z", "z"], ["z2"], name="square"),
        helper.make_node("Add", ["z2", "one"], ["z3"], name="plus_one"),
    ]
    square = positive if exponent < 1 else []
    base = "z3" if square else "z"
    inits = [init("e", np.float32(exponent))] + ([init("one", np.float32(1.0))] if square else [])
    m = unary_pair([*square, helper.make_node("Pow", [base, "e"], ["yb"], name="pow")], inits)
    assert opcodes(m) == [Opcode.RELU, *([Opcode.MUL, Opcode.ADD] if square else []), *ops]
    assert_matches_ort_on_the_host_kernel(m)


@needs_host
@pytest.mark.parametrize("op", ["Pow", "Reciprocal"])
def test_an_attention_scale_from_a_scalar_stays_a_scalar(op: str) -> None:
    """hama_asr's attention: Pow(head_dim, -0.5) of a rank-0 value, times the scores. The one it divides
    was a [1] tensor: the quotient [1] where ONNX has [] (the kernel refused the program)."""
    nodes = [
        helper.make_node("Mul", ["s", "s"], ["s2"], name="square"),
        helper.make_node("Add", ["s2", "one"], ["s3"], name="plus_one"),
        helper.make_node(op, ["s3", "e"] if op == "Pow" else ["s3"], ["scale"], name="rsqrt"),
        helper.make_node("Mul", ["z", "scale"], ["yb"], name="scaled"),
    ]
    inits = [init("one", np.float32(1.0))] + ([init("e", np.float32(-0.5))] if op == "Pow" else [])
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    inputs_b = [vi("z", SHAPE), vi("s", [])] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    m = pair_model(a, nodes, [vi("x", SHAPE)], inputs_b, [vi("ya", SHAPE)], [vi("yb", SHAPE)], inits, opset=17)
    assert_matches_ort_on_the_host_kernel(m)


@needs_host
def test_pow_of_a_dequantized_constant_exponent_runs_as_a_product() -> None:
    # a QDQ model's exponent, 8-bit here: DequantizeLinear(255, 2/255, 0) == 2.0 in float32 (u16: 65535)
    dq = helper.make_node("DequantizeLinear", ["eq", "es", "ez"], ["e"], name="dq_exponent")
    inits = [init("eq", np.uint8(255)), init("es", np.float32(0.007843138)), init("ez", np.uint8(0))]
    m = unary_pair([dq, helper.make_node("Pow", ["z", "e"], ["yb"], name="pow")], inits)
    assert opcodes(m)[-1] == Opcode.MUL
    assert_matches_ort_on_the_host_kernel(m)


@pytest.mark.parametrize("exponent", [np.float32(4.0), np.array([2.0, 2.0], np.float32)])
def test_pow_with_another_exponent_is_refused(exponent: np.ndarray) -> None:
    m = unary_pair([helper.make_node("Pow", ["z", "e"], ["yb"], name="pow")], [init("e", exponent)])
    with pytest.raises(LoweringError, match="only a scalar 0.5, 2, 3, -1 or -0.5"):
        lower_pair(m, m.graph.node[0])


@needs_host
def test_reciprocal_runs_as_a_division_of_one() -> None:
    # 1 / (x*x + 1): the torch exporters' rsqrt is Reciprocal(Sqrt(mean + eps)), never near 0
    nodes = [
        helper.make_node("Mul", ["z", "z"], ["z2"], name="square"),
        helper.make_node("Add", ["z2", "one"], ["z3"], name="plus_one"),
        helper.make_node("Reciprocal", ["z3"], ["yb"], name="reciprocal"),
    ]
    m = unary_pair(nodes, [init("one", np.float32(1.0))])
    assert opcodes(m) == [Opcode.RELU, Opcode.MUL, Opcode.ADD, Opcode.DIV]
    assert_matches_ort_on_the_host_kernel(m)


def expand_pair(with_output_shape: bool) -> onnx.ModelProto:
    """Task B expands z [2,1,8] to the shape s [2,3,8] that the graph computes (an int64 input, as
    repeat_kv's shape comes from Shape); the pass puts the known output shape in value_info."""
    nodes_b = [helper.make_node("Expand", ["z", "s"], ["yb"], name="expand")]
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    m = pair_model(
        a,
        nodes_b,
        [vi("x", SHAPE)],
        [vi("z", [2, 1, 8]), vi("s", [3], onnx.TensorProto.INT64)],
        [vi("ya", SHAPE)],
        [vi("yb", SHAPE)],
        [],
    )
    if with_output_shape:
        m.functions[0].value_info.append(vi("yb", SHAPE))
    return m


@needs_host
def test_expand_to_a_computed_shape_takes_the_known_output_shape() -> None:
    m = expand_pair(with_output_shape=True)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal(SHAPE).astype(np.float32),
        "z": rng.standard_normal([2, 1, 8]).astype(np.float32),
        "s": np.array(SHAPE, np.int64),
    }
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_expand_to_a_computed_shape_without_its_output_shape_is_refused() -> None:
    m = expand_pair(with_output_shape=False)
    with pytest.raises(LoweringError, match="expand"):
        lower_pair(m, m.graph.node[0])


def shape_arithmetic_pair() -> onnx.ModelProto:
    """Task B as TorchScript writes a reshape and an expand: target shapes computed from Shape(z)
    through Gather, Unsqueeze, Concat, and repeat_kv's ConstantOfShape/Mul/Equal/Where guard."""
    i64 = onnx.TensorProto.INT64
    nodes_b = [
        helper.make_node("Shape", ["z"], ["z_shape"], name="shape"),
        helper.make_node("Gather", ["z_shape", "idx0"], ["d0"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["d0", "axes0"], ["d0_1"], name="unsqueeze"),
        helper.make_node("Concat", ["d0_1", "rest"], ["target"], name="concat", axis=0),  # [2, 24]
        helper.make_node("Reshape", ["z", "target"], ["flat"], name="reshape"),
        helper.make_node("Shape", ["wanted"], ["wanted_len"], name="shape_of_shape"),
        helper.make_node("ConstantOfShape", ["wanted_len"], ["ones"], name="ones", value=init("v", np.array([1]))),
        helper.make_node("Mul", ["ones", "minus_one"], ["minus_ones"], name="mul"),
        helper.make_node("Equal", ["wanted", "minus_ones"], ["keep"], name="equal"),
        helper.make_node("Where", ["keep", "ones", "wanted"], ["expand_to"], name="where"),
        helper.make_node("Unsqueeze", ["flat", "axes0"], ["flat_1"], name="unsqueeze_data"),
        helper.make_node("Expand", ["flat_1", "expand_to"], ["yb"], name="expand"),  # [3, 2, 24]
    ]
    inits = [
        init("idx0", np.array(0, np.int64)),
        init("axes0", np.array([0], np.int64)),
        init("rest", np.array([24], np.int64)),
        init("wanted", np.array([3, -1, -1], np.int64)),
        init("minus_one", np.array(-1, np.int64)),
    ]
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    inputs_b = [vi("z", SHAPE)] + [vi(t.name, list(t.dims), i64) for t in inits]
    m = pair_model(a, nodes_b, [vi("x", SHAPE)], inputs_b, [vi("ya", SHAPE)], [vi("yb", [3, 2, 24])], inits)
    # the pass's shapes, as prepare() gives them (body inference alone does not see through Where)
    m.functions[0].value_info.extend([vi("flat", [2, 24]), vi("flat_1", [1, 2, 24]), vi("yb", [3, 2, 24])])
    return m


@needs_host
def test_shape_arithmetic_is_folded_when_lowering() -> None:
    m = shape_arithmetic_pair()
    onnx.checker.check_model(m, full_check=True)
    # Relu; Reshape's COPY; Unsqueeze's COPY; Expand's MUL by ones: no op for the shape arithmetic
    assert opcodes(m) == [Opcode.RELU, Opcode.COPY, Opcode.COPY, Opcode.MUL]
    assert_matches_ort_on_the_host_kernel(m)


@needs_host
def test_contrib_gelu_runs_as_gelu() -> None:
    # ORT's optimizer and the QNN recipe's qnn_preprocess_model write GELU's erf form as com.microsoft Gelu
    m = unary_pair([helper.make_node("Gelu", ["z"], ["yb"], name="gelu", domain="com.microsoft")])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    m.functions[0].opset_import.append(helper.make_opsetid("com.microsoft", 1))
    m.functions[0].value_info.append(vi("yb", SHAPE))  # as the pass gives it: ONNX cannot infer contrib ops
    assert opcodes(m) == [Opcode.RELU, Opcode.GELU]
    assert_matches_ort_on_the_host_kernel(m)


@needs_host
@pytest.mark.parametrize("with_bias", [True, False])
def test_fast_gelu_runs_as_its_tanh_formula(with_bias: bool) -> None:
    # onnxruntime's transformer optimizer writes GPT-2's MLP activation as com.microsoft FastGelu
    inputs = ["z", "bias"] if with_bias else ["z"]
    node = helper.make_node("FastGelu", inputs, ["yb"], name="fast_gelu", domain="com.microsoft")
    inits = [init("bias", np.linspace(-1, 1, SHAPE[-1]).astype(np.float32))] if with_bias else []
    m = unary_pair([node], inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    m.functions[0].opset_import.append(helper.make_opsetid("com.microsoft", 1))
    m.functions[0].value_info.append(vi("yb", SHAPE))  # as the pass gives it: ONNX cannot infer contrib ops
    ops = opcodes(m)
    assert ops[0] == Opcode.RELU and Opcode.TANH in ops and len(ops) == (11 if with_bias else 10)
    assert_matches_ort_on_the_host_kernel(m, tol=1e-5)
