"""Replace each chosen pair with a FusedHexPair node whose function body is the original nodes.

The body is the fallback: stock ONNX Runtime inlines it, and `unfuse` restores the graph from
it. Inputs are task A's external inputs then task B's; outputs A's then B's. A formal input
that both tasks read is listed twice on the node (once per task), and B's formal parameter
gets the suffix `__b` so formal names stay unique. Micro-batch pairs get a Split before and a
Concat after; their tasks are copies of the chain with tensors suffixed `__<pair id>_mb0` /
`_mb1` (the pair id keeps chained micro-batch pairs from naming a tensor twice).
"""

from __future__ import annotations

from collections.abc import Collection

import onnx
from onnx import helper

from . import contract as C
from .errors import HexfuseError, ModelError
from .graph import ModelGraph, node_reads, toposort
from .select import Pair


def microbatch_suffixes(pair_id: str) -> tuple[str, str]:
    return f"__{pair_id}_mb0", f"__{pair_id}_mb1"


SHARED_INPUT_SUFFIX = "__b"


class _Task:
    def __init__(self, nodes: list[onnx.NodeProto], inputs: list[str], outputs: list[str]) -> None:
        self.nodes, self.inputs, self.outputs = nodes, inputs, outputs


def fuse(g: ModelGraph, pairs: list[Pair], target_name: str) -> onnx.ModelProto:
    """A new model with every pair replaced; `g.model` is left untouched."""
    model = onnx.ModelProto()
    model.CopyFrom(g.model)
    graph = model.graph
    removed: set[int] = set()
    placed: list[tuple[int, onnx.NodeProto]] = []  # (position, node) for new nodes
    functions: list[onnx.FunctionProto] = []
    internal: set[str] = set()
    opsets = [o for o in model.opset_import if o.domain != C.DOMAIN]
    first_id = next_pair_id(model)
    typed = {v.name: v for v in list(graph.value_info) + list(graph.output) if v.type.tensor_type.elem_type}
    for k, pair in enumerate(pairs):
        pair_id = f"pair{first_id + k}"
        ids_a = _with_constants(g, pair.candidate.task_a)
        if pair.kind == C.KIND_MICROBATCH:
            a, b, extra = _microbatch_tasks(g, pair, pair_id, _default_opset(model), ids_a)
            placed += extra
            ids_b: list[int] = []
        else:
            ids_b = _with_constants(g, pair.candidate.task_b)
            a, b = _task(g, ids_a), _task(g, ids_b)
        node, fn = _fused_node(a, b, pair, pair_id, target_name, opsets)
        _add_value_info(fn, typed)
        ids = sorted(set(ids_a) | set(ids_b))
        removed.update(ids)
        placed.append((ids[0], node))
        functions.append(fn)
        for n in a.nodes + b.nodes:
            internal.update(t for t in n.output if t not in a.outputs and t not in b.outputs)
    keep = [(i, n) for i, n in enumerate(g.nodes) if i not in removed]
    ordered = sorted(keep + placed, key=lambda item: item[0])
    nodes = [n for _, n in ordered]
    available = {t.name for t in graph.initializer} | {v.name for v in graph.input}
    try:
        order = toposort(nodes, [node_reads(n) for n in nodes], available, "rewritten model")
    except HexfuseError as exc:  # independence was checked; a failure here is a bug
        raise HexfuseError(f"internal error: the rewritten graph is not a DAG: {exc.message}") from None
    graph.ClearField("node")
    graph.node.extend(nodes[i] for i in order)
    kept_info = [v for v in graph.value_info if v.name not in internal]
    graph.ClearField("value_info")
    graph.value_info.extend(kept_info)
    model.functions.extend(functions)
    if not any(o.domain == C.DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(C.DOMAIN, C.DOMAIN_VERSION))
    model.ir_version = max(model.ir_version, 10)  # function overloads need IR 10
    return model


def next_pair_id(model: onnx.ModelProto) -> int:
    """The number of the first pair `fuse` creates in this model: pair k gets `pair{first + k}`."""
    used = [f.overload for f in model.functions if f.domain == C.DOMAIN and f.overload.startswith("pair")]
    numbers = [int(u[4:]) for u in used if u[4:].isdigit()]
    return max(numbers, default=-1) + 1


def _default_opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _task(g: ModelGraph, ids: list[int]) -> _Task:
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
    return _Task([_renamed_copy(g.nodes[i], {}) for i in ids], inputs, outputs)


def _with_constants(g: ModelGraph, ids: list[int]) -> list[int]:
    """The task's nodes plus the Constant nodes only it reads, which move into its body (so an
    exporter's empty `roi` or a shape constant is a body constant, not a formal input)."""
    inside = set(ids)
    outputs = set(g.graph_outputs)
    extra = {g.producer[t] for i in ids for t in g.node_inputs[i] if t in g.producer}
    extra = {
        p
        for p in extra - inside
        if g.nodes[p].op_type == "Constant"
        and g.nodes[p].domain in ("", "ai.onnx")
        and all(t not in outputs and all(c in inside for c in g.consumers.get(t, ())) for t in g.nodes[p].output)
    }
    return sorted(inside | extra)


def _microbatch_tasks(
    g: ModelGraph, pair: Pair, pair_id: str, opset: int, ids: list[int]
) -> tuple[_Task, _Task, list[tuple[int, onnx.NodeProto]]]:
    c = pair.candidate
    assert pair.microbatch_sizes is not None
    x, y, axis = c.detail["input"], c.detail["output"], int(c.detail["axis"])
    whole = _task(g, ids)
    tasks = []
    suffixes = microbatch_suffixes(pair_id)
    for suffix in suffixes:
        renamed = {t: t + suffix for n in whole.nodes for t in n.output} | {x: x + suffix}
        nodes = [_renamed_copy(n, renamed, name=(n.name or n.output[0]) + suffix) for n in whole.nodes]
        inputs = [t + suffix if t == x else t for t in whole.inputs]
        tasks.append(_Task(nodes, inputs, [y + suffix]))
    sizes = list(pair.microbatch_sizes)
    split_name = f"hexfuse/{pair_id}/split"
    first = c.task_a[0]
    parts = [x + s for s in suffixes]
    if opset >= 13:
        sizes_name = f"hexfuse/{pair_id}/split_sizes"
        const = helper.make_node(
            "Constant",
            [],
            [sizes_name],
            name=sizes_name,
            value=helper.make_tensor(sizes_name, onnx.TensorProto.INT64, [2], sizes),
        )
        split = helper.make_node("Split", [x, sizes_name], parts, name=split_name, axis=axis)
        extra = [(first, const), (first, split)]
    else:
        split = helper.make_node("Split", [x], parts, name=split_name, axis=axis, split=sizes)
        extra = [(first, split)]
    concat = helper.make_node("Concat", [y + s for s in suffixes], [y], name=f"hexfuse/{pair_id}/concat", axis=axis)
    extra.append((c.task_a[-1], concat))
    return tasks[0], tasks[1], extra


def _renamed_copy(node: onnx.NodeProto, mapping: dict[str, str], name: str | None = None) -> onnx.NodeProto:
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


def _fused_node(
    a: _Task, b: _Task, pair: Pair, pair_id: str, target_name: str, opsets: list[onnx.OperatorSetIdProto]
) -> tuple[onnx.NodeProto, onnx.FunctionProto]:
    shared = {t: t + SHARED_INPUT_SUFFIX for t in b.inputs if t in a.inputs}
    b_nodes = [_renamed_copy(n, shared) for n in b.nodes]
    formal_inputs = a.inputs + [shared.get(t, t) for t in b.inputs]
    outputs = a.outputs + b.outputs
    p = pair.prediction
    attrs: dict[str, object] = {
        C.ATTR_KIND: pair.kind,
        C.ATTR_NUM_INPUTS_A: len(a.inputs),
        C.ATTR_NUM_OUTPUTS_A: len(a.outputs),
        C.ATTR_NUM_NODES_A: len(a.nodes),
        C.ATTR_SHARE_A: float(p.share_a),
        C.ATTR_ONCHIP_A: int(pair.a.footprint),
        C.ATTR_ONCHIP_B: int(pair.b.footprint),
        C.ATTR_TARGET: target_name,
        C.ATTR_EST_SERIAL_US: float(p.serial * 1e6),
        C.ATTR_EST_FUSED_US: float(p.fused * 1e6),
    }
    if pair.microbatch_sizes is not None:
        attrs[C.ATTR_MICROBATCH_SIZES] = list(pair.microbatch_sizes)
    node = helper.make_node(
        C.OP_TYPE, a.inputs + b.inputs, outputs, name=f"hexfuse/{pair_id}", domain=C.DOMAIN, **attrs
    )
    node.overload = pair_id
    fn = helper.make_function(
        C.DOMAIN, C.OP_TYPE, formal_inputs, outputs, a.nodes + b_nodes, opsets, attributes=list(C.NODE_ATTRIBUTES)
    )
    fn.overload = pair_id
    fn.doc_string = f"hexfuse {pair.kind} pair: {pair.candidate.note}"
    return node, fn


def _add_value_info(fn: onnx.FunctionProto, typed: dict[str, onnx.ValueInfoProto]) -> None:
    """Carry the known types of body tensors into the function (IR 10 function value_info)."""
    for n in fn.node:
        fn.value_info.extend(typed[t] for t in n.output if t in typed)


# ---------------------------------------------------------------------------------------
# unfuse


def unfuse(model: onnx.ModelProto, pair_ids: Collection[str] | None = None) -> onnx.ModelProto:
    """The model with every FusedHexPair (or only those whose pair id, `node.overload`, is in
    `pair_ids`) replaced by the original nodes of its function body."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    functions = {(f.domain, f.name, f.overload): f for f in out.functions}
    producers = {t: n for n in graph.node for t in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    drop: set[int] = set()  # id() of nodes to remove
    replacement: dict[int, list[onnx.NodeProto]] = {}
    for n in graph.node:
        if n.domain != C.DOMAIN or n.op_type != C.OP_TYPE or (pair_ids is not None and n.overload not in pair_ids):
            continue
        fn = functions.get((n.domain, n.op_type, n.overload))
        if fn is None:
            raise ModelError(
                f"node '{n.name}' ({C.DOMAIN}::{C.OP_TYPE}) has no function body "
                f"for overload '{n.overload}'; cannot unfuse"
            )
        body = _inline(n, fn)
        if _attr_str(n, C.ATTR_KIND) == C.KIND_MICROBATCH:
            body = _restore_chain(n, body, producers, consumers, drop)
        replacement[id(n)] = body
    nodes: list[onnx.NodeProto] = []
    for n in graph.node:
        if id(n) in drop:
            continue
        nodes.extend(replacement.get(id(n), [n]))
    graph.ClearField("node")
    graph.node.extend(nodes)
    used = {(n.domain, n.op_type, n.overload) for n in nodes}
    keep = [f for f in out.functions if (f.domain, f.name, f.overload) in used or f.domain != C.DOMAIN]
    out.ClearField("functions")
    out.functions.extend(keep)
    if not any(n.domain == C.DOMAIN for n in nodes) and not any(f.domain == C.DOMAIN for f in keep):
        ops = [o for o in out.opset_import if o.domain != C.DOMAIN]
        out.ClearField("opset_import")
        out.opset_import.extend(ops)
    return out


def _inline(call: onnx.NodeProto, fn: onnx.FunctionProto) -> list[onnx.NodeProto]:
    mapping = dict(zip(fn.input, call.input))
    mapping.update(zip(fn.output, call.output))
    return [_renamed_copy(n, mapping) for n in fn.node]


def _restore_chain(
    call: onnx.NodeProto,
    body: list[onnx.NodeProto],
    producers: dict[str, onnx.NodeProto],
    consumers: dict[str, list[onnx.NodeProto]],
    drop: set[int],
) -> list[onnx.NodeProto]:
    """Undo a micro-batch split: keep task A's copy of the chain with its names restored."""
    n_a = _attr_int(call, C.ATTR_NUM_NODES_A)
    split = producers[call.input[0]]
    concat = consumers[call.output[0]][0]
    suffix = microbatch_suffixes(call.overload)[0]
    chain = [
        _renamed_copy(
            n, {t: t.removesuffix(suffix) for t in list(n.input) + list(n.output)}, name=n.name.removesuffix(suffix)
        )
        for n in body[:n_a]
    ]
    chain[-1].output[0] = concat.output[0]
    drop.add(id(split))
    drop.add(id(concat))
    if len(split.input) > 1 and split.input[1] in producers:
        drop.add(id(producers[split.input[1]]))
    return chain


def _attr_str(node: onnx.NodeProto, name: str) -> str:
    for a in node.attribute:
        if a.name == name:
            return a.s.decode()
    return ""


def _attr_int(node: onnx.NodeProto, name: str) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    raise ModelError(f"node '{node.name}' lacks attribute '{name}'")
