"""Calibrate the host cost model from ONNX Runtime profiling, and measure its prediction error.

    result = calibrate(["a.onnx", "b.onnx"], progress=print)
    result.ort_target               # "host-ort-fit": fit to ORT profiling
    result.kernel_target            # "host-kernel-fit": fit to the kernel's own item times
    result.median_abs_error         # ORT fit: fused-call prediction error, median |predicted/measured - 1|
    result.kernel_median_abs_error  # kernel fit: the same, on the same measured calls
    result.target                   # "host-calibrated": the fit with the lower error (result.chosen_fit)

1. Per-op times: each model runs on stock ORT (one intra-op thread, sequential, no graph
   optimisation so every node runs as written) with the ORT profiler on; the profile's node
   events of the runs after warm-up are matched to the graph's NodeProfile by node name. The
   runs come in blocks that alternate with the plugin's runs of step 3 (`measure_model`), so
   that both see the shared machine alike; the pairs are those the pass makes for the base
   target (every lowerable pair kept).
2. Fit: the cost model of one op is op_overhead + max(work / rate, DDR bytes / DDR bandwidth),
   work being the FLOPs of matrix and vector ops and the bytes of memory ops, the rate its op
   class's (costmodel.OP_CLASSES: conv, pool, transcendental) or its engine's. The fit alternates
   between assigning each op to its binding resource and one linear least-squares fit of that
   assignment (numpy.linalg.lstsq, rows weighted by 1/time: relative error), which gives the
   shared overhead, one rate per engine and op class, and the DDR bandwidth. It starts with every
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
   measured (call time - work-item span, medians over the pairs) and each pair is predicted with
   its own mix of the two (`with_call_overhead`). The predicted time of a call is
   costmodel.predict(...).fused at the share the plugin used plus that overhead. The serial
   prediction (ORT's one thread, the fit as profiled) is compared with the ORT-profiled time of
   the pair's original nodes.
4. A second fit, to the kernel's own item times: the plugin's host kernels are not ORT's (its
   Conv, pooling and small GEMMs are slower), so rates fitted to ORT can mispredict it. The
   traced runs of step 3 give, per call, every work item's program op and duration; the sum of
   an op's item durations (worker time: an op cut into items run by both workers counts both),
   median over the runs, is attributed to the graph node the op was lowered from
   (`lowering.program_op_nodes`; both micro-batch copies of a chain node add up to that node).
   Those per-node times, with the same one-op NodeProfiles as the ORT fit, go through the same
   `fit_target`, and the fit predicts the same measured calls (same share, same call overhead).
   This fit is in-sample (fitted and checked on the same fused runs). Item times leave out
   the kernel's time between items (dispatch, the barrier between ops, waiting for a worker:
   the `kernel_gap_per_op_s` column), so the measured median gap per op is added to its op
   overhead. Its ops' DDR bytes are counted in the pair's tasks, as the prediction counts them.
   Unfused, a pair's nodes run on stock ORT: the kernel fit carries the ORT fit as its
   `baseline`, which predicts its serial times.
   `-o` writes the fit with the lower median fused-call error as "host-calibrated" and says which.

Run it as `python -m hexfuse_onnx calibrate [-o FILE] [--table] [MODEL ...]` (the zoo when no
model is given); the CLI re-executes itself without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE first.
`--target FILE.json` of rewrite/inspect uses the written target. Timings are noisy on a shared
2-core VM: nothing here asserts an error bound.
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


# ---------------------------------------------------------------------------------------
# 1. Per-op times from the ORT profiler


@dataclass(frozen=True)
class OpTiming:
    """One op's measured time (median over the profiled runs) and its profile."""

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
    """(median seconds per node id, the timings of every profiled node that does work) of the
    profiled node times."""
    matched = match_nodes(profile, times)
    medians = {i: statistics.median(v) for i, v in matched.items()}
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
    return ("overhead", *sorted(set(cols)), "ddr")


def _base_coefficients(base: Target, ops: list[OpTiming], cols: list[str]) -> dict[str, float]:
    """Seconds per unit of each column: per op, per unit of work of each rate column, per DDR byte."""
    coef = {"overhead": base.op_overhead_s.value, "ddr": 1.0 / base.ddr_bytes.value}
    for t, c in zip(ops, cols):
        coef[c] = 1.0 / base.rate(t.op.engine, op_class=c)
    return coef


def _design(ops: list[OpTiming], cols: list[str], ddr_bound: set[int]) -> np.ndarray:
    """One row per op: 1 in the overhead column, and its work in its rate column, or its DDR
    bytes in the DDR column when the model says DDR bounds it (time = overhead + max(...))."""
    columns = _columns(cols)
    x = np.zeros((len(ops), len(columns)))
    x[:, 0] = 1.0
    for r, t in enumerate(ops):
        if r in ddr_bound:
            x[r, columns.index("ddr")] = t.op.ddr_bytes
        else:
            x[r, columns.index(cols[r])] = t.work
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
    return {k for k, t in enumerate(ops) if t.op.ddr_bytes * coef["ddr"] > t.work * coef[cols[k]] * (1 + 1e-9)}


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
    cold_lead_s: float = float("nan")
    warm_lead_s: float = float("nan")
    cold_join_s: float = float("nan")

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
    cold_lead_s: float = float("nan")  # median call - span of those calls (the wake-up on the caller)
    warm_lead_s: float = float("nan")  # median call - span of the others
    cold_join_s: float = float("nan")  # median time into those calls of another worker's first item (`call_join`)


# The kernel's idle workers spin this long before they sleep (HFX_SPIN_NS, dsp/src/platform_posix.c):
# a call that comes later than this after the pool's last item has to wake them.
POOL_SPIN_S = 200e-6


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
    """Median `call_join` of the calls that found the pool's workers asleep."""
    return _median_or_nan([call_join(d) for d, t in zip(ds, idle) if t > POOL_SPIN_S])


def call_leads(ds: list[dict], idle: list[float]) -> tuple[float, float, float]:
    """(share of the calls that came after the workers went to sleep, median call - span of those,
    of the others); a call whose idle time is unknown is left out."""
    cold = [(d["run_wall_ns"] - d["wall_ns"]) / 1e9 for d, t in zip(ds, idle) if t > POOL_SPIN_S]
    warm = [(d["run_wall_ns"] - d["wall_ns"]) / 1e9 for d, t in zip(ds, idle) if t <= POOL_SPIN_S]
    known = len(cold) + len(warm)
    return (len(cold) / known if known else float("nan")), _median_or_nan(cold), _median_or_nan(warm)


def trace_gap_per_op(doc: dict) -> float:
    """Seconds per op a task of one traced call spends with none of its items running, between
    its first item's start and its last item's end (dispatch and the barrier between its ops,
    or waiting for a worker): time in the span that no item duration contains."""
    from .timeline import _union_ns

    gaps, ops = 0, 0
    for task in {e["task"] for e in doc["trace_events"]}:
        items = [(e["start_ns"], e["end_ns"]) for e in doc["trace_events"] if e["task"] == task]
        gaps += max(end for _, end in items) - min(start for start, _ in items) - _union_ns(items)
        ops += len({e["op"] for e in doc["trace_events"] if e["task"] == task})
    return gaps / 1e9 / ops if ops else float("nan")


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
                for n, docs in self.docs.items():
                    docs.append(json.loads(Path(self.pattern.replace("{node}", n.replace("/", "_"))).read_text()))


def summarise_traces(docs: dict[str, list[dict]]) -> dict[str, TracedPair]:
    """Each node's traced calls as medians. A run whose trace dropped events is left out of the
    per-op times (its span still counts)."""
    out = {}
    idle = idle_before(docs)
    for n, ds in docs.items():
        complete = [d for d in ds if not d.get("dropped")] or ds
        per_run = [trace_op_seconds(d) for d in complete]
        ops = sorted({o for r in per_run for o in r})
        out[n] = TracedPair(
            n,
            statistics.median(d["wall_ns"] / 1e9 for d in ds),
            statistics.median(d["run_wall_ns"] / 1e9 for d in ds),
            float(ds[-1]["share_a"]),
            bool(ds[-1]["serialized"]),
            statistics.median(sum(r.values()) for r in per_run),
            statistics.median(d.get("task_overlap_ns", 0) / max(d["wall_ns"], 1) for d in ds),
            {o: statistics.median(r.get(o, 0.0) for r in per_run) for o in ops},
            len(complete),
            statistics.median(trace_gap_per_op(d) for d in complete),
            *call_leads(ds, idle[n]),
            cold_join(ds, idle[n]),
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
            cold_lead_s=trace.cold_lead_s,
            warm_lead_s=trace.warm_lead_s,
            cold_join_s=trace.cold_join_s,
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


ROUNDS = 4  # blocks of runs per side when ORT's and the plugin's runs of a model alternate


def measure_model(
    path: str | os.PathLike[str],
    target: Target,
    folder: Path,
    runs: int = 20,
    warmup: int = 3,
    progress: Progress = _quiet,
) -> tuple[dict[int, float], list[OpTiming], list[PairMeasurement]]:
    """The model's ops profiled on ORT and its pairs (rewritten for `target`) traced on the plugin,
    in ROUNDS alternating blocks of runs, so that both see the machine alike (a shared VM's speed
    drifts from second to second): (median seconds per node id, op timings, pair measurements)."""
    from ..verify import random_inputs

    g = graph_mod.load(path)
    profile = profile_graph(g)
    work = folder / Path(path).stem
    work.mkdir(parents=True, exist_ok=True)
    session = ort.InferenceSession(str(path), sess_options=profiling_options(work), providers=["CPUExecutionProvider"])
    feeds = random_inputs(session, seed=0)
    fused, pairs, _ = fused_pairs(path, work / "fused.onnx", target)
    traced = TracedSession(fused, sorted(pairs), work) if fused is not None else None
    for _ in range(warmup):
        session.run(None, feeds)
    if traced is not None:
        traced.run(feeds, warmup, keep=False)
    for block in range(ROUNDS):
        n = runs // ROUNDS + (1 if block < runs % ROUNDS else 0)
        for _ in range(n):
            session.run(None, feeds)
        if traced is not None:
            traced.run(feeds, n)
    events = json.loads(Path(session.end_profiling()).read_text())
    medians, ops = op_timings(path, profile, node_times(events, warmup))
    progress(f"{Path(path).name}: {len(ops)} op(s) profiled on ORT")
    if fused is None or traced is None:
        progress(f"{Path(path).name}: no pair to measure")
        return medians, ops, []
    traces = summarise_traces(traced.docs)
    return medians, ops, pair_measurements(path, target, fused, pairs, profile, traces, medians, progress)


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


def measured_leads(rows: list[PairRow]) -> tuple[float, float] | None:
    """(cold, warm): median over the pairs of call - span of their calls that had to wake the pool's
    workers, and of those that found them spinning; None unless both kinds of call were seen."""
    cold = [r.cold_lead_s for r in rows if np.isfinite(r.cold_lead_s)]
    warm = [r.warm_lead_s for r in rows if np.isfinite(r.warm_lead_s)]
    if not cold or not warm:
        return None
    return max(statistics.median(cold), 0.0), max(statistics.median(warm), 0.0)


def expected_call_overhead(row: PairRow, cold: float, warm: float) -> float:
    """The call overhead of a pair whose calls wake the pool in `row.cold_share` of the runs."""
    share = row.cold_share if np.isfinite(row.cold_share) else 1.0
    return share * cold + (1.0 - share) * warm


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


def with_call_overhead(target: Target, rows: list[PairRow], where: str = "") -> tuple[Target, list[PairRow]]:
    """`target` with the measured call overhead, and the rows with each pair's. The workers of the
    kernel's pool spin for POOL_SPIN_S after their last item, then sleep: a call that comes later
    pays a wake-up on the caller before its first item, one that comes sooner (a pair right after
    another) does not. Where both kinds of call were traced, a pair's overhead is that of its kind
    (weighted by how often its calls were cold) and the target's `call_overhead_s` is the cold one
    (a call on its own); else the median over the pairs of call - span."""
    if not rows:
        return target, rows
    leads = measured_leads(rows)
    suffix = "; both from the kernel trace of the same runs" + (f"; {where}" if where else "")
    if leads is None:
        overhead = measured_call_overhead(rows)
        source = f"measured: median over {len(rows)} plugin pairs of (hfx_run's wall time - the work-item span)"
        target = replace(target, call_overhead_s=Param(overhead, "s", source + suffix))
        return target, [replace(r, call_overhead_s=overhead) for r in rows]
    cold, warm = leads
    source = (
        f"measured: median over the plugin pairs of (hfx_run's wall time - the work-item span) of the calls "
        f"that came over {POOL_SPIN_S * 1e6:.0f} us after the pool's previous one (its workers asleep: a wake-up); "
        f"{warm * 1e6:.1f} us for the calls that found them spinning"
    )
    target = replace(target, call_overhead_s=Param(cold, "s", source + suffix))
    return target, [replace(r, call_overhead_s=expected_call_overhead(r, cold, warm)) for r in rows]


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
    times (`kernel_target`; in-sample: its op times come from the traced fused runs whose calls
    it is then compared with). `target` is the one the JSON carries (`costmodel.load_target`
    reads it) and `calibrate` registers, named CALIBRATED_NAME: the fit with the lower median
    fused-call error, `chosen_fit` ("ort" or "kernel") says which."""

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

    def errors(self, fit: str) -> FitErrors:
        """Median |error| of one fit (ORT_FIT or KERNEL_FIT) over the same measured calls."""
        pairs, ops = (
            (self.pair_rows, self.fit_rows) if fit == ORT_FIT else (self.kernel_pair_rows, self.kernel_fit_rows)
        )
        return FitErrors(
            fused=_median_abs(r.fused_error for r in pairs),
            span=_median_abs(r.span_error for r in pairs),
            serial=_median_abs(r.serial_error for r in pairs),
            residual=_median_abs(r.rel_error for r in ops),
        )

    @property
    def median_abs_error(self) -> float:
        """Fit to ORT profiling: fused time of a call, |predicted / measured - 1|, median over the pairs."""
        return self.errors(ORT_FIT).fused

    @property
    def kernel_median_abs_error(self) -> float:
        """Fit to the kernel's item times: the same, on the same measured calls."""
        return self.errors(KERNEL_FIT).fused

    @property
    def chosen_median_abs_error(self) -> float:
        return self.kernel_median_abs_error if self.chosen_fit == KERNEL_FIT else self.median_abs_error

    @property
    def choice_note(self) -> str:
        if self.kernel_target is None:
            return f"the {FIT_LABELS[ORT_FIT]} (no kernel fit: no pair was measured)"
        other = KERNEL_FIT if self.chosen_fit == ORT_FIT else ORT_FIT
        errors = {ORT_FIT: self.median_abs_error, KERNEL_FIT: self.kernel_median_abs_error}
        return (
            f"the {FIT_LABELS[self.chosen_fit]}: the lower median |fused call error| "
            f"({errors[self.chosen_fit]:.1%}; {FIT_LABELS[other]}: {errors[other]:.1%})"
        )

    def _fit_dict(self, key: str) -> dict | None:
        if key == ORT_FIT:
            target, rows, ddr = self.ort_target or self.target, self.fit_rows, self.ddr_bound
        elif self.kernel_target is None:
            return None
        else:
            target, rows, ddr = self.kernel_target, self.kernel_fit_rows, self.kernel_ddr_bound
        e = self.errors(key)
        return {
            "label": FIT_LABELS[key],
            "target": target.to_dict(),
            "median_abs_error": e.fused,
            "median_abs_span_error": e.span,
            "median_abs_serial_error": e.serial,
            "median_abs_op_residual": e.residual,
            "ddr_bound_ops": ddr,
            "ops": [{**asdict(r), "rel_error": r.rel_error} for r in rows],
        }

    def to_dict(self) -> dict:
        """`target` (what load_target reads) is the chosen fit; `fits` holds both, `pairs` the
        measured calls with each fit's prediction ("ort_fit", "kernel_fit")."""
        kernel = {(r.model, r.node): r for r in self.kernel_pair_rows}
        pairs = []
        for r in self.pair_rows:
            k = kernel.get((r.model, r.node))
            pairs.append(
                {
                    **{f: getattr(r, f) for f in _MEASURED_FIELDS},
                    "unmodelled_kernel_s": self.unmodelled_kernel_s.get(f"{r.model}:{r.node}", 0.0),
                    "ort_fit": _pair_prediction(r),
                    "kernel_fit": _pair_prediction(k) if k else None,
                }
            )
        return {
            "target": self.target.to_dict(),
            "target_fit": self.chosen_fit,
            "target_note": f"carries {self.choice_note}",
            "where": self.where,
            "median_abs_error": self.chosen_median_abs_error,
            "fits": {key: self._fit_dict(key) for key in (ORT_FIT, KERNEL_FIT)},
            "pairs": pairs,
        }

    def to_json(self) -> str:
        """The result as JSON; `costmodel.load_target` reads the target from it."""
        return json.dumps(self.to_dict(), indent=2, default=_json_float) + "\n"

    def summary_lines(self) -> list[str]:
        fits = [(ORT_FIT, self.ort_target or self.target, self.fit_rows, self.errors(ORT_FIT).residual)]
        if self.kernel_target is not None:
            fits.append((KERNEL_FIT, self.kernel_target, self.kernel_fit_rows, self.errors(KERNEL_FIT).residual))
        overhead = self.target.call_overhead_s.value
        lines = [
            f"calibrated host targets ({self.where}); both predict a call as the fused time plus the measured "
            f"call overhead: {overhead * 1e6:.1f} us for a call that wakes the pool "
            f"({self.target.call_overhead_s.source})"
        ]
        for key, t, rows, residual in fits:
            lines += [
                f"  {FIT_LABELS[key]} ('{t.name}'): matrix {t.matrix_flops.value / 1e9:.1f} GFLOP/s, "
                f"vector {t.vector_flops / 1e9:.2f} GFLOP/s, memory {t.dma_bytes.value / 1e9:.2f} GB/s, "
                f"DDR {t.ddr_bytes.value / 1e9:.1f} GB/s, op overhead {t.op_overhead_s.value * 1e6:.1f} us; "
                f"{len(rows)} ops, median |residual| {residual:.1%}"
            ]
        kernel = {(r.model, r.node): r for r in self.kernel_pair_rows}
        lines += [
            "",
            "pair                                   kind            share  meas us  span us  work/span  "
            "overlap  gap/op us  cold  call oh |  ORT fit  error | kernel fit  error | serial meas  ORT fit  error",
        ]
        for r in self.pair_rows:
            k = kernel.get((r.model, r.node))
            kernel_cols = f"{k.predicted_call_s * 1e6:10.0f} {k.fused_error:+6.0%}" if k else f"{'-':>10} {'-':>6}"
            ratio = r.kernel_work_s / r.measured_span_s if r.measured_span_s > 0 else float("nan")
            lines.append(
                f"{r.model + ':' + r.node:<38} {r.kind:<15} {r.share_a:5.2f} {r.measured_call_s * 1e6:8.0f} "
                f"{r.measured_span_s * 1e6:8.0f} {ratio:10.2f} {r.task_overlap:8.0%} "
                f"{r.kernel_gap_per_op_s * 1e6:10.1f} {r.cold_share:5.0%} {r.call_overhead_s * 1e6:8.1f} | "
                f"{r.predicted_call_s * 1e6:8.0f} {r.fused_error:+6.0%} | {kernel_cols} | "
                f"{r.measured_serial_s * 1e6:11.0f} {r.predicted_serial_s * 1e6:8.0f} {r.serial_error:+6.0%}"
                + ("  (serialised)" if r.serialized else "")
            )
        n = len(self.pair_rows)
        kernel_errors = (
            f", {FIT_LABELS[KERNEL_FIT]} {self.kernel_median_abs_error:.1%}" if self.kernel_target is not None else ""
        )
        lines += [
            "",
            f"median |error| over {n} pairs, fused call (target <= 20%): {FIT_LABELS[ORT_FIT]} "
            f"{self.median_abs_error:.1%}{kernel_errors}",
            f"  fused work span: {FIT_LABELS[ORT_FIT]} {self.errors(ORT_FIT).span:.1%}"
            + (f", {FIT_LABELS[KERNEL_FIT]} {self.errors(KERNEL_FIT).span:.1%}" if kernel_errors else "")
            + f"; serial (ORT-profiled original nodes) {FIT_LABELS[ORT_FIT]} {self.errors(ORT_FIT).serial:.1%}"
            + (f", {FIT_LABELS[KERNEL_FIT]} {self.errors(KERNEL_FIT).serial:.1%}" if kernel_errors else ""),
            "  work/span: summed work-item time over the span (2 = both workers busy throughout); overlap: "
            "share of the span both tasks ran an item; gap/op: time per op a task ran no item (in the span, "
            "in no op's item time)",
        ]
        if self.kernel_target is not None:
            unmodelled = sum(self.unmodelled_kernel_s.values())
            lines.append(
                f"  the kernel fit is in-sample (its op times come from these fused runs); kernel item time on "
                f"nodes the cost model gives no work (Reshape, ...): {unmodelled * 1e6:.0f} us over all pairs"
            )
        lines.append(f"target '{self.target.name}' (written by -o): {self.choice_note}")
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


def _json_float(x: object) -> object:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def where_measured() -> str:
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpus), {datetime.date.today().isoformat()}"


def calibrate(
    model_paths: Sequence[str | os.PathLike[str]],
    progress: Progress = _quiet,
    runs: int = 20,
    warmup: int = 3,
    base: Target = costmodel.HOST,
) -> CalibrationResult:
    """Fit a host target to the models' ORT-profiled ops, measure its fused and serial prediction
    error on the pairs the pass makes of the same models, fit a second target to the kernel's own
    per-op item times of those runs, and measure its error on the same calls (see the module doc).
    The better of the two is registered as CALIBRATED_NAME."""
    where = where_measured()
    all_ops: list[OpTiming] = []
    pairs: list[PairMeasurement] = []
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        for path in model_paths:
            _, ops, measured = measure_model(path, base, Path(folder), runs, warmup, progress)
            all_ops += ops
            pairs += measured
    fit = fit_target(all_ops, base, ORT_FIT_NAME, where)
    progress(f"{FIT_LABELS[ORT_FIT]}: {len(fit.rows)} ops, median |residual| {fit.median_abs_residual:.1%}")
    ort_target = on_the_kernel(fit.target, pairs, where, replace_overhead=True)
    ort_target, rows = with_call_overhead(ort_target, [predicted_row(m, ort_target) for m in pairs], where)
    kernel_ops = [t for m in pairs for t in m.kernel_ops]
    result = CalibrationResult(
        ort_target,
        fit.rows,
        rows,
        where,
        fit.ddr_bound,
        ort_target=ort_target,
        unmodelled_kernel_s={f"{m.row.model}:{m.row.node}": m.unmodelled_s for m in pairs},
    )
    if kernel_ops:
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
        kernel_target, kernel_rows = with_call_overhead(
            kernel_target, [predicted_row(m, kernel_target) for m in pairs], where
        )
        result.kernel_target, result.kernel_fit_rows = kernel_target, kfit.rows
        result.kernel_pair_rows, result.kernel_ddr_bound = kernel_rows, kfit.ddr_bound
        if result.kernel_median_abs_error < result.median_abs_error:
            result.chosen_fit = KERNEL_FIT
    chosen = result.kernel_target if result.chosen_fit == KERNEL_FIT else ort_target
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
