"""Independent branches: fork-join branches, separate input towers, parallel heads.

For every fork F (a node with several consumers, or the virtual SOURCE before all inputs)
the join J is F's immediate post-dominator. A branch is the dominator subtree of one of F's
children h in the dominator tree (every node that only h leads to), cut at J: h is a consumer
of F, or a merge of two branches (QK^T in attention, beside the V projection; a tower starting
at Mul(Gather(ids), mask) beside another reading the same mask). Dominator subtrees are
disjoint and convex. Candidates are: every pair of branches, every split of up to five
consumers' branches into two groups, and each of those against the rest of the fork region
(a merge's branch reads another, so never stands against all the rest). Each is confirmed by
`independence_problem`. Work is linear in the size of the fork regions visited, never
all-pairs over the graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from ..costmodel import Target
from ..graph import ModelGraph
from ..profile import Engine, GraphProfile, engine_of
from .base import Candidate, PairKind
from .cuts import halve
from .dag import SOURCE, DagFacts, independence_problem

MAX_BRANCHES = 8  # a fork with more consumers' (or merges') branches pairs only the first and largest
MAX_REGION = 4000  # nodes in one fork region considered
MAX_GROUPED = 5  # branches split into two groups only up to this many


class Branches(PairKind):
    """Two independent branches (or groups of branches) of one fork, fused as they are."""

    name = "branches"

    def find(self, g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target) -> list[Candidate]:
        return find_branches(g, facts)

    def shorter(self, g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> list[Candidate]:
        """Each branch cut in two near its modelled middle, first half with first half and second
        with second: two heads whose scratch overflows the kernel's arena together (spindle_eeg's,
        4.58 + 3.66 MiB of 8) fit as two pairs, and a long chain refused by verification is offered
        shorter; a refused half is halved again in turn. Halves of independent branches stay
        independent, and a topological cut of a convex task leaves both halves convex."""
        halves_a, halves_b = halve(g, profile, c.task_a, target), halve(g, profile, c.task_b, target)
        if halves_a is None or halves_b is None:
            return []
        notes = (f"{c.note}, first halves", f"{c.note}, second halves")
        return [Candidate(self.name, a, b, note=n) for a, b, n in zip(halves_a, halves_b, notes)]


def find_branches(g: ModelGraph, facts: DagFacts) -> list[Candidate]:
    children = _dominator_children(facts)
    out: list[Candidate] = []
    for fork, join, branches, merges in _working_forks(g, facts, children):
        where = _fork_name(g, fork, join)
        every = sorted(branches + merges, key=min)
        groups: list[tuple[set[int], set[int]]] = [(a, b) for a, b in combinations(every, 2)]
        if 3 <= len(branches) <= MAX_GROUPED:
            groups += _bipartitions(branches)
        region = _subtree(children, fork, join, include_root=False) if fork != SOURCE else None
        if region is not None:
            groups += [(b, region - b) for b in branches if _has_work(g, region - b)]
        seen: set[frozenset[int]] = set()
        for a, b in groups:
            key = frozenset(a) | frozenset(-1 - i for i in b)
            if key in seen or independence_problem(facts, a, b) is not None:
                continue
            seen.add(key)
            first, second = (a, b) if min(a) < min(b) else (b, a)
            out.append(Candidate(Branches.name, sorted(first), sorted(second), note=where))
    return out


def has_working_fork(g: ModelGraph, facts: DagFacts) -> bool:
    """Whether some fork has two branches that both compute (not a chain whose forks are residual
    Adds, gates or x * f(x): one branch of each is the tensor itself)."""
    return next(_working_forks(g, facts, _dominator_children(facts)), None) is not None


def _working_forks(
    g: ModelGraph, facts: DagFacts, children: dict[int, list[int]]
) -> Iterator[tuple[int, int, list[set[int]], list[set[int]]]]:
    """(fork, join, the branches its consumers head, the branches its merges head) of every fork
    with at least two branches that compute. A merge is a dominator-tree child of the fork that is
    none of its consumers: it reads two branches (attention's QK^T; a tower starting at
    Mul(Gather(ids), mask) beside another reading the same mask), so its subtree runs beside the
    others' but never beside all the branches it reads."""
    for fork in sorted(children):
        join = facts.source_ipdom if fork == SOURCE else facts.ipdom[fork]
        heads = [h for h in children[fork] if h < join]
        if len(heads) < 2:
            continue
        subtrees = {h: _subtree(children, h, join) for h in heads}
        working = [h for h in heads if subtrees[h] and _has_work(g, subtrees[h])]
        branches = _first_and_largest([subtrees[h] for h in working if _consumes(facts, fork, h)])
        merges = _first_and_largest(
            [subtrees[h] for h in working if not _consumes(facts, fork, h) and not _shapes_only(facts, subtrees[h])]
        )
        if len(branches) + len(merges) >= 2:
            yield fork, join, branches, merges


def _consumes(facts: DagFacts, fork: int, head: int) -> bool:
    return fork in facts.preds[head] if fork != SOURCE else not facts.preds[head]


def _shapes_only(facts: DagFacts, nodes: set[int]) -> bool:
    """A merge of shape arithmetic alone (torch's Concat of dims) is the shape, never a task."""
    return all(facts.shape_only[i] for i in nodes)


def _dominator_children(facts: DagFacts) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for i, d in enumerate(facts.idom):
        if not facts.const[i]:
            children.setdefault(d, []).append(i)
    return children


def _subtree(children: dict[int, list[int]], root: int, join: int, include_root: bool = True) -> set[int]:
    """Dominator subtree of root, cut at the join; empty when it grows too big, or when a branch
    head (include_root) dominates the join, as it then is no branch beside others."""
    nodes: set[int] = {root} if include_root else set()
    stack = list(children.get(root, ()))
    while stack:
        i = stack.pop()
        if i >= join:
            if i == join and include_root:
                return set()
            continue
        nodes.add(i)
        if len(nodes) > MAX_REGION:
            return set()
        stack.extend(children.get(i, ()))
    return nodes


def _first_and_largest(branches: list[set[int]]) -> list[set[int]]:
    """The first MAX_BRANCHES branches and the MAX_BRANCHES largest, in graph order (captcha_crnn's
    bidirectional LSTM: its backward direction is the 22nd consumer of the fork, after 21 steps of
    the forward one). Dominator subtrees are disjoint, so finding them all is linear in the region."""
    largest = sorted(branches, key=len, reverse=True)[:MAX_BRANCHES]
    chosen = {min(b): b for b in branches[:MAX_BRANCHES] + largest}
    return [chosen[k] for k in sorted(chosen)]


def _has_work(g: ModelGraph, nodes: set[int]) -> bool:
    return any(engine_of(g.nodes[i]) != Engine.NONE for i in nodes)


def _bipartitions(branches: list[set[int]]) -> list[tuple[set[int], set[int]]]:
    """Every split of the branches into two non-empty groups (the first branch always in group A)."""
    out = []
    for mask in range(1, 2 ** (len(branches) - 1)):
        a, b = set(branches[0]), set[int]()
        for j, branch in enumerate(branches[1:]):
            (b if mask >> j & 1 else a).update(branch)
        out.append((a, b))
    return out


def _fork_name(g: ModelGraph, fork: int, join: int) -> str:
    f = "the graph inputs" if fork == SOURCE else f"'{g.nodes[fork].name or g.nodes[fork].output[0]}'"
    j = "the graph outputs" if join >= len(g.nodes) else f"'{g.nodes[join].name or g.nodes[join].output[0]}'"
    return f"fork {f} -> join {j}"
