"""Lowerings of the element-wise ops the exported decoders' blocks and norms need (Sqrt, Pow,
Reciprocal), each checked on the real dsp/ host kernel against ONNX Runtime."""

from __future__ import annotations

import struct

import numpy as np
import onnx
import pytest
from onnx import helper
from test_lower import _op_records, assert_matches_ort_on_the_host_kernel, init, needs_host, pair_model, vi

from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Opcode

SHAPE = [2, 3, 8]


def unary_pair(nodes_b: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    """Task A a Relu over x, task B the given nodes from z to yb (both [2,3,8])."""
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    return pair_model(
        a, nodes_b, [vi("x", SHAPE)], [vi("z", SHAPE)], [vi("ya", SHAPE)], [vi("yb", SHAPE)], inits or [], opset=17
    )


def opcodes(m: onnx.ModelProto) -> list[int]:
    return [struct.unpack_from("<H", p, 0)[0] for p in _op_records(lower_pair(m, m.graph.node[0]))]


@needs_host
def test_sqrt_runs_on_the_kernel_sqrt() -> None:
    # Abs keeps the input non-negative; it is outside the kernel, so square first instead
    m = unary_pair(
        [
            helper.make_node("Mul", ["z", "z"], ["z2"], name="square"),
            helper.make_node("Sqrt", ["z2"], ["yb"], name="sqrt"),
        ]
    )
    assert opcodes(m) == [Opcode.RELU, Opcode.MUL, Opcode.SQRT]
    assert_matches_ort_on_the_host_kernel(m)
