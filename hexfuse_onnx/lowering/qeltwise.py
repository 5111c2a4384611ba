"""QDQ groups of elementwise ops and pooling in integers (dsp/ref/ref_qeltwise.h, ref_qpool.h).

- DQ(a) + DQ(b) -> Add/Mul -> Q, all u8 or all i8 per tensor: QADD/QMUL, ONNX Runtime's
  QLinearAdd/QLinearMul, which its QDQ fusion runs for the same group.
- DQ(x) -> f(x, constants) -> Q, x u8/i8 per tensor, every other input a scalar known at lowering
  time (Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu, Exp, LeakyRelu, Div by a constant, ...):
  QLUT, a 256-entry table. The table is ONNX Runtime's own result of the group on the 256 values
  of x's type, so it is what ORT computes for the group, fused or not.
- DQ(x) -> GlobalAveragePool -> Q (one type): QGLOBAL_AVGPOOL, ORT's QLinearGlobalAveragePool;
  DQ(x) -> MaxPool (2-D) -> Q: QMAXPOOL, Q(DQ(max)), which is exact either way;
  DQ(x) -> AveragePool (2-D, no dilation) -> Q (one type): QAVGPOOL, ORT's QLinearAveragePool (a
  window over the whole plane without pads: QGLOBAL_AVGPOOL, where ORT falls back to it too).
- DQ(x1), ..., DQ(xk) -> Concat -> Q (one type): QCONCAT, each input through its table Q(DQ(x)),
  as ORT's QLinearConcat.
- DQ(x) -> Softmax -> Q (one type): QSOFTMAX, ORT's QLinearSoftmax with the exp table it builds.
- DQ(x) -> Resize (nearest) -> Q: QRESIZE, each source byte through its table Q(DQ(x)): exact,
  whether ORT drops the Q/DQ (equal parameters: it copies bytes) or runs the group in float.
- DQ(x) -> Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Slice or Gather (axis 0) -> Q, one type
  (8 or 16-bit) and equal constant per-tensor scale and zero point: the op itself on the integers,
  as ORT's QDQ transformer drops such a pair around data movement ("drop" rules) and moves x.

A 16-bit input (u16/i16) would need a 65536-entry table (128 KiB), which does not pay for the
few unary groups of a u16 model; the method documented for it is a 2-level table: the high byte
picks a segment, a linear interpolation between the segment's ends with the low byte, exact where
the function is linear and within one step where its second derivative is small over 256 codes.
Not implemented: the program format carries u8/i8 only (issue 12's u16 path).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import qdq
from ..graph import ModelGraph
from . import conv_bn
from .abi import (
    Dtype,
    Opcode,
    Param,
    PoolParam,
    QBinaryParam,
    QGapParam,
    QPoolParam,
    QSoftmaxParam,
    ResizeMode,
    ResizeParam,
    Task,
)
from .lowerer import DTYPES, Lowerer, attr, f32_bits
from .qmatmul import GraphBody, IntegerGroups
from .qmatmul import plan as matrix_plan
from .quant import dequantized
from .registry import LOWERINGS, LoweringError, op_key

# the unary functions a table replaces (their other inputs must be known scalars)
TABLE_OPS = {
    "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Gelu", "Exp", "Log", "Relu", "LeakyRelu", "Elu", "Selu",
    "Softplus", "Softsign", "Clip", "Sqrt", "Neg", "Abs", "Erf", "Reciprocal", "Pow", "Add", "Sub", "Mul", "Div",
    "Min", "Max", "com.microsoft::Gelu",
}  # fmt: skip
NARROW = {Dtype.U8: (0, 255), Dtype.I8: (-128, 127)}
# data movement ORT runs on the integers between a DQ and a Q of equal parameters (its "drop" rules;
# Expand, Tile and GatherElements too, which the kernel does not lower for integers)
MOVES = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Gather"}
MOVED = (Dtype.U8, Dtype.I8, Dtype.U16, Dtype.I16)

Emit = Callable[[Task], None]
# what a matcher finds: the group's emitter, its DequantizeLinear inputs (lowered to nothing when only
# integer groups read them), and the nodes after the op that it replaces (a folded Relu/Clip, the Q)
Found = tuple[Emit, list[int], list[int]]


@dataclass
class ElementwiseGroups:
    """The body's elementwise groups: the op's index -> what emits it, and the Q/DQ nodes they
    replace (lowered to nothing)."""

    emit: dict[int, Emit] = field(default_factory=dict)
    absorbed: set[int] = field(default_factory=set)


def _is(n: onnx.NodeProto, op: str) -> bool:
    return n.op_type == op and n.domain in ("", "ai.onnx")


def _is_qdq(n: onnx.NodeProto, op: str) -> bool:
    """A QuantizeLinear or DequantizeLinear, also com.microsoft's (16-bit before opset 21), as ORT's
    QDQ selectors match them."""
    return n.op_type == op and n.domain in qdq.QDQ_DOMAINS


def _per_tensor(cx: Lowerer, n: onnx.NodeProto) -> tuple[np.float32, int] | None:
    """(scale, zero point) of a Q/DQ node with constant per-tensor parameters."""
    scale = cx.known_value(n.input[1])
    zp = cx.known_value(n.input[2]) if len(n.input) > 2 and n.input[2] else np.zeros(1, np.int64)
    if scale is None or zp is None or scale.dtype != np.float32 or scale.size != 1 or zp.size != 1:
        return None
    if not np.isfinite(scale).all():
        return None  # no integer group: the float path names it (quant._finite_scale)
    return np.float32(scale.reshape(-1)[0]), int(zp.reshape(-1)[0])


def _quantized(cx: Lowerer, tid: int, p: tuple[np.float32, int], task: Task) -> None:
    """Record a tensor's per-tensor (scale, zero point) in the program's quantization section."""
    cx.quantized(tid, p[0], p[1], task)


@dataclass
class _Body:
    cx: Lowerer
    prod: dict[str, int]
    cons: dict[str, list[int]]

    def node(self, k: int) -> onnx.NodeProto:
        return self.cx.nodes[k]

    def dq_of(self, name: str) -> int | None:
        k = self.prod.get(name)
        return k if k is not None and _is_qdq(self.node(k), "DequantizeLinear") else None

    def only_q(self, k: int) -> int | None:
        """The QuantizeLinear that alone reads node k's output (not a pair output), in k's task."""
        out = self.node(k).output[0]
        users = self.cons.get(out, [])
        if out in self.cx.out_index or len(users) != 1 or not _is_qdq(self.node(users[0]), "QuantizeLinear"):
            return None
        return users[0] if self.cx.node_task(users[0]) == self.cx.node_task(k) else None

    def narrow(self, name: str) -> Dtype | None:
        d = DTYPES.get(self.cx.dtype(name))
        return d if d in NARROW else None

    def unary_group(self, k: int) -> _Unary | None:
        """DQ(x) -> node k -> Q, both narrow and per-tensor, or None."""
        n = self.node(k)
        d, q = self.dq_of(n.input[0]), self.only_q(k)
        if d is None or q is None:
            return None
        dq, qn = self.node(d), self.node(q)
        tx, ty = self.narrow(dq.input[0]), self.narrow(qn.output[0])
        px, py = _per_tensor(self.cx, dq), _per_tensor(self.cx, qn)
        if tx is None or ty is None or px is None or py is None:
            return None
        return _Unary(d, q, dq, qn, tx, ty, px, py)


@dataclass(frozen=True)
class _Unary:
    """A one-input QDQ group: its DequantizeLinear and QuantizeLinear, their types and (scale, zero)."""

    d: int
    q: int
    dq: onnx.NodeProto
    qn: onnx.NodeProto
    tx: Dtype
    ty: Dtype
    px: tuple[np.float32, int]
    py: tuple[np.float32, int]


def plan(cx: Lowerer, matmuls: IntegerGroups) -> ElementwiseGroups:
    """The elementwise groups of the body (see the module doc), and the DequantizeLinear nodes that
    only integer groups (these and the matmuls) read."""
    prod = {o: k for k, n in enumerate(cx.nodes) for o in n.output if o}
    cons: dict[str, list[int]] = {}
    for k, n in enumerate(cx.nodes):
        for i in n.input:
            if i:
                cons.setdefault(i, []).append(k)
    body = _Body(cx, prod, cons)
    out = ElementwiseGroups()
    dqs: set[int] = set()
    for k in range(len(cx.nodes)):
        if k in matmuls.groups:
            continue
        found = (
            _table(body, k)
            or _binary(body, k)
            or _pool(body, k)
            or _concat(body, k)
            or _resize(body, k)
            or _softmax(body, k)
            or _move(body, k)
        )
        if found is not None:
            emit, inputs, tail = found
            out.emit[k] = emit
            out.absorbed.update(tail)
            dqs.update(inputs)
    integer = set(out.emit) | set(matmuls.groups)
    for d in dqs:
        o = cx.nodes[d].output[0]
        if o not in cx.out_index and set(cons.get(o, [])) <= integer:
            out.absorbed.add(d)
    return out


@dataclass(frozen=True)
class KernelPlan:
    """How the lowering runs a whole model's QDQ groups (`model_plan`): the ops it runs as one integer
    op (QMATMUL/QCONV2D: `matrix`; QADD, QLUT, QMAXPOOL, ...: `elementwise`), and the nodes it lowers
    to nothing (their DequantizeLinear, QuantizeLinear and folded Relu/Clip nodes; a BatchNormalization
    folded into its Conv, `conv_bn`), each with the op that does their work (`absorbed`: node -> op; a
    DequantizeLinear read by several: the first)."""

    matrix: frozenset[int]
    elementwise: frozenset[int]
    absorbed: dict[int, int]


def model_plan(g: ModelGraph) -> KernelPlan:
    """`qmatmul.plan` and `plan` of the whole model as one pair body (a pair takes a QDQ group whole),
    kept on the graph: the profile charges what the program runs (`profile.profile_node`)."""
    if g.kernel_plan is None:
        body = ModelBody(g)
        matmuls = matrix_plan(body)
        # the matchers read only what ModelBody has; their emitters, which need a Lowerer, are not run
        eltwise = plan(cast(Lowerer, body), matmuls)
        ops = set(matmuls.groups) | set(eltwise.emit)
        absorbed = {i: _owner(g, ops, i) for i in sorted(matmuls.absorbed | eltwise.absorbed)}
        absorbed.update((norm, conv) for conv, norm in conv_bn.plan(body).items())
        g.kernel_plan = KernelPlan(frozenset(matmuls.groups), frozenset(eltwise.emit), absorbed)
    plan_: KernelPlan = g.kernel_plan
    return plan_


def _owner(g: ModelGraph, ops: set[int], i: int) -> int:
    """The integer op that does absorbed node i's work: a DequantizeLinear's first reader, else the op
    its input comes from (a QuantizeLinear's, through a folded Relu/Clip)."""
    if qdq.is_dq(g, i):
        return min(c for c in g.consumers[g.nodes[i].output[0]] if c in ops)
    k = g.producer[g.nodes[i].input[0]]
    while k not in ops:
        k = g.producer[g.nodes[k].input[0]]
    return k


@dataclass
class ModelBody(GraphBody):
    """A whole model as `plan` reads a pair's body: one task, at the graph's shapes (no second binding)."""

    varying: dict[str, set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.opset = next(o.version for o in self.g.model.opset_import if o.domain in ("", "ai.onnx"))
        self.ir_version = self.g.model.ir_version

    def constant_value(self, name: str) -> np.ndarray | None:
        """`Lowerer.constant_value`: a known value, or a DequantizeLinear of known values."""
        value, k = self.known_value(name), self.g.producer.get(name)
        if value is not None or k is None:
            return value
        return dequantized(self.g.nodes[k], [self.known_value(i) for i in self.g.nodes[k].input if i])

    def const_floats(self, name: str, op: onnx.NodeProto) -> np.ndarray:
        value = self.constant_value(name)
        if value is None:
            raise LoweringError(op.op_type, op.name, f"'{name}' must be a constant")
        return np.asarray(value, dtype=np.float32).reshape(-1)

    def const_ints(self, name: str, op: onnx.NodeProto) -> list[int]:
        value = self.known_value(name)
        if value is None:
            raise LoweringError(op.op_type, op.name, f"'{name}' must be a constant")
        return [int(v) for v in np.asarray(value).reshape(-1)]

    def has_no_element(self, name: str) -> bool:
        return 0 in (self.g.info(name).shape or ())


def _binary(b: _Body, k: int) -> Found | None:
    n = b.node(k)
    if not (_is(n, "Add") or _is(n, "Mul")) or len(n.input) != 2:
        return None
    dx, dw, out = b.dq_of(n.input[0]), b.dq_of(n.input[1]), _clamped_q(b, k)
    if dx is None or dw is None or out is None:
        return None
    q, clamp, (c_lo, c_hi) = out
    da, db = b.node(dx), b.node(dw)
    ta, tb, ty = b.narrow(da.input[0]), b.narrow(db.input[0]), b.narrow(b.node(q).output[0])
    pa, pb, py = _per_tensor(b.cx, da), _per_tensor(b.cx, db), _per_tensor(b.cx, b.node(q))
    if ta is None or not ta == tb == ty or pa is None or pb is None or py is None:
        return None  # ORT's QLinearAdd/Mul want one type: other groups keep the float path
    (sa, za), (sb, zb), (sy, zy) = pa, pb, py
    if _is(n, "Add"):
        ra, rb = np.float32(sa / sy), np.float32(sb / sy)
    else:
        ra, rb = np.float32(np.float32(sa * sb) / sy), np.float32(0)
    lo, hi = NARROW[ta]
    lo, hi = max(lo, _quantize(c_lo, sy, zy, ta)), min(hi, _quantize(c_hi, sy, zy, ta))
    params = {
        QBinaryParam.RATIO_A: f32_bits(float(ra)), QBinaryParam.RATIO_B: f32_bits(float(rb)),
        QBinaryParam.ZERO_A: za, QBinaryParam.ZERO_B: zb, QBinaryParam.ZERO_Y: zy,
        QBinaryParam.LO: lo, QBinaryParam.HI: hi,
    }  # fmt: skip
    opcode = Opcode.QADD if _is(n, "Add") else Opcode.QMUL
    y = b.node(q).output[0]

    def emit(task: Task) -> None:
        inputs = [b.cx.read_typed(da.input[0], n, task, ta), b.cx.read_typed(db.input[0], n, task, ta)]
        out = b.cx.emit(n, task, opcode, inputs, params, out=y, out_dtype=ta)
        for tid, p in zip([*inputs, out], (pa, pb, py)):
            _quantized(b.cx, tid, p, task)

    return emit, [dx, dw], [*clamp, q]


def _clamped_q(b: _Body, k: int) -> tuple[int, list[int], tuple[float, float]] | None:
    """The QuantizeLinear of node k's output, directly or through one Relu or Clip with known
    bounds: (the Q, the nodes between, the float range they clamp to). Q is monotone, so
    Q(clamp(t)) = clamp(Q(t), Q(lo), Q(hi)) exactly."""
    q = b.only_q(k)
    if q is not None:
        return q, [], (-np.inf, np.inf)
    out, cx = b.node(k).output[0], b.cx
    users = b.cons.get(out, [])
    if out in cx.out_index or len(users) != 1 or cx.node_task(users[0]) != cx.node_task(k):
        return None
    c = b.node(users[0])
    if _is(c, "Relu"):
        bounds = (0.0, np.inf)
    elif _is(c, "Clip") and not any(a.name in ("min", "max") for a in c.attribute):
        clip = _clip_bounds(cx, c)
        if clip is None:
            return None
        bounds = clip
    else:
        return None
    q = b.only_q(users[0])
    return (q, [users[0]], bounds) if q is not None else None


def _clip_bounds(cx: Lowerer, c: onnx.NodeProto) -> tuple[float, float] | None:
    """Clip's (min, max) when both are absent or known scalars."""
    values = []
    for name, default in zip([*c.input[1:3], "", ""], (-np.inf, np.inf)):
        v = cx.known_value(name) if name else np.array(default)
        if v is None or v.size != 1 or np.isnan(v).any():
            return None
        values.append(float(v.reshape(-1)[0]))
    return (values[0], values[1]) if values[0] <= values[1] else None


def _quantize(v: float, scale: np.float32, zp: int, dtype: Dtype) -> int:
    """QuantizeLinear of one value (dsp/ref/ref_quant.h): an f32 division, saturation, ties to even."""
    lo, hi = NARROW[dtype]
    t = np.float32(np.float32(v) / scale) if np.isfinite(v) else np.float32(v)
    if t >= hi - zp:
        return hi
    if t <= lo - zp:
        return lo
    return int(np.rint(t)) + zp


def _table(b: _Body, k: int) -> Found | None:
    n, cx = b.node(k), b.cx
    if op_key(n) not in TABLE_OPS or len(n.output) != 1:
        return None
    variable = sorted({i for i in n.input if i and _scalar_constant(b, i) is None})
    if len(variable) != 1 or b.dq_of(variable[0]) is None or b.only_q(k) is None:
        return None
    d, q = b.dq_of(variable[0]), b.only_q(k)
    assert d is not None and q is not None  # checked above
    dq, qn = b.node(d), b.node(q)
    tx, ty = b.narrow(dq.input[0]), b.narrow(qn.output[0])
    px, py = _per_tensor(cx, dq), _per_tensor(cx, qn)
    if tx is None or ty is None or px is None or py is None:
        return None
    if cx.shape(n.output[0], n) != cx.shape(dq.input[0], dq):
        return None
    table = _ort_table(b, dq, n, qn, tx, variable[0])
    if table is None:
        return None

    def emit(task: Task) -> None:
        inputs = [cx.read_typed(dq.input[0], n, task, tx), cx.constant(table, task, ty)]
        y = cx.emit(n, task, Opcode.QLUT, inputs, out=qn.output[0], out_dtype=ty)
        _quantized(cx, inputs[0], px, task)
        _quantized(cx, y, py, task)

    constant_dqs = [c for c in (b.dq_of(i) for i in n.input if i and i != variable[0]) if c is not None]
    return emit, [d, *constant_dqs], [q]


def _scalar_constant(b: _Body, name: str) -> np.ndarray | None:
    """The value of a one-element input known at lowering time, or of a DequantizeLinear of one."""
    v = b.cx.constant_value(name)
    return v if v is not None and v.size == 1 else None


def _ort_table(
    b: _Body, dq: onnx.NodeProto, op: onnx.NodeProto, q: onnx.NodeProto, tx: Dtype, x: str
) -> np.ndarray | None:
    """ONNX Runtime's result of DQ -> op -> Q on the 256 values of x's type, as Q's dtype."""
    import onnxruntime as ort  # the lowering runs it only for tables

    cx = b.cx
    inits = []
    # a constant read through a DequantizeLinear stays one (ORT then fuses DQ-Add-DQ-Q into QLinearAdd,
    # whose rounding differs from the float path's where the result is a tie)
    constant_dqs = [b.node(c) for c in (b.dq_of(i) for i in op.input if i and i != x) if c is not None]
    constants = {i for i in op.input if i and i != x} - {c.output[0] for c in constant_dqs}
    for name in {*dq.input[1:], *q.input[1:], *constants, *(i for c in constant_dqs for i in c.input if i)}:
        if not name:
            continue
        v = cx.known_value(name)
        if v is None:
            v = _scalar_constant(b, name)
        if v is None:
            return None
        inits.append(numpy_helper.from_array(np.asarray(v), name))
    lo, hi = NARROW[tx]
    elem = cx.dtype(dq.input[0])
    graph = helper.make_graph(
        [dq, *constant_dqs, op, q],
        "table",
        [helper.make_tensor_value_info(dq.input[0], elem, [256])],
        [helper.make_tensor_value_info(q.output[0], cx.dtype(q.output[0]), [256])],
        initializer=inits,
    )
    domains = sorted({n.domain for n in (dq, *constant_dqs, op, q)} - {"", "ai.onnx"})
    opsets = [helper.make_opsetid("", cx.opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=cx.ir_version)
    values = np.arange(lo, hi + 1).astype(np.uint8 if tx == Dtype.U8 else np.int8)
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return np.asarray(sess.run(None, {dq.input[0]: values})[0]).reshape(256)
    except Exception:  # noqa: BLE001 - a group ORT cannot run alone keeps the float path
        return None


def _pool(b: _Body, k: int) -> Found | None:
    """DQ(x) -> GlobalAveragePool or 2-D AveragePool (x and y of one type, as ORT's QLinear ops want)
    or 2-D MaxPool -> Q."""
    n, cx = b.node(k), b.cx
    kind = next((op for op in ("GlobalAveragePool", "MaxPool", "AveragePool") if _is(n, op)), None)
    g = b.unary_group(k) if kind is not None else None
    if kind is None or g is None or (kind != "MaxPool" and g.tx != g.ty):
        return None
    dq, qn, tx, ty, px, py = g.dq, g.qn, g.tx, g.ty, g.px, g.py
    x_shape = cx.shape(dq.input[0], dq)
    if set(cx.varying.get(dq.input[0], set())) & set(range(2, len(x_shape))) and kind != "MaxPool":
        return None  # the scale (or ORT's choice of the global pool) follows the plane's size
    if kind == "GlobalAveragePool":
        found = _global_avgpool(x_shape, px, py)
    else:
        found = _window_pool(cx, n, kind, x_shape, px, py)
    if found is None:
        return None
    opcode, params = found

    def emit(task: Task) -> None:
        x = cx.read_typed(dq.input[0], n, task, tx)
        y = cx.emit(n, task, opcode, [x], params, out=qn.output[0], out_dtype=ty)
        _quantized(cx, x, px, task)
        _quantized(cx, y, py, task)

    return emit, [g.d], [g.q]


def _global_avgpool(x_shape: list[int], px: tuple, py: tuple) -> tuple[Opcode, dict] | None:
    if len(x_shape) < 3:
        return None
    (sx, zx), (sy, zy) = px, py
    scale = np.float32(sx / np.float32(sy * np.float32(int(np.prod(x_shape[2:])))))
    return Opcode.QGLOBAL_AVGPOOL, {QGapParam.SCALE: f32_bits(float(scale)), QGapParam.ZERO_X: zx, QGapParam.ZERO_Y: zy}


def _window_pool(
    cx: Lowerer, n: onnx.NodeProto, kind: str, x_shape: list[int], px: tuple, py: tuple
) -> tuple[Opcode, dict] | None:
    """QMAXPOOL or QAVGPOOL with the pool's params; an AveragePool whose window is the whole plane
    without pads is the global pool, as in ORT's QLinearAveragePool."""
    from .registry import LoweringError
    from .spatial import pool_params

    (sx, zx), (sy, zy) = px, py
    if len(x_shape) != 4 or (len(n.output) > 1 and any(n.output[1:])) or sy <= 0 or (kind == "MaxPool" and sx <= 0):
        return None
    try:
        params: dict = dict(pool_params(cx, n))
    except LoweringError:
        return None
    if kind == "AveragePool":
        if params[PoolParam.DILATION_H] != 1 or params[PoolParam.DILATION_W] != 1:
            return None  # QLinearAveragePool has none: ORT keeps such a group in float
        pads = [params[p] for p in (PoolParam.PAD_TOP, PoolParam.PAD_LEFT, PoolParam.PAD_BOTTOM, PoolParam.PAD_RIGHT)]
        if [params[PoolParam.KERNEL_H], params[PoolParam.KERNEL_W]] == x_shape[2:] and not any(pads):
            return _global_avgpool(x_shape, px, py)
    params.update({
        QPoolParam.SCALE_X: f32_bits(float(sx)), QPoolParam.ZERO_X: zx,
        QPoolParam.SCALE_Y: f32_bits(float(sy)), QPoolParam.ZERO_Y: zy,
    })  # fmt: skip
    return (Opcode.QMAXPOOL if kind == "MaxPool" else Opcode.QAVGPOOL), params


def requant_table(sx: np.float32, zx: int, sy: np.float32, zy: int, tx: Dtype, ty: Dtype) -> np.ndarray:
    """Q_y(DQ_x(x)) for the 256 values of x's type (dsp/ref/ref_quant.h: an f32 product, then an f32
    division, ties to even, saturation), as Y's type."""
    lo, hi = NARROW[tx]
    t = (np.arange(lo, hi + 1, dtype=np.int32) - zx).astype(np.float32) * np.float32(sx)
    t = (t.astype(np.float32) / np.float32(sy)).astype(np.float32)
    ylo, yhi = NARROW[ty]
    q = np.clip(np.rint(np.clip(t, ylo - zy, yhi - zy)) + zy, ylo, yhi)
    return q.astype(np.uint8 if ty == Dtype.U8 else np.int8)


def _concat(b: _Body, k: int) -> Found | None:
    n, cx = b.node(k), b.cx
    q = b.only_q(k)
    operands = [i for i in n.input if not cx.has_no_element(i)]  # an empty one adds nothing
    if not _is(n, "Concat") or q is None or not 1 <= len(operands) <= 7:
        return None
    dqs = [b.dq_of(i) for i in operands]
    qn = b.node(q)
    ty, py = b.narrow(qn.output[0]), _per_tensor(cx, qn)
    if ty is None or py is None or any(d is None for d in dqs):
        return None
    tables, inputs, params = [], [], []
    for d in dqs:
        dq = b.node(d)  # type: ignore[arg-type]
        tx, px = b.narrow(dq.input[0]), _per_tensor(cx, dq)
        if tx != ty or px is None:
            return None  # ORT's QLinearConcat wants one type
        tables.append(requant_table(px[0], px[1], py[0], py[1], tx, ty))
        inputs.append(dq.input[0])
        params.append(px)
    rank = len(cx.shape(n.output[0], n))
    axis = int(attr(n, "axis", 0))
    axis = axis + rank if axis < 0 else axis

    def emit(task: Task) -> None:
        ids = [cx.read_typed(i, n, task, ty) for i in inputs]
        for x, px in zip(ids, params):
            _quantized(cx, x, px, task)
        ids.append(cx.constant(np.stack(tables), task, ty))
        y = cx.emit(n, task, Opcode.QCONCAT, ids, {Param.AXIS: axis}, out=qn.output[0], out_dtype=ty)
        _quantized(cx, y, py, task)

    return emit, [d for d in dqs if d is not None], [q]


def _resize(b: _Body, k: int) -> Found | None:
    from .registry import LoweringError
    from .spatial import resize_params

    n, cx = b.node(k), b.cx
    g = b.unary_group(k) if _is(n, "Resize") else None
    if g is None:
        return None
    dq, qn, tx, ty, px, py = g.dq, g.qn, g.tx, g.ty, g.px, g.py
    try:
        params = resize_params(cx, n)
    except LoweringError:
        return None
    if params[ResizeParam.MODE] != ResizeMode.NEAREST:
        return None  # linear interpolates: ORT's u8 Resize rounds its own way
    table = requant_table(px[0], px[1], py[0], py[1], tx, ty)

    def emit(task: Task) -> None:
        inputs = [cx.read_typed(dq.input[0], n, task, tx), cx.constant(table, task, ty)]
        y = cx.emit(n, task, Opcode.QRESIZE, inputs, params, out=qn.output[0], out_dtype=ty)
        _quantized(cx, inputs[0], px, task)
        _quantized(cx, y, py, task)

    return emit, [g.d], [g.q]


def _softmax(b: _Body, k: int) -> Found | None:
    n, cx = b.node(k), b.cx
    g = b.unary_group(k) if _is(n, "Softmax") else None
    if g is None or g.tx != g.ty:
        return None
    dq, qn, tx, ty, px, py = g.dq, g.qn, g.tx, g.ty, g.px, g.py
    shape = cx.shape(n.input[0], n)
    axis = int(attr(n, "axis", -1 if cx.opset >= 13 else 1))
    if not shape or not -len(shape) <= axis < len(shape):
        return None
    axis %= len(shape)
    if cx.opset < 13 and axis != len(shape) - 1:
        return None  # coerced to 2-D: the float lowering refuses it too
    if axis in cx.varying.get(n.input[0], set()):
        return None  # the table follows the axis length: the float Softmax does not
    params = {
        Param.AXIS: axis,
        QSoftmaxParam.SCALE: f32_bits(float(np.floor(np.float32(1) / py[0]))),
        QSoftmaxParam.ZERO_Y: py[1],
    }
    table = softmax_table(px[0], shape[axis])

    def emit(task: Task) -> None:
        inputs = [cx.read_typed(dq.input[0], n, task, tx), cx.constant(table, task, Dtype.F32)]
        y = cx.emit(n, task, Opcode.QSOFTMAX, inputs, params, out=qn.output[0], out_dtype=ty)
        _quantized(cx, inputs[0], px, task)
        _quantized(cx, y, py, task)

    return emit, [g.d], [g.q]


def _move(b: _Body, k: int) -> Found | None:
    """DQ(x) -> data movement -> Q of x's type, scale and zero point: the op's own lowering on x."""
    n, cx = b.node(k), b.cx
    if op_key(n) not in MOVES or len(n.output) != 1:
        return None
    d, q = b.dq_of(n.input[0]), b.only_q(k)
    if d is None or q is None:
        return None
    dq, qn = b.node(d), b.node(q)
    tx = DTYPES.get(cx.dtype(dq.input[0]))
    px, py = _per_tensor(cx, dq), _per_tensor(cx, qn)
    if tx not in MOVED or tx != DTYPES.get(cx.dtype(qn.output[0])) or px is None or px != py:
        return None
    if n.op_type == "Gather" and int(attr(n, "axis", 0)) % max(len(cx.shape(dq.input[0], dq)), 1) != 0:
        return None  # integer data gathers rows of axis 0 only (layout._gather_integers)
    moved = onnx.NodeProto()
    moved.CopyFrom(n)
    moved.input[0], moved.output[0] = dq.input[0], qn.output[0]

    def emit(task: Task) -> None:
        LOWERINGS[op_key(n)](cx, moved, task)

    return emit, [d], [q]


def softmax_table(sx: np.float32, length: int) -> np.ndarray:
    """ORT's QLinearSoftmax table: f32(exp((j - 255 + b) * s_x)) in double, b = max(0, logf(FLT_MAX
    / length) - 5) / s_x, the quotient in f32 and its log a float's (C++'s log(float) is logf) as its
    C++ computes them; math.exp and logf are the C library's."""
    flt_max = np.finfo(np.float32).max
    shift = max(0.0, _logf(float(np.float32(flt_max / np.float32(length)))) - 5.0) / float(sx)
    return np.array([math.exp((j - 255 + shift) * float(sx)) for j in range(256)], dtype=np.float32)


@functools.cache
def _libm_logf() -> Callable[[float], float] | None:
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    logf = ctypes.CDLL(name).logf
    logf.restype, logf.argtypes = ctypes.c_float, [ctypes.c_float]
    return logf


def _logf(x: float) -> float:
    """The C library's logf: f32(log(x)) differs from glibc's on 6 of the lengths 1-300000."""
    logf = _libm_logf()
    return float(logf(x)) if logf is not None else float(np.float32(math.log(x)))
