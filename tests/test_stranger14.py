"""What a fourteenth stranger hit with the models of models/README.md's "A fourteenth stranger's
models": the real models where they are cached (`python -m models real fetch NAME`; skipped when
not), and the zoo's listing of a real speech model."""

from __future__ import annotations

from pathlib import Path

from hexfuse_onnx.tools.zoo import list_models


def test_zoo_says_a_real_speech_model_is_not_fetched_when_it_is_not(tmp_path: Path) -> None:
    # kind "speech" is shared by the committed exports and real models: only the exports are committed
    entries = {m.name: m for m in list_models(tmp_path)}  # an empty cache
    for name in ("silero_vad", "moonshine_tiny_encoder"):
        assert entries[name].status == f"not fetched: python -m models real fetch {name}"
    assert entries["whisper_encoder"].status == "ready (committed in models/exported)"
