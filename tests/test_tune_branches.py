"""`tune` and `profile` reach the pairs inside If branches (merged decoders: optimum's `use_cache_branch` If):
each branch runs as a model of its own on the outer values the model computed for it (branch_runs),
the branch random inputs do not take on inputs set to take it (subgraphs.feeds_taking); a branch
no input reaches leaves its pairs unfused. tune screens each pair on its own nodes, fed with what it
read in its branch's run. Real ONNX Runtime and the built plugin; the model is
test_subgraphs' If with a matrix/vector pair in each branch, at 8 rows. Decisions and files, not
speed: a few rounds, and the margin forces the decision both ways."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_subgraphs import D_IN, if_model

from hexfuse_onnx import contract as C
from hexfuse_onnx import ort_modes, pipeline, runtime, tuning, verify
from hexfuse_onnx.rewrite import unfuse
from hexfuse_onnx.subgraphs import pairs_within
from hexfuse_onnx.tools import timeline
from hexfuse_onnx.tools import tune as tune_module
from hexfuse_onnx.tools.tune import FINAL, SCREEN, tune

pytestmark = pytest.mark.skipif(
    not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(),
    reason=f"{runtime.LIB_DIR / runtime.PLUGIN_NAME} not built: run `bash custom_ops/build.sh`",
)

ROWS = 8
QUICK = {"runs": 4, "rounds": 2}
THEN, ELSE = "then branch of If 'choose'", "else branch of If 'choose'"
SET = " (random inputs set to take it)"


def _x(sign: float = 1.0) -> np.ndarray:
    return sign * np.abs(np.random.default_rng(1).standard_normal((ROWS, D_IN)).astype(np.float32))


@pytest.fixture(scope="module")
def fused(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pair in each branch of an If on the bool input `fast` (rewrite verified both branches)."""
    folder = tmp_path_factory.mktemp("tune_branches")
    onnx.save(if_model(rows=ROWS), folder / "if.onnx")
    result = pipeline.rewrite(
        folder / "if.onnx", folder / "if.fused.onnx", target="host", inputs={"x": _x(), "fast": np.array(True)}
    )
    assert result.output is not None
    assert [len(pairs_within(a.g)) for a in onnx.load(result.output).graph.node[0].attribute] == [1, 1]
    return result.output


def _branch_pairs(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    return {a.name: pairs_within(a.g) for a in model.graph.node[0].attribute}


def _equals_original_on_both_branches(original: Path, tuned: Path, **feeds: np.ndarray) -> None:
    """Stock ORT, and the plugin when the tuned model keeps a pair: the same outputs, each branch taken."""
    session = verify.session(original)
    cases = [verify.run_original(session, {**feeds, "fast": np.array(fast)}) for fast in (True, False)]
    verify.compare_cases(tuned, cases, rtol=verify.DEFAULT_RTOL)
    if pairs_within(onnx.load(tuned).graph):
        verify.compare_cases(tuned, cases, pipeline.PLUGIN_RTOL, rewritten_options=runtime.session_options("host"))


def test_the_pair_of_each_branch_is_timed_and_kept(fused, tmp_path):
    """Both pairs timed (the branch the random `fast` does not take on it set to take it), kept at the
    swept share; the whole model judged on inputs taking each branch; equal to the original on both."""
    out = tmp_path / "kept.onnx"
    result = tune(fused, out, margin=-100.0, shares=[0.3], **QUICK)
    assert [p.where.removesuffix(SET) for p in result.pairs] == [THEN, ELSE], result.lines()
    assert sum(p.where.endswith(SET) for p in result.pairs) == 1
    other = next(p.where.removesuffix(SET) for p in result.pairs if p.where.endswith(SET))
    assert all(p.kept and p.unfused is not None and set(p.fused) == {0.3} for p in result.pairs), result.lines()
    assert result.final is not None and result.final.all_won and len(result.final.others) == 1, result.lines()
    cases = [result.final.case, result.final.others[0].case]
    assert sorted(cases) == sorted(["tune's random inputs", f"tune's random inputs set to take the {other}"])
    tuned = onnx.load(out)
    onnx.checker.check_model(tuned, full_check=True)
    for pairs in _branch_pairs(tuned).values():
        (node,) = pairs
        assert next(a.f for a in node.attribute if a.name == C.ATTR_SHARE_A) == pytest.approx(0.3)
    record = tuning.read_record(tuned)
    assert record is not None and sorted(record["kept"]) == sorted(p.pair_id for p in result.pairs)
    assert [p["where"].removesuffix(SET) for p in record["pairs"]] == [THEN, ELSE]
    assert len(record["final_check"]["other_cases"]) == 1
    assert f"in the {THEN}" in "\n".join(result.lines())
    _equals_original_on_both_branches(fused, out, x=_x())


def test_each_pair_is_screened_on_its_own_nodes_then_judged_in_the_whole_model(fused, tmp_path, monkeypatch):
    """Each pair's sweep times a model of its own FusedHexPair node against its body's nodes (its
    outputs, not the branch's), fed with the values it read in the branch's run (x, as tune gave the
    model; not `fast`); both pass the screen, and the whole-model check decides them, on inputs
    taking each branch. Real sessions, watched on their way into interleaved.time_interleaved."""
    visits: list[tuple[list[str], dict[str, np.ndarray], list[str]]] = []
    time_interleaved = tune_module.interleaved.time_interleaved

    def watched(configs, feeds, rounds, *args, **kwargs):
        first = configs[0]
        outputs = [o.name for o in first.session.get_outputs()] if first.label == "unfused" else []
        visits.append(([c.label for c in configs], dict(feeds), outputs))
        return time_interleaved(configs, feeds, rounds, *args, **kwargs)

    monkeypatch.setattr(tune_module.interleaved, "time_interleaved", watched)
    result = tune(fused, tmp_path / "kept.onnx", margin=-100.0, shares=[0.3], **QUICK)
    modes, sweep = list(ort_modes.MODES), ["unfused", "0.3"]
    assert [v[0] for v in visits] == [modes, sweep, sweep, modes, ["tuned", *modes], ["tuned", *modes]]
    pairs = {p.overload: p for p in pairs_within(onnx.load(fused).graph)}
    for (_, feeds, outputs), screened in zip(visits[1:3], result.pairs):
        node = pairs[screened.pair_id]
        assert outputs == list(node.output) and set(feeds) <= set(node.input) and "fast" not in feeds
        assert np.array_equal(feeds["x"], visits[0][1]["x"])  # the value the pair read
    assert all(p.kept and p.decided_by == FINAL for p in result.pairs), result.lines()
    record = tuning.read_record(onnx.load(tmp_path / "kept.onnx"))
    assert record is not None and [p["decided_by"] for p in record["pairs"]] == [FINAL, FINAL]
    assert "screened on the pair's own nodes" in record["criterion"]


def test_pairs_that_lose_are_unfused_back_to_the_branch_nodes(fused, tmp_path):
    """Each pair loses alone (the margin): the screen unfuses it, and no whole-model run follows."""
    out = tmp_path / "lost.onnx"
    result = tune(fused, out, margin=100.0, **QUICK)
    assert all(p.unfused is not None and p.fused and not p.kept for p in result.pairs), result.lines()
    assert all(p.decided_by == SCREEN for p in result.pairs) and result.final is None
    assert [line.split()[-2:] for line in result.lines()[2:5:2]] == [[SCREEN, "unfused"]] * 2, result.lines()
    tuned = onnx.load(out)
    assert tuned.graph == unfuse(onnx.load(fused)).graph
    assert not tuned.functions and all(o.domain != C.DOMAIN for o in tuned.opset_import)
    _equals_original_on_both_branches(fused, out, x=_x())


def _on_mean(fused: Path, folder: Path) -> Path:
    """The fused model with its If on whether x's mean is positive, a condition tune cannot set."""
    model = onnx.load(fused)
    model.graph.node.insert(0, helper.make_node("ReduceMean", ["x"], ["mean"], keepdims=0))
    model.graph.node.insert(1, helper.make_node("Greater", ["mean", "zero"], ["positive"]))
    model.graph.initializer.append(helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]))
    model.graph.node[2].input[0] = "positive"
    kept = [v for v in model.graph.input if v.name != "fast"]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    path = folder / "on_mean.fused.onnx"
    onnx.save(model, path)
    return path


def test_a_branch_no_input_reaches_is_named_and_unfused(fused, tmp_path):
    """The random x takes one branch; the other cannot be taken by setting an input: its pair is
    reported not reached and unfused (it was not shown to win), the reached one kept."""
    src = _on_mean(fused, tmp_path)
    out = tmp_path / "tuned.onnx"
    result = tune(src, out, margin=-100.0, shares=[0.5], **QUICK)
    reached, missed = sorted(result.pairs, key=lambda p: bool(p.not_reached))
    assert reached.kept and reached.where in (THEN, ELSE) and not reached.not_reached, result.lines()
    assert not missed.kept and missed.unfused is None and missed.where == ({THEN, ELSE} - {reached.where}).pop()
    assert missed.not_reached == "not reached on these inputs, and its condition 'positive' is no input tune can set"
    assert result.final is not None and result.final.all_won and not result.final.others
    assert f"({missed.not_reached})" in "\n".join(result.lines())
    tuned = onnx.load(out)
    assert [p.overload for p in pairs_within(tuned.graph)] == [reached.pair_id]
    for sign in (1.0, -1.0):  # each branch taken
        case = verify.run_original(verify.session(src), {"x": _x(sign)})
        verify.compare_cases(out, [case], rtol=verify.DEFAULT_RTOL)
        verify.compare_cases(out, [case], pipeline.PLUGIN_RTOL, rewritten_options=runtime.session_options("host"))


def test_profile_traces_the_pair_of_each_branch(fused):
    """The seeded inputs take one branch, the same set to take the other: both pairs ran on the plugin."""
    timelines = timeline.record(fused, runs=2)
    assert sorted(t.node for t in timelines) == sorted(p.name for p in pairs_within(onnx.load(fused).graph))
    assert all(t.events and t.wall_ns > 0 for t in timelines)
    assert timeline.not_run(fused, timelines) == []


def test_profile_names_the_pair_of_a_branch_no_input_took(fused, tmp_path):
    src = _on_mean(fused, tmp_path)
    (ran,) = timeline.record(src, runs=2)
    assert timeline.not_run(src, [ran]) == [p.name for p in pairs_within(onnx.load(src).graph) if p.name != ran.node]


@pytest.mark.parametrize("sign, taken", [(1.0, THEN), (-1.0, ELSE)])
def test_given_inputs_decide_the_branch_tune_reaches(fused, tmp_path, sign, taken):
    """With --inputs, tune runs the model on them, not on random ones: their x's mean takes one
    branch, whose pair is timed; the other branch's condition is no input, so it is not reached."""
    src = _on_mean(fused, tmp_path)
    result = tune(src, tmp_path / "tuned.onnx", margin=100.0, inputs={"x": _x(sign)}, **QUICK)
    assert [p.where for p in result.pairs if not p.not_reached] == [taken], result.lines()
    assert [p.where for p in result.pairs if p.not_reached] == [({THEN, ELSE} - {taken}).pop()]


def test_inputs_naming_no_graph_input_are_refused_in_one_line(fused, tmp_path):
    np.save(tmp_path / "y.npy", _x())
    done = subprocess.run(
        [sys.executable, "-m", "hexfuse_onnx", "tune", str(fused), "-o", str(tmp_path / "t.onnx")]
        + ["--inputs", f"y:{tmp_path / 'y.npy'}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.endswith("--inputs lacks fast, x; names no graph input: y (inputs: x, fast)"), done.stderr
