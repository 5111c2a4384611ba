"""The attention and MLP blocks of a transformer layer, found along the data path.

A block runs from its input projections (MatMul/Gemm with a constant weight) to its output
projection. Attention: the core is either one attention op (com.microsoft Attention,
MultiHeadAttention, GroupQueryAttention or ONNX Attention) or the score MatMul(Q, K^T), its
scale/mask ops, Softmax and the context MatMul(P, V); the Q, K and V paths are followed up to
their projections (through Split of a fused QKV, Reshape/Transpose, rotary embedding, the
present = Concat(past, new) and repeat_kv's Unsqueeze/Expand/Reshape). MLP: a down projection
whose input comes, through element-wise and layout ops only, from up/gate projections that read
one tensor. The block is every node on a path from its input projections to its output
projection, so it is convex; what it reads from elsewhere (the shared causal mask, rotary
cos/sin, shape tensors, the past KV cache) are its inputs, never part of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ..graph import QDQ_OPS, Dim, ModelGraph
from .dag import DagFacts

ATTENTION_OPS = {"Attention", "MultiHeadAttention", "GroupQueryAttention"}
SCORE_OPS = {"Mul", "Div", "Add", "Sub", "Where", "Cast"} | QDQ_OPS  # between QK^T and Softmax
PROB_OPS = {"Cast", "Dropout", "Identity"} | QDQ_OPS  # between Softmax and the V product
LAYOUT_OPS = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"} | QDQ_OPS
# Ops whose inputs after the first are shapes, indices or constants, never data.
DATA_FIRST_OPS = LAYOUT_OPS | {"Slice", "Gather", "Expand", "Tile", "Split", "Pad", "Cast", "Dropout"}
SHAPE_OPS = {"Shape", "Size", "ConstantOfShape", "Range", "EyeLike"}  # read only a shape: not followed up
# Ops allowed between an MLP's up/gate projections and its down projection.
MLP_ACTIVATION_OPS = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Sqrt",
    "Tanh",
    "Sigmoid",
    "Relu",
    "Erf",
    "Gelu",
    "FastGelu",
    "BiasGelu",
    "QuickGelu",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Mish",
    "Swish",
    "Clip",
    "Neg",
    "Exp",
    "Cast",
}
GLU_CHUNK_OPS = {"Slice", "Split"}  # one up projection cut into the gate and the value (Moonshine's decoder)
MAX_BLOCK = 400  # nodes; a TorchScript block carries many shape ops
MAX_SEARCH = 2000  # nodes visited looking for a block's projections


@dataclass(frozen=True)
class Block:
    """One attention or MLP block: its nodes and the query positions it computes (the sequence
    length of its rows; for a 2-D Gemm input the rows are batch x positions)."""

    kind: str  # "attention" or "mlp"
    nodes: frozenset[int]
    positions: Dim


def layer_blocks(g: ModelGraph, facts: DagFacts) -> list[Block]:
    """The attention blocks, then the MLP blocks outside them, each in graph order."""
    attention = attention_blocks(g, facts)
    taken = frozenset().union(*(b.nodes for b in attention)) if attention else frozenset()
    return attention + mlp_blocks(g, facts, taken)


def attention_blocks(g: ModelGraph, facts: DagFacts) -> list[Block]:
    blocks: list[Block] = []
    for i, n in enumerate(g.nodes):
        if facts.const[i]:
            continue
        if n.op_type in ATTENTION_OPS and n.domain in ("", "ai.onnx", "com.microsoft"):
            block = _block(g, facts, [i], _attention_data_inputs(n.op_type, n.domain))
            query = g.info(n.input[0]).shape
            positions = query[-2] if query and len(query) == 4 else query[1] if query and len(query) >= 2 else None
        elif n.op_type == "Softmax" and n.domain in ("", "ai.onnx"):
            core = _score_core(g, facts, i)
            if core is None:
                continue
            block = _block(g, facts, core, (0, 1))
            query = g.info(g.nodes[core[0]].input[0]).shape
            positions = query[-2] if query and len(query) >= 2 else None
        else:
            continue
        if block is not None:
            blocks.append(Block("attention", block, positions))
    return blocks


def mlp_blocks(g: ModelGraph, facts: DagFacts, taken: frozenset[int] = frozenset()) -> list[Block]:
    blocks: list[Block] = []
    for down in range(len(g.nodes)):
        if down in taken or facts.const[down] or not is_projection(g, down):
            continue
        ups = _mlp_inputs(g, facts, down)
        if not ups:
            continue
        nodes = _between(facts, ups, _with_bias(g, facts, down))
        if nodes is None or nodes & taken:
            continue
        shape = g.info(g.nodes[ups[0]].input[0]).shape
        positions = shape[-2] if shape and len(shape) >= 2 else None
        blocks.append(Block("mlp", nodes, positions))
    return blocks


def is_projection(g: ModelGraph, i: int) -> bool:
    """A MatMul/Gemm whose weight (second input) is a constant, or a DequantizeLinear of one (QDQ); or
    a MatMulInteger of a constant (dynamic quantisation: onnx.quantize's Moonshine, e5, T5)."""
    n = g.nodes[i]
    return (
        n.op_type in ("MatMul", "Gemm", "MatMulInteger")
        and n.domain in ("", "ai.onnx")
        and _constant_weight(g, n.input[1])
    )


def _dequantized_from(g: ModelGraph, facts: DagFacts, i: int) -> int | None:
    """The MatMulInteger projection whose result node `i` dequantizes (Mul of its Cast to float by
    the scales), or None: going up, the projection is reached without following the scales to the
    DynamicQuantizeLinear, and from there to the layer before."""
    if g.nodes[i].op_type != "Mul":
        return None
    for p in facts.preds[i]:
        above = facts.preds[p]
        if g.nodes[p].op_type == "Cast" and len(above) == 1 and g.nodes[above[0]].op_type == "MatMulInteger":
            return above[0] if is_projection(g, above[0]) else None
    return None


def _dequantized_end(g: ModelGraph, facts: DagFacts, projection: int) -> int:
    """A MatMulInteger projection's dequantizing Mul (through its Cast), or the projection itself."""
    i = projection
    for op in ("Cast", "Mul") if g.nodes[projection].op_type == "MatMulInteger" else ():
        users = facts.succs[i]
        if len(users) != 1 or g.nodes[users[0]].op_type != op:
            return projection
        i = users[0]
    return i


def _constant_weight(g: ModelGraph, t: str) -> bool:
    if t in g.initializers:
        return True
    p = g.producer.get(t)
    return p is not None and g.nodes[p].op_type == "DequantizeLinear" and g.nodes[p].input[0] in g.initializers


def _attention_data_inputs(op: str, domain: str) -> tuple[int, ...]:
    """Which inputs of an attention op carry Q, K, V (the rest: bias, mask, past, lengths, cos/sin)."""
    if op == "Attention" and domain == "com.microsoft":
        return ()  # the QKV projection is inside the op: its input is the layer's hidden state
    return (0, 1, 2)


def _score_core(g: ModelGraph, facts: DagFacts, softmax: int) -> list[int] | None:
    """[QK^T MatMul, ..., Softmax, ..., PV MatMul]: up from Softmax through score ops to a
    MatMul of two computed tensors (a search, since the mask may be either input of the Add),
    then down through probability ops to the V product."""
    path = _path_to_scores(g, facts, softmax, depth=6)
    if path is None:
        return None
    core = path[::-1]
    i = softmax
    while True:
        users = facts.succs[i]
        guard = _nan_guard(g, facts, i, users)
        if guard is not None:
            core.append(users[0] if users[0] != guard else users[1])
            users = [guard]
        if len(users) != 1:
            return None
        i = users[0]
        core.append(i)
        if g.nodes[i].op_type == "MatMul" and g.nodes[i].input[0] in g.nodes[core[-2]].output:
            return core
        if g.nodes[i].op_type not in PROB_OPS and i != guard:
            return None


def _nan_guard(g: ModelGraph, facts: DagFacts, probs: int, users: list[int]) -> int | None:
    """The Where of Where(IsNaN(p), 0, p) right after the probabilities `probs` (optimum's Whisper decoder with
    past zeroes the probabilities of a query row masked whole), or None."""
    if len(users) != 2:
        return None
    kinds = {g.nodes[u].op_type: u for u in users}
    isnan, where = kinds.get("IsNaN"), kinds.get("Where")
    if isnan is None or where is None or facts.succs[isnan] != [where]:
        return None
    w = g.nodes[where]
    return where if w.input[0] == g.nodes[isnan].output[0] and g.nodes[probs].output[0] in w.input[1:] else None


def _path_to_scores(g: ModelGraph, facts: DagFacts, i: int, depth: int) -> list[int] | None:
    for p in facts.preds[i]:
        n = g.nodes[p]
        if n.op_type == "MatMul" and not is_projection(g, p) and n.input[0] not in g.initializers:
            return [i, p]
        if n.op_type in SCORE_OPS and depth > 0:  # a Q/DQ pair after each score op is not counted
            rest = _path_to_scores(g, facts, p, depth - (n.op_type not in QDQ_OPS))
            if rest is not None:
                return [i, *rest]
    return None


def _block(g: ModelGraph, facts: DagFacts, core: list[int], data_inputs: tuple[int, ...]) -> frozenset[int] | None:
    """The block around an attention core: from the projections feeding the core's Q/K/V inputs
    (`data_inputs` of its first node, none when the op projects them itself; a Softmax core also
    reads V at its last node) down through layout ops to the output projection."""
    first, last = g.nodes[core[0]], core[-1]
    starts = [first.input[k] for k in data_inputs if k < len(first.input) and first.input[k]]
    if len(core) > 1:
        starts.append(g.nodes[last].input[1])
    projections = _projections_above(g, facts, starts) if starts else [core[0]]
    out = _output_projection(g, facts, last)
    if not projections or out is None:
        return None
    return _between(facts, projections, _with_bias(g, facts, out))


def _projections_above(g: ModelGraph, facts: DagFacts, tensors: list[str]) -> list[int]:
    """The projections reached going up the data inputs of `tensors`' producers; only those that
    read the same tensor as most of them (Q, K and V projections share the normed input)."""
    seen: set[int] = set()
    frontier = [g.producer[t] for t in tensors if t in g.producer]
    found: list[int] = []
    while frontier and len(seen) < MAX_SEARCH:
        i = frontier.pop()
        if i in seen or facts.const[i]:
            continue
        seen.add(i)
        n = g.nodes[i]
        dequantized = _dequantized_from(g, facts, i)
        if is_projection(g, i) or dequantized is not None:
            found.append(i if dequantized is None else dequantized)
        elif n.op_type not in SHAPE_OPS:
            frontier.extend(g.producer[t] for t in _data_inputs(n) if t in g.producer)
    by_input: dict[str, list[int]] = {}
    for i in found:
        by_input.setdefault(_projection_source(g, i), []).append(i)
    return max(by_input.values(), key=len) if by_input else []


def _projection_source(g: ModelGraph, i: int) -> str:
    """The tensor a projection reads, looking through a Reshape (TorchScript's 3-D to 2-D before Gemm)."""
    t = g.nodes[i].input[0]
    p = g.producer.get(t)
    while p is not None and g.nodes[p].op_type in LAYOUT_OPS:
        t = g.nodes[p].input[0]
        p = g.producer.get(t)
    return t


def _data_inputs(n: onnx.NodeProto) -> list[str]:
    if n.op_type in DATA_FIRST_OPS:
        return [n.input[0]]
    if n.op_type == "Where":
        return [t for t in n.input[1:] if t]
    return [t for t in n.input if t]


def _output_projection(g: ModelGraph, facts: DagFacts, i: int) -> int | None:
    """Down from the core's output (its first output) through layout ops to the output projection;
    at most 8 of them, Q/DQ pairs not counted (a QDQ model puts one after each: Whisper's context
    goes through Transpose, Reshape and the Reshape before its Gemm, 3 ops and 9 nodes)."""
    layout = 0
    while layout < 8:
        data = g.nodes[i].output[0]
        nxt = [s for s in facts.succs[i] if g.nodes[s].input[0] == data and g.nodes[s].op_type not in SHAPE_OPS]
        if len(nxt) != 1:
            return None
        i = nxt[0]
        if is_projection(g, i):
            return i
        if g.nodes[i].op_type not in LAYOUT_OPS | {"DynamicQuantizeLinear"}:
            return None
        layout += g.nodes[i].op_type not in QDQ_OPS | {"DynamicQuantizeLinear"}
    return None


def _with_bias(g: ModelGraph, facts: DagFacts, projection: int) -> int:
    """The projection, or the Add of a constant bias right after it; in a QDQ model, with the
    QuantizeLinear of its output (an op and its QuantizeLinear are one group)."""
    projection = _dequantized_end(g, facts, projection)
    users = facts.succs[projection]
    bias = len(users) == 1 and g.nodes[users[0]].op_type == "Add"
    end = users[0] if bias and any(_constant_weight(g, t) for t in g.nodes[users[0]].input) else projection
    users = facts.succs[end]
    return users[0] if len(users) == 1 and g.nodes[users[0]].op_type == "QuantizeLinear" else end


def _mlp_inputs(g: ModelGraph, facts: DagFacts, down: int) -> list[int]:
    """The up/gate projections feeding `down` through activation and layout ops only, when they
    read one tensor; [] when anything else (a norm, an attention core, a graph input) feeds it."""
    seen: set[int] = set()
    frontier = [g.producer.get(g.nodes[down].input[0])]
    ups: list[int] = []
    while frontier:
        i = frontier.pop()
        if i is None:
            return []  # a graph input
        if i in seen or facts.const[i]:
            continue
        seen.add(i)
        n = g.nodes[i]
        dequantized = _dequantized_from(g, facts, i)
        if is_projection(g, i) or dequantized is not None:
            ups.append(i if dequantized is None else dequantized)
        elif n.op_type == "DynamicQuantizeLinear" and i == g.producer.get(g.nodes[down].input[0]):
            frontier.append(g.producer.get(n.input[0]))  # the down projection's own input quantisation
        elif n.op_type in MLP_ACTIVATION_OPS | LAYOUT_OPS | GLU_CHUNK_OPS:
            frontier.extend(g.producer.get(t) for t in _data_inputs(n) if t not in g.initializers)
        else:
            return []
        if len(seen) > MAX_SEARCH:
            return []
    sources = {_projection_source(g, i) for i in ups}
    return sorted(ups) if len(sources) == 1 else []


def _between(facts: DagFacts, sources: list[int], sink: int) -> frozenset[int] | None:
    """Nodes on a path from a source to the sink, sources and sink included (a convex set)."""
    lo = min(sources)
    if sink < lo:
        return None
    below: set[int] = set(sources)
    for i in range(lo, sink + 1):
        if i not in below and any(p in below for p in facts.preds[i]):
            below.add(i)
    if sink not in below:
        return None
    above = {sink}
    for i in range(sink, lo - 1, -1):
        if i in above:
            above.update(p for p in facts.preds[i] if p >= lo)
    nodes = frozenset(below & above)
    return nodes if len(nodes) <= MAX_BLOCK else None
