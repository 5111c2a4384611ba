"""The shape section of a pair whose inputs have symbolic dims, and the safety net that proves it.

The program is lowered at the representative binding. Every symbolic dim of a node input is a
symbol (program format v2: symbol k = dim `axis` of node input `io_index`). The body is given
to ORT's symbolic shape inference with those dims named `s0, s1, ...`, which gives every body
tensor's dims as expressions of the symbols; each program tensor dim whose expression is not a
constant gets a TENSOR_DIM patch. The pads of an auto_pad SAME_* Conv or pooling op with a
stride get OP_PARAM patches (its input side's expression through `spatial.pads_2d`'s rule), and so
does a param that is an offset plus the op's output dim (a Slice end that follows the shapes);
nothing else is patched, so any other param that follows the shapes has no expression.

Safety net: the pair is lowered again at a second binding, and the first program specialized
(`program.specialize`, the kernel's reference) to the second program's input dims must equal it
byte for byte. Any difference refuses the pair, naming the op or tensor that differs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from dataclasses import dataclass, field
from enum import IntEnum

import onnx
import sympy
from onnx import helper

from .. import shape_expr
from ..graph import Dim, _run_symbolic_inference, _tensor_info
from ..nested import holds_graphs
from ..shape_expr import Patch, ShapeExprError, Symbol, Target
from . import traced
from .abi import (
    ArgParam,
    ClipParam,
    ConvParam,
    GemmParam,
    HardSigmoidParam,
    Opcode,
    PoolParam,
    ReduceParam,
    ReplaceNanParam,
    ResizeParam,
    Role,
    SliceParam,
)
from .lowerer import Lowerer, str_attr
from .program import Op, layout_of, locate, specialize, tensor_records
from .registry import LoweringError


@dataclass(frozen=True)
class SymbolicInputs:
    """What a pair over symbolic dims is lowered from besides its representative types: each node
    input's symbolic dims (ints, dim strings, None where unknown) and its type at a second binding."""

    dims: list[tuple[Dim, ...]]
    second: dict[str, onnx.TypeProto]
    model_dims: dict[str, tuple[Dim, ...]]  # body tensors' symbolic dims in the whole model (a fallback)
    function: onnx.FunctionProto  # the body with its value_info at the second binding
    # node input -> its value computed from the shapes outside the pair (shape_values): as expressions of the
    # model's dim names, and at the representative and the second binding
    values: dict[str, tuple[tuple[sympy.Expr, ...], onnx.TensorProto, onnx.TensorProto]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Symbols:
    names: list[list[str | None]]  # per node input and axis: the body's dim name, None when static
    section: list[Symbol]  # one per symbolic (io_index, axis), in order
    index: dict[str, int]  # body dim name -> the first symbol carrying it
    renames: dict[str, str]  # a node input dim that is a lone model symbol ('height') -> its body name


def lower_symbolic(first: Lowerer, second_args: tuple, sym: SymbolicInputs) -> bytes:
    """The v2 program of `first` (a Lowerer at the representative types, not yet lowered),
    proven against a lowering at the second binding (`Lowerer(*second_args)`)."""
    first.lower()
    symbols = _symbols(sym.dims)
    body = _merged(_body_dims(first, symbols), _model_dims(sym.model_dims, symbols), symbols)
    patches, notes = _patches(first, body, symbols)
    try:
        section = shape_expr.encode_section(symbols.section, patches)
    except ShapeExprError as exc:
        raise _refuse(first, f"its shape section cannot be encoded: {exc}") from None
    return _proven(first, second_args, section, notes)


def _proven(first: Lowerer, second_args: tuple, section: bytes, notes: dict[tuple[int, int], str]) -> bytes:
    """The v2 program, once its specialization to the second binding equals the lowering there."""
    try:
        second = Lowerer(*second_args)
        second.varying, second.shape_values = first.varying, first.shape_values
        second.ort_transposes = first.ort_transposes
        second.check_arena = False  # the kernel runs the tasks one after the other where they do not fit
        second.lower()
    except LoweringError as exc:
        raise _refuse(first, f"does not lower at a second shape: {exc.message}") from None
    template, expected = first.prog.encode(section), second.prog.encode(section)
    inputs = [dims for role, _, dims in sorted(tensor_records(expected), key=lambda r: r[1]) if role == Role.INPUT]
    try:
        got = specialize(template, inputs)
    except ShapeExprError as exc:
        raise _refuse(first, f"its shape section fails at a second shape: {exc}") from None
    if got != expected:
        raise _refuse(first, _difference(first, got, expected, notes))
    return template


def _refuse(lowerer: Lowerer, why: str) -> LoweringError:
    return LoweringError(lowerer.node.op_type, lowerer.pair, why)


def _symbols(dims: list[tuple[Dim, ...]]) -> _Symbols:
    """Name every symbolic input dim: equal dim strings share a name, unknown dims get their own."""
    by_text: dict[str, str] = {}
    names: list[list[str | None]] = []
    section: list[Symbol] = []
    index: dict[str, int] = {}
    renames: dict[str, str] = {}
    for io, shape in enumerate(dims):
        row: list[str | None] = []
        for axis, d in enumerate(shape):
            if isinstance(d, int):
                row.append(None)
                continue
            name = by_text.setdefault(d, f"hfx_s{len(by_text)}") if d is not None else f"hfx_u{io}_{axis}"
            index.setdefault(name, len(section))
            section.append(Symbol(name, io, axis))
            row.append(name)
            if d is not None and isinstance(_parse(d), sympy.Symbol):
                renames.setdefault(d, name)
        names.append(row)
    return _Symbols(names, section, index, renames)


def _body_dims(lowerer: Lowerer, symbols: _Symbols) -> dict[str, list[int | sympy.Expr | None]]:
    """Every body tensor's dims from ORT's symbolic inference over the symbols (None: unknown)."""
    types = {}
    for io, f in enumerate(lowerer.fn.input):
        elem = lowerer.types[f].tensor_type.elem_type
        concrete = [d.dim_value for d in lowerer.types[f].tensor_type.shape.dim]
        dims = [name or concrete[axis] for axis, name in enumerate(symbols.names[io])]
        types[f] = helper.make_tensor_type_proto(elem, dims)
    model = lowerer.body_model(types, lowerer.ir_version)
    canonical, names = _canonical(model)
    if canonical is None:
        return _inferred(model)
    key = hashlib.sha256(canonical.SerializeToString(deterministic=True)).digest()
    if key not in _INFERRED:
        if len(_INFERRED) >= INFERRED_KEPT:
            del _INFERRED[next(iter(_INFERRED))]
        _INFERRED[key] = _inferred(canonical)
    return {names[t]: list(dims) for t, dims in _INFERRED[key].items() if t in names}


# ORT's inference of a body, by the body with its tensors renamed (`_canonical`): the same body in another
# layer or pair is inferred once (moonshine_tiny_decoder at 0 us: 165 inferences of 59 bodies, 6 s)
_INFERRED: dict[bytes, dict[str, list[int | sympy.Expr | None]]] = {}
INFERRED_KEPT = 4096


def _inferred(model: onnx.ModelProto) -> dict[str, list[int | sympy.Expr | None]]:
    inferred = _run_symbolic_inference(model, exact_slices=True)
    if inferred is None:
        return {}
    g = inferred.graph
    out: dict[str, list[int | sympy.Expr | None]] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        shape = _tensor_info(vi).shape
        if shape is not None:
            out[vi.name] = [_parse(d) for d in shape]
    return out


def _canonical(model: onnx.ModelProto) -> tuple[onnx.ModelProto | None, dict[str, str]]:
    """A copy of a body model with its tensors named t0, t1, ... in order of first use and its nodes n0, n1,
    ... (ORT's inference names what it invents by op type and node index, not by name), and the map back from
    the new names; (None, {}) for a body holding a subgraph, whose names it does not rename."""
    if any(holds_graphs(n) for n in model.graph.node):
        return None, {}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    new: dict[str, str] = {"": ""}
    rename = lambda t: new.setdefault(t, f"t{len(new) - 1}")  # noqa: E731
    for v in g.input:
        v.name = rename(v.name)
    for t in g.initializer:
        t.name = rename(t.name)
    for k, n in enumerate(g.node):
        n.name = f"n{k}"
        n.input[:] = [rename(t) for t in n.input]
        n.output[:] = [rename(t) for t in n.output]
    for v in [*g.value_info, *g.output]:
        v.name = rename(v.name)
    return out, {c: t for t, c in new.items() if t}


def _merged(
    body: dict[str, list[int | sympy.Expr | None]],
    model: dict[str, list[int | sympy.Expr | None]],
    symbols: _Symbols,
) -> dict[str, list[int | sympy.Expr | None]]:
    """Each tensor's dims from the body's inference, where a dim names a symbol the pair's inputs
    do not carry (ORT invents one for a Reshape to a shape computed outside the body,
    'Reshape_1_o0__d0') or is unknown, from the whole model's inference (of the input dims)."""
    out = dict(model)
    for name, dims in body.items():
        whole = model.get(name)
        if whole is None or len(whole) != len(dims):
            out[name] = dims
            continue
        out[name] = [b if _expressible(b, symbols) or w is None else w for b, w in zip(dims, whole)]
    return out


def _expressible(d: int | sympy.Expr | None, symbols: _Symbols) -> bool:
    return isinstance(d, int) or (d is not None and shape_expr.free_names(d) <= set(symbols.index))


def _model_dims(model_dims: dict[str, tuple[Dim, ...]], symbols: _Symbols) -> dict[str, list[int | sympy.Expr | None]]:
    """Body tensors' dims from the whole model's symbolic shapes, where every name in them is a
    node input dim (used where ORT's inference of the body alone fails)."""
    subs = {sympy.Symbol(k, integer=True): sympy.Symbol(v, integer=True) for k, v in symbols.renames.items()}
    out: dict[str, list[int | sympy.Expr | None]] = {}
    for name, shape in model_dims.items():
        dims: list[int | sympy.Expr | None] = []
        for d in shape:
            expr = _parse(d)
            if isinstance(expr, sympy.Expr):
                expr = expr.xreplace(subs)
                expr = expr if shape_expr.free_names(expr) <= set(symbols.index) else None
            dims.append(expr)
        out[name] = dims
    return out


def _parse(d: Dim) -> int | sympy.Expr | None:
    if d is None or isinstance(d, int):
        return d
    try:
        return shape_expr.parse_dim(d)
    except ShapeExprError:
        return None


def _patches(
    lowerer: Lowerer, body: dict[str, list[int | sympy.Expr | None]], symbols: _Symbols
) -> tuple[list[Patch], dict[tuple[int, int], str]]:
    """TENSOR_DIM patches of every program tensor dim with a non-constant expression; notes say
    why a dim got none (read only if the safety net finds that dim varies)."""
    patches: list[Patch] = []
    notes: dict[tuple[int, int], str] = {}
    for k, s in enumerate(symbols.section):  # an input dim: a lone SYM of its own symbol
        tid = _input_id(lowerer, s.io_index)
        patches.append(Patch(Target.TENSOR_DIM, tid, s.axis, (int(shape_expr.Code.SYM) | (k << 8),)))
    values = _representative_values(lowerer, symbols)
    for tid, t in enumerate(lowerer.prog.tensors):
        if t.role in (Role.INPUT, Role.CONSTANT):
            continue
        exprs = _tensor_exprs(lowerer, tid, body, symbols)
        if exprs is None or len(exprs) != len(t.dims):
            notes.update({(tid, axis): "its shape has no expression" for axis in range(len(t.dims))})
            continue
        for axis, (expr, stored) in enumerate(zip(exprs, t.dims)):
            patch, note = _dim_patch(tid, axis, expr, stored, symbols, values)
            if patch is not None:
                patches.append(patch)
            elif note:
                notes[(tid, axis)] = note
    patches += _same_pad_patches(lowerer, body, symbols, values)
    patches += _output_param_patches(lowerer, body, symbols, values)
    return patches, notes


def _output_param_patches(
    lowerer: Lowerer, body: dict[str, list[int | sympy.Expr | None]], symbols: _Symbols, values: list[int]
) -> list[Patch]:
    """OP_PARAM patches of the params that are another param plus the op's output dim (`Lowerer.output_params`: a
    Slice end known only at run time, its start plus the output's length), where that dim has an expression, and
    of the params that are a value computed from the shapes outside the pair (`Lowerer.value_params`: a Slice start
    from a decode step's past length); else the safety net refuses what varies."""
    index = tuple(sorted(symbols.index.items()))
    patches: list[Patch] = []
    for k, op in enumerate(lowerer.prog.ops):
        exprs = (_tensor_exprs(lowerer, op.output, body, symbols) if k in lowerer.output_params else None) or []
        for slot, words in _param_words(lowerer, k, exprs, symbols, index).items():
            try:
                if shape_expr.run(list(words), values) == op.params[slot]:
                    patches.append(Patch(Target.OP_PARAM, k, slot, words))
            except ShapeExprError:
                continue
    return patches


def _param_words(
    lowerer: Lowerer, k: int, exprs: list[int | sympy.Expr | None], symbols: _Symbols, index: tuple
) -> dict[int, tuple[int, ...]]:
    """The words of op k's params that follow the shapes, by slot: a value's (`Lowerer.value_params`), and an
    output dim (`exprs`: the op's output dims) plus the param at the offset slot, its value's words or constant."""
    op, follows = lowerer.prog.ops[k], lowerer.value_params.get(k, {})
    words: dict[int, tuple[int, ...]] = {}
    for slot, of in follows.items():
        expr = _value_expr(lowerer, symbols, *of)
        if expr is not None:
            with contextlib.suppress(ShapeExprError):
                words[slot] = _words(expr, index)
    for slot, axis, offset in lowerer.output_params.get(k, []):
        dim = exprs[axis] if axis < len(exprs) else None
        start = words.get(offset) if offset in follows else (shape_expr.Code.CONST, op.params[offset])
        if isinstance(dim, sympy.Expr) and start is not None and not (dim.is_Integer and offset not in follows):
            with contextlib.suppress(ShapeExprError):
                words[slot] = (*_words(dim, index), *start, shape_expr.Code.ADD)
    return words


def _value_expr(lowerer: Lowerer, symbols: _Symbols, formal: str, element: int) -> sympy.Expr | None:
    """Element `element` of a formal input's value (`Lowerer.shape_values`) over the pair's symbols, None where it
    names a dim no node input carries as its own."""
    expr = lowerer.shape_values[formal][element]
    names = {d: symbols.renames.get(d.name) for d in expr.free_symbols}
    if any(v is None for v in names.values()):
        return None
    return expr.xreplace({d: sympy.Symbol(v, integer=True) for d, v in names.items() if v is not None})


def _tensor_exprs(
    lowerer: Lowerer, tid: int, body: dict[str, list[int | sympy.Expr | None]], symbols: _Symbols
) -> list[int | sympy.Expr | None] | None:
    """Program tensor `tid`'s dims as expressions of the symbols: a body tensor's from the body,
    a scratch tensor's from the dims it was computed from (traced.py: an input's own symbols), else
    from its node's tensors."""
    name = tensor_name(lowerer, tid)
    if name:
        return body.get(name)
    dims = lowerer.prog.tensors[tid].dims
    if not traced.is_traced(dims):
        return _scratch_exprs(lowerer, tid, body)

    def axis_expr(source: int, axis: int) -> sympy.Expr | int | None:
        t = lowerer.prog.tensors[source]
        if t.role == Role.CONSTANT:
            return int(t.dims[axis])
        if t.role == Role.INPUT:
            name = symbols.names[t.io][axis]
            return sympy.Symbol(name, integer=True) if name else int(t.dims[axis])
        exprs = _tensor_exprs(lowerer, source, body, symbols) if source != tid else None
        return exprs[axis] if exprs is not None and axis < len(exprs) else None

    return [traced.resolve(traced.expr_of(d), axis_expr) for d in dims]


def _scratch_exprs(
    lowerer: Lowerer, tid: int, body: dict[str, list[int | sympy.Expr | None]]
) -> list[int | sympy.Expr | None] | None:
    """A scratch tensor's dims as expressions of the body tensor it derives from: the first output,
    then input, of the node whose lowering made it whose dims it holds, axis by axis, with extra
    size-1 axes (a 1-D op lifted to 2-D) or axes cut to 1 (a Gather) as constants."""
    k = lowerer.scratch_node.get(tid)
    if k is None:
        return None
    node, dims = lowerer.fn.node[k], lowerer.prog.tensors[tid].dims
    for name in [*node.output, *node.input]:
        t = lowerer.types.get(name)
        exprs = body.get(name)
        if t is None or exprs is None or not t.tensor_type.HasField("shape"):
            continue
        concrete = [d.dim_value if d.HasField("dim_value") else -1 for d in t.tensor_type.shape.dim]
        aligned = _aligned(dims, concrete, exprs) if len(concrete) == len(exprs) else None
        if aligned is not None:
            return aligned
    return None


def _aligned(
    dims: list[int], source: list[int], exprs: list[int | sympy.Expr | None]
) -> list[int | sympy.Expr | None] | None:
    """`dims` as `source`'s axes in order (their expressions), where every dim not taken from
    `source` is 1; None when no such alignment exists."""
    if not dims:
        return [] if not source else None
    if len(dims) == len(source) and all(d == s or d == 1 for d, s in zip(dims, source)):
        return [e if d == s else 1 for d, s, e in zip(dims, source, exprs)]
    if source and dims[0] == source[0]:
        rest = _aligned(dims[1:], source[1:], exprs[1:])
        if rest is not None:
            return [exprs[0], *rest]
    if dims[0] == 1 and len(dims) > len(source):
        rest = _aligned(dims[1:], source, exprs)
        if rest is not None:
            return [1, *rest]
    return None


def _dim_patch(
    tid: int, axis: int, expr: int | sympy.Expr | None, stored: int, symbols: _Symbols, values: list[int]
) -> tuple[Patch | None, str]:
    if expr is None:
        return None, "its shape inference gave no expression"
    if isinstance(expr, int) or expr.is_Integer:
        return None, ""
    try:
        words = list(_words(expr, tuple(sorted(symbols.index.items()))))
        value = shape_expr.run(words, values)
    except ShapeExprError as exc:
        return None, str(exc)
    if value != stored:
        return None, f"its expression '{expr}' gives {value}, the program holds {stored}"
    return Patch(Target.TENSOR_DIM, tid, axis, tuple(words)), ""


def _same_pad_patches(
    lowerer: Lowerer, body: dict[str, list[int | sympy.Expr | None]], symbols: _Symbols, values: list[int]
) -> list[Patch]:
    """OP_PARAM patches of the pads of each op of an auto_pad SAME_* node along a side that follows the
    symbols: `spatial.pads_2d`'s rule at the side the kernel runs at. Fixed at the representative side (a
    multiple of 32), a 3x3 stride-2 SAME Conv computed floor(x/2) rows at odd sides, where ONNX Runtime
    computes ceil(x/2). A side without an expression gets none: the safety net refuses what then varies."""
    index = tuple(sorted(symbols.index.items()))
    patches: list[Patch] = []
    for k, n in lowerer.same_pads.items():
        sides = body.get(n.input[0])
        if sides is None or len(sides) not in (3, 4):
            continue
        extra = lowerer.folded.get(n.input[0], ("", [0, 0, 0, 0]))[1]  # a Pad folded into a Conv adds its own
        if len(sides) == 3:  # 1-D as 2-D with H = 1
            sides, extra = [*sides[:2], 1, sides[2]], [0, extra[0], 0, extra[1]]
        for axis, side in enumerate(sides[2:]):
            if isinstance(side, sympy.Expr) and not side.is_Integer:
                try:
                    patches += _axis_pads(lowerer, k, axis, list(_words(side, index)), extra, values)
                except ShapeExprError:
                    continue
    return patches


def _axis_pads(
    lowerer: Lowerer, k: int, axis: int, side: list[int], extra: list[int], values: list[int]
) -> list[Patch]:
    """The patches of op k's pads along `axis` (0: H, 1: W) over a side of words `side`, where they vary."""
    op, n = lowerer.prog.ops[k], lowerer.same_pads[k]
    stride, dil = op.params[ConvParam.STRIDE_H + axis], op.params[ConvParam.DILATION_H + axis]
    if stride == 1:  # the pads are the window's extent less one at any side
        return []
    extent = (_window(lowerer, op)[axis] - 1) * dil + 1
    pads = shape_expr.same_pads(side, stride, extent, str_attr(n, "auto_pad", "NOTSET") == "SAME_UPPER")
    out = []
    for slot, words in zip((ConvParam.PAD_TOP + axis, ConvParam.PAD_BOTTOM + axis), pads):
        words += [shape_expr.Code.CONST, extra[slot], shape_expr.Code.ADD] if extra[slot] else []
        if shape_expr.run(words, values) == op.params[slot]:
            out.append(Patch(Target.OP_PARAM, k, slot, tuple(words)))
    return out


def _window(lowerer: Lowerer, op: Op) -> list[int]:
    """[kh, kw] of a WINDOWED op: a pooling op's params, a convolution's weight (its input 1) dims."""
    if op.opcode in (Opcode.MAXPOOL, Opcode.AVGPOOL, Opcode.QMAXPOOL, Opcode.QAVGPOOL):
        return [op.params[PoolParam.KERNEL_H], op.params[PoolParam.KERNEL_W]]
    return [int(d) for d in lowerer.prog.tensors[op.inputs[1]].dims[-2:]]


@functools.lru_cache(maxsize=4096)
def _words(expr: sympy.Expr, index: tuple[tuple[str, int], ...]) -> tuple[int, ...]:
    """shape_expr.compile_expr of the dim clamped at zero, once per expression and numbering of the
    symbols: sympy's together and fraction of each took half of colocate ppocr_det x2's lowering
    (3306 dims, 34 s of 69 s)."""
    return tuple(shape_expr.compile_expr(_at_least_zero(expr), dict(index)))


@functools.lru_cache(maxsize=4096)
def _at_least_zero(expr: sympy.Expr) -> sympy.Expr:
    """A dim as ORT's symbolic inference writes it, clamped at 0 where it can be negative for some
    input dims: its Slice rule assumes a non-empty result (MarbleNet's x[..., :-1] is 'audio_len - 1',
    -1 on an empty input, where ORT's Slice makes 0 and the kernel refused the whole program). Cached:
    a pair's tensors share few dims, and sympy's sign and Max of each took most of ppocrv6_det_tiny's
    lowering (889 calls)."""
    dims = {s: sympy.Symbol(s.name, integer=True, nonnegative=True) for s in expr.free_symbols}
    if expr.xreplace(dims).is_nonnegative:
        return expr
    return sympy.Max(0, expr)


def _representative_values(lowerer: Lowerer, symbols: _Symbols) -> list[int]:
    return [lowerer.prog.tensors[_input_id(lowerer, s.io_index)].dims[s.axis] for s in symbols.section]


def _input_id(lowerer: Lowerer, io: int) -> int:
    return lowerer.ids[lowerer.fn.input[io]]


def tensor_name(lowerer: Lowerer, tid: int) -> str | None:
    """The body tensor a program tensor holds (inputs and outputs by io index)."""
    t = lowerer.prog.tensors[tid]
    if t.role == Role.INPUT:
        return lowerer.fn.input[t.io]
    if t.role == Role.OUTPUT:
        return lowerer.fn.output[t.io]
    return next((n for n, i in lowerer.ids.items() if i == tid), None)


def _unnamed(lowerer: Lowerer, tid: int) -> str:
    """A program tensor that holds no body tensor, named by the node whose lowering made it."""
    k = lowerer.scratch_node.get(tid)
    if k is None:
        return f"#{tid}"
    node = lowerer.fn.node[k]
    return f"#{tid}, a scratch tensor of {node.op_type} '{node.name or node.output[0]}'"


def _difference(lowerer: Lowerer, got: bytes, expected: bytes, notes: dict[tuple[int, int], str]) -> str:
    """Why the specialized program differs from the one lowered at the second shape."""
    if len(got) != len(expected) or layout_of(got) != layout_of(expected):
        return "its program's layout depends on the input shape"
    offset = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
    part, index, field = locate(expected, offset)
    if part == "tensor":
        name = tensor_name(lowerer, index) or _unnamed(lowerer, index)
        note = notes.get((index, field), "")
        return f"tensor '{name}' dim {field} depends on the input shape and has no expression" + (
            f" ({note})" if note else ""
        )
    if part == "op":
        o = lowerer.origins[index]
        where = _param_name(lowerer.prog.ops[index].opcode, field) if field >= 0 else "record"
        return f"{o.op_type} '{o.node or o.output}' {where} depends on the input shape and has no expression"
    if part == "data":
        return "a constant's data depends on the input shape"
    return f"its program's {part} depends on the input shape"


_PARAMS: dict[Opcode, type[IntEnum]] = {
    Opcode.GEMM: GemmParam,
    Opcode.CONV2D: ConvParam,
    Opcode.MAXPOOL: PoolParam,
    Opcode.AVGPOOL: PoolParam,
    Opcode.RESIZE: ResizeParam,
    Opcode.SLICE: SliceParam,
    Opcode.REDUCE_MEAN: ReduceParam,
    Opcode.REDUCE_SUM: ReduceParam,
    Opcode.REDUCE_MAX: ReduceParam,
    Opcode.REDUCE_MIN: ReduceParam,
    Opcode.ARGMAX: ArgParam,
    Opcode.ARGMIN: ArgParam,
    Opcode.HARDSIGMOID: HardSigmoidParam,
    Opcode.CLIP: ClipParam,
    Opcode.REPLACE_NAN: ReplaceNanParam,
}


def _param_name(opcode: int, slot: int) -> str:
    """'param SCALE_H' (a slot of an array param: 'param STARTS[2]'), or 'param 7'."""
    enum = _PARAMS.get(Opcode(opcode)) if opcode in Opcode._value2member_map_ else None
    below = [m for m in enum or () if m.value <= slot]
    if not below:
        return f"param {slot}"
    m = max(below, key=lambda m: m.value)
    return f"param {m.name}" + (f"[{slot - m.value}]" if slot > m.value else "")
