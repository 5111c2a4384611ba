"""ReduceMean and ReduceSum of a pair's float output that no QuantizeLinear reads, run on the real host kernel
against ONNX Runtime 1.32's CPU kernel (x86-64): bit for bit, in ORT's summation order (dsp/src/ops/reduce.c),
on values spread over 2^-8 .. 2^8 so that their float sum depends on the order. Shapes: the last axis as a layer
norm's, a middle axis, the first, two axes apart (ORT's fast paths KR, KRK, RK, RKR) and its generic loop
(RKRK), keepdims 1 and 0. A reduction of a Transpose that ORT's optimizer moves below it (moonshine_tiny_encoder's
first layer norm: ORT sums the [1, 288, 207] tensor over axis 1, the pair the [1, 207, 288] one over its last) is
summed in ORT's order over that tensor (ort_graph.pushed_transposes, HFX_P_REDUCE_ORT_PERM)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper
from test_lower import needs_host, program_inputs, vi
from test_lower_logic import assert_same_bits, run_both, task_b

from hexfuse_onnx import ort_graph
from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.runtime import HostKernel

RNG = np.random.default_rng(27)

SHAPES = [
    ([1, 207, 288], [-1]),  # KR, 16-byte aligned rows
    ([3, 5, 17], [-1]),  # KR, rows off the 16-byte boundary
    ([5, 3], [-1]),  # KR shorter than a packet
    ([4, 33, 6], [1]),  # KRK
    ([6, 40], [0]),  # RK
    ([3, 4, 5], [0, 2]),  # RKR
    ([3, 4, 5, 6], [1, 3]),  # RKRK: ORT's generic loop
]


def reduce_pair(op: str, shape: list[int], axes: list[int], keep: int) -> object:
    """The reduction as task B of a pair (ReduceSum's axes an input, opset 13; ReduceMean's an attribute)."""
    if op == "ReduceSum":
        node = helper.make_node(op, ["p", "ax"], ["yb"], name="r", keepdims=keep)
        inits = [numpy_helper.from_array(np.array(axes, np.int64), "ax")]
    else:
        node = helper.make_node(op, ["p"], ["yb"], name="r", axes=axes, keepdims=keep)
        inits = []
    return task_b([node], [vi("p", shape)], [vi("yb", None)], inits, opset=13)


@needs_host
@pytest.mark.parametrize("keep", [1, 0])
@pytest.mark.parametrize("shape, axes", SHAPES)
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
def test_reduce_equals_ort_bit_for_bit(op: str, shape: list[int], axes: list[int], keep: int) -> None:
    m = reduce_pair(op, shape, axes, keep)
    for _ in range(3):
        x = RNG.standard_normal(shape) * np.exp2(RNG.integers(-8, 9, shape))
        assert_same_bits(*run_both(m, {"p": x.astype(np.float32)}))


def transposed_reduce(shape: list[int], perm: list[int], axes: list[int]) -> onnx.ModelProto:
    """t -> Transpose(perm) -> ReduceMean(axes) -> y, the Transpose's output also read by a Sub (a layer norm's)"""
    nodes = [
        helper.make_node("Transpose", ["t"], ["x"], name="tr", perm=perm),
        helper.make_node("ReduceMean", ["x"], ["y"], name="mean", axes=axes),
        helper.make_node("Sub", ["x", "y"], ["z"], name="sub"),
    ]
    outs = [vi("y", None), vi("z", None)]
    return helper.make_model(
        helper.make_graph(nodes, "g", [vi("t", shape)], outs), opset_imports=[helper.make_opsetid("", 13)]
    )


@pytest.mark.parametrize(
    "shape, perm, axes, moved",
    [
        ([1, 37, 23], [0, 2, 1], [-1], True),
        ([4, 33], [1, 0], [0], True),
        ([2, 3, 4, 5], [0, 3, 1, 2], [1], True),
        ([1, 6, 5], [2, 0, 1], [1], False),
    ],
)
def test_pushed_transposes_are_those_orts_optimizer_moves(
    tmp_path: Path, shape: list[int], perm: list[int], axes: list[int], moved: bool
) -> None:
    m = transposed_reduce(shape, perm, axes)
    onnx.save(m, tmp_path / "m.onnx")
    assert ort_graph.pushed_transposes(tmp_path / "m.onnx", m) == ({"mean": perm} if moved else {})


@needs_host
@pytest.mark.parametrize(
    "shape, perm, axes", [([1, 37, 23], [0, 2, 1], [-1]), ([4, 33], [1, 0], [0]), ([2, 3, 4, 5], [0, 3, 1, 2], [1])]
)
def test_reduce_of_a_moved_transpose_equals_ort_bit_for_bit(shape: list[int], perm: list[int], axes: list[int]) -> None:
    """ORT (default optimizations) sums t over the permuted axes (RK; KR; KR of rows of 5): the pair's ReduceMean of
    x, given the perm, in that order; without it, in x's (KR; RK; KRK), which differs."""
    source = transposed_reduce(shape, perm, axes)
    xshape = [shape[p] for p in perm]
    pair = task_b([helper.make_node("ReduceMean", ["p"], ["yb"], name="mean", axes=axes)], [vi("p", xshape)],
                  [vi("yb", None)], opset=13)  # fmt: skip
    node = pair.graph.node[0]
    session = ort.InferenceSession(source.SerializeToString(), providers=["CPUExecutionProvider"])
    differ = 0
    for _ in range(3):
        t = (RNG.standard_normal(shape) * np.exp2(RNG.integers(-8, 9, shape))).astype(np.float32)
        ref = session.run(["y"], {"t": t})[0]
        feeds = program_inputs(pair, node, {"x": np.ones((2, 4), np.float32), "p": t.transpose(perm).copy()})
        got = HostKernel().run(lower_pair(pair, node, ort_transposes={"mean": perm}), feeds)[1]
        assert got.tobytes() == ref.tobytes()
        plain = HostKernel().run(lower_pair(pair, node), feeds)[1]
        differ += int((plain != ref).sum())
    assert differ > 0
