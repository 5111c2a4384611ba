"""Calibrate the host cost model from ONNX Runtime profiling, and measure its prediction error.

    result = calibrate(["a.onnx", "b.onnx"], progress=print)
    result.target            # costmodel.Target "host-calibrated", every fitted Param says so
    result.median_abs_error  # fused-time prediction error over the pairs, |predicted/measured - 1|

1. Per-op times: each model runs on stock ORT (one intra-op thread, sequential, no graph
   optimisation so every node runs as written) with the ORT profiler on; the profile's node
   events of the runs after warm-up are matched to the graph's NodeProfile by node name.
2. Fit: the cost model of one op is op_overhead + max(work / engine rate, DDR bytes / DDR
   bandwidth), work being the FLOPs of matrix and vector ops and the bytes of memory ops. The
   fit alternates between assigning each op to its binding resource and one linear least-squares
   fit of that assignment (numpy.linalg.lstsq, rows weighted by 1/time: relative error), which
   gives the shared overhead, the three engine rates and the DDR bandwidth. It starts with every
   op engine-bound and DDR at the largest bandwidth a work-dominated op reached.
3. Prediction error: each model is rewritten for the calibrated target with every lowerable
   pair kept (min_gain below any real loss), and run with the FusedHexPair plugin: once with
   the ORT profiler (the FusedHexPair node's kernel time is the measured fused time of a call)
   and once with the kernel trace (the work-item span of each call). The per-call cost the
   kernel pays outside its work items (ORT glue, pool wake-up and join) is measured as the
   median over the pairs of (call time - work-item span) and kept as `call_overhead_s`; the
   predicted fused time of a call is costmodel.predict(...).fused at the share the plugin used
   plus that overhead. The serial prediction is compared with the ORT-profiled time of the
   pair's original nodes.

Run it as `python -m hexfuse_onnx calibrate [-o FILE] [--table] [MODEL ...]` (the zoo when no
model is given); the CLI re-executes itself without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE first.
`--target FILE.json` of rewrite/inspect uses the written target. Timings are noisy on a shared
2-core VM: nothing here asserts an error bound.
"""
from __future__ import annotations

import datetime
import os
import json
import platform
import statistics
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from . import contract as C
from . import costmodel, graph as graph_mod
from .costmodel import Param, Target, predict, task_time
from .profile import Engine, GraphProfile, NodeProfile, TaskProfile, profile_graph
from .select import Pair

Progress = Callable[[str], None]
CALIBRATED_NAME = "host-calibrated"
KEEP_EVERY_PAIR = -10.0  # a min_gain no real pair falls below: measure losing pairs too
WORK_DOMINATED = 0.5     # an op whose work is at least this share of its time bounds DDR
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
    op: NodeProfile   # as a one-op task sees it (ddr_bytes: everything it reads and writes)
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
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")
    kept = runs[warmup:]
    times: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        if not any(start <= e["ts"] <= end for start, end in kept):
            continue
        times.setdefault(e["name"][: -len("_kernel_time")], []).append(e["dur"] / 1e6)
    return times


def profile_session(session: ort.InferenceSession, feeds: dict[str, np.ndarray], runs: int,
                    warmup: int) -> dict[str, list[float]]:
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


def measure_ops(path: str | os.PathLike[str], runs: int = 20, warmup: int = 3
                ) -> tuple[GraphProfile, dict[int, float], list[OpTiming]]:
    """Profile the model on ORT: (graph profile, median seconds per node id, the timings of
    every profiled node that does work)."""
    from .verify import random_inputs

    g = graph_mod.load(path)
    profile = profile_graph(g)
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        session = ort.InferenceSession(str(path), sess_options=profiling_options(folder),
                                       providers=["CPUExecutionProvider"])
        times = profile_session(session, random_inputs(session, seed=0), runs, warmup)
    matched = match_nodes(profile, times)
    medians = {i: statistics.median(v) for i, v in matched.items()}
    timings = []
    for i, seconds in medians.items():
        op = one_op_profile(profile, i)
        if op is None or op.engine == Engine.NONE:
            continue
        n = g.nodes[i]
        timings.append(OpTiming(Path(path).stem, n.name, n.op_type, op, seconds, len(matched[i])))
    return profile, medians, timings


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
    ddr_bound: list[str]          # ops the fitted model calls DDR-bound

    @property
    def median_abs_residual(self) -> float:
        return _median_abs([r.rel_error for r in self.rows])


def _median_abs(errors: Iterable[float]) -> float:
    finite = [abs(e) for e in errors if np.isfinite(e)]
    return statistics.median(finite) if finite else float("nan")


_COLUMNS = ("overhead", Engine.MATRIX.value, Engine.VECTOR.value, Engine.MEMORY.value, "ddr")


def _base_coefficients(base: Target) -> dict[str, float]:
    """Seconds per unit of each column: per op, per FLOP, per FLOP, per byte, per DDR byte."""
    return {"overhead": base.op_overhead_s.value,
            Engine.MATRIX.value: 1.0 / base.matrix_flops.value,
            Engine.VECTOR.value: 1.0 / base.vector_flops,
            Engine.MEMORY.value: 1.0 / base.dma_bytes.value,
            "ddr": 1.0 / base.ddr_bytes.value}


def _design(ops: list[OpTiming], ddr_bound: set[int]) -> np.ndarray:
    """One row per op: 1 in the overhead column, and its work in its engine's column, or its
    DDR bytes in the DDR column when the model says DDR bounds it (time = overhead + max(...))."""
    x = np.zeros((len(ops), len(_COLUMNS)))
    x[:, 0] = 1.0
    for r, t in enumerate(ops):
        if r in ddr_bound:
            x[r, _COLUMNS.index("ddr")] = t.op.ddr_bytes
        else:
            x[r, _COLUMNS.index(t.op.engine.value)] = t.work
    return x


def fit_coefficients(ops: list[OpTiming], ddr_bound: set[int], base: Target) -> tuple[dict[str, float], set[str]]:
    """Least squares (numpy.linalg.lstsq, rows weighted by 1/time: relative error) of each op's
    time on the columns. A column without data, or fitted non-positive, keeps `base`'s value
    and the others are refitted. Returns every column's coefficient and the fitted columns."""
    x = _design(ops, ddr_bound)
    y = np.array([t.seconds for t in ops])
    w = 1.0 / np.maximum(y, 1e-9)
    base_coef = _base_coefficients(base)
    fixed = {c: base_coef[c] for k, c in enumerate(_COLUMNS) if not x[:, k].any()}
    for _ in range(len(_COLUMNS)):
        free = [c for c in _COLUMNS if c not in fixed]
        if not free:
            break
        rhs = y - sum((x[:, _COLUMNS.index(c)] * v for c, v in fixed.items()), np.zeros_like(y))
        a = x[:, [_COLUMNS.index(c) for c in free]]
        coef, *_ = np.linalg.lstsq(a * w[:, None], rhs * w, rcond=None)
        bad = [c for c, v in zip(free, coef) if v <= 0]
        if not bad:
            return {**fixed, **dict(zip(free, map(float, coef)))}, set(free)
        fixed.update({c: base_coef[c] for c in bad})
    return dict(fixed), set()


def ddr_lower_bound(ops: list[OpTiming], overhead: float) -> float | None:
    """The largest DDR bandwidth a work-dominated op reached (None without such an op)."""
    seen = [t.op.ddr_bytes / (t.seconds - overhead) for t in ops
            if t.op.ddr_bytes > 0 and t.seconds - overhead >= WORK_DOMINATED * t.seconds]
    return max(seen) if seen else None


def _ddr_bound(ops: list[OpTiming], coef: dict[str, float]) -> set[int]:
    """The ops whose DDR time exceeds their engine time under `coef`."""
    return {k for k, t in enumerate(ops)
            if t.op.ddr_bytes * coef["ddr"] > t.work * coef[t.op.engine.value] * (1 + 1e-9)}


def fit_target(ops: list[OpTiming], base: Target = costmodel.HOST, name: str = CALIBRATED_NAME,
               where: str = "") -> Fit:
    """Fit base's op overhead, engine rates and DDR bandwidth to the measured ops.

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
        if "ddr" not in fitted and observed is not None:
            coef["ddr"], fitted = 1.0 / observed, fitted | {"ddr-observed"}
    bound = bound or set()
    target = _fitted_target(base, name, coef, fitted, ops, bound, where)
    rows = [FitRow(t.model, t.node, t.op_type, t.op.engine.value, t.work, t.seconds,
                   task_time(TaskProfile.of([t.op]), target)) for t in ops]
    fit = Fit(target, rows, [ops[k].node for k in sorted(bound)])
    fit.target = _with_residual(target, f"median |residual| {fit.median_abs_residual:.1%}")
    return fit


def _fitted_target(base: Target, name: str, coef: dict[str, float], fitted: set[str], ops: list[OpTiming],
                   ddr_bound: set[int], where: str) -> Target:
    counts = {e: sum(1 for t in ops if t.op.engine == e) for e in _WORK_COLUMNS}
    what = (f"{len(ops)} ORT-profiled ops: {counts[Engine.MATRIX]} matrix, {counts[Engine.VECTOR]} vector, "
            f"{counts[Engine.MEMORY]} memory, {len(ddr_bound)} of them DDR-bound in the model")
    how = f"{what}; {{residual}}" + (f"; {where}" if where else "")

    def param(key: str, value: float, unit: str, base_param: Param) -> Param:
        if key in fitted:
            return Param(value, unit, f"measured: least-squares fit to {how}")
        if key == "ddr" and "ddr-observed" in fitted:
            return Param(value, unit, f"measured: the largest bandwidth a work-dominated op reached (a lower "
                                      f"bound; no op is DDR-bound in the fit), {how}")
        return replace(base_param, source=f"not fitted (no usable data in {what}): {base_param.source}")

    contexts = base.vector_contexts.value
    return replace(
        base, name=name, description=f"{base.description}; fitted to ORT per-op profiling",
        matrix_flops=param(Engine.MATRIX.value, 1.0 / coef[Engine.MATRIX.value], "FLOP/s", base.matrix_flops),
        vector_flops_per_context=param(Engine.VECTOR.value, 1.0 / coef[Engine.VECTOR.value] / contexts, "FLOP/s",
                                       base.vector_flops_per_context),
        dma_bytes=param(Engine.MEMORY.value, 1.0 / coef[Engine.MEMORY.value], "B/s", base.dma_bytes),
        ddr_bytes=param("ddr", 1.0 / coef["ddr"], "B/s", base.ddr_bytes),
        op_overhead_s=param("overhead", coef["overhead"], "s", base.op_overhead_s))


def _with_residual(target: Target, residual: str) -> Target:
    params = {k: replace(p, source=p.source.replace("{residual}", residual)) for k, p in target.params().items()}
    return replace(target, **params)


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
    predicted_fused_s: float      # costmodel fused time at the plugin's share (no call overhead)
    measured_call_s: float        # ORT-profiled kernel time of the FusedHexPair node
    measured_span_s: float        # the kernel's work-item span (trace)
    predicted_serial_s: float
    measured_serial_s: float      # ORT-profiled time of the pair's original nodes
    call_overhead_s: float = 0.0  # added to predicted_fused_s for a call

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


def plugin_call_times(fused_path: str | os.PathLike[str], nodes: list[str], runs: int,
                      warmup: int) -> dict[str, float]:
    """Median ORT-profiled kernel time of each FusedHexPair node, plugin loaded, no trace."""
    from .runtime import InferenceSession
    from .verify import random_inputs

    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        session = InferenceSession(fused_path, backend="host", so=profiling_options(folder))
        times = profile_session(session, random_inputs(session, seed=0), runs, warmup)
    missing = [n for n in nodes if n not in times]
    if missing:
        raise RuntimeError(f"{fused_path}: the profiler reported no time for {', '.join(missing)}")
    return {n: statistics.median(times[n]) for n in nodes}


def plugin_spans(fused_path: str | os.PathLike[str], nodes: list[str], runs: int,
                 warmup: int) -> dict[str, tuple[float, float, bool]]:
    """Per node: median work-item span (s) from the kernel trace, the share and whether it ran serialised."""
    from .runtime import InferenceSession
    from .verify import random_inputs

    with tempfile.TemporaryDirectory(prefix="hexfuse-trace-") as folder:
        pattern = str(Path(folder) / "{node}.json")
        so = profiling_options(folder)
        so.enable_profiling = False
        session = InferenceSession(fused_path, backend="host", trace=pattern, so=so)
        feeds = random_inputs(session, seed=0)
        spans: dict[str, list[float]] = {n: [] for n in nodes}
        info: dict[str, tuple[float, bool]] = {}
        for k in range(warmup + runs):
            session.run(None, feeds)
            if k < warmup:
                continue
            for n in nodes:
                doc = json.loads(Path(pattern.replace("{node}", n.replace("/", "_"))).read_text())
                spans[n].append(doc["wall_ns"] / 1e9)
                info[n] = (float(doc["share_a"]), bool(doc["serialized"]))
    return {n: (statistics.median(spans[n]), *info[n]) for n in nodes}


def fused_pairs(path: str | os.PathLike[str], out: Path, target: Target,
                progress: Progress = _quiet) -> tuple[Path | None, dict[str, Pair], GraphProfile]:
    """Rewrite for `target` keeping every lowerable pair: (fused model or None, node name ->
    its Pair, the original graph's profile)."""
    from . import pipeline
    from .rewrite import next_pair_id

    costmodel.register_target(target)
    result = pipeline.rewrite(path, out, target=target.name, min_gain=KEEP_EVERY_PAIR, progress=progress)
    profile = result.analysis.profile
    if result.output is None:
        return None, {}, profile
    first = next_pair_id(result.analysis.graph.model)
    by_overload = {f"pair{first + k}": p for k, p in enumerate(result.analysis.pairs)}
    model = onnx.load(str(result.output), load_external_data=False)
    pairs = {n.name: by_overload[n.overload] for n in model.graph.node
             if n.domain == C.DOMAIN and n.op_type == C.OP_TYPE and n.overload in by_overload}
    return result.output, pairs, profile


def measure_pairs(path: str | os.PathLike[str], target: Target, original_times: dict[int, float],
                  folder: Path, runs: int = 20, warmup: int = 3, progress: Progress = _quiet) -> list[PairRow]:
    """Rewrite the model for `target`, run it with the plugin and compare each pair's prediction
    with its measurement (call_overhead_s left 0: `with_call_overhead` sets it)."""
    out = folder / (Path(path).stem + ".fused.onnx")
    fused, pairs, profile = fused_pairs(path, out, target)
    if fused is None:
        progress(f"{Path(path).name}: no pair to measure")
        return []
    names = sorted(pairs)
    calls = plugin_call_times(fused, names, runs, warmup)
    spans = plugin_spans(fused, names, runs, warmup)
    rows = []
    for name in names:
        pair = pairs[name]
        span, share, serialized = spans[name]
        p = predict(pair.a, pair.b, target, share_a=share)
        serial = p.serial
        if pair.microbatch_sizes:  # the baseline is the unsplit chain
            whole = profile.task(pair.candidate.task_a)
            serial = task_time(whole, target) if whole is not None else p.serial
        measured_serial = sum(original_times.get(i, 0.0) for i in pair.candidate.nodes)
        rows.append(PairRow(Path(path).stem, name, pair.kind, pair.candidate.note, share, serialized,
                            p.fused, calls[name], span, serial, measured_serial))
    progress(f"{Path(path).name}: {len(rows)} pair(s) measured on the plugin")
    return rows


def measured_call_overhead(rows: list[PairRow]) -> float:
    """Median over the pairs of (call time - work-item span): what a call costs besides its work."""
    return statistics.median(max(r.measured_call_s - r.measured_span_s, 0.0) for r in rows)


def with_call_overhead(target: Target, rows: list[PairRow], where: str = "") -> tuple[Target, list[PairRow]]:
    if not rows:
        return target, rows
    overhead = measured_call_overhead(rows)
    source = (f"measured: median over {len(rows)} plugin pairs of (ORT-profiled FusedHexPair kernel time - "
              f"the kernel trace's work-item span)" + (f"; {where}" if where else ""))
    target = replace(target, call_overhead_s=Param(overhead, "s", source))
    return target, [replace(r, call_overhead_s=overhead) for r in rows]


# ---------------------------------------------------------------------------------------
# 4. The whole calibration


@dataclass
class CalibrationResult:
    target: Target
    fit_rows: list[FitRow]
    pair_rows: list[PairRow]
    where: str
    ddr_bound: list[str] = field(default_factory=list)

    @property
    def median_abs_error(self) -> float:
        """Fused time of a call: |predicted / measured - 1|, median over the pairs."""
        return _median_abs(r.fused_error for r in self.pair_rows)

    @property
    def median_abs_span_error(self) -> float:
        return _median_abs(r.span_error for r in self.pair_rows)

    @property
    def median_abs_serial_error(self) -> float:
        return _median_abs(r.serial_error for r in self.pair_rows)

    @property
    def median_abs_residual(self) -> float:
        return _median_abs(r.rel_error for r in self.fit_rows)

    def to_dict(self) -> dict:
        return {
            "target": self.target.to_dict(),
            "where": self.where,
            "median_abs_error": self.median_abs_error,
            "median_abs_span_error": self.median_abs_span_error,
            "median_abs_serial_error": self.median_abs_serial_error,
            "median_abs_op_residual": self.median_abs_residual,
            "ddr_bound_ops": self.ddr_bound,
            "ops": [{**asdict(r), "rel_error": r.rel_error} for r in self.fit_rows],
            "pairs": [{**asdict(r), "predicted_call_s": r.predicted_call_s, "fused_error": r.fused_error,
                       "span_error": r.span_error, "serial_error": r.serial_error} for r in self.pair_rows],
        }

    def to_json(self) -> str:
        """The result as JSON; `costmodel.load_target` reads the target from it."""
        return json.dumps(self.to_dict(), indent=2, default=_json_float) + "\n"

    def summary_lines(self) -> list[str]:
        t = self.target
        lines = [f"calibrated target '{t.name}' ({self.where})",
                 f"  matrix {t.matrix_flops.value / 1e9:.1f} GFLOP/s, vector {t.vector_flops / 1e9:.2f} GFLOP/s, "
                 f"memory {t.dma_bytes.value / 1e9:.2f} GB/s, DDR {t.ddr_bytes.value / 1e9:.1f} GB/s, "
                 f"op overhead {t.op_overhead_s.value * 1e6:.1f} us, call overhead {t.call_overhead_s.value * 1e6:.1f} us",
                 f"  per-op fit: {len(self.fit_rows)} ops, median |residual| {self.median_abs_residual:.1%}",
                 "", "pair                          kind        share  pred us  meas us   error   "
                 "span us  err(span)  serial pred  serial meas  err(serial)"]
        for r in self.pair_rows:
            lines.append(f"{r.model + ':' + r.node:<29} {r.kind:<11} {r.share_a:5.2f} {r.predicted_call_s * 1e6:8.0f} "
                         f"{r.measured_call_s * 1e6:8.0f} {r.fused_error:+7.0%}  {r.measured_span_s * 1e6:8.0f} "
                         f"{r.span_error:+9.0%}  {r.predicted_serial_s * 1e6:11.0f}  {r.measured_serial_s * 1e6:11.0f}"
                         f"  {r.serial_error:+10.0%}" + ("  (serialised)" if r.serialized else ""))
        lines += ["", f"median |error| over {len(self.pair_rows)} pairs: fused call {self.median_abs_error:.1%} "
                      f"(target <= 20%), fused work span {self.median_abs_span_error:.1%}, "
                      f"serial {self.median_abs_serial_error:.1%}"]
        return lines


def _json_float(x: object) -> object:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def where_measured() -> str:
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpus), {datetime.date.today().isoformat()}"


def calibrate(model_paths: list[str | os.PathLike[str]], progress: Progress = _quiet, runs: int = 20,
              warmup: int = 3, base: Target = costmodel.HOST, work_dir: str | os.PathLike[str] | None = None
              ) -> CalibrationResult:
    """Fit a host target to the models' ORT-profiled ops, then measure its fused and serial
    prediction error on the pairs the pass makes of the same models (see the module doc)."""
    where = where_measured()
    measured: dict[str, tuple[dict[int, float], list[OpTiming]]] = {}
    for path in model_paths:
        _, medians, ops = measure_ops(path, runs, warmup)
        measured[str(path)] = (medians, ops)
        progress(f"{Path(path).name}: {len(ops)} op(s) profiled on ORT")
    fit = fit_target([t for _, ops in measured.values() for t in ops], base, CALIBRATED_NAME, where)
    progress(f"fit: {len(fit.rows)} ops, median |residual| {fit.median_abs_residual:.1%}")
    rows: list[PairRow] = []
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        for path in model_paths:
            rows += measure_pairs(path, fit.target, measured[str(path)][0], Path(folder), runs, warmup, progress)
    target, rows = with_call_overhead(fit.target, rows, where)
    costmodel.register_target(target)
    return CalibrationResult(target, fit.rows, rows, where, fit.ddr_bound)


def build_zoo(folder: str | os.PathLike[str]) -> list[Path]:
    """Every zoo model written into `folder` (needs the repository's `models` package)."""
    from models import BUILDERS, build

    paths = []
    for name in BUILDERS:
        path = Path(folder) / f"{name}.onnx"
        onnx.save_model(build(name), path)
        paths.append(path)
    return paths
