"""hexfuse_onnx.nested: the graphs nodes hold, and the walks through them."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from hexfuse_onnx.nested import all_graphs, all_nodes, attribute_graphs, holds_graphs, subgraphs


def _body(name: str, *nodes: onnx.NodeProto) -> onnx.GraphProto:
    out = helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, [1])
    return helper.make_graph(list(nodes), name, [], [out])


def _nested_model() -> onnx.GraphProto:
    """An If (its attributes in name order, else_branch first) whose then-branch holds another If; a custom
    node holding two graphs in one GRAPHS attribute."""
    inner = helper.make_node(
        "If",
        ["c"],
        ["inner"],
        name="inner_if",
        then_branch=_body("inner_then", helper.make_node("Neg", ["x"], ["a"], name="neg")),
        else_branch=_body("inner_else", helper.make_node("Abs", ["x"], ["b"], name="abs")),
    )
    outer = helper.make_node(
        "If",
        ["c"],
        ["outer"],
        name="outer_if",
        then_branch=_body("outer_then", inner),
        else_branch=_body("outer_else", helper.make_node("Exp", ["x"], ["e"], name="exp")),
    )
    several = helper.make_node("Holder", ["x"], ["h"], name="holder", domain="test")
    several.attribute.append(
        helper.make_attribute(
            "bodies",
            [
                _body("first", helper.make_node("Relu", ["x"], ["r"], name="relu")),
                _body("second", helper.make_node("Sin", ["x"], ["s"], name="sin")),
            ],
        )
    )
    plain = helper.make_node("Add", ["x", "x"], ["y"], name="add", alpha=1.0)
    return helper.make_graph([plain, outer, several], "top", [], [])


def test_all_nodes_lists_each_node_before_its_bodies_nested_ones_included() -> None:
    names = [n.name for n in all_nodes(_nested_model())]
    assert names == ["add", "outer_if", "exp", "inner_if", "abs", "neg", "holder", "relu", "sin"]


def test_all_graphs_walks_depth_first_from_the_graph_itself() -> None:
    names = [g.name for g in all_graphs(_nested_model())]
    assert names == ["top", "outer_else", "outer_then", "inner_else", "inner_then", "first", "second"]


def test_subgraphs_of_one_graph_and_of_several_in_one_attribute() -> None:
    add, outer, holder = _nested_model().node
    assert [g.name for g in subgraphs(outer)] == ["outer_else", "outer_then"]  # make_node sorts attributes
    assert [g.name for g in subgraphs(holder)] == ["first", "second"]
    assert subgraphs(add) == [] and attribute_graphs(add.attribute[0]) == []
    assert [holds_graphs(n) for n in (add, outer, holder)] == [False, True, True]
