"""Pairs inside If branches (hexfuse_onnx/subgraphs.py): each branch is analysed as a graph of its
own whose outer-scope values are inputs, its pairs fused inside the branch, the bodies kept as
model-local functions; stock ONNX Runtime inlines them there and the plugin runs them there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

from hexfuse_onnx import contract as C
from hexfuse_onnx import ort_graph, runtime
from hexfuse_onnx.pipeline import analyse, rewrite
from hexfuse_onnx.report import summary
from hexfuse_onnx.rewrite import unfuse
from hexfuse_onnx.runtime import session_options
from models.graph_builder import GraphBuilder

ROWS, D_IN, D_HID = 64, 256, 512


def _branch(g: GraphBuilder, prefix: str, x: str, rows: int | str) -> onnx.GraphProto:
    """A matrix chain and a vector chain from `x`, joined: two independent tasks that pair. The
    weights are the outer graph's initializers (outer-scope values of the branch)."""
    start = len(g.nodes)
    h = g.op("MatMul", [x, g.weight(f"{prefix}/w0", [D_IN, D_HID])], f"{prefix}/matmul0")
    a = g.op("MatMul", [h, g.weight(f"{prefix}/w1", [D_HID, D_HID])], f"{prefix}/matmul1")
    # the shape of a Reshape made from Constants through ops ONNX's shape inference does not evaluate
    # (Transpose), as exporters leave it in a branch: the analysis folds it, the rewrite keeps it
    column = numpy_helper.from_array(np.array([[-1], [D_IN]], np.int64))
    c = g.op("Constant", [], f"{prefix}/shape/column", value=column)
    c = g.op("Transpose", [c], f"{prefix}/shape/transpose")
    c = g.op("Reshape", [c, g.ints(f"{prefix}/shape/flat", [2])], f"{prefix}/shape/flat")
    v = g.op("Reshape", [x, c], f"{prefix}/reshape")
    v = g.op("Sigmoid", [v], f"{prefix}/sigmoid")
    v = g.op("Mul", [v, g.bias(f"{prefix}/gain", D_IN, scale=1.0)], f"{prefix}/mul")
    v = g.op("Tanh", [v], f"{prefix}/tanh")
    v = g.op("Exp", [v], f"{prefix}/exp")
    b = g.op("Softmax", [v], f"{prefix}/softmax", axis=-1)
    y = g.op("Concat", [a, b], f"{prefix}/concat", axis=1)
    nodes = g.nodes[start:]
    del g.nodes[start:]
    out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [rows, D_HID + D_IN])
    return helper.make_graph(nodes, prefix, [], [out])


def if_model(rows: int | str = ROWS, on_mean: bool = False) -> onnx.ModelProto:
    """x [rows, 256] and a bool `fast` (or, `on_mean`, whether x's mean is positive): an If whose two
    branches each hold a matrix/vector pair."""
    g = GraphBuilder("if_branches", seed=0)
    g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, D_IN]))
    g._tensor_names.add("x")
    if on_mean:
        mean = g.op("ReduceMean", ["x"], "mean", keepdims=0)
        fast = g.op("Greater", [mean, g.scalar("zero", 0.0)], "positive")
    else:
        fast = "fast"
        g.inputs.append(helper.make_tensor_value_info(fast, TensorProto.BOOL, []))
    then_branch, else_branch = _branch(g, "then", "x", rows), _branch(g, "else", "x", rows)
    g.op("If", [fast], "choose", outputs=["y"], then_branch=then_branch, else_branch=else_branch)
    g.outputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, D_HID + D_IN]))
    return g.model()


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "if_branches.onnx"
    onnx.save(if_model(), path)
    return path


def _feeds(fast: bool) -> dict[str, np.ndarray]:
    x = np.random.default_rng(1).standard_normal((ROWS, D_IN)).astype(np.float32)
    return {"x": x, "fast": np.array(fast)}


def _mean_feeds(positive: bool) -> dict[str, np.ndarray]:
    x = np.abs(np.random.default_rng(1).standard_normal((ROWS, D_IN)).astype(np.float32))
    return {"x": x if positive else -x}


def _branch_of(model: onnx.ModelProto, name: str) -> onnx.GraphProto:
    return next(a.g for n in model.graph.node if n.op_type == "If" for a in n.attribute if a.name == name)


def _pairs_in(model: onnx.ModelProto) -> dict[str, int]:
    """FusedHexPair nodes per If branch."""
    out = {}
    for n in model.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out[a.name] = sum((m.domain, m.op_type) == (C.DOMAIN, C.OP_TYPE) for m in a.g.node)
    return out


def test_analysis_finds_a_pair_in_each_branch(model_path: Path) -> None:
    a = analyse(model_path, target="host")
    assert [b.branch.label for b in a.branches] == ["then branch of If 'choose'", "else branch of If 'choose'"]
    assert [len(b.analysis.pairs) for b in a.branches] == [1, 1]
    assert not a.pairs  # the main graph holds the If alone
    text = summary(a)
    assert "then branch of If 'choose': 9 nodes" in text and "not looked at" not in text  # 3 folded


@pytest.mark.parametrize("positive", [True, False])
def test_rewrite_fuses_only_the_branch_the_inputs_take(tmp_path: Path, positive: bool) -> None:
    """The condition (mean(x) > 0) is no input to set: the branch the --inputs do not take is refused."""
    path = tmp_path / "if_mean.onnx"
    onnx.save(if_model(on_mean=True), path)
    out = tmp_path / "fused.onnx"
    result = rewrite(path, out, target="host", inputs=_mean_feeds(positive), verify_plugin=True)
    taken, untaken = ("then_branch", "else_branch") if positive else ("else_branch", "then_branch")
    fused = onnx.load(out)
    assert _pairs_in(fused) == {taken: 1, untaken: 0}
    assert [n.op_type for n in _branch_of(fused, taken).node][:3] == ["Constant", "Transpose", "Reshape"]  # kept
    onnx.checker.check_model(fused, full_check=True)
    refused = [r.reason for b in result.analysis.branches for r in b.analysis.rejected]
    assert f"in the {untaken.split('_')[0]} branch of If 'choose', which no verification input takes" in refused[0]
    assert [b.taken for b in result.analysis.branches] == [positive, not positive]


def test_a_bool_input_condition_is_set_to_verify_both_branches(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "fused.onnx"
    result = rewrite(model_path, out, target="host", inputs=_feeds(True), verify_plugin=True)
    assert _pairs_in(onnx.load(out)) == {"then_branch": 1, "else_branch": 1}
    assert result.comparison is not None
    taking = "x=64x256, fast=scalar (set to take the else branch of If 'choose': fast=False)"  # its value said
    assert result.comparison.shapes[-1] == taking


def test_rewritten_branch_runs_on_stock_ort_and_on_the_plugin(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "fused.onnx"
    rewrite(model_path, out, target="host", inputs=_feeds(True))
    original = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    stock = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for fast in (True, False):
        want = original.run(None, _feeds(fast))[0]
        assert np.array_equal(stock.run(None, _feeds(fast))[0], want)
    trace = tmp_path / "trace-{node}.json"
    plugin = ort.InferenceSession(
        str(out), sess_options=session_options("host", trace=str(trace)), providers=["CPUExecutionProvider"]
    )
    got = plugin.run(None, _feeds(True))[0]
    want = original.run(None, _feeds(True))[0]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert list(tmp_path.glob("trace-*.json")), "the plugin's kernel did not run the pair in the branch"


def test_stock_ort_runs_the_original_branches(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "fused.onnx"
    rewrite(model_path, out, target="host", inputs=_feeds(True))
    assert sum(_pairs_in(onnx.load(out)).values()) >= 1
    assert ort_graph.difference(model_path, out) is None


def test_a_changed_branch_is_another_graph(model_path: Path, tmp_path: Path) -> None:
    m = onnx.load(model_path)
    softmax = next(n for a in m.graph.node[-1].attribute for n in a.g.node if n.op_type == "Softmax")
    softmax.attribute[0].i = 0
    onnx.save(m, tmp_path / "changed.onnx")
    assert "If" in (ort_graph.difference(model_path, tmp_path / "changed.onnx") or "")


def test_unfuse_restores_the_branches(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "fused.onnx"
    rewrite(model_path, out, target="host", inputs=_feeds(False))
    original = onnx.load(model_path)
    restored = unfuse(onnx.load(out))
    assert not restored.functions
    assert [o.domain for o in restored.opset_import] == [o.domain for o in original.opset_import]
    for got, want in zip(restored.graph.node, original.graph.node):
        for a, b in zip(got.attribute, want.attribute):
            assert [n.SerializeToString() for n in a.g.node] == [n.SerializeToString() for n in b.g.node]  # in order
    onnx.checker.check_model(restored, full_check=True)
    # InferenceSession without the plugin gives ORT the model unfused: pairs in branches count
    unfused = onnx.load_from_string(runtime.unfused_source(str(out), onnx.load(out)))  # type: ignore[arg-type]
    assert not unfused.functions


def test_symbolic_rows_stay_free_in_the_branches(tmp_path: Path) -> None:
    """With x [rows, 256] the random cases (fast=False) and the --inputs (fast=True) take both
    branches: both are fused, and verified at rows 64 and 128 on stock ORT and on the plugin. The
    If's branches as written carry no dim of the analysed binding (shape inference's value_info)."""
    path = tmp_path / "if_rows.onnx"
    onnx.save(if_model("rows"), path)
    out = tmp_path / "fused.onnx"
    result = rewrite(path, out, target="host", inputs=_feeds(True), verify_plugin=True)
    assert result.comparison is not None and "x=128x256, fast=scalar" in result.comparison.shapes
    assert [b.taken for b in result.analysis.branches] == [True, True]
    fused = onnx.load(out)
    assert _pairs_in(fused) == {"then_branch": 1, "else_branch": 1}
    assert fused.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "rows"
    for a in fused.graph.node[0].attribute:
        assert all(not v.type.tensor_type.HasField("shape") for v in a.g.value_info)


@pytest.mark.slow
def test_silero_vad_pairs_in_both_branches(tmp_path: Path) -> None:
    """Silero VAD v6: its network sits in an If on the sample rate. Given 16 kHz inputs (--inputs) the
    then branch is taken; the seeded random case (sr 0 or 1, at the 256 samples it runs at) takes
    the 8 kHz else branch. Each branch pairs its STFT's real and imaginary halves (4+4 vector
    nodes), found once the Pad's constant pads are folded for the analysis (call overhead 0 here)."""
    path = cached_or_skip("silero_vad")
    rng = np.random.default_rng(0)
    feeds = {
        "input": (0.1 * rng.standard_normal((1, 512))).astype(np.float32),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array(16000, np.int64),
    }
    out = tmp_path / "silero.fused.onnx"
    result = rewrite(path, out, target="host", inputs=feeds, verify_plugin=True)
    assert [b.taken for b in result.analysis.branches] == [True, True]
    assert [len(b.analysis.pairs) for b in result.analysis.branches] == [1, 1]
    assert _pairs_in(onnx.load(out)) == {"then_branch": 1, "else_branch": 1}
    restored = unfuse(onnx.load(out))
    original = onnx.load(path)
    for got, want in zip(restored.graph.node[2].attribute, original.graph.node[2].attribute):
        assert [n.SerializeToString() for n in got.g.node] == [n.SerializeToString() for n in want.g.node]  # in order
