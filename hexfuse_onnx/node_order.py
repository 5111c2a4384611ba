"""The node order as the rewrite read it (each graph's), kept in the rewritten model so that unfusing
puts the nodes back in that order. ONNX Runtime's graph optimizations visit nodes in graph order: of
two MatMuls one Add sums, its MatMul-Add fusion takes the first one. A pair's nodes put back where
the pair node stood, in another order, make stock ORT optimize (and time) another graph.

The record: the first output of each node, in order, as zlib-compressed JSON in base64 (node names
may be empty; first outputs are unique in a model), each node followed by the nodes of its subgraphs
(an If's branches: Silero VAD's pairs are there), so that each graph's nodes stand in its order."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable

import onnx

from . import contract as C
from .graph import in_topological_order
from .nested import subgraphs


def record(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> None:
    """Record `nodes`' order in `model`'s metadata, unless the model already holds a record (a rewrite
    of a rewritten model: the record of the first one is the original's order)."""
    if any(p.key == C.METADATA_NODE_ORDER for p in model.metadata_props):
        return
    names = json.dumps(_first_outputs(nodes), separators=(",", ":"))
    value = base64.b64encode(zlib.compress(names.encode(), 9)).decode()
    model.metadata_props.append(onnx.StringStringEntryProto(key=C.METADATA_NODE_ORDER, value=value))


def recorded(model: onnx.ModelProto) -> dict[str, int] | None:
    """Each recorded first output's position, or None without a record (or with one unreadable)."""
    for p in model.metadata_props:
        if p.key == C.METADATA_NODE_ORDER:
            try:
                names = json.loads(zlib.decompress(base64.b64decode(p.value)))
            except (ValueError, zlib.error):
                return None
            return {name: i for i, name in enumerate(names) if isinstance(name, str) and name}
    return None


def restore(graph: onnx.GraphProto, positions: dict[str, int]) -> None:
    """Order the graph's nodes by their recorded positions; a node without one (a pair node still
    fused, a node its kind placed) stays right after the node it follows. Where that order would
    read a tensor before it is made, the stable topological sort moves the reader just enough."""
    keyed = []
    last = -1
    for seq, n in enumerate(graph.node):
        last = positions.get(_first_output(n), last)
        keyed.append((last, seq, n))
    nodes = [n for _, _, n in sorted(keyed, key=lambda item: item[:2])]
    graph.ClearField("node")
    graph.node.extend(in_topological_order(nodes, "unfused graph"))


def _first_outputs(nodes: Iterable[onnx.NodeProto]) -> list[str]:
    """Each node's first output, followed by those of its subgraphs' nodes."""
    out = []
    for n in nodes:
        out.append(_first_output(n))
        for sub in subgraphs(n):
            out += _first_outputs(sub.node)
    return out


def _first_output(node: onnx.NodeProto) -> str:
    return node.output[0] if node.output else ""
