"""The cost of a fused op (com.microsoft MultiHeadAttention): the work of its program ops as the
op's definition gives it, and its dispatch, once per node on ONNX Runtime's kernels and once per
program op on the plugin's. Values come from the shapes, not from a measured fit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from hexfuse_onnx import costmodel, graph
from hexfuse_onnx.costmodel import Param
from hexfuse_onnx.fused_work import fused_work
from hexfuse_onnx.profile import Engine, NodeProfile, TaskProfile, profile_graph

B, PAST, HEADS, H = 1, 9, 2, 8  # one decode step: one new token over 9 cached ones
D, TOTAL = HEADS * H, PAST + 1


def _decode_mha() -> graph.ModelGraph:
    """q, k, v [1, 1, 16] and a past of 9 rows per head -> y [1, 1, 16] and the 10-row presents."""
    info = helper.make_tensor_value_info
    f = TensorProto.FLOAT
    inputs = [info(n, f, [B, 1, D]) for n in "qkv"] + [info(n, f, [B, HEADS, PAST, H]) for n in ("pk", "pv")]
    outputs = [info("y", f, [B, 1, D])] + [info(n, f, [B, HEADS, TOTAL, H]) for n in ("ck", "cv")]
    node = helper.make_node(
        "MultiHeadAttention",
        ["q", "k", "v", "", "", "", "pk", "pv"],
        ["y", "ck", "cv"],
        domain="com.microsoft",
        num_heads=HEADS,
        name="mha",
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return graph.index_model(helper.make_model(helper.make_graph([node], "g", inputs, outputs), opset_imports=opsets))


def test_attention_copies_its_heads_and_cache_once_and_reads_its_inputs_from_ddr() -> None:
    """A decode step's copies: Q, K and V to heads (a COPY and a TRANSPOSE each), the past and the
    new row into each present (CONCAT), the context back (two copies); 4 bytes read and 4 written
    per element. The node's own inputs and outputs (the past and the presents: most of its bytes)
    are DDR traffic of those copies, not one more copy."""
    g = _decode_mha()
    op = profile_graph(g).task([0])
    assert op is not None
    copied = 3 * 2 * B * D + 2 * B * TOTAL * D + 2 * B * D
    memory = [p for p in op.ops if p.engine == Engine.MEMORY]
    assert sum(p.bytes for p in memory) == 8 * copied
    io = 4 * (3 * B * D + 2 * B * PAST * D + B * D + 2 * B * TOTAL * D)
    assert sum(p.ddr_bytes for p in op.ops) == pytest.approx(io, abs=len(op.ops))  # shares rounded down
    gemms = [p.flops for p in op.ops if p.engine == Engine.MATRIX]
    assert gemms == [2.0 * B * HEADS * 1 * TOTAL * H] * 2  # Q K^T and the context, every head
    assert len(op.ops) == len(fused_work(g, g.nodes[0]))


def _fused(parts: int) -> TaskProfile:
    """One node of `parts` vector program ops of 1 MFLOP each, then a plain node of 1 MFLOP."""
    op = NodeProfile(0, Engine.VECTOR, 1e6, 0, 0, 0, 0)
    whole = replace(op, flops=parts * 1e6, parts=tuple(op for _ in range(parts)))
    return TaskProfile.of([whole, replace(op, node=1)])


def _target(node_kernels: bool) -> costmodel.Target:
    return replace(
        costmodel.HOST,
        vector_flops_per_context=Param(1e9, "FLOP/s", "test"),
        ddr_bytes=Param(1e15, "B/s", "test"),
        op_overhead_s=Param(1e-3, "s", "test"),
        general_workers=Param(1.0, "workers", "test"),
        node_kernels=node_kernels,
    )


def test_a_fused_op_pays_its_dispatch_once_on_node_kernels_and_per_program_op_on_the_plugin() -> None:
    task = _fused(4)  # 5 ms of work either way
    assert costmodel.task_time(task, _target(node_kernels=True)) == pytest.approx(5e-3 + 2e-3)
    assert costmodel.task_time(task, _target(node_kernels=False)) == pytest.approx(5e-3 + 5e-3)
    # unfused on a pool without a baseline: ORT's nodes, one kernel call each
    assert costmodel.serial_time(task, _target(node_kernels=False)) == pytest.approx(5e-3 + 2e-3)


def test_node_kernels_travel_in_the_json(tmp_path: Path) -> None:
    kernel = replace(_target(False), baseline=_target(True))
    (tmp_path / "t.json").write_text(kernel.to_json())
    assert costmodel.load_target(tmp_path / "t.json") == kernel
    (tmp_path / "bad.json").write_text(kernel.to_json().replace('"node_kernels": true', '"node_kernels": 1'))
    with pytest.raises(ValueError, match="node_kernels must be true or false"):
        costmodel.load_target(tmp_path / "bad.json")
