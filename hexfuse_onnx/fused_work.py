"""The work of a fused op as the program ops its lowering emits (lowering/attention.py, the skip
norms of lowering/normalize.py): one (engine, FLOPs, bytes moved) entry per program op, in the
lowering's order, so that the cost model charges each op's engine and per-op dispatch as the kernel
runs them. tests/test_lower_attention.py checks the entries against the lowered programs' ops.
"""

from __future__ import annotations

import math

import onnx
from onnx import numpy_helper

from .graph import ModelGraph, attribute

# (engine class as profile.Engine names it, the ONNX op whose cost class the op has, FLOPs, bytes moved)
Work = list[tuple[str, str, float, float]]
SOFTMAX_FLOPS = 12  # per element, as profile's table counts Softmax
NORM_FLOPS = {"SkipLayerNormalization": 8, "SkipSimplifiedLayerNormalization": 6}


class _Ops:
    def __init__(self) -> None:
        self.work: Work = []

    def vec(self, elements: float, flops: float = 1.0, op: str = "Add") -> None:
        self.work.append(("vector", op, float(elements * flops), 0.0))

    def mem(self, elements: float, op: str = "Transpose") -> None:
        self.work.append(("memory", op, 0.0, 8.0 * elements))  # f32 read and written

    def gemm(self, m: float, n: float, k: float) -> None:
        self.work.append(("matrix", "MatMul", 2.0 * m * n * k, 0.0))


def fused_work(g: ModelGraph, n: onnx.NodeProto) -> Work:
    """The program ops of a fused op; [] for an op that lowers to one op (or is not fused)."""
    key = (n.domain or "", n.op_type)
    if key in (("com.microsoft", "SkipLayerNormalization"), ("com.microsoft", "SkipSimplifiedLayerNormalization")):
        return _skip_norm(g, n)
    if n.op_type == "RotaryEmbedding" and n.domain in ("", "ai.onnx", "com.microsoft"):
        return _rotary(g, n)
    if key == ("com.microsoft", "MultiHeadAttention"):
        return _mha(g, n)
    if key == ("com.microsoft", "GroupQueryAttention"):
        return _gqa(g, n)
    if n.op_type == "Attention" and n.domain in ("", "ai.onnx"):
        return _attention(g, n)
    if n.op_type in ("DepthToSpace", "SpaceToDepth", "Mish") and n.domain in ("", "ai.onnx"):
        return _three_passes(g, n)
    if n.op_type in ("Elu", "Selu") and n.domain in ("", "ai.onnx"):
        return _elu(g, n)
    return []


def _dims(g: ModelGraph, name: str) -> list[int]:
    return [int(d) for d in g.info(name).shape or ()]  # type: ignore[arg-type]  # static when profiled


def _given(n: onnx.NodeProto, k: int) -> str:
    return n.input[k] if len(n.input) > k else ""


def _skip_norm(g: ModelGraph, n: onnx.NodeProto) -> Work:
    o, elements = _Ops(), math.prod(_dims(g, n.input[0]))
    o.vec(elements)
    if _given(n, 3 if n.op_type == "SkipSimplifiedLayerNormalization" else 4):
        o.vec(elements)
    o.vec(elements, NORM_FLOPS[n.op_type], "LayerNormalization")
    return o.work


def _three_passes(g: ModelGraph, n: onnx.NodeProto) -> Work:
    """DepthToSpace, SpaceToDepth: a COPY into the 6-D view, its TRANSPOSE, a COPY back (lowering/layout.py);
    Mish: SOFTPLUS, TANH, MUL (lowering/pointwise.py)."""
    o, elements = _Ops(), math.prod(_dims(g, n.input[0]))
    if n.op_type == "Mish":
        o.vec(elements, 10, "Softplus")
        o.vec(elements, 10, "Tanh")
        o.vec(elements)
        return o.work
    o.mem(elements, "Reshape")
    o.mem(elements)
    o.mem(elements, "Reshape")
    return o.work


def _elu(g: ModelGraph, n: onnx.NodeProto) -> Work:
    """Elu: CLIP twice, EXP, SUB, MUL, ADD; Selu a MUL more (lowering/pointwise.py)."""
    o, elements = _Ops(), math.prod(_dims(g, n.input[0]))
    o.vec(elements, op="Clip")
    o.vec(elements, op="Clip")
    o.vec(elements, 8, "Exp")  # as profile counts Exp
    for _ in range(3 + (n.op_type == "Selu")):
        o.vec(elements)
    return o.work


def _heads_in(o: _Ops, b: int, s: int, width: int, rotary: tuple[int, int] | None = None) -> None:
    """to_heads: COPY to [B, S, N, H], the rotation when given ((rows, interleaved)), TRANSPOSE."""
    o.mem(b * s * width)
    if rotary is not None:
        _rotate(o, b * s * width, rotary[1])
    o.mem(b * s * width)


def _rotate(o: _Ops, elements: int, interleaved: int) -> None:
    """Two SLICEs, four MULs, SUB, ADD, CONCAT (interleaved: two more COPYs and a COPY back)."""
    half = elements / 2
    o.mem(half)
    o.mem(half)
    for _ in range(6):  # y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
        o.vec(half)
    if interleaved:
        o.mem(half)
        o.mem(half)
    o.mem(elements)
    if interleaved:
        o.mem(elements)


def _rows(o: _Ops, g: ModelGraph, rows: int, cache: str, known_positions: bool) -> None:
    """A cos or sin [rows, R/2] pick: constant when the positions and cache are known, else a
    GATHER_ROWS (after a COPY of run-time positions to [B, S, 1])."""
    half = _dims(g, cache)[1]
    if known_positions and cache in g.initializers:
        return
    if not known_positions:
        o.mem(rows)
    o.mem(rows * half)


def _attend(
    o: _Ops, b: int, heads: int, kv_heads: int, s: int, total: int, h: int, penalty: int, zero_rows: bool = False
) -> None:
    """Scores GEMM (mask as its C), SOFTMAX, context GEMM; grouped heads copy Q, K, V, the
    penalty (`penalty` elements, 0 for none) and the result. zero_rows: a REDUCE_MAX of the scores,
    ADD, MUL, CLIP of its rows and a MUL of the result (attention.masked_rows)."""
    grouped = heads != kv_heads
    if grouped:
        o.mem(b * heads * s * h)
        o.mem(b * kv_heads * total * h)
        o.mem(b * kv_heads * total * h)
        if penalty:
            o.mem(penalty)
    o.gemm(b * heads * s, total, h)
    o.vec(b * heads * s * total, SOFTMAX_FLOPS, "Softmax")
    o.gemm(b * heads * s, h, total)
    if zero_rows:
        o.vec(b * heads * s * total, op="ReduceMax")
        for _ in range(3):
            o.vec(b * heads * s)
        o.vec(b * heads * s * h, op="Mul")
    if grouped:
        o.mem(b * heads * s * h)


def _mha(g: ModelGraph, n: onnx.NodeProto) -> Work:
    o = _Ops()
    b, s, d = _dims(g, n.input[0])
    length = _dims(g, n.input[1])[1]
    heads = int(attribute(n, "num_heads", 1))
    if _given(n, 3):
        for rows in (s, length, length):
            o.mem(d)
            o.vec(b * rows * d)
    for rows in (s, length, length):
        _heads_in(o, b, rows, d)
    past = _dims(g, n.input[6])[2] if _given(n, 6) else 0
    total = past + length
    for _ in range(2):
        o.mem(b * total * d)  # CONCAT with the past, or COPY
    mask, causal = _given(n, 4), int(attribute(n, "unidirectional", 0))
    penalty = b * s * total if causal else b * total
    if mask:
        o.vec(b * total)  # DEQUANTIZE_LINEAR
        o.vec(b * total)  # CLIP
        o.mem(b * total)
        o.vec(b * total)  # 1 - kept
        if causal:
            o.vec(penalty)
            o.vec(penalty)
        o.vec(penalty)  # * mask_filter_value
    if _given(n, 5):
        if mask or causal:
            o.vec(b * heads * s * total)
        penalty = math.prod(_dims(g, n.input[5]))
    _attend(o, b, heads, heads, s, total, d // heads, penalty if (mask or causal or _given(n, 5)) else 0)
    o.mem(b * s * d)
    o.mem(b * s * d)
    return o.work


def _gqa(g: ModelGraph, n: onnx.NodeProto) -> Work:
    o = _Ops()
    heads, kv_heads = int(attribute(n, "num_heads", 1)), int(attribute(n, "kv_num_heads", 1))
    b, s, width = _dims(g, n.input[0])
    packed = not _given(n, 1)
    h = width // (heads + 2 * kv_heads) if packed else width // heads
    if packed:
        for part in (kv_heads, kv_heads, heads):
            o.mem(b * s * part * h)
    total_tensor = g.initializers.get(_given(n, 6))
    total = int(numpy_helper.to_array(total_tensor).reshape(-1)[0]) if total_tensor is not None else s
    past = _dims(g, n.input[3])[2] if _given(n, 3) else 0
    first = s == total and s > 1
    o.vec(b)  # seqlens_k to float
    o.mem(b)
    if not first:
        o.vec(b)
    rotary = None
    if int(attribute(n, "do_rotary", 0)):
        if not first:
            o.vec(b * s)
        for cache in (n.input[7], n.input[8]):
            _rows(o, g, b * s, cache, first)
        rotary = (b * s, int(attribute(n, "rotary_interleaved", 0)))
    _heads_in(o, b, s, heads * h, rotary)
    _heads_in(o, b, s, kv_heads * h, rotary)
    _heads_in(o, b, s, kv_heads * h)
    length = max(past, total)
    o.mem(b)  # the new rows' start, [B, 1, 1, 1]
    for _ in range(4):  # their one-hot cache slots
        o.vec(b * length * s)
    if past:  # the past rows kept
        o.vec(b * length)
        o.vec(b * length)
    for _ in range(2):  # the present K and V
        o.gemm(b * kv_heads * length, h, s)
        if past:
            if past < length:
                o.mem(b * kv_heads * length * h)
            o.vec(b * kv_heads * length * h)
            o.vec(b * kv_heads * length * h)
        else:
            o.mem(b * kv_heads * length * h)
    o.vec(b * s * length)
    o.vec(b * s * length)
    if first:  # and key j <= seqlens_k
        o.mem(b)
        o.vec(b * length)
        o.vec(b * length)
        o.vec(b * s * length)
        o.vec(b * s * length)
    o.vec(b * s * length)
    _attend(o, b, heads, kv_heads, s, length, h, b * s * length)
    o.mem(b * s * heads * h)
    o.mem(b * s * heads * h)
    return o.work


def _attention(g: ModelGraph, n: onnx.NodeProto) -> Work:
    o = _Ops()
    q = _dims(g, n.input[0])
    three_d = len(q) == 3
    k = _dims(g, n.input[1])
    if three_d:
        heads, kv_heads = int(attribute(n, "q_num_heads", 1)), int(attribute(n, "kv_num_heads", 1))
        b, s = q[0], q[1]
        h = q[2] // heads
        length = k[1]
        _heads_in(o, b, s, heads * h)
        _heads_in(o, b, length, kv_heads * h)
        _heads_in(o, b, length, kv_heads * h)
    else:
        b, heads, s, h = q
        kv_heads, length = k[1], k[2]
    total = length + (_dims(g, n.input[4])[2] if _given(n, 4) else 0)
    for _ in range(2):
        o.mem(b * kv_heads * total * h)
    penalty = 0
    if _given(n, 3):
        mask = _dims(g, n.input[3])
        penalty = math.prod(mask)
        o.vec(penalty, op="Clip")
        if len(mask) < 4:
            o.mem(penalty)
    if int(attribute(n, "is_causal", 0)) and penalty:
        o.vec(penalty, op="Mul")
        o.vec(penalty)
    causal = s * total if int(attribute(n, "is_causal", 0)) else 0
    _attend(o, b, heads, kv_heads, s, total, h, penalty or causal, zero_rows=bool(penalty))
    o.mem(b * s * heads * h)
    if three_d:
        o.mem(b * s * heads * h)
    return o.work


def _rotary(g: ModelGraph, n: onnx.NodeProto) -> Work:
    o = _Ops()
    contrib = n.domain == "com.microsoft"
    x = _dims(g, n.input[0])
    elements = math.prod(x)
    cos, sin, pos = (n.input[2], n.input[3], n.input[1]) if contrib else (n.input[1], n.input[2], _given(n, 3))
    rows = x[0] * (x[1] if len(x) == 3 else x[2])
    o.mem(elements)  # COPY to [B, S, N, H] (4-D: TRANSPOSE)
    if pos:
        known = pos in g.initializers
        if not known:
            o.vec(rows if _dims(g, pos) != [1] else 1)
            if _dims(g, pos) == [1]:
                o.mem(1)
                o.vec(rows)
        for cache in (cos, sin):
            _rows(o, g, rows, cache, known)
    else:
        o.mem(rows * x[-1] / 2)
        o.mem(rows * x[-1] / 2)
    _rotate(o, elements, int(attribute(n, "interleaved", 0)))
    o.mem(elements)
    return o.work
