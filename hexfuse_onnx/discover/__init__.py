"""Candidate pairs of tasks: one module per kind of pair, and a registry that runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..contract import KIND_BRANCHES, KIND_COLOCATE, KIND_MICROBATCH, KIND_PREFILL_DECODE
from ..graph import ModelGraph
from .dag import DagFacts, dag_facts


@dataclass
class Candidate:
    """Two tasks that may run fused. Node ids index `ModelGraph.nodes`.

    For a micro-batch candidate both tasks are the same chain (`task_a == task_b`), run on
    two slices of the batch; `batch` and `axis` say which.
    """

    kind: str
    task_a: list[int]
    task_b: list[int]
    note: str = ""
    detail: dict = field(default_factory=dict)

    @property
    def nodes(self) -> frozenset[int]:
        return frozenset(self.task_a) | frozenset(self.task_b)


Finder = Callable[[ModelGraph, DagFacts], list[Candidate]]


def finders() -> dict[str, Finder]:
    from . import branches, colocate, microbatch, prefill_decode

    return {
        KIND_BRANCHES: branches.find,
        KIND_MICROBATCH: microbatch.find,
        KIND_PREFILL_DECODE: prefill_decode.find,
        KIND_COLOCATE: colocate.find,
    }


def discover(g: ModelGraph, kinds: list[str]) -> list[Candidate]:
    """All candidates of the given kinds; a node set found by two kinds is kept once (the more specific)."""
    facts = dag_facts(g)
    table = finders()
    found: dict[tuple[bool, frozenset[frozenset[int]]], Candidate] = {}
    specificity = {KIND_COLOCATE: 3, KIND_PREFILL_DECODE: 2, KIND_MICROBATCH: 1, KIND_BRANCHES: 0}
    for kind in kinds:
        for c in table[kind](g, facts):
            key = (c.kind == KIND_MICROBATCH, frozenset((frozenset(c.task_a), frozenset(c.task_b))))
            old = found.get(key)
            if old is None or specificity[c.kind] > specificity[old.kind]:
                found[key] = c
    return list(found.values())
