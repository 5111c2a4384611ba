"""Measuring models for calibration: ORT profiling and plugin traces of each model in alternating
blocks, and each pair's measured call and per-node kernel times."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from ... import contract as C
from ... import costmodel
from ...costmodel import Target
from ...kinds import Pair, kind_of
from ...profile import Engine, GraphProfile, NodeProfile, TaskProfile
from .kernel_trace import TracedPair, TracedSession, plugin_traces, summarise_traces
from .ort_profile import (
    analysed_inputs,
    node_times,
    one_op_profile,
    op_timings,
    profiling_options,
    run_profiled,
    whole_node,
)
from .records import OpTiming, PairMeasurement, PairRow, Progress, quiet
from .schedule import predicted_row

KEEP_EVERY_PAIR = -10.0  # a min_gain no real pair falls below: measure losing pairs too


def node_kernel_seconds(
    model: onnx.ModelProto, pair_node: str, profile: GraphProfile, op_seconds: dict[int, float]
) -> tuple[dict[int, float], float]:
    """The kernel time of a lowered pair per original graph node: (graph node id -> seconds,
    seconds of ops no graph node could be named for).

    `lowering.program_op_nodes` names the body node of each program op; a body node is matched to
    the graph node producing the same tensor (a micro-batch copy after its suffix is stripped,
    so both halves of a chain node add up to that node). A Constant lowers to no op and gets no
    time; an op copying a formal input out has no node (its time is returned apart)."""
    from ...kinds import KINDS
    from ...lowering import program_op_nodes

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
    path: str | os.PathLike[str], out: Path, target: Target, progress: Progress = quiet
) -> tuple[Path | None, dict[str, Pair], GraphProfile]:
    """Rewrite for `target` keeping every lowerable pair: (fused model or None, node name ->
    its Pair, the original graph's profile)."""
    from ... import pipeline

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


def measure_pairs(
    path: str | os.PathLike[str],
    target: Target,
    original_times: dict[int, float],
    folder: Path,
    runs: int = 20,
    warmup: int = 3,
    progress: Progress = quiet,
) -> list[PairMeasurement]:
    """Rewrite the model for `target`, run it with the plugin and the kernel trace, and measure
    each pair: its call, work span and per-node kernel times (all from the same traced runs), with
    `target`'s prediction (call_overhead_s left 0: `with_call_overhead` sets it)."""
    out = folder / (Path(path).stem + ".fused.onnx")
    fused, pairs, profile = fused_pairs(path, out, target)
    if fused is None:
        progress(f"{Path(path).name}: no pair to measure")
        return []
    traces = plugin_traces(fused, sorted(pairs), runs, warmup, analysed_inputs(profile))
    return pair_measurements(path, target, fused, pairs, profile, traces, original_times, progress)


def pair_measurements(
    path: str | os.PathLike[str],
    target: Target,
    fused: Path,
    pairs: dict[str, Pair],
    profile: GraphProfile,
    traces: dict[str, TracedPair],
    original_times: dict[int, float],
    progress: Progress = quiet,
) -> list[PairMeasurement]:
    """Each traced pair measured: its row (predicted by `target`) and its per-node kernel times."""
    model = onnx.load(str(fused), load_external_data=False)
    measured = []
    for name in sorted(pairs):
        pair, trace = pairs[name], traces[name]
        serial_task = kind_of(pair).serial_task(profile, pair)
        row = traced_row(Path(path).stem, name, pair, trace, original_times)
        per_node, unnamed = node_kernel_seconds(model, name, profile, trace.op_seconds)
        kernel_ops, unmodelled = kernel_op_timings(row.model, ops_in_tasks(pair, serial_task), profile, per_node, trace)
        m = PairMeasurement(row, pair, serial_task, kernel_ops, unmodelled + unnamed)
        measured.append(replace(m, row=predicted_row(m, target)))
    progress(f"{Path(path).name}: {len(measured)} pair(s) measured on the plugin")
    return measured


def traced_row(model: str, name: str, pair: Pair, trace: TracedPair, original_times: dict[int, float]) -> PairRow:
    """The pair's measured row, nothing predicted yet: the trace's figures and the ORT-profiled time
    of its original nodes."""
    return PairRow(
        model,
        name,
        pair.kind,
        pair.candidate.note,
        trace.share_a,
        trace.serialized,
        0.0,
        trace.call_s,
        trace.span_s,
        0.0,
        sum(original_times.get(i, 0.0) for i in pair.candidate.nodes),
        kernel_work_s=trace.work_s,
        task_overlap=trace.task_overlap,
        kernel_gap_per_op_s=trace.gap_per_op_s,
        cold_share=trace.cold_share,
        cold_join_s=trace.cold_join_s,
        wake_shares=trace.wake_shares,
        wake_leads_s=trace.wake_leads_s,
        preempted_s=trace.preempted_s,
    )


def kernel_op_timings(
    model: str, in_tasks: dict[int, NodeProfile], profile: GraphProfile, per_node: dict[int, float], trace: TracedPair
) -> tuple[list[OpTiming], float]:
    """(the kernel item time of each graph node that does work, as an OpTiming with its op as the
    pair's tasks run it, the item time of nodes the cost model gives no work)."""
    timings, unmodelled = [], 0.0
    for i, seconds in sorted(per_node.items()):
        op = in_tasks.get(i) or one_op_profile(profile, i)
        if op is None or op.engine == Engine.NONE:
            unmodelled += seconds
            continue
        n = profile.graph.nodes[i]
        timings.append(OpTiming(model, n.name, n.op_type, op, seconds, trace.runs))
    return timings, unmodelled


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
    run_delays: list[float] = field(default_factory=list)  # per ORT run (`run_profiled`)

    def run(self, runs: int, keep: bool = True) -> None:
        self.run_delays += [run_profiled(self.session, self.feeds) for _ in range(runs)]
        if self.traced is not None:
            self.traced.run(self.feeds, runs, keep)


def _open_model(path: Path, target: Target, folder: Path) -> _ModelSessions:
    from ...verify import random_inputs

    work = folder / path.stem
    work.mkdir(parents=True, exist_ok=True)
    session = ort.InferenceSession(str(path), sess_options=profiling_options(work), providers=["CPUExecutionProvider"])
    fused, pairs, profile = fused_pairs(path, work / "fused.onnx", target)
    traced = TracedSession(fused, sorted(pairs), work) if fused is not None else None
    feeds = random_inputs(session, analysed_inputs(profile), seed=0)
    return _ModelSessions(path, profile, session, feeds, fused, pairs, traced)


def measure_models(
    paths: Sequence[str | os.PathLike[str]],
    target: Target,
    folder: Path,
    runs: int = 20,
    warmup: int = 3,
    progress: Progress = quiet,
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
    medians, ops = op_timings(m.path, m.profile, node_times(events, warmup, m.run_delays))
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
    progress: Progress = quiet,
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


def ops_in_tasks(pair: Pair, serial_task: TaskProfile | None) -> dict[int, NodeProfile]:
    """Graph node id -> its op as the pair's tasks run it in the kernel: DDR bytes counted in the
    task (intermediates stay in the arena), a micro-batch chain node whole (both copies), a fused op
    with its program ops as parts (`whole_node`)."""
    tasks = [serial_task] if serial_task is not None else [pair.a, pair.b]
    by_node: dict[int, list[NodeProfile]] = {}
    for t in tasks:
        for op in t.ops:
            by_node.setdefault(op.node, []).append(op)
    return {node: whole_node(ops) for node, ops in by_node.items()}
