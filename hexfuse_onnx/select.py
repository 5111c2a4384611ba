"""Score every candidate with the cost model and choose pairs that share no node.

A candidate is kept when it takes QDQ groups whole (`qdq`: its tasks are extended by the Q/DQ
nodes of their groups first), both tasks are profiled, every op is one the kernel runs (the full
lowering, before the rewrite, can still refuse an attribute), its kind's evaluation finds a
share (and split) whose working sets fit on chip together, and the predicted gain reaches
`min_gain` after the target's fixed cost of a kernel call (`Target.call_overhead_s`): a pair
is kept when serial - (fused + call) >= min_gain * serial, so its saving beats the call.
Complementarity (how differently the two tasks load the engines) is reported; a same-engine
pair is kept only on a predicted gain, which the shared gain threshold already demands. Chosen
greedily by predicted time saved after the call, then improved by exchanging a chosen pair for
the candidates it blocked when they save more together (`_exchanged`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .costmodel import Target
from .graph import ModelGraph
from .kinds import Candidate, Pair, kind_of
from .lowering import LoweringError, op_outside_kernel
from .profile import GraphProfile
from .qdq import close_groups, is_dq_node, release_foreign, split_group

DEFAULT_MIN_GAIN = 0.02


@dataclass
class Rejection:
    """Why a candidate was not chosen; `blocker` names what stopped it from lowering (the op and
    why), the same for every candidate the same op stops, so reports can count them."""

    candidate: Candidate
    reason: str
    blocker: str = ""
    grown: bool = False  # failed only as a right pair's difference grown by the model after it: no shorter pair


def blocker_of(error: LoweringError) -> str:
    """The op and reason of a lowering error without the node's or its tensors' names: "Sin outside
    the kernel", "com.microsoft::FastGelu outside the kernel", "Cast: Cast from INT64 to FLOAT: the
    kernel runs float32 only", "Unsqueeze: a tensor is not float32 (...)"."""
    if error.reason.startswith("op is outside the kernel"):
        return f"{error.op} outside the kernel"
    if error.reason.startswith("domain '"):  # "domain 'com.microsoft' is outside ..."
        return f"{error.reason.split(chr(39))[1]}::{error.op} outside the kernel"
    return f"{error.op}: {_without_tensor_names(error.reason)}"


def _without_tensor_names(reason: str) -> str:
    """flan-t5's decoder: 566 rejections listed as 30 blockers, one per Gather output's name."""
    reason = re.sub(r"(?<!formal )\b(input|output) '[^']*'", r"an \1", reason)
    reason = re.sub(r"\bof '[^']*'", "of a tensor", reason)
    return re.sub(r"^'[^']*'", "a tensor", reason)


def select(
    g: ModelGraph,
    profile: GraphProfile,
    candidates: list[Candidate],
    target: Target,
    min_gain: float = DEFAULT_MIN_GAIN,
    evaluated: dict[int, Pair | Rejection | str] | None = None,
) -> tuple[list[Pair], list[Rejection]]:
    """`evaluated`: each candidate's evaluation by id(), kept across the re-selections of one pass."""
    scored: list[Pair] = []
    rejected: list[Rejection] = []
    evaluated = {} if evaluated is None else evaluated
    for c in candidates:
        if id(c) not in evaluated:
            evaluated[id(c)] = evaluate(g, profile, c, target)
        result = evaluated[id(c)]
        if isinstance(result, (str, Rejection)):
            rejected.append(result if isinstance(result, Rejection) else Rejection(c, result))
        else:
            why = below_the_bar(result, min_gain)
            if why:
                rejected.append(Rejection(c, why))
            else:
                scored.append(result)
    ranked = sorted(scored, key=lambda p: (-p.saved, min(p.candidate.nodes)))
    chosen = _exchanged(g, ranked, _greedy(g, ranked, []))
    taken = {i for p in chosen for i in p.candidate.nodes}
    for pair in ranked:
        if not any(pair is p for p in chosen):
            rejected.append(Rejection(pair.candidate, OVERLAP if taken & pair.candidate.nodes else CYCLE))
    return _settled(g, profile, chosen, rejected, target)


def _greedy(g: ModelGraph, ranked: list[Pair], fixed: list[Pair]) -> list[Pair]:
    """`fixed`, then each of `ranked` (best saving first) that shares no node with those before it and
    leaves the graph acyclic with them."""
    chosen = list(fixed)
    taken = {i for p in chosen for i in p.candidate.nodes}
    for pair in ranked:
        if taken & pair.candidate.nodes:
            continue
        if chosen and not _known_acyclic(g, [p.candidate.nodes for p in chosen] + [pair.candidate.nodes]):
            continue
        taken |= pair.candidate.nodes
        chosen.append(pair)
    _groupings(g).acyclic.append(frozenset(p.candidate.nodes for p in chosen))
    return chosen


@dataclass
class Groupings:
    """Groupings of a graph's nodes known to leave it acyclic (each greedy choice) and known not to, kept
    across re-selections, so one that drops a pair asks acyclic_with only past its place (moonshine_tiny_
    decoder at 0 us: 1775 checks of 1100-node graphs over 8 re-selections, 2.5 s). Merging the nodes of one
    more group only joins paths: a grouping within an acyclic one is acyclic, one holding a cyclic one is
    cyclic, where the groups between the two are plain (`_plain`); a group reading a DequantizeLinear from
    outside it waits on what that reads instead, which may cut a cycle."""

    acyclic: list[frozenset[frozenset[int]]] = field(default_factory=list)
    cyclic: list[frozenset[frozenset[int]]] = field(default_factory=list)
    plain: dict[frozenset[int], bool] = field(default_factory=dict)


def _groupings(g: ModelGraph) -> Groupings:
    if g.groupings is None:
        g.groupings = Groupings()
    known: Groupings = g.groupings
    return known


def _known_acyclic(g: ModelGraph, groups: list[frozenset[int]]) -> bool:
    """acyclic_with, answered from the groupings known where they decide it."""
    known, grouping = _groupings(g), frozenset(groups)
    if any(grouping <= a and _plain(g, known, a - grouping) for a in reversed(known.acyclic)):
        return True
    if any(c <= grouping and _plain(g, known, grouping - c) for c in known.cyclic):
        return False
    if acyclic_with(g, groups):
        return True
    known.cyclic.append(grouping)
    return False


def _plain(g: ModelGraph, known: Groupings, groups: frozenset[frozenset[int]]) -> bool:
    """Whether no node of these groups reads a DequantizeLinear outside its group."""
    for nodes in groups:
        if nodes not in known.plain:
            reads = (p for i in nodes for p in g.pred_ids[i] if p not in nodes)
            known.plain[nodes] = not any(is_dq_node(g.nodes[p]) for p in reads)
        if not known.plain[nodes]:
            return False
    return True


def _exchanged(g: ModelGraph, ranked: list[Pair], chosen: list[Pair]) -> list[Pair]:
    """The greedy choice improved by exchanges: a chosen pair is replaced by the candidates it alone
    blocked (the disjoint ones saving most: `_instead`) when together they save more, until none
    does. Each exchange raises the total saving, so it ends; only a pair whose blocked candidates
    could save more in sum, and are at most EXACT_LIMIT, is searched. basic_pitch at 0 us: one
    14+159-node pair (84.1 us) was taken over 8 smaller pairs on its nodes that save 136.0 us together."""
    nodes = {id(p): p.candidate.nodes for p in ranked}  # a Candidate makes its set at every call
    improved = True
    while improved:
        improved = False
        for k, pair in enumerate(chosen):
            rest = chosen[:k] + chosen[k + 1 :]
            taken = {i for p in rest for i in nodes[id(p)]}
            blocked = [p for p in ranked if p is not pair and nodes[id(p)] & nodes[id(pair)] - taken]
            blocked = [p for p in blocked if not taken & nodes[id(p)]]
            if len(blocked) > EXACT_LIMIT or sum(p.saved for p in blocked) <= pair.saved:
                continue
            instead = _instead(g, blocked, rest, pair.saved)
            if instead and sum(p.saved for p in instead) > pair.saved:  # a losing pair (min_gain < 0) stays
                order = {id(p): n for n, p in enumerate(ranked)}
                chosen, improved = sorted(rest + instead, key=lambda p: order[id(p)]), True
                break
    return chosen


def _settled(
    g: ModelGraph, profile: GraphProfile, chosen: list[Pair], rejected: list[Rejection], target: Target
) -> tuple[list[Pair], list[Rejection]]:
    """The chosen pairs less those their kinds drop for what no pair's own score sees (PairKind.settle)."""
    drop: dict[int, str] = {}
    for kind in {kind_of(p.candidate) for p in chosen}:
        drop |= kind.settle(g, profile, chosen, target)
    rejected += [Rejection(chosen[k].candidate, why) for k, why in sorted(drop.items())]
    return [p for k, p in enumerate(chosen) if k not in drop], rejected


def _instead(g: ModelGraph, blocked: list[Pair], rest: list[Pair], beat: float) -> list[Pair]:
    """What to take of `blocked` (ranked) beside `rest`: the disjoint subset saving most (`_best_disjoint`)
    when the graph stays acyclic with it, else the greedy choice among them; [] when the best saves no
    more than `beat` (no choice among them does) or the search gave up."""
    best = _best_disjoint(blocked)
    if best is None or sum(p.saved for p in best) <= beat:
        return []
    if _known_acyclic(g, [p.candidate.nodes for p in rest + best]):
        return best
    return _greedy(g, blocked, rest)[len(rest) :]


# A chosen pair blocking more candidates than this keeps its place unsearched (captcha_crnn at 0 us: a
# 614-node pair blocks 702, where the search and the cycle checks took 0.3-0.4 s a selection).
EXACT_LIMIT = 32
SEARCH_BUDGET = 5000  # steps of _best_disjoint's search before it gives up (the greedy choice stands)


def _best_disjoint(ranked: list[Pair]) -> list[Pair] | None:
    """The subset of `ranked` sharing no node that saves most, by branch and bound (a branch ends when
    the candidates still free of its nodes cannot beat the best); None past SEARCH_BUDGET steps.
    basic_pitch at 0 us: the 16 candidates its 14+159-node pair blocked hold 8 disjoint ones saving
    136 us to its 84."""
    sets = [p.candidate.nodes for p in ranked]
    saved = [max(p.saved, 0.0) for p in ranked]
    best_total, best, steps = 0.0, [], 0

    def walk(k: int, taken: frozenset[int], total: float, picked: list[Pair]) -> bool:
        """False when the budget ran out."""
        nonlocal best_total, best, steps
        steps += 1
        if total > best_total:
            best_total, best = total, picked
        free = [j for j in range(k, len(ranked)) if not taken & sets[j]]
        if not free or total + sum(saved[j] for j in free) <= best_total:
            return steps <= SEARCH_BUDGET
        j = free[0]
        if not walk(j + 1, taken | sets[j], total + ranked[j].saved, [*picked, ranked[j]]):
            return False
        return steps <= SEARCH_BUDGET and walk(j + 1, taken, total, picked)

    return best if walk(0, frozenset(), 0.0, []) else None


OVERLAP = "overlaps a better pair"
CYCLE = "waits on a better pair that waits on it (fused together they would form a cycle)"


def acyclic_with(g: ModelGraph, groups: list[frozenset[int]] | list[set[int]]) -> bool:
    """Whether the main graph stays acyclic with each group of nodes made one node (a FusedHexPair).
    Two pairs can each hold a node the other's nodes wait on: prefill_decode pairs layer i of a
    Whisper encoder with the i-th attention of a decoder step, which has two per layer, so layer 1's
    attention paired with layer 0's cross-attention while both layers 0's MLPs paired. A group reads
    a DequantizeLinear made outside it through its own copy (kinds.base.with_dequantize_copies), so
    it waits on what that DequantizeLinear reads, not on the node: counted as the node, a pair of
    ppocr_cls u16u8 x2 whose Q -> DQ -> Conv leaves the pair at the DQ looked circular alone."""
    n = len(g.nodes)
    rep = list(range(n))
    for k, nodes in enumerate(groups):
        for i in nodes:
            rep[i] = n + k
    succs: dict[int, set[int]] = {}
    indegree = dict.fromkeys(set(rep), 0)
    for i in range(n):
        for p in _waited_on(g, rep, i):
            a, b = rep[p], rep[i]
            if a != b and b not in succs.setdefault(a, set()):
                succs[a].add(b)
                indegree[b] += 1
    ready = [v for v, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in succs.get(v, ()):
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return seen == len(indegree)


def _waited_on(g: ModelGraph, rep: list[int], i: int) -> list[int]:
    """The nodes node i waits on: a grouped node reads its own copy of a DequantizeLinear outside its
    group, so it waits on that node's producers instead."""
    if rep[i] == i:
        return g.pred_ids[i]
    out = []
    for p in g.pred_ids[i]:
        copied = rep[p] != rep[i] and is_dq_node(g.nodes[p])
        out += g.pred_ids[p] if copied else [p]
    return out


def below_the_bar(pair: Pair, min_gain: float) -> str:
    """Why the pair does not pay for its kernel call by `min_gain`, or "" when it does. With
    min_gain >= 0 a kept pair's saving beats the call; a negative one (calibration measures
    losing pairs too) keeps pairs that lose."""
    p = pair.prediction
    if p.gain >= min_gain:
        return ""
    saved, serial, call = (p.serial - p.fused) * 1e6, p.serial * 1e6, p.call * 1e6
    figures = f"fusing saves {saved:.1f} us of {serial:.1f} us, a call costs {call:.1f} us"
    if p.serial - p.fused < p.call:
        return f"saving below the call overhead: {figures}"
    digits = 2 if f"{p.gain:.1%}" == f"{min_gain:.1%}" else 1  # 1.95% is not shown as 2.0% under a 2.0% bar
    return f"predicted gain below --min-gain {min_gain:.1%}: {p.gain:.{digits}%} after the call ({figures})"


def evaluate(g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> Pair | Rejection | str:
    """The candidate's best pair (its kind chooses share and split), or why it cannot be one."""
    split = take_whole_groups(g, c)
    if split is not None:
        return f"splits a QDQ group: {split}"
    dead = dead_task(g, c)
    if dead is not None:
        return dead
    missing = next((i for i in sorted(c.nodes) if i in profile.unprofiled), None)
    if missing is not None:
        return f"not profiled: {g.describe(missing)}: {profile.unprofiled[missing]}"
    outside = next((e for e in (op_outside_kernel(g.nodes[i]) for i in sorted(c.nodes)) if e), None)
    if outside is not None:
        return Rejection(c, f"does not lower: {outside.message}", blocker_of(outside))
    return kind_of(c).evaluate(g, profile, c, target)


def dead_task(g: ModelGraph, c: Candidate) -> str | None:
    """Why a task is not worth fusing when the rest of the graph reads nothing it makes (an exporter's
    leftovers: ddddocr_ocr's quantized LSTM Y_h and Y_c, each dequantized for no reader); None when
    both make something read. A pair of two such tasks made a FusedHexPair node without outputs,
    which the plugin's schema refuses."""
    outputs = set(g.graph_outputs)
    for label, ids in (("A", c.task_a), ("B", c.task_b)):
        inside = set(ids)
        made = [t for i in ids for t in g.nodes[i].output if t]
        if ids and not any(t in outputs or any(k not in inside for k in g.consumers.get(t, ())) for t in made):
            return f"task {label} makes nothing the graph reads (dead nodes, the first {g.describe(min(ids))})"
    return None


def take_whole_groups(g: ModelGraph, c: Candidate) -> str | None:
    """Give the candidate's tasks the Q/DQ nodes of their own QDQ groups and no others (two
    disjoint node sets without kind details only), then say which group a task still splits, or None."""
    if c.detail is None and not set(c.task_a) & set(c.task_b):
        a, b = release_foreign(g, c.task_a), release_foreign(g, c.task_b)
        c.task_a = close_groups(g, a, b)
        c.task_b = close_groups(g, b, c.task_a)
    return split_group(g, c.task_a) or split_group(g, c.task_b)
