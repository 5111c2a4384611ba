"""benchmarks/choice_replay.py: the run-time choice's rule applied again to a host_pairs run's explorations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import choice_replay  # noqa: E402

TIMED_US = {"ort-default": 44.5, "ort-seq": 40.5, "ort-seq-2t": 43.6, "ort-par": 41.1}  # silero_decoder_v5, s38


def _row(model: str, explored_us: dict[str, float], then: str, live: list[str] | None = None) -> dict:
    explored: dict = {"median_us": explored_us, "mean_us": explored_us, "rounds": [explored_us] * 12}
    if live is not None:
        explored["live"] = live
    configs: dict = {m: {"median_us": t} for m, t in TIMED_US.items()}
    configs["hexfuse defaults"] = {"ort_mode_chosen": then, "explored": explored}
    return {"model": model, "configs": configs}


def test_a_changed_choice_is_printed_with_both_modes_timed_over_the_best(tmp_path, capsys):
    """silero_decoder_v5 in session 38: its exploration saw ort-seq 1.9% ahead and kept ORT's defaults; the
    rule now (ort-seq at a lower mean its rounds confirm) takes ort-seq, which the run timed as the best mode."""
    rows = [
        _row("silero", {"ort-default": 47.7, "ort-seq": 46.8, "ort-seq-2t": 48.1}, "ort-default"),
        _row("kept", {"ort-default": 47.7, "ort-seq": 48.8, "ort-seq-2t": 48.1}, "ort-default"),
        {"model": "none", "skipped": "no candidate pair found"},
    ]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"defaults": rows}))
    assert choice_replay.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "silero" in out and "then ort-default 1.099x" in out and "now ort-seq     1.000x" in out
    assert "kept" not in out.splitlines()[0]
    assert "2 choosing sessions; the rule now changes 1 choices: 1 to a faster mode, 0 to a slower one" in out
    assert "over 1.02x the best mode: 2 then, 1 now (timed medians" in out


@pytest.mark.parametrize(("live", "now"), [(None, "ort-seq-2t"), (["ort-default", "ort-seq"], "ort-seq")])
def test_the_modes_left_in_the_rotation_are_read_or_inferred(live, now):
    """Inferred: ORT's defaults, above DROP_RATIO times the best mean, left (the lowest mean chosen);
    recorded: ort-seq-2t left, and ort-seq, faster than the defaults, replaces them."""
    row = _row("dropped", {"ort-default": 200.0, "ort-seq": 60.0, "ort-seq-2t": 50.0}, "ort-seq-2t", live)
    (session,) = choice_replay.replay(row)
    assert session["now"] == now and session["then"] == "ort-seq-2t"


def test_by_total_times_each_mode_by_its_summed_visits(tmp_path, capsys):
    """ORT's defaults stalled in a third of their visits: lowest median, not lowest sum (gtcrn_stream, session 47)."""
    row = _row("gtcrn", {"ort-default": 47.7, "ort-seq": 48.8, "ort-seq-2t": 48.1}, "ort-default")
    visits = {"ort-default": [40.0] * 20 + [160.0] * 10, "ort-seq": [42.0] * 30, "ort-seq-2t": [45.0] * 30}
    visits["ort-par"] = [44.0] * 30
    for mode, samples in visits.items():
        row["configs"][mode]["samples_us"] = samples
    (by_median,) = choice_replay.replay(row)
    (by_total,) = choice_replay.replay(row, by_total=True)
    assert by_median["then_over_best"] == pytest.approx(44.5 / 40.5)  # the recorded medians
    assert by_total["then_over_best"] == pytest.approx(2400.0 / 1260.0)
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"defaults": [row]}))
    assert choice_replay.main([str(run), "--by-total"]) == 0
    assert "over 1.02x the best mode: 1 then, 1 now (timed summed visits" in capsys.readouterr().out
