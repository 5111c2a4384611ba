"""The QNN EP (onnxruntime-qnn, HTP backend emulated on x86) for tests: register it or skip
saying exactly why, and tell which nodes each execution provider ran."""
from __future__ import annotations

import json
from pathlib import Path

import onnxruntime as ort
import pytest

QNN_EP = "QNNExecutionProvider"
# The emulated HTP needs a SoC model, or graph finalize fails with MEM_ALLOC: SM8550 (Hexagon v73).
QNN_OPTIONS = {"htp_arch": "73", "soc_model": "43"}


def qnn_devices_or_skip() -> tuple[list, dict[str, str], str]:
    """(QNN EP devices, provider options with the HTP backend, onnxruntime-qnn version), or a skip."""
    try:
        import onnxruntime_qnn
    except ImportError as e:
        pytest.skip(f"onnxruntime-qnn is not installed (`pip install onnxruntime-qnn`): {e}")
    if not any(d.ep_name == QNN_EP for d in ort.get_ep_devices()):
        try:
            ort.register_execution_provider_library(QNN_EP, onnxruntime_qnn.get_library_path())
        except Exception as e:  # noqa: BLE001 - the reason is the message
            pytest.skip(f"onnxruntime-qnn {onnxruntime_qnn.__version__}: the QNN EP library does not register: {e}")
    devices = [d for d in ort.get_ep_devices() if d.ep_name == QNN_EP]
    if not devices:
        pytest.skip(f"onnxruntime-qnn {onnxruntime_qnn.__version__}: the QNN EP lists no device")
    options = {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), **QNN_OPTIONS}
    return devices, options, onnxruntime_qnn.__version__


def nodes_by_provider(session: ort.InferenceSession) -> dict[str, set[str]]:
    """Op names each execution provider ran, from the session's profile (profiling must be on)."""
    path = Path(session.end_profiling())
    trace = json.loads(path.read_text())
    path.unlink()
    by: dict[str, set[str]] = {}
    for e in trace:
        args = e.get("args", {})
        if e.get("cat") == "Node" and "provider" in args:
            by.setdefault(args["provider"], set()).add(args.get("op_name", ""))
    return by
