"""The fit of a host target's op overhead, rates and DDR bandwidth to measured op times
(calibration step 2)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from ... import costmodel
from ...costmodel import INT8_OP_CLASSES, Param, Target, task_time
from ...profile import Engine, NodeProfile, TaskProfile
from .records import OpTiming

CALIBRATED_NAME = "host-calibrated"  # the target `calibrate -o` writes (the fit with the lower error)


ORT_FIT_NAME = "host-ort-fit"


KERNEL_FIT_NAME = "host-kernel-fit"


ORT_FIT = "ort"


KERNEL_FIT = "kernel"


FIT_LABELS = {ORT_FIT: "fit to ORT profiling", KERNEL_FIT: "fit to the kernel's own item times"}


ORT_MEASURED_BY = "ORT-profiled"


KERNEL_MEASURED_BY = "kernel-traced (summed work-item time on the plugin's host kernel, fused runs)"


WORK_DOMINATED = 0.5  # an op whose work is at least this share of its time bounds DDR


_WORK_COLUMNS = (Engine.MATRIX, Engine.VECTOR, Engine.MEMORY)


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
        return median_abs([r.rel_error for r in self.rows])


def median_abs(errors: Iterable[float]) -> float:
    finite = [abs(e) for e in errors if np.isfinite(e)]
    return statistics.median(finite) if finite else float("nan")


_ENGINE_COLUMNS = tuple(e.value for e in _WORK_COLUMNS)


def program_ops(t: OpTiming) -> tuple[NodeProfile, ...]:
    """The program ops the op runs as: a fused op's parts (attention: GEMMs, softmax, head layout),
    else the op itself. Each pays the op overhead and runs at its own class's rate, as the cost
    model simulates them."""
    return t.op.parts or (t.op,)


def _work(op: NodeProfile) -> float:
    """The fit's work unit: FLOPs for matrix and vector ops, bytes for memory ops."""
    return float(op.bytes) if op.engine == Engine.MEMORY else op.flops


def op_columns(ops: list[OpTiming]) -> list[tuple[str, ...]]:
    """Each op's rate columns, one per program op: its op class (costmodel.op_class; its engine's
    unless listed)."""
    return [tuple(costmodel.op_class(p) for p in program_ops(t)) for t in ops]


def _columns(cols: list[tuple[str, ...]]) -> tuple[str, ...]:
    return ("overhead", "matrix_op", *sorted({c for row in cols for c in row}), "ddr")


def _engine_s(t: OpTiming, cols: tuple[str, ...], coef: dict[str, float]) -> float:
    """The op's time on its engines under `coef`, besides its overhead: its program ops' work at
    their columns' rates, and a matrix op's `matrix_op` (a GEMM call's fixed time)."""
    return sum(
        _work(p) * coef[c] + (coef["matrix_op"] * p.gemm_calls if p.engine == Engine.MATRIX else 0.0)
        for p, c in zip(program_ops(t), cols)
    )


def _base_coefficients(base: Target, ops: list[OpTiming], cols: list[tuple[str, ...]]) -> dict[str, float]:
    """Seconds per unit of each column: per op, per unit of work of each rate column, per DDR byte."""
    coef = {
        "overhead": base.op_overhead_s.value,
        "matrix_op": base.matrix_op_s.value,
        "ddr": 1.0 / base.ddr_bytes.value,
    }
    for t, row in zip(ops, cols):
        for p, c in zip(program_ops(t), row):
            coef[c] = 1.0 / base.rate(p.engine, op_class=c)
    return coef


def _design(ops: list[OpTiming], cols: list[tuple[str, ...]], ddr_bound: set[int], node_kernels: bool) -> np.ndarray:
    """One row per op: per program op, 1 in the overhead column (`node_kernels`: 1 per op, its
    program ops run in one kernel call) and its work in its rate column (and a matrix op 1 in the
    matrix_op column: a GEMM call's fixed time), or, when the model says DDR bounds the op, its DDR
    bytes in the DDR column (time = overhead + max(...))."""
    columns = _columns(cols)
    x = np.zeros((len(ops), len(columns)))
    for r, t in enumerate(ops):
        x[r, 0] = 1 if node_kernels else len(program_ops(t))
        if r in ddr_bound:
            x[r, columns.index("ddr")] = t.op.ddr_bytes
            continue
        for p, c in zip(program_ops(t), cols[r]):
            x[r, columns.index(c)] += _work(p)
            x[r, columns.index("matrix_op")] += p.gemm_calls if p.engine == Engine.MATRIX else 0.0
    return x


def fit_coefficients(
    ops: list[OpTiming], ddr_bound: set[int], base: Target, relative_to: Sequence[float] | None = None
) -> tuple[dict[str, float], set[str]]:
    """Least squares (numpy.linalg.lstsq) of each op's time on the columns, rows weighted by
    1/`relative_to` (default each op's own time: relative error). A column without data, or fitted
    non-positive, keeps `base`'s value and the others are refitted. Returns every column's
    coefficient and the fitted columns."""
    cols = op_columns(ops)
    columns = _columns(cols)
    x = _design(ops, cols, ddr_bound, base.node_kernels)
    y = np.array([t.seconds for t in ops])
    w = 1.0 / np.maximum(np.asarray(relative_to if relative_to is not None else y, dtype=float), 1e-9)
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


def pair_times(pairs: Sequence[Sequence[OpTiming]]) -> list[float]:
    """Per op of `pairs` (in order), the summed time of its pair's ops."""
    return [sum(t.seconds for t in ops) for ops in pairs for _ in ops]


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
    return {k for k, t in enumerate(ops) if t.op.ddr_bytes * coef["ddr"] > _engine_s(t, cols[k], coef) * (1 + 1e-9)}


def alternate_fits(
    ops: list[OpTiming], base: Target, relative_to: Sequence[float] | None = None
) -> tuple[dict[str, float], set[str], set[int]]:
    """(coefficients, fitted columns, the ops DDR binds): fits (`fit_coefficients`) that alternate
    with assigning each op to its binding resource, from every op engine-bound and the DDR bandwidth
    at the largest a work-dominated op reached, until the assignment no longer changes (at most 8
    rounds)."""
    coef, fitted = fit_coefficients(ops, set(), base, relative_to)
    observed = ddr_lower_bound(ops, coef["overhead"])
    if observed is not None:
        coef["ddr"] = 1.0 / observed
    bound: set[int] | None = None
    for _ in range(8):
        new_bound = _ddr_bound(ops, coef)
        if new_bound == bound:
            break
        bound = new_bound
        coef, fitted = fit_coefficients(ops, bound, base, relative_to)
        # No fitted bandwidth below what a work-dominated op reached (a few DDR-bound ops can fit one)
        observed = ddr_lower_bound(ops, coef["overhead"]) or observed
        if observed is not None and ("ddr" not in fitted or coef["ddr"] * observed > 1.0 + 1e-6):
            coef["ddr"], fitted = 1.0 / observed, (fitted - {"ddr"}) | {"ddr-observed"}
    return coef, fitted, bound or set()


def fit_target(
    ops: list[OpTiming],
    base: Target = costmodel.HOST,
    name: str = CALIBRATED_NAME,
    where: str = "",
    measured_by: str = ORT_MEASURED_BY,
    fitted_to: str = "ORT per-op profiling",
    relative_to: Sequence[float] | None = None,
    node_kernels: bool = True,
) -> Fit:
    """Fit base's op overhead, engine rates and DDR bandwidth to the measured ops.

    `node_kernels`: each measured op was one kernel call (ORT profiling: a fused op such as
    attention pays the op overhead once, `Target.node_kernels`); False: its program ops were
    dispatched one by one (the plugin's kernel items).

    Each op's error counts relative to `relative_to` (default its own time; `pair_times`: the
    summed time of its pair's ops, so that within a pair an op counts by its share of the call).

    `measured_by` says in every fitted parameter's source what the op times are ("ORT-profiled",
    or KERNEL_MEASURED_BY for the kernel's own item times), `fitted_to` the same in the target's
    description.

    The model of one op is overhead + max(work / engine rate, DDR bytes / DDR bandwidth): the
    fit alternates between assigning each op to its binding resource and a linear least-squares
    fit of that assignment, starting from every op engine-bound and the DDR bandwidth at the
    largest one observed, until the assignment no longer changes."""
    if not ops:
        raise ValueError("no profiled op to fit")
    base = replace(base, node_kernels=node_kernels)
    coef, fitted, bound = alternate_fits(ops, base, relative_to)
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
        class_rates=_class_rates(ops, coef, fitted, how) + _int8_rates(base),
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
    units = {
        c: "B/s" if p.engine == Engine.MEMORY else "FLOP/s"
        for t, row in zip(ops, op_columns(ops))
        for p, c in zip(program_ops(t), row)
    }
    return tuple(
        (c, Param(1.0 / coef[c], units[c], f"measured: least-squares fit to {how}"))
        for c in sorted(units)
        if c not in _ENGINE_COLUMNS and c in fitted
    )


def _int8_rates(base: Target) -> tuple:
    """The base target's rates of 8-bit op classes: the zoo's builders, which calibration times, are float."""
    return tuple((c, p) for c, p in base.class_rates if c in INT8_OP_CLASSES.values())


def _with_residual(target: Target, residual: str) -> Target:
    def fill(p: Param) -> Param:
        return replace(p, source=p.source.replace("{residual}", residual))

    params = {k: fill(p) for k, p in target.params().items()}
    rates = tuple((c, fill(p)) for c, p in target.class_rates)
    return replace(target, class_rates=rates, **cast(dict[str, Any], params))
