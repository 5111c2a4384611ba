"""Values that follow the input shapes inside a pair over symbolic dims: a Slice end computed from a Shape
(`position_ids[:, :seq]`, minilm's and kokoro's embeddings), made inside the pair or read from outside it.
Through the pass with symbolic batch and sequence, on the plugin at every shape the rewrite verifies."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_lower import init, needs_host, vi
from test_lower_exporter_ops import f32, plugin_verified_pair, task_b_pair

from hexfuse_onnx.lowering import LoweringError, lower_pair


def position_embeddings(shape_outside: bool) -> onnx.GraphProto:
    """A BERT embedding's positions: Slice(position_ids [1, 512], 0, Shape(ids)[1]) gathered from a table and
    added to x, then a MatMul, beside a vector branch over x. The Shape is in the pair (folded when lowering, a
    value of the representative binding) or, read by a graph output too, outside it (a run-time input)."""
    nodes = [
        helper.make_node("Shape", ["ids"], ["a/seq"], name="a/shape", start=1, end=2),
        helper.make_node("Slice", ["position_ids", "zero", "a/seq", "one"], ["a/pos"], name="a/slice"),
        helper.make_node("Gather", ["table", "a/pos"], ["a/pe"], name="a/gather"),
        helper.make_node("Add", ["x", "a/pe"], ["a/sum"], name="a/add"),
        helper.make_node("MatMul", ["a/sum", "w"], ["ya"], name="a/mm"),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["b/m"], name="b/mul"),
        helper.make_node("ReduceMean", ["b/m"], ["yb"], name="b/mean", axes=[1], keepdims=1),
    ]
    inits = [
        init("position_ids", np.arange(512, dtype=np.int64)[None]),
        init("zero", np.array([0], np.int64)),
        init("one", np.array([1], np.int64)),
        init("table", f32(512, 16)),
        init("w", f32(16, 64)),
    ]
    outputs = [vi("ya", ["batch", "seq", 64]), vi("yb", ["batch", 1, 16])]
    outputs += [vi("a/seq", [1], TensorProto.INT64)] if shape_outside else []
    inputs = [vi("ids", ["batch", "seq"], TensorProto.INT64), vi("x", ["batch", "seq", 16])]
    return helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)


@needs_host
@pytest.mark.parametrize("shape_outside", [False, True], ids=["shape-in-pair", "shape-outside"])
def test_a_slice_end_from_a_shape_follows_the_sequence_on_the_plugin(tmp_path, shape_outside: bool) -> None:
    """Refused before: a run-time end "must be a constant" (minilm_int8 18 candidates, kokoro 6), and one folded
    from the Shape held the representative length, so the second shape verified refused the pair."""
    fused, result = plugin_verified_pair(tmp_path, position_embeddings(shape_outside))
    assert {"a/slice", "a/gather", "a/mm"} <= {n.name for n in fused}
    assert ("a/shape" in {n.name for n in fused}) != shape_outside
    assert result.comparison is not None and result.comparison.plugin and len(result.comparison.shapes) >= 2
    dims = onnx.load(result.output).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["batch", "seq"]


def test_a_run_time_slice_end_with_a_step_is_refused_by_name() -> None:
    node = helper.make_node("Slice", ["z", "start", "end", "axis", "step"], ["yb"], name="slice")
    inits = [init(k, np.array([v], np.int64)) for k, v in (("start", 0), ("axis", 1), ("step", 2))]
    m = task_b_pair([node], [vi("z", [3, 10]), vi("end", [1], TensorProto.INT64)], [vi("yb", [3, 4])], inits)
    with pytest.raises(LoweringError, match="only from a start >= 0 with step 1"):
        lower_pair(m, m.graph.node[0])
