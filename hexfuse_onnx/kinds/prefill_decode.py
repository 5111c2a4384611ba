"""Prefill/decode pairs: the same layer's block of a prefill request and of a decode request.

Blocks are the attention and MLP blocks of blocks.py. A block is prefill when its query has
more than one position (compute-bound) and decode when it has one (bandwidth-bound, usually
reading a KV cache); positions are read at the shapes the graph is analysed at (fix symbolic
lengths with --shape). A request is a connected part of the graph; its blocks of one kind, in
graph order, are its layers; an MLP block belongs to the attention block before it and takes
its query length. Layer i's prefill attention is offered with layer i's decode attention, and
likewise for MLPs (POD-Attention's pairing, one layer at a time so that two chosen pairs never
wait on each other).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..costmodel import Target
from ..graph import ModelGraph
from ..profile import GraphProfile
from .base import Candidate, KindDetail, PairKind
from .blocks import Block, layer_blocks
from .dag import DagFacts, independence_problem


@dataclass(frozen=True)
class PrefillPositions(KindDetail):
    prefill_positions: int  # query positions of the prefill block


class PrefillDecode(PairKind):
    """A prefill block with the decode block of the same layer, fused as they are."""

    name = "prefill_decode"
    specificity = 2  # an attention pair is also a pair of branches: keep it as this kind

    def find(self, g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target) -> list[Candidate]:
        return find_prefill_decode(g, facts)


@dataclass(frozen=True)
class _Layer:
    block: Block
    request: int  # connected part of the graph
    index: int  # position among the request's blocks of this kind and length


def find_prefill_decode(g: ModelGraph, facts: DagFacts) -> list[Candidate]:
    layers = _layers(layer_blocks(g, facts), _requests(facts))
    prefill = [x for x in layers if isinstance(x.block.positions, int) and x.block.positions > 1]
    decode = [x for x in layers if x.block.positions == 1]
    return [
        _candidate(p, d)
        for p in prefill
        for d in decode
        if (p.block.kind, p.index) == (d.block.kind, d.index)
        and independence_problem(facts, set(p.block.nodes), set(d.block.nodes)) is None
    ]


def _candidate(prefill: _Layer, decode: _Layer) -> Candidate:
    q_len = int(prefill.block.positions or 0)
    return Candidate(
        PrefillDecode.name,
        sorted(prefill.block.nodes),
        sorted(decode.block.nodes),
        note=f"layer {prefill.index} {prefill.block.kind}: prefill ({q_len} query positions) with decode (1)",
        detail=PrefillPositions(q_len),
    )


def _layers(blocks: list[Block], request_of: list[int]) -> list[_Layer]:
    """Blocks with their request and index. An MLP block takes the query length of the attention
    block before it in its request (a 2-D Gemm's rows mix batch and positions); without one it is
    not a decoder layer and is left out."""
    last_attention: dict[int, Block] = {}
    counts: dict[tuple[str, int, object], int] = {}
    out = []
    for b in sorted(blocks, key=lambda b: min(b.nodes)):
        request = request_of[min(b.nodes)]
        if b.kind == "attention":
            last_attention[request] = b
        elif request in last_attention:
            b = replace(b, positions=last_attention[request].positions)
        else:
            continue
        key = (b.kind, request, b.positions)
        out.append(_Layer(b, request, counts.get(key, 0)))
        counts[key] = counts.get(key, 0) + 1
    return out


def _requests(facts: DagFacts) -> list[int]:
    """Each node's connected part of the graph (constant nodes join nothing)."""
    parent = list(range(len(facts.preds)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, preds in enumerate(facts.preds):
        for p in preds:
            parent[root(p)] = root(i)
    return [root(i) for i in range(len(parent))]
