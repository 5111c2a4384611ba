"""`pip wheel .` builds the native libraries into a platform wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_carries_the_plugin_and_the_host_kernel(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("hexfuse_onnx-*.whl")
    assert "linux_x86_64" in wheel.name  # native: not py3-none-any
    names = zipfile.ZipFile(wheel).namelist()
    assert "hexfuse_onnx/_lib/libhexfuse_ort.so" in names
    assert "hexfuse_onnx/_lib/libhexfuse_host.so" in names
    assert "hexfuse_onnx/cli.py" in names
