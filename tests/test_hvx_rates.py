"""The hexagon-v73 target's HVX integer rates come from packets counted under qemu-hexagon:
hexfuse_onnx/targets/emulated/hvx-v73.json holds the packets and the rates derived from them, and
`dsp/scripts/hvx_packets.py --arch v73 --json <that file> --target hexfuse_onnx/targets/hexagon-v73.json`
writes both (the command the rates file names)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hexfuse_onnx import costmodel
from hexfuse_onnx.profile import Engine

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "dsp/scripts/hvx_packets.py"
RATES = REPO / "hexfuse_onnx/targets/emulated/hvx-v73.json"
TARGET = REPO / "hexfuse_onnx/targets/hexagon-v73.json"
IMAGE = REPO / "build/hexagon-v73/test_hvx_kernels.elf"


def rates_file() -> dict:
    return json.loads(RATES.read_text(encoding="utf-8"))


def test_the_hvx_integer_rates_are_the_emulated_packets_at_the_modelled_clock() -> None:
    doc, v73 = rates_file(), costmodel.get_target("hexagon-v73")
    assert set(doc["rates"]) == {"vector_int8_ops_per_context", "vector_int16_ops_per_context"}
    assert doc["rates"]["vector_int8_ops_per_context"]["kernel"] == "hvx_qgemm"  # the kernel QMATMUL dispatches to
    for name, r in doc["rates"].items():
        kernel = doc["kernels"][r["kernel"]]
        assert kernel["packets_per_unit"] == pytest.approx(kernel["packets"] / kernel["units"], abs=1e-6)
        expected = r["ops_per_unit"] / kernel["packets_per_unit"] * doc["packets_per_cycle"] * doc["clock_hz"]
        p = getattr(v73, name)
        assert p.value == pytest.approx(expected, rel=1e-12)
        assert p.source.startswith(f"emulated (qemu packets): {r['kernel']}, {kernel['packets']} packets / ")
        assert "(assumption)" in p.source
    assert v73.matrix_int8_ops is not None
    assert v73.matrix_int8_ops.source.startswith("modelled (assumption)")
    assert "no public HMX ISA" in v73.matrix_int8_ops.source
    assert v73.vector_int8_ops_per_context is not None
    assert v73.rate(Engine.VECTOR, 8) == v73.vector_contexts.value * v73.vector_int8_ops_per_context.value


def test_the_int8_op_classes_run_at_their_emulated_kernels_rates() -> None:
    """QADD, QMUL, QMAXPOOL, QLUT groups, ConvInteger, a nearest Resize (QRESIZE) and a Transpose (memory ops) at
    the rates of their HVX kernels (x the modelled contexts); a linear 8-bit Resize and an 8-bit op outside the
    classes at the vrmpy rate, a float Add at the float rate, a float Transpose at the DMA rate."""
    from hexfuse_onnx.profile import NodeProfile

    doc, v73 = rates_file(), costmodel.get_target("hexagon-v73")
    rates = dict(v73.class_rates)
    assert set(doc["class_rates"]) == set(rates) == set(costmodel.INT8_OP_CLASSES.values())
    for name, r in doc["class_rates"].items():
        kernel = doc["kernels"][r["kernel"]]
        per_context = r["ops_per_unit"] / kernel["packets_per_unit"] * doc["packets_per_cycle"] * doc["clock_hz"]
        assert rates[name].value == pytest.approx(per_context * v73.vector_contexts.value, rel=1e-12)
        assert rates[name].source.startswith(f"emulated (qemu packets): {r['kernel']}, {kernel['packets']} packets / ")

    def op(op_type: str, bits: int, engine: Engine = Engine.VECTOR) -> NodeProfile:
        return NodeProfile(0, engine, 1e6, 0, 0, 0, 0, int_bits=bits, op_type=op_type)

    classes = (("Add", "int8 add"), ("Mul", "int8 mul"), ("MaxPool", "int8 maxpool"), ("Tanh", "int8 lut"))
    for op_type, name in (*classes, ("ConvInteger", "int8 conv")):
        assert v73.rate(Engine.VECTOR, 8, costmodel.op_class(op(op_type, 8))) == rates[name].value
    nearest = op("Resize", 8, Engine.MEMORY)
    assert v73.rate(Engine.MEMORY, 8, costmodel.op_class(nearest)) == rates["int8 resize"].value
    transpose = op("Transpose", 8, Engine.MEMORY)
    assert v73.rate(Engine.MEMORY, 8, costmodel.op_class(transpose)) == rates["int8 transpose"].value
    float_transpose = op("Transpose", 0, Engine.MEMORY)  # the "transpose" class, which v73 has no rate for
    assert v73.rate(Engine.MEMORY, 0, costmodel.op_class(float_transpose)) == v73.dma_bytes.value
    assert v73.rate(Engine.VECTOR, 8, costmodel.op_class(op("Resize", 8))) == v73.rate(Engine.VECTOR, 8)
    assert v73.rate(Engine.VECTOR, 8, costmodel.op_class(op("Relu", 8))) == v73.rate(Engine.VECTOR, 8)
    assert v73.rate(Engine.VECTOR, 0, costmodel.op_class(op("Add", 0))) == v73.rate(Engine.VECTOR, 0)
    assert v73.rate(Engine.VECTOR, 16, costmodel.op_class(op("Add", 16))) == v73.rate(Engine.VECTOR, 16)


def test_every_other_hexagon_figure_stays_modelled() -> None:
    grounded = set(rates_file()["rates"])
    for name, p in costmodel.HEXAGON_V73.params().items():
        assert p.source.startswith("emulated (qemu packets)" if name in grounded else "modelled ("), name


def _run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-hexagon") is None, reason="qemu-hexagon is not installed (qemu-user)")
@pytest.mark.skipif(not IMAGE.is_file(), reason=f"{IMAGE} not built: run dsp/scripts/build_hexagon.sh")
def test_a_fresh_measurement_gives_the_committed_rates_and_target_twice(tmp_path: Path) -> None:
    """Packet counts are deterministic: two fresh runs give the committed counts, rates and target."""
    committed, target = rates_file(), json.loads(TARGET.read_text(encoding="utf-8"))
    measured = ("hvx_qgemm", "hvx_imatmul", "hvx_iconv", "hvx_qresize", "hvx_transpose", "hvx_mul_i16")
    kernels = [arg for k in measured for arg in ("--kernel", k)]
    for run in (1, 2):
        out, tgt = tmp_path / f"run{run}.json", tmp_path / f"target{run}.json"
        tgt.write_text(TARGET.read_text(encoding="utf-8"))
        done = _run_script("--arch", "v73", *kernels, "--json", str(out), "--target", str(tgt))
        assert done.returncode == 0, done.stderr
        fresh = json.loads(out.read_text())
        for k in measured:
            assert fresh["kernels"][k] == committed["kernels"][k]
        assert fresh["rates"] == committed["rates"]
        params = json.loads(tgt.read_text())["params"]
        for name in committed["rates"]:
            assert params[name]["value"] == target["params"][name]["value"]


def test_target_without_json_is_refused() -> None:
    done = _run_script("--target", str(TARGET))
    assert done.returncode != 0
    assert "--target needs --json" in done.stderr or "missing" in done.stderr
