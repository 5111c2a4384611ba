"""Score every candidate with the cost model and choose pairs that share no node.

A candidate is kept when both tasks are profiled, every op is one the kernel runs (the full
lowering, after the rewrite, can still refuse an attribute), their on-chip working sets fit together,
and the predicted gain reaches `min_gain`. Complementarity (how differently the two tasks
load the engines) is reported; a same-engine pair is kept only on a predicted gain, which
the shared gain threshold already demands. Chosen greedily by predicted time saved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .contract import KIND_MICROBATCH
from .costmodel import Prediction, Target, fits, predict, task_time
from .discover import Candidate
from .graph import ModelGraph
from .lower import op_outside_kernel
from .profile import Engine, GraphProfile, TaskProfile

DEFAULT_MIN_GAIN = 0.02
MAX_SPLITS_TRIED = 8


@dataclass
class Pair:
    candidate: Candidate
    a: TaskProfile
    b: TaskProfile
    prediction: Prediction
    complementarity: float
    microbatch_sizes: tuple[int, int] | None = None

    @property
    def kind(self) -> str:
        return self.candidate.kind

    @property
    def saved(self) -> float:
        return self.prediction.serial - self.prediction.fused


@dataclass
class Rejection:
    candidate: Candidate
    reason: str


def select(
    g: ModelGraph,
    profile: GraphProfile,
    candidates: list[Candidate],
    target: Target,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> tuple[list[Pair], list[Rejection]]:
    scored: list[Pair] = []
    rejected: list[Rejection] = []
    for c in candidates:
        result = evaluate(g, profile, c, target)
        if isinstance(result, str):
            rejected.append(Rejection(c, result))
        elif result.prediction.gain < min_gain:
            rejected.append(
                Rejection(c, f"predicted gain {result.prediction.gain:.1%} below --min-gain {min_gain:.1%}")
            )
        else:
            scored.append(result)
    chosen: list[Pair] = []
    taken: set[int] = set()
    for pair in sorted(scored, key=lambda p: (-p.saved, min(p.candidate.nodes))):
        if taken & pair.candidate.nodes:
            rejected.append(Rejection(pair.candidate, "overlaps a better pair"))
            continue
        taken |= pair.candidate.nodes
        chosen.append(pair)
    return chosen, rejected


def evaluate(g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> Pair | str:
    """The candidate's best pair (share, and split for micro-batches), or why it cannot be one."""
    missing = next((i for i in sorted(c.nodes) if i in profile.unprofiled), None)
    if missing is not None:
        return f"not profiled: {g.describe(missing)}: {profile.unprofiled[missing]}"
    outside = next((e for e in (op_outside_kernel(g.nodes[i]) for i in sorted(c.nodes)) if e), None)
    if outside is not None:
        return f"does not lower: {outside.message}"
    if c.kind == KIND_MICROBATCH:
        return _evaluate_microbatch(profile, c, target)
    a, b = profile.task(c.task_a), profile.task(c.task_b)
    assert a is not None and b is not None
    if not fits(a, b, target):
        return _budget_message(a, b, target)
    share = c.detail.get("share_a")  # a kind that chose the share under a constraint (colocate --priority)
    return Pair(c, a, b, predict(a, b, target, share), complementarity(a, b, target))


def _evaluate_microbatch(profile: GraphProfile, c: Candidate, target: Target) -> Pair | str:
    whole = profile.task(c.task_a)
    assert whole is not None
    batch = int(c.detail["batch"])
    serial = task_time(whole, target)  # the unsplit chain is the honest baseline
    splits = sorted({max(1, min(batch - 1, round(batch * k / MAX_SPLITS_TRIED))) for k in range(1, MAX_SPLITS_TRIED)})
    best: Pair | None = None
    for rows_a in splits:
        a, b = whole.scaled(rows_a / batch), whole.scaled((batch - rows_a) / batch)
        if not fits(a, b, target):
            continue
        p = predict(a, b, target)
        p = Prediction(p.time_a, p.time_b, serial, p.fused, p.share_a)
        if best is None or p.fused < best.prediction.fused:
            best = Pair(c, a, b, p, complementarity(a, b, target), (rows_a, batch - rows_a))
    if best is None:
        return _budget_message(whole.scaled(0.5), whole.scaled(0.5), target)
    return best


def _budget_message(a: TaskProfile, b: TaskProfile, target: Target) -> str:
    return (
        f"on-chip budget: task A needs {a.footprint} B and task B {b.footprint} B together, "
        f"the target has {int(target.onchip_bytes.value)} B"
    )


def engine_seconds(t: TaskProfile, target: Target) -> tuple[float, float, float]:
    """Time the task keeps each engine busy: (matrix, vector, memory)."""
    return (
        t.flops[Engine.MATRIX] / target.matrix_flops.value,
        t.flops[Engine.VECTOR] / target.vector_flops,
        t.bytes[Engine.MEMORY] / target.dma_bytes.value,
    )


def complementarity(a: TaskProfile, b: TaskProfile, target: Target) -> float:
    """1 - cosine similarity of the engine-time vectors: 0 for same mix, 1 for disjoint engines."""
    ea, eb = engine_seconds(a, target), engine_seconds(b, target)
    na, nb = math.sqrt(sum(x * x for x in ea)), math.sqrt(sum(x * x for x in eb))
    if na == 0 or nb == 0:
        return 0.0
    return 1.0 - sum(x * y for x, y in zip(ea, eb)) / (na * nb)
