"""What an eighteenth stranger hit with the models of models/README.md's "A seventeenth stranger's
models" (Kokoro-82M int8 text-to-speech split over 4 wheels, PP-OCRv6 small's recogniser and
detector): small builders reproducing it, and the real models where they are cached (`python -m
models real fetch NAME`; skipped when not)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import needs_host
from test_lower_exporter_ops import plugin_verified_pair

from hexfuse_onnx import graph
from models import real


def test_a_model_split_over_packages_is_joined_in_order_and_its_parts_removed(tmp_path: Path) -> None:
    """Kokoro's 92 MB int8 model comes as 4 wheels of bytes (PyPI's per-file limit): joined in the
    entry's order (then checked against its SHA-256 by fetch), the parts removed, a missing one named."""
    m = real.get("kokoro_ja_int8")
    for i, part in enumerate(m.parts):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / part).write_bytes(bytes([i]) * (i + 1))
    real._join_parts(m, tmp_path)
    assert (tmp_path / m.onnx_path).read_bytes() == b"".join(bytes([i]) * (i + 1) for i in range(len(m.parts)))
    assert not any((tmp_path / p).exists() for p in m.parts)
    with pytest.raises(real.FetchError, match=rf"split in 4 parts; missing: {re.escape(m.parts[0])}, "):
        real._join_parts(m, tmp_path)


@needs_host
def test_transposed_convs_pair_with_their_height_and_width_symbolic(tmp_path: Path) -> None:
    """PP-OCRv6 small's detector upsamples with ConvTranspose (kernel = strides = 2) at symbolic H, W:
    `colocate --requests 2` refused its one candidate, "a scratch tensor of ConvTranspose ... has no
    expression": the depth-to-space scratch dims were plain ints. Traced from X, they follow it."""
    rng = np.random.default_rng(18)
    nodes = [
        helper.make_node("ConvTranspose", ["x", "wa"], ["a1"], name="a/up", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Relu", ["a1"], ["a2"], name="a/relu"),
        helper.make_node("ConvTranspose", ["x", "wb"], ["b1"], name="b/up", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Sigmoid", ["b1"], ["b2"], name="b/sigmoid"),
        helper.make_node("Add", ["a2", "b2"], ["y"], name="join"),
    ]
    weights = [numpy_helper.from_array(rng.standard_normal((8, 4, 2, 2)).astype(np.float32), k) for k in ("wa", "wb")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, "H2", "W2"])
    fused, result = plugin_verified_pair(tmp_path, helper.make_graph(nodes, "g", [x], [y], weights))
    assert {"a/up", "b/up"} <= {n.name for n in fused}
    dims = onnx.load(result.output).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims[2:]] == ["H", "W"]


def _lstm_int8_after_a_fused_matmul(folder: Path) -> onnx.ModelProto:
    """An LSTM quantised by quantize_dynamic (com.microsoft DynamicQuantizeLSTM, as Kokoro's int8 export
    has 6), beside a com.microsoft FusedMatMul (Kokoro's alignment product), which ORT's inference has
    no rule for either, then a Sigmoid of the input that neither reads."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(18)
    w, r = (
        numpy_helper.from_array(rng.standard_normal((1, 64, d)).astype(np.float32), k) for k, d in (("w", 8), ("r", 16))
    )
    nodes = [
        helper.make_node("LSTM", ["x", "w", "r"], ["h", "h_last"], hidden_size=16),
        helper.make_node("FusedMatMul", ["x", "m"], ["f"], domain="com.microsoft", transB=1),
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Tanh", ["s"], ["st"]),
    ]
    m = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "m")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 8])
    outs = [
        helper.make_tensor_value_info(k, TensorProto.FLOAT, [None] * r) for k, r in (("hr", 4), ("f", 3), ("st", 3))
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], outs, [w, r, m]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    onnx.save(model, folder / "f.onnx")
    quantize_dynamic(
        str(folder / "f.onnx"), str(folder / "q.onnx"), weight_type=QuantType.QInt8, op_types_to_quantize=["LSTM"]
    )
    quantized = onnx.load(folder / "q.onnx")
    del quantized.graph.value_info[:]  # the shapes the quantiser recorded: the pass is to infer them
    onnx.save(quantized, folder / "q.onnx")
    return quantized


def test_an_int8_lstm_is_shaped_and_what_ort_stops_before_comes_from_onnx(tmp_path: Path) -> None:
    """Kokoro's int8 TTS: ORT's inference stopped at its first DynamicQuantizeLSTM and the pass took
    its partial shapes or ONNX's, whichever knew more: 2063 of 3614 nodes unprofiled (PL-BERT
    included); with the LSTM's rule and both inferences' shapes together, 1435."""
    model = _lstm_int8_after_a_fused_matmul(tmp_path)
    assert "DynamicQuantizeLSTM" in {n.op_type for n in model.graph.node}
    g = graph.load(tmp_path / "q.onnx", {"x": [5, 1, 8]})
    assert g.infos["h"].shape == (5, 1, 1, 16)
    assert g.infos["s"].shape == (5, 1, 8)
