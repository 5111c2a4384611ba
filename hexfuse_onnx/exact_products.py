"""Integer products ONNX Runtime computes exactly, for the sessions the plugin is verified against.

On x86 without VNNI (AVX2: this AMD EPYC VM), MLAS's MatMulInteger of uint8 x int8 (and ConvInteger of
int8 x uint8) adds pairs of products in int16 (vpmaddubsw) and saturates: a 5x33 @ 33x17 product was off
by up to 20800 (onnxruntime's quantization docs recommend reduce_range on non-VNNI machines for this).
Its uint8 x uint8 path is exact. The plugin's kernel computes the ops as defined, exactly, so where
this host saturates (`ort_saturates`) the verification's sessions get each such op whose int8 operand
is a constant as uint8 (`make_exact`): b + 128 with its zero point zb + 128 (128 when absent), and
(b + 128) - (zb + 128) = b - zb, the op's value unchanged. The user's model and the written output
are never changed: only the models the verification's sessions are made of.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# op -> (its int8 operand's input index, that operand's zero point's index) where ORT saturates
SATURATING = {"MatMulInteger": (1, 3), "ConvInteger": (0, 2)}


@functools.cache
def ort_saturates() -> bool:
    """Whether this host's ORT saturates a uint8 x int8 MatMulInteger: 255 * 127 twice is 64770, beyond
    int16 (computed once per process)."""
    node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    a = helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])
    w = numpy_helper.from_array(np.full((2, 1), 127, np.int8), "w")
    model = helper.make_model(
        helper.make_graph([node], "probe", [a], [y], [w]), opset_imports=[helper.make_opsetid("", 13)]
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"a": np.full((1, 2), 255, np.uint8)})[0]
    return int(got[0, 0]) != 2 * 255 * 127


def saturating_nodes(model: onnx.ModelProto) -> int:
    """How many of the model's integer products this host's ORT would compute inexactly and
    `make_exact` makes exact (0 where ORT is exact)."""
    if not ort_saturates():
        return 0
    return sum(1 for graph in _graphs(model.graph) for _ in _constant_int8_operands(graph))


def make_exact(model: onnx.ModelProto) -> int:
    """Rewrite, in place, every MatMulInteger / ConvInteger whose int8 operand is an initializer of its
    graph (with an int8 initializer zero point, or none) to read it as uint8: ORT's exact uint8 x uint8
    path, the same value. Does nothing where this host's ORT is exact. Returns how many it rewrote."""
    if not ort_saturates():
        return 0
    done = 0
    for graph in _graphs(model.graph):
        inits = {t.name: t for t in graph.initializer}
        for node, operand, zero_point in list(_constant_int8_operands(graph)):
            node.input[operand] = _shifted(graph, inits[node.input[operand]], node.name)
            if zero_point < len(node.input) and node.input[zero_point]:
                node.input[zero_point] = _shifted(graph, inits[node.input[zero_point]], node.name)
            else:
                node.input.extend([""] * (zero_point - len(node.input)))
                node.input.append(_add(graph, np.array(128, np.uint8), f"{node.name}_zero_point_u8"))
            done += 1
    return done


def _constant_int8_operands(graph: onnx.GraphProto) -> Iterator[tuple[onnx.NodeProto, int, int]]:
    """(node, index of its int8 operand, index of that operand's zero point) of the graph's saturating
    products whose int8 operand and zero point are int8 initializers (the zero point may be absent)."""
    int8 = {t.name for t in graph.initializer if t.data_type == TensorProto.INT8}
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in SATURATING:
            continue
        operand, zero_point = SATURATING[node.op_type]
        zp = node.input[zero_point] if zero_point < len(node.input) else ""
        if node.input[operand] in int8 and (not zp or zp in int8):
            yield node, operand, zero_point


def _shifted(graph: onnx.GraphProto, tensor: TensorProto, reader: str) -> str:
    """The name of a new initializer holding int8 `tensor` + 128 as uint8 (a new one: others may read it)."""
    value = numpy_helper.to_array(tensor).astype(np.int16) + 128
    return _add(graph, value.astype(np.uint8), f"{tensor.name}_u8_{reader}")


def _add(graph: onnx.GraphProto, value: np.ndarray, name: str) -> str:
    taken = {t.name for t in graph.initializer} | {t for n in graph.node for t in [*n.input, *n.output]}
    while name in taken:
        name += "_"
    graph.initializer.append(numpy_helper.from_array(value, name))
    return name


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every body in it (If branches, Loop and Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for body in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from _graphs(body)
