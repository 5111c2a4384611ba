"""Time configurations in ONE process, their calls interleaved: what an application sees when
`hexfuse_onnx.InferenceSession` replaces `onnxruntime.InferenceSession` in it.

    time_interleaved(configs, feeds, rounds)       # every config one visit per round, shuffled order
    ratio_interval(configs[k], configs[0])         # median of the per-round ratios, bootstrap 95%

On these 2-vCPU VMs a vCPU changes speed for seconds at a time, and one process can run the same
graph with the same options 5.8% faster than its twin process throughout (issue 13): ratios across
processes never reached 2%. Here all sessions share one process, each round visits every
configuration once in a new random order, and a ratio is taken within a round (seconds apart at
most) before the median over rounds: a slow change of speed cancels in it.

Before each visit the process rests until its threads are quiet (`rest_until_quiet`): after a call
ORT's pooled modes spin their intra-op threads for 50-180 ms (measured on two_branch and
gpt_decode_step, 50-70 ms of CPU in a 300 ms sleep), which would take a core from the next visit.
A visit is a first call and then the same number of calls again for every configuration (as many as
fill VISIT_S at the median configuration's speed, 1 to VISIT_CALLS, unless the caller gives its own:
tune's screen of short pair calls); its figure is the mean of them all, what an application that calls
in bursts waits for. Until RULE 11 (mode_cache.py) it was the median of the calls after the first, which
ranked ort-par first on gtcrn_stream, whisper_decoder_merged and frspell_lemma_int8 while its first
call after a rest took 2.0-4.6x ort-seq's and a third of its second calls over twice its median
(benchmarks/visit_positions.py, docs/DROPIN.md); that median is recorded beside.

A budget (tune's --budget) cuts the rounds of a timing whose calls are long (`rounds_within`).
A session that chooses its ORT mode during its first calls (mode_choice) chooses in the regime it is
then measured in: discarded rounds first, until no session `warm_up()` names still chooses, in which
a choosing session's visits are rested as counted ones are and every other configuration runs one
call without a rest (`warm_up_round`): the rests, ~36 ms a visit, made most of a short model's
warm-up (silero_vad_legacy: 210 rounds of 9 visits). Chosen in back-to-back calls, with the pooled
modes' threads hot, two_branch, mha_encoder, inception and convnet_heads took ort-seq-2t or
ort-default where rested visits had ort-seq 1-6% faster.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable

import numpy as np

from .bench import Config, timed_runs

REST_SLICE_S = 0.005  # how often the rest checks the process's CPU time
QUIET_CPU_S = 0.0005  # a slice with less process CPU than this (10% of a core) is quiet ...
QUIET_SLICES = 2  # ... and this many quiet slices in a row end the rest
REST_MAX_S = 0.5  # a rest never lasts longer (a thread busy for good would stall the run)
VISIT_S = 0.005  # the timed calls of a visit fill this long ...
VISIT_CALLS = 20  # ... at most this many
WARM_UP_ROUNDS = 2000  # discarded rounds at most: a choice takes up to 12 rounds of blocks of >= 16 ms per
# mode, ~0.8 s of calls, and a visit of 36 us calls lasts 0.75 ms (silero_decoder_v5: ~1000 rounds)
BUDGET_LEAST_ROUNDS = 8  # a budget or `settled` never cuts below this: 8 rounds one way have p = 1/256
BOOTSTRAP = 2000  # resamples of the rounds for the 95% interval


def rest_until_quiet(clock: Callable[[], float] = time.process_time) -> float:
    """Sleep until this process's threads use (almost) no CPU; returns the seconds rested."""
    start, quiet = time.perf_counter(), 0
    while quiet < QUIET_SLICES and time.perf_counter() - start < REST_MAX_S:
        c0 = clock()
        time.sleep(REST_SLICE_S)
        quiet = quiet + 1 if clock() - c0 < QUIET_CPU_S else 0
    return time.perf_counter() - start


def time_interleaved(
    configs: list[Config],
    feeds: dict,
    rounds: int,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    warm_up: Callable[[], list[Config]] | None = None,
    visit_s: float = VISIT_S,
    visit_calls: int = VISIT_CALLS,
    budget_s: float = 0.0,
    settled: Callable[[], bool] | None = None,
) -> dict[str, float]:
    """One visit per live configuration per round, in a shuffled order; cfg.samples gets one figure
    (us) per round, so round r of every configuration is samples[r]. Before them, discarded rounds
    (`warm_up_round`) while `warm_up()` names a configuration still choosing (at most
    WARM_UP_ROUNDS). A visit's timed calls fill `visit_s` (at most `visit_calls`). A `budget_s` cuts
    the rounds to those that fit it (`rounds_within`); `settled()`, asked after each round from
    BUDGET_LEAST_ROUNDS on, ends the timing when true. Returns each configuration's median rest (s)
    before its counted visits."""
    live = [c for c in configs if c.ok and c.session is not None]
    once = call_times(live, feeds)
    calls = calls_for(once, visit_s, visit_calls)
    rounds = rounds_within(rounds, budget_s, sum((calls + 1) * t + QUIET_SLICES * REST_SLICE_S for t in once))
    rests: dict[str, list[float]] = {c.label: [] for c in live}
    rng = random.Random(seed)
    gc_was = gc.isenabled()
    gc.disable()  # a collection inside a timed call is noise
    try:
        for _ in range(WARM_UP_ROUNDS if warm_up else 0):
            choosing = warm_up()  # type: ignore[misc]  # set when the range is not empty
            if not choosing:
                break
            warm_up_round(live, choosing, feeds, calls, rng)
        for r in range(rounds):
            for cfg, rest, figure, median in visit_round(live, feeds, calls, rng):
                rests[cfg.label].append(rest)
                cfg.samples.append(figure)
                cfg.visit_medians.append(median)
            if progress:
                progress(r + 1)
            if settled and r + 1 >= BUDGET_LEAST_ROUNDS and settled():
                break
    finally:
        if gc_was:
            gc.enable()
    return {k: float(np.median(v)) for k, v in rests.items()}


def visit_round(
    live: list[Config], feeds: dict, calls: int, rng: random.Random
) -> list[tuple[Config, float, float, float]]:
    """Each configuration visited once in a shuffled order: (config, *`visit`)."""
    order = list(live)
    rng.shuffle(order)
    return [(cfg, *visit(cfg, feeds, calls)) for cfg in order]


def visit(cfg: Config, feeds: dict, calls: int) -> tuple[float, float, float]:
    """One visit: (the rest before it in s, the mean of its 1 + `calls` calls in us, the median of the `calls`
    after the first). The mean is the figure: after a rest a pooled mode wakes its threads, and some of its
    calls wait; the median of the warm calls, the figure until RULE 11, is recorded beside."""
    rest = rest_until_quiet()
    times = timed_runs(cfg.session.run, feeds, calls + 1)  # type: ignore[union-attr]  # live
    return rest, float(np.mean(times)), float(np.median(times[1:]))


def still_choosing(configs: list[Config]) -> list[Config]:
    """The configurations whose session still chooses its ORT mode (mode_choice): a `warm_up` for
    `time_interleaved`."""
    return [c for c in configs if getattr(c.session, "choosing", False)]


def warm_up_round(live: list[Config], choosing: list[Config], feeds: dict, calls: int, rng: random.Random) -> None:
    """A discarded round: in a shuffled order, each `choosing` configuration's visit as in a counted
    round, every other configuration's one call without a rest before it. The other sessions' calls
    keep the caches as loaded as in the counted rounds, so the choice is made in their regime but for
    the rests. Without them (119f412) t5_small_int8_encoder chose ort-seq and ran at 1.10x the best
    mode; over the models of two runs each, a shift of ort-seq against ort-seq-2t from exploration
    to timing, against all visits rested, was not measurable either way (paired medians 0.992 and
    0.990): the regime, not a measured bias, decided."""
    order, rested = list(live), {id(c) for c in choosing}
    rng.shuffle(order)
    for cfg in order:
        if id(cfg) in rested:
            visit(cfg, feeds, calls)
        else:
            cfg.session.run(None, feeds)  # type: ignore[union-attr]  # live


def call_times(live: list[Config], feeds: dict) -> list[float]:
    """Seconds of one call of each configuration, after a first call."""
    once = []
    for cfg in live:
        run = cfg.session.run  # type: ignore[union-attr]
        run(None, feeds)
        t0 = time.perf_counter()
        run(None, feeds)
        once.append(time.perf_counter() - t0)
    return once


def calls_for(once: list[float], visit_s: float = VISIT_S, visit_calls: int = VISIT_CALLS) -> int:
    """Timed calls per visit, the same for every configuration: as many as fill `visit_s` at the
    median configuration's speed (`once`), 1 to `visit_calls`. The later calls of a visit run
    warmer, so a configuration given more of them would look faster (the same session timed as two
    configurations with their own counts differed by 3%, two_branch and gpt_decode_step)."""
    return max(1, min(visit_calls, int(visit_s / max(float(np.median(once)), 1e-9)))) if once else 1


def calls_per_visit(live: list[Config], feeds: dict, visit_s: float = VISIT_S, visit_calls: int = VISIT_CALLS) -> int:
    """`calls_for` the configurations' calls, timed here."""
    return calls_for(call_times(live, feeds), visit_s, visit_calls)


def rounds_within(rounds: int, budget_s: float, round_s: float) -> int:
    """The rounds of `round_s` seconds each that fit `budget_s`, at most `rounds` and at least
    BUDGET_LEAST_ROUNDS (no budget: `rounds`). A detector's 1.2-2.5 s calls made tune's 30 rounds of
    ORT's four modes, a warm-up and a timed call each, last 7.5 minutes (table_edge_det_int8); a
    call that long varies little from round to round, and the figures are ratios within a round."""
    if budget_s <= 0 or round_s <= 0:
        return rounds
    return min(rounds, max(BUDGET_LEAST_ROUNDS, int(budget_s / round_s)))


def round_ratios(cfg: Config, base: Config) -> np.ndarray:
    """cfg / base within each round both were timed in."""
    n = min(len(cfg.samples), len(base.samples))
    return np.asarray(cfg.samples[:n]) / np.asarray(base.samples[:n])


def ratio_interval(cfg: Config, base: Config, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): the median of the per-round ratios cfg/base and its bootstrap interval
    at `level` (rounds resampled with replacement)."""
    ratios = round_ratios(cfg, base)
    if ratios.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(ratios, size=(BOOTSTRAP, ratios.size)), axis=1)
    tail = 50.0 * (1.0 - level)
    low, high = np.percentile(boot, [tail, 100.0 - tail])
    return float(np.median(ratios)), float(low), float(high)
