"""Shape expressions of the task program's shape section: parsing, compiling, the reference evaluator."""

from __future__ import annotations

import itertools
import random
import struct

import pytest

from hexfuse_onnx import shape_expr as S

DIMS = [
    "batch",
    "floor(floor(floor(floor(p2o.DynamicDimension.1/2 - 1/2)/2)/2)/2) + 1",
    "2*sequence - 1",
    "Max(1, past + 3)",
    "ceiling(h/3) - w",
    "floor(h/2 - 1/2) + 1 - 2*w",
    "Mod(h, 4) + h",
    "3 - h",
    "sequence + past_sequence_length",
]


@pytest.mark.parametrize("text", DIMS)
def test_compiled_code_evaluates_as_sympy(text: str) -> None:
    expr = S.parse_dim(text)
    names = sorted(S.free_names(expr))
    words = S.compile_expr(expr, {n: i for i, n in enumerate(names)})
    rng = random.Random(text)
    for _ in range(300):
        binding = {n: rng.randint(1, 5000) for n in names}
        assert S.run(words, [binding[n] for n in names]) == S.evaluate(expr, binding)


def test_floats_of_ort_inference_become_exact() -> None:
    assert S.parse_dim("1.00000000000000") == 1
    assert S.run(S.compile_expr(S.parse_dim("2.0*h"), {"h": 0}), [21]) == 42


def test_names_with_dots_and_keywords_are_symbols() -> None:
    expr = S.parse_dim("p2o.DynamicDimension.0 + lambda")
    assert S.free_names(expr) == {"p2o.DynamicDimension.0", "lambda"}


@pytest.mark.parametrize(
    ("text", "why"),
    [("h/2", "fraction"), ("floor(h/w)", "not by a positive constant"), ("h**2", "Pow"), ("unbound + 1", "not a dim")],
)
def test_what_the_section_cannot_carry_is_refused(text: str, why: str) -> None:
    with pytest.raises(S.ShapeExprError, match=why):
        S.compile_expr(S.parse_dim(text), {"h": 0, "w": 1})


@pytest.mark.parametrize(
    ("words", "why"),
    [
        ([S.Code.ADD], "underflow"),
        ([S.Code.CONST], "without its value"),
        ([S.Code.CONST, 1, S.Code.CONST, 0, S.Code.FLOORDIV], "division by zero"),
        ([S.Code.CONST, 1, S.Code.CONST, 2], "2 values left"),
        ([S.Code.SYM | (5 << 8)], "not defined"),
        ([0x7F], "unknown instruction"),
    ],
)
def test_evaluator_refuses_bad_code(words: list[int], why: str) -> None:
    with pytest.raises(S.ShapeExprError, match=why):
        S.run([int(w) for w in words], [3])


def test_division_rounds_toward_minus_infinity() -> None:
    neg7 = (-7) & 0xFFFFFFFF
    assert S.run([S.Code.CONST, neg7, S.Code.CONST, 2, S.Code.FLOORDIV], []) == -4
    assert S.run([S.Code.CONST, neg7, S.Code.CONST, 2, S.Code.CEILDIV], []) == -3
    assert S.run([S.Code.CONST, neg7, S.Code.CONST, 2, S.Code.MOD], []) == 1


def test_section_layout() -> None:
    section = S.encode_section([S.Symbol("batch", 0, 0)], [S.Patch(S.Target.TENSOR_DIM, 3, 0, (int(S.Code.SYM),))])
    assert struct.unpack("<IIII", section[:16]) == (1, 0, 0, 1)
    assert struct.unpack("<BBHIII", section[16:]) == (1, 0, 1, 3, 0, int(S.Code.SYM))


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_same_pads_follow_the_lowering_rule_at_every_side(auto_pad: str) -> None:
    """The pads words of a SAME_* axis give `spatial.pads_2d`'s pads at every residue of the side, over a lone
    symbol and over a side that is itself an expression (ceil(h/2), after a stride-2 SAME window)."""
    from onnx import helper

    from hexfuse_onnx.lowering.spatial import pads_2d

    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad)
    half = S.compile_expr(S.parse_dim("ceiling(h/2)"), {"h": 0})
    for stride, kernel, dil in itertools.product([2, 3, 4], [1, 2, 3, 5], [1, 2]):
        extent = (kernel - 1) * dil + 1
        for side, of in (([S.Code.SYM], lambda h: h), (half, lambda h: -(-h // 2))):
            begin, end = S.same_pads(side, stride, extent, auto_pad == "SAME_UPPER")
            for h in range(1, 4 * stride + 2):
                want = pads_2d(node, [1, 1, of(h)], [kernel], [stride], [dil])
                assert [S.run(begin, [h]), S.run(end, [h])] == want, (stride, kernel, dil, h)


def test_same_pads_of_too_long_a_side_are_refused() -> None:
    with pytest.raises(S.ShapeExprError, match="pads of a side of 30 words need 79"):
        S.same_pads([S.Code.SYM] * 30, 2, 3, True)
