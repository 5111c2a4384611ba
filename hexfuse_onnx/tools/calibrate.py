"""Calibrate the host cost model from ONNX Runtime profiling, and measure its prediction error.

    result = calibrate(["a.onnx", "b.onnx"], progress=print)
    result.ort_target               # "host-ort-fit": fit to ORT profiling
    result.kernel_target            # "host-kernel-fit": fit to the kernel's own item times
    result.chosen_median_abs_error  # the headline: the chosen fit's held-out median |predicted/measured - 1|
    result.held_out_error("kernel")  # each fit's fused-call error, every model predicted by fits without it
    result.median_abs_error         # ORT fit, in-sample (fitted and checked on the same models)
    result.target                   # "host-calibrated": the fit with the lower held-out error (result.chosen_fit)

Every time measured over repeated runs is summarised by its lower quartile (`over_runs`,
RUN_QUANTILE), not its median: on a shared machine another process's preemption makes a run
slower, never faster, and the longer the call the likelier it is preempted.

1. Per-op times: each model runs on stock ORT (one intra-op thread, sequential, no graph
   optimisation so every node runs as written) with the ORT profiler on; the profile's node
   events of the runs after warm-up are matched to the graph's NodeProfile by node name. The
   runs come in blocks that alternate with the plugin's runs of step 3 and go round all the
   models (`measure_models`), so that every measurement sees the shared machine alike; the pairs
   are those the pass makes for the base target (every lowerable pair kept).
2. Fit: the cost model of one op is op_overhead + max(work / rate (+ matrix_op_s for a matrix
   op: a GEMM call's fixed time), DDR bytes / DDR bandwidth), work being the FLOPs of matrix and
   vector ops and the bytes of memory ops, the rate its op class's (costmodel.OP_CLASSES: conv,
   pool, transpose, transcendental) or its engine's. The fit alternates between assigning each op
   to its binding resource and one linear least-squares fit of that assignment
   (numpy.linalg.lstsq, rows weighted by 1/time: relative error), which gives the shared
   overhead, a matrix op's fixed time, one rate per engine and op class, and the DDR bandwidth. It starts with every
   op engine-bound; the bandwidth never falls below the largest a work-dominated op reached.
3. Prediction error: each model is rewritten for the calibrated target with every lowerable
   pair kept (min_gain below any real loss), and run with the FusedHexPair plugin and the kernel
   trace: each call's hfx_run wall time (the measured fused time) and its work-item span come
   from the same runs (measuring them in separate runs let the VM's speed, which drifts from
   minute to minute, into the error). The fused prediction runs the fitted rates on the kernel's
   schedule (`on_the_kernel`): ORT's per-node overhead is replaced by the kernel's measured time
   between a task's items per op, and the host pool's workers take each other's items
   (costmodel's `general_workers`, an op on as many workers as its items allow); how much of the
   second worker a call got is measured from the same traces, on the pairs whose program had work
   for two (on a loaded 2-vCPU VM often little), and how long into a call that woke the pool the
   other workers took their first item (`join_s`: the caller runs alone until then; a call that
   finds them spinning has them at once). The per-call cost outside the work items is the
   wake-up of the pool: its workers spin POOL_SPIN_S after their last item, then sleep, so a call
   that comes later pays it before its first item and one right after another does not; both are
   measured (call time - work-item span, the median of each kind of call) on the two pairs in
   series of a probe model that is in no measured model but measured with them (the first
   called after the run before, the second right after it), and each pair is predicted with its
   own mix of them (`with_call_overhead`; a worker just past its spin is still on its way to sleep and
   costs about half a wake-up: WAKE_REGIMES). The predicted time of a call is
   costmodel.predict(...).fused at the share the plugin used plus that overhead. The serial
   prediction (ORT's one thread, the fit as profiled) is compared with the ORT-profiled time of
   the pair's original nodes.
4. A second fit, to the kernel's own item times: the plugin's host kernels are not ORT's (its
   Conv, pooling and small GEMMs are slower), so rates fitted to ORT can mispredict it. The
   traced runs of step 3 give, per call, every work item's program op and duration; the sum of
   an op's item durations (worker time: an op cut into items run by both workers counts both),
   `over_runs`, is attributed to the graph node the op was lowered from
   (`lowering.program_op_nodes`; both micro-batch copies of a chain node add up to that node).
   Those per-node times, with the same one-op NodeProfiles as the ORT fit, go through the same
   `fit_target`, and the fit predicts the same measured calls (same share, same call overhead).
   In-sample, this fit is checked on the very runs it was fitted to (held out, 5., it is not). Item times leave out
   the kernel's time between items (dispatch, the barrier between ops, waiting for a worker:
   the `kernel_gap_per_op_s` column), so the measured median gap per op is added to its op
   overhead. Its ops' DDR bytes are counted in the pair's tasks, as the prediction counts them.
   Unfused, a pair's nodes run on stock ORT: the kernel fit carries the ORT fit as its
   `baseline`, which predicts its serial times.
5. The error reported is held out (`held_out_rows`): leave one model out, fit both targets to the
   other models' ORT-profiled ops, kernel item times and traced calls (the kernel's gap per op,
   its pool's workers and join), with the probe's call overheads, and predict the left-out model's pairs; the
   median |error| over all pairs is the headline. What a held-out prediction takes from its own
   pair is its schedule, not its times: the share the plugin ran it at and how long the pool had
   been idle before each call (which wake-up it paid). The in-sample errors are shown beside it.
   `-o` writes the fit (to every model) with the lower held-out median fused-call error as
   "host-calibrated" and says which.

Run it as `python -m hexfuse_onnx calibrate [-o FILE] [--table] [MODEL ...]` (the zoo when no
model is given); the CLI re-executes itself without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE first.
`--target FILE.json` of rewrite/inspect uses the written target. `benchmarks/results.py` runs the
same command and puts its output on docs/RESULTS.md. Timings are noisy on a shared 2-core VM:
nothing here asserts an error bound.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
import onnxruntime as ort

from .. import contract as C
from .. import costmodel
from .. import graph as graph_mod
from ..costmodel import Param, Target, predict, serial_time, task_time
from ..kinds import Pair, kind_of
from ..profile import Engine, GraphProfile, NodeProfile, TaskProfile, profile_graph

Progress = Callable[[str], None]
CALIBRATED_NAME = "host-calibrated"  # the target `calibrate -o` writes (the fit with the lower error)
ORT_FIT_NAME = "host-ort-fit"
KERNEL_FIT_NAME = "host-kernel-fit"
ORT_FIT = "ort"
KERNEL_FIT = "kernel"
FIT_LABELS = {ORT_FIT: "fit to ORT profiling", KERNEL_FIT: "fit to the kernel's own item times"}
ORT_MEASURED_BY = "ORT-profiled"
KERNEL_MEASURED_BY = "kernel-traced (summed work-item time on the plugin's host kernel, fused runs)"
KEEP_EVERY_PAIR = -10.0  # a min_gain no real pair falls below: measure losing pairs too
WORK_DOMINATED = 0.5  # an op whose work is at least this share of its time bounds DDR
_WORK_COLUMNS = (Engine.MATRIX, Engine.VECTOR, Engine.MEMORY)


def _quiet(_: str) -> None:
    pass


# A time measured over repeated runs is summarised by this quantile of its runs, not the median: on a
# shared machine a run that another process preempted takes longer, never shorter, so the slow tail
# is the load, not the kernel; the lower quartile is a run that was not preempted, yet not the
# single luckiest one (the minimum of N falls with N).
RUN_QUANTILE = 0.25


def over_runs(seconds: Iterable[float]) -> float:
    """A time over repeated runs: its RUN_QUANTILE (NaN without runs)."""
    values = list(seconds)
    return float(np.quantile(values, RUN_QUANTILE)) if values else float("nan")


# ---------------------------------------------------------------------------------------
# 1. Per-op times from the ORT profiler


@dataclass(frozen=True)
class OpTiming:
    """One op's measured time (`over_runs` of the profiled runs) and its profile."""

    model: str
    node: str
    op_type: str
    op: NodeProfile  # as a one-op task sees it (ddr_bytes: everything it reads and writes)
    seconds: float
    runs: int

    @property
    def work(self) -> float:
        """The fit's work unit: FLOPs for matrix and vector ops, bytes for memory ops."""
        return float(self.op.bytes) if self.op.engine == Engine.MEMORY else self.op.flops


def profiling_options(folder: str | os.PathLike[str]) -> ort.SessionOptions:
    """One intra-op thread, sequential, no graph optimisation (every node runs as written),
    the ORT profiler writing into `folder`."""
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(folder) / "ort_profile")
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return so


def node_times(events: list[dict], warmup: int) -> dict[str, list[float]]:
    """Seconds per node name and run from ORT profile events, the first `warmup` runs dropped."""
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    kept = runs[warmup:]
    times: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        if not any(start <= e["ts"] <= end for start, end in kept):
            continue
        times.setdefault(e["name"][: -len("_kernel_time")], []).append(e["dur"] / 1e6)
    return times


def profile_session(
    session: ort.InferenceSession, feeds: dict[str, np.ndarray], runs: int, warmup: int
) -> dict[str, list[float]]:
    """Run `warmup + runs` times and return the profiled node times of the last `runs`."""
    for _ in range(warmup + runs):
        session.run(None, feeds)
    path = session.end_profiling()
    try:
        events = json.loads(Path(path).read_text())
    finally:
        Path(path).unlink(missing_ok=True)
    return node_times(events, warmup)


def match_nodes(profile: GraphProfile, times: dict[str, list[float]]) -> dict[int, list[float]]:
    """Graph node id -> its profiled times, matched by node name (nodes without a unique name,
    and nodes ORT did not report, are left out)."""
    names = [n.name for n in profile.graph.nodes]
    unique = {name for name in names if name and names.count(name) == 1}
    return {i: times[name] for i, name in enumerate(names) if name in unique and name in times}


def one_op_profile(profile: GraphProfile, i: int) -> NodeProfile | None:
    """The node's profile as a one-op task (so its DDR bytes are what the cost model uses)."""
    task = profile.task([i])
    return task.ops[0] if task is not None else None


def measure_ops(
    path: str | os.PathLike[str], runs: int = 20, warmup: int = 3
) -> tuple[GraphProfile, dict[int, float], list[OpTiming]]:
    """Profile the model on ORT: (graph profile, median seconds per node id, the timings of
    every profiled node that does work)."""
    from ..verify import random_inputs

    g = graph_mod.load(path)
    profile = profile_graph(g)
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        session = ort.InferenceSession(
            str(path), sess_options=profiling_options(folder), providers=["CPUExecutionProvider"]
        )
        times = profile_session(session, random_inputs(session, seed=0), runs, warmup)
    return (profile, *op_timings(path, profile, times))


def op_timings(
    path: str | os.PathLike[str], profile: GraphProfile, times: dict[str, list[float]]
) -> tuple[dict[int, float], list[OpTiming]]:
    """(seconds per node id, the timings of every profiled node that does work) of the profiled
    node times (`over_runs` of each node's)."""
    matched = match_nodes(profile, times)
    medians = {i: over_runs(v) for i, v in matched.items()}
    timings = []
    for i, seconds in medians.items():
        op = one_op_profile(profile, i)
        if op is None or op.engine == Engine.NONE:
            continue
        n = profile.graph.nodes[i]
        timings.append(OpTiming(Path(path).stem, n.name, n.op_type, op, seconds, len(matched[i])))
    return medians, timings


# ---------------------------------------------------------------------------------------
# 2. The fit


@dataclass(frozen=True)
class FitRow:
    model: str
    node: str
    op_type: str
    engine: str
    work: float
    measured_s: float
    predicted_s: float

    @property
    def rel_error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0 if self.measured_s > 0 else float("nan")


@dataclass
class Fit:
    target: Target
    rows: list[FitRow]
    ddr_bound: list[str]  # ops the fitted model calls DDR-bound

    @property
    def median_abs_residual(self) -> float:
        return _median_abs([r.rel_error for r in self.rows])


def _median_abs(errors: Iterable[float]) -> float:
    finite = [abs(e) for e in errors if np.isfinite(e)]
    return statistics.median(finite) if finite else float("nan")


_ENGINE_COLUMNS = tuple(e.value for e in _WORK_COLUMNS)


def op_columns(ops: list[OpTiming]) -> list[str]:
    """Each op's rate column: its op class (costmodel.op_class; its engine's unless listed)."""
    return [costmodel.op_class(t.op) for t in ops]


def _columns(cols: list[str]) -> tuple[str, ...]:
    return ("overhead", "matrix_op", *sorted(set(cols)), "ddr")


def _fixed_s(t: OpTiming, coef: dict[str, float]) -> float:
    """The op's fixed time on its engine under `coef` (a matrix op's `matrix_op`)."""
    return coef["matrix_op"] if t.op.engine == Engine.MATRIX else 0.0


def _base_coefficients(base: Target, ops: list[OpTiming], cols: list[str]) -> dict[str, float]:
    """Seconds per unit of each column: per op, per unit of work of each rate column, per DDR byte."""
    coef = {
        "overhead": base.op_overhead_s.value,
        "matrix_op": base.matrix_op_s.value,
        "ddr": 1.0 / base.ddr_bytes.value,
    }
    for t, c in zip(ops, cols):
        coef[c] = 1.0 / base.rate(t.op.engine, op_class=c)
    return coef


def _design(ops: list[OpTiming], cols: list[str], ddr_bound: set[int]) -> np.ndarray:
    """One row per op: 1 in the overhead column, and its work in its rate column (and a matrix op
    1 in the matrix_op column: a GEMM call's fixed time), or its DDR bytes in the DDR column when
    the model says DDR bounds it (time = overhead + max(...))."""
    columns = _columns(cols)
    x = np.zeros((len(ops), len(columns)))
    x[:, 0] = 1.0
    for r, t in enumerate(ops):
        if r in ddr_bound:
            x[r, columns.index("ddr")] = t.op.ddr_bytes
        else:
            x[r, columns.index(cols[r])] = t.work
            x[r, columns.index("matrix_op")] = 1.0 if t.op.engine == Engine.MATRIX else 0.0
    return x


def fit_coefficients(ops: list[OpTiming], ddr_bound: set[int], base: Target) -> tuple[dict[str, float], set[str]]:
    """Least squares (numpy.linalg.lstsq, rows weighted by 1/time: relative error) of each op's
    time on the columns. A column without data, or fitted non-positive, keeps `base`'s value
    and the others are refitted. Returns every column's coefficient and the fitted columns."""
    cols = op_columns(ops)
    columns = _columns(cols)
    x = _design(ops, cols, ddr_bound)
    y = np.array([t.seconds for t in ops])
    w = 1.0 / np.maximum(y, 1e-9)
    base_coef = _base_coefficients(base, ops, cols)
    fixed = {c: base_coef[c] for k, c in enumerate(columns) if not x[:, k].any()}
    for _ in range(len(columns)):
        free = [c for c in columns if c not in fixed]
        if not free:
            break
        rhs = y - sum((x[:, columns.index(c)] * v for c, v in fixed.items()), np.zeros_like(y))
        a = x[:, [columns.index(c) for c in free]]
        coef, *_ = np.linalg.lstsq(a * w[:, None], rhs * w, rcond=None)
        bad = [c for c, v in zip(free, coef) if v <= 0]
        if not bad:
            return {**fixed, **dict(zip(free, map(float, coef)))}, set(free)
        fixed.update({c: base_coef[c] for c in bad})
    return dict(fixed), set()


def ddr_lower_bound(ops: list[OpTiming], overhead: float) -> float | None:
    """The largest DDR bandwidth a work-dominated op reached (None without such an op)."""
    seen = [
        t.op.ddr_bytes / (t.seconds - overhead)
        for t in ops
        if t.op.ddr_bytes > 0 and t.seconds - overhead >= WORK_DOMINATED * t.seconds
    ]
    return max(seen) if seen else None


def _ddr_bound(ops: list[OpTiming], coef: dict[str, float]) -> set[int]:
    """The ops whose DDR time exceeds their engine time under `coef`."""
    cols = op_columns(ops)
    return {
        k
        for k, t in enumerate(ops)
        if t.op.ddr_bytes * coef["ddr"] > (t.work * coef[cols[k]] + _fixed_s(t, coef)) * (1 + 1e-9)
    }


def fit_target(
    ops: list[OpTiming],
    base: Target = costmodel.HOST,
    name: str = CALIBRATED_NAME,
    where: str = "",
    measured_by: str = ORT_MEASURED_BY,
    fitted_to: str = "ORT per-op profiling",
) -> Fit:
    """Fit base's op overhead, engine rates and DDR bandwidth to the measured ops.

    `measured_by` says in every fitted parameter's source what the op times are ("ORT-profiled",
    or KERNEL_MEASURED_BY for the kernel's own item times), `fitted_to` the same in the target's
    description.

    The model of one op is overhead + max(work / engine rate, DDR bytes / DDR bandwidth): the
    fit alternates between assigning each op to its binding resource and a linear least-squares
    fit of that assignment, starting from every op engine-bound and the DDR bandwidth at the
    largest one observed, until the assignment no longer changes."""
    if not ops:
        raise ValueError("no profiled op to fit")
    coef, fitted = fit_coefficients(ops, set(), base)
    observed = ddr_lower_bound(ops, coef["overhead"])
    if observed is not None:
        coef["ddr"] = 1.0 / observed
    bound: set[int] | None = None
    for _ in range(8):
        new_bound = _ddr_bound(ops, coef)
        if new_bound == bound:
            break
        bound = new_bound
        coef, fitted = fit_coefficients(ops, bound, base)
        # No fitted bandwidth below what a work-dominated op reached (a few DDR-bound ops can fit one)
        observed = ddr_lower_bound(ops, coef["overhead"]) or observed
        if observed is not None and ("ddr" not in fitted or coef["ddr"] * observed > 1.0 + 1e-6):
            coef["ddr"], fitted = 1.0 / observed, (fitted - {"ddr"}) | {"ddr-observed"}
    bound = bound or set()
    target = _fitted_target(base, name, coef, fitted, ops, bound, where, measured_by, fitted_to)
    rows = [
        FitRow(
            t.model, t.node, t.op_type, t.op.engine.value, t.work, t.seconds, task_time(TaskProfile.of([t.op]), target)
        )
        for t in ops
    ]
    fit = Fit(target, rows, [ops[k].node for k in sorted(bound)])
    fit.target = _with_residual(target, f"median |residual| {fit.median_abs_residual:.1%}")
    return fit


def _fitted_target(
    base: Target,
    name: str,
    coef: dict[str, float],
    fitted: set[str],
    ops: list[OpTiming],
    ddr_bound: set[int],
    where: str,
    measured_by: str = ORT_MEASURED_BY,
    fitted_to: str = "ORT per-op profiling",
) -> Target:
    counts = {e: sum(1 for t in ops if t.op.engine == e) for e in _WORK_COLUMNS}
    what = (
        f"{len(ops)} {measured_by} ops: {counts[Engine.MATRIX]} matrix, {counts[Engine.VECTOR]} vector, "
        f"{counts[Engine.MEMORY]} memory, {len(ddr_bound)} of them DDR-bound in the model"
    )
    how = f"{what}; {{residual}}" + (f"; {where}" if where else "")

    def param(key: str, value: float, unit: str, base_param: Param) -> Param:
        if key in fitted:
            return Param(value, unit, f"measured: least-squares fit to {how}")
        if key == "ddr" and "ddr-observed" in fitted:
            return Param(
                value,
                unit,
                f"measured: the largest bandwidth a work-dominated op reached (a lower "
                f"bound; no op is DDR-bound in the fit), {how}",
            )
        return replace(base_param, source=f"not fitted (no usable data in {what}): {base_param.source}")

    def rate(key: str, unit: str, base_param: Param, per: float = 1.0) -> Param:
        return param(key, 1.0 / coef[key] / per if key in coef else base_param.value, unit, base_param)

    contexts = base.vector_contexts.value
    return replace(
        base,
        name=name,
        description=f"{base.description}; fitted to {fitted_to}",
        matrix_flops=rate(Engine.MATRIX.value, "FLOP/s", base.matrix_flops),
        vector_flops_per_context=rate(Engine.VECTOR.value, "FLOP/s", base.vector_flops_per_context, contexts),
        dma_bytes=rate(Engine.MEMORY.value, "B/s", base.dma_bytes),
        ddr_bytes=param("ddr", 1.0 / coef["ddr"], "B/s", base.ddr_bytes),
        op_overhead_s=param("overhead", coef["overhead"], "s", base.op_overhead_s),
        matrix_op_s=param("matrix_op", coef["matrix_op"], "s", base.matrix_op_s),
        class_rates=_class_rates(ops, coef, fitted, how),
        general_workers=_one_worker(base.general_workers, measured_by),
    )


def _one_worker(pool: Param, measured_by: str) -> Param:
    """A general-worker pool fitted to op times is one worker: each op ran on one thread (ORT's
    sequential session with one intra-op thread, or one work item's worker)."""
    if not pool.value:
        return pool
    return Param(1.0, "workers", f"one: the {measured_by} op times are one thread's")


def _class_rates(ops: list[OpTiming], coef: dict[str, float], fitted: set[str], how: str) -> tuple:
    """The fitted rates of the op classes that have a column of their own."""
    units = {c: "B/s" if t.op.engine == Engine.MEMORY else "FLOP/s" for t, c in zip(ops, op_columns(ops))}
    return tuple(
        (c, Param(1.0 / coef[c], units[c], f"measured: least-squares fit to {how}"))
        for c in sorted(units)
        if c not in _ENGINE_COLUMNS and c in fitted
    )


def _with_residual(target: Target, residual: str) -> Target:
    def fill(p: Param) -> Param:
        return replace(p, source=p.source.replace("{residual}", residual))

    params = {k: fill(p) for k, p in target.params().items()}
    rates = tuple((c, fill(p)) for c, p in target.class_rates)
    return replace(target, class_rates=rates, **cast(dict[str, Any], params))


# ---------------------------------------------------------------------------------------
# 3. Prediction error against the plugin


@dataclass(frozen=True)
class PairRow:
    model: str
    node: str
    kind: str
    note: str
    share_a: float
    serialized: bool
    predicted_fused_s: float  # costmodel fused time at the plugin's share (no call overhead)
    measured_call_s: float  # the kernel call (hfx_run's wall, from the same traced runs as the span)
    measured_span_s: float  # the kernel's work-item span (trace)
    predicted_serial_s: float
    measured_serial_s: float  # ORT-profiled time of the pair's original nodes
    call_overhead_s: float = 0.0  # added to predicted_fused_s for a call
    kernel_work_s: float = 0.0  # sum of the call's work-item durations (trace): work/span > 1 is parallelism
    task_overlap: float = float("nan")  # share of the span both tasks had an item running (trace)
    kernel_gap_per_op_s: float = float("nan")  # in-kernel time between a task's items, per op (trace)
    cold_share: float = float("nan")  # share of the calls that had to wake the pool (TracedPair)
    cold_join_s: float = float("nan")
    wake_shares: tuple[float, ...] = ()  # per WAKE_REGIMES (TracedPair)
    wake_leads_s: tuple[float, ...] = ()

    @property
    def predicted_call_s(self) -> float:
        return self.predicted_fused_s + self.call_overhead_s

    @property
    def fused_error(self) -> float:
        return self.predicted_call_s / self.measured_call_s - 1.0

    @property
    def span_error(self) -> float:
        return self.predicted_fused_s / self.measured_span_s - 1.0 if self.measured_span_s > 0 else float("nan")

    @property
    def serial_error(self) -> float:
        return self.predicted_serial_s / self.measured_serial_s - 1.0 if self.measured_serial_s > 0 else float("nan")


@dataclass(frozen=True)
class TracedPair:
    """One FusedHexPair node as the kernel trace saw it, medians over the traced runs."""

    node: str
    span_s: float  # the work-item span (trace `wall_ns`)
    call_s: float  # the kernel call, hfx_run's wall time (trace `run_wall_ns`), same runs
    share_a: float
    serialized: bool
    work_s: float  # sum of all work-item durations of a call
    task_overlap: float  # share of the span both tasks had an item running
    op_seconds: dict[int, float]  # program op index -> the sum of its items' durations in a call
    runs: int
    gap_per_op_s: float = float("nan")  # see trace_gap_per_op
    cold_share: float = float("nan")  # share of the calls that found the pool's workers asleep (`idle_before`)
    cold_join_s: float = float("nan")  # time into those calls of another worker's first item (`call_join`)
    wake_shares: tuple[float, ...] = ()  # per WAKE_REGIMES: the share of the calls that came in it
    wake_leads_s: tuple[float, ...] = ()  # per WAKE_REGIMES: call - span of those calls (NaN: none)


# The kernel's idle workers spin this long before they sleep (HFX_SPIN_NS, dsp/src/platform_posix.c):
# a call that comes later than this after the pool's last item has to wake them.
POOL_SPIN_S = 200e-6
# A worker past its spin deadline is still on its way to sleep for a while (it checks the deadline
# every 64 pauses, then takes the pool's mutex): a call then costs about half a full wake-up. One
# loaded run (2026-12-01, all zoo calls): call - span 1.0-1.4 us below 210 us of idle, 7.4-9.6 us from
# 210 to 260 us, 14-17 us beyond 300 us.
POOL_ASLEEP_S = 300e-6
# The calls of a pair by the time since the pool's previous call: spinning, falling asleep, asleep.
WAKE_REGIMES = ("spinning", "falling asleep", "asleep")
_WAKE_EDGES_S = (POOL_SPIN_S, POOL_ASLEEP_S)


def idle_before(docs: dict[str, list[dict]]) -> dict[str, list[float]]:
    """Per node and traced run: seconds from the end of the pool's previous call (any node; in the
    same run or the run before) to the first item of this call; NaN for the first call seen."""
    calls = sorted((d["t0_ns"], d["t0_ns"] + d["wall_ns"], n, i) for n, ds in docs.items() for i, d in enumerate(ds))
    out = {n: [float("nan")] * len(ds) for n, ds in docs.items()}
    last_end = None
    for start, end, n, i in calls:
        if last_end is not None:
            out[n][i] = (start - last_end) / 1e9
        last_end = end if last_end is None else max(last_end, end)
    return out


def _median_or_nan(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def call_join(doc: dict) -> float:
    """Seconds from a traced call's first item to the first item of a worker other than the caller
    (worker 0); the span when none took one. Both tasks' first ops are ready at the start of a call,
    so this is how long the other workers took to wake up and get a CPU."""
    others = [e["start_ns"] for e in doc["trace_events"] if e["worker"] != 0]
    return (min(others) if others else doc["wall_ns"]) / 1e9


def cold_join(ds: list[dict], idle: list[float]) -> float:
    """`over_runs` of the `call_join` of the calls that found the pool's workers asleep."""
    return over_runs([call_join(d) for d, t in zip(ds, idle) if t > POOL_SPIN_S])


def wake_regimes(ds: list[dict], idle: list[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per WAKE_REGIMES: (the share of the calls that came in it, the median of their call - span);
    a call whose idle time is unknown is left out (no such call: every share NaN). The median, not
    `over_runs`: whether a worker still spins when the call comes is chance, so a regime's calls mix
    cheap and full wake-ups, and a low quantile would keep only the cheap ones."""
    regimes: list[list[float]] = [[] for _ in WAKE_REGIMES]
    for d, t in zip(ds, idle):
        if np.isfinite(t):
            regimes[sum(t > edge for edge in _WAKE_EDGES_S)].append((d["run_wall_ns"] - d["wall_ns"]) / 1e9)
    known = sum(map(len, regimes))
    return tuple(len(r) / known if known else float("nan") for r in regimes), tuple(_median_or_nan(r) for r in regimes)


def call_leads(ds: list[dict], idle: list[float]) -> tuple[float, float, float]:
    """(share of the calls that came after the workers went to sleep, `over_runs` of call - span of
    those, of the others); a call whose idle time is unknown is left out."""
    cold = [(d["run_wall_ns"] - d["wall_ns"]) / 1e9 for d, t in zip(ds, idle) if t > POOL_SPIN_S]
    warm = [(d["run_wall_ns"] - d["wall_ns"]) / 1e9 for d, t in zip(ds, idle) if t <= POOL_SPIN_S]
    known = len(cold) + len(warm)
    return (len(cold) / known if known else float("nan")), over_runs(cold), over_runs(warm)


def trace_gap_per_op(doc: dict) -> float:
    """Seconds per op of one traced call in which no item of either task ran, between the first
    item's start and the last item's end: the kernel's dispatch and the barriers between ops. A task
    waiting while the other task's item holds the worker is not a gap: the model shares the workers
    between the tasks itself (counting that wait too added it twice, and with it the waits for a
    worker another process held, which grow with the machine's load)."""
    from .timeline import _union_ns

    items = [(e["start_ns"], e["end_ns"]) for e in doc["trace_events"]]
    ops = len({(e["task"], e["op"]) for e in doc["trace_events"]})
    if not ops:
        return float("nan")
    return (max(end for _, end in items) - min(start for start, _ in items) - _union_ns(items)) / 1e9 / ops


def trace_op_seconds(doc: dict) -> dict[int, float]:
    """Seconds per program op of one traced call: the sum of the durations of its work items
    (an op cut into several items, or run by both workers, counts all of them: worker time)."""
    out: dict[int, float] = {}
    for e in doc["trace_events"]:
        out[int(e["op"])] = out.get(int(e["op"]), 0.0) + (e["end_ns"] - e["start_ns"]) / 1e9
    return out


def plugin_traces(
    fused_path: str | os.PathLike[str], nodes: list[str], runs: int, warmup: int
) -> dict[str, TracedPair]:
    """Run the fused model `warmup + runs` times with the kernel trace on (plugin, host backend)
    and summarise each node's traces of the last `runs` runs (`summarise_traces`)."""
    from ..verify import random_inputs

    with tempfile.TemporaryDirectory(prefix="hexfuse-trace-") as folder:
        traced = TracedSession(fused_path, nodes, Path(folder))
        feeds = random_inputs(traced.session, seed=0)
        traced.run(feeds, warmup, keep=False)
        traced.run(feeds, runs)
    return summarise_traces(traced.docs)


class TracedSession:
    """The fused model on the plugin (host backend) with the kernel trace on, keeping each run's
    trace document per FusedHexPair node."""

    def __init__(self, fused_path: str | os.PathLike[str], nodes: list[str], folder: Path) -> None:
        from ..runtime import InferenceSession

        self.pattern = str(folder / "{node}.json")
        so = profiling_options(folder)
        so.enable_profiling = False
        self.session = InferenceSession(fused_path, backend="host", trace=self.pattern, so=so, schedule="fused")
        self.docs: dict[str, list[dict]] = {n: [] for n in nodes}

    def run(self, feeds: dict[str, np.ndarray], runs: int, keep: bool = True) -> None:
        for _ in range(runs):
            self.session.run(None, feeds)
            if keep:
                self.keep()

    def keep(self) -> None:
        """Keep the last run's trace of every node."""
        for n, docs in self.docs.items():
            docs.append(json.loads(Path(self.pattern.replace("{node}", n.replace("/", "_"))).read_text()))


def summarise_traces(docs: dict[str, list[dict]]) -> dict[str, TracedPair]:
    """Each node's traced calls: its times `over_runs`, the share of the span both tasks ran an
    item as the median. A run whose trace dropped events is left out of the per-op times (its span
    still counts)."""
    out = {}
    idle = idle_before(docs)
    for n, ds in docs.items():
        complete = [d for d in ds if not d.get("dropped")] or ds
        per_run = [trace_op_seconds(d) for d in complete]
        ops = sorted({o for r in per_run for o in r})
        out[n] = TracedPair(
            n,
            over_runs(d["wall_ns"] / 1e9 for d in ds),
            over_runs(d["run_wall_ns"] / 1e9 for d in ds),
            float(ds[-1]["share_a"]),
            bool(ds[-1]["serialized"]),
            over_runs(sum(r.values()) for r in per_run),
            statistics.median(d.get("task_overlap_ns", 0) / max(d["wall_ns"], 1) for d in ds),
            {o: over_runs(r.get(o, 0.0) for r in per_run) for o in ops},
            len(complete),
            over_runs(trace_gap_per_op(d) for d in complete),
            call_leads(ds, idle[n])[0],
            cold_join(ds, idle[n]),
            *wake_regimes(ds, idle[n]),
        )
    return out


def node_kernel_seconds(
    model: onnx.ModelProto, pair_node: str, profile: GraphProfile, op_seconds: dict[int, float]
) -> tuple[dict[int, float], float]:
    """The kernel time of a lowered pair per original graph node: (graph node id -> seconds,
    seconds of ops no graph node could be named for).

    `lowering.program_op_nodes` names the body node of each program op; a body node is matched to
    the graph node producing the same tensor (a micro-batch copy after its suffix is stripped,
    so both halves of a chain node add up to that node). A Constant lowers to no op and gets no
    time; an op copying a formal input out has no node (its time is returned apart)."""
    from ..kinds import KINDS
    from ..lowering import program_op_nodes

    node = next(n for n in model.graph.node if n.name == pair_node)
    kind = KINDS[next(a.s.decode() for a in node.attribute if a.name == C.ATTR_KIND)]
    producer = profile.graph.producer
    per_node: dict[int, float] = {}
    unnamed = 0.0
    for origin in program_op_nodes(model, node):
        seconds = op_seconds.get(origin.op, 0.0)
        tensor = kind.original_tensor(node.overload, origin.output)
        i = producer.get(tensor) if origin.body_index is not None else None
        if i is None:
            unnamed += seconds
        else:
            per_node[i] = per_node.get(i, 0.0) + seconds
    return per_node, unnamed


def fused_pairs(
    path: str | os.PathLike[str], out: Path, target: Target, progress: Progress = _quiet
) -> tuple[Path | None, dict[str, Pair], GraphProfile]:
    """Rewrite for `target` keeping every lowerable pair: (fused model or None, node name ->
    its Pair, the original graph's profile)."""
    from .. import pipeline

    costmodel.register_target(target)
    result = pipeline.rewrite(path, out, target=target.name, min_gain=KEEP_EVERY_PAIR, progress=progress)
    profile = result.analysis.profile
    if result.output is None:
        return None, {}, profile
    by_overload = {p.id: p for p in result.analysis.pairs}
    model = onnx.load(str(result.output), load_external_data=False)
    pairs = {
        n.name: by_overload[n.overload]
        for n in model.graph.node
        if n.domain == C.DOMAIN and n.op_type == C.OP_TYPE and n.overload in by_overload
    }
    return result.output, pairs, profile


@dataclass(frozen=True)
class PairMeasurement:
    """A pair measured on the plugin, with what re-predicting it for another target needs."""

    row: PairRow  # predicted by the target the model was rewritten for
    pair: Pair
    serial_task: TaskProfile | None  # the serial baseline's task (a micro-batch pair: the unsplit chain)
    kernel_ops: list[OpTiming]  # the pair's working nodes: summed kernel item time per call
    unmodelled_s: float  # kernel item time of ops on nodes the cost model gives no work (Reshape, ...)


def measure_pairs(
    path: str | os.PathLike[str],
    target: Target,
    original_times: dict[int, float],
    folder: Path,
    runs: int = 20,
    warmup: int = 3,
    progress: Progress = _quiet,
) -> list[PairMeasurement]:
    """Rewrite the model for `target`, run it with the plugin and the kernel trace, and measure
    each pair: its call, work span and per-node kernel times (all from the same traced runs), with
    `target`'s prediction (call_overhead_s left 0: `with_call_overhead` sets it)."""
    out = folder / (Path(path).stem + ".fused.onnx")
    fused, pairs, profile = fused_pairs(path, out, target)
    if fused is None:
        progress(f"{Path(path).name}: no pair to measure")
        return []
    traces = plugin_traces(fused, sorted(pairs), runs, warmup)
    return pair_measurements(path, target, fused, pairs, profile, traces, original_times, progress)


def pair_measurements(
    path: str | os.PathLike[str],
    target: Target,
    fused: Path,
    pairs: dict[str, Pair],
    profile: GraphProfile,
    traces: dict[str, TracedPair],
    original_times: dict[int, float],
    progress: Progress = _quiet,
) -> list[PairMeasurement]:
    """Each traced pair measured: its row (predicted by `target`) and its per-node kernel times."""
    names = sorted(pairs)
    model = onnx.load(str(fused), load_external_data=False)
    g = profile.graph
    measured = []
    for name in names:
        pair, trace = pairs[name], traces[name]
        serial_task = kind_of(pair).serial_task(profile, pair)
        measured_serial = sum(original_times.get(i, 0.0) for i in pair.candidate.nodes)
        row = PairRow(
            Path(path).stem,
            name,
            pair.kind,
            pair.candidate.note,
            trace.share_a,
            trace.serialized,
            0.0,
            trace.call_s,
            trace.span_s,
            0.0,
            measured_serial,
            kernel_work_s=trace.work_s,
            task_overlap=trace.task_overlap,
            kernel_gap_per_op_s=trace.gap_per_op_s,
            cold_share=trace.cold_share,
            cold_join_s=trace.cold_join_s,
            wake_shares=trace.wake_shares,
            wake_leads_s=trace.wake_leads_s,
        )
        per_node, unnamed = node_kernel_seconds(model, name, profile, trace.op_seconds)
        kernel_ops, unmodelled = [], unnamed
        in_tasks = ops_in_tasks(pair, serial_task)
        for i, seconds in sorted(per_node.items()):
            op = in_tasks.get(i) or one_op_profile(profile, i)
            if op is None or op.engine == Engine.NONE:
                unmodelled += seconds
                continue
            n = g.nodes[i]
            kernel_ops.append(OpTiming(Path(path).stem, n.name, n.op_type, op, seconds, trace.runs))
        m = PairMeasurement(row, pair, serial_task, kernel_ops, unmodelled)
        measured.append(replace(m, row=predicted_row(m, target)))
    progress(f"{Path(path).name}: {len(measured)} pair(s) measured on the plugin")
    return measured


ROUNDS = 8  # blocks of runs per model and side: ORT's and the plugin's runs of every model alternate


@dataclass
class _ModelSessions:
    """One model's ORT profiling session and its fused model's traced plugin session."""

    path: Path
    profile: GraphProfile
    session: ort.InferenceSession
    feeds: dict[str, np.ndarray]
    fused: Path | None
    pairs: dict[str, Pair]
    traced: TracedSession | None

    def run(self, runs: int, keep: bool = True) -> None:
        for _ in range(runs):
            self.session.run(None, self.feeds)
        if self.traced is not None:
            self.traced.run(self.feeds, runs, keep)


def _open_model(path: Path, target: Target, folder: Path) -> _ModelSessions:
    from ..verify import random_inputs

    work = folder / path.stem
    work.mkdir(parents=True, exist_ok=True)
    session = ort.InferenceSession(str(path), sess_options=profiling_options(work), providers=["CPUExecutionProvider"])
    fused, pairs, _ = fused_pairs(path, work / "fused.onnx", target)
    traced = TracedSession(fused, sorted(pairs), work) if fused is not None else None
    profile = profile_graph(graph_mod.load(path))
    return _ModelSessions(path, profile, session, random_inputs(session, seed=0), fused, pairs, traced)


def measure_models(
    paths: Sequence[str | os.PathLike[str]],
    target: Target,
    folder: Path,
    runs: int = 20,
    warmup: int = 3,
    progress: Progress = _quiet,
) -> list[tuple[dict[int, float], list[OpTiming], list[PairMeasurement]]]:
    """Every model's ops profiled on ORT and its pairs (rewritten for `target`) traced on the plugin,
    in ROUNDS blocks of runs that alternate between the two and go round all the models, so that
    every measurement sees the machine alike (a shared VM's speed drifts from second to second, and
    the held-out error compares one model's calls with a fit to the others'): per model, (seconds
    per node id, op timings, pair measurements)."""
    models = [_open_model(Path(p), target, folder) for p in paths]
    for m in models:
        m.run(warmup, keep=False)
    for block in range(ROUNDS):
        for m in models:
            m.run(runs // ROUNDS + (1 if block < runs % ROUNDS else 0))
    return [_measured(m, target, warmup, progress) for m in models]


def _measured(
    m: _ModelSessions, target: Target, warmup: int, progress: Progress
) -> tuple[dict[int, float], list[OpTiming], list[PairMeasurement]]:
    events = json.loads(Path(m.session.end_profiling()).read_text())
    medians, ops = op_timings(m.path, m.profile, node_times(events, warmup))
    progress(f"{m.path.name}: {len(ops)} op(s) profiled on ORT")
    if m.fused is None or m.traced is None:
        progress(f"{m.path.name}: no pair to measure")
        return medians, ops, []
    traces = summarise_traces(m.traced.docs)
    return medians, ops, pair_measurements(m.path, target, m.fused, m.pairs, m.profile, traces, medians, progress)


def measure_model(
    path: str | os.PathLike[str],
    target: Target,
    folder: Path,
    runs: int = 20,
    warmup: int = 3,
    progress: Progress = _quiet,
) -> tuple[dict[int, float], list[OpTiming], list[PairMeasurement]]:
    """`measure_models` of one model."""
    return measure_models([path], target, folder, runs, warmup, progress)[0]


def wake_probe_model() -> onnx.ModelProto:
    """Two small pairs in series, each two short elementwise branches of one input joined: every
    run calls the first after the run before (its pool asleep) and the second right after the
    first (its workers spinning or on their way to sleep), as a model's pairs are called."""
    from onnx import TensorProto
    from onnx import helper as h

    x, y = (h.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4096]) for n in ("x", "y"))
    nodes = []
    for k, (src, dst) in enumerate((("x", "s"), ("s", "y"))):
        nodes += [
            h.make_node("Relu", [src], [f"a{k}"], name=f"p{k}/a/relu"),
            h.make_node("Tanh", [f"a{k}"], [f"at{k}"], name=f"p{k}/a/tanh"),
            h.make_node("Sigmoid", [src], [f"b{k}"], name=f"p{k}/b/sigmoid"),
            h.make_node("Exp", [f"b{k}"], [f"be{k}"], name=f"p{k}/b/exp"),
            h.make_node("Add", [f"at{k}", f"be{k}"], [dst], name=f"p{k}/join"),
        ]
    graph = h.make_graph(nodes, "wake_probe", [x], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


PROBE_NAME = "wake_probe"


def probe_leads(rows: list[PairRow], progress: Progress = _quiet) -> tuple[float, ...] | None:
    """`measured_leads` of the probe model's pairs (`wake_probe_model`, measured with the models but in
    none of them): the pool's wake-up per WAKE_REGIMES as the runtime costs it, apart from every
    measured pair; None when the probe gave no pair or none of its calls found the pool asleep."""
    leads = measured_leads(rows)
    if leads is not None:
        progress("wake-up probe: " + ", ".join(f"{n} {t * 1e6:.1f} us" for n, t in zip(WAKE_REGIMES, leads)))
    return leads


def ops_in_tasks(pair: Pair, serial_task: TaskProfile | None) -> dict[int, NodeProfile]:
    """Graph node id -> its op as the pair's tasks run it in the kernel: DDR bytes counted in the
    task (intermediates stay in the arena), a micro-batch chain node whole (both copies)."""
    tasks = [serial_task] if serial_task is not None else [pair.a, pair.b]
    return {op.node: op for t in tasks for op in t.ops}


def predicted_row(m: PairMeasurement, target: Target) -> PairRow:
    """The pair's row with the fused and serial times `target` predicts, at the share the plugin
    used (call_overhead_s unchanged)."""
    p = predict(m.pair.a, m.pair.b, target, share_a=m.row.share_a)
    serial = serial_time(m.serial_task, target) if m.serial_task is not None else p.serial
    fused = p.fused
    cold = m.row.cold_share if np.isfinite(m.row.cold_share) else 1.0
    if target.join_s.value and cold < 1.0:  # a warm call finds the workers spinning: they join at once
        warm = replace(target, join_s=Param(0.0, "s", "a warm call"))
        fused = cold * fused + (1.0 - cold) * predict(m.pair.a, m.pair.b, warm, share_a=m.row.share_a).fused
    return replace(m.row, predicted_fused_s=fused, predicted_serial_s=serial)


def measured_call_overhead(rows: list[PairRow]) -> float:
    """Median over the pairs of (call time - work-item span): what a call costs besides its work."""
    return statistics.median(max(r.measured_call_s - r.measured_span_s, 0.0) for r in rows)


def measured_leads(rows: list[PairRow]) -> tuple[float, ...] | None:
    """Per WAKE_REGIMES, the median over the pairs of call - span of their calls in it; a regime no
    pair's call came in takes the nearest measured one's (the colder on a tie); None unless a call of
    the coldest regime was seen."""
    leads = []
    for k in range(len(WAKE_REGIMES)):
        seen = [r.wake_leads_s[k] for r in rows if r.wake_leads_s and np.isfinite(r.wake_leads_s[k])]
        leads.append(max(statistics.median(seen), 0.0) if seen else float("nan"))
    if not np.isfinite(leads[-1]):
        return None
    measured = [k for k, lead in enumerate(leads) if np.isfinite(lead)]
    return tuple(leads[min(measured, key=lambda m: (abs(m - k), -m))] for k in range(len(leads)))


def expected_call_overhead(row: PairRow, leads: Sequence[float]) -> float:
    """The call overhead of a pair whose calls came in each of WAKE_REGIMES as `row.wake_shares`
    (unknown: all cold)."""
    shares = row.wake_shares if row.wake_shares and all(np.isfinite(row.wake_shares)) else None
    if shares is None:
        return leads[-1]
    return sum(share * lead for share, lead in zip(shares, leads))


def with_measured_pool(
    target: Target, rows: list[PairRow], where: str = "", modelled: list[float] | None = None
) -> Target:
    """`target` with the workers its general-worker pool had in the measured calls.

    Without `modelled`: the median over the pairs of summed work-item time / work-item span,
    between 1 and the pool's workers. With `modelled` (per row, the parallelism the model gives
    the pair on the pool's nominal workers: summed op time / fused time): how much of the second
    worker's time the pair got where its program had work for it, (measured - 1) / (modelled - 1)
    over the pairs modelled at 1.2 or more, median; a pair that is one chain of one-item ops says
    nothing about the CPUs (on a VM whose other load keeps the second worker off a CPU, 0)."""
    spans = [r.kernel_work_s / r.measured_span_s if r.measured_span_s > 0 else float("nan") for r in rows]
    if not target.general_workers.value or not any(np.isfinite(spans)):
        return target
    nominal = 1.0 + target.vector_contexts.value  # the matrix worker (the caller) and the vector workers
    suffix = f" (kernel trace), of the pool's {nominal:g} workers" + (f"; {where}" if where else "")
    got = [
        min(max((p - 1.0) / (m - 1.0), 0.0), 1.0)
        for p, m in zip(spans, modelled or [])
        if np.isfinite(p) and m >= PARALLEL_ENOUGH
    ]
    if got:
        workers = 1.0 + statistics.median(got) * (nominal - 1.0)
        source = (
            f"measured: 1 + the median over {len(got)} plugin pairs with work for two workers of the share of "
            f"the other workers' time they got ((summed work-item time / span - 1) / (modelled - 1))" + suffix
        )
        return replace(target, general_workers=Param(workers, "workers", source))
    finite = [x for x in spans if np.isfinite(x)]
    workers = min(max(statistics.median(finite), 1.0), nominal)
    source = f"measured: median over {len(finite)} plugin pairs of summed work-item time / work-item span" + suffix
    return replace(target, general_workers=Param(workers, "workers", source))


PARALLEL_ENOUGH = 1.2  # a pair the model runs on at least this many workers at once tells how many it got


def modelled_parallelism(m: PairMeasurement, target: Target) -> float:
    """The pair's summed op time on one worker over its fused time on the pool's nominal workers."""
    nominal = replace(target, general_workers=Param(1.0 + target.vector_contexts.value, "workers", ""))
    one = replace(target, general_workers=Param(1.0, "workers", ""))
    fused = predict(m.pair.a, m.pair.b, nominal, share_a=m.row.share_a).fused
    return (task_time(m.pair.a, one) + task_time(m.pair.b, one)) / fused if fused > 0 else 1.0


def with_join(target: Target, rows: list[PairRow], where: str = "") -> Target:
    """`target` with the measured time into a call that wakes the pool until another worker takes
    its first item: median over the pairs of their calls' medians (`call_join`)."""
    joins = [r.cold_join_s for r in rows if np.isfinite(r.cold_join_s)]
    if not target.general_workers.value or not joins:
        return target
    source = (
        f"measured: median over {len(joins)} plugin pairs of the time from a call's first item to another "
        f"worker's first, in the calls that woke the pool (kernel trace)" + (f"; {where}" if where else "")
    )
    return replace(target, join_s=Param(statistics.median(joins), "s", source))


def with_kernel_gap(target: Target, rows: list[PairRow], where: str = "", replace_overhead: bool = False) -> Target:
    """`target` (fitted to work-item times, which leave out what the kernel does between a task's
    items) with the measured in-kernel time between items per op added to its op overhead, or
    (`replace_overhead`) as its op overhead."""
    gaps = [r.kernel_gap_per_op_s for r in rows if np.isfinite(r.kernel_gap_per_op_s)]
    if not gaps:
        return target
    gap, before = statistics.median(gaps), target.op_overhead_s
    base = 0.0 if replace_overhead else before.value
    source = (
        f"measured: {gap * 1e6:.2f} us between a task's items per op (median over {len(gaps)} plugin pairs, "
        f"kernel trace)" + (f"; {where}" if where else "")
    )
    if not replace_overhead:
        source += f"; plus {before.value * 1e6:.2f} us: {before.source}"
    return replace(target, op_overhead_s=Param(base + gap, "s", source))


def on_the_kernel(
    target: Target, pairs: list[PairMeasurement], where: str = "", replace_overhead: bool = False
) -> Target:
    """`target` (rates fitted to one worker's op times) as the plugin's kernel schedules a fused
    call: its pool's workers, and the kernel's measured time between a task's items per op as the
    op overhead (`replace_overhead`: instead of the fitted one, which is ONNX Runtime's per-node
    cost when the rates come from ORT profiling). Unfused, the tasks run on `target.baseline`, or
    on `target` itself as fitted (ORT's kernels, one op at a time)."""
    rows = [m.row for m in pairs]
    kernel = with_join(with_kernel_gap(target, rows, where, replace_overhead), rows, where)
    kernel = with_measured_pool(kernel, rows, where, [modelled_parallelism(m, kernel) for m in pairs])
    return replace(kernel, baseline=target.baseline or target)


def with_call_overhead(
    target: Target, rows: list[PairRow], where: str = "", leads: Sequence[float] | None = None
) -> tuple[Target, list[PairRow]]:
    """`target` with the call overhead, and the rows with each pair's. The workers of the kernel's
    pool spin for POOL_SPIN_S after their last item, then sleep: a call that comes later pays a
    wake-up on the caller before its first item, one that comes sooner (a pair right after another)
    does not, one in between less (WAKE_REGIMES). `leads` gives call - span per regime (the wake-up
    probe model's, `probe_leads`); without it they are measured on the rows' own calls
    (`measured_leads`). A pair's overhead is its calls' mix of the regimes, the target's
    `call_overhead_s` the asleep one (a call on its own); with neither, the median over the pairs of
    call - span."""
    if not rows:
        return target, rows
    suffix = "; kernel trace" + (f"; {where}" if where else "")
    measured_by = "the pairs of a probe model in no measured model" if leads is not None else "the plugin pairs"
    leads = leads if leads is not None else measured_leads(rows)
    if leads is None:
        overhead = measured_call_overhead(rows)
        source = f"measured: median over {len(rows)} plugin pairs of (hfx_run's wall time - the work-item span)"
        target = replace(target, call_overhead_s=Param(overhead, "s", source + suffix))
        return target, [replace(r, call_overhead_s=overhead) for r in rows]
    others = ", ".join(f"{lead * 1e6:.1f} us {name}" for name, lead in zip(WAKE_REGIMES[:-1], leads))
    source = (
        f"measured: median over {measured_by} of (hfx_run's wall time - the work-item span) of their calls "
        f"that came over {POOL_ASLEEP_S * 1e6:.0f} us after the pool's previous one (its workers asleep: a "
        f"wake-up); a call that found them {others} (over {POOL_SPIN_S * 1e6:.0f} us: falling asleep)"
    )
    target = replace(target, call_overhead_s=Param(leads[-1], "s", source + suffix))
    return target, [replace(r, call_overhead_s=expected_call_overhead(r, leads)) for r in rows]


@dataclass(frozen=True)
class FittedTargets:
    """Both fits of one set of measurements, each as the kernel runs a fused call."""

    ort_fit: Fit
    ort_target: Target
    kernel_fit: Fit | None  # None: no pair measured on the kernel
    kernel_target: Target | None
    leads: tuple[float, ...] | None  # call - span per WAKE_REGIMES (None: the measured pairs')

    def target(self, fit: str) -> Target | None:
        return self.ort_target if fit == ORT_FIT else self.kernel_target

    def predicted_rows(self, pairs: list[PairMeasurement], fit: str) -> list[PairRow]:
        """The pairs' rows as the fit predicts them (fused call, serial), each with its call overhead
        (its calls' mix of WAKE_REGIMES at `leads`); empty for a fit that was not made."""
        target = self.target(fit)
        if target is None:
            return []
        rows = [predicted_row(m, target) for m in pairs]
        return with_call_overhead(target, rows, leads=self.leads)[1]


def fit_targets(
    ops: list[OpTiming],
    pairs: list[PairMeasurement],
    base: Target,
    where: str = "",
    progress: Progress = _quiet,
    leads: tuple[float, ...] | None = None,
) -> FittedTargets:
    """The fit to ORT-profiled `ops`, and the fit to the kernel's item times of `pairs`, each run on
    the kernel's schedule as measured on `pairs` (`on_the_kernel`), with the call overhead of `leads`
    (`with_call_overhead`; None: measured on `pairs`)."""
    fit = fit_target(ops, base, ORT_FIT_NAME, where)
    progress(f"{FIT_LABELS[ORT_FIT]}: {len(fit.rows)} ops, median |residual| {fit.median_abs_residual:.1%}")
    rows = [m.row for m in pairs]
    leads = leads if leads is not None else measured_leads(rows)
    ort_target, _ = with_call_overhead(
        on_the_kernel(fit.target, pairs, where, replace_overhead=True), rows, where, leads
    )
    kernel_ops = [t for m in pairs for t in m.kernel_ops]
    if not kernel_ops:
        return FittedTargets(fit, ort_target, None, None, leads)
    kfit = fit_target(
        kernel_ops,
        replace(fit.target, description=base.description),  # a rate items cannot fit keeps the ORT fit's
        KERNEL_FIT_NAME,
        where,
        KERNEL_MEASURED_BY,
        "the kernel's own per-op work-item times (plugin trace of the fused pairs)",
    )
    progress(f"{FIT_LABELS[KERNEL_FIT]}: {len(kfit.rows)} ops, median |residual| {kfit.median_abs_residual:.1%}")
    kernel_target = on_the_kernel(replace(kfit.target, baseline=fit.target), pairs, where)
    kernel_target, _ = with_call_overhead(kernel_target, rows, where, leads)
    return FittedTargets(fit, ort_target, kfit, kernel_target, leads)


def held_out_rows(
    ops: list[OpTiming],
    pairs: list[PairMeasurement],
    base: Target,
    where: str = "",
    leads: tuple[float, ...] | None = None,
) -> dict[str, list[PairRow]]:
    """Each fit's prediction of every pair by a fit that saw nothing of the pair's model: leave one
    model out, fit both targets on the other models' ORT-profiled ops, kernel item times and calls,
    predict the left-out model's pairs. The call overhead is `leads` (the wake-up probe's, measured
    apart from every model), else the other models' calls'. Per fit (ORT_FIT, KERNEL_FIT), the rows in `pairs`' order;
    a pair whose model is the only one measured gets no held-out row."""
    out: dict[str, dict[int, PairRow]] = {ORT_FIT: {}, KERNEL_FIT: {}}
    for model in dict.fromkeys(m.row.model for m in pairs):
        kept = [k for k, m in enumerate(pairs) if m.row.model == model]
        train = [m for m in pairs if m.row.model != model]
        train_ops = [t for t in ops if t.model != model]
        if not train or not train_ops:
            continue
        fitted = fit_targets(train_ops, train, base, where, leads=leads)
        for fit, rows in out.items():
            rows.update(zip(kept, fitted.predicted_rows([pairs[k] for k in kept], fit)))
    return {fit: [rows[k] for k in sorted(rows)] for fit, rows in out.items()}


# ---------------------------------------------------------------------------------------
# 4. The whole calibration


def _pair_prediction(r: PairRow) -> dict:
    return {
        "predicted_fused_s": r.predicted_fused_s,
        "predicted_call_s": r.predicted_call_s,
        "predicted_serial_s": r.predicted_serial_s,
        "fused_error": r.fused_error,
        "span_error": r.span_error,
        "serial_error": r.serial_error,
    }


_MEASURED_FIELDS = (
    "model",
    "node",
    "kind",
    "note",
    "share_a",
    "serialized",
    "measured_call_s",
    "measured_span_s",
    "measured_serial_s",
    "call_overhead_s",
    "kernel_work_s",
    "task_overlap",
    "kernel_gap_per_op_s",
)


@dataclass(frozen=True)
class FitErrors:
    """Median |predicted / measured - 1| of one fit: fused call, fused work span, serial
    (against ORT's time of the original nodes), and the per-op residual of the fit itself."""

    fused: float
    span: float
    serial: float
    residual: float


@dataclass
class CalibrationResult:
    """Both fits, and their prediction errors on the same measured plugin calls.

    The rows without prefix (`fit_rows`, `pair_rows`, `ddr_bound`, `median_abs_error`, ...) are
    the fit to ORT profiling (`ort_target`); the `kernel_` ones the fit to the kernel's own item
    times (`kernel_target`). Both are fitted on every measured model and their `pair_rows` are
    in-sample (the kernel fit's op times come from the very calls it predicts). `held_out` holds
    each fit's prediction of every pair by fits made without the pair's model (`held_out_rows`):
    that is the prediction error the result reports. `target` is the one the JSON carries
    (`costmodel.load_target` reads it) and `calibrate` registers, named CALIBRATED_NAME: the fit
    with the lower held-out median fused-call error, `chosen_fit` ("ort" or "kernel") says which."""

    target: Target
    fit_rows: list[FitRow]
    pair_rows: list[PairRow]
    where: str
    ddr_bound: list[str] = field(default_factory=list)
    ort_target: Target | None = None  # None: `target` is the ORT fit
    kernel_target: Target | None = None  # None: no kernel fit (no pair measured)
    kernel_fit_rows: list[FitRow] = field(default_factory=list)
    kernel_pair_rows: list[PairRow] = field(default_factory=list)
    kernel_ddr_bound: list[str] = field(default_factory=list)
    unmodelled_kernel_s: dict[str, float] = field(default_factory=dict)  # pair -> item time on no-work nodes
    chosen_fit: str = ORT_FIT
    held_out: dict[str, list[PairRow]] = field(default_factory=dict)  # fit -> rows predicted without their model

    def rows(self, fit: str, held_out: bool = False) -> list[PairRow]:
        if held_out:
            return self.held_out.get(fit, [])
        return self.pair_rows if fit == ORT_FIT else self.kernel_pair_rows

    def errors(self, fit: str, held_out: bool = False) -> FitErrors:
        """Median |error| of one fit (ORT_FIT or KERNEL_FIT) over the same measured calls, in-sample
        or held out."""
        pairs = self.rows(fit, held_out)
        ops = self.fit_rows if fit == ORT_FIT else self.kernel_fit_rows
        return FitErrors(
            fused=_median_abs(r.fused_error for r in pairs),
            span=_median_abs(r.span_error for r in pairs),
            serial=_median_abs(r.serial_error for r in pairs),
            residual=_median_abs(r.rel_error for r in ops),
        )

    @property
    def median_abs_error(self) -> float:
        """Fit to ORT profiling, in-sample: fused time of a call, |predicted / measured - 1|, median over the pairs."""
        return self.errors(ORT_FIT).fused

    @property
    def kernel_median_abs_error(self) -> float:
        """Fit to the kernel's item times, in-sample: the same, on the same measured calls."""
        return self.errors(KERNEL_FIT).fused

    def held_out_error(self, fit: str) -> float:
        """The fit's median |fused call error| over the pairs, each predicted without its model."""
        return self.errors(fit, held_out=True).fused

    @property
    def chosen_median_abs_error(self) -> float:
        """The headline: the chosen fit's held-out median |fused call error| (in-sample when only
        one model was measured)."""
        held = self.held_out_error(self.chosen_fit)
        return held if np.isfinite(held) else self.errors(self.chosen_fit).fused

    def choose(self) -> None:
        """Choose the fit with the lower held-out median |fused call error| (in-sample without one)."""
        if self.kernel_target is None:
            self.chosen_fit = ORT_FIT
            return
        held = {f: self.held_out_error(f) for f in (ORT_FIT, KERNEL_FIT)}
        if not all(np.isfinite(v) for v in held.values()):
            held = {f: self.errors(f).fused for f in held}
        self.chosen_fit = KERNEL_FIT if held[KERNEL_FIT] < held[ORT_FIT] else ORT_FIT

    @property
    def choice_note(self) -> str:
        if self.kernel_target is None:
            return f"the {FIT_LABELS[ORT_FIT]} (no kernel fit: no pair was measured)"
        other = KERNEL_FIT if self.chosen_fit == ORT_FIT else ORT_FIT
        held = all(self.held_out.get(f) for f in (ORT_FIT, KERNEL_FIT))
        errors = {f: self.held_out_error(f) if held else self.errors(f).fused for f in (ORT_FIT, KERNEL_FIT)}
        how = "held-out" if held else "in-sample (one model: nothing to hold out)"
        return (
            f"the {FIT_LABELS[self.chosen_fit]}: the lower {how} median |fused call error| "
            f"({errors[self.chosen_fit]:.1%}; {FIT_LABELS[other]}: {errors[other]:.1%})"
        )

    def _fit_dict(self, key: str) -> dict | None:
        if key == ORT_FIT:
            target, rows, ddr = self.ort_target or self.target, self.fit_rows, self.ddr_bound
        elif self.kernel_target is None:
            return None
        else:
            target, rows, ddr = self.kernel_target, self.kernel_fit_rows, self.kernel_ddr_bound
        e, held = self.errors(key), self.errors(key, held_out=True)
        return {
            "label": FIT_LABELS[key],
            "target": target.to_dict(),
            "held_out_median_abs_error": held.fused,
            "held_out_median_abs_serial_error": held.serial,
            "median_abs_error": e.fused,
            "median_abs_span_error": e.span,
            "median_abs_serial_error": e.serial,
            "median_abs_op_residual": e.residual,
            "ddr_bound_ops": ddr,
            "ops": [{**asdict(r), "rel_error": r.rel_error} for r in rows],
        }

    def _by_pair(self, fit: str, held_out: bool) -> dict[tuple[str, str], PairRow]:
        return {(r.model, r.node): r for r in self.rows(fit, held_out)}

    def to_dict(self) -> dict:
        """`target` (what load_target reads) is the chosen fit; `fits` holds both, `pairs` the
        measured calls with each fit's prediction, in-sample ("ort_fit", "kernel_fit") and held out
        ("ort_fit_held_out", "kernel_fit_held_out")."""
        columns = {
            f"{fit}_fit{'_held_out' if held else ''}": self._by_pair(fit, held)
            for fit in (ORT_FIT, KERNEL_FIT)
            for held in (False, True)
        }
        pairs = []
        for r in self.pair_rows:
            predictions = {name: rows.get((r.model, r.node)) for name, rows in columns.items()}
            pairs.append(
                {
                    **{f: getattr(r, f) for f in _MEASURED_FIELDS},
                    "unmodelled_kernel_s": self.unmodelled_kernel_s.get(f"{r.model}:{r.node}", 0.0),
                    **{name: _pair_prediction(p) if p else None for name, p in predictions.items()},
                }
            )
        return {
            "target": self.target.to_dict(),
            "target_fit": self.chosen_fit,
            "target_note": f"carries {self.choice_note}",
            "where": self.where,
            "run_quantile": RUN_QUANTILE,
            "median_abs_error": self.chosen_median_abs_error,
            "median_abs_error_is": "held out (leave one model out)"
            if self.held_out.get(self.chosen_fit)
            else "in-sample",
            "fits": {key: self._fit_dict(key) for key in (ORT_FIT, KERNEL_FIT)},
            "pairs": pairs,
        }

    def to_json(self) -> str:
        """The result as JSON; `costmodel.load_target` reads the target from it."""
        return json.dumps(self.to_dict(), indent=2, default=_json_float) + "\n"

    def summary_lines(self) -> list[str]:
        return [*self._fit_lines(), "", *self._pair_lines(), "", *self._median_lines()]

    def _fit_lines(self) -> list[str]:
        fits = [(ORT_FIT, self.ort_target or self.target, self.fit_rows)]
        if self.kernel_target is not None:
            fits.append((KERNEL_FIT, self.kernel_target, self.kernel_fit_rows))
        overhead = self.target.call_overhead_s.value
        lines = [
            f"calibrated host targets ({self.where}); both predict a call as the fused time plus the measured "
            f"call overhead: {overhead * 1e6:.1f} us for a call that wakes the pool "
            f"({self.target.call_overhead_s.source})",
            f"  every time is the {RUN_QUANTILE:.0%} quantile of its runs (a run preempted by another process is "
            "slower, never faster: the slow tail is the machine's load)",
        ]
        for key, t, rows in fits:
            lines.append(
                f"  {FIT_LABELS[key]} ('{t.name}'): matrix {t.matrix_flops.value / 1e9:.1f} GFLOP/s, "
                f"vector {t.vector_flops / 1e9:.2f} GFLOP/s, memory {t.dma_bytes.value / 1e9:.2f} GB/s, "
                f"DDR {t.ddr_bytes.value / 1e9:.1f} GB/s, op overhead {t.op_overhead_s.value * 1e6:.1f} us, "
                f"matrix op {t.matrix_op_s.value * 1e6:.1f} us; "
                f"{len(rows)} ops, median |residual| {self.errors(key).residual:.1%}"
            )
        return lines

    def _pair_lines(self) -> list[str]:
        held = {f: self._by_pair(f, True) for f in (ORT_FIT, KERNEL_FIT)}
        inside = self._by_pair(KERNEL_FIT, False)
        lines = [
            "pair                                   kind            share  meas us  span us  work/span  "
            "overlap  gap/op us  cold  call oh | held out: ORT fit  error  kernel fit  error | in-sample: "
            "ORT  kernel | serial meas  ORT fit  error"
        ]
        for r in self.pair_rows:
            key = (r.model, r.node)
            predicted = "".join(
                f"{p.predicted_call_s * 1e6:{w}.0f} {p.fused_error:+6.0%}"
                if (p := held[f].get(key))
                else f"{'-':>{w + 7}}"
                for f, w in ((ORT_FIT, 18), (KERNEL_FIT, 12))
            )
            k = inside.get(key)
            ratio = r.kernel_work_s / r.measured_span_s if r.measured_span_s > 0 else float("nan")
            lines.append(
                f"{r.model + ':' + r.node:<38} {r.kind:<15} {r.share_a:5.2f} {r.measured_call_s * 1e6:8.0f} "
                f"{r.measured_span_s * 1e6:8.0f} {ratio:10.2f} {r.task_overlap:8.0%} "
                f"{r.kernel_gap_per_op_s * 1e6:10.1f} {r.cold_share:5.0%} {r.call_overhead_s * 1e6:8.1f} |"
                f"{predicted} | {r.fused_error:+15.0%} {(k.fused_error if k else float('nan')):+7.0%} | "
                f"{r.measured_serial_s * 1e6:11.0f} {r.predicted_serial_s * 1e6:8.0f} {r.serial_error:+6.0%}"
                + ("  (serialised)" if r.serialized else "")
            )
        return lines

    def _median_lines(self) -> list[str]:
        fits = [f for f in (ORT_FIT, KERNEL_FIT) if f == ORT_FIT or self.kernel_target is not None]

        def each(figure: Callable[[str], float]) -> str:
            return ", ".join(f"{FIT_LABELS[f]} {figure(f):.1%}" for f in fits)

        models = len({r.model for r in self.pair_rows})
        lines = [
            f"median |error| over {len(self.pair_rows)} pairs of {models} models, fused call, held out (each model's "
            f"pairs predicted by the fits to the other models' ops and calls; target <= 20%): "
            + each(self.held_out_error),
            f"  serial, held out (ORT-profiled original nodes): {each(lambda f: self.errors(f, True).serial)}",
            f"  in-sample (fitted to all the pairs' models, checked on the same calls): fused call "
            f"{each(lambda f: self.errors(f).fused)}; fused work span {each(lambda f: self.errors(f).span)}; "
            f"serial {each(lambda f: self.errors(f).serial)}",
            "  work/span: summed work-item time over the span (2 = both workers busy throughout); overlap: "
            "share of the span both tasks ran an item; gap/op: time per op no item ran (in the span, in no "
            "item's time)",
        ]
        if self.kernel_target is not None:
            unmodelled = sum(self.unmodelled_kernel_s.values())
            lines.append(
                f"  kernel item time on nodes the cost model gives no work (Reshape, ...): {unmodelled * 1e6:.0f} us "
                "over all pairs"
            )
        lines.append(f"target '{self.target.name}' (written by -o, fitted to every model): {self.choice_note}")
        return lines

    def op_lines(self) -> list[str]:
        """Per node of the kernel fit: its ORT-profiled time (when the ORT fit has it), its kernel
        item time and what the kernel fit predicts."""
        ort = {(r.model, r.node): r for r in self.fit_rows}
        lines = [
            "node (kernel fit)                               op_type     engine   ORT us  kernel us  "
            "kernel/ORT  kernel-fit pred us  residual"
        ]
        for r in self.kernel_fit_rows:
            o = ort.get((r.model, r.node))
            ort_us = f"{o.measured_s * 1e6:8.1f}" if o else f"{'-':>8}"
            ratio = f"{r.measured_s / o.measured_s:10.2f}" if o and o.measured_s > 0 else f"{'-':>10}"
            lines.append(
                f"{r.model + ':' + r.node:<47} {r.op_type:<11} {r.engine:<6} {ort_us} {r.measured_s * 1e6:10.1f}  "
                f"{ratio}  {r.predicted_s * 1e6:18.1f}  {r.rel_error:+8.0%}"
            )
        return lines

    def parameter_tables(self) -> list[str]:
        """Markdown: each fit's parameters, then hexagon-v73's (all modelled)."""
        fits = [(ORT_FIT, self.ort_target or self.target), (KERNEL_FIT, self.kernel_target)]
        lines: list[str] = []
        for key, t in fits:
            if t is not None:
                chosen = " (chosen: written by -o as " + f"'{self.target.name}')" if key == self.chosen_fit else ""
                lines += [f"{FIT_LABELS[key]}{chosen}:", "", *costmodel.parameter_table(t), ""]
        return [*lines, *costmodel.parameter_table(costmodel.HEXAGON_V73)]


def _json_float(x: object) -> object:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def where_measured() -> str:
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpus), {datetime.date.today().isoformat()}"


DEFAULT_RUNS = 40  # traced and profiled runs per model after warm-up (`calibrate --runs`)
DEFAULT_WARMUP = 3


def calibrate(
    model_paths: Sequence[str | os.PathLike[str]],
    progress: Progress = _quiet,
    runs: int = DEFAULT_RUNS,
    warmup: int = DEFAULT_WARMUP,
    base: Target = costmodel.HOST,
) -> CalibrationResult:
    """Fit a host target to the models' ORT-profiled ops and a second to the kernel's own per-op
    item times of their pairs on the plugin, measure both fits' fused and serial prediction error
    on those pairs held out (leave one model out) and in-sample (see the module doc). The fit with
    the lower held-out error is registered as CALIBRATED_NAME."""
    where = where_measured()
    all_ops: list[OpTiming] = []
    pairs: list[PairMeasurement] = []
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        probe_path = Path(folder) / f"{PROBE_NAME}.onnx"
        onnx.save(wake_probe_model(), probe_path)
        *measured, (_, _, probe) = measure_models([*model_paths, probe_path], base, Path(folder), runs, warmup)
    for path, (_, ops, model_pairs) in zip(model_paths, measured):
        progress(f"{Path(path).name}: {len(ops)} op(s) profiled on ORT, {len(model_pairs)} pair(s) on the plugin")
        all_ops += ops
        pairs += model_pairs
    leads = probe_leads([m.row for m in probe], progress)
    fitted = fit_targets(all_ops, pairs, base, where, progress, leads)
    result = CalibrationResult(
        fitted.ort_target,
        fitted.ort_fit.rows,
        fitted.predicted_rows(pairs, ORT_FIT),
        where,
        fitted.ort_fit.ddr_bound,
        ort_target=fitted.ort_target,
        kernel_target=fitted.kernel_target,
        kernel_fit_rows=fitted.kernel_fit.rows if fitted.kernel_fit else [],
        kernel_pair_rows=fitted.predicted_rows(pairs, KERNEL_FIT),
        kernel_ddr_bound=fitted.kernel_fit.ddr_bound if fitted.kernel_fit else [],
        unmodelled_kernel_s={f"{m.row.model}:{m.row.node}": m.unmodelled_s for m in pairs},
        held_out=held_out_rows(all_ops, pairs, base, where, leads),
    )
    result.choose()
    chosen = fitted.target(result.chosen_fit)
    assert chosen is not None
    result.target = replace(
        chosen,
        name=CALIBRATED_NAME,
        description=f"{chosen.description}; chosen over the other fit: {result.choice_note}",
    )
    for t in (result.ort_target, result.kernel_target, result.target):
        if t is not None:
            costmodel.register_target(t)
    return result


def calibrate_zoo(
    folder: Path, progress: Progress = _quiet, runs: int = DEFAULT_RUNS, warmup: int = DEFAULT_WARMUP
) -> CalibrationResult:
    """`calibrate` on every zoo builder, written into `folder`."""
    from .zoo import models_package, resolve

    return calibrate([resolve(name, folder)[0] for name in models_package().BUILDERS], progress, runs, warmup)
