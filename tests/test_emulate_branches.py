"""`emulate` reaches the pairs inside If branches (tools/emulate.py `reach_pairs`): the branch the
inputs take runs as a model of its own on the outer values ORT computed, and its pairs run under
qemu-hexagon against the host kernel; a pair in a branch the inputs do not take is reported as not
reached. The model: test_subgraphs' If with a matrix/vector pair in each branch, at 8 rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import run_cli
from onnx import TensorProto, helper
from test_subgraphs import D_IN, if_model

from hexfuse_onnx.branch_runs import capture
from hexfuse_onnx.errors import ModelError
from hexfuse_onnx.pipeline import rewrite
from hexfuse_onnx.subgraphs import pairs_within
from hexfuse_onnx.tools import emulate

QEMU = os.environ.get("QEMU_HEXAGON") or shutil.which("qemu-hexagon")
needs_qemu = pytest.mark.skipif(QEMU is None, reason="qemu-hexagon is not installed (apt-get install qemu-user)")
ROWS = 8
BRANCHES = ["then branch of If 'choose'", "else branch of If 'choose'"]


def _x() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((ROWS, D_IN)).astype(np.float32)


@pytest.fixture(scope="module")
def fused(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pair in each branch (the verification sets `fast` to take the else branch too)."""
    folder = tmp_path_factory.mktemp("if_branches")
    onnx.save(if_model(rows=ROWS), folder / "if.onnx")
    result = rewrite(
        folder / "if.onnx", folder / "if.fused.onnx", target="host", inputs={"x": _x(), "fast": np.array(True)}
    )
    assert result.output is not None
    assert [len(pairs_within(a.g)) for a in onnx.load(result.output).graph.node[0].attribute] == [1, 1]
    return result.output


def _checked_pairs(report: Path) -> list[dict]:
    pairs = json.loads(report.read_text())["pairs"]
    for pair in (p for p in pairs if p["reached"]):
        assert pair["ok"] and pair["stats"]["serial_equals_fused"] is True
        assert all(o["rel"] <= emulate.DEFAULT_RTOL for o in pair["outputs"]) and len(pair["outputs"]) == 2
        assert pair["stats"]["runs"]["fused"]["items"] > 0
    return pairs


@needs_qemu
def test_random_inputs_reach_the_pair_of_each_branch(hexagon_images, fused, tmp_path):
    """The seeded `fast` takes one branch; emulate sets it to take the other, as rewrite's verification does."""
    report = tmp_path / "report.json"
    proc = run_cli("emulate", fused, "--arch", "v73", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    pairs = _checked_pairs(report)
    assert [p["reached"] for p in pairs] == [True, True]
    assert [p["where"].removesuffix(" (random inputs set to take it)") for p in pairs] == BRANCHES
    assert sum(p["where"].endswith("(random inputs set to take it)") for p in pairs) == 1
    assert f"pair {pairs[0]['name']} (branches) in the {pairs[0]['where']}, image v73" in proc.stdout
    assert "all 2 pair(s) reached within tolerance of the host kernel\n" in proc.stdout


@needs_qemu
def test_the_branch_given_inputs_do_not_take_is_reported_not_reached(hexagon_images, fused, tmp_path):
    report = tmp_path / "report.json"
    np.savez(tmp_path / "in.npz", x=_x(), fast=np.array(True))
    proc = run_cli("emulate", fused, "--arch", "v73", "--inputs", tmp_path / "in.npz", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    then, other = _checked_pairs(report)
    assert then["reached"] and then["where"] == BRANCHES[0]
    assert not other["reached"] and not other["outputs"] and other["where"] == BRANCHES[1]
    why = "not reached on these inputs (the condition 'fast' is true)"
    assert other["not_reached"] == why
    assert f"pair {other['name']} (branches) in the {BRANCHES[1]}: {why}" in proc.stdout
    assert f"1 of 2 not reached (in the {BRANCHES[1]};" in proc.stdout


def _nested(fused: onnx.ModelProto) -> onnx.ModelProto:
    """The fused model's If inside the then branch of another If, on a bool input `outer`."""
    model = onnx.ModelProto()
    model.CopyFrom(fused)
    inner = model.graph.node[0]
    y = model.graph.output[0]
    then_branch = helper.make_graph([inner], "outer_then", [], [y])
    zeros = helper.make_node("ConstantOfShape", [], [], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [d.dim_value for d in y.type.tensor_type.shape.dim])
    shape_node = helper.make_node("Constant", [], ["outer_shape"], value=shape)
    zeros.input.append("outer_shape")
    zeros.output.append(y.name)
    else_branch = helper.make_graph([shape_node, zeros], "outer_else", [], [y])
    outer = helper.make_node("If", ["outer"], [y.name], "outer_if", then_branch=then_branch, else_branch=else_branch)
    del model.graph.node[:]
    model.graph.node.append(outer)
    model.graph.input.append(helper.make_tensor_value_info("outer", TensorProto.BOOL, []))
    return model


@pytest.mark.parametrize("fast", [True, False])
def test_a_pair_in_a_nested_if_reads_what_it_reads_unnested(fused, fast):
    """Two levels down (outer If, then the model's If) a pair's captured inputs are those it reads in
    the model itself; the outer else branch holds no pair, so nothing is reported of it."""
    model = onnx.load(fused)
    feeds = {"x": _x(), "fast": np.array(fast)}
    flat = emulate.reach_pairs(model, feeds)
    nested = emulate.reach_pairs(_nested(model), {**feeds, "outer": np.array(True)})
    assert [s.node.name for s in nested] == [s.node.name for s in flat]
    taken = 0 if fast else 1
    assert nested[taken].where == f"{BRANCHES[taken]} in the then branch of If 'outer_if'"
    assert all(np.array_equal(a, b) for a, b in zip(nested[taken].inputs, flat[taken].inputs))
    assert nested[1 - taken].inputs is None and flat[1 - taken].inputs is None
    untaken = emulate.reach_pairs(_nested(model), {**feeds, "outer": np.array(False)})
    assert [s.not_reached for s in untaken] == ["not reached on these inputs (the condition 'outer' is false)"] * 2


def test_a_pair_in_a_loop_body_is_reported_not_reached(fused):
    """A body runs once per iteration (the pass puts no pair there): its pairs are named, not skipped."""
    model = onnx.load(fused)
    y = model.graph.output[0].name
    body = helper.make_graph(
        [model.graph.node[0], helper.make_node("Identity", ["again"], ["again_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("again", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("again_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info(y, TensorProto.FLOAT, None),
        ],
    )
    del model.graph.node[:]
    model.graph.initializer.append(helper.make_tensor("trips", TensorProto.INT64, [], [1]))
    model.graph.node.append(helper.make_node("Loop", ["trips", ""], ["ys"], "repeat", body=body))
    model.graph.output[0].name = "ys"
    sites = emulate.reach_pairs(model, {"x": _x(), "fast": np.array(True)})
    assert [(s.where, s.inputs) for s in sites] == [("body of Loop 'repeat'", None)] * 2
    assert sites[0].not_reached == "not reached: emulate does not enter a Loop body (a value per iteration)"


def test_ort_failing_on_the_inputs_is_one_line_naming_the_graph(fused):
    """Inputs ORT refuses (x one column short) are the model's problem (exit 3), not a crash: here the
    main graph reads only the condition, so the taken branch, run as a model, is the one that fails."""
    model = onnx.load(fused)
    short = {"x": _x()[:, :-1], "fast": np.array(True)}
    branch = "then branch of If 'choose', run as a model of its own"
    with pytest.raises(ModelError, match=f"^ONNX Runtime cannot run the {branch} on these inputs: .+") as caught:
        emulate.reach_pairs(model, short)
    assert "\n" not in str(caught.value)
    with pytest.raises(ModelError, match="^ONNX Runtime cannot run the model on these inputs: "):
        capture(model, [model.graph.output[0].name], short)
