"""The plugin's check of a QDQ model, decomposed (pipeline._check_decomposed): the original with each
pair output fed in (verify.shadow_model) runs beside the plugin's run, so each pair is held to ORT
computing its own nodes on the very inputs it saw, and the rest of the model to ORT's own ops on the
same values. Real models, the real plugin."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import contract as C
from hexfuse_onnx import pipeline, runtime, verify
from hexfuse_onnx.kinds import Pair, kind_of
from hexfuse_onnx.lowering import lower_pair, set_program
from models import quantized

needs_plugin = pytest.mark.skipif(
    not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(),
    reason=f"{runtime.LIB_DIR / runtime.PLUGIN_NAME} not built: run `bash custom_ops/build.sh`",
)
ROOT = Path(__file__).resolve().parents[1]


def _body(name: str, reads: str) -> onnx.GraphProto:
    """A branch or loop body reading the outer graph's `reads` (uint8), giving it out plus one."""
    one = helper.make_tensor(f"{name}/one", TensorProto.UINT8, [], [1])
    nodes = [helper.make_node("Add", [reads, f"{name}/one"], [f"{name}/y"])]
    out = helper.make_tensor_value_info(f"{name}/y", TensorProto.UINT8, None)
    return helper.make_graph(nodes, name, [], [out], initializer=[one])


def _model() -> onnx.ModelProto:
    """x -> QuantizeLinear q (a graph output too) -> DequantizeLinear -> Relu -> r; an If whose
    branches and a Loop whose body read q from the outer scope; a tensor already named q__ort."""
    s, z = numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.uint8(10), "z")
    loop_body = helper.make_graph(
        [helper.make_node("Add", ["q", "loop/one"], ["loop/y"]), helper.make_node("Identity", ["c"], ["c_out"])],
        "loop",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("loop/y", TensorProto.UINT8, None),
        ],
        initializer=[helper.make_tensor("loop/one", TensorProto.UINT8, [], [2])],
    )
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node("Identity", ["x"], ["q__ort"]),
        helper.make_node("If", ["cond"], ["b"], then_branch=_body("then", "q"), else_branch=_body("else", "q")),
        helper.make_node("Loop", ["trips", ""], ["l"], body=loop_body),
    ]
    g = helper.make_graph(
        nodes,
        "shadowed",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("trips", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("q", TensorProto.UINT8, [4]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("b", TensorProto.UINT8, None),
            helper.make_tensor_value_info("l", TensorProto.UINT8, None),
            helper.make_tensor_value_info("q__ort", TensorProto.FLOAT, [4]),
        ],
        initializer=[s, z],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def test_the_shadow_feeds_a_pair_output_to_every_reader_and_gives_ort_s_own() -> None:
    """verify.shadow_model: the tensor fed in reaches its readers in the main graph, in If branches
    and in a Loop body (through the outer scope); ORT's own value comes out renamed (the name taken
    already, a longer suffix), and the graph output it was is replaced by that."""
    model, renamed = verify.shadow_model(_model(), ["q"], {"q": np.dtype(np.uint8)})
    assert renamed == {"q": "q__ort_"}
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["r", "b", "l", "q__ort", "q__ort_"]
    x = np.float32([-1.0, 0.0, 1.0, 2.5])
    fed = np.uint8([12, 9, 200, 10])  # not QuantizeLinear(x): the readers must follow it
    for cond in (True, False):
        r, b, looped, _, own = session.run(
            None, {"x": x, "cond": np.array(cond), "trips": np.array(2, np.int64), "q": fed}
        )
        assert np.array_equal(own, np.uint8([8, 10, 12, 15]))  # ORT's QuantizeLinear of x
        assert np.array_equal(r, np.maximum((fed.astype(np.float32) - 10) * 0.5, 0))
        assert np.array_equal(b, fed + 1)
        assert np.array_equal(looped, np.stack([fed + 2] * 2))


def test_one_step_is_one_step_at_any_value_the_float_holds() -> None:
    """A dequantized float one step apart is within the bar whatever its magnitude: mlp_chain u16u8's
    softmax, step 1.526e-5, gave 0.023025865 and 0.023010604 in f32, 1.0001 steps apart (its pair was
    refused at 1 + 1e-5); 1.5 steps, two steps of a u16 tensor or a NaN lost are still refused."""
    step, ref = np.float32(1.5259022e-05), np.float32([0.023025865, 0.5, 1.0])
    assert verify.within_step(ref, np.float32([0.023010604, 0.5, 1.0]), float(step))
    assert verify.within_step(ref, ref + np.float32([0, step, -step]), float(step))
    assert not verify.within_step(ref, ref + np.float32([1.5 * step, 0, 0]), float(step))
    assert not verify.within_step(np.float32([0.5, np.nan]), np.float32([0.5, 0.5]), float(step))
    assert verify.within_step(np.uint16([3, 9]), np.uint16([4, 8]), 1.0)
    assert not verify.within_step(np.uint16([3, 9]), np.uint16([5, 9]), 1.0)


def test_a_pair_output_the_original_does_not_make_is_said() -> None:
    from hexfuse_onnx.errors import VerificationError

    with pytest.raises(VerificationError, match="makes no tensor 'x' in its main graph"):
        verify.shadow_model(_model(), ["x"], {"x": np.dtype(np.float32)})


def _prepared(name: str) -> tuple[Path, pipeline.Analysis, pipeline.Reference]:
    if not quantized.base_available(name):
        pytest.skip(f"needs python -m models real fetch {quantized.get(name).base}")
    src = quantized.fetch(name)
    analysis = pipeline.analyse(src)
    reference = pipeline._reference(src, analysis.graph, False, None, pipeline._quiet)
    assert not pipeline._lower_new(analysis, {}, reference.second)
    return src, analysis, reference


def _outputs(pair: Pair) -> list[str]:
    """The original's tensors the pair's outputs stand for."""
    assert pair.call is not None
    return [kind_of(pair).original_tensor(pair.id, t) for t in pair.call.node.output]


def _make_wrong(model: onnx.ModelProto, original: onnx.ModelProto, pair: Pair, made: str) -> None:
    """Make the pair's value of `made` wrong, in that pair's node only (its program lowered again):
    a QuantizeLinear's output gets a zero point 2 above the model's (2 steps off, whatever reads it);
    a DequantizeLinear's a scale 4 times the model's in the pair (its Q and DQ share it: the value
    rounded to a grid 4 steps wide)."""
    node = next(n for n in model.graph.node if n.domain == C.DOMAIN and n.overload == pair.id)
    maker = next(
        n for n in original.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear") and made in n.output
    )
    name = maker.input[2 if maker.op_type == "QuantizeLinear" else 1]
    value = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)
    if maker.op_type == "QuantizeLinear":
        assert int(value.max()) + 2 <= np.iinfo(value.dtype).max  # no wrap
        value = value + value.dtype.type(2)
    else:
        value = value * np.float32(4)
    model.graph.initializer.append(numpy_helper.from_array(value, name + "_wrong"))
    node.input[:] = [name + "_wrong" if t == name else t for t in node.input]  # a micro-batch pair's both copies
    keep = [a for a in node.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
    del node.attribute[:]
    node.attribute.extend(keep)
    set_program(node, lower_pair(model, node))


@needs_plugin
@pytest.mark.parametrize(
    ("name", "graph_output"),
    [("gpt_decode_step_qdq_u8u8", True), ("fsmn_vad_qdq_u8u8", False)],
    ids=["pair-output-is-a-graph-output", "micro-batch-concat"],
)
def test_a_wrong_pair_is_named_and_the_right_ones_pass(name: str, graph_output: bool, tmp_path: Path) -> None:
    """Every pair of the model passes the decomposed check in one plugin session and one of the
    shadow (then the application's session); with one pair's QuantizeLinear given a zero point 2
    above the model's, exactly that pair output is named, steps from ORT computing the pair's nodes
    on the same inputs (`_make_wrong`).
    gpt_decode_step's wrong pair makes a graph output (prefill_present_key, dequantized);
    fsmn_vad's is a micro-batch pair, whose output is the whole tensor its Concat makes (mha_encoder's
    micro-batch pairs were, until its Q/DQ nodes QMATMUL runs as nothing stopped costing: branch qdqcharge)."""
    _, analysis, reference = _prepared(name)
    outputs = {o.name for o in analysis.graph.model.graph.output}
    wrong, made = next(
        (p, t)
        for p in analysis.pairs
        for t in _outputs(p)
        if (t in outputs) == graph_output and (graph_output or p.kind == "microbatch" and t in reference.quantized)
    )
    right = tmp_path / "right.onnx"
    onnx.save(pipeline._fuse_all(analysis, reference), right)
    sessions: list[int] = []
    real_session = verify.session

    def counted(model: str | bytes, extra: ort.SessionOptions | None = None) -> ort.InferenceSession:
        sessions.append(1)
        return real_session(model, extra)

    reference.exact_cases()  # sessions of the original, made once and counted apart
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verify, "session", counted)
        mp.setattr(pipeline, "ort_session", counted)
        steps = pipeline._verify_plugin(right, reference, 0.0).steps
    assert len(sessions) == 3  # the plugin's, the shadow's, the plugin's as an application makes it
    assert steps is not None and set(steps) <= outputs and max(steps.values()) <= 1
    model = pipeline._fuse_all(analysis, reference)
    _make_wrong(model, analysis.graph.model, wrong, made)
    staged = tmp_path / "wrong.onnx"
    onnx.save(model, staged)
    with pytest.raises(pipeline.PluginMismatch, match="ORT computing the pair's nodes on the same inputs") as caught:
        pipeline._verify_plugin(staged, reference, 0.0)
    assert made in caught.value.off and set(caught.value.off) <= set(_outputs(wrong))  # its other outputs may share it
    steps = "2" if made in reference.quantized else r"[1-9][.0-9]*"  # a zero point 2 up; a grid 4 steps wide
    assert re.search(rf"is {steps} quantization steps from", caught.value.off[made]), caught.value.off
    dropped = pipeline._off_in_place(analysis, caught.value, pipeline._quiet)
    assert [r.candidate for r in dropped] == [wrong.candidate]


@needs_plugin
def test_a_node_outside_the_pairs_that_differs_is_refused_and_blames_no_pair(tmp_path: Path) -> None:
    """The rest of the model is held to ORT's own ops fed the pairs' outputs, at the stock bar:
    mha_encoder u8u8's final DequantizeLinear (no pair's) given a scale 1% off in the rewritten model
    fails there, naming the graph output and no pair, so the pass does not drop a pair for it."""
    _, analysis, reference = _prepared("mha_encoder_qdq_u8u8")
    model = pipeline._fuse_all(analysis, reference)
    last = next(n for n in model.graph.node if n.output[0] == "y")
    assert last.op_type == "DequantizeLinear" and last.domain != C.DOMAIN
    scale = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == last.input[1])
    model.graph.initializer.append(numpy_helper.from_array(scale * np.float32(1.01), "y_scale_off"))
    last.input[1] = "y_scale_off"
    staged = tmp_path / "off.onnx"
    onnx.save(model, staged)
    with pytest.raises(pipeline.PluginMismatch, match="output 'y' differs from ORT's own ops fed the pairs") as caught:
        pipeline._verify_plugin(staged, reference, 1e-5)
    assert caught.value.off == {}
    assert pipeline._off_in_place(analysis, caught.value, pipeline._quiet) == []


@needs_plugin
@pytest.mark.slow  # a real model (about 10 s under load)
def test_a_pair_fed_a_wrong_pair_s_output_is_not_blamed(tmp_path: Path) -> None:
    """centerface u16u8: the pair joining at the graph outputs (float DequantizeLinear outputs) reads
    another pair's output. That one made 2 steps off, only it is named: the pair after it computes
    what ORT computes on the same wrong values. (centerface u8u8's pairs did so until its Q/DQ nodes
    that QCONV2D runs as nothing stopped costing, branch qdqcharge: none of its pairs reads another's.)"""
    _, analysis, reference = _prepared("centerface_qdq_u16u8")
    made = {t: p for p in analysis.pairs for t in _outputs(p)}
    reader, feeder, fed = next(
        (p, made[t], t) for p in analysis.pairs if p.call is not None for t in p.call.node.input if t in made
    )
    assert reader is not feeder and fed in reference.quantized
    model = pipeline._fuse_all(analysis, reference)
    _make_wrong(model, analysis.graph.model, feeder, fed)
    staged = tmp_path / "wrong.onnx"
    onnx.save(model, staged)
    with pytest.raises(pipeline.PluginMismatch) as caught:
        pipeline._verify_plugin(staged, reference, 0.0)
    assert list(caught.value.off) == [fed]


def _qdq_if_model() -> onnx.ModelProto:
    """tests/test_subgraphs.py's If model with x quantized and dequantized first: a QDQ model whose
    pairs lie in the If branches."""
    from tests.test_subgraphs import if_model

    model = if_model()
    g = model.graph
    g.initializer.extend(
        [numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.uint8(128), "xz")]
    )
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                for m in a.g.node:
                    m.input[:] = ["x_dq" if t == "x" else t for t in m.input]
    g.node.insert(0, helper.make_node("DequantizeLinear", ["x_q", "xs", "xz"], ["x_dq"]))
    g.node.insert(0, helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["x_q"]))
    return model


@needs_plugin
def test_pairs_in_if_branches_of_a_qdq_model_are_held_end_to_end(tmp_path: Path) -> None:
    """A QDQ model whose pairs are in If branches: their outputs are not fed to the shadow, so its
    graph outputs are held to the end-to-end bar (PLUGIN_RTOL or one step), and the rewrite keeps them."""
    from tests.test_subgraphs import _feeds

    src = tmp_path / "if_qdq.onnx"
    onnx.save(_qdq_if_model(), src)
    result = pipeline.rewrite(src, tmp_path / "fused.onnx", target="host", inputs=_feeds(True), verify_plugin=True)
    assert result.output is not None and [b.analysis.pairs for b in result.analysis.branches if b.analysis.pairs]
    fused = onnx.load(result.output)
    assert pipeline._pairs_in_bodies(fused) and not pipeline._pair_outputs(result.output)
    assert result.comparison is not None and result.comparison.plugin_steps == {}


@needs_plugin
@pytest.mark.parametrize("name", ["llama_gqa_contrib_decode_qdq_u16u8", "llama_gqa_contrib_prefill_qdq_u8u8"])
def test_colocated_requests_pass_the_decomposed_check(name: str, tmp_path: Path) -> None:
    """`colocate --requests 2 --verify plugin` on a QDQ decoder step (u16) and a prefill whose past
    is empty (EMPTY_MEANS_ABSENT): the pair is kept, and the JSON says how far the outputs are from
    the original in steps."""
    src = quantized.fetch(name)
    out, report = tmp_path / "two.onnx", tmp_path / "two.json"
    cmd = [sys.executable, "-m", "hexfuse_onnx", "colocate", str(src), "--requests", "2", "--verify", "plugin"]
    done = subprocess.run([*cmd, "-o", str(out), "--json", str(report), "-q"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    doc = json.loads(report.read_text())
    assert out.exists() and doc["pairs"], doc.get("rejected")
    model = onnx.shape_inference.infer_shapes(onnx.load(out))
    assert set(doc["verification"]["plugin_output_steps"]) <= {o.name for o in model.graph.output}
    assert doc["verification"]["plugin_verified"] is True
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info}
    read = [t for n in model.graph.node if n.domain == C.DOMAIN for t in n.input if 0 in dims.get(t, [1])]
    assert bool(read) == ("prefill" in name)  # a pair reads the empty past (EMPTY_MEANS_ABSENT)


def _steep_tail(folder: Path) -> Path:
    """A float model shaped like a DB text detector's head: Conv (bias 30) + BatchNormalization
    (mean 30), which ORT fuses into one Conv, so its own rounding of the Conv's output (4e-6 at
    30) is cancelled only with its graph optimisations off; Relu -> Exp | Erf -> Add, a branches
    pair whose exp and erf are 1-2 ulp from MLAS's on some inputs; then Sin(1000 j), which grows
    both differences beyond PLUGIN_RTOL (a detector's steep Sigmoid does only near its threshold)."""
    rng = np.random.default_rng(0)
    channels = 16
    consts = {
        "w": rng.standard_normal((channels, channels, 1, 1)).astype(np.float32) / 4,
        "bias": np.full(channels, 30, np.float32),
        "gamma": np.ones(channels, np.float32),
        "beta": np.zeros(channels, np.float32),
        "mean": np.full(channels, 30, np.float32),
        "var": np.ones(channels, np.float32),
        "steep": np.array(1000.0, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "bias"], ["c"], name="conv"),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["f"], name="fork"),
        helper.make_node("Exp", ["f"], ["a"], name="exp"),
        helper.make_node("Erf", ["f"], ["b"], name="erf"),
        helper.make_node("Add", ["a", "b"], ["j"], name="join"),
        helper.make_node("Mul", ["j", "steep"], ["m"], name="steepen"),
        helper.make_node("Sin", ["m"], ["y"], name="sin"),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, channels, 64, 16]) for n in ("x", "y")]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    model = helper.make_model(
        helper.make_graph(nodes, "steep_tail", io[:1], io[1:], inits), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, folder / "steep.onnx")
    return folder / "steep.onnx"


@needs_plugin
def test_a_right_pair_grown_as_ort_s_own_spread_is_kept_with_the_bar_stated(tmp_path: Path) -> None:
    """ppocr_det (PP-OCRv4's DB head) with the plugin was refused every pair, 54 in 315 s: its graph
    output missed PLUGIN_RTOL while the pairs' own outputs agreed within 2e-6, and ORT with its graph
    optimisations off misses the same output by as much. A float model's plugin run is now judged as
    a QDQ model's (each pair output against ORT computing the pair's nodes on the same inputs, the rest
    against ORT's own ops on them), and end to end within SPREAD_MULTIPLE x ORT's own spread, which the
    report and the written model's metadata state with the error measured."""
    src = _steep_tail(tmp_path)
    session = verify.session(src)
    feeds = verify.random_inputs(session)
    case = verify.run_original(session, feeds)
    spread = verify.optimisation_spread(src, [case])
    assert spread > pipeline.PLUGIN_RTOL  # ORT's own rounding, grown by the tail
    lines: list[str] = []
    out = tmp_path / "out.onnx"
    result = pipeline.rewrite(src, out, target="host", verify_plugin=True, progress=lines.append)
    assert result.output == out and [p.candidate.note for p in result.analysis.pairs] == ["fork 'fork' -> join 'join'"]
    c = result.comparison
    assert c is not None and c.plugin_bar == pipeline.SPREAD_MULTIPLE * c.ort_spread
    assert c.plugin_error is not None and pipeline.PLUGIN_RTOL < c.plugin_error <= c.plugin_bar
    from hexfuse_onnx.report import plugin_line

    assert f"its outputs are {c.plugin_error:.2e} relative from the original's, within {c.plugin_bar:.2e}" in (
        plugin_line(c)
    )
    stamp = next(p.value for p in onnx.load(out).metadata_props if p.key == C.METADATA_VERIFICATION)
    doc = json.loads(stamp)
    assert (doc["plugin_relative_error"], doc["plugin_bar"]) == (c.plugin_error, c.plugin_bar)
    assert doc["ort_optimisation_spread"] == c.ort_spread and doc["rtol"] == verify.DEFAULT_RTOL
    from hexfuse_onnx.rewrite import unfuse

    assert not any(p.key == C.METADATA_VERIFICATION for p in unfuse(onnx.load(out)).metadata_props)
    assert not any(line.startswith("dropping") for line in lines)


@needs_plugin
def test_a_wrong_float_pair_is_still_refused(tmp_path: Path) -> None:
    """The bar of ORT's spread is the end-to-end one only: a pair whose own output is off (its Erf
    made a Tanh in its program) is refused, its output named against ORT computing its nodes on the
    same inputs, and not as grown (its halves are tried); the right pair passes the same check."""
    src = _steep_tail(tmp_path)
    analysis = pipeline.analyse(src, target="host")
    reference = pipeline._reference(src, analysis.graph, False, None, pipeline._quiet)
    assert not pipeline._lower_new(analysis, {}, reference.second)
    (pair,) = analysis.pairs
    model = pipeline._fuse_all(analysis, reference)
    right = tmp_path / "right.onnx"
    onnx.save(model, right)
    assert pipeline._verify_plugin(right, reference, verify.DEFAULT_RTOL).bar is not None
    node = next(n for n in model.graph.node if n.domain == C.DOMAIN)
    body = next(f for f in model.functions if f.overload == node.overload)
    next(n for n in body.node if n.op_type == "Erf").op_type = "Tanh"
    keep = [a for a in node.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
    del node.attribute[:]
    node.attribute.extend(keep)
    set_program(node, lower_pair(model, node))
    wrong = tmp_path / "wrong.onnx"
    onnx.save(model, wrong)
    with pytest.raises(pipeline.PluginMismatch, match="ORT computing the pair's nodes on the same inputs") as caught:
        pipeline._verify_plugin(wrong, reference, verify.DEFAULT_RTOL)
    assert set(_outputs(pair)) == {"a", "b"}  # its branches' outputs: Exp's right, Erf's off
    assert not caught.value.grown  # shorter pairs over its span are offered
    assert re.search(r"\(pair output 'b' is [.0-9e-]+ relative \(> 0.0001\) from", caught.value.message)
