"""Micro-batches: a chain of batch-separable ops split in two along the batch axis.

A chain is a run of nodes where each node reads the previous node's only output as its data
input, no intermediate escapes the chain, and every op keeps rows of the batch axis (axis 0)
independent: other inputs are constants that do not broadcast along it. Split in two, one
micro-batch's matrix phase can overlap the other's vector phase. The split ratio is chosen
by the cost model (`evaluate`), not fixed at 1:1.

Fused, the pair gets a Split before and a Concat after its FusedHexPair node. Its program's tasks
are copies of the chain with tensors suffixed `__<pair id>_mb0` / `_mb1` (the pair id keeps
chained micro-batch pairs from naming a tensor twice), derived from the body (`program_function`).
The body, what stock ORT runs, is the chain itself, once, on the halves joined again (a Concat
before it, a Split after): the original computation, so ORT optimizes it as it does the original.
Two copies in the body would read each weight and its scale from two DequantizeLinear nodes,
and ORT makes DequantizeLinear(8-bit weight) + MatMul/Gemm a MatMulNBits (int8 activations at its
defaults) only where the weight and the scale have no other reader: the fallback would differ
from the original (mlp_chain u16u8: 0.0142 relative). `unfuse` keeps the body's chain and drops
the Split, the Concat and the body's own join and split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx
from onnx import helper

from .. import contract as C
from ..costmodel import Prediction, Target, complementarity, fits, predict, serial_time
from ..errors import ModelError
from ..graph import QDQ_OPS, Dim, ModelGraph, TensorInfo, attribute
from ..profile import Engine, GraphProfile, TaskProfile, engine_of
from ..qdq import QDQ_DOMAINS, is_dq, is_q
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
    with_dequantize_copies,
)
from .dag import DagFacts

AXIS = 0
MIN_BATCH = 2
MAX_SPLITS_TRIED = 8
MAX_FORK_OPS = 3  # x * Sigmoid(1.702 x): Mul, Sigmoid, Mul
ROWS_SHAPE = "__rows"  # a copy's own Reshape shape: `<shape>__rows<suffix>`
JOIN, PART = "join", "part"  # the body's Concat of the halves and Split of the chain's output: `hexfuse/<pair id>/...`

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
        """Two renamed copies of the chain (the program's tasks), with a Split before and a Concat
        after; the body stock ORT runs is the chain itself on the halves joined again."""
        c, split = pair.candidate, pair.candidate.detail
        assert pair.microbatch_sizes is not None and isinstance(split, ChainSplit)
        ids = with_constants(g, c.task_a)
        chain = with_dequantize_copies(g, ids, task_body(g, ids), f"{pair.id}w")
        x, y, parts = split.input, split.output, suffixes(pair.id)
        opset = next(o.version for o in g.model.opset_import if o.domain in ("", "ai.onnx"))
        bodies = []
        for suffix, rows in zip(parts, pair.microbatch_sizes):
            nodes = _copy(chain.nodes, x, x + suffix, suffix, rows, split.batch, lambda t: _shape_value(g, t))
            # a Reshape's own shape stays an input, unread: the graph keeps reading its initializer
            bodies.append(TaskBody(nodes, [x + suffix if t == x else t for t in chain.inputs], [y + suffix]))
        prefix, sizes = f"hexfuse/{pair.id}/", list(pair.microbatch_sizes)
        join = helper.make_node("Concat", [x + s for s in parts], [x], name=prefix + JOIN, axis=split.axis)
        part = _split_nodes(opset, prefix + PART, y, [y + s for s in parts], sizes, split.axis)
        fallback = [join, *chain.nodes, *part]
        placed = [
            (c.task_a[0], n)
            for n in _split_nodes(opset, prefix + "split", x, [x + s for s in parts], sizes, split.axis)
        ]
        concat = helper.make_node("Concat", [y + s for s in parts], [y], name=prefix + "concat", axis=split.axis)
        placed.append((c.task_a[-1], concat))
        whole_input = g.info(x)
        assert whole_input.shape is not None
        infos = {}
        for suffix, rows in zip(parts, pair.microbatch_sizes):
            shape = list(whole_input.shape)
            shape[split.axis] = rows
            infos[x + suffix] = TensorInfo(x + suffix, whole_input.elem_type, tuple(shape))
        return PairTasks(bodies[0], bodies[1], ids, placed, infos, fallback)

    def program_function(
        self, node: onnx.NodeProto, body: onnx.FunctionProto, known: dict[str, onnx.TensorProto]
    ) -> onnx.FunctionProto:
        """The two copies of the body's chain, each on its part of the batch, as `tasks` made them;
        their tensors typed from the body's, axis 0 scaled to the copy's rows."""
        n_a = attribute(node, C.ATTR_NUM_INPUTS_A, None)
        sizes = attribute(node, C.ATTR_MICROBATCH_SIZES, None)
        prefix = f"hexfuse/{body.overload}/"
        join = next((n for n in body.node if n.name == prefix + JOIN), None)
        if n_a is None or sizes is None:
            raise ModelError(f"node '{node.name}' is not a micro-batch pair as this version writes it; rewrite again")
        if join is None:  # written before the body was the chain: the body is the two copies
            return body
        chain = [n for n in body.node if not n.name.startswith(prefix)]
        x, batch, formals = join.output[0], sum(sizes), list(body.input)
        shape_of = lambda t: _ints(known[t]) if t in known else None  # noqa: E731
        copies = [
            _copy(chain, x, part, suffix, rows, batch, shape_of)
            for part, suffix, rows in zip(join.input, suffixes(body.overload), sizes)
        ]
        b_formal = {node.input[k]: formals[k] for k in range(n_a, len(formals))}  # B's, by the tensor they bind
        to_b = {f: b_formal[node.input[k]] for k, f in enumerate(formals[:n_a]) if node.input[k] in b_formal}
        nodes = copies[0] + [renamed_copy(n, to_b) for n in copies[1]]
        fn = helper.make_function(
            body.domain, body.name, formals, list(body.output), nodes, list(body.opset_import), list(body.attribute)
        )
        fn.overload, fn.doc_string = body.overload, body.doc_string
        fn.value_info.extend(_row_types(body, chain, x, batch, dict(zip(suffixes(body.overload), sizes))))
        return fn

    def restore(
        self,
        call: onnx.NodeProto,
        body: list[onnx.NodeProto],
        producers: dict[str, onnx.NodeProto],
        consumers: dict[str, list[onnx.NodeProto]],
        drop: set[int],
    ) -> list[onnx.NodeProto]:
        """Undo the split: the body's chain, without its join and split, in place of the graph's."""
        prefix = f"hexfuse/{call.overload}/"
        if not any(n.name == prefix + JOIN for n in body):  # two copies: written before the body was the chain
            return _first_copy(call, body, producers, consumers, drop)
        split = producers[call.input[0]]
        drop.add(id(split))
        drop.add(id(consumers[call.output[0]][0]))
        if len(split.input) > 1 and split.input[1] in producers:
            drop.add(id(producers[split.input[1]]))
        return [n for n in body if not n.name.startswith(prefix)]

    def original_tensor(self, pair_id: str, body_tensor: str) -> str:
        for suffix in suffixes(pair_id):
            body_tensor = _restored(body_tensor, suffix)
        return body_tensor

    def body_types(self, g: ModelGraph, pair: Pair) -> dict[str, onnx.ValueInfoProto]:
        """The body's tensors: the chain's as the graph types them, its split outputs' axis 0
        scaled to each part's rows."""
        split = pair.candidate.detail
        assert pair.call is not None and pair.microbatch_sizes is not None and isinstance(split, ChainSplit)
        rows_of = dict(zip(suffixes(pair.id), pair.microbatch_sizes))
        out = {}
        for t in (t for n in pair.call.function.node for t in n.output):
            whole = g.info(self.original_tensor(pair.id, t))
            rows = next((r for s, r in rows_of.items() if t.endswith(s)), None)
            dims = whole.shape if rows is None or whole.shape is None else _scaled(whole.shape, split.batch, rows)
            if whole.elem_type and dims is not None:
                out[t] = helper.make_value_info(t, TensorInfo(t, whole.elem_type, dims).type_proto())
        return out

    def serial_task(self, profile: GraphProfile, pair: Pair) -> TaskProfile | None:
        return profile.task(pair.candidate.task_a)  # the unsplit chain

    def share_text(self, pair: Pair) -> str:
        assert pair.microbatch_sizes is not None
        rows_a, rows_b = pair.microbatch_sizes
        return f"{super().share_text(pair)} (rows {rows_a}:{rows_b})"


def _first_copy(
    call: onnx.NodeProto,
    body: list[onnx.NodeProto],
    producers: dict[str, onnx.NodeProto],
    consumers: dict[str, list[onnx.NodeProto]],
    drop: set[int],
) -> list[onnx.NodeProto]:
    """The chain of a pair written before its body was the chain (2026-12-02; tensors suffixed
    `__mb0` before pair ids, `__pair0_mb0` after): the body is two copies on the halves, task A's
    first (`num_nodes_a` nodes). A's copy with the graph's names (its own rows' Reshape shapes
    dropped), in place of the Split, the call and the Concat, as unfuse restored it then."""
    n_a = attribute(call, C.ATTR_NUM_NODES_A, None)
    split = producers.get(call.input[0])
    concat = next(iter(consumers.get(call.output[0], [])), None)
    if n_a is None or split is None or split.op_type != "Split" or concat is None or concat.op_type != "Concat":
        raise ModelError(f"node '{call.name}' is not a micro-batch pair as any version wrote it; rewrite again")
    suffix = call.input[0].removeprefix(split.input[0])
    chain = [
        renamed_copy(n, {t: _restored(t, suffix) for t in [*n.input, *n.output]}, name=n.name.removesuffix(suffix))
        for n in body[:n_a]
        if not n.output[0].endswith(ROWS_SHAPE + suffix)
    ]
    chain[-1].output[0] = concat.output[0]
    drop.update({id(split), id(concat)})
    if len(split.input) > 1 and split.input[1] in producers:
        drop.add(id(producers[split.input[1]]))
    return chain


def _copy(
    chain: list[onnx.NodeProto],
    x: str,
    part: str,
    suffix: str,
    rows: int,
    batch: int,
    shape_of: Callable[[str], list[int] | None],
) -> list[onnx.NodeProto]:
    """The chain on `rows` of the batch read from `part`: its tensors and nodes renamed with `suffix`."""
    renamed = {t: t + suffix for n in chain for t in n.output} | {x: part}
    nodes = [renamed_copy(n, renamed, name=(n.name or n.output[0]) + suffix) for n in chain]
    return _with_rows_shapes(nodes, batch, rows, suffix, shape_of)


def _row_types(
    body: onnx.FunctionProto, chain: list[onnx.NodeProto], x: str, batch: int, rows_of: dict[str, int]
) -> list[onnx.ValueInfoProto]:
    """Each copy's tensors made from the batch rows (not a weight's DequantizeLinear): the body's
    type of the chain tensor, axis 0 scaled to the copy's rows."""
    typed = {v.name: v for v in body.value_info}
    made_from_rows = {x}
    for n in chain:
        if made_from_rows & set(n.input):
            made_from_rows.update(n.output)
    out = []
    for suffix, rows in rows_of.items():
        for t in (t for n in chain for t in n.output if t in made_from_rows and t in typed):
            tt = typed[t].type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            scaled = _scaled(tuple(dims), batch, rows) if tt.HasField("shape") else None
            if scaled is not None:
                out.append(helper.make_tensor_value_info(t + suffix, tt.elem_type, list(scaled)))
    return out


def _scaled(dims: tuple[Dim, ...], batch: int, rows: int) -> tuple[Dim, ...] | None:
    """A whole chain tensor's dims at a copy's rows (every chain tensor holds whole batch rows on axis 0)."""
    whole = dims[AXIS] if dims else None
    return (whole // batch * rows, *dims[AXIS + 1 :]) if isinstance(whole, int) else None


def _restored(t: str, suffix: str) -> str:
    """A copy's tensor name as the graph names it (a copy's own Reshape shape: the graph's shape)."""
    return t.removesuffix(ROWS_SHAPE + suffix) if t.endswith(ROWS_SHAPE + suffix) else t.removesuffix(suffix)


def _with_rows_shapes(
    nodes: list[onnx.NodeProto], batch: int, rows: int, suffix: str, shape_of: Callable[[str], list[int] | None]
) -> list[onnx.NodeProto]:
    """The copy with each Reshape to a fixed row count reading a Constant of its own rows
    (`<shape>__rows<suffix>`: axis 0 scaled by rows / batch); -1 on axis 0 fits any rows as it is."""
    out = []
    for n in nodes:
        value = shape_of(n.input[1]) if n.op_type == "Reshape" else None
        if value is not None and value[0] != -1:
            name = n.input[1] + ROWS_SHAPE + suffix
            value[0] = value[0] // batch * rows
            tensor = helper.make_tensor(name, onnx.TensorProto.INT64, [len(value)], value)
            out.append(helper.make_node("Constant", [], [name], name=name, value=tensor))
            n.input[1] = name
        out.append(n)
    return out


def _split_nodes(
    opset: int, name: str, whole: str, parts: list[str], sizes: list[int], axis: int
) -> list[onnx.NodeProto]:
    """A Split of `whole` into `parts` of these sizes (and its sizes constant, opset >= 13)."""
    if opset < 13:
        return [helper.make_node("Split", [whole], parts, name=name, axis=axis, split=sizes)]
    sizes_name = f"{name}_sizes"
    const = helper.make_node(
        "Constant",
        [],
        [sizes_name],
        name=sizes_name,
        value=helper.make_tensor(sizes_name, onnx.TensorProto.INT64, [len(sizes)], sizes),
    )
    return [const, helper.make_node("Split", [whole, sizes_name], parts, name=name, axis=axis)]


def find_chains(g: ModelGraph, facts: DagFacts) -> list[Candidate]:
    used: set[int] = set()
    out: list[Candidate] = []
    for start in range(len(g.nodes)):
        if start in used or facts.const[start] or _quantizes_an_op(g, start):
            continue
        rows = _row_inputs(g, facts, start, None)
        data = rows[0] if rows is not None and len(rows) == 1 else None
        batch = _batch_of(g, data) if data is not None else None
        if data is None or batch is None or _dequantized(g, data):
            continue
        chain = _grow(g, facts, start, data, batch, used)
        chain = _without_foreign_dequantize(g, chain)  # the next chain may start at those
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


# A chain takes QDQ groups whole (qdq.split_group): it is split and joined on integer tensors, not
# between an op and its QuantizeLinear or a DequantizeLinear and its op (ddddocr_ocr: its LSTM's Y,
# whose Transpose/Reshape/Gemm tail splits along the sequence; mha_encoder's Gemm chains ending
# at the DequantizeLinear of the next Reshape's group).


def _quantizes_an_op(g: ModelGraph, i: int) -> bool:
    """A QuantizeLinear of a compute op's output: that op's group, so no chain starts there."""
    if not is_q(g, i):
        return False
    p = g.producer.get(g.nodes[i].input[0])
    return p is not None and not is_dq(g, p)


def _dequantized(g: ModelGraph, t: str) -> bool:
    """A DequantizeLinear's output: a chain starting at its reader would leave the reader's
    DequantizeLinear outside (the chain starts at the DequantizeLinear, when it has no other reader)."""
    p = g.producer.get(t)
    return p is not None and is_dq(g, p)


def _without_foreign_dequantize(g: ModelGraph, chain: list[int]) -> list[int]:
    """The chain without its trailing DequantizeLinear nodes that feed ops after it (their groups'):
    it ends at the QuantizeLinear's integer tensor."""
    while chain and is_dq(g, chain[-1]) and g.consumers.get(g.nodes[chain[-1]].output[0]):
        chain = chain[:-1]
    return chain


def _grow(g: ModelGraph, facts: DagFacts, start: int, data: str, batch: int, used: set[int]) -> list[int]:
    """The longest run of batch-separable nodes from `start`, in topological order, that reads
    only `data` and its own tensors and lets only its last node's output escape. A tensor may have
    several readers inside when they join again within MAX_FORK_OPS vector ops (x * HardSigmoid(x),
    as quant_pre_process inlines HardSwish); a longer fork (a residual block) ends the chain, whose
    halves must fit on chip together."""
    outputs = set(g.graph_outputs)
    region, made = [start], {data, *g.nodes[start].output}
    longest = [start]
    while True:
        inside = set(region)
        made_here = [t for i in region for t in g.nodes[i].output]
        escaping = {t for t in made_here if t in outputs or set(g.consumers.get(t, ())) - inside}
        if escaping == {g.nodes[region[-1]].output[0]}:
            longest = list(region)
        fork = [g.nodes[i] for i in region[len(longest) :]]
        compute = [n for n in fork if n.op_type not in QDQ_OPS]
        if escaping & outputs or len(compute) > MAX_FORK_OPS or any(engine_of(n) == Engine.MATRIX for n in fork):
            return longest
        readers = {c for t in escaping for c in g.consumers.get(t, ())} - inside
        if not readers:
            return longest
        nxt = min(readers)
        rows = _row_inputs(g, facts, nxt, batch)
        if nxt in used or rows is None or not set(rows) <= made:
            return longest
        region.append(nxt)
        made.update(g.nodes[nxt].output)


def _batch_of(g: ModelGraph, tensor: str) -> int | None:
    shape = g.info(tensor).shape
    if shape is None or len(shape) < 2:
        return None
    batch = shape[AXIS]
    return batch if isinstance(batch, int) and batch >= MIN_BATCH else None


def _is_constant(g: ModelGraph, facts: DagFacts, t: str) -> bool:
    return t in g.initializers or (t in g.producer and facts.const[g.producer[t]])


def _row_inputs(g: ModelGraph, facts: DagFacts, i: int, batch: int | None) -> list[str] | None:
    """The inputs carrying the batch rows, when the node keeps rows independent in them; else None.
    `batch`: the chain's batch once known (a Reshape must keep whole batch rows on axis 0)."""
    n = g.nodes[i]
    if len(n.output) != 1 or not g.info(n.output[0]).shape:
        return None
    ins = [t for t in n.input if t]
    rows = [t for t in ins if not _is_constant(g, facts, t)]
    if not rows or any(len(g.info(t).shape or ()) < 2 for t in rows):
        return None
    if n.op_type in QDQ_OPS and n.domain in QDQ_DOMAINS:
        return rows if len(rows) == 1 and rows[0] == ins[0] and _quant_keeps_rows(g, n) else None
    if n.domain not in ("", "ai.onnx"):
        return None
    if n.op_type == "Reshape":
        return rows if rows == ins[:1] and _reshape_keeps_rows(g, n, batch) else None
    if n.op_type in _BINARY:
        return rows if _binary_keeps_rows(g, n, rows) else None
    if rows != ins[:1]:  # one data input, the first; every other input a constant
        return None
    return rows if _keeps_rows(g, n, ins[1:]) else None


def _keeps_rows(g: ModelGraph, n: onnx.NodeProto, others: list[str]) -> bool:
    """Whether the op with data input n.input[0] and constant `others` keeps rows independent."""
    rank = len(g.info(n.input[0]).shape or ())
    op = n.op_type
    if op in _ROWWISE_UNARY or op in ("Conv", "ConvTranspose"):
        return True
    if op == "MatMul":  # rows of A stay independent when B is one constant matrix
        return len(g.info(others[0]).shape or ()) == 2
    if op == "Gemm":
        bias = g.info(others[1]).shape if len(others) > 1 else ()
        return not attribute(n, "transA", 0) and bias is not None and not (len(bias) == 2 and bias[0] != 1)
    if op in ("Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "RMSNormalization"):
        return _norm_axis(attribute(n, "axis", -1), rank) != AXIS
    if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd"):
        axes = _reduce_axes(g, n)
        return axes is not None and AXIS not in {_norm_axis(a, rank) for a in axes}
    if op == "Transpose":
        perm = attribute(n, "perm", None)
        return bool(perm) and perm[0] == 0
    if op == "Flatten":
        return bool(attribute(n, "axis", 1) >= 1)
    return False


def _binary_keeps_rows(g: ModelGraph, n: onnx.NodeProto, rows: list[str]) -> bool:
    """Elementwise: the row inputs have one shape on the batch axis; a constant does not vary along it."""
    shapes = [g.info(t).shape or () for t in rows]
    rank = len(shapes[0])
    if any(len(s) != rank or s[AXIS] != shapes[0][AXIS] for s in shapes):
        return False
    for t in n.input:
        shape = g.info(t).shape if t and t not in rows else ()
        if shape is None or (len(shape) >= rank and shape[len(shape) - rank + AXIS] != 1):
            return False
    return True


def _quant_keeps_rows(g: ModelGraph, n: onnx.NodeProto) -> bool:
    """Per tensor, or per channel on an axis other than the batch's (not blocked)."""
    scale = g.info(n.input[1]).shape
    if scale is None or attribute(n, "block_size", 0):
        return False
    rank = len(g.info(n.input[0]).shape or ())
    return all(d == 1 for d in scale) or _norm_axis(attribute(n, "axis", 1), rank) != AXIS


def _reshape_keeps_rows(g: ModelGraph, n: onnx.NodeProto, batch: int | None) -> bool:
    """Rows of [B*S, K] are contiguous [b, s] blocks: a Reshape whose input and output both hold
    whole batch rows on axis 0 (merging the leading dims into the row dim, or splitting them back)
    keeps rows independent. Each copy reads its constant shape scaled on axis 0 (`_with_rows_shapes`)."""
    value = _shape_value(g, n.input[1])
    rows_in = (g.info(n.input[0]).shape or (None,))[AXIS]
    rows_out = (g.info(n.output[0]).shape or (None,))[AXIS]
    if value is None or len(value) < 2 or not isinstance(rows_in, int) or not isinstance(rows_out, int):
        return False
    step = batch or rows_in  # the chain's first node: its input's axis 0 is the batch
    return value[0] in (-1, rows_out) and rows_in % step == 0 and rows_out % step == 0


def _shape_value(g: ModelGraph, t: str) -> list[int] | None:
    if t in g.initializers:
        return _ints(g.initializers[t])
    if t in g.producer and g.nodes[g.producer[t]].op_type == "Constant":
        value = attribute(g.nodes[g.producer[t]], "value", None)
        return None if value is None else _ints(value)
    return None


def _ints(tensor: onnx.TensorProto) -> list[int]:
    return [int(v) for v in onnx.numpy_helper.to_array(tensor).ravel()]


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _reduce_axes(g: ModelGraph, n: onnx.NodeProto) -> list[int] | None:
    axes = attribute(n, "axes", None)
    if axes is not None:
        return list(axes)
    if len(n.input) > 1 and n.input[1] in g.initializers:
        return [int(v) for v in onnx.numpy_helper.to_array(g.initializers[n.input[1]]).ravel()]
    return None
