"""Weight-only quantized versions of the exported decoders, as onnxruntime-genai writes them for CPU:
every MatMul whose B is a 2-D float initializer becomes a com.microsoft MatMulNBits with B quantized
per block of `block` weights along K (asymmetric: a scale and a zero point per block, the zero points
packed), at accuracy_level 4 (ORT's CPU kernel then quantizes the activations to int8 per block).

The packing is numpy's (onnxruntime's MatMulNBitsQuantizer needs `onnx_ir`, which is not installed
here): per block lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / (2^bits - 1), zero point
round(-lo / scale), q = clip(round(w / scale) + zp). `tests/test_lower_nbits.py` holds ORT's
MatMulNBits to `reference` (f32 at levels 0 and 1, int8 activations at 4).

    python -m models nbits build [--out DIR]    writes <decoder>_int4.onnx and <decoder>_int8.onnx
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from models import exported

BLOCK = 32
LEVEL = 4  # accuracy_level: int8 activations, as onnxruntime-genai writes for CPU


@dataclass(frozen=True)
class NbitsModel:
    name: str
    source: str  # the float decoder of models/exported/
    bits: int

    @property
    def path(self) -> Path:
        return exported.FOLDER / f"{self.name}.onnx"


MODELS = {
    m.name: m
    for src in ("llama_gqa_contrib", "gpt2_dynamo")
    for m in (NbitsModel(f"{src}_int4", src, 4), NbitsModel(f"{src}_int8", src, 8))
}


@dataclass
class Packed:
    b: np.ndarray  # u8 [N, blocks, block * bits / 8]
    scales: np.ndarray  # f32 [N * blocks]
    zero_points: np.ndarray  # u8 [N * ceil(blocks * bits / 8)]
    q: np.ndarray  # the unpacked values, u8 [N, blocks, block]
    zp: np.ndarray  # the unpacked zero points, u8 [N, blocks]


def pack(w: np.ndarray, bits: int, block: int) -> Packed:
    """w [K, N] f32 quantized per block along K, in MatMulNBits' layout."""
    k, n = w.shape
    blocks = -(-k // block)
    padded = np.zeros((blocks * block, n), np.float32)
    padded[:k] = w
    blk = padded.T.reshape(n, blocks, block)
    qmax = (1 << bits) - 1
    lo, hi = np.minimum(blk.min(-1), 0), np.maximum(blk.max(-1), 0)
    scale = ((hi - lo) / qmax).astype(np.float32)
    scale[scale == 0] = 1
    zp = np.clip(np.round(-lo / scale), 0, qmax).astype(np.uint8)
    q = np.clip(np.round(blk / scale[..., None]) + zp[..., None], 0, qmax).astype(np.uint8)
    if bits == 8:
        return Packed(q, scale.reshape(-1), zp.reshape(-1), q, zp)
    b = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zpad = np.zeros((n, blocks + (blocks & 1)), np.uint8)
    zpad[:, :blocks] = zp
    return Packed(b, scale.reshape(-1), (zpad[:, 0::2] | (zpad[:, 1::2] << 4)).reshape(-1), q, zp)


def reference(a: np.ndarray, p: Packed, k: int, level: int) -> np.ndarray:
    """ORT's MatMulNBits of a [M, K] (f32 at levels 0/1; at 4, a quantized to int8 per block as MLAS does:
    scale amax / 127, q = round half to even of a * (127 / amax), the integer dot per block scaled)."""
    n, blocks, block = p.q.shape
    diff = p.q.astype(np.int64) - p.zp[..., None].astype(np.int64)
    if level != LEVEL:
        w = (diff.astype(np.float32) * p.scales.reshape(n, blocks, 1)).reshape(n, -1)[:, :k]
        return (a @ w.T).astype(np.float32)
    ap = np.zeros((a.shape[0], blocks * block), np.float32)
    ap[:, :k] = a
    ab = ap.reshape(a.shape[0], blocks, block)
    amax = np.abs(ab).max(-1)
    inv = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0).astype(np.float32)
    qa = np.rint(ab * inv[..., None]).astype(np.int64)
    dots = np.einsum("mbk,nbk->mnb", qa, diff).astype(np.float32)
    sa = (amax / np.float32(127)).astype(np.float32)
    return (dots * sa[:, None, :] * p.scales.reshape(1, n, blocks)).sum(-1).astype(np.float32)


def node(
    a: str, y: str, name: str, shape: tuple[int, int], bits: int, block: int, level: int, bias: str = ""
) -> onnx.NodeProto:
    k, n = shape
    inputs = [a, f"{name}.qweight", f"{name}.scales", f"{name}.qzeros"] + (["", bias] if bias else [])
    return helper.make_node(
        "MatMulNBits", inputs, [y], name=name, domain="com.microsoft",
        K=k, N=n, bits=bits, block_size=block, accuracy_level=level,
    )  # fmt: skip


def initializers(name: str, p: Packed) -> list[onnx.TensorProto]:
    return [
        numpy_helper.from_array(p.b, f"{name}.qweight"),
        numpy_helper.from_array(p.scales, f"{name}.scales"),
        numpy_helper.from_array(p.zero_points, f"{name}.qzeros"),
    ]


def _weight(nd: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> tuple[onnx.TensorProto, str] | None:
    """(B, bias name) of a MatMul, or a Gemm A x B + bias (transA 0, transB 0, alpha 1, beta 1), of a 2-D
    float initializer B; else None."""
    if nd.domain not in ("", "ai.onnx") or nd.op_type not in ("MatMul", "Gemm"):
        return None
    b = inits.get(nd.input[1])
    if b is None or len(b.dims) != 2 or b.data_type != onnx.TensorProto.FLOAT:
        return None
    if nd.op_type == "MatMul":
        return b, ""
    attrs = {a.name: helper.get_attribute_value(a) for a in nd.attribute}
    plain = attrs.get("transA", 0) == 0 and attrs.get("transB", 0) == 0
    bias = nd.input[2] if len(nd.input) > 2 else ""
    if not plain or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
        return None
    if bias and (bias not in inits or list(inits[bias].dims) != [b.dims[1]]):
        return None
    return b, bias


def quantize(model: onnx.ModelProto, bits: int, block: int = BLOCK, level: int = LEVEL) -> onnx.ModelProto:
    """A copy of the model with each MatMul (or plain Gemm + 1-D bias) of a 2-D float initializer B made
    a MatMulNBits."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inits = {t.name: t for t in g.initializer}
    readers: dict[str, int] = {}
    for nd in g.node:
        for i in nd.input:
            readers[i] = readers.get(i, 0) + 1
    nodes, dropped = [], set()
    for nd in g.node:
        found = _weight(nd, inits)
        if found is None:
            nodes.append(nd)
            continue
        b, bias = found
        w = numpy_helper.to_array(b)
        name = nd.name or nd.output[0]
        nodes.append(node(nd.input[0], nd.output[0], name, w.shape, bits, block, level, bias))
        g.initializer.extend(initializers(name, pack(w, bits, block)))
        if readers[b.name] == 1:
            dropped.add(b.name)
    del g.node[:]
    g.node.extend(nodes)
    kept = [t for t in g.initializer if t.name not in dropped]
    del g.initializer[:]
    g.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return out


def build(out_dir: Path = exported.FOLDER) -> list[Path]:
    """Write every NbitsModel (the same bytes each time)."""
    paths = []
    for m in MODELS.values():
        q = quantize(onnx.load(exported.MODELS[m.source].path), m.bits)
        onnx.checker.check_model(q, full_check=True)
        path = Path(out_dir) / f"{m.name}.onnx"
        onnx.save(q, path)
        paths.append(path)
    return paths
