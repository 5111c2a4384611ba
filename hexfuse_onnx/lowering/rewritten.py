"""The shapes a FusedHexPair of an already rewritten model is lowered at.

A model whose inputs have static dims: the types its tensors carry (or ONNX inference gives).
A model with symbolic input dims (the pass keeps them): its pairs were lowered at a representative
binding and proven at a second (`lowering.shapes`). Lowering them again takes the same route: the
model is unfused to the original graph and indexed as the pass indexes it (`graph.index_model`:
default binding, symbolic shapes of every tensor); each node's inputs and body tensors are typed
at that binding, and the program is proven at the first of `graph.other_bindings`. A micro-batch
pair reads parts of a tensor made by the Split the pass placed, which the unfused graph has not:
each takes its whole's dims, the split axis fixed to its rows (`split_parts`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import onnx
from onnx import helper, numpy_helper, shape_inference

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
    parts: dict[str, Part] = field(default_factory=dict)  # the model's micro-batch parts, which `g` has not

    @classmethod
    def of(cls, model: onnx.ModelProto) -> ModelShapes:
        if not any(isinstance(d, str) for dims in graph_mod.input_dims(model).values() for d in dims):
            return cls(model_types(model))
        from ..rewrite import unfuse  # rewrite lowers through this package

        analysed, proven = recorded_bindings(model)
        g = graph_mod.index_model(unfuse(model), shape_overrides=analysed)
        assert g.source is not None
        second = _binding(g.source, proven) if proven else None
        parts = split_parts(model, {t for n in g.nodes for t in n.output})
        return cls({}, g, second or graph_mod.other_bindings(g)[0], parts)

    def types(self, node: onnx.NodeProto) -> dict[str, onnx.TypeProto]:
        """The node inputs' types: at the representative binding when the model is symbolic."""
        if self.g is None:
            return self.static_types
        infos = {t: self._info(t, self.g.infos) for t in node.input}
        return {t: info.type_proto() for t, info in infos.items() if info.elem_type}

    def _info(self, t: str, infos: dict[str, TensorInfo]) -> TensorInfo:
        """A tensor's info in `infos` (a binding's); a micro-batch part's is its whole's, its rows fixed."""
        part = self.parts.get(t)
        if part is None:
            return infos.get(t) or TensorInfo(t, 0, None)
        whole = infos.get(part.whole) or TensorInfo(part.whole, 0, None)
        return TensorInfo(t, whole.elem_type, part.of(whole.shape))

    def _dims(self, t: str) -> tuple[Dim, ...] | None:
        """A tensor's symbolic dims; a micro-batch part's, its whole's with its rows fixed."""
        assert self.g is not None
        part = self.parts.get(t)
        name = t if part is None else part.whole
        dims = self.g.symbolic.get(name, self.g.info(name).shape)
        return dims if part is None else part.of(dims)

    def typed(self, fn: onnx.FunctionProto) -> onnx.FunctionProto:
        """The written body typed at the representative binding, as the pass had it when it derived
        the program's function (`PairKind.program_function`): the file's holds static dims only, and
        a micro-batch pair's copies take their types from it."""
        return fn if self.g is None else _typed(fn, self.g.infos)

    def symbolic(
        self, node: onnx.NodeProto, fn: onnx.FunctionProto
    ) -> tuple[onnx.FunctionProto, SymbolicInputs | None]:
        """`fn` (derived from the `typed` body) and what proves it at the second binding (None
        when every dim of the node's inputs is static)."""
        if self.g is None or self.second is None:
            return fn, None
        g, at_second = self.g, self.g.infos_at(self.second)
        dims: list[tuple[Dim, ...]] = []
        for t in node.input:
            shape = self._dims(t)
            if shape is None:
                raise LoweringError(node.op_type, node.name, f"input '{t}' has no known rank")
            dims.append(tuple(shape))
        if all(isinstance(d, int) for shape in dims for d in shape):
            return fn, None
        infos = {t: self._info(t, at_second) for t in node.input}
        second_types = {t: info.type_proto() for t, info in infos.items() if info.elem_type}
        body: dict[str, tuple[Dim, ...]] = {}
        for t in (t for n in fn.node for t in n.output):
            symbolic = g.symbolic_dims(t)
            if symbolic is not None:
                body[t] = symbolic
        return fn, SymbolicInputs(dims, second_types, body, _typed(fn, at_second))


@dataclass(frozen=True)
class Part:
    """A micro-batch part: `rows` of tensor `whole` along `axis` (the Split before a pair)."""

    whole: str
    axis: int
    rows: int

    def of(self, dims: tuple[Dim, ...] | None) -> tuple[Dim, ...] | None:
        """The whole's dims with the split axis fixed to the part's rows."""
        return None if dims is None else tuple(self.rows if k == self.axis else d for k, d in enumerate(dims))


def split_parts(model: onnx.ModelProto, original: set[str]) -> dict[str, Part]:
    """The parts the model's Splits make that are no tensor of the original graph (`original`):
    the micro-batch Splits the pass placed before its pairs, with their sizes as written."""
    from . import known_tensors

    known = known_tensors(model.graph)
    parts: dict[str, Part] = {}
    for n in model.graph.node:
        if n.op_type != "Split" or n.domain not in ("", "ai.onnx") or not set(n.output) - original:
            continue
        sizes = graph_mod.attribute(n, "split")
        if sizes is None and len(n.input) > 1 and n.input[1] in known:
            sizes = numpy_helper.to_array(known[n.input[1]]).tolist()
        if sizes is not None and len(sizes) == len(n.output):
            axis = int(graph_mod.attribute(n, "axis", 0))
            parts.update((t, Part(n.input[0], axis, int(rows))) for t, rows in zip(n.output, sizes))
    return parts


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
