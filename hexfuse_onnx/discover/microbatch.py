"""Micro-batches: a chain of batch-separable ops split in two along the batch axis.

A chain is a run of nodes where each node reads the previous node's only output as its data
input, no intermediate escapes the chain, and every op keeps rows of the batch axis (axis 0)
independent: other inputs are constants that do not broadcast along it. Split in two, one
micro-batch's matrix phase can overlap the other's vector phase. The split ratio is chosen
later by the cost model (select.py), not fixed at 1:1.
"""

from __future__ import annotations

import onnx

from ..contract import KIND_MICROBATCH
from ..graph import ModelGraph, attribute
from ..profile import Engine, engine_of
from . import Candidate
from .dag import DagFacts

AXIS = 0
MIN_BATCH = 2

_ROWWISE_UNARY = {
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "Tanh",
    "Erf",
    "Exp",
    "Log",
    "Abs",
    "Neg",
    "Sqrt",
    "Reciprocal",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Elu",
    "Selu",
    "Mish",
    "Clip",
    "Cast",
    "Identity",
    "Sin",
    "Cos",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Not",
    "IsNaN",
    "BatchNormalization",
    "Dropout",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "LpNormalization",
    "Celu",
}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Equal", "Greater", "Less"}


def find(g: ModelGraph, facts: DagFacts) -> list[Candidate]:
    outputs = set(g.graph_outputs)
    used: set[int] = set()
    out: list[Candidate] = []
    for start in range(len(g.nodes)):
        if start in used or facts.const[start]:
            continue
        data = _data_input(g, start)
        if data is None or not _batch_of(g, data):
            continue
        chain = [start]
        while True:
            last = g.nodes[chain[-1]]
            if len(last.output) != 1 or last.output[0] in outputs:
                break
            users = g.consumers.get(last.output[0], [])
            if len(users) != 1 or users[0] in used or _data_input(g, users[0]) != last.output[0]:
                break
            chain.append(users[0])
        used.update(chain)
        engines = {engine_of(g.nodes[i]) for i in chain}
        if len(chain) < 2 or Engine.MATRIX not in engines or not engines & {Engine.VECTOR, Engine.MEMORY}:
            continue
        batch = _batch_of(g, data)
        out.append(
            Candidate(
                KIND_MICROBATCH,
                chain,
                list(chain),
                note=f"chain of {len(chain)} ops from '{data}', batch {batch} on axis {AXIS}",
                detail={"input": data, "output": g.nodes[chain[-1]].output[0], "batch": batch, "axis": AXIS},
            )
        )
    return out


def _batch_of(g: ModelGraph, tensor: str) -> int | None:
    shape = g.info(tensor).shape
    if shape is None or len(shape) < 2 or not isinstance(shape[AXIS], int) or shape[AXIS] < MIN_BATCH:
        return None
    return shape[AXIS]


def _data_input(g: ModelGraph, i: int) -> str | None:
    """The one input carrying the batch, when the node is batch-separable in it; else None."""
    n = g.nodes[i]
    if n.domain not in ("", "ai.onnx") or len(n.output) != 1:
        return None
    ins = [t for t in n.input if t]
    if not ins:
        return None
    x = ins[0]
    rank = len(g.info(x).shape or ())
    if rank < 2 or g.info(n.output[0]).shape is None or len(g.info(n.output[0]).shape) < 1:
        return None
    others = ins[1:]
    op = n.op_type
    broadcasts = False  # whether the other inputs broadcast elementwise against x
    if op in _ROWWISE_UNARY or op in ("Conv", "ConvTranspose"):
        pass
    elif op == "MatMul":
        # rows of A stay independent when B is one constant matrix
        if len(g.info(others[0]).shape or ()) != 2:
            return None
    elif op == "Gemm":
        bias = g.info(others[1]).shape if len(others) > 1 else ()
        if attribute(n, "transA", 0) or (bias is None or (len(bias) == 2 and bias[0] != 1)):
            return None
    elif op in ("Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "RMSNormalization"):
        if _norm_axis(attribute(n, "axis", -1), rank) == AXIS:
            return None
    elif op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd"):
        axes = _reduce_axes(g, n)
        if axes is None or AXIS in {_norm_axis(a, rank) for a in axes}:
            return None
        others = []  # the axes input was read above
    elif op == "Transpose":
        perm = attribute(n, "perm", None)
        if not perm or perm[0] != 0:
            return None
    elif op == "Flatten":
        if attribute(n, "axis", 1) < 1:
            return None
    elif op in _BINARY:
        broadcasts = True
    else:
        return None
    # Every other input must be a constant; an elementwise one must not vary along the batch axis.
    for t in others:
        if t not in g.initializers and not (t in g.producer and g.nodes[g.producer[t]].op_type == "Constant"):
            return None
        shape = g.info(t).shape
        if shape is None:
            return None
        if broadcasts and len(shape) >= rank and shape[len(shape) - rank + AXIS] != 1:
            return None
    return x


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _reduce_axes(g: ModelGraph, n: onnx.NodeProto) -> list[int] | None:
    axes = attribute(n, "axes", None)
    if axes is not None:
        return list(axes)
    if len(n.input) > 1 and n.input[1] in g.initializers:
        return [int(v) for v in onnx.numpy_helper.to_array(g.initializers[n.input[1]]).ravel()]
    return None
