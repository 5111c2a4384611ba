"""Every vector kernel does its arithmetic in each of its copies. On x86-64 Linux a vector kernel
(HFX_VECTOR_KERNEL, dsp/src/ops/kernels.h) is compiled for x86-64-v3 and for the baseline, and a helper
marked HFX_KERNEL_HELPER is inlined into both; a helper the compiler leaves out of line is compiled once,
for the baseline, and its fused multiply-adds are libm calls in every copy: ops25's Softmax helper ran
two_branch's pair at 18 ms a call instead of 0.34. Read from the built plugin's machine code: which
functions call libm's fmaf."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from collections import Counter

import pytest

from hexfuse_onnx import runtime

# Functions that may call libm's fmaf from their one, baseline, copy, and why.
BASELINE_ONLY = {
    "tile_plain": "the GEMM's plain tile, run only where HEXFUSE_SGEMM_ISA=plain asks for it (the tests)",
    "qbinary_scalar": "QAdd/QMul's scalar path: the near-tie elements and the tail of a row, a few a row",
}


def fmaf_callers(library: str, objdump: str) -> Counter[str]:
    """Function name -> its calls of fmaf through the PLT."""
    code = subprocess.run([objdump, "-d", "--no-show-raw-insn", library], capture_output=True, text=True, check=True)
    callers: Counter[str] = Counter()
    function = ""
    for line in code.stdout.splitlines():
        if m := re.match(r"^[0-9a-f]+ <(.+)>:$", line):
            function = m.group(1)
        elif re.search(r"call.*<fmaf@plt>", line):
            callers[function] += 1
    return callers


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="x86-64 Linux copies")
def test_only_baseline_copies_call_libms_fmaf():
    objdump = shutil.which("objdump") or shutil.which("llvm-objdump-19")
    if objdump is None:
        pytest.skip("no objdump")
    callers = fmaf_callers(str(runtime.library_path()), objdump)
    assert any(f.endswith(".default") for f in callers), callers  # the baseline copies are there to see
    out_of_line = {
        f: n for f, n in callers.items() if not f.endswith(".default") and f.split(".")[0] not in BASELINE_ONLY
    }
    assert not out_of_line, f"helpers compiled for the baseline only (mark them HFX_KERNEL_HELPER): {out_of_line}"
