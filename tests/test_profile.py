"""The resource profile counts the bytes an op moves: a gather only the rows it picks."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import graph
from hexfuse_onnx.profile import profile_graph

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
