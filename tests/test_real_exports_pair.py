"""Real exports whose ops once cut every co-located segment (models/README.md, "A third stranger's
models"): two requests of each, at hexagon-v73's own 100 us per call, pair most of their time, and the
plugin's outputs agree with stock ONNX Runtime (--verify plugin). Skipped when the model is not made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_cli

from hexfuse_onnx import costmodel, runtime

PLUGIN_BUILT = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()

# model: (what blocked it, smallest share of the modelled time in pairs, smallest gain); measured on a
# loaded 2-core VM: dtln_stage2 100% / 12.3%, oww_embedding 93% / 17.7%, its u16u8 QDQ 100% / 38.9%.
CASES = {
    "dtln_stage2": ("a Pad of all-zero pads", 0.9, 0.08),
    "oww_embedding": ("LeakyRelu, Max(x, -0.4)", 0.8, 0.12),
    "oww_embedding_qdq_u16u8": ("Max(x, DequantizeLinear of constants)", 0.9, 0.25),
}


def _source(name: str) -> Path:
    from models import quantized, real

    if name in real.MODELS:
        path = real.cached_path(name)
        hint = f"python -m models real fetch {name}"
    else:
        path = quantized.cached_path(name)
        hint = f"python -m models real fetch {quantized.get(name).base} && python -m models quantized build {name}"
    if path is None:
        pytest.skip(f"{name} is not made: {hint}")
    return path


@pytest.mark.skipif(not PLUGIN_BUILT, reason="the FusedHexPair plugin is not built: run `bash custom_ops/build.sh`")
@pytest.mark.parametrize("name", sorted(CASES))
def test_two_requests_pair_most_of_their_time(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _source(name)
    _, coverage, gain = CASES[name]
    monkeypatch.delenv(costmodel.CALL_OVERHEAD_ENV)  # the target's own 100 us per call, as the CLI counts
    report = tmp_path / "r.json"
    args = ("colocate", source, "--requests", "2", "-o", tmp_path / "m.onnx", "--json", report)
    proc = run_cli(*args, "--target", "hexagon-v73", "--verify", "plugin", "-q")
    assert proc.returncode == 0, proc.stderr
    modelled = json.loads(report.read_text())["colocate"]["modelled"]
    assert modelled["coverage"] >= coverage and modelled["gain"] >= gain, modelled
