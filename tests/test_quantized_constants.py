"""A constant quantized at run time: quantize_static writes QuantizeLinear -> DequantizeLinear of a float where a
weight is a Constant node, as paddle2onnx's BatchNormalization scale is (a stranger's QDQ PP-OCRv3 det: "cannot
lower BatchNormalization ... must be a constant"). The pass folds the QuantizeLinear as ONNX Runtime computes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import pipeline, runtime
from hexfuse_onnx.lowering import known_tensors
from hexfuse_onnx.lowering.quant import quantized

C_IN = 8


def _ort_quantize(x: np.ndarray, scale: float, zero: np.ndarray) -> np.ndarray:
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    elem = helper.np_dtype_to_tensor_dtype(zero.dtype)
    graph = helper.make_graph(
        [node],
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", elem, list(x.shape))],
        [numpy_helper.from_array(np.float32(scale), "s"), numpy_helper.from_array(zero, "z")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("zero", [np.uint8(128), np.int8(-3), np.uint16(30000), np.int16(-7)])
def test_quantized_equals_onnxruntime_ties_and_saturation_included(zero: np.generic) -> None:
    scale = 0.05
    ties = (np.arange(-40, 41, dtype=np.float32) + np.float32(0.5)) * np.float32(scale)
    spread = np.random.default_rng(0).standard_normal(2000).astype(np.float32) * 40
    x = np.concatenate([ties, spread, np.array([1e9, -1e9], np.float32)])
    zero_array = np.array(zero)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    got = quantized(node, [x, np.array(np.float32(scale)), zero_array])
    assert got is not None and got.dtype == zero_array.dtype
    np.testing.assert_array_equal(got, _ort_quantize(x, scale, zero_array))


def test_a_per_axis_or_unknown_quantize_is_not_folded() -> None:
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)
    x = np.ones(4, np.float32)
    assert quantized(node, [x, np.full(4, 0.1, np.float32), np.zeros(4, np.uint8)]) is None
    assert quantized(node, [None, np.array(np.float32(0.1)), np.array(np.uint8(0))]) is None


def bn_scale_quantized_at_run_time(path: Path) -> Path:
    """x[batch, 8, height, width]: Conv, then BatchNormalization whose scale is DQ(Q(Constant)), then Relu; beside
    it a MaxPool and a Conv. The Q reads a Constant node, and symbolic dims keep the pass from folding the
    model's constants into it: the value of the Q's output is known to the lowering only by folding it there."""
    rng = np.random.default_rng(1)
    c = lambda name, a: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(a, name))  # noqa: E731
    w = lambda k: rng.standard_normal((C_IN, C_IN, k, k)).astype(np.float32) * 0.2  # noqa: E731
    nodes = [
        c("wa", w(3)),
        c("wb", w(1)),
        c("gamma", rng.uniform(0.5, 1.5, C_IN).astype(np.float32)),
        c("beta", rng.standard_normal(C_IN).astype(np.float32)),
        c("mean", rng.standard_normal(C_IN).astype(np.float32) * 0.1),
        c("var", rng.uniform(0.5, 1.5, C_IN).astype(np.float32)),
        helper.make_node("QuantizeLinear", ["gamma", "gamma_scale", "gamma_zero"], ["gamma_q"], name="gamma_q"),
        helper.make_node("DequantizeLinear", ["gamma_q", "gamma_scale", "gamma_zero"], ["gamma_dq"], name="gamma_dq"),
        helper.make_node("Conv", ["x", "wa"], ["ca"], name="conv_a", pads=[1] * 4),
        helper.make_node("BatchNormalization", ["ca", "gamma_dq", "beta", "mean", "var"], ["na"], name="bn_a"),
        helper.make_node("Relu", ["na"], ["ya"], name="relu_a"),
        helper.make_node("MaxPool", ["x"], ["pb"], name="pool_b", kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Conv", ["pb", "wb"], ["yb"], name="conv_b"),
    ]
    shape: list[str | int | None] = ["batch", C_IN, "height", "width"]
    graph = helper.make_graph(
        nodes,
        "bn_scale_quantized_at_run_time",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, shape) for t in ("ya", "yb")],
        [
            numpy_helper.from_array(np.float32(0.01), "gamma_scale"),
            numpy_helper.from_array(np.int8(0), "gamma_zero"),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_known_tensors_hold_the_quantized_constant(tmp_path: Path) -> None:
    model = onnx.load(bn_scale_quantized_at_run_time(tmp_path / "model.onnx"))
    known = known_tensors(model.graph)
    gamma = numpy_helper.to_array(known["gamma"])
    want = _ort_quantize(gamma, 0.01, np.array(np.int8(0)))
    np.testing.assert_array_equal(numpy_helper.to_array(known["gamma_q"]), want)


def test_a_pair_over_the_batch_norm_lowers_and_matches(tmp_path: Path) -> None:
    src = bn_scale_quantized_at_run_time(tmp_path / "model.onnx")
    plugin = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0, verify_plugin=plugin)
    assert result.output is not None, [r.reason for r in result.analysis.all_rejected()]
    g = result.analysis.graph
    assert any(g.nodes[i].name == "bn_a" for p in result.analysis.pairs for i in p.candidate.nodes)
