"""Quantization: QuantizeLinear and DequantizeLinear (ai.onnx, and com.microsoft's, which QDQ
models use for 16-bit types below opset 21), per tensor or per axis, on the vector engine.

Their integer tensors are program tensors of their own dtype (u8, i8, u16, i16; DequantizeLinear
also reads i32 biases). A program with a 16-bit tensor is encoded as format v2 (`program.encode`).
The integer tensor's scale and zero point go into the v2 quantization section when they are known.
"""

from __future__ import annotations

import numpy as np
import onnx

from .abi import Dtype, Opcode, QuantParam, Task
from .lowerer import DTYPES, Lowerer, attr
from .registry import LoweringError, lowers

QUANTIZED = {Dtype.U8, Dtype.I8, Dtype.U16, Dtype.I16}  # what QuantizeLinear writes
DEQUANTIZED = QUANTIZED | {Dtype.I32}


def dequantized(n: onnx.NodeProto, inputs: list[np.ndarray | None]) -> np.ndarray | None:
    """The value of DequantizeLinear `n` (either domain) from its inputs' values, or None when one is
    unknown, the scale is per axis or not float32 (a float16 scale makes ORT compute in float16):
    (q - zero point) * scale, as ONNX Runtime computes it."""
    if n.op_type != "DequantizeLinear" or n.domain not in ("", "ai.onnx", "com.microsoft"):
        return None
    if len(inputs) < 2 or any(v is None for v in inputs) or any(v.size != 1 for v in inputs[1:]):  # type: ignore[union-attr]
        return None
    if np.asarray(inputs[1]).dtype != np.float32:
        return None
    q, scale = np.asarray(inputs[0]), np.asarray(inputs[1], np.float32).reshape(())
    zero = np.asarray(inputs[2]).astype(np.int32).reshape(()) if len(inputs) > 2 else np.int32(0)
    with np.errstate(over="ignore"):  # beyond float32 (an attention mask's -3.4e38 at a u16 step): inf, as ORT's
        return ((q.astype(np.int32) - zero) * scale).astype(np.float32)


def quantized(n: onnx.NodeProto, inputs: list[np.ndarray | None]) -> np.ndarray | None:
    """The value of QuantizeLinear `n` (either domain) from its inputs' values, or None when one is unknown,
    the scale is per axis or not float32, or the zero point is not given (its type is the output's):
    saturate(round half to even(x / scale) + zero point), as ONNX Runtime computes it. quantize_static
    writes Q -> DQ of a float constant where the weight is a Constant node (paddle2onnx's BatchNormalization)."""
    if n.op_type != "QuantizeLinear" or n.domain not in ("", "ai.onnx", "com.microsoft") or len(inputs) != 3:
        return None
    x, scale, zero = inputs
    if x is None or scale is None or zero is None or scale.size != 1 or zero.size != 1:
        return None
    if np.asarray(scale).dtype != np.float32 or np.asarray(x).dtype != np.float32 or zero.dtype.kind not in "iu":
        return None
    info = np.iinfo(zero.dtype)
    steps = np.rint(np.asarray(x, np.float32) / np.asarray(scale, np.float32).reshape(()))
    return np.clip(steps + float(zero.reshape(())), info.min, info.max).astype(zero.dtype)


@lowers("QuantizeLinear", "DequantizeLinear", "com.microsoft::QuantizeLinear", "com.microsoft::DequantizeLinear")
def quantize_linear(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    q = n.op_type == "QuantizeLinear"
    if int(attr(n, "block_size", 0)) != 0:
        raise LoweringError(n.op_type, n.name, "blocked quantization (block_size) is not supported")
    integer = n.output[0] if q else n.input[0]
    half = next((t for t in [*n.input[:2], n.output[0]] if cx.stored_dtype(t) == onnx.TensorProto.FLOAT16), None)
    if half is not None:  # float16 is otherwise computed as float32 (Lowerer.dtype): not this op's rounding
        raise LoweringError(n.op_type, n.name, f"'{half}' is float16: the kernel quantizes float32 only")
    dtype = DTYPES.get(cx.dtype(integer))
    if dtype not in (QUANTIZED if q else DEQUANTIZED):
        name = onnx.TensorProto.DataType.Name(cx.dtype(integer)) if cx.dtype(integer) else "unknown"
        raise LoweringError(
            n.op_type, n.name, f"'{integer}' is {name}: QuantizeLinear/DequantizeLinear carry 8- and 16-bit integers"
        )
    _finite_scale(cx, n)
    x = cx.read_typed(n.input[0], n, t, Dtype.F32 if q else dtype)
    scale = cx.read_typed(n.input[1], n, t, Dtype.F32)
    inputs = [x, scale]
    if len(n.input) > 2 and n.input[2]:
        inputs.append(cx.read_typed(n.input[2], n, t, dtype))
    rank = len(cx.shape(n.input[0], n))
    scale_dims = cx.prog.tensors[scale].dims
    axis = 0
    if len(scale_dims) == 1 and scale_dims[0] > 1:
        axis = int(attr(n, "axis", 1))
        axis = axis + rank if axis < 0 else axis
    opcode = Opcode.QUANTIZE_LINEAR if q else Opcode.DEQUANTIZE_LINEAR
    y = cx.emit(n, t, opcode, inputs, {QuantParam.AXIS: axis}, out_dtype=dtype if q else Dtype.F32)
    scale_value = cx.known_value(n.input[1])
    zero_value = cx.known_value(n.input[2]) if len(inputs) > 2 else None
    if scale_value is not None and (zero_value is not None or len(inputs) == 2):
        cx.quantized(y if q else x, scale_value, zero_value, t, axis)


def _finite_scale(cx: Lowerer, n: onnx.NodeProto) -> None:
    """A constant scale must be finite: ORT's quantiser writes an infinite one for a tensor calibrated
    over an unbounded range (khmersm's attention mask adds -inf; the QAdd after it was lowered with an
    infinite ratio, and the kernel refused the whole program when the session loaded)."""
    scale = cx.known_value(n.input[1])
    if scale is not None and not np.all(np.isfinite(scale)):
        raise LoweringError(n.op_type, n.name, f"its scale '{n.input[1]}' is not finite ({scale.reshape(-1)[0]})")
