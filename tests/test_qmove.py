"""Data movement between a DequantizeLinear and a QuantizeLinear of one type, scale and zero point runs on
the integers (qeltwise._move), as ONNX Runtime's QDQ transformer drops such a pair ("drop" rules): one
op instead of DQ, the op in f32 and Q, bit for bit ORT's result, 8 and 16-bit; other parameters keep
the float path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_lower import init, pair_model, program_inputs, vi
from test_qeltwise import needs_host
from test_qmatmul import _opcodes

from hexfuse_onnx.graph import index_model
from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.lowering.abi import Opcode
from hexfuse_onnx.lowering.qeltwise import model_plan
from hexfuse_onnx.profile import Engine, profile_graph
from hexfuse_onnx.runtime import HostKernel

U8, U16 = TensorProto.UINT8, TensorProto.UINT16
NP = {U8: np.uint8, U16: np.uint16}

SLICE = ([1, 0], [3, 5], [2, 3], [1, 2])  # starts, ends, axes, steps
# op -> (input shape, output shape, attributes, constant inputs, the ops it lowers to)
MOVES: dict[str, tuple] = {
    "Transpose": ([2, 3, 4, 5], [2, 4, 5, 3], {"perm": [0, 2, 3, 1]}, [], [Opcode.TRANSPOSE]),
    "Reshape": ([2, 3, 4, 5], [6, 20], {}, [np.array([6, 20], np.int64)], [Opcode.COPY]),
    "Flatten": ([2, 3, 4, 5], [6, 20], {"axis": 2}, [], [Opcode.COPY]),
    "Squeeze": ([2, 1, 4, 5], [2, 4, 5], {}, [np.array([1], np.int64)], [Opcode.COPY]),
    "Unsqueeze": ([2, 4, 5], [2, 1, 4, 5], {}, [np.array([1], np.int64)], [Opcode.COPY]),
    "Slice": ([2, 3, 4, 5], [2, 3, 2, 3], {}, [np.array(v, np.int64) for v in SLICE], [Opcode.SLICE]),
    "Gather": ([4, 3, 5], [3, 3, 5], {"axis": 0}, [np.array([2, 0, 3], np.int64)], [Opcode.GATHER_ROWS]),
}


def _group(p: str, op: str, dt: int, same: bool, domain: str = "") -> tuple:
    """DQ -> op -> Q (the DQ's scale and zero point, or others): nodes, inputs, outputs, initializers."""
    x_shape, y_shape, attrs, constants, _ = MOVES[op]
    top = int(np.iinfo(NP[dt]).max)
    xq, yq = (0.013, top // 3), ((0.013, top // 3) if same else (0.021, top // 2))
    inits = [
        init(f"{p}xs", np.float32(xq[0])), init(f"{p}xz", np.array(xq[1], NP[dt])),
        init(f"{p}ys", np.float32(yq[0])), init(f"{p}yz", np.array(yq[1], NP[dt])),
    ]  # fmt: skip
    names = [f"{p}c{k}" for k in range(len(constants))]
    inits += [init(name, v) for name, v in zip(names, constants)]
    nodes = [
        helper.make_node("DequantizeLinear", [f"{p}x", f"{p}xs", f"{p}xz"], [f"{p}xf"], domain=domain),
        helper.make_node(op, [f"{p}xf", *names], [f"{p}yf"], **attrs),
        helper.make_node("QuantizeLinear", [f"{p}yf", f"{p}ys", f"{p}yz"], [f"{p}y"], domain=domain),
    ]
    infos = [vi(f"{p}x", x_shape, dt)] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return nodes, infos, [vi(f"{p}y", y_shape, dt)], inits


def _models(op: str, dt: int, same: bool, domain: str = "") -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The pair of two such groups, and the same nodes as a plain QDQ model (what ORT runs)."""
    a, b = _group("a_", op, dt, same, domain), _group("b_", op, dt, same, domain)
    pair = pair_model(a[0], b[0], a[1], b[1], a[2], b[2], a[3] + b[3], opset=21)
    inputs = [a[1][0], b[1][0]]
    graph = helper.make_graph(a[0] + b[0], "qdq", inputs, a[2] + b[2], initializer=a[3] + b[3])
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    for proto in (*pair.functions, pair):
        proto.opset_import.extend(opsets[1:])
    if domain:  # ONNX's inference does not type com.microsoft's Q/DQ: the rewrite gives the body's types
        x_shape, y_shape = MOVES[op][:2]
        pair.functions[0].value_info.extend(
            vi(f"{p}{t}", shape, TensorProto.FLOAT)
            for p in ("a_", "b_")
            for t, shape in (("xf", x_shape), ("yf", y_shape))
        )
    return pair, helper.make_model(graph, opset_imports=opsets, ir_version=10)


@needs_host
@pytest.mark.parametrize("dt,domain", [(U8, ""), (U16, ""), (U16, "com.microsoft")])
@pytest.mark.parametrize("op", sorted(MOVES))
def test_a_move_between_equal_parameters_runs_on_the_integers(op: str, dt: int, domain: str) -> None:
    """Also between com.microsoft's Q/DQ (ORT's quantizer writes them for 16-bit types before opset 21)."""
    import onnxruntime as ort

    pair, plain = _models(op, dt, True, domain)
    assert _opcodes(lower_pair(pair, pair.graph.node[0])) == MOVES[op][4] * 2
    rng = np.random.default_rng(0)
    info = np.iinfo(NP[dt])
    feeds = {
        v.name: rng.integers(info.min, info.max + 1, [d.dim_value for d in v.type.tensor_type.shape.dim]).astype(NP[dt])
        for v in plain.graph.input
    }
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(pair, pair.graph.node[0]), program_inputs(pair, pair.graph.node[0], feeds))
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_array_equal(w, g)


@pytest.mark.parametrize("dt", [U8, U16])
@pytest.mark.parametrize("op", ["Transpose", "Reshape", "Slice"])
def test_a_move_between_other_parameters_keeps_the_float_path(op: str, dt: int) -> None:
    pair, _ = _models(op, dt, same=False)
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops == [Opcode.DEQUANTIZE_LINEAR, *MOVES[op][4], Opcode.QUANTIZE_LINEAR] * 2, ops


@pytest.mark.parametrize("same", [True, False])
def test_the_profile_charges_a_moved_groups_q_and_dq_nothing(same: bool) -> None:
    """model_plan, which the profile reads, absorbs the Q/DQ of exactly the groups the lowering moves."""
    _, plain = _models("Transpose", U16, same)
    plan = model_plan(index_model(plain))
    assert sorted(plan.absorbed) == ([0, 2, 3, 5] if same else [])
    assert sorted(plan.elementwise) == ([1, 4] if same else [])
    g = index_model(plain)
    task = profile_graph(g).task(list(range(len(g.nodes))))
    assert task is not None
    working = [op.op_type for op in task.ops if op.engine != Engine.NONE]
    assert working == (["Transpose"] * 2 if same else ["DequantizeLinear", "Transpose", "QuantizeLinear"] * 2)
