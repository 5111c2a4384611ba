"""DAG facts the discoveries share: constant nodes, dominators, and the pair check.

Node ids are topological positions, so "a before b" is `a < b`. Dominators use a virtual
SOURCE (-1) before every node without producers and a virtual SINK (n) after every node
that feeds a graph output or nothing; both are computed in one pass each (Cooper, Harvey,
Kennedy's intersect walk, which is linear in practice on a DAG in topological order).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import ModelGraph

SOURCE = -1
NONDETERMINISTIC = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}


@dataclass
class DagFacts:
    """Dependency structure with constant-foldable nodes left out."""

    g: ModelGraph
    const: list[bool]  # node computes only from initializers/constants
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
        if node.op_type in NONDETERMINISTIC:
            continue
        const[i] = all(t in g.initializers or (t in g.producer and const[g.producer[t]]) for t in g.node_inputs[i])
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
    return DagFacts(g, const, preds, succs, idom, ipdom, source_ipdom)


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
