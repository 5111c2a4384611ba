"""Weight-only quantized MatMul: com.microsoft MatMulNBits (onnxruntime-genai's model builder,
`onnxruntime.quantization.matmul_nbits_quantizer`) lowers to one MATMUL_NBITS (dsp/src/ops/nbits.c),
as ONNX Runtime's CPU kernel computes it: at accuracy_level 4 the activations quantized to int8 per
block (scale amax / 127, round half to even of a * 127 / amax), at 0 and 1 a f32 dequantize and GEMM.

B, the scales and the zero points are initializers; the packed zero points (two 4-bit values a byte,
the low nibble first, a column's row padded to whole bytes) are unpacked to one byte per block, and
absent they are 2^(bits - 1), as ORT takes them. Refused by name: bits other than 4 and 8, float zero
points, g_idx (act-order), accuracy levels 2 and 3 (fp16 and bf16 compute).
"""

from __future__ import annotations

import numpy as np
import onnx

from .abi import Dtype, NbitsParam, Opcode, Task
from .lowerer import Lowerer, attr
from .registry import LoweringError, lowers

INT8_LEVEL = 4  # accuracy_level whose activations ORT quantizes to int8
F32_LEVELS = (0, 1)


def _input(n: onnx.NodeProto, k: int) -> str:
    return n.input[k] if len(n.input) > k else ""


def _zero_points(cx: Lowerer, n: onnx.NodeProto, bits: int, cols: int, blocks: int) -> np.ndarray:
    """One u8 zero point per column and block."""
    name = _input(n, 3)
    if not name:
        return np.full((cols, blocks), 1 << (bits - 1), np.uint8)
    zp = cx.known_value(name)
    if zp is None or zp.dtype != np.uint8:
        raise LoweringError(n.op_type, n.name, f"zero points '{name}' must be a u8 initializer (packed)")
    per_col = -(-blocks * bits // 8)
    if zp.size != cols * per_col:
        raise LoweringError(n.op_type, n.name, f"zero points '{name}' hold {zp.size} bytes, not {cols * per_col}")
    packed = zp.reshape(cols, per_col)
    if bits == 8:
        return packed
    nibbles = np.stack([packed & 15, packed >> 4], axis=-1).reshape(cols, 2 * per_col)
    return np.ascontiguousarray(nibbles[:, :blocks])


def _check_attrs(n: onnx.NodeProto, bits: int, block: int, level: int) -> None:
    def refuse(why: str) -> LoweringError:
        return LoweringError(n.op_type, n.name, why)

    if bits not in (4, 8):
        raise refuse(f"bits {bits}: the kernel runs 4 and 8")
    if block < 16 or block & (block - 1):
        raise refuse(f"block_size {block} is not a power of two >= 16")
    if level not in (*F32_LEVELS, INT8_LEVEL):
        raise refuse(f"accuracy_level {level} (fp16/bf16 compute) is not supported: 0, 1 (f32) and 4 (int8) are")
    if _input(n, 4):
        raise refuse("g_idx (act-order) is not supported")


@lowers("com.microsoft::MatMulNBits")
def matmul_nbits(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A [..., K] x the dequantized B [K, N] (+ bias [N])."""
    k, cols = int(attr(n, "K", 0)), int(attr(n, "N", 0))
    bits, block = int(attr(n, "bits", 4)), int(attr(n, "block_size", 0))
    level = int(attr(n, "accuracy_level", 0))
    _check_attrs(n, bits, block, level)
    a = cx.shape(n.input[0], n)
    if not a or a[-1] != k:
        raise LoweringError(n.op_type, n.name, f"A {a} must end in K = {k}")
    blocks = -(-k // block)
    b, scales = cx.known_value(n.input[1]), cx.known_value(n.input[2])
    if b is None or b.dtype != np.uint8 or b.size != cols * blocks * block * bits // 8:
        raise LoweringError(n.op_type, n.name, f"B '{n.input[1]}' must be a u8 initializer [N, blocks, blob]")
    if scales is None or scales.dtype != np.float32 or scales.size != cols * blocks:
        raise LoweringError(n.op_type, n.name, f"scales '{n.input[2]}' must be a float32 initializer [N * blocks]")
    inputs = [  # B and the scales as the node's inputs (a real model's weights stay out of the program)
        cx.read(n.input[0], n, t),
        cx.read_typed(n.input[1], n, t, Dtype.U8),
        cx.read(n.input[2], n, t),
        cx.shared_constant(_zero_points(cx, n, bits, cols, blocks), t, Dtype.U8),
    ]
    if _input(n, 5):
        inputs.append(cx.read(n.input[5], n, t))
    params = {NbitsParam.BITS: bits, NbitsParam.BLOCK: block, NbitsParam.INT8: int(level == INT8_LEVEL)}
    cx.emit(n, t, Opcode.MATMUL_NBITS, inputs, params)
