"""benchmarks/ort_par_regimes.py: ORT's modes timed on a real session in four regimes of calls."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import ort_par_regimes  # noqa: E402

from hexfuse_onnx.ort_modes import MODES  # noqa: E402

REGIMES = ("back-to-back", "rested", "loaded", "loaded, rested")


def test_every_regime_times_every_mode_against_orts_defaults(capsys):
    assert ort_par_regimes.main(["two_branch", "--blocks", "2", "--calls", "4", "--rest-ms", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line[: line.index("ort-default")].split(maxsplit=1)[1].strip() for line in lines] == list(REGIMES)
    for line in lines:
        assert "ort-default" in line and "(1.00x," in line and "ort-seq" in line and "ort-par" in line


def test_explorations_report_the_mode_chosen_and_each_modes_median_and_mean(capsys, ort_mode_cache):
    args = ["gpt_decode_step", "--blocks", "2", "--calls", "2", "--rest-ms", "0.2", "--explorations", "1"]
    assert ort_par_regimes.main(args) == 0
    assert os.environ["HEXFUSE_ORT_MODE_CACHE"] == str(ort_mode_cache)  # each choice's own cache, then back
    chosen = [line.split("chose ", 1)[1] for line in capsys.readouterr().out.splitlines() if " chose " in line]
    assert len(chosen) == len(REGIMES)
    for line in chosen:
        mode, figures = line.split(" ", 1)
        assert mode in MODES and "ort-default " in figures and "ort-par " in figures  # its graph: concurrent work


def test_modes_must_start_with_orts_defaults(capsys):
    with pytest.raises(SystemExit) as exc:
        ort_par_regimes.main(["two_branch", "--modes", "ort-seq,ort-default"])
    assert exc.value.code == 2 and "ort-default first" in capsys.readouterr().err
