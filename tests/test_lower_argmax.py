"""ArgMax and ArgMin lowered onto the kernel's ARGMAX/ARGMIN and run on the real host kernel against ONNX Runtime:
the int64 indices equal ORT's on every axis (negative too), keepdims and select_last_index both ways, ties (first
or last index), NaN (first in its row: 0; elsewhere passed over), of float32 and int32; other types are refused.
The colocate kind lets a pair hold ArgMax and its int64 indices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from test_lower import needs_host, vi
from test_lower_exporter_ops import opcodes
from test_lower_logic import F16, F32, I32, I64, assert_same_bits, run_both, task_b, values

from hexfuse_onnx import graph
from hexfuse_onnx.kinds.colocate import unlowerable
from hexfuse_onnx.lowering import LoweringError
from hexfuse_onnx.lowering.abi import Opcode
from hexfuse_onnx.profile import profile_graph

OPCODE = {"ArgMax": Opcode.ARGMAX, "ArgMin": Opcode.ARGMIN}
# (input shape, axis, keepdims): a whole row, a batch of one, both axes of a matrix, inner and outer axes of rank 4,
# an axis of length 1 (every index 0) and a CTC head's [batch, time, classes]
CASES = [
    ([7], 0, 1),
    ([1, 7], -1, 0),
    ([3, 7], 1, 1),
    ([3, 7], 0, 0),
    ([2, 5, 4, 3], 2, 0),
    ([2, 5, 4, 3], -4, 1),
    ([4, 1], 1, 0),
    ([1, 40, 222], 2, 0),
]


def arg_pair(op: str, dtype: int, shape: list[int], axis: int, keepdims: int, last: int) -> onnx.ModelProto:
    out = [1 if k == axis % len(shape) else d for k, d in enumerate(shape) if keepdims or k != axis % len(shape)]
    node = helper.make_node(op, ["p"], ["yb"], name="arg", axis=axis, keepdims=keepdims, select_last_index=last)
    return task_b([node], [vi("p", shape, dtype)], [vi("yb", out, I64)], opset=13)


@needs_host
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1], ids=["first", "last"])
@pytest.mark.parametrize("dtype", [F32, F16, I32, I64], ids=["f32", "f16", "i32", "i64"])
def test_arg_equals_ort(op: str, last: int, dtype: int) -> None:
    """Few distinct values (ties everywhere; float32 with NaN, +-inf and -0 among them) on every case."""
    for shape, axis, keepdims in CASES:
        if len(shape) == 1 and dtype in (F32, F16) and not last:
            continue  # refused: test_rank1_float_first_index_is_refused
        m = arg_pair(op, dtype, shape, axis, keepdims, last)
        assert opcodes(m) == [Opcode.RELU] + [Opcode.CAST] * (dtype == F16) + [OPCODE[op]]
        assert_same_bits(*run_both(m, {"p": values(dtype, shape)}))


NAN = np.nan
NAN_ROWS = np.array(  # longer than two SSE packets: a vectorized reduction would take another path
    [[NAN, 1, 2, 5, 5, 0, -1, 3, 2], [1, NAN, 2, 5, NAN, 5, -1, 3, -1], [2, 2, NAN, 2, 2, 2, 2, 2, 2], [NAN] * 9],
    np.float32,
)
NAN_INDICES = {  # (op, select_last_index): each row's index
    ("ArgMax", 0): [0, 3, 0, 0],
    ("ArgMax", 1): [0, 5, 8, 0],
    ("ArgMin", 0): [0, 6, 0, 0],
    ("ArgMin", 1): [0, 8, 8, 0],
}


@needs_host
@pytest.mark.parametrize("shape", [[4, 9], [1, 4, 9], [1, 9]], ids=["rows", "batch-of-one", "a-row"])
def test_nan_first_in_a_row_wins_and_later_ones_are_passed_over(shape: list[int]) -> None:
    """ORT starts from the row's first element and takes each one above (below) it: a NaN never compares, so a NaN
    first gives 0 and a NaN later is skipped; of equal values select_last_index takes the last. The four rows at
    once, and one at a time ([1, 9]: ORT's generic loop still; a rank-1 input takes Eigen's vectorized one)."""
    per_run = int(np.prod(shape[:-1]))
    for (op, last), indices in NAN_INDICES.items():
        m = arg_pair(op, F32, shape, -1, 0, last)
        got_all: list[int] = []
        for k in range(0, len(NAN_ROWS), per_run):
            ref, got = run_both(m, {"p": NAN_ROWS[k : k + per_run].reshape(shape)})
            assert_same_bits(ref, got)
            got_all += got[1].reshape(-1).tolist()
        assert got_all == indices, (op, last)


@needs_host
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_rank1_float_first_index_is_refused(op: str) -> None:
    """ORT takes a rank-1 input to Eigen's vectorized maxCoeff/minCoeff (4 floats a packet): a NaN counts there when
    it is a packet's first lane or in the tail, and wins (measured: [1, nan, 5, 5, nan, 7, 7, -1, 0] gives 4 for
    both, not 5 and 7). The lowering refuses that case; select_last_index=1 is ORT's own loop and lowers."""
    x = np.array([1, NAN, 5, 5, NAN, 7, 7, -1, 0], np.float32)
    ref, got = run_both(arg_pair(op, F32, [9], 0, 0, 1), {"p": x})  # runs: the generic rule, 6 and 7
    assert_same_bits(ref, got)
    assert got[1].tolist() == (6 if op == "ArgMax" else 7)
    with pytest.raises(LoweringError, match="rank-1 float input"):
        opcodes(arg_pair(op, F32, [9], 0, 0, 0))


@pytest.mark.parametrize("dtype", [onnx.TensorProto.UINT8, onnx.TensorProto.INT8], ids=["u8", "i8"])
def test_arg_of_another_type_is_refused(dtype: int) -> None:
    with pytest.raises(LoweringError, match="only float32, float16, int32 or int64"):
        opcodes(arg_pair("ArgMax", dtype, [3, 7], 1, 1, 0))


def test_colocate_holds_argmax(tmp_path: Path) -> None:
    """The colocate kind kept ArgMax out of its pairs ("makes int64, not float32 or float16"): its lowering makes the
    int64 indices now, so a pair may hold a CTC head's greedy decode."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("ArgMax", ["r"], ["ids"], name="arg", axis=-1, keepdims=0),
    ]
    g = helper.make_graph(nodes, "g", [vi("x", [1, 40, 222])], [vi("ids", [1, 40], I64)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    mg = graph.load(tmp_path / "m.onnx")
    assert [unlowerable(mg, profile_graph(mg), i) for i in range(2)] == ["", ""]
