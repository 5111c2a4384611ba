"""exact_products: the verification's integer products on ORT's exact path where this host saturates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import run_cli
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from hexfuse_onnx import runtime
from hexfuse_onnx.exact_products import make_exact, ort_saturates, saturating_nodes

RNG = np.random.default_rng(11)
U8, I8, I32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
needs_plugin = pytest.mark.skipif(
    not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="the plugin is not built"
)


def products_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Two uint8 x int8 MatMulIntegers of large values (pairs of products beyond int16) sharing their
    weight, one with zero points and one without, and a ConvInteger of a constant int8 X; its feeds."""
    w = RNG.integers(100, 128, (64, 8)).astype(np.int8)
    x = RNG.integers(100, 128, (1, 16, 5, 5)).astype(np.int8)
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(-3, np.int8), "zw"),
        numpy_helper.from_array(x, "cx"),
    ]
    nodes = [
        helper.make_node("MatMulInteger", ["a", "w", "za", "zw"], ["y1"], name="mm_zero_points"),
        helper.make_node("MatMulInteger", ["a", "w"], ["y2"], name="mm"),
        helper.make_node("ConvInteger", ["cx", "k"], ["y3"], name="conv"),
    ]
    inputs = [
        helper.make_tensor_value_info("a", U8, [4, 64]),
        helper.make_tensor_value_info("za", U8, []),
        helper.make_tensor_value_info("k", U8, [2, 16, 3, 3]),
    ]
    outputs = [helper.make_tensor_value_info(y, I32, None) for y in ("y1", "y2", "y3")]
    graph = helper.make_graph(nodes, "products", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = {
        "a": RNG.integers(230, 256, (4, 64)).astype(np.uint8),
        "za": np.array(7, np.uint8),
        "k": RNG.integers(230, 256, (2, 16, 3, 3)).astype(np.uint8),
    }
    return model, feeds


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_made_exact_ort_computes_the_products_as_defined() -> None:
    """Where this host saturates, ORT is off on the model as written and exact on it made exact, whose
    definition (onnx's reference implementation) is the original's; elsewhere nothing is rewritten."""
    model, feeds = products_model()
    definition = ReferenceEvaluator(model).run(None, feeds)
    exact = onnx.ModelProto()
    exact.CopyFrom(model)
    assert make_exact(exact) == saturating_nodes(model) == (3 if ort_saturates() else 0)
    for got, want in zip(ReferenceEvaluator(exact).run(None, feeds), definition):
        np.testing.assert_array_equal(got, want)
    as_written = ort_run(model, feeds)
    assert all(np.array_equal(g, w) for g, w in zip(as_written, definition)) != ort_saturates()
    for got, want in zip(ort_run(exact, feeds), definition):
        np.testing.assert_array_equal(got, want)


def saturating_branches(path: Path) -> None:
    """Two dynamically quantised (uint8 x int8) MatMuls reading one input, a pair of branches: its
    values all near their maximum, and so the quantized ones (uint8 ~200, int8 weights ~127), whose pairs
    of products are beyond int16."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    nodes = [
        helper.make_node("Add", ["x", "ten"], ["big"], name="shift"),
        helper.make_node("MatMul", ["big", "wa"], ["ya"], name="mm_a"),
        helper.make_node("MatMul", ["big", "wb"], ["yb"], name="mm_b"),
    ]
    weights = [1 + 0.01 * RNG.standard_normal((256, 256)).astype(np.float32) for _ in range(2)]
    inits = [numpy_helper.from_array(np.array(10, np.float32), "ten")]
    inits += [numpy_helper.from_array(w, n) for w, n in zip(weights, ("wa", "wb"))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [64, 256]) for y in ("ya", "yb")]
    graph = helper.make_graph(nodes, "branches", [x], outputs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path.with_suffix(".f32.onnx"))
    quantize_dynamic(path.with_suffix(".f32.onnx"), path, weight_type=QuantType.QInt8)


@needs_plugin
def test_a_pair_of_saturating_products_is_kept_with_the_plugin_verified(tmp_path: Path) -> None:
    """The kernel's exact MatMulIntegers pass --verify plugin on any host: where ORT saturates them, the
    original's are off (checked here) and the check holds the plugin to them made exact, and says so."""
    source = tmp_path / "mlp_int8.onnx"
    saturating_branches(source)
    model = onnx.load(source)
    feeds = {"x": RNG.standard_normal((64, 256)).astype(np.float32)}
    assert saturating_nodes(model) == (2 if ort_saturates() else 0)
    if ort_saturates():
        off = np.abs(ort_run(model, feeds)[0] - ReferenceEvaluator(model).run(None, feeds)[0]).max()
        assert off > 1.0, off
    report = tmp_path / "r.json"
    proc = run_cli(
        "rewrite", source, "-o", tmp_path / "m.onnx", "--json", report, "--target", "host", "--verify", "plugin"
    )
    assert proc.returncode == 0, proc.stderr
    assert ("saturates uint8 x int8 integer products" in proc.stderr) == ort_saturates(), proc.stderr
    pairs = json.loads(report.read_text())["pairs"]
    nodes = [name for p in pairs for task in ("task_a", "task_b") for name in p[task]["nodes"]]
    products = {n.name for n in model.graph.node if n.op_type == "MatMulInteger"}
    assert products == {"mm_a_quant", "mm_b_quant"} and products <= set(nodes), nodes
    assert onnx.load(source) == model  # the user's model is not changed


def fused_products_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """uint8 x int8 products ORT fuses: a QDQ Conv and a QDQ MatMul (QLinearConv, QLinearMatMul once fused),
    a QOperator QLinearMatMul, and an int8 x int8 QDQ MatMul (exact in ORT: left). Unit scales and zero
    points 0 in, a power of two out: the float ops as written are the integer ops, exactly."""
    ones = [
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0, np.uint8), "zu"),
    ]
    inits = ones + [
        numpy_helper.from_array(np.array(0, np.int8), "zi"),
        numpy_helper.from_array(np.array(8192.0, np.float32), "sy"),
        numpy_helper.from_array(RNG.integers(100, 128, (4, 8, 3, 3)).astype(np.int8), "wc"),
        numpy_helper.from_array(RNG.integers(100, 128, (64, 8)).astype(np.int8), "wm"),
        numpy_helper.from_array(np.zeros(8, np.int8), "zwm"),  # per column, one value
    ]
    dq, q = "DequantizeLinear", "QuantizeLinear"
    nodes = [
        helper.make_node(dq, ["xc", "one", "zu"], ["xcf"]),
        helper.make_node(dq, ["wc", "one", "zi"], ["wcf"]),
        helper.make_node("Conv", ["xcf", "wcf"], ["yc"]),
        helper.make_node(q, ["yc", "sy", "zu"], ["qc"]),
        helper.make_node(dq, ["xm", "one", "zu"], ["xmf"]),
        helper.make_node(dq, ["wm", "one"], ["wmf"]),
        helper.make_node("MatMul", ["xmf", "wmf"], ["ym"]),
        helper.make_node(q, ["ym", "sy", "zu"], ["qm"]),
        helper.make_node("QLinearMatMul", ["xm", "one", "zu", "wm", "one", "zwm", "sy", "zu"], ["qop"]),
        helper.make_node(dq, ["xs", "one", "zi"], ["xsf"]),
        helper.make_node(dq, ["wm", "one", "zi"], ["wsf"]),
        helper.make_node("MatMul", ["xsf", "wsf"], ["ys"]),
        helper.make_node(q, ["ys", "sy", "zi"], ["qs"]),
    ]
    inputs = [
        helper.make_tensor_value_info("xc", U8, [1, 8, 5, 5]),
        helper.make_tensor_value_info("xm", U8, [4, 64]),
        helper.make_tensor_value_info("xs", I8, [4, 64]),
    ]
    outputs = [helper.make_tensor_value_info(y, U8, None) for y in ("qc", "qm", "qop")]
    outputs.append(helper.make_tensor_value_info("qs", I8, None))
    graph = helper.make_graph(nodes, "fused", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    feeds = {
        "xc": RNG.integers(230, 256, (1, 8, 5, 5)).astype(np.uint8),
        "xm": RNG.integers(230, 256, (4, 64)).astype(np.uint8),
        "xs": RNG.integers(100, 128, (4, 64)).astype(np.int8),
    }
    return model, feeds


def test_fused_products_made_exact_are_computed_as_defined() -> None:
    """ORT's fused uint8 x int8 QLinearConv/QLinearMatMul (QDQ or QOperator) are off where this host
    saturates (centerface_qdq: 0.11 relative) and made exact equal their definition; int8 x int8 is left."""
    model, feeds = fused_products_model()
    definition = ReferenceEvaluator(model).run(None, feeds)
    exact = onnx.ModelProto()
    exact.CopyFrom(model)
    assert make_exact(exact) == saturating_nodes(model) == (3 if ort_saturates() else 0)
    as_written = ort_run(model, feeds)
    assert all(np.array_equal(g, w) for g, w in zip(as_written[:3], definition)) != ort_saturates()
    for got, want in zip(ort_run(exact, feeds), definition):
        np.testing.assert_array_equal(got, want)
