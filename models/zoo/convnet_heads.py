"""convnet_heads: a small conv backbone feeding three parallel heads with their own outputs.

Graph (image [1,3,64,64]):

    image -> backbone/conv0 (3->16, 3x3 s2) -> relu -> backbone/conv1 (16->32, 3x3 s2) -> relu  [1,32,16,16]
      +-- cls_head: conv 1x1 (32->64) -> relu -> GlobalAveragePool -> Flatten -> Gemm (64->10) -> class_logits [1,10]
      +-- box_head: conv 3x3 (32->32) -> relu -> conv 1x1 (32->4) -> Sigmoid                 -> boxes [1,4,16,16]
      +-- seg_head: conv 1x1 (32->2) -> Resize x4 (linear)                                     -> seg_logits [1,2,64,64]

The heads fork at `backbone/relu1` and never join: each ends at its own graph output.

Expected discoveries:
- branches: one fork with three independent branches and no join (up to 3 pairs). The
  most complementary: box_head (3x3 conv, matrix) with seg_head (dominated by the Resize
  to 64x64: vector/memory) or cls_head (GlobalAveragePool: vector).
- microbatch: none (batch 1).
- prefill_decode: none.
"""

from __future__ import annotations

import numpy as np
import onnx

from models.graph_builder import GraphBuilder

NUM_CLASSES, NUM_BOX, NUM_SEG = 10, 4, 2


def _conv(g: GraphBuilder, x: str, name: str, c_in: int, c_out: int, k: int, stride: int = 1) -> str:
    w = g.weight(f"{name}/weight", [c_out, c_in, k, k])
    b = g.bias(f"{name}/bias", c_out)
    p = k // 2
    return g.op("Conv", [x, w, b], name, kernel_shape=[k, k], pads=[p, p, p, p], strides=[stride, stride])


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("convnet_heads", seed, doc=__doc__.splitlines()[0])
    x = g.input("image", [1, 3, 64, 64])

    h = _conv(g, x, "backbone/conv0", 3, 16, 3, stride=2)  # [1,16,32,32]
    h = g.op("Relu", [h], "backbone/relu0")
    h = _conv(g, h, "backbone/conv1", 16, 32, 3, stride=2)  # [1,32,16,16]
    feat = g.op("Relu", [h], "backbone/relu1")

    c = _conv(g, feat, "cls_head/conv", 32, 64, 1)
    c = g.op("Relu", [c], "cls_head/relu")
    c = g.op("GlobalAveragePool", [c], "cls_head/gap")
    c = g.op("Flatten", [c], "cls_head/flatten", axis=1)
    g.op(
        "Gemm",
        [c, g.weight("cls_head/fc/weight", [NUM_CLASSES, 64]), g.bias("cls_head/fc/bias", NUM_CLASSES)],
        "cls_head/fc",
        outputs=["class_logits"],
        transB=1,
    )

    b = _conv(g, feat, "box_head/conv0", 32, 32, 3)
    b = g.op("Relu", [b], "box_head/relu")
    b = _conv(g, b, "box_head/conv1", 32, NUM_BOX, 1)
    g.op("Sigmoid", [b], "box_head/sigmoid", outputs=["boxes"])

    s = _conv(g, feat, "seg_head/conv", 32, NUM_SEG, 1)
    scales = g.const("seg_head/resize/scales", np.array([1.0, 1.0, 4.0, 4.0], dtype=np.float32))
    g.op("Resize", [s, "", scales], "seg_head/resize", outputs=["seg_logits"], mode="linear")

    g.output("class_logits", [1, NUM_CLASSES])
    g.output("boxes", [1, NUM_BOX, 16, 16])
    g.output("seg_logits", [1, NUM_SEG, 64, 64])
    return g.model()
