"""The int32 bias ONNX Runtime gives a QDQ Conv, ConvTranspose or Gemm whose bias is a float initializer.

Its WeightBiasQuantization transformer (level 1: every optimization level but ORT_DISABLE_ALL)
replaces such a bias by DequantizeLinear(Cast<int32>(Round(bias / (s_x * s_w))), s_x * s_w), each
step in float32 (Round: half to even), before its QDQ fusion: an 8-bit group then runs QLinearConv
/ QGemm with that int32 bias (`qmatmul`), any other its float op on the dequantized bias (`matrix`).
It does so when X is a DequantizeLinear of one scale, W a DequantizeLinear per tensor or per channel
of W's axis 0 (a Gemm's N axis; the axis attribute given) as many as the bias has, the bias a 1-D
initializer, and the output reaches a QuantizeLinear through Relu/Clip only, each read by one node.
A float W is quantized there too (to int8, symmetric): not followed, such a group keeps its float
bias here, and ORT's result is not the float path's.
"""

from __future__ import annotations

import numpy as np
import onnx

from .lowerer import Lowerer, attr

INT32_LIMIT = 2.0**31


def _dq(cx: Lowerer, name: str) -> onnx.NodeProto | None:
    made_by = next((b for b in cx.fn.node if name in b.output), None)
    return made_by if made_by is not None and made_by.op_type == "DequantizeLinear" else None


def _reaches_quantize(cx: Lowerer, name: str) -> bool:
    """`name` is read by one node only, a QuantizeLinear, or a Relu/Clip whose output is in turn
    (a pair output's readers are outside the body: unknown, so no)."""
    while name not in cx.out_index:
        readers = [b for b in cx.fn.node if name in b.input]
        if len(readers) != 1:
            return False
        if readers[0].op_type == "QuantizeLinear":
            return True
        if readers[0].op_type not in ("Relu", "Clip"):
            return False
        name = readers[0].output[0]
    return False


def _weight_scale_fits(cx: Lowerer, n: onnx.NodeProto, w_dq: onnx.NodeProto, sw: np.ndarray, cols: int) -> bool:
    if sw.size == 1:
        return True
    if sw.ndim != 1 or sw.size != cols or int(attr(w_dq, "block_size", 0)) != 0:
        return False
    if not any(a.name == "axis" for a in w_dq.attribute):
        return n.op_type == "Gemm" and not int(attr(n, "transB", 0))  # DequantizeLinear's default axis is 1
    expected = 1 if n.op_type == "Gemm" and not int(attr(n, "transB", 0)) else 0
    return int(attr(w_dq, "axis", 1)) % len(cx.shape(w_dq.input[0], w_dq)) == expected


def ort_bias(cx: Lowerer, n: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(int32 bias [M], its float32 scale [1] or [M]) ONNX Runtime makes of n's float bias, or None
    when it keeps the bias as written (see the module doc)."""
    if n.op_type not in ("Conv", "ConvTranspose", "Gemm") or n.domain not in ("", "ai.onnx") or len(n.input) < 3:
        return None
    bias = cx.known_value(n.input[2])
    x_dq, w_dq = _dq(cx, n.input[0]), _dq(cx, n.input[1])
    if bias is None or bias.dtype != np.float32 or bias.ndim != 1 or x_dq is None or w_dq is None:
        return None
    sx, sw = cx.known_value(x_dq.input[1]), cx.known_value(w_dq.input[1])
    if sx is None or sw is None or sx.size != 1 or sx.dtype != np.float32 or sw.dtype != np.float32:
        return None
    if not _weight_scale_fits(cx, n, w_dq, sw, bias.size) or not _reaches_quantize(cx, n.output[0]):
        return None
    scale = (sx.reshape(()) * sw.reshape(-1)).astype(np.float32)
    q = np.rint(bias / scale)  # float32 / float32: ORT's Div, then its Round (half to even)
    if not np.all(np.abs(q) < INT32_LIMIT):
        return None
    return q.astype(np.int32), scale


def dequantized_bias(cx: Lowerer, n: onnx.NodeProto) -> np.ndarray | None:
    """The float32 bias ONNX Runtime's float Conv/ConvTranspose/Gemm adds after quantizing n's float bias (its
    DequantizeLinear of `ort_bias`), or None when ORT adds the bias as written."""
    made = ort_bias(cx, n)
    if made is None:
        return None
    q, scale = made
    return (q.astype(np.float32) * scale).astype(np.float32)
