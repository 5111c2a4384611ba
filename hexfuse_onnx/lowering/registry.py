"""The registry of lowerings: `@lowers("Conv")` registers a function; the keys are the op set.

A lowering gets the pair's Lowerer, one body node and its task, and emits the node's program
op(s) through `Lowerer.emit` (or, for a Constant, records its value). It raises LoweringError
for an attribute or shape the kernel does not run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import onnx

from ..errors import HexfuseError
from .abi import Task

if TYPE_CHECKING:
    from .lowerer import Lowerer

Lowering = Callable[["Lowerer", onnx.NodeProto, Task], None]
LOWERINGS: dict[str, Lowering] = {}


class LoweringError(HexfuseError):
    """An op or attribute of a pair is outside the kernel's op set."""

    def __init__(self, op: str, node: str, reason: str) -> None:
        super().__init__(f"cannot lower {op} node '{node}': {reason}")
        self.op, self.node, self.reason = op, node, reason


class ArenaOverflow(LoweringError):
    """The pair's two tasks' scratch does not fit the kernel's arena together: it would never overlap
    (shorter tasks over its span may)."""


def lowers(*op_types: str) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of these ONNX ops (default domain; another
    domain's op as "domain::Op", as `op_key` names it)."""

    def register(fn: Lowering) -> Lowering:
        for op in op_types:
            if op in LOWERINGS:
                raise ValueError(f"two lowerings of {op}")
            LOWERINGS[op] = fn
        return fn

    return register


def op_key(node: onnx.NodeProto) -> str:
    """The node's op in the registry: "Op" in the default domain, else "domain::Op"."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


# Inputs whose lowering treats them as absent when they have no element (None: every input): a
# Concat operand of length 0 along the axis adds nothing; a past K/V of length 0 (a prefill) makes
# present the new keys alone. Any other empty tensor an op touches is refused (Lowerer.shape).
EMPTY_MEANS_ABSENT: dict[str, frozenset[int] | None] = {
    "Concat": None,
    "com.microsoft::GroupQueryAttention": frozenset({3, 4}),
    "com.microsoft::MultiHeadAttention": frozenset({6, 7}),
    "Attention": frozenset({4, 5}),
}


def absent_when_empty(node: onnx.NodeProto, k: int) -> bool:
    """Node input k, when it has no element, is as if not given (EMPTY_MEANS_ABSENT)."""
    if op_key(node) not in EMPTY_MEANS_ABSENT:
        return False
    inputs = EMPTY_MEANS_ABSENT[op_key(node)]
    return inputs is None or k in inputs


def op_outside_kernel(node: onnx.NodeProto) -> LoweringError | None:
    """The error for a node whose op the kernel cannot run at all (checked before any shape work)."""
    if op_key(node) in LOWERINGS:
        return None
    if node.domain not in ("", "ai.onnx"):
        return LoweringError(node.op_type, node.name, f"domain '{node.domain}' is outside the kernel's op set")
    return LoweringError(node.op_type, node.name, "op is outside the kernel's op set")
