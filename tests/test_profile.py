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
