"""inception: an Inception-style block with four independent conv/pool branches.

Graph (x [1,32,28,28] -> y [1,56,28,28]):

    x --+-- branch1x1:  conv 1x1 (32->16) -> relu ------------------------------------+
        +-- branch3x3:  conv 1x1 (32->16) -> relu -> conv 3x3 (16->24) -> relu --------+
        +-- branch5x5:  conv 1x1 (32->4)  -> relu -> conv 5x5 (4->8)   -> relu --------+-- join/concat (axis 1) -> y
        +-- branch_pool: maxpool 3x3 s1 -> conv 1x1 (32->8) -> relu -------------------+

Expected discoveries:
- branches: one fork (`x`, 4 consumers) and one join (`join/concat`) with four pairwise
  independent branches, i.e. up to 6 candidate pairs. The most complementary is
  branch_pool (MaxPool: vector/memory bound) with a conv branch (matrix), e.g. branch3x3,
  the heaviest conv branch.
- microbatch: none (batch 1).
- prefill_decode: none.
"""

from __future__ import annotations

import onnx

from models.graph_builder import GraphBuilder

C_IN, HW = 32, 28
C_1X1, C_3X3_RED, C_3X3, C_5X5_RED, C_5X5, C_POOL = 16, 16, 24, 4, 8, 8


def _conv_relu(g: GraphBuilder, x: str, branch: str, layer: str, c_in: int, c_out: int, k: int) -> str:
    """Conv kxk (same padding) + Relu, named `<branch>/<layer>conv` and `<branch>/<layer>relu`."""
    w = g.weight(f"{branch}/{layer}conv/weight", [c_out, c_in, k, k])
    b = g.bias(f"{branch}/{layer}conv/bias", c_out)
    p = k // 2
    y = g.op("Conv", [x, w, b], f"{branch}/{layer}conv", kernel_shape=[k, k], pads=[p, p, p, p], strides=[1, 1])
    return g.op("Relu", [y], f"{branch}/{layer}relu")


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("inception", seed, doc=__doc__.splitlines()[0])
    x = g.input("x", [1, C_IN, HW, HW])

    b1 = _conv_relu(g, x, "branch1x1", "", C_IN, C_1X1, 1)

    b2 = _conv_relu(g, x, "branch3x3", "reduce_", C_IN, C_3X3_RED, 1)
    b2 = _conv_relu(g, b2, "branch3x3", "", C_3X3_RED, C_3X3, 3)

    b3 = _conv_relu(g, x, "branch5x5", "reduce_", C_IN, C_5X5_RED, 1)
    b3 = _conv_relu(g, b3, "branch5x5", "", C_5X5_RED, C_5X5, 5)

    b4 = g.op("MaxPool", [x], "branch_pool/maxpool", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    b4 = _conv_relu(g, b4, "branch_pool", "", C_IN, C_POOL, 1)

    g.op("Concat", [b1, b2, b3, b4], "join/concat", outputs=["y"], axis=1)
    g.output("y", [1, C_1X1 + C_3X3 + C_5X5 + C_POOL, HW, HW])
    return g.model()
