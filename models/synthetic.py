"""Large synthetic models for scale tests: `build_synthetic(n_nodes, seed)`.

The graph is one stream of tiny [4,16] fp32 activations through randomly chosen blocks
(the choice is seeded):

- fork/join (8 nodes): a matrix branch (MatMul -> Add -> MatMul) and a vector branch
  (Sigmoid -> Mul -> Tanh) from the same input, joined by Add, then Tanh. One branch pair.
- residual (4 nodes): LayerNormalization -> MatMul -> Relu -> Add(block input). A fork
  whose other side is empty: no pair.
- chain (3 nodes): MatMul -> Add -> Tanh. No fork.

then single Tanh nodes to make the count exact, and a final `head/tanh` producing `y`.
The node count is exactly `n_nodes`. Weights come from a small pool of shared
initializers, so the model stays small; Tanh/LayerNormalization keep activations bounded
over any depth.

Expected discoveries: one branch pair per fork/join block (about 40% of blocks), none for
residual or chain blocks; the batch axis (4) is separable throughout if the discoverer
treats axis 0 of 2-D activations as a batch.
"""

from __future__ import annotations

import numpy as np
import onnx

from models.graph_builder import GraphBuilder

ROWS, D = 4, 16
POOL = 8  # shared weights / biases / gains in each pool
FORK_JOIN, RESIDUAL, CHAIN = 0, 1, 2
BLOCK_NODES = {FORK_JOIN: 8, RESIDUAL: 4, CHAIN: 3}
BLOCK_PROBS = (0.4, 0.3, 0.3)


def build_synthetic(n_nodes: int, seed: int = 0) -> onnx.ModelProto:
    """Builds a valid model with exactly `n_nodes` nodes (n_nodes >= 1) in O(n_nodes)."""
    if n_nodes < 1:
        raise ValueError(f"n_nodes must be >= 1, got {n_nodes}")
    g = GraphBuilder(
        f"synthetic_{n_nodes}", seed, doc=f"synthetic model with {n_nodes} nodes (fork/join, residual and chain blocks)"
    )
    rng = g.rng
    t = g.input("x", [ROWS, D])

    w = [g.weight(f"shared/matmul_weight{i}", [D, D]) for i in range(POOL)]
    b = [g.bias(f"shared/bias{i}", D) for i in range(POOL)]
    gain = [g.const(f"shared/gain{i}", (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)) for i in range(POOL)]
    ln_scale = g.const("shared/layernorm_scale", np.ones(D, dtype=np.float32))
    ln_bias = g.const("shared/layernorm_bias", np.zeros(D, dtype=np.float32))

    budget = n_nodes - 1  # the final head/tanh
    kinds = rng.choice(3, size=budget // 3 + 1, p=BLOCK_PROBS)
    picks = rng.integers(0, POOL, size=(len(kinds), 3))
    blk = 0
    while budget >= BLOCK_NODES[CHAIN]:
        kind = int(kinds[blk])
        if BLOCK_NODES[kind] > budget:
            kind = RESIDUAL if budget >= BLOCK_NODES[RESIDUAL] else CHAIN
        i, j, k = (int(v) for v in picks[blk])
        p = f"block{blk}"
        if kind == FORK_JOIN:
            m = g.op("MatMul", [t, w[i]], f"{p}/matrix/matmul0")
            m = g.op("Add", [m, b[j]], f"{p}/matrix/add")
            m = g.op("MatMul", [m, w[k]], f"{p}/matrix/matmul1")
            v = g.op("Sigmoid", [t], f"{p}/vector/sigmoid")
            v = g.op("Mul", [v, gain[j]], f"{p}/vector/mul")
            v = g.op("Tanh", [v], f"{p}/vector/tanh")
            t = g.op("Add", [m, v], f"{p}/join/add")
            t = g.op("Tanh", [t], f"{p}/join/tanh")
        elif kind == RESIDUAL:
            r = g.op("LayerNormalization", [t, ln_scale, ln_bias], f"{p}/residual/layernorm", axis=-1)
            r = g.op("MatMul", [r, w[i]], f"{p}/residual/matmul")
            r = g.op("Relu", [r], f"{p}/residual/relu")
            t = g.op("Add", [t, r], f"{p}/residual/add")
        else:
            t = g.op("MatMul", [t, w[i]], f"{p}/chain/matmul")
            t = g.op("Add", [t, b[j]], f"{p}/chain/add")
            t = g.op("Tanh", [t], f"{p}/chain/tanh")
        budget -= BLOCK_NODES[kind]
        blk += 1
    for k in range(budget):
        t = g.op("Tanh", [t], f"tail/tanh{k}")
    g.op("Tanh", [t], "head/tanh", outputs=["y"])
    g.output("y", [ROWS, D])
    return g.model()
