"""What a ninth stranger hit with the models of models/README.md's "A ninth stranger's models": a
small builder reproducing each, and the real model where it is cached (`python -m models real
fetch NAME`; skipped when not)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import init, pair_model, vi

from hexfuse_onnx import contract as C
from hexfuse_onnx import pipeline, qdq, qdq_guard, rewrite, runtime
from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR

needs_plugin = pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")


def _branches_into_a_computed_reshape() -> onnx.ModelProto:
    """Two int8 QDQ branches, each DQ -> Mul -> Q -> DQ -> Transpose, then a Reshape to a shape
    computed from the input (which no pair takes) and its QuantizeLinear: the pair of the branches
    ends at the Transposes, as DistilBERT's attention pair ends at Transpose_3 before Reshape_3. The
    second Reshape takes the first's shape, so that the Reshapes (each a merge of its branch and the
    shape) are no pair of their own."""
    c = numpy_helper.from_array
    inits = [
        c(np.array(0.05, np.float32), "s"),
        c(np.array(3, np.int8), "z"),
        c(np.array(0.1, np.float32), "s2"),
        c(np.array(-2, np.int8), "z2"),
        c(np.full([1, 64, 32], 1.5, np.float32), "m0"),
        c(np.full([1, 64, 32], -0.5, np.float32), "m1"),
        c(np.array([-1], np.int64), "tail"),
        c(np.array([0], np.int64), "i0"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "i0"], ["b"], axis=0),
        helper.make_node("Concat", ["b", "tail"], ["newshape"], axis=0),
    ]
    for i in (0, 1):
        p = f"b{i}_"
        nodes += [
            helper.make_node("DequantizeLinear", ["xq", "s", "z"], [p + "xf"]),
            helper.make_node("Mul", [p + "xf", f"m{i}"], [p + "m"]),
            helper.make_node("QuantizeLinear", [p + "m", "s", "z"], [p + "mq"]),
            helper.make_node("DequantizeLinear", [p + "mq", "s", "z"], [p + "mf"]),
            helper.make_node("Transpose", [p + "mf"], [p + "t"], perm=[0, 2, 1]),
            helper.make_node("Reshape", [p + "t", "newshape" if i == 0 else "shp1"], [p + "r"]),
            helper.make_node("QuantizeLinear", [p + "r", "s2", "z2"], [p + "rq"]),
            helper.make_node("DequantizeLinear", [p + "rq", "s2", "z2"], [p + "rf"]),
        ]
    nodes.insert(-4, helper.make_node("Shape", ["b0_rf"], ["shp1"]))  # the Reshapes then never pair
    nodes.append(helper.make_node("Add", ["b0_rf", "b1_rf"], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2048])
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)


@needs_plugin
def test_a_pair_output_ort_would_quantize_is_written_loadable(tmp_path: Path) -> None:
    """ORT's QDQ propagation renamed the pair's Transpose output to '<t>_pre_q' for the Q it
    inserts before the Reshape, and the plugin could not type it: 'rewrite --verify plugin' wrote
    and verified a model no session could load. The pass now writes that Q -> DQ itself."""
    src = tmp_path / "m.onnx"
    onnx.save(_branches_into_a_computed_reshape(), src)
    out = tmp_path / "rw.onnx"
    assert pipeline.rewrite(src, out, min_gain=0.0, verify_plugin=True).output == out
    written = onnx.load(out)
    guards = [n for n in written.graph.node if n.name.startswith(qdq_guard.PREFIX)]
    assert sorted(n.op_type for n in guards) == ["DequantizeLinear"] * 2 + ["QuantizeLinear"] * 2
    feeds = {"x": np.random.default_rng(0).standard_normal([2, 64, 32]).astype(np.float32)}
    plugin = ort.InferenceSession(str(out), runtime.session_options("host"), providers=["CPUExecutionProvider"])
    stock = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(plugin.run(None, feeds)[0], stock.run(None, feeds)[0])
    unfused = rewrite.unfuse(written)
    assert Counter(n.op_type for n in unfused.graph.node) == Counter(n.op_type for n in onnx.load(src).graph.node)


@needs_plugin
def test_a_kept_pair_is_guarded_where_an_unfused_pair_read_it(tmp_path: Path) -> None:
    """quire_tagger's run: tune kept a pair whose output another pair read (no guard: a pair is no
    Reshape), unfused that other pair, and the tuned model's Reshape -> Q then met the kept pair's
    output unguarded: no session with the plugin loaded it ('..._pre_q type inference failed'). Here
    the written pair's guards are taken off, as if a pair read its outputs, and unfusing nothing
    must put them back."""
    src = tmp_path / "m.onnx"
    onnx.save(_branches_into_a_computed_reshape(), src)
    written = onnx.load(pipeline.rewrite(src, tmp_path / "rw.onnx", min_gain=0.0).output)
    g = written.graph
    guarded = {n.output[0]: n.input[0] for n in g.node if n.name.startswith(qdq_guard.PREFIX + "q/")}
    back = {n.output[0]: guarded[n.input[0]] for n in g.node if n.name.startswith(qdq_guard.PREFIX + "dq/")}
    kept = [n for n in g.node if not n.name.startswith(qdq_guard.PREFIX)]
    for n in kept:
        n.input[:] = [back.get(t, t) for t in n.input]
    del g.node[:]
    g.node.extend(kept)
    unguarded = tmp_path / "unguarded.onnx"
    onnx.save(written, unguarded)
    with pytest.raises(Exception, match="_pre_q"):  # the failure the guard exists for
        ort.InferenceSession(str(unguarded), runtime.session_options("host"), providers=["CPUExecutionProvider"])
    again = rewrite.unfuse(written, pair_ids=set())
    assert sum(n.name.startswith(qdq_guard.PREFIX) for n in again.graph.node) == 4
    out = tmp_path / "again.onnx"
    onnx.save(again, out)
    feeds = {"x": np.random.default_rng(0).standard_normal([2, 64, 32]).astype(np.float32)}
    plugin = ort.InferenceSession(str(out), runtime.session_options("host"), providers=["CPUExecutionProvider"])
    stock = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(plugin.run(None, feeds)[0], stock.run(None, feeds)[0])


def test_no_guard_where_ort_would_not_propagate() -> None:
    """A pair output read by the Q itself, or also a graph output, is left as it is."""
    m = _branches_into_a_computed_reshape()
    g = m.graph
    pair = helper.make_node(C.OP_TYPE, ["xq"], ["b0_t", "b1_m"], domain=C.DOMAIN, name="p")
    kept = [n for n in g.node if not n.output[0].startswith(("b0_", "b1_")) or n.output[0] in ("b0_r", "b0_rq")]
    kept += [n for n in g.node if n.output[0] in ("b1_mq",)]
    del g.node[:]
    g.node.extend([pair, *kept])
    g.output.append(helper.make_tensor_value_info("b0_t", TensorProto.FLOAT, None))
    qdq_guard.guard(g)
    assert not [n for n in g.node if n.name.startswith(qdq_guard.PREFIX)]


def test_a_moved_dequantized_tensor_keeps_its_step() -> None:
    """The Transpose of a DequantizeLinear's output holds the DQ's values: a pair ending there is held
    to one step of it, not to 1e-4 relative (quire_tagger x2: 6 attention pairs one step from ORT's
    optimised run of their nodes, 1.1-1.5% of the output's range, were dropped)."""
    steps = qdq.tensor_steps(_branches_into_a_computed_reshape())
    assert steps["b0_t"] == steps["b0_r"] == pytest.approx(0.05)
    assert "b0_m" not in steps  # a Mul makes new values


def _add_group(p: str, y_scale: float) -> tuple:
    """DQ(a) + DQ(b) -> Q with u8 parameters, its output scale `y_scale`."""
    inits = [init(p + "s", np.float32(0.1)), init(p + "z", np.uint8(128)), init(p + "sy", np.float32(y_scale))]
    nodes = [
        helper.make_node("DequantizeLinear", [p + "a", p + "s", p + "z"], [p + "af"]),
        helper.make_node("DequantizeLinear", [p + "b", p + "s", p + "z"], [p + "bf"]),
        helper.make_node("Add", [p + "af", p + "bf"], [p + "sum"]),
        helper.make_node("QuantizeLinear", [p + "sum", p + "sy", p + "z"], [p + "y"]),
    ]
    ins = [vi(p + "a", [4, 8], TensorProto.UINT8), vi(p + "b", [4, 8], TensorProto.UINT8)]
    ins += [vi(t.name, [], t.data_type) for t in inits]
    return nodes, ins, [vi(p + "y", [4, 8], TensorProto.UINT8)], inits


def test_an_infinite_scale_is_refused_when_lowering() -> None:
    """khmersm_qdq_u8u8: ORT's quantiser gave the tensors after its -inf attention mask a scale of inf;
    the QAdd lowered there had an infinite ratio and the kernel refused the program at session load
    (11 x2 pairs dropped as 'the rewritten model does not load'). Now the pair does not lower, and says why."""
    a, b = _add_group("a_", 0.2), _add_group("b_", float("inf"))
    m = pair_model(a[0], b[0], a[1], b[1], a[2], b[2], a[3] + b[3], opset=19)
    with pytest.raises(LoweringError, match="scale 'b_sy' is not finite"):
        lower_pair(m, m.graph.node[0])
