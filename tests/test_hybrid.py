"""`colocate --hybrid` (issue 14): one exported decoder serving a prefill and a decode request.

The hybrid model's two halves must give the decoder's own outputs for their request (stock ONNX
Runtime op for op, the pairs' function bodies: exact; the plugin: 1e-4), and the decode half must continue
what the prefill half started: fed the prefill's present cache and next token, it picks the token
greedy generation on the decoder alone picks.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from cli_support import assert_mentions, error_line, listing, run_cli, sha256
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import fold, graph, hybrid, runtime, verify
from hexfuse_onnx.contract import DOMAIN
from models.exported import MODELS, decoder_spec, empty_cache, generate, input_shapes, next_cache, step_feeds

pytestmark = pytest.mark.slow  # model generation, QNN emulation, whole decoders

EXIT_USAGE, EXIT_BAD_MODEL = 2, 3
PLUGIN_RTOL = 1e-4
# A second chunk of 8 after 8 cached tokens; the decode's past is the prefill's whole cache, so the
# decode half can take the step after the prefill half.
REQUESTS = hybrid.Requests(prefill=8, prefill_past=8, past=16)


# the torch exports, then the exports whose attention is one op (com.microsoft MultiHeadAttention,
# GroupQueryAttention, opset-23 Attention), which lowering/attention.py runs
DECODERS = ["gpt2_dynamo", "llama_dynamo", "gpt2_torchscript", "llama_torchscript"]
FUSED_ATTENTION = {  # the attention op, and the export's norm or rotary op beside it
    "gpt2_mha_contrib": ("MultiHeadAttention", "SkipLayerNormalization"),
    "llama_gqa_contrib": ("GroupQueryAttention", "SkipSimplifiedLayerNormalization"),
    "llama_attention23": ("Attention", "RotaryEmbedding"),
}
# On the host target one attention op is one ORT kernel call unfused and its parts fused, which does
# not pay (calibrate: gpt_decode_step_contrib's pair 238 us fused, 236 us serial): those exports are
# paired for the tool's default target, whose plugin still runs here.
TARGET = {name: "hexagon-v73" for name in FUSED_ATTENTION}
ATTENTION_CORES = ("Softmax", "Attention", "MultiHeadAttention", "GroupQueryAttention")


@pytest.fixture(scope="module", params=DECODERS + list(FUSED_ATTENTION))
def built(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp(name) / "hybrid.onnx"
    result = hybrid.hybrid(MODELS[name].path, out, REQUESTS, target=TARGET.get(name, "host"))
    return name, out, result


def _stock(path) -> object:
    """Stock ORT without the fusions that change once shapes are constant (colocate.check_outputs)."""
    return verify.session(path, verify.unoptimised_options())


def _own_outputs(name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = _stock(MODELS[name].path)
    out: dict[str, np.ndarray] = {}
    for half in (hybrid.PREFILL, hybrid.DECODE):
        own = {a.name: feeds[f"{half}/{a.name}"] for a in s.get_inputs()}
        names = [o.name for o in s.get_outputs()]
        out |= {f"{half}/{n}": v for n, v in zip(names, s.run(names, own))}
    return out


def _run(session, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def test_each_half_gives_the_decoders_own_outputs(built):
    name, out, result = built
    assert result.rewrite.output == out and result.compared_outputs == 2 * len(
        onnx.load(MODELS[name].path).graph.output
    )
    model = onnx.load(out)
    assert any(n.domain == DOMAIN for n in model.graph.node)
    assert result.merged.plan.shared_weights == len(onnx.load(MODELS[name].path).graph.initializer)
    _assert_each_requests_outputs(name, out)


def test_pairs_meet_the_same_layers(built):
    """Each pair is the same layers' blocks of both requests: as many attention cores (Softmax, or
    the one attention op) on each side, projections (MatMul/Gemm) and a fused export's norm or
    rotary ops within the decode's extra final norm and LM-head row."""
    name, out, _ = built
    companion = FUSED_ATTENTION.get(name, ("", ""))[1]
    paired = 0
    for f in onnx.load(out).functions:
        count = {
            (half, ops): sum(n.op_type in ops and n.name.startswith(half) for n in f.node)
            for half in ("prefill/", "decode/")
            for ops in (ATTENTION_CORES, ("MatMul", "Gemm"), companion)
        }
        assert count["prefill/", ATTENTION_CORES] == count["decode/", ATTENTION_CORES], (f.overload, count)
        for ops in (("MatMul", "Gemm"), companion):
            assert abs(count["prefill/", ops] - count["decode/", ops]) <= 1, (f.overload, count)
        paired += count["prefill/", ATTENTION_CORES]
    assert paired >= 1


def test_the_decode_half_continues_the_prefill(built):
    """Greedy generation of the decoder alone on a 16-token prompt, against: the decoder on the first
    chunk, the hybrid's prefill half on the second (its next token), then the hybrid's decode half
    on the prefill half's cache (the token after)."""
    name, out, _ = built
    spec = decoder_spec(MODELS[name].path)
    first_chunk = verify.session(MODELS[name].path)
    prompt = np.random.default_rng(7).integers(0, spec.vocab, (1, REQUESTS.prefill_past + REQUESTS.prefill), np.int64)
    alone = generate(first_chunk, spec, prompt, steps=2)
    chunk = _request(spec, prompt[:, : REQUESTS.prefill_past], {}, 0)
    cache = dict(zip([o.name for o in first_chunk.get_outputs()], first_chunk.run(None, chunk)))
    feeds = hybrid.inputs(MODELS[name].path, REQUESTS, seed=1)  # the decode half's first request: any
    feeds |= _request(spec, prompt[:, REQUESTS.prefill_past :], cache, REQUESTS.prefill_past, hybrid.PREFILL)
    for session in (verify.session(out), runtime.InferenceSession(out, backend="host")):
        first = _run(session, feeds)
        prefilled = {k.removeprefix(f"{hybrid.PREFILL}/"): v for k, v in first.items()}
        token = prefilled[spec.logits][:, -1:].argmax(-1)
        step = feeds | _request(spec, token, prefilled, REQUESTS.past, hybrid.DECODE)
        after = _run(session, step)[f"{hybrid.DECODE}/{spec.logits}"][:, -1:].argmax(-1)
        assert np.array_equal(np.concatenate([token, after], axis=1), alone)


def _request(spec, ids: np.ndarray, present: dict, past: int, half: str = "") -> dict[str, np.ndarray]:
    """Feeds of one request: `ids` after `past` cached tokens whose keys/values are `present`'s."""
    cache = next_cache(spec, present) if present else empty_cache(spec, 1)
    prefix = f"{half}/" if half else ""
    return {prefix + k: v for k, v in step_feeds(spec, ids, cache, past).items()}


def _one_request(tmp_path, name: str) -> str:
    """The decoder with its dims fixed to one decode step (1 token after 15), as a QNN QDQ model has them."""
    path = MODELS[name].path
    model = onnx.load(path)
    want = input_shapes(decoder_spec(path), 1, 15)
    for v in model.graph.input:
        for d, size in zip(v.type.tensor_type.shape.dim, want[v.name]):
            d.Clear()
            d.dim_value = size
    del model.graph.value_info[:]
    onnx.save(model, tmp_path / "decode_step.onnx")
    return tmp_path / "decode_step.onnx"


@pytest.mark.parametrize("case", ["not a decoder", "prefill of one token", "fixed lengths"])
def test_cli_refuses_with_one_line_and_writes_nothing(zoo_dir, tmp_path, case):
    src, out = zoo_dir / "mlp_chain.onnx", tmp_path / "out"
    out.mkdir()
    before = sha256(src)
    if case == "not a decoder":
        proc = run_cli("colocate", "--hybrid", src, "-o", out / "h.onnx", "-q")
        code, words = EXIT_BAD_MODEL, ["--hybrid", "decoder", "past_key_values"]
    elif case == "fixed lengths":  # it failed the full checker after the merge ("Incompatible dimensions")
        proc = run_cli("colocate", "--hybrid", _one_request(tmp_path, "llama_attention23"), "-o", out / "h.onnx")
        code, words = EXIT_BAD_MODEL, ["--hybrid", "free", "input_ids to 1x1", "needs 1x64", "--requests 2"]
    else:
        proc = run_cli("colocate", "--hybrid", MODELS["gpt2_dynamo"].path, "--prefill", "1", "-o", out / "h.onnx")
        code, words = EXIT_USAGE, ["--prefill", "decode step"]
    assert proc.returncode == code, proc.stderr
    assert_mentions(error_line(proc), *words)
    assert listing(out) == []
    assert sha256(src) == before


def test_specialise_folds_integer_shape_work_and_nothing_else(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceProd", ["s"], ["total"], keepdims=1),
        helper.make_node("Reshape", ["x", "total"], ["y"]),  # its target becomes an initializer
        helper.make_node("Cast", ["s"], ["z"], to=TensorProto.FLOAT),  # float: stays computed
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y, z]), opset_imports=[helper.make_opsetid("", 18)], ir_version=8
    )
    fixed, folded = fold.specialise(model, {"x": [3, 4]})
    assert len(folded) == 2  # Shape and ReduceProd
    assert [n.op_type for n in fixed.graph.node] == ["Reshape", "Cast"]
    assert {t.name: numpy_helper.to_array(t).tolist() for t in fixed.graph.initializer} == {"s": [3, 4], "total": [12]}
    assert [d.dim_value for d in fixed.graph.input[0].type.tensor_type.shape.dim] == [3, 4]
    assert [n.op_type for n in model.graph.node][0] == "Shape"  # the input model is left as it was
    onnx.save(model, tmp_path / "a.onnx")
    onnx.save(fixed, tmp_path / "b.onnx")
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    for ref, got in zip(
        verify.session(tmp_path / "a.onnx").run(None, feeds), verify.session(tmp_path / "b.onnx").run(None, feeds)
    ):
        assert np.array_equal(ref, got)


def test_specialise_folds_the_unsqueeze_the_reference_evaluator_cannot_run(tmp_path):
    """ddddocr_ocr (opset 12) x2 --freeze-shapes exited 70: onnx's reference evaluator raises on an
    Unsqueeze whose axes are an attribute. numpy computes it (stranger11), and what depends on it folds."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    rest = numpy_helper.from_array(np.array([-1], np.int64), "rest")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]),
        helper.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], [zero, rest]), opset_imports=[helper.make_opsetid("", 12)], ir_version=7
    )
    fixed, folded = fold.specialise(model, {"x": [2, 4]})
    assert len(folded) == 4  # Shape, Gather, Unsqueeze and Concat
    assert [n.op_type for n in fixed.graph.node] == ["Reshape"]
    onnx.save(model, tmp_path / "a.onnx")
    onnx.save(fixed, tmp_path / "b.onnx")
    feeds = {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}
    ref, got = (verify.session(tmp_path / name).run(None, feeds)[0] for name in ("a.onnx", "b.onnx"))
    assert np.array_equal(ref, got)


def _anchors(start: float) -> onnx.ModelProto:
    """A YOLO head's anchors: a float Range over the map's width (cast from its shape), plus 0.5."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "h", "w"])
    consts = [
        numpy_helper.from_array(np.array(v, dtype), n)
        for n, v, dtype in [
            ("three", [3], np.int64),
            ("start", start, np.float32),
            ("step", 1.0, np.float32),
            ("half", 0.5, np.float32),
        ]
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "three"], ["wi"], axis=0),
        helper.make_node("Squeeze", ["wi"], ["wi0"]),
        helper.make_node("Cast", ["wi0"], ["wf"], to=TensorProto.FLOAT),
        helper.make_node("Range", ["start", "wf", "step"], ["r"]),
        helper.make_node("Add", ["r", "half"], ["anchors"]),
        helper.make_node("Add", ["x", "anchors"], ["y"]),
    ]
    graph_ = helper.make_graph(nodes, "anchors", [x], [y], consts)
    return helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@pytest.mark.parametrize(("start", "folded"), [(0.0, True), (0.1, False)])
def test_specialise_folds_a_range_of_whole_numbers(tmp_path, start, folded):
    """nudenet_320n's anchors (Range outside the kernel, 11 candidates) folded at fixed dims; a
    Range of fractions is left computed (ORT adds its step, numpy multiplies: the floats differ)."""
    model = _anchors(start)
    fixed, _ = fold.specialise(model, {"x": [1, 2, 3, 24]})
    ops = [n.op_type for n in fixed.graph.node]
    assert ("Range" not in ops and "Cast" not in ops) if folded else "Range" in ops
    onnx.save(model, tmp_path / "a.onnx")
    onnx.save(fixed, tmp_path / "b.onnx")
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 2, 3, 24)).astype(np.float32)}
    ref, got = (verify.session(tmp_path / name).run(None, feeds)[0] for name in ("a.onnx", "b.onnx"))
    assert np.array_equal(ref, got)


def test_rewrite_freeze_shapes_folds_what_the_dims_decide(tmp_path):
    """rewrite --freeze-shapes left nudenet's anchors a run-time Range, which colocate folds."""
    onnx.save(_anchors(0.0), tmp_path / "a.onnx")
    g = graph.load(tmp_path / "a.onnx", {"x": [1, 2, 3, 24]}, freeze_shapes=True)
    assert "Range" not in [n.op_type for n in g.nodes]
    assert "Range" in [n.op_type for n in graph.load(tmp_path / "a.onnx", {"x": [1, 2, 3, 24]}).nodes]


def test_cli_hybrid_writes_the_model_and_its_report(tmp_path):
    out, report = tmp_path / "h.onnx", tmp_path / "h.json"
    args = ["--prefill", "8", "--prefill-past", "8", "--past", "16", "--target", "host", "--json", report]
    proc = run_cli("colocate", "--hybrid", "gpt2_dynamo", "-o", out, *args, "-q")
    assert proc.returncode == 0, proc.stderr
    assert "lies inside pairs" in proc.stdout
    doc = json.loads(report.read_text())
    assert doc["colocate"]["hybrid"] == {"prefill": 8, "prefill_past": 8, "past": 16}
    assert doc["colocate"]["streams"] == ["prefill/", "decode/"] and doc["pairs"]
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in onnx.load(out).graph.input}
    assert dims["prefill/input_ids"] == [1, 8] and dims["decode/past_key_values.0.key"] == [1, 4, 16, 16]


def test_cli_hybrid_runs_without_the_zoo(tmp_path):
    """An installed package has no `models/` (the zoo ships with the source tree): --hybrid on a decoder
    file reads its signature with hexfuse_onnx.decoder (a stranger's pip install ended in exit 2 saying
    to run from a checkout). `models` is made unimportable in the CLI's process."""
    out = tmp_path / "h.onnx"
    args = ["colocate", "--hybrid", str(MODELS["gpt2_dynamo"].path), "-o", str(out), "--target", "host", "-q"]
    args += ["--prefill", "8", "--prefill-past", "8", "--past", "16"]
    code = f"import sys; sys.modules['models'] = None; from hexfuse_onnx import cli; sys.exit(cli.main({args!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert onnx.load(out).graph.input[0].name.startswith("prefill/")


def test_cli_hybrid_decode_priority_bounds_the_decode(tmp_path):
    """--priority decode (B): the decode request is latency-critical; its modelled latency grows <= 5%.
    A stranger's `--priority decode` was refused: only a and b were names."""
    out, report = tmp_path / "h.onnx", tmp_path / "h.json"
    args = ["--prefill", "8", "--past", "16", "--target", "host", "--priority", "decode", "--json", report, "-q"]
    assert run_cli("colocate", "--hybrid", "gpt2_dynamo", "-o", out, *args).returncode == 0
    doc = json.loads(report.read_text())["colocate"]
    assert doc["priority"] == 1
    modelled = doc["modelled"]
    assert modelled["stream_colocated_us"]["decode/"] <= 1.05 * modelled["stream_alone_us"]["decode/"] * (1 + 1e-9)


def _assert_each_requests_outputs(name: str, out) -> None:
    """Stock ORT gives each request exactly the decoder's own outputs; the plugin within PLUGIN_RTOL."""
    feeds = hybrid.inputs(MODELS[name].path, REQUESTS, seed=5)
    expected = _own_outputs(name, feeds)
    stock = _run(_stock(out), feeds)
    plugin = _run(runtime.InferenceSession(out, backend="host"), feeds)
    assert sorted(stock) == sorted(expected)
    for k, ref in expected.items():
        assert np.array_equal(stock[k], ref), k
        assert verify.relative_error(ref, plugin[k]) <= PLUGIN_RTOL, k


def test_a_seq2seq_decoder_serves_a_prefill_and_a_decode(tmp_path):
    """optimum's seq2seq decoders (Whisper, Moonshine, T5) name the caches past_key_values.N.decoder.key and
    past_key_values.N.encoder.key (cross-attention): a stranger's Moonshine decoder was refused ("no complete
    past_key_values.N.key/value per layer"). Each request's cross-attention cache is its own encoder's."""
    from models.exported import SPEECH

    path = SPEECH["whisper_decoder_with_past"].path  # 64 positions: the requests stay within them
    spec = decoder_spec(path)
    assert (spec.layers, len(spec.cross), spec.cross_heads, spec.encoder_length) == (2, 2, 4, 64)
    with pytest.raises(ValueError, match="seq2seq"):
        generate(None, spec, np.zeros((1, 1), np.int64), 1)
    requests = hybrid.Requests(prefill=16, prefill_past=4, past=32)
    out = tmp_path / "h.onnx"
    result = hybrid.hybrid(path, out, requests, target="host", verify_plugin=True)
    assert result.rewrite.output == out and result.rewrite.analysis.pairs
    feeds = hybrid.inputs(path, requests, seed=5)
    own, merged = _stock(path), _run(_stock(out), feeds)
    for half in (hybrid.PREFILL, hybrid.DECODE):
        names = [o.name for o in own.get_outputs()]
        mine = own.run(names, {a.name: feeds[f"{half}/{a.name}"] for a in own.get_inputs()})
        for name, ref in zip(names, mine):
            assert np.array_equal(merged[f"{half}/{name}"], ref), (half, name)


@pytest.mark.parametrize("prefill_past", [4, 0], ids=["chunk-after-past", "first-chunk"])
def test_a_merged_decoder_pairs_the_branches_its_requests_take(tmp_path, prefill_past):
    """optimum's merged decoder holds both steps under an If on use_cache_branch: two copies of it paired
    nothing (a stranger's Moonshine). Each request runs the branch it takes (the prefill's first-step branch
    without a past) as a model of its own; the hybrid model has no switch and gives each request what the
    merged decoder gives it."""
    from models.exported import SPEECH

    path = SPEECH["whisper_decoder_merged"].path
    requests = hybrid.Requests(prefill=16, prefill_past=prefill_past, past=32)
    out, said = tmp_path / "h.onnx", []
    result = hybrid.hybrid(path, out, requests, target="host", verify_plugin=True, progress=said.append)
    assert result.rewrite.output == out and result.rewrite.analysis.pairs
    assert not [line for line in said if "still symbolic" in line]  # an empty past is fixed at 0, not free
    feeds = hybrid.inputs(path, requests, seed=5)
    served = _stock(out)
    taken = {a.name for a in served.get_inputs()}
    assert not any(name.endswith("use_cache_branch") for name in taken)
    merged = _run(served, {k: v for k, v in feeds.items() if k in taken})
    own = _stock(path)
    names = [o.name for o in own.get_outputs()]
    for half in (hybrid.PREFILL, hybrid.DECODE):
        mine = own.run(names, {a.name: feeds[f"{half}/{a.name}"] for a in own.get_inputs()})
        for name, ref in zip(names, mine):
            assert np.array_equal(merged[f"{half}/{name}"], ref), (half, name)
    assert listing(tmp_path) == ["h.onnx"]  # the branches' temporary models are gone
