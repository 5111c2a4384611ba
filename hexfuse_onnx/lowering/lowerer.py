"""Lower one FusedHexPair (its node and function body) to the task program the kernel runs.

The function is the source of truth (the pair's body, or what its kind derives from the body:
`PairKind.program_function`): its nodes [0, num_nodes_a) are task A, the rest task B;
formal input i is the node's input i (A's first, then B's), formal output j the node's output j.
The formal inputs' types are given (the pass gives the ModelGraph's inferred ones); body tensors'
shapes are the function's value_info where it has them (the pass's, so a Reshape to a computed
shape is known), else ONNX shape inference of the body alone. Weights are node inputs
(graph initializers), so they are program inputs, not constants; only Constant nodes inside the
body become program constants. Integer inputs that only steer an op (Reshape shape, Slice
starts, ...) are read from the initializers at lowering time and declared in the program as
unused inputs of their dtype, so the io indices stay the node's.

Every emitted op records its origin (the body node it lowers), for per-op timing of the trace.

A float16 network runs in float32 between its boundaries: every float16 body tensor is float32 to
the lowerings (`dtype`), a float16 input is widened by one CAST where it is first read, a float16
output is rounded by one CAST after the ops (ONNX Runtime rounds every float16 op's output; the pair
rounds at its outputs and at the body's own Casts to float16), and float16 constants become float32
ones, exactly.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import onnx
import sympy
from onnx import helper, numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from .. import contract as C
from ..graph import QDQ_OPS
from ..profile import Engine as EngineClass
from ..profile import engine_of
from .abi import Dtype, Engine, Layout, Opcode, Role, Task
from .program import ARENA_BYTES, Op, Program, QuantEntry, Tensor, scratch_bytes
from .registry import LOWERINGS, ArenaOverflow, LoweringError, absent_when_empty, op_key, op_outside_kernel
from .traced import renumbered, traced_dims

DTYPES: dict[int, Dtype] = {
    onnx.TensorProto.FLOAT: Dtype.F32,
    onnx.TensorProto.FLOAT16: Dtype.F16,
    onnx.TensorProto.INT32: Dtype.I32,
    onnx.TensorProto.INT64: Dtype.I64,
    onnx.TensorProto.INT8: Dtype.I8,
    onnx.TensorProto.UINT8: Dtype.U8,
    onnx.TensorProto.UINT16: Dtype.U16,
    onnx.TensorProto.INT16: Dtype.I16,
    onnx.TensorProto.BOOL: Dtype.BOOL,
}
# numpy layout of the program constants a lowering writes
NP_DTYPES: dict[Dtype, str] = {
    Dtype.F32: "<f4",
    Dtype.U8: "<u1",
    Dtype.I8: "<i1",
    Dtype.I32: "<i4",
    Dtype.I64: "<i8",
    Dtype.U16: "<u2",
    Dtype.I16: "<i2",
    Dtype.BOOL: "|b1",
}

# Float types the kernel computes in: float16 runs in float32 between a pair's boundaries (see above).
KERNEL_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16})
# Output types a lowering-time fold never makes: the kernel's data (and unknown types).
_NOT_SHAPE_DTYPES = {0, onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}

KERNEL_ENGINE = {EngineClass.MATRIX: Engine.MATRIX, EngineClass.VECTOR: Engine.VECTOR, EngineClass.MEMORY: Engine.COPY}
# Ops whose params 0..7 are a window's pads, strides and dilations (ConvParam, PoolParam): of an auto_pad SAME_*
# node, their pads follow the input's side (`same_pads`, lowering.shapes)
WINDOWED = frozenset(
    {Opcode.CONV2D, Opcode.QCONV2D, Opcode.ICONV2D, Opcode.MAXPOOL, Opcode.AVGPOOL, Opcode.QMAXPOOL, Opcode.QAVGPOOL}
)


@dataclass(frozen=True)
class OpOrigin:
    """Where program op `op` of a pair came from.

    `op` is the op's index in the program (the `op` field of the kernel trace's work items),
    `task` 0 for A and 1 for B. `body_index` is the index of the node of the function lowered
    (`PairKind.program_function`: a micro-batch pair's copies, not its body) the op lowers
    (`node`, `op_type`: that node's name, "" when unnamed, and op type), and `output` the body
    tensor the op writes. An op the lowering adds to copy a pair output out (an output
    that is a constant or a formal input) has the Constant body node that made the value as its
    origin, or `body_index` None (`node` "output NAME", `op_type` "Identity") when the output is
    a formal input passed through."""

    op: int
    task: int
    body_index: int | None
    node: str
    op_type: str
    output: str


def attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def str_attr(node: onnx.NodeProto, name: str, default: str) -> str:
    v = attr(node, name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def f32_bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", float(x)))[0]


class Body(Protocol):
    """What deciding how a QDQ group lowers reads (`qmatmul.plan`, `qbias`): a pair's body
    (`Lowerer`) or a whole model (`qmatmul.GraphBody`, for the profile)."""

    out_index: dict[str, int]  # the tensors read outside (a pair's outputs, a model's graph outputs)

    @property
    def nodes(self) -> Sequence[onnx.NodeProto]: ...

    def known_value(self, name: str) -> np.ndarray | None: ...

    def dtype(self, name: str) -> int: ...

    def shape(self, name: str, op: onnx.NodeProto) -> list[int]: ...

    def node_task(self, k: int) -> Task: ...


class Lowerer:
    """The state of lowering one pair: program, tensor ids, constants, and the ops' origins."""

    def __init__(
        self,
        node: onnx.NodeProto,
        fn: onnx.FunctionProto,
        initializers: dict[str, onnx.TensorProto],
        types: dict[str, onnx.TypeProto],
        model_opset: int,
        ir_version: int,
    ) -> None:
        self.node, self.fn = node, fn
        self.pair = node.name or node.overload
        n_in_a = int(attr(node, C.ATTR_NUM_INPUTS_A, -1))
        n_out_a = int(attr(node, C.ATTR_NUM_OUTPUTS_A, -1))
        self.n_nodes_a = int(attr(node, C.ATTR_NUM_NODES_A, -1))
        if min(n_in_a, n_out_a, self.n_nodes_a) < 0:
            raise LoweringError(node.op_type, self.pair, "missing num_inputs_a/num_outputs_a/num_nodes_a")
        if len(fn.input) != len(node.input) or len(fn.output) != len(node.output):
            raise LoweringError(node.op_type, self.pair, "node and function body disagree on inputs/outputs")
        self.n_in_a, self.n_out_a = n_in_a, n_out_a
        self.ir_version = ir_version
        self.inits = initializers
        self.opset = next((o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")), model_opset)
        self.formal: dict[str, str] = dict(zip(fn.input, node.input))  # formal name -> actual name
        self.types: dict[str, onnx.TypeProto] = {}
        for f, a in self.formal.items():
            if a not in types:
                raise LoweringError(node.op_type, self.pair, f"unknown type/shape of input '{a}'")
            self.types[f] = types[a]
        for v in fn.value_info:  # body tensors the pass knows (a Reshape to a computed shape)
            self.types.setdefault(v.name, v.type)
        for n in fn.node:  # name the first op the kernel cannot run before anything else
            error = op_outside_kernel(n)
            if error is not None:
                raise error
        # formal input -> its value, flattened, as expressions of the model's dim names (the pass's shape_values:
        # a decode step's past length computed outside the pair), set by lower_function
        self.shape_values: dict[str, tuple[sympy.Expr, ...]] = {}
        self._infer_body(ir_version)
        self.static: dict[str, np.ndarray] = {}  # formal or body tensor -> constant value
        for f, a in self.formal.items():
            # Only integer initializers steer ops (shapes, axes); float weights stay program
            # inputs and are never read here, so large or external weights cost nothing.
            # An integer initializer in an external file (1 KiB or more: quantized weights, never a shape or an
            # axis) stays an input too: its file is where the model is, not where the pass runs.
            init = self.inits.get(a)
            if (
                init is not None
                and init.data_type not in KERNEL_FLOATS
                and init.data_location != onnx.TensorProto.EXTERNAL
            ):
                self.static[f] = numpy_helper.to_array(init)
        self.prog = Program()
        self.ids: dict[str, int] = {}  # body tensor -> program tensor id
        self.widened: dict[str, int] = {}  # float16 formal input -> its float32 copy (`read`)
        self.task_of: dict[str, Task] = {}
        self.folded: dict[str, tuple[str, list[int]]] = {}  # Pad output -> (its input, spatial pads) for the Conv
        self.norm_after: dict[str, onnx.NodeProto] = {}  # Conv output -> the BatchNormalization folded into it
        self.check_arena = True  # at the shapes the pass analyses; at others the kernel may serialize
        self.empty: set[str] = set()  # body tensors of no element: a node that makes only these runs nothing
        self.origins: list[OpOrigin] = []
        self._body_index: int | None = None  # the body node being lowered
        self.scratch_node: dict[int, int] = {}  # scratch program id -> the body node whose lowering made it
        self.same_pads: dict[int, onnx.NodeProto] = {}  # op index -> its auto_pad SAME_* node (a WINDOWED op)
        # op index -> (param slot, axis, offset slot): the param is the op's param at the offset slot plus its output
        # dim on that axis (a Slice end known only at run time: its start + the output's length); the shape section
        # patches it with that dim's expression (lowering.shapes)
        self.output_params: dict[int, list[tuple[int, int, int]]] = {}
        # op index -> param slot -> (formal input, element) of a value in `shape_values`: the shape section
        # patches the param with that element's expression (a Slice start)
        self.value_params: dict[int, dict[int, tuple[str, int]]] = {}
        # body tensor -> its axes whose length differs at a second binding of symbolic input dims: an
        # op whose params or tables follow such a length lowers the way that does not (lowering.shapes)
        self.varying: dict[str, set[int]] = {}
        self._shared_constants: dict[tuple[Task, Dtype, tuple[int, ...], bytes], int] = {}  # see shared_constant
        # a ReduceMean/ReduceSum node's name -> the perm of the Transpose ORT's optimizer moves below it, whose input
        # ORT then sums (ort_graph.pushed_transposes)
        self.ort_transposes: dict[str, list[int]] = {}

    def _infer_body(self, ir_version: int) -> None:
        m = self.body_model({f: self.types[f] for f in self.fn.input}, ir_version)
        try:
            inferred = shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
        except Exception as exc:  # noqa: BLE001
            raise LoweringError(self.node.op_type, self.pair, f"shape inference of the body failed: {exc}") from None
        g = inferred.graph
        for v in list(g.value_info) + list(g.output):
            if v.type.tensor_type.elem_type:
                self.types.setdefault(v.name, v.type)
        self._type_contrib_qdq()

    def _type_contrib_qdq(self) -> None:
        """Types of com.microsoft QuantizeLinear/DequantizeLinear outputs (the 16-bit QDQ ops) that
        ONNX's inference leaves unknown: the input's shape, f32 or the zero point's type (u8
        without one). The pass types the graph's own; this covers the body's DequantizeLinear copies."""
        for n in self.fn.node:
            if n.domain != "com.microsoft" or n.op_type not in QDQ_OPS:
                continue
            if n.output[0] in self.types or n.input[0] not in self.types:
                continue
            elem: int = onnx.TensorProto.FLOAT
            if n.op_type == "QuantizeLinear":
                zp = n.input[2] if len(n.input) > 2 else ""
                elem = self.dtype(zp) if zp and self.dtype(zp) else onnx.TensorProto.UINT8
            out = onnx.TypeProto()
            out.CopyFrom(self.types[n.input[0]])
            out.tensor_type.elem_type = elem
            self.types[n.output[0]] = out

    def body_model(self, input_types: dict[str, onnx.TypeProto], ir_version: int) -> onnx.ModelProto:
        """The function body as a model of its formal inputs (of these types), with the
        initializers that steer ops, for shape inference; a value that follows the shapes
        (`shape_values`) stays an input of no known value."""
        g_inputs = [helper.make_value_info(f, input_types[f]) for f in self.fn.input]
        # float initializers that steer an op (Resize roi/scales) are given to shape inference too
        steering = {i for n in self.fn.node if n.op_type == "Resize" for i in n.input[1:] if i}
        renamed = []
        for f, a in zip(self.fn.input, self.node.input):
            if (
                a in self.inits
                and f not in self.shape_values
                and (self.inits[a].data_type not in KERNEL_FLOATS or f in steering)
            ):
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
            value_info=list(self.fn.value_info),
        )
        return helper.make_model(graph, opset_imports=list(self.fn.opset_import), ir_version=ir_version)

    @property
    def nodes(self) -> Sequence[onnx.NodeProto]:
        return self.fn.node

    # ---- tensors ----

    def set_second_binding(self, other: Lowerer) -> None:
        """Record which body tensor axes have another length in `other` (the second binding)."""
        for name, t in self.types.items():
            u = other.types.get(name)
            if u is None or not t.tensor_type.HasField("shape") or not u.tensor_type.HasField("shape"):
                continue
            a, b = t.tensor_type.shape.dim, u.tensor_type.shape.dim
            axes = {i for i in range(min(len(a), len(b))) if a[i].dim_value != b[i].dim_value or not a[i].dim_value}
            if axes or len(a) != len(b):
                self.varying[name] = axes | set(range(min(len(a), len(b)), max(len(a), len(b))))

    def shape(self, name: str, op: onnx.NodeProto) -> list[int]:
        """The static dims of a tensor an op works on. No op touches an empty tensor: the kernel runs
        no op that reads one into a non-empty result (hfx_no_empty_input), so an empty input only
        holds its io slot (_declare_inputs) and the ops that ignore it skip it (EMPTY_MEANS_ABSENT)."""
        dims = self._dims(name, op)
        if 0 in dims:
            shape = "x".join(map(str, dims))
            raise LoweringError(
                op.op_type, op.name or name, f"'{name}' is empty ({shape}): no op of the kernel runs on an empty tensor"
            )
        return dims

    def _dims(self, name: str, op: onnx.NodeProto) -> list[int]:
        t = self.types.get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            raise LoweringError(op.op_type, op.name or name, f"unknown shape of '{name}'")
        dims = []
        for d in t.tensor_type.shape.dim:
            if not d.HasField("dim_value") or d.dim_value < 0:
                raise LoweringError(op.op_type, op.name or name, f"'{name}' has a dynamic dim")
            dims.append(int(d.dim_value))
        if len(dims) > Layout.MAX_RANK:
            raise LoweringError(op.op_type, op.name or name, f"'{name}' has rank {len(dims)} > 8")
        return dims

    def given(self, n: onnx.NodeProto, k: int) -> str:
        """Node input k's name, or "" when it is not given or, being empty, counts as not given
        (registry.EMPTY_MEANS_ABSENT: a Concat operand or a prefill's past of length 0)."""
        name = n.input[k] if len(n.input) > k else ""
        return "" if name and absent_when_empty(n, k) and self.has_no_element(name) else name

    def dtype(self, name: str) -> int:
        """The ONNX type the program computes the tensor in: float16 is float32 (`stored_dtype`: as stored)."""
        stored = self.stored_dtype(name)
        return onnx.TensorProto.FLOAT if stored == onnx.TensorProto.FLOAT16 else stored

    def stored_dtype(self, name: str) -> int:
        return int(self.types[name].tensor_type.elem_type) if name in self.types else 0

    def read(self, name: str, op: onnx.NodeProto, task: Task) -> int:
        """Program id of a float tensor an op reads."""
        self._not_empty(name, op)
        if name not in self.ids:
            if name in self.static and self.static[name].dtype in (np.float32, np.float16):
                self.ids[name] = self.constant(self.static[name], task)
                self.task_of[name] = task
            else:
                raise LoweringError(op.op_type, op.name, f"input '{name}' is not available to the program")
        if self.task_of[name] != task:
            raise LoweringError(op.op_type, op.name, f"'{name}' crosses from one task to the other")
        if self.prog.tensors[self.ids[name]].dtype == Dtype.F16:
            return self._widened(name, task)
        if self.prog.tensors[self.ids[name]].dtype != Dtype.F32:
            kind = self.prog.tensors[self.ids[name]].dtype.name.lower()
            raise LoweringError(op.op_type, op.name, f"'{name}' is {kind}, not float32 (nor float16, run as float32)")
        return self.ids[name]

    def stored_half(self, name: str, op: onnx.NodeProto, task: Task) -> int | None:
        """The float16 program tensor of float16 input `name` as stored (an op that moves data need not
        widen it all), or None when `name` is held in float32."""
        tid = self.ids.get(name)
        if tid is None or self.prog.tensors[tid].dtype != Dtype.F16:
            return None
        self._not_empty(name, op)
        if self.task_of[name] != task:
            raise LoweringError(op.op_type, op.name, f"'{name}' crosses from one task to the other")
        return tid

    def _widened(self, name: str, task: Task) -> int:
        """The float32 copy of float16 input `name`, made by one CAST where it is first read."""
        if name not in self.widened:
            half = self.ids[name]
            self.widened[name] = self.scratch(traced_dims(self.prog, half), task)
            self._append(Op(Opcode.CAST, Engine.VECTOR, task, [half], self.widened[name]), name)
        return self.widened[name]

    def _append(self, op: Op, written: str) -> None:
        """Append `op`, made by lowering the current body node, which writes body tensor `written`."""
        self.prog.ops.append(op)
        k = self._body_index
        node = self.fn.node[k] if k is not None else None
        name, op_type = (node.name, node.op_type) if node is not None else (f"input {written}", "Cast")
        self.origins.append(OpOrigin(len(self.prog.ops) - 1, op.task, k, name, op_type, written))

    def read_typed(self, name: str, op: onnx.NodeProto, task: Task, dtype: Dtype) -> int:
        """Program id of a tensor of `dtype` an op reads (the quantization ops' integer tensors; an
        integer value known when lowering, a Constant's, becomes a program constant)."""
        if dtype == Dtype.F32:
            return self.read(name, op, task)
        self._not_empty(name, op)
        if name not in self.ids and name in self.static and dtype in NP_DTYPES:
            self.ids[name] = self.constant(self.static[name], task, dtype)
            self.task_of[name] = task
        if name not in self.ids:
            raise LoweringError(op.op_type, op.name, f"input '{name}' is not available to the program")
        if self.task_of[name] != task:
            raise LoweringError(op.op_type, op.name, f"'{name}' crosses from one task to the other")
        if self.prog.tensors[self.ids[name]].dtype != dtype:
            raise LoweringError(op.op_type, op.name, f"'{name}' is not {dtype.name.lower()}")
        return self.ids[name]

    def _not_empty(self, name: str, op: onnx.NodeProto) -> None:
        if name in self.empty and name in self.types:
            self.shape(name, op)  # refuses it, naming its shape

    def read_any(self, name: str, op: onnx.NodeProto, task: Task) -> tuple[int, Dtype]:
        """Program id and dtype of a tensor an op that moves or adds data of any type reads."""
        dtype = DTYPES.get(self.dtype(name))
        if dtype is None:
            kind = onnx.TensorProto.DataType.Name(self.dtype(name)) if self.dtype(name) else "of unknown type"
            raise LoweringError(op.op_type, op.name, f"'{name}' is {kind}, which the task program does not carry")
        return self.read_typed(name, op, task, dtype), dtype

    def const_ints(self, name: str, op: onnx.NodeProto) -> list[int]:
        if name not in self.static:
            raise LoweringError(op.op_type, op.name, f"'{name}' must be a constant (initializer or Constant)")
        return [int(v) for v in np.asarray(self.static[name]).reshape(-1)]

    def follows_shapes(self, name: str) -> bool:
        """Whether a value that steers an op may differ at another binding of the symbolic dims: a node input
        that is not an initializer (a Shape's dims computed outside the pair), or made in the body from a Shape
        or Size. A Constant's, an initializer's and what is folded from them alone do not."""
        made_by = next((n for n in self.fn.node if name in n.output), None)
        if made_by is None:
            return name in self.formal and (self.formal[name] not in self.inits or name in self.shape_values)
        return made_by.op_type in ("Shape", "Size") or any(self.follows_shapes(i) for i in made_by.input if i)

    def known_value(self, name: str) -> np.ndarray | None:
        """The value of a body tensor known at lowering time (a Constant, folded, or an initializer)."""
        if not name:
            return None
        if name in self.static:
            return np.asarray(self.static[name])
        init = self.inits.get(self.formal.get(name, ""))
        if init is not None and init.data_location != onnx.TensorProto.EXTERNAL:  # external: not read here
            return numpy_helper.to_array(init)
        return None

    def const_floats(self, name: str, op: onnx.NodeProto) -> np.ndarray:
        """The float32 values of a constant float input (Resize scales, a Pow exponent): a Constant, an
        initializer, or a per-tensor DequantizeLinear of those (a QDQ model's quantized constant)."""
        arr = self.constant_value(name)
        if arr is None:
            raise LoweringError(op.op_type, op.name, f"'{name}' must be a constant (initializer or Constant)")
        return np.asarray(arr, dtype=np.float32).reshape(-1)

    def constant_value(self, name: str) -> np.ndarray | None:
        """`known_value`, or a DequantizeLinear of known values (a QDQ model's quantized constant) as
        ONNX Runtime computes it (quant.dequantized)."""
        from .quant import dequantized  # quant.py lowers through this module

        value = self.known_value(name)
        made_by = next((n for n in self.fn.node if name in n.output), None)
        if value is not None or made_by is None:
            return value
        return dequantized(made_by, [self.known_value(i) for i in made_by.input if i])

    def node_task(self, k: int) -> Task:
        """The task of body node k: A's nodes come first."""
        return Task.A if k < self.n_nodes_a else Task.B

    # ---- lowering ----

    def lower(self) -> bytes:
        from . import conv_bn, qeltwise, qmatmul  # import this module

        self._declare_inputs()
        integer = qmatmul.plan(self)
        elementwise = qeltwise.plan(self, integer)
        norms = conv_bn.plan(self)
        self.norm_after = {self.fn.node[c].output[0]: self.fn.node[b] for c, b in norms.items()}
        absorbed = integer.absorbed | elementwise.absorbed | set(norms.values())
        for k, n in enumerate(self.fn.node):
            self._body_index = k
            task = self.node_task(k)
            if k in integer.groups:
                qmatmul.emit(self, integer.groups[k], task)
            elif k in elementwise.emit:
                elementwise.emit[k](task)
            elif k not in absorbed and not self._folds(n) and not self._makes_nothing(n):
                LOWERINGS[op_key(n)](self, n, task)
        self._body_index = None
        self._copy_out_outputs()
        self._drop_unread()
        p = self.prog
        if not p.ops:
            raise LoweringError(self.node.op_type, self.pair, "the pair has no op to run")
        if len(p.ops) > Layout.MAX_OPS or len(p.tensors) > Layout.MAX_TENSORS:
            raise LoweringError(self.node.op_type, self.pair, "too many ops or tensors for one program")
        if self.check_arena:
            self._check_arena()
        return p.encode()

    def _drop_unread(self) -> None:
        """Drop the ops no output needs (Program.drop_unread): work the device would do for nothing."""
        kept, remap = self.prog.drop_unread()
        for t in self.prog.tensors:  # a scratch dim names the tensors it was computed from by id
            t.dims = renumbered(t.dims, remap)
        by_op = {o.op: o for o in self.origins}
        self.origins = [replace(by_op[k], op=new) for new, k in enumerate(kept) if k in by_op]
        self.ids = {name: remap[t] for name, t in self.ids.items() if t in remap}
        self.widened = {name: remap[t] for name, t in self.widened.items() if t in remap}
        self.scratch_node = {remap[t]: k for t, k in self.scratch_node.items() if t in remap}
        self.same_pads = {new: self.same_pads[k] for new, k in enumerate(kept) if k in self.same_pads}
        self.output_params = {new: self.output_params[k] for new, k in enumerate(kept) if k in self.output_params}
        self.value_params = {new: self.value_params[k] for new, k in enumerate(kept) if k in self.value_params}
        self._shared_constants = {key: remap[t] for key, t in self._shared_constants.items() if t in remap}

    def _check_arena(self) -> None:
        """At the shapes it is lowered at, a pair whose tasks' scratch cannot share the kernel's arena
        would always run one task after the other: no overlap, and the call overhead on top."""
        need = [scratch_bytes(self.prog, task) for task in (Task.A, Task.B)]
        if sum(need) > ARENA_BYTES:
            raise ArenaOverflow(
                self.node.op_type,
                self.pair,
                f"its tasks' scratch takes {need[0] / 2**20:.2f} and {need[1] / 2**20:.2f} MiB of the kernel's "
                f"{ARENA_BYTES / 2**20:.0f} MiB arena: too much together, it would run them one after the other",
            )

    def _folds(self, n: onnx.NodeProto) -> bool:
        """Compute shape arithmetic when lowering: Shape and Size of a known shape, and a node whose inputs
        are all known and whose outputs are integers or booleans (the TorchScript exports' Gather,
        Unsqueeze, Concat, Equal, Where ... on Shape). Its value steers its consumers; no op runs."""
        if n.op_type == "Shape":
            dims = np.array(self.shape(n.input[0], n), np.int64)
            self.static[n.output[0]] = dims[int(attr(n, "start", 0)) : attr(n, "end", None)]
            return True
        if n.op_type == "Size":  # only of a shape no symbolic dim moves: its value steers no shape expression
            if self.varying.get(n.input[0]):
                return False
            self.static[n.output[0]] = np.array(np.prod(self.shape(n.input[0], n)), np.int64)
            return True
        inputs = [t for t in n.input if t]
        kinds = {self.dtype(o) for o in n.output if o}
        if not inputs or any(t not in self.static for t in inputs) or not kinds.isdisjoint(_NOT_SHAPE_DTYPES):
            return False
        if any(self.varying.get(o) for o in n.output if o) and op_key(n) in LOWERINGS:
            return False  # a value whose length follows the input shapes (a Range to seq) is no constant: an op

        try:
            values = ReferenceEvaluator(n).run(None, {t: self.static[t] for t in inputs})
        except Exception:  # noqa: BLE001 - not foldable: the op's own lowering decides
            return False
        self.static.update((o, np.asarray(v)) for o, v in zip(n.output, values) if o)
        return True

    def _makes_nothing(self, n: onnx.NodeProto) -> bool:
        """A Q/DQ of no element runs nothing: of a constant (the quantiser folds OpenSpindleNet's zero
        padding before a Concat to [1, 0, 1]) or of a QDQ prefill's empty past. Its output is as
        empty; only an op that takes it as absent may read it (EMPTY_MEANS_ABSENT)."""
        if n.op_type not in QDQ_OPS or n.output[0] in self.out_index:
            return False
        static = self.static.get(n.input[0])
        if not (self.has_no_element(n.input[0]) or (static is not None and np.asarray(static).size == 0)):
            return False
        self.empty.add(n.output[0])
        return True

    def has_no_element(self, name: str) -> bool:
        t = self.types.get(name)
        if name in self.empty:
            return True
        dims = t.tensor_type.shape.dim if t is not None and t.tensor_type.HasField("shape") else []
        return any(d.HasField("dim_value") and d.dim_value == 0 for d in dims)

    def _declare_inputs(self) -> None:
        p = self.prog
        for i, f in enumerate(self.fn.input):
            task = Task.A if i < self.n_in_a else Task.B
            elem = self.stored_dtype(f)
            if elem not in DTYPES:
                name = onnx.TensorProto.DataType.Name(elem) if elem else "unknown"
                raise LoweringError(
                    self.node.op_type,
                    self.pair,
                    f"input '{self.formal[f]}' is {name}, which the task program does not carry",
                )
            dims = self._dims(f, self.node)
            if 0 in dims:
                self.empty.add(f)  # declared for its io slot only: no op reads it (see `shape`)
            if f in self.ids:
                raise LoweringError(self.node.op_type, self.pair, f"formal input '{f}' listed twice")
            self.ids[f] = p.add(Tensor(DTYPES[elem], Role.INPUT, task, dims, io=i))
            self.task_of[f] = task
        n_out = len(self.fn.output)
        p.n_io = [self.n_in_a, len(self.fn.input) - self.n_in_a, self.n_out_a, n_out - self.n_out_a]
        self.out_index = {o: j for j, o in enumerate(self.fn.output)}

    def _copy_out_outputs(self) -> None:
        """Copy out each output that is a constant or a formal input (no op of the body writes it), and
        round each float16 output (computed in float32) to float16."""
        p = self.prog
        made_by = {o: k for k, b in enumerate(self.fn.node) for o in b.output}
        for j, o in enumerate(self.fn.output):
            task = Task.A if j < self.n_out_a else Task.B
            if o in self.ids and p.tensors[self.ids[o]].role == Role.OUTPUT:
                if task != p.tensors[self.ids[o]].task:
                    raise LoweringError(self.node.op_type, self.pair, f"output '{o}' is listed for the wrong task")
                continue
            if o in made_by and o in self.static and self.static[o].dtype != np.float32:  # float: a constant
                b = self.fn.node[made_by[o]]
                raise LoweringError(
                    b.op_type,
                    b.name,
                    f"output '{o}' is shape arithmetic the lowering computes from shapes and constants: "
                    "no op of the program writes it",
                )
            src = self.read(o, helper.make_node("Identity", [o], [o], name=f"output {o}"), task)
            half = self.stored_dtype(o) == onnx.TensorProto.FLOAT16  # a float16 output is rounded once, here
            dims = list(p.tensors[src].dims)
            dst = p.add(Tensor(Dtype.F16 if half else Dtype.F32, Role.OUTPUT, task, dims, io=j))
            opcode, engine = (Opcode.CAST, Engine.VECTOR) if half else (Opcode.COPY, Engine.COPY)
            p.ops.append(Op(opcode, engine, task, [src], dst))
            if not half:  # a float16 output's name stays on its float32 value: the shape section reads its dims there
                self.ids[o] = dst
            source = made_by.get(o)
            if source is not None:
                b = self.fn.node[source]
                self.origins.append(OpOrigin(len(p.ops) - 1, task, source, b.name, b.op_type, o))
            else:
                self.origins.append(OpOrigin(len(p.ops) - 1, task, None, f"output {o}", "Identity", o))

    def scratch(self, dims: list[int], task: Task, dtype: Dtype = Dtype.F32) -> int:
        """A program tensor for an intermediate of a lowering that emits several ops. It derives
        from the body node being lowered (`scratch_node`), whose tensors give its dims' expressions."""
        tid = self.prog.add(Tensor(dtype, Role.SCRATCH, task, list(dims)))
        if self._body_index is not None:
            self.scratch_node[tid] = self._body_index
        return tid

    def quantized(
        self, tid: int, scale: Any, zero: Any, task: Task, axis: int = -1, zero_id: int | None = None
    ) -> None:
        """Record program tensor tid's scale and zero point (the v2 quantization section): one each
        (axis -1) or one per index of `axis`. They become constants of the task, unless `zero_id`
        names the zero point constant an op already reads."""
        dtype = self.prog.tensors[tid].dtype
        scale = np.asarray(scale, np.float32).reshape(-1)
        if zero_id is None:
            zero = np.zeros(1, np.int64) if zero is None else np.asarray(zero).reshape(-1)
            n = max(scale.size, zero.size)  # one per tensor, the other per channel: both per channel
            scale, zero = np.broadcast_to(scale, (n,)), np.broadcast_to(zero, (n,))
            zero_id = self.shared_constant(zero, task, dtype)
        scale_id = self.shared_constant(scale, task, Dtype.F32)
        self.prog.quantize(tid, QuantEntry(scale_id, zero_id, axis if scale.size > 1 else -1))

    def shared_constant(self, value: np.ndarray, task: Task, dtype: Dtype) -> int:
        """A constant of the task, one program tensor for every reader of the same value (the
        quantization section's scales; an integer weight that unrolled steps of a recurrent net all
        read: captcha_crnn_qdq_u8u8's LSTM held 20 copies of its 1.6 MB weight per direction)."""
        arr = np.array(value, dtype=NP_DTYPES[dtype])
        key = (task, dtype, arr.shape, arr.tobytes())
        if key not in self._shared_constants:
            self._shared_constants[key] = self.constant(arr, task, dtype)
        return self._shared_constants[key]

    def constant(self, value: np.ndarray, task: Task, dtype: Dtype = Dtype.F32) -> int:
        """A program constant computed at lowering time (float32 unless `dtype` says otherwise)."""
        arr = np.array(value, dtype=NP_DTYPES[dtype])  # C order; a scalar stays rank 0 (ascontiguousarray: [1])
        return self.prog.add(Tensor(dtype, Role.CONSTANT, task, list(arr.shape), data=arr.tobytes()))

    def _out(self, n: onnx.NodeProto, task: Task, name: str | None = None, dtype: Dtype = Dtype.F32) -> int:
        name = name or n.output[0]
        if DTYPES.get(self.dtype(name)) != dtype:
            raise LoweringError(n.op_type, n.name, f"output '{name}' is not {dtype.name.lower()}")
        dims = self.shape(name, n)
        j = self.out_index.get(name)
        if j is not None and self.stored_dtype(name) != onnx.TensorProto.FLOAT16:  # float16: _copy_out_outputs
            tid = self.prog.add(Tensor(dtype, Role.OUTPUT, task, dims, io=j))
        else:
            tid = self.prog.add(Tensor(dtype, Role.SCRATCH, task, dims))
        self.ids[name] = tid
        self.task_of[name] = task
        return tid

    def typed_output(self, n: onnx.NodeProto, task: Task, name: str, dtype: Dtype) -> int:
        """The program tensor of n's output `name` (of `dtype`) for an op that writes a second output."""
        return self._out(n, task, name, dtype)

    def emit(
        self,
        n: onnx.NodeProto,
        task: Task,
        opcode: Opcode,
        inputs: list[int],
        params: dict[Any, int] | None = None,
        out: str | int | None = None,
        engine: EngineClass | None = None,
        out_dtype: Dtype = Dtype.F32,
    ) -> int:
        """Append the op computing n's first output (of `out_dtype`) from the program tensors
        `inputs`, on the kernel engine of n's engine class (`profile.engine_of`, the table the cost
        model uses); `params`: parameter slot (an abi parameter enum, or an int) -> value. A lowering
        that emits several ops names the op's output: `out` a body tensor of n (Split's outputs) or a
        `scratch` id, and `engine` for a helper op outside n's class (a 1-D Conv's reshape
        copies). Returns the output's program id."""
        if out is None:
            if len(n.output) > 1 and any(n.output[1:]):
                raise LoweringError(n.op_type, n.name, "only the first output is supported")
            out = n.output[0]
        target = self._out(n, task, out, out_dtype) if isinstance(out, str) else out
        op = Op(opcode, KERNEL_ENGINE[engine or engine_of(n)], task, inputs, target)
        for k, v in (params or {}).items():
            op.params[k] = int(v)
        self.prog.ops.append(op)
        written = out if isinstance(out, str) else n.output[0]
        if opcode in WINDOWED and str_attr(n, "auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
            self.same_pads[len(self.prog.ops) - 1] = n
        self.origins.append(OpOrigin(len(self.prog.ops) - 1, task, self._body_index, n.name, n.op_type, written))
        return target
