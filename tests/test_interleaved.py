"""tools/interleaved.py: configurations timed in one process, one visit each per round in a
shuffled order, ratios taken within rounds. What is checked: one figure per configuration and
round from real ORT sessions, the same number of calls per visit for all, the rest ending when the
process is quiet, and the median/interval arithmetic on injected figures. Timings are not asserted."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from hexfuse_onnx import verify
from hexfuse_onnx.tools import interleaved, isolated
from hexfuse_onnx.tools.bench import Config


def test_one_figure_per_configuration_and_round(zoo_dir: Path) -> None:
    model = str(zoo_dir / "gpt_decode_step.onnx")
    configs = [Config(m, isolated.ort_session(model, m)) for m in ("ort-seq", "ort-seq-2t")]
    configs.append(Config("refused", None, check="output differs"))
    feeds = verify.random_inputs(configs[0].session, seed=0)
    seen: list[int] = []
    rests = interleaved.time_interleaved(configs, feeds, rounds=4, seed=1, progress=seen.append)
    assert seen == [1, 2, 3, 4]
    assert [len(c.samples) for c in configs] == [4, 4, 0]
    assert all(x > 0 for c in configs[:2] for x in c.samples)
    assert [len(c.visit_medians) for c in configs] == [4, 4, 0]
    assert set(rests) == {"ort-seq", "ort-seq-2t"}
    assert 1 <= interleaved.calls_per_visit(configs[:2], feeds) <= interleaved.VISIT_CALLS


def test_a_visit_scores_the_mean_of_all_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call after the rest and a call that waited are in the mean (the figure), not in the median of
    the warm calls recorded beside it."""
    monkeypatch.setattr(interleaved, "rest_until_quiet", lambda: 0.0)
    slept = iter([0.05, 0.001, 0.001, 0.03])  # a 50 ms call after the rest, two 1 ms ones, one that waited 30 ms

    class Waits:
        def run(self, *_args: object) -> None:
            time.sleep(next(slept))

    _rest, mean_us, median_us = interleaved.visit(Config("waits", Waits()), {}, calls=3)
    assert median_us < 10_000  # a 1 ms call
    assert mean_us >= 20_000  # (50 + 1 + 1 + 30) / 4 ms


def test_rest_ends_after_quiet_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interleaved, "REST_SLICE_S", 0.0)
    cpu = iter([0.0, 0.01, 0.01, 0.02, 0.02, 0.02, 0.02, 0.02] + [0.02] * 100)  # busy for 2 slices, then quiet
    calls = []

    def clock() -> float:
        calls.append(1)
        return next(cpu)

    interleaved.rest_until_quiet(clock)
    assert len(calls) == 2 * (2 + interleaved.QUIET_SLICES)  # two clock reads per slice


def test_ratio_interval_is_the_median_of_round_ratios() -> None:
    base = Config("base", None, samples=[100.0, 200.0, 100.0, 400.0, 100.0])
    cfg = Config("cfg", None, samples=[110.0, 220.0, 90.0, 440.0, 110.0, 999.0])  # last: base has no such round
    assert np.allclose(interleaved.round_ratios(cfg, base), [1.1, 1.1, 0.9, 1.1, 1.1])
    median, low, high = interleaved.ratio_interval(cfg, base)
    assert median == pytest.approx(1.1) and 0.9 <= low <= median <= high <= 1.1
    assert interleaved.ratio_interval(base, base) == (1.0, 1.0, 1.0)
    assert np.isnan(interleaved.ratio_interval(Config("none", None), base)[0])


def test_warm_up_rounds_visit_the_choosing_sessions_and_call_the_others_once(
    zoo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rests: list[int] = []
    monkeypatch.setattr(interleaved, "rest_until_quiet", lambda: rests.append(1) or 0.0)
    model = str(zoo_dir / "gpt_decode_step.onnx")
    configs = [Config(m, isolated.ort_session(model, m)) for m in ("ort-seq", "ort-seq-2t")]
    feeds = verify.random_inputs(configs[0].session, seed=0)
    asked: list[int] = []

    def choosing() -> list[Config]:  # three discarded rounds of the first only, then the counted ones
        asked.append(1)
        return configs[:1] if len(asked) <= 3 else []

    calls: dict[str, list[int]] = {}
    for cfg in configs:
        session, seen = cfg.session, calls.setdefault(cfg.label, [])

        class Counted:
            def run(self, *args, session=session, seen=seen):  # noqa: ANN002, ANN202
                seen.append(1)
                return session.run(*args)

        cfg.session = Counted()
    interleaved.time_interleaved(configs, feeds, rounds=2, seed=1, warm_up=choosing)
    assert len(asked) == 4 and [len(c.samples) for c in configs] == [2, 2]
    visits = {label: len(seen) - 2 for label, seen in calls.items()}  # less calls_per_visit's two each
    assert visits["ort-seq"] % 5 == 0 and visits["ort-seq"] >= 5 * 2  # 3 discarded + 2 counted visits, same size
    assert visits["ort-seq-2t"] - 3 == visits["ort-seq"] * 2 // 5  # the other: a call a discarded round, 2 visits
    assert len(rests) == 3 + 2 * 2  # a rest before each visit, none before the other's discarded calls


def test_a_budget_cuts_the_rounds_of_long_calls_to_those_that_fit(zoo_dir: Path) -> None:
    assert interleaved.rounds_within(150, 120.0, 15.0) == interleaved.BUDGET_LEAST_ROUNDS  # 8 rounds of 15 s
    assert interleaved.rounds_within(150, 120.0, 0.5) == 150  # they all fit
    assert interleaved.rounds_within(150, 120.0, 4.0) == 30
    assert interleaved.rounds_within(150, 0.0, 15.0) == 150  # no budget
    assert interleaved.rounds_within(4, 1.0, 15.0) == 4  # never more than asked
    model = str(zoo_dir / "gpt_decode_step.onnx")
    configs = [Config(m, isolated.ort_session(model, m)) for m in ("ort-seq", "ort-seq-2t")]
    feeds = verify.random_inputs(configs[0].session, seed=0)
    interleaved.time_interleaved(configs, feeds, rounds=12, budget_s=1e-6)  # a round of real calls takes longer
    assert [len(c.samples) for c in configs] == [interleaved.BUDGET_LEAST_ROUNDS] * 2
    for cfg in configs:
        cfg.samples.clear()
    asked: list[int] = []
    interleaved.time_interleaved(configs, feeds, rounds=12, settled=lambda: not asked.append(1))  # settled at once
    assert [len(c.samples) for c in configs] == [interleaved.BUDGET_LEAST_ROUNDS] * 2 and len(asked) == 1


def test_a_higher_level_gives_a_wider_interval() -> None:
    base = Config("base", None, samples=[100.0] * 40)
    cfg = Config("cfg", None, samples=[100.0 + (7 * i % 13) for i in range(40)])
    _, low95, high95 = interleaved.ratio_interval(cfg, base)
    _, low99, high99 = interleaved.ratio_interval(cfg, base, level=0.99)
    assert low99 <= low95 < high95 <= high99 and (low99, high99) != (low95, high95)
