"""DAG facts the discoveries share: constant nodes, shape arithmetic, dominators, and the pair check.

Node ids are topological positions, so "a before b" is `a < b`. Dominators use a virtual
SOURCE (-1) before every node without producers and a virtual SINK (n) after every node
that feeds a graph output or nothing; both are computed in one pass each (Cooper, Harvey,
Kennedy's intersect walk, which is linear in practice on a DAG in topological order).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ..graph import ModelGraph
from ..random_ops import RANDOM_OPS

SOURCE = -1
SHAPE_SOURCES = {"Shape", "Size"}
SHAPE_DTYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL}


@dataclass
class DagFacts:
    """Dependency structure with constant-foldable nodes left out."""

    g: ModelGraph
    const: list[bool]  # node computes only from initializers/constants
    shape_only: list[bool]  # node computes only shapes (`shape_arithmetic`)
    preds: list[list[int]]  # non-constant producer nodes
    succs: list[list[int]]
    idom: list[int]  # immediate dominator (SOURCE for roots)
    ipdom: list[int]  # immediate post-dominator (SINK = n for exits)
    source_ipdom: int  # the join of the virtual SOURCE fork

    @property
    def sink(self) -> int:
        return len(self.g.nodes)


def dag_facts(g: ModelGraph) -> DagFacts:
    n = len(g.nodes)
    const = [False] * n
    for i, node in enumerate(g.nodes):
        if node.op_type in RANDOM_OPS:
            continue
        const[i] = all(_constant(g, const, t) for t in g.node_inputs[i])
    preds = [[p for p in g.pred_ids[i] if not const[p]] if not const[i] else [] for i in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for p in preds[i]:
            succs[p].append(i)
    outputs = set(g.graph_outputs)

    idom = [SOURCE] * n
    for i in range(n):
        if const[i] or not preds[i]:
            continue
        d = preds[i][0]
        for p in preds[i][1:]:
            d = _intersect_up(idom, d, p)
        idom[i] = d

    sink = n
    ipdom = [sink] * n
    for i in range(n - 1, -1, -1):
        if const[i]:
            continue
        exits_to_sink = not succs[i] or any(t in outputs for t in g.nodes[i].output)
        if exits_to_sink:
            continue  # ipdom stays SINK
        d = succs[i][0]
        for s in succs[i][1:]:
            d = _intersect_down(ipdom, d, s, sink)
        ipdom[i] = d
    roots = [i for i in range(n) if not const[i] and not preds[i]]
    source_ipdom = sink
    if roots:
        source_ipdom = roots[0]
        for r in roots[1:]:
            source_ipdom = _intersect_down(ipdom, source_ipdom, r, sink)
    return DagFacts(g, const, shape_arithmetic(g, const), preds, succs, idom, ipdom, source_ipdom)


def shape_arithmetic(g: ModelGraph, const: list[bool]) -> list[bool]:
    """Which computed nodes only compute shapes: a Shape or Size, and a node making integer or boolean
    scalars or 1-D tensors from those and constants alone (torch's Shape -> Gather -> Unsqueeze ->
    Concat -> Reshape, its Size -> Sub -> Greater -> If). They run where they are, on stock ORT, at no
    cost in the model; in a task they are folded when lowering, and a task cannot make them for
    others (`shape_free`)."""
    out = [False] * len(g.nodes)
    for i, node in enumerate(g.nodes):
        if const[i]:
            continue
        if node.op_type in SHAPE_SOURCES and node.domain in ("", "ai.onnx"):
            out[i] = True
            continue
        infos = [g.info(t) for t in node.output if t]
        small = all(t.elem_type in SHAPE_DTYPES and t.shape is not None and len(t.shape) <= 1 for t in infos)
        out[i] = bool(infos) and small and all(_from_shapes(g, const, out, t) for t in g.node_inputs[i] if t)
    return out


def _from_shapes(g: ModelGraph, const: list[bool], shape_only: list[bool], t: str) -> bool:
    return _constant(g, const, t) or (t in g.producer and shape_only[g.producer[t]])


def _constant(g: ModelGraph, const: list[bool], t: str) -> bool:
    return t in g.initializers or (t in g.producer and const[g.producer[t]])


def shape_free(facts: DagFacts, ids: list[int]) -> list[int]:
    """The task without the shape arithmetic it cannot fold itself: a node making a shape another
    task or the graph reads, or reading one made outside (the lowering writes no integer tensor from
    a shape and folds only what it computes inside). Such nodes stay outside, as in the original."""
    g, task = facts.g, set(ids)
    pending = [i for i in ids if facts.shape_only[i]]
    while pending:
        i = pending.pop()
        if i not in task or _folds_inside(g, facts, task, i):
            continue
        task.discard(i)
        pending += [j for j in g.pred_ids[i] + g.succ_ids[i] if j in task and facts.shape_only[j]]
    return sorted(task)


def _folds_inside(g: ModelGraph, facts: DagFacts, task: set[int], i: int) -> bool:
    """Whether shape-arithmetic node i of the task is computed and read inside it only."""
    node = g.nodes[i]
    outputs = set(g.graph_outputs)
    if any(t in outputs or any(c not in task for c in g.consumers.get(t, ())) for t in node.output if t):
        return False
    if node.op_type in SHAPE_SOURCES:
        return True
    return all(_constant(g, facts.const, t) or g.producer.get(t) in task for t in g.node_inputs[i] if t)


def _intersect_up(idom: list[int], a: int, b: int) -> int:
    while a != b:
        while a > b:
            a = idom[a]
        while b > a:
            b = idom[b]
    return a


def _intersect_down(ipdom: list[int], a: int, b: int, sink: int) -> int:
    while a != b:
        while a < b:
            a = ipdom[a]
        while b < a:
            b = ipdom[b]
    return a


def independence_problem(facts: DagFacts, a: set[int], b: set[int]) -> str | None:
    """Why the node sets a and b cannot run as two independent tasks, or None when they can.

    They can when no path joins them in either direction and each is convex (no path leaves
    the set and comes back). Any such path lies between the sets' first and last node in
    topological order, so one forward sweep over that range decides it.
    """
    if not a or not b:
        return "an empty task"
    if a & b:
        return "the tasks share nodes"
    lo, hi = min(min(a), min(b)), max(max(a), max(b))
    # bit 1: reachable from A; bit 2: reachable from A through a node outside A; bits 4/8: same for B
    state: dict[int, int] = {}
    for i in range(lo, hi + 1):
        if facts.const[i]:
            continue
        incoming = 0
        for p in facts.preds[i]:
            incoming |= state.get(p, 0)
        in_a, in_b = i in a, i in b
        if in_a and incoming & 2:
            return "task A is not convex (a path leaves it and re-enters)"
        if in_b and incoming & 8:
            return "task B is not convex (a path leaves it and re-enters)"
        if in_b and incoming & 1:
            return "a path leads from task A to task B"
        if in_a and incoming & 4:
            return "a path leads from task B to task A"
        s = 0
        if in_a:
            s |= 1
        elif incoming & 1:
            s |= 3
        if in_b:
            s |= 4
        elif incoming & 4:
            s |= 12
        if s:
            state[i] = s
    return None
