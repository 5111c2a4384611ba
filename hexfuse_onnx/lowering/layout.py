"""Data movement on the copy engine: Transpose, Concat, Slice, the reshape family; and Constant,
which emits no op (its value becomes a program constant or steers another op's parameters)."""

from __future__ import annotations

import onnx
from onnx import numpy_helper

from .abi import Layout, Opcode, Param, SliceParam, Task
from .lowerer import Lowerer, attr
from .registry import LoweringError, lowers

INT32_MAX = 2**31 - 1
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


@lowers("Constant")
def constant(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    value = attr(n, "value")
    if value is None:
        raise LoweringError(n.op_type, n.name, "only the 'value' form of Constant is supported")
    cx.static[n.output[0]] = numpy_helper.to_array(value)


@lowers(*RESHAPES)
def reshape(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A real copy: the kernel has no aliasing view, the output gets its own buffer."""
    cx.emit(n, t, Opcode.COPY, [cx.read(n.input[0], n, t)])


@lowers("Transpose")
def transpose(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    rank = len(cx.shape(n.input[0], n))
    perm = list(attr(n, "perm", list(range(rank))[::-1]))
    params = {Param.PERM + i: p for i, p in enumerate(perm)}
    cx.emit(n, t, Opcode.TRANSPOSE, [cx.read(n.input[0], n, t)], params)


@lowers("Concat")
def concat(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    if not 1 <= len(n.input) <= Layout.MAX_OP_INPUTS:
        raise LoweringError(n.op_type, n.name, f"{len(n.input)} inputs; the kernel concatenates 1..8")
    inputs = [cx.read(i, n, t) for i in n.input]
    cx.emit(n, t, Opcode.CONCAT, inputs, {Param.AXIS: int(attr(n, "axis"))})


@lowers("Slice")
def slice_(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    rank = len(cx.shape(n.input[0], n))
    if cx.opset < 10:
        starts, ends = list(attr(n, "starts")), list(attr(n, "ends"))
        axes = list(attr(n, "axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = cx.const_ints(n.input[1], n), cx.const_ints(n.input[2], n)
        axes = cx.const_ints(n.input[3], n) if len(n.input) > 3 and n.input[3] else list(range(len(starts)))
        steps = cx.const_ints(n.input[4], n) if len(n.input) > 4 and n.input[4] else [1] * len(starts)
    s, e, st = [0] * rank, [INT32_MAX] * rank, [1] * rank
    for a, b, c, d in zip(axes, starts, ends, steps):
        s[a % rank], e[a % rank], st[a % rank] = _clamp(b), _clamp(c), _clamp(d)
    params = {}
    for i in range(rank):
        params[SliceParam.STARTS + i] = s[i]
        params[SliceParam.ENDS + i] = e[i]
        params[SliceParam.STEPS + i] = st[i]
    cx.emit(n, t, Opcode.SLICE, [cx.read(n.input[0], n, t)], params)


def _clamp(v: int) -> int:
    return max(-INT32_MAX - 1, min(INT32_MAX, v))
