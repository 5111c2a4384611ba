"""Ratios taken within rounds: the statistic of every in-process timing (tools/interleaved.py) and
of the run-time choice of ORT's mode (mode_choice.py).

A round times every configuration once, seconds apart at most; a 2-vCPU VM changes speed for
seconds at a time, so cfg/base within a round cancels that change, and the median over rounds
(with a bootstrap 95% interval) says which is faster.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP = 2000  # resamples of the rounds for the 95% interval


def per_round(samples: Sequence[float], base: Sequence[float]) -> np.ndarray:
    """samples / base within each round both were timed in (round r is index r of each)."""
    n = min(len(samples), len(base))
    return np.asarray(samples[:n], dtype=float) / np.asarray(base[:n], dtype=float)


def interval(samples: Sequence[float], base: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """(median, low, high): the median of the per-round ratios samples/base and its bootstrap 95%
    interval (rounds resampled with replacement)."""
    ratios = per_round(samples, base)
    if ratios.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(ratios, size=(BOOTSTRAP, ratios.size)), axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(np.median(ratios)), float(low), float(high)
