"""QDQ MatMul/Gemm/Conv groups in integers: DQ(A) + DQ(B) [+ DQ(bias)] -> MatMul/Gemm/Conv -> Q
lowers to one QMATMUL or QCONV2D (dsp/ref/ref_qmatmul.h), as ONNX Runtime's QDQ fusion runs it
(QLinearMatMul / QGemm / QLinearConv). A QOperator model's QLinearMatMul / QLinearConv node is that
group already: it lowers to the same op with the same operands (`qlinear`).

A group fits when A, B and Y are u8/i8 per tensor (B may be per output column / channel) of the
types ORT fuses (`ort_fuses`: Y of A's type, an i8 A with an i8 B), the scales and zero points are
initializers, B is a 2-D (Conv: 3-D or 4-D) initializer read by a DequantizeLinear, or a Conv's or
Gemm's float initializer that ORT quantizes to int8 (`qbias.ort_weight`), a Gemm has transA 0,
alpha 1, beta 1, a Conv is 1-D or 2-D (1-D: QCONV2D on [N, C, 1, T] copies, H = 1), and a bias is
read by a DequantizeLinear from int32 with zero point 0 and scale s_a * s_b, or is a float
initializer that ORT quantizes so (`qbias`). Any other group keeps the float path (its DQ, op and Q
each lowered on their own; a weight or bias ORT quantizes, dequantized as ORT does: `matrix`). The
op goes to the engine the profile costs an 8-bit group on (`profile.engine_at_width`: the vector
engine, where the Hexagon build runs it with vrmpy). The profile asks the same question of the whole
model (`qeltwise.model_plan`), and costs the other groups' ops in f32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from ..graph import ModelGraph, has_values
from ..profile import engine_at_width
from .abi import ConvParam, Dtype, Opcode, Task
from .lowerer import DTYPES, Body, Lowerer, attr
from .matrix import conv_params
from .qbias import ort_bias, ort_weight
from .registry import LoweringError, lowers
from .spatial import as_2d, emit_1d, lift_1d, pads_2d

# the integer kernels' operand types. A 16-bit group keeps the float path (DQ, f32 op, Q), as ONNX
# Runtime runs it: its QDQ fusion to QLinearConv/QLinearMatMul takes 8-bit groups only.
EIGHT_BIT = {Dtype.U8, Dtype.I8}


@dataclass
class _Group:
    op: int  # body index of the MatMul/Gemm/Conv
    a_dq: int
    b_dq: int | None  # None: B is a float initializer, quantized as ORT does (`qbias.ort_weight`)
    q: int
    bias_dq: int | None
    float_bias: bool = False  # the bias is a float initializer, quantized as ORT does (`qbias`)


@dataclass
class IntegerGroups:
    """The body's groups that lower to QMATMUL: the op's index -> its group, and the indices of the
    Q/DQ nodes the QMATMUL replaces (lowered to nothing)."""

    groups: dict[int, _Group] = field(default_factory=dict)
    absorbed: set[int] = field(default_factory=set)


def _producers(nodes: Sequence[onnx.NodeProto]) -> dict[str, int]:
    return {o: k for k, n in enumerate(nodes) for o in n.output if o}


def _consumers(nodes: Sequence[onnx.NodeProto]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            if i:
                out.setdefault(i, []).append(k)
    return out


def _is(n: onnx.NodeProto, op: str) -> bool:
    return n.op_type == op and n.domain in ("", "ai.onnx")


def _match(cx: Body, k: int, prod: dict[str, int], cons: dict[str, list[int]]) -> _Group | None:
    nodes, n = cx.nodes, cx.nodes[k]
    if not any(_is(n, op) for op in ("MatMul", "Gemm", "Conv")) or n.output[0] in cx.out_index:
        return None
    found = [prod.get(i) for i in n.input[:3] if i]
    dqs = [d for d in found if d is not None and _is(nodes[d], "DequantizeLinear")]
    float_bias = len(found) == 3 and found[2] is None  # an initializer: ORT quantizes it (`qbias`)
    float_weight = len(found) > 1 and found[1] is None and ort_weight(cx, n) is not None
    if found[0] not in dqs or (found[1] not in dqs and not float_weight):
        return None
    if len(dqs) + float_bias + float_weight != len(found):
        return None
    users = cons.get(n.output[0], [])
    if len(users) != 1 or not _is(nodes[users[0]], "QuantizeLinear"):
        return None
    members = [*dqs, users[0]]
    if any(cx.node_task(m) != cx.node_task(k) for m in members):
        return None
    b_dq = None if float_weight else found[1]
    bias_dq = found[2] if len(found) > 2 and not float_bias else None
    return _Group(k, dqs[0], b_dq, users[0], bias_dq, float_bias)


def _integer_group(cx: Body, k: int, prod: dict[str, int], cons: dict[str, list[int]]) -> _Group | None:
    """Node k's group when it lowers to QMATMUL/QCONV2D (see the module doc), else None."""
    g = _match(cx, k, prod, cons)
    return g if g is not None and _operands(cx, g) is not None else None


@dataclass
class GraphBody:
    """A whole model as the lowering's `Body`, one task (a pair takes a QDQ group whole)."""

    g: ModelGraph

    def __post_init__(self) -> None:
        self.out_index = {o: j for j, o in enumerate(self.g.graph_outputs)}

    @property
    def nodes(self) -> Sequence[onnx.NodeProto]:
        return self.g.nodes

    def known_value(self, name: str) -> np.ndarray | None:
        """An initializer's value (None when not loaded) or a Constant's."""
        t = self.g.initializers.get(name)
        k = self.g.producer.get(name)
        if t is None and k is not None and self.g.nodes[k].op_type == "Constant":
            t = attr(self.g.nodes[k], "value")
        return numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) and has_values(t) else None

    def dtype(self, name: str) -> int:
        return self.g.info(name).elem_type

    def shape(self, name: str, op: onnx.NodeProto) -> list[int]:
        """Its dims, -1 where not known (deciding a group reads ranks only)."""
        return [d if isinstance(d, int) else -1 for d in self.g.info(name).shape or ()]

    def node_task(self, k: int) -> Task:
        return Task.A


def plan(cx: Body) -> IntegerGroups:
    """The groups of the body that fit QMATMUL (see the module doc)."""
    prod, cons = _producers(cx.nodes), _consumers(cx.nodes)
    out = IntegerGroups()
    for k in range(len(cx.nodes)):
        g = _integer_group(cx, k, prod, cons)
        if g is None:
            continue
        out.groups[k] = g
        out.absorbed.add(g.q)
    fused = set(out.groups)
    for g in out.groups.values():  # a DQ whose every reader is fused lowers to nothing
        for d in (g.a_dq, g.b_dq, g.bias_dq):
            o = cx.nodes[d].output[0] if d is not None else None
            if o is not None and o not in cx.out_index and set(cons.get(o, [])) <= fused:
                out.absorbed.add(d)  # type: ignore[arg-type]  # d is not None here (o is)
    return out


@dataclass
class _Operands:
    a: str  # the integer tensor A (a body tensor or formal input)
    a_dtype: Dtype
    b: np.ndarray  # [K, N] integers
    za: int
    zb: np.ndarray  # [1] or [N]
    scale: np.ndarray  # f32 [1] or [N]
    zy: int
    y: str
    y_dtype: Dtype
    bias: np.ndarray | None  # i32 [N]
    b_dtype: Dtype
    sa: np.float32  # the scales of A, B ([1] or [N]) and Y, for the quantization section
    sb: np.ndarray
    sy: np.float32


def _qparams(cx: Body, n: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale f32, zero point int) of a Q/DQ node with constant parameters, flattened."""
    if int(attr(n, "block_size", 0)) != 0:
        return None
    scale = cx.known_value(n.input[1])
    zp = cx.known_value(n.input[2]) if len(n.input) > 2 and n.input[2] else np.zeros(1, np.int64)
    if scale is None or zp is None or scale.dtype != np.float32:
        return None
    return scale.reshape(-1), zp.reshape(-1).astype(np.int64)


def ort_fuses(a: Dtype, b: Dtype, y: Dtype) -> bool:
    """ONNX Runtime's QDQ selectors' type conditions for a Conv, MatMul or Gemm group (Conv-, MatMul- and
    GemmNodeGroupSelector, 16-bit not allowed): X, W and Y 8-bit, Y of X's type, and an i8 X with an i8 W
    only. ORT runs any other group as DQ -> float op -> Q. On x86 (QDQIsInt8Allowed false) it does not
    fuse an i8 X's Conv or MatMul either, where ARM builds do: such groups take the integer kernel here,
    as on the Hexagon device's ARM host, within one step of x86's float path (one where a value rounds
    at a tie)."""
    return a in EIGHT_BIT and b in EIGHT_BIT and y == a and (a != Dtype.I8 or b == Dtype.I8)


NBITS_WEIGHTS = (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)  # the MatMulNBits the host reproduces


def ort_nbits(cx: Body, n: onnx.NodeProto) -> bool:
    """ONNX Runtime 1.32 rewrites n, a float MatMul or Gemm (a group it does not fuse: `ort_fuses`),
    with B an 8-bit DequantizeLinear, into com.microsoft MatMulNBits (DQMatMulToMatMulNBits, every
    optimization level from EXTENDED; verify.EXACT_QDQ_CONFIG makes it compute in f32). Measured on
    one-op models and read in its qdq_selectors.cc: a Gemm with alpha 1, transA 0, transB 0 and a C of
    N values (beta 1); B read by this node only, its DequantizeLinear of a 2-D constant per tensor
    (rank-0 scale), per column (axis 1, [N]) or blockwise (axis 0, block_size a power of two >= 16),
    scales f32/f16 and zero points constant, or a Gemm's float B that ORT makes such a DequantizeLinear
    of first (`qbias.ort_weight`); n's output read by QuantizeLinears only or by none, and not a graph
    output when a QuantizeLinear reads it. A pair output's readers are outside the body: unknown, so
    no. 4- and 2-bit weights are rewritten too; MLAS sums those otherwise (not here)."""
    if not (_is(n, "MatMul") or (_is(n, "Gemm") and _gemm_fits(cx, n))) or len(n.input) < 2:
        return False
    if not _read_only_by(cx, n.input[1], n) or not _read_as_nbits(cx, n.output[0]):
        return False
    dq = next((b for b in cx.nodes if n.input[1] in b.output), None)
    if dq is None or dq.op_type != "DequantizeLinear":
        return _is(n, "Gemm") and ort_weight(cx, n) is not None
    return cx.dtype(dq.input[0]) in NBITS_WEIGHTS and _nbits_scales(cx, dq)


def _read_as_nbits(cx: Body, y: str) -> bool:
    """y read by QuantizeLinears only, or by none, and not read outside."""
    readers = [b for b in cx.nodes if y in b.input]
    quantized = sum(b.op_type == "QuantizeLinear" for b in readers)
    return y not in cx.out_index and quantized in (0, len(readers))


def _gemm_fits(cx: Body, n: onnx.NodeProto) -> bool:
    if abs(float(attr(n, "alpha", 1.0)) - 1) > 1e-6 or attr(n, "transA", 0) or attr(n, "transB", 0):
        return False
    if len(n.input) < 3 or not n.input[2]:
        return True
    c, cols = cx.shape(n.input[2], n), cx.shape(n.input[1], n)[-1]
    return abs(float(attr(n, "beta", 1.0)) - 1) <= 1e-6 and len(c) == 1 and c[0] == cols >= 0


def _read_only_by(cx: Body, name: str, n: onnx.NodeProto) -> bool:
    return name not in cx.out_index and [b for b in cx.nodes if name in b.input] == [n]


def _nbits_scales(cx: Body, dq: onnx.NodeProto) -> bool:
    """The weight, scale and zero point of dq as ORT's ValidateDQForMatMulNBits takes them."""
    w, s = cx.known_value(dq.input[0]), cx.known_value(dq.input[1])
    zp = cx.known_value(dq.input[2]) if len(dq.input) > 2 and dq.input[2] else None
    if w is None or s is None or w.ndim != 2 or s.dtype not in (np.float32, np.float16):
        return False
    if len(dq.input) > 2 and dq.input[2] and zp is None:
        return False
    zp_shape = s.shape if zp is None else zp.shape
    block, axis = int(attr(dq, "block_size", 0)), attr(dq, "axis", None)
    if block > 0:
        blocks = (w.shape[0] + block - 1) // block
        return axis == 0 and block >= 16 and not block & (block - 1) and s.shape == zp_shape == (blocks, w.shape[1])
    if s.ndim == 0:
        return zp_shape == ()
    return s.shape == zp_shape == (w.shape[1],) and axis in (None, 1)


def _weight(cx: Body, g: _Group) -> tuple[np.ndarray, Dtype | None, np.ndarray, np.ndarray, int] | None:
    """B's integer values, type, scale and zero point (flattened) and its DequantizeLinear's axis: a
    float B's as ORT quantizes it (`qbias.ort_weight`, per tensor)."""
    if g.b_dq is None:
        made = ort_weight(cx, cx.nodes[g.op])
        if made is None:
            return None
        return made.q, Dtype.I8, np.array([made.scale], np.float32), np.array([made.zero], np.int64), 0
    dq_b = cx.nodes[g.b_dq]
    b, params = cx.known_value(dq_b.input[0]), _qparams(cx, dq_b)
    if b is None or params is None or b.ndim == 0:
        return None
    return b, DTYPES.get(cx.dtype(dq_b.input[0])), params[0], params[1], int(attr(dq_b, "axis", 1)) % b.ndim


def _operands(cx: Body, g: _Group) -> _Operands | None:
    op, dq_a, q = cx.nodes[g.op], cx.nodes[g.a_dq], cx.nodes[g.q]
    a_dtype, y_dtype = DTYPES.get(cx.dtype(dq_a.input[0])), DTYPES.get(cx.dtype(q.output[0]))
    weight, pa, py = _weight(cx, g), _qparams(cx, dq_a), _qparams(cx, q)
    conv = _is(op, "Conv")
    if weight is None or pa is None or py is None or a_dtype is None or y_dtype is None:
        return None
    b, b_dtype, sb, zb, b_axis = weight
    if b_dtype is None or not ort_fuses(a_dtype, b_dtype, y_dtype):
        return None
    if b.ndim not in ((3, 4) if conv else (2,)) or (conv and len(cx.shape(dq_a.input[0], dq_a)) != b.ndim):
        return None  # Conv: 1-D or 2-D
    (sa, za), (sy, zy) = pa, py
    if sa.size != 1 or sy.size != 1 or len(cx.shape(dq_a.input[0], dq_a)) < 2:
        return None
    trans_b = _is(op, "Gemm") and int(attr(op, "transB", 0)) == 1
    if _is(op, "Gemm") and (
        int(attr(op, "transA", 0)) or attr(op, "alpha", 1.0) != 1.0 or attr(op, "beta", 1.0) != 1.0
    ):
        return None
    n_cols = b.shape[0] if trans_b or conv else b.shape[1]
    if sb.size > 1 and (sb.size != n_cols or b_axis != (0 if trans_b or conv else 1)):
        return None
    scale = (np.float32(sa[0]) * sb.astype(np.float32)) / np.float32(sy[0])  # f32, as ORT computes it
    fits, bias = _group_bias(cx, g, np.float32(sa[0]) * sb.astype(np.float32), n_cols)
    if not fits:
        return None
    return _Operands(
        dq_a.input[0], a_dtype, b.T if trans_b else b, int(za[0]), zb, scale.astype(np.float32), int(zy[0]),
        q.output[0], y_dtype, bias, b_dtype, np.float32(sa[0]), sb.astype(np.float32), np.float32(sy[0]),
    )  # fmt: skip


def _group_bias(cx: Body, g: _Group, acc_scale: np.ndarray, n_cols: int) -> tuple[bool, np.ndarray | None]:
    """(whether the group's bias fits, its int32 values or None without one): an int32 DequantizeLinear
    of the accumulator's scale, or a float initializer as ORT quantizes it (`qbias.ort_bias`)."""
    if g.bias_dq is not None:
        bias = _bias(cx, cx.nodes[g.bias_dq], acc_scale, n_cols)
        return bias is not None, bias
    if not g.float_bias:
        return True, None
    made = ort_bias(cx, cx.nodes[g.op])
    return (True, made[0]) if made is not None and made[0].size == n_cols else (False, None)


def _bias(cx: Body, dq: onnx.NodeProto, acc_scale: np.ndarray, n_cols: int) -> np.ndarray | None:
    """The int32 bias of a Gemm when its DequantizeLinear has the accumulator's scale, else None."""
    value, params = cx.known_value(dq.input[0]), _qparams(cx, dq)
    if value is None or params is None or value.dtype != np.int32 or value.size != n_cols:
        return None
    scale, zp = params
    if np.any(zp != 0) or not np.array_equal(np.broadcast_to(scale, acc_scale.shape), acc_scale):
        return None
    return value.reshape(-1)


def emit(cx: Lowerer, g: _Group, task: Task) -> None:
    """Emit the group's QMATMUL or QCONV2D (its origin: the MatMul/Gemm/Conv node)."""
    o = _operands(cx, g)
    assert o is not None  # plan() kept only groups that fit
    n = cx.nodes[g.op]
    _emit(cx, n, o, task, n.input[0], n.input[1])


def _emit(cx: Lowerer, n: onnx.NodeProto, o: _Operands, task: Task, x: str, w: str) -> None:
    per_col = o.zb.size > 1 or o.scale.size > 1
    conv = n.op_type in ("Conv", "QLinearConv")
    cols = o.b.shape[0] if conv else o.b.shape[1]
    zb = np.broadcast_to(o.zb, (cols,)) if per_col else o.zb
    scale = np.broadcast_to(o.scale, (cols,)) if per_col else o.scale
    one_d = conv and o.b.ndim == 3  # as 2-D on [N, C, 1, T] views (`spatial.as_2d`)
    a = cx.read_typed(o.a, n, task, o.a_dtype)
    inputs = [
        as_2d(cx, n, task, a) if one_d else a,
        cx.shared_constant(o.b[:, :, None, :] if one_d else o.b, task, o.b_dtype),
        cx.constant(np.array(o.za), task, o.a_dtype),
        cx.constant(zb, task, o.b_dtype),
        cx.constant(scale, task, Dtype.F32),
        cx.constant(np.array(o.zy), task, o.y_dtype),
    ]
    if o.bias is not None:
        inputs.append(cx.constant(o.bias, task, Dtype.I32))
    params = _conv_params(cx, n, x, w) if conv else None
    opcode = Opcode.QCONV2D if conv else Opcode.QMATMUL
    engine = engine_at_width(n, 8)  # the engine the profile costs the 8-bit group on
    if one_d and params is not None:
        y = emit_1d(cx, n, task, opcode, inputs, params, out=o.y, dtype=o.y_dtype, engine=engine)
        cx.quantized(cx.ids[o.y], o.sy, None, task, zero_id=inputs[5])
    else:
        y = cx.emit(n, task, opcode, inputs, params, out=o.y, engine=engine, out_dtype=o.y_dtype)
    _quantization(cx, o, inputs, y, task, 0 if conv else 1, per_col)


def _quantization(
    cx: Lowerer, o: _Operands, inputs: list[int], y: int, task: Task, col_axis: int, per_col: bool
) -> None:
    """The section's entries of the op's tensors: A, B (per column when its zero point or scale is),
    Y, and the bias (scale s_a s_b, zero point 0), each pointing at the op's zero point constants."""
    a, b, za, zb = inputs[:4]
    cols = cx.prog.tensors[b].dims[col_axis]
    sb = np.broadcast_to(o.sb, (cols,)) if per_col else o.sb.reshape(1)
    cx.quantized(a, o.sa, None, task, zero_id=za)
    cx.quantized(b, sb, None, task, col_axis, zero_id=zb)
    cx.quantized(y, o.sy, None, task, zero_id=inputs[5])
    if o.bias is not None:
        acc = (o.sa * o.sb.astype(np.float32)).astype(np.float32)  # f32, as the kernel checks it
        cx.quantized(inputs[6], np.broadcast_to(acc, (cols,)) if acc.size > 1 else acc, None, task, 0)


def _conv_params(cx: Lowerer, n: onnx.NodeProto, x_name: str, w_name: str) -> dict[ConvParam, int]:
    """A 2-D Conv's params; a 1-D one's lifted to H = 1 (`spatial.lift_1d`)."""
    x, w = cx.shape(x_name, n), cx.shape(w_name, n)
    r = len(x) - 2
    strides = [int(v) for v in attr(n, "strides", [1] * r)]
    dil = [int(v) for v in attr(n, "dilations", [1] * r)]
    pads = pads_2d(n, x, w[2:], strides, dil)
    if r == 1:
        _, strides, dil, pads = lift_1d(w[2:], strides, dil, pads)
    return conv_params(n, strides, dil, pads)


# ---- QOperator: QLinearConv (x, sx, zx, w, sw, zw, sy, zy [, B]), QLinearMatMul (a, sa, za, b, sb, zb, sy, zy)


@lowers("QLinearConv", "QLinearMatMul")
def qlinear(cx: Lowerer, n: onnx.NodeProto, task: Task) -> None:
    _emit(cx, n, _qlinear_operands(cx, n), task, n.input[0], n.input[3])


def _qlinear_operands(cx: Lowerer, n: onnx.NodeProto) -> _Operands:
    """The operands of a QLinearConv / QLinearMatMul node (raises LoweringError for what QCONV2D /
    QMATMUL do not run)."""

    def refuse(why: str) -> LoweringError:
        return LoweringError(n.op_type, n.name, why)

    conv = n.op_type == "QLinearConv"
    x, sx, zx, w, sw, zw, sy, zy = n.input[:8]
    a_dtype, b_dtype, y_dtype = (DTYPES.get(cx.dtype(t)) for t in (x, w, n.output[0]))
    if a_dtype not in EIGHT_BIT or b_dtype not in EIGHT_BIT or y_dtype not in EIGHT_BIT:
        raise refuse("the integer kernels take u8/i8 operands only")
    b = cx.known_value(w)
    if b is None or b.ndim not in ((3, 4) if conv else (2,)):
        raise refuse(f"the weight must be a {'3- or 4' if conv else '2'}-D initializer")
    rank = len(cx.shape(x, n))
    if (conv and rank != b.ndim) or rank < 2:
        raise refuse("QLinearConv is 1-D or 2-D only" if conv else "A must have rank >= 2")
    values = [cx.known_value(t) for t in (sx, zx, sw, zw, sy, zy)]
    if any(v is None for v in values):
        raise refuse("scales and zero points must be initializers")
    sa, za, sb, zb, s_y, z_y = (np.asarray(v).reshape(-1) for v in values)
    n_cols = b.shape[0] if conv else b.shape[1]
    if {sa.size, za.size, s_y.size, z_y.size} != {1} or sb.size not in (1, n_cols) or zb.size not in (1, n_cols):
        raise refuse("scales and zero points must be per tensor (the weight's: or per output channel)")
    if sa.dtype != np.float32 or sb.dtype != np.float32 or s_y.dtype != np.float32:
        raise refuse("scales must be float32")
    scale = (np.float32(sa[0]) * sb) / np.float32(s_y[0])  # f32, as ORT computes it
    bias = cx.known_value(n.input[8]) if conv and len(n.input) > 8 else None
    if bias is not None and (bias.dtype != np.int32 or bias.size != n_cols):
        raise refuse("the bias must be an int32 initializer of one element per output channel")
    if conv and len(n.input) > 8 and n.input[8] and bias is None:
        raise refuse("the bias must be an initializer")
    return _Operands(
        x, a_dtype, b, int(za[0]), zb.astype(np.int64), scale.astype(np.float32), int(z_y[0]), n.output[0], y_dtype,
        None if bias is None else bias.reshape(-1), b_dtype, np.float32(sa[0]), sb, np.float32(s_y[0]),
    )  # fmt: skip
