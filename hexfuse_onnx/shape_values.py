"""The values of small integer tensors a model computes from its input shapes, as expressions of its dim names.

ONNX Runtime runs such shape arithmetic outside the pairs (kinds.dag), and a pair may read the result as a
value that steers an op: a decode step's past length, Gather(Shape(past_key), 2), as the start of the position
ids' Slice `[:, past:past + new]`. Its expression ('past') lets the pair's shape section patch that param
(lowering.shapes), so the program follows the past length as ORT's Slice does.
"""

from __future__ import annotations

from math import prod

import numpy as np
import onnx
import sympy
from onnx import numpy_helper

from . import shape_expr
from .graph import ModelGraph

MAX_ELEMENTS = 8  # a Slice's starts: one per axis
INTEGERS = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
Value = tuple[sympy.Expr, ...]


def value_exprs(g: ModelGraph, name: str) -> Value | None:
    """The value of tensor `name`, flattened, each element an expression of the model's dim names; None when
    it is not made from shapes and integer constants by Shape, Gather, Concat, the reshapes, Cast, Add, Sub
    and Mul, or when a dim it reads has no expression."""
    info = g.info(name)
    dims = [d for d in info.shape or () if isinstance(d, int)]
    if info.elem_type not in INTEGERS or info.shape is None or len(dims) < len(info.shape) or prod(dims) > MAX_ELEMENTS:
        return None
    if name in g.initializers:
        array = numpy_helper.to_array(g.initializers[name])
        return _constant(array)
    k = g.producer.get(name)
    if k is None:
        return None
    n = g.nodes[k]
    if n.op_type == "Constant":
        return next((_constant(numpy_helper.to_array(a.t)) for a in n.attribute if a.name == "value"), None)
    if n.op_type == "Shape":
        return _shape(g, n.input[0], n)
    inputs = [value_exprs(g, t) if t else () for t in n.input]
    if any(v is None for v in inputs):
        return None
    return _apply(n.op_type, n, [v for v in inputs if v is not None])


def at(value: Value, symbols: dict[str, int]) -> np.ndarray:
    """The value at a binding of the dim names (ShapeBinding.symbols), as int64."""
    return np.array([shape_expr.evaluate(e, symbols) for e in value], np.int64)


def _constant(array: np.ndarray) -> Value | None:
    if array.dtype.kind not in "iu" or array.size > MAX_ELEMENTS:
        return None
    return tuple(sympy.Integer(int(v)) for v in array.reshape(-1))


def _shape(g: ModelGraph, tensor: str, n: onnx.NodeProto) -> Value | None:
    dims = g.symbolic_dims(tensor) if g.source is not None else g.info(tensor).shape
    if dims is None:
        return None
    start, end = (next((a.i for a in n.attribute if a.name == k), None) for k in ("start", "end"))
    out = []
    for d in list(dims)[start:end]:
        try:
            out.append(sympy.Integer(d) if isinstance(d, int) else shape_expr.parse_dim(d))
        except shape_expr.ShapeExprError:
            return None
    return tuple(out) if len(out) <= MAX_ELEMENTS else None


def _apply(op: str, n: onnx.NodeProto, inputs: list[Value]) -> Value | None:
    if op in ("Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Cast"):
        return inputs[0]
    if op == "Concat":
        return tuple(e for v in inputs for e in v)
    if op == "Gather":
        axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
        data, index = inputs
        if axis != 0 or not all(i.is_Integer and -len(data) <= int(i) < len(data) for i in index):
            return None
        return tuple(data[int(i)] for i in index)
    if op in ("Add", "Sub", "Mul") and len(inputs) == 2:
        a, b = inputs
        if len(a) != len(b) and 1 not in (len(a), len(b)):
            return None
        size = max(len(a), len(b))
        a, b = (v * size if len(v) == 1 else v for v in (a, b))
        combine = {"Add": sympy.Add, "Sub": lambda x, y: x - y, "Mul": sympy.Mul}[op]
        return tuple(sympy.expand(combine(x, y)) for x, y in zip(a, b))
    return None
