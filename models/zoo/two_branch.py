"""two_branch: one fork/join pair of independent branches, a matrix one and a vector one.

Graph (x [64,256] -> y [64,768]):

    x --+-- matrix/matmul0 (256x512) -> matrix/matmul1 (512x512) -------------+
        |                                                                     +-- join/concat (axis 1) -> y
        +-- vector/sigmoid -> vector/mul (gain) -> vector/tanh                |
              -> vector/add (shift) -> vector/exp -> vector/softmax ----------+

Both branches are plain chains (weights, gains and shifts are initializers), so `x` is the
only fork and `join/concat` the only join.

Expected discoveries:
- branches: exactly one pair, {matrix/*} (matrix engine, ~50 MFLOP) with {vector/*}
  (vector engine, elementwise over 64x256), fork `x`, join `join/concat`.
- microbatch: none that is needed to test; every op is row-wise, so a discoverer that treats
  axis 0 of a 2-D activation as a batch axis may also offer micro-batches of the rows (64).
- prefill_decode: none.
"""

from __future__ import annotations

import numpy as np
import onnx

from models.graph_builder import GraphBuilder

ROWS, D_IN, D_HID = 64, 256, 512


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("two_branch", seed, doc=__doc__.splitlines()[0])
    x = g.input("x", [ROWS, D_IN])

    # Matrix-heavy branch.
    h = g.op("MatMul", [x, g.weight("matrix/matmul0/weight", [D_IN, D_HID])], "matrix/matmul0")
    a = g.op("MatMul", [h, g.weight("matrix/matmul1/weight", [D_HID, D_HID])], "matrix/matmul1")

    # Vector-heavy branch: elementwise ops and a softmax, no matrix products.
    v = g.op("Sigmoid", [x], "vector/sigmoid")
    gain = g.const("vector/mul/gain", (1.0 + 0.1 * g.rng.standard_normal(D_IN)).astype(np.float32))
    v = g.op("Mul", [v, gain], "vector/mul")
    v = g.op("Tanh", [v], "vector/tanh")
    v = g.op("Add", [v, g.bias("vector/add/shift", D_IN, scale=0.1)], "vector/add")
    v = g.op("Exp", [v], "vector/exp")
    b = g.op("Softmax", [v], "vector/softmax", axis=-1)

    g.op("Concat", [a, b], "join/concat", outputs=["y"], axis=1)
    g.output("y", [ROWS, D_HID + D_IN])
    return g.model()
