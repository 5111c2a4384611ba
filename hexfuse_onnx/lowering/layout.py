"""Data movement: Transpose, DepthToSpace and SpaceToDepth, Concat, Slice, Split, Gather (a constant index or
range), the reshape family, Expand (a MUL by ones on the vector engine; an EXPAND of integers, or along an axis that
follows the shapes), Trilu; fills: ConstantOfShape (an EXPAND of its value), Range; and Constant, which emits no op
(its value becomes a program constant or steers another op's parameters)."""

from __future__ import annotations

import numpy as np
import onnx
import sympy
from onnx import numpy_helper

from ..profile import Engine as EngineClass
from .abi import Dtype, Layout, Opcode, Param, SliceParam, Task, TriluParam
from .lowerer import DTYPES, Lowerer, attr
from .registry import LoweringError, lowers
from .traced import traced_dims

INT32_MAX = 2**31 - 1
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
MOVED_INTEGERS = (Dtype.I32, Dtype.I64, Dtype.BOOL)  # data a constant-index Gather off axis 0 or a Slice moves as it is


@lowers("Constant")
def constant(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    value = attr(n, "value")
    if value is None:
        raise LoweringError(n.op_type, n.name, "only the 'value' form of Constant is supported")
    array = numpy_helper.to_array(value)  # float16 becomes float32, exactly: the program computes in it
    cx.static[n.output[0]] = array.astype(np.float32) if array.dtype == np.float16 else array


@lowers("Shape", "Size")
def shape_arithmetic(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Folded by the Lowerer when every input is known (Shape, Size: when its input's shape is)."""
    raise LoweringError(n.op_type, n.name, "runs only as shape arithmetic on values known when lowering")


@lowers("ConstantOfShape")
def constant_of_shape(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """An EXPAND of its value (float 0 when not given) to the output's dims: the shape section makes them follow
    the input shapes (an LSTM's zero state [2, batch, hidden] from Shape -> Gather -> Concat of the input), which
    a constant's cannot. An integer fill of a shape known when lowering is folded instead (Lowerer._folds)."""
    value = attr(n, "value")
    fill = numpy_helper.to_array(value).reshape(()) if value is not None else np.zeros((), np.float32)
    dtype = DTYPES.get(cx.dtype(n.output[0]))
    if dtype is None:
        raise LoweringError(n.op_type, n.name, f"a fill of {fill.dtype} is not carried by the task program")
    value_id = cx.shared_constant(fill, t, dtype)  # float16 computes in float32, exactly
    # on the copy engine: the profile counts no work for it (NO_COST_OPS), a state of a few KiB
    cx.emit(n, t, Opcode.EXPAND, [value_id], engine=EngineClass.MEMORY, out_dtype=dtype)


@lowers("Range")
def range_(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A RANGE of its start and delta (constants, or read at run time); its length is the output's, which the
    shape section makes follow the input shapes (Range(0, seq, 1): a rotary embedding's positions), so the limit
    is not read. A Range of constants whose length does not follow the shapes is folded (Lowerer._folds)."""
    dtype = DTYPES.get(cx.dtype(n.output[0]))
    if dtype not in (Dtype.F32, Dtype.I32, Dtype.I64) or cx.stored_dtype(n.output[0]) == onnx.TensorProto.FLOAT16:
        kind = onnx.TensorProto.DataType.Name(cx.stored_dtype(n.output[0]))
        raise LoweringError(n.op_type, n.name, f"a Range of {kind}: only float, int32 and int64")
    start, delta = (cx.read_typed(n.input[k], n, t, dtype) for k in (0, 2))
    cx.emit(n, t, Opcode.RANGE, [start, delta], out_dtype=dtype)


@lowers("Trilu")
def trilu(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A TRILU of data of any type the program holds (a causal mask's -inf above the diagonal), the diagonal k a
    constant (0 when not given)."""
    k = cx.const_ints(n.input[1], n) if len(n.input) > 1 and n.input[1] else [0]
    x, dtype = cx.read_any(n.input[0], n, t)
    params = {TriluParam.K: _clamp(k[0]), TriluParam.UPPER: int(attr(n, "upper", 1))}
    cx.emit(n, t, Opcode.TRILU, [x], params, out_dtype=dtype)


@lowers(*RESHAPES)
def reshape(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A real copy: the kernel has no aliasing view, the output gets its own buffer. A Reshape of
    a tensor to its own Shape (rewrite's way of hiding a length from ONNX Runtime's inference) is
    the same tensor: no op, unless it is a pair output."""
    if n.op_type == "Reshape" and _to_own_shape(cx, n):
        same_tensor(cx, n, t)
        return
    x, dtype = cx.read_any(n.input[0], n, t)  # any type: the bias chain's int32 Reshape
    cx.emit(n, t, Opcode.COPY, [x], out_dtype=dtype)


def same_tensor(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """`n`'s output is its input unchanged: no op, unless it is a pair output (which needs its own buffer)."""
    x, dtype = cx.read_any(n.input[0], n, t)
    if n.output[0] in cx.out_index:
        cx.emit(n, t, Opcode.COPY, [x], out_dtype=dtype)
        return
    cx.ids[n.output[0]] = x
    cx.task_of[n.output[0]] = t


def _to_own_shape(cx: Lowerer, n: onnx.NodeProto) -> bool:
    made_by = next((b for b in cx.fn.node if n.input[1] in b.output), None)
    return (
        made_by is not None
        and made_by.op_type == "Shape"
        and list(made_by.input) == [n.input[0]]
        and not made_by.attribute
    )


@lowers("Transpose")
def transpose(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    rank = len(cx.shape(n.input[0], n))
    perm = list(attr(n, "perm", list(range(rank))[::-1]))
    params = {Param.PERM + i: p for i, p in enumerate(perm)}
    x, dtype = _read_moved(cx, n, t)
    cx.emit(n, t, Opcode.TRANSPOSE, [x], params, out_dtype=dtype)


def _read_moved(cx: Lowerer, n: onnx.NodeProto, t: Task, wider: tuple[Dtype, ...] = ()) -> tuple[int, Dtype]:
    """The input of a TRANSPOSE or SLICE: float32, the 8/16-bit integers of a QDQ group's data
    movement (qeltwise._move), bools (a comparison's mask), or a type of `wider` (a Slice's int64 positions)."""
    dtype = DTYPES.get(cx.dtype(n.input[0]))
    if dtype in (Dtype.U8, Dtype.I8, Dtype.U16, Dtype.I16, Dtype.BOOL, *wider):
        return cx.read_typed(n.input[0], n, t, dtype), dtype
    return cx.read(n.input[0], n, t), Dtype.F32


def _depth_space_view(op: str, mode: str, dims: list[int], b: int) -> tuple[list[int], list[int]]:
    """The 6-D view of the input the ONNX definition reshapes to, and its permutation."""
    n, c, h, w = dims
    if op == "SpaceToDepth":
        return [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4]
    if mode == "DCR":
        return [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2]
    return [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]


@lowers("DepthToSpace", "SpaceToDepth")
def depth_space(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """DepthToSpace (DCR and CRD) and SpaceToDepth as their definitions: a COPY into the 6-D view, its
    TRANSPOSE, a COPY to the output's dims. The kernel has no aliasing view, so that is two copies more
    than one pass over the data."""
    mode = attr(n, "mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if len(cx.shape(n.input[0], n)) != 4 or mode not in ("DCR", "CRD"):
        raise LoweringError(n.op_type, n.name, f"only a rank-4 input and mode DCR or CRD (mode {mode})")
    x, dtype = _read_moved(cx, n, t)
    view, perm = _depth_space_view(n.op_type, mode, traced_dims(cx.prog, x), int(attr(n, "blocksize")))
    viewed = cx.emit(n, t, Opcode.COPY, [x], out=cx.scratch(view, t, dtype), out_dtype=dtype)
    params = {Param.PERM + i: p for i, p in enumerate(perm)}
    moved = cx.scratch([view[p] for p in perm], t, dtype)
    cx.emit(
        n,
        t,
        Opcode.COPY,
        [cx.emit(n, t, Opcode.TRANSPOSE, [viewed], params, out=moved, out_dtype=dtype)],
        out_dtype=dtype,
    )


@lowers("Concat")
def concat(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """One CONCAT of any type the program holds (a mask's bools, int64 lengths); more inputs than an op takes (an
    unrolled LSTM's 20 steps) are concatenated in groups into scratch tensors first, which costs one more copy of
    the data."""
    inputs = [i for i in n.input if i and not cx.has_no_element(i)]  # an empty input adds nothing
    if not inputs:
        raise LoweringError(n.op_type, n.name, "no inputs with elements")
    params = {Param.AXIS: int(attr(n, "axis"))}
    axis = params[Param.AXIS] % len(cx.shape(inputs[0], n))
    read = [cx.read_any(i, n, t) for i in inputs]
    dtype = read[0][1]
    parts = [(tid, traced_dims(cx.prog, tid)) for tid, _ in read]
    while len(parts) > Layout.MAX_OP_INPUTS:
        groups = [parts[k : k + Layout.MAX_OP_INPUTS] for k in range(0, len(parts), Layout.MAX_OP_INPUTS)]
        parts = [_concat_group(cx, n, t, group, axis, params, dtype) for group in groups]
    cx.emit(n, t, Opcode.CONCAT, [tid for tid, _ in parts], params, out_dtype=dtype)


def _concat_group(
    cx: Lowerer,
    n: onnx.NodeProto,
    t: Task,
    group: list[tuple[int, list[int]]],
    axis: int,
    params: dict[Param, int],
    dtype: Dtype,
) -> tuple[int, list[int]]:
    if len(group) == 1:
        return group[0]
    dims = list(group[0][1])
    dims[axis] = sum(d[axis] for _, d in group)
    out = cx.scratch(dims, t, dtype)
    return cx.emit(n, t, Opcode.CONCAT, [tid for tid, _ in group], params, out=out, out_dtype=dtype), dims


def reflect_pad(cx: Lowerer, n: onnx.NodeProto, t: Task, pads: list[int]) -> None:
    """ONNX Pad mode='reflect', axis by axis: CONCAT(x[b:0:-1], x, x[-2:-2-e:-1]). The SLICE
    params do not depend on the axis length, so the ops follow any input shape."""
    rank = len(pads) // 2
    dims = cx.shape(n.input[0], n)
    if min(pads) < 0:
        raise LoweringError(n.op_type, n.name, f"pads {pads}: a negative pad (a crop) is not supported")
    axes = [a for a in range(rank) if pads[a] or pads[rank + a]]
    src = cx.read(n.input[0], n, t)
    if not axes:
        cx.emit(n, t, Opcode.COPY, [src])
        return
    for a in axes:
        begin, end = pads[a], pads[rank + a]
        if max(begin, end) >= dims[a]:
            raise LoweringError(
                n.op_type, n.name, f"reflect pads {begin}, {end} of axis {a} need it longer than {dims[a]}"
            )
        parts = [src]
        if begin:
            parts.insert(0, _mirror(cx, n, t, src, a, begin, begin, 0))
        if end:
            parts.append(_mirror(cx, n, t, src, a, end, -2, -2 - end))
        padded = traced_dims(cx.prog, src)
        padded[a] = padded[a] + begin + end
        out = None if a == axes[-1] else cx.scratch(padded, t)
        src = cx.emit(n, t, Opcode.CONCAT, parts, {Param.AXIS: a}, out=out)


def constant_pad(cx: Lowerer, n: onnx.NodeProto, t: Task, pads: list[int], value: float) -> None:
    """ONNX Pad mode='constant' that no Conv takes into its own pads (torch's F.pad of an NHWC
    tensor, read by a Cast; tf2onnx's before a Conv1D, read by a Reshape), axis by axis:
    CONCAT(slab, x, slab) with slabs of `value` made by EXPAND, whose dims follow the input's
    (basic_pitch's symbolic batch)."""
    rank = len(pads) // 2
    if min(pads) < 0:
        raise LoweringError(n.op_type, n.name, f"pads {pads}: a negative pad (a crop) is not supported")
    src = cx.read(n.input[0], n, t)
    axes = [a for a in range(rank) if pads[a] or pads[rank + a]]
    for a in axes:
        dims = traced_dims(cx.prog, src)
        begin, end = pads[a], pads[rank + a]
        slabs = {length: _slab(cx, n, t, dims, a, length, value) for length in sorted({begin, end} - {0})}
        parts = [p for p in (slabs.get(begin), src, slabs.get(end)) if p is not None]  # equal sides share one slab
        dims[a] = dims[a] + begin + end
        out = None if a == axes[-1] else cx.scratch(dims, t)
        src = cx.emit(n, t, Opcode.CONCAT, parts, {Param.AXIS: a}, out=out)


def _slab(cx: Lowerer, n: onnx.NodeProto, t: Task, dims: list[int], axis: int, length: int, value: float) -> int:
    """`value` shaped as `dims` (traced: they follow the input's) but `length` long along `axis`."""
    shape = list(dims)
    shape[axis] = length
    fill = cx.shared_constant(np.array(value, np.float32), t, Dtype.F32)
    return cx.emit(n, t, Opcode.EXPAND, [fill], out=cx.scratch(shape, t))


def _mirror(cx: Lowerer, n: onnx.NodeProto, t: Task, src: int, axis: int, length: int, first: int, stop: int) -> int:
    """x[first:stop:-1] along `axis` (`length` elements), every other axis whole."""
    dims = traced_dims(cx.prog, src)
    rank = len(dims)
    starts, ends, steps = [0] * rank, [INT32_MAX] * rank, [1] * rank
    starts[axis], ends[axis], steps[axis] = first, stop, -1
    dims[axis] = length
    return cx.emit(n, t, Opcode.SLICE, [src], slice_params(starts, ends, steps), out=cx.scratch(dims, t))


@lowers("Slice")
def slice_(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """One SLICE of data of any type the program moves. Ends that follow the input shapes (known only at run
    time, or computed from a Shape: `position_ids[:, :seq]`) are each start plus the output's length on the
    axis, a param the shape section makes follow that length (`Lowerer.output_params`). Starts computed from the
    shapes outside the pair (a decode step's `position_ids[:, past:past + new]`) are params the shape section
    patches with their expressions (`Lowerer.value_params`), where they cannot be negative."""
    rank = len(cx.shape(n.input[0], n))
    follow = cx.opset >= 10 and (n.input[2] not in cx.static or cx.follows_shapes(n.input[2]))
    if cx.opset < 10:
        starts, ends = list(attr(n, "starts")), list(attr(n, "ends"))
        axes = list(attr(n, "axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = cx.const_ints(n.input[1], n)
        axes = cx.const_ints(n.input[3], n) if len(n.input) > 3 and n.input[3] else list(range(len(starts)))
        steps = cx.const_ints(n.input[4], n) if len(n.input) > 4 and n.input[4] else [1] * len(starts)
        ends = _ends_of_output(cx, n, starts, axes, steps) if follow else cx.const_ints(n.input[2], n)
    s, e, st = [0] * rank, [INT32_MAX] * rank, [1] * rank
    for a, b, c, d in zip(axes, starts, ends, steps):
        s[a % rank], e[a % rank], st[a % rank] = _clamp(b), _clamp(c), _clamp(d)
    x, dtype = _read_moved(cx, n, t, MOVED_INTEGERS)
    cx.emit(n, t, Opcode.SLICE, [x], slice_params(s, e, st), out_dtype=dtype)
    op = len(cx.prog.ops) - 1
    if follow:
        cx.output_params[op] = [(SliceParam.ENDS + a % rank, a % rank, SliceParam.STARTS + a % rank) for a in axes]
    if cx.opset >= 10 and n.input[1] in cx.shape_values:
        cx.value_params[op] = {SliceParam.STARTS + a % rank: (n.input[1], k) for k, a in enumerate(axes)}
        _nonnegative_starts(n, cx.shape_values[n.input[1]])


def _nonnegative_starts(n: onnx.NodeProto, starts: tuple[sympy.Expr, ...]) -> None:
    """A start that follows the shapes counts from the end where negative: only one that cannot be is patched."""
    for k, expr in enumerate(starts):
        dims = {d: sympy.Symbol(d.name, integer=True, nonnegative=True) for d in expr.free_symbols}
        if not expr.xreplace(dims).is_nonnegative:
            raise LoweringError(
                n.op_type,
                n.name,
                f"start {k} '{expr}' follows the input shapes and may be negative (counted from the end)",
            )


def _ends_of_output(cx: Lowerer, n: onnx.NodeProto, starts: list[int], axes: list[int], steps: list[int]) -> list[int]:
    """Ends that follow the input shapes, each the start plus the output's length on its axis (the elements
    ONNX's clamped end takes, from a start >= 0 with step 1)."""
    for a, b, d in zip(axes, starts, steps):
        if d != 1 or b < 0:
            raise LoweringError(
                n.op_type,
                n.name,
                f"ends '{n.input[2]}' follow the input shapes: only from a start >= 0 with step 1 (axis {a}: "
                f"start {b}, step {d})",
            )
    out = cx.shape(n.output[0], n)
    return [b + out[a % len(out)] for a, b in zip(axes, starts)]


def slice_params(starts: list[int], ends: list[int], steps: list[int]) -> dict[int, int]:
    params = {}
    for i in range(len(starts)):
        params[SliceParam.STARTS + i] = starts[i]
        params[SliceParam.ENDS + i] = ends[i]
        params[SliceParam.STEPS + i] = steps[i]
    return params


def axis_slice(rank: int, axis: int, begin: int, end: int) -> dict[int, int]:
    """SLICE parameters taking [begin, end) of one axis and all of the others."""
    starts, ends = [0] * rank, [INT32_MAX] * rank
    starts[axis], ends[axis] = begin, end
    return slice_params(starts, ends, [1] * rank)


@lowers("Split")
def split(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """One SLICE per output; sizes from the `split` input (opset 13), the attribute, or equal parts."""
    x = cx.shape(n.input[0], n)
    axis = int(attr(n, "axis", 0)) % len(x)
    sizes = _split_sizes(cx, n, x[axis])
    begin = 0
    for name, size in zip(n.output, sizes):
        if name:
            cx.emit(
                n, t, Opcode.SLICE, [cx.read(n.input[0], n, t)], axis_slice(len(x), axis, begin, begin + size), out=name
            )
        begin += size


def _split_sizes(cx: Lowerer, n: onnx.NodeProto, length: int) -> list[int]:
    outputs = len(n.output)
    if len(n.input) > 1 and n.input[1]:
        sizes = cx.const_ints(n.input[1], n)
    elif attr(n, "split") is not None:
        sizes = [int(v) for v in attr(n, "split")]
    else:  # equal parts; with num_outputs (opset 18) the last may be smaller
        part = -(-length // outputs)
        sizes = [min(part, length - k * part) for k in range(outputs)]
    if len(sizes) != outputs or sum(sizes) != length or min(sizes) <= 0:
        raise LoweringError(n.op_type, n.name, f"split sizes {sizes} do not cut length {length} into {outputs} parts")
    return sizes


@lowers("Gather")
def gather(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A constant scalar index (SLICE, then a COPY dropping the axis) or a constant contiguous
    ascending range of indices (one SLICE; of rank > 1, a SLICE and a COPY) along one axis, of float
    data or, off axis 0, of integer data (a decoder step's last token id, prefix[:, -1]); indices
    known only at run time (token ids into an embedding table) on axis 0 by GATHER_ROWS; other
    indices are refused. Integer data (a Shape's dims) on axis 0 by GATHER_ROWS, constant indices too."""
    x = cx.shape(n.input[0], n)
    axis = int(attr(n, "axis", 0)) % len(x)
    floats = cx.dtype(n.input[0]) == onnx.TensorProto.FLOAT
    if n.input[1] in cx.static and (floats or (axis != 0 and DTYPES.get(cx.dtype(n.input[0])) in MOVED_INTEGERS)):
        _gather_constant(cx, n, t, x, axis)
        return
    if not floats:
        _gather_integers(cx, n, t, x[0] if axis == 0 else None)
        return
    dtype = DTYPES.get(cx.dtype(n.input[1]))
    if axis != 0 or dtype not in (Dtype.I32, Dtype.I64):
        raise LoweringError(
            n.op_type, n.name, f"run-time indices '{n.input[1]}': only int32/int64 indices on axis 0 are supported"
        )
    rows = cx.read_typed(n.input[1], n, t, dtype)
    table = cx.stored_half(n.input[0], n, t)
    if table is None:
        cx.emit(n, t, Opcode.GATHER_ROWS, [cx.read(n.input[0], n, t), rows])
        return
    # a float16 table (hama's embeddings) gathered as stored, only its rows widened, not the table each call
    half = cx.emit(n, t, Opcode.GATHER_ROWS, [table, rows], out=cx.scratch(cx.shape(n.output[0], n), t, Dtype.F16))
    cx.emit(n, t, Opcode.CAST, [half], engine=EngineClass.VECTOR)


def _gather_constant(cx: Lowerer, n: onnx.NodeProto, t: Task, x: list[int], axis: int) -> None:
    """SLICE of the constant contiguous indices along `axis` (then a COPY where they drop or split it). Indices all
    negative stay so, counted from the end as SLICE counts them: the last element of a symbolic axis is the same
    param at every length."""
    indices = np.asarray(cx.static[n.input[1]])
    flat = [int(i) % x[axis] if -x[axis] <= int(i) < x[axis] else -1 for i in indices.reshape(-1)]
    if not flat or -1 in flat or flat != list(range(flat[0], flat[0] + len(flat))):
        shown = str(indices.tolist()) if indices.size <= 8 else f"of shape {list(indices.shape)} {flat[:6]}..."
        raise LoweringError(n.op_type, n.name, f"indices {shown} are not in range and contiguous")
    raw = [int(i) for i in indices.reshape(-1)]
    if all(i < 0 for i in raw):  # counted from the end at any length (a mix of signs follows the length: flat)
        params = axis_slice(len(x), axis, raw[0], raw[-1] + 1 or INT32_MAX)
    else:
        params = axis_slice(len(x), axis, flat[0], flat[0] + len(flat))
    if cx.dtype(n.input[0]) == onnx.TensorProto.FLOAT:
        src, dtype = cx.read(n.input[0], n, t), Dtype.F32
    else:
        src, dtype = cx.read_any(n.input[0], n, t)
    if indices.ndim == 1:
        cx.emit(n, t, Opcode.SLICE, [src], params, out_dtype=dtype)
        return
    # a scalar drops the axis, indices of rank > 1 (GTCRN's [[0]]) split it: the sliced bytes, copied
    traced = traced_dims(cx.prog, src)  # the kept axes follow the input's, whatever the binding
    kept = traced[:axis] + [len(flat)] + traced[axis + 1 :]
    picked = cx.emit(n, t, Opcode.SLICE, [src], params, out=cx.scratch(kept, t, dtype))
    cx.emit(n, t, Opcode.COPY, [picked], out_dtype=dtype)


def _gather_integers(cx: Lowerer, n: onnx.NodeProto, t: Task, rows: int | None) -> None:
    """GATHER_ROWS of integer data on axis 0 (`rows` its length, None on another axis); constant indices
    must lie in [-rows, rows), where ONNX Runtime's Gather does not fail the run."""
    if rows is None:
        raise LoweringError(n.op_type, n.name, f"'{n.input[0]}' is not float32: integer data only on axis 0")
    known = cx.known_value(n.input[1])
    if known is not None and not np.all((-rows <= known) & (known < rows)):
        raise LoweringError(n.op_type, n.name, f"indices {np.asarray(known).tolist()} out of range [-{rows}, {rows})")
    index_type = DTYPES.get(cx.dtype(n.input[1]))
    if index_type not in (Dtype.I32, Dtype.I64):
        raise LoweringError(n.op_type, n.name, f"indices '{n.input[1]}' must be int32 or int64")
    data, dtype = cx.read_any(n.input[0], n, t)
    cx.emit(n, t, Opcode.GATHER_ROWS, [data, cx.read_typed(n.input[1], n, t, index_type)], out_dtype=dtype)


@lowers("Expand")
def expand(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """x * ones: the kernel's MUL broadcasts as numpy does, as Expand does. The ones have the
    output's size only along the axes x is expanded on (1 elsewhere), so they do not follow the
    other dims: repeat_kv's [b, kv, 1, T, d] -> [b, kv, n_rep, T, d] multiplies by [1, 1, n_rep, 1, 1].
    Integers and bools (a decoder's position ids), and x of length 1 along an axis whose output length follows
    the input shapes (moonshine's decoder mask [1, 1, new, past + new] to the batch: ones of that length at one
    binding, of 1 at another), are an EXPAND of x to the output's dims, which the shape section patches."""
    shape = cx.const_ints(n.input[1], n) if n.input[1] in cx.static else cx.shape(n.output[0], n)
    if any(d <= 0 for d in shape):
        raise LoweringError(n.op_type, n.name, f"shape {shape} has a dim <= 0")
    x = cx.shape(n.input[0], n)
    out = list(np.broadcast_shapes(tuple(x), tuple(shape)))
    padded = [1] * (len(out) - len(x)) + x
    ones = [1 if d == o else o for d, o in zip(padded, out)]
    lead, x_varying = len(out) - len(x), cx.varying.get(n.input[0], set())
    follows = {a for a in cx.varying.get(n.output[0], set()) if padded[a] == 1 and a - lead not in x_varying}
    if follows or DTYPES.get(cx.dtype(n.input[0])) in (*MOVED_INTEGERS, Dtype.U8, Dtype.I8, Dtype.U16, Dtype.I16):
        src, dtype = cx.read_any(n.input[0], n, t)
        cx.emit(n, t, Opcode.EXPAND, [src], out_dtype=dtype)  # on the vector engine, where the profile counts it
        return
    cx.emit(n, t, Opcode.MUL, [cx.read(n.input[0], n, t), cx.constant(np.ones(ones, np.float32), t)])


def _clamp(v: int) -> int:
    return max(-INT32_MAX - 1, min(INT32_MAX, v))
