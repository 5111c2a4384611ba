"""Specialise a model to fixed input dims: set the dims, and fold the integer computations they
decide into initializers.

Exporters compute reshape targets, ranges and masks at run time from `Shape` of the inputs. Once
every input dim is fixed those values are known: a `Shape` of a tensor whose inferred shape is
static, and any default-domain node whose inputs are all known and whose outputs are integers or
booleans, is evaluated here (onnx's reference implementation) and its outputs become initializers.
Integer arithmetic is exact, so every op computes what it did. The kernel then sees constant
steering inputs (a Reshape's target) instead of a run-time integer subgraph it cannot run. Float
computations are not folded, except a Range (and the Casts making its bounds) whose inputs and
outputs are whole numbers that float32 holds exactly, which every implementation computes alike.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from .errors import ModelError
from .graph import has_values, infer_contrib_shapes, node_reads
from .nested import holds_graphs, subgraphs

MAX_FOLDED_ELEMENTS = 1 << 16  # a bigger value stays computed (a constant that size bloats the model)
_EXACT = {
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT16,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.BOOL,
}
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE}


def specialise(
    model: onnx.ModelProto, shapes: dict[str, list[int]], inline_ifs: bool | Collection[str] = False
) -> tuple[onnx.ModelProto, dict[str, tuple[int, ...]]]:
    """A copy of the model with the given input dims fixed and what they decide folded; the shape
    of each tensor folded (one per folded node; an intermediate one is no longer in the copy).
    Inputs not in `shapes` keep their dims. `inline_ifs`: an If whose condition is known becomes
    its branch's nodes, for a copy that replaces the model at these dims (--freeze-shapes). Not
    otherwise: a condition known at the dims the pass analyses may not be at others (Silero VAD's
    nested Ifs), and a branch whose nodes are mapped back onto the model's own has no such nodes.
    A collection: only the Ifs whose first output it names."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for v in graph.input:
        if v.name in shapes:
            _fix_dims(v, shapes[v.name])
    for v in graph.output:  # a dim_value of -1 (paddle2onnx's "unknown") would contradict the fixed dims
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value < 0:
                d.Clear()
    folded: dict[str, tuple[int, ...]] = {}
    while _fold_round(out, folded, inline_ifs):  # a folded Reshape target can make the next Shape static
        pass
    return out, folded


def _fold_round(model: onnx.ModelProto, folded: dict[str, tuple[int, ...]], inline_ifs: bool | Collection[str]) -> int:
    """One pass over the nodes: fold what is known, inline each If whose condition is; adds the
    folded tensors' shapes to `folded`; how many nodes changed."""
    graph = model.graph
    del graph.value_info[:]  # an exporter's symbolic intermediate dims, or the last round's: inferred anew
    # com.microsoft Q/DQ (a 16-bit QDQ model below opset 21) hide every shape after them from ONNX's inference
    # (a u16 QDQ RetinaFace frozen kept its 5 Shape nodes): ORT's symbolic inference knows them (graph.py)
    contrib = any(n.domain == "com.microsoft" for n in graph.node)
    inferred = (infer_contrib_shapes(model) if contrib else shape_inference.infer_shapes(model, data_prop=True)).graph
    types = {v.name: v.type.tensor_type for v in [*inferred.input, *inferred.value_info, *inferred.output]}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    known: dict[str, np.ndarray] = {}
    initializers = {t.name: t for t in graph.initializer}
    kept: list[onnx.NodeProto] = []
    made: set[str] = set()  # outputs of folded nodes
    range_bounds = {t for n in graph.node if n.op_type == "Range" for t in n.input}
    inlined = 0
    for node in graph.node:
        allowed = inline_ifs if isinstance(inline_ifs, bool) else bool(node.output) and node.output[0] in inline_ifs
        branch = _taken_branch(node, known, initializers, graph) if allowed else None
        if branch is not None:
            kept.extend(branch[0])
            graph.initializer.extend(branch[1])
            initializers.update((t.name, t) for t in branch[1])
            inlined += 1
            continue
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            constant = _evaluate(node, {}, None)
            if constant is not None:
                known[node.output[0]] = constant[0]
            kept.append(node)
            continue
        value = _fold(node, types, known, initializers, opset, range_bounds)
        if value is None:
            kept.append(node)
            continue
        known.update(zip(node.output, value))
        made.update(node.output)
    needed = {t for n in kept for t in node_reads(n)} | {v.name for v in graph.output}
    del graph.node[:]
    graph.node.extend(n for n in kept if n.op_type != "Constant" or needed.intersection(n.output))
    inputs = {v.name for v in graph.input}
    unread = [
        t for t in graph.initializer if t.name not in needed and t.name not in inputs
    ]  # read by folded nodes only
    for t in unread:
        graph.initializer.remove(t)
    graph.initializer.extend(numpy_helper.from_array(known[t], t) for t in sorted(made & needed))
    folded.update((t, tuple(known[t].shape)) for t in made)
    return len(made) + inlined


def _all_names(graph: onnx.GraphProto, skip: onnx.NodeProto | None = None) -> set[str]:
    """Every tensor name of the graph and of the bodies of its nodes but `skip`."""
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for n in graph.node:
        if skip is not None and n.output == skip.output:
            continue
        names.update(n.input)
        names.update(n.output)
        for body in subgraphs(n):
            names |= _all_names(body)
    return names


def _taken_branch(
    node: onnx.NodeProto,
    known: dict[str, np.ndarray],
    initializers: dict[str, onnx.TensorProto],
    graph: onnx.GraphProto,
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]] | None:
    """An If whose condition is known, as the nodes and initializers of the branch it takes, then an
    Identity per output: torch writes `expand` and `repeat` over a size it cannot prove as an If on
    Size arithmetic that is constant (svtrv2_captcha), and nothing after it had a shape. None when
    the condition is not known, or a name the branch makes is already the graph's (inlined, it would
    clash)."""
    if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
        return None
    cond = known.get(node.input[0])
    if cond is None and node.input[0] in initializers and has_values(initializers[node.input[0]]):
        cond = numpy_helper.to_array(initializers[node.input[0]])
    if cond is None or cond.size != 1:
        return None
    attr = "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"
    body = next(a.g for a in node.attribute if a.name == attr)
    made = {t for n in body.node for t in n.output if t} | {t.name for t in body.initializer}
    if made & _all_names(graph, skip=node) or body.sparse_initializer or len(body.output) != len(node.output):
        return None
    nodes = list(body.node) + [
        onnx.helper.make_node("Identity", [b.name], [o], name=f"{node.name}/{attr}/{o}")
        for b, o in zip(body.output, node.output)
        if o
    ]
    return nodes, list(body.initializer)


def _fix_dims(v: onnx.ValueInfoProto, dims: list[int]) -> None:
    shape = v.type.tensor_type.shape
    if len(shape.dim) != len(dims):
        raise ModelError(f"input '{v.name}' has {len(shape.dim)} dims; {len(dims)} given")
    for d, size in zip(shape.dim, dims):
        d.Clear()
        d.dim_value = size


def _fold(
    node: onnx.NodeProto,
    types: dict[str, onnx.TypeProto.Tensor],
    known: dict[str, np.ndarray],
    initializers: dict[str, onnx.TensorProto],
    opset: int,
    range_bounds: set[str],
) -> list[np.ndarray] | None:
    """The node's output values when it can be folded, else None. A float Range, and a float Cast
    that makes a Range's bound (`range_bounds`), are folded when their inputs and outputs are
    whole numbers (`_whole`): a YOLO head's anchors, a Range over a feature map's width. A node of
    several outputs (tf2onnx's Split of a constant into a Pad's pads, M-LSD) folds when all are exact."""
    if node.domain not in ("", "ai.onnx") or not node.output or not all(node.output):
        return None
    if holds_graphs(node):
        return None
    kinds = [types.get(t) for t in node.output]
    if node.op_type == "Constant" or None in kinds:
        return None
    elem = {k.elem_type for k in kinds if k is not None}
    whole_float = node.op_type == "Range" or (node.op_type == "Cast" and node.output[0] in range_bounds)
    if not elem <= _EXACT and not (whole_float and elem <= _FLOATS):
        return None
    if node.op_type == "Shape":
        value = _static_shape(node, types)
    elif node.op_type == "Size":
        shape = _static_shape(node, types)
        value = None if shape is None else np.array(np.prod(shape), dtype=np.int64)
    else:
        inputs = [t for t in node.input if t]
        if not all(t in known or (t in initializers and has_values(initializers[t])) for t in inputs):
            return None
        feeds = {t: known[t] if t in known else numpy_helper.to_array(initializers[t]) for t in inputs}
        values = _evaluate(node, feeds, opset)
        if values is None or len(values) != len(node.output):
            return None
        if not elem <= _EXACT and not all(map(_whole, [*feeds.values(), *values])):
            return None
        return None if sum(v.size for v in values) > MAX_FOLDED_ELEMENTS else values
    if value is None or value.size > MAX_FOLDED_ELEMENTS:
        return None
    return [value]


def _whole(value: np.ndarray) -> bool:
    """Whole numbers a float32 holds exactly, where every way of computing a Range or Cast of them
    (ORT adds delta step by step, numpy multiplies) gives the same floats."""
    if value.dtype == np.bool_:
        return True
    return bool(np.all(np.isfinite(value)) and np.all(np.mod(value, 1) == 0) and np.all(np.abs(value) <= 1 << 24))


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int | None) -> list[np.ndarray] | None:
    """The node's outputs by onnx's reference evaluator; None (the node stays computed) where the
    evaluator cannot run it. An opset < 13 Unsqueeze or Squeeze, whose `axes` attribute the
    evaluator fails on (onnx 1.23), numpy computes."""
    axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
    if node.op_type in ("Unsqueeze", "Squeeze") and axes and len(node.input) == 1:
        value = _axes_attribute(node.op_type, feeds[node.input[0]], axes)
        return None if value is None else [value]
    try:
        outputs = ReferenceEvaluator(node, opsets=None if opset is None else {"": opset}).run(None, feeds)
    except Exception:  # noqa: BLE001 - any evaluator failure only means: not folded
        return None
    assert isinstance(outputs, list)  # a list when no intermediate results are asked for
    return [np.asarray(v) for v in outputs]


def _axes_attribute(op: str, x: np.ndarray, axes: list[int]) -> np.ndarray | None:
    """Unsqueeze or Squeeze of x at `axes`, as the ONNX spec defines them (negative axes count from
    the end of the output's rank for Unsqueeze, of the input's for Squeeze); None if they do not fit."""
    try:
        if op == "Unsqueeze":
            rank = x.ndim + len(axes)
            return np.expand_dims(x, tuple(a % rank for a in axes)) if -rank <= min(axes) <= max(axes) < rank else None
        return np.squeeze(x, axis=tuple(a % x.ndim for a in axes)) if x.ndim else None
    except ValueError:  # an axis whose dim is not 1, or an axis given twice
        return None


def _static_shape(node: onnx.NodeProto, types: dict[str, onnx.TypeProto.Tensor]) -> np.ndarray | None:
    source = types.get(node.input[0])
    if source is None or not source.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in source.shape.dim]
    if any(d is None for d in dims):
        return None
    attrs = {a.name: a.i for a in node.attribute}
    rank = len(dims)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    return np.array(dims[slice(start, end)], dtype=np.int64)
