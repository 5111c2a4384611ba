"""mlp_chain: a batch-separable MLP chain (batch 8 x 64 tokens), with no forks at all.

Graph (x [8,64,256] -> y [8,64,256]), one chain, every tensor has exactly one consumer:

    x -> fc1/matmul (256x1024) -> fc1/add -> act/hardswish (x * hardsigmoid(x))
      -> norm/layernorm (last axis) -> fc2/matmul (1024x256) -> fc2/add -> out/softmax (axis -1) -> y

With 64 tokens per batch row the MatMuls are compute-bound (weights are read once per
micro-batch, so a weight-bound chain would not gain from splitting). The SiLU-style gate is a
single HardSwish node, so that no tensor forks (Sigmoid(x) * x would fork x into a trivial diamond).
Every op works on each row on its own.

Expected discoveries:
- branches: none (no tensor has two consumers).
- microbatch: the whole chain is separable along axis 0 (batch 8): split into
  micro-batches (e.g. 4+4) and pair one micro-batch's matrix ops (fc1/fc2 MatMul) with
  the other's vector ops (hardswish, layernorm, softmax).
- prefill_decode: none.
"""

from __future__ import annotations

import numpy as np
import onnx

from models.graph_builder import GraphBuilder

BATCH, TOKENS, D_IN, D_HID = 8, 64, 256, 1024


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("mlp_chain", seed, doc=__doc__.splitlines()[0])
    x = g.input("x", [BATCH, TOKENS, D_IN])
    h = g.op("MatMul", [x, g.weight("fc1/weight", [D_IN, D_HID])], "fc1/matmul")
    h = g.op("Add", [h, g.bias("fc1/bias", D_HID)], "fc1/add")
    h = g.op("HardSwish", [h], "act/hardswish")
    ln_scale = g.const("norm/layernorm/scale", (1.0 + 0.05 * g.rng.standard_normal(D_HID)).astype(np.float32))
    h = g.op(
        "LayerNormalization",
        [h, ln_scale, g.bias("norm/layernorm/bias", D_HID)],
        "norm/layernorm",
        axis=-1,
        epsilon=1e-5,
    )
    h = g.op("MatMul", [h, g.weight("fc2/weight", [D_HID, D_IN])], "fc2/matmul")
    h = g.op("Add", [h, g.bias("fc2/bias", D_IN)], "fc2/add")
    g.op("Softmax", [h], "out/softmax", outputs=["y"], axis=-1)
    g.output("y", [BATCH, TOKENS, D_IN])
    return g.model()
