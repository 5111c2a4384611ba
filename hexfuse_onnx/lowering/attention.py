"""Fused attention ops expanded into the kernel's program ops: onnxruntime's MultiHeadAttention,
GroupQueryAttention and RotaryEmbedding (com.microsoft), and ONNX's Attention and RotaryEmbedding
(opset 23). Heads are COPY/TRANSPOSE, rotary rows GATHER_ROWS, scores one batched GEMM (scale as alpha,
the mask as its C), SOFTMAX, then a GEMM with V.

Values known only at run time (a key padding mask, GQA's seqlens_k, rotary position ids) enter as
integers and are made float by DEQUANTIZE_LINEAR (scale 1). Whatever depends on them is then exact
arithmetic on small integers: GATHER_ROWS picks cos/sin rows at float positions, a one-hot row
(CLIP(1 - (p - m)^2, 0, 1)) places GQA's new rows in their KV-cache slots by a GEMM, a 0/1
penalty (CLIP of a difference) masks a score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx

from ..profile import Engine as EngineClass
from .abi import ClipParam, Dtype, GemmParam, Opcode, Param, QuantParam, ReduceParam, Task
from .layout import axis_slice
from .lowerer import Lowerer, attr, f32_bits
from .registry import LoweringError, lowers
from .traced import broadcast, traced_dims

MASKED = -1e30  # added to a score that must get no weight: exp underflows to exactly 0
LOWEST = float(-np.finfo(np.float32).max)  # ORT's mask_filter_value for opset 23's Attention
F32_EXACT = 2**24  # positions and cache slots computed in float32 are exact integers below this

# The integer inputs each op reads at run time (made float by DEQUANTIZE_LINEAR), by registry key;
# any other integer input must be known when lowering.
RUN_TIME_INTEGERS: dict[str, frozenset[int]] = {
    "com.microsoft::MultiHeadAttention": frozenset({4}),  # key_padding_mask
    "com.microsoft::GroupQueryAttention": frozenset({5}),  # seqlens_k
    "com.microsoft::RotaryEmbedding": frozenset({1}),  # position_ids
    "RotaryEmbedding": frozenset({3}),  # position_ids
}
_INTEGERS: dict[int, Dtype] = {onnx.TensorProto.INT32: Dtype.I32, onnx.TensorProto.INT64: Dtype.I64}
_ENGINE = {
    Opcode.GEMM: EngineClass.MATRIX,
    Opcode.TRANSPOSE: EngineClass.MEMORY,
    Opcode.COPY: EngineClass.MEMORY,
    Opcode.SLICE: EngineClass.MEMORY,
    Opcode.CONCAT: EngineClass.MEMORY,
    Opcode.GATHER_ROWS: EngineClass.MEMORY,
}


@dataclass
class Ops:
    """Emits the ops of one fused node into scratch tensors (or its named outputs)."""

    cx: Lowerer
    n: onnx.NodeProto
    t: Task

    def op(self, opcode: Opcode, inputs: list[int], dims: list[int], params: dict | None = None, out: str = "") -> int:
        target: str | int = out if out else self.cx.scratch(dims, self.t)
        if out and list(self.cx.shape(out, self.n)) != list(dims):
            raise LoweringError(
                self.n.op_type, self.n.name, f"output '{out}' has shape {self.cx.shape(out, self.n)}, expected {dims}"
            )
        return self.cx.emit(
            self.n, self.t, opcode, inputs, params, out=target, engine=_ENGINE.get(opcode, EngineClass.VECTOR)
        )

    def const(self, value: np.ndarray | float) -> int:
        return self.cx.constant(np.asarray(value, np.float32), self.t)

    def read(self, name: str) -> int:
        return self.cx.read(name, self.n, self.t)

    def dims(self, tid: int) -> list[int]:
        return traced_dims(self.cx.prog, tid)

    def copy(self, x: int, dims: list[int]) -> int:
        return self.op(Opcode.COPY, [x], dims)

    def transpose(self, x: int, perm: list[int], out: str = "") -> int:
        d = self.dims(x)
        return self.op(
            Opcode.TRANSPOSE, [x], [d[p] for p in perm], {Param.PERM + i: p for i, p in enumerate(perm)}, out
        )

    def slice_last(self, x: int, begin: int, end: int, step: int = 1) -> int:
        d = self.dims(x)
        params = axis_slice(len(d), len(d) - 1, begin, end)
        params[16 + len(d) - 1] = step
        return self.op(Opcode.SLICE, [x], d[:-1] + [len(range(begin, end, step))], params)

    def binary(self, opcode: Opcode, a: int, b: int, out: str = "") -> int:
        dims = broadcast(self.dims(a), self.dims(b))
        return self.op(opcode, [a, b], dims, out=out)

    def clip01(self, x: int) -> int:
        return self.op(Opcode.CLIP, [x], self.dims(x), {ClipParam.MIN: f32_bits(0.0), ClipParam.MAX: f32_bits(1.0)})

    def as_float(self, name: str) -> int:
        """An int32/int64 tensor as float (exact below 2^24)."""
        dtype = _INTEGERS.get(self.cx.dtype(name))
        if dtype is None:
            raise refuse(self.n, f"'{name}' must be int32 or int64")
        x = self.cx.read_typed(name, self.n, self.t, dtype)
        return self.op(Opcode.DEQUANTIZE_LINEAR, [x, self.const(1.0)], self.dims(x), {QuantParam.AXIS: 0})


def gemm(o: Ops, a: int, b: int, trans_b: bool = False, alpha: float = 1.0, c: int | None = None) -> int:
    da, db = o.dims(a), o.dims(b)
    n = db[-2] if trans_b else db[-1]
    batch = broadcast(da[:-2], db[:-2])
    params = {
        GemmParam.TRANS_B: int(trans_b),
        GemmParam.ALPHA: f32_bits(alpha),
        GemmParam.BETA: f32_bits(1.0) if c is not None else 0,
    }
    return o.op(Opcode.GEMM, [a, b] + ([c] if c is not None else []), batch + [da[-2], n], params)


# ---- heads


@dataclass(frozen=True)
class Rotary:
    cos: int  # [B, S, 1, H/2]
    sin: int
    interleaved: bool


def to_heads(o: Ops, x: int, heads: int, rotary: Rotary | None = None) -> int:
    """[B, S, heads*H] -> [B, heads, S, H], rotated on the way when `rotary` is given."""
    b, s, hidden = o.dims(x)
    if heads <= 0 or hidden % heads:
        raise refuse(o.n, f"hidden size {hidden} is not a multiple of {heads} heads")
    bsnh = o.copy(x, [b, s, heads, hidden // heads])
    if rotary is not None:
        bsnh = rotate(o, bsnh, rotary)
    return o.transpose(bsnh, [0, 2, 1, 3])


def from_heads(o: Ops, x: int, out: str) -> int:
    """[B, N, S, H] -> [B, S, N*H] into the named output."""
    b, n, s, h = o.dims(x)
    return o.op(Opcode.COPY, [o.transpose(x, [0, 2, 1, 3])], [b, s, n * h], out=out)


def attend(o: Ops, q: int, k: int, v: int, scale: float, penalty: int | None, zero_masked_rows: bool = False) -> int:
    """softmax(scale * q k^T + penalty) v over [B, N, S, H] queries and [B, Nkv, T, H] keys/values:
    query head h reads kv head h // (N / Nkv). `penalty` broadcasts to [B, N, S, T].
    zero_masked_rows: a query whose scores are all at or below LOWEST gets 0 (see masked_rows)."""
    b, heads, s, h = o.dims(q)
    kv_heads, total = o.dims(k)[1], o.dims(k)[2]
    if heads % kv_heads:
        raise LoweringError(o.n.op_type, o.n.name, f"{heads} query heads do not group over {kv_heads} kv heads")
    group = heads // kv_heads
    if group == 1:
        scores = gemm(o, q, k, trans_b=True, alpha=scale, c=penalty)
        probs = o.op(Opcode.SOFTMAX, [scores], o.dims(scores), {Param.AXIS: -1})
        y = gemm(o, probs, v)
        return o.binary(Opcode.MUL, y, masked_rows(o, scores)) if zero_masked_rows else y
    # grouped: [B, Nkv, G, S, H] queries against [B, Nkv, 1, T, H] keys, no repeated K/V
    q5 = o.copy(q, [b, kv_heads, group, s, h])
    k5, v5 = o.copy(k, [b, kv_heads, 1, total, h]), o.copy(v, [b, kv_heads, 1, total, h])
    c = None
    if penalty is not None:
        pb, ph, ps, _ = o.dims(penalty)
        c = o.copy(penalty, [pb, kv_heads, group, ps, total] if ph == heads else [pb, 1, 1, ps, total])
    scores = gemm(o, q5, k5, trans_b=True, alpha=scale, c=c)
    probs = o.op(Opcode.SOFTMAX, [scores], o.dims(scores), {Param.AXIS: -1})
    y = gemm(o, probs, v5)
    if zero_masked_rows:
        y = o.binary(Opcode.MUL, y, masked_rows(o, scores))
    return o.copy(y, [b, heads, s, h])


def masked_rows(o: Ops, scores: int) -> int:
    """[..., S, 1] 0 where a row of scores [..., S, T] is masked whole (its largest is <= LOWEST, as
    ONNX Runtime 1.32's Attention writes 0 there), else 1: CLIP((max + FLT_MAX) / 2^104, 0, 1), as the
    float32 next above LOWEST is LOWEST + 2^104."""
    d = o.dims(scores)
    params = {ReduceParam.AXES_MASK: 1 << (len(d) - 1), ReduceParam.KEEPDIMS: 1}
    largest = o.op(Opcode.REDUCE_MAX, [scores], d[:-1] + [1], params)
    above = o.binary(Opcode.MUL, o.binary(Opcode.ADD, largest, o.const(-LOWEST)), o.const(2.0**-104))
    return o.clip01(above)


def causal(s: int, total: int) -> np.ndarray:
    """[S, T] 0/1: 1 where key j lies after query i, the queries being the last S of T positions."""
    i, j = np.arange(s)[:, None] + (total - s), np.arange(total)[None, :]
    return (j > i).astype(np.float32)


def with_past(o: Ops, past: str, new: int, out: str) -> int:
    """present = past ++ new along the sequence axis (a COPY of new when there is no past)."""
    if not past:
        return o.op(Opcode.COPY, [new], o.dims(new), out=out)
    p = o.read(past)
    dims = o.dims(new)
    dims[2] += o.dims(p)[2]
    return o.op(Opcode.CONCAT, [p, new], dims, {Param.AXIS: 2}, out=out)


def with_pasts(o: Ops, n: onnx.NodeProto, at: tuple[int, int], k: int, v: int) -> tuple[int, int]:
    """(present key, present value): inputs `at` (past key, past value) prepended to k and v."""
    past_k, past_v = (o.cx.given(n, i) for i in at)  # a past of length 0 is none
    if bool(past_k) != bool(past_v):
        raise refuse(n, "past_key and past_value must come together")
    return with_past(o, past_k, k, present_name(n, 1)), with_past(o, past_v, v, present_name(n, 2))


def present_name(n: onnx.NodeProto, k: int) -> str:
    return n.output[k] if len(n.output) > k else ""


def refuse(n: onnx.NodeProto, why: str) -> LoweringError:
    return LoweringError(n.op_type, n.name, why)


def refuse_inputs(n: onnx.NodeProto, names: dict[int, str]) -> None:
    for k, what in names.items():
        if len(n.input) > k and n.input[k]:
            raise refuse(n, f"input {k} ({what}) is not supported")


def refuse_outputs(n: onnx.NodeProto, names: dict[int, str]) -> None:
    for k, what in names.items():
        if len(n.output) > k and n.output[k]:
            raise refuse(n, f"output {k} ({what}) is not supported")


# ---- onnxruntime MultiHeadAttention


@lowers("com.microsoft::MultiHeadAttention")
def multi_head_attention(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Separate Q, K, V [B, S|L, D] (+ bias [3D]); key_padding_mask int [B, T] (0: masked);
    attention_bias [B|1, N|1, S, T]; past K/V [B, N, P, H] concatenated before the new ones;
    unidirectional: query i sees the keys up to its own position P + i. A masked score gets
    mask_filter_value added (once, also when both masks hide it), as onnxruntime does."""
    o = Ops(cx, n, t)
    heads = int(attr(n, "num_heads", 0))
    if len(n.input) < 3 or not n.input[1] or not n.input[2]:
        raise refuse(n, "packed QKV (no separate key and value) is not supported")
    refuse_inputs(n, {8: "past_sequence_length", 9: "cache_indirection"})
    refuse_outputs(n, {3: "qk"})
    if len(cx.shape(n.input[0], n)) != 3 or len(cx.shape(n.input[1], n)) != 3:
        raise refuse(n, "only 3-D query and key [B, S, D] (no packed or BNSH key) are supported")
    q, k, v = (o.read(n.input[i]) for i in range(3))
    if len(n.input) > 3 and n.input[3]:
        d = o.dims(q)[-1]
        bias = o.read(n.input[3])
        q, k, v = (o.binary(Opcode.ADD, x, o.slice_last(bias, i * d, (i + 1) * d)) for i, x in enumerate((q, k, v)))
    qh, kh, vh = to_heads(o, q, heads), to_heads(o, k, heads), to_heads(o, v, heads)
    keys, values = with_pasts(o, n, (6, 7), kh, vh)
    b, _, s, h = o.dims(qh)
    total = o.dims(keys)[2]
    penalty = _mha_penalty(o, b, s, total)
    if len(n.input) > 5 and n.input[5]:
        bias = o.read(n.input[5])
        penalty = bias if penalty is None else o.binary(Opcode.ADD, penalty, bias)
    scale = float(attr(n, "scale", 0.0)) or 1.0 / math.sqrt(h)
    from_heads(o, attend(o, qh, keys, values, scale, penalty), n.output[0])


def _mha_penalty(o: Ops, b: int, s: int, total: int) -> int | None:
    n, cx = o.n, o.cx
    filter_value = float(attr(n, "mask_filter_value", -10000.0))
    hidden = causal(s, total) if int(attr(n, "unidirectional", 0)) else None
    mask = n.input[4] if len(n.input) > 4 else ""
    if not mask:
        return None if hidden is None else o.const((hidden * filter_value)[None, None])
    if cx.shape(mask, n) != [b, total]:
        raise refuse(n, f"key_padding_mask {cx.shape(mask, n)}: only [batch, total length] = {[b, total]} is supported")
    kept = o.clip01(o.as_float(mask))  # a mask value > 0 keeps the key
    masked = o.binary(Opcode.SUB, o.const(1.0), o.copy(kept, [b, 1, 1, total]))
    if hidden is not None:
        masked = o.clip01(o.binary(Opcode.ADD, masked, o.const(hidden)))
    return o.binary(Opcode.MUL, masked, o.const(filter_value))


# ---- onnxruntime GroupQueryAttention


# GroupQueryAttention's attributes and the values the lowering runs (the default first). onnxruntime
# 1.32's schema defaults smooth_softmax to -1, which its kernel runs as 0 (no head_sink), and its
# quantiser and optimiser write every default out.
GQA_ATTRIBUTES: dict[str, tuple[object, ...]] = {
    "local_window_size": (-1,),
    "softcap": (0.0,),
    "smooth_softmax": (0, -1),
    "qk_output": (0,),
    "causal": (1,),
    "sliding_window_cache": (0,),
    "k_quant_type": ("NONE",),
    "v_quant_type": ("NONE",),
}


@lowers("com.microsoft::GroupQueryAttention")
def group_query_attention(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Causal GQA over a BNSH KV cache as onnxruntime's CPU kernel runs it. Per batch row b,
    seqlens_k[b] + 1 keys are valid; the new tokens sit after past_b = seqlens_k[b] + 1 - S of them
    (0 for a first prompt, S == total_sequence_length): rotary positions past_b + i, present K/V the
    first past_b past entries with the new ones written at past_b (a one-hot GEMM), zeros after, and
    query i sees keys j <= past_b + i. total_sequence_length must be known when lowering."""
    o = Ops(cx, n, t)
    heads, kv_heads = int(attr(n, "num_heads", 0)), int(attr(n, "kv_num_heads", 0))
    for name, supported in GQA_ATTRIBUTES.items():
        value = attr(n, name, supported[0])
        value = value.decode() if isinstance(value, bytes) else value
        if value not in supported:
            only = " or ".join(map(str, supported))
            raise refuse(n, f"{name}={value} is not supported (only {only})")
    refuse_inputs(
        n,
        {
            9: "position_ids",
            10: "attention_bias",
            11: "head_sink",
            12: "k_scale",
            13: "v_scale",
            14: "q_norm_weight",
            15: "k_norm_weight",
            16: "query_seqlens",
        },
    )
    refuse_outputs(n, {3: "output_qk"})
    if len(n.input) < 7 or not n.input[5] or not n.input[6]:
        raise refuse(n, "seqlens_k and total_sequence_length are required")
    total = cx.known_value(n.input[6])
    if total is None:
        raise refuse(n, "total_sequence_length must be known when lowering (fix the lengths with --shape)")
    total_len = int(np.asarray(total).reshape(-1)[0])
    q = o.read(n.input[0])
    b, s, width = o.dims(q)
    if n.input[1]:
        k, v = o.read(n.input[1]), o.read(n.input[2])
        h = width // heads
    else:  # packed [B, S, (N + 2 Nkv) H]
        h = width // (heads + 2 * kv_heads)
        k = o.slice_last(q, heads * h, (heads + kv_heads) * h)
        v = o.slice_last(q, (heads + kv_heads) * h, width)
        q = o.slice_last(q, 0, heads * h)
    past_k, past_v = (cx.given(n, i) for i in (3, 4))  # a past of length 0 is none
    past_len = cx.shape(past_k, n)[2] if past_k else 0
    first_prompt = s == total_len and s > 1
    seqlens = o.copy(o.as_float(n.input[5]), [b, 1])  # [B, 1]
    past_b = None if first_prompt else o.binary(Opcode.ADD, seqlens, o.const(1.0 - s))
    rotary = None
    if int(attr(n, "do_rotary", 0)):
        steps = np.arange(s, dtype=np.float32)[None] + np.zeros((b, 1), np.float32)
        positions = steps if past_b is None else o.binary(Opcode.ADD, past_b, o.const(steps))
        interleaved = bool(int(attr(n, "rotary_interleaved", 0)))
        rotary = Rotary(_rows(o, positions, n.input[7]), _rows(o, positions, n.input[8]), interleaved)
    qh, kh = to_heads(o, q, heads, rotary), to_heads(o, k, kv_heads, rotary)
    vh = to_heads(o, v, kv_heads)
    present_len = max(past_len, total_len)
    if present_len + s > F32_EXACT:
        raise refuse(n, f"a KV cache of {present_len} positions: float32 slots are exact below 2^24")
    start = o.copy(o.const(np.zeros((b, 1), np.float32)) if past_b is None else past_b, [b, 1, 1, 1])
    slots = _cache_slots(o, start, present_len, s, bool(past_k))
    keys = _gqa_present(o, past_k, kh, slots, present_name(n, 1))
    values = _gqa_present(o, past_v, vh, slots, present_name(n, 2))
    # query i sees key j iff j <= start + i (and, for a first prompt, j <= seqlens_k)
    j_minus_i = np.arange(present_len)[None, :] - np.arange(s)[:, None]
    after = o.clip01(o.binary(Opcode.SUB, o.const(j_minus_i[None, None]), start))
    if first_prompt:
        beyond = o.binary(Opcode.SUB, o.const(np.arange(present_len)[None, None, None]), o.copy(seqlens, [b, 1, 1, 1]))
        after = o.clip01(o.binary(Opcode.ADD, after, o.clip01(beyond)))
    penalty = o.binary(Opcode.MUL, after, o.const(MASKED))
    scale = float(attr(n, "scale", 0.0)) or 1.0 / math.sqrt(h)
    from_heads(o, attend(o, qh, keys, values, scale, penalty), n.output[0])


def _cache_slots(o: Ops, start: int, length: int, s: int, past: bool) -> tuple[int, int | None]:
    """The KV-cache slots of GQA's new rows, shared by K and V: [B, 1, length, S] one-hot rows (new
    row i goes to slot start[b] + i) and, with a past, [B, 1, length, 1] 0/1 rows kept (t < start[b])."""
    slot = np.arange(length)[:, None] - np.arange(s)[None, :]  # t - i
    place = o.binary(Opcode.SUB, o.const(slot[None, None]), start)  # t - i - start
    hot = o.clip01(o.binary(Opcode.SUB, o.const(1.0), o.binary(Opcode.MUL, place, place)))
    if not past:
        return hot, None
    return hot, o.clip01(o.binary(Opcode.SUB, start, o.const(np.arange(length)[None, None, :, None])))


def _gqa_present(o: Ops, past: str, new: int, slots: tuple[int, int | None], out: str) -> int:
    """[B, Nkv, length, H]: past rows t < start[b], the S new rows at start[b] + i, zeros elsewhere."""
    hot, keep = slots
    b, kv, _, h = o.dims(new)
    length = o.dims(hot)[2]
    written = gemm(o, hot, new)
    if not past or keep is None:
        return o.op(Opcode.COPY, [written], [b, kv, length, h], out=out)
    p = o.read(past)
    if o.dims(p)[2] < length:
        p = o.op(
            Opcode.CONCAT,
            [p, o.const(np.zeros((b, kv, length - o.dims(p)[2], h)))],
            [b, kv, length, h],
            {Param.AXIS: 2},
        )
    return o.binary(Opcode.ADD, o.binary(Opcode.MUL, p, keep), written, out=out)


# ---- rotary embedding


def _rows(o: Ops, positions: int | np.ndarray, cache: str) -> int:
    """cache[positions]: [B, S, 1, R/2] rows of a [max_positions, R/2] cos or sin cache by a
    GATHER_ROWS (f32 integer positions); positions known when lowering (an array) pick the rows
    here when the cache is known too."""
    cx, n = o.cx, o.n
    table = cx.shape(cache, n)
    if len(table) != 2 or table[0] > F32_EXACT:
        raise refuse(n, f"cos/sin cache {table}: only [max positions <= 2^24, rotary_dim / 2] is supported")
    if isinstance(positions, np.ndarray):
        b, s = positions.shape
        index = positions.astype(np.int64)
        if index.min() < 0 or index.max() >= table[0]:
            raise refuse(n, f"position ids {index.min()}..{index.max()} lie outside the {table[0]}-row cache")
        known = cx.known_value(cache)
        if known is not None:
            return o.const(np.asarray(known, np.float32)[index][:, :, None, :])
        picks = cx.constant(index[:, :, None], o.t, Dtype.I32)
    else:
        b, s = o.dims(positions)
        picks = o.copy(positions, [b, s, 1])
    return o.op(Opcode.GATHER_ROWS, [o.read(cache), picks], [b, s, 1, table[1]])


def rotate(o: Ops, x: int, rotary: Rotary) -> int:
    """x [B, S, N, H] rotated by cos/sin [B, S, 1, H/2] over all of H: halves (x1 = x[:H/2]) or
    pairs (x1 = x[0::2]); y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin."""
    cos, sin, interleaved = rotary.cos, rotary.sin, rotary.interleaved
    dims = o.dims(x)
    h = dims[-1]
    if o.dims(cos)[-1] * 2 != h:
        raise refuse(
            o.n, f"rotary dim {o.dims(cos)[-1] * 2} differs from head size {h}: partial rotation is not supported"
        )
    if interleaved:
        x1, x2 = o.slice_last(x, 0, h, 2), o.slice_last(x, 1, h, 2)
    else:
        x1, x2 = o.slice_last(x, 0, h // 2), o.slice_last(x, h // 2, h)
    mul = lambda a, c: o.binary(Opcode.MUL, a, c)  # noqa: E731
    y1 = o.binary(Opcode.SUB, mul(x1, cos), mul(x2, sin))
    y2 = o.binary(Opcode.ADD, mul(x2, cos), mul(x1, sin))
    if not interleaved:
        return o.op(Opcode.CONCAT, [y1, y2], dims, {Param.AXIS: len(dims) - 1})
    half = dims[:-1] + [h // 2, 1]
    pairs = o.op(Opcode.CONCAT, [o.copy(y1, half), o.copy(y2, half)], dims[:-1] + [h // 2, 2], {Param.AXIS: len(dims)})
    return o.copy(pairs, dims)


@lowers("RotaryEmbedding", "com.microsoft::RotaryEmbedding")
def rotary_embedding(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ONNX (X, cos, sin, position_ids) and onnxruntime (input, position_ids, cos, sin): X 3-D
    [B, S, N*H] with num_heads or 4-D [B, N, S, H], full rotation; position_ids int [B, S]
    (onnxruntime: or [1], an offset), or ONNX cos/sin [B, S, H/2] without them."""
    o = Ops(cx, n, t)
    contrib = n.domain == "com.microsoft"
    x_name, cos_name, sin_name, pos_name = (
        (n.input[0], n.input[2], n.input[3], n.input[1])
        if contrib
        else (n.input[0], n.input[1], n.input[2], n.input[3] if len(n.input) > 3 else "")
    )
    if contrib and (int(attr(n, "is_packed_batching", 0)) or float(attr(n, "scale", 1.0)) != 1.0):
        raise refuse(n, "is_packed_batching and scale other than 1 are not supported")
    x = o.read(x_name)
    dims = o.dims(x)
    heads = int(attr(n, "num_heads", 0))
    rot = int(attr(n, "rotary_embedding_dim", 0))
    if len(dims) == 3:
        if heads <= 0:
            raise refuse(n, "a 3-D input needs num_heads")
        bsnh = o.copy(x, [dims[0], dims[1], heads, dims[2] // heads])
    elif len(dims) == 4:
        bsnh = o.transpose(x, [0, 2, 1, 3])
    else:
        raise refuse(n, f"input rank {len(dims)}: only 3-D or 4-D is supported")
    b, s, _, h = o.dims(bsnh)
    if rot not in (0, h):
        raise refuse(n, f"rotary_embedding_dim {rot} < head size {h}: partial rotation is not supported")
    interleaved = bool(int(attr(n, "interleaved", 0)))
    if pos_name:
        positions = _positions(o, pos_name, b, s)
        cos, sin = _rows(o, positions, cos_name), _rows(o, positions, sin_name)
    else:
        if cx.shape(cos_name, n) != [b, s, h // 2]:
            raise refuse(n, f"cos_cache {cx.shape(cos_name, n)}: without position_ids it must be [B, S, H/2]")
        cos, sin = (o.copy(o.read(c), [b, s, 1, h // 2]) for c in (cos_name, sin_name))
    y = rotate(o, bsnh, Rotary(cos, sin, interleaved))
    if len(dims) == 3:
        o.op(Opcode.COPY, [y], dims, out=n.output[0])
    else:
        o.transpose(y, [0, 2, 1, 3], out=n.output[0])


def _positions(o: Ops, name: str, b: int, s: int) -> int | np.ndarray:
    """Positions [B, S]: an array when known when lowering, else the int input made float."""
    value = o.cx.known_value(name)
    shape = o.cx.shape(name, o.n)
    steps = np.arange(s, dtype=np.float32)[None] + np.zeros((b, 1), np.float32)
    if shape == [1]:  # onnxruntime: an offset, positions offset + i
        if value is not None:
            return steps + float(np.asarray(value).reshape(-1)[0])
        return o.binary(Opcode.ADD, o.copy(o.as_float(name), [1, 1]), o.const(steps))
    if shape != [b, s]:
        raise refuse(o.n, f"position_ids {shape}: only [B, S] = {[b, s]} (or [1]) is supported")
    return np.asarray(value, np.float32) if value is not None else o.as_float(name)


# ---- ONNX Attention (opset 23)


@lowers("Attention")
def attention(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Q [B, S, q_heads*H] or [B, q_heads, S, H], K/V likewise with kv heads; attn_mask float
    (added) broadcasting to [B, q_heads, S, T]; past K/V [B, kv_heads, P, H] concatenated before the
    new ones (a past of length 0 is none). is_causal only without a past (its alignment with a past
    is not taken on here). A query whose keys are all masked (scores <= LOWEST) gets 0, as ONNX Runtime."""
    o = Ops(cx, n, t)
    if len(n.input) > 6 and n.input[6]:
        raise refuse(n, "input 6 (nonpad_kv_seqlen) is not supported")
    if float(attr(n, "softcap", 0.0)) != 0.0:
        raise refuse(n, "softcap is not supported")
    refuse_outputs(n, {3: "qk_matmul_output"})
    q, k, v = (o.read(n.input[i]) for i in range(3))
    three_d = len(o.dims(q)) == 3
    if three_d:
        heads, kv_heads = int(attr(n, "q_num_heads", 0)), int(attr(n, "kv_num_heads", 0))
        if heads <= 0 or kv_heads <= 0:
            raise refuse(n, "3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = to_heads(o, q, heads), to_heads(o, k, kv_heads), to_heads(o, v, kv_heads)
    keys, values = with_pasts(o, n, (4, 5), k, v)
    b, heads, s, h = o.dims(q)
    total = o.dims(keys)[2]
    penalty = None
    mask = n.input[3] if len(n.input) > 3 else ""
    if mask:
        if cx.dtype(mask) != onnx.TensorProto.FLOAT:
            raise refuse(n, "only a float (additive) attn_mask is supported, not a boolean one")
        md = cx.shape(mask, n)
        full = [1] * (4 - len(md)) + md
        if full[-1] != total or full[-2] not in (1, s) or full[1] not in (1, heads) or full[0] not in (1, b):
            raise refuse(n, f"attn_mask {md} does not broadcast to {[b, heads, s, total]}")
        # -inf as LOWEST: a row of -inf would make SOFTMAX NaN where ORT writes 0 (masked_rows)
        bounds = {ClipParam.MIN: f32_bits(LOWEST), ClipParam.MAX: f32_bits(math.inf)}
        given = o.read(mask)
        penalty = o.op(Opcode.CLIP, [given], o.dims(given), bounds)
        penalty = penalty if len(md) == 4 else o.copy(penalty, full)
    if int(attr(n, "is_causal", 0)):
        if cx.given(n, 4) or s != total:
            raise refuse(n, "is_causal with a past (or S != total length) is not supported")
        hidden = causal(s, total)[None, None]
        if penalty is None:
            penalty = o.const(hidden * MASKED)
        else:  # ORT writes LOWEST over the mask above the diagonal
            kept = o.binary(Opcode.MUL, penalty, o.const(1.0 - hidden))
            penalty = o.binary(Opcode.ADD, kept, o.const(hidden * LOWEST))
    scale = float(attr(n, "scale", 0.0)) or 1.0 / math.sqrt(h)
    y = attend(o, q, keys, values, scale, penalty, zero_masked_rows=bool(mask))
    if three_d:
        from_heads(o, y, n.output[0])
    else:
        o.op(Opcode.COPY, [y], o.dims(y), out=n.output[0])
