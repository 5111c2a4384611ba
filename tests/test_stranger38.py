"""What a stranger of session 38 hit serving speech models: optimum's merged decoders as a hybrid batch
(Moonshine's, a tiny Whisper's). Each test names the finding it keeps fixed; the merged decoder's pairs
are in test_hybrid.py."""

from __future__ import annotations

from pathlib import Path

from cli_support import error_line, listing, run_cli
from real_support import cached_or_skip

from hexfuse_onnx import hybrid
from hexfuse_onnx.errors import EXIT_BAD_MODEL


def test_requests_longer_than_the_decoders_positions_hear_which_flags_set_them(tmp_path: Path) -> None:
    """The hybrid's defaults (a 64-token chunk after 16, a decode after 128) exceed the tiny Whisper's 64
    positions: ORT's Gather message alone left the stranger guessing."""
    from models.exported import SPEECH

    out = tmp_path / "h.onnx"
    proc = run_cli("colocate", "--hybrid", SPEECH["whisper_decoder_merged"].path, "-o", out, "--target", "host", "-q")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    line = error_line(proc)
    assert "fails on the --inputs" in line and "Gather" in line
    assert "the requests take up to 129 positions: a decoder made for fewer needs smaller --prefill" in line
    assert listing(tmp_path) == []


def test_a_frozen_hybrid_says_how_far_orts_optimisations_move_it(tmp_path: Path) -> None:
    """Moonshine's merged decoder (dynamically quantised) as a hybrid with --prefill-past 0 matched its source
    op for op and printed "worst relative error 0", while on ORT's defaults its prefill logits were 3.5% of
    their scale from the decoder's: the fixed shapes let ORT fold the attention scale into FusedMatMul, and
    DynamicQuantizeLinear makes ulps steps. The line now says so, beside how far ORT's optimisations move
    the decoder's own outputs (0.3 of their scale on these inputs)."""
    path = cached_or_skip("moonshine_tiny_decoder")
    requests = hybrid.Requests(prefill=16, prefill_past=0, past=32)
    said: list[str] = []
    result = hybrid.hybrid(path, tmp_path / "h.onnx", requests, target="host", min_gain=1e9, progress=said.append)
    how = result.compared_how
    assert any(how in line for line in said)  # the progress names the user's file too
    assert how.startswith(" op for op (ORT's graph optimisations off); with them on, the fixed shapes let stock ORT")
    assert f"differs from {path} (prefill request's branch)'s own output 'logits' by up to" in how
    assert "of its scale)" in how
    assert "ORT's optimisations move the sources' own outputs by up to" in how
