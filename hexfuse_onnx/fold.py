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

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from .errors import ModelError
from .graph import has_values, node_reads

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


def specialise(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> tuple[onnx.ModelProto, int]:
    """A copy of the model with the given input dims fixed and what they decide folded; the number
    of nodes folded (each makes one tensor). Inputs not in `shapes` keep their dims."""
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
    folded = 0
    while True:  # a folded Reshape target can make the next Shape static: fold until nothing changes
        made = _fold_round(out)
        folded += made
        if not made:
            return out, folded


def _fold_round(model: onnx.ModelProto) -> int:
    graph = model.graph
    del graph.value_info[:]  # an exporter's symbolic intermediate dims, or the last round's: inferred anew
    inferred = shape_inference.infer_shapes(model, data_prop=True).graph
    types = {v.name: v.type.tensor_type for v in [*inferred.input, *inferred.value_info, *inferred.output]}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    known: dict[str, np.ndarray] = {}
    initializers = {t.name: t for t in graph.initializer}
    kept: list[onnx.NodeProto] = []
    made: set[str] = set()  # outputs of folded nodes
    range_bounds = {t for n in graph.node if n.op_type == "Range" for t in n.input}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            constant = _evaluate(node, {}, None)
            if constant is not None:
                known[node.output[0]] = constant
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
    return len(made)


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
    whole numbers (`_whole`): a YOLO head's anchors, a Range over a feature map's width."""
    if node.domain not in ("", "ai.onnx") or len(node.output) != 1 or not node.output[0]:
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return None
    kind = types.get(node.output[0])
    if node.op_type == "Constant" or kind is None:
        return None
    whole_float = node.op_type == "Range" or (node.op_type == "Cast" and node.output[0] in range_bounds)
    if kind.elem_type not in _EXACT and not (whole_float and kind.elem_type in _FLOATS):
        return None
    if node.op_type == "Shape":
        value = _static_shape(node, types)
    else:
        inputs = [t for t in node.input if t]
        if not all(t in known or (t in initializers and has_values(initializers[t])) for t in inputs):
            return None
        feeds = {t: known[t] if t in known else numpy_helper.to_array(initializers[t]) for t in inputs}
        value = _evaluate(node, feeds, opset)
        if value is None:
            return None
        if kind.elem_type in _FLOATS and not all(map(_whole, [*feeds.values(), value])):
            return None
    if value is None or value.size > MAX_FOLDED_ELEMENTS:
        return None
    return [value]


def _whole(value: np.ndarray) -> bool:
    """Whole numbers a float32 holds exactly, where every way of computing a Range or Cast of them
    (ORT adds delta step by step, numpy multiplies) gives the same floats."""
    if value.dtype == np.bool_:
        return True
    return bool(np.all(np.isfinite(value)) and np.all(np.mod(value, 1) == 0) and np.all(np.abs(value) <= 1 << 24))


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int | None) -> np.ndarray | None:
    """The node's output by onnx's reference evaluator; None (the node stays computed) where the
    evaluator cannot run it (onnx 1.23 fails on opset-11 Unsqueeze's `axes` attribute)."""
    try:
        outputs = ReferenceEvaluator(node, opsets=None if opset is None else {"": opset}).run(None, feeds)
    except Exception:  # noqa: BLE001 - any evaluator failure only means: not folded
        return None
    assert isinstance(outputs, list)  # a list when no intermediate results are asked for
    return np.asarray(outputs[0])


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
