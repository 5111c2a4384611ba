"""Lower one FusedHexPair node to the task program the kernel runs (dsp/include/hexfuse/ops.h).

The node's function body is the source of truth: body nodes [0, num_nodes_a) are task A, the
rest task B; formal input i is the node's input i (A's first, then B's), formal output j the
node's output j. Shapes come from ONNX shape inference of the body with the node's actual input
types. Weights are node inputs (graph initializers), so they are program inputs, not constants;
only Constant nodes inside the body become program constants. Integer inputs that only steer
an op (Reshape shape, Slice starts, ...) are read from the initializers at lowering time and
declared in the program as unused inputs of their dtype, so the io indices stay the node's.

Anything outside the kernel's op set raises LoweringError(op, node, reason): the pass keeps
that pair unfused (the fallback body runs) and reports which op stopped it.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from . import contract as C
from .errors import HexfuseError

# ---- the numbers of dsp/include/hexfuse/ops.h (tests/test_lower.py checks them against the header)

OPS_H = {
    "HFX_PROGRAM_MAGIC": 0x50584648,
    "HFX_PROGRAM_VERSION": 1,
    "HFX_PROGRAM_FLAG_CRC32": 1,
    "HFX_PROGRAM_CRC_BYTES": 4,
    "HFX_HEADER_BYTES": 48,
    "HFX_TENSOR_RECORD_BYTES": 48,
    "HFX_OP_RECORD_BYTES": 176,
    "HFX_MAX_RANK": 8,
    "HFX_MAX_OP_INPUTS": 8,
    "HFX_MAX_OP_OUTPUTS": 2,
    "HFX_OP_PARAMS": 32,
    "HFX_MAX_TENSORS": 65535,
    "HFX_MAX_OPS": 4096,
    "HFX_MAX_IO": 4096,
    "HFX_MAX_TENSOR_BYTES": 0x7FFFFFFF,
    "HFX_CONST_ALIGN": 64,
    "HFX_NO_TENSOR": 0xFFFFFFFF,
    "HFX_TASK_A": 0,
    "HFX_TASK_B": 1,
    "HFX_ENGINE_MATRIX": 0,
    "HFX_ENGINE_VECTOR": 1,
    "HFX_ENGINE_COPY": 2,
    "HFX_DTYPE_F32": 1,
    "HFX_DTYPE_F16": 2,
    "HFX_DTYPE_I32": 3,
    "HFX_DTYPE_I64": 4,
    "HFX_DTYPE_I8": 5,
    "HFX_DTYPE_U8": 6,
    "HFX_ROLE_INPUT": 1,
    "HFX_ROLE_OUTPUT": 2,
    "HFX_ROLE_CONSTANT": 3,
    "HFX_ROLE_SCRATCH": 4,
    "HFX_OP_GEMM": 1,
    "HFX_OP_CONV2D": 2,
    "HFX_OP_ADD": 10,
    "HFX_OP_SUB": 11,
    "HFX_OP_MUL": 12,
    "HFX_OP_DIV": 13,
    "HFX_OP_SQRT": 19,
    "HFX_OP_RELU": 20,
    "HFX_OP_SIGMOID": 21,
    "HFX_OP_TANH": 22,
    "HFX_OP_GELU": 23,
    "HFX_OP_SILU": 24,
    "HFX_OP_EXP": 25,
    "HFX_OP_HARDSIGMOID": 26,
    "HFX_OP_HARDSWISH": 27,
    "HFX_OP_CLIP": 28,
    "HFX_OP_NEG": 29,
    "HFX_OP_SOFTMAX": 30,
    "HFX_OP_LAYERNORM": 31,
    "HFX_OP_RMSNORM": 32,
    "HFX_OP_REDUCE_MEAN": 40,
    "HFX_OP_REDUCE_SUM": 41,
    "HFX_OP_TRANSPOSE": 50,
    "HFX_OP_CONCAT": 51,
    "HFX_OP_SLICE": 52,
    "HFX_OP_COPY": 53,
    "HFX_OP_RESIZE": 54,
    "HFX_OP_MAXPOOL": 60,
    "HFX_OP_AVGPOOL": 61,
    "HFX_OP_GLOBAL_AVGPOOL": 62,
    "HFX_RESIZE_NEAREST": 0,
    "HFX_RESIZE_LINEAR": 1,
    "HFX_RESIZE_COORD_HALF_PIXEL": 0,
    "HFX_RESIZE_COORD_ASYMMETRIC": 1,
    "HFX_RESIZE_COORD_ALIGN_CORNERS": 2,
    "HFX_RESIZE_COORD_PYTORCH_HALF_PIXEL": 3,
    "HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC": 4,
    "HFX_RESIZE_NEAREST_ROUND_PREFER_FLOOR": 0,
    "HFX_RESIZE_NEAREST_ROUND_PREFER_CEIL": 1,
    "HFX_RESIZE_NEAREST_FLOOR": 2,
    "HFX_RESIZE_NEAREST_CEIL": 3,
    "HFX_P_GEMM_TRANS_A": 0,
    "HFX_P_GEMM_TRANS_B": 1,
    "HFX_P_GEMM_ALPHA": 2,
    "HFX_P_GEMM_BETA": 3,
    "HFX_P_CONV_PAD_TOP": 0,
    "HFX_P_CONV_PAD_LEFT": 1,
    "HFX_P_CONV_PAD_BOTTOM": 2,
    "HFX_P_CONV_PAD_RIGHT": 3,
    "HFX_P_CONV_STRIDE_H": 4,
    "HFX_P_CONV_STRIDE_W": 5,
    "HFX_P_CONV_DILATION_H": 6,
    "HFX_P_CONV_DILATION_W": 7,
    "HFX_P_CONV_GROUP": 8,
    "HFX_P_AXIS": 0,
    "HFX_P_EPSILON": 1,
    "HFX_P_REDUCE_AXES_MASK": 0,
    "HFX_P_REDUCE_KEEPDIMS": 1,
    "HFX_P_PERM": 0,
    "HFX_P_SLICE_STARTS": 0,
    "HFX_P_SLICE_ENDS": 8,
    "HFX_P_SLICE_STEPS": 16,
    "HFX_P_HARDSIGMOID_ALPHA": 0,
    "HFX_P_HARDSIGMOID_BETA": 1,
    "HFX_P_CLIP_MIN": 0,
    "HFX_P_CLIP_MAX": 1,
    "HFX_P_POOL_PAD_TOP": 0,
    "HFX_P_POOL_PAD_LEFT": 1,
    "HFX_P_POOL_PAD_BOTTOM": 2,
    "HFX_P_POOL_PAD_RIGHT": 3,
    "HFX_P_POOL_STRIDE_H": 4,
    "HFX_P_POOL_STRIDE_W": 5,
    "HFX_P_POOL_DILATION_H": 6,
    "HFX_P_POOL_DILATION_W": 7,
    "HFX_P_POOL_KERNEL_H": 8,
    "HFX_P_POOL_KERNEL_W": 9,
    "HFX_P_POOL_CEIL_MODE": 10,
    "HFX_P_POOL_COUNT_INCLUDE_PAD": 11,
    "HFX_P_RESIZE_MODE": 0,
    "HFX_P_RESIZE_COORD": 1,
    "HFX_P_RESIZE_NEAREST_MODE": 2,
    "HFX_P_RESIZE_SCALE_H": 3,
    "HFX_P_RESIZE_SCALE_W": 4,
}
K = OPS_H
assert K["HFX_PROGRAM_VERSION"] == C.PROGRAM_VERSION

INT32_MAX = 2**31 - 1
DTYPES = {
    onnx.TensorProto.FLOAT: K["HFX_DTYPE_F32"],
    onnx.TensorProto.FLOAT16: K["HFX_DTYPE_F16"],
    onnx.TensorProto.INT32: K["HFX_DTYPE_I32"],
    onnx.TensorProto.INT64: K["HFX_DTYPE_I64"],
    onnx.TensorProto.INT8: K["HFX_DTYPE_I8"],
    onnx.TensorProto.UINT8: K["HFX_DTYPE_U8"],
}
ENGINE = {"matrix": K["HFX_ENGINE_MATRIX"], "vector": K["HFX_ENGINE_VECTOR"], "copy": K["HFX_ENGINE_COPY"]}
BINARY = {"Add": "HFX_OP_ADD", "Sub": "HFX_OP_SUB", "Mul": "HFX_OP_MUL", "Div": "HFX_OP_DIV"}
UNARY = {
    "Relu": "HFX_OP_RELU",
    "Sigmoid": "HFX_OP_SIGMOID",
    "Tanh": "HFX_OP_TANH",
    "Exp": "HFX_OP_EXP",
    "HardSwish": "HFX_OP_HARDSWISH",
}
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
POOLS = {"MaxPool": "HFX_OP_MAXPOOL", "AveragePool": "HFX_OP_AVGPOOL"}
RESIZE_COORD = {
    "half_pixel": "HFX_RESIZE_COORD_HALF_PIXEL",
    "asymmetric": "HFX_RESIZE_COORD_ASYMMETRIC",
    "align_corners": "HFX_RESIZE_COORD_ALIGN_CORNERS",
    "pytorch_half_pixel": "HFX_RESIZE_COORD_PYTORCH_HALF_PIXEL",
    "half_pixel_symmetric": "HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC",
}
RESIZE_NEAREST = {
    "round_prefer_floor": "HFX_RESIZE_NEAREST_ROUND_PREFER_FLOOR",
    "round_prefer_ceil": "HFX_RESIZE_NEAREST_ROUND_PREFER_CEIL",
    "floor": "HFX_RESIZE_NEAREST_FLOOR",
    "ceil": "HFX_RESIZE_NEAREST_CEIL",
}
# The ONNX ops this lowering accepts (some only with certain attributes; see _lower_node).
SUPPORTED_OPS = tuple(
    sorted(
        [
            "MatMul",
            "Gemm",
            "Conv",
            "Gelu",
            "Softmax",
            "LayerNormalization",
            "ReduceMean",
            "ReduceSum",
            "Transpose",
            "Concat",
            "Slice",
            "Constant",
            "HardSigmoid",
            "GlobalAveragePool",
            "Resize",
            *BINARY,
            *UNARY,
            *RESHAPES,
            *POOLS,
        ]
    )
)


class LoweringError(HexfuseError):
    """An op or attribute of a pair is outside the kernel's op set."""

    def __init__(self, op: str, node: str, reason: str) -> None:
        super().__init__(f"cannot lower {op} node '{node}': {reason}")
        self.op, self.node, self.reason = op, node, reason


def op_outside_kernel(node: onnx.NodeProto) -> LoweringError | None:
    """The error for a node whose op the kernel cannot run at all (checked before any shape work)."""
    if node.domain not in ("", "ai.onnx"):
        return LoweringError(node.op_type, node.name, f"domain '{node.domain}' is outside the kernel's op set")
    if node.op_type not in SUPPORTED_OPS:
        return LoweringError(node.op_type, node.name, "op is outside the kernel's op set")
    return None


def _f32_bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", float(x)))[0]


@dataclass
class _Tensor:
    dtype: int
    role: int
    task: int
    dims: list[int]
    io: int = 0
    data: bytes = b""


@dataclass
class _Op:
    opcode: int
    engine: int
    task: int
    inputs: list[int]
    output: int
    params: list[int] = field(default_factory=lambda: [0] * K["HFX_OP_PARAMS"])


class _Program:
    def __init__(self) -> None:
        self.tensors: list[_Tensor] = []
        self.ops: list[_Op] = []
        self.n_io = [0, 0, 0, 0]  # inputs A, B, outputs A, B

    def add(self, t: _Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def encode(self) -> bytes:
        align = K["HFX_CONST_ALIGN"]
        ops_off = K["HFX_HEADER_BYTES"] + len(self.tensors) * K["HFX_TENSOR_RECORD_BYTES"]
        ops_end = ops_off + len(self.ops) * K["HFX_OP_RECORD_BYTES"]
        data_off = -(-ops_end // align) * align
        data = bytearray()
        records = bytearray()
        for t in self.tensors:
            dims = t.dims + [0] * (K["HFX_MAX_RANK"] - len(t.dims))
            doff = dbytes = 0
            if t.role == K["HFX_ROLE_CONSTANT"]:
                doff, dbytes = len(data), len(t.data)
                data += t.data + bytes(-len(t.data) % align)
            records += struct.pack("<BBBBI8III", t.dtype, t.role, t.task, len(t.dims), t.io, *dims, doff, dbytes)
        for o in self.ops:
            slots = o.inputs + [K["HFX_NO_TENSOR"]] * (K["HFX_MAX_OP_INPUTS"] - len(o.inputs))
            records += struct.pack(
                "<HBBBBH8I2I32i",
                o.opcode,
                o.engine,
                o.task,
                len(o.inputs),
                1,
                0,
                *slots,
                o.output,
                K["HFX_NO_TENSOR"],
                *o.params,
            )
        total = data_off + len(data) + K["HFX_PROGRAM_CRC_BYTES"]
        header = struct.pack(
            "<IHHIIII4HIIII",
            K["HFX_PROGRAM_MAGIC"],
            K["HFX_PROGRAM_VERSION"],
            K["HFX_HEADER_BYTES"],
            total,
            K["HFX_PROGRAM_FLAG_CRC32"],
            len(self.tensors),
            len(self.ops),
            *self.n_io,
            K["HFX_HEADER_BYTES"],
            ops_off,
            data_off,
            len(data),
        )
        blob = header + records
        body = bytes(blob + bytes(data_off - len(blob)) + data)
        return body + struct.pack("<I", zlib.crc32(body))  # the kernel refuses a corrupted program


def _find_function(model: onnx.ModelProto, node: onnx.NodeProto) -> onnx.FunctionProto:
    for f in model.functions:
        if f.domain == node.domain and f.name == node.op_type and f.overload == node.overload:
            return f
    raise LoweringError(node.op_type, node.name, f"no function body for overload '{node.overload}'")


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _str_attr(node: onnx.NodeProto, name: str, default: str) -> str:
    v = _attr(node, name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def _pool_out_len(size: int, k: int, stride: int, dil: int, pad_begin: int, pad_end: int, ceil_mode: bool) -> int:
    """Output length of a pooling axis, as hfx_pool_out_len() in dsp/src/program.c (ONNX Runtime's rule)."""
    span = size + pad_begin + pad_end - dil * (k - 1) - 1
    if span < 0:
        return -1
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def _known_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Types of every graph tensor: inferred when the model does not carry them."""
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


class _Lowerer:
    def __init__(self, model: onnx.ModelProto, node: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> None:
        self.model, self.node = model, node
        self.fn = _find_function(model, node)
        self.pair = node.name or node.overload
        n_in_a = int(_attr(node, C.ATTR_NUM_INPUTS_A, -1))
        n_out_a = int(_attr(node, C.ATTR_NUM_OUTPUTS_A, -1))
        self.n_nodes_a = int(_attr(node, C.ATTR_NUM_NODES_A, -1))
        if min(n_in_a, n_out_a, self.n_nodes_a) < 0:
            raise LoweringError(node.op_type, self.pair, "missing num_inputs_a/num_outputs_a/num_nodes_a")
        if len(self.fn.input) != len(node.input) or len(self.fn.output) != len(node.output):
            raise LoweringError(node.op_type, self.pair, "node and function body disagree on inputs/outputs")
        self.n_in_a, self.n_out_a = n_in_a, n_out_a
        self.inits = {t.name: t for t in model.graph.initializer}
        self.opset = next(
            (o.version for o in self.fn.opset_import if o.domain in ("", "ai.onnx")),
            next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        )
        # formal name -> (actual name, type)
        self.formal: dict[str, str] = dict(zip(self.fn.input, node.input))
        self.types: dict[str, onnx.TypeProto] = {}
        for f, a in self.formal.items():
            if a not in types:
                raise LoweringError(node.op_type, self.pair, f"unknown type/shape of input '{a}'")
            self.types[f] = types[a]
        for n in self.fn.node:  # name the first op the kernel cannot run before anything else
            error = op_outside_kernel(n)
            if error is not None:
                raise error
        self._infer_body()
        self.static: dict[str, np.ndarray] = {}  # formal or body tensor -> constant value
        for f, a in self.formal.items():
            # Only integer initializers steer ops (shapes, axes); float weights stay program
            # inputs and are never read here, so large or external weights cost nothing.
            if a in self.inits and self.inits[a].data_type != onnx.TensorProto.FLOAT:
                self.static[f] = numpy_helper.to_array(self.inits[a])
        self.prog = _Program()
        self.ids: dict[str, int] = {}  # body tensor -> program tensor id
        self.task_of: dict[str, int] = {}

    def _infer_body(self) -> None:
        g_inputs = [helper.make_value_info(f, self.types[f]) for f in self.fn.input]
        # float initializers that steer an op (Resize roi/scales) are given to shape inference too
        steering = {i for n in self.fn.node if n.op_type == "Resize" for i in n.input[1:] if i}
        renamed = []
        for f, a in zip(self.fn.input, self.node.input):
            if a in self.inits and (self.inits[a].data_type != onnx.TensorProto.FLOAT or f in steering):
                t = onnx.TensorProto()
                t.CopyFrom(self.inits[a])
                t.name = f
                renamed.append(t)
        graph = helper.make_graph(
            list(self.fn.node),
            "body",
            g_inputs,
            [helper.make_value_info(o, onnx.TypeProto()) for o in self.fn.output],
            initializer=renamed,
        )
        m = helper.make_model(graph, opset_imports=list(self.fn.opset_import), ir_version=self.model.ir_version)
        try:
            inferred = shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
        except Exception as exc:  # noqa: BLE001
            raise LoweringError(self.node.op_type, self.pair, f"shape inference of the body failed: {exc}") from None
        g = inferred.graph
        for v in list(g.value_info) + list(g.output):
            if v.type.tensor_type.elem_type:
                self.types.setdefault(v.name, v.type)

    # ---- tensors ----

    def shape(self, name: str, op: onnx.NodeProto) -> list[int]:
        t = self.types.get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            raise LoweringError(op.op_type, op.name or name, f"unknown shape of '{name}'")
        dims = []
        for d in t.tensor_type.shape.dim:
            if not d.HasField("dim_value") or d.dim_value <= 0:
                raise LoweringError(op.op_type, op.name or name, f"'{name}' has a dynamic or empty dim")
            dims.append(int(d.dim_value))
        if len(dims) > K["HFX_MAX_RANK"]:
            raise LoweringError(op.op_type, op.name or name, f"'{name}' has rank {len(dims)} > 8")
        return dims

    def dtype(self, name: str) -> int:
        return int(self.types[name].tensor_type.elem_type) if name in self.types else 0

    def read(self, name: str, op: onnx.NodeProto, task: int) -> int:
        """Program id of a float tensor an op reads."""
        if name not in self.ids:
            if name in self.static and self.static[name].dtype == np.float32:
                arr = np.ascontiguousarray(self.static[name], dtype="<f4")
                self.ids[name] = self.prog.add(
                    _Tensor(K["HFX_DTYPE_F32"], K["HFX_ROLE_CONSTANT"], task, list(arr.shape), data=arr.tobytes())
                )
                self.task_of[name] = task
            else:
                raise LoweringError(op.op_type, op.name, f"input '{name}' is not available to the program")
        if self.task_of[name] != task:
            raise LoweringError(op.op_type, op.name, f"'{name}' crosses from one task to the other")
        if self.prog.tensors[self.ids[name]].dtype != K["HFX_DTYPE_F32"]:
            raise LoweringError(op.op_type, op.name, f"'{name}' is not float32 (the kernel runs float32 only)")
        return self.ids[name]

    def const_ints(self, name: str, op: onnx.NodeProto) -> list[int]:
        if name not in self.static:
            raise LoweringError(op.op_type, op.name, f"'{name}' must be a constant (initializer or Constant)")
        return [int(v) for v in np.asarray(self.static[name]).reshape(-1)]

    def const_floats(self, name: str, op: onnx.NodeProto) -> np.ndarray:
        """The float32 values of a constant float input (Resize scales): a Constant or an initializer."""
        if name in self.static:
            arr = self.static[name]
        elif self.formal.get(name) in self.inits:
            arr = numpy_helper.to_array(self.inits[self.formal[name]])
        else:
            raise LoweringError(op.op_type, op.name, f"'{name}' must be a constant (initializer or Constant)")
        return np.asarray(arr, dtype=np.float32).reshape(-1)

    # ---- lowering ----

    def lower(self) -> bytes:
        p = self.prog
        outputs = list(self.fn.output)
        for i, f in enumerate(self.fn.input):
            task = 0 if i < self.n_in_a else 1
            elem = self.dtype(f)
            if elem not in DTYPES:
                raise LoweringError(self.node.op_type, self.pair, f"input '{self.formal[f]}' has an unsupported dtype")
            dims = self.shape(f, self.node)
            if f in self.ids:
                raise LoweringError(self.node.op_type, self.pair, f"formal input '{f}' listed twice")
            self.ids[f] = p.add(_Tensor(DTYPES[elem], K["HFX_ROLE_INPUT"], task, dims, io=i))
            self.task_of[f] = task
        p.n_io[0], p.n_io[1] = self.n_in_a, len(self.fn.input) - self.n_in_a
        p.n_io[2], p.n_io[3] = self.n_out_a, len(outputs) - self.n_out_a
        self.out_index = {o: j for j, o in enumerate(outputs)}
        for k, n in enumerate(self.fn.node):
            task = 0 if k < self.n_nodes_a else 1
            self._lower_node(n, task)
        for j, o in enumerate(outputs):
            if o not in self.ids or p.tensors[self.ids[o]].role != K["HFX_ROLE_OUTPUT"]:
                # an output that is a constant or a formal input: copy it out
                task = 0 if j < self.n_out_a else 1
                fake = helper.make_node("Identity", [o], [o], name=f"output {o}")
                src = self.read(o, fake, task)
                dst = p.add(_Tensor(K["HFX_DTYPE_F32"], K["HFX_ROLE_OUTPUT"], task, list(p.tensors[src].dims), io=j))
                p.ops.append(_Op(K["HFX_OP_COPY"], ENGINE["copy"], task, [src], dst))
                self.ids[o] = dst
            elif (0 if j < self.n_out_a else 1) != p.tensors[self.ids[o]].task:
                raise LoweringError(self.node.op_type, self.pair, f"output '{o}' is listed for the wrong task")
        if not p.ops:
            raise LoweringError(self.node.op_type, self.pair, "the pair has no op to run")
        if len(p.ops) > K["HFX_MAX_OPS"] or len(p.tensors) > K["HFX_MAX_TENSORS"]:
            raise LoweringError(self.node.op_type, self.pair, "too many ops or tensors for one program")
        return p.encode()

    def _out(self, n: onnx.NodeProto, task: int, index: int = 0) -> int:
        name = n.output[index]
        elem = self.dtype(name)
        if elem != onnx.TensorProto.FLOAT:
            raise LoweringError(n.op_type, n.name, f"output '{name}' is not float32")
        dims = self.shape(name, n)
        j = self.out_index.get(name)
        if j is not None:
            tid = self.prog.add(_Tensor(K["HFX_DTYPE_F32"], K["HFX_ROLE_OUTPUT"], task, dims, io=j))
        else:
            tid = self.prog.add(_Tensor(K["HFX_DTYPE_F32"], K["HFX_ROLE_SCRATCH"], task, dims))
        self.ids[name] = tid
        self.task_of[name] = task
        return tid

    def _emit(
        self,
        n: onnx.NodeProto,
        task: int,
        code: str,
        engine: str,
        inputs: list[int],
        params: dict[int, int] | None = None,
    ) -> None:
        if len(n.output) > 1 and any(n.output[1:]):
            raise LoweringError(n.op_type, n.name, "only the first output is supported")
        out = self._out(n, task)
        op = _Op(K[code], ENGINE[engine], task, inputs, out)
        for k, v in (params or {}).items():
            op.params[k] = int(v)
        self.prog.ops.append(op)

    def _lower_node(self, n: onnx.NodeProto, t: int) -> None:  # noqa: C901 - one branch per op
        op = n.op_type
        ins = [i for i in n.input]
        if op == "Constant":
            value = _attr(n, "value")
            if value is None:
                raise LoweringError(op, n.name, "only the 'value' form of Constant is supported")
            self.static[n.output[0]] = numpy_helper.to_array(value)
            return
        if op in BINARY:
            self._emit(n, t, BINARY[op], "vector", [self.read(ins[0], n, t), self.read(ins[1], n, t)])
        elif op in UNARY:
            self._emit(n, t, UNARY[op], "vector", [self.read(ins[0], n, t)])
        elif op == "Gelu":
            if _attr(n, "approximate", b"none") not in (b"none", "none"):
                raise LoweringError(op, n.name, "approximate='tanh' is not supported (erf form only)")
            self._emit(n, t, "HFX_OP_GELU", "vector", [self.read(ins[0], n, t)])
        elif op == "MatMul":
            a, b = self.shape(ins[0], n), self.shape(ins[1], n)
            if len(a) < 2 or len(b) < 2:
                raise LoweringError(op, n.name, "1-D operands are not supported")
            self._emit(
                n,
                t,
                "HFX_OP_GEMM",
                "matrix",
                [self.read(ins[0], n, t), self.read(ins[1], n, t)],
                {K["HFX_P_GEMM_ALPHA"]: _f32_bits(1.0)},
            )
        elif op == "Gemm":
            has_c = len(ins) > 2 and ins[2] != ""
            alpha, beta = float(_attr(n, "alpha", 1.0)), float(_attr(n, "beta", 1.0))
            inputs = [self.read(ins[0], n, t), self.read(ins[1], n, t)] + ([self.read(ins[2], n, t)] if has_c else [])
            self._emit(
                n,
                t,
                "HFX_OP_GEMM",
                "matrix",
                inputs,
                {
                    K["HFX_P_GEMM_TRANS_A"]: int(_attr(n, "transA", 0)),
                    K["HFX_P_GEMM_TRANS_B"]: int(_attr(n, "transB", 0)),
                    K["HFX_P_GEMM_ALPHA"]: _f32_bits(alpha),
                    K["HFX_P_GEMM_BETA"]: _f32_bits(beta) if has_c else 0,
                },
            )
        elif op == "HardSigmoid":
            self._emit(
                n,
                t,
                "HFX_OP_HARDSIGMOID",
                "vector",
                [self.read(ins[0], n, t)],
                {
                    K["HFX_P_HARDSIGMOID_ALPHA"]: _f32_bits(float(_attr(n, "alpha", 0.2))),
                    K["HFX_P_HARDSIGMOID_BETA"]: _f32_bits(float(_attr(n, "beta", 0.5))),
                },
            )
        elif op == "Conv":
            self._conv(n, t)
        elif op in POOLS:
            self._pool(n, t)
        elif op == "GlobalAveragePool":
            if len(self.shape(ins[0], n)) < 3:
                raise LoweringError(op, n.name, "the input needs rank >= 3 (N, C, spatial)")
            self._emit(n, t, "HFX_OP_GLOBAL_AVGPOOL", "vector", [self.read(ins[0], n, t)])
        elif op == "Resize":
            self._resize(n, t)
        elif op == "Softmax":
            rank = len(self.shape(ins[0], n))
            axis = int(_attr(n, "axis", -1 if self.opset >= 13 else 1))
            if self.opset < 13 and axis % rank != rank - 1:
                raise LoweringError(
                    op, n.name, f"opset {self.opset} Softmax coerces to 2-D; only the last axis is supported"
                )
            self._emit(n, t, "HFX_OP_SOFTMAX", "vector", [self.read(ins[0], n, t)], {K["HFX_P_AXIS"]: axis})
        elif op == "LayerNormalization":
            inputs = [self.read(ins[0], n, t), self.read(ins[1], n, t)]
            if len(ins) > 2 and ins[2]:
                inputs.append(self.read(ins[2], n, t))
            self._emit(
                n,
                t,
                "HFX_OP_LAYERNORM",
                "vector",
                inputs,
                {
                    K["HFX_P_AXIS"]: int(_attr(n, "axis", -1)),
                    K["HFX_P_EPSILON"]: _f32_bits(float(_attr(n, "epsilon", 1e-5))),
                },
            )
        elif op in ("ReduceMean", "ReduceSum"):
            self._reduce(n, t)
        elif op == "Transpose":
            rank = len(self.shape(ins[0], n))
            perm = list(_attr(n, "perm", list(range(rank))[::-1]))
            self._emit(
                n,
                t,
                "HFX_OP_TRANSPOSE",
                "copy",
                [self.read(ins[0], n, t)],
                {K["HFX_P_PERM"] + i: p for i, p in enumerate(perm)},
            )
        elif op == "Concat":
            if not 1 <= len(ins) <= K["HFX_MAX_OP_INPUTS"]:
                raise LoweringError(op, n.name, f"{len(ins)} inputs; the kernel concatenates 1..8")
            self._emit(
                n,
                t,
                "HFX_OP_CONCAT",
                "copy",
                [self.read(i, n, t) for i in ins],
                {K["HFX_P_AXIS"]: int(_attr(n, "axis"))},
            )
        elif op == "Slice":
            self._slice(n, t)
        elif op in RESHAPES:
            self._emit(n, t, "HFX_OP_COPY", "copy", [self.read(ins[0], n, t)])
        else:
            raise LoweringError(op, n.name, "op is outside the kernel's op set")

    @staticmethod
    def _pads_2d(n: onnx.NodeProto, x: list[int], kernel: list[int], strides: list[int], dil: list[int]) -> list[int]:
        """Explicit [top, left, bottom, right] pads of a 2-D Conv / pooling node (auto_pad resolved)."""
        auto_pad = _str_attr(n, "auto_pad", "NOTSET")
        if auto_pad == "NOTSET":
            return list(_attr(n, "pads", [0, 0, 0, 0]))
        if auto_pad == "VALID":
            return [0, 0, 0, 0]
        if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            raise LoweringError(n.op_type, n.name, f"auto_pad '{auto_pad}' is not supported")
        pads = [0, 0, 0, 0]
        for a in range(2):
            out = math.ceil(x[2 + a] / strides[a])
            total = max(0, (out - 1) * strides[a] + (kernel[a] - 1) * dil[a] + 1 - x[2 + a])
            small, big = total // 2, total - total // 2
            pads[a], pads[2 + a] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return pads

    def _conv(self, n: onnx.NodeProto, t: int) -> None:
        x, w = self.shape(n.input[0], n), self.shape(n.input[1], n)
        if len(x) != 4:
            raise LoweringError("Conv", n.name, f"only 2-D convolution is supported (input rank {len(x)})")
        strides = list(_attr(n, "strides", [1, 1]))
        dil = list(_attr(n, "dilations", [1, 1]))
        group = int(_attr(n, "group", 1))
        pads = self._pads_2d(n, x, w[2:], strides, dil)
        inputs = [self.read(n.input[0], n, t), self.read(n.input[1], n, t)]
        if len(n.input) > 2 and n.input[2]:
            inputs.append(self.read(n.input[2], n, t))
        params = {
            K["HFX_P_CONV_PAD_TOP"]: pads[0],
            K["HFX_P_CONV_PAD_LEFT"]: pads[1],
            K["HFX_P_CONV_PAD_BOTTOM"]: pads[2],
            K["HFX_P_CONV_PAD_RIGHT"]: pads[3],
            K["HFX_P_CONV_STRIDE_H"]: strides[0],
            K["HFX_P_CONV_STRIDE_W"]: strides[1],
            K["HFX_P_CONV_DILATION_H"]: dil[0],
            K["HFX_P_CONV_DILATION_W"]: dil[1],
            K["HFX_P_CONV_GROUP"]: group,
        }
        self._emit(n, t, "HFX_OP_CONV2D", "matrix", inputs, params)

    def _pool(self, n: onnx.NodeProto, t: int) -> None:
        op = n.op_type
        x = self.shape(n.input[0], n)
        if len(x) != 4:
            raise LoweringError(op, n.name, f"only 2-D pooling is supported (input rank {len(x)})")
        if len(n.output) > 1 and any(n.output[1:]):
            raise LoweringError(op, n.name, "the Indices output is not supported")
        if int(_attr(n, "storage_order", 0)) != 0:
            raise LoweringError(op, n.name, "storage_order=1 is not supported")
        kernel = [int(k) for k in _attr(n, "kernel_shape", [])]
        strides = [int(v) for v in _attr(n, "strides", [1, 1])]
        dil = [int(v) for v in _attr(n, "dilations", [1, 1])]
        if len(kernel) != 2 or len(strides) != 2 or len(dil) != 2:
            raise LoweringError(op, n.name, "kernel_shape, strides and dilations must have 2 values")
        if _str_attr(n, "auto_pad", "NOTSET").startswith("SAME") and dil != [1, 1]:
            # ONNX Runtime pads for the undilated kernel here, ONNX shape inference for the dilated one
            raise LoweringError(op, n.name, "auto_pad SAME with dilations is not supported")
        pads = [int(p) for p in self._pads_2d(n, x, kernel, strides, dil)]
        ceil_mode = int(_attr(n, "ceil_mode", 0))
        include_pad = int(_attr(n, "count_include_pad", 0)) if op == "AveragePool" else 0
        for what, values in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
            if any(not 1 <= v <= 65535 for v in values):
                raise LoweringError(op, n.name, f"{what} {values} outside 1..65535")
        if len(pads) != 4 or any(not 0 <= p < kernel[i % 2] for i, p in enumerate(pads)):
            raise LoweringError(op, n.name, f"pads {pads} must be >= 0 and smaller than the kernel")
        if ceil_mode not in (0, 1) or include_pad not in (0, 1):
            raise LoweringError(op, n.name, "ceil_mode and count_include_pad must be 0 or 1")
        want = [x[0], x[1]] + [
            _pool_out_len(x[2 + a], kernel[a], strides[a], dil[a], pads[a], pads[2 + a], bool(ceil_mode))
            for a in range(2)
        ]
        got = self.shape(n.output[0], n)
        if got != want:
            raise LoweringError(
                op,
                n.name,
                f"output shape {got} differs from ONNX Runtime's {want} (ceil_mode "
                "windows starting in the padding are dropped by ONNX Runtime)",
            )
        params = {
            K["HFX_P_POOL_PAD_TOP"]: pads[0],
            K["HFX_P_POOL_PAD_LEFT"]: pads[1],
            K["HFX_P_POOL_PAD_BOTTOM"]: pads[2],
            K["HFX_P_POOL_PAD_RIGHT"]: pads[3],
            K["HFX_P_POOL_STRIDE_H"]: strides[0],
            K["HFX_P_POOL_STRIDE_W"]: strides[1],
            K["HFX_P_POOL_DILATION_H"]: dil[0],
            K["HFX_P_POOL_DILATION_W"]: dil[1],
            K["HFX_P_POOL_KERNEL_H"]: kernel[0],
            K["HFX_P_POOL_KERNEL_W"]: kernel[1],
            K["HFX_P_POOL_CEIL_MODE"]: ceil_mode,
            K["HFX_P_POOL_COUNT_INCLUDE_PAD"]: include_pad,
        }
        self._emit(n, t, POOLS[op], "vector", [self.read(n.input[0], n, t)], params)

    def _resize(self, n: onnx.NodeProto, t: int) -> None:
        op = n.op_type
        if self.opset < 11:
            raise LoweringError(op, n.name, f"opset {self.opset} Resize is not supported (opset 11 and later)")
        mode = _str_attr(n, "mode", "nearest")
        if mode not in ("nearest", "linear"):
            raise LoweringError(op, n.name, f"mode '{mode}' is not supported (nearest and linear only)")
        coord = _str_attr(n, "coordinate_transformation_mode", "half_pixel")
        if coord not in RESIZE_COORD:
            raise LoweringError(op, n.name, f"coordinate_transformation_mode '{coord}' is not supported")
        nearest = _str_attr(n, "nearest_mode", "round_prefer_floor")
        if mode == "nearest" and nearest not in RESIZE_NEAREST:
            raise LoweringError(op, n.name, f"nearest_mode '{nearest}' is not supported")
        for name in ("antialias", "exclude_outside"):
            if int(_attr(n, name, 0)):
                raise LoweringError(op, n.name, f"{name}=1 is not supported")
        x, y = self.shape(n.input[0], n), self.shape(n.output[0], n)
        rank = len(x)
        if rank < 2 or len(y) != rank:
            raise LoweringError(op, n.name, "the input needs rank >= 2")
        axes = [int(a) % rank for a in _attr(n, "axes", range(rank))]
        scales_name = n.input[2] if len(n.input) > 2 else ""
        sizes_name = n.input[3] if len(n.input) > 3 else ""
        sizes = self.const_ints(sizes_name, n) if sizes_name else []
        scales = np.ones(rank, np.float32)
        if sizes:
            if _str_attr(n, "keep_aspect_ratio_policy", "stretch") != "stretch":
                raise LoweringError(op, n.name, "keep_aspect_ratio_policy other than 'stretch' is not supported")
            if len(sizes) != len(axes):
                raise LoweringError(op, n.name, "sizes do not match the axes")
            for a, v in zip(axes, sizes):  # ONNX Runtime's scale of a size: f32(out) / f32(in)
                scales[a] = np.float32(v) / np.float32(x[a])
        elif scales_name:
            given = self.const_floats(scales_name, n)
            if len(given) != len(axes):
                raise LoweringError(op, n.name, "scales do not match the axes")
            for a, v in zip(axes, given):
                scales[a] = v
        else:
            raise LoweringError(op, n.name, "needs constant scales or sizes")
        if not all(np.isfinite(scales)) or not all(scales > 0):
            raise LoweringError(op, n.name, f"scales {scales.tolist()} must be finite and > 0")
        if any(scales[i] != 1 or y[i] != x[i] for i in range(rank - 2)):
            raise LoweringError(op, n.name, "only the last two axes can be resized")
        for a in (rank - 2, rank - 1):  # the kernel's rule: out = floor(in * scale), or just above it
            want = float(x[a]) * float(scales[a])
            if not (0 <= want - y[a] < 1 or 0 < y[a] - want <= 1e-5 * y[a]):
                raise LoweringError(op, n.name, f"output length {y[a]} is not floor({x[a]} * {scales[a]})")
        params = {
            K["HFX_P_RESIZE_MODE"]: K["HFX_RESIZE_LINEAR" if mode == "linear" else "HFX_RESIZE_NEAREST"],
            K["HFX_P_RESIZE_COORD"]: K[RESIZE_COORD[coord]],
            K["HFX_P_RESIZE_NEAREST_MODE"]: K[RESIZE_NEAREST[nearest]] if mode == "nearest" else 0,
            K["HFX_P_RESIZE_SCALE_H"]: _f32_bits(scales[rank - 2]),
            K["HFX_P_RESIZE_SCALE_W"]: _f32_bits(scales[rank - 1]),
        }
        self._emit(
            n, t, "HFX_OP_RESIZE", "vector" if mode == "linear" else "copy", [self.read(n.input[0], n, t)], params
        )

    def _reduce(self, n: onnx.NodeProto, t: int) -> None:
        rank = len(self.shape(n.input[0], n))
        axes_from_input = n.op_type == "ReduceSum" and self.opset >= 13 or self.opset >= 18
        if axes_from_input:
            axes = self.const_ints(n.input[1], n) if len(n.input) > 1 and n.input[1] else []
        else:
            axes = list(_attr(n, "axes", []))
        if not axes:
            if int(_attr(n, "noop_with_empty_axes", 0)):
                raise LoweringError(n.op_type, n.name, "noop_with_empty_axes=1 with no axes is not supported")
            axes = list(range(rank))
        mask = 0
        for a in axes:
            mask |= 1 << (a % rank)
        code = "HFX_OP_REDUCE_MEAN" if n.op_type == "ReduceMean" else "HFX_OP_REDUCE_SUM"
        self._emit(
            n,
            t,
            code,
            "vector",
            [self.read(n.input[0], n, t)],
            {K["HFX_P_REDUCE_AXES_MASK"]: mask, K["HFX_P_REDUCE_KEEPDIMS"]: int(_attr(n, "keepdims", 1))},
        )

    def _slice(self, n: onnx.NodeProto, t: int) -> None:
        dims = self.shape(n.input[0], n)
        rank = len(dims)
        if self.opset < 10:
            starts, ends = list(_attr(n, "starts")), list(_attr(n, "ends"))
            axes = list(_attr(n, "axes", range(len(starts))))
            steps = [1] * len(starts)
        else:
            starts, ends = self.const_ints(n.input[1], n), self.const_ints(n.input[2], n)
            axes = self.const_ints(n.input[3], n) if len(n.input) > 3 and n.input[3] else list(range(len(starts)))
            steps = self.const_ints(n.input[4], n) if len(n.input) > 4 and n.input[4] else [1] * len(starts)
        s, e, st = [0] * rank, [INT32_MAX] * rank, [1] * rank
        clamp = lambda v: max(-INT32_MAX - 1, min(INT32_MAX, v))  # noqa: E731
        for a, b, c, d in zip(axes, starts, ends, steps):
            s[a % rank], e[a % rank], st[a % rank] = clamp(b), clamp(c), clamp(d)
        params = {}
        for i in range(rank):
            params[K["HFX_P_SLICE_STARTS"] + i] = s[i]
            params[K["HFX_P_SLICE_ENDS"] + i] = e[i]
            params[K["HFX_P_SLICE_STEPS"] + i] = st[i]
        self._emit(n, t, "HFX_OP_SLICE", "copy", [self.read(n.input[0], n, t)], params)


def lower_pair(model: onnx.ModelProto, node: onnx.NodeProto, types: dict[str, onnx.TypeProto] | None = None) -> bytes:
    """The task program bytes of one FusedHexPair node (raises LoweringError)."""
    if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
        raise LoweringError(node.op_type, node.name, f"not a {C.DOMAIN}::{C.OP_TYPE} node")
    return _Lowerer(model, node, types if types is not None else _known_types(model)).lower()


def attach_programs(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy of the model with `program`/`program_version` set on every pair that lowers.

    Returns the model and {pair id: reason} for the pairs left without a program (they run by
    their fallback body even with the plugin loaded).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    types = _known_types(out)
    failed: dict[str, str] = {}
    for node in out.graph.node:
        if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
            continue
        keep = [a for a in node.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
        del node.attribute[:]
        node.attribute.extend(keep)
        try:
            program = lower_pair(out, node, types)
        except LoweringError as exc:
            failed[node.overload or node.name] = exc.message
            continue
        node.attribute.extend(
            [
                helper.make_attribute(C.ATTR_PROGRAM, program),
                helper.make_attribute(C.ATTR_PROGRAM_VERSION, C.PROGRAM_VERSION),
            ]
        )
    return out, failed


# ---------------------------------------------------------------------------------------
# Which body node each program op comes from (for per-op timing of the kernel trace)


@dataclass(frozen=True)
class OpOrigin:
    """Where program op `op` of a pair came from.

    `op` is the op's index in the program (the `op` field of the kernel trace's work items),
    `task` 0 for A and 1 for B. `body_index` is the index of the function-body node the op
    lowers (`node`, `op_type`: that node's name, "" when unnamed, and op type), and `output`
    the body tensor the op writes. An op the lowering adds to copy a pair output out (an output
    that is a constant or a formal input) has the Constant body node that made the value as its
    origin, or `body_index` None (`node` "output NAME", `op_type` "Identity") when the output is
    a formal input passed through."""

    op: int
    task: int
    body_index: int | None
    node: str
    op_type: str
    output: str


class _OriginLowerer(_Lowerer):
    """The lowering itself, recording the body node of every op it emits (the program is the
    one `lower_pair` returns: nothing here changes what is emitted)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.origins: list[OpOrigin] = []
        self._current: int | None = None
        self._lowered = 0  # lower() lowers the body nodes once each, in order

    def _lower_node(self, n: onnx.NodeProto, t: int) -> None:
        self._current, self._lowered = self._lowered, self._lowered + 1
        try:
            super()._lower_node(n, t)
        finally:
            self._current = None

    def _emit(
        self,
        n: onnx.NodeProto,
        task: int,
        code: str,
        engine: str,
        inputs: list[int],
        params: dict[int, int] | None = None,
    ) -> None:
        before = len(self.prog.ops)
        super()._emit(n, task, code, engine, inputs, params)
        for k in range(before, len(self.prog.ops)):
            self.origins.append(OpOrigin(k, task, self._current, n.name, n.op_type, n.output[0]))

    def lower(self) -> bytes:
        program = super().lower()
        # The ops after the emitted ones copy an output out (see _Lowerer.lower).
        made_by = {o: k for k, b in enumerate(self.fn.node) for o in b.output}
        outputs = {self.ids[o]: o for o in self.fn.output}
        for k in range(len(self.origins), len(self.prog.ops)):
            op = self.prog.ops[k]
            name = outputs.get(op.output, "")
            source = made_by.get(name)
            if source is not None:
                b = self.fn.node[source]
                self.origins.append(OpOrigin(k, op.task, source, b.name, b.op_type, name))
            else:
                self.origins.append(OpOrigin(k, op.task, None, f"output {name}", "Identity", name))
        return program


def program_op_nodes(
    model: onnx.ModelProto, node: onnx.NodeProto, types: dict[str, onnx.TypeProto] | None = None
) -> list[OpOrigin]:
    """The origin of every op of the pair's task program, indexed like the program's ops.

    The program is built exactly as `lower_pair` builds it (same bytes; raises LoweringError
    the same way). A body node lowers to one op, except a Constant, which lowers to none (its
    value becomes a program constant, or steers another op's parameters): such a node never
    appears here, and its cost, if any, is part of the op that reads it. Reshape, Flatten,
    Squeeze, Unsqueeze and Identity lower to a COPY op of their own. Time measured per program
    op (the trace's `op`) is attributed to a body node by summing over the ops naming it; the
    body nodes are the pair's original graph nodes (micro-batch pairs: two renamed copies of
    the chain, their tensors suffixed as `rewrite.microbatch_suffixes` says)."""
    if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
        raise LoweringError(node.op_type, node.name, f"not a {C.DOMAIN}::{C.OP_TYPE} node")
    lowerer = _OriginLowerer(model, node, types if types is not None else _known_types(model))
    lowerer.lower()
    return lowerer.origins


def program_op_maps(model: onnx.ModelProto) -> dict[str, list[OpOrigin]]:
    """`program_op_nodes` of every FusedHexPair node of the model that lowers, by node name
    (a pair that does not lower has no program, and is left out)."""
    types = _known_types(model)
    maps: dict[str, list[OpOrigin]] = {}
    for node in model.graph.node:
        if node.domain != C.DOMAIN or node.op_type != C.OP_TYPE:
            continue
        try:
            maps[node.name] = program_op_nodes(model, node, types)
        except LoweringError:
            continue
    return maps
