"""The resource profile counts the bytes an op moves: a gather only the rows it picks; a QDQ group's
DequantizeLinear and QuantizeLinear nodes only where the lowering runs them."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import graph
from hexfuse_onnx.costmodel import get_target, serial_time
from hexfuse_onnx.profile import Engine, profile_graph

VOCAB, HIDDEN, TOKENS = 30522, 384, 128


def _embedding_lookup(table_is_weight: bool) -> graph.ModelGraph:
    """input_ids [1, 128] -> Gather rows of a [30522, 384] table (a weight, or computed at run time)."""
    table = numpy_helper.from_array(np.zeros((VOCAB, HIDDEN), np.float32), "table")
    nodes = [helper.make_node("Gather", ["table" if table_is_weight else "scaled", "ids"], ["y"], name="lookup")]
    if not table_is_weight:
        nodes.insert(0, helper.make_node("Relu", ["table_in"], ["scaled"], name="dequant"))
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, TOKENS])]
    if not table_is_weight:
        inputs.append(helper.make_tensor_value_info("table_in", TensorProto.FLOAT, [VOCAB, HIDDEN]))
    g = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, TOKENS, HIDDEN])],
        initializer=[table] if table_is_weight else [],
    )
    return graph.index_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_gather_reads_the_rows_it_returns_not_the_table() -> None:
    rows = TOKENS * HIDDEN * 4
    for table_is_weight in (True, False):
        g = _embedding_lookup(table_is_weight)
        lookup = next(i for i, n in enumerate(g.nodes) if n.op_type == "Gather")
        profile = profile_graph(g)
        p = profile.nodes[lookup]
        assert p.bytes_in == rows + TOKENS * 8 and p.bytes_out == rows
        assert p.weight_bytes == (rows if table_is_weight else 0)
        assert p.footprint <= 2 * rows + TOKENS * 8
        task = profile.task([lookup])
        assert task is not None and task.ops[0].ddr_bytes == p.bytes_in + p.bytes_out


def _qdq_matmul(activations: int) -> graph.ModelGraph:
    """x -> DQ, W [256, 512] u8 -> DQ -> MatMul -> Q, activations u8 (a QMATMUL group) or u16 (the
    float path: the weight's DequantizeLinear writes its f32 copy on chip)."""
    narrow = np.uint8 if activations == TensorProto.UINT8 else np.uint16
    inits = [
        numpy_helper.from_array(np.zeros((256, 512), np.uint8), "w"),
        numpy_helper.from_array(np.array(0.01, np.float32), "s"),
        numpy_helper.from_array(np.array(0, np.uint8), "zw"),
        numpy_helper.from_array(np.array(0, narrow), "z"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["w", "s", "zw"], ["wf"], name="dq_w"),
        helper.make_node("MatMul", ["xf", "wf"], ["yf"], name="mm"),
        helper.make_node("QuantizeLinear", ["yf", "s", "z"], ["y"], name="q_y"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", activations, [8, 256])],
        [helper.make_tensor_value_info("y", activations, [8, 512])],
        initializer=inits,
    )
    return graph.index_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))


def test_an_8_bit_matrix_group_holds_no_f32_copy_of_its_weight() -> None:
    weight_f32 = 256 * 512 * 4
    for activations, on_chip in ((TensorProto.UINT8, 0), (TensorProto.UINT16, weight_f32)):
        g = _qdq_matmul(activations)
        profile = profile_graph(g)
        by_name = {g.nodes[i].name: p for i, p in profile.nodes.items()}
        assert by_name["dq_w"].footprint == on_chip
        assert by_name["mm"].footprint == (8 * 256 + 8 * 512) * 4 + on_chip


def test_an_8_bit_matrix_group_runs_as_its_op_alone() -> None:
    """QMATMUL reads and writes the integers: the group's DequantizeLinear and QuantizeLinear nodes
    cost nothing, the op streams the u8 weight, reads x and writes y as u8 and requantizes y; a u16
    group runs its Q/DQ nodes (DEQUANTIZE_LINEAR, QUANTIZE_LINEAR ops around an f32 MatMul)."""
    target = get_target("hexagon-v73")
    for activations, width in ((TensorProto.UINT8, 1), (TensorProto.UINT16, 2)):
        g = _qdq_matmul(activations)
        profile = profile_graph(g)
        by_name = {g.nodes[i].name: p for i, p in profile.nodes.items()}
        qdq = [by_name[n] for n in ("dq_x", "dq_w", "q_y")]
        task = profile.task(list(range(len(g.nodes))))
        assert task is not None
        mm = next(op for op in task.ops if op.op_type == "MatMul")
        if width == 1:
            assert all(p.engine == Engine.NONE for p in qdq)
            assert mm.weight_bytes == 256 * 512 and mm.flops == 2 * 8 * 512 * 256 + 8 * 512 * 3
            assert mm.ddr_bytes == 256 * 512 + 8 * 256 + 8 * 512  # the u8 weight, x and y
            shared = profile.task([i for i, n in enumerate(g.nodes) if n.name != "dq_x"])  # dq_x copied in
            assert shared is not None and sum(op.ddr_bytes for op in shared.ops) == mm.ddr_bytes
            assert serial_time(task, target) == serial_time(type(task).of([mm]), target)
        else:
            assert all(p.engine == Engine.VECTOR and p.flops > 0 for p in qdq)


def _qdq_group(op: str, narrow: int, shape: list[int], out_shape: list[int], **attrs: object) -> graph.ModelGraph:
    """DQ(a) [, DQ(b)] -> op -> Q of one narrow type, per-tensor parameters; Add and Concat take a and b,
    Resize its scales [1, 1, 2, 2], Relu follows Add (QADD folds it)."""
    np_type = {TensorProto.UINT8: np.uint8, TensorProto.UINT16: np.uint16}[narrow]
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "s"),
        numpy_helper.from_array(np.array(3, np_type), "z"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    binary = op in ("Add", "Concat")
    inputs = {"Add": ["af", "bf"], "Concat": ["af", "bf"], "Resize": ["af", "", "scales"]}.get(op, ["af"])
    nodes = [helper.make_node("DequantizeLinear", ["a", "s", "z"], ["af"], name="dq_a")]
    if binary:
        nodes.append(helper.make_node("DequantizeLinear", ["b", "s", "z"], ["bf"], name="dq_b"))
    nodes.append(helper.make_node(op, inputs, ["yf"], name="op", **attrs))
    if op == "Add":
        nodes.append(helper.make_node("Relu", ["yf"], ["rf"], name="relu"))
    nodes.append(helper.make_node("QuantizeLinear", [nodes[-1].output[0], "s", "z"], ["y"], name="q_y"))
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(t, narrow, shape) for t in ("ab" if binary else "a")],
        [helper.make_tensor_value_info("y", narrow, out_shape)],
        initializer=inits,
    )
    return graph.index_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))


GROUPS = {  # an 8-bit group of each integer op the lowering has (lowering/qeltwise.py)
    "QADD": ("Add", [1, 8, 16, 16], [1, 8, 16, 16], {}),
    "QLUT": ("Sigmoid", [1, 8, 16, 16], [1, 8, 16, 16], {}),
    "QMAXPOOL": ("MaxPool", [1, 8, 16, 16], [1, 8, 8, 8], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "QGLOBAL_AVGPOOL": ("GlobalAveragePool", [1, 8, 16, 16], [1, 8, 1, 1], {}),
    "QCONCAT": ("Concat", [1, 8, 16, 16], [1, 16, 16, 16], {"axis": 1}),
    "QRESIZE": ("Resize", [1, 8, 16, 16], [1, 8, 32, 32], {"mode": "nearest"}),
    "QSOFTMAX": ("Softmax", [1, 8, 16, 16], [1, 8, 16, 16], {"axis": -1}),
}


@pytest.mark.parametrize("kind", sorted(GROUPS))
def test_an_8_bit_elementwise_group_runs_as_its_integer_op_alone(kind: str) -> None:
    """The lowering runs each such group as one integer op (QADD with the Relu folded, QLUT, ...):
    its DequantizeLinear and QuantizeLinear nodes cost nothing, its op moves the u8 tensors from
    and to DDR; a u16 group keeps its Q/DQ nodes (the float path) and their cost."""
    op, shape, out_shape, attrs = GROUPS[kind]
    for narrow in (TensorProto.UINT8, TensorProto.UINT16):
        g = _qdq_group(op, narrow, shape, out_shape, **attrs)
        profile = profile_graph(g)
        task = profile.task(list(range(len(g.nodes))))
        assert task is not None
        working = [op.op_type for op in task.ops if op.engine != Engine.NONE]
        if narrow == TensorProto.UINT16:
            assert {"DequantizeLinear", "QuantizeLinear"} <= set(working), working
            continue
        assert working == [op], working
        reads = (2 if op in ("Add", "Concat") else 1) * int(np.prod(shape)) + (16 if op == "Resize" else 0)  # scales
        assert sum(p.ddr_bytes for p in task.ops) == reads + int(np.prod(out_shape))


@pytest.mark.parametrize("kind", sorted(set(GROUPS) - {"QADD"}))  # QADD's: a Relu reads the Add, no group
def test_a_16_bit_group_prices_its_op_in_f32(kind: str) -> None:
    """A u16 group runs DEQUANTIZE_LINEAR, the f32 op and QUANTIZE_LINEAR (no integer op takes 16 bits
    but a move): the op's work at the f32 rate and its tensors' f32 bytes, as it runs, not at 16 bits
    (the int16 vector rate and 2 bytes an element before branch u16gemm)."""
    op, shape, out_shape, attrs = GROUPS[kind]
    g = _qdq_group(op, TensorProto.UINT16, shape, out_shape, **attrs)
    p = profile_graph(g).nodes[next(i for i, n in enumerate(g.nodes) if n.name == "op")]
    reads = (2 if op in ("Add", "Concat") else 1) * int(np.prod(shape)) * 4 + (16 if op == "Resize" else 0)
    assert (p.int_bits, p.bytes_in, p.bytes_out) == (0, reads, int(np.prod(out_shape)) * 4)


def test_a_16_bit_move_between_equal_qdq_runs_on_the_integers() -> None:
    """A Transpose between a u16 DequantizeLinear and QuantizeLinear of equal parameters runs on the
    u16 integers (`qeltwise._move`): 2 bytes an element, its Q/DQ nodes cost nothing."""
    g = _qdq_group("Transpose", TensorProto.UINT16, [1, 8, 16, 4], [1, 4, 16, 8], perm=[0, 3, 2, 1])
    profile = profile_graph(g)
    by_name = {g.nodes[i].name: p for i, p in profile.nodes.items()}
    assert by_name["op"].int_bits == 16 and by_name["op"].bytes_out == 2 * 8 * 16 * 4
    assert by_name["dq_a"].engine == by_name["q_y"].engine == Engine.NONE


@pytest.mark.parametrize(
    ("mode", "engine", "per_output"),
    [("linear", Engine.VECTOR, 9), ("cubic", Engine.VECTOR, 40), ("nearest", Engine.MEMORY, 0)],
)
def test_an_interpolating_resize_costs_its_taps_per_output(mode: str, engine: Engine, per_output: int) -> None:
    """A linear Resize blends 2x2 taps per output, a cubic 4x4: priced as an Add's one FLOP per element, the
    calibrated fit put convnet_heads' 14 us Resize at 2 us."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode=mode)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])],
        initializer=[scales],
    )
    profile = profile_graph(graph.index_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])))
    assert profile.nodes[0].engine == engine
    assert profile.nodes[0].flops == per_output * 8 * 32 * 32
