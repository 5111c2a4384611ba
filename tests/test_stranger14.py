"""What a fourteenth stranger hit with the models of models/README.md's "A fourteenth stranger's
models": the real models where they are cached (`python -m models real fetch NAME`; skipped when
not), and the zoo's listing of a real speech model."""

from __future__ import annotations

from pathlib import Path

import onnx
from real_support import cached_or_skip
from test_subgraphs import if_model

from hexfuse_onnx.pipeline import analyse
from hexfuse_onnx.report import summary
from hexfuse_onnx.tools.zoo import list_models
from models import real


def test_zoo_says_a_real_speech_model_is_not_fetched_when_it_is_not(tmp_path: Path) -> None:
    # kind "speech" is shared by the committed exports and real models: only the exports are committed
    entries = {m.name: m for m in list_models(tmp_path)}  # an empty cache
    for name in ("silero_vad", "moonshine_tiny_encoder"):
        assert entries[name].status == f"not fetched: python -m models real fetch {name}"
    assert entries["whisper_encoder"].status == "ready (committed in models/exported)"


def test_a_graph_that_is_one_if_is_not_called_a_chain(tmp_path: Path) -> None:
    # a merged decoder's main graph is one If; its work lies in the branches, analysed on their own
    path = tmp_path / "one_if.onnx"
    onnx.save(if_model(rows=1, on_mean=True), path)
    a = analyse(path, target="host")
    assert a.branches and not a.candidates
    assert "no independent work" not in summary(a)


def test_merged_decoder_names_no_if_as_not_profiled() -> None:
    # the If's outputs are declared [batch, 8, past_decoder_sequence_length + 1, 36]: unknown at any
    # binding, frozen or not, while both branches are analysed; it was listed with a --freeze-shapes hint
    path = cached_or_skip("moonshine_tiny_decoder")
    a = analyse(path, shapes=real.get("moonshine_tiny_decoder").shapes, target="host")
    assert [b.analysis.graph.nodes and b.branch.attribute for b in a.branches] == ["then_branch", "else_branch"]
    assert list(a.profile.unprofiled) == [0]  # still in the profile (and --json): it is not costed
    text = summary(a)
    assert "not profiled" not in text and "no independent work" not in text
