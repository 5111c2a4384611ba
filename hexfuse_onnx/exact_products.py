"""Integer products ONNX Runtime computes exactly, for the sessions the plugin is verified against.

On x86 without VNNI (AVX2: this AMD EPYC VM), MLAS's MatMulInteger of uint8 x int8 (and ConvInteger of
int8 x uint8) adds pairs of products in int16 (vpmaddubsw) and saturates: a 5x33 @ 33x17 product was off
by up to 20800 (onnxruntime's quantization docs recommend reduce_range on non-VNNI machines for this).
Its uint8 x uint8 path is exact. So are the QLinearConv/QLinearMatMul/QGemm it fuses a QDQ model's
DequantizeLinear(uint8) x DequantizeLinear(int8 weight) into (centerface_qdq: 0.11 relative from the
same model read as uint8 x uint8). The plugin's kernel computes the ops as defined, exactly, so where
this host saturates (`ort_saturates`) the verification's sessions get each such op's constant int8
operand as uint8 (`make_exact`): b + 128 with its zero point zb + 128 (128 when absent), and
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

from .graph import declared_types
from .nested import all_graphs

# op -> (its int8 operand's input index, that operand's zero point's index) where ORT saturates
SATURATING = {"MatMulInteger": (1, 3), "ConvInteger": (0, 2)}
# ops ORT fuses with the DequantizeLinear of their input 0 (uint8) and of their input 1 (an int8 weight)
FUSED_PRODUCTS = {"Conv", "MatMul", "Gemm"}
# ops whose output 0 has the element type of their input 0 (what an activation passes through)
SAME_TYPE = {"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Slice", "Split"}
SAME_TYPE |= {"MaxPool", "Resize", "Pad", "Gather", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Relu", "Clip"}
# (domain, op) of QOperator products: input 0 the activation, 3 the weight, 5 its zero point
QLINEAR = {("ai.onnx", "QLinearConv"), ("ai.onnx", "QLinearMatMul"), ("com.microsoft", "QGemm")}


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
    return sum(1 for graph in all_graphs(model.graph) for _ in _constant_int8_operands(graph))


def make_exact(model: onnx.ModelProto) -> int:
    """Rewrite, in place, every MatMulInteger / ConvInteger whose int8 operand is an initializer of its
    graph (with an int8 initializer zero point, or none), and every QOperator product or DequantizeLinear of
    a uint8 x int8 product ORT fuses (`_uint8_times_int8`), to read its int8 operand as uint8: ORT's
    exact uint8 x uint8 path, the same value. Does nothing where this host's ORT is exact. Returns how
    many it rewrote."""
    if not ort_saturates():
        return 0
    done = 0
    for graph in all_graphs(model.graph):
        inits = {t.name: t for t in graph.initializer}
        taken = set(inits) | {t for n in graph.node for t in [*n.input, *n.output]}
        for node, operand, zero_point in list(_constant_int8_operands(graph)):
            node.input[operand] = _shifted(graph, inits[node.input[operand]], node.name, taken)
            if zero_point < len(node.input) and node.input[zero_point]:
                node.input[zero_point] = _shifted(graph, inits[node.input[zero_point]], node.name, taken)
            else:
                node.input.extend([""] * (zero_point - len(node.input)))
                node.input.append(_add(graph, np.array(128, np.uint8), f"{node.name}_zero_point_u8", taken))
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
    yield from _uint8_times_int8(graph, int8)


def _uint8_times_int8(graph: onnx.GraphProto, int8: set[str]) -> Iterator[tuple[onnx.NodeProto, int, int]]:
    """The fused products ORT computes of a uint8 activation and a constant int8 weight: QOperator nodes
    (QLINEAR) and the DequantizeLinear of a weight only FUSED_PRODUCTS read, each with its activation a
    DequantizeLinear of uint8 (QLinearConv/QLinearMatMul/QGemm once fused). The weight's zero point is
    an int8 initializer of one value, or none: ORT's fused kernels take one (int8 weights are symmetric).
    (int8 activations are left: ORT fuses no int8 x uint8 op, and its int8 x int8 path is exact.)"""
    producers = {t: n for n in graph.node for t in n.output}
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, k))
    inits = {t.name: t for t in graph.initializer}
    types = _element_types(graph)

    def one_int8_value(node: onnx.NodeProto, weight: int, zero_point: int) -> bool:
        zp = node.input[zero_point] if zero_point < len(node.input) else ""
        if node.input[weight] not in int8 or (zp and zp not in int8):
            return False
        values = numpy_helper.to_array(inits[zp]) if zp else np.zeros(1)
        return bool((values == values.flat[0]).all())

    for node in graph.node:
        blocked = any(a.name == "block_size" for a in node.attribute)  # MatMulNBits' weights: left as written
        if (node.domain or "ai.onnx", node.op_type) in QLINEAR and one_int8_value(node, 3, 5):
            if types.get(node.input[0]) == TensorProto.UINT8:
                yield node, 3, 5
        elif _dequantizes(node) and not blocked and one_int8_value(node, 0, 2):
            reads = readers.get(node.output[0], [])
            if reads and all(_reads_uint8_times(reader, k, producers, types) for reader, k in reads):
                yield node, 0, 2


def _reads_uint8_times(
    node: onnx.NodeProto, k: int, producers: dict[str, onnx.NodeProto], types: dict[str, int]
) -> bool:
    """Whether `node` is one of FUSED_PRODUCTS reading the weight as input `k` = 1 and a DequantizeLinear
    of uint8 as input 0."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in FUSED_PRODUCTS or k != 1:
        return False
    activation = producers.get(node.input[0])
    if activation is None or not _dequantizes(activation):
        return False
    return types.get(activation.input[0]) == TensorProto.UINT8


def _dequantizes(node: onnx.NodeProto) -> bool:
    return node.domain in ("", "ai.onnx") and node.op_type == "DequantizeLinear"


def _element_types(graph: onnx.GraphProto) -> dict[str, int]:
    """The element type of the graph's tensors where it says them or a node's kind gives them: a
    QuantizeLinear's, a DynamicQuantizeLinear's uint8, and input 0's for the QLinear ops and SAME_TYPE
    (ORT's QLinear kernels give the type they read). Other tensors are missing."""
    types = declared_types(graph)
    for node in graph.node:  # in order: a node's inputs are made before it
        if not node.output or types.get(node.output[0]):
            continue
        if node.op_type == "QuantizeLinear":
            output_dtype = next((a.i for a in node.attribute if a.name == "output_dtype"), 0)
            zp = node.input[2] if len(node.input) > 2 else ""
            made = output_dtype or types.get(zp, 0) or (0 if zp else TensorProto.UINT8)
        elif node.op_type == "DynamicQuantizeLinear":
            made = TensorProto.UINT8
        elif node.op_type == "QLinearConcat" and len(node.input) > 1:  # (Y_scale, Y_zero_point, inputs...)
            made = types.get(node.input[1], 0)
        elif node.op_type in SAME_TYPE or (node.op_type.startswith("QLinear") and node.input):
            made = types.get(node.input[0], 0)
        else:
            continue
        if made:
            types[node.output[0]] = made
    return types


def _shifted(graph: onnx.GraphProto, tensor: TensorProto, reader: str, taken: set[str]) -> str:
    """The name of a new initializer holding int8 `tensor` + 128 as uint8 (a new one: others may read it)."""
    value = numpy_helper.to_array(tensor).astype(np.int16) + 128
    return _add(graph, value.astype(np.uint8), f"{tensor.name}_u8_{reader}", taken)


def _add(graph: onnx.GraphProto, value: np.ndarray, name: str, taken: set[str]) -> str:
    """A new initializer of the graph, named `name` or, when `taken` (the graph's names) has it, with _ added."""
    while name in taken:
        name += "_"
    taken.add(name)
    graph.initializer.append(numpy_helper.from_array(value, name))
    return name
