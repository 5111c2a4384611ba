"""The statistics of the run-time choice of ONNX Runtime's mode (mode_choice.py), apart from its sessions.

The order of a round's blocks (`williams_row`), the one-sided signed-rank test of a mode's per-round ratios to
ORT's defaults (`faster_in_rounds`), and the trend of log call time over log input size that all modes share
(`fit_sizes`, `as_median_size`), by which calls of other sizes are compared as if of one. numpy alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

OUTLIER_MADS = 4.0  # a call this many (scaled) median absolute deviations off the size trend's first fit is
# left out of its second (`size_trend`)


def medians(times: dict[str, np.ndarray]) -> dict[str, float]:
    return {m: float(np.median(t)) for m, t in times.items() if len(t)}


def means(times: dict[str, np.ndarray]) -> dict[str, float]:
    return {m: float(np.mean(t)) for m, t in times.items() if len(t)}


@dataclass(frozen=True)
class SizeTrend:
    """log time = c + b1 z + b2 z^2 over z, the log of a call's input size less the median log size."""

    median_log_size: float = 0.0
    b1: float = 0.0
    b2: float = 0.0

    def factor(self, size: np.ndarray) -> np.ndarray:
        """How much longer calls of `size` take than one of the median size."""
        z = np.log(size) - self.median_log_size
        return np.exp(self.b1 * z + self.b2 * z * z)  # exp(0) = 1: calls of one size exactly as timed

    def factor_of(self, size: float) -> float:
        """`factor` of one call, in math, not numpy: 0.1 us, not 3 (a watched session's every call)."""
        z = math.log(size) - self.median_log_size
        return math.exp(self.b1 * z + self.b2 * z * z)


def fit_sizes(samples: dict[str, list[float]], sizes: dict[str, list[float]]) -> SizeTrend:
    """The trend of log time over log size that all modes' counted calls share (`size_trend`)."""
    modes = [m for m in samples if samples[m]]
    if not modes:
        return SizeTrend()
    which = np.concatenate([np.full(len(samples[m]), k) for k, m in enumerate(modes)])
    log_size = np.log(np.concatenate([sizes[m] for m in modes]))
    center = float(np.median(log_size))
    b1, b2 = size_trend(which, log_size - center, np.log(np.concatenate([samples[m] for m in modes])))
    return SizeTrend(center, b1, b2)


def as_median_size(samples: dict[str, list[float]], sizes: dict[str, list[float]]) -> dict[str, np.ndarray]:
    """Each mode's call times (us) as if every call had had the median input size: divided by the trend of
    log time over log size that all modes share (`fit_sizes`). Calls of one size are left as timed."""
    trend = fit_sizes(samples, sizes)
    return {m: np.asarray(t, dtype=float) / trend.factor(np.asarray(sizes[m], dtype=float)) for m, t in samples.items()}


def size_trend(which: np.ndarray, z: np.ndarray, log_t: np.ndarray) -> tuple[float, float]:
    """(b1, b2) of log t = c[mode] + b1 z + b2 z^2 by least squares, refitted once without the calls more
    than OUTLIER_MADS (scaled) median absolute deviations off the first fit (a disturbed call); (0, 0) when
    every call had one size. The modes' blocks alternate over the same run of calls, so the sizes each
    mode saw overlap and the shared trend is what the sizes cost, the c[mode] what the modes do. Only
    the terms the calls determine are fitted (`trend_columns`): over two sizes z^2 is one constant, which
    the least squares shared out with the c[mode] (calls of 45 ms alternating two sizes read 0.3-0.5 ms)."""
    columns = trend_columns(which, z)
    if columns is None:
        return 0.0, 0.0
    coef = np.linalg.lstsq(columns, log_t, rcond=None)[0]
    residual = log_t - columns @ coef
    off = np.abs(residual - np.median(residual))
    keep = off <= OUTLIER_MADS * 1.4826 * np.median(off) + 1e-12
    if np.linalg.matrix_rank(columns[keep]) == columns.shape[1]:
        coef = np.linalg.lstsq(columns[keep], log_t[keep], rcond=None)[0]
    trend = np.zeros(2)
    trend[: columns.shape[1] - len(np.unique(which))] = coef[len(np.unique(which)) :]
    return float(trend[0]), float(trend[1])


def trend_columns(which: np.ndarray, z: np.ndarray) -> np.ndarray | None:
    """The design of `size_trend`: one column per mode, then z and z^2, as many of those as the calls
    determine (full column rank: three sizes or more for z^2, two for z, and each mode's calls not of
    sizes apart from the rest's); None where not even z is (one size)."""
    modes = (which[:, None] == np.unique(which)[None, :]).astype(float)
    for degree in (2, 1):
        columns = np.column_stack([modes, *(z**k for k in range(1, degree + 1))])
        if np.linalg.matrix_rank(columns) == columns.shape[1]:
            return columns
    return None


def faster_in_rounds(log_ratios: Sequence[float], level: float) -> bool:
    """Whether per-round log ratios (a mode's block median over ORT's defaults') show the mode faster:
    the exact one-sided p of Wilcoxon's signed-rank statistic (the ranks of the rounds it won, by
    |log ratio|) at most level, or where no p is that low for so few rounds (2^-n > level), every
    round won. A round lost by little weighs little: the rank sum, not the count of rounds won."""
    d = np.asarray([x for x in log_ratios if x != 0.0], dtype=float)
    if len(d) == 0:
        return False
    if 0.5 ** len(d) > level:
        return bool(np.all(d < 0))
    doubled = np.rint(2 * rankdata(np.abs(d))).astype(int)  # average ranks are whole or halves
    return float(signed_rank_null(doubled)[int(doubled[d < 0].sum()) :].sum()) <= level


def signed_rank_null(ranks: np.ndarray) -> np.ndarray:
    """P(W = w) for w = 0 .. sum(ranks), W the sum of the ranks of the rounds won when each round is won
    or lost with probability 1/2 (whole ranks; one round at a time, so 30 rounds cost no 2^30 cases)."""
    null = np.zeros(int(ranks.sum()) + 1)
    null[0] = 1.0
    for r in ranks:
        won = np.zeros_like(null)
        won[r:] = null[: len(null) - r]
        null = 0.5 * (null + won)
    return null


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their average rank: a value above `below` others and tied with
    `upto - below` (itself included) takes the mean of ranks below + 1 .. upto."""
    ordered = np.sort(x)
    below, upto = np.searchsorted(ordered, x, "left"), np.searchsorted(ordered, x, "right")
    return (below + 1 + upto) / 2.0


@functools.lru_cache(maxsize=64)  # asked twice a call while choosing
def williams_row(n: int, r: int) -> tuple[int, ...]:
    """Row r of a Williams design for n orders: 0, 1, n-1, 2, n-2, ... shifted by r (mod n), and for
    odd n reversed in odd rows. Over n rows (2n for odd n) each item directly follows every other
    item equally often: what one mode leaves behind (spinning threads, a cold cache) weighs on every
    other mode alike. (Shifts alone, for the 3 candidates: each mode always after the same one.)"""
    first, low, high = [0], 1, n - 1
    for k in range(1, n):
        first.append(low if k % 2 else high)
        low, high = (low + 1, high) if k % 2 else (low, high - 1)
    row = tuple((x + r) % n for x in first)
    return row[::-1] if n % 2 and r % 2 else row
