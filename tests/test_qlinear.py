"""QOperator ops without an integer kernel (com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearConcat, QLinearGlobalAveragePool) lowered as DQ -> f32 op -> Q chains: the host kernel
against ONNX Runtime's own kernels of those ops."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_lower import init, pair_model, program_inputs, vi

from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR, HostKernel

U8 = TensorProto.UINT8
MS = "com.microsoft"


def _q(name: str, scale: float, zero: int) -> list:
    return [init(f"{name}_s", np.float32(scale)), init(f"{name}_z", np.array(zero, np.uint8))]


def _model_parts() -> tuple:
    """Task A: QLinearAdd (broadcast [5]) -> QLinearSigmoid; task B: QLinearMul (x * x) -> QLinearConcat
    with x (another scale) -> QLinearGlobalAveragePool."""
    rng = np.random.default_rng(2)
    inits = (
        _q("ax", 0.05, 120) + _q("ab", 0.02, 10) + _q("as", 0.07, 130) + _q("ay", 1 / 256, 0)
        + _q("bx", 0.03, 100) + _q("bm", 0.11, 5) + _q("bc", 0.09, 90) + _q("by", 0.04, 60)
        + [init("a_b", rng.integers(0, 256, [5]).astype(np.uint8))]
    )  # fmt: skip
    nodes_a = [
        helper.make_node(
            "QLinearAdd", ["a_x", "ax_s", "ax_z", "a_b", "ab_s", "ab_z", "as_s", "as_z"], ["a_s"], domain=MS
        ),
        helper.make_node("QLinearSigmoid", ["a_s", "as_s", "as_z", "ay_s", "ay_z"], ["a_y"], domain=MS),
    ]
    nodes_b = [
        helper.make_node(
            "QLinearMul", ["b_x", "bx_s", "bx_z", "b_x", "bx_s", "bx_z", "bm_s", "bm_z"], ["b_m"], domain=MS
        ),
        helper.make_node(
            "QLinearConcat", ["bc_s", "bc_z", "b_m", "bm_s", "bm_z", "b_x", "bx_s", "bx_z"], ["b_c"], axis=1, domain=MS
        ),
        helper.make_node("QLinearGlobalAveragePool", ["b_c", "bc_s", "bc_z", "by_s", "by_z"], ["b_y"], domain=MS),
    ]
    params = [vi(t.name, list(t.dims), t.data_type) for t in inits]
    inputs_a = [vi("a_x", [2, 3, 5], U8)] + [p for p in params if p.name[0] == "a"]
    inputs_b = [vi("b_x", [1, 4, 6, 5], U8)] + [p for p in params if p.name[0] == "b"]
    outputs_a = [vi("a_y", [2, 3, 5], U8)]
    outputs_b = [vi("b_c", [1, 8, 6, 5], U8), vi("b_y", [1, 8, 1, 1], U8)]
    typed = [vi("a_s", [2, 3, 5], U8), vi("b_m", [1, 4, 6, 5], U8)]
    return nodes_a, nodes_b, inputs_a, inputs_b, outputs_a, outputs_b, inits, typed


def _pair():
    nodes_a, nodes_b, inputs_a, inputs_b, outputs_a, outputs_b, inits, typed = _model_parts()
    m = pair_model(nodes_a, nodes_b, inputs_a, inputs_b, outputs_a, outputs_b, inits, opset=19)
    m.functions[0].value_info.extend(typed + outputs_a + outputs_b)  # what the pass gives a body (ORT's inference)
    for opsets in (m.functions[0].opset_import, m.opset_import):
        opsets.append(helper.make_opsetid(MS, 1))
    return m


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_qlinear_chains_match_onnxruntime_within_one_step() -> None:
    nodes_a, nodes_b, inputs_a, inputs_b, outputs_a, outputs_b, inits, _ = _model_parts()
    graph = helper.make_graph(
        nodes_a + nodes_b, "qop", [inputs_a[0], inputs_b[0]], outputs_a + outputs_b, initializer=inits
    )
    plain = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid(MS, 1)], ir_version=10
    )
    m = _pair()
    rng = np.random.default_rng(4)
    feeds = {
        "a_x": rng.integers(0, 256, [2, 3, 5]).astype(np.uint8),
        "b_x": rng.integers(0, 256, [1, 4, 6, 5]).astype(np.uint8),
    }
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    for out, r, g in zip(outputs_a + outputs_b, ref, got):
        assert r.dtype == g.dtype == np.uint8 and r.shape == g.shape, out.name
        diff = np.abs(r.astype(np.int32) - g.astype(np.int32))
        assert diff.max() <= 1 and (diff == 0).mean() >= 0.9, (out.name, diff.max(), (diff == 0).mean())


def test_a_qlinear_scale_that_is_not_an_initializer_is_named() -> None:
    m = _pair()
    m.graph.input.append(vi("ax_s", [], TensorProto.FLOAT))
    kept = [t for t in m.graph.initializer if t.name != "ax_s"]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept)
    with pytest.raises(LoweringError, match="QLinearAdd.*per-tensor initializers"):
        lower_pair(m, m.graph.node[0])


def test_emulate_allows_one_step_only_where_a_quantize_writes_the_output() -> None:
    """QUANTIZE_LINEAR outputs quantize an f32 result (one step between builds); integer kernels' are exact."""
    from hexfuse_onnx.tools.emulate import check_output, quantized_outputs

    m = _pair()
    assert quantized_outputs(lower_pair(m, m.graph.node[0])) == {0, 1, 2}
    host = np.array([3, 200], np.uint8)
    assert check_output("y", np.array([4, 200], np.uint8), host, 1e-4, steps=1).ok
    assert not check_output("y", np.array([5, 200], np.uint8), host, 1e-4, steps=1).ok
    assert not check_output("y", np.array([4, 200], np.uint8), host, 1e-4).ok


def test_emulate_holds_a_dequantized_output_to_rtol() -> None:
    """A DequantizeLinear of a quantized f32 result is no longer allowed a step of its scale: the
    host reference sums a u16 group's Conv/Gemm in the Hexagon order, so only rtol remains."""
    from hexfuse_onnx.tools.emulate import check_output

    host = np.array([100.0, 0.5, 0.25, 0.0], np.float32)
    assert check_output("y", host, host, 1e-4).bit_exact
    assert check_output("y", host + np.float32([0.005, 0, 0, 0]), host, 1e-4).ok  # within rtol of max|host|
    assert not check_output("y", host + np.float32([0, 0.25, 0, 0]), host, 1e-4).ok  # one step of a 0.25 scale
