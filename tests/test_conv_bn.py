"""A BatchNormalization after a Conv folds into the Conv's weight and bias (lowering/conv_bn.py), where
ONNX Runtime folds it: one CONV2D instead of the Conv, a MUL and an ADD; the profile charges it nothing."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from test_lower import HostKernel, init, needs_host, program_inputs, vi
from test_lower_exporter_ops import opcodes, task_b_pair

from hexfuse_onnx import verify
from hexfuse_onnx.graph import load
from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.lowering.abi import Opcode
from hexfuse_onnx.profile import Engine, profile_node

RNG = np.random.default_rng(23)
C_IN, C_OUT = 6, 8


def conv_bn_nodes(rank: int, bias: bool, also_read: bool = False) -> tuple[list[onnx.NodeProto], list, list]:
    """z -> Conv -> BatchNormalization -> yb (and the Conv's output as a second output when `also_read`)."""
    spatial = [9, 7][: rank - 2]
    k = [3] * (rank - 2)
    inits = [init("w", RNG.standard_normal([C_OUT, C_IN, *k]).astype(np.float32))]
    inits += [init(n, RNG.standard_normal(C_OUT).astype(np.float32)) for n in ("gamma", "beta", "mean")]
    inits += [init("var", RNG.uniform(0.05, 2.0, C_OUT).astype(np.float32))]
    if bias:
        inits.append(init("cb", RNG.standard_normal(C_OUT).astype(np.float32)))
    conv_in = ["z", "w", "cb"] if bias else ["z", "w"]
    nodes = [
        helper.make_node("Conv", conv_in, ["c"], name="conv", pads=[1] * (2 * len(k))),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["yb"], name="bn", epsilon=1e-3),
    ]
    outputs = [vi("yb", [2, C_OUT, *spatial])] + ([vi("c", [2, C_OUT, *spatial])] if also_read else [])
    return nodes, [vi("z", [2, C_IN, *spatial])], outputs, inits


def pair(rank: int, bias: bool, also_read: bool = False) -> onnx.ModelProto:
    nodes, inputs, outputs, inits = conv_bn_nodes(rank, bias, also_read)
    return task_b_pair(nodes, inputs, outputs, inits, opset=15)


def host_outputs(m: onnx.ModelProto, level: ort.GraphOptimizationLevel) -> tuple[list, list]:
    shape = [d.dim_value for d in m.graph.input[1].type.tensor_type.shape.dim]
    feeds = {"x": RNG.standard_normal([2, 4]).astype(np.float32), "z": RNG.standard_normal(shape).astype(np.float32)}
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    return ref, got


@pytest.mark.parametrize(("rank", "bias"), [(4, True), (4, False), (3, True), (3, False)])
def test_the_norm_folds_into_the_conv_as_one_op(rank: int, bias: bool) -> None:
    ops = opcodes(pair(rank, bias))
    assert Opcode.CONV2D in ops
    assert Opcode.MUL not in ops and Opcode.ADD not in ops


def test_a_conv_output_read_elsewhere_keeps_its_norm() -> None:
    ops = opcodes(pair(4, True, also_read=True))
    assert Opcode.MUL in ops and Opcode.ADD in ops


@needs_host
@pytest.mark.parametrize(("rank", "bias"), [(4, True), (4, False), (3, True)])
def test_the_folded_conv_matches_ort_with_and_without_its_fusion(rank: int, bias: bool) -> None:
    """Against ORT folding it (its default) and running it as written: within 1e-5 of the output's scale."""
    m = pair(rank, bias)
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        ref, got = host_outputs(m, level)
        assert all(verify.relative_error(r, g) <= 1e-5 for r, g in zip(ref, got))


def test_the_profile_charges_a_folded_norm_nothing(tmp_path) -> None:
    nodes, inputs, outputs, inits = conv_bn_nodes(4, True)
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    path = tmp_path / "conv_bn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), path)
    graph = load(path)
    conv, norm = (profile_node(graph, i) for i in range(2))
    assert not isinstance(conv, str) and not isinstance(norm, str)
    assert conv.engine == Engine.MATRIX and conv.flops > 0
    assert norm.engine == Engine.NONE and norm.flops == 0
