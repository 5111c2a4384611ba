"""sequential_chain: a purely sequential chain with batch 1; the negative control.

Graph (x [1,256] -> y [1,256]):

    x -> layer0/matmul (256x256) -> layer0/add -> layer0/relu
      -> layer1/matmul (256x256) -> layer1/add -> layer1/tanh -> y

Every tensor has exactly one consumer and there is no batch to split.

Expected discoveries: NONE of any kind (no branches, no micro-batches since batch is 1,
no prefill/decode). The pass must leave this model unchanged.
"""

from __future__ import annotations

import onnx

from models.graph_builder import GraphBuilder

D = 256


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("sequential_chain", seed, doc=__doc__.splitlines()[0])
    x = g.input("x", [1, D])
    h = g.op("MatMul", [x, g.weight("layer0/weight", [D, D])], "layer0/matmul")
    h = g.op("Add", [h, g.bias("layer0/bias", D)], "layer0/add")
    h = g.op("Relu", [h], "layer0/relu")
    h = g.op("MatMul", [h, g.weight("layer1/weight", [D, D])], "layer1/matmul")
    h = g.op("Add", [h, g.bias("layer1/bias", D)], "layer1/add")
    g.op("Tanh", [h], "layer1/tanh", outputs=["y"])
    g.output("y", [1, D])
    return g.model()
