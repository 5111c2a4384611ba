"""`pip wheel .` builds the native libraries into a platform wheel. It builds from a copy of the
tree: a wheel build writes hexfuse_onnx/_lib/ with libraries linked against pip's temporary build
environment, which must not replace the ones the other tests load."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what a checkout has beyond its sources: VCS data, build output, caches, the built libraries
NOT_SOURCES = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*cache", ".hypothesis", "_lib", "target", "third_party"
)


@pytest.mark.slow
def test_wheel_carries_the_plugin_and_the_host_kernel(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCES, symlinks=True)
    lib_before = {p.name: p.stat().st_mtime_ns for p in (ROOT / "hexfuse_onnx" / "_lib").glob("*.so")}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "-q", "-w", str(tmp_path / "dist")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("hexfuse_onnx-*.whl")
    assert "linux_x86_64" in wheel.name  # native: not py3-none-any
    names = zipfile.ZipFile(wheel).namelist()
    assert "hexfuse_onnx/_lib/libhexfuse_ort.so" in names
    assert "hexfuse_onnx/_lib/libhexfuse_host.so" in names
    assert {"hexfuse_onnx/targets/host.json", "hexfuse_onnx/targets/hexagon-v73.json"} <= set(names)
    assert "hexfuse_onnx/_lib/libhexfuse_rpc_loopback.so" not in names  # a test stand-in
    assert "hexfuse_onnx/cli.py" in names
    lib_after = {p.name: p.stat().st_mtime_ns for p in (ROOT / "hexfuse_onnx" / "_lib").glob("*.so")}
    assert lib_after == lib_before, "the wheel build wrote into the source tree's hexfuse_onnx/_lib"
