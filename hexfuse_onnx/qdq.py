"""QDQ node groups: in a QDQ model every compute op sits between the DequantizeLinear nodes of its
inputs (activations and weights) and the QuantizeLinear nodes of its outputs. A pair must take a
group whole: the kernel then reads and writes the integer tensors (u8 = 1 byte) and requantizes
inside the task, where ONNX Runtime's own QDQ fusion does.

`close_groups` extends a task by the DequantizeLinear nodes only it reads and the QuantizeLinear
nodes of its outputs; a DequantizeLinear shared with nodes outside the task is copied into its
body instead (`kinds.base.with_dequantize_copies`); `split_group` says which group a task still
splits.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from .graph import ModelGraph

QDQ_DOMAINS = ("", "ai.onnx", "com.microsoft")
# the activation and weight types of QDQ groups (not the int32 biases)
NARROW_INTS = {TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16}
# ops whose outputs hold values of their input 0 (or, MaxPool, the largest of some): on its grid
MOVES = {
    *("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather", "Expand", "Identity", "Split"),
    "MaxPool",
}


def is_q(g: ModelGraph, i: int) -> bool:
    n = g.nodes[i]
    return n.op_type == "QuantizeLinear" and n.domain in QDQ_DOMAINS


def is_dq(g: ModelGraph, i: int) -> bool:
    return is_dq_node(g.nodes[i])


def is_dq_node(n: onnx.NodeProto) -> bool:
    return n.op_type == "DequantizeLinear" and n.domain in QDQ_DOMAINS


def quantized_op(g: ModelGraph, i: int) -> int | None:
    """The op whose output node i, a QuantizeLinear, quantizes; None for any other node, a Q of a
    graph input, or of a DequantizeLinear's output (a move's Q)."""
    n = g.nodes[i]
    op = g.producer.get(n.input[0]) if is_q(g, i) and n.input else None
    return None if op is None or is_dq(g, op) else op


def _consumers(g: ModelGraph, i: int) -> set[int]:
    return {c for t in g.nodes[i].output if t for c in g.consumers.get(t, ())}


def _dq_inputs(g: ModelGraph, i: int) -> set[int]:
    return {g.producer[t] for t in g.node_inputs[i] if t in g.producer and is_dq(g, g.producer[t])}


def _q_outputs(g: ModelGraph, i: int) -> set[int]:
    return {c for c in _consumers(g, i) if is_q(g, c)}


def release_foreign(g: ModelGraph, task: list[int]) -> list[int]:
    """The task without the Q/DQ nodes that would split a QDQ group: a DequantizeLinear read outside
    the task runs outside it (the task reads its own copy, as ORT's EnsureUniqueDQForNodeUnit gives
    each group one: kinds.base.with_dequantize_copies), a QuantizeLinear of an op outside it too."""
    inside = set(task)

    def foreign(i: int) -> bool:
        if is_dq(g, i):
            return bool(_consumers(g, i) - inside)
        if is_q(g, i):
            p = g.producer.get(g.node_inputs[i][0]) if g.node_inputs[i] else None
            return p is not None and p not in inside and not is_dq(g, p)
        return False

    kept = [i for i in task if not foreign(i)]
    return kept if kept else task


def group_order(g: ModelGraph, order: list[int]) -> list[int]:
    """The topological order with each QuantizeLinear of an op right after the op (its scale and
    zero point are constants or made before the op) and each DequantizeLinear right before the
    first node that reads it. Graph order may put unrelated nodes between the two (smart_turn_v3's
    int64 shape work between a Conv and its Q, or between a DQ and its MatMul), and a cut there
    splits the group: colocate's alignment refused 14 candidates of smart_turn_v3 x2 so."""
    position = {i: k for k, i in enumerate(order)}
    follow: dict[int, list[int]] = {}
    for i in order:
        op = quantized_op(g, i)
        if op is None or op not in position:
            continue
        if all(position.get(g.producer.get(t, -1), -1) <= position[op] for t in g.nodes[i].input[1:] if t):
            follow.setdefault(op, []).append(i)
    moved = {q for qs in follow.values() for q in qs}
    late = frozenset(i for i in order if is_dq(g, i) and _consumers(g, i) & position.keys())
    pending, out = set(late), list[int]()

    def emit(j: int) -> None:
        for d in dict.fromkeys(g.producer[t] for t in g.node_inputs[j] if g.producer.get(t) in pending):
            pending.discard(d)  # once, though read twice (DTLN's Mul(x, x))
            out.append(d)
        out.append(j)

    for i in order:
        if i not in moved and i not in late:
            for j in (i, *follow.get(i, ())):
                emit(j)
    assert len(out) == len(order)  # every DQ held back has a reader in the order
    return out


def close_groups(g: ModelGraph, task: list[int], other: list[int]) -> list[int]:
    """The task plus the DequantizeLinear nodes whose every consumer is in it and the
    QuantizeLinear nodes of its compute ops' outputs whose consumers are outside `other` (moving
    them never makes one task wait for the other)."""
    inside, avoid = set(task), set(other)
    for i in task:
        if is_q(g, i) or is_dq(g, i):
            continue
        for d in _dq_inputs(g, i) - inside - avoid:
            if _consumers(g, d) <= inside:
                inside.add(d)
        for q in _q_outputs(g, i) - inside - avoid:
            if not _consumers(g, q) & avoid:
                inside.add(q)
    return sorted(inside)


def split_group(g: ModelGraph, task: list[int]) -> str | None:
    """Why the task splits a QDQ group (a compute op without one of its DequantizeLinear inputs or
    QuantizeLinear outputs, or a Q/DQ node without its op), or None."""
    inside = set(task)
    for i in task:
        if is_dq(g, i):
            ops = {c for c in _consumers(g, i) if not is_q(g, c)} - inside
            if ops:
                return f"{g.describe(i)} feeds {g.describe(min(ops))} outside the task"
        elif is_q(g, i):
            p = g.producer.get(g.node_inputs[i][0]) if g.node_inputs[i] else None
            if p is not None and p not in inside and not is_dq(g, p):
                return f"{g.describe(i)} quantizes {g.describe(p)} outside the task"
        else:  # a DequantizeLinear outside is copied into the task (kinds.base.with_dequantize_copies)
            outside = sorted(_q_outputs(g, i) - inside)
            if outside:
                return f"the QDQ group of {g.describe(i)} is split: {g.describe(outside[0])} is outside the task"
    return None


def group_widths(g: ModelGraph, i: int) -> dict[str, int]:
    """For the op of a QDQ group (each output quantized, an input dequantized): the integer
    byte width of each of its float tensors (a dequantized input: its DequantizeLinear's input;
    an output: its QuantizeLinear's output). Empty for any other node."""
    if is_q(g, i) or is_dq(g, i):
        return {}
    outs = [t for t in g.nodes[i].output if t]
    quantized = {t: [c for c in g.consumers.get(t, ()) if is_q(g, c)] for t in outs}
    if not outs or not all(qs and len(qs) == len(g.consumers.get(t, ())) for t, qs in quantized.items()):
        return {}
    widths = {t: g.info(g.nodes[qs[0]].output[0]).itemsize for t, qs in quantized.items()}
    for t in g.node_inputs[i]:
        d = g.producer.get(t)
        if d is not None and is_dq(g, d) and g.info(g.nodes[d].input[0]).elem_type in NARROW_INTS:
            widths[t] = g.info(g.nodes[d].input[0]).itemsize
    return widths if len(widths) > len(outs) else {}


def output_steps(model: onnx.ModelProto) -> dict[str, float]:
    """One quantization step of each graph output a QDQ model quantizes (`tensor_steps`). The
    kernel's bar on such outputs is one step of ONNX Runtime's (integer rounding of an op's f32
    result can flip a step, and a pair holding many groups carries it to its outputs)."""
    steps = tensor_steps(model)
    return {o.name: steps[o.name] for o in model.graph.output if o.name in steps}


def tensor_steps(model: onnx.ModelProto) -> dict[str, float]:
    """One quantization step of each tensor of the main graph a QDQ model quantizes, in the tensor's
    units: a QuantizeLinear's or QLinear op's output, 1; a DequantizeLinear's with a constant scale,
    its (largest) scale; what data movement (MOVES) makes of such a tensor, its step. quire_tagger
    x2: a pair ending at the attention's Transpose_3, a DQ'd MatMul moved, was held to 1e-4 relative
    and dropped where ORT's optimised run of its nodes was one step (1.4%) from the plugin's."""
    g = model.graph
    constants = {t.name: t for t in g.initializer}
    constants.update(
        {n.output[0]: a.t for n in g.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"}
    )
    steps = dict.fromkeys(quantized_tensors(model), 1.0)
    for n in g.node:
        if n.domain in QDQ_DOMAINS and n.op_type == "DequantizeLinear" and len(n.input) > 1 and n.input[1] in constants:
            steps[n.output[0]] = float(np.max(np.abs(numpy_helper.to_array(constants[n.input[1]]))))
        elif n.op_type in MOVES and not n.domain and n.input and n.input[0] in steps:
            steps.update((t, steps[n.input[0]]) for t in n.output if t)
    return steps


def quantized_tensors(model: onnx.ModelProto) -> set[str]:
    """The tensors a QuantizeLinear or a QLinear op makes: integer values one step apart."""
    return {
        t
        for n in model.graph.node
        if n.domain in QDQ_DOMAINS and (n.op_type == "QuantizeLinear" or n.op_type.startswith("QLinear"))
        for t in n.output[:1]
    }
