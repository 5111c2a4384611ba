"""The real models for tests (models/real.py): a cached one's path, or a skip that says how to fetch it."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import real


def cached_or_skip(name: str) -> Path:
    """The cached model's .onnx path, or a skip naming the command that fetches it."""
    path = real.cached_path(name)
    if path is None:
        pytest.skip(f"{name} is not cached (python -m models real fetch {name})")
    return path
