"""The QNN execution provider (onnxruntime-qnn, HTP backend; emulated on x86): a baseline for what
Qualcomm's own stack does with a graph. On x86 the HTP runs in emulation, so its times follow the
host, not a device."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime as ort

from ..errors import HexfuseError

QNN_EP = "QNNExecutionProvider"
# The emulated HTP needs a SoC model, or graph finalize fails with MEM_ALLOC: SM8550 (Hexagon v73).
QNN_OPTIONS = {"htp_arch": "73", "soc_model": "43"}


class QnnUnavailable(HexfuseError):
    """onnxruntime-qnn is missing, or its EP does not register or lists no device."""


def devices() -> tuple[list, dict[str, str], str]:
    """(QNN EP devices, provider options with the HTP backend, onnxruntime-qnn version)."""
    try:
        import onnxruntime_qnn
    except ImportError as e:
        raise QnnUnavailable(f"onnxruntime-qnn is not installed (`pip install onnxruntime-qnn`): {e}") from None
    if not any(d.ep_name == QNN_EP for d in ort.get_ep_devices()):
        try:
            ort.register_execution_provider_library(QNN_EP, onnxruntime_qnn.get_library_path())
        except Exception as e:  # noqa: BLE001 - the reason is the message
            raise QnnUnavailable(
                f"onnxruntime-qnn {onnxruntime_qnn.__version__}: the QNN EP library does not register: {e}"
            ) from None
    found = [d for d in ort.get_ep_devices() if d.ep_name == QNN_EP]
    if not found:
        raise QnnUnavailable(f"onnxruntime-qnn {onnxruntime_qnn.__version__}: the QNN EP lists no device")
    options = {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), **QNN_OPTIONS}
    return found, options, onnxruntime_qnn.__version__


def session_options(so: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """SessionOptions with the QNN EP (HTP) first; ORT's CPU EP runs what QNN does not take."""
    found, options, _ = devices()
    so = so or ort.SessionOptions()
    so.add_provider_for_devices(found, options)
    return so


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
