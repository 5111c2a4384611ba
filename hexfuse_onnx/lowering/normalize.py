"""Ops over an axis on the vector engine: Softmax, LogSoftmax, LayerNormalization, RMSNormalization,
InstanceNormalization, ReduceMean/Sum/Max/Min, ArgMax/ArgMin (int64 indices), inference-mode BatchNormalization
(per-channel MUL then ADD), and onnxruntime's norms: SimplifiedLayerNormalization (RMS), SkipLayerNormalization and
SkipSimplifiedLayerNormalization (the residual ADDs, then the norm)."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ..profile import Engine as EngineClass
from .abi import ArgParam, Dtype, Opcode, Param, ReduceParam, Task
from .lowerer import Lowerer, attr, f32_bits
from .registry import LoweringError, lowers

SOFTMAX = {"Softmax": Opcode.SOFTMAX, "LogSoftmax": Opcode.LOG_SOFTMAX}


@lowers(*SOFTMAX)
def softmax(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """SOFTMAX / LOG_SOFTMAX along one axis (float16 widened to float32, rounded at the pair's end, as ORT's CPU
    runs a float16 node in float32): LogSoftmax as ORT's MLAS, (x - max) - log(sum exp(x - max)), not Log of a
    Softmax (an exp below float's range would give -inf where x - max is finite). Below opset 13 both coerce the
    input to 2-D, [prod(dims[:axis]), prod(dims[axis:])]: the same as along the last axis only when axis is it."""
    rank = len(cx.shape(n.input[0], n))
    axis = int(attr(n, "axis", -1 if cx.opset >= 13 else 1))
    if not -rank <= axis < rank:
        raise LoweringError(n.op_type, n.name, f"axis {axis} is outside the input's rank {rank}")
    if cx.opset < 13 and axis % rank != rank - 1:
        raise LoweringError(
            n.op_type,
            n.name,
            f"opset {cx.opset} {n.op_type} coerces to 2-D (over every axis from {axis} on); only the last axis "
            "is supported",
        )
    cx.emit(n, t, SOFTMAX[n.op_type], [cx.read(n.input[0], n, t)], {Param.AXIS: axis})


@lowers("LayerNormalization")
def layer_norm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    inputs = [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)]
    if len(n.input) > 2 and n.input[2]:
        inputs.append(cx.read(n.input[2], n, t))
    params = {Param.AXIS: int(attr(n, "axis", -1)), Param.EPSILON: f32_bits(float(attr(n, "epsilon", 1e-5)))}
    cx.emit(n, t, Opcode.LAYERNORM, inputs, params)


@lowers("InstanceNormalization")
def instance_norm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """INSTANCENORM: each (n, c) over the spatial axes, then scale[c] and bias[c], with ONNX Runtime's sums
    and roundings (its CPU kernel: y = x s + (b - mean s), s = scale / sqrt(var + eps)), bit for bit. Not
    LAYERNORM then MUL and ADD: ORT sums and rounds differently, and a per-row scale of ones would follow
    the spatial dims."""
    if len(cx.shape(n.input[0], n)) < 3:
        raise LoweringError(n.op_type, n.name, "the input must have rank >= 3 ([N, C, spatial...])")
    inputs = [cx.read(name, n, t) for name in n.input[:3]]
    params = {Param.AXIS: 2, Param.EPSILON: f32_bits(float(attr(n, "epsilon", 1e-5)))}
    cx.emit(n, t, Opcode.INSTANCENORM, inputs, params)


@lowers("RMSNormalization")
def rms_norm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ONNX RMSNormalization (opset 23): X / sqrt(mean(X^2 over [axis, rank)) + epsilon) * scale."""
    x, scale = cx.shape(n.input[0], n), cx.shape(n.input[1], n)
    axis = int(attr(n, "axis", -1))
    if int(attr(n, "stash_type", 1)) != 1:
        raise LoweringError(n.op_type, n.name, "only stash_type=1 (float) is supported")
    if not -len(x) <= axis < len(x) or math.prod(scale) != math.prod(x[axis:]):
        raise LoweringError(n.op_type, n.name, f"scale {scale} must have the normalized shape {x[axis:]}")
    inputs = [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)]
    params = {Param.AXIS: axis, Param.EPSILON: f32_bits(float(attr(n, "epsilon", 1e-5)))}
    cx.emit(n, t, Opcode.RMSNORM, inputs, params)


REDUCE = {
    "ReduceMean": Opcode.REDUCE_MEAN,
    "ReduceSum": Opcode.REDUCE_SUM,
    "ReduceMax": Opcode.REDUCE_MAX,
    "ReduceMin": Opcode.REDUCE_MIN,
}


@lowers(*REDUCE)
def reduce(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    rank = len(cx.shape(n.input[0], n))
    axes_from_input = n.op_type == "ReduceSum" and cx.opset >= 13 or cx.opset >= 18
    if axes_from_input:
        axes = cx.const_ints(n.input[1], n) if len(n.input) > 1 and n.input[1] else []
    else:
        axes = list(attr(n, "axes", []))
    if not axes:
        if int(attr(n, "noop_with_empty_axes", 0)):
            raise LoweringError(n.op_type, n.name, "noop_with_empty_axes=1 with no axes is not supported")
        axes = list(range(rank))
    mask = 0
    for a in axes:
        mask |= 1 << (a % rank)
    params = {ReduceParam.AXES_MASK: mask, ReduceParam.KEEPDIMS: int(attr(n, "keepdims", 1))}
    perm = cx.ort_transposes.get(n.name, []) if n.op_type in ("ReduceMean", "ReduceSum") else []
    if sorted(perm) == list(range(rank)):  # ORT sums the Transpose's input: the kernel in its order
        params[ReduceParam.ORT_PERM] = sum(p << (4 * k) for k, p in enumerate(perm))
    cx.emit(n, t, REDUCE[n.op_type], [cx.read(n.input[0], n, t)], params)


ARG = {"ArgMax": Opcode.ARGMAX, "ArgMin": Opcode.ARGMIN}
ARG_TYPES = (Dtype.F32, Dtype.I32, Dtype.I64)  # the types ARGMAX/ARGMIN read (float16 is read as float32)


@lowers(*ARG)
def arg_extreme(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ARGMAX/ARGMIN: the int64 index along one axis (negative counts from the end), keepdims and select_last_index,
    as ONNX Runtime's CPU kernel finds it: the row's first element, then each one above (below) it, so of ties the
    first (with select_last_index, the last) index, and a NaN at the row's index 0 gives 0 while a NaN elsewhere is
    passed over. Of float32 (float16 widened to float32, exactly), int32 and int64. ORT reduces a rank-1 input
    without select_last_index by Eigen's vectorized maxCoeff/minCoeff instead, whose NaN index differs: a rank-1
    float input is refused there."""
    rank = len(cx.shape(n.input[0], n))
    axis = int(attr(n, "axis", 0))
    if not -rank <= axis < rank:
        raise LoweringError(n.op_type, n.name, f"axis {axis} is outside the input's rank {rank}")
    x, dtype = cx.read_any(n.input[0], n, t)
    if dtype not in ARG_TYPES:
        raise LoweringError(n.op_type, n.name, f"of {dtype.name.lower()}: only float32, float16, int32 or int64")
    last = int(int(attr(n, "select_last_index", 0)) != 0)  # as ORT reads it (keepdims: only 1 keeps)
    if rank == 1 and dtype == Dtype.F32 and not last:
        raise LoweringError(
            n.op_type,
            n.name,
            "a rank-1 float input (first index): ONNX Runtime reduces it by Eigen's vectorized maxCoeff/minCoeff, "
            "whose index of a NaN (one in a packet's first lane or in the tail) the kernel does not follow",
        )
    params = {
        ArgParam.AXIS: axis % rank,
        ArgParam.KEEPDIMS: int(int(attr(n, "keepdims", 1)) == 1),
        ArgParam.SELECT_LAST: last,
    }
    cx.emit(n, t, ARG[n.op_type], [x], params, out_dtype=Dtype.I64)


@lowers("BatchNormalization")
def batch_norm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Inference mode as x * scale + shift, per channel (axis 1) and broadcast as [C, 1, ...], the
    constants computed here in float32 as ONNX Runtime's kernel does (scale = 1 / sqrt(var + eps) *
    gamma, shift = beta - mean * scale, each step rounded): its result, bit for bit."""
    if int(attr(n, "training_mode", 0)):
        raise LoweringError(n.op_type, n.name, "training_mode=1 is not supported (inference only)")
    if not int(attr(n, "spatial", 1)):
        raise LoweringError(n.op_type, n.name, "spatial=0 (opset < 9) is not supported")
    x = cx.shape(n.input[0], n)
    if len(x) < 2:
        raise LoweringError(n.op_type, n.name, f"input rank {len(x)}; BatchNormalization needs (N, C, ...)")
    gamma, beta, mean, var = (cx.const_floats(name, n) for name in n.input[1:5])
    if not all(len(v) == x[1] for v in (gamma, beta, mean, var)):
        raise LoweringError(n.op_type, n.name, f"scale, bias, mean and var must have C = {x[1]} values")
    scale = np.float32(1) / np.sqrt(var + np.float32(attr(n, "epsilon", 1e-5))) * gamma
    shift = beta - mean * scale
    per_channel = [x[1]] + [1] * (len(x) - 2)
    scaled = cx.emit(
        n, t, Opcode.MUL, [cx.read(n.input[0], n, t), cx.constant(scale.reshape(per_channel), t)], out=cx.scratch(x, t)
    )
    cx.emit(n, t, Opcode.ADD, [scaled, cx.constant(shift.reshape(per_channel), t)])


@lowers("SimplifiedLayerNormalization", "com.microsoft::SimplifiedLayerNormalization")
def simplified_layer_norm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """onnxruntime's RMS norm over [axis, rank): X / sqrt(mean(X^2) + epsilon) * scale."""
    _refuse_used(cx, n, [1], "inv_std_var")
    x, scale = cx.shape(n.input[0], n), cx.shape(n.input[1], n)
    axis = int(attr(n, "axis", -1))
    if not -len(x) <= axis < len(x) or math.prod(scale) != math.prod(x[axis:]):
        raise LoweringError(n.op_type, n.name, f"scale {scale} must have the normalized shape {x[axis:]}")
    params = {Param.AXIS: axis, Param.EPSILON: f32_bits(float(attr(n, "epsilon", 1e-5)))}
    cx.emit(n, t, Opcode.RMSNORM, [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)], params, out=n.output[0])


@lowers("com.microsoft::SkipLayerNormalization", "com.microsoft::SkipSimplifiedLayerNormalization")
def skip_layer_norm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """sum = input + skip (+ bias), as onnxruntime adds them; output 0 the norm of sum over the last
    axis (LayerNorm with gamma and beta, or RMS with gamma), output 3 the sum itself."""
    _refuse_used(cx, n, [1, 2], "mean/inv_std_var")
    simplified = n.op_type == "SkipSimplifiedLayerNormalization"
    bias_at = 3 if simplified else 4
    x = cx.shape(n.input[0], n)
    has_sum = len(n.output) > 3 and bool(n.output[3])
    has_bias = len(n.input) > bias_at and bool(n.input[bias_at])
    summed = cx.emit(
        n,
        t,
        Opcode.ADD,
        [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)],
        out=n.output[3] if has_sum and not has_bias else cx.scratch(x, t),
        engine=EngineClass.VECTOR,
    )
    if has_bias:
        bias = cx.read(n.input[bias_at], n, t)
        summed = cx.emit(
            n,
            t,
            Opcode.ADD,
            [summed, bias],
            out=n.output[3] if has_sum else cx.scratch(x, t),
            engine=EngineClass.VECTOR,
        )
    params = {Param.AXIS: -1, Param.EPSILON: f32_bits(float(attr(n, "epsilon", 1e-12)))}
    if simplified:
        params[Param.NORM_SKIP] = 1
        cx.emit(n, t, Opcode.RMSNORM, [summed, cx.read(n.input[2], n, t)], params, out=n.output[0])
        return
    norm = [summed, cx.read(n.input[2], n, t)]
    if len(n.input) > 3 and n.input[3]:
        norm.append(cx.read(n.input[3], n, t))
    cx.emit(n, t, Opcode.LAYERNORM, norm, params, out=n.output[0])


def _refuse_used(cx: Lowerer, n: onnx.NodeProto, outputs: list[int], what: str) -> None:
    """The statistics outputs are for training: refused when a body node or the pair reads them."""
    for k in outputs:
        name = n.output[k] if len(n.output) > k else ""
        if name and (name in cx.fn.output or any(name in b.input for b in cx.fn.node)):
            raise LoweringError(
                n.op_type, n.name, f"output {k} ({what}) is read; only the normalized output and the sum run"
            )
