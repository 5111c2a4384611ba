"""Two requests of a merged decoder (one If on a bool graph input: optimum's `use_cache_branch`)
co-located per combination of the streams' conditions (hexfuse_onnx/colocate_ifs.py): each of the
four a flat co-located model of the branches it takes, nested in Ifs on the two conditions."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import ERROR_PREFIX, run_cli, sha256
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import contract as C
from hexfuse_onnx import verify
from hexfuse_onnx.colocate_ifs import colocate_switched, switch_of, taken
from hexfuse_onnx.nested import all_nodes
from hexfuse_onnx.runtime import session_options

ROWS, WIDTH, LAYERS = 64, 256, 3


def _branch(name: str, first_step: bool) -> onnx.GraphProto:
    """A chain of MatMuls over the main graph's weights (outer-scope values) and one weight of its
    own; the first step and the decode step differ in their activation and how they join `past`."""
    own = numpy_helper.from_array(np.full((WIDTH,), 0.5 if first_step else 2.0, np.float32), f"{name}/gain")
    nodes, x = [], "x"
    for k in range(LAYERS):
        nodes.append(helper.make_node("MatMul", [x, f"w{k}"], [f"{name}/mm{k}"], name=f"{name}/mm{k}"))
        act = "Relu" if first_step else "Tanh"
        nodes.append(helper.make_node(act, [f"{name}/mm{k}"], [f"{name}/act{k}"], name=f"{name}/act{k}"))
        x = f"{name}/act{k}"
    nodes.append(helper.make_node("Mul", [x, own.name], [f"{name}/scaled"], name=f"{name}/scaled"))
    join = "Add" if first_step else "Mul"
    nodes.append(helper.make_node(join, [f"{name}/scaled", "past"], [f"{name}/y"], name=f"{name}/y"))
    out = helper.make_tensor_value_info(f"{name}/y", TensorProto.FLOAT, [ROWS, WIDTH])
    return helper.make_graph(nodes, name, [], [out], [own])


def merged_decoder(condition: str = "bool") -> onnx.ModelProto:
    """x, past [64, 256] and `use_cache_branch` ("bool": a bool input read by the If; "cast": an
    int64 input Cast to bool; "computed": the If reads whether x's mean is positive)."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) / 16).astype(np.float32), f"w{k}")
        for k in range(LAYERS)
    ]
    flag = helper.make_tensor_value_info(
        "use_cache_branch", TensorProto.INT64 if condition == "cast" else TensorProto.BOOL, [1]
    )
    nodes = []
    if condition == "cast":
        nodes.append(helper.make_node("Cast", ["use_cache_branch"], ["cond"], to=TensorProto.BOOL, name="cast"))
    elif condition == "computed":
        weights.append(numpy_helper.from_array(np.zeros((), np.float32), "zero"))
        nodes.append(helper.make_node("ReduceMean", ["x"], ["mean"], keepdims=0, name="mean"))
        nodes.append(helper.make_node("Greater", ["mean", "zero"], ["cond"], name="positive"))
    cond = "use_cache_branch" if condition == "bool" else "cond"
    branches = {"then_branch": _branch("step", False), "else_branch": _branch("first", True)}
    nodes.append(helper.make_node("If", [cond], ["y"], name="optimum::if", **branches))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [ROWS, WIDTH]) for n in ("x", "past")]
    graph = helper.make_graph(
        nodes,
        "merged_decoder",
        inputs + [flag],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, WIDTH])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _stream_feeds(seed: int, step: bool, condition: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, past = (rng.standard_normal((ROWS, WIDTH)).astype(np.float32) for _ in range(2))
    flag = np.array([step], np.int64 if condition == "cast" else bool)
    return {"x": x, "past": past, "use_cache_branch": flag}


def _feeds(conditions: tuple[bool, bool], condition: str = "bool") -> tuple[dict[str, np.ndarray], list[dict]]:
    """The co-located model's feeds at two streams' conditions, and each stream's own."""
    own = [_stream_feeds(k + 1, c, condition) for k, c in enumerate(conditions)]
    return {f"r{k}/{n}": v for k, f in enumerate(own) for n, v in f.items()}, own


@pytest.fixture(scope="module", params=["bool", "cast"])
def colocated(request, tmp_path_factory) -> tuple[Path, Path, object, str]:
    folder = tmp_path_factory.mktemp("switched")
    source = folder / "merged_decoder.onnx"
    onnx.save(merged_decoder(request.param), source)
    switch = switch_of(onnx.load(source))
    assert switch is not None
    out = folder / "x2.onnx"
    result = colocate_switched(source, out, switch, target="host")
    return source, out, result, request.param


def test_each_combination_gives_the_original_run_twice(colocated) -> None:
    source, out, _, condition = colocated
    onnx.checker.check_model(str(out), full_check=True)
    original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    stock = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for conditions in itertools.product((True, False), repeat=2):
        feeds, own = _feeds(conditions, condition)
        got = stock.run(["r0/y", "r1/y"], feeds)
        for k, want in enumerate(original.run(["y"], f)[0] for f in own):
            assert np.array_equal(got[k], want), (conditions, k)


def test_every_combination_holds_its_own_pairs(colocated) -> None:
    _, out, result, _ = colocated
    pairs = [c.pairs for c in result.combinations]
    assert min(pairs) >= 1, pairs
    model = onnx.load(out)
    assert [n.op_type for n in model.graph.node][-1] == "If" and len(model.graph.output) == 2
    calls = [n for n in all_nodes(model.graph) if (n.domain, n.op_type) == (C.DOMAIN, C.OP_TYPE)]
    bodies = {f.overload for f in model.functions if f.domain == C.DOMAIN}
    assert len(calls) == sum(pairs) and {n.overload for n in calls} == bodies and len(bodies) == sum(pairs)
    halves = [a.g for a in model.graph.node[-1].attribute]
    for half in halves:  # the weights, once per half: where ORT prepacks them for the leaves
        assert {t.name for t in half.initializer} >= {"shared/w0", "shared/w1", "shared/w2"}


def test_the_plugin_runs_the_pairs_in_the_nested_branches(colocated, tmp_path: Path) -> None:
    source, out, result, condition = colocated
    original = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    trace = tmp_path / "trace-{node}.json"
    plugin = ort.InferenceSession(
        str(out), sess_options=session_options("host", trace=str(trace)), providers=["CPUExecutionProvider"]
    )
    for conditions in itertools.product((True, False), repeat=2):
        feeds, own = _feeds(conditions, condition)
        got = plugin.run(["r0/y", "r1/y"], feeds)
        for k, want in enumerate(original.run(["y"], f)[0] for f in own):
            assert np.abs(got[k] - want).max() <= 1e-4 * np.abs(want).max(), (conditions, k)
    traced = len(list(tmp_path.glob("trace-*.json")))
    assert traced == sum(c.pairs for c in result.combinations), "the kernel did not run every combination's pairs"


def test_only_an_if_on_a_graph_input_is_a_switch() -> None:
    assert switch_of(merged_decoder("bool")).chain == []  # type: ignore[union-attr]
    through_cast = switch_of(merged_decoder("cast"))
    assert through_cast is not None and through_cast.source == "use_cache_branch"
    assert [n.op_type for n in through_cast.chain] == ["Cast"]
    assert switch_of(merged_decoder("computed")) is None


def test_the_command_line_reports_each_combination(tmp_path: Path) -> None:
    source = tmp_path / "merged_decoder.onnx"
    onnx.save(merged_decoder("bool"), source)
    before = sha256(source)
    report = tmp_path / "x2.json"
    r = run_cli("colocate", source, "--requests", "2", "--target", "host", "-o", tmp_path / "x2.onnx", "--json", report)
    assert r.returncode == 0, r.stderr
    doc = json.loads(report.read_text())["colocate"]
    assert doc["switch"] == "use_cache_branch" and len(doc["combinations"]) == 4
    assert "specialised on the graph input 'use_cache_branch'" in r.stdout
    for label in ("r0 then, r1 then", "r0 then, r1 else", "r0 else, r1 then", "r0 else, r1 else"):
        assert re.search(rf"{label}: [1-9]\d* pair\(s\) kept", r.stdout), r.stdout
    assert sha256(source) == before
    missing = run_cli("colocate", source, "--requests", "2", "-o", tmp_path / "nope" / "x2.onnx", "-q")
    assert missing.returncode == 5 and missing.stderr.count(ERROR_PREFIX) == 1, missing.stderr
    assert "output folder" in missing.stderr and "nope does not exist" in missing.stderr


def test_a_refused_branch_is_named_by_the_file_given(tmp_path: Path) -> None:
    """A FusedHexPair node in the first step (a rewritten model): refused (exit 3) in one line naming
    the user's file and the branch, not the temporary file the branch was co-located from."""
    model = merged_decoder("bool")
    body = next(a.g for a in model.graph.node[-1].attribute if a.name == "else_branch")
    y = body.output[0].name
    body.node.append(helper.make_node(C.OP_TYPE, [y], ["fused"], name="fused", domain=C.DOMAIN))
    body.output[0].name = "fused"
    source = tmp_path / "fused_decoder.onnx"
    onnx.save(model, source)
    r = run_cli("colocate", source, "--requests", "2", "-o", tmp_path / "x2.onnx", "-q")
    assert r.returncode == 3 and r.stderr.count(ERROR_PREFIX) == 1, r.stderr
    assert f"{source} (else branch): already rewritten" in r.stderr
    assert not list(tmp_path.glob(".x2.onnx*")) and not (tmp_path / "x2.onnx").exists()


def test_a_branch_taken_keeps_the_condition_it_reads() -> None:
    """The inlined branch drops the condition's Cast, unless the branch itself reads the condition."""
    model = merged_decoder("cast")
    switch = switch_of(model)
    assert switch is not None
    assert [n.op_type for n in taken(model, switch, True).graph.node].count("Cast") == 0
    body = next(a.g for a in model.graph.node[-1].attribute if a.name == "then_branch")
    body.node.append(helper.make_node("Where", ["cond", body.output[0].name, "past"], ["picked"], name="picked"))
    body.output[0].name = "picked"
    flat = taken(model, switch, True)
    onnx.checker.check_model(flat, full_check=True)
    assert [n.op_type for n in flat.graph.node].count("Cast") == 1


@pytest.mark.slow  # four co-locations of a 705-node decoder: about 4 minutes
def test_whisper_merged_decoder_pairs_every_combination(tmp_path: Path) -> None:
    """The exported whisper_decoder_merged x2: every combination of its steps pairs, the written
    model computes each as the original run once per request (stock ORT, bit for bit) and the plugin
    runs every pair in its nested branches."""
    from models.exported import SPEECH

    source = SPEECH["whisper_decoder_merged"].path
    out = tmp_path / "x2.onnx"
    switch = switch_of(onnx.load(source))
    assert switch is not None
    result = colocate_switched(source, out, switch)
    assert min(c.pairs for c in result.combinations) >= 10, [c.pairs for c in result.combinations]
    original, stock = verify.session(source), verify.session(out)
    trace = tmp_path / "trace-{node}.json"
    plugin = ort.InferenceSession(
        str(out), sess_options=session_options("host", trace=str(trace)), providers=["CPUExecutionProvider"]
    )
    dims = {"batch_size": 1, "decoder_sequence_length": 4, "encoder_sequence_length": 32}
    shapes = {
        i.name: [dims.get(str(d), 16) if isinstance(d, str) else d for d in i.shape] for i in original.get_inputs()
    }
    names = [o.name for o in original.get_outputs()]
    for conditions in itertools.product((True, False), repeat=2):
        own = [verify.random_inputs(original, shapes, seed=k + 1) for k in range(2)]
        for feeds, condition in zip(own, conditions):
            feeds["use_cache_branch"] = np.array([condition])
        merged = {f"r{k}/{n}": v for k, f in enumerate(own) for n, v in f.items()}
        wanted = {f"r{k}/{n}": v for k, f in enumerate(own) for n, v in zip(names, original.run(names, f))}
        got, fused = stock.run(list(wanted), merged), plugin.run(list(wanted), merged)
        for (name, want), value, on_plugin in zip(wanted.items(), got, fused):
            assert np.array_equal(value, want), (conditions, name)
            scale = np.abs(want).max(initial=1e-30)  # initial: an empty output has no maximum
            assert on_plugin.shape == want.shape, (conditions, name)
            assert np.abs(on_plugin - want).max(initial=0.0) <= 1e-5 * scale, (conditions, name)
    assert len(list(tmp_path.glob("trace-*.json"))) == sum(c.pairs for c in result.combinations)
