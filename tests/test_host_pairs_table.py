"""benchmarks/host_pairs_table.py: the drop-in table and totals made from a host_pairs --defaults JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import host_pairs_table  # noqa: E402


def _row(model: str, ratio: list[float], tuned: list[float], met: bool, same: bool, kept: list[str]) -> dict:
    chosen = {"ort_mode_chosen": "ort-default", "warm_up_rounds": 12}
    return {
        "model": model,
        "pairs": 2,
        "best_ort": "ort-seq-2t",
        "configs": {"ort-seq-2t": {"median_us": 1234.4}, "hexfuse defaults": chosen, "hexfuse tuned defaults": {}},
        "defaults_over_best_ort": ratio,
        "tuned_defaults_over_best_ort": tuned,
        "met": met,
        "tuned_met": met,
        "same_graph_and_mode_as_best": {"hexfuse defaults": same, "hexfuse tuned defaults": False},
        "tuned": {"kept": kept, "ort_mode": {"mode": "ort-default"}},
        "aa_twin": {"ratio": [1.01, 0.99, 1.03]},
        "cpu_use": {"other_cpus": 0.02},
        "wall_s": 81.2,
        "commit": "abc1234",
    }


def test_verdicts_and_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        _row("same", [1.03, 0.97, 1.09], [1.0, 0.99, 1.01], True, True, []),
        _row("resolved", [0.99, 0.98, 1.00], [0.95, 0.93, 0.99], True, False, ["pair6"]),
        _row("slow", [1.05, 1.03, 1.08], [1.01, 1.005, 1.02], False, False, ["pair1"]),
        {"model": "none", "skipped": "no candidate pair found"},
    ]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"settings": {"budget": 120.0}, "complete": False, "defaults": rows}))
    assert host_pairs_table.main([str(run)]) == 0
    out = capsys.readouterr().out
    same = "| same | 2 | ort-seq-2t, 1234 us | ort-default (12) | 1.030 [0.970, 1.090] met (same graph, best mode) |"
    assert same in out
    assert "| slow |" in out and "1.050 [1.030, 1.080] NOT met" in out and "1.010 [1.005, 1.020] NOT met" in out
    assert "| none | - | no pair: no candidate pair found |" in out
    assert "untuned: 1 NOT met, 1 met, 1 met (same graph, best mode)" in out
    assert "pairs kept by tune: resolved (pair6), slow (pair1)" in out
    assert "timed on: abc1234 (3), not recorded (1)" in out
    assert "unresolved or NOT met (for host_pairs --models, with more rounds): slow\n" in out


def test_a_file_that_is_not_a_run_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "log.json").write_text("host_pairs: ...")
    assert host_pairs_table.main([str(tmp_path / "log.json")]) == 2
    assert "log.json: not a host_pairs --defaults JSON" in capsys.readouterr().err


def test_a_row_timed_with_several_looks_gives_its_level_and_rounds() -> None:
    row = _row("two_branch", [0.99, 0.97, 1.01], [1.0, 0.98, 1.01], True, False, [])
    assert "(" not in host_pairs_table.line(row).split("|")[5]  # one look: 95%, as every row before
    row |= {"looks": [30, 60, 120], "interval_level": 1 - 0.05 / 3, "rounds": 60}
    assert host_pairs_table.line(row).split("|")[5].strip() == "0.990 [0.970, 1.010] met (98.33%, 60 rounds)"


def test_a_session_that_changed_its_mode_after_choosing_says_so() -> None:
    """A ChallengedSession's trial of ort-par can change the mode a session runs after its choice was recorded."""
    row = _row("silero_vad_legacy", [0.99, 0.97, 1.01], [1.0, 0.98, 1.01], True, False, [])
    row["configs"]["hexfuse defaults"]["ort_mode_at_end"] = "ort-par"
    row["configs"]["hexfuse tuned defaults"] = {"ort_mode_chosen": "ort-seq", "ort_mode_at_end": "ort-par"}
    cells = host_pairs_table.line(row).split("|")
    assert cells[4].strip() == "ort-default (12), then ort-par"
    assert cells[6].strip() == "0 kept, chose ort-seq at run time, then ort-par (tune's: ort-default)"


def test_by_total_judges_by_the_summed_visits_where_a_third_of_a_modes_visits_stall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gtcrn_stream in session 47's run: ORT's defaults stalled in a share of their visits (their pool thread pinned
    to the CPU the caller was on), the median of per-round ratios ranked them first; their summed visits did not."""
    stalling = [100.0] * 20 + [400.0] * 10  # median 100, sum 6000
    steady = [120.0] * 30  # sum 3600
    row = _row("gtcrn", [0.9, 0.85, 0.95], [1.0, 0.98, 1.01], True, True, [])
    row["configs"] = {
        "ort-default": {"samples_us": stalling, "median_us": 100.0},
        "ort-seq": {"samples_us": steady, "median_us": 120.0},
        "hexfuse defaults": {"samples_us": stalling, "ort_mode_chosen": "ort-default", "warm_up_rounds": 12},
        "hexfuse tuned defaults": {"samples_us": steady, "ort_mode_chosen": "ort-seq"},
    }
    row |= {"best_ort": "ort-default", "interval_level": 0.95}
    row["ort_graph_difference"] = {"hexfuse defaults": None, "hexfuse tuned defaults": None}
    best, judged = host_pairs_table.by_total(row)
    cells = [host_pairs_table.total_cell(*session) for session in judged]
    assert best == "ort-seq"
    assert cells[0].startswith("1.667 [") and cells[0].endswith("NOT met")
    assert cells[1] == "1.000 [1.000, 1.000] met (same graph, best mode)"
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"defaults": [row]}))
    assert host_pairs_table.main([str(run), "--by-total"]) == 0
    out = capsys.readouterr().out
    assert "  gtcrn: best ort-seq; untuned 1.667 [" in out and "untuned: 1 NOT met" in out.split("summed")[1]
