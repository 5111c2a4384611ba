"""What this host's ONNX Runtime computes otherwise than the CPUs the kernel's ORT mirrors were checked on.

On x86 without VNNI, MLAS saturates uint8 x int8 products (exact_products.ort_saturates): a model ORT runs
through its fused QLinearConv/QGemm is then off by whole steps against its own ops as written (centerface_qdq
here: 0.11 relative). Without AVX-512 its float kernels (sgemm, exp sums) add in other orders than the
ones some host kernels mirror. A test whose oracle is such an ORT result is expected to fail on such a host
(`xfail_on`), strictly: once fixed, it fails until the mark goes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hexfuse_onnx.exact_products import ort_saturates


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((x for x in text.splitlines() if x.startswith("flags")), "")
    return set(line.partition(":")[2].split())


ORT_SATURATES = ort_saturates()
MLAS_AVX512F = "avx512f" in _cpu_flags()


def xfail_on(condition: bool, why: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(condition, reason=f"this host's ONNX Runtime: {why}", strict=True)


SATURATING = "uint8 x int8 products saturate (no VNNI): the reference ORT result is off"
OTHER_ORDERS = "saturating products and/or non-AVX-512 MLAS sum orders (not yet isolated)"
