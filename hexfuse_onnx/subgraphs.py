"""The branches of a model's If nodes as models of their own, and their fused nodes put back.

Real exports put whole networks inside control flow (Silero VAD: 684 nodes in an If on the sample
rate). A branch is a graph whose outer-scope values are inputs: `branch_models` makes each branch of
each If of the main graph a standalone model (the outer initializers and Constants it reads become
its initializers, the other outer values it reads its inputs, typed from the outer graph's shape
inference), so the pass finds, costs, chooses and fuses pairs there as at top level; `splice` puts
a fused branch's nodes back into its If and its FusedHexPair bodies among the model's functions
(ONNX Runtime inlines a model-local function called from a branch, and calls the plugin's kernel
there, given the node's outputs are typed in the branch). Ifs nested in a branch and Loop/Scan
bodies are not descended into: a Loop's carried values have no shapes before it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import contract as C
from .fold import specialise
from .graph import Dim, ModelGraph, ShapeBinding, node_reads, outer_scope_names, toposort

BRANCH_ATTRIBUTES = ("then_branch", "else_branch")


def branch_label(attribute: str, owner_name: str) -> str:
    """How every tool names an If's branch: "then branch of If 'X'" (X: the node's name, else its first output)."""
    return f"{attribute.split('_')[0]} branch of If '{owner_name}'"


@dataclass
class Branch:
    owner: str  # the If node's first output: unique in the model, as its name need not be
    owner_name: str  # the If node's name (its first output when unnamed)
    attribute: str  # "then_branch" or "else_branch"
    condition: str  # the If's condition tensor
    model: onnx.ModelProto  # the branch as a model of its own

    @property
    def label(self) -> str:
        return branch_label(self.attribute, self.owner_name)

    @property
    def taken_when(self) -> bool:
        return self.attribute == "then_branch"


def branch_models(g: ModelGraph) -> tuple[list[Branch], list[str]]:
    """Each branch of each If of the main graph as a model; and why any branch is not one."""
    model = g.source or g.model  # symbolic inputs: the dims as read, so the fused branch keeps them
    branches: list[Branch] = []
    skipped: list[str] = []
    constants = constant_values(model.graph)  # once, not per branch
    for node in model.graph.node:
        if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
            continue
        for a in sorted(
            (a for a in node.attribute if a.name in BRANCH_ATTRIBUTES), key=lambda a: a.name != "then_branch"
        ):
            branch = Branch(node.output[0], node.name or node.output[0], a.name, node.input[0], onnx.ModelProto())
            problem = _fill_model(g, model, a.g, branch, constants)
            if problem:
                skipped.append(f"{branch.label}: {problem}")
            else:
                branches.append(branch)
    return branches, skipped


def holds_two_ops(branch: Branch) -> bool:
    """Whether the branch has two nodes besides Constants, the least a pair needs. torch writes a
    squeeze of a possibly-1 dim as an If of Squeeze against Identity: hama's unrolled G2P decoder
    has 96, whose 192 branches took 4 log lines and a report line each, and 10 s, for no candidate."""
    return sum(n.op_type != "Constant" for n in branch.model.graph.node) >= 2


def _fill_model(
    g: ModelGraph, outer: onnx.ModelProto, sub: onnx.GraphProto, branch: Branch, constants: dict[str, onnx.TensorProto]
) -> str:
    """Make the branch's model (`constants`: the outer graph's Constant values by output); a reason
    when an outer value it reads has no known type."""
    graph_inputs = {v.name: v for v in outer.graph.input}
    model, problem = subgraph_model(
        outer, sub, lambda name: graph_inputs[name] if name in graph_inputs else _outer_value(g, name), constants
    )
    branch.model = model or branch.model
    return problem


def subgraph_model(
    outer: onnx.ModelProto,
    sub: onnx.GraphProto,
    typed: Callable[[str], onnx.ValueInfoProto | None],
    constants: dict[str, onnx.TensorProto] | None = None,
) -> tuple[onnx.ModelProto | None, str]:
    """A subgraph of `outer`'s main graph as a model of its own: the outer initializers and Constants
    it reads become its initializers, the other outer values it reads its inputs, as `typed` types
    them; (None, why) when `typed` has no type for one. `constants`: constant_values(outer.graph),
    when the caller has it already (one If after another: 67 s over hama's G2P x2, 384 branches)."""
    if constants is None:
        constants = constant_values(outer.graph)
    initializers = {t.name: t for t in outer.graph.initializer}
    inputs: list[onnx.ValueInfoProto] = []
    weights: list[onnx.TensorProto] = list(sub.initializer)
    for name in dict.fromkeys(outer_scope_names(sub)):
        if name in initializers or name in constants:
            weights.append(initializers[name] if name in initializers else constants[name])
            continue
        info = typed(name)
        if info is None:
            return None, f"the outer value '{name}' it reads has no known type"
        inputs.append(info)
    graph = helper.make_graph(list(sub.node), sub.name or "branch", inputs, list(sub.output), weights)
    graph.value_info.extend(sub.value_info)
    model = helper.make_model(graph, opset_imports=list(outer.opset_import), ir_version=outer.ir_version)
    model.functions.extend(outer.functions)
    return model, ""


def constant_values(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    out = {}
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    t = onnx.TensorProto()
                    t.CopyFrom(a.t)
                    t.name = n.output[0]
                    out[n.output[0]] = t
    return out


def _outer_value(g: ModelGraph, name: str) -> onnx.ValueInfoProto | None:
    """An outer tensor as an input: its symbolic dims where the model keeps them, else the inferred ones."""
    info = g.info(name)
    dims: tuple[Dim, ...] | None = g.symbolic_dims(name) if g.source is not None else info.shape
    if not info.elem_type or dims is None:
        return None
    shape = [d if isinstance(d, (int, str)) else None for d in dims]
    return helper.make_tensor_value_info(name, info.elem_type, shape)


def input_hints(g: ModelGraph, branch: Branch, at: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    """The branch model's input shapes at the outer graph's analysed binding (or at `at`: the outer
    graph inputs' shapes of another binding, its other tensors' from `ModelGraph.infos_at`)."""
    infos = g.infos if at is None or g.source is None else g.infos_at(ShapeBinding({}, at))
    hints = {}
    for v in branch.model.graph.input:
        if at is not None and v.name in at:
            hints[v.name] = list(at[v.name])
            continue
        shape = infos.get(v.name, g.info(v.name)).shape
        if shape is not None and all(isinstance(d, int) for d in shape):
            hints[v.name] = [int(d) for d in shape]  # type: ignore[arg-type]
    return hints


def splice(model: onnx.ModelProto, branch: Branch, fused: onnx.ModelProto) -> None:
    """Put the fused branch model's nodes into the branch of `model`'s If, the FusedHexPair outputs
    typed there (ONNX Runtime cannot infer a custom op's output type inside a branch), and its
    FusedHexPair bodies into `model`'s functions. The branch was analysed with its constant shape
    work folded (`fold_constants`); the fused nodes read those values as constants (`_still_read`)."""
    node = next(n for n in model.graph.node if n.op_type == "If" and n.output and n.output[0] == branch.owner)
    graph = next(a.g for a in node.attribute if a.name == branch.attribute)
    calls = [n for n in fused.graph.node if (n.domain, n.op_type) == (C.DOMAIN, C.OP_TYPE)]
    bodies = [f for f in fused.functions if f.domain == C.DOMAIN and f.overload in {n.overload for n in calls}]
    gone = {t for n in fused.graph.node for t in n.output} | {t for f in bodies for n in f.node for t in n.output}
    available = set(outer_scope_names(graph)) | {t.name for t in graph.initializer} | {v.name for v in graph.input}
    kept, folded = _still_read([n for n in graph.node if not set(n.output) & gone], fused, gone, graph, available)
    nodes = kept + list(fused.graph.node)
    graph.initializer.extend(folded)
    available |= {t.name for t in folded}
    order = toposort(nodes, [node_reads(n) for n in nodes], available, branch.label)
    made = {t for n in nodes for t in n.output}
    pair_outputs = {t for n in calls for t in n.output}
    kept = [v for v in graph.value_info if v.name in made]
    have = {v.name for v in kept}
    kept += [v for v in fused.graph.value_info if v.name in pair_outputs and v.name not in have]
    graph.ClearField("node")
    graph.node.extend(nodes[i] for i in order)
    graph.ClearField("value_info")
    graph.value_info.extend(kept)
    known = {(f.domain, f.name, f.overload) for f in model.functions}
    model.functions.extend(f for f in bodies if (f.domain, f.name, f.overload) not in known)


def _still_read(
    kept: list[onnx.NodeProto], fused: onnx.ModelProto, gone: set[str], graph: onnx.GraphProto, available: set[str]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The kept nodes the fused nodes and the branch's outputs still read, and the fused branch's
    folded constants they read instead of recomputing them from what the pairs make (`gone`): the
    rest of the folded shape work stays, as read. With the dims frozen the analysis folded
    shape work that reads tensors a pair now makes inside its body or after it (Moonshine's decoder:
    a Shape of the embedding, Reshape shapes from a Shape of an attention output): kept, it would
    read a name no node makes, or close a cycle through the pair."""
    constants = {t.name: t for t in fused.graph.initializer if t.name not in available}
    on_pairs = set(gone)  # what the pairs make, and what kept nodes compute from it
    for n in kept:  # in the branch's order, which is topological
        if any(t in on_pairs for t in node_reads(n)):
            on_pairs.update(n.output)
    constants = {name: t for name, t in constants.items() if name in on_pairs}
    producer = {t: i for i, n in enumerate(kept) for t in n.output}
    stack = [t for n in fused.graph.node for t in node_reads(n)] + [v.name for v in graph.output]
    needed: set[int] = set()
    read: set[str] = set()
    while stack:
        t = stack.pop()
        if t in constants:
            read.add(t)
            continue
        i = producer.get(t)
        if i is not None and i not in needed:
            needed.add(i)
            stack.extend(node_reads(kept[i]))
    return [n for i, n in enumerate(kept) if i in needed], [constants[t] for t in sorted(read)]


def fold_constants(branch: Branch) -> None:
    """Fold the branch model's constant shape work (fold.specialise, no dim fixed): exporters leave it
    in a branch (Silero VAD's Pad reads pads made by 9 nodes from Constants), where shape inference
    stops. The analysis sees the values; the fused branch reads them as constants (`splice`)."""
    branch.model = specialise(branch.model, {})[0]


def conditions_taken(condition_values: list[np.ndarray]) -> set[bool]:
    """The branches (True: then) the verification cases take, from the If condition's values."""
    return {bool(np.asarray(v).reshape(-1)[0]) for v in condition_values}


def feeds_taking(model: onnx.ModelProto, condition: str, feeds: dict[str, np.ndarray], then: bool) -> dict | None:
    """`feeds` changed so that an If's condition is `then`, where the condition is a bool graph input
    or Equal of a one-element graph input and a constant (Silero VAD: sr == 16000); None otherwise."""
    if condition in feeds:
        return {**feeds, condition: np.full_like(feeds[condition], then)}
    node = next((n for n in model.graph.node if condition in n.output), None)
    if node is None or node.op_type != "Equal" or node.domain not in ("", "ai.onnx"):
        return None
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name in node.input}
    constants.update({name: numpy_helper.to_array(t) for name, t in constant_values(model.graph).items()})
    for given, constant in (tuple(node.input), tuple(reversed(node.input))):
        if given in feeds and constant in constants and feeds[given].size == 1 and constants[constant].size == 1:
            value = constants[constant].reshape(()).astype(feeds[given].dtype)
            return {**feeds, given: np.full_like(feeds[given], value if then else value + 1)}
    return None


def pairs_within(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The FusedHexPair nodes of a graph and of its subgraphs, at any depth, in node order."""
    out = []
    for n in graph.node:
        if (n.domain, n.op_type) == (C.DOMAIN, C.OP_TYPE):
            out.append(n)
        out += [p for a in n.attribute if a.type == onnx.AttributeProto.GRAPH for p in pairs_within(a.g)]
    return out


def no_pair_message(where: str) -> str:
    """Why a tool finds no FusedHexPair node in the model at `where` (nor in its subgraphs), in one line."""
    return f"{where}: has no {C.DOMAIN}::{C.OP_TYPE} node; rewrite it first (`python -m hexfuse_onnx rewrite`)"
