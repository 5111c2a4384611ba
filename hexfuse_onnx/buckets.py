"""Shares per shape bucket: the work share of a pair over symbolic dims, chosen again at a few shapes.

The pass chooses a pair's share (`share_a`) at the representative binding. When the two tasks'
work grows differently with the symbolic dims (attention's scores grow with the square of the
sequence, a projection linearly; a prefill task with its length, a decode task not), the best
share at another shape is another. So the pair's tasks are profiled and the best share modelled
again at *bucket bindings*: the representative one with every symbol but the batch scaled by
SYMBOL_FACTORS (a sequence of 128: 16, 64, 128, 512; an image of 640: 96, 320, 640, 2560), or,
when the batch is the only symbol, the batch scaled by BATCH_FACTORS. A binding at which the
model has no shapes, or the pair's tasks cannot be profiled, is left out.

A bucket's key is the number of elements of the node's inputs at that binding (weights
included), one integer the kernel computes from the shapes it is called with. The node gets a
table (`share_buckets`, keys ascending, and `share_table`, the shares) when some bucket's best
share differs from `share_a` by what matters: running that bucket at `share_a` is predicted at
least MIN_FUSED_LOSS slower than at its best share. Such buckets get their best share, the others
(the representative one too) `share_a`. The kernel runs a call at the share of the key nearest (in
log scale) to the call's input elements (custom_ops/src/shares.rs); without a table at `share_a`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from .costmodel import Target, predict
from .errors import ModelError
from .graph import ModelGraph, ShapeBinding, batch_dims, bind, input_dims
from .kinds import Pair, kind_of
from .profile import GraphProfile, profile_node

SYMBOL_FACTORS = (0.125, 0.5, 1.0, 4.0)
BATCH_FACTORS = (1, 4, 16)
MIN_FUSED_LOSS = 0.01
MAX_BUCKETS = 16  # the kernel refuses a longer table


@dataclass(frozen=True)
class ShareTable:
    keys: tuple[int, ...]  # input elements of the node per bucket, ascending
    shares: tuple[float, ...]  # share_a per bucket


def bucket_bindings(g: ModelGraph) -> list[ShapeBinding]:
    """The representative binding first, then its scaled versions (module docstring)."""
    assert g.source is not None and g.binding is not None
    dims_of = input_dims(g.source)
    batch = batch_dims(dims_of)
    rep = g.binding.symbols
    others = [k for k in rep if k not in batch]
    scaled = others or list(rep)
    factors = SYMBOL_FACTORS if others else BATCH_FACTORS
    out = [g.binding]
    for f in factors:
        values = {k: _scaled(v, f) if k in scaled else v for k, v in rep.items()}
        if all(b.symbols != values for b in out):
            out.append(bind(dims_of, values))
    return out


def _scaled(value: int, factor: float) -> int:
    """value x factor, rounded to a multiple of 32 from 32 up (strided models keep whole tiles)."""
    v = value * factor
    return max(1, round(v / 32) * 32 if v >= 32 else round(v))


def share_table(
    g: ModelGraph, pair: Pair, target: Target, input_elements: Callable[[ShapeBinding], int | None]
) -> ShareTable | None:
    """The pair's table of shares per bucket, or None when one share serves every bucket.
    `input_elements(binding)`: the node's input elements there (None: no shapes there)."""
    if g.source is None or g.binding is None:
        return None
    default = pair.prediction.share_a
    entries: dict[int, float] = {}
    differs = False
    for k, binding in enumerate(bucket_bindings(g)):
        key = input_elements(binding)
        if key is None or key in entries:
            continue
        if k == 0:
            entries[key] = default
            continue
        shares = _best_share_at(g, pair, target, binding)
        if shares is None:
            continue
        best, loss = shares
        pays = loss >= MIN_FUSED_LOSS
        entries[key] = best if pays else default  # where the share hardly matters, the default's
        differs |= pays
    if not differs or len(entries) < 2:
        return None
    keys = sorted(entries)[:MAX_BUCKETS]
    return ShareTable(tuple(keys), tuple(entries[k] for k in keys))


def _best_share_at(g: ModelGraph, pair: Pair, target: Target, binding: ShapeBinding) -> tuple[float, float] | None:
    """The best share at the binding and how much slower `share_a` runs there (a fraction), or
    None when the pair's tasks cannot be profiled there."""
    try:
        infos = g.infos_at(binding)
    except ModelError:  # the model has no shapes at this binding: no bucket here
        return None
    at = replace(g, infos=infos)
    nodes = sorted(pair.candidate.nodes)
    tensors = [at.info(t) for i in nodes for t in [*g.nodes[i].input, *g.nodes[i].output] if t]
    if any(input_elements_of([t.shape]) is None for t in tensors):
        return None  # a dim is unknown or not positive there
    profiles = {i: profile_node(at, i) for i in nodes}
    unprofiled = {i: p for i, p in profiles.items() if isinstance(p, str)}
    profiled = {i: p for i, p in profiles.items() if not isinstance(p, str)}
    tasks = kind_of(pair).bucket_tasks(GraphProfile(at, profiled, unprofiled), pair)
    if tasks is None:
        return None
    a, b = tasks
    best = predict(a, b, target)
    at_default = predict(a, b, target, pair.prediction.share_a)
    loss = at_default.fused / best.fused - 1.0 if best.fused > 0 else 0.0
    return best.share_a, loss


def input_elements_of(shapes: list[tuple[int | str | None, ...] | None]) -> int | None:
    """The elements of a node's inputs (the bucket key), None when a shape is not concrete."""
    total = 0
    for shape in shapes:
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            return None
        total += math.prod(d for d in shape if isinstance(d, int))
    return total
