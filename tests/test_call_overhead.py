"""Selection counts the kernel call: a pair is chosen only when serial - (fused + call) reaches
min_gain of serial, so its saving beats the target's per-call overhead; the table shows the call.
These tests run at the targets' own call overhead (conftest.py sets it to 0 for the rest)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cli_support import run_cli

from hexfuse_onnx import pipeline
from hexfuse_onnx.costmodel import CALL_OVERHEAD_ENV, HEXAGON_V73, HOST, Param, get_target
from hexfuse_onnx.select import select


@pytest.fixture(autouse=True)
def targets_own_call_overhead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CALL_OVERHEAD_ENV, raising=False)


def with_call(us: float):
    return replace(HOST, call_overhead_s=Param(us * 1e-6, "s", "test"))


def test_a_pair_is_chosen_only_while_its_saving_beats_the_call(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "mha_encoder.onnx", target="host")
    (pair,) = a.pairs
    saved_us = (pair.prediction.serial - pair.prediction.fused) * 1e6
    assert pair.prediction.call == HOST.call_overhead_s.value
    assert pair.saved == pytest.approx(pair.prediction.serial - pair.prediction.fused - pair.prediction.call)
    below, above = with_call(saved_us * 0.9), with_call(saved_us * 1.1)
    kept, _ = select(a.graph, a.profile, a.candidates, below, min_gain=0.0)
    assert len(kept) == 1 and kept[0].saved > 0
    lost, rejected = select(a.graph, a.profile, a.candidates, above, min_gain=0.0)
    assert lost == [] and rejected[0].reason.startswith("saving below the call overhead:")
    assert f"a call costs {saved_us * 1.1:.1f} us" in rejected[0].reason


def test_min_gain_is_measured_after_the_call(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "mha_encoder.onnx", target="host")
    p = a.pairs[0].prediction
    tasks_only_gain = 1 - p.fused / p.serial
    call_us = (p.serial - p.fused) * 1e6 / 2  # the call eats half the saving
    pairs, rejected = select(a.graph, a.profile, a.candidates, with_call(call_us), min_gain=tasks_only_gain * 0.75)
    assert pairs == [] and rejected[0].reason.startswith("predicted gain below --min-gain")


@pytest.mark.parametrize("target", ["hexagon-v73", "host"])
def test_no_zoo_pair_saves_less_than_its_call(zoo_dir: Path, target: str) -> None:
    call = get_target(target).call_overhead_s.value
    assert call > 0
    for path in sorted(zoo_dir.glob("*.onnx")):
        a = pipeline.analyse(path, target=target)
        for pair in a.pairs:
            assert pair.prediction.serial - pair.prediction.fused >= call, (path.name, pair.candidate.note)
        for r in a.rejected:
            if r.reason.startswith("saving below the call overhead"):
                assert "a call costs" in r.reason


def test_hexagon_call_rejects_the_zoos_microsecond_pairs(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "two_branch.onnx")  # default target: hexagon-v73, 100 us a call
    assert HEXAGON_V73.call_overhead_s.value == pytest.approx(100e-6)
    assert a.pairs == [] and a.rejected[0].reason.startswith("saving below the call overhead")


def test_the_table_shows_the_call(zoo_dir: Path) -> None:
    proc = run_cli("inspect", zoo_dir / "mha_encoder.onnx", "--target", "host")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("#"))
    assert "call us" in header.split("  ") or "call us" in header
    row = next(line for line in proc.stdout.splitlines() if line.startswith("0 "))
    assert f"{HOST.call_overhead_s.value * 1e6:.1f}" in row.split()


def test_call_overhead_override_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CALL_OVERHEAD_ENV, "250")
    assert get_target("host").call_overhead_s.value == pytest.approx(250e-6)
    monkeypatch.setenv(CALL_OVERHEAD_ENV, "fast")
    with pytest.raises(ValueError, match=CALL_OVERHEAD_ENV):
        get_target("host")
