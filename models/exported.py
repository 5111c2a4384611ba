"""Decoders with a KV cache as exporters write them, committed under models/exported/ (nothing is
downloaded), and what callers need to run them: which inputs are token ids, mask, positions and
past keys/values (`decoder_spec`), seeded inputs for a (batch, seq, past) request (`decoder_inputs`)
and a greedy generation loop that feeds present.* back as past (`generate`).

The files are tiny random-weight GPT-2 and Llama-style models made by models/export_decoders.py
(torch, run in a separate venv); models/exported/README.md says how each was made.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from hexfuse_onnx.decoder import (
    DecoderSpec as DecoderSpec,
)
from hexfuse_onnx.decoder import (  # the decoder's signature and steps, re-exported for the zoo's callers
    NotADecoder as NotADecoder,
)
from hexfuse_onnx.decoder import (
    decoder_inputs as decoder_inputs,
)
from hexfuse_onnx.decoder import (
    decoder_spec as decoder_spec,
)
from hexfuse_onnx.decoder import (
    empty_cache as empty_cache,
)
from hexfuse_onnx.decoder import (
    generate as generate,
)
from hexfuse_onnx.decoder import (
    input_shapes as input_shapes,
)
from hexfuse_onnx.decoder import (
    next_cache as next_cache,
)
from hexfuse_onnx.decoder import (
    run_step as run_step,
)
from hexfuse_onnx.decoder import (
    step_feeds as step_feeds,
)

FOLDER = Path(__file__).resolve().parent / "exported"


@dataclass(frozen=True)
class ExportedDecoder:
    name: str
    family: str  # "gpt2" or "llama"
    exporter: str
    what: str
    # onnxruntime's CPU GroupQueryAttention refuses batch > 1 when sequence > 1 and a past is given
    chunk_with_past_batch1_only: bool = False

    @property
    def path(self) -> Path:
        return FOLDER / f"{self.name}.onnx"


_LLAMA = "Llama-style (4 query / 2 KV heads, rotary, RMSNorm, SiLU MLP)"
MODELS: dict[str, ExportedDecoder] = {
    m.name: m
    for m in [
        ExportedDecoder("gpt2_torchscript", "gpt2", "torch.onnx.export TorchScript", "GPT-2 with past_key_values"),
        ExportedDecoder("gpt2_dynamo", "gpt2", "torch.onnx.export dynamo", "GPT-2 with past_key_values"),
        ExportedDecoder("llama_torchscript", "llama", "torch.onnx.export TorchScript", _LLAMA),
        ExportedDecoder("llama_dynamo", "llama", "torch.onnx.export dynamo", _LLAMA),
        ExportedDecoder(
            "gpt2_mha_contrib",
            "gpt2",
            "onnx.helper, ORT transformer-optimizer layout",
            "GPT-2 with com.microsoft.MultiHeadAttention",
        ),
        ExportedDecoder(
            "llama_gqa_contrib",
            "llama",
            "onnx.helper, onnxruntime-genai layout",
            _LLAMA + ", com.microsoft.GroupQueryAttention",
            chunk_with_past_batch1_only=True,
        ),
        ExportedDecoder("llama_attention23", "llama", "onnx.helper, opset 23", _LLAMA + ", ONNX Attention-23"),
    ]
}


PREFILL, DECODE = "prefill/", "decode/"  # name prefixes of the two copies in `prefill_decode_model`


def prefill_decode_model(model_path: str | os.PathLike[str]) -> onnx.ModelProto:
    """The decoder twice in one graph, as `colocate --requests 2` merges it (hexfuse_onnx.colocate.merge):
    every name of one copy prefixed `prefill/`, of the other `decode/`, symbolic dims included (the two
    requests have their own lengths), weights kept once as `shared/<name>`. Feed it a prefill request
    to the first and a decode step to the second (`prefill_decode_shapes`)."""
    from hexfuse_onnx.colocate import merge

    return merge([model_path], requests=2, names=[PREFILL[:-1], DECODE[:-1]]).model


def prefill_decode_shapes(
    spec: DecoderSpec, prefill_seq: int, decode_past: int, prefill_past: int = 0
) -> dict[str, list[int]]:
    """Input shapes of `prefill_decode_model`: a prefill of `prefill_seq` tokens after `prefill_past`
    cached ones (0: an empty cache) and a one-token decode step after `decode_past` (batch 1)."""
    prefill = {PREFILL + k: v for k, v in input_shapes(spec, prefill_seq, prefill_past).items()}
    return prefill | {DECODE + k: v for k, v in input_shapes(spec, 1, decode_past).items()}


ZOO_REQUEST = {"seq": 8, "past": 16}  # the shapes the zoo gives for the symbolic dims


def zoo_entries(make: type) -> list:
    """The committed decoders, their int4/int8 versions (models/nbits.py) and the speech exports,
    as hexfuse_onnx.tools.zoo.ZooModel rows (`make` is that class)."""
    from models import nbits

    rows = [(m.name, m.exporter, m.what, m.path) for m in MODELS.values()]
    for q in nbits.MODELS.values():
        src = MODELS[q.source]
        what = f"{src.what}, MatMulNBits int{q.bits} block {nbits.BLOCK} accuracy_level {nbits.LEVEL}"
        rows.append((q.name, f"{q.source} quantized here (models/nbits.py)", what, q.path))
    decoders = [
        make(name, source, "decoder", what, path, input_shapes(decoder_spec(path), **ZOO_REQUEST))
        for name, source, what, path in rows
    ]
    return decoders + [
        make(m.name, SPEECH_EXPORTER, "speech", m.what, m.path, speech_shapes(m.name)) for m in SPEECH.values()
    ]


# ---- speech models (models/export_speech.py: optimum's export of tiny Whisper and wav2vec2) ----------

SPEECH_EXPORTER = "optimum.exporters.onnx"
MELS, FRAMES, ENCODED, HIDDEN = 80, 128, 64, 64  # Whisper: log-mel bins x frames in, positions x hidden out
SPEECH_HEADS, SPEECH_HEAD_DIM, SPEECH_LAYERS, SPEECH_VOCAB = 4, 16, 2, 512
SAMPLES = 16000  # wav2vec2: one second of 16 kHz audio
# A Whisper request: the first decoder step reads PROMPT tokens; a step with past reads 1 after DECODED.
SPEECH_REQUEST = {"prompt": 4, "decoded": 15}


@dataclass(frozen=True)
class SpeechModel:
    name: str
    role: str  # "encoder", "first" (decoder, no past), "with_past", "merged" (If on use_cache_branch), "ctc"
    what: str

    @property
    def path(self) -> Path:
        return FOLDER / f"{self.name}.onnx"


_WHISPER = "Whisper-style (2+2 layers, hidden 64, 4 heads)"
SPEECH: dict[str, SpeechModel] = {
    m.name: m
    for m in [
        SpeechModel("whisper_encoder", "encoder", _WHISPER + " encoder: 80 log-mel bins x 128 frames"),
        SpeechModel("whisper_decoder", "first", _WHISPER + " decoder, first step: cross-attention K/V made"),
        SpeechModel(
            "whisper_decoder_with_past", "with_past", _WHISPER + " decoder step: self-attention past + cross K/V past"
        ),
        SpeechModel("whisper_decoder_merged", "merged", _WHISPER + " decoder, both steps under an If (optimum merged)"),
        SpeechModel("wav2vec2_ctc", "ctc", "wav2vec2-style CTC encoder: 3 convs + 2 layers, 32 labels"),
    ]
}


def _kv(layer: int, part: str, prefix: str = "past_key_values") -> list[str]:
    return [f"{prefix}.{layer}.{part}.{kv}" for kv in ("key", "value")]


def speech_shapes(name: str) -> dict[str, list[int]]:
    """Every input's shape in the request `speech_feeds` makes (batch 1)."""
    role = SPEECH[name].role
    if role == "encoder":
        return {"input_features": [1, MELS, FRAMES]}
    if role == "ctc":
        return {"input_values": [1, SAMPLES]}
    if role == "first":
        return {"input_ids": [1, SPEECH_REQUEST["prompt"]], "encoder_hidden_states": [1, ENCODED, HIDDEN]}
    shapes = {"input_ids": [1, 1]}
    for i in range(SPEECH_LAYERS):
        for part, length in (("decoder", SPEECH_REQUEST["decoded"]), ("encoder", ENCODED)):
            shapes |= {n: [1, SPEECH_HEADS, length, SPEECH_HEAD_DIM] for n in _kv(i, part)}
    if role == "merged":
        shapes |= {"encoder_hidden_states": [1, ENCODED, HIDDEN], "use_cache_branch": [1]}
    return shapes


def log_mels(rng: np.random.Generator) -> np.ndarray:
    """[1, MELS, FRAMES] features as Whisper's feature extractor makes them (log10 mel energies clamped
    to 8 below their peak, then (x + 4) / 4): three harmonic tones gliding over time on a noise floor."""
    t = np.linspace(0.0, 1.0, FRAMES)[None, :]
    bins = np.arange(MELS)[:, None]
    log = rng.uniform(-6.0, -4.5, (MELS, FRAMES))  # log10 energy of a quiet noise floor
    for _ in range(3):
        f0, glide = rng.uniform(5, 25), rng.uniform(-8, 8)
        for harmonic in (1, 2, 3):
            log += 6.0 / harmonic * np.exp(-(((bins - harmonic * (f0 + glide * t)) / 1.5) ** 2))
    return ((np.maximum(log, log.max() - 8.0) + 4.0) / 4.0).astype(np.float32)[None]


def speech_audio(rng: np.random.Generator) -> np.ndarray:
    """[1, SAMPLES] audio as wav2vec2's feature extractor gives it: tones and noise, zero mean, unit variance."""
    t = np.arange(SAMPLES) / 16000.0
    wave = sum(rng.uniform(0.2, 1.0) * np.sin(2 * np.pi * rng.uniform(100, 2000) * t) for _ in range(4))
    wave = wave + 0.1 * rng.standard_normal(SAMPLES)
    return ((wave - wave.mean()) / wave.std()).astype(np.float32)[None]


def _run(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from hexfuse_onnx.verify import session

    sess = session(path)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def speech_feeds(name: str, seed: int) -> dict[str, np.ndarray]:
    """A real request of model `name` (batch 1, `speech_shapes`): seeded features or audio; for a
    decoder, the encoder's output on them and, as past, what the first decoder step wrote for
    `decoded` seeded tokens (the with-past and merged decoders then read one more token)."""
    rng = np.random.default_rng(seed)
    role = SPEECH[name].role
    if role == "ctc":
        return {"input_values": speech_audio(rng)}
    mels = log_mels(rng)
    if role == "encoder":
        return {"input_features": mels}
    encoded = _run(SPEECH["whisper_encoder"].path, {"input_features": mels})["last_hidden_state"]
    tokens = rng.integers(3, SPEECH_VOCAB, (1, SPEECH_REQUEST["decoded"] + 1), dtype=np.int64)
    tokens[0, 0] = 1  # decoder_start_token_id
    if role == "first":
        return {"input_ids": tokens[:, : SPEECH_REQUEST["prompt"]], "encoder_hidden_states": encoded}
    first = _run(SPEECH["whisper_decoder"].path, {"input_ids": tokens[:, :-1], "encoder_hidden_states": encoded})
    feeds = {"input_ids": tokens[:, -1:]}
    feeds |= {k.replace("present.", "past_key_values.", 1): v for k, v in first.items() if k.startswith("present.")}
    if role == "merged":
        feeds |= {"encoder_hidden_states": encoded, "use_cache_branch": np.array([True])}
    return feeds
