"""hexfuse-onnx: horizontal fusion of ONNX models for Qualcomm Hexagon NPUs."""
from __future__ import annotations

__version__ = "0.1.0"
