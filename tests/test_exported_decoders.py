"""The committed decoder exports (models/exported/): valid ONNX, shape-polymorphic, and a KV cache
that gives the same tokens and logits as recomputing without it, on stock ORT (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from hexfuse_onnx.verify import session
from models.exported import (
    FOLDER,
    MODELS,
    NotADecoder,
    decoder_inputs,
    decoder_spec,
    empty_cache,
    generate,
    step_feeds,
)

NAMES = list(MODELS)
PROMPT = np.array([[7, 100, 3, 250, 42]], np.int64)
STEPS = 8
ATOL = 1e-4


def _run(name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    sess = session(MODELS[name].path)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _request(name: str, ids: np.ndarray, past: dict[str, np.ndarray], past_len: int) -> dict[str, np.ndarray]:
    return step_feeds(decoder_spec(MODELS[name].path), ids, past, past_len)


def _empty_cache(name: str, batch: int) -> dict[str, np.ndarray]:
    return empty_cache(decoder_spec(MODELS[name].path), batch)


@pytest.mark.parametrize("name", NAMES)
def test_file_is_small_valid_and_self_contained(name: str) -> None:
    path = MODELS[name].path
    assert path.stat().st_size < 2_000_000
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path), load_external_data=False)
    assert not [t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]


@pytest.mark.parametrize("name", NAMES)
def test_batch_sequence_and_past_dims_are_symbolic(name: str) -> None:
    spec = decoder_spec(MODELS[name].path)
    graph = onnx.load(str(MODELS[name].path)).graph
    dims = {v.name: v.type.tensor_type.shape.dim for v in graph.input}
    assert dims[spec.ids][0].dim_param and dims[spec.ids][1].dim_param
    for key, value in spec.past:
        assert dims[key][0].dim_param and dims[key][2].dim_param and dims[value][2].dim_param


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("batch", "seq", "past"), [(1, 6, 0), (2, 1, 9), (1, 3, 4)])
def test_runs_at_several_shapes_and_appends_to_the_cache(name: str, batch: int, seq: int, past: int) -> None:
    spec = decoder_spec(MODELS[name].path)
    feeds = decoder_inputs(MODELS[name].path, seq, past, seed=seq + past, batch=batch)
    out = _run(name, feeds)
    assert out[spec.logits].shape == (batch, seq, spec.vocab)
    assert np.isfinite(out[spec.logits]).all()
    for (pk, pv), (qk, qv) in zip(spec.past, spec.present):
        assert out[qk].shape == out[qv].shape == (batch, spec.kv_heads, past + seq, spec.head_dim)
        np.testing.assert_array_equal(out[qk][:, :, :past], feeds[pk])
        np.testing.assert_array_equal(out[qv][:, :, :past], feeds[pv])


@pytest.mark.parametrize("name", NAMES)
def test_prefill_then_decode_equals_one_shot_prefill(name: str) -> None:
    spec = decoder_spec(MODELS[name].path)
    ids = np.array([[7, 100, 3, 250, 42, 9]], np.int64)
    one_shot = _run(name, _request(name, ids, _empty_cache(name, 1), 0))[spec.logits][:, -1]
    prefill = _run(name, _request(name, ids[:, :-1], _empty_cache(name, 1), 0))
    cache = {p: prefill[q] for pair, qair in zip(spec.past, spec.present) for p, q in zip(pair, qair)}
    decoded = _run(name, _request(name, ids[:, -1:], cache, ids.shape[1] - 1))[spec.logits][:, -1]
    np.testing.assert_allclose(decoded, one_shot, rtol=0, atol=ATOL)


def _greedy_without_cache(name: str, prompt: np.ndarray, steps: int) -> np.ndarray:
    spec = decoder_spec(MODELS[name].path)
    ids = prompt
    for _ in range(steps):
        logits = _run(name, _request(name, ids, _empty_cache(name, ids.shape[0]), 0))[spec.logits]
        ids = np.concatenate([ids, logits[:, -1:].argmax(-1)], axis=1)
    return ids[:, prompt.shape[1] :]


@pytest.mark.parametrize("name", NAMES)
def test_greedy_generation_with_cache_matches_recomputing(name: str) -> None:
    tokens = generate(session(MODELS[name].path), decoder_spec(MODELS[name].path), PROMPT, STEPS)
    assert tokens.shape == (1, STEPS)
    assert len(set(tokens[0].tolist())) > 2, "random weights this degenerate would not test the cache"
    np.testing.assert_array_equal(tokens, _greedy_without_cache(name, PROMPT, STEPS))


@pytest.mark.parametrize("name", NAMES)
def test_greedy_tokens_equal_transformers_generate(name: str) -> None:
    """models/export_decoders.py records what transformers' generate gives from the torch model."""
    report = json.loads((FOLDER / "export_report.json").read_text())
    prompt = np.array([report["greedy_prompt"]], np.int64)
    want = report["torch_greedy"][MODELS[name].family]
    tokens = generate(session(MODELS[name].path), decoder_spec(MODELS[name].path), prompt, len(want))
    assert tokens[0].tolist() == want


@pytest.mark.parametrize("family", sorted({m.family for m in MODELS.values()}))
def test_every_export_of_one_family_computes_the_same_logits(family: str) -> None:
    """The exports of one family hold the same weights: the exporters and the hand-written attention
    graphs must agree, at a decode step with a past."""
    names = [n for n, m in MODELS.items() if m.family == family]
    reference = MODELS[names[0]].path
    feeds = decoder_inputs(reference, seq=1, past=6, seed=3)
    want = _run(names[0], feeds)
    for name in names[1:]:
        spec = decoder_spec(MODELS[name].path)
        got = _run(name, {k: v for k, v in feeds.items() if k in _input_names(MODELS[name].path)})
        for out in [spec.logits, *[n for kv in spec.present for n in kv]]:
            np.testing.assert_allclose(got[out], want[out], rtol=0, atol=ATOL, err_msg=f"{name}: {out}")


def _input_names(path: Path) -> set[str]:
    return {v.name for v in onnx.load(str(path), load_external_data=False).graph.input}


def test_decoder_spec_refuses_a_model_without_a_kv_cache(tmp_path: Path) -> None:
    import models

    path = tmp_path / "two_branch.onnx"
    onnx.save(models.build("two_branch"), path)
    with pytest.raises(NotADecoder, match="not a decoder"):
        decoder_spec(path)


def test_zoo_lists_the_decoders_with_shapes_for_their_symbolic_dims() -> None:
    from hexfuse_onnx.tools.zoo import list_models
    from models import nbits

    entries = {m.name: m for m in list_models() if m.kind == "decoder"}
    paths = {**{n: m.path for n, m in MODELS.items()}, **{n: m.path for n, m in nbits.MODELS.items()}}
    assert set(entries) == set(paths)
    for name, entry in entries.items():
        assert entry.available and entry.path == paths[name]
        spec = decoder_spec(entry.path)
        assert entry.shapes[spec.past[0][0]][2] + entry.shapes[spec.ids][1] == entry.shapes[spec.mask][1]
