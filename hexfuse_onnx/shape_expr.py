"""Symbolic dims as the task program's shape section carries them (dsp/README.md, format v2).

Shape inference names a symbolic dim by a string: an input's own name (`batch`,
`p2o.DynamicDimension.1`) or an expression of such names (`floor(height/2 - 1/2) + 1`). A
program is lowered at one representative binding of those names; its shape section lists the
dims and params that follow the input shapes, each as a postfix expression over the *symbols*
(dims of the node's inputs), so the kernel re-derives every size from the actual inputs.

This module parses the strings, turns an expression into the section's postfix code, evaluates
that code (the reference the C evaluator must equal), and encodes the section.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from enum import IntEnum
from functools import cache

import sympy

MAX_SYMBOLS = 64
MAX_STACK = 16
MAX_WORDS = 64
MAX_PATCHES = 65535
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Code(IntEnum):
    """Instructions of a shape expression (low 8 bits of a word)."""

    CONST = 1
    SYM = 2
    ADD = 3
    SUB = 4
    MUL = 5
    FLOORDIV = 6
    CEILDIV = 7
    MOD = 8
    MIN = 9
    MAX = 10


class Target(IntEnum):
    TENSOR_DIM = 1
    OP_PARAM = 2


class ShapeExprError(ValueError):
    """An expression the shape section cannot carry, or one that fails to evaluate."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_FUNCTIONS = {"floor", "ceiling", "Min", "Max", "Mod", "ceil", "min", "max", "mod"}


@cache  # sympy's parser takes about 2 ms a dim; a pass parses the same few dims thousands of times
def parse_dim(text: str) -> sympy.Expr:
    """A dim string as a sympy expression; every name that is not a function is a symbol.

    Names may hold dots (`p2o.DynamicDimension.0`) or be Python keywords, so each is replaced by
    a safe placeholder before sympify and mapped back to a Symbol of the original name.
    """
    names: dict[str, sympy.Symbol] = {}

    def placeholder(m: re.Match[str]) -> str:
        word = m.group(0)
        if word in _FUNCTIONS:
            return {"ceil": "ceiling", "min": "Min", "max": "Max", "mod": "Mod"}.get(word, word)
        key = f"_s{len(names)}"
        names.setdefault(key, sympy.Symbol(word, integer=True))
        return key

    body = _NAME.sub(placeholder, text)
    try:
        expr = sympy.sympify(body, locals=dict(names))
    except (sympy.SympifyError, SyntaxError, TypeError) as exc:
        raise ShapeExprError(f"dim '{text}' is not an expression of symbols: {exc}") from None
    # ORT's inference writes scaled dims with floats ('1.00000000000000', '2.0*h'): exact rationals
    # here, so an integral one is an Integer (a fraction left outside floor/ceiling is refused).
    expr = sympy.sympify(expr)
    return expr.xreplace({f: sympy.nsimplify(f, rational=True) for f in expr.atoms(sympy.Float)})


def free_names(expr: sympy.Expr) -> set[str]:
    return {s.name for s in expr.free_symbols}


def evaluate(expr: sympy.Expr, binding: dict[str, int]) -> int:
    """The integer value of a dim expression under a binding of its names."""
    value = expr.subs({s: binding[s.name] for s in expr.free_symbols})
    if not value.is_integer:
        raise ShapeExprError(f"dim '{expr}' is not an integer at {binding}: {value}")
    return int(value)


# ---- sympy -> postfix code


def compile_expr(expr: sympy.Expr, symbol_index: dict[str, int]) -> list[int]:
    """The postfix words of `expr`; `symbol_index` numbers the names the kernel binds."""
    words: list[int] = []
    _emit(sympy.sympify(expr), symbol_index, words)
    if len(words) > MAX_WORDS:
        raise ShapeExprError(f"dim '{expr}' needs {len(words)} words, the format allows {MAX_WORDS}")
    if _max_depth(words) > MAX_STACK:
        raise ShapeExprError(f"dim '{expr}' needs a deeper stack than {MAX_STACK}")
    return words


def same_pads(side: list[int], stride: int, extent: int, upper: bool) -> tuple[list[int], list[int]]:
    """The words of the (begin, end) pads of an auto_pad SAME_* axis over a side of words `side`, as
    lowering.spatial.pads_2d: total = max(0, (ceil(x / stride) - 1) * stride + extent - x) with `extent`
    the dilated kernel's, its smaller half first for SAME_UPPER, last for SAME_LOWER."""
    total = list(side)
    for value, code in ((stride, Code.CEILDIV), (1, Code.SUB), (stride, Code.MUL), (extent, Code.ADD)):
        _const(value, total)
        total.append(code)
    total += [*side, Code.SUB]
    _const(0, total)
    total.append(Code.MAX)
    small, big = [*total, Code.CONST, 2, Code.FLOORDIV], [*total, Code.CONST, 2, Code.CEILDIV]
    for words in (small, big):
        if len(words) > MAX_WORDS or _max_depth(words) > MAX_STACK:
            raise ShapeExprError(f"the pads of a side of {len(side)} words need {len(words)}, beyond the format")
    return (small, big) if upper else (big, small)


def _const(value: int, words: list[int]) -> None:
    if not -(2**31) <= value < 2**31:
        raise ShapeExprError(f"constant {value} does not fit an i32")
    words += [Code.CONST, value & 0xFFFFFFFF]


def _emit(expr: sympy.Expr, index: dict[str, int], words: list[int]) -> None:
    num, den = sympy.fraction(sympy.together(expr))
    if den != 1:
        # Only floor/ceiling of a rational is an integer: a bare quotient must divide exactly.
        raise ShapeExprError(f"dim '{expr}' is a fraction outside floor/ceiling")
    if expr.is_Integer:
        _const(int(expr), words)
    elif expr.is_Symbol:
        if expr.name not in index:
            raise ShapeExprError(f"dim '{expr.name}' is not a dim of the pair's inputs")
        words.append(Code.SYM | (index[expr.name] << 8))
    elif isinstance(expr, (sympy.floor, sympy.ceiling)):
        _emit_division(expr, index, words)
    elif expr.is_Add or expr.is_Mul:
        _emit_chain(expr, index, words)
    elif isinstance(expr, (sympy.Min, sympy.Max)):
        args = list(expr.args)
        _emit(args[0], index, words)
        for a in args[1:]:
            _emit(a, index, words)
            words.append(Code.MIN if isinstance(expr, sympy.Min) else Code.MAX)
    elif isinstance(expr, sympy.Mod):
        _emit(expr.args[0], index, words)
        _emit(expr.args[1], index, words)
        words.append(Code.MOD)
    else:
        raise ShapeExprError(f"dim '{expr}' uses {type(expr).__name__}, which the shape section does not carry")


def _emit_chain(expr: sympy.Expr, index: dict[str, int], words: list[int]) -> None:
    """A product (constants may be negative), or a sum whose negated terms become SUB."""
    if expr.is_Mul:
        factors = list(expr.as_ordered_factors())
        _emit(factors[0], index, words)
        for f in factors[1:]:
            _emit(f, index, words)
            words.append(Code.MUL)
        return
    terms = list(expr.as_ordered_terms())
    plus = [t for t in terms if not t.could_extract_minus_sign()]
    minus = [-t for t in terms if t.could_extract_minus_sign()]
    if plus:
        _emit(plus[0], index, words)
    else:
        _const(0, words)
    for t in plus[1:]:
        _emit(t, index, words)
        words.append(Code.ADD)
    for t in minus:
        _emit(t, index, words)
        words.append(Code.SUB)


def _emit_division(expr: sympy.Expr, index: dict[str, int], words: list[int]) -> None:
    inner = sympy.together(expr.args[0])
    num, den = sympy.fraction(inner)
    if not den.is_Integer or int(den) <= 0:
        raise ShapeExprError(f"dim '{expr}' divides by '{den}', not by a positive constant")
    _emit(sympy.expand(num), index, words)
    _const(int(den), words)
    words.append(Code.FLOORDIV if isinstance(expr, sympy.floor) else Code.CEILDIV)


def _max_depth(words: list[int]) -> int:
    depth = best = 0
    i = 0
    while i < len(words):
        op = words[i] & 0xFF
        if op in (Code.CONST, Code.SYM):
            depth += 1
            i += 2 if op == Code.CONST else 1
        else:
            depth -= 1
            i += 1
        best = max(best, depth)
    return best


# ---- the reference evaluator (the C one in dsp/ must give the same values)


def run(words: list[int], symbols: list[int]) -> int:
    """Evaluate postfix words over int64 exactly as the kernel does; raises ShapeExprError."""
    stack: list[int] = []
    i = 0
    while i < len(words):
        op, arg = words[i] & 0xFF, words[i] >> 8
        i += 1
        if op == Code.CONST:
            if i >= len(words):
                raise ShapeExprError("CONST without its value")
            value = words[i] - (1 << 32) if words[i] >= 1 << 31 else words[i]
            i += 1
            stack.append(value)
        elif op == Code.SYM:
            if arg >= len(symbols):
                raise ShapeExprError(f"symbol {arg} is not defined")
            stack.append(symbols[arg])
        else:
            if op not in _BINARY:
                raise ShapeExprError(f"unknown instruction {op}")
            if len(stack) < 2:
                raise ShapeExprError("stack underflow")
            b, a = stack.pop(), stack.pop()
            stack.append(_apply(op, a, b))
        if len(stack) > MAX_STACK:
            raise ShapeExprError("stack overflow")
        if not INT64_MIN <= stack[-1] <= INT64_MAX:
            raise ShapeExprError("int64 overflow")
    if len(stack) != 1:
        raise ShapeExprError(f"{len(stack)} values left, expected 1")
    return stack[0]


_BINARY = {Code.ADD, Code.SUB, Code.MUL, Code.FLOORDIV, Code.CEILDIV, Code.MOD, Code.MIN, Code.MAX}


def _apply(op: int, a: int, b: int) -> int:
    if op in (Code.FLOORDIV, Code.CEILDIV, Code.MOD) and b == 0:
        raise ShapeExprError("division by zero")
    results = {
        Code.ADD: lambda: a + b,
        Code.SUB: lambda: a - b,
        Code.MUL: lambda: a * b,
        Code.FLOORDIV: lambda: a // b,
        Code.CEILDIV: lambda: -((-a) // b),
        Code.MOD: lambda: a - b * (a // b),
        Code.MIN: lambda: min(a, b),
        Code.MAX: lambda: max(a, b),
    }
    return results[Code(op)]()


# ---- the section


@dataclass(frozen=True)
class Symbol:
    """Symbol k of a program: dim `axis` of node input `io_index`."""

    name: str
    io_index: int
    axis: int


@dataclass(frozen=True)
class Patch:
    target: Target
    id: int  # tensor id or op index
    slot: int  # axis or param slot
    words: tuple[int, ...]


def encode_section(symbols: list[Symbol], patches: list[Patch]) -> bytes:
    if not 1 <= len(symbols) <= MAX_SYMBOLS:
        raise ShapeExprError(f"{len(symbols)} symbols; the format allows 1..{MAX_SYMBOLS}")
    if len(patches) > MAX_PATCHES:
        raise ShapeExprError(f"{len(patches)} patches; the format allows {MAX_PATCHES}")
    out = bytearray(struct.pack("<I", len(symbols)))
    for s in symbols:
        out += struct.pack("<II", s.io_index, s.axis)
    out += struct.pack("<I", len(patches))
    for p in patches:
        out += struct.pack("<BBHII", p.target, 0, len(p.words), p.id, p.slot)
        out += struct.pack(f"<{len(p.words)}I", *p.words)
    return bytes(out)
