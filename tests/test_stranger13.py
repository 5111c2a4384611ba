"""What a thirteenth stranger hit with the models of models/README.md's "A thirteenth stranger's
models": a small builder reproducing it, and the real models where they are cached (`python -m
models real fetch NAME`; skipped when not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

from hexfuse_onnx import graph
from hexfuse_onnx.fold import specialise
from models import quantized

RNG = np.random.default_rng(13)


def _padded_conv(split: bool = True) -> onnx.ModelProto:
    """A Pad whose pads are a Concat of the 8 outputs of one constant's Split (opset 11, `split` an
    attribute), then a Conv: tf2onnx 1.8's ZeroPadding2D as M-LSD (npm jp.keijiro.mlsd) ships it.
    Without `split`, the pads come from a Slice of the constant (one output each) instead."""
    pads = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    names = [f"p{i}" for i in range(8)]
    if split:
        made = [helper.make_node("Split", ["c"], names, axis=0, split=[1] * 8)]
    else:
        made = [helper.make_node("Identity", ["c"], ["whole"])]
        names = ["whole"]
    nodes = [
        *made,
        helper.make_node("Concat", names, ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["xp"]),
        helper.make_node("Conv", ["xp", "w"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(pads, "c"),
        numpy_helper.from_array((RNG.standard_normal([4, 3, 3, 3]) * 0.1).astype(np.float32), "w"),
    ]
    g = helper.make_graph(
        nodes,
        "padded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)


def _run(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


@pytest.mark.parametrize("split", [True, False])
def test_a_split_of_a_constant_folds_into_the_pads_it_makes(split: bool) -> None:
    """M-LSD's 88 nodes after its first Pad had no shape ('not profiled', all 3 candidates lost):
    the fold took nodes of one output only, so the Split of 8 stayed computed and the Pad's amounts
    unknown. Every output of a node now folds when all are integers."""
    m = _padded_conv(split)
    folded, shapes = specialise(m, {})
    assert [n.op_type for n in folded.graph.node] == ["Pad", "Conv"]
    assert shapes["pads"] == (8,)
    x = RNG.standard_normal([1, 3, 16, 16]).astype(np.float32)
    assert np.array_equal(_run(folded, x), _run(m, x))


def test_a_static_model_with_split_pads_has_every_shape(tmp_path: Path) -> None:
    path = tmp_path / "padded.onnx"
    onnx.save(_padded_conv(), path)
    g = graph.load(path)
    assert [n.op_type for n in g.nodes] == ["Pad", "Conv"]
    assert g.infos["xp"].shape == (1, 3, 18, 18)


def test_rgba_nhwc_images_calibrate_in_their_own_layout() -> None:
    """mlsd_tiny's input is [1, 512, 512, 4] (RGBA, NHWC): taken for NCHW it was 512 channels of
    512x4 images. Its calibration images are 4-channel NHWC, within the model's range."""
    image = quantized._images([1, 32, 32, 4], (-1.0, 1.0), np.random.default_rng(0))
    nchw = quantized.smooth_images([1, 4, 32, 32], -1.0, 1.0, np.random.default_rng(0))
    assert np.array_equal(image, nchw.transpose(0, 2, 3, 1))


# ---- the real models, where cached ---------------------------------------------------------------


@pytest.mark.slow
def test_real_mlsd_tiny_is_analysed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node of M-LSD tiny profiled; of its 3 branch candidates 2 are refused on the on-chip
    budget (8.5 and 23 MB together), no longer as 'not profiled'; the third (9.7 MB with the Resize
    output both branches read counted twice) fits with it counted once and lowers (its Equal did not
    once): chosen at 0 us per call, and at hexagon-v73's 100 us its 34 us saving does not pay."""
    from cli_support import run_cli

    proc = run_cli("inspect", cached_or_skip("mlsd_tiny"))
    assert proc.returncode == 0, proc.stderr
    assert "not profiled" not in proc.stdout
    assert "rejected 2: on-chip budget" in proc.stdout
    assert "chosen: 1" in proc.stdout
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "100")
    proc = run_cli("inspect", cached_or_skip("mlsd_tiny"))
    assert "chosen: 0" in proc.stdout and "rejected 1: saving below the call overhead" in proc.stdout


@pytest.mark.slow
def test_real_blazeface_pairs_on_the_plugin_at_zero_overhead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 0 us per call BlazeFace's 26 branch candidates (its two heads beside the backbone's last
    blocks) give 12 pairs, plugin-verified; at 100 us none saves a call."""
    from cli_support import run_cli

    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    out = tmp_path / "bf.onnx"
    proc = run_cli("rewrite", cached_or_skip("blazeface_front"), "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert [n.op_type for n in onnx.load(out).graph.node].count("FusedHexPair") == 12
