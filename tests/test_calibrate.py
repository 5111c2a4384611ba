"""The host cost model's calibration: profiler parsing, node matching, the fit, target JSON,
and the prediction-error measurement end to end on the plugin. No timing bound is asserted."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import models

from hexfuse_onnx import calibrate, costmodel
from hexfuse_onnx.costmodel import Param, task_time
from hexfuse_onnx.profile import Engine, NodeProfile, TaskProfile
from hexfuse_onnx.runtime import LIB_DIR, PLUGIN_NAME

needs_plugin = pytest.mark.skipif(not (LIB_DIR / PLUGIN_NAME).is_file(),
                                  reason="plugin not built (bash custom_ops/build.sh)")


def test_node_times_keeps_only_runs_after_warmup() -> None:
    run = lambda ts: {"cat": "Session", "name": "model_run", "ts": ts, "dur": 100}  # noqa: E731
    node = lambda name, ts, dur: {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur}  # noqa: E731
    events = [run(0), node("a", 10, 50), run(200), node("a", 210, 7), node("b", 250, 3),
              {"cat": "Node", "name": "a_fence_before", "ts": 205, "dur": 0}]
    assert calibrate.node_times(events, warmup=1) == {"a": [7e-6], "b": [3e-6]}
    assert calibrate.node_times(events, warmup=0)["a"] == [50e-6, 7e-6]


def test_profiler_matches_every_working_node_of_a_zoo_model(zoo_dir: Path) -> None:
    profile, medians, ops = calibrate.measure_ops(zoo_dir / "two_branch.onnx", runs=3, warmup=1)
    names = [n.name for n in profile.graph.nodes]
    assert set(medians) == set(range(len(names)))  # every node reported once per run, by name
    assert {t.node for t in ops} == set(names)      # two_branch has no shape-only node
    for t in ops:
        assert t.seconds > 0 and t.runs == 3
        assert t.op == calibrate.one_op_profile(profile, names.index(t.node))
    by_type = {t.op_type: t.op.engine for t in ops}
    assert by_type["MatMul"] == Engine.MATRIX and by_type["Sigmoid"] == Engine.VECTOR
    assert by_type["Concat"] == Engine.MEMORY


def _synthetic_ops(truth: costmodel.Target, n: int = 60, seed: int = 1) -> list[calibrate.OpTiming]:
    """Op timings made by the cost model itself from `truth` (some ops DDR-bound)."""
    rng = np.random.default_rng(seed)
    ops = []
    for k in range(n):
        engine = (Engine.MATRIX, Engine.VECTOR, Engine.MEMORY)[k % 3]
        nbytes = int(rng.integers(1_000, 1_000_000))
        flops = {Engine.MATRIX: rng.uniform(1e5, 1e9), Engine.VECTOR: rng.uniform(1e3, 1e7)}.get(engine, 0.0)
        op = NodeProfile(k, engine, float(flops), nbytes // 2, nbytes - nbytes // 2, 0, nbytes,
                         int(nbytes * rng.uniform(0.5, 3.0)))
        ops.append(calibrate.OpTiming("synthetic", f"n{k}", engine.value, op,
                                      task_time(TaskProfile.of([op]), truth), 1))
    return ops


FITTED = ("matrix_flops", "vector_flops_per_context", "dma_bytes", "ddr_bytes", "op_overhead_s")


def test_fit_recovers_the_parameters_that_made_the_timings() -> None:
    truth = replace(costmodel.HOST, matrix_flops=Param(75e9, "FLOP/s", "test"),
                    vector_flops_per_context=Param(12e9, "FLOP/s", "test"), dma_bytes=Param(6e9, "B/s", "test"),
                    ddr_bytes=Param(15e9, "B/s", "test"), op_overhead_s=Param(4e-6, "s", "test"))
    ops = _synthetic_ops(truth)
    fit = calibrate.fit_target(ops, base=costmodel.HOST, where="synthetic")
    assert fit.ddr_bound, "the synthetic set should contain DDR-bound ops"
    for key in FITTED:
        got, want = getattr(fit.target, key).value, getattr(truth, key).value
        assert got == pytest.approx(want, rel=1e-6), key
        assert getattr(fit.target, key).source.startswith("measured: least-squares fit to 60 ORT-profiled ops")
    assert fit.median_abs_residual < 1e-9
    assert fit.target.name == calibrate.CALIBRATED_NAME


def test_fit_keeps_the_base_value_of_an_engine_without_ops() -> None:
    truth = replace(costmodel.HOST, ddr_bytes=Param(1e15, "B/s", "test"))
    ops = [t for t in _synthetic_ops(truth) if t.op.engine != Engine.MEMORY]
    fit = calibrate.fit_target(ops, base=costmodel.HOST)
    assert fit.target.dma_bytes.value == costmodel.HOST.dma_bytes.value
    assert fit.target.dma_bytes.source.startswith("not fitted")
    assert fit.target.matrix_flops.value == pytest.approx(truth.matrix_flops.value, rel=1e-6)


def test_load_target_round_trips(tmp_path: Path) -> None:
    for target in (costmodel.HOST, costmodel.HEXAGON_V73):
        path = tmp_path / f"{target.name}.json"
        path.write_text(target.to_json())
        assert costmodel.load_target(path) == target
    result = calibrate.CalibrationResult(costmodel.HOST, [], [], "nowhere")
    (tmp_path / "result.json").write_text(result.to_json())
    assert costmodel.load_target(tmp_path / "result.json") == costmodel.HOST
    (tmp_path / "bad.json").write_text(json.dumps({"name": "x"}))
    with pytest.raises(ValueError, match="not a cost-model target"):
        costmodel.load_target(tmp_path / "bad.json")


def test_every_hexagon_figure_is_marked_modelled_and_tabled() -> None:
    params = costmodel.HEXAGON_V73.params()
    assert all(p.source.startswith("modelled (") for p in params.values())
    rows = costmodel.parameter_table(costmodel.HEXAGON_V73)
    assert rows[2] == "| parameter | value | unit | source |"
    assert len([r for r in rows if r.startswith("| ") and not r.startswith("| parameter")]) == len(params)


@needs_plugin
def test_prediction_error_end_to_end_on_the_plugin(zoo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costmodel, "TARGETS", dict(costmodel.TARGETS))  # calibrate registers its target
    result = calibrate.calibrate([zoo_dir / "two_branch.onnx"], runs=3, warmup=1)
    assert result.fit_rows and result.pair_rows
    assert costmodel.get_target(calibrate.CALIBRATED_NAME) == result.target
    assert result.target.call_overhead_s.source.startswith("measured: median over")
    for r in result.pair_rows:
        assert r.measured_call_s > 0 and r.measured_span_s > 0 and r.measured_serial_s > 0
        assert 0 < r.share_a < 1
        for e in (r.fused_error, r.span_error, r.serial_error):
            assert math.isfinite(e)
    assert math.isfinite(result.median_abs_error)
    doc = json.loads(result.to_json())
    assert doc["pairs"][0]["node"] == result.pair_rows[0].node
    assert any("median |error|" in line for line in result.summary_lines())


@needs_plugin
def test_cli_calibrate_writes_a_target_that_rewrite_uses(tmp_path: Path) -> None:
    """`calibrate -o` then `inspect --target FILE`: the calibrated target drives the pass; a file
    that is not a target is refused with exit 2."""
    from cli_support import run_cli

    out = tmp_path / "calib.json"
    r = run_cli("calibrate", "two_branch", "--runs", "3", "--warmup", "1", "-o", out, "-q", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "median |error|" in r.stdout
    target = costmodel.load_target(out)
    assert target.name == "host-calibrated" and "measured" in target.matrix_flops.source
    model = tmp_path / "two_branch.onnx"
    onnx.save(models.build("two_branch"), model)
    r = run_cli("inspect", model, "--target", out, "-q")
    assert r.returncode == 0, r.stderr
    assert "target host-calibrated" in r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = run_cli("inspect", model, "--target", bad)
    assert r.returncode == 2 and "not a cost-model target" in r.stderr, r.stderr
