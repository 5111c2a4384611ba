"""Values that follow the input shapes inside a pair over symbolic dims: a Slice end computed from a Shape
(`position_ids[:, :seq]`, minilm's and kokoro's embeddings), made inside the pair or read from outside it, and
a Range to the sequence's length (a rotary embedding's positions: moonshine, hama) and a causal mask's Trilu of
a fill of [seq, seq] (moonshine's decoder), and a decode step's position ids `[:, past:past + new]`, their
start and end computed from the past length outside the pair. Through the pass with
symbolic batch and sequence, on the plugin at every shape the rewrite verifies; RANGE's float running sum on
the host kernel against ONNX Runtime bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_lower import HostKernel, init, needs_host, program_inputs, vi
from test_lower_exporter_ops import f32, opcodes, plugin_verified_pair, task_b_pair

from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Opcode


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


def rotary_positions(dtype: type) -> onnx.GraphProto:
    """Range(3, seq, 2) of the input's sequence length (Shape -> Gather -> Cast), unsqueezed, made float and
    multiplied by inverse frequencies, then a Cos, beside a vector branch over x: a rotary embedding's angles."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [
        helper.make_node("Shape", ["x"], ["a/shape"], name="a/shape"),
        helper.make_node("Gather", ["a/shape", "one"], ["a/seq"], name="a/seq", axis=0),
        helper.make_node("Cast", ["a/seq"], ["a/limit"], name="a/cast", to=elem),
        helper.make_node("Range", ["start", "a/limit", "delta"], ["a/pos"], name="a/range"),
        helper.make_node("Unsqueeze", ["a/pos", "axes"], ["a/pos1"], name="a/unsqueeze"),
        helper.make_node("Cast", ["a/pos1"], ["a/posf"], name="a/float", to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["a/posf", "inv_freq"], ["a/angles"], name="a/mm"),
        helper.make_node("Cos", ["a/angles"], ["ya"], name="a/cos"),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["b/m"], name="b/mul"),
        helper.make_node("ReduceMean", ["b/m"], ["yb"], name="b/mean", axes=[1], keepdims=1),
    ]
    inits = [
        init("one", np.array(1, np.int64)),
        init("start", np.array(3, dtype)),
        init("delta", np.array(2, dtype)),
        init("axes", np.array([1], np.int64)),
        init("inv_freq", f32(1, 16)),
    ]
    outputs = [vi("ya", ["positions", 16]), vi("yb", ["batch", 1, 16])]
    return helper.make_graph(nodes, "g", [vi("x", ["batch", "seq", 16])], outputs, initializer=inits)


@needs_host
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_a_range_to_the_sequence_length_pairs_on_the_plugin(tmp_path, dtype: type) -> None:
    """Range had no lowering ("outside the kernel": moonshine's rotary positions, hama's); folded from the
    Shape it was a constant of the representative length. Verified at 1x128, 2x193 and an empty sequence."""
    fused, result = plugin_verified_pair(tmp_path, rotary_positions(dtype))
    assert {"a/range", "a/mm"} <= {n.name for n in fused}
    assert result.comparison is not None and result.comparison.plugin and len(result.comparison.shapes) >= 2


@needs_host
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_range_is_a_running_sum_as_onnx_runtime_adds_it(dtype: type) -> None:
    """Range(start, limit, delta) with a run-time limit: float values are each the last plus delta (ONNX Runtime's
    loop), not start + i * delta, which differs in the last bit for steps like 0.1."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    start, delta, limit = (np.array(v, dtype) for v in ((-1.7, 0.1, 98.0) if dtype == np.float32 else (-5, 3, 2900)))
    n = int(np.ceil((float(limit) - float(start)) / float(delta)))
    node = helper.make_node("Range", ["start", "limit", "delta"], ["yb"], name="range")
    inits = [init("start", start), init("delta", delta)]
    m = task_b_pair([node], [vi("limit", [], elem)], [vi("yb", [n], elem)], inits)
    m.functions[0].value_info.append(vi("yb", [n], elem))
    assert opcodes(m) == [Opcode.RELU, Opcode.RANGE]
    feeds = {"x": f32(2, 4), "limit": limit}
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["yb"], feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))[1]
    assert got.dtype == want.dtype and got.shape == (n,)
    np.testing.assert_array_equal(got, want)
    if dtype == np.float32:  # the running sum is not numpy's start + i * delta here
        assert not np.array_equal(want, (start + np.arange(n, dtype=np.float32) * delta).astype(np.float32))


def test_a_float16_range_is_refused_by_name() -> None:
    node = helper.make_node("Range", ["start", "limit", "delta"], ["yb"], name="range")
    inits = [init(k, np.array(v, np.float16)) for k, v in (("start", 0), ("delta", 1))]
    m = task_b_pair([node], [vi("limit", [], TensorProto.FLOAT16)], [vi("yb", [4], TensorProto.FLOAT16)], inits)
    m.functions[0].value_info.append(vi("yb", [4], TensorProto.FLOAT16))
    with pytest.raises(LoweringError, match="a Range of FLOAT16: only float, int32 and int64"):
        lower_pair(m, m.graph.node[0])


def causal_mask() -> onnx.GraphProto:
    """moonshine's decoder mask: Trilu(upper, k=1) of ConstantOfShape([seq, seq], -1e9) from the input's Shape, added
    to x's scores, then a Softmax, beside a vector branch over x."""
    nodes = [
        helper.make_node("Shape", ["x"], ["a/shape"], name="a/shape", start=1, end=2),
        helper.make_node("Concat", ["a/shape", "a/shape"], ["a/dims"], name="a/dims", axis=0),
        helper.make_node(
            "ConstantOfShape", ["a/dims"], ["a/fill"], name="a/fill", value=helper.make_tensor("v", 1, [1], [-1e9])
        ),
        helper.make_node("Trilu", ["a/fill", "k"], ["a/mask"], name="a/trilu", upper=1),
        helper.make_node("Add", ["x", "a/mask"], ["a/scores"], name="a/add"),
        helper.make_node("Softmax", ["a/scores"], ["ya"], name="a/softmax", axis=-1),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["yb"], name="b/mul"),
    ]
    inits = [init("k", np.array(1, np.int64))]
    outputs = [vi("ya", ["batch", "seq", "seq"]), vi("yb", ["batch", "seq", "seq"])]
    return helper.make_graph(nodes, "g", [vi("x", ["batch", "seq", "seq"])], outputs, initializer=inits)


@needs_host
def test_a_causal_mask_over_the_sequence_pairs_on_the_plugin(tmp_path) -> None:
    """Trilu had no lowering (moonshine_tiny_decoder's first refusal once Range lowered)."""
    fused, result = plugin_verified_pair(tmp_path, causal_mask())
    assert {"a/trilu", "a/softmax"} <= {n.name for n in fused}
    assert result.comparison is not None and result.comparison.plugin and len(result.comparison.shapes) >= 2


@needs_host
@pytest.mark.parametrize("k, upper", [(0, 1), (1, 1), (-2, 1), (0, 0), (2, 0), (-1, 0), (None, 1)])
def test_trilu_keeps_the_triangle_onnx_runtime_keeps(k: int | None, upper: int) -> None:
    node = helper.make_node("Trilu", ["z", "k"] if k is not None else ["z"], ["yb"], name="trilu", upper=upper)
    inits = [init("k", np.array(k, np.int64))] if k is not None else []
    m = task_b_pair([node], [vi("z", [2, 5, 7])], [vi("yb", [2, 5, 7])], inits)
    assert opcodes(m) == [Opcode.RELU, Opcode.TRILU]
    feeds = {"x": f32(2, 4), "z": f32(2, 5, 7)}
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["yb"], feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))[1]
    np.testing.assert_array_equal(got, want)


def decode_step_positions(start: str = "a/past") -> onnx.GraphProto:
    """A decode step's position embeddings: Slice(position_ids [1, 512], past, past + new) on axis 1, with past
    = Shape(past_key)[2] and new = Shape(x)[1] computed outside the pair (ONNX Runtime runs shape arithmetic),
    gathered from a table, added to x [1, new, 16] and projected; beside a vector branch over x. `start`: the
    tensor the Slice starts at."""
    nodes = [
        helper.make_node("Shape", ["past_key"], ["a/past_shape"], name="a/past_shape"),
        helper.make_node("Gather", ["a/past_shape", "two"], ["a/past"], name="a/past", axis=0),
        helper.make_node("Shape", ["x"], ["a/x_shape"], name="a/x_shape"),
        helper.make_node("Gather", ["a/x_shape", "one"], ["a/new"], name="a/new", axis=0),
        helper.make_node("Add", ["a/past", "a/new"], ["a/limit"], name="a/limit"),
        helper.make_node("Sub", ["a/past", "one"], ["a/past_less_one"], name="a/past_less_one"),
        helper.make_node("Unsqueeze", [start, "axis0"], ["a/start"], name="a/start"),
        helper.make_node("Unsqueeze", ["a/limit", "axis0"], ["a/end"], name="a/end"),
        helper.make_node("Slice", ["position_ids", "a/start", "a/end", "axis1"], ["a/ids"], name="a/slice"),
        helper.make_node("Gather", ["table", "a/ids"], ["a/emb"], name="a/gather", axis=0),
        helper.make_node("Add", ["a/emb", "x"], ["a/sum"], name="a/add"),
        helper.make_node("MatMul", ["a/sum", "w"], ["ya"], name="a/mm"),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["b/m"], name="b/mul"),
        helper.make_node("ReduceMean", ["b/m"], ["yb"], name="b/mean", axes=[1], keepdims=1),
    ]
    inits = [
        init("one", np.array(1, np.int64)),
        init("two", np.array(2, np.int64)),
        init("axis0", np.array([0], np.int64)),
        init("axis1", np.array([1], np.int64)),
        init("position_ids", np.arange(512, dtype=np.int64)[None]),
        init("table", f32(512, 16)),
        init("w", f32(16, 64)),
    ]
    inputs = [vi("x", [1, "new", 16]), vi("past_key", [1, 2, "past", 8])]
    outputs = [vi("ya", [1, "new", 64]), vi("yb", [1, 1, 16])]
    return helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)


STEP = {"x": [1, 1, 16], "past_key": [1, 2, 15, 8]}  # one new token after 15


@needs_host
def test_a_slice_start_from_the_past_length_follows_it_on_the_plugin(tmp_path) -> None:
    """Refused before ("'a/start' must be a constant"): the start, read from outside the pair, is the past
    length, an expression of past_key's dims the shape section patches the SLICE with, and its end the start
    plus the output's length. Verified on the plugin at past lengths 15, 23 and 0."""
    fused, result = plugin_verified_pair(tmp_path, decode_step_positions(), shapes=STEP, min_gain=-1.0)
    assert {"a/slice", "a/gather", "a/mm"} <= {n.name for n in fused}
    assert result.comparison is not None and result.comparison.plugin
    pasts = {s.split("past_key=")[1].split("x")[2] for s in result.comparison.shapes}
    assert {"15", "23", "0"} <= pasts, result.comparison.shapes


def test_a_slice_start_from_the_shapes_that_may_be_negative_is_refused_by_name(tmp_path) -> None:
    """past - 1 is -1 on an empty past, where ONNX's Slice counts from the end: not patched as it is. (Its end
    is past - 1 + new, so that the original runs at other new lengths too: inspect proves at one it runs at.)"""
    from hexfuse_onnx import pipeline

    src = tmp_path / "model.onnx"
    graph = decode_step_positions("a/past_less_one")
    nodes = list(graph.node)
    at = {n.name: k for k, n in enumerate(nodes)}
    limit, less = at["a/limit"], at["a/past_less_one"]
    nodes[limit], nodes[less] = nodes[less], nodes[limit]  # the Sub first: the end reads it
    nodes[less].input[0] = "a/past_less_one"
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    analysis = pipeline.analyse(src, target="host", min_gain=-1.0, shapes=STEP)
    reasons = [r.reason for r in analysis.rejected]
    assert any("start 0 'past - 1' follows the input shapes and may be negative" in r for r in reasons), reasons


@needs_host
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_expand_of_integers_is_an_expand_as_onnx_runtime_broadcasts(dtype: type) -> None:
    """A decoder's position ids [1, new] expanded to [batch, new] (gpt2_dynamo's 8, llama_dynamo's 7 and
    whisper_decoder_with_past's 3 'does not lower': "a tensor is i64, not float32"): one EXPAND, ORT's values."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("Expand", ["z", "shape"], ["yb"], name="expand")
    m = task_b_pair(
        [node], [vi("z", [1, 5, 1], elem)], [vi("yb", [3, 5, 4], elem)], [init("shape", np.array([3, 1, 4]))]
    )
    assert opcodes(m) == [Opcode.RELU, Opcode.EXPAND]
    feeds = {"x": f32(2, 4), "z": (np.arange(5).reshape(1, 5, 1) % 2 * 7 - 3).astype(dtype)}
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["yb"], feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))[1]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def mask_to_the_batch() -> onnx.GraphProto:
    """A decoder mask m [1, new, 16] (made in the pair) expanded to x's shape [batch, new, 16], read from outside
    the pair (Shape(x), shape arithmetic), added to x and projected; beside a vector branch over x."""
    nodes = [
        helper.make_node("Shape", ["x"], ["a/shape"], name="a/shape"),
        helper.make_node("Tanh", ["m"], ["a/mask"], name="a/tanh"),
        helper.make_node("Expand", ["a/mask", "a/shape"], ["a/wide"], name="a/expand"),
        helper.make_node("Add", ["a/wide", "x"], ["a/sum"], name="a/add"),
        helper.make_node("MatMul", ["a/sum", "w"], ["ya"], name="a/mm"),
        helper.make_node("Sigmoid", ["x"], ["b/g"], name="b/sigmoid"),
        helper.make_node("Mul", ["b/g", "x"], ["b/m"], name="b/mul"),
        helper.make_node("ReduceMean", ["b/m"], ["yb"], name="b/mean", axes=[1], keepdims=1),
    ]
    inputs = [vi("x", ["batch", "new", 16]), vi("m", [1, "new", 16])]
    outputs = [vi("ya", ["batch", "new", 64]), vi("yb", ["batch", 1, 16])]
    return helper.make_graph(nodes, "g", inputs, outputs, initializer=[init("w", f32(16, 64))])


@needs_host
def test_a_float_expand_to_the_batch_is_an_expand_on_the_plugin(tmp_path) -> None:
    """At batch 1 the mask is expanded along no axis (ones [1, 1, 1]), at batch 2 along the first: the MUL by ones
    had a constant of another size at each ("its program's layout depends on the input shape": moonshine_tiny_
    decoder's mask, 9 of its 13 'does not lower' at 0 us). An EXPAND to the output's dims follows the batch."""
    fused, result = plugin_verified_pair(tmp_path, mask_to_the_batch(), min_gain=-1.0)
    assert {"a/expand", "a/mm"} <= {n.name for n in fused}
    assert result.comparison is not None and result.comparison.plugin
    assert {s.split("x=")[1].split("x")[0] for s in result.comparison.shapes} >= {"1", "2"}, result.comparison.shapes
