"""The host cost model's calibration: profiler parsing, node matching, the fit, target JSON,
and the prediction-error measurement end to end on the plugin. No timing bound is asserted."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import models
from hexfuse_onnx import costmodel, graph
from hexfuse_onnx.costmodel import Param, task_time
from hexfuse_onnx.profile import Engine, NodeProfile, TaskProfile, profile_graph
from hexfuse_onnx.runtime import LIB_DIR, PLUGIN_NAME
from hexfuse_onnx.tools import calibrate
from hexfuse_onnx.tools.calibration import (
    fitting,
    held_out,
    kernel_trace,
    measure,
    ort_profile,
    records,
    report,
    schedule,
)

needs_plugin = pytest.mark.skipif(
    not (LIB_DIR / PLUGIN_NAME).is_file(), reason="plugin not built (bash custom_ops/build.sh)"
)


def test_node_times_keeps_only_runs_after_warmup() -> None:
    run = lambda ts: {"cat": "Session", "name": "model_run", "ts": ts, "dur": 100}  # noqa: E731
    node = lambda name, ts, dur: {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur}  # noqa: E731
    events = [
        run(0),
        node("a", 10, 50),
        run(200),
        node("a", 210, 7),
        node("b", 250, 3),
        {"cat": "Node", "name": "a_fence_before", "ts": 205, "dur": 0},
    ]
    assert ort_profile.node_times(events, warmup=1) == {"a": [7e-6], "b": [3e-6]}
    assert ort_profile.node_times(events, warmup=0)["a"] == [50e-6, 7e-6]


def test_a_runs_delay_comes_off_the_nodes_it_lengthened() -> None:
    """Another process held the CPU 40 us of the first run and 30 us of the second: the time comes
    off the nodes that ran longer than their fastest, by the same share of their excess, and never
    below their fastest; a run without delay keeps its times."""
    runs = [{"a": 50e-6, "b": 3e-6}, {"a": 10e-6, "b": 33e-6}, {"a": 12e-6, "b": 5e-6}]
    got = ort_profile.without_run_delay(runs, [40e-6, 30e-6, 0.0])
    assert got[0] == pytest.approx({"a": 10e-6, "b": 3e-6})  # all 40 us fell in a
    assert got[1] == pytest.approx({"a": 10e-6, "b": 3e-6})  # all 30 us fell in b
    assert got[2] == pytest.approx(runs[2])
    halved = ort_profile.without_run_delay([{"a": 20e-6}, {"a": 10e-6}], [5e-6, 0.0])
    assert halved[0]["a"] == pytest.approx(15e-6)  # a delay shorter than the excess: that much off
    run = lambda ts: {"cat": "Session", "name": "model_run", "ts": ts, "dur": 100}  # noqa: E731
    node = lambda name, ts, dur: {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur}  # noqa: E731
    events = [run(0), node("a", 10, 50), run(200), node("a", 210, 10), run(400), node("a", 410, 20)]
    assert ort_profile.node_times(events, 1, [1e-3, 0.0, 4e-6]) == {"a": pytest.approx([10e-6, 16e-6])}
    assert ort_profile.node_times(events, 1, [0.0]) == {"a": [10e-6, 20e-6]}  # delays of other runs: none


def test_a_profiled_run_reports_its_run_delay() -> None:
    """The delay of a run is read from the calling thread's schedstat around it: never negative,
    and 0 on a system that does not report it."""
    session = ort.InferenceSession(_relu_model(), providers=["CPUExecutionProvider"])
    delay = ort_profile.run_profiled(session, {"x": np.ones((1, 4), np.float32)})
    assert delay >= 0.0
    if not Path(ort_profile.THREAD_SCHEDSTAT).is_file():
        assert delay == 0.0


def _relu_model() -> bytes:
    from onnx import TensorProto, helper

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y"))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_profiler_matches_every_working_node_of_a_zoo_model(zoo_dir: Path) -> None:
    profile, medians, ops = ort_profile.measure_ops(zoo_dir / "two_branch.onnx", runs=3, warmup=1)
    names = [n.name for n in profile.graph.nodes]
    assert set(medians) == set(range(len(names)))  # every node reported once per run, by name
    assert {t.node for t in ops} == set(names)  # two_branch has no shape-only node
    for t in ops:
        assert t.seconds > 0 and t.runs == 3
        assert t.op == ort_profile.one_op_profile(profile, names.index(t.node))
    by_type = {t.op_type: t.op.engine for t in ops}
    assert by_type["MatMul"] == Engine.MATRIX and by_type["Sigmoid"] == Engine.VECTOR
    assert by_type["Concat"] == Engine.MEMORY


def _synthetic_ops(truth: costmodel.Target, n: int = 60, seed: int = 1) -> list[records.OpTiming]:
    """Op timings made by the cost model itself from `truth` (some ops DDR-bound)."""
    rng = np.random.default_rng(seed)
    ops = []
    for k in range(n):
        engine = (Engine.MATRIX, Engine.VECTOR, Engine.MEMORY)[k % 3]
        nbytes = int(rng.integers(1_000, 1_000_000))
        flops = {Engine.MATRIX: rng.uniform(1e5, 1e9), Engine.VECTOR: rng.uniform(1e3, 1e7)}.get(engine, 0.0)
        op = NodeProfile(
            k, engine, float(flops), nbytes // 2, nbytes - nbytes // 2, 0, nbytes, int(nbytes * rng.uniform(0.5, 3.0))
        )
        ops.append(records.OpTiming("synthetic", f"n{k}", engine.value, op, task_time(TaskProfile.of([op]), truth), 1))
    return ops


def _truth(ddr_bytes: float) -> costmodel.Target:
    """The parameters that make the synthetic timings: profiled ops ran on one thread."""
    return replace(
        costmodel.HOST,
        matrix_flops=Param(75e9, "FLOP/s", "test"),
        vector_flops_per_context=Param(12e9, "FLOP/s", "test"),
        dma_bytes=Param(6e9, "B/s", "test"),
        ddr_bytes=Param(ddr_bytes, "B/s", "test"),
        op_overhead_s=Param(4e-6, "s", "test"),
        general_workers=Param(1.0, "workers", "test: profiled ops ran on one thread"),
    )


FITTED = ("matrix_flops", "vector_flops_per_context", "dma_bytes", "ddr_bytes", "op_overhead_s")


def test_fit_recovers_the_parameters_that_made_the_timings() -> None:
    truth = _truth(ddr_bytes=15e9)
    ops = _synthetic_ops(truth)
    fit = fitting.fit_target(ops, base=costmodel.HOST, where="synthetic")
    assert fit.ddr_bound, "the synthetic set should contain DDR-bound ops"
    for key in FITTED:
        got, want = getattr(fit.target, key).value, getattr(truth, key).value
        assert got == pytest.approx(want, rel=1e-6), key
        assert getattr(fit.target, key).source.startswith("measured: least-squares fit to 60 ORT-profiled ops")
    assert fit.median_abs_residual < 1e-9
    assert fit.target.name == fitting.CALIBRATED_NAME


def test_fit_keeps_the_base_value_of_an_engine_without_ops() -> None:
    truth = replace(costmodel.HOST, ddr_bytes=Param(1e15, "B/s", "test"), general_workers=Param(1.0, "workers", "test"))
    ops = [t for t in _synthetic_ops(truth) if t.op.engine != Engine.MEMORY]
    fit = fitting.fit_target(ops, base=costmodel.HOST)
    assert fit.target.dma_bytes.value == costmodel.HOST.dma_bytes.value
    assert fit.target.dma_bytes.source.startswith("not fitted")
    assert fit.target.matrix_flops.value == pytest.approx(truth.matrix_flops.value, rel=1e-6)


def test_load_target_round_trips(tmp_path: Path) -> None:
    for target in (costmodel.HOST, costmodel.HEXAGON_V73):
        path = tmp_path / f"{target.name}.json"
        path.write_text(target.to_json())
        assert costmodel.load_target(path) == target
    result = report.CalibrationResult(costmodel.HOST, [], [], "nowhere")
    (tmp_path / "result.json").write_text(result.to_json())
    assert costmodel.load_target(tmp_path / "result.json") == costmodel.HOST
    (tmp_path / "bad.json").write_text(json.dumps({"name": "x"}))
    with pytest.raises(ValueError, match="not a cost-model target"):
        costmodel.load_target(tmp_path / "bad.json")


def test_every_hexagon_figure_is_marked_modelled_or_emulated_and_tabled() -> None:
    params = costmodel.HEXAGON_V73.params()
    classes = dict(costmodel.HEXAGON_V73.class_rates)  # the 8-bit op classes' emulated rates
    assert all(p.source.startswith(("modelled (", "emulated (qemu packets)")) for p in params.values())
    assert all(p.source.startswith("emulated (qemu packets)") for p in classes.values())
    rows = costmodel.parameter_table(costmodel.HEXAGON_V73)
    assert rows[2] == "| parameter | value | unit | source |"
    tabled = [r for r in rows if r.startswith("| ") and not r.startswith("| parameter")]
    assert len(tabled) == len(params) + len(classes)


def _op(engine: Engine, work: float, op_type: str = "", node: int = 0) -> NodeProfile:
    """A one-op profile with `work` FLOPs (bytes for a memory op) and no DDR traffic to speak of."""
    flops = 0.0 if engine == Engine.MEMORY else work
    nbytes = int(work) if engine == Engine.MEMORY else 8
    return NodeProfile(node, engine, flops, nbytes // 2, nbytes - nbytes // 2, 0, nbytes, 0, op_type=op_type)


def _pool_target(workers: float) -> costmodel.Target:
    return replace(
        costmodel.HOST,
        matrix_flops=Param(1e9, "FLOP/s", "test"),
        vector_flops_per_context=Param(1e9, "FLOP/s", "test"),
        op_overhead_s=Param(0.0, "s", "test"),
        general_workers=Param(workers, "workers", "test"),
    )


def test_a_general_worker_pool_runs_both_tasks_as_its_workers_allow() -> None:
    """Separate engines overlap a matrix task with a vector task but not two matrix tasks; a
    general-worker pool overlaps any two tasks on two workers, and runs them one after the other
    on one (at any share)."""
    a = TaskProfile.of([_op(Engine.MATRIX, 1e6)])  # 1 ms at 1 GFLOP/s
    b = TaskProfile.of([_op(Engine.VECTOR, 1e6, node=1)])
    m = TaskProfile.of([_op(Engine.MATRIX, 1e6, node=1)])
    engines = _pool_target(0.0)
    assert costmodel.predict(a, b, engines, 0.5).fused == pytest.approx(1e-3)
    assert costmodel.predict(a, m, engines, 0.5).fused == pytest.approx(2e-3)
    for share in (0.2, 0.5, 0.8):
        assert costmodel.predict(a, m, _pool_target(2.0), share).fused == pytest.approx(1e-3)
        assert costmodel.predict(a, b, _pool_target(1.0), share).fused == pytest.approx(2e-3)
    assert costmodel.predict(a, b, _pool_target(1.5), 0.5).fused == pytest.approx(2e-3 / 1.5)
    assert costmodel.task_time(a, _pool_target(1.0)) == pytest.approx(1e-3)  # alone: one worker


def test_an_op_runs_on_as_many_workers_as_its_items_and_the_others_join_late() -> None:
    """The kernel cuts a GEMM into items of about 2^23 FLOPs that both workers take; the workers other
    than the caller join a call that woke them only after their wake-up (`join_s`)."""
    two_items = TaskProfile.of([_op(Engine.MATRIX, 2 * costmodel.GEMM_ITEM_FLOPS)])
    seconds = 2 * costmodel.GEMM_ITEM_FLOPS / 1e9
    assert costmodel.work_items(two_items.ops[0]) == 2
    assert costmodel.task_time(two_items, _pool_target(2.0)) == pytest.approx(seconds / 2)
    assert costmodel.task_time(two_items, _pool_target(1.0)) == pytest.approx(seconds)
    assert costmodel.sequential_time(two_items, _pool_target(2.0)) == pytest.approx(
        seconds
    )  # as ORT profiles: one thread
    assert costmodel.serial_time(two_items, _pool_target(2.0)) == pytest.approx(
        seconds / 2
    )  # unfused alone on the pool
    a, m = TaskProfile.of([_op(Engine.MATRIX, 1e6)]), TaskProfile.of([_op(Engine.MATRIX, 1e6, node=1)])
    late = replace(_pool_target(2.0), join_s=Param(5e-4, "s", "test"))
    # 0.5 ms on the caller alone (each task at half its rate), then both at full rate: 0.75 ms more
    assert costmodel.predict(a, m, late, 0.5).fused == pytest.approx(1.25e-3)


def test_a_batched_matmul_pays_a_gemm_call_and_an_item_per_matrix() -> None:
    """The kernel runs a batched MatMul as one GEMM call and at least one item per matrix: 16 heads' scores
    pay 16 calls' fixed time, spread over the pool's workers, and the fit counts them so."""
    x = onnx.helper.make_tensor_value_info("q", onnx.TensorProto.FLOAT, [4, 4, 1, 32])
    k = onnx.helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT, [4, 4, 32, 33])
    y = onnx.helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, [4, 4, 1, 33])
    g = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["q", "k"], ["s"], name="scores")], "g", [x, k], [y])
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    scores = profile_graph(graph.index_model(model)).nodes[0]
    assert scores.gemm_calls == 16 and costmodel.work_items(scores) == 16
    call = replace(_pool_target(1.0), matrix_op_s=Param(1e-6, "s", "test"))
    task = TaskProfile.of([scores])
    assert costmodel.task_time(task, call) == pytest.approx(16e-6 + scores.flops / 1e9)
    assert costmodel.task_time(task, replace(call, general_workers=Param(2.0, "workers", "test"))) == pytest.approx(
        (16e-6 + scores.flops / 1e9) / 2
    )
    truth = replace(call, op_overhead_s=Param(5e-7, "s", "test"), ddr_bytes=Param(1e15, "B/s", "test"))
    timings = [
        records.OpTiming("m", f"n{k}", "MatMul", op, task_time(TaskProfile.of([op]), truth), 1)
        for k, calls in enumerate((1, 2, 4, 16))
        for op in [replace(scores, node=k, flops=scores.flops * (k + 1), gemm_calls=calls)]
    ]
    fit = fitting.fit_target(timings, base=replace(costmodel.HOST, general_workers=Param(1.0, "workers", "test")))
    assert fit.target.matrix_op_s.value == pytest.approx(1e-6, rel=1e-6)


def test_a_task_that_fills_the_pool_alone_gains_nothing_fused() -> None:
    """Unfused, a task can use every worker too (ORT's intra-op threads): two GEMMs that each split over
    both workers save nothing together, where against one thread the pool's parallelism looked like a
    gain (a stranger's 55 pairs "saving" 57 ms each, measured 7x slower)."""
    pool = _pool_target(2.0)
    a = TaskProfile.of([_op(Engine.MATRIX, 4 * costmodel.GEMM_ITEM_FLOPS)])
    b = TaskProfile.of([_op(Engine.MATRIX, 4 * costmodel.GEMM_ITEM_FLOPS, node=1)])
    p = costmodel.predict(a, b, pool, 0.5)
    assert p.serial == pytest.approx(p.fused, rel=0.01) and p.gain <= 0.0
    assert costmodel.sequential_time(a, pool) + costmodel.sequential_time(b, pool) == pytest.approx(2 * p.fused)


def test_a_calls_join_and_wake_ups_come_from_its_trace() -> None:
    def doc(t0_us: float, wall_us: float, run_us: float, starts: dict[int, float]) -> dict:
        events = [{"worker": w, "start_ns": s * 1e3} for w, s in starts.items()]
        return {"t0_ns": t0_us * 1e3, "wall_ns": wall_us * 1e3, "run_wall_ns": run_us * 1e3, "trace_events": events}

    docs = {"p": [doc(0, 10, 11, {0: 0}), doc(1000, 10, 25, {0: 0, 1: 4}), doc(1050, 10, 10.5, {0: 0, 1: 1})]}
    idle = kernel_trace.idle_before(docs)["p"]
    assert math.isnan(idle[0]) and idle[1] == pytest.approx(990e-6) and idle[2] == pytest.approx(40e-6)
    assert [kernel_trace.call_join(d) for d in docs["p"]] == pytest.approx([10e-6, 4e-6, 1e-6])  # none: the span
    cold_share, cold, warm = kernel_trace.call_leads(docs["p"], idle)
    assert cold_share == 0.5 and cold == pytest.approx(15e-6) and warm == pytest.approx(0.5e-6)
    assert kernel_trace.cold_join(docs["p"], idle) == pytest.approx(4e-6)


def test_an_op_class_runs_at_its_own_rate_and_travels_in_the_json(tmp_path: Path) -> None:
    pool = Param(1e8, "FLOP/s", "test: windowed pooling")
    target = replace(_pool_target(1.0), class_rates=(("pool", pool),))
    maxpool, relu = _op(Engine.VECTOR, 1e6, "MaxPool"), _op(Engine.VECTOR, 1e6, "Relu")
    assert (costmodel.op_class(maxpool), costmodel.op_class(relu)) == ("pool", "vector")
    assert costmodel.task_time(TaskProfile.of([maxpool]), target) == pytest.approx(1e-2)
    assert costmodel.task_time(TaskProfile.of([relu]), target) == pytest.approx(1e-3)
    (tmp_path / "t.json").write_text(target.to_json())
    assert costmodel.load_target(tmp_path / "t.json") == target
    # Hexagon: float ops at their engine's rate; only 8-bit classes (emulated HVX kernels) have their own
    assert all(name.startswith("int8 ") for name in costmodel.HEXAGON_V73.to_dict()["class_rates"])


def test_the_serial_prediction_runs_on_the_baseline(tmp_path: Path) -> None:
    """A target whose unfused tasks run on other kernels (the host: stock ORT) predicts serial
    times there and fused times on its own rates; the JSON keeps the baseline."""
    a = TaskProfile.of([_op(Engine.MATRIX, 1e6)])
    b = TaskProfile.of([_op(Engine.VECTOR, 1e6, node=1)])
    ort = replace(_pool_target(1.0), name="ort", matrix_flops=Param(4e9, "FLOP/s", "test"))
    kernel = replace(_pool_target(1.0), baseline=ort)
    p = costmodel.predict(a, b, kernel, 0.5)
    assert (p.time_a, p.time_b, p.serial) == pytest.approx((0.25e-3, 1e-3, 1.25e-3))
    assert p.fused == pytest.approx(2e-3)  # both on the kernel's rates, one worker
    assert costmodel.serial_time(a, kernel) == costmodel.task_time(a, ort) < costmodel.task_time(a, kernel)
    (tmp_path / "t.json").write_text(kernel.to_json())
    assert costmodel.load_target(tmp_path / "t.json") == kernel
    assert costmodel.parameter_table(kernel)[-1].startswith("| baseline | `ort` |")


def test_a_windowed_pool_counts_every_window_element(zoo_dir: Path) -> None:
    from hexfuse_onnx.graph import load
    from hexfuse_onnx.profile import profile_graph

    g = load(zoo_dir / "inception.onnx")
    (i,) = [k for k, n in enumerate(g.nodes) if n.op_type == "MaxPool"]
    out = g.info(g.nodes[i].output[0]).numel
    assert profile_graph(g).nodes[i].flops == out * 9  # kernel_shape [3, 3]


def test_fit_recovers_the_rate_of_each_op_class() -> None:
    truth = replace(
        costmodel.HOST,
        op_overhead_s=Param(3e-6, "s", "test"),
        ddr_bytes=Param(1e15, "B/s", "test"),
        class_rates=(("conv", Param(30e9, "FLOP/s", "test")), ("transcendental", Param(2e9, "FLOP/s", "test"))),
    )
    ops = []
    for k, op_type in enumerate(["MatMul", "Conv", "Add", "Tanh", "Concat"] * 6):
        engine = Engine.MEMORY if op_type == "Concat" else Engine.MATRIX if op_type in ("MatMul", "Conv") else None
        op = _op(engine or Engine.VECTOR, 1e4 * (k + 1) ** 1.5, op_type, k)
        ops.append(records.OpTiming("synthetic", f"n{k}", op_type, op, task_time(TaskProfile.of([op]), truth), 1))
    fit = fitting.fit_target(ops, base=costmodel.HOST)
    rates = dict(fit.target.class_rates)
    int8 = dict(costmodel.HOST.class_rates)  # the zoo's float builders cannot fit them: the base's stand
    assert int8 and set(int8) <= set(costmodel.INT8_OP_CLASSES.values())
    assert set(rates) == {"conv", "transcendental", *int8}
    assert all(rates[name] == p for name, p in int8.items())
    assert fit.target.vector_int8_ops_per_context == costmodel.HOST.vector_int8_ops_per_context
    for name, p in truth.class_rates:
        assert rates[name].value == pytest.approx(p.value, rel=1e-6)
        assert rates[name].source.startswith("measured: least-squares fit to 30 ORT-profiled ops")
    assert fit.target.matrix_flops.value == pytest.approx(truth.matrix_flops.value, rel=1e-6)
    assert fit.median_abs_residual < 1e-9


@pytest.mark.parametrize("seed", [1, 3, 6])  # seeds where the fit without the floor went below it
def test_the_fitted_ddr_bandwidth_is_never_below_what_an_op_reached(seed: int) -> None:
    """With noisy times, a few DDR-bound ops can fit a bandwidth below what an engine-bound op
    reached (so that op could not have run as measured): the fit keeps at least that bandwidth."""
    truth = replace(costmodel.HOST, ddr_bytes=Param(15e9, "B/s", "test"))
    rng = np.random.default_rng(seed)
    noisy = [replace(t, seconds=t.seconds * float(np.exp(rng.normal(0, 0.3)))) for t in _synthetic_ops(truth, 30, seed)]
    fit = fitting.fit_target(noisy, base=costmodel.HOST)
    reached = fitting.ddr_lower_bound(noisy, fit.target.op_overhead_s.value)
    assert reached is not None and fit.target.ddr_bytes.value >= reached * (1 - 1e-6)


def _row(work_s: float, span_s: float, gap_s: float = float("nan")) -> records.PairRow:
    return records.PairRow(
        "m", "p", "branches", "", 0.5, False, 0.0, span_s, span_s, 0.0, 0.0,
        kernel_work_s=work_s, kernel_gap_per_op_s=gap_s,
    )  # fmt: skip


def test_the_pools_workers_and_the_kernels_gaps_are_measured_from_the_calls() -> None:
    rows = [_row(1.0, 1.0, 1e-6), _row(1.6, 1.0, 3e-6), _row(3.0, 1.0, 2e-6), _row(0.8, 1.0)]
    pool = schedule.with_measured_pool(costmodel.HOST, rows)
    assert pool.general_workers.value == pytest.approx(1.3)  # median of 1.0, 1.6, 3.0, 0.8
    assert pool.general_workers.source.startswith("measured: median over 4 plugin pairs")
    assert schedule.with_measured_pool(costmodel.HOST, rows[2:3]).general_workers.value == 2.0  # the pool's own
    assert schedule.with_measured_pool(costmodel.HOST, rows[3:]).general_workers.value == 1.0  # at least one
    assert schedule.with_measured_pool(costmodel.HEXAGON_V73, rows) == costmodel.HEXAGON_V73  # separate engines
    gapped = schedule.with_kernel_gap(costmodel.HOST, rows)
    assert gapped.op_overhead_s.value == pytest.approx(costmodel.HOST.op_overhead_s.value + 2e-6)
    assert "between a task's items per op (median over 3 plugin pairs" in gapped.op_overhead_s.source


@pytest.mark.parametrize("name", ["inception", "mlp_chain"])  # branches; a micro-batch pair (renamed copies)
def test_program_ops_map_to_the_pairs_own_nodes(zoo_dir: Path, tmp_path: Path, name: str) -> None:
    """Every program op of a lowered zoo pair names a body node, and through it a real graph node
    of that pair (a micro-batch copy maps back to its chain node)."""
    from hexfuse_onnx import contract as C
    from hexfuse_onnx.kinds import KINDS
    from hexfuse_onnx.lowering import known_tensors, program_op_maps

    fused, pairs, profile = measure.fused_pairs(zoo_dir / f"{name}.onnx", tmp_path / "m.fused.onnx", costmodel.HOST)
    assert fused is not None and pairs
    model = onnx.load(str(fused))
    maps = program_op_maps(model)
    assert set(maps) == set(pairs)
    for node in (n for n in model.graph.node if n.domain == C.DOMAIN):
        program = next(a.s for a in node.attribute if a.name == C.ATTR_PROGRAM)
        origins = maps[node.name]
        assert [o.op for o in origins] == list(range(struct.unpack_from("<IHHIIII", program)[6]))
        fn = next(f for f in model.functions if f.overload == node.overload)
        kind = KINDS[next(a.s.decode() for a in node.attribute if a.name == C.ATTR_KIND)]
        lowered = kind.program_function(node, fn, known_tensors(model.graph)).node  # micro-batch: the copies
        assert all(o.body_index is not None and lowered[o.body_index].name == o.node for o in origins)
        per_node, unnamed = measure.node_kernel_seconds(model, node.name, profile, {o.op: 1.0 for o in origins})
        assert unnamed == 0.0 and sum(per_node.values()) == len(origins)
        pair = pairs[node.name]
        assert set(per_node) <= set(pair.candidate.nodes)
        working = {i for i in pair.candidate.nodes if profile.graph.nodes[i].op_type != "Constant"}
        assert set(per_node) == working
        if pair.microbatch_sizes:  # both copies of each chain node land on it
            assert set(per_node.values()) == {2.0}


def test_preempted_time_is_the_mean_wait_of_the_workers_that_ran_items() -> None:
    events = [{"worker": 0}, {"worker": 1}, {"worker": 1}]
    doc = {"run_wall_ns": 10_000, "runnable_ns": [4_000, 2_000, 9_999], "trace_events": events}
    assert kernel_trace.preempted_s(doc) == pytest.approx(3e-6)  # worker 2 ran no item: not counted
    assert kernel_trace.unpreempted_call_s(doc) == pytest.approx(7e-6)
    del doc["runnable_ns"]  # a trace without the field (hexagon backend): nothing subtracted
    assert kernel_trace.unpreempted_call_s(doc) == pytest.approx(10e-6)


def test_a_wait_counted_beyond_its_call_leaves_the_call_out() -> None:
    """Linux counts a thread's run delay when it next runs: a wait begun before the call can exceed
    it. Such calls are left out of the call time, and when all are, the wall times stand."""
    ran = [{"worker": 0}]
    short = {"run_wall_ns": 10_000, "runnable_ns": [4_000], "trace_events": ran}
    beyond = {"run_wall_ns": 10_000, "runnable_ns": [30_000], "trace_events": ran}
    assert kernel_trace.unpreempted_calls_s([short, beyond]) == [pytest.approx(6e-6)]
    assert kernel_trace.unpreempted_calls_s([beyond, beyond]) == [pytest.approx(10e-6)] * 2


_SHARED_CPU_RUN = """
import os, sys, tempfile
from pathlib import Path
from hexfuse_onnx.tools.calibration import kernel_trace, measure
from hexfuse_onnx import costmodel
from hexfuse_onnx.verify import random_inputs
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the caller and the pool's worker on one CPU
with tempfile.TemporaryDirectory() as d:
    fused, pairs, _ = measure.fused_pairs(sys.argv[1], Path(d) / "f.onnx", costmodel.HOST)
    traced = kernel_trace.TracedSession(fused, sorted(pairs), Path(d))
    feeds = random_inputs(traced.session, seed=0)
    traced.run(feeds, 4)
docs = [doc for ds in traced.docs.values() for doc in ds]
print(sum(doc["runnable_ns"][0] for doc in docs) / sum(doc["run_wall_ns"] for doc in docs))
"""


@needs_plugin
@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").is_file(), reason="Linux schedstat only")
def test_trace_records_the_time_the_caller_waited_for_its_cpu(zoo_dir: Path) -> None:
    """A caller that shares its one CPU with the pool's other worker (which works or spins for work)
    waits for it a good part of each call, and the trace's `runnable_ns` says so (0 if the kernel
    did not read it). In its own process: the pinning stays there."""
    done = subprocess.run(
        [sys.executable, "-c", _SHARED_CPU_RUN, str(zoo_dir / "mlp_chain.onnx")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    waited = float(done.stdout.split()[-1])
    assert 0.05 < waited <= 1.0  # 0.59-0.67 at load 2.5; 0.089 once at load 6-13


@needs_plugin
def test_kernel_times_of_a_traced_plugin_run(zoo_dir: Path, tmp_path: Path) -> None:
    """The per-op item times of a real traced run map to positive times for the pair's nodes."""
    fused, pairs, profile = measure.fused_pairs(zoo_dir / "two_branch.onnx", tmp_path / "m.fused.onnx", costmodel.HOST)
    traces = kernel_trace.plugin_traces(fused, sorted(pairs), runs=2, warmup=1)
    model = onnx.load(str(fused))
    for name, trace in traces.items():
        assert trace.runs == 2 and trace.span_s > 0 and trace.work_s > 0
        assert all(v > 0 for v in trace.op_seconds.values())
        assert sum(trace.op_seconds.values()) == pytest.approx(trace.work_s, rel=0.5)
        per_node, unnamed = measure.node_kernel_seconds(model, name, profile, trace.op_seconds)
        assert unnamed == 0.0
        assert set(per_node) == set(pairs[name].candidate.nodes)
        assert all(v > 0 for v in per_node.values())
    measured = measure.measure_pairs(zoo_dir / "two_branch.onnx", costmodel.HOST, {}, tmp_path, runs=2, warmup=1)
    assert measured and all(m.kernel_ops for m in measured)
    for m in measured:
        assert {t.node for t in m.kernel_ops} == {profile.graph.nodes[i].name for i in m.pair.candidate.nodes}
        assert all(t.seconds > 0 and t.runs == 2 for t in m.kernel_ops)
        assert m.row.kernel_work_s > 0 and m.row.predicted_fused_s > 0


@needs_plugin
def test_prediction_error_end_to_end_on_the_plugin(zoo_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costmodel, "TARGETS", dict(costmodel.TARGETS))  # calibrate registers its target
    monkeypatch.delenv(costmodel.CALL_OVERHEAD_ENV)  # get_target must give the measured call overhead back
    result = calibrate.calibrate([zoo_dir / "two_branch.onnx"], runs=3, warmup=1)
    assert result.fit_rows and result.pair_rows
    assert costmodel.get_target(fitting.CALIBRATED_NAME) == result.target
    assert result.target.call_overhead_s.source.startswith("measured: median over")
    for r in result.pair_rows:
        assert r.measured_call_s > 0 and r.measured_span_s > 0 and r.measured_serial_s > 0
        assert 0 < r.share_a < 1
        for e in (r.fused_error, r.span_error, r.serial_error):
            assert math.isfinite(e)
    assert math.isfinite(result.median_abs_error)
    # the second fit, to the kernel's own item times, on the same pairs
    assert result.kernel_target is not None and result.kernel_fit_rows
    assert result.kernel_target.name == fitting.KERNEL_FIT_NAME
    overhead = result.kernel_target.op_overhead_s.source  # item times leave the gaps between items out
    assert overhead.startswith("measured: ") and "between a task's items per op" in overhead
    assert "kernel-traced" in overhead or "not fitted" in overhead
    assert result.ort_target is not None and result.ort_target.baseline is not None
    assert result.kernel_target.baseline == result.ort_target.baseline  # unfused, the pair's nodes run on ORT
    assert result.ort_target.baseline.general_workers.value == 1.0  # as profiled: one intra-op thread
    assert result.errors(fitting.KERNEL_FIT).serial == result.errors(fitting.ORT_FIT).serial
    for t in (result.ort_target, result.kernel_target):  # the pool's workers as they ran in these calls
        assert t is not None and 1.0 <= t.general_workers.value <= 1 + costmodel.HOST.vector_contexts.value
        assert t.general_workers.source.startswith("measured: ") and " 1 plugin pairs" in t.general_workers.source
    assert [(r.model, r.node) for r in result.kernel_pair_rows] == [(r.model, r.node) for r in result.pair_rows]
    for r, k in zip(result.pair_rows, result.kernel_pair_rows):
        assert k.measured_call_s == r.measured_call_s and k.call_overhead_s == r.call_overhead_s
        assert math.isfinite(k.fused_error)
    assert math.isfinite(result.kernel_median_abs_error)
    assert result.chosen_fit in (fitting.ORT_FIT, fitting.KERNEL_FIT)
    chosen = result.kernel_target if result.chosen_fit == fitting.KERNEL_FIT else result.ort_target
    assert result.target.name == fitting.CALIBRATED_NAME
    assert result.target.matrix_flops == chosen.matrix_flops
    doc = json.loads(result.to_json())
    assert doc["pairs"][0]["node"] == result.pair_rows[0].node
    assert doc["target_fit"] == result.chosen_fit
    assert doc["fits"]["ort"]["label"] == "fit to ORT profiling"
    assert doc["fits"]["kernel"]["label"] == "fit to the kernel's own item times"
    assert doc["pairs"][0]["kernel_fit"]["fused_error"] == result.kernel_pair_rows[0].fused_error
    lines = result.summary_lines()
    one_model = "none: held out needs pairs of two models or more (one given)"  # nothing to hold out
    assert any("median |error|" in line and one_model in line for line in lines)
    assert any(
        "in-sample" in line and "fit to ORT profiling" in line and "fit to the kernel's own item times" in line
        for line in lines
    )
    assert len(result.op_lines()) == len(result.kernel_fit_rows) + 1


@needs_plugin
@pytest.mark.slow  # a real `python -m hexfuse_onnx calibrate` (re-executes itself)
def test_cli_calibrate_writes_a_target_that_rewrite_uses(tmp_path: Path) -> None:
    """`calibrate -o` then `inspect --target FILE`: the calibrated target drives the pass; a file
    that is not a target is refused with exit 2."""
    from cli_support import run_cli, run_cli_process

    out = tmp_path / "calib.json"
    r = run_cli_process("calibrate", "two_branch", "--runs", "3", "--warmup", "1", "-o", out, "-q", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "median |error|" in r.stdout
    # one model: nothing to hold out, said so (a stranger read "fit to ORT profiling nan%")
    assert "none: held out needs pairs of two models or more (one given)" in r.stdout and "nan" not in r.stdout
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


def _slower(m: records.PairMeasurement, factor: float) -> records.PairMeasurement:
    """The measurement with every time measured on its pair multiplied by `factor`."""
    r = m.row
    row = replace(
        r,
        measured_call_s=r.measured_call_s * factor,
        measured_span_s=r.measured_span_s * factor,
        kernel_work_s=r.kernel_work_s * factor,
        kernel_gap_per_op_s=r.kernel_gap_per_op_s * factor,
        cold_join_s=r.cold_join_s * factor,
        wake_leads_s=tuple(t * factor for t in r.wake_leads_s),
    )
    ops = [replace(t, seconds=t.seconds * factor) for t in m.kernel_ops]
    return replace(m, row=row, kernel_ops=ops)


@needs_plugin
def test_the_held_out_error_predicts_each_model_without_its_own_measurements(zoo_dir: Path, tmp_path: Path) -> None:
    """Leave one model out: every time measured on one model (its ORT-profiled ops, its pairs' kernel
    item times, calls, spans and wake-ups) made 5x slower leaves that model's held-out predictions
    exactly as they were, while its in-sample ones and the other models' held-out ones move."""
    ops: list[records.OpTiming] = []
    pairs: list[records.PairMeasurement] = []
    for name in ("two_branch", "mha_encoder", "convnet_heads"):
        _, model_ops, measured = measure.measure_model(
            zoo_dir / f"{name}.onnx", costmodel.HOST, tmp_path, runs=3, warmup=1
        )
        ops += model_ops
        pairs += measured
    assert {m.row.model for m in pairs} == {"two_branch", "mha_encoder", "convnet_heads"}
    slow = "two_branch"
    slow_ops = [replace(t, seconds=t.seconds * 5) if t.model == slow else t for t in ops]
    slow_pairs = [_slower(m, 5.0) if m.row.model == slow else m for m in pairs]

    def predictions(rows: list[records.PairRow]) -> dict[tuple[str, str], tuple[float, float, float]]:
        return {(r.model, r.node): (r.predicted_fused_s, r.call_overhead_s, r.predicted_serial_s) for r in rows}

    before = held_out.held_out_rows(ops, pairs, costmodel.HOST)
    after = held_out.held_out_rows(slow_ops, slow_pairs, costmodel.HOST)
    for fit in (fitting.ORT_FIT, fitting.KERNEL_FIT):
        assert len(before[fit]) == len(pairs)
        old, new = predictions(before[fit]), predictions(after[fit])
        for key in old:
            if key[0] == slow:
                assert new[key] == old[key]  # nothing of its own model went into its prediction
            else:
                assert new[key] != old[key]  # the slow model is in their fits
        inside_old = predictions(held_out.fit_targets(ops, pairs, costmodel.HOST).predicted_rows(pairs, fit))
        inside_new = held_out.fit_targets(slow_ops, slow_pairs, costmodel.HOST).predicted_rows(slow_pairs, fit)
        assert any(v != inside_old[k] for k, v in predictions(inside_new).items() if k[0] == slow)


def test_wake_regimes_split_the_calls_by_the_pools_idle_time() -> None:
    def doc(call_us: float, span_us: float) -> dict:
        return {"run_wall_ns": call_us * 1e3, "wall_ns": span_us * 1e3}

    ds = [doc(10, 9), doc(18, 10), doc(30, 14), doc(31, 15), doc(5, 5)]
    idle = [100e-6, 250e-6, 400e-6, 900e-6, float("nan")]
    shares, leads = kernel_trace.wake_regimes(ds, idle)
    assert shares == (0.25, 0.25, 0.5)
    assert leads == pytest.approx((1e-6, 8e-6, 16e-6))
    rows = [replace(_row(1.0, 1.0), wake_shares=shares, wake_leads_s=leads)]
    assert schedule.measured_leads(rows) == pytest.approx(leads)
    # the lower quartile of the calls: a quarter spinning (fused 5 us + 1 us), the rest at 9 + 8 and 9 + 16 us
    quartile = schedule.at_run_quantile(replace(rows[0], regime_fused_s=(5e-6, 9e-6, 9e-6)), leads)
    assert (quartile.predicted_fused_s, quartile.call_overhead_s) == pytest.approx((5e-6, 1e-6))
    fewer_warm = replace(rows[0], wake_shares=(0.2, 0.3, 0.5), regime_fused_s=(5e-6, 9e-6, 9e-6))
    assert schedule.at_run_quantile(fewer_warm, leads).predicted_call_s == pytest.approx(17e-6)
    unknown = schedule.at_run_quantile(replace(rows[0], wake_shares=(math.nan,) * 3), leads)
    assert unknown.call_overhead_s == pytest.approx(16e-6)  # every call taken as asleep
    cold_only = [replace(_row(1.0, 1.0), wake_shares=(0.0, 0.0, 1.0), wake_leads_s=(math.nan, math.nan, 9e-6))]
    assert schedule.measured_leads(cold_only) == pytest.approx((9e-6,) * 3)  # nothing seen: the nearest regime's
    assert schedule.measured_leads([_row(1.0, 1.0)]) is None  # no traced wake-up at all


def test_a_pairs_per_op_kernel_times_add_up_to_its_work_at_the_quantile() -> None:
    """Two ops whose times trade off run to run: every call does 5 us of work, but each op's own lower
    quartile (1.75 us) sums to 3.5 us. The per-op times come from the runs at the quantile of the sum."""
    per_run = [{0: a * 1e-6, 1: (5 - a) * 1e-6} for a in (1.0, 2.0, 3.0, 4.0)]
    ops = kernel_trace.op_seconds_at_quantile(per_run)
    assert sum(ops.values()) == pytest.approx(records.over_runs(sum(r.values()) for r in per_run))
    assert ops[0] == pytest.approx(1.5e-6)  # the mean over the lower half of the runs by their sum (a tie: 1 and 2)
    assert kernel_trace.quantile_band([4.0, 1.0, 3.0, 2.0, 5.0, 6.0, 7.0, 8.0]) == [1, 3, 2, 0]
    two = kernel_trace.op_seconds_at_quantile([{0: 1.0, 1: 1.0}, {0: 4.0, 1: 4.0}])  # a preempted run: q25 3.5
    assert two == pytest.approx({0: 1.75, 1: 1.75})


def _vector_op(model: str, k: int, flops: float, seconds: float) -> records.OpTiming:
    op = NodeProfile(k, Engine.VECTOR, flops, 4096, 4096, 0, 8192, 0)
    return records.OpTiming(model, f"n{k}", "Add", op, seconds, 1)


def test_weighting_by_the_pairs_time_fits_the_ops_that_make_the_call() -> None:
    """Per pair, one long op and nine short ones that take twice what a line through the long ones
    gives (a cost no column models). Relative to each op's own time the short ones set the fit and
    every call comes out 5% long; relative to the pair's time the long ops, most of each call, set
    it and the calls come out within 1%."""
    pairs = [
        [_vector_op(f"m{p}", 0, flops, 1e-6 + flops / 1e10)]
        + [_vector_op(f"m{p}", k, 1e3 * k, 2 * (1e-6 + 1e3 * k / 1e10)) for k in range(1, 10)]
        for p, flops in enumerate((1e6, 2e6, 4e6))
    ]
    ops = [t for pair in pairs for t in pair]

    def worst_call_error(fit: fitting.Fit) -> float:
        calls = [
            (sum(t.seconds for t in pair), sum(r.predicted_s for r in fit.rows if r.model == pair[0].model))
            for pair in pairs
        ]
        return max(abs(predicted / measured - 1) for measured, predicted in calls)

    own = fitting.fit_target(ops, base=costmodel.HOST)
    by_pair = fitting.fit_target(ops, base=costmodel.HOST, relative_to=fitting.pair_times(pairs))
    assert fitting.pair_times([pairs[0][:2], pairs[1][:1]]) == pytest.approx(
        [pairs[0][0].seconds + pairs[0][1].seconds] * 2 + [pairs[1][0].seconds]
    )
    assert worst_call_error(by_pair) < 0.5 * worst_call_error(own)


@pytest.mark.parametrize("node_kernels", [True, False], ids=["ort", "kernel"])
def test_a_fused_op_is_fitted_as_the_program_ops_it_runs(node_kernels: bool) -> None:
    """An attention node runs GEMMs, a softmax and head-layout copies, each at its own rate (as the
    cost model simulates its parts), paying the op overhead once (ORT: one kernel call per node) or
    per program op (the plugin's items): the fit recovers the parameters that made the timings of
    plain and fused ops alike."""
    truth = replace(_truth(ddr_bytes=1e15), node_kernels=node_kernels)  # no op DDR-bound
    plain = [replace(t, op=replace(t.op, ddr_bytes=0)) for t in _synthetic_ops(truth, n=30)]
    fused = []
    for k in range(10):
        parts = [replace(t.op, node=100 + k, ddr_bytes=0) for t in plain[3 * k : 3 * k + 3]]
        whole = ort_profile.whole_node(parts)
        assert whole.parts == tuple(parts) and whole.flops == sum(p.flops for p in parts)
        seconds = task_time(TaskProfile.of([whole]), truth)
        fused.append(records.OpTiming("synthetic", f"attn{k}", "MultiHeadAttention", whole, seconds, 1))
    fit = fitting.fit_target(plain[::2] + fused, base=costmodel.HOST, node_kernels=node_kernels)
    assert fit.target.node_kernels == node_kernels
    for key in ("matrix_flops", "vector_flops_per_context", "dma_bytes", "op_overhead_s"):
        assert getattr(fit.target, key).value == pytest.approx(getattr(truth, key).value, rel=1e-6), key
    assert fit.median_abs_residual < 1e-9


@needs_plugin
def test_a_model_with_symbolic_dims_is_measured_at_the_shapes_it_was_analysed_at(tmp_path: Path) -> None:
    """calibrate ran a symbolic model at every free dim 1, where the rewrite had analysed it elsewhere: PP-OCRv3
    det's pair, proven at 128 x 128, failed the run at 1 x 1 after its stride of 32 (HFX_ERR_SHAPE, exit 70)."""
    m = models.build("inception")
    for v in (m.graph.input[0], m.graph.output[0]):
        for axis, name in ((2, "height"), (3, "width")):
            v.type.tensor_type.shape.dim[axis].dim_param = name
    src = tmp_path / "inception_hw.onnx"
    onnx.save(m, str(src))
    opened = measure._open_model(src, costmodel.HOST, tmp_path)
    binding = opened.profile.graph.binding
    assert binding is not None and opened.fused is not None
    assert {k: list(v.shape) for k, v in opened.feeds.items()} == binding.inputs
    assert binding.inputs["x"][2:] != [1, 1]
    (tmp_path / "pairs").mkdir()
    measured = measure.measure_pairs(src, costmodel.HOST, {}, tmp_path / "pairs", runs=2, warmup=1)
    assert measured and all(t.seconds > 0 for m in measured for t in m.kernel_ops)


def test_calibrate_without_models_or_zoo_asks_for_models(tmp_path: Path) -> None:
    """An installed package has no zoo: `calibrate -o host.json` (the advice the host target prints) says
    to give models, exit 2, and writes nothing. `models` is made unimportable in the CLI's process."""
    out = tmp_path / "host.json"
    argv = ["calibrate", "-o", str(out)]
    code = f"import sys; sys.modules['models'] = None; from hexfuse_onnx import cli; sys.exit(cli.main({argv!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "give the models to calibrate on" in line and "calibrate model.onnx" in line
    assert not out.exists()
