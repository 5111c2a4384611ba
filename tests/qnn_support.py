"""The QNN EP for tests: hexfuse_onnx.tools.qnn, or a skip that says exactly why."""

from __future__ import annotations

import pytest

from hexfuse_onnx.tools.qnn import QNN_EP, QNN_OPTIONS, QnnUnavailable, devices, nodes_by_provider

__all__ = ["QNN_EP", "QNN_OPTIONS", "nodes_by_provider", "qnn_devices_or_skip"]


def qnn_devices_or_skip() -> tuple[list, dict[str, str], str]:
    """(QNN EP devices, provider options with the HTP backend, onnxruntime-qnn version), or a skip."""
    try:
        return devices()
    except QnnUnavailable as e:
        pytest.skip(e.message)
