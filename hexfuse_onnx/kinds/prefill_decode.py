"""Prefill/decode pairs: attention blocks of different requests in one graph.

An attention block is either one com.microsoft Attention / MultiHeadAttention /
GroupQueryAttention node, or the MatMul-Softmax-MatMul pattern (QK^T, optional scale/mask,
Softmax, times V) grown to its Q/K/V projections and output projection. A block is prefill
when its query has more than one position (compute-bound) and decode when it has one
(bandwidth-bound, usually reading a KV cache). Every prefill block is offered with every
decode block it is independent of (POD-Attention's pairing).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..costmodel import Target
from ..graph import ModelGraph
from ..profile import Engine, GraphProfile, engine_of
from .base import Candidate, KindDetail, PairKind
from .dag import DagFacts, independence_problem

CONTRIB_ATTENTION = {"Attention", "MultiHeadAttention", "GroupQueryAttention"}
_SCORE_OPS = {"Mul", "Div", "Add", "Where", "Cast", "Sub"}  # between QK^T and Softmax
_PROB_OPS = {"Cast", "Dropout", "Identity"}  # between Softmax and the V product
_OUT_OPS = {"Transpose", "Reshape", "Flatten"}  # between the V product and out-proj
MAX_BLOCK = 200


@dataclass(frozen=True)
class PrefillPositions(KindDetail):
    prefill_positions: int  # query positions of the prefill block


class PrefillDecode(PairKind):
    """A prefill attention block with a decode block it is independent of, fused as they are."""

    name = "prefill_decode"
    specificity = 2  # an attention pair is also a pair of branches: keep it as this kind

    def find(self, g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target) -> list[Candidate]:
        return find_prefill_decode(g, facts)


def find_prefill_decode(g: ModelGraph, facts: DagFacts) -> list[Candidate]:
    blocks = [b for b in _attention_blocks(g, facts) if b[1] is not None]
    prefill = [(nodes, q) for nodes, q in blocks if q > 1]
    decode = [(nodes, q) for nodes, q in blocks if q == 1]
    out = []
    for p_nodes, q_len in prefill:
        for d_nodes, _ in decode:
            if independence_problem(facts, p_nodes, d_nodes) is None:
                out.append(
                    Candidate(
                        PrefillDecode.name,
                        sorted(p_nodes),
                        sorted(d_nodes),
                        note=f"prefill ({q_len} query positions) with decode (1 position)",
                        detail=PrefillPositions(q_len),
                    )
                )
    return out


def _attention_blocks(g: ModelGraph, facts: DagFacts) -> list[tuple[set[int], int | None]]:
    blocks: list[tuple[set[int], int | None]] = []
    for i, n in enumerate(g.nodes):
        if n.domain == "com.microsoft" and n.op_type in CONTRIB_ATTENTION:
            shape = g.info(n.input[0]).shape
            q_len = shape[1] if shape and len(shape) >= 2 and isinstance(shape[1], int) else None
            block = _grow(g, facts, {i}, i)
            if block is not None:
                blocks.append((block, q_len))
        elif n.op_type == "Softmax" and n.domain in ("", "ai.onnx"):
            block = _pattern_block(g, facts, i)
            if block is not None:
                blocks.append(block)
    return blocks


def _pattern_block(g: ModelGraph, facts: DagFacts, softmax: int) -> tuple[set[int], int | None] | None:
    # Up from Softmax to the QK^T MatMul.
    core = [softmax]
    i = softmax
    while True:
        ps = facts.preds[i]
        data = [p for p in ps if g.nodes[p].op_type in _SCORE_OPS | {"MatMul"}]
        if not data:
            return None
        i = data[0]
        core.append(i)
        if g.nodes[i].op_type == "MatMul":
            break
        if len(core) > 6:
            return None
    qk = i
    if any(t in g.initializers for t in g.nodes[qk].input):
        return None  # a projection, not QK^T
    # Down from Softmax to the V product.
    i = softmax
    while True:
        users = facts.succs[i]
        if len(users) != 1:
            return None
        i = users[0]
        core.append(i)
        if g.nodes[i].op_type == "MatMul":
            break
        if g.nodes[i].op_type not in _PROB_OPS:
            return None
    block = _grow(g, facts, set(core), i)
    if block is None:
        return None
    q_shape = g.info(g.nodes[qk].input[0]).shape
    q_len = q_shape[-2] if q_shape and len(q_shape) >= 2 and isinstance(q_shape[-2], int) else None
    return block, q_len


def _grow(g: ModelGraph, facts: DagFacts, block: set[int], last: int) -> set[int] | None:
    """The attention core grown down to its output projection and up to its Q/K/V projections."""
    # Down from the attention output through layout ops to the output projection (and its bias).
    i = last
    while len(facts.succs[i]) == 1 and g.nodes[facts.succs[i][0]].op_type in _OUT_OPS | {"MatMul", "Gemm", "Add"}:
        i = facts.succs[i][0]
        block.add(i)
        if g.nodes[i].op_type in ("MatMul", "Gemm"):
            nxt = facts.succs[i]
            if len(nxt) == 1 and g.nodes[nxt[0]].op_type == "Add" and _has_constant_input(g, nxt[0]):
                block.add(nxt[0])
            break
    _grow_up(g, facts, block)
    if len(block) > MAX_BLOCK or not any(engine_of(g.nodes[j]) == Engine.MATRIX for j in block):
        return None
    return block


def _grow_up(g: ModelGraph, facts: DagFacts, block: set[int]) -> None:
    """Add producers whose outputs no node outside the block reads (graph outputs may), stopping
    after each projection (a MatMul/Gemm with a constant weight) so the block does not swallow the model."""
    frontier = sorted(block, reverse=True)
    stop = {j for j in block if _is_projection(g, j)}
    while frontier:
        j = frontier.pop()
        if j in stop:
            continue
        for p in facts.preds[j]:
            if p in block or len(block) > MAX_BLOCK:
                continue
            if not all(c in block for t in g.nodes[p].output for c in g.consumers.get(t, ())):
                continue
            block.add(p)
            if _is_projection(g, p):
                stop.add(p)
            frontier.append(p)


def _is_projection(g: ModelGraph, i: int) -> bool:
    return g.nodes[i].op_type in ("MatMul", "Gemm") and _has_constant_input(g, i)


def _has_constant_input(g: ModelGraph, i: int) -> bool:
    return any(t in g.initializers for t in g.nodes[i].input[1:])
