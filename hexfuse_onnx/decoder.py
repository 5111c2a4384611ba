"""A decoder with a KV cache, read from its signature: which inputs are token ids, mask, positions and
past keys/values (`decoder_spec`; a seq2seq decoder's cross-attention keys/values and encoder output as
optimum names them too), a request's shapes and seeded inputs (`input_shapes`, `decoder_inputs`),
and a greedy generation loop that feeds present.* back as past (`generate`). `colocate --hybrid` needs it
in an installed package; the zoo's exported decoders (models/exported.py) use it too."""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

# optimum's seq2seq decoders (Whisper, Moonshine, T5) name the self-attention cache
# past_key_values.N.decoder.key and the cross-attention one past_key_values.N.encoder.key
_PAST = re.compile(r"past_key_values\.(\d+)\.(?:decoder\.)?(key|value)$")
_PRESENT = re.compile(r"present\.(\d+)\.(?:decoder\.)?(key|value)$")
_CROSS = re.compile(r"past_key_values\.(\d+)\.encoder\.(key|value)$")
ENCODER_STATES, CACHE_BRANCH = "encoder_hidden_states", "use_cache_branch"
DEFAULT_ENCODER_LENGTH = 64  # encoder frames a seq2seq request attends to where the model leaves them free


def decode_step_hint(model: onnx.ModelProto, hinted: Collection[str]) -> str:
    """A note for a decoder with a KV cache analysed at its default lengths (its input_ids' sequence dim
    free, no --shape for it): those make a prefill chunk of 128 tokens, and most of a generation is
    decode steps of one token. '' for any other model."""
    inputs = {v.name: v for v in model.graph.input}
    ids = inputs.get("input_ids")
    if ids is None or "input_ids" in hinted or not any(_PAST.match(n) for n in inputs):
        return ""
    dims = ids.type.tensor_type.shape.dim
    if len(dims) != 2 or dims[1].HasField("dim_value"):
        return ""
    return "; a decoder with a KV cache: these lengths make a prefill chunk, --shape input_ids=1x1 a decode step"


class NotADecoder(ValueError):
    """The model has no past_key_values.N.key/value inputs with matching present.N.* outputs."""


@dataclass(frozen=True)
class DecoderSpec:
    ids: str
    mask: str | None
    positions: str | None
    logits: str
    past: list[tuple[str, str]]  # (key, value) input per layer
    present: list[tuple[str, str]]  # (key, value) output per layer
    kv_heads: int
    head_dim: int
    vocab: int
    kv_layout: str = "batch, kv_heads, past, head_dim"  # past length on axis 2
    # a seq2seq decoder's: the cross-attention (key, value) per layer, [batch, heads, frames, head_dim] each,
    # the encoder's output it may read instead (merged decoders, on their first step) and the If input
    # that picks the cached branch; the frames a request gives
    cross: tuple[tuple[str, str], ...] = ()
    cross_heads: int = 0
    encoder_states: str | None = None
    encoder_width: int = 0
    cache_branch: str | None = None
    encoder_length: int = DEFAULT_ENCODER_LENGTH

    @property
    def layers(self) -> int:
        return len(self.past)


def _by_layer(names: list[str], pattern: re.Pattern[str], what: str, path: object) -> list[tuple[str, str]]:
    found: dict[int, dict[str, str]] = {}
    for n in names:
        m = pattern.match(n)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = n
    if not found or sorted(found) != list(range(len(found))) or any(len(kv) != 2 for kv in found.values()):
        raise NotADecoder(f"{path}: not a decoder with a KV cache: no complete {what}.N.key/value per layer")
    return [(found[i]["key"], found[i]["value"]) for i in range(len(found))]


def _dims(v: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param if d.HasField("dim_param") else d.dim_value for d in v.type.tensor_type.shape.dim]


def decoder_spec(model_path: str | os.PathLike[str]) -> DecoderSpec:
    """Which inputs are ids/mask/positions/past and the KV layout, from the graph's signature."""
    graph = onnx.load(str(model_path), load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    inputs = {v.name: v for v in graph.input if v.name not in inits}
    outputs = {v.name: v for v in graph.output}
    past = _by_layer(list(inputs), _PAST, "past_key_values", model_path)
    present = _by_layer(list(outputs), _PRESENT, "present", model_path)
    if "input_ids" not in inputs or "logits" not in outputs:
        raise NotADecoder(f"{model_path}: not a decoder: needs an input_ids input and a logits output")
    key_dims, logit_dims = _dims(inputs[past[0][0]]), _dims(outputs["logits"])
    if len(key_dims) != 4 or not all(isinstance(d, int) and d > 0 for d in (key_dims[1], key_dims[3], logit_dims[-1])):
        raise NotADecoder(f"{model_path}: past keys are not [batch, kv_heads, past, head_dim] with fixed heads")
    return DecoderSpec(
        ids="input_ids",
        mask="attention_mask" if "attention_mask" in inputs else None,
        positions="position_ids" if "position_ids" in inputs else None,
        logits="logits",
        past=past,
        present=present,
        kv_heads=int(key_dims[1]),
        head_dim=int(key_dims[3]),
        vocab=int(logit_dims[-1]),
        **_seq2seq(inputs, model_path),
    )


def _seq2seq(inputs: dict[str, onnx.ValueInfoProto], path: object) -> dict[str, Any]:
    """DecoderSpec's seq2seq fields of a decoder with cross-attention inputs; none for a decoder-only one."""
    if not any(_CROSS.match(n) for n in inputs):
        return {}
    cross = _by_layer(list(inputs), _CROSS, "past_key_values.N.encoder", path)
    key_dims = _dims(inputs[cross[0][0]])
    if len(key_dims) != 4 or not all(isinstance(d, int) and d > 0 for d in (key_dims[1], key_dims[3])):
        raise NotADecoder(f"{path}: cross-attention keys are not [batch, heads, frames, head_dim] with fixed heads")
    states = _dims(inputs[ENCODER_STATES]) if ENCODER_STATES in inputs else []
    width = states[2] if len(states) == 3 and isinstance(states[2], int) else 0
    frames = next((d for d in (key_dims[2], *states[1:2]) if isinstance(d, int) and d > 0), DEFAULT_ENCODER_LENGTH)
    return {
        "cross": tuple(cross),
        "cross_heads": int(key_dims[1]),
        "encoder_states": ENCODER_STATES if width else None,
        "encoder_width": width,
        "cache_branch": CACHE_BRANCH if CACHE_BRANCH in inputs else None,
        "encoder_length": int(frames),
    }


def input_shapes(spec: DecoderSpec, seq: int, past: int, batch: int = 1) -> dict[str, list[int]]:
    """Every input's shape for a request of `seq` new tokens after `past` cached ones."""
    shapes = {spec.ids: [batch, seq]}
    if spec.mask:
        shapes[spec.mask] = [batch, past + seq]
    if spec.positions:
        shapes[spec.positions] = [batch, seq]
    for k, v in spec.past:
        shapes[k] = shapes[v] = [batch, spec.kv_heads, past, spec.head_dim]
    for k, v in spec.cross:
        shapes[k] = shapes[v] = [batch, spec.cross_heads, spec.encoder_length, spec.head_dim]
    if spec.encoder_states:
        shapes[spec.encoder_states] = [batch, spec.encoder_length, spec.encoder_width]
    if spec.cache_branch:
        shapes[spec.cache_branch] = [1]
    return shapes


def decoder_inputs(
    model_path: str | os.PathLike[str], seq: int, past: int, seed: int, batch: int = 1
) -> dict[str, np.ndarray]:
    """Seeded inputs of a request: token ids below the vocabulary, a mask of ones over past + seq,
    positions past..past+seq-1, and standard-normal past keys/values (a seq2seq decoder's cross-attention
    ones and encoder output too, and its cached branch taken where there is a past)."""
    spec = decoder_spec(model_path)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {spec.ids: rng.integers(0, spec.vocab, (batch, seq), dtype=np.int64)}
    if spec.mask:
        feeds[spec.mask] = np.ones((batch, past + seq), np.int64)
    if spec.positions:
        feeds[spec.positions] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
    shapes = input_shapes(spec, seq, past, batch)
    floats = [n for kv in (*spec.past, *spec.cross) for n in kv]
    if spec.encoder_states:
        floats.append(spec.encoder_states)
    for name in floats:
        feeds[name] = rng.standard_normal(shapes[name]).astype(np.float32)
    if spec.cache_branch:  # a merged decoder's cached branch once there is a past (its first step: the other)
        feeds[spec.cache_branch] = np.array([past > 0])
    return feeds


def generate(session: Any, spec: DecoderSpec, prompt: np.ndarray, steps: int) -> np.ndarray:
    """Greedy tokens after `prompt` ([batch, n] int64): one prefill from an empty cache, then `steps`
    - 1 decode steps of one token each, feeding present.* back as past. `session` is any
    onnxruntime.InferenceSession of the model (stock or with a plugin); a decoder-only one (a seq2seq
    decoder's steps need its encoder's output)."""
    if spec.cross:
        raise ValueError("generate runs a decoder-only model; a seq2seq decoder needs its encoder's keys and values")
    cache = empty_cache(spec, prompt.shape[0])
    ids, past, out = prompt, 0, []
    for _ in range(steps):
        results = run_step(session, spec, ids, cache, past)
        past += ids.shape[1]
        cache = next_cache(spec, results)
        ids = results[spec.logits][:, -1:, :].argmax(-1).astype(np.int64)
        out.append(ids)
    return np.concatenate(out, axis=1)


def empty_cache(spec: DecoderSpec, batch: int) -> dict[str, np.ndarray]:
    """Every past key/value of no token (a prefill's)."""
    return {name: np.zeros((batch, spec.kv_heads, 0, spec.head_dim), np.float32) for kv in spec.past for name in kv}


def step_feeds(spec: DecoderSpec, ids: np.ndarray, cache: dict[str, np.ndarray], past: int) -> dict[str, np.ndarray]:
    """One step's feeds: the new token `ids` ([batch, n]) after `past` cached ones, a mask of ones over
    them all, their positions, and the cache as past."""
    batch, seq = ids.shape
    feeds = {spec.ids: ids, **cache}
    if spec.mask:
        feeds[spec.mask] = np.ones((batch, past + seq), np.int64)
    if spec.positions:
        feeds[spec.positions] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
    return feeds


def run_step(
    session: Any, spec: DecoderSpec, ids: np.ndarray, cache: dict[str, np.ndarray], past: int
) -> dict[str, np.ndarray]:
    """One step's outputs by name (`step_feeds`)."""
    outputs = session.run(None, step_feeds(spec, ids, cache, past))
    return dict(zip([o.name for o in session.get_outputs()], outputs))


def next_cache(spec: DecoderSpec, results: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The step's present keys/values as the next step's past."""
    return {p: results[q] for (pk, pv), (qk, qv) in zip(spec.past, spec.present) for p, q in ((pk, qk), (pv, qv))}
