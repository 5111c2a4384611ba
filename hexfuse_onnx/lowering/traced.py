"""Dims that remember how a lowering computed them, for the scratch tensors of a fused op.

A lowering that expands one node into many ops (attention.py) makes scratch tensors whose dims
are arithmetic on its inputs' dims ([B, S, N*H] -> [B, N, S, H]). Reading a program tensor's dims
through `traced_dims` gives `TracedDim`s whose expression names that tensor's axes
(`hfx_t{tid}_{axis}`); +, -, * and // keep the expression. The shape section (shapes.py) later
replaces each name by the expression of the tensor it names, so every scratch dim follows the
actual input shapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import sympy

from .program import Program

_PLACEHOLDER = re.compile(r"hfx_t(\d+)_(\d+)$")


class TracedDim(int):
    """An int dim with its sympy expression over placeholders of program tensor axes."""

    expr: sympy.Expr

    def __new__(cls, value: int, expr: sympy.Expr) -> TracedDim:
        obj = super().__new__(cls, int(value))
        obj.expr = expr
        return obj

    def _apply(self, other: object, op: Callable[[int, int], int], sym: Callable) -> int:
        if not isinstance(other, int):
            return NotImplemented
        return TracedDim(op(int(self), int(other)), sym(self.expr, expr_of(other)))

    def __add__(self, other: object) -> int:
        return self._apply(other, lambda a, b: a + b, lambda a, b: a + b)

    def __radd__(self, other: object) -> int:
        return self._apply(other, lambda a, b: b + a, lambda a, b: b + a)

    def __sub__(self, other: object) -> int:
        return self._apply(other, lambda a, b: a - b, lambda a, b: a - b)

    def __rsub__(self, other: object) -> int:
        return self._apply(other, lambda a, b: b - a, lambda a, b: b - a)

    def __mul__(self, other: object) -> int:
        return self._apply(other, lambda a, b: a * b, lambda a, b: a * b)

    def __rmul__(self, other: object) -> int:
        return self._apply(other, lambda a, b: b * a, lambda a, b: b * a)

    def __floordiv__(self, other: object) -> int:
        return self._apply(other, lambda a, b: a // b, lambda a, b: sympy.floor(a / b))

    def __rfloordiv__(self, other: object) -> int:
        return self._apply(other, lambda a, b: b // a, lambda a, b: sympy.floor(b / a))


def expr_of(d: int) -> sympy.Expr:
    return d.expr if isinstance(d, TracedDim) else sympy.Integer(int(d))


def placeholder(tid: int, axis: int) -> sympy.Symbol:
    return sympy.Symbol(f"hfx_t{tid}_{axis}", integer=True)


def traced_dims(prog: Program, tid: int) -> list[int]:
    """Program tensor `tid`'s dims, each traced (its own, or a placeholder of the tensor's axis)."""
    return [
        d if isinstance(d, TracedDim) else TracedDim(d, placeholder(tid, axis))
        for axis, d in enumerate(prog.tensors[tid].dims)
    ]


def renumbered(dims: Sequence[int], remap: dict[int, int]) -> list[int]:
    """`dims` after the program's tensors were renumbered (`remap`: old id -> new): each placeholder
    names its tensor's new id; a dim traced to a tensor that is gone keeps its value, untraced."""
    out: list[int] = []
    for d in dims:
        if not isinstance(d, TracedDim):
            out.append(d)
            continue
        subs, gone = {}, False
        for s in d.expr.free_symbols:
            m = _PLACEHOLDER.match(s.name)
            if m is not None and int(m.group(1)) in remap:
                subs[s] = placeholder(remap[int(m.group(1))], int(m.group(2)))
            else:
                gone = True
        out.append(int(d) if gone else TracedDim(int(d), d.expr.xreplace(subs)))
    return out


def broadcast(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Numpy broadcasting of two shapes that keeps the traced dim of each axis that is not 1 (of
    two equal dims, the one with a symbolic expression: a batch of 1 stays the batch)."""
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + list(a), [1] * (rank - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        if x == y:
            out.append(x if not expr_of(x).is_Integer else y)
        else:
            out.append(y if x == 1 else x)
    return out


def resolve(expr: sympy.Expr, axis_expr: Callable[[int, int], sympy.Expr | int | None]) -> sympy.Expr | None:
    """`expr` with each placeholder replaced by `axis_expr(tid, axis)`; None when one has none."""
    subs = {}
    for s in expr.free_symbols:
        m = _PLACEHOLDER.match(s.name)
        if m is None:
            return None
        value = axis_expr(int(m.group(1)), int(m.group(2)))
        if value is None:
            return None
        subs[s] = value
    return expr.xreplace(subs)


def is_traced(dims: Sequence[int]) -> bool:
    return any(isinstance(d, TracedDim) for d in dims)
