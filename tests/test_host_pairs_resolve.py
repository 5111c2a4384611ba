"""benchmarks/host_pairs.py --defaults --resolve-rounds: a verdict the first rounds leave unresolved is timed on,
looking again at twice the rounds, each look's interval at 95% split over the looks (Bonferroni)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from hexfuse_onnx import mode_cache, runtime
from hexfuse_onnx.tools.bench import Config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import host_pairs  # noqa: E402


def test_looks_double_from_the_first_rounds_up_to_the_most() -> None:
    assert host_pairs.look_rounds(30, 0) == [30] and host_pairs.look_rounds(30, 30) == [30]
    assert host_pairs.look_rounds(30, 240) == [30, 60, 120, 240]
    assert host_pairs.look_rounds(30, 100) == [30, 60, 100]
    assert host_pairs.interval_level([30]) == pytest.approx(0.95)
    assert host_pairs.interval_level([30, 60, 120, 240]) == pytest.approx(0.9875)


def _config(label: str, ratios: list[float]) -> Config:
    return Config(label, None, samples=[100.0 * r for r in ratios])


def test_a_session_is_judged_against_the_best_mode_or_by_construction() -> None:
    best = _config("ort-seq", [1.0] * 12)
    close, slow = _config("s", [0.99, 1.0, 1.01] * 4), _config("s", [1.1, 1.2, 1.15] * 4)
    wide = _config("s", [0.9, 1.1, 1.0, 1.2] * 3)
    assert host_pairs.judge(close, best, "ort-default", None, 1.02, 0.95).verdict == "met"
    assert host_pairs.judge(slow, best, "ort-default", None, 1.02, 0.95).verdict == "NOT met"
    assert host_pairs.judge(wide, best, "ort-default", None, 1.02, 0.95).verdict == "unresolved"
    same = host_pairs.judge(slow, best, "ort-seq", None, 1.02, 0.95)  # the original's graph in the best mode
    assert same.by_construction and same.verdict == "met" and same.ratio is not None and same.ratio[0] > 1.1
    other_graph = host_pairs.judge(slow, best, "ort-seq", "a Transpose more", 1.02, 0.95)
    assert not other_graph.by_construction and other_graph.verdict == "NOT met"
    assert host_pairs.judge(_config("s", []), best, "ort-seq", None, 1.02, 0.95).verdict == "not timed"


@pytest.mark.slow
def test_a_run_with_looks_stops_at_a_look_where_no_verdict_is_unresolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mlp_chain end to end (rewrite, tune, timing: about a minute): the rounds end at a look, before the
    last only where both verdicts are resolved, and the JSON says at which level."""
    for name in (mode_cache.ENV_CACHE, runtime.ENV_TRACE):  # main sets or drops them: restored after
        monkeypatch.setenv(name, str(tmp_path / "unused"))
    out = tmp_path / "run.json"
    argv = ["--defaults", "--models", "mlp_chain", "--defaults-rounds", "8", "--resolve-rounds", "32"]
    argv += ["--tune-runs", "2", "--tune-rounds", "2", "--budget", "5", "--resolve-budget", "60", "--json", str(out)]
    assert host_pairs.main(argv) == 0
    row = json.loads(out.read_text())["defaults"][0]
    assert row["looks"] == [8, 16, 32] and row["interval_level"] == pytest.approx(1 - 0.05 / 3)
    assert row["rounds"] in row["looks"]
    both = [row["defaults_over_best_ort"], row["tuned_defaults_over_best_ort"]]
    constructed = row["same_graph_and_mode_as_best"]
    unresolved = [
        not constructed[label] and r[1] <= 1.02 < r[2]
        for label, r in zip(("hexfuse defaults", "hexfuse tuned defaults"), both, strict=True)
    ]
    assert row["rounds"] == 32 or not any(unresolved)
    explored = row["configs"]["hexfuse defaults"]["explored"]  # the calls it chose by, for choice_replay
    medians = {mode: float(np.median(calls)) for mode, calls in explored["samples_us"].items()}
    assert medians == pytest.approx(explored["median_us"], rel=1e-4)
    by_median = row["by_warm_median"]  # each visit's median warm call, beside the verdicts' means
    assert by_median["best_ort"] in row["configs"] and len(by_median["hexfuse defaults"]) == 3
    timed = [c for c in row["configs"].values() if c["samples_us"]]  # every record has samples_us, empty if not timed
    assert timed and all(len(c["visit_medians_us"]) == len(c["samples_us"]) for c in timed)


def test_a_verdict_met_by_construction_ends_the_timing_at_the_first_look_only() -> None:
    best = _config("ort-seq", [1.0] * 12)
    wide = host_pairs.judge(_config("s", [0.9, 1.1, 1.0, 1.2] * 3), best, "ort-seq", None, 1.02, 0.95)
    close = host_pairs.judge(_config("s", [0.99, 1.0, 1.01] * 4), best, "ort-default", None, 1.02, 0.95)
    slow = host_pairs.judge(_config("s", [1.1, 1.2, 1.15] * 4), best, "ort-default", None, 1.02, 0.95)
    assert wide.by_construction and wide.verdict == "met"  # its interval alone: unresolved
    assert host_pairs.settles([wide, close], first_look=True)
    assert not host_pairs.settles([wide, close], first_look=False)  # a later look: the best mode may have moved
    assert host_pairs.settles([close, slow], first_look=False)
