"""`profile`: a real plugin run's work items as a Chrome trace, a PNG, and busy-time figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import assert_mentions, error_line, listing, run_cli

from hexfuse_onnx.errors import EXIT_USAGE
from hexfuse_onnx.runtime import LIB_DIR, PLUGIN_NAME
from hexfuse_onnx.tools import timeline

ROOT = Path(__file__).resolve().parents[1]
needs_plugin = pytest.mark.skipif(
    not (LIB_DIR / PLUGIN_NAME).is_file(), reason="plugin not built (run `bash custom_ops/build.sh`)"
)


def test_interval_arithmetic() -> None:
    assert timeline._union_ns([(0, 10), (5, 15), (20, 30)]) == 25
    assert timeline._overlap_ns([(0, 10), (20, 30)], [(5, 25)]) == 10
    trace = {
        "node": "n",
        "share_a": 0.5,
        "workers": 2,
        "serialized": 0,
        "trace_events": [
            {"worker": 0, "engine": "matrix", "task": "A", "op": 0, "item": 0, "start_ns": 0, "end_ns": 100},
            {"worker": 1, "engine": "vector", "task": "B", "op": 1, "item": 0, "start_ns": 50, "end_ns": 200},
        ],
    }
    t = timeline.pair_timeline(trace)
    assert (t.wall_ns, t.device_busy_ns, t.matrix_vector_overlap_ns) == (200, 200, 50)
    assert t.fractions()["matrix"] == 0.5


@pytest.mark.slow
@needs_plugin
def test_profile_command_writes_trace_png_and_figures(zoo_dir: Path, tmp_path: Path) -> None:
    out, png = tmp_path / "trace.json", tmp_path / "timeline.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hexfuse_onnx",
            "profile",
            str(zoo_dir / "two_branch.onnx"),
            "-o",
            str(out),
            "--png",
            str(png),
            "--runs",
            "3",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "device busy" in proc.stdout and "hexfuse/pair0" in proc.stdout
    doc = json.loads(out.read_text())
    items = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["task"] for e in items} == {"A", "B"}  # both tasks ran on the kernel
    assert {e["args"]["engine"] for e in items} >= {"matrix", "vector"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_without_matplotlib_names_the_extra(zoo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out, png = tmp_path / "trace.json", tmp_path / "timeline.png"
    proc = run_cli("profile", zoo_dir / "two_branch.onnx", "-o", out, "--png", png, "-q")
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(error_line(proc), "matplotlib", "hexfuse-onnx[timeline]")
    assert listing(tmp_path) == []


@needs_plugin
def test_profile_takes_a_zoo_name(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    proc = run_cli("profile", "two_branch", "-o", tmp_path / "trace.json", "--runs", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "hexfuse/pair0" in proc.stdout and (tmp_path / "trace.json").is_file()
