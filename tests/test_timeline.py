"""`profile`: a real plugin run's work items as a Chrome trace, a PNG, and busy-time figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import assert_mentions, error_line, listing, run_cli

from hexfuse_onnx.errors import EXIT_BAD_MODEL, EXIT_USAGE
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


def _needs_its_own_size(path: Path) -> None:
    """Symbolic [batch, 8, height, width] through a 3x3 stem with no padding (ORT fails at the 1x1
    random inputs would give), then a matrix branch (1x1 Conv) and a vector branch (Sigmoid, Mul)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "w_stem": rng.standard_normal((8, 8, 3, 3)).astype(np.float32),
        "w_point": rng.standard_normal((8, 8, 1, 1)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w_stem"], ["stem"], kernel_shape=[3, 3], name="stem"),
        helper.make_node("Conv", ["stem", "w_point"], ["a"], kernel_shape=[1, 1], name="point"),
        helper.make_node("Sigmoid", ["stem"], ["gate"], name="gate"),
        helper.make_node("Mul", ["stem", "gate"], ["b"], name="swish"),
        helper.make_node("Add", ["a", "b"], ["y"], name="join"),
    ]
    dims = ["batch", 8, "height", "width"]
    graph = helper.make_graph(
        nodes,
        "needs_its_own_size",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, "out_h", "out_w"])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@needs_plugin
def test_profile_runs_a_symbolic_model_at_the_shapes_it_was_analysed_at(tmp_path: Path) -> None:
    """A YOLOv8 export (nudenet) failed in `profile` with exit 70: the plugin ran it at every free
    dim = 1, where its own Concat fails, not at the binding the rewrite recorded."""
    source, fused = tmp_path / "model.onnx", tmp_path / "model.fused.onnx"
    _needs_its_own_size(source)
    assert run_cli("rewrite", source, "-o", fused, "-q").returncode == 0
    proc = run_cli("profile", fused, "-o", tmp_path / "trace.json", "--runs", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "hexfuse/pair0" in proc.stdout


@needs_plugin
def test_profile_names_the_inputs_a_model_fails_on(tmp_path: Path) -> None:
    """Without recorded shapes (the metadata removed), the failing run is one line and exit 3, not 70."""
    source, fused = tmp_path / "model.onnx", tmp_path / "model.fused.onnx"
    _needs_its_own_size(source)
    assert run_cli("rewrite", source, "-o", fused, "-q").returncode == 0
    model = onnx.load(fused)
    kept = [p for p in model.metadata_props if p.key != "hexfuse.bindings"]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.save(model, fused)
    proc = run_cli("profile", fused, "-o", tmp_path / "trace.json", "--runs", "1", "-q")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert_mentions(error_line(proc), "fails on the inputs profile runs it with", "x=1x8x1x1")
    assert not (tmp_path / "trace.json").exists()
