"""Greedy generation with the rewritten KV-cache decoders (issue 11). The first step has an empty
cache: the past inputs are zero-size (past length 0), so the fused nodes must run on empty tensors
from the first step on, with the FusedHexPair plugin (host backend) and on stock ONNX Runtime, and
give the original's tokens and logits at every step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hexfuse_onnx import pipeline, runtime
from hexfuse_onnx.tools.zoo import plugin_rtol
from hexfuse_onnx.verify import DEFAULT_RTOL, relative_error, session
from models.exported import MODELS, DecoderSpec, decoder_spec, generate

DECODERS = ["gpt2_torchscript", "llama_torchscript", "gpt2_dynamo", "llama_dynamo"]
PROMPT = np.array([[5, 17, 42, 7, 99], [1, 2, 3, 4, 5]], np.int64)
STEPS = 6


class LogitsRecorder:
    """A session that keeps the logits of every run (`generate` returns the tokens only)."""

    def __init__(self, inner: Any, logits: str) -> None:
        self.inner, self.logits = inner, logits
        self.steps: list[np.ndarray] = []

    def get_outputs(self) -> Any:
        return self.inner.get_outputs()

    def run(self, names: list[str] | None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        out = self.inner.run(names, feeds)
        self.steps.append(out[[o.name for o in self.get_outputs()].index(self.logits)])
        return out


def greedy(inner: Any, spec: DecoderSpec) -> tuple[np.ndarray, list[np.ndarray]]:
    """Tokens and per-step logits of `generate` from an empty cache."""
    recorder = LogitsRecorder(inner, spec.logits)
    return generate(recorder, spec, PROMPT, STEPS), recorder.steps


@pytest.fixture(scope="module", params=DECODERS)
def rewritten(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, pipeline.RewriteResult]:
    """A decoder rewritten without --shape (its dims stay symbolic)."""
    name = request.param
    result = pipeline.rewrite(MODELS[name].path, tmp_path_factory.mktemp(name) / "fused.onnx", target="host")
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    return name, result


@pytest.mark.slow
def test_the_rewrite_was_verified_with_an_empty_past(rewritten: tuple[str, pipeline.RewriteResult]) -> None:
    name, result = rewritten
    spec = decoder_spec(MODELS[name].path)
    assert result.comparison is not None
    empty = f"{spec.past[0][0]}=1x{spec.kv_heads}x0x{spec.head_dim}"
    assert any(empty in label for label in result.comparison.shapes), result.comparison.shapes


@pytest.mark.slow
@pytest.mark.parametrize("with_plugin", [True, False], ids=["plugin", "stock"])
def test_generation_from_an_empty_cache_matches_the_original(
    rewritten: tuple[str, pipeline.RewriteResult], with_plugin: bool
) -> None:
    name, result = rewritten
    fused = result.output
    assert fused is not None
    spec = decoder_spec(MODELS[name].path)
    want_tokens, want_logits = greedy(session(MODELS[name].path), spec)
    inner = runtime.InferenceSession(fused, backend="host") if with_plugin else session(fused)
    tokens, logits = greedy(inner, spec)
    np.testing.assert_array_equal(tokens, want_tokens)
    errors = [relative_error(w, g) for w, g in zip(want_logits, logits)]
    assert max(errors) <= (plugin_rtol(name) if with_plugin else DEFAULT_RTOL), errors
