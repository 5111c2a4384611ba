"""mha_encoder: one pre-LN transformer encoder layer (4 heads, d_model 128, seq 64), ops as exported.

Graph (x [1,64,128] -> y [1,64,128]):

    x -> ln1 -+-> attn/q_proj (MatMul+Add) -> Reshape [1,64,4,32] -> Transpose (0,2,1,3) --+
              +-> attn/k_proj (MatMul+Add) -> Reshape -> Transpose (0,2,3,1) = K^T ---------+-> attn/scores (MatMul)
              |                                                      -> attn/scale (Mul 1/sqrt(32)) -> attn/softmax --+
              +-> attn/v_proj (MatMul+Add) -> Reshape -> Transpose (0,2,1,3) ----------------------------------------+
                                                                                          -> attn/context (MatMul)
      -> Transpose -> Reshape [1,64,128] -> attn/out_proj (MatMul+Add) -> residual1 (Add x)
      -> ln2 -> ffn/fc1 (MatMul 128x512 + Add) -> Gelu as exported (Div sqrt2, Erf, Add 1, Mul, Mul 0.5)
      -> ffn/fc2 (MatMul 512x128 + Add) -> residual2 (Add) -> y

Expected discoveries:
- branches: the fork at `ln1` feeds three independent projection branches. The Q and K
  branches join at `attn/scores/matmul` (a Q-vs-K pair, both matrix); the V branch joins
  at `attn/context/matmul`, so V's projection (matrix) is independent of the whole Q/K
  scores -> scale -> softmax chain (vector-heavy): the most complementary pair. The two
  residual Adds are forks whose other side is empty (x -> residual1 directly): no pair.
- microbatch: none required (batch 1). The token axis (64) is separable for the
  projections/FFN and the head axis (4) for the attention core, if the discoverer looks
  past axis 0.
- prefill_decode: none.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from models.graph_builder import GraphBuilder

SEQ, D_MODEL, HEADS, D_FF = 64, 128, 4, 512
HEAD_DIM = D_MODEL // HEADS


def _layer_norm(g: GraphBuilder, x: str, name: str) -> str:
    scale = g.const(f"{name}/scale", (1.0 + 0.05 * g.rng.standard_normal(D_MODEL)).astype(np.float32))
    shift = g.bias(f"{name}/bias", D_MODEL)
    return g.op("LayerNormalization", [x, scale, shift], name, axis=-1, epsilon=1e-5)


def _linear(g: GraphBuilder, x: str, name: str, d_in: int, d_out: int) -> str:
    y = g.op("MatMul", [x, g.weight(f"{name}/weight", [d_in, d_out])], f"{name}/matmul")
    return g.op("Add", [y, g.bias(f"{name}/bias", d_out)], f"{name}/add")


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("mha_encoder", seed, doc=__doc__.splitlines()[0])
    x = g.input("x", [1, SEQ, D_MODEL])
    split_shape = g.ints("attn/split_heads_shape", [1, SEQ, HEADS, HEAD_DIM])
    merge_shape = g.ints("attn/merge_heads_shape", [1, SEQ, D_MODEL])

    h = _layer_norm(g, x, "ln1")
    heads = {}
    for which, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        t = _linear(g, h, f"attn/{which}_proj", D_MODEL, D_MODEL)
        t = g.op("Reshape", [t, split_shape], f"attn/{which}/reshape")
        heads[which] = g.op("Transpose", [t], f"attn/{which}/transpose", perm=perm)

    s = g.op("MatMul", [heads["q"], heads["k"]], "attn/scores/matmul")  # [1,4,64,64]
    s = g.op("Mul", [s, g.scalar("attn/scale/factor", 1.0 / math.sqrt(HEAD_DIM))], "attn/scale")
    p = g.op("Softmax", [s], "attn/softmax", axis=-1)
    c = g.op("MatMul", [p, heads["v"]], "attn/context/matmul")  # [1,4,64,32]
    c = g.op("Transpose", [c], "attn/context/transpose", perm=[0, 2, 1, 3])
    c = g.op("Reshape", [c, merge_shape], "attn/context/reshape")
    a = _linear(g, c, "attn/out_proj", D_MODEL, D_MODEL)
    r1 = g.op("Add", [x, a], "residual1/add")

    f = _layer_norm(g, r1, "ln2")
    f = _linear(g, f, "ffn/fc1", D_MODEL, D_FF)
    # Gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))), spelled out as exporters do below opset 20.
    e = g.op("Div", [f, g.scalar("ffn/gelu/sqrt2", math.sqrt(2.0))], "ffn/gelu/div")
    e = g.op("Erf", [e], "ffn/gelu/erf")
    e = g.op("Add", [e, g.scalar("ffn/gelu/one", 1.0)], "ffn/gelu/add")
    e = g.op("Mul", [f, e], "ffn/gelu/mul")
    e = g.op("Mul", [e, g.scalar("ffn/gelu/half", 0.5)], "ffn/gelu/mul_half")
    f = _linear(g, e, "ffn/fc2", D_FF, D_MODEL)
    g.op("Add", [r1, f], "residual2/add", outputs=["y"])
    g.output("y", [1, SEQ, D_MODEL])
    return g.model()
