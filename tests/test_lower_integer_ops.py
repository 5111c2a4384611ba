"""Integer tensors beside the float ones: Cast float -> int32, Add/Sub/Mul on int32/int64 (Div, Mod, Clip:
test_lower_mod.py), the reshape
family and Gather on integer data, lowered and run on the real host kernel against ONNX Runtime bit for
bit. The old quantize_dynamic's conv bias chain (ddddocr_ocr_int8: Div -> Floor -> Cast -> Reshape ->
Add into ConvInteger's int32 sums) runs whole."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_lower import init, needs_host, vi
from test_lower_dynamic_quant import run_both, task_b
from test_lower_exporter_ops import opcodes, plugin_verified_pair

from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Opcode

RNG = np.random.default_rng(12)
I32, I64, F32 = TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT
# ORT on x86 (cvttss2si): toward zero; NaN, +-inf, 2^31 and below -2^31 give INT32_MIN
SPECIAL = [np.nan, np.inf, -np.inf, 2.5, -2.5, -0.5, 0.99, -0.99, 2147483520.0, 2147483648.0, -2147483648.0,
           -2147483904.0, 3e9, -3e9, 1e-40, -0.0]  # fmt: skip


def same(ref: np.ndarray, got: np.ndarray) -> bool:
    return ref.dtype == got.dtype and ref.shape == got.shape and ref.tobytes() == got.tobytes()


def integers(dtype: int, shape: list[int]) -> np.ndarray:
    """Random values of the type, a third of them at or next to its extremes (where Add/Mul wrap)."""
    info = np.iinfo(helper.tensor_dtype_to_np_dtype(dtype))
    v = RNG.integers(info.min, info.max, shape, dtype=info.dtype, endpoint=True)
    edge = np.array([info.min, info.max, info.min + 1, info.max - 1, info.min // 2, 0, 1], info.dtype)
    mask = RNG.random(shape) < 0.33
    return np.where(mask, RNG.choice(edge, shape), v).astype(info.dtype)


@needs_host
@pytest.mark.parametrize("shape", [[16], [3, 7], [2, 40001]])
def test_cast_float_to_int32_equals_ort(shape: list[int]) -> None:
    n = int(np.prod(shape))
    z = np.concatenate([SPECIAL, RNG.uniform(-3e9, 3e9, n)])[:n]
    z[len(SPECIAL) :: 3] = RNG.uniform(-300, 300, len(z[len(SPECIAL) :: 3]))
    node = helper.make_node("Cast", ["z"], ["yb"], name="cast", to=I32)
    m = task_b([node], [vi("z", shape)], [vi("yb", shape, I32)])
    ref, got = run_both(m, {"z": z.astype(np.float32).reshape(shape)})
    assert same(ref[1], got[1])


@needs_host
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize(
    "a_shape,b_shape", [([5, 9], [5, 9]), ([1, 24, 9, 11], [1, 24, 1, 1]), ([], [3, 70001]), ([7, 1, 3], [4, 1])]
)
def test_integer_add_sub_mul_wrap_as_ort(op: str, dtype: int, a_shape: list[int], b_shape: list[int]) -> None:
    out = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    node = helper.make_node(op, ["a", "b"], ["yb"], name="op")
    m = task_b([node], [vi("a", a_shape, dtype), vi("b", b_shape, dtype)], [vi("yb", out, dtype)])
    ref, got = run_both(m, {"a": integers(dtype, a_shape), "b": integers(dtype, b_shape)})
    assert same(ref[1], got[1])


@needs_host
@pytest.mark.parametrize("dtype", [I32, I64, TensorProto.UINT8])
def test_reshape_family_of_integers_equals_ort(dtype: int) -> None:
    """Reshape, Unsqueeze, Flatten, Identity and a Cast to the same type copy integers as they are."""
    nodes = [
        helper.make_node("Reshape", ["a", "shape"], ["r"], name="reshape"),
        helper.make_node("Unsqueeze", ["r", "axes"], ["u"], name="unsqueeze"),
        helper.make_node("Flatten", ["u"], ["f"], name="flatten", axis=2),
        helper.make_node("Identity", ["f"], ["i"], name="identity"),
        helper.make_node("Cast", ["i"], ["yb"], name="cast", to=dtype),
    ]
    inits = [init("shape", np.array([1, -1, 5], np.int64)), init("axes", np.array([0], np.int64))]
    m = task_b(nodes, [vi("a", [3, 5, 1], dtype)], [vi("yb", [1, 15], dtype)], inits)
    ref, got = run_both(m, {"a": integers(dtype, [3, 5, 1])})
    assert same(ref[1], got[1])


def bias_chain(c: int, bias: np.ndarray) -> onnx.ModelProto:
    """An older onnxruntime quantize_dynamic's Conv with a bias (ddddocr_ocr_int8's): the float bias
    divided by the product of the scales, floored, cast to int32, reshaped and added to ConvInteger's sums."""
    w = RNG.integers(0, 256, (c, 3, 3, 3)).astype(np.uint8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["z"], ["zq", "zs", "zz"], name="dql"),
        helper.make_node("Mul", ["zs", "ws"], ["s"], name="scale"),
        helper.make_node("Div", ["bias", "s"], ["t"], name="div"),
        helper.make_node("Floor", ["t"], ["fl"], name="floor"),
        helper.make_node("Cast", ["fl"], ["bi"], name="cast", to=I32),
        helper.make_node("Reshape", ["bi", "bshape"], ["br"], name="reshape"),
        helper.make_node("ConvInteger", ["zq", "w", "zz", "wz"], ["acc"], name="convi", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["acc", "br"], ["sum"], name="add"),
        helper.make_node("Cast", ["sum"], ["sf"], name="to_float", to=F32),
        helper.make_node("Mul", ["sf", "s"], ["yb"], name="rescale"),
    ]
    inits = [
        init("ws", np.array(0.0123, np.float32)),
        init("bias", bias.astype(np.float32)),
        init("bshape", np.array([1, -1, 1, 1], np.int64)),
        init("w", w),
        init("wz", np.array(121, np.uint8)),
    ]
    return task_b(nodes, [vi("z", [1, 3, 11, 13])], [vi("yb", [1, c, 11, 13])], inits)


@needs_host
@pytest.mark.parametrize("extreme", [False, True])
def test_conv_bias_chain_equals_ort(extreme: bool) -> None:
    """The whole chain bit for bit; `extreme`: biases whose quotient overflows int32 (INT32_MIN), so
    that the int32 Add wraps."""
    bias = RNG.standard_normal(7)
    if extreme:
        bias[:4] = [1e30, -1e30, 2e9, -2e9]
    m = bias_chain(7, bias)
    ref, got = run_both(m, {"z": (RNG.standard_normal((1, 3, 11, 13)) * 2).astype(np.float32)})
    assert same(ref[1], got[1])


def gather_model(data: list[int], dtype: int, index: np.ndarray, constant: bool, axis: int = 0) -> tuple:
    node = helper.make_node("Gather", ["d", "i"], ["yb"], name="gather", axis=axis)
    out = data[:axis] + list(index.shape) + data[axis + 1 :]
    ind_type = TensorProto.INT64 if index.dtype == np.int64 else I32
    inputs = [vi("d", data, dtype)] + ([] if constant else [vi("i", list(index.shape), ind_type)])
    m = task_b([node], inputs, [vi("yb", out, dtype)], [init("i", index)] if constant else [])
    feeds = {"d": integers(dtype, data)} | ({} if constant else {"i": index})
    return m, feeds


@needs_host
@pytest.mark.parametrize("dtype", [I64, I32])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize(
    "data,index",
    [
        ([4], np.array(2, np.int64)),  # a Shape's dim (ddddocr_ocr_int8's Gather_208)
        ([4], np.array(-1, np.int64)),
        ([5, 3], np.array([-5, 4, 0, -1], np.int32)),
        ([3, 2, 7], np.array([[2, -3], [1, 1]], np.int64)),
    ],
)
def test_gather_of_integers_equals_ort(dtype: int, constant: bool, data: list[int], index: np.ndarray) -> None:
    m, feeds = gather_model(data, dtype, index, constant)
    ref, got = run_both(m, feeds)
    assert same(ref[1], got[1])


@pytest.mark.parametrize(
    "index,constant,axis,why",
    [
        (np.array(4, np.int64), True, 0, r"out of range \[-4, 4\)"),
        (np.array(0, np.int64), False, 1, "axis 0"),
        (np.array([0, 2], np.int64), True, 1, "not in range and contiguous"),
    ],
)
def test_gather_of_integers_refusals(index: np.ndarray, constant: bool, axis: int, why: str) -> None:
    m, _ = gather_model([4, 3], I64, index, constant, axis)
    with pytest.raises(LoweringError, match=why):
        lower_pair(m, m.graph.node[0])


@needs_host
@pytest.mark.parametrize("dtype", [I64, I32])
@pytest.mark.parametrize(
    "data,index,axis",
    [
        ([2, 8], np.array(-1, np.int64), 1),  # a step decoder's last token id, prefix[:, -1] (romanizer_decoder)
        ([2, 8], np.array(3, np.int32), 1),
        ([2, 8, 3], np.array([2, 3, 4], np.int64), 1),
        ([2, 8, 3], np.array([[-2, -1]], np.int64), 2),
        ([2, 8, 3], np.array([-3, 6], np.int64), 1),  # signs mixed: counted at this length
    ],
)
def test_gather_of_integers_off_axis_0_by_constant_indices_equals_ort(
    dtype: int, data: list[int], index: np.ndarray, axis: int
) -> None:
    """Constant contiguous indices off axis 0 slice the integers as they are (SLICE, then a COPY where the indices
    drop or split the axis), as a float Gather's"""
    m, feeds = gather_model(data, dtype, index, True, axis)
    assert opcodes(m)[1] == Opcode.SLICE
    ref, got = run_both(m, feeds)
    assert same(ref[1], got[1])


@needs_host
def test_the_last_token_of_a_symbolic_length_pairs(tmp_path) -> None:
    """romanizer_decoder's step reads prefix[:, -1] of [batch, tgt_len] token ids, then their embeddings: the index -1
    stays -1 in SLICE (from the end), the same param at the second binding, so the pair holds it (16 candidates
    stopped there: integer data was taken off axis 0 by GATHER_ROWS only)."""
    last = onnx.numpy_helper.from_array(np.array(-1, np.int64), "last")
    nodes = [
        helper.make_node("Gather", ["prefix", "last"], ["ids"], name="a/last", axis=1),
        helper.make_node("Gather", ["emb", "ids"], ["e"], name="a/emb", axis=0),
        helper.make_node("MatMul", ["e", "w"], ["a"], name="a/matmul"),
        helper.make_node("Sigmoid", ["h"], ["b1"], name="b/sigmoid"),
        helper.make_node("Tanh", ["b1"], ["b2"], name="b/tanh"),
        helper.make_node("Add", ["a", "b2"], ["y"], name="join"),
    ]
    inits = [init("emb", RNG.standard_normal((50, 64)).astype(np.float32)), last]
    inits.append(init("w", RNG.standard_normal((64, 64)).astype(np.float32)))
    inputs = [vi("prefix", ["batch", "tgt_len"], I64), vi("h", ["batch", 64])]
    g = helper.make_graph(nodes, "g", inputs, [vi("y", ["batch", 64])], initializer=inits)
    feeds = {"prefix": RNG.integers(0, 50, (2, 5)), "h": RNG.standard_normal((2, 64)).astype(np.float32)}
    fused, _ = plugin_verified_pair(tmp_path, g, inputs=feeds)
    assert "a/last" in {n.name for n in fused}
