"""The model zoo builders: deterministic, valid, runnable, and shaped as documented."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import models
from models import BUILDERS, build, build_synthetic
from models.__main__ import main as models_main

ZOO = [
    "two_branch",
    "inception",
    "mha_encoder",
    "mlp_chain",
    "gpt_decode_step",
    "gpt_decode_step_contrib",
    "convnet_heads",
    "sequential_chain",
]


def _run(
    model: onnx.ModelProto, seed: int = 1, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, feed: dict | None = None
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    if feed is None:
        rng = np.random.default_rng(seed)
        feed = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}
    names = [o.name for o in sess.get_outputs()]
    return feed, dict(zip(names, sess.run(names, feed)))


def _declared_shape(vi: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def _consumers(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Activation tensor (not initializer) -> names of the nodes that read it."""
    inits = {t.name for t in model.graph.initializer}
    users: dict[str, list[str]] = defaultdict(list)
    for node in model.graph.node:
        for name in dict.fromkeys(node.input):  # a node reading a tensor twice counts once
            if name and name not in inits:
                users[name].append(node.name)
    return users


def _forks(model: onnx.ModelProto) -> dict[str, list[str]]:
    return {t: u for t, u in _consumers(model).items() if len(u) > 1}


def _downstream(model: onnx.ModelProto, sources: list[str]) -> set[str]:
    """Names of the nodes that (transitively) read any of `sources`."""
    users = _consumers(model)
    by_name = {n.name: n for n in model.graph.node}
    seen: set[str] = set()
    stack = list(sources)
    while stack:
        for node_name in users.get(stack.pop(), []):
            if node_name not in seen:
                seen.add(node_name)
                stack.extend(o for o in by_name[node_name].output if o)
    return seen


# -- registry and command line -------------------------------------------------------


def test_registry_lists_the_zoo():
    assert list(BUILDERS) == ZOO
    assert list(models.DESCRIPTIONS) == ZOO
    with pytest.raises(KeyError, match="unknown model"):
        build("no_such_model")


def test_cli_builds_files(tmp_path, capsys):
    assert models_main(["list"]) == 0
    assert "sequential_chain" in capsys.readouterr().out
    assert models_main(["build", "two_branch", "sequential_chain", "--synthetic", "50", "-o", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["sequential_chain.onnx", "synthetic_50.onnx", "two_branch.onnx"]
    loaded = onnx.load(tmp_path / "two_branch.onnx")
    assert loaded.SerializeToString() == build("two_branch").SerializeToString()


# -- every zoo model -------------------------------------------------------------------


@pytest.mark.parametrize("name", ZOO)
def test_deterministic(name):
    a = build(name, seed=0).SerializeToString()
    assert build(name, seed=0).SerializeToString() == a
    assert build(name, seed=1).SerializeToString() != a


@pytest.mark.parametrize("name", ZOO)
def test_conventions(name):
    model = build(name)
    assert model.ir_version == 10
    opsets = {o.domain: o.version for o in model.opset_import}
    assert opsets.pop("") == 18
    assert opsets in ({}, {"com.microsoft": 1})
    names = [n.name for n in model.graph.node]
    assert all(names) and len(set(names)) == len(names)
    for vi in list(model.graph.input) + list(model.graph.output):
        assert vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        assert all(d.HasField("dim_value") and d.dim_value > 0 for d in vi.type.tensor_type.shape.dim)
    for init in model.graph.initializer:
        assert init.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
    doc = models.DESCRIPTIONS[name]
    assert doc.startswith(name + ":") and "Expected discoveries" in doc


@pytest.mark.parametrize("name", ZOO)
def test_full_check(name):
    onnx.checker.check_model(build(name), full_check=True)


@pytest.mark.parametrize(
    "level",
    [ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL],
    ids=["opt", "noopt"],
)
@pytest.mark.parametrize("name", ZOO)
def test_runs_in_ort(name, level):
    model = build(name)
    _, outs = _run(model, level=level)
    for vi in model.graph.output:
        y = outs[vi.name]
        assert list(y.shape) == _declared_shape(vi), vi.name
        assert np.isfinite(y).all(), vi.name
        assert np.abs(y).max() < 1e3, vi.name


# -- the structure each model documents -------------------------------------------------


def test_two_branch_has_one_fork_and_one_join():
    model = build("two_branch")
    assert _forks(model) == {"x": ["matrix/matmul0", "vector/sigmoid"]}
    multi_input = [n.name for n in model.graph.node if sum(1 for i in n.input if i in _consumers(model)) > 1]
    assert multi_input == ["join/concat"]


def test_inception_forks_four_ways():
    forks = _forks(build("inception"))
    assert list(forks) == ["x"] and len(forks["x"]) == 4


def test_convnet_heads_fork_three_ways_without_a_join():
    model = build("convnet_heads")
    forks = _forks(model)
    assert list(forks) == ["backbone/relu1_out"] and len(forks["backbone/relu1_out"]) == 3
    for head in forks["backbone/relu1_out"]:
        by_name = {n.name: n for n in model.graph.node}
        reached = _downstream(model, list(by_name[head].output)) | {head}
        assert len({n.split("/")[0] for n in reached}) == 1  # a head never meets another


@pytest.mark.parametrize("name", ["mlp_chain", "sequential_chain"])
def test_chains_have_no_fork(name):
    assert _forks(build(name)) == {}


@pytest.mark.parametrize("name", ["gpt_decode_step", "gpt_decode_step_contrib"])
def test_prefill_and_decode_share_no_data_path(name):
    model = build(name)
    prefill = _downstream(model, ["prefill_hidden"])
    decode = _downstream(model, ["decode_hidden", "past_key", "past_value"])
    assert prefill and decode and not prefill & decode
    assert prefill | decode == {n.name for n in model.graph.node}
    assert all(n.startswith("prefill/") for n in prefill)
    assert all(n.startswith("decode/") for n in decode)


@pytest.mark.parametrize("seed", [0, 3])
def test_contrib_attention_matches_explicit_attention(seed):
    feed, expected = _run(build("gpt_decode_step", seed=seed), seed=seed)
    _, got = _run(build("gpt_decode_step_contrib", seed=seed), feed=feed)
    assert set(got) == set(expected)
    for name, y in expected.items():
        np.testing.assert_allclose(got[name], y, rtol=1e-4, atol=1e-4, err_msg=name)
    contrib_ops = [n.op_type for n in build("gpt_decode_step_contrib").graph.node if n.domain == "com.microsoft"]
    assert contrib_ops == ["MultiHeadAttention", "MultiHeadAttention"]


# -- synthetic models -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 9, 100, 1000, 10000])
def test_synthetic_size(n):
    count = len(build_synthetic(n).graph.node)
    assert count == n  # exactly, as build_synthetic says


def test_synthetic_deterministic():
    a = build_synthetic(500, seed=2).SerializeToString()
    assert build_synthetic(500, seed=2).SerializeToString() == a
    assert build_synthetic(500, seed=3).SerializeToString() != a


@pytest.mark.parametrize("n", [1, 57, 1000, pytest.param(10000, marks=pytest.mark.slow)])
def test_synthetic_valid_and_runs(n):
    model = build_synthetic(n)
    onnx.checker.check_model(model, full_check=True)
    names = [node.name for node in model.graph.node]
    assert len(set(names)) == len(names)
    _, outs = _run(model)
    assert outs["y"].shape == (4, 16) and np.isfinite(outs["y"]).all()


def test_synthetic_has_every_block_kind():
    model = build_synthetic(1000)
    names = [n.name for n in model.graph.node]
    for part in ("/join/add", "/residual/add", "/chain/matmul"):
        assert any(part in n for n in names), part
    forks = _forks(model)
    joins = sum(1 for n in names if n.endswith("/join/add"))
    residuals = sum(1 for n in names if n.endswith("/residual/add"))
    assert len(forks) == joins + residuals


def _calls(build_it: Callable[[], onnx.ModelProto]) -> tuple[onnx.ModelProto, int]:
    """build_it()'s model and the Python and C function calls it made: work counted, where a clock
    flakes beside other test workers."""
    calls = 0

    def tally(frame, event, arg) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    previous = sys.getprofile()
    sys.setprofile(tally)
    try:
        model = build_it()
    finally:
        sys.setprofile(previous)
    return model, calls


def test_synthetic_work_grows_with_the_nodes_alone():
    """build_synthetic makes benchmarks/pass_speed.py's large models (50k nodes) in O(n): 4x the nodes
    take 4x the calls, where work per node over the nodes made so far (a generator, a helper called on
    each) would take 16x; work inside one C call (a list scan) is not counted. The weights stay the
    shared pool however long the graph. Build times are pass_speed.py's to show, not a test's."""
    small, small_calls = _calls(lambda: build_synthetic(2_000))
    large, large_calls = _calls(lambda: build_synthetic(8_000))
    assert small_calls > 2_000 and large_calls < 5 * small_calls, (small_calls, large_calls)  # 4x: 3.6; 16x scanned
    assert len(large.graph.initializer) == len(small.graph.initializer)


def test_inspect_and_rewrite_take_a_zoo_name(tmp_path, monkeypatch) -> None:
    """`inspect silero_vad` once said 'file not found'; a zoo name is now resolved as bench and
    colocate resolve it, and rewrite writes NAME.fused.onnx in the working folder."""
    from cli_support import error_line, run_cli

    monkeypatch.chdir(tmp_path)
    seen = run_cli("inspect", "two_branch", "-q")
    assert seen.returncode == 0, seen.stderr
    assert "candidates:" in seen.stdout
    done = run_cli("rewrite", "two_branch", "-q", "--target", "host")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "two_branch.fused.onnx").is_file()
    unknown = run_cli("inspect", "no_such_model", "-q")
    assert unknown.returncode == 2
    assert "neither a model file nor a zoo model" in error_line(unknown)
