"""Pair kinds: each module of this package defines one `PairKind` subclass, found and registered
here by name (`KINDS`, in module order); `discover` runs the chosen kinds' finders.

Adding a pair kind: write `kinds/<name>.py` with a `PairKind` subclass setting `name` and
implementing `find(g, facts, profile, target) -> list[Candidate]` (`facts`: the shared DAG
analysis of dag.py; confirm a candidate with `dag.independence_problem`). Override `evaluate`
when the share is not all there is to choose (micro-batch also picks a split), with a
`KindDetail` subclass for what the candidate carries; `tasks` when the body is not the two node
sets as they are; `restore` when `unfuse` must do more than inline the body; `shorter` to offer
shorter candidates over a pair that failed verification; `specificity` when its node sets are also
found by another kind. Test it in tests/test_kind_<name>.py. Nothing else changes: the CLI's
--kinds, selection, rewrite, report and unfuse go through the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

from ..costmodel import Target
from ..graph import ModelGraph
from ..profile import GraphProfile
from .base import Candidate, KindDetail, Pair, PairKind
from .dag import DagFacts, dag_facts, independence_problem, shape_free

__all__ = ["KINDS", "Candidate", "Discovery", "KindDetail", "Pair", "PairKind", "discover", "kind_of"]

_SHARED = {"base", "blocks", "dag"}


def _load_kinds() -> dict[str, PairKind]:
    kinds: dict[str, PairKind] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _SHARED):
        loaded = importlib.import_module(f"{__name__}.{module}")
        for value in vars(loaded).values():
            if isinstance(value, type) and issubclass(value, PairKind) and value.__module__ == loaded.__name__:
                kinds[value.name] = value()
    return kinds


KINDS: dict[str, PairKind] = _load_kinds()


def kind_of(c: Candidate | Pair) -> PairKind:
    return KINDS[c.kind]


CandidateKey = tuple[bool, frozenset[frozenset[int]]]  # (a micro-batch chain, the two node sets)


@dataclass
class Discovery:
    """The candidates found, and how many were shape arithmetic only (`shape_free` left a task
    without other work, or left the tasks dependent): counted, not offered."""

    candidates: list[Candidate]
    shape_only: int = 0


def discover(g: ModelGraph, kinds: list[str], profile: GraphProfile, target: Target) -> Discovery:
    """All candidates of the given kinds, their shape arithmetic left outside (dag.shape_free); a node
    set found by two kinds is kept once (the more specific)."""
    facts = dag_facts(g)
    found: dict[CandidateKey, Candidate] = {}
    for name in kinds:
        for c in KINDS[name].find(g, facts, profile, target):
            _keep_once(found, c)
    kept: dict[CandidateKey, Candidate] = {}
    shape_only = 0
    for c in found.values():
        if _without_shape_arithmetic(facts, c):
            _keep_once(kept, c)
        else:
            shape_only += 1
    return Discovery(list(kept.values()), shape_only)


def _keep_once(found: dict[CandidateKey, Candidate], c: Candidate) -> None:
    """Add the candidate unless a kind at least as specific found its node sets."""
    key = (c.task_a == c.task_b, frozenset((frozenset(c.task_a), frozenset(c.task_b))))
    old = found.get(key)
    if old is None or KINDS[c.kind].specificity > KINDS[old.kind].specificity:
        found[key] = c


def _without_shape_arithmetic(facts: DagFacts, c: Candidate) -> bool:
    """Take out of the candidate's tasks the shape arithmetic they cannot fold (a micro-batch chain,
    run on two halves, stays whole); whether both still compute something else, independently."""
    if set(c.task_a) & set(c.task_b):
        return True
    a, b = shape_free(facts, c.task_a), shape_free(facts, c.task_b)
    if not all(any(not facts.shape_only[i] for i in t) for t in (a, b)):
        return False
    if (len(a), len(b)) != (len(c.task_a), len(c.task_b)) and independence_problem(facts, set(a), set(b)):
        return False
    c.task_a, c.task_b = a, b
    return True
