"""The weight and bias ONNX Runtime gives a QDQ Conv, ConvTranspose or Gemm whose weight or bias is a
float initializer (its WeightBiasQuantization transformer: level 1, every optimization level but
ORT_DISABLE_ALL), before its QDQ fusion: an 8-bit group it fuses then runs QLinearConv / QGemm on
them (`qmatmul`), any other group its float op on their DequantizeLinear (`matrix`).

It acts when X is a DequantizeLinear whose scale is a scalar or [1], the output reaches a
QuantizeLinear through Relu/Clip only (each read by one node), and the bias, if given, is a 1-D
initializer (else it leaves W and B as written). Then
- a float32 W initializer becomes DQ(Q(W)), int8 per tensor, asymmetric over [min(W, 0), max(W, 0)]:
  s_w = f32((max - min) / 255), z_w = round_half_even(clamp(f32(-128 - min / s_w), -128, 127))
  (s_w = 1 when max = min), Q(W) = clamp(round_half_even(f32(W / s_w)) + z_w) (onnxruntime's
  util/qmath.h GetQuantizationParameter, called without its test-only Symmetric: the comment
  beside that call says "symmetric", the int8 zero points it writes are not 0);
- a float bias becomes DQ(Cast<int32>(Round(B / (s_x * s_w))), s_x * s_w), each step in float32
  (Round: half to even), when W is that quantized one or a DequantizeLinear per tensor or per channel
  of W's axis 0 (a Gemm's N axis; the axis attribute given) as many as the bias has.
A MatMul's float weight is left as written (it is not one of the three ops): that group stays
DQ -> MatMul -> Q.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from .lowerer import Body, attr

INT32_LIMIT = 2.0**31
OPS = ("Conv", "ConvTranspose", "Gemm")


@dataclass(frozen=True)
class OrtWeight:
    """The int8 weight ONNX Runtime makes of a float one: its values (W's shape), scale and zero point."""

    q: np.ndarray
    scale: np.float32
    zero: int

    def dequantized(self) -> np.ndarray:
        """Its DequantizeLinear: (q - z) * s in float32."""
        return ((self.q.astype(np.int32) - self.zero) * self.scale).astype(np.float32)


def _dq(cx: Body, name: str) -> onnx.NodeProto | None:
    made_by = next((b for b in cx.nodes if name in b.output), None)
    return made_by if made_by is not None and made_by.op_type == "DequantizeLinear" else None


def _reaches_quantize(cx: Body, name: str) -> bool:
    """`name` is read by one node only, a QuantizeLinear, or a Relu/Clip whose output is in turn
    (a pair output's readers are outside the body: unknown, so no)."""
    while name not in cx.out_index:
        readers = [b for b in cx.nodes if name in b.input]
        if len(readers) != 1:
            return False
        if readers[0].op_type == "QuantizeLinear":
            return True
        if readers[0].op_type not in ("Relu", "Clip"):
            return False
        name = readers[0].output[0]
    return False


def _acts_on(cx: Body, n: onnx.NodeProto) -> bool:
    """ORT's transformer looks at n: X a DequantizeLinear of one scale, the output reaching a
    QuantizeLinear, the bias (if any) a 1-D initializer."""
    if n.op_type not in OPS or n.domain not in ("", "ai.onnx") or len(n.input) < 2:
        return False
    x_dq = _dq(cx, n.input[0])
    sx = cx.known_value(x_dq.input[1]) if x_dq is not None else None
    if sx is None or sx.ndim > 1 or sx.size != 1 or not _reaches_quantize(cx, n.output[0]):
        return False
    bias = cx.known_value(n.input[2]) if len(n.input) > 2 and n.input[2] else None
    return bias is not None and bias.ndim == 1 if len(n.input) > 2 and n.input[2] else True


def ort_weight(cx: Body, n: onnx.NodeProto) -> OrtWeight | None:
    """The int8 weight ONNX Runtime makes of n's float32 weight initializer, or None when it keeps
    the weight as written (see the module doc)."""
    w = cx.known_value(n.input[1]) if len(n.input) > 1 else None
    if w is None or w.dtype != np.float32 or w.size == 0 or _dq(cx, n.input[1]) is not None or not _acts_on(cx, n):
        return None
    return quantized_weight(w)


def quantized_weight(w: np.ndarray) -> OrtWeight:
    """ORT's int8 of a float32 weight (see the module doc), each step in float32."""
    lo, hi = min(np.float32(w.min()), np.float32(0)), max(np.float32(w.max()), np.float32(0))
    scale = np.float32(1) if hi == lo else np.float32(np.float32(hi - lo) / np.float32(255))
    zero = int(np.rint(np.clip(np.float32(np.float32(-128) - np.float32(lo / scale)), -128, 127)))
    q = np.clip(np.rint((w / scale).astype(np.float32)) + zero, -128, 127)  # MlasQuantizeLinear: x / s
    return OrtWeight(q.astype(np.int8), scale, zero)


def dequantized_weight(cx: Body, n: onnx.NodeProto) -> np.ndarray | None:
    """The float32 weight ONNX Runtime's float Conv/ConvTranspose/Gemm reads after quantizing n's float
    weight (the DequantizeLinear of `ort_weight`), or None when it reads the weight as written."""
    made = ort_weight(cx, n)
    return None if made is None else made.dequantized()


def _weight_scale_fits(cx: Body, n: onnx.NodeProto, w_dq: onnx.NodeProto, sw: np.ndarray, cols: int) -> bool:
    if sw.size == 1:
        return True
    if sw.ndim != 1 or sw.size != cols or int(attr(w_dq, "block_size", 0)) != 0:
        return False
    if not any(a.name == "axis" for a in w_dq.attribute):
        return n.op_type == "Gemm" and not int(attr(n, "transB", 0))  # DequantizeLinear's default axis is 1
    expected = 1 if n.op_type == "Gemm" and not int(attr(n, "transB", 0)) else 0
    return int(attr(w_dq, "axis", 1)) % len(cx.shape(w_dq.input[0], w_dq)) == expected


def _weight_scale(cx: Body, n: onnx.NodeProto, cols: int) -> np.ndarray | None:
    """s_w as ORT's bias quantization reads it: the quantized float weight's, or W's DequantizeLinear's
    when it fits (per tensor, or per channel of the output axis)."""
    made = ort_weight(cx, n)
    if made is not None:
        return np.array([made.scale], np.float32)
    w_dq = _dq(cx, n.input[1])
    if w_dq is None:
        return None
    sw = cx.known_value(w_dq.input[1])
    if sw is None or sw.dtype != np.float32 or not _weight_scale_fits(cx, n, w_dq, sw, cols):
        return None
    return sw.reshape(-1)


def ort_bias(cx: Body, n: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(int32 bias [M], its float32 scale [1] or [M]) ONNX Runtime makes of n's float bias, or None
    when it keeps the bias as written (see the module doc)."""
    if len(n.input) < 3 or not n.input[2] or not _acts_on(cx, n):
        return None
    bias = cx.known_value(n.input[2])
    x_dq = _dq(cx, n.input[0])
    if bias is None or bias.dtype != np.float32 or x_dq is None:
        return None
    sx, sw = cx.known_value(x_dq.input[1]), _weight_scale(cx, n, bias.size)
    if sx is None or sw is None or sx.dtype != np.float32:
        return None
    scale = (sx.reshape(()) * sw).astype(np.float32)
    q = np.rint(bias / scale)  # float32 / float32: ORT's Div, then its Round (half to even)
    if not np.all(np.abs(q) < INT32_LIMIT):
        return None
    return q.astype(np.int32), scale


def dequantized_bias(cx: Body, n: onnx.NodeProto) -> np.ndarray | None:
    """The float32 bias ONNX Runtime's float Conv/ConvTranspose/Gemm adds after quantizing n's float
    bias (its DequantizeLinear of `ort_bias`), or None when ORT adds the bias as written."""
    made = ort_bias(cx, n)
    if made is None:
        return None
    q, scale = made
    return (q.astype(np.float32) * scale).astype(np.float32)
