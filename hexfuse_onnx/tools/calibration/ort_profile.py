"""Per-op times of a model on stock ONNX Runtime, from the ORT profiler (calibration step 1)."""

from __future__ import annotations

import bisect
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort

from ... import graph as graph_mod
from ...profile import Engine, GraphProfile, NodeProfile, profile_graph
from .records import OpTiming, over_runs


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


THREAD_SCHEDSTAT = "/proc/thread-self/schedstat"


def thread_run_delay() -> float:
    """Seconds the calling thread has waited runnable but not running (Linux schedstat's second
    field: other processes had the CPU); 0 where the kernel does not report it."""
    try:
        with open(THREAD_SCHEDSTAT, encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def run_profiled(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> float:
    """One run of a `profiling_options` session, which runs every node on the calling thread (one
    intra-op thread, sequential): the run delay other processes caused it."""
    before = thread_run_delay()
    session.run(None, feeds)
    return thread_run_delay() - before


def node_times(events: list[dict], warmup: int, run_delays: Sequence[float] = ()) -> dict[str, list[float]]:
    """Seconds per node name and run from ORT profile events, the first `warmup` runs dropped.
    With `run_delays` (per run, in order: `run_profiled`), each run's node times lose the time
    other processes took from it (`without_run_delay`), as the fused call's measured time does."""
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    starts = [start for start, _ in runs]
    per_run: list[dict[str, float]] = [{} for _ in runs]
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        k = bisect.bisect_right(starts, e["ts"]) - 1
        if k < warmup or e["ts"] > runs[k][1]:
            continue
        name = e["name"][: -len("_kernel_time")]
        per_run[k][name] = per_run[k].get(name, 0.0) + e["dur"] / 1e6
    kept = per_run[warmup:]
    if len(run_delays) == len(runs):
        kept = without_run_delay(kept, run_delays[warmup:])
    times: dict[str, list[float]] = {}
    for run in kept:
        for name, seconds in run.items():
            times.setdefault(name, []).append(seconds)
    return times


def without_run_delay(runs: list[dict[str, float]], delays: Sequence[float]) -> list[dict[str, float]]:
    """Each run's node times less its run delay, laid on the nodes that ran longer than in their
    fastest run (a preemption lengthens the node it falls in), each losing the same share of that
    excess, at most all of it."""
    fastest: dict[str, float] = {}
    for run in runs:
        for name, seconds in run.items():
            fastest[name] = min(fastest.get(name, seconds), seconds)
    out = []
    for run, delay in zip(runs, delays):
        excess = {name: seconds - fastest[name] for name, seconds in run.items()}
        total = sum(excess.values())
        share = min(1.0, max(delay, 0.0) / total) if total > 0 else 0.0
        out.append({name: seconds - excess[name] * share for name, seconds in run.items()})
    return out


def profile_session(
    session: ort.InferenceSession, feeds: dict[str, np.ndarray], runs: int, warmup: int
) -> dict[str, list[float]]:
    """Run `warmup + runs` times and return the profiled node times of the last `runs`, less the
    run delay other processes caused them."""
    delays = [run_profiled(session, feeds) for _ in range(warmup + runs)]
    path = session.end_profiling()
    try:
        events = json.loads(Path(path).read_text())
    finally:
        Path(path).unlink(missing_ok=True)
    return node_times(events, warmup, delays)


def match_nodes(profile: GraphProfile, times: dict[str, list[float]]) -> dict[int, list[float]]:
    """Graph node id -> its profiled times, matched by node name (nodes without a unique name,
    and nodes ORT did not report, are left out)."""
    names = [n.name for n in profile.graph.nodes]
    unique = {name for name in names if name and names.count(name) == 1}
    return {i: times[name] for i, name in enumerate(names) if name in unique and name in times}


def one_op_profile(profile: GraphProfile, i: int) -> NodeProfile | None:
    """The node's profile as a one-op task (so its DDR bytes are what the cost model uses); a fused
    op (attention, ...) with the program ops it runs as its parts."""
    task = profile.task([i])
    return whole_node(task.ops) if task is not None else None


def whole_node(ops: list[NodeProfile]) -> NodeProfile:
    """One node's op from the ops a task runs for it: the op itself, or a fused op's program ops
    (`NodeProfile.parts`, one engine each) as the parts of one op that adds up their work."""
    if len(ops) == 1:
        return ops[0]
    first = ops[0]
    return replace(
        first,
        flops=sum(p.flops for p in ops),
        bytes_in=sum(p.bytes_in for p in ops),
        bytes_out=sum(p.bytes_out for p in ops),
        weight_bytes=sum(p.weight_bytes for p in ops),
        footprint=max(p.footprint for p in ops),
        ddr_bytes=sum(p.ddr_bytes for p in ops),
        parts=tuple(ops),
    )


def measure_ops(
    path: str | os.PathLike[str], runs: int = 20, warmup: int = 3
) -> tuple[GraphProfile, dict[int, float], list[OpTiming]]:
    """Profile the model on ORT: (graph profile, median seconds per node id, the timings of
    every profiled node that does work)."""
    from ...verify import random_inputs

    g = graph_mod.load(path)
    profile = profile_graph(g)
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        session = ort.InferenceSession(
            str(path), sess_options=profiling_options(folder), providers=["CPUExecutionProvider"]
        )
        times = profile_session(session, random_inputs(session, analysed_inputs(profile), seed=0), runs, warmup)
    return (profile, *op_timings(path, profile, times))


def analysed_inputs(profile: GraphProfile) -> dict[str, list[int]] | None:
    """The input shapes a model with symbolic dims was analysed at (None: none symbolic): its runs are at
    them, not at every free dim 1 (PP-OCRv3 det at 1x1 after a stride of 32 failed its pair)."""
    binding = profile.graph.binding
    return dict(binding.inputs) if binding is not None else None


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
