"""The task program in memory and its byte encoding (format: dsp/README.md, numbers: abi.py)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from .abi import Dtype, Engine, Layout, Opcode, Role, Task


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


class Program:
    def __init__(self) -> None:
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.n_io = [0, 0, 0, 0]  # inputs A, B, outputs A, B

    def add(self, t: Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def encode(self) -> bytes:
        align = Layout.CONST_ALIGN
        ops_off = Layout.HEADER_BYTES + len(self.tensors) * Layout.TENSOR_RECORD_BYTES
        ops_end = ops_off + len(self.ops) * Layout.OP_RECORD_BYTES
        data_off = -(-ops_end // align) * align
        data = bytearray()
        records = bytearray()
        for t in self.tensors:
            records += _tensor_record(t, data)
        for o in self.ops:
            records += _op_record(o)
        total = data_off + len(data) + Layout.PROGRAM_CRC_BYTES
        header = struct.pack(
            "<IHHIIII4HIIII",
            Layout.PROGRAM_MAGIC,
            Layout.PROGRAM_VERSION,
            Layout.HEADER_BYTES,
            total,
            Layout.PROGRAM_FLAG_CRC32,
            len(self.tensors),
            len(self.ops),
            *self.n_io,
            Layout.HEADER_BYTES,
            ops_off,
            data_off,
            len(data),
        )
        blob = header + records
        body = bytes(blob + bytes(data_off - len(blob)) + data)
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
    n_outputs, reserved = 1, 0
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
        Layout.NO_TENSOR,
        *o.params,
    )
