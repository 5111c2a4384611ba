"""The QNN QDQ models of the zoo (models/quantized.py): valid, deterministic, close to their float
models on stock ONNX Runtime, and taken by the QNN EP (HTP emulated) where onnxruntime-qnn is installed.

A model whose float model is not in the real-model cache is skipped, never downloaded. QNN's session of
ppocr_det and ppocr_rec (its graph finalize) takes 15-40 s each, ddddocr_ocr's 15 s of CPU and svtrv2_captcha's
4-8 s at each activation width: they are made with HEXFUSE_QDQ_SLOW=1 (captcha_crnn and ppocr_cls are the OCR
models QNN places in CI).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from qnn_support import QNN_EP, qnn_devices_or_skip

from models import quantized

pytestmark = pytest.mark.slow  # model generation, QNN emulation, whole decoders

# Mean |quantised - float| as a share of the output's calibrated range (scale * (qmax - qmin)); the worst
# measured is 0.12 (ppocr_cls u8u8); a wrong scale or zero point gives a large share of the range.
MEAN_ERROR_BOUND = 0.15
SLOW_QNN = {"ppocr_det", "ppocr_rec", "ddddocr_ocr", "svtrv2_captcha"}
# Besides the graph's input QuantizeLinear and output DequantizeLinear nodes (float at the edges),
# what QNN leaves to the CPU: centerface's BatchNormalization nodes after ConvTranspose, with their Q/DQ.
# What QNN's emulated HTP leaves to the CPU, as measured (a baseline of QNN, not of hexfuse):
# dtln_stage1's two LSTMs; oww_melspectrogram's power-to-dB Clip and the Q/DQ around it.
ALLOWED_ON_CPU = {
    "centerface": {"BatchNormalization", "QuantizeLinear", "DequantizeLinear"},
    "dtln_stage1": {"LSTM"},
    "oww_melspectrogram": {"Clip", "QuantizeLinear", "DequantizeLinear"},
    # the dynamo exports' causal mask gathers with GatherND; the contrib ops of onnxruntime-genai's layout
    "gpt2_dynamo": {"GatherND"},
    "llama_dynamo": {"GatherND"},
    "llama_gqa_contrib": {"GroupQueryAttention", "SkipSimplifiedLayerNormalization"},
    # SLANet's decoder Loop (its body with it) and the Softmax after it, with their Q/DQ
    "slanet_table": {"Loop", "Softmax", "QuantizeLinear", "DequantizeLinear"},
    # u16u8 (branch stranger9): the one ScatterElements with reduction 'max' (the per-molecule pooling), with
    # the Q/DQ around it; at u8 QNN takes every node
    "minimol": {"ScatterElements", "QuantizeLinear", "DequantizeLinear"},
    # (branch stranger10's models, measured on the merge) GTCRN's grouped ConvTransposes and its sliding-window
    # Gather, with the Transpose/Reshape and Q/DQ around them; MarbleNet's Cast of its int16 audio to float
    "gtcrn_stream": {"ConvTranspose", "Gather", "Transpose", "Reshape", "QuantizeLinear", "DequantizeLinear"},
    "marblenet_vad": {"Cast"},
    # (session 17, measured on the merge) trueocr's line detector: its head's two Reshapes and Transpose
    # at sizes computed from Shape, with their Q/DQ, between QNN's two partitions (u8 and u16 alike)
    "trueocr_det": {"Reshape", "Transpose", "QuantizeLinear", "DequantizeLinear"},
    # (stranger25) QNN takes no If: the wake-word head's second stage (the If's then branch) runs on the CPU,
    # with the QuantizeLinear of the If's output (u8u8 and u16u8 alike)
    "oww_hey_jarvis": {"If", "QuantizeLinear"},
}
# Quantised models further from their float model than MEAN_ERROR_BOUND (strict xfails): a recipe's
# limit, as measured, not the pass's.
FLOAT_DRIFT = {
    "slanet_table_qdq_u8u8": "the decoder Loop's per-tensor u8 state drifts over its steps: its structure "
    "output is 0.189 of its range from the float model's (u16u8: 0.137)",
    **{
        f"u2netp_qdq_{tag}": "U2-Net's mask output ('1959') lands up to 254.9 u8 steps, mean 0.97 of its range, "
        "from the float model's (u16u8: 37880 steps, mean 0.55). Not a shift of the inputs: on calibration batch 0 "
        "itself the two fused maps are off by 6.7x their float range. The error grows inside stage 1d's RSU7 at "
        "320x320 (one 16->16 3x3 Conv with a BatchNorm-folded bias up to 7.0 and per-channel weight ranges "
        "0.0014-0.70 takes the mean error from 0.19 to 0.46 of its range); per-channel u8 weights (after an "
        "opset-13 conversion) cut the maps' error to 2.3x, not enough: the recipe's limit on this net"
        for tag in ("u8u8", "u16u8")
    },
    "mlsd_tiny_qdq_u8u8": "M-LSD's scores are the centre map's Sigmoid where a 3x3 MaxPool of it Equals it (its "
    "peak mask, in the graph): at u8 the map has plateaus of tied codes, and every tied pixel is a peak, 55129 of "
    "65536 against the float model's 551 (feed seed 100), mean 0.246 of the range (u16u8: 9496 peaks, mean 0.096)",
}
FEED_SEED = 100  # not one of the calibration batches (seeds 0..CALIBRATION_BATCHES-1)
# QNN's failures (strict xfails: they turn into failures once QNN takes the model).
QNN_FAILS = {
    "fsmn_vad": "the emulated HTP backend fails to finalize the graph: QNN_COMMON_ERROR_MEM_ALLOC (code 1002), "
    "at u8 and u16 activations alike",
    "llama_attention23": "QNN fails to compose the graph (EP_FAIL) of opset 23's Attention, RotaryEmbedding and "
    "RMSNormalization, decode and prefill alike",
    "llama_gqa_contrib_prefill": "QNN fails to compose the graph (EP_FAIL) with an empty past (past 0)",
    "spindle_eeg": "the emulated HTP backend fails to finalize the graph: QNN_COMMON_ERROR_MEM_ALLOC (code 1002), "
    "at u8 and u16 activations alike (7500 samples: ops of up to 15.3 MiB)",
}


def _params(names: list[str]) -> list:
    out = []
    for name in names:
        base = quantized.get(name).base
        marks = (
            []
            if quantized.base_available(name)
            else [pytest.mark.skip(reason=f"needs python -m models real fetch {base}")]
        )
        out.append(pytest.param(name, marks=marks, id=name))
    return out


ALL = _params(list(quantized.MODELS))


def _session(path: Path, so: ort.SessionOptions | None = None) -> ort.InferenceSession:
    so = so or ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _float_session(path: Path) -> ort.InferenceSession:
    """The prepared float model on ORT; at basic optimisations when the default level refuses it:
    onnxruntime 1.32's extended-level fusions fail on wav2vec2_ctc's prepared model ("Attempt to
    replace the existing tensor"), which loads and runs at basic level (the QDQ model at any)."""
    try:
        return _session(path)
    except ort.capi.onnxruntime_pybind11_state.Fail:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        return _session(path, so)


def output_grids(model: onnx.ModelProto) -> dict[str, tuple[float, int]]:
    """(scale, number of steps) of each graph output made by a DequantizeLinear with a per-tensor scale."""
    inits = {t.name: t for t in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    grids = {}
    for arg in model.graph.output:
        node = producer.get(arg.name)
        if node is None or node.op_type != "DequantizeLinear" or node.input[1] not in inits:
            continue
        scale = numpy_helper.to_array(inits[node.input[1]])
        info = np.iinfo(onnx.helper.tensor_dtype_to_np_dtype(inits[node.input[2]].data_type))
        if scale.size == 1:
            grids[arg.name] = (float(scale), int(info.max) - int(info.min))
    return grids


@pytest.mark.parametrize("name", ALL)
def test_passes_the_full_checker(name: str) -> None:
    onnx.checker.check_model(str(quantized.fetch(name)), full_check=True)


@pytest.mark.parametrize("name", ALL)
def test_runs_on_stock_ort_close_to_its_float_model(name: str, request) -> None:
    if name in FLOAT_DRIFT:
        request.applymarker(pytest.mark.xfail(strict=True, reason=FLOAT_DRIFT[name]))
    path = quantized.fetch(name)
    model = onnx.load(path)
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    feeds = quantized.sample_feeds(name, model, seed=FEED_SEED)
    got = _session(path).run(None, feeds)
    expected = _float_session(path.with_name(quantized.PREPARED)).run(None, feeds)
    grids = output_grids(model)
    assert grids, "no output is dequantised"
    lines = []
    for arg, q, f in zip(model.graph.output, got, expected):
        assert q.shape == f.shape and np.all(np.isfinite(q))
        if arg.name not in grids:
            continue
        scale, steps = grids[arg.name]
        error = np.abs(q.astype(np.float64) - f)
        mean_share = float(error.mean()) / (scale * steps)
        lines.append(f"{arg.name}: max {error.max() / scale:.1f} steps, mean {mean_share:.4f} of range")
        assert mean_share <= MEAN_ERROR_BOUND, lines[-1]
    print(f"{name}: " + "; ".join(lines))


DETERMINISM = _params(
    [n for n in quantized.MODELS if not quantized.get(n).is_real and not quantized.get(n).phase]
    + ["ppocr_cls_qdq_u8u8", "llama_attention23_decode_qdq_u8u8"]
)


@pytest.mark.parametrize("name", DETERMINISM)
def test_two_generations_give_the_same_bytes(name: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    assert quantized.generate(name, first).read_bytes() == quantized.generate(name, second).read_bytes()


def test_calibration_images_are_seeded_and_in_the_model_range() -> None:
    model = quantized.float_model("convnet_heads_qdq_u8u8")
    a = quantized.sample_feeds("convnet_heads_qdq_u8u8", model, seed=3)["image"]
    b = quantized.sample_feeds("convnet_heads_qdq_u8u8", model, seed=3)["image"]
    c = quantized.sample_feeds("convnet_heads_qdq_u8u8", model, seed=4)["image"]
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= 0.0 and a.max() <= 1.0 and a.std() > 0.1


def test_unknown_and_unfetched_models_are_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown quantized model"):
        quantized.get("nope_qdq_u8u8")
    with pytest.raises(quantized.QuantizeError, match="python -m models real fetch centerface"):
        quantized.fetch("centerface_qdq_u8u8", cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def qnn() -> tuple[list, dict[str, str]]:
    devices, options, _ = qnn_devices_or_skip()
    return devices, options


@pytest.mark.parametrize("name", ALL)
def test_qnn_takes_its_nodes(name: str, qnn: tuple[list, dict[str, str]], request) -> None:
    """Where QNN places the nodes is decided when the session is made (QNN's op validation, then its
    graph finalize): ORT's record of that assignment is the placement. The zoo's own models also run on
    the emulated HTP (both activation widths, every op family of the zoo); the real models' runs took
    up to 44 s each there and checked nothing the assignment does not (their outputs are not compared)."""
    q = quantized.get(name)
    fails = QNN_FAILS.get(q.base) or QNN_FAILS.get(f"{q.base}_{q.phase}")
    if fails:
        request.applymarker(pytest.mark.xfail(strict=True, reason=fails))
    if quantized.get(name).base in SLOW_QNN and not os.environ.get("HEXFUSE_QDQ_SLOW"):
        pytest.skip("QNN's graph finalize takes 4-40 s here: run with HEXFUSE_QDQ_SLOW=1")
    path = quantized.fetch(name)
    model = onnx.load(path)
    devices, options = qnn
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry(ASSIGNMENT_INFO, "1")
    so.add_provider_for_devices(devices, options)
    session = ort.InferenceSession(str(path), so)
    if not quantized.get(name).is_real:
        session.run(None, quantized.sample_feeds(name, model, seed=FEED_SEED))
    partitions, on_cpu = _placement(session)
    on_qnn = len(model.graph.node) - len(on_cpu)
    print(f"{name}: QNN placed {on_qnn}/{len(model.graph.node)} nodes in {partitions} partition(s)")
    assert partitions >= 1
    inputs = {i.name for i in model.graph.input}
    outputs = {o.name for o in model.graph.output}
    edges = {
        n.name
        for n in model.graph.node
        if (n.op_type == "QuantizeLinear" and n.input[0] in inputs)
        or (n.op_type == "DequantizeLinear" and n.output[0] in outputs)
    }
    left = {n.op_type for n in model.graph.node if n.name in on_cpu - edges}
    assert left <= ALLOWED_ON_CPU.get(quantized.get(name).base, set()), sorted(on_cpu - edges)


ASSIGNMENT_INFO = "session.record_ep_graph_assignment_info"  # ORT >= 1.24: get_provider_graph_assignment_info


def _placement(session: ort.InferenceSession) -> tuple[int, set[str]]:
    """(QNN partitions, names of the nodes assigned to the CPU EP) from ORT's assignment record."""
    subgraphs = session.get_provider_graph_assignment_info()
    cpu = {node.name for s in subgraphs if s.ep_name == "CPUExecutionProvider" for node in s.get_nodes()}
    return sum(s.ep_name == QNN_EP for s in subgraphs), cpu


def test_the_cli_zoo_lists_and_resolves_them(tmp_path: Path) -> None:
    from hexfuse_onnx.errors import UsageError
    from hexfuse_onnx.tools.zoo import list_models, resolve

    entries = {m.name: m for m in list_models()}
    assert set(quantized.MODELS) <= set(entries)
    assert all(entries[n].kind == "qdq" for n in quantized.MODELS)
    path, shapes = resolve("sequential_chain_qdq_u8u8", tmp_path)
    assert path == quantized.fetch("sequential_chain_qdq_u8u8") and shapes is None
    unfetched = {m.name: m for m in list_models(tmp_path / "empty-cache")}["centerface_qdq_u8u8"]
    assert not unfetched.available and unfetched.status == "needs: python -m models real fetch centerface"
    with pytest.raises(UsageError, match="python -m models real fetch centerface"):
        resolve("centerface_qdq_u8u8", tmp_path, tmp_path / "empty-cache")


def test_decoder_calibration_is_a_request_after_a_prompt() -> None:
    """A decode step's feed: 1 token id in the vocabulary, a mask of ones over 16, position 15, and as
    past the float model's own keys/values of the prompt's first 15 tokens (not random values)."""
    name = "gpt2_dynamo_decode_qdq_u8u8"
    feeds = quantized.sample_feeds(name, quantized.float_model(name), seed=2)
    assert feeds["input_ids"].shape == (1, 1) and 0 <= feeds["input_ids"][0, 0] < 512
    assert np.array_equal(feeds["attention_mask"], np.ones((1, 16), np.int64))
    assert feeds["position_ids"].tolist() == [[15]]
    past = feeds["past_key_values.0.key"]
    assert past.shape == (1, 4, 15, 16)
    spec_path = quantized.exported.MODELS["gpt2_dynamo"].path
    prompt = np.random.default_rng(2).integers(0, 512, (1, 16), dtype=np.int64)
    zeros = {
        n: np.zeros((1, 4, 0, 16), np.float32)
        for i in range(2)
        for n in (f"past_key_values.{i}.key", f"past_key_values.{i}.value")
    }
    ref = _session(spec_path).run(
        ["present.0.key"],
        {
            "input_ids": prompt[:, :15],
            "attention_mask": np.ones((1, 15), np.int64),
            "position_ids": np.arange(15)[None],
            **zeros,
        },
    )[0]
    assert np.array_equal(past, ref)
    assert np.array_equal(feeds["input_ids"], prompt[:, 15:])
