"""Dynamic quantisation, as `onnxruntime.quantization.quantize_dynamic` writes it: DynamicQuantizeLinear
(u8) of an activation, MatMulInteger or ConvInteger of it with u8/i8 weights, and the Cast of the int32
result to float that the scales then multiply. Integer results equal ONNX Runtime's bit for bit.

DynamicQuantizeLinear is two program ops: DYNAMIC_QPARAMS (the scale and zero point, its two
outputs) and QUANTIZE_LINEAR reading them. MatMulInteger is IMATMUL (QMATMUL's int32 accumulators),
ConvInteger is ICONV2D (QCONV2D's), both on the engine the profile costs 8-bit work on
(`profile.engine_at_width`)."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ..profile import engine_at_width
from .abi import Dtype, Opcode, QuantParam, Task
from .lowerer import DTYPES, Lowerer, attr
from .matrix import conv_params
from .qmatmul import EIGHT_BIT
from .registry import LoweringError, lowers
from .spatial import pads_2d


@lowers("DynamicQuantizeLinear")
def dynamic_quantize_linear(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    if not all(n.output[:3]) or len(n.output) != 3:
        raise LoweringError(n.op_type, n.name, "all three outputs (y, scale, zero point) must be named")
    x = cx.read(n.input[0], n, t)
    scale = cx.emit(n, t, Opcode.DYNAMIC_QPARAMS, [x], out=n.output[1])
    zero = cx.typed_output(n, t, n.output[2], Dtype.U8)
    cx.prog.ops[-1].second_output = zero
    cx.emit(n, t, Opcode.QUANTIZE_LINEAR, [x, scale, zero], {QuantParam.AXIS: 0}, out=n.output[0], out_dtype=Dtype.U8)


@lowers("MatMulInteger")
def matmul_integer(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A [..., K] x B [K, N] (a 2-D B: the weights), zero points per tensor (B's also per column)."""
    b = cx.shape(n.input[1], n)
    if len(b) != 2:
        raise LoweringError(n.op_type, n.name, f"B {b} must be 2-D [K, N]")
    inputs = _integer_operands(cx, n, t, b[1], "column of B")
    cx.emit(n, t, Opcode.IMATMUL, inputs, engine=engine_at_width(n, 8), out_dtype=Dtype.I32)


@lowers("ConvInteger")
def conv_integer(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """X [N, C, H, W] * W [M, C/group, kh, kw], zero points per tensor (W's also per output channel)."""
    x, w = cx.shape(n.input[0], n), cx.shape(n.input[1], n)
    if len(x) != 4 or len(w) != 4:
        raise LoweringError(n.op_type, n.name, f"X {x} and W {w}: only a 2-D conv (rank 4) is supported")
    inputs = _integer_operands(cx, n, t, w[0], "output channel")
    strides = [int(v) for v in attr(n, "strides", [1, 1])]
    dil = [int(v) for v in attr(n, "dilations", [1, 1])]
    params = conv_params(n, strides, dil, pads_2d(n, x, w[2:], strides, dil))
    cx.emit(n, t, Opcode.ICONV2D, inputs, params, engine=engine_at_width(n, 8), out_dtype=Dtype.I32)


def _integer_operands(cx: Lowerer, n: onnx.NodeProto, t: Task, cols: int, col: str) -> list[int]:
    """The two u8/i8 operands and their zero points (absent: 0), the second's one value or one per `col`."""
    types = [DTYPES.get(cx.dtype(name)) for name in n.input[:2]]
    if not all(d in EIGHT_BIT for d in types):
        raise LoweringError(n.op_type, n.name, f"{n.input[0]!r} and {n.input[1]!r} must be u8 or i8")
    inputs = [cx.read_typed(name, n, t, d) for name, d in zip(n.input[:2], types)]  # type: ignore[arg-type]
    for k, (d, allowed) in enumerate(zip(types, ({1}, {1, cols}))):
        zero = n.input[k + 2] if len(n.input) > k + 2 else ""
        if not zero:
            inputs.append(cx.constant(np.zeros((), np.int32), t, d))  # type: ignore[arg-type]
            continue
        dims = cx.shape(zero, n)
        if math.prod(dims) not in allowed or len(dims) > 1:
            per = "one value" if k == 0 else f"one value or one per {col}"
            raise LoweringError(n.op_type, n.name, f"zero point '{zero}' {dims}: {per} is supported")
        inputs.append(cx.read_typed(zero, n, t, d))  # type: ignore[arg-type]
    return inputs
