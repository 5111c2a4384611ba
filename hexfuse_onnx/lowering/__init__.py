"""Lowering FusedHexPair nodes to the task programs the kernel runs (dsp/include/hexfuse/ops.h).

- `abi`: the ABI's numbers as IntEnums (opcodes, dtypes, engines, parameter ids).
- `program`: the program in memory and its encoding.
- `registry`: `@lowers("Conv")`; its keys are the op set (`SUPPORTED_OPS`).
- `lowerer`: the per-pair state (tensors, constants, op origins) every lowering writes through.
- one module per op family: `matrix`, `pointwise`, `normalize`, `layout`, `spatial`, `quant`, `attention`
  (fused attention and rotary ops expanded into program ops),
  `qmatmul` (integer MatMul/Conv: QDQ groups and QLinearMatMul/QLinearConv), `qlinear` (the other
  QOperator ops as DQ -> op -> Q chains), `dynamic` (DynamicQuantizeLinear, MatMulInteger), `nbits`
  (com.microsoft MatMulNBits: weight-only 4/8-bit).
- `conv_bn`: a BatchNormalization after a Conv folded into its weight and bias, as ORT folds it.

Adding an op: write its lowering in its family's module with `@lowers("OnnxOp")`, add the
opcode to `abi.Opcode` (and its parameter enum), and test it in tests/test_lower.py.

The pass lowers each pair before it edits the model (`lower_function`, with the ModelGraph's
types); the functions taking a model lower the pairs of an already rewritten model.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import onnx
from onnx import helper, numpy_helper

from .. import contract as C
from . import attention, dynamic, layout, matrix, nbits, normalize, pointwise, qlinear, qmatmul, quant, spatial  # noqa: F401 - they register
from .attention import RUN_TIME_INTEGERS
from .lowerer import Lowerer, OpOrigin
from .pointwise import replaces_nan
from .registry import LOWERINGS, LoweringError, absent_when_empty, op_key, op_outside_kernel
from .rewritten import ModelShapes, model_types
from .shapes import SymbolicInputs, lower_symbolic

SUPPORTED_OPS = tuple(sorted(LOWERINGS))

__all__ = [
    "RUN_TIME_INTEGERS",
    "SUPPORTED_OPS",
    "Lowered",
    "ModelShapes",
    "SymbolicInputs",
    "LoweringError",
    "OpOrigin",
    "absent_when_empty",
    "attach_programs",
    "known_tensors",
    "lower_function",
    "lower_pair",
    "model_types",
    "op_key",
    "op_outside_kernel",
    "program_op_maps",
    "program_op_nodes",
    "replaces_nan",
]


@dataclass(frozen=True)
class Lowered:
    """A pair's program and, indexed like its ops, the body node each op comes from."""

    program: bytes
    origins: list[OpOrigin]


def lower_function(
    node: onnx.NodeProto,
    fn: onnx.FunctionProto,
    initializers: dict[str, onnx.TensorProto],
    types: dict[str, onnx.TypeProto],
    model_opset: int,
    ir_version: int,
    symbolic: SymbolicInputs | None = None,
    ort_transposes: dict[str, list[int]] | None = None,
) -> Lowered:
    """Lower a FusedHexPair node with its function body; `types` by the node's actual input names;
    `ort_transposes`: the reductions ORT sums the Transpose input of (ort_graph.pushed_transposes).

    With `symbolic` (some node input dim is symbolic) the program is format v2 with a shape
    section, proven at the second binding's types (`lowering.shapes`).

    Raises LoweringError. A body node lowers to one op or a few through scratch tensors (Split:
    one per output; Sum, BatchNormalization, Pow x**3: a chain), a Constant to none (its value
    becomes a program constant, or steers another op's parameters). Reshape, Flatten, Squeeze,
    Unsqueeze and Identity lower to a COPY op of their own. Time measured per program
    op (the trace's `op`) is attributed to a body node by summing over the origins naming it."""
    if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
        raise LoweringError(node.op_type, node.name, f"not a {C.DOMAIN}::{C.OP_TYPE} node")
    values = symbolic.values if symbolic is not None else {}
    lowerer = Lowerer(node, fn, initializers | {t: v[1] for t, v in values.items()}, types, model_opset, ir_version)
    lowerer.shape_values = {f: values[a][0] for f, a in lowerer.formal.items() if a in values}
    lowerer.ort_transposes = ort_transposes or {}
    if symbolic is None:
        return Lowered(lowerer.lower(), lowerer.origins)
    empty = _empty_symbolic_input(node, types, symbolic)
    if empty:
        raise LoweringError(
            node.op_type,
            node.name,
            f"input '{empty}' is empty at the given shape and its dims stay symbolic: an empty input is"
            " lowered as absent, which holds at that length only (fix the lengths with --freeze-shapes)",
        )
    second_known = initializers | {t: v[2] for t, v in values.items()}
    second = (node, symbolic.function, second_known, symbolic.second, model_opset, ir_version)
    with contextlib.suppress(LoweringError):  # else lower_symbolic refuses it, saying why
        at_second = Lowerer(*second)
        at_second.ort_transposes = lowerer.ort_transposes
        lowerer.set_second_binding(at_second)
    return Lowered(lower_symbolic(lowerer, second, symbolic), lowerer.origins)


_CONSTANT_ATTRS = {
    "value_int": (onnx.TensorProto.INT64, False),
    "value_ints": (onnx.TensorProto.INT64, True),
    "value_float": (onnx.TensorProto.FLOAT, False),
    "value_floats": (onnx.TensorProto.FLOAT, True),
}


def known_tensors(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The graph's initializers and its Constant nodes' values, by name: a pair may read a Constant
    the exporter shares with nodes outside the pair (torch's one `-1` for two Gathers' index)."""
    known: dict[str, onnx.TensorProto] = {}
    for n in graph.node:
        if n.op_type != "Constant" or n.domain not in ("", "ai.onnx") or len(n.attribute) != 1:
            continue
        a = n.attribute[0]
        if (
            a.name == "value"
            and a.type == onnx.AttributeProto.TENSOR
            and a.t.data_location != onnx.TensorProto.EXTERNAL
        ):
            known[n.output[0]] = a.t  # read by value only: its own name does not matter
        elif a.name in _CONSTANT_ATTRS:
            elem, is_list = _CONSTANT_ATTRS[a.name]
            value = helper.get_attribute_value(a)
            shape = [len(value)] if is_list else []
            known[n.output[0]] = helper.make_tensor(n.output[0], elem, shape, value if is_list else [value])
    known.update((t.name, t) for t in graph.initializer)
    return _with_quantized_constants(graph, known)


def _with_quantized_constants(
    graph: onnx.GraphProto, known: dict[str, onnx.TensorProto]
) -> dict[str, onnx.TensorProto]:
    """`known` and the value of each QuantizeLinear of known values (`quant.quantized`): quantize_static writes a
    Q -> DQ of the float where a weight is a Constant node (paddle2onnx's BatchNormalization scale), whose DQ
    a pair then reads as a constant."""
    for n in graph.node:
        if n.op_type != "QuantizeLinear" or n.output[0] in known or not all(t in known for t in n.input if t):
            continue
        value = quant.quantized(n, [numpy_helper.to_array(known[t]) for t in n.input if t])
        if value is not None:
            known[n.output[0]] = numpy_helper.from_array(value, n.output[0])
    return known


def _lower_in_model(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    shapes: ModelShapes | None,
    known: dict[str, onnx.TensorProto] | None = None,
    ort_transposes: dict[str, list[int]] | None = None,
) -> Lowered:
    if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
        raise LoweringError(node.op_type, node.name, f"not a {C.DOMAIN}::{C.OP_TYPE} node")
    fn = next(
        (f for f in model.functions if (f.domain, f.name, f.overload) == (node.domain, node.op_type, node.overload)),
        None,
    )
    if fn is None:
        raise LoweringError(node.op_type, node.name, f"no function body for overload '{node.overload}'")
    from ..kinds import KINDS  # the kinds lower through this package

    shapes = shapes or ModelShapes.of(model)
    inits = known if known is not None else known_tensors(model.graph)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    kind = KINDS.get(next((a.s.decode() for a in node.attribute if a.name == C.ATTR_KIND), ""))
    fn = shapes.typed(fn)
    fn = kind.program_function(node, fn, inits) if kind is not None else fn
    body, symbolic = shapes.symbolic(node, fn)
    return lower_function(node, body, inits, shapes.types(node), opset, model.ir_version, symbolic, ort_transposes)


def lower_pair(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    shapes: ModelShapes | None = None,
    known: dict[str, onnx.TensorProto] | None = None,
    ort_transposes: dict[str, list[int]] | None = None,
) -> bytes:
    """The task program bytes of one FusedHexPair node of a rewritten model (raises LoweringError);
    a model with symbolic input dims gets the v2 program the pass gave it (`lowering.rewritten`).
    `known`: the model's `known_tensors`, when many pairs are lowered; `ort_transposes`: as lower_function's."""
    return _lower_in_model(model, node, shapes, known, ort_transposes).program


def program_op_nodes(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    shapes: ModelShapes | None = None,
    known: dict[str, onnx.TensorProto] | None = None,
) -> list[OpOrigin]:
    """The origin of every op of the pair's task program, indexed like the program's ops: a node of
    the function the program is lowered from (`PairKind.program_function`), the pair's original
    graph nodes; micro-batch pairs: two renamed copies of the chain, their tensors suffixed as
    `kinds.microbatch.suffixes` says."""
    return _lower_in_model(model, node, shapes, known).origins


def program_op_maps(model: onnx.ModelProto) -> dict[str, list[OpOrigin]]:
    """`program_op_nodes` of every FusedHexPair node of the model that lowers, by node name
    (a pair that does not lower has no program, and is left out)."""
    shapes, known = ModelShapes.of(model), known_tensors(model.graph)
    maps: dict[str, list[OpOrigin]] = {}
    for node in model.graph.node:
        if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
            continue
        try:
            maps[node.name] = program_op_nodes(model, node, shapes, known)
        except LoweringError:
            continue
    return maps


def attach_programs(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy of a rewritten model with `program`/`program_version` set on every pair that lowers.

    Returns the model and {pair id: reason} for the pairs left without a program (they run by
    their fallback body even with the plugin loaded).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    shapes, known = ModelShapes.of(out), known_tensors(out.graph)
    failed: dict[str, str] = {}
    for node in out.graph.node:
        if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
            continue
        keep = [a for a in node.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
        del node.attribute[:]
        node.attribute.extend(keep)
        try:
            set_program(node, lower_pair(out, node, shapes, known))
        except LoweringError as exc:
            failed[node.overload or node.name] = exc.message
    _type_pair_outputs(out)
    return out, failed


def _type_pair_outputs(model: onnx.ModelProto) -> None:
    """Give the pair outputs the graph leaves untyped their element type (inferred through the body):
    ONNX Runtime infers nothing through the plugin's op, and refused to load with it a model whose
    micro-batch halves were untyped, as the first rewrites wrote them ('output arg (y__mb0) type
    inference failed'); the rewrite types them now (rewrite._type_pair_outputs)."""
    graph = model.graph
    typed = {v.name for v in [*graph.value_info, *graph.output] if v.type.tensor_type.elem_type}
    untyped = [t for n in graph.node if (n.domain, n.op_type) == (C.DOMAIN, C.OP_TYPE) for t in n.output]
    untyped = [t for t in untyped if t not in typed]
    if not untyped:
        return
    types = model_types(model)
    for t in untyped:
        elem = types[t].tensor_type.elem_type if t in types else 0
        if elem:
            graph.value_info.append(helper.make_value_info(t, helper.make_tensor_type_proto(elem, None)))


def set_program(node: onnx.NodeProto, program: bytes) -> None:
    """Give a FusedHexPair node its program attributes (`program_version`: the program's own)."""
    version = int.from_bytes(program[4:6], "little")
    node.attribute.extend(
        [
            helper.make_attribute(C.ATTR_PROGRAM, program),
            helper.make_attribute(C.ATTR_PROGRAM_VERSION, version),
        ]
    )


def _empty_symbolic_input(node: onnx.NodeProto, types: dict[str, onnx.TypeProto], symbolic: SymbolicInputs) -> str:
    """The first node input with a symbolic dim bound to 0 (a prefill's past at --shape ...x0x...), or ""."""
    for name, dims in zip(node.input, symbolic.dims):
        shape = types[name].tensor_type.shape.dim if name in types else []
        if any(isinstance(d, str) and s.dim_value == 0 and s.HasField("dim_value") for d, s in zip(dims, shape)):
            return name
    return ""
