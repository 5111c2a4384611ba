"""Co-located pairs: a segment of one stream with a segment of another, in a merged model.

A model written by `hexfuse_onnx.colocate.merge` records its streams (name prefixes) and which
streams pair. Each stream's non-constant nodes, in a topological order that keeps each QDQ group's
Q and DQ next to its op and the shape work early (stream_sides), are its *side*. A segment
is a run of consecutive nodes of a side: it is convex (any path between two of its nodes stays in
the side's order between them) and independent of every segment of the other stream (the merged
models share no tensor but weights). An alignment walks both sides in order; a step runs a segment
of one side alone or pairs a segment of each. Dynamic programming over (units of A consumed, units
of B consumed) picks the alignment with the least modelled time, counted as `modelled` reports it:
a pair takes its fused time (costmodel.predict) plus the target's per-call overhead, and the units
between pairs run alone, each run of them one task (its serial time), so every cut pays for the
intermediates it sends off the chip. (Scoring a pair alone by its own saving, serial minus fused
minus the call, chose more, shorter pairs at 0 us than at 100 us: blazeface_front_qdq_u16u8 x2
modelled 24.7% less time at 0 us against 35.0% at 100 us.)

For speed the sides are cut into units on a coarse grid (about MAX_UNITS of equal modelled time
each, but none shorter than one call's overhead, and always at a node the kernel does not run,
which runs alone), a segment spans at most a few units (as many as keep the work of the pair
moves, counted in nodes simulated, within ALIGN_BUDGET; at least MIN_SEGMENT_UNITS), and a pair
is not simulated when a bound on its saving cannot beat the best value known for its end state:
fused time is at least the longer task alone, each engine's work of both tasks, and both tasks'
DDR traffic at the full bandwidth (the simulation never gives two tasks more than one engine or
one DDR). Units are also cut where an attention or MLP block (blocks.py) begins. Two streams
that are copies of one model (`--requests`, `--hybrid`) pair only segments holding the same
layers' blocks: layer k's attention with layer k's attention, its MLP with its MLP (one layer per
pair, or several where one call must carry more work to pay for itself).

With a latency-critical stream (Tacker's setting) every pair must finish within (1 +
max_slowdown) of that stream's segment alone, call overhead included: the share of the vector
workers is searched under that constraint, so the stream's modelled latency (segments paired
or alone) grows by at most max_slowdown over the stream alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache

import onnx

from ..colocate import Plan, plan_of
from ..costmodel import (
    Prediction,
    Signature,
    Target,
    complementarity,
    engine_seconds,
    fits,
    node_after_node,
    predict,
    predict_signed,
    serial_time,
    signature,
    signed_serial_time,
    signed_time,
)
from ..graph import ModelGraph
from ..lowering import RUN_TIME_INTEGERS, absent_when_empty, op_key, op_outside_kernel
from ..lowering.lowerer import KERNEL_FLOATS
from ..lowering.normalize import ARG
from ..lowering.pointwise import BOOL_OPS, CASTS_TO_FLOAT
from ..profile import Engine, GraphProfile, NodeProfile, TaskProfile
from ..qdq import group_order, is_dq, is_q, quantized_op, release_foreign
from .base import Candidate, KindDetail, Pair, PairKind, budget_message
from .blocks import Block, layer_blocks
from .cuts import halve, inside_groups, nan_test, node_time
from .dag import DagFacts, dag_facts, independence_problem

MAX_UNITS = 16  # grid cut points per side (plus the cuts forced by nodes that do not lower)
MIN_SEGMENT_UNITS = 4
ALIGN_BUDGET = 2_000_000  # units_a * units_b * segment_units**3 * nodes per unit: about 10 s here
ALIGN_SHARES = (0.3, 0.5, 0.7)  # shares tried while aligning; the chosen pairs then get the best share
PRIORITY_SHARES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # shares of the latency-critical stream tried
LATENCY_HINT = 0.2  # a stream this much slower co-located, no --priority given: the lines say how to bound it
# Ops whose inputs after the first steer them (shape, axes, starts, scales) or are reordered (a
# ConvTranspose's weights): the lowering reads those at lowering time, so they must be constants,
# not tensors computed at run time (in a QDQ model, a DequantizeLinear's output).
STEERED_OPS = {
    "Reshape",
    "Slice",
    "Resize",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "Squeeze",
    "Unsqueeze",
    "ConvTranspose",
}


@dataclass(frozen=True)
class Unit:
    nodes: tuple[int, ...]
    pairable: bool  # every node profiled and of an op the kernel runs


@dataclass(frozen=True)
class AlignedPair:
    a: tuple[int, ...]
    b: tuple[int, ...]
    prediction: Prediction
    saving: float  # serial - fused - call overhead


@dataclass
class Alignment:
    pairs: list[AlignedPair]
    saving: float
    pairs_simulated: int


@dataclass(frozen=True)
class Segment:
    """A run of units as the alignment scores it, computed once."""

    task: TaskProfile
    signature: Signature  # the cost model's view of its work
    serial: float  # time unfused, on the target's baseline
    alone: float  # time alone on the target
    work: tuple[float, ...]  # busy seconds of each engine and of DDR

    @classmethod
    def of(cls, task: TaskProfile, target: Target) -> Segment:
        ddr = sum(op.ddr_bytes for op in task.ops if op.engine != Engine.NONE) / target.ddr_bytes.value
        work = (*engine_seconds(task, target), ddr)
        signed = signature(task)
        return cls(task, signed, signed_serial_time(signed, target), signed_time(signed, target), work)


# The modelled fused time of two segments (and their share), or None when they may not pair.
PairScore = Callable[[Segment, Segment], Prediction | None]


@dataclass(frozen=True)
class ColocatedSegments(KindDetail):
    share_a: float  # the share the alignment chose (under the latency bound, with a priority stream)
    streams: tuple[int, int]  # the streams (Plan.streams indices) of task A and task B


class Colocate(PairKind):
    """A segment of one co-located stream with a segment of another, at the share the alignment chose."""

    name = "colocate"
    specificity = 3  # segments of two streams may also be branches of the virtual source

    def find(self, g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target) -> list[Candidate]:
        plan = plan_of(g.model)
        return [] if plan is None else find_colocated(g, facts, profile, target, plan)

    def evaluate(self, g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> Pair | str:
        a, b = profile.task(c.task_a), profile.task(c.task_b)
        assert a is not None and b is not None and isinstance(c.detail, ColocatedSegments)
        shared = profile.shared_footprint(c.task_a, c.task_b)  # none but weights, which no footprint counts
        if not fits(a, b, target, shared):
            return budget_message(a, b, target, shared)
        return Pair(c, a, b, predict(a, b, target, c.detail.share_a), complementarity(a, b, target))

    def bucket_tasks(self, profile: GraphProfile, pair: Pair) -> tuple[TaskProfile, TaskProfile] | None:
        return None  # the alignment's share (a priority stream's latency bound) holds at every shape

    def settle(self, g: ModelGraph, profile: GraphProfile, chosen: list[Pair], target: Target) -> dict[int, str]:
        """The pairs that cut the streams for more than they save, against the streams uncut
        (`costly_cuts`; the report's baseline, `modelled`)."""
        plan = plan_of(g.model)
        if plan is None:
            return {}
        costly = costly_cuts(g, profile, stream_sides(g, dag_facts(g), plan, profile), chosen, target)
        why = "cuts its streams for more than it saves: the streams uncut run faster without it"
        return {k: why for k in costly if chosen[k].candidate.kind == self.name}

    def shorter(self, g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> list[Candidate]:
        """Each task cut in two at a QDQ-group boundary near its modelled middle, first half with
        first half and second with second: one-step differences add up along a long 16-bit chain
        (the plugin's check refused whole u16 streams by 2-7 steps). Only halves that pay for their
        call, as the alignment judges them; a refused half is halved again in turn."""
        plan = plan_of(g.model)
        assert plan is not None and isinstance(c.detail, ColocatedSegments)
        ka, kb = c.detail.streams
        halves_a, halves_b = halve(g, profile, c.task_a, target), halve(g, profile, c.task_b, target)
        if halves_a is None or halves_b is None:
            return []
        score = pair_score(target, _priority_side(plan, ka, kb), plan.max_slowdown)
        out = []
        for a, b in zip(halves_a, halves_b):
            task_a, task_b = profile.task(a), profile.task(b)
            assert task_a is not None and task_b is not None  # parts of a profiled candidate
            p = score(Segment.of(task_a, target), Segment.of(task_b, target))
            if p is None or p.serial - p.fused - target.call_overhead_s.value <= 0:
                continue
            share = p.share_a if plan.priority is not None else predict(task_a, task_b, target).share_a
            out.append(_segment_pair(plan, (ka, kb), a, b, (len(a), len(b)), share))
        return out


def find_colocated(
    g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target, plan: Plan
) -> list[Candidate]:
    sides = stream_sides(g, facts, plan, profile)
    blocks = layer_blocks(g, facts)
    out = []
    for ka, kb in plan.pairs:
        score = pair_score(target, _priority_side(plan, ka, kb), plan.max_slowdown)
        units_a = cut_units(g, profile, sides[ka], target, blocks)
        units_b = cut_units(g, profile, sides[kb], target, blocks)
        same_model = plan.sources[ka] == plan.sources[kb]
        layers = same_layers(units_a, units_b, sides[ka], sides[kb], blocks) if same_model else None
        pairs, below_call = align(profile, units_a, units_b, target, score, layers=layers).pairs, False
        if not pairs and target.call_overhead_s.value > 0:
            # nothing pays for its call: the pairs that would pay without it, for the report to reject
            free = replace(target, call_overhead_s=replace(target.call_overhead_s, value=0.0))
            score_free = pair_score(free, _priority_side(plan, ka, kb), plan.max_slowdown)
            pairs, below_call = align(profile, units_a, units_b, free, score_free, layers=layers).pairs, True
        for p in pairs:
            share = p.prediction.share_a
            if plan.priority is None and not below_call:  # the alignment tried a few shares; the pair gets the best one
                task_a, task_b = profile.task(list(p.a)), profile.task(list(p.b))
                assert task_a is not None and task_b is not None
                share = predict(task_a, task_b, target).share_a
            if independence_problem(facts, set(p.a), set(p.b)) is not None:
                continue  # cannot happen for disjoint streams; kept as the pass's own guard
            a, b = release_foreign(g, list(p.a)), release_foreign(g, list(p.b))
            if plan.priority is not None and not _holds_bound(profile, a, b, target, score):
                continue
            out.append(_segment_pair(plan, (ka, kb), a, b, (len(p.a), len(p.b)), share))
    return out


def _holds_bound(profile: GraphProfile, a: list[int], b: list[int], target: Target, score: PairScore) -> bool:
    """Whether the pair as written (its nodes after `release_foreign`, as tasks) still keeps the priority
    stream within --max-slowdown: the alignment scored its units, and a stranger's PP-OCR pair it kept ran
    the recogniser's 860 us in 976 us, 13.5% slower against a bound of 2%."""
    task_a, task_b = profile.task(a), profile.task(b)
    return (
        task_a is not None
        and task_b is not None
        and score(Segment.of(task_a, target), Segment.of(task_b, target)) is not None
    )


def costly_cuts(
    g: ModelGraph, profile: GraphProfile, sides: list[list[int]], pairs: list[Pair], target: Target
) -> set[int]:
    """The pairs (by index) that cost their streams more than they save: a pair's saving leaves out
    that cutting the streams at its ends sends the runs' intermediates off the chip
    (vietcombank_captcha x2 at 0 us: 26% less than the streams cut at the pairs, 12% more than the
    streams uncut). Each round drops the pairs whose removal lowers the modelled time (or the one
    that lowers it most, when dropping them all does not), until none does. When what is left still
    takes longer than no pair (basic_pitch x2 at 0 us: each of 4 pays next to the other 3, all 4
    together 2.4% more), pairs are added instead, from none, the one that lowers it most each time."""
    overhead = target.call_overhead_s.value

    def total(kept: list[int]) -> float:
        nodes = {i for k in kept for i in pairs[k].candidate.nodes}
        outside = sum(outside_time(g, profile, side, nodes, target) for side in sides)
        return outside + sum(pairs[k].prediction.fused + overhead for k in kept)

    kept = list(range(len(pairs)))
    now = total(kept)
    while kept:
        without = [total([j for j in kept if j != k]) for k in kept]
        least = min(without)
        if least >= now:
            break
        fewer = [k for k, t in zip(kept, without) if t >= now]
        after = total(fewer)
        if after >= least:
            fewer = [k for k, t in zip(kept, without) if t != least]
            after = total(fewer)
        kept, now = fewer, after
    none = total([])
    if now >= none:
        kept, now = [], none
        while len(kept) < len(pairs):
            more = {k: total([*kept, k]) for k in range(len(pairs)) if k not in kept}
            best = min(more, key=more.__getitem__)
            if more[best] >= now:
                break
            kept, now = [*kept, best], more[best]
    return set(range(len(pairs))) - set(kept)


def _segment_pair(
    plan: Plan, streams: tuple[int, int], a: list[int], b: list[int], aligned: tuple[int, int], share: float
) -> Candidate:
    """The colocate candidate of segments a and b of two streams (`aligned`: their node counts as
    the alignment chose them, before release_foreign)."""
    ka, kb = streams
    note = f"{aligned[0]} nodes of '{plan.streams[ka][:-1]}' with {aligned[1]} of '{plan.streams[kb][:-1]}'"
    return Candidate(Colocate.name, a, b, note=note, detail=ColocatedSegments(share, streams))


def _priority_side(plan: Plan, ka: int, kb: int) -> str | None:
    return {ka: "a", kb: "b"}.get(plan.priority) if plan.priority is not None else None


def stream_sides(g: ModelGraph, facts: DagFacts, plan: Plan, profile: GraphProfile) -> list[list[int]]:
    """Each stream's non-constant nodes in a topological order that keeps the runs of nodes the
    kernel runs long (a node belongs to the stream its outputs are named for): shape work early
    (`_shape_work_early`), each QDQ group's Q and DQ next to its op (qdq.group_order)."""
    sides: list[list[int]] = [[] for _ in plan.streams]
    for i, n in enumerate(g.nodes):
        if facts.const[i]:
            continue
        name = next((t for t in n.output if t), "")
        for k, prefix in enumerate(plan.streams):
            if name.startswith(prefix):
                sides[k].append(i)
                break
    return [group_order(g, _shape_work_early(g, profile, side)) for side in sides]


def _shape_work_early(g: ModelGraph, profile: GraphProfile, side: list[int]) -> list[int]:
    """The side with each node the kernel does not run that reads no node it runs (the int64 shape
    work of an exported model: Shape, Gather, Slice, Concat) right after the last node it reads:
    graph order spreads it between the ops (smart_turn_v3), and each such node cuts a run."""
    out: list[int] = []
    runs = {i: lowerable(g, profile, i) for i in side}  # once each, not once per reader
    for i in side:
        placed = [g.producer[t] for t in g.node_inputs[i] if g.producer.get(t, -1) in runs]
        if runs[i] or any(runs[p] for p in placed):
            out.append(i)
            continue
        out.insert(max((out.index(p) for p in placed), default=-1) + 1, i)
    return out


def lowerable(g: ModelGraph, profile: GraphProfile, i: int) -> bool:
    return not unlowerable(g, profile, i)


def unlowerable(g: ModelGraph, profile: GraphProfile, i: int) -> str:
    """Why no pair may hold the node ('' when one may): it must be profiled, of an op the kernel
    runs, make float32 (or bools, where its lowering makes them: a comparison's mask; ArgMax's int64 indices; or be
    the Q/DQ of a QDQ group), touch no empty run-time tensor but one its
    lowering takes as absent (a prefill's past of 0 tokens; an empty constant, such as Resize's
    unused roi, is only read when lowering), and read other types (but bools its lowering reads: a
    mask's Where, Not, And) and steering inputs only from
    constants. Said after the op in the report: " on an empty tensor", " (...)"."""
    n = g.nodes[i]
    if i in profile.unprofiled:
        return " (not profiled: unknown shapes)"
    if op_outside_kernel(n) is not None:
        return " (outside the kernel's op set)"
    if _touches_empty(g, n):
        return " on an empty tensor"
    op = quantized_op(g, i)
    if op is not None and unlowerable(g, profile, op):
        return " (quantizes a node no pair may hold)"  # a pair would split its group (minilm_l3's Cast)
    if is_q(g, i) or is_dq(g, i) or _dynamic_quantisation(g, n) or _qoperator(n):
        return ""  # integer tensors the kernel reads and writes (qdq.py; lowering/dynamic.py, qlinear.py)
    read = [t for t in n.output if t and (g.consumers.get(t) or t in g.graph_outputs)]  # not an unread statistic
    other = next((t for t in read if not _carried(n, g.info(t).elem_type)), None)
    if other is not None and not nan_test(g, i):
        return f" (makes {onnx.TensorProto.DataType.Name(g.info(other).elem_type).lower()}, not float32 or float16)"
    wide = next((t for t in n.input if t and g.info(t).elem_type in OTHER_FLOATS and not _constant(g, t)), None)
    if wide is not None:  # a Cast of a bfloat16 activation: not a value the lowering needs
        return f" (reads {onnx.TensorProto.DataType.Name(g.info(wide).elem_type).lower()}, not float32 or float16)"
    # A run-time input the kernel cannot hold (a boolean mask) or that steers the op must be a
    # constant, unless the op reads that integer at run time (a key padding mask, position ids).
    steered = n.input[1:] if n.op_type in STEERED_OPS else []
    at_run_time = RUN_TIME_INTEGERS.get(op_key(n), frozenset()) | _gathered_rows(g, n)
    computed = [
        (k, t)
        for k, t in enumerate(n.input)
        if t and k not in at_run_time and (t in steered or not _carried(n, g.info(t).elem_type))
    ]
    late = next((k for k, t in computed if not _constant(g, t) and not nan_test(g, g.producer.get(t))), None)
    if late is None:
        return ""
    frozen = "" if g.source is None else ": --freeze-shapes folds one computed from the input shapes"
    return f" (its input {late} is computed at run time; the lowering needs its value{frozen})"


def _carried(n: onnx.NodeProto, elem_type: int) -> bool:
    """A run-time tensor of this type is one n's lowering reads or makes: the kernel's floats, bools of the ops
    that make or move them (BOOL_OPS), and int64 indices of ArgMax and ArgMin (which read int64 too)."""
    default = n.domain in ("", "ai.onnx")
    bools = elem_type == onnx.TensorProto.BOOL and n.op_type in BOOL_OPS and default
    indices = elem_type == onnx.TensorProto.INT64 and n.op_type in ARG and default
    return elem_type in KERNEL_FLOATS or bools or indices


def _gathered_rows(g: ModelGraph, n: onnx.NodeProto) -> frozenset[int]:
    """A Gather of float32 rows on axis 0 reads its int32/int64 indices at run time (GATHER_ROWS: token
    ids into an embedding table), as the lowering does; colocate called them a value it needs."""
    if n.op_type != "Gather" or len(n.input) < 2:
        return frozenset()
    rank = len(g.info(n.input[0]).shape or ())
    axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
    rows = rank > 0 and axis % rank == 0 and g.info(n.input[0]).elem_type in KERNEL_FLOATS
    indices = g.info(n.input[1]).elem_type in (onnx.TensorProto.INT32, onnx.TensorProto.INT64)
    return frozenset({1}) if rows and indices else frozenset()


# Float types the kernel computes in none of (float32, and float16 as float32): no op reads a run-time one.
OTHER_FLOATS = {onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}


def _touches_empty(g: ModelGraph, n: onnx.NodeProto) -> bool:
    """The node writes an empty run-time tensor or reads one its lowering does not take as absent
    (absent_when_empty: a Concat operand, a prefill's past of 0 tokens): no kernel op runs on one."""
    empty = [g.info(t).numel == 0 and not _constant(g, t) if t else False for t in [*n.input, *n.output]]
    read, written = empty[: len(n.input)], empty[len(n.input) :]
    return any(written) or any(e and not absent_when_empty(n, k) for k, e in enumerate(read))


def _dynamic_quantisation(g: ModelGraph, n: onnx.NodeProto) -> bool:
    """A node of quantize_dynamic's chain, whose u8/i8/int32 tensors the kernel carries at run time:
    DynamicQuantizeLinear, MatMulInteger, and the Cast of its int32 result to float (or of any
    integer the kernel reads: MarbleNet's int16 audio)."""
    if n.op_type == "Cast":
        return g.info(n.input[0]).elem_type in CASTS_TO_FLOAT and g.info(n.output[0]).elem_type in KERNEL_FLOATS
    return n.op_type in ("DynamicQuantizeLinear", "MatMulInteger") and n.domain in ("", "ai.onnx")


def _qoperator(n: onnx.NodeProto) -> bool:
    """A QOperator model's QLinearConv, QLinearMatMul or com.microsoft QLinear* node: uint8 in and out,
    run by the kernel where it lowers (op_outside_kernel said so; lowering/qmatmul.py, qlinear.py)."""
    return n.op_type.startswith("QLinear") and n.domain in ("", "ai.onnx", "com.microsoft")


def _constant(g: ModelGraph, tensor: str) -> bool:
    """An initializer, a Constant's output, or a DequantizeLinear of those (a QDQ model's weight, which
    the lowering dequantizes as ORT does: Lowerer.constant_value)."""
    producer = g.producer.get(tensor)
    if tensor in g.initializers or producer is None:
        return tensor in g.initializers
    n = g.nodes[producer]
    return n.op_type == "Constant" or (is_dq(g, producer) and all(_constant(g, t) for t in n.input if t))


def cut_units(
    g: ModelGraph,
    profile: GraphProfile,
    side: list[int],
    target: Target,
    blocks: list[Block] | None = None,
    max_units: int = MAX_UNITS,
) -> list[Unit]:
    """The side cut into units: each run of nodes that do not lower is one unit that runs alone;
    runs that do are chopped into pieces of about total/max_units modelled time, and cut where an
    attention or MLP block (blocks.py) begins, so that a segment can be whole blocks."""
    pairable = [lowerable(g, profile, i) for i in side]
    times = [node_time(profile, i, target) for i in side]
    quantum = max(sum(t for t, ok in zip(times, pairable) if ok) / max(1, max_units), target.call_overhead_s.value)
    starts = {min(b.nodes) for b in blocks or []}
    inside_group = inside_groups(g, side)
    units: list[Unit] = []
    current: list[int] = []
    current_ok, acc = True, 0.0
    for i, ok, t in zip(side, pairable, times):
        # never between an IsNaN and the Where that reads it: the kernel runs the two as one op
        after_nan_test = nan_test(g, current[-1] if current else None)
        cut = ok and (acc >= quantum or i in starts) and i not in inside_group and not after_nan_test
        if current and (ok != current_ok or cut):
            units.append(Unit(tuple(current), current_ok))
            current, acc = [], 0.0
        current.append(i)
        current_ok = ok
        acc += t
    if current:
        units.append(Unit(tuple(current), current_ok))
    return units


# For two copies of one model: which of the model's attention/MLP blocks begin in units [u, u2) of
# side A and [v, v2) of side B; a pair is allowed only where the two are the same blocks.
Layers = Callable[[int, int, int, int], bool]


def same_layers(
    units_a: list[Unit], units_b: list[Unit], side_a: list[int], side_b: list[int], blocks: list[Block]
) -> Layers | None:
    """The same-layer test of two streams that are copies of one model: block k of one stream is
    block k of the other (in graph order, attention and MLP apart). None (no constraint) when the
    two streams do not show the same blocks."""

    def ordinals(units: list[Unit], side: list[int]) -> list[frozenset[tuple[str, int]]] | None:
        mine = set(side)
        starts = sorted((min(b.nodes), b.kind) for b in blocks if min(b.nodes) in mine)
        index: dict[int, tuple[str, int]] = {}
        for kind in ("attention", "mlp"):
            for k, (first, _) in enumerate(s for s in starts if s[1] == kind):
                index[first] = (kind, k)
        return [frozenset(index[i] for i in u.nodes if i in index) for u in units]

    per_a, per_b = ordinals(units_a, side_a), ordinals(units_b, side_b)
    if per_a is None or per_b is None or frozenset().union(*per_a) != frozenset().union(*per_b):
        return None

    @cache
    def span(per: tuple[frozenset[tuple[str, int]], ...], u: int, u2: int) -> frozenset[tuple[str, int]]:
        return frozenset().union(*per[u:u2])

    ta, tb = tuple(per_a), tuple(per_b)
    return lambda u, u2, v, v2: span(ta, u, u2) == span(tb, v, v2)


def pair_score(target: Target, priority: str | None, max_slowdown: float) -> PairScore:
    """How a pair is scored: the best share; with a latency-critical side, the best share that
    keeps the pair's fused time (plus the call overhead) within (1 + max_slowdown) of that side
    alone, or None when no share does."""
    overhead = target.call_overhead_s.value

    def score(a: Segment, b: Segment) -> Prediction | None:
        if not fits(a.task, b.task, target):
            return None

        def at(share: float) -> Prediction:
            return predict_signed(a.signature, b.signature, a.serial, b.serial, target, share)

        if priority is None:
            return min((at(s) for s in ALIGN_SHARES), key=lambda p: p.fused)
        best = None
        for s in PRIORITY_SHARES:
            p = at(s if priority == "a" else 1.0 - s)
            alone = p.time_a if priority == "a" else p.time_b
            if p.fused + overhead <= (1.0 + max_slowdown) * alone and (best is None or p.fused < best.fused):
                best = p
        return best

    return score


def align(
    profile: GraphProfile,
    units_a: list[Unit],
    units_b: list[Unit],
    target: Target,
    score: PairScore,
    max_segment_units: int | None = None,
    layers: Layers | None = None,
) -> Alignment:
    """The alignment of the two sides with the least modelled time (see the module docstring): a step
    runs a pair (its fused time plus the call overhead) or a side's units alone, a run of them as one
    task (its serial time), as `modelled` counts them. So a cut costs what it costs: the off-chip
    edges of the runs it splits, and the call of each pair. The saving is against the sides uncut."""
    na, nb = len(units_a), len(units_b)
    overhead = target.call_overhead_s.value
    segment_a = _segments(profile, units_a, target)
    segment_b = _segments(profile, units_b, target)
    alone_a, alone_b = _alone(profile, units_a, segment_a, target), _alone(profile, units_b, segment_b, target)
    if max_segment_units is None:
        max_segment_units = _segment_units(units_a, units_b)
    ends_a, ends_b = _segment_ends(units_a, max_segment_units), _segment_ends(units_b, max_segment_units)
    cost = [[float("inf")] * (nb + 1) for _ in range(na + 1)]
    back: list[list[tuple[int, int, AlignedPair | None] | None]] = [[None] * (nb + 1) for _ in range(na + 1)]
    cost[0][0] = 0.0
    simulated = 0

    def step(u: int, v: int, u2: int, v2: int, spent: float, pair: AlignedPair | None) -> None:
        if cost[u][v] + spent < cost[u2][v2]:
            cost[u2][v2], back[u2][v2] = cost[u][v] + spent, (u, v, pair)

    for u in range(na + 1):
        for v in range(nb + 1):
            here = cost[u][v]
            for u2, spent in alone_a(u):
                step(u, v, u2, v, spent, None)
            for v2, spent in alone_b(v):
                step(u, v, u, v2, spent, None)
            if u == na or v == nb:
                continue
            for u2 in ends_a[u]:
                seg_a = segment_a(u, u2)
                for v2 in ends_b[v]:
                    if layers is not None and not layers(u, u2, v, v2):
                        continue
                    seg_b = segment_b(v, v2)
                    least = max(seg_a.alone, seg_b.alone, *_least_busy(seg_a.work, seg_b.work, target)) + overhead
                    # alone, the two segments take their serial time: a pair that cannot beat that never helps
                    if least >= seg_a.serial + seg_b.serial or here + least >= cost[u2][v2]:
                        continue
                    prediction = score(seg_a, seg_b)
                    simulated += 1
                    if prediction is None:
                        continue
                    saving = prediction.serial - prediction.fused - overhead
                    if saving > 0:
                        nodes_a, nodes_b = segment_nodes(units_a, u, u2), segment_nodes(units_b, v, v2)
                        pair = AlignedPair(nodes_a, nodes_b, prediction, saving)
                        step(u, v, u2, v2, prediction.fused + overhead, pair)
    pairs = []
    u, v = na, nb
    while (u, v) != (0, 0):
        back_step = back[u][v]
        assert back_step is not None
        u, v, paired = back_step
        if paired is not None:
            pairs.append(paired)
    uncut = _uncut(alone_a, na) + _uncut(alone_b, nb)
    return Alignment(pairs[::-1], uncut - cost[na][nb], simulated)


# The steps a side may take alone from unit u: (the unit after the step, the step's modelled time).
AloneSteps = Callable[[int], list[tuple[int, float]]]


def _alone(
    profile: GraphProfile, units: list[Unit], segment: Callable[[int, int], Segment], target: Target
) -> AloneSteps:
    """A side's steps alone, timed as `outside_time` times them: units [u, u2) of one run of pairable
    units as one task; an unpairable unit as its nodes, each a task of its own."""

    @cache
    def steps(u: int) -> list[tuple[int, float]]:
        if u == len(units):
            return []
        if not units[u].pairable:
            own = [i for i in units[u].nodes if i not in profile.unprofiled]
            return [(u + 1, sum(serial_time(TaskProfile.of([profile.nodes[i]]), target) for i in own))]
        out = []
        for u2 in range(u + 1, len(units) + 1):
            out.append((u2, segment(u, u2).serial))
            if u2 == len(units) or not units[u2].pairable:
                break
        return out

    return steps


def _uncut(steps: AloneSteps, n: int) -> float:
    """A side's time with no pair: each of its runs one task, as far as each step alone reaches."""
    total, u = 0.0, 0
    while u < n:
        u, spent = steps(u)[-1]
        total += spent
    return total


def segment_nodes(units: list[Unit], u: int, u2: int) -> tuple[int, ...]:
    return tuple(i for unit in units[u:u2] for i in unit.nodes)


def _segment_units(units_a: list[Unit], units_b: list[Unit]) -> int:
    """The longest segment, in units, that keeps the alignment's work within ALIGN_BUDGET."""
    pairable = [u for u in units_a + units_b if u.pairable]
    nodes_per_unit = sum(len(u.nodes) for u in pairable) / max(1, len(pairable))
    work = max(1.0, len(units_a) * len(units_b) * nodes_per_unit)
    return max(MIN_SEGMENT_UNITS, int((ALIGN_BUDGET / work) ** (1 / 3)))


def _segment_ends(units: list[Unit], max_segment_units: int) -> list[list[int]]:
    """For each unit, the ends of the pairable segments starting there: up to max_segment_units
    units, and the end of its run of pairable units (a whole model between nodes that do not lower:
    two copies in step pair best as one long segment, which the length limit would cut)."""
    ends = []
    for u in range(len(units)):
        run_end = u
        while run_end < len(units) and units[run_end].pairable:
            run_end += 1
        near = list(range(u + 1, min(run_end, u + max_segment_units) + 1))
        ends.append(near + [run_end] if run_end > u + max_segment_units else near)
    return ends


def _least_busy(work_a: tuple[float, ...], work_b: tuple[float, ...], target: Target) -> tuple[float, ...]:
    """Lower bounds of the fused time from the two segments' busy seconds (engines, then DDR):
    per engine, or on a general-worker pool all engines' work shared by its workers."""
    both = [x + y for x, y in zip(work_a, work_b)]
    pool = target.general_workers.value
    return (sum(both[:-1]) / pool, both[-1]) if pool else tuple(both)


def _segments(profile: GraphProfile, units: list[Unit], target: Target) -> Callable[[int, int], Segment]:
    """The segment of units [u, u2), computed once each."""

    @cache
    def segment(u: int, u2: int) -> Segment:
        task = profile.task(list(segment_nodes(units, u, u2)))
        assert task is not None  # pairable units are profiled
        return Segment.of(task, target)

    return segment


# ---- what the co-located model is modelled to take ------------------------------------------


@dataclass
class Modelled:
    """MODELLED times of a co-located model on a target (seconds), for the report."""

    target: str
    serial: float  # the streams alone, one after another, cut as the pairs cut them (segments, runs between as tasks)
    fused: float  # the same with each pair fused (plus its call overhead)
    inside_pairs: float  # the part of `serial` inside pairs
    stream_alone: dict[str, float]  # each stream alone, uncut
    stream_colocated: dict[str, float]  # each pair counted at its fused time plus overhead
    # the part of `serial` in nodes that never pair (no lowering, not float32, not profiled), by op
    unpairable: dict[str, tuple[int, float]] = field(default_factory=dict)  # op: (nodes, seconds)
    # unpaired nodes the kernel runs that need over half the on-chip memory: their count by
    # op, their share of the op time, the largest one's working set and the target's on-chip bytes
    too_large: dict[str, int] = field(default_factory=dict)
    too_large_share: float = 0.0  # of the streams' op time, each op timed alone
    largest_bytes: int = 0
    onchip_bytes: float = 0.0
    # each stream node after node, each node a task (costmodel.node_after_node), as `rewrite`'s
    # modelled_us counts its source model (its constant nodes too)
    stream_nodes: dict[str, float] = field(default_factory=dict)

    @property
    def uncut(self) -> float:
        """Every stream alone as it runs with no pair, one after another: each run of nodes the kernel
        runs one task. The baseline: `serial` cuts each stream at its pairs' boundaries (a cut run's
        intermediates leave the chip), so it moves with the pairs chosen; this does not."""
        return sum(self.stream_alone.values())

    @property
    def gain(self) -> float:
        """The co-located model's saving against the streams uncut, one after another."""
        return 1.0 - self.fused / self.uncut if self.uncut > 0 else 0.0

    @property
    def coverage(self) -> float:
        return self.inside_pairs / self.serial if self.serial > 0 else 0.0

    def _latency_hint(self, priority: int | None) -> list[str]:
        """Where no stream has priority and one runs over LATENCY_HINT slower co-located: how to bound it (a
        stranger's bge + minilm: +5.1% throughput, minilm +183%, and nothing said so)."""
        slower = {s: self.stream_colocated[s] / a - 1.0 for s, a in self.stream_alone.items() if a > 0}
        worst = max(slower, key=lambda s: slower[s], default=None)
        if priority is not None or worst is None or slower[worst] <= LATENCY_HINT:
            return []
        return [
            f"  stream {worst[:-1]} runs {slower[worst]:+.0%} co-located: `--priority {worst[:-1]}` bounds its "
            "modelled slowdown (--max-slowdown)"
        ]

    def lines(self, priority: int | None = None) -> list[str]:
        if self.serial <= 0:  # every stream's work lies in If/Loop/Scan bodies, which streams never pair across
            held = sorted((op.partition(" (")[0], n) for op, (n, _) in self.unpairable.items())  # the op, not why
            holders = ", ".join(f"{op} {n}x" for op, n in held)
            return [
                f"modelled on {self.target}: nothing to model: the streams' work lies inside control flow "
                f"({holders or 'no node'}), and colocate pairs only the nodes of the main graphs"
            ]
        head = (
            f"modelled on {self.target} (cost model, not measured): streams one after another "
            f"{self.uncut * 1e6:.0f} us, co-located {self.fused * 1e6:.0f} us "
            f"({abs(self.gain):.1%} {'less' if self.gain >= 0 else 'more'}); "
            f"{self.coverage:.0%} of the serial time lies inside pairs"
        )
        out = [head]
        if abs(self.uncut - self.serial) > 1e-3 * self.serial:
            out.append(
                f"  cut at the pairs' boundaries the streams take {self.serial * 1e6:.0f} us one after another "
                f"(a cut run's intermediates leave the chip): the pairs save {(self.serial - self.fused) * 1e6:.0f} us "
                f"of that, the cuts cost {(self.serial - self.uncut) * 1e6:.0f} us"
            )
        for k, (stream, alone) in enumerate(self.stream_alone.items()):
            together = self.stream_colocated[stream]
            slower = together / alone - 1.0 if alone > 0 else 0.0
            role = " (latency-critical)" if k == priority else ""
            nodes = self.stream_nodes.get(stream)
            each = f" (node after node {nodes * 1e6:.0f} us)" if nodes is not None else ""
            out.append(
                f"  stream {stream[:-1]}{role}: alone {alone * 1e6:.0f} us{each}, co-located {together * 1e6:.0f} us "
                f"({slower:+.1%}; a pair counts at its fused time plus the call overhead)"
            )
        out += self._latency_hint(priority)
        if self.stream_nodes:
            out.append(
                "  alone: each run of ops the kernel runs is one task, its intermediates on chip, as a pair's serial "
                "time counts them; node after node: each node a task, its tensors in DDR, as `rewrite --json` "
                "counts a model's modelled_us"
            )
        if self.unpairable:
            total = sum(t for _, t in self.unpairable.values())
            ops = sorted(self.unpairable.items(), key=lambda kv: -kv[1][1])
            out.append(
                f"  never paired ({total / self.serial:.0%} of the serial time): "
                + ", ".join(f"{op} {n}x {t * 1e6:.0f} us" for op, (n, t) in ops[:6])
                + (f" and {len(ops) - 6} more op(s)" if len(ops) > 6 else "")
            )
        if self.too_large:
            large = sorted(self.too_large.items(), key=lambda kv: -kv[1])
            out.append(
                f"  too large to pair ({self.too_large_share:.0%} of the streams' op time, ops timed alone): "
                + ", ".join(f"{op} {n}x" for op, n in large[:6])
                + (f" and {len(large) - 6} more op(s)" if len(large) > 6 else "")
                + f"; each needs over half the {self.onchip_bytes / 2**20:.0f} MiB on-chip memory (the largest "
                f"{self.largest_bytes / 2**20:.1f} MiB), so no two fit together"
            )
        return out

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "serial_us": self.uncut * 1e6,
            "fused_us": self.fused * 1e6,
            "gain": self.gain,
            "coverage": self.coverage,
            "cut_serial_us": self.serial * 1e6,
            "stream_alone_us": {k: v * 1e6 for k, v in self.stream_alone.items()},
            "stream_colocated_us": {k: v * 1e6 for k, v in self.stream_colocated.items()},
            "stream_node_after_node_us": {k: v * 1e6 for k, v in self.stream_nodes.items()},
            "unpairable_us": {op: {"nodes": n, "us": t * 1e6} for op, (n, t) in self.unpairable.items()},
            "too_large": {
                "nodes": self.too_large,
                "op_time_share": self.too_large_share,
                "largest_bytes": self.largest_bytes,
            },
        }


def outside_time(g: ModelGraph, profile: GraphProfile, side: list[int], in_pair: set[int], target: Target) -> float:
    """A stream's modelled time outside pairs, counted as a pair's serial time counts its segments
    (serial_time: as tasks, intermediates on chip, on the target's baseline): each run of
    consecutive unpaired nodes the kernel runs is one task; a node it does not run is a task alone.
    So a stream alone costs the same whichever pairs it is in."""
    total, run = 0.0, []
    for i in [*side, None]:
        if i is not None and i not in in_pair and lowerable(g, profile, i):
            run.append(i)
            continue
        if run:
            task = profile.task(run)
            assert task is not None  # lowerable nodes are profiled
            total += serial_time(task, target)
            run = []
        if i is not None and i not in in_pair and i not in profile.unprofiled:
            total += serial_time(TaskProfile.of([profile.nodes[i]]), target)
    return total


def modelled(
    g: ModelGraph, profile: GraphProfile, facts: DagFacts, pairs: list[Pair], target: Target
) -> Modelled | None:
    """The co-located model's modelled times with the given pipeline pairs, or None
    when the model is not a co-located one."""
    plan = plan_of(g.model)
    if plan is None:
        return None
    overhead = target.call_overhead_s.value
    sides = stream_sides(g, facts, plan, profile)
    stream_of = {i: plan.streams[k] for k, side in enumerate(sides) for i in side}
    in_pair = {i for p in pairs for i in p.candidate.nodes}
    alone = {s: outside_time(g, profile, side, in_pair, target) for s, side in zip(plan.streams, sides)}
    uncut = {s: outside_time(g, profile, side, set(), target) for s, side in zip(plan.streams, sides)}
    colocated = dict(alone)
    fused = inside = 0.0
    for p in pairs:
        sa, sb = stream_of[p.candidate.task_a[0]], stream_of[p.candidate.task_b[0]]
        pr = p.prediction
        alone[sa] += pr.time_a
        alone[sb] += pr.time_b
        colocated[sa] += pr.fused + overhead
        colocated[sb] += pr.fused + overhead
        inside += pr.serial
        fused += pr.fused + overhead
    outside = sum(alone.values()) - inside
    serial = outside + inside
    unpairable = _unpairable(g, profile, [i for side in sides for i in side], target)
    large = _too_large(g, profile, sides, in_pair, target)
    timed = [i for side in sides for i in side if i not in profile.unprofiled]
    alone_time = {i: serial_time(TaskProfile.of([profile.nodes[i]]), target) for i in timed}
    large_share = sum(alone_time[i] for i in large) / max(1e-12, sum(alone_time.values()))
    ops: dict[str, int] = {}
    for i in large:
        ops[g.nodes[i].op_type] = ops.get(g.nodes[i].op_type, 0) + 1
    largest = max((profile.nodes[i].footprint for i in large), default=0)
    return Modelled(
        target.name,
        serial,
        outside + fused,
        inside,
        uncut,
        colocated,
        unpairable,
        ops,
        large_share,
        largest,
        target.onchip_bytes.value,
        stream_nodes=_node_after_node(profile, plan, target),
    )


def _node_after_node(profile: GraphProfile, plan: Plan, target: Target) -> dict[str, float]:
    """Each stream's profiled nodes (constant ones too, by the stream their outputs are named for),
    node after node."""
    g = profile.graph
    mine: dict[str, list[NodeProfile]] = {s: [] for s in plan.streams}
    for i, op in profile.nodes.items():
        name = next((t for t in g.nodes[i].output if t), "")
        stream = next((s for s in plan.streams if name.startswith(s)), None)
        if stream is not None:
            mine[stream].append(op)
    return {s: node_after_node(ops, target) for s, ops in mine.items()}


def _unpairable(g: ModelGraph, profile: GraphProfile, nodes: list[int], target: Target) -> dict[str, tuple[int, float]]:
    """Nodes no pair may hold, by op and why (`unlowerable`): their count and modelled time alone (0 when
    not profiled)."""
    out: dict[str, tuple[int, float]] = {}
    for i in nodes:
        why = unlowerable(g, profile, i)
        if not why or (i in profile.nodes and profile.nodes[i].engine == Engine.NONE):
            continue
        n = g.nodes[i]
        op = f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        op += why
        seconds = serial_time(TaskProfile.of([profile.nodes[i]]), target) if i in profile.nodes else 0.0
        count, total = out.get(op, (0, 0.0))
        out[op] = (count + 1, total + seconds)
    return out


def _too_large(
    g: ModelGraph, profile: GraphProfile, sides: list[list[int]], in_pair: set[int], target: Target
) -> set[int]:
    """Unpaired nodes the kernel runs whose on-chip working set exceeds half the on-chip memory: a
    segment's working set is its largest op's, so two segments holding such nodes never fit together."""
    half = target.onchip_bytes.value / 2
    return {
        i
        for side in sides
        for i in side
        if i not in in_pair and lowerable(g, profile, i) and profile.nodes[i].footprint > half
    }
