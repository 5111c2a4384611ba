"""The plugin's kernel trace of a fused model's calls, summarised per FusedHexPair node: call,
work-item span, per-op item time, and how long the pool had been idle before each call."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .ort_profile import profiling_options
from .records import RUN_QUANTILE, over_runs


@dataclass(frozen=True)
class TracedPair:
    """One FusedHexPair node as the kernel trace saw it, medians over the traced runs."""

    node: str
    span_s: float  # the work-item span (trace `wall_ns`)
    call_s: float  # the kernel call, hfx_run's wall time less the time other processes took (`unpreempted_call_s`)
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
    preempted_s: float = 0.0  # median over the calls of `preempted_s` (subtracted from call_s)


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
    from ..timeline import _union_ns

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


def quantile_band(totals: list[float]) -> list[int]:
    """Indices of the runs whose total ranks within RUN_QUANTILE of the RUN_QUANTILE (the lower half
    for the lower quartile): the runs a time `over_runs` of the totals stands for."""
    order = sorted(range(len(totals)), key=lambda k: totals[k])
    return order[: max(1, round(2 * RUN_QUANTILE * len(order)))]


def op_seconds_at_quantile(per_run: list[dict[int, float]]) -> dict[int, float]:
    """Seconds per program op of a pair's call that add up to its summed item time `over_runs`: the
    ops' shares of it are their means over the runs of `quantile_band`. Each op's own `over_runs`
    would not add up: the quantile of a sum exceeds the sum of its parts' quantiles, by more the
    more ops a call has (a 45-op pair's per-op lower quartiles summed to 87-92% of its work)."""
    totals = [sum(r.values()) for r in per_run]
    band = quantile_band(totals)
    ops = sorted({o for r in per_run for o in r})
    means = {o: statistics.fmean(per_run[k].get(o, 0.0) for k in band) for o in ops}
    scale = over_runs(totals) / sum(means.values()) if sum(means.values()) > 0 else 1.0
    return {o: t * scale for o, t in means.items()}


def plugin_traces(
    fused_path: str | os.PathLike[str],
    nodes: list[str],
    runs: int,
    warmup: int,
    shapes: dict[str, list[int]] | None = None,
) -> dict[str, TracedPair]:
    """Run the fused model `warmup + runs` times with the kernel trace on (plugin, host backend), its
    inputs at `shapes` (a free dim without one: 1), and summarise each node's traces of the last `runs`
    runs (`summarise_traces`)."""
    from ...verify import random_inputs

    with tempfile.TemporaryDirectory(prefix="hexfuse-trace-") as folder:
        traced = TracedSession(fused_path, nodes, Path(folder))
        feeds = random_inputs(traced.session, shapes, seed=0)
        traced.run(feeds, warmup, keep=False)
        traced.run(feeds, runs)
    return summarise_traces(traced.docs)


class TracedSession:
    """The fused model on the plugin (host backend) with the kernel trace on, keeping each run's
    trace document per FusedHexPair node."""

    def __init__(self, fused_path: str | os.PathLike[str], nodes: list[str], folder: Path) -> None:
        from ...runtime import InferenceSession

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


def preempted_s(doc: dict) -> float:
    """Seconds of one traced call that other processes took: the mean over the workers that ran an
    item in it of the time their thread was runnable but not running (trace `runnable_ns`: Linux's
    run delay, read by the caller before and after the timed call; absent or 0 elsewhere). The mean,
    as the workers take each other's items: a worker kept off its CPU for t delays a call that both
    keep busy by about t / 2, one that it runs alone by t."""
    waits = doc.get("runnable_ns") or []
    ran = {int(e["worker"]) for e in doc["trace_events"]}
    counted = [waits[w] for w in ran if w < len(waits)]
    return statistics.fmean(counted) / 1e9 if counted else 0.0


def unpreempted_call_s(doc: dict) -> float:
    """A traced call's hfx_run wall time less `preempted_s`: on a loaded machine a long call is
    preempted in every run, and no statistic of its wall times recovers the time it takes alone."""
    return doc["run_wall_ns"] / 1e9 - preempted_s(doc)


def unpreempted_calls_s(docs: list[dict]) -> list[float]:
    """`unpreempted_call_s` of the calls where it is positive, else their wall times: Linux adds a
    thread's run delay when the thread next runs, so a wait that began before a call can be counted
    in it and exceed its wall time (two_branch at load 13: -188 us)."""
    return [s for s in map(unpreempted_call_s, docs) if s > 0] or [d["run_wall_ns"] / 1e9 for d in docs]


def summarise_traces(docs: dict[str, list[dict]]) -> dict[str, TracedPair]:
    """Each node's traced calls: its times `over_runs`, the share of the span both tasks ran an
    item as the median. A run whose trace dropped events is left out of the per-op times (its span
    still counts)."""
    out = {}
    idle = idle_before(docs)
    for n, ds in docs.items():
        complete = [d for d in ds if not d.get("dropped")] or ds
        per_run = [trace_op_seconds(d) for d in complete]
        out[n] = TracedPair(
            n,
            over_runs(d["wall_ns"] / 1e9 for d in ds),
            over_runs(unpreempted_calls_s(ds)),
            float(ds[-1]["share_a"]),
            bool(ds[-1]["serialized"]),
            over_runs(sum(r.values()) for r in per_run),
            statistics.median(d.get("task_overlap_ns", 0) / max(d["wall_ns"], 1) for d in ds),
            op_seconds_at_quantile(per_run),
            len(complete),
            over_runs(trace_gap_per_op(d) for d in complete),
            call_leads(ds, idle[n])[0],
            cold_join(ds, idle[n]),
            *wake_regimes(ds, idle[n]),
            statistics.median(preempted_s(d) for d in ds),
        )
    return out
