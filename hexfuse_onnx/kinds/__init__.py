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

from ..costmodel import Target
from ..graph import ModelGraph
from ..profile import GraphProfile
from .base import Candidate, KindDetail, Pair, PairKind
from .dag import dag_facts

__all__ = ["KINDS", "Candidate", "KindDetail", "Pair", "PairKind", "discover", "kind_of"]

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


def discover(g: ModelGraph, kinds: list[str], profile: GraphProfile, target: Target) -> list[Candidate]:
    """All candidates of the given kinds; a node set found by two kinds is kept once (the more specific)."""
    facts = dag_facts(g)
    found: dict[tuple[bool, frozenset[frozenset[int]]], Candidate] = {}
    for name in kinds:
        for c in KINDS[name].find(g, facts, profile, target):
            key = (c.task_a == c.task_b, frozenset((frozenset(c.task_a), frozenset(c.task_b))))
            old = found.get(key)
            if old is None or KINDS[c.kind].specificity > KINDS[old.kind].specificity:
                found[key] = c
    return list(found.values())
