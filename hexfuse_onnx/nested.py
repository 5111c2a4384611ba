"""The graphs ONNX nodes hold (an If's branches, a Loop's or Scan's body) and walks through them.

It imports onnx alone: the drop-in session (mode_choice) reads subgraphs without loading graph.py,
whose sympy import takes ~190 ms.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

HOLDING = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs the node's attributes hold, in attribute order."""
    return [g for a in node.attribute for g in attribute_graphs(a)]


def attribute_graphs(attribute: onnx.AttributeProto) -> list[onnx.GraphProto]:
    """The graphs one attribute holds: one (GRAPH), several (GRAPHS) or none."""
    return [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)


def holds_graphs(node: onnx.NodeProto) -> bool:
    return any(a.type in HOLDING for a in node.attribute)


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The graph's nodes and those of its subgraphs, nested ones included, each before its bodies'."""
    for n in graph.node:
        yield n
        for sub in subgraphs(n):
            yield from all_nodes(sub)


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every graph nested in it, depth first."""
    yield graph
    for n in graph.node:
        for sub in subgraphs(n):
            yield from all_graphs(sub)
