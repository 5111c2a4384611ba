"""QOperator ops without an integer kernel, as the QDQ chain they stand for: each integer input
dequantized, the f32 op, the result quantized (DEQUANTIZE_LINEAR, the op, QUANTIZE_LINEAR through
scratch tensors). com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearConcat and
QLinearGlobalAveragePool, per-tensor scales and zero points that are initializers.

ONNX Runtime computes these in its own ways (QLinearAdd/Mul with float scale ratios, QLinearSigmoid
with a 256-entry table made by the same dequantize -> sigmoid -> quantize); the results differ from
the chain only where a value rounds at a tie, by one step. QLinearConv and QLinearMatMul have
integer kernels (`qmatmul.qlinear`).
"""

from __future__ import annotations

import numpy as np
import onnx

from .abi import Dtype, Opcode, Param, QuantParam, Task
from .lowerer import DTYPES, Lowerer, attr
from .qmatmul import EIGHT_BIT
from .registry import LoweringError, lowers

MS = "com.microsoft::"
ELEMENTWISE = {"QLinearAdd": Opcode.ADD, "QLinearMul": Opcode.MUL}


def _integer_type(cx: Lowerer, n: onnx.NodeProto, name: str) -> Dtype:
    dtype = DTYPES.get(cx.dtype(name))
    if dtype not in EIGHT_BIT:
        raise LoweringError(n.op_type, n.name, f"'{name}' is not u8/i8")
    return dtype


def _qparams(cx: Lowerer, n: onnx.NodeProto, scale: str, zero: str, dtype: Dtype, t: Task) -> list[int]:
    """Program constants of a per-tensor scale and zero point (0 when the input is omitted)."""
    s = cx.known_value(scale)
    z = cx.known_value(zero) if zero else np.zeros((), np.int64)
    if s is None or z is None or s.size != 1 or z.size != 1 or s.dtype != np.float32:
        raise LoweringError(n.op_type, n.name, "scales and zero points must be per-tensor initializers")
    return [cx.constant(s.reshape(()), t), cx.constant(z.reshape(()), t, dtype)]


def _dequantize(cx: Lowerer, n: onnx.NodeProto, t: Task, x: str, scale: str, zero: str) -> int:
    dtype = _integer_type(cx, n, x)
    inputs = [cx.read_typed(x, n, t, dtype), *_qparams(cx, n, scale, zero, dtype, t)]
    out = cx.scratch(cx.shape(x, n), t)
    cx.quantized(inputs[0], cx.known_value(scale), None, t, zero_id=inputs[2])
    return cx.emit(n, t, Opcode.DEQUANTIZE_LINEAR, inputs, {QuantParam.AXIS: 0}, out=out)


def _quantize(cx: Lowerer, n: onnx.NodeProto, t: Task, src: int, scale: str, zero: str) -> None:
    dtype = _integer_type(cx, n, n.output[0])
    inputs = [src, *_qparams(cx, n, scale, zero, dtype, t)]
    y = cx.emit(n, t, Opcode.QUANTIZE_LINEAR, inputs, {QuantParam.AXIS: 0}, out=n.output[0], out_dtype=dtype)
    cx.quantized(y, cx.known_value(scale), None, t, zero_id=inputs[2])


def _arg(n: onnx.NodeProto, k: int) -> str:
    return n.input[k] if len(n.input) > k else ""


def _result(cx: Lowerer, n: onnx.NodeProto, t: Task) -> int:
    return cx.scratch(cx.shape(n.output[0], n), t)


@lowers(*(MS + op for op in ELEMENTWISE))
def qlinear_binary(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp (broadcasting as Add/Mul)."""
    a = _dequantize(cx, n, t, n.input[0], n.input[1], _arg(n, 2))
    b = _dequantize(cx, n, t, n.input[3], n.input[4], _arg(n, 5))
    y = cx.emit(n, t, ELEMENTWISE[n.op_type], [a, b], out=_result(cx, n, t))
    _quantize(cx, n, t, y, n.input[6], _arg(n, 7))


@lowers(MS + "QLinearSigmoid")
def qlinear_sigmoid(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """X, X_scale, X_zp, Y_scale, Y_zp."""
    x = _dequantize(cx, n, t, n.input[0], n.input[1], _arg(n, 2))
    y = cx.emit(n, t, Opcode.SIGMOID, [x], out=_result(cx, n, t))
    _quantize(cx, n, t, y, n.input[3], _arg(n, 4))


@lowers(MS + "QLinearGlobalAveragePool")
def qlinear_global_average_pool(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """X, x_scale, x_zp, y_scale, y_zp; NCHW only."""
    if int(attr(n, "channels_last", 0)) or len(cx.shape(n.input[0], n)) < 3:
        raise LoweringError(n.op_type, n.name, "only channels-first inputs of rank >= 3 are supported")
    x = _dequantize(cx, n, t, n.input[0], n.input[1], _arg(n, 2))
    y = cx.emit(n, t, Opcode.GLOBAL_AVGPOOL, [x], out=_result(cx, n, t))
    _quantize(cx, n, t, y, n.input[3], _arg(n, 4))


@lowers(MS + "QLinearConcat")
def qlinear_concat(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Y_scale, Y_zp, then (X, X_scale, X_zp) per input."""
    triples = [n.input[k : k + 3] for k in range(2, len(n.input), 3)]
    if not 1 <= len(triples) <= 8 or any(len(x) != 3 for x in triples):
        raise LoweringError(n.op_type, n.name, "1..8 inputs of (X, scale, zero point) are supported")
    xs = [_dequantize(cx, n, t, x, s, z) for x, s, z in triples]
    y = cx.emit(n, t, Opcode.CONCAT, xs, {Param.AXIS: int(attr(n, "axis"))}, out=_result(cx, n, t))
    _quantize(cx, n, t, y, n.input[0], n.input[1])
