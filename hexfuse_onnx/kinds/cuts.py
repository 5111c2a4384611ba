"""Where a task may be cut in two: never inside a QDQ group (an op and the QuantizeLinear of its
outputs stay together), never between an IsNaN and the Where that reads it (the kernel runs the two
as one op). Used by the kinds that offer shorter pairs over a refused one's span, and by the
alignment of colocated streams."""

from __future__ import annotations

from ..costmodel import Target, task_time
from ..graph import ModelGraph
from ..lowering import replaces_nan
from ..profile import GraphProfile, TaskProfile
from ..qdq import is_dq, is_q, release_foreign


def node_time(profile: GraphProfile, i: int, target: Target) -> float:
    """Modelled time of one node run alone (0 for a node that could not be profiled)."""
    if i in profile.unprofiled:
        return 0.0
    return task_time(TaskProfile.of([profile.nodes[i]]), target)


def nan_test(g: ModelGraph, i: int | None) -> bool:
    """Node i is an IsNaN read only by Where(IsNaN(x), c, x) nodes, which the kernel runs as one op."""
    if i is None or g.nodes[i].op_type != "IsNaN" or g.nodes[i].output[0] in g.graph_outputs:
        return False
    readers = g.consumers.get(g.nodes[i].output[0], ())
    return bool(readers) and all(replaces_nan(g.nodes[r], g.nodes[i]) for r in readers)


def inside_groups(g: ModelGraph, side: list[int]) -> set[int]:
    """The nodes of the side a unit may not start at: those after an op of a QDQ group and up to
    its last QuantizeLinear, so that an op and the Q of its outputs stay in one unit."""
    position = {i: k for k, i in enumerate(side)}
    inside: set[int] = set()
    for k, i in enumerate(side):
        if not is_q(g, i) or not g.node_inputs[i] or g.node_inputs[i][0] not in g.producer:
            continue
        op = g.producer[g.node_inputs[i][0]]
        if op in position and not is_dq(g, op):
            inside.update(side[position[op] + 1 : k + 1])
    return inside


def halve(g: ModelGraph, profile: GraphProfile, task: list[int], target: Target) -> tuple[list[int], list[int]] | None:
    """The task (in topological order) cut in two where the modelled time is nearest its middle,
    never inside a QDQ group nor between an IsNaN and its Where; each half without the Q/DQ nodes
    that would split a group (qdq.release_foreign). None when there is no such cut."""
    inside = inside_groups(g, task)
    times = [node_time(profile, i, target) for i in task]
    total, acc, best = sum(times), 0.0, None
    for k in range(1, len(task)):
        acc += times[k - 1]
        if task[k] in inside or nan_test(g, task[k - 1]):
            continue
        if best is None or abs(acc - total / 2) < abs(best[1] - total / 2):
            best = (k, acc)
    if best is None:
        return None
    return release_foreign(g, task[: best[0]]), release_foreign(g, task[best[0] :])
