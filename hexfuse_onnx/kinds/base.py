"""What every pair kind shares: candidates, pairs, the task bodies of a pair, and `PairKind`.

A kind finds candidates (two node sets of the ModelGraph), evaluates one into a Pair (work
share and any split chosen by the cost model) or a rejection reason, builds the pair's two
task bodies for its FusedHexPair node, and restores the original nodes when `unfuse` inlines
the body. `PairKind` implements the common case: two disjoint node sets fused as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import onnx

from ..costmodel import Prediction, Target, complementarity, fits, predict
from ..graph import ModelGraph, TensorInfo
from ..profile import GraphProfile, TaskProfile
from ..qdq import is_dq
from .dag import DagFacts

SHARED_INPUT_SUFFIX = "__b"

if TYPE_CHECKING:
    from ..buckets import ShareTable


@dataclass(frozen=True)
class KindDetail:
    """Facts about a candidate only its kind reads (a subclass per kind that needs any)."""


@dataclass
class Candidate:
    """Two tasks that may run fused. Node ids index `ModelGraph.nodes`; `kind` names the PairKind
    (for a micro-batch candidate both tasks are the same chain, run on two slices of the batch)."""

    kind: str
    task_a: list[int]
    task_b: list[int]
    note: str = ""
    detail: KindDetail | None = None

    @property
    def nodes(self) -> frozenset[int]:
        return frozenset(self.task_a) | frozenset(self.task_b)


@dataclass
class TaskBody:
    """One task of a FusedHexPair body: its nodes, and the tensors it reads and makes for others."""

    nodes: list[onnx.NodeProto]
    inputs: list[str]
    outputs: list[str]


@dataclass
class PairTasks:
    a: TaskBody
    b: TaskBody
    replaced: list[int]  # graph node ids the FusedHexPair node replaces
    placed: list[tuple[int, onnx.NodeProto]] = field(default_factory=list)  # (position, node) added around it
    placed_tensors: dict[str, TensorInfo] = field(default_factory=dict)  # what the placed nodes make
    # the function body when it is not A's nodes then B's (the program is lowered from those):
    # what stock ORT runs and `unfuse` restores (a micro-batch pair: the chain on the joined halves)
    fallback: list[onnx.NodeProto] | None = None


@dataclass
class FusedCall:
    """A pair's FusedHexPair node and function body, built before the model is edited."""

    node: onnx.NodeProto
    function: onnx.FunctionProto
    tasks: PairTasks


@dataclass
class Pair:
    """A chosen candidate with its profiles and prediction. `id` ("pairN", the node's overload),
    `call`, `program` (its task program's bytes) and `share_table` are set when the pass lowers it, before fusing."""

    candidate: Candidate
    a: TaskProfile
    b: TaskProfile
    prediction: Prediction
    complementarity: float
    microbatch_sizes: tuple[int, int] | None = None
    id: str = ""
    call: FusedCall | None = None
    program: bytes | None = None
    share_table: ShareTable | None = None  # shares per shape bucket, set with `program` (buckets.py)

    @property
    def kind(self) -> str:
        return self.candidate.kind

    @property
    def saved(self) -> float:
        """Predicted time saved, the kernel call paid."""
        return self.prediction.saved


class PairKind:
    """A kind of pair. Subclasses set `name` and implement `find`; the rest defaults to two
    disjoint node sets fused as they are."""

    name: ClassVar[str]
    specificity: ClassVar[int] = 0  # a node set two kinds both find is kept by the higher

    def find(self, g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target) -> list[Candidate]:
        raise NotImplementedError

    def evaluate(self, g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> Pair | str:
        """The candidate's pair at its best share, or why it cannot be one (both tasks are profiled)."""
        a, b = profile.task(c.task_a), profile.task(c.task_b)
        assert a is not None and b is not None
        shared = profile.shared_footprint(c.task_a, c.task_b)
        if not fits(a, b, target, shared):
            return budget_message(a, b, target, shared)
        return Pair(c, a, b, predict(a, b, target), complementarity(a, b, target))

    def shorter(self, g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> list[Candidate]:
        """Candidates over the span of `c`, which failed verification, with shorter tasks (their
        differences add up less along a shorter chain); none by default."""
        return []

    def tasks(self, g: ModelGraph, pair: Pair) -> PairTasks:
        ids_a, ids_b = with_constants(g, pair.candidate.task_a), with_constants(g, pair.candidate.task_b)
        body_a = with_dequantize_copies(
            g, ids_a, with_empty_constants(g, task_body(g, ids_a), f"{pair.id}a"), f"{pair.id}a"
        )
        body_b = with_dequantize_copies(
            g, ids_b, with_empty_constants(g, task_body(g, ids_b), f"{pair.id}b"), f"{pair.id}b"
        )
        return PairTasks(body_a, body_b, sorted(set(ids_a) | set(ids_b)))

    def restore(
        self,
        call: onnx.NodeProto,
        body: list[onnx.NodeProto],
        producers: dict[str, onnx.NodeProto],
        consumers: dict[str, list[onnx.NodeProto]],
        drop: set[int],
    ) -> list[onnx.NodeProto]:
        """The nodes replacing an inlined FusedHexPair node (`body`: its body with actual names);
        add id() of graph nodes to remove to `drop`."""
        return body

    def original_tensor(self, pair_id: str, body_tensor: str) -> str:
        """The graph tensor a body tensor of the pair stands for."""
        return body_tensor

    def program_function(
        self, node: onnx.NodeProto, body: onnx.FunctionProto, known: dict[str, onnx.TensorProto]
    ) -> onnx.FunctionProto:
        """The function the node's task program is lowered from: A's nodes then B's (`known`: the
        model's initializers and Constant values). By default the body itself."""
        return body

    def body_types(self, g: ModelGraph, pair: Pair) -> dict[str, onnx.ValueInfoProto]:
        """Types of body tensors the graph has under no name of theirs (the graph's own are added
        by the rewrite): ONNX's inference does not type every op (com.microsoft's 16-bit QDQ)."""
        return {}

    def settle(self, g: ModelGraph, profile: GraphProfile, chosen: list[Pair], target: Target) -> dict[int, str]:
        """Of the pairs chosen together (`chosen`, all kinds), those of this kind to drop, by index,
        with why: what no pair's own score sees (colocate: the cost of cutting the streams); none
        by default."""
        return {}

    def bucket_tasks(self, profile: GraphProfile, pair: Pair) -> tuple[TaskProfile, TaskProfile] | None:
        """The pair's two tasks as `profile` (another binding of the symbolic dims) sees them, for
        choosing its share there (buckets.py); None when they cannot be profiled or the share is fixed."""
        a, b = profile.task(pair.candidate.task_a), profile.task(pair.candidate.task_b)
        return None if a is None or b is None else (a, b)

    def serial_task(self, profile: GraphProfile, pair: Pair) -> TaskProfile | None:
        """The task the serial baseline runs when it is not A then B (None: A then B)."""
        return None

    def share_text(self, pair: Pair) -> str:
        return f"{pair.prediction.share_a:.2f}"


def formal_inputs(a: TaskBody, b: TaskBody) -> tuple[list[str], dict[str, str]]:
    """The function's formal inputs, A's then B's, and the renaming of B's formals that A also
    reads (`<name>__b`, so formal names stay unique)."""
    shared = {t: t + SHARED_INPUT_SUFFIX for t in b.inputs if t in a.inputs}
    return a.inputs + [shared.get(t, t) for t in b.inputs], shared


def budget_message(a: TaskProfile, b: TaskProfile, target: Target, shared: int = 0) -> str:
    once = f" ({shared} B of tensors both read counted once)" if shared else ""
    return (
        f"on-chip budget: task A needs {a.footprint} B and task B {b.footprint} B together{once}, "
        f"the target has {int(target.onchip_bytes.value)} B"
    )


def task_body(g: ModelGraph, ids: list[int]) -> TaskBody:
    inside = set(ids)
    produced: set[str] = set()
    inputs: list[str] = []
    for i in ids:
        for t in g.node_inputs[i]:
            if t and t not in produced and t not in inputs:
                inputs.append(t)
        produced.update(t for t in g.nodes[i].output if t)
    graph_outputs = set(g.graph_outputs)
    outputs = [
        t
        for i in ids
        for t in g.nodes[i].output
        if t and (t in graph_outputs or any(c not in inside for c in g.consumers.get(t, ())))
    ]
    return TaskBody([renamed_copy(g.nodes[i], {}) for i in ids], inputs, outputs)


def with_constants(g: ModelGraph, ids: list[int]) -> list[int]:
    """The task's nodes plus the Constant nodes only it reads, which move into its body (so an
    exporter's empty `roi` or a shape constant is a body constant, not a formal input). A weight
    held in a Constant node (`_large_constant`) stays outside and is read as a formal input: the
    program takes it from the node's input, and the file holds it once, not in the body and the
    program both (a stranger's PP-OCRv4 det + rec: 26.3 MB co-located, 15.6 MB apart)."""
    inside = {i for i in ids if not _large_constant(g, i)}
    outputs = set(g.graph_outputs)
    extra = {g.producer[t] for i in inside for t in g.node_inputs[i] if t in g.producer}
    extra = {
        p
        for p in extra - inside
        if _constant(g, p)
        and not _large_constant(g, p)
        and all(t not in outputs and all(c in inside for c in g.consumers.get(t, ())) for t in g.nodes[p].output)
    }
    return sorted(inside | extra)


BODY_CONSTANT_BYTES = 1024  # a Constant node larger than this is a weight: it stays out of a pair's body


def _constant(g: ModelGraph, i: int) -> bool:
    return g.nodes[i].op_type == "Constant" and g.nodes[i].domain in ("", "ai.onnx")


def _large_constant(g: ModelGraph, i: int) -> bool:
    """A Constant node whose tensor value holds more than BODY_CONSTANT_BYTES (its output's info is the
    attribute's type and dims: graph._collect_infos)."""
    n = g.nodes[i]
    if not _constant(g, i) or not any(a.name == "value" and a.type == onnx.AttributeProto.TENSOR for a in n.attribute):
        return False
    return (g.info(n.output[0]).nbytes or 0) > BODY_CONSTANT_BYTES


def with_dequantize_copies(g: ModelGraph, ids: list[int], body: TaskBody, tag: str) -> TaskBody:
    """The body reading, instead of a DequantizeLinear output made outside the task (a
    DequantizeLinear the graph shares with other nodes), the output of its own copy of it, as ONNX
    Runtime's EnsureUniqueDQForNodeUnit does: the task's QDQ groups are whole and it reads the
    integer tensor. The copy's output is `<tensor>__<tag>`, its name `<name>__<tag>` (none for a
    node of none: ORT refuses two nodes of one name); the graph's node stays."""
    inside = set(ids)
    shared = [t for t in body.inputs if t in g.producer and g.producer[t] not in inside and is_dq(g, g.producer[t])]
    if not shared:
        return body
    rename = {t: f"{t}__{tag}" for t in shared}
    copies = [
        renamed_copy(g.nodes[g.producer[t]], rename, name=_copy_name(g.nodes[g.producer[t]].name, tag)) for t in shared
    ]
    pending = {c.output[0]: c for c in copies}
    nodes = []
    for n in body.nodes:  # each copy just before its first reader: it may read a Q of the task's own
        m = renamed_copy(n, rename)
        nodes += [pending.pop(t) for t in m.input if t in pending]
        nodes.append(m)
    inputs = [t for t in body.inputs if t not in rename]
    made = {t for n in body.nodes for t in n.output}
    for c in copies:
        inputs += [t for t in c.input if t and t not in inputs and t not in made]
    return TaskBody(nodes, inputs, body.outputs)


def with_empty_constants(g: ModelGraph, body: TaskBody, tag: str) -> TaskBody:
    """The body with each empty initializer it reads (an unused Resize `roi`, which a task program
    cannot declare: no dimension may be 0) made by a Constant node of its own, `<name>__<tag>`."""
    empty = [t for t in body.inputs if t in g.initializers and 0 in g.initializers[t].dims]
    if not empty:
        return body
    rename = {t: f"{t}__{tag}" for t in empty}
    constants = [onnx.helper.make_node("Constant", [], [rename[t]], value=g.initializers[t]) for t in empty]
    nodes = constants + [renamed_copy(n, rename) for n in body.nodes]
    return TaskBody(nodes, [t for t in body.inputs if t not in rename], body.outputs)


def _copy_name(name: str, tag: str) -> str:
    return f"{name}__{tag}" if name else ""


def renamed_copy(node: onnx.NodeProto, mapping: dict[str, str], name: str | None = None) -> onnx.NodeProto:
    """A copy of the node with its input and output names mapped (and a new name if given)."""
    m = onnx.NodeProto()
    m.CopyFrom(node)
    for k, t in enumerate(m.input):
        m.input[k] = mapping.get(t, t)
    for k, t in enumerate(m.output):
        m.output[k] = mapping.get(t, t)
    if name is not None:
        m.name = name
    return m
