"""Micro-batches: a chain of batch-separable ops split in two along the batch axis.

A chain is a run of nodes where each node reads the previous node's only output as its data
input, no intermediate escapes the chain, and every op keeps rows of the batch axis (axis 0)
independent: other inputs are constants that do not broadcast along it. Split in two, one
micro-batch's matrix phase can overlap the other's vector phase. The split ratio is chosen
by the cost model (`evaluate`), not fixed at 1:1.

Fused, the pair gets a Split before and a Concat after its FusedHexPair node; its tasks are
copies of the chain with tensors suffixed `__<pair id>_mb0` / `_mb1` (the pair id keeps
chained micro-batch pairs from naming a tensor twice). `unfuse` keeps task A's copy with its
names restored and drops the Split and Concat.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import helper

from .. import contract as C
from ..costmodel import Prediction, Target, complementarity, fits, predict, serial_time
from ..errors import ModelError
from ..graph import ModelGraph, TensorInfo, attribute
from ..profile import Engine, GraphProfile, TaskProfile, engine_of
from .base import (
    Candidate,
    KindDetail,
    Pair,
    PairKind,
    PairTasks,
    TaskBody,
    budget_message,
    renamed_copy,
    task_body,
    with_constants,
)
from .dag import DagFacts

AXIS = 0
MIN_BATCH = 2
MAX_SPLITS_TRIED = 8

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


@dataclass(frozen=True)
class ChainSplit(KindDetail):
    input: str  # the chain's data input, split along `axis`
    output: str  # the chain's output, concatenated back
    batch: int
    axis: int


def suffixes(pair_id: str) -> tuple[str, str]:
    """The suffixes of the two copies' tensor and node names."""
    return f"__{pair_id}_mb0", f"__{pair_id}_mb1"


class Microbatch(PairKind):
    name = "microbatch"
    specificity = 1

    def find(self, g: ModelGraph, facts: DagFacts, profile: GraphProfile, target: Target) -> list[Candidate]:
        return find_chains(g, facts)

    def evaluate(self, g: ModelGraph, profile: GraphProfile, c: Candidate, target: Target) -> Pair | str:
        """The best of a few split ratios, against the unsplit chain as the serial baseline."""
        whole = profile.task(c.task_a)
        assert whole is not None and isinstance(c.detail, ChainSplit)
        batch = c.detail.batch
        serial = serial_time(whole, target)
        splits = sorted(
            {max(1, min(batch - 1, round(batch * k / MAX_SPLITS_TRIED))) for k in range(1, MAX_SPLITS_TRIED)}
        )
        best: Pair | None = None
        for rows_a in splits:
            a, b = whole.scaled(rows_a / batch), whole.scaled((batch - rows_a) / batch)
            if not fits(a, b, target):
                continue
            p = predict(a, b, target)
            p = Prediction(p.time_a, p.time_b, serial, p.fused, p.share_a, p.call)
            if best is None or p.fused < best.prediction.fused:
                best = Pair(c, a, b, p, complementarity(a, b, target), (rows_a, batch - rows_a))
        if best is None:
            return budget_message(whole.scaled(0.5), whole.scaled(0.5), target)
        return best

    def bucket_tasks(self, profile: GraphProfile, pair: Pair) -> tuple[TaskProfile, TaskProfile] | None:
        """The chain at the pair's split (the split is in the graph; only the share can change)."""
        whole = profile.task(pair.candidate.task_a)
        if whole is None or pair.microbatch_sizes is None:
            return None
        rows_a, rows_b = pair.microbatch_sizes
        return whole.scaled(rows_a / (rows_a + rows_b)), whole.scaled(rows_b / (rows_a + rows_b))

    def tasks(self, g: ModelGraph, pair: Pair) -> PairTasks:
        """Two renamed copies of the chain, with a Split before and a Concat after."""
        c, split = pair.candidate, pair.candidate.detail
        assert pair.microbatch_sizes is not None and isinstance(split, ChainSplit)
        ids = with_constants(g, c.task_a)
        whole = task_body(g, ids)
        x, y = split.input, split.output
        copies = []
        for suffix in suffixes(pair.id):
            renamed = {t: t + suffix for n in whole.nodes for t in n.output} | {x: x + suffix}
            nodes = [renamed_copy(n, renamed, name=(n.name or n.output[0]) + suffix) for n in whole.nodes]
            inputs = [t + suffix if t == x else t for t in whole.inputs]
            copies.append(TaskBody(nodes, inputs, [y + suffix]))
        placed = [(c.task_a[0], n) for n in _split_nodes(g, pair, split)]
        concat = helper.make_node(
            "Concat", [y + s for s in suffixes(pair.id)], [y], name=f"hexfuse/{pair.id}/concat", axis=split.axis
        )
        placed.append((c.task_a[-1], concat))
        whole_input = g.info(x)
        assert whole_input.shape is not None
        parts = {}
        for suffix, rows in zip(suffixes(pair.id), pair.microbatch_sizes):
            shape = list(whole_input.shape)
            shape[split.axis] = rows
            parts[x + suffix] = TensorInfo(x + suffix, whole_input.elem_type, tuple(shape))
        return PairTasks(copies[0], copies[1], ids, placed, parts)

    def restore(
        self,
        call: onnx.NodeProto,
        body: list[onnx.NodeProto],
        producers: dict[str, onnx.NodeProto],
        consumers: dict[str, list[onnx.NodeProto]],
        drop: set[int],
    ) -> list[onnx.NodeProto]:
        """Undo the split: keep task A's copy of the chain with its names restored."""
        n_a = next((int(a.i) for a in call.attribute if a.name == C.ATTR_NUM_NODES_A), None)
        if n_a is None:
            raise ModelError(f"node '{call.name}' lacks attribute '{C.ATTR_NUM_NODES_A}'")
        split = producers[call.input[0]]
        concat = consumers[call.output[0]][0]
        suffix = suffixes(call.overload)[0]
        chain = [
            renamed_copy(
                n,
                {t: t.removesuffix(suffix) for t in list(n.input) + list(n.output)},
                name=n.name.removesuffix(suffix),
            )
            for n in body[:n_a]
        ]
        chain[-1].output[0] = concat.output[0]
        drop.add(id(split))
        drop.add(id(concat))
        if len(split.input) > 1 and split.input[1] in producers:
            drop.add(id(producers[split.input[1]]))
        return chain

    def original_tensor(self, pair_id: str, body_tensor: str) -> str:
        for suffix in suffixes(pair_id):
            body_tensor = body_tensor.removesuffix(suffix)
        return body_tensor

    def serial_task(self, profile: GraphProfile, pair: Pair) -> TaskProfile | None:
        return profile.task(pair.candidate.task_a)  # the unsplit chain

    def share_text(self, pair: Pair) -> str:
        assert pair.microbatch_sizes is not None
        rows_a, rows_b = pair.microbatch_sizes
        return f"{super().share_text(pair)} (rows {rows_a}:{rows_b})"


def _split_nodes(g: ModelGraph, pair: Pair, split: ChainSplit) -> list[onnx.NodeProto]:
    """The Split of the chain's input into the two copies' inputs (and its sizes constant, opset >= 13)."""
    assert pair.microbatch_sizes is not None
    sizes = list(pair.microbatch_sizes)
    name = f"hexfuse/{pair.id}/split"
    parts = [split.input + s for s in suffixes(pair.id)]
    opset = next(o.version for o in g.model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 13:
        return [helper.make_node("Split", [split.input], parts, name=name, axis=split.axis, split=sizes)]
    sizes_name = f"hexfuse/{pair.id}/split_sizes"
    const = helper.make_node(
        "Constant",
        [],
        [sizes_name],
        name=sizes_name,
        value=helper.make_tensor(sizes_name, onnx.TensorProto.INT64, [2], sizes),
    )
    return [const, helper.make_node("Split", [split.input, sizes_name], parts, name=name, axis=split.axis)]


def find_chains(g: ModelGraph, facts: DagFacts) -> list[Candidate]:
    outputs = set(g.graph_outputs)
    used: set[int] = set()
    out: list[Candidate] = []
    for start in range(len(g.nodes)):
        if start in used or facts.const[start]:
            continue
        data = _data_input(g, start)
        batch = _batch_of(g, data) if data is not None else None
        if data is None or batch is None:
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
        out.append(
            Candidate(
                Microbatch.name,
                chain,
                list(chain),
                note=f"chain of {len(chain)} ops from '{data}', batch {batch} on axis {AXIS}",
                detail=ChainSplit(data, g.nodes[chain[-1]].output[0], batch, AXIS),
            )
        )
    return out


def _batch_of(g: ModelGraph, tensor: str) -> int | None:
    shape = g.info(tensor).shape
    if shape is None or len(shape) < 2:
        return None
    batch = shape[AXIS]
    return batch if isinstance(batch, int) and batch >= MIN_BATCH else None


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
    if rank < 2 or not g.info(n.output[0]).shape:
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
