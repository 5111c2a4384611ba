"""The task program in memory and its byte encoding (format: dsp/README.md, numbers: abi.py).

A program without a shape section, quantization entries or 16-bit integer tensor is encoded as
format version 1, exactly as before; one with any of them as version 2 (64-byte header, the
sections after the data; dsp/README.md "Task program format, version 2"). `specialize` is the
reference of the kernel's hfx_program_specialize: the shape section applied to actual input shapes.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, field

from .. import shape_expr
from ..shape_expr import ShapeExprError, Target
from .abi import Dtype, Engine, Layout, Opcode, Role, Task

VERSION_2 = 2
HEADER_BYTES_V2 = 64
_HEADER = "<IHHIIII4HIIII"  # v1, and the first 48 bytes of v2
_HEADER_V2_TAIL = "<II2I"  # shapes_bytes, quant_bytes, reserved
_TENSOR = "<BBBBI8III"
_DIMS_AT = 8  # byte offset of dims[] in a tensor record
_PARAMS_AT = 48  # byte offset of params[] in an op record
V2_DTYPES = {Dtype.U16, Dtype.I16, Dtype.BOOL}  # tensor dtypes a version 1 program cannot carry


# The kernel's defaults (dsp/include/hexfuse/ops.h HFX_ARENA_ALIGN, scheduler.c arena_bytes): each
# task's scratch is placed in the arena; both tasks run at once only when their regions fit together.
ARENA_ALIGN = 128
ARENA_BYTES = 8 << 20
DTYPE_BYTES = {
    Dtype.F32: 4,
    Dtype.F16: 2,
    Dtype.I32: 4,
    Dtype.I64: 8,
    Dtype.I8: 1,
    Dtype.U8: 1,
    Dtype.U16: 2,
    Dtype.I16: 2,
    Dtype.BOOL: 1,
}


@dataclass
class Tensor:
    dtype: Dtype
    role: Role
    task: Task
    dims: list[int]
    io: int = 0
    data: bytes = b""


@dataclass
class Op:
    opcode: Opcode
    engine: Engine
    task: Task
    inputs: list[int]
    output: int
    params: list[int] = field(default_factory=lambda: [0] * Layout.OP_PARAMS)
    second_output: int = Layout.NO_TENSOR  # DYNAMIC_QPARAMS' zero point


@dataclass(frozen=True)
class QuantEntry:
    """An integer tensor's quantization (a record of the v2 quantization section): program ids of a
    constant f32 scale and of a constant zero point of the tensor's dtype (NO_TENSOR: zero), with
    one element (axis -1) or one per index of `axis`."""

    scale: int
    zero_point: int
    axis: int = -1


class Program:
    def __init__(self) -> None:
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.n_io = [0, 0, 0, 0]  # inputs A, B, outputs A, B
        self.quant: dict[int, QuantEntry] = {}  # integer tensor id -> its quantization
        self._unquantized: set[int] = set()  # tensors read with two different quantizations

    def add(self, t: Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def quantize(self, tid: int, entry: QuantEntry) -> None:
        """Record tensor tid's quantization. Two ops that quantize it differently leave it without an
        entry: the kernel checks each op against the entry, and the ops stay what the model says."""
        old = self.quant.get(tid)
        if tid in self._unquantized or (old is not None and not self._same(old, entry)):
            self.quant.pop(tid, None)
            self._unquantized.add(tid)
        elif old is None:
            self.quant[tid] = entry

    def _same(self, a: QuantEntry, b: QuantEntry) -> bool:
        def data(tid: int) -> bytes:
            return self.tensors[tid].data if tid != Layout.NO_TENSOR else b""

        scale = data(a.scale)
        per_tensor = len(scale) == 4  # one f32: the axis says nothing
        return scale == data(b.scale) and data(a.zero_point) == data(b.zero_point) and (per_tensor or a.axis == b.axis)

    def drop_unread(self) -> tuple[list[int], dict[int, int]]:
        """Drop the ops whose output no op reads and no task outputs (a QDQ weight's DequantizeLinear
        that its ConvTranspose reads as a constant), then the tensors only they wrote or read.
        Returns the ops kept (old indices, in order) and the tensors kept (old id -> new id)."""
        needed = {i for i, t in enumerate(self.tensors) if t.role == Role.OUTPUT}
        kept: list[int] = []
        for k in reversed(range(len(self.ops))):
            o = self.ops[k]
            if o.output in needed or o.second_output in needed:
                kept.append(k)
                needed.update(o.inputs)
        kept.reverse()
        if len(kept) == len(self.ops):
            return kept, {i: i for i in range(len(self.tensors))}
        live = set(kept)
        dropped = [o for k, o in enumerate(self.ops) if k not in live]
        self.ops = [self.ops[k] for k in kept]
        used = {t for o in self.ops for t in (*o.inputs, o.output, o.second_output)}
        orphans = {t for o in dropped for t in (*o.inputs, o.output, o.second_output)} - used
        gone_quant = [e for t, e in self.quant.items() if t in orphans]
        self.quant = {t: e for t, e in self.quant.items() if t not in orphans}
        used |= {t for e in self.quant.values() for t in (e.scale, e.zero_point)}
        orphans |= {t for e in gone_quant for t in (e.scale, e.zero_point)}
        gone = {t for t in orphans - used if t != Layout.NO_TENSOR and self.tensors[t].role != Role.INPUT}
        return kept, self._remove_tensors(gone)

    def _remove_tensors(self, gone: set[int]) -> dict[int, int]:
        remap = {old: new for new, old in enumerate(i for i in range(len(self.tensors)) if i not in gone)}
        self.tensors = [t for i, t in enumerate(self.tensors) if i not in gone]

        def moved(t: int) -> int:
            return t if t == Layout.NO_TENSOR else remap[t]

        for o in self.ops:
            o.inputs, o.output, o.second_output = [moved(t) for t in o.inputs], moved(o.output), moved(o.second_output)
        self.quant = {remap[t]: QuantEntry(moved(e.scale), moved(e.zero_point), e.axis) for t, e in self.quant.items()}
        self._unquantized = {remap[t] for t in self._unquantized if t in remap}
        return remap

    def _quant_section(self) -> bytes:
        entries = sorted(self.quant.items())
        out = struct.pack("<I", len(entries))
        for tid, e in entries:
            out += struct.pack("<IIIi", tid, e.scale, e.zero_point, e.axis)
        return out if entries else b""

    def encode(self, shapes: bytes = b"") -> bytes:
        """Version 1 bytes, or version 2 with `shapes` (an encoded shape section) after the data,
        with quantization entries (their section after it) or with a 16-bit integer tensor (a v2 dtype)."""
        align = Layout.CONST_ALIGN
        quant = self._quant_section()
        v2 = bool(shapes) or bool(quant) or any(t.dtype in V2_DTYPES for t in self.tensors)
        header_bytes = HEADER_BYTES_V2 if v2 else Layout.HEADER_BYTES
        ops_off = header_bytes + len(self.tensors) * Layout.TENSOR_RECORD_BYTES
        ops_end = ops_off + len(self.ops) * Layout.OP_RECORD_BYTES
        data_off = -(-ops_end // align) * align
        data = bytearray()
        records = bytearray()
        for t in self.tensors:
            records += _tensor_record(t, data)
        for o in self.ops:
            records += _op_record(o)
        total = data_off + len(data) + len(shapes) + len(quant) + Layout.PROGRAM_CRC_BYTES
        header = struct.pack(
            _HEADER,
            Layout.PROGRAM_MAGIC,
            VERSION_2 if v2 else Layout.PROGRAM_VERSION,
            header_bytes,
            total,
            Layout.PROGRAM_FLAG_CRC32,
            len(self.tensors),
            len(self.ops),
            *self.n_io,
            header_bytes,
            ops_off,
            data_off,
            len(data),
        )
        if v2:
            header += struct.pack(_HEADER_V2_TAIL, len(shapes), len(quant), 0, 0)
        blob = header + records
        body = bytes(blob + bytes(data_off - len(blob)) + data + shapes + quant)
        return body + struct.pack("<I", zlib.crc32(body))  # the kernel refuses a corrupted program


def _tensor_record(t: Tensor, data: bytearray) -> bytes:
    """The tensor's record; a constant's bytes are appended to `data`, aligned."""
    dims = t.dims + [0] * (Layout.MAX_RANK - len(t.dims))
    offset = size = 0
    if t.role == Role.CONSTANT:
        offset, size = len(data), len(t.data)
        data += t.data + bytes(-len(t.data) % Layout.CONST_ALIGN)
    return struct.pack("<BBBBI8III", t.dtype, t.role, t.task, len(t.dims), t.io, *dims, offset, size)


def _op_record(o: Op) -> bytes:
    slots = o.inputs + [Layout.NO_TENSOR] * (Layout.MAX_OP_INPUTS - len(o.inputs))
    n_outputs, reserved = 1 if o.second_output == Layout.NO_TENSOR else 2, 0
    return struct.pack(
        "<HBBBBH8I2I32i",
        o.opcode,
        o.engine,
        o.task,
        len(o.inputs),
        n_outputs,
        reserved,
        *slots,
        o.output,
        o.second_output,
        *o.params,
    )


# ---- reading a program back: the layout, the shape section, specialization


@dataclass(frozen=True)
class Layout2:
    """Where the parts of an encoded program lie (v1 or v2)."""

    version: int
    n_tensors: int
    n_ops: int
    tensors_off: int
    ops_off: int
    data_off: int
    data_bytes: int
    shapes_off: int
    shapes_bytes: int
    quant_bytes: int = 0

    @property
    def quant_off(self) -> int:
        return self.shapes_off + self.shapes_bytes


def layout_of(program: bytes) -> Layout2:
    head = struct.unpack_from(_HEADER, program)
    version, n_tensors, n_ops = head[1], head[5], head[6]
    tensors_off, ops_off, data_off, data_bytes = head[11:15]
    shapes_bytes, quant_bytes = struct.unpack_from("<II", program, 48) if version >= VERSION_2 else (0, 0)
    return Layout2(
        version, n_tensors, n_ops, tensors_off, ops_off, data_off, data_bytes, data_off + data_bytes, shapes_bytes,
        quant_bytes,
    )  # fmt: skip


@dataclass(frozen=True)
class Section:
    symbols: list[tuple[int, int]]  # (io_index, axis)
    patches: list[tuple[int, int, int, list[int]]]  # (target, id, slot, words)


def read_section(program: bytes) -> Section | None:
    lay = layout_of(program)
    if lay.shapes_bytes == 0:
        return None
    at = lay.shapes_off
    (n_symbols,) = struct.unpack_from("<I", program, at)
    symbols = [struct.unpack_from("<II", program, at + 4 + 8 * k) for k in range(n_symbols)]
    at += 4 + 8 * n_symbols
    (n_patches,) = struct.unpack_from("<I", program, at)
    at += 4
    patches = []
    for _ in range(n_patches):
        target, _, n_words, ident, slot = struct.unpack_from("<BBHII", program, at)
        words = list(struct.unpack_from(f"<{n_words}I", program, at + 12))
        patches.append((target, ident, slot, words))
        at += 12 + 4 * n_words
    return Section([(int(i), int(a)) for i, a in symbols], patches)


_ZERO_FORMATS = {Dtype.U8: "B", Dtype.I8: "b", Dtype.U16: "H", Dtype.I16: "h", Dtype.I32: "i"}


@dataclass(frozen=True)
class Quantization:
    """A tensor's entry of the quantization section, with the values it points at."""

    dtype: Dtype
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    axis: int  # -1: per tensor

    def describe(self) -> str:
        """One line: "u8 scale 0.0235 zero point 128", or per channel its axis and ranges."""
        kind = self.dtype.name.lower()
        if self.axis < 0:
            return f"{kind} scale {self.scales[0]:.6g} zero point {self.zero_points[0]}"
        return (
            f"{kind} per channel of axis {self.axis} ({len(self.scales)}): scale {min(self.scales):.6g}.."
            f"{max(self.scales):.6g}, zero point {min(self.zero_points)}..{max(self.zero_points)}"
        )


def read_quantization(program: bytes) -> dict[int, Quantization]:
    """Tensor id -> its quantization, from the v2 quantization section (empty without one)."""
    lay = layout_of(program)
    if lay.quant_bytes == 0:
        return {}
    (n,) = struct.unpack_from("<I", program, lay.quant_off)
    out = {}
    for k in range(n):
        tid, scale, zero, axis = struct.unpack_from("<IIIi", program, lay.quant_off + 4 + 16 * k)
        out[tid] = _quantization(program, lay, tid, scale, zero, axis)
    return out


def op_quantization(program: bytes) -> dict[int, str]:
    """Op index -> the quantization of the integer tensors it reads and writes ("in 0: u8 scale ...;
    out: ..."), for the ops that touch a tensor of the section."""
    q, lay = read_quantization(program), layout_of(program)
    out = {}
    for k in range(lay.n_ops):
        at = lay.ops_off + k * Layout.OP_RECORD_BYTES
        n_in = program[at + 4]
        inputs = struct.unpack_from(f"<{n_in}I", program, at + 8)
        (target,) = struct.unpack_from("<I", program, at + 40)
        parts = [f"in {i}: {q[t].describe()}" for i, t in enumerate(inputs) if t in q]
        parts += [f"out: {q[target].describe()}"] if target in q else []
        if parts:
            out[k] = "; ".join(parts)
    return out


def _quantization(program: bytes, lay: Layout2, tid: int, scale: int, zero: int, axis: int) -> Quantization:
    def record(t: int) -> tuple[int, int, int]:  # dtype, data offset, data bytes
        rec = struct.unpack_from(_TENSOR, program, lay.tensors_off + t * Layout.TENSOR_RECORD_BYTES)
        return rec[0], lay.data_off + rec[13], rec[14]

    dtype = Dtype(record(tid)[0])
    _, at, size = record(scale)
    scales = struct.unpack_from(f"<{size // 4}f", program, at)
    zeros: tuple[int, ...] = (0,) * len(scales)
    if zero != Layout.NO_TENSOR:
        _, at, _ = record(zero)
        zeros = struct.unpack_from(f"<{len(scales)}{_ZERO_FORMATS[dtype]}", program, at)
    return Quantization(dtype, tuple(scales), tuple(zeros), axis)


def tensor_records(program: bytes) -> list[tuple[int, int, list[int]]]:
    """(role, io, dims) of every tensor record."""
    lay = layout_of(program)
    out = []
    for k in range(lay.n_tensors):
        _, role, _, rank, io, *rest = struct.unpack_from(
            _TENSOR, program, lay.tensors_off + k * Layout.TENSOR_RECORD_BYTES
        )
        out.append((role, io, list(rest[:rank])))
    return out


def specialize(program: bytes, input_dims: list[list[int]]) -> bytes:
    """The program specialized to the given dims of every node input (A's then B's), as the
    kernel's hfx_program_specialize makes it; raises ShapeExprError with why it cannot."""
    lay, section, records = layout_of(program), read_section(program), tensor_records(program)
    patched = (
        {(ident, slot) for target, ident, slot, _ in section.patches if target == Target.TENSOR_DIM}
        if section
        else set()
    )
    for tid, (role, io, dims) in enumerate(records):
        if role != Role.INPUT:
            continue
        if io >= len(input_dims) or len(input_dims[io]) != len(dims):
            raise ShapeExprError(f"input {io} has another rank than the program's")
        for axis, d in enumerate(dims):
            if (tid, axis) not in patched and input_dims[io][axis] != d:
                raise ShapeExprError(f"input {io} dim {axis} is static ({d}), given {input_dims[io][axis]}")
    if section is None:
        return program
    values = [input_dims[io][axis] for io, axis in section.symbols]
    out = bytearray(program)
    for target, ident, slot, words in section.patches:
        value = shape_expr.run(words, values)
        if target == Target.TENSOR_DIM:
            if not 1 <= value <= 2**31 - 1:
                raise ShapeExprError(f"tensor {ident} dim {slot} evaluates to {value}")
            struct.pack_into(
                "<I", out, lay.tensors_off + ident * Layout.TENSOR_RECORD_BYTES + _DIMS_AT + 4 * slot, value
            )
        else:
            if not -(2**31) <= value < 2**31:
                raise ShapeExprError(f"op {ident} param {slot} evaluates to {value}, outside i32")
            struct.pack_into("<i", out, lay.ops_off + ident * Layout.OP_RECORD_BYTES + _PARAMS_AT + 4 * slot, value)
    struct.pack_into("<I", out, len(out) - 4, zlib.crc32(bytes(out[:-4])))
    return bytes(out)


def locate(program: bytes, offset: int) -> tuple[str, int, int]:
    """What byte `offset` of a program belongs to: ("tensor", id, axis), ("op", index, param
    slot; -1 outside params), ("data", byte in data, 0), ("header"/"section"/"crc", offset, 0)."""
    lay = layout_of(program)
    tensors_end = lay.tensors_off + lay.n_tensors * Layout.TENSOR_RECORD_BYTES
    ops_end = lay.ops_off + lay.n_ops * Layout.OP_RECORD_BYTES
    if lay.tensors_off <= offset < tensors_end:
        tid, at = divmod(offset - lay.tensors_off, Layout.TENSOR_RECORD_BYTES)
        return ("tensor", tid, (at - _DIMS_AT) // 4 if _DIMS_AT <= at < _DIMS_AT + 32 else -1)
    if lay.ops_off <= offset < ops_end:
        op, at = divmod(offset - lay.ops_off, Layout.OP_RECORD_BYTES)
        return ("op", op, (at - _PARAMS_AT) // 4 if at >= _PARAMS_AT else -1)
    if lay.data_off <= offset < lay.shapes_off:
        return ("data", offset - lay.data_off, 0)
    if offset < lay.tensors_off:
        return ("header", offset, 0)
    return ("section" if offset < len(program) - 4 else "crc", offset, 0)


def scratch_bytes(p: Program, task: Task) -> int:
    """The arena region the kernel gives `task`'s scratch (dsp/src/arena.c, mirrored): each scratch
    tensor in the order its ops write them, at the lowest aligned offset clear of the tensors whose
    lifetimes (writing op .. last reading op, in task order) overlap its own."""
    ops = [o for o in p.ops if o.task == task]
    life: dict[int, list[int]] = {}
    for k, o in enumerate(ops):
        for tid in o.inputs:
            if tid in life:
                life[tid][1] = k
        for tid in (o.output, o.second_output):
            if tid != Layout.NO_TENSOR and p.tensors[tid].role == Role.SCRATCH:
                life[tid] = [k, k]
    offset: dict[int, tuple[int, int]] = {}  # tensor -> (offset, end)
    high = 0
    for tid, (first, last) in life.items():
        t = p.tensors[tid]
        size = -(-DTYPE_BYTES[t.dtype] * math.prod(t.dims) // ARENA_ALIGN) * ARENA_ALIGN
        off = 0
        for start, end in sorted(offset[u] for u, (f, la) in life.items() if u in offset and f <= last and first <= la):
            if start >= off + size:
                break
            off = max(off, end)
        offset[tid] = (off, off + size)
        high = max(high, off + size)
    return high
