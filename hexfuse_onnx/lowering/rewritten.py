"""The shapes a FusedHexPair of an already rewritten model is lowered at.

A model whose inputs have static dims: the types its tensors carry (or ONNX inference gives).
A model with symbolic input dims (the pass keeps them): its pairs were lowered at a representative
binding and proven at a second (`lowering.shapes`). Lowering them again takes the same route: the
model is unfused to the original graph and indexed as the pass indexes it (`graph.index_model`:
default binding, symbolic shapes of every tensor); each node's inputs and body tensors are typed
at that binding, and the program is proven at the first of `graph.other_bindings`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import onnx
from onnx import helper, shape_inference

from .. import contract as C
from .. import graph as graph_mod
from ..graph import Dim, ModelGraph, TensorInfo
from .registry import LoweringError
from .shapes import SymbolicInputs


@dataclass
class ModelShapes:
    """Types for lowering the pairs of one rewritten model; `g` is None when its inputs are static."""

    static_types: dict[str, onnx.TypeProto]
    g: ModelGraph | None = None
    second: graph_mod.ShapeBinding | None = None

    @classmethod
    def of(cls, model: onnx.ModelProto) -> ModelShapes:
        if not any(isinstance(d, str) for dims in graph_mod.input_dims(model).values() for d in dims):
            return cls(model_types(model))
        from ..rewrite import unfuse  # rewrite lowers through this package

        analysed, proven = recorded_bindings(model)
        g = graph_mod.index_model(unfuse(model), shape_overrides=analysed)
        assert g.source is not None
        second = _binding(g.source, proven) if proven else None
        return cls({}, g, second or graph_mod.other_bindings(g)[0])

    def types(self, node: onnx.NodeProto) -> dict[str, onnx.TypeProto]:
        """The node inputs' types: at the representative binding when the model is symbolic."""
        if self.g is None:
            return self.static_types
        return {t: self.g.info(t).type_proto() for t in node.input if self.g.info(t).elem_type}

    def symbolic(
        self, node: onnx.NodeProto, fn: onnx.FunctionProto
    ) -> tuple[onnx.FunctionProto, SymbolicInputs | None]:
        """The body typed at the representative binding, and what proves it at the second (None
        when every dim of the node's inputs is static)."""
        if self.g is None or self.second is None:
            return fn, None
        g, at_second = self.g, self.g.infos_at(self.second)
        dims: list[tuple[Dim, ...]] = []
        for t in node.input:
            shape = g.symbolic.get(t, g.info(t).shape)
            if shape is None:
                raise LoweringError(node.op_type, node.name, f"input '{t}' has no known rank")
            dims.append(tuple(shape))
        first = _typed(fn, g.infos)
        if all(isinstance(d, int) for shape in dims for d in shape):
            return first, None
        second_types = {t: at_second[t].type_proto() for t in node.input if t in at_second and at_second[t].elem_type}
        body: dict[str, tuple[Dim, ...]] = {}
        for t in (t for n in fn.node for t in n.output):
            symbolic = g.symbolic_dims(t)
            if symbolic is not None:
                body[t] = symbolic
        return first, SymbolicInputs(dims, second_types, body, _typed(fn, at_second))


def recorded_bindings(model: onnx.ModelProto) -> tuple[dict[str, list[int]] | None, dict[str, list[int]] | None]:
    """The input shapes the pass analysed and proved the programs at (C.METADATA_BINDINGS), if recorded."""
    text = next((p.value for p in model.metadata_props if p.key == C.METADATA_BINDINGS), None)
    if text is None:
        return None, None
    try:
        recorded = json.loads(text)
        return dict(recorded["analysed"]), dict(recorded["proven"])
    except (ValueError, KeyError, TypeError):
        return None, None  # not ours to refuse: lower at the default binding


def _binding(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> graph_mod.ShapeBinding | None:
    """The binding of these input shapes; None when they do not give every symbolic dim."""
    dims_of = graph_mod.input_dims(model)
    symbols = {
        d: shapes[name][axis]
        for name, dims in dims_of.items()
        if name in shapes and len(shapes[name]) == len(dims)
        for axis, d in enumerate(dims)
        if isinstance(d, str)
    }
    try:
        return graph_mod.bind(dims_of, symbols)
    except KeyError:
        return None


def _typed(fn: onnx.FunctionProto, infos: dict[str, TensorInfo]) -> onnx.FunctionProto:
    """A copy of the body whose value_info holds its tensors' types from `infos`."""
    out = onnx.FunctionProto()
    out.CopyFrom(fn)
    out.ClearField("value_info")
    for n in fn.node:
        out.value_info.extend(
            helper.make_value_info(t, infos[t].type_proto()) for t in n.output if t in infos and infos[t].elem_type
        )
    return out


def model_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Types of every graph tensor of a model file: inferred when the model does not carry them."""
    types = {}
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - fall back to what the model carries
        inferred = model
    for m in (model, inferred):
        g = m.graph
        for v in list(g.input) + list(g.value_info) + list(g.output):
            if v.type.tensor_type.elem_type and v.name not in types:
                types[v.name] = v.type
        for t in g.initializer:
            if t.name not in types:
                types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    return types
