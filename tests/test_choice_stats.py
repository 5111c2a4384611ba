"""The run-time choice's statistics (hexfuse_onnx/choice_stats.py): the Williams order of the blocks, the
signed-rank test of a mode's rounds at the level the choice uses (mode_choice.LEAVE_P), and calls of other
input sizes compared as if of one."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hexfuse_onnx import choice_stats, mode_choice


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_williams_rows_let_every_mode_follow_every_other_equally_often(n):
    rows = [choice_stats.williams_row(n, r) for r in range(2 * n)]
    assert all(sorted(row) == list(range(n)) for row in rows)
    follows = Counter(pair for row in rows for pair in zip(row, row[1:]))
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1, follows


@pytest.mark.parametrize(
    ("ratios", "faster"),
    [
        ([0.9] * 4, True),  # 4 rounds: every round won, the rule of 4 rounds
        ([0.9, 0.9, 0.9, 1.01], False),
        ([0.9, 0.9], True),  # 2^-2 > LEAVE_P: every round won
        # gtcrn_stream, ort-seq over ORT's defaults in three rested explorations (choice_accuracy):
        # 8 of 12 rounds won, each of the 4 lost by 1-10%
        ([0.84, 0.92, 0.76, 0.86, 0.915, 0.985, 1.096, 1.012, 0.874, 0.926, 1.023, 1.012], True),
        ([0.95, 1.05] * 6, False),  # as many rounds lost as won, by as much
        ([0.9] * 8 + [1.12] * 4, False),  # 8 of 12 won, the 4 lost by more than each win
        ([0.9] * 10 + [1.1] * 2, True),  # 10 of 12 (the sign test's threshold at 1/16)
    ],
)
def test_a_signed_rank_test_of_the_rounds_decides_whether_a_mode_beat_the_defaults(ratios, faster):
    assert choice_stats.faster_in_rounds(np.log(ratios).tolist(), mode_choice.LEAVE_P) is faster


def test_the_ranks_of_tied_rounds_are_averaged():
    assert choice_stats.rankdata(np.array([0.3, 0.1, 0.1, 0.2])).tolist() == [4.0, 1.5, 1.5, 3.0]


def test_the_signed_rank_null_is_every_assignment_of_wins_counted():
    rng = np.random.default_rng(0)
    for n in range(1, 11):
        ranks = np.rint(2 * choice_stats.rankdata(np.round(rng.random(n), 1))).astype(int)  # ties: half ranks
        sums = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) @ ranks
        assert np.allclose(choice_stats.signed_rank_null(ranks), np.bincount(sums, minlength=ranks.sum() + 1) / 2**n)


def test_thirty_rounds_are_tested_as_a_few():
    """tune's 30 rounds: 20 won by 5%, 10 lost by 1% pass; 18 won by 1%, 12 lost by 5% do not."""
    assert choice_stats.faster_in_rounds(np.log([0.95] * 20 + [1.01] * 10).tolist(), mode_choice.LEAVE_P)
    assert not choice_stats.faster_in_rounds(np.log([0.99] * 18 + [1.05] * 12).tolist(), mode_choice.LEAVE_P)


def test_calls_of_one_size_are_compared_as_timed():
    samples = {"ort-par": [], "ort-default": [310.0, 300.0, 305.0], "ort-seq": [290.0, 280.0]}
    sizes = {m: [4096.0] * len(t) for m, t in samples.items()}
    times = choice_stats.as_median_size(samples, sizes)
    assert {m: t.tolist() for m, t in times.items()} == samples


def test_calls_of_other_sizes_are_compared_at_the_median_size_and_a_disturbed_call_does_not_bend_it():
    """Two modes over text lines of 10 widths each (time 300 + 2 w us, elements 144 w), ort-seq 0.8x;
    one of ORT's defaults' calls disturbed 20x."""
    widths = np.arange(80, 880, 80, dtype=float)
    samples = {"ort-default": list(300 + 2 * widths), "ort-seq": list(0.8 * (300 + 2 * widths[::-1]))}
    samples["ort-default"][3] *= 20
    sizes = {"ort-default": list(144 * widths), "ort-seq": list(144 * widths[::-1])}
    times = choice_stats.as_median_size(samples, sizes)
    ratio = np.median(times["ort-seq"]) / np.median(times["ort-default"])
    assert ratio == pytest.approx(0.8, abs=0.01)
    assert np.ptp(times["ort-seq"]) / np.median(times["ort-seq"]) < 0.05  # the widths' spread taken out


def test_calls_of_two_sizes_keep_their_scale():
    """Calls of 45 ms alternating two sizes (time ~ size^0.8): z^2 is one constant over two sizes, and
    fitted it took the medians to 0.3-0.5 ms (ort-par then never joined: under PAR_MIN_CALL_US)."""
    sizes = [1000.0, 4000.0] * 20
    samples = {
        m: [f * 45_000.0 * (s / 1000.0) ** 0.8 for s in sizes] for m, f in (("ort-default", 1.0), ("ort-seq", 0.95))
    }
    times = choice_stats.as_median_size(samples, dict.fromkeys(samples, sizes))
    at_middle = 45_000.0 * 2.0**0.8  # the median of the log sizes: 2000 elements
    assert np.median(times["ort-default"]) == pytest.approx(at_middle, rel=1e-6)
    assert np.median(times["ort-seq"]) == pytest.approx(0.95 * at_middle, rel=1e-6)


def test_modes_of_sizes_apart_are_compared_as_timed():
    # each mode saw one size of its own: what the sizes cost and what the modes do cannot be told apart
    samples = {"ort-default": [300.0, 310.0], "ort-seq": [600.0, 590.0]}
    sizes = {"ort-default": [1000.0, 1000.0], "ort-seq": [3000.0, 3000.0]}
    times = choice_stats.as_median_size(samples, sizes)
    assert {m: t.tolist() for m, t in times.items()} == samples
