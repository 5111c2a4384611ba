"""unfuse puts the nodes back in the order the rewrite read them (node_order.py): ONNX Runtime's
optimizations visit nodes in graph order, so another order can make stock ORT run another graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import contract as C
from hexfuse_onnx import node_order, pipeline
from hexfuse_onnx.rewrite import unfuse

KEEP_EVERY_PAIR = -10.0  # as benchmarks/host_pairs.py: every lowerable pair fused


def _chain_graph(names: list[str]) -> onnx.GraphProto:
    """Relu nodes, each reading the graph input x and making its own name (any order is topological)."""
    nodes = [helper.make_node("Relu", ["x"], [n], name=n) for n in names]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in names]
    return helper.make_graph(nodes, "g", [x], outs)


def test_restore_gives_the_recorded_order_and_keeps_an_unknown_node_after_its_predecessor() -> None:
    recorded = ["a", "b", "c", "d"]
    model = helper.make_model(_chain_graph(recorded))
    node_order.record(model, list(model.graph.node))
    graph = _chain_graph(["c", "pair", "a", "d", "b"])  # "pair": not in the record
    positions = node_order.recorded(model)
    assert positions == {"a": 0, "b": 1, "c": 2, "d": 3}
    node_order.restore(graph, positions)
    assert [n.output[0] for n in graph.node] == ["a", "b", "c", "pair", "d"]


def test_restore_moves_a_reader_after_what_it_reads() -> None:
    """Recorded positions that would read a tensor before it is made (a fused pair's output) give way."""
    graph = _chain_graph(["a"])
    graph.node.insert(0, helper.make_node("Neg", ["pair_out"], ["b"], name="b"))
    graph.node.append(helper.make_node("Relu", ["x"], ["pair_out"], name="pair"))
    node_order.restore(graph, {"b": 0, "a": 1})
    assert [n.output[0] for n in graph.node] == ["a", "pair_out", "b"]


def test_a_second_record_keeps_the_first() -> None:
    model = helper.make_model(_chain_graph(["a", "b"]))
    node_order.record(model, list(model.graph.node))
    node_order.record(model, list(reversed(model.graph.node)))
    assert node_order.recorded(model) == {"a": 0, "b": 1}


def test_an_unreadable_record_is_no_record() -> None:
    model = helper.make_model(_chain_graph(["a"]))
    model.metadata_props.append(onnx.StringStringEntryProto(key=C.METADATA_NODE_ORDER, value="not base64 zlib"))
    assert node_order.recorded(model) is None


def _two_forks() -> onnx.ModelProto:
    """Two fork-joins in a row, each two MatMul -> Relu branches summed: two pairs. The branches'
    nodes are interleaved (both MatMuls, then both Relus), unlike a pair's body (one task, then the
    other), so putting a body back where its pair stood changes the order."""
    rng = np.random.default_rng(0)
    weights, nodes = [], []
    prev = "x"
    for stage in range(2):
        for b in range(2):
            w = rng.standard_normal((64, 64)).astype(np.float32) / 8
            weights.append(numpy_helper.from_array(w, f"w{stage}{b}"))
            nodes.append(helper.make_node("MatMul", [prev, f"w{stage}{b}"], [f"m{stage}{b}"], name=f"mm{stage}{b}"))
        for b in range(2):
            nodes.append(helper.make_node("Relu", [f"m{stage}{b}"], [f"r{stage}{b}"], name=f"relu{stage}{b}"))
        nodes.append(helper.make_node("Add", [f"r{stage}0", f"r{stage}1"], [f"s{stage}"], name=f"add{stage}"))
        prev = f"s{stage}"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])
    y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [16, 64])
    graph = helper.make_graph(nodes, "two_forks", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def two_forks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("order")
    onnx.save(_two_forks(), work / "two_forks.onnx")
    result = pipeline.rewrite(work / "two_forks.onnx", work / "two_forks.fused.onnx", min_gain=KEEP_EVERY_PAIR)
    assert result.output is not None
    return work / "two_forks.onnx", result.output


def test_unfusing_pairs_one_by_one_ends_in_the_original_order(two_forks: tuple[Path, Path]) -> None:
    source, fused = two_forks
    original = [n.output[0] for n in onnx.load(source).graph.node]
    model = onnx.load(fused)
    pair_ids = [n.overload for n in model.graph.node if n.op_type == C.OP_TYPE]
    assert len(pair_ids) == 2
    for pair_id in pair_ids:
        model = unfuse(model, {pair_id})
        onnx.checker.check_model(model, full_check=True)
    assert [n.output[0] for n in model.graph.node] == original
    assert C.METADATA_NODE_ORDER not in {p.key for p in model.metadata_props}


def test_unfusing_all_at_once_gives_the_original_order(two_forks: tuple[Path, Path]) -> None:
    source, fused = two_forks
    restored = unfuse(onnx.load(fused))
    assert [n.output[0] for n in restored.graph.node] == [n.output[0] for n in onnx.load(source).graph.node]
