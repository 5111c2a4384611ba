"""A model ORT optimizes otherwise once it holds a function (qdq26): ORT expands an op it has no kernel
for (HardSwish) before its graph optimisations when the model holds any function, as every rewrite
does, and after them otherwise. Quantized int8 by quantize_static's defaults, on x86, the rewrite ran
float Convs where the original runs QLinearConv, and its outputs' check missed it (pipeline.
refuse_early_expansion, ort_graph.lost_kernels)."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import run_cli
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

from hexfuse_onnx import ort_graph, pipeline
from hexfuse_onnx.errors import ModelError
from models import real

X86 = platform.machine().lower() in ("x86_64", "amd64")  # ORT converts int8 QDQ to uint8 there (QDQS8ToU8)


def _two_branches(folder: Path, act: str, uint8: bool = False) -> Path:
    """Two Conv -> act -> Conv -> act branches from one input, joined by Add, quantized by quantize_static
    (int8 activations by default; uint8 with `uint8`): the stranger's minimal reproduction."""
    from onnxruntime.quantization import QuantType, quantize_static

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((0.2 * rng.standard_normal((16, c, 3, 3))).astype(np.float32), f"w{k}{b}")
        for b in "ab"
        for k, c in ((1, 8), (2, 16))
    ]
    nodes = [helper.make_node("Add", ["ya", "yb"], ["y"])]
    for b in "ab":
        nodes[:0] = [
            helper.make_node("Conv", ["x", f"w1{b}"], [f"c1{b}"], pads=[1, 1, 1, 1]),
            helper.make_node(act, [f"c1{b}"], [f"h1{b}"]),
            helper.make_node("Conv", [f"h1{b}", f"w2{b}"], [f"c2{b}"], pads=[1, 1, 1, 1]),
            helper.make_node(act, [f"c2{b}"], [f"y{b}"]),
        ]
    g = helper.make_graph(
        nodes,
        "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32, 32])],
        inits,
    )
    src, dest = folder / f"f_{act}.onnx", folder / f"q_{act}{'_u8' if uint8 else ''}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), src)
    feeds = [{"x": rng.standard_normal((1, 8, 32, 32)).astype(np.float32)} for _ in range(4)]
    types = {"activation_type": QuantType.QUInt8} if uint8 else {}
    quantize_static(str(src), str(dest), real.calibration_reader(feeds), **types)
    return dest


@pytest.mark.skipif(not X86, reason="ORT keeps int8 QDQ on this host: it fuses the same kernels")
def test_int8_hardswish_model_is_refused_naming_the_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # written before: stock ORT ran 0 QLinearConv for the rewrite where it runs 2 for the original
    # (the Conv whose QuantizeLinear feeds HardSwish's copied DequantizeLinear stays int8 and float)
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    out = tmp_path / "fused.onnx"
    kernels = r"expands its HardSwish .*ORT runs 2 com.microsoft.QLinearConv, .* of the original as 2 Conv, "
    with pytest.raises(ModelError, match=kernels):
        pipeline.rewrite(_two_branches(tmp_path, "HardSwish"), out)
    assert not out.exists()


@pytest.mark.skipif(not X86, reason="ORT keeps int8 QDQ on this host: it fuses the same kernels")
def test_inspect_says_first_that_rewrite_refuses_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: inspect showed 2 pairs and no word of the refusal; rewrite exits 3
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    source, report = _two_branches(tmp_path, "HardSwish"), tmp_path / "inspect.json"
    done = run_cli("inspect", source, "--json", report, "-q")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("rewrite refuses this model (exit 3, nothing written): ")
    assert "expands its HardSwish" in first and "2 com.microsoft.QLinearConv" in first
    assert json.loads(report.read_text())["refused"] == first.split(": ", 1)[1]
    assert run_cli("rewrite", source, "-o", tmp_path / "fused.onnx").returncode == 3


def test_inspect_of_a_model_rewrite_takes_says_no_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    report = tmp_path / "inspect.json"
    done = run_cli("inspect", _two_branches(tmp_path, "Relu"), "--json", report, "-q")
    assert done.returncode == 0 and "refuses" not in done.stdout
    assert json.loads(report.read_text())["refused"] is None and json.loads(report.read_text())["pairs"]


@pytest.mark.skipif(not X86, reason="ORT keeps int8 QDQ on this host: it fuses the same kernels")
def test_a_function_alone_loses_the_quantized_kernels(tmp_path: Path) -> None:
    """What verification checks on a QDQ rewrite: ORT's optimized graphs, quantized kernel for kernel."""
    original = _two_branches(tmp_path, "HardSwish")
    onnx.save(ort_graph.with_function(onnx.load(original)), tmp_path / "with_function.onnx")
    lost = ort_graph.lost_kernels(original, tmp_path / "with_function.onnx")
    assert lost == "ORT runs 2 com.microsoft.QLinearConv fewer for the rewrite than for the original"
    assert ort_graph.lost_kernels(original, original) is None


@pytest.mark.parametrize("act,uint8", [("Relu", False), ("HardSwish", True)])
def test_models_ort_optimizes_alike_with_a_function_are_rewritten(
    act: str, uint8: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Relu has a kernel; with uint8 activations the copied DequantizeLinear computes the same value
    # and no conversion is skipped
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    source, out = _two_branches(tmp_path, act, uint8), tmp_path / "fused.onnx"
    assert ort_graph.function_difference(source) is None
    result = pipeline.rewrite(source, out)
    assert result.output == out and result.analysis.pairs
    assert ort_graph.lost_kernels(source, out) is None


@pytest.mark.skipif(not X86, reason="ORT keeps int8 QDQ on this host: it fuses the same kernels")
def test_trueocr_det_quantized_int8_by_default_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # written before: 8 QLinearConv for the rewrite against 24 for the original; at seed 2 (1x1x128x128)
    # 4037 of 12288 outputs up to 11 steps off, seeds 0 and 1 exact
    from onnxruntime.quantization import quantize_static

    rng = np.random.default_rng(0)
    source = tmp_path / "det_s8.onnx"
    feeds = [{"x": rng.random((1, 1, 128, 128), dtype=np.float32)} for _ in range(8)]
    quantize_static(str(cached_or_skip("trueocr_det")), str(source), real.calibration_reader(feeds))
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    kernels = r"HardSwish .*ORT runs 16 com.microsoft.QLinearConv, .* of the original as 16 Conv, "
    with pytest.raises(ModelError, match=kernels):
        pipeline.rewrite(source, tmp_path / "fused.onnx", shapes={"x": [1, 1, 128, 128]})
