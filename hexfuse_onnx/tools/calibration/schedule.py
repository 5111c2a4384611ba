"""A fitted target as the plugin's kernel schedules a fused call: its pool's measured workers, join
delay, gap between items and call overhead (calibration step 3)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...costmodel import Param, Target, predict, sequential_time, task_time
from .kernel_trace import POOL_ASLEEP_S, POOL_SPIN_S, WAKE_REGIMES
from .records import RUN_QUANTILE, PairMeasurement, PairRow, Progress, quiet


def probe_leads(rows: list[PairRow], progress: Progress = quiet) -> tuple[float, ...] | None:
    """`measured_leads` of the probe model's pairs (`wake_probe_model`, measured with the models but in
    none of them): the pool's wake-up per WAKE_REGIMES as the runtime costs it, apart from every
    measured pair; None when the probe gave no pair or none of its calls found the pool asleep."""
    leads = measured_leads(rows)
    if leads is not None:
        progress("wake-up probe: " + ", ".join(f"{n} {t * 1e6:.1f} us" for n, t in zip(WAKE_REGIMES, leads)))
    return leads


def predicted_row(m: PairMeasurement, target: Target) -> PairRow:
    """The pair's row with the fused and serial times `target` predicts, at the share the plugin
    used (call_overhead_s unchanged): the fused time per WAKE_REGIMES (a call that finds the workers
    spinning has them at once, a later one waits `join_s` for them), and its mean over the regimes
    its calls came in (`at_run_quantile` then takes the call the measurement stands for)."""
    p = predict(m.pair.a, m.pair.b, target, share_a=m.row.share_a)
    tasks = [m.serial_task] if m.serial_task is not None else [m.pair.a, m.pair.b]
    serial = sum(sequential_time(t, target) for t in tasks)  # as ORT profiled it: node after node, one thread
    warm = p.fused
    if target.join_s.value:
        warm = predict(m.pair.a, m.pair.b, replace(target, join_s=Param(0.0, "s", "a warm call")), m.row.share_a).fused
    cold = m.row.cold_share if np.isfinite(m.row.cold_share) else 1.0
    return replace(
        m.row,
        predicted_fused_s=cold * p.fused + (1.0 - cold) * warm,
        predicted_serial_s=serial,
        regime_fused_s=(warm,) + (p.fused,) * (len(WAKE_REGIMES) - 1),
    )


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


def at_run_quantile(row: PairRow, leads: Sequence[float]) -> PairRow:
    """The row's predicted call summarised as its measured calls are (`over_runs`): a call in each of
    WAKE_REGIMES takes its regime's fused time (`regime_fused_s`) plus its lead, in the share of the
    pair's calls that came in it (unknown: all asleep); the row takes the fused time and call overhead
    of the regime whose calls hold the RUN_QUANTILE. A mean over the regimes would not be what was
    measured: 40% of cold calls made a 6 us pair's mean 10 us while its lower quartile, a warm call,
    took 6 us."""
    known = row.wake_shares and all(np.isfinite(row.wake_shares))
    shares = row.wake_shares if known else (0.0,) * (len(leads) - 1) + (1.0,)
    fused = row.regime_fused_s or (row.predicted_fused_s,) * len(leads)
    by_time = sorted((k for k in range(len(leads)) if shares[k] > 0), key=lambda k: fused[k] + leads[k])
    below = np.cumsum([shares[k] for k in by_time])
    k = by_time[min(int(np.searchsorted(below, RUN_QUANTILE - 1e-9)), len(by_time) - 1)]
    return replace(row, predicted_fused_s=fused[k], call_overhead_s=leads[k])


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
    cost when the rates come from ORT profiling), each program op dispatched on its own. Unfused,
    the tasks run on `target.baseline`, or on `target` itself as fitted (ORT's kernels, one op at a
    time, one kernel call per node)."""
    rows = [m.row for m in pairs]
    kernel = with_join(with_kernel_gap(target, rows, where, replace_overhead), rows, where)
    kernel = with_measured_pool(kernel, rows, where, [modelled_parallelism(m, kernel) for m in pairs])
    return replace(kernel, baseline=target.baseline or target, node_kernels=False)


def with_call_overhead(
    target: Target, rows: list[PairRow], where: str = "", leads: Sequence[float] | None = None
) -> tuple[Target, list[PairRow]]:
    """`target` with the call overhead, and the rows with each pair's. The workers of the kernel's
    pool spin for POOL_SPIN_S after their last item, then sleep: a call that comes later pays a
    wake-up on the caller before its first item, one that comes sooner (a pair right after another)
    does not, one in between less (WAKE_REGIMES). `leads` gives call - span per regime (the wake-up
    probe model's, `probe_leads`); without it they are measured on the rows' own calls
    (`measured_leads`). A pair's call is the one at RUN_QUANTILE of its calls' regimes
    (`at_run_quantile`), the target's `call_overhead_s` the asleep one (a call on its own); with
    neither, the median over the pairs of call - span."""
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
    return target, [at_run_quantile(r, leads) for r in rows]
