"""Elementwise ops on the vector engine: binary arithmetic (Add/Sub/Mul also on int32/int64, wrapping; Div of
int32/int64 truncated), Mod, Sum, activations (LeakyRelu, PRelu), Clip (and Max/Min with a scalar constant; of
int32/int64 too), Cast (float to float or int32, float16 to and from float32, 8/16/32/64-bit integers and bools to
float, bools to int32 and int64, float, int32 and int64 to bool, a type to itself), IsNaN, Where (Where(IsNaN(x),
c, x) as REPLACE_NAN), comparisons to bool and Not/And/Or/Xor of bools."""

from __future__ import annotations

import math
from typing import NoReturn

import numpy as np
import onnx

from .abi import (
    ClipParam,
    CompareMode,
    CompareParam,
    DivMode,
    DivParam,
    Dtype,
    HardSigmoidParam,
    Opcode,
    ReplaceNanParam,
    Task,
)
from .layout import RESHAPES, same_tensor
from .lowerer import DTYPES, KERNEL_FLOATS, NP_DTYPES, Lowerer, attr, f32_bits
from .registry import LoweringError, lowers
from .traced import traced_dims

BINARY = {"Add": Opcode.ADD, "Sub": Opcode.SUB, "Mul": Opcode.MUL, "Div": Opcode.DIV}
UNARY = {
    "Relu": Opcode.RELU,
    "Sigmoid": Opcode.SIGMOID,
    "Tanh": Opcode.TANH,
    "Exp": Opcode.EXP,
    "HardSwish": Opcode.HARDSWISH,
    "Neg": Opcode.NEG,
    "Sqrt": Opcode.SQRT,
    "Erf": Opcode.ERF,
    "Log": Opcode.LOG,
    "Floor": Opcode.FLOOR,
    "Abs": Opcode.ABS,  # float32 (float16 as float32); an integer Abs is refused by `read`
    "Sin": Opcode.SIN,  # ONNX Runtime's bits: Eigen's packet sin, the C library's over the last numel % 4
    "Cos": Opcode.COS,
    "Softplus": Opcode.SOFTPLUS,  # ORT's formula; hfx_exp and hfx_log within a few ulp, not Eigen's bits
    "Round": Opcode.ROUND,  # ties to even, as ORT's nearbyint
}
COMPARISONS = {
    "Equal": CompareMode.EQUAL,
    "Less": CompareMode.LESS,
    "Greater": CompareMode.GREATER,
    "LessOrEqual": CompareMode.LESS_EQUAL,
    "GreaterOrEqual": CompareMode.GREATER_EQUAL,
}
COMPARED = (Dtype.F32, Dtype.I32, Dtype.I64, Dtype.BOOL)  # the operand types COMPARE takes
# Ops whose lowering makes or reads bools at run time (the program's BOOL): comparisons, logic ops, Where, IsNaN,
# Cast, and the movers (layout.py)
BOOL_OPS = frozenset(
    {*COMPARISONS, "Not", "And", "Or", "Xor", "Where", "IsNaN", "Cast", "Transpose", "Slice", "Concat", *RESHAPES}
)


# On int32/int64 too: Add, Sub, Mul wrapping, Div truncated toward zero, as ONNX Runtime's (a divisor of 0 gives 0,
# where ORT fails the run; MIN / -1 MIN, where its process dies of SIGFPE)
INTEGER_BINARY = {"Add", "Sub", "Mul", "Div"}


@lowers(*BINARY)
def binary(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    dtype = DTYPES.get(cx.dtype(n.output[0]))
    if dtype in (Dtype.I32, Dtype.I64) and n.op_type in INTEGER_BINARY:
        inputs = [cx.read_typed(name, n, t, dtype) for name in n.input[:2]]
        cx.emit(n, t, BINARY[n.op_type], inputs, out_dtype=dtype)
        return
    cx.emit(n, t, BINARY[n.op_type], [cx.read(n.input[0], n, t), cx.read(n.input[1], n, t)])


# The types Mod's remainders take, by fmod: ONNX Runtime refuses fmod=0 of floats, and its int64 fmod=1 goes
# through double (a remainder of int64s above 2^53 is not the integers')
MOD_TYPES = {0: (Dtype.I32, Dtype.I64), 1: (Dtype.F32, Dtype.I32)}


@lowers("Mod")
def mod(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """DIV's remainders, numpy broadcast: fmod=0 of int32 or int64 with the divisor's sign, as ONNX Runtime's
    integer Mod; fmod=1 of float32 (float16 as float32: the remainder is exact in both) or int32, C's fmod with
    the dividend's sign. An integer divisor of 0 gives 0, where ONNX Runtime fails the run ("Integer modulo by
    zero"). A float16 NaN keeps its sign and payload (ORT's float16 Mod gives a quiet NaN of its own)."""
    fmod = int(attr(n, "fmod", 0))
    (x, dx), (y, dy) = (cx.read_any(name, n, t) for name in n.input[:2])
    allowed = MOD_TYPES.get(fmod, ())
    if dx != dy or dx not in allowed:
        kinds = " and ".join(d.name.lower() for d in (dx, dy))
        wanted = " or ".join(d.name.lower() for d in allowed) or "nothing (fmod is 0 or 1)"
        raise LoweringError(n.op_type, n.name, f"fmod={fmod} of {kinds}: only two tensors of {wanted}")
    mode = DivMode.FMOD if fmod else DivMode.MOD
    cx.emit(n, t, Opcode.DIV, [x, y], {DivParam.MODE: int(mode)}, out_dtype=dx)


@lowers(*UNARY)
def unary(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    cx.emit(n, t, UNARY[n.op_type], [cx.read(n.input[0], n, t)])


@lowers(*COMPARISONS)
def compare(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """COMPARE of two tensors of one type (float32, float16 as float32, int32, int64, bool), numpy broadcast,
    to bool; a NaN compares false, as in ONNX Runtime. (An Equal of values known when lowering folds.)"""
    operands = [cx.read_any(name, n, t) for name in n.input[:2]]
    if operands[0][1] != operands[1][1] or operands[0][1] not in COMPARED:
        kinds = " and ".join(d.name.lower() for _, d in operands)
        raise LoweringError(n.op_type, n.name, f"compares {kinds}: only two float32, int32, int64 or bool tensors")
    params = {CompareParam.MODE: int(COMPARISONS[n.op_type])}
    cx.emit(n, t, Opcode.COMPARE, [tid for tid, _ in operands], params, out_dtype=Dtype.BOOL)


@lowers("Not")
def not_(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """COMPARE EQUAL to a false."""
    false = cx.constant(np.zeros((), np.bool_), t, Dtype.BOOL)
    params = {CompareParam.MODE: int(CompareMode.EQUAL)}
    cx.emit(n, t, Opcode.COMPARE, [cx.read_typed(n.input[0], n, t, Dtype.BOOL), false], params, out_dtype=Dtype.BOOL)


@lowers("And", "Or", "Xor")
def and_or_xor(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """MIN (And), MAX (Or) or COMPARE NOT_EQUAL (Xor) of two bools, numpy broadcast."""
    inputs = [cx.read_typed(name, n, t, Dtype.BOOL) for name in n.input[:2]]
    if n.op_type == "Xor":
        cx.emit(n, t, Opcode.COMPARE, inputs, {CompareParam.MODE: int(CompareMode.NOT_EQUAL)}, out_dtype=Dtype.BOOL)
        return
    cx.emit(n, t, Opcode.MIN if n.op_type == "And" else Opcode.MAX, inputs, out_dtype=Dtype.BOOL)


@lowers("Pow")
def pow_(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """x**2 and x**3 as products (GPT-2's tanh GELU, RMSNorm's mean square), x**0.5 as SQRT, x**-1 and
    x**-0.5 as a division of one (a norm's rsqrt in the exporters' Pow form: hama_asr)."""
    exponent = cx.const_floats(n.input[1], n)
    e = float(exponent[0]) if exponent.size == 1 else None
    x = cx.read(n.input[0], n, t)
    if e == 0.5:
        cx.emit(n, t, Opcode.SQRT, [x])
    elif e == 2.0:
        cx.emit(n, t, Opcode.MUL, [x, x])
    elif e == 3.0:
        square = cx.emit(n, t, Opcode.MUL, [x, x], out=cx.scratch(cx.shape(n.output[0], n), t))
        cx.emit(n, t, Opcode.MUL, [square, x])
    elif e in (-1.0, -0.5):
        root = cx.emit(n, t, Opcode.SQRT, [x], out=cx.scratch(cx.shape(n.output[0], n), t)) if e == -0.5 else x
        cx.emit(n, t, Opcode.DIV, [cx.constant(np.ones((), np.float32), t), root])
    else:
        raise LoweringError(
            n.op_type, n.name, f"exponent {exponent.tolist()}: only a scalar 0.5, 2, 3, -1 or -0.5 is supported"
        )


@lowers("Reciprocal")
def reciprocal(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    one = cx.constant(np.ones((), np.float32), t)  # rank 0: a scalar input stays a scalar
    cx.emit(n, t, Opcode.DIV, [one, cx.read(n.input[0], n, t)])


@lowers("Gelu", "com.microsoft::Gelu")
def gelu(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ONNX Gelu and onnxruntime's com.microsoft Gelu (ORT's optimizer fuses the erf form into it):
    one formula, 0.5 x (1 + erf(x / sqrt 2)), in both of ORT's CPU kernels."""
    if attr(n, "approximate", b"none") not in (b"none", "none"):
        raise LoweringError(n.op_type, n.name, "approximate='tanh' is not supported (erf form only)")
    cx.emit(n, t, Opcode.GELU, [cx.read(n.input[0], n, t)])


@lowers("com.microsoft::FastGelu")
def fast_gelu(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """onnxruntime's FastGelu, GELU's tanh form of x (+ bias), as the ops ORT's own CPU kernel
    computes: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    dims = cx.shape(n.output[0], n)

    def step(opcode: Opcode, inputs: list[int]) -> int:
        return cx.emit(n, t, opcode, inputs, out=cx.scratch(dims, t))

    def const(v: float) -> int:
        return cx.constant(np.array([v], np.float32), t)

    x = cx.read(n.input[0], n, t)
    if len(n.input) > 1 and n.input[1]:
        x = step(Opcode.ADD, [x, cx.read(n.input[1], n, t)])
    cube = step(Opcode.MUL, [step(Opcode.MUL, [x, x]), x])
    inner = step(Opcode.ADD, [x, step(Opcode.MUL, [cube, const(0.044715)])])
    tanh = step(Opcode.TANH, [step(Opcode.MUL, [inner, const(math.sqrt(2.0 / math.pi))])])
    half_x = step(Opcode.MUL, [x, const(0.5)])
    cx.emit(n, t, Opcode.MUL, [half_x, step(Opcode.ADD, [tanh, const(1.0)])])


@lowers("Mish")
def mish(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ONNX Mish (opset 18), x tanh(softplus(x)), as its function body: SOFTPLUS, TANH, MUL."""
    dims = cx.shape(n.output[0], n)
    x = cx.read(n.input[0], n, t)
    softplus = cx.emit(n, t, Opcode.SOFTPLUS, [x], out=cx.scratch(dims, t))
    cx.emit(n, t, Opcode.MUL, [x, cx.emit(n, t, Opcode.TANH, [softplus], out=cx.scratch(dims, t))])


@lowers("Elu", "Selu")
def elu(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ONNX Elu, x where x >= 0 else alpha (exp(x) - 1), as max(x, 0) + alpha (exp(min(x, 0)) - 1): ORT's
    values but for the kernel's exp (a few ulp from Eigen's). Selu is gamma times Elu of its own alpha."""
    selu = n.op_type == "Selu"
    alpha = float(attr(n, "alpha", 1.6732632423543772 if selu else 1.0))
    dims = cx.shape(n.output[0], n)
    x = cx.read(n.input[0], n, t)

    def clip(lo: float, hi: float) -> int:
        params = {ClipParam.MIN: f32_bits(lo), ClipParam.MAX: f32_bits(hi)}
        return cx.emit(n, t, Opcode.CLIP, [x], params, out=cx.scratch(dims, t))

    def times(value: int, c: float, last: bool = False) -> int:
        out = None if last else cx.scratch(dims, t)
        return cx.emit(n, t, Opcode.MUL, [value, cx.constant(np.array([c], np.float32), t)], out=out)

    positive, negative = clip(0.0, np.inf), clip(-np.inf, 0.0)
    grown = cx.emit(n, t, Opcode.EXP, [negative], out=cx.scratch(dims, t))
    one = cx.constant(np.array([1.0], np.float32), t)
    scaled = times(cx.emit(n, t, Opcode.SUB, [grown, one], out=cx.scratch(dims, t)), alpha)
    if not selu:
        cx.emit(n, t, Opcode.ADD, [positive, scaled])
        return
    gamma = float(attr(n, "gamma", 1.0507010221481323))
    times(cx.emit(n, t, Opcode.ADD, [positive, scaled], out=cx.scratch(dims, t)), gamma, last=True)


@lowers("Swish")
def swish(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """ONNX Swish (opset 24), x * sigmoid(alpha x): the kernel's SILU when alpha is 1."""
    if float(attr(n, "alpha", 1.0)) != 1.0:
        raise LoweringError(n.op_type, n.name, "only alpha=1 (SiLU) is supported")
    cx.emit(n, t, Opcode.SILU, [cx.read(n.input[0], n, t)])


@lowers("HardSigmoid")
def hard_sigmoid(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    params = {
        HardSigmoidParam.ALPHA: f32_bits(float(attr(n, "alpha", 0.2))),
        HardSigmoidParam.BETA: f32_bits(float(attr(n, "beta", 0.5))),
    }
    cx.emit(n, t, Opcode.HARDSIGMOID, [cx.read(n.input[0], n, t)], params)


@lowers("Sum")
def sum_(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A chain of ADD (numpy broadcast at every step); one input is a COPY."""
    _chain(cx, n, t, Opcode.ADD, [name for name in n.input if name])


def _chain(cx: Lowerer, n: onnx.NodeProto, t: Task, opcode: Opcode, inputs: list[str]) -> None:
    """An n-ary op as a chain of binary `opcode` ops (numpy broadcast at every step) of the inputs' type (float32,
    or int32/int64 where the op takes them); one input is a COPY."""
    acc, dtype = cx.read_any(inputs[0], n, t)
    if len(inputs) == 1:
        cx.emit(n, t, Opcode.COPY, [acc], out_dtype=dtype)
        return
    shape = cx.shape(inputs[0], n)
    for k, name in enumerate(inputs[1:], start=2):
        shape = list(np.broadcast_shapes(tuple(shape), tuple(cx.shape(name, n))))
        out = None if k == len(inputs) else cx.scratch(shape, t, dtype)
        acc = cx.emit(n, t, opcode, [acc, cx.read_typed(name, n, t, dtype)], out=out, out_dtype=dtype)


# Types a Cast to bool reads at run time (COMPARE NOT_EQUAL to 0; float16 as float32).
TO_BOOL: dict[int, Dtype] = {
    onnx.TensorProto.FLOAT: Dtype.F32,
    onnx.TensorProto.INT32: Dtype.I32,
    onnx.TensorProto.INT64: Dtype.I64,
}

# Integer types a Cast to float32 reads at run time: a DEQUANTIZE_LINEAR by 1.0 (int64 is not: DEQUANTIZE_LINEAR
# reads its low 32 bits; CAST converts it).
CASTS_TO_FLOAT: dict[int, Dtype] = {
    onnx.TensorProto.INT32: Dtype.I32,
    onnx.TensorProto.INT16: Dtype.I16,
    onnx.TensorProto.UINT16: Dtype.U16,
    onnx.TensorProto.INT8: Dtype.I8,
    onnx.TensorProto.UINT8: Dtype.U8,
}


@lowers("Cast")
def cast(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """A type to itself is a COPY; int32 (MatMulInteger's result), int16 (MarbleNet's audio samples),
    uint16 or 8-bit to float32 a DEQUANTIZE_LINEAR by 1.0, which rounds as the cast does; int64 to float32 (hama's
    attention lengths) CAST, to nearest as C converts; float32 to
    int32 (a dynamically quantised conv's bias chain Div -> Floor -> Cast) is CAST, as ONNX Runtime
    on x86: toward zero, NaN, +-inf and values outside the int32 range give INT32_MIN. float16 is
    computed as float32 (Lowerer.dtype): float16 to float32 is the same tensor, and a cast to float16
    of another type rounds, by CAST to float16 and back. A bool to float32, int32 or int64 (slovorez's mask
    arithmetic) is WHERE(x, 1, 0); float32, int32 or int64 to bool x != 0 (NaN true, as ORT), by COMPARE NOT_EQUAL.
    Every other cast is refused."""
    to, source = int(attr(n, "to", 0)), cx.dtype(n.input[0])
    if to == onnx.TensorProto.FLOAT16 and cx.stored_dtype(n.input[0]) != to:
        wide = _to_float(cx, n, t, source, to, scratch=True)
        half = cx.emit(n, t, Opcode.CAST, [wide], out=cx.scratch(traced_dims(cx.prog, wide), t, Dtype.F16))
        cx.emit(n, t, Opcode.CAST, [half])
        return
    if cx.stored_dtype(n.input[0]) == onnx.TensorProto.FLOAT16 and to in KERNEL_FLOATS:
        same_tensor(cx, n, t)  # float16 is held as float32 already
        return
    if (source in CASTS_TO_FLOAT or source in FROM_RUN_TIME) and to == onnx.TensorProto.FLOAT:
        _to_float(cx, n, t, source, to)
        return
    if source == onnx.TensorProto.BOOL and to in (onnx.TensorProto.INT32, onnx.TensorProto.INT64):
        _from_bool(cx, n, t, DTYPES[to])
        return
    if source in TO_BOOL and to == onnx.TensorProto.BOOL:
        _to_bool(cx, n, t, TO_BOOL[source])
        return
    if source == onnx.TensorProto.FLOAT and to == onnx.TensorProto.INT32:
        cx.emit(n, t, Opcode.CAST, [cx.read(n.input[0], n, t)], out_dtype=Dtype.I32)
        return
    if source != to or source not in DTYPES:
        _refuse_cast(n, cx.stored_dtype(n.input[0]), to)
    x, dtype = cx.read_any(n.input[0], n, t)
    cx.emit(n, t, Opcode.COPY, [x], out_dtype=dtype)


# Types a Cast to float32 reads by an op of their own: bools (WHERE(x, 1, 0)) and int64 (CAST)
FROM_RUN_TIME = (onnx.TensorProto.BOOL, onnx.TensorProto.INT64)


def _to_float(cx: Lowerer, n: onnx.NodeProto, t: Task, source: int, to: int, scratch: bool = False) -> int:
    """Cast's input as float32: a float (float16 too) as it is, an integer of CASTS_TO_FLOAT dequantized
    by 1.0, a bool WHERE(x, 1, 0), an int64 CAST, into Cast's output (or, with `scratch`, a scratch tensor)."""
    if source == onnx.TensorProto.FLOAT:
        return cx.read(n.input[0], n, t)
    out = cx.scratch(cx.shape(n.output[0], n), t) if scratch else None
    if source == onnx.TensorProto.BOOL:
        return _from_bool(cx, n, t, Dtype.F32, out)
    if source == onnx.TensorProto.INT64:
        return cx.emit(n, t, Opcode.CAST, [cx.read_typed(n.input[0], n, t, Dtype.I64)], out=out)
    if source not in CASTS_TO_FLOAT:
        _refuse_cast(n, cx.stored_dtype(n.input[0]), to)
    one = cx.constant(np.ones((), np.float32), t)
    integers = cx.read_typed(n.input[0], n, t, CASTS_TO_FLOAT[source])
    return cx.emit(n, t, Opcode.DEQUANTIZE_LINEAR, [integers, one], out=out)


def _from_bool(cx: Lowerer, n: onnx.NodeProto, t: Task, dtype: Dtype, out: int | None = None) -> int:
    """1 of `dtype` where Cast's bool input is true, else 0: WHERE(x, 1, 0) into Cast's output (or `out`)."""
    one, zero = (cx.constant(np.array(v, NP_DTYPES[dtype]), t, dtype) for v in (1, 0))
    cond = cx.read_typed(n.input[0], n, t, Dtype.BOOL)
    return cx.emit(n, t, Opcode.WHERE, [cond, one, zero], out=out, out_dtype=dtype)


def _to_bool(cx: Lowerer, n: onnx.NodeProto, t: Task, dtype: Dtype) -> None:
    """x != 0 (NaN is true, -0 false, as ONNX Runtime casts them): COMPARE NOT_EQUAL to a zero of x's type."""
    zero = cx.constant(np.zeros((), NP_DTYPES[dtype]), t, dtype)
    params = {CompareParam.MODE: int(CompareMode.NOT_EQUAL)}
    cx.emit(n, t, Opcode.COMPARE, [cx.read_typed(n.input[0], n, t, dtype), zero], params, out_dtype=Dtype.BOOL)


def _refuse_cast(n: onnx.NodeProto, source: int, to: int) -> NoReturn:
    names = (onnx.TensorProto.DataType.Name(d) if d else "unknown" for d in (source, to))
    raise LoweringError(
        n.op_type,
        n.name,
        "Cast from {} to {}: only a type to itself, integers and BOOL to FLOAT or FLOAT16, BOOL to INT32 or INT64, "
        "FLOAT to INT32, FLOAT, INT32 and INT64 to BOOL, FLOAT and FLOAT16 to each other".format(*names),
    )


@lowers("Clip")
def clip(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Bounds from the attributes (opset < 11) or constant scalar inputs (CLIP); a missing one is
    unbounded. A bound computed at run time (openWakeWord's melspectrogram: its max - 80 dB) is a MAX
    (lower) and a MIN (upper) by that tensor, which propagate a NaN bound where Clip ignores it; so is a
    Clip of int32/int64 (a length clamped) by any bounds, as ORT clamps (lo > hi gives hi)."""
    integers = DTYPES.get(cx.dtype(n.input[0])) in (Dtype.I32, Dtype.I64)
    if integers or (cx.opset >= 11 and any(cx.known_value(b) is None for b in n.input[1:3] if b)):
        _clip_by_tensors(cx, n, t)
        return
    if cx.opset < 11:
        lo, hi = float(attr(n, "min", -np.inf)), float(attr(n, "max", np.inf))
    else:
        lo, hi = (_clip_bound(cx, n, k, default) for k, default in ((1, -np.inf), (2, np.inf)))
    if np.isnan(lo) or np.isnan(hi):
        raise LoweringError(n.op_type, n.name, "a NaN bound is not supported")
    params = {ClipParam.MIN: f32_bits(lo), ClipParam.MAX: f32_bits(hi)}
    cx.emit(n, t, Opcode.CLIP, [cx.read(n.input[0], n, t)], params)


def _clip_by_tensors(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    bounds = [(op, n.input[k]) for k, op in ((1, Opcode.MAX), (2, Opcode.MIN)) if len(n.input) > k and n.input[k]]
    dims = cx.shape(n.output[0], n)
    x, dtype = cx.read_any(n.input[0], n, t)
    if not bounds:
        cx.emit(n, t, Opcode.COPY, [x], out_dtype=dtype)
    for k, (opcode, bound) in enumerate(bounds):
        if math.prod(cx.shape(bound, n)) != 1:
            raise LoweringError(n.op_type, n.name, f"bound '{bound}' must be a scalar")
        out = None if k == len(bounds) - 1 else cx.scratch(dims, t, dtype)
        x = cx.emit(n, t, opcode, [x, cx.read_typed(bound, n, t, dtype)], out=out, out_dtype=dtype)


@lowers("Max", "Min")
def max_min(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Max(x, c) and Min(x, c) of a scalar constant c are one-sided CLIPs (tf2onnx writes Max(x, -0.4)
    after each LeakyRelu of openWakeWord's embedding model); any other Max/Min a chain of MAX / MIN
    (numpy broadcast, a NaN propagates, as ONNX Runtime; of int32/int64 too)."""
    inputs = [name for name in n.input if name]
    known = [cx.constant_value(name) for name in inputs]
    scalars = [k for k, v in enumerate(known) if v is not None and np.asarray(v).size == 1]
    floats = DTYPES.get(cx.dtype(n.output[0])) == Dtype.F32
    if floats and len(inputs) == 2 and scalars and cx.shape(inputs[1 - scalars[0]], n) == cx.shape(n.output[0], n):
        c = float(np.asarray(known[scalars[0]]).ravel()[0])
        lo, hi = (c, np.inf) if n.op_type == "Max" else (-np.inf, c)
        params = {ClipParam.MIN: f32_bits(lo), ClipParam.MAX: f32_bits(hi)}
        cx.emit(n, t, Opcode.CLIP, [cx.read(inputs[1 - scalars[0]], n, t)], params)
        return
    _chain(cx, n, t, Opcode.MAX if n.op_type == "Max" else Opcode.MIN, inputs)


@lowers("LeakyRelu")
def leaky_relu(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """alpha x where x < 0, as ORT computes it (one f32 product): max(x, alpha x) for 0 <= alpha <= 1,
    min(x, alpha x) above 1; below 0, max(x, 0) + alpha min(x, 0)."""
    _leaky(cx, n, t, float(attr(n, "alpha", 0.01)))


@lowers("PRelu")
def prelu(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """slope x where x < 0 (ORT: x > 0 ? x : x * slope): a constant one-element slope (GTCRN's are
    [1, 1, 1]) as LeakyRelu; any other (per channel, or computed) max(x, 0) + slope min(x, 0)."""
    value = cx.constant_value(n.input[1])
    if value is not None and np.asarray(value).size == 1:
        _leaky(cx, n, t, float(np.asarray(value).ravel()[0]))
    else:
        _leaky(cx, n, t, None)


def _leaky(cx: Lowerer, n: onnx.NodeProto, t: Task, alpha: float | None) -> None:
    """x where x > 0, else alpha x (None: input 1 times x, broadcast)."""
    dims = cx.shape(n.output[0], n)
    x = cx.read(n.input[0], n, t)
    slope = cx.read(n.input[1], n, t) if alpha is None else cx.constant(np.array([alpha], np.float32), t)
    if alpha is not None and alpha >= 0.0:
        scaled = cx.emit(n, t, Opcode.MUL, [x, slope], out=cx.scratch(dims, t))
        cx.emit(n, t, Opcode.MAX if alpha <= 1.0 else Opcode.MIN, [x, scaled])
        return
    clip = {"positive": (0.0, np.inf), "negative": (-np.inf, 0.0)}
    part = {
        k: cx.emit(n, t, Opcode.CLIP, [x], {ClipParam.MIN: f32_bits(lo), ClipParam.MAX: f32_bits(hi)},
                   out=cx.scratch(dims, t))
        for k, (lo, hi) in clip.items()
    }  # fmt: skip
    scaled = cx.emit(n, t, Opcode.MUL, [part["negative"], slope], out=cx.scratch(dims, t))
    cx.emit(n, t, Opcode.ADD, [part["positive"], scaled])


def _clip_bound(cx: Lowerer, n: onnx.NodeProto, k: int, default: float) -> float:
    if len(n.input) <= k or not n.input[k]:
        return default
    values = cx.const_floats(n.input[k], n)
    if values.size != 1:
        raise LoweringError(n.op_type, n.name, f"bound '{n.input[k]}' must be a scalar")
    return float(values[0])


def replaces_nan(where: onnx.NodeProto, test: onnx.NodeProto) -> bool:
    """`where` is Where(IsNaN(x), c, x) and `test` its IsNaN(x) (torch's SDPA export writes it
    after each Softmax: a fully masked row's NaNs become 0)."""
    return (
        where.op_type == "Where"
        and test.op_type == "IsNaN"
        and len(where.input) == 3
        and where.input[0] == test.output[0]
        and where.input[2] == test.input[0]
    )


@lowers("IsNaN")
def is_nan(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """No op where every reader is a Where(IsNaN(x), c, x) (REPLACE_NAN, below) and the test is no pair output;
    else x != x: COMPARE NOT_EQUAL of x with itself."""
    readers = [b for b in cx.fn.node if n.output[0] in b.input]
    if n.output[0] not in cx.out_index and readers and all(_replaces_nan_by_constant(cx, b, n) for b in readers):
        return
    x = cx.read(n.input[0], n, t)
    cx.emit(n, t, Opcode.COMPARE, [x, x], {CompareParam.MODE: int(CompareMode.NOT_EQUAL)}, out_dtype=Dtype.BOOL)


def _replaces_nan_by_constant(cx: Lowerer, where: onnx.NodeProto, test: onnx.NodeProto) -> bool:
    value = cx.known_value(where.input[1]) if len(where.input) == 3 else None
    return replaces_nan(where, test) and value is not None and value.size == 1


@lowers("Where")
def where(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    """Where(IsNaN(x), c, x) with a constant scalar c is REPLACE_NAN of x; any other Where (its condition a bool
    the program holds) WHERE: X and Y of one type, the three broadcast. (A Where of values known when lowering
    folds.)"""
    test = next((b for b in cx.fn.node if n.input[0] in b.output), None)
    if test is not None and _replaces_nan_by_constant(cx, n, test):
        value = np.asarray(cx.known_value(n.input[1]), np.float32).reshape(-1)[0]
        cx.emit(n, t, Opcode.REPLACE_NAN, [cx.read(n.input[2], n, t)], {ReplaceNanParam.VALUE: f32_bits(float(value))})
        return
    cond = cx.read_typed(n.input[0], n, t, Dtype.BOOL)
    (x, dx), (y, dy) = (cx.read_any(name, n, t) for name in n.input[1:3])
    if dx != dy:
        raise LoweringError(n.op_type, n.name, f"picks from {dx.name.lower()} and {dy.name.lower()}: one type only")
    cx.emit(n, t, Opcode.WHERE, [cond, x, y], out_dtype=dx)
