"""hexfuse-onnx: horizontal fusion of ONNX models for Qualcomm Hexagon NPUs."""

from __future__ import annotations

__version__ = "0.1.0"


def __getattr__(name: str):
    """`hexfuse_onnx.InferenceSession`, `session_options`, `library_path` load the runtime lazily."""
    if name in ("InferenceSession", "session_options", "library_path"):
        from . import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'hexfuse_onnx' has no attribute '{name}'")
