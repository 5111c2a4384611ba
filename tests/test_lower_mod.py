"""Mod and integer Div lowered onto the kernel's DIV (its remainders and quotients), Clip, Max and Min of integers
(MAX, MIN), run on the real host kernel against ONNX Runtime: every output bit for bit. ORT fails a run on an
integer divisor of 0 and its integer Div kills the process (SIGFPE) on MIN / -1, so those run on the dsp tests only
(test_kernels.c test_int_binary)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from test_lower import needs_host, vi
from test_lower_exporter_ops import opcodes
from test_lower_logic import F16, F32, I32, I64, NP, RNG, assert_same_bits, run_both, task_b

from hexfuse_onnx.lowering import LoweringError
from hexfuse_onnx.lowering.abi import Opcode

SHAPES = [([3, 5, 7], [3, 5, 7]), ([3, 5, 7], [7]), ([1, 5, 1], [3, 1, 7]), ([4097], []), ([], [4097])]


def mod_pair(dtype: int, xs: list[int], ys: list[int], fmod: int) -> onnx.ModelProto:
    out = list(np.broadcast_shapes(tuple(xs), tuple(ys)))
    node = helper.make_node("Mod", ["p", "q"], ["yb"], name="mod", fmod=fmod)
    return task_b([node], [vi("p", xs, dtype), vi("q", ys, dtype)], [vi("yb", out, dtype)], opset=13)


def integers(dtype: int, shape: list[int], divisor: bool, mod: bool = False) -> np.ndarray:
    """Small values of both signs, the type's extremes and random ones; a divisor is never 0 (ORT fails the run) and
    is -1 only for a Mod (ORT's Div dies of SIGFPE at MIN / -1; its Mod gives 0)."""
    info = np.iinfo(NP[dtype])
    pool = np.array([info.min, info.max, info.min + 1, -7, -4, -3, -2, 2, 3, 4, 7, 160, 1, -1, 0], NP[dtype])
    pick = RNG.choice(pool[: (-1 if mod else -2) if divisor else None], shape)
    wide = RNG.integers(info.min, info.max, shape, dtype=NP[dtype], endpoint=True)
    if divisor:
        wide[(wide == 0) | (wide == -1)] = 5
    return np.asarray(np.where(RNG.random(shape) < 0.5, pick, wide)).astype(NP[dtype])


def floats(dtype: int, shape: list[int]) -> np.ndarray:
    """Random bit patterns (every exponent, subnormals, NaNs with payloads, +-inf) and special values."""
    if dtype == F16:
        bits = RNG.integers(0, 1 << 16, shape, dtype=np.uint16).view(np.float16)
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, 6e-8, 65504.0], np.float16)
    else:
        bits = RNG.integers(0, 1 << 32, shape, dtype=np.uint32).view(np.float32)
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, 1e-45, 3e38, 7.0, 0.1], np.float32)
    return np.asarray(np.where(RNG.random(shape) < 0.3, RNG.choice(special, shape), bits)).astype(NP[dtype])


@needs_host
@pytest.mark.parametrize("dtype", [I32, I64], ids=["i32", "i64"])
def test_integer_mod_takes_the_divisors_sign_as_ort(dtype: int) -> None:
    """fmod=0: the remainder has the divisor's sign (-7 mod 4 = 1, 7 mod -4 = -1), extremes, broadcasting."""
    for xs, ys in SHAPES:
        m = mod_pair(dtype, xs, ys, fmod=0)
        assert opcodes(m) == [Opcode.RELU, Opcode.DIV]
        assert_same_bits(*run_both(m, {"p": integers(dtype, xs, False), "q": integers(dtype, ys, True, True)}))


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16, I32], ids=["f32", "f16", "i32"])
def test_fmod_takes_the_dividends_sign_as_ort(dtype: int) -> None:
    """fmod=1: C's fmod, exact, of any two floats (NaN bits as ORT's: x86-64's fmodf), and of int32 as ORT computes
    it through double (MIN fmod -1 gives 0). ORT's float16 Mod gives its own quiet NaNs (0x7e00 or 0xfe00, not
    always of the operand's sign), the program's CAST keeps the float NaN's sign and payload: those compare as NaNs."""
    for xs, ys in SHAPES:
        m = mod_pair(dtype, xs, ys, fmod=1)
        feeds = (
            {"p": integers(dtype, xs, False), "q": integers(dtype, ys, True, True)}
            if dtype == I32
            else {"p": floats(dtype, xs), "q": floats(dtype, ys)}
        )
        ref, got = run_both(m, feeds)
        if dtype == F16:
            ref[1], got[1] = (np.where(np.isnan(r), np.float16(np.nan), r) for r in (ref[1], got[1]))
        assert_same_bits(ref, got)


@pytest.mark.parametrize(
    ("dtypes", "fmod"),
    [((F32, F32), 0), ((I64, I64), 1), ((I32, I64), 0), ((I32, I32), 2), ((onnx.TensorProto.UINT8,) * 2, 0)],
    ids=["float-fmod0", "i64-fmod1", "mixed", "fmod2", "u8"],
)
def test_mod_outside_ort_or_the_kernel_is_refused(dtypes: tuple[int, int], fmod: int) -> None:
    node = helper.make_node("Mod", ["p", "q"], ["yb"], name="mod", fmod=fmod)
    m = task_b([node], [vi("p", [4], dtypes[0]), vi("q", [4], dtypes[1])], [vi("yb", [4], dtypes[0])], opset=13)
    with pytest.raises(LoweringError, match="fmod="):
        opcodes(m)


@needs_host
@pytest.mark.parametrize("dtype", [I32, I64], ids=["i32", "i64"])
def test_integer_div_truncates_as_ort(dtype: int) -> None:
    """-7 / 2 = -3, 7 / -2 = -3, the extremes; no divisor of 0 or -1 (ORT fails the run, or dies at MIN / -1)."""
    for xs, ys in SHAPES:
        out = list(np.broadcast_shapes(tuple(xs), tuple(ys)))
        node = helper.make_node("Div", ["p", "q"], ["yb"], name="div")
        m = task_b([node], [vi("p", xs, dtype), vi("q", ys, dtype)], [vi("yb", out, dtype)])
        assert opcodes(m) == [Opcode.RELU, Opcode.DIV]
        assert_same_bits(*run_both(m, {"p": integers(dtype, xs, False), "q": integers(dtype, ys, True)}))


@needs_host
def test_torchs_floor_division_of_lengths_equals_ort() -> None:
    """trueocr's and hama's width masks: torch's floor division of int64 lengths by a constant, exported as Div,
    Mod, the signs' Xor and a Where picking the quotient or the quotient - 1 (floor(-7 / 4) = -2)."""
    i64 = helper.make_tensor
    consts = {"four": 4, "zero": 0, "one": 1}
    nodes = [helper.make_node("Constant", [], [k], name=k, value=i64(k, I64, [], [v])) for k, v in consts.items()]
    nodes += [
        helper.make_node("Div", ["w", "four"], ["q"], name="div"),
        helper.make_node("Sub", ["q", "one"], ["q1"], name="sub"),
        helper.make_node("Less", ["w", "zero"], ["lw"], name="lw"),
        helper.make_node("Less", ["four", "zero"], ["lb"], name="lb"),
        helper.make_node("Xor", ["lw", "lb"], ["signs"], name="xor"),
        helper.make_node("Mod", ["w", "four"], ["r"], name="mod"),
        helper.make_node("Equal", ["r", "zero"], ["exact"], name="eq"),
        helper.make_node("Not", ["exact"], ["inexact"], name="not"),
        helper.make_node("And", ["signs", "inexact"], ["adjust"], name="and"),
        helper.make_node("Where", ["adjust", "q1", "q"], ["yb"], name="where"),
    ]
    m = task_b(nodes, [vi("w", [9], I64)], [vi("yb", [9], I64)])
    w = np.array([-9, -8, -7, -1, 0, 1, 7, 8, 2**62 + 3], np.int64)
    ref, got = run_both(m, {"w": w})
    assert_same_bits(ref, got)
    assert got[1].tolist() == (w // 4).tolist()


@needs_host
@pytest.mark.parametrize("dtype", [I32, I64], ids=["i32", "i64"])
def test_integer_clip_max_and_min_equal_ort(dtype: int) -> None:
    """Clip of lengths by constant bounds (hama's 1..3000), by the upper one only and by a computed one (trueocr's
    width); Max and Min of three tensors, and of a tensor and a scalar constant."""
    c = helper.make_tensor
    nodes = [
        helper.make_node("Constant", [], ["lo"], name="lo", value=c("lo", dtype, [], [1])),
        helper.make_node("Constant", [], ["hi"], name="hi", value=c("hi", dtype, [], [3000])),
        helper.make_node("Clip", ["p", "lo", "hi"], ["both"], name="clip"),
        helper.make_node("Clip", ["p", "", "hi"], ["upper"], name="clip_upper"),
        helper.make_node("Clip", ["p", "k"], ["computed"], name="clip_computed"),
        helper.make_node("Max", ["p", "q", "k"], ["most"], name="max"),
        helper.make_node("Min", ["p", "hi"], ["least"], name="min"),
    ]
    outs = [vi(name, [3, 5], dtype) for name in ("both", "upper", "computed", "most", "least")]
    m = task_b(nodes, [vi("p", [3, 5], dtype), vi("q", [5], dtype), vi("k", [], dtype)], outs)
    assert set(opcodes(m)) == {Opcode.RELU, Opcode.MAX, Opcode.MIN}
    feeds = {"p": integers(dtype, [3, 5], False), "q": integers(dtype, [5], False), "k": integers(dtype, [], False)}
    feeds["p"].flat[:4] = [0, 1, 3000, 3001]
    assert_same_bits(*run_both(m, feeds))


@needs_host
def test_fmod_of_two_nans_picks_orts() -> None:
    """Of two NaN operands ORT's x86-64 fmod (x87's rule) gives the larger significand made quiet, on a tie the
    positive one; one NaN comes out quiet; x = inf or y = 0 gives 0xffc00000."""
    x = [0x7FD00000, 0xFFC00001, 0x7FC00001, 0x7F800001, 0xFF900000, 0x7FC00000, 0x7F800000, 0x3F800000]
    y = [0x7FC00001, 0x7FC00001, 0xFFC00001, 0x7FC00000, 0x7F800002, 0x7F900000, 0x40000000, 0x00000000]
    m = mod_pair(F32, [8], [8], fmod=1)
    feeds = {"p": np.array(x, np.uint32).view(np.float32), "q": np.array(y, np.uint32).view(np.float32)}
    assert_same_bits(*run_both(m, feeds))
