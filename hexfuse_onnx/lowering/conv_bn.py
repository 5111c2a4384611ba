"""A BatchNormalization after a Conv, folded into the Conv's weight and bias as ONNX Runtime's ConvBNFusion
does (level 1: every optimization level but ORT_DISABLE_ALL). The kernel then runs one CONV2D where it ran
the Conv and a MUL and an ADD over its output, two more passes over it (paddle2onnx keeps the norms:
layout_cdla has 94 Conv -> BatchNormalization, slanet_table 73, ppocr_cls 35). The profile charges such a
norm nothing, fused or serial, as ORT runs it too (`qeltwise.model_plan`).

It folds where ORT does: the Conv's output is read by the norm alone and leaves the body nowhere else, the
norm is in inference mode with one output, and the Conv's weight and bias and the norm's four inputs are
float32 constants, one value per output channel. A Conv whose X is a DequantizeLinear (a QDQ group's)
is left to the QDQ lowering. The folded values are computed in float32 step by step as ORT's fusion
computes them: s = scale / sqrt(var + epsilon), W * s per output channel, and (B - mean) * s + bias, or
bias - mean * s without B. The folded weight is a program constant (a copy of the model's weight: the
function body keeps the original for stock ORT).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from .lowerer import Body, attr

DEFAULT_DOMAINS = ("", "ai.onnx")


def plan(cx: Body) -> dict[int, int]:
    """Body node index of each Conv -> that of the BatchNormalization folded into it."""
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(cx.nodes):
        for t in n.input:
            readers.setdefault(t, []).append(k)
    folds: dict[int, int] = {}
    for k, conv in enumerate(cx.nodes):
        if conv.op_type != "Conv" or conv.domain not in DEFAULT_DOMAINS or conv.output[0] in cx.out_index:
            continue
        after = readers.get(conv.output[0], [])
        if len(after) == 1 and _folds(cx, conv, cx.nodes[after[0]]):
            folds[k] = after[0]
    return folds


def folded(cx: Body, conv: onnx.NodeProto, bn: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
    """The Conv's weight and bias with the norm folded in (float32, ORT's order of steps)."""
    w, *params = (_float_value(cx, t) for t in [conv.input[1], *bn.input[1:5]])
    assert w is not None and all(p is not None for p in params)
    gamma, beta, mean, var = (np.asarray(p, np.float32) for p in params)
    s = gamma / np.sqrt(var + np.float32(attr(bn, "epsilon", 1e-5)))
    weight = w * s.reshape([-1] + [1] * (w.ndim - 1))
    b = _float_value(cx, conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
    bias = (b - mean) * s + beta if b is not None else beta - mean * s
    return weight.astype(np.float32), bias.astype(np.float32)


def _folds(cx: Body, conv: onnx.NodeProto, bn: onnx.NodeProto) -> bool:
    if bn.op_type != "BatchNormalization" or bn.domain not in DEFAULT_DOMAINS or bn.input[0] != conv.output[0]:
        return False
    if int(attr(bn, "training_mode", 0)) or not int(attr(bn, "spatial", 1)) or any(bn.output[1:]):
        return False
    if _made_by(cx.nodes, conv.input[0], "DequantizeLinear"):
        return False
    w = _float_value(cx, conv.input[1])
    per_channel = [t for t in [*conv.input[2:3], *bn.input[1:5]] if t]
    values = [_float_value(cx, t) for t in per_channel]
    if w is None or w.ndim < 3 or any(v is None for v in values):
        return False
    return all(v is not None and v.shape == (w.shape[0],) for v in values)


def _float_value(cx: Body, name: str) -> np.ndarray | None:
    """A float32 constant's value: known to the body, or a body Constant node's (the Lowerer knows a
    body Constant's value once it has lowered it)."""
    value = cx.known_value(name)
    if value is None:
        made = _made_by(cx.nodes, name, "Constant")
        t = attr(made, "value") if made is not None else None
        value = numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else None
    return value if value is not None and value.dtype == np.float32 else None


def _made_by(nodes: Sequence[onnx.NodeProto], name: str, op_type: str) -> onnx.NodeProto | None:
    made = next((n for n in nodes if name in n.output), None)
    return made if made is not None and made.op_type == op_type and made.domain in DEFAULT_DOMAINS else None
