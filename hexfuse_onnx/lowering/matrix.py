"""Ops on the matrix engine: MatMul and Gemm (one GEMM opcode), 2-D Conv."""

from __future__ import annotations

import onnx

from .abi import ConvParam, GemmParam, Opcode, Task
from .lowerer import Lowerer, attr, f32_bits
from .registry import LoweringError, lowers
from .spatial import pads_2d


@lowers("MatMul")
def matmul(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    if len(cx.shape(n.input[0], n)) < 2 or len(cx.shape(n.input[1], n)) < 2:
        raise LoweringError(n.op_type, n.name, "1-D operands are not supported")
    inputs = [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)]
    cx.emit(n, t, Opcode.GEMM, inputs, {GemmParam.ALPHA: f32_bits(1.0)})


@lowers("Gemm")
def gemm(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    ins = n.input
    has_c = len(ins) > 2 and ins[2] != ""
    alpha, beta = float(attr(n, "alpha", 1.0)), float(attr(n, "beta", 1.0))
    inputs = [cx.read(ins[0], n, t), cx.read(ins[1], n, t)] + ([cx.read(ins[2], n, t)] if has_c else [])
    params = {
        GemmParam.TRANS_A: int(attr(n, "transA", 0)),
        GemmParam.TRANS_B: int(attr(n, "transB", 0)),
        GemmParam.ALPHA: f32_bits(alpha),
        GemmParam.BETA: f32_bits(beta) if has_c else 0,
    }
    cx.emit(n, t, Opcode.GEMM, inputs, params)


@lowers("Conv")
def conv(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    x, w = cx.shape(n.input[0], n), cx.shape(n.input[1], n)
    if len(x) != 4:
        raise LoweringError("Conv", n.name, f"only 2-D convolution is supported (input rank {len(x)})")
    strides = list(attr(n, "strides", [1, 1]))
    dil = list(attr(n, "dilations", [1, 1]))
    pads = pads_2d(n, x, w[2:], strides, dil)
    inputs = [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)]
    if len(n.input) > 2 and n.input[2]:
        inputs.append(cx.read(n.input[2], n, t))
    params = {
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
    cx.emit(n, t, Opcode.CONV2D, inputs, params)
