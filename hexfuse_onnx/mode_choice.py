"""ONNX Runtime's execution mode chosen at run time, for a model without a tuning record made here.

ORT's defaults are not its fastest mode everywhere: on a 2-core VM gpt_decode_step ran at 78 us under them and
75 us under ort-seq, mlp_chain twice as fast on 2 threads as on 1. A tuned model carries the mode that ran it
fastest here (tuning.py); for any other model `runtime.InferenceSession` (backend auto, no cDSP, plugin not
registered) explores each of ORT's modes (CANDIDATES, and ort-par only where the graph has work it can run at
once: `concurrent_work`), making ORT's defaults' session at once and each other mode's when its first block is
due, in another thread (construction took 3.0-4.4x stock ORT's when all were made at once: ppocr_rec 43 -> 188
ms, moonshine_tiny_decoder 217 -> 653 ms; now 0.8-1.3x; made within a call, tinypron's 6369 nodes stalled it
1.2-1.4 s three times), and alternates its first calls among them in blocks (Aker: prepare the versions,
choose at run time; `Exploration`): up to ROUNDS rounds of one block per mode (BLOCK counted calls and BLOCK_S
in calls, or one and LONG_BLOCK_S), each round in another order, ending earlier (after MIN_ROUNDS at least)
once the calls have taken EXPLORE_S. ort-par joins from the second round on. Modes are compared by their
typical call (`typical_calls`: the median of a mode's blocks' mean calls; RULE 11, at PARALLEL). From MIN_ROUNDS
rounds on, a mode above DROP_RATIO times the best typical call in each of its blocks leaves the rotation (ort-par,
joined a round late, after its first such block). It keeps ORT's defaults unless another mode beat them clearly
(`replaces_defaults`: a mode with a pool in the rounds both ran, by a signed-rank test at level LEAVE_P and by
LEAVE_GAIN in typical call; ort-seq, which has no pool to spin, by any lower one that the same test confirms; of
such modes the lowest), releases the other sessions, logs the
choice once and remembers it for the model on this machine (mode_cache.py). The next sessions of the model
choose again until the choices settle (`mode_cache.settled`: one exploration on a busy machine can choose
wrong); from then on a session of the model starts in that mode at once. A session in ort-par, chosen or
settled, watches its calls and gives way to ORT's defaults where they slow down (`WatchedSession`).
ORT's defaults pin their pool's threads; a call made while the application's thread sits on one of those CPUs
waits a time slice for the pool thread (pool_cpus.py), so ORT's defaults, while choosing and once chosen or
settled, run such calls in an ort-seq session (`PinnedPoolSession`, RULE 12; where the pool pinned at most
PINNED_SHARE_MAX of the CPUs). A session that chose another mode over an ort-par close behind watches one call
in CHALLENGE_EVERY and, where they slow down past ort-par's time while choosing, runs a window in ort-par once
and keeps the faster (`ChallengedSession`). `session_options(model=...)`, which cannot time, applies the latest
choice, confirmed or not (ORT's defaults there run every call themselves).

The sessions timed are the sessions kept, as ORT makes them. After a call the threads of ORT's pools
spin for tens of ms, taking a core from whatever runs next: after a block of a mode with a pool,
calls that start within SETTLE_S of its last one are not counted (in an application that rests
between calls the rest covers it). Timing twins whose threads spun 1 ms instead measured a
different session: gtcrn_stream's ort-par twin took 5.9 ms and 1.7 ms on its first two calls after
a rest where the session kept took 1.9 and 1.0, and every pooled twin ran 2-4% slower in steady
state, so the choice leaned to ort-seq, the one mode without a pool (romanizer_decoder chose it at
1.04x ORT's defaults, gtcrn_stream where ort-par ran 5% faster).

Calls are compared at one input size. An application's calls change size (an OCR recogniser's text
lines, a decoder's growing past, a detector's images), and a block of one mode would otherwise stand for
the sizes it happened to get. Each counted call keeps its inputs' elements (`feed_size`), and the modes are
compared as if every call had had the median size (`choice_stats.as_median_size`: the trend of log time over log size
that all modes share, fitted over the exploration, divided out). Compared as timed, over one generation
whose past grew a mode 10% faster was never found (ORT's defaults kept); calls of one size are compared
as timed, as before.

No choice is made where the user chose: session options that set the execution mode or a thread
count, providers other than the CPU's alone, or HEXFUSE_ORT_MODE: a mode name (ort-seq, ...)
forces that mode, `off` keeps ORT's defaults. A change of the rule bumps mode_cache.RULE: choices made by
an earlier rule are not reused. Memory: while
choosing, the model is held in up to 4 sessions, so a model above EXPLORE_MAX_BYTES is not explored
(ORT's defaults, logged). Timings of the first calls are
those of the inputs the application gives; calls from several threads at once while choosing are
served but make the medians noisier.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import onnx
import onnxruntime as ort

from . import choice_stats, mode_cache, ort_modes, pool_cpus
from .contract import DOMAIN
from .nested import subgraphs

ENV_MODE = "HEXFUSE_ORT_MODE"
OFF = "off"
ROUNDS = 12  # blocks per mode, in turn, at most (three Williams cycles of 4 modes, two of 3) ...
MIN_ROUNDS = 2  # ... and at least; more only while the calls in it have taken less than EXPLORE_S
EXPLORE_S = 1.0  # (ppocr_det's 0.2-0.7 s calls: 80 calls were 16-56 s in mixed modes); the counted
# calls' own time, not the wall time: with rests between calls, 2 rounds passed 1 s, too few blocks to choose
BLOCK = 5  # counted calls per block at least ...
BLOCK_S = 0.016  # ... and this long in counted calls: short calls differ by a few %, which 16 calls cannot
# tell apart;
LONG_BLOCK_S = 0.1  # a block this long in calls needs only one counted call (in calls, not wall time:
# an application resting 0.1 s between calls ended its blocks after one counted call each)
SETTLE_S = 0.06  # after a block of a mode with a thread pool, calls that start this soon after its last
# call are not counted: ORT 1.32's pool threads spin ~40 ms after a call on the Intel VM (process CPU in 5 ms
# slices after 20 calls: gtcrn_stream, two_branch, romanizer_decoder, mha_encoder), ~50 ms of CPU on the AMD VM
SWITCH_S = 0.002  # after ort-seq's block (no pool): its first 2 ms (a block's first call is never counted ...
SETTLE_SHARE = 0.25  # ... unless at most this share of it falls before the block settles: long calls)
DROP_RATIO = 2.0  # from MIN_ROUNDS rounds on, a mode slower than this times the best leaves the rotation
# (after one round, one disturbed block of ort-seq had read 18x its steady time and dropped the best mode)
EXPLORE_MAX_BYTES = 64 * 2**20  # above: four copies of the model are too many to hold
SPINLESS = ("ort-seq",)  # sequential on one thread: no pool threads that spin
BESIDE = "ort-seq"  # runs ORT's defaults' calls made from their pool's CPUs (`PinnedPoolSession`, RULE 12) ...
PINNED_SHARE_MAX = 0.5  # ... where the pool pinned at most this share of the CPUs: measured on 2 vCPUs only (one
# pinned, the caller on it in about half of host_pairs' visits). Where the pool pins most CPUs the caller sits on one
# most of the time, and one thread would run most calls: not measured, so not done.
# The modes every choice explores, ORT's defaults first: the session other methods use while choosing.
# ort-par (PARALLEL) also, from the second round, where the graph has work to run at once, whatever its
# calls take: calls rested 20 ms apart ran 0.53-0.72x ORT's defaults in it on 40-400 us calls
# (silero_decoder_v5, hama_g2p_encoder, frspell_lemma_int8, whisper_decoder_merged; back to back 0.91-1.0x,
# gpt_decode_step_contrib 0.71x; Intel Xeon VM, benchmarks/ort_par_regimes.py). Beside a process holding one
# of the 2 CPUs its median stayed near the defaults' but 10% of its calls or more waited ~8 ms (p90 4.4-8 ms
# against 0.2-0.9 ms; likely a node's inter-op thread waiting out the other process's time slice, not
# measured): the "285x in rested calls" a remembered choice of it ran silero_decoder_v5 at before the
# 0.5 ms threshold RULE 9 drops: a median does not see such waits, a block's mean does.
PARALLEL = "ort-par"
# Compared by the typical call, the median of a mode's blocks' mean calls (RULE 11), as host_pairs takes the median
# of visits it scores by their mean call: a block's mean counts a mode's calls that wait now and then, the median
# over blocks leaves out a block something else disturbed. Until RULE 11 by their median, a pooled mode's mean no
# longer than the defaults': in rested visits (host_pairs, session 46's run)
# ort-par's median was the lowest on gtcrn_stream, frspell_lemma_int8 and whisper_decoder_merged, its first two
# calls after a rest 2.0-6.2x ort-seq's (3015-3405 us and 1605-2072 us against 780-1673 and 260-945), and ORT's
# defaults and ort-seq-2t took over twice their median on up to 8-17% of later calls where ort-seq did on up to 2-5%
# (benchmarks/visit_positions.py): the median ranked first the modes whose calls wait now and then, and kept ORT's
# defaults on frspell_lemma_int8 and whisper_decoder_with_past at 1.45x and 1.54x ort-seq's mean call.
CANDIDATES = tuple(m for m in ort_modes.MODES if m != PARALLEL)
FULL_EXPLORATION_US = EXPLORE_S * 1e6 / (ROUNDS * BLOCK * len(CANDIDATES))  # calls this short or shorter get
# all ROUNDS rounds before EXPLORE_S: a tuned model that runs unfused on stock ORT chooses its mode at run time
# there instead of taking its tuning record's (runtime.apply_tuned_mode). host_pairs --defaults, Intel Xeon VM:
# the mode tune pinned ran 1.03-1.10x the best on calls under 1 ms (hama_g2p_encoder quiet, gtcrn_stream loaded)
# where the run-time choice met 1.02x; on longer calls with few rounds to choose in, the pin met it where the
# run-time choice took a mode 1.36-1.54x the best (spindle_eeg, centerface, loaded; docs/DROPIN.md)
LEAVE_GAIN = 0.02  # another mode replaces ORT's defaults only when its typical call is this much lower and its
# rounds show it faster (LEAVE_P): the user's baseline is ORT's defaults, and one exploration cannot rank modes
# a few % apart. On the Intel VM ort-seq-2t ran as fast as ORT's defaults in back-to-back calls (0.98-1.01 a round)
# and 1.05-1.5x slower in rested ones (ORT pins the threads of its default pool, not of one of a set size:
# a likely cause, not measured): the lowest median took it for two_branch in 4 of 6 back-to-back
# explorations, 1.52x the defaults rested (benchmarks/choice_accuracy.py, docs/DROPIN.md).
# Not for ort-seq (SPINLESS): at a typical call as short as the defaults' it is the better mode for the application,
# whose other work gets the core a pool spins for ~40 ms after each call (SETTLE_S); it needs a shorter one and its
# rounds (LEAVE_P; until RULE 10 a median per-round ratio under 1, which took ort-seq on a coin's toss: centerface_qdq
# and fsmn_vad explored it faster in 6 of 12 rounds, ~1.3 ms calls, against ORT's defaults that ran 1.05 or 1.45 ms a
# visit; timed 1.15x and 1.11x the best mode, session 44's run). Where it ties, on calls under ~150 us, an exploration
# saw less of its lead than the timed rounds: silero_decoder_v5 1.9% (the defaults kept) against 9%,
# gpt_decode_step_contrib 4.1% against 23% (host_pairs --defaults, session 38). Replayed on that run's 118 explorations
# (benchmarks/choice_replay.py; medians until RULE 11), a lower median alone changed 9 choices, 3 to slower modes
# (silero_vad_legacy explored ort-seq 12% ahead, timed 11% behind); with the rounds' median, 6: 5 to the best mode, one
# 1.48x -> 1.54x (hama_g2p_encoder, whose best mode, ort-par, the choice does not take on 0.4 ms calls).
LEAVE_P = 1 / 16  # ... faster at this level by a one-sided Wilcoxon signed-rank test of its per-round log
# ratios to the defaults (exact; with 4 rounds or fewer: faster in every round, the rule before 12 rounds).
# Four rounds could not rank gtcrn_stream's modes 5-11% apart in rested calls: ort-seq beat the defaults
# in 4, 2 and 2 of 4 rounds of three explorations, each loss by 1-10% (benchmarks/choice_accuracy.py).
WATCH_CALLS = 64  # a session that chose ort-par times its calls in windows of this many ...
FALLBACK_RATIO = 2.0  # ... and runs ORT's defaults' session (kept for this) from a window whose mean, as at the
# median input size, is this many times the defaults' mean while choosing: an ort-par session the choice made in
# another thread ran 1.2-5.5 ms calls on average beside a busy process where ORT's defaults ran 0.6-0.7 ms
# (frspell_lemma_int8, rested calls); gpt_decode_step_contrib's 64 calls after one started averaged 2784 us against
# the defaults' 107 while choosing (docs/DROPIN.md, RULE 9)
CHALLENGE_RATIO = 1.5  # a chosen mode other than ort-par whose window of WATCH_CALLS calls averages this many times
# its mean while choosing, and more than ort-par's then, runs ort-par for a window (`ChallengedSession`): in
# host_pairs' session 42 run, silero_vad_legacy chose ORT's defaults at 114 us a call against ort-par's 133; in the 30
# rounds timed after, every sequential mode took 200-236 us and ort-par 116-158 (1.47x the best mode)
CHALLENGE_EVERY = 8  # ... timing one call in this many (its window: WATCH_CALLS of them), and every call of the trial:
# a timed call costs 0.75-1.2 us in Python, one not timed 0.2 ...
CHALLENGE_MIN_US = 100.0  # ... where the chosen mode's calls took this long at least
VIEW_OPS = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})  # no work to run at once
SHAPE_SOURCES = frozenset({"Shape", "Size"})

Log = Callable[[str], None]


def forced_mode() -> str | None:
    """HEXFUSE_ORT_MODE: a mode, OFF, or None (unset or `choose`); an unknown value raises."""
    value = os.environ.get(ENV_MODE, "").strip()
    if value in ("", "choose"):
        return None
    if value != OFF and value not in ort_modes.MODES:
        raise ValueError(f"{ENV_MODE}={value!r}: not one of {', '.join((*ort_modes.MODES, OFF, 'choose'))}")
    return value


def preset(
    so: ort.SessionOptions,
    model: str | os.PathLike[str] | bytes | onnx.ModelProto | None,
    header: onnx.ModelProto,
    given: list[str],
    log: Log,
) -> str | None:
    """Apply the mode the environment forces or the cache remembers for `model` (unless the user's
    options set the execution: `given`). Returns why nothing is left to choose (the mode applied, or
    the reason no choice is made), None when the mode is still to be chosen at run time or, remembered as
    ort-par with a watch, is to be watched (`session` makes either). `header`: the model without its
    external data."""
    if given:
        return f"the session options given set {', '.join(given)}"
    forced = forced_mode()
    if forced == OFF:
        log(f"hexfuse: ONNX Runtime mode: ORT's defaults ({ENV_MODE}={OFF})")
        return OFF
    if forced:
        ort_modes.apply(so, forced)
        log(f"hexfuse: ONNX Runtime mode {forced} forced by {ENV_MODE}")
        return forced
    if not _remembered(model):
        return "no model file to remember a choice by"
    size = model_bytes(model if isinstance(model, bytes) else str(model), header)
    if size > EXPLORE_MAX_BYTES:
        log(
            f"hexfuse: ONNX Runtime mode: ORT's defaults, not chosen at run time (the model, "
            f"{size / 2**20:.0f} MiB, is above {EXPLORE_MAX_BYTES >> 20} MiB "
            "to hold once per mode)"
        )
        return "too large to choose"
    found = mode_cache.cached_mode(mode_cache.model_key(model), log)
    if found is None:
        return None
    mode, entry = found
    ort_modes.apply(so, mode)  # what session_options, which cannot time, keeps
    chosen, where = mode_cache.history(entry), f"{entry.get('date', '?')}, from {mode_cache.cache_path()}"
    if mode_cache.settled(chosen) is None:
        log(
            f"hexfuse: ONNX Runtime mode {mode} chosen at run time on {where}, not yet confirmed "
            f"({mode_cache.agreeing(chosen)} of {mode_cache.CONFIRM} choices in a row agree)"
        )
        return None
    log(f"hexfuse: ONNX Runtime mode {mode} chosen at run time on {where}")
    # `session` makes these: ort-par watched, ORT's defaults with calls beside (`remembered_defaults`)
    return None if remembered_watch(entry) is not None or mode == ort_modes.DEFAULT else mode


def remembered_watch(entry: dict[str, Any] | None) -> Watch | None:
    """The watch of a cache entry whose choices have settled on ort-par (`settled`), if it keeps one."""
    if entry is None or mode_cache.settled(mode_cache.history(entry)) != PARALLEL:
        return None
    return Watch.of_record(entry.get("watch"))


def _remembered(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto | None,
) -> TypeGuard[str | os.PathLike[str] | bytes]:
    """Whether a choice for `model` can be remembered: a file or bytes, whose digest keys the cache."""
    return model is not None and not isinstance(model, onnx.ModelProto)


def explorable(model: str | os.PathLike[str] | bytes | onnx.ModelProto | None, header: onnx.ModelProto) -> bool:
    """Whether a session of `model` may choose ORT's mode at run time (`preset`'s rule, the mode neither
    forced nor given): a file or bytes, not too large to hold once per mode."""
    if not _remembered(model):
        return False
    return not too_large(model if isinstance(model, bytes) else str(model), header)


def too_large(source: str | bytes, header: onnx.ModelProto) -> bool:
    """Whether the model (with its external data) is too large to hold once per mode while choosing:
    a session of it runs ORT's defaults (`preset`'s rule)."""
    return model_bytes(source, header) > EXPLORE_MAX_BYTES


def model_bytes(source: str | bytes, header: onnx.ModelProto) -> int:
    """The model's size with its external data files (`header`: the model without them)."""
    if isinstance(source, bytes):
        return len(source)
    size = os.path.getsize(source)
    locations = {
        e.value
        for t in header.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
        for e in t.external_data
        if e.key == "location"
    }
    folder = Path(source).parent
    return size + sum((folder / loc).stat().st_size for loc in locations if (folder / loc).is_file())


class Exploration:
    """Which mode a call runs in while choosing, and the choice: the bookkeeping, no sessions.

    Rounds of blocks, one block per mode still in the rotation, in the order of a Williams design
    (`choice_stats.williams_row`: no mode always follows the same one). A block ends when it has BLOCK counted
    calls that took BLOCK_S, or one counted call and its calls took LONG_BLOCK_S. Not counted: a
    session's first call (ORT sets up its buffers), and a block's calls that start before it settles
    (SETTLE_S after the previous block's last call where that mode spins a pool, else SWITCH_S after
    its own first call), unless at most SETTLE_SHARE of the call came before. After each round from
    MIN_ROUNDS on, a mode whose every block's mean is
    above DROP_RATIO times the best typical call leaves the rotation (ORT_PARALLEL ran
    mha_encoder 30-90x slower than ort-seq on a loaded 2-core VM: a block of it costs the application
    more than the rest of the choice; but one block can be disturbed, so a mode has MIN_ROUNDS blocks,
    all slow, before it goes). `joining` modes (ort-par) join the rotation after the first round, so the
    drop rule first weighs them after one block. After
    ROUNDS rounds, or MIN_ROUNDS once its counted calls have taken EXPLORE_S, or when one
    mode is left, a mode is chosen (`chosen`): ORT's defaults, unless modes beat them clearly
    (`chosen_mode`), then the one of those with the lowest typical call (`typical_calls`). Blocks' means are of
    the calls as at the median input size (`as_median_size`), recomputed at each round's end."""

    def __init__(self, modes: Sequence[str], joining: Sequence[str] = ()) -> None:
        self.samples: dict[str, list[float]] = {m: [] for m in (*modes, *joining)}  # counted calls, us
        self._sizes: dict[str, list[float]] = {m: [] for m in self.samples}  # their inputs' elements
        self._blocks: list[dict[str, slice]] = [{}]  # per round, each mode's block: its counted calls
        self.rounds: list[dict[str, float]] = [{}]  # per round, each mode's block mean, us (`as_median_size`)
        self.live = list(modes)
        self._joining = list(joining)
        self.chosen: str | None = None
        self._round, self._index = 0, 0  # the round, the block's place in it
        self._block_calls, self._block_counted, self._settled_at = 0, 0, 0
        self._last_end, self._last_mode = 0, ""  # the previous call's end (ns) and mode
        self._busy, self._block_busy = 0, 0  # the time in the exploration's counted calls, in the block's (ns)
        self._block_spent = 0  # the time in the block's calls, counted or not (ns)
        self._warm: set[str] = set()  # modes whose session has run once

    def mode(self) -> str | None:
        """The mode the next call runs in; None once chosen."""
        if self.chosen:
            return None
        return self.live[choice_stats.williams_row(len(self.live), self._round)[self._index]]

    def record(self, mode: str, t0: int, t1: int, size: float = 1.0) -> None:
        """One call in `mode` from t0 to t1 (ns) on inputs of `size` elements (`feed_size`); a call of a
        block already ended is ignored."""
        if mode != self.mode():
            return
        if self._block_calls == 0:
            self._settled_at = self._settles(mode, t0)
        self._block_calls += 1
        self._block_spent += t1 - t0
        if self._counts(mode, t0, t1):
            self.samples[mode].append((t1 - t0) / 1000.0)
            self._sizes[mode].append(size)
            self._block_counted += 1
            self._busy += t1 - t0
            self._block_busy += t1 - t0
        self._warm.add(mode)
        self._last_end, self._last_mode = t1, mode
        enough = self._block_counted >= BLOCK and self._block_busy >= BLOCK_S * 1e9  # in calls: rests add no samples
        if enough or (self._block_counted and self._block_spent >= LONG_BLOCK_S * 1e9):
            counted = len(self.samples[mode])
            self._blocks[-1][mode] = slice(counted - self._block_counted, counted)
            self._block_calls, self._block_counted, self._block_busy, self._block_spent = 0, 0, 0, 0
            self._index += 1
            if self._index == len(self.live):
                self._end_round()

    def ran_aside(self, t1: int) -> None:
        """A call in ORT's defaults outside the blocks (the block's mode has no session yet) ended at t1:
        the block's calls settle after it as after a block of ORT's defaults."""
        self._last_end, self._last_mode = t1, ort_modes.DEFAULT

    def _settles(self, mode: str, t0: int) -> int:
        """When a block of `mode` whose first call starts at t0 settles (ns): another mode's pool has stopped
        spinning (a mode that ends one round and starts the next follows only itself)."""
        pooled = self._last_mode not in ("", mode, *SPINLESS)
        return int(max(t0 + SWITCH_S * 1e9, self._last_end + SETTLE_S * 1e9 if pooled else 0))

    def _counts(self, mode: str, t0: int, t1: int) -> bool:
        return mode in self._warm and self._settled_at - t0 <= SETTLE_SHARE * (t1 - t0)

    def times(self) -> dict[str, np.ndarray]:
        """Each mode's counted calls, us, as at the median input size (`as_median_size`)."""
        return choice_stats.as_median_size(self.samples, self._sizes)

    def medians(self) -> dict[str, float]:
        """Each mode's median counted call, us, as at the median input size."""
        return choice_stats.medians(self.times())

    def means(self) -> dict[str, float]:
        """Each mode's mean counted call, us, as at the median input size."""
        return choice_stats.means(self.times())

    def size_trend(self) -> choice_stats.SizeTrend:
        """How the counted calls' time grew with their inputs' size (`fit_sizes`)."""
        return choice_stats.fit_sizes(self.samples, self._sizes)

    def _end_round(self) -> None:
        self._round, self._index = self._round + 1, 0
        times = self.times()  # one fit serves the blocks and the means
        self.rounds = [{m: float(np.mean(times[m][b])) for m, b in blocks.items()} for blocks in self._blocks]
        self._blocks.append({})
        self.rounds.append({})
        figures = typical_calls(self.rounds)
        best = min(figures[m] for m in self.live)
        if self._round >= MIN_ROUNDS:  # every block of a mode that leaves was that slow
            self.live = [m for m in self.live if self.fastest_block(m) <= DROP_RATIO * best]
        if self._round == 1:
            self.live += self._joining
        long_enough = self._round >= MIN_ROUNDS and self._busy >= EXPLORE_S * 1e9
        if self._round == ROUNDS or long_enough or len(self.live) == 1:
            self.chosen = chosen_mode(self.rounds, self.live)

    def fastest_block(self, mode: str) -> float:
        """The lowest mean of one of the mode's blocks, us."""
        return min(r[mode] for r in self.rounds if mode in r)


def typical_calls(rounds: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each mode's typical call (us) of an exploration's blocks' means round by round: the median of its blocks'
    means. A block's mean counts the mode's calls that wait now and then (in every block); the median over blocks
    leaves out one that something else disturbed (one block in twelve read 18x a mode's steady time)."""
    modes = dict.fromkeys(m for r in rounds for m in r)
    return {m: float(np.median([r[m] for r in rounds if m in r])) for m in modes}


def chosen_mode(rounds: Sequence[dict[str, float]], live: Sequence[str]) -> str:
    """The mode an exploration chooses of those `live`, from each mode's blocks' means round by round: ORT's
    defaults unless modes replace them (`replaces_defaults` on their typical calls, over the rounds both ran), then
    the lowest typical call of those; once the defaults left the rotation the lowest.
    benchmarks/choice_replay.py applies it to the explorations a host_pairs run recorded."""
    figures, default = typical_calls(rounds), ort_modes.DEFAULT
    if default not in live:
        return min(live, key=figures.__getitem__)
    clear = [default] + [
        m for m in live if m != default and replaces_defaults(m, figures[m] / figures[default], round_ratios(rounds, m))
    ]
    return min(clear, key=figures.__getitem__)


def round_ratios(rounds: Sequence[dict[str, float]], mode: str) -> list[float]:
    """log(mode's block mean / ORT's defaults') in each round both ran."""
    return [float(np.log(r[mode] / r[ort_modes.DEFAULT])) for r in rounds if mode in r and ort_modes.DEFAULT in r]


def replaces_defaults(mode: str, ratio: float, log_ratios: Sequence[float]) -> bool:
    """The rule by which `mode` replaces ORT's defaults, given its typical call over theirs (`ratio`; tune's: its
    median visit, a visit's mean call) and its per-round log ratios to them: faster in its rounds by a one-sided
    test at level LEAVE_P (`faster_in_rounds`), ort-seq (SPINLESS) by any lower ratio, a mode with a pool by
    LEAVE_GAIN. The run-time choice's and tune's: every test passed (`defaults_kept_because` names those that
    failed)."""
    return not defaults_kept_because(mode, ratio, log_ratios)


def defaults_kept_because(mode: str, ratio: float, log_ratios: Sequence[float]) -> str:
    """The tests of `replaces_defaults` that `mode` failed, with its figures; "" when it passed them all. The log
    names them: a stranger's detector logged ort-seq-2t at half the defaults' median, not chosen, and the log
    did not say whether its mean or its rounds kept it out."""
    faster = sum(r < 0.0 for r in log_ratios)
    most = 1.0 if mode in SPINLESS else 1.0 - LEAVE_GAIN
    failed = []
    if ratio >= most:
        failed.append(f"its typical call {ratio:.3f}x ORT's defaults', not under {most:g}x")
    if not choice_stats.faster_in_rounds(log_ratios, LEAVE_P):
        failed.append(f"faster in {faster} of {len(log_ratios)} rounds, not at p <= {LEAVE_P:.3g}")
    return "; ".join(failed)


def feed_size(input_feed: dict[str, Any]) -> float:
    """The elements of a call's inputs (at least 1): the size the choice compares calls by. Every call
    while choosing counts them: math.prod of the shapes, 1 us for two arrays where np.prod took 18
    (a stranger's 170 us DTLN calls ran 55 us slower while choosing)."""
    total = 0
    for value in input_feed.values():
        shape = value.shape() if isinstance(value, ort.OrtValue) else getattr(value, "shape", None)
        total += math.prod(np.shape(value) if shape is None else shape)
    return float(max(total, 1))


@dataclass
class Watch:
    """An ort-par session's calls, as at the median input size (`trend`), in windows of WATCH_CALLS."""

    limit_us: float  # a window's mean above this gives way to ORT's defaults
    trend: choice_stats.SizeTrend
    spent_us: float = 0.0
    calls: int = 0

    def record(self) -> dict[str, float]:
        """What the cache keeps of it: later sessions that take ort-par from the cache watch it too."""
        return {"defaults_mean_us": self.limit_us / FALLBACK_RATIO, **dataclasses.asdict(self.trend)}

    @classmethod
    def of_record(cls, record: Any) -> Watch | None:
        """The watch a cache entry's record describes; None for none or a malformed one."""
        try:
            trend = choice_stats.SizeTrend(float(record["median_log_size"]), float(record["b1"]), float(record["b2"]))
            return cls(FALLBACK_RATIO * float(record["defaults_mean_us"]), trend)
        except (KeyError, TypeError, ValueError):
            return None

    def size_of(self, input_feed: dict[str, Any]) -> float:
        """A call's size as the trend weighs it: its inputs' elements (`feed_size`) where time grows with size, else
        1 (not counted: calls of one size are compared as timed)."""
        return feed_size(input_feed) if self.trend.b1 or self.trend.b2 else 1.0

    def over(self, us: float, size: float) -> float | None:
        """Add a call of `us` on inputs of `size`; a window's mean (us) when it ends above the limit, else None."""
        self.spent_us += us / self.trend.factor_of(size)
        self.calls += 1
        if self.calls < WATCH_CALLS:
            return None
        mean, self.spent_us, self.calls = self.spent_us / self.calls, 0.0, 0
        return mean if mean > self.limit_us else None


class Delegating:
    """An onnxruntime.InferenceSession stand-in whose calls and attributes are `_current`'s, the session
    it runs now; an IOBinding runs in the session that made it."""

    _current: ort.InferenceSession

    def __init__(self, current: ort.InferenceSession) -> None:
        self._current = current
        self._bound: weakref.WeakKeyDictionary[Any, ort.InferenceSession] = weakref.WeakKeyDictionary()

    def io_binding(self) -> Any:
        """The current session's IOBinding; `run_with_iobinding` runs it in that session, whichever mode
        is chosen later (ORT: "IOBinding must be used with the session that created it")."""
        binding = self._current.io_binding()
        self._bound[binding] = self._current
        return binding

    def run_with_iobinding(self, iobinding: Any, run_options: Any = None) -> Any:
        return self._bound.get(iobinding, self._current).run_with_iobinding(iobinding, run_options)

    def __getattr__(self, name: str) -> Any:
        if "_current" not in self.__dict__:  # copy.copy makes the object before its fields: no recursion
            raise AttributeError(name)
        return getattr(self._current, name)


class WatchedSession(Delegating):
    """A session in ort-par whose calls are watched (`Watch`): from a window of them over the watch's limit
    on, a session in ORT's defaults (`make_defaults`, called once; None: none made; or in `fallback`) runs them, and
    `gave_way` is told the window's mean and the defaults' mean the limit came from (us). The ort-par a
    choice takes and the one later sessions take from the cache alike: load that comes after the choice
    makes some of ort-par's calls wait (FALLBACK_RATIO)."""

    def __init__(
        self,
        session: ort.InferenceSession,
        watch: Watch,
        make_defaults: Callable[[], ort.InferenceSession | None],
        gave_way: Callable[[float, float], None],
        clock: Callable[[], int] = time.perf_counter_ns,
        fallback: str = ort_modes.DEFAULT,
    ) -> None:
        super().__init__(session)
        self.mode, self._fallback = PARALLEL, fallback
        self._watch: Watch | None = watch
        self._make_defaults, self._gave_way, self._clock = make_defaults, gave_way, clock
        self._lock = threading.Lock()

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        watch, session = self._watch, self._current
        if watch is None:
            return session.run(output_names, input_feed, run_options)
        t0 = self._clock()
        out = session.run(output_names, input_feed, run_options)
        us = (self._clock() - t0) / 1000.0
        # no lock per call (calls from several threads may miscount a window by a call or two)
        mean = watch.over(us, watch.size_of(input_feed))
        if mean is not None:
            with self._lock:
                if self._watch is watch:
                    self._give_way(watch, mean)
        return out

    def _give_way(self, watch: Watch, mean_us: float) -> None:
        self._watch = None
        defaults = self._make_defaults()
        if defaults is None:  # ORT failed to make it (and said why): ort-par runs on
            return
        self._current, self.mode = defaults, self._fallback
        self.run = self._current.run  # type: ignore[method-assign]
        self._gave_way(mean_us, watch.limit_us / FALLBACK_RATIO)


class PinnedPoolSession(Delegating):
    """A session in ORT's defaults whose calls made from a CPU its pool's threads are pinned to (`dispatched`) run in
    `beside`, a session in ort-seq: there a call waits a time slice for the pool thread the caller's thread holds the
    CPU from (pool_cpus.py); ort-seq has no pool. The caller's CPU costs 0.13 us a call to read. Without `beside`,
    the first such call has `make_beside` make it in another thread (an application whose thread never sits there
    holds no second session) and runs in ORT's defaults, as the calls do until it is made or where ORT fails to make
    it (`log` says why). An IOBinding runs in ORT's defaults."""

    def __init__(
        self,
        session: ort.InferenceSession,
        beside: ort.InferenceSession | None,
        pool: pool_cpus.PinnedPool,
        log: Log,
        make_beside: Callable[[], ort.InferenceSession] | None = None,
    ) -> None:
        super().__init__(session)
        self.mode, self.beside, self.pool = ort_modes.DEFAULT, beside, pool
        self._make_beside, self._log = make_beside, log
        self._lock = threading.Lock()

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        if pool_cpus.current_cpu() in dispatched(self.pool):
            beside = self.beside
            if beside is not None:
                return beside.run(output_names, input_feed, run_options)
            self._start_making()
        return self._current.run(output_names, input_feed, run_options)

    def _start_making(self) -> None:
        with self._lock:  # once, whichever thread calls first
            make, self._make_beside = self._make_beside, None
        if make is not None:
            threading.Thread(target=self._made, args=(make,), name=f"hexfuse {BESIDE} session").start()

    def _made(self, make: Callable[[], ort.InferenceSession]) -> None:
        try:
            beside = make()
        except Exception as exc:  # noqa: BLE001 - any failure of ORT's: the calls run in ORT's defaults
            self._log(
                f"hexfuse: ONNX Runtime mode {ort_modes.DEFAULT} for every call: a session in {BESIDE} failed: {exc}"
            )
            return
        cpus = ",".join(map(str, sorted(dispatched(self.pool))))
        self._log(
            f"hexfuse: ONNX Runtime mode {ort_modes.DEFAULT}: its calls from CPU {cpus}, its pool's, run in {BESIDE}"
        )
        self.beside = beside  # from here on


def dispatched(pool: pool_cpus.PinnedPool | None) -> frozenset[int]:
    """The CPUs whose calls a session in ORT's defaults runs in ort-seq (`PinnedPoolSession`): those its pool pinned,
    where they are at most PINNED_SHARE_MAX of the process's; else none."""
    pinned = pool.cpus() if pool is not None else frozenset()
    return pinned if len(pinned) <= PINNED_SHARE_MAX * len(pool.process if pool else ()) else frozenset()


class ChallengedSession(Delegating):
    """A session in a chosen mode other than ort-par whose calls are watched (`Watch`) for a slowdown that ort-par, the
    mode the choice passed over, may not share (one call in CHALLENGE_EVERY timed): from a window of them over the
    watch's limit on, the next WATCH_CALLS calls run in ort-par's session (`parallel`, kept for this). Where they
    average LEAVE_GAIN less than that window, ort-par runs the calls from then on, watched as a chosen one is
    (`WatchedSession`, giving way to the chosen mode from FALLBACK_RATIO x `chosen_us`, its mean while choosing);
    else the chosen mode runs on, unwatched. `switched` is told the mode each change ends in and why. One trial per
    session: a load that comes and goes cannot make it alternate. `running` is the mode of the calls it runs now."""

    def __init__(
        self,
        session: ort.InferenceSession | PinnedPoolSession,
        mode: str,
        parallel: ort.InferenceSession,
        watch: Watch,
        chosen_us: float,
        switched: Callable[[str, str], None],
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        super().__init__(session)
        self.mode = self.running = mode
        self._parallel: ort.InferenceSession | None = parallel
        self._watch, self._trial = watch, Watch(0.0, watch.trend)
        self._chosen_us, self._slow_us = chosen_us, 0.0
        self._switched, self._clock = switched, clock
        self._lock = threading.Lock()
        self._calls = 0

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        parallel, trying = self._parallel, self.running == PARALLEL
        self._calls += 1
        if parallel is None or not trying and self._calls % CHALLENGE_EVERY:  # decided, or a call not timed
            return self._current.run(output_names, input_feed, run_options)
        t0 = self._clock()
        out = (parallel if trying else self._current).run(output_names, input_feed, run_options)
        us = (self._clock() - t0) / 1000.0
        # no lock per call (calls from several threads may miscount a window by a call or two)
        mean = (self._trial if trying else self._watch).over(us, self._watch.size_of(input_feed))
        if mean is not None:
            with self._lock:
                if self._parallel is parallel and trying == (self.running == PARALLEL):
                    if trying:
                        self._decide(parallel, mean)
                    else:  # the next window runs in ort-par
                        self._slow_us, self.running = mean, PARALLEL
        return out

    def _decide(self, parallel: ort.InferenceSession, trial_us: float) -> None:
        chosen, was, self._parallel = self._current, self.mode, None
        slow = f"{WATCH_CALLS} calls in {was} took {self._slow_us:.0f} us on average ({self._chosen_us:.0f} choosing)"
        if trial_us < (1.0 - LEAVE_GAIN) * self._slow_us:
            limit = Watch(FALLBACK_RATIO * self._chosen_us, self._watch.trend)
            self._current = WatchedSession(parallel, limit, lambda: chosen, self._fell_back, self._clock, was)
            self.mode = PARALLEL  # running: already, the trial
            why = f"runs the calls from now on (not remembered): {slow}, the {WATCH_CALLS} after them in {PARALLEL}"
        else:
            self.running = was
            why = f"kept: {slow}, the {WATCH_CALLS} after them in {PARALLEL} no faster"
        self.run = self._current.run  # type: ignore[method-assign]
        self._switched(self.mode, f"{why} {trial_us:.0f} us")

    def _fell_back(self, mean_us: float, chosen_us: float) -> None:
        self.mode = self.running = self._current.mode
        self._switched(
            self.mode,
            f"runs the calls again: {WATCH_CALLS} calls in {PARALLEL} took {mean_us:.0f} us on average, over "
            f"{FALLBACK_RATIO:g}x {self.mode}'s {chosen_us:.0f} us while choosing",
        )


class ChoosingSession(Delegating):
    """An onnxruntime.InferenceSession that chooses its execution mode during its first calls.

    `run` runs each call in the session (`sessions`) of the mode `Exploration` says, timing it
    with `clock` (ns), until a mode is chosen; from then on it is the `run` of that mode's session. Every
    other attribute is the current session's (ORT's defaults' while choosing). `choosing` says
    whether the choice is still open; `mode` is the mode chosen (None before); `exploration` its
    figures. A session of ort-par (PARALLEL) among `sessions` joins the rotation as `Exploration` admits it.
    `sessions` holds one entry per mode, ORT's defaults' made; `make(mode)` makes a None one in another thread
    when that mode's first block is due, the calls running in ORT's defaults outside the blocks until it is
    made (a process that ends within the first block, or a mode that never joins, costs no session); where
    it fails, ORT's defaults are kept. Where ort-par is chosen, ORT's defaults' session is kept and the calls
    are watched (`WatchedSession`): from a window FALLBACK_RATIO times the defaults' mean on, the defaults run
    them. The cache keeps the watch (`Watch.record`) for later sessions that take ort-par without choosing."""

    def __init__(
        self,
        sessions: dict[str, ort.InferenceSession | None],
        key: str,
        log: Log,
        clock: Callable[[], int] = time.perf_counter_ns,
        make: Callable[[str], ort.InferenceSession] | None = None,
        pool: pool_cpus.PinnedPool | None = None,
    ) -> None:
        defaults = sessions[CANDIDATES[0]]
        if defaults is None:
            raise ValueError(f"{CANDIDATES[0]}'s session is made before the first call")
        super().__init__(defaults)
        self._sessions, self._make = sessions, make
        always = [m for m in sessions if m != PARALLEL]
        self.exploration = Exploration(always, joining=[m for m in sessions if m == PARALLEL])
        self._calls = 0
        self._lock = threading.Lock()
        self._making: set[str] = set()  # modes whose session another thread is making
        self._key, self._log, self._clock = key, log, clock
        self._pool = pool if BESIDE in sessions else None  # ORT's defaults' pool
        self.choosing = True
        self.mode: str | None = None

    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        with self._lock:  # the session is taken here: another thread's last call may release the rest
            self._calls += 1
            mode = self.exploration.mode() if self.choosing else None
            session = self._prepared(mode) if mode else None
            if mode == ort_modes.DEFAULT and pool_cpus.current_cpu() in dispatched(self._pool):
                session = self._sessions[BESIDE] or session  # as the choice would run it (`PinnedPoolSession`)
        if mode is None or session is None:  # chosen, or the mode's session is being made: the current one's
            out = self._current.run(output_names, input_feed, run_options)
            if mode:
                with self._lock:
                    if self.choosing:
                        self.exploration.ran_aside(self._clock())
            return out
        t0 = self._clock()
        out = session.run(output_names, input_feed, run_options)
        t1 = self._clock()
        with self._lock:
            if self.choosing:
                self.exploration.record(mode, t0, t1, feed_size(input_feed))
                if self.exploration.chosen:
                    self._choose(self.exploration.chosen)
        return out

    def _prepared(self, mode: str) -> ort.InferenceSession | None:
        """`mode`'s session; None while it is made in another thread, started here (`_make_aside`): ORT
        takes as long to make a session as the model's size asks (tinypron's 6369 nodes: 1.3 s), which a
        call of the application's would otherwise wait for. Called under the lock."""
        session = self._sessions[mode]
        if session is None and mode not in self._making:
            self._making.add(mode)
            threading.Thread(target=self._make_aside, args=(mode,), name=f"hexfuse {mode} session").start()
        return session

    def _make_aside(self, mode: str) -> None:
        """Make `mode`'s session (not a daemon thread: a process that ends meanwhile waits for it, not
        ORT for a thread stopped inside it); where ORT fails, ORT's defaults are kept."""
        try:
            session = self._make(mode)  # type: ignore[misc]  # None only with every session given
        except Exception as exc:  # any failure of ORT's: the application's calls run all the same
            with self._lock:
                if self.choosing:
                    self._settle(ort_modes.DEFAULT, self._current)
                    self._log(f"hexfuse: ONNX Runtime mode {ort_modes.DEFAULT} kept: a session in {mode} failed: {exc}")
            return
        with self._lock:
            if self.choosing:
                self._sessions[mode] = session

    def _settle(self, mode: str, session: ort.InferenceSession | WatchedSession | PinnedPoolSession) -> None:
        """From now on every call is `session`'s own run, no detour; the other sessions are released."""
        self._current, self.mode, self.choosing = session, mode, False
        self.run = session.run  # type: ignore[method-assign]
        self._sessions = {}

    def _choose(self, mode: str) -> None:
        explored = self.exploration
        means, default = explored.means(), ort_modes.DEFAULT
        defaults, chosen_session = self._sessions[default], self._sessions[mode] or self._current
        beside = self._sessions.get(BESIDE)
        pool = self._pool if mode == default and beside is not None else None
        beside_cpus = dispatched(pool)
        if pool is not None and beside_cpus:
            chosen_session = PinnedPoolSession(chosen_session, beside, pool, self._log)
        defaults_mean, trend = means.get(default), explored.size_trend()  # a refit of every call: once
        watch = Watch(FALLBACK_RATIO * defaults_mean, trend) if defaults_mean else None
        if mode == PARALLEL and defaults is not None and watch is not None:
            self._settle(mode, WatchedSession(chosen_session, watch, lambda: defaults, self._gave_way, self._clock))
        else:
            self._settle(mode, self._challenged(mode, chosen_session, means, trend) or chosen_session)
        typical = typical_calls(explored.rounds)
        figures = ", ".join(f"{m} {t:.1f}" for m, t in typical.items())
        lowest = min(explored.live, key=typical.__getitem__)
        if lowest != mode:  # ORT's defaults are live and `lowest` did not replace them: say by which test
            figures += f"; not {lowest}: " + defaults_kept_because(
                lowest, typical[lowest] / typical[default], round_ratios(explored.rounds, lowest)
            )
        record = {"watch": watch.record()} if watch is not None else {}
        chosen, later, where = mode_cache.remember_choice(
            self._key, mode, self._log, typical_us=typical, calls=self._calls, **record
        )
        self._log(
            f"hexfuse: ONNX Runtime mode {mode} chosen at run time (typical call, us: {figures}; choices here: "
            f"{', '.join(chosen)}: {later}){beside_note(beside_cpus) if beside_cpus else ''}; {where}"
        )

    @property
    def running(self) -> str | None:
        """The mode of the calls it runs now: the exploration's, a trial's of ort-par (`ChallengedSession`), or
        the mode chosen."""
        return self.exploration.mode() or getattr(self._current, "running", self.mode)

    def _challenged(
        self,
        mode: str,
        session: ort.InferenceSession | PinnedPoolSession,
        means: dict[str, float],
        trend: choice_stats.SizeTrend,
    ) -> ChallengedSession | None:
        """The chosen mode's session watched against ort-par (`ChallengedSession`), where ort-par was explored
        and came within CHALLENGE_RATIO of it on calls of CHALLENGE_MIN_US at least; else None."""
        parallel, par_us, mode_us = self._sessions.get(PARALLEL), means.get(PARALLEL), means.get(mode)
        if mode == PARALLEL or parallel is None or par_us is None or mode_us is None or mode_us < CHALLENGE_MIN_US:
            return None
        if par_us > CHALLENGE_RATIO * mode_us:
            return None
        watch = Watch(max(CHALLENGE_RATIO * mode_us, par_us), trend)
        return ChallengedSession(session, mode, parallel, watch, mode_us, self._switched, self._clock)

    def _switched(self, mode: str, why: str) -> None:
        """A `ChallengedSession`'s trial of ort-par, or its fall back from it, ended in `mode`."""
        self.mode = mode
        self._log(f"hexfuse: ONNX Runtime mode {mode} {why}")

    def _gave_way(self, mean_us: float, defaults_us: float) -> None:
        """The chosen ort-par's calls gave way to ORT's defaults (`WatchedSession`)."""
        self.mode = ort_modes.DEFAULT
        gave_way_to_defaults(self._key, mean_us, defaults_us, self._log)


def gave_way_to_defaults(key: str, mean_us: float, defaults_us: float, log: Log) -> None:
    """Remember and log that an ort-par session's last WATCH_CALLS calls, `mean_us` on average, gave way to
    ORT's defaults, whose mean call while choosing was `defaults_us`."""
    chosen, later, where = mode_cache.remember_choice(key, ort_modes.DEFAULT, log)
    log(
        f"hexfuse: ONNX Runtime mode {PARALLEL} left for ORT's defaults: {WATCH_CALLS} calls took {mean_us:.0f} us "
        f"on average, over {FALLBACK_RATIO:g}x the defaults' {defaults_us:.0f} us while choosing (choices here: "
        f"{', '.join(chosen)}: {later}); {where}"
    )


def session(
    source: str | bytes,
    model: str | os.PathLike[str] | bytes,
    so: ort.SessionOptions,
    providers: list[str],
    log: Log,
    graph: onnx.GraphProto,
) -> ort.InferenceSession | ChoosingSession | WatchedSession:
    """A session of `source` that chooses ORT's mode at run time (`so`'s other fields kept), a watched
    ort-par where the cache has settled on it (`remembered_parallel`), or a plain one in ORT's defaults
    when the providers are not the CPU's alone. `model`: what the user gave, whose digest keys the cache
    (`preset` left the mode to this); `graph`: its main graph
    (external data not needed), whose `concurrent_work` decides whether ort-par is prepared."""
    if providers != ["CPUExecutionProvider"]:
        log("hexfuse: ONNX Runtime mode: ORT's defaults, not chosen at run time (providers other than the CPU's)")
        return ort.InferenceSession(source, sess_options=so, providers=providers)
    key = mode_cache.model_key(model)
    found = mode_cache.cached_mode(key, log)
    watch = remembered_watch(found[1] if found else None)
    if watch is not None:
        return remembered_parallel(source, key, watch, so, providers, log)
    if found and mode_cache.settled(mode_cache.history(found[1])) == ort_modes.DEFAULT:
        return remembered_defaults(source, so, providers, log)
    parallel = concurrent_work(graph)
    modes = (*CANDIDATES, PARALLEL) if parallel else CANDIDATES
    sessions: dict[str, ort.InferenceSession | None] = dict.fromkeys(modes)
    # `so` itself: ORT's defaults; its pool's pinned CPUs found as it is made
    defaults, pool = pool_cpus.made_pinning(lambda: _session(source, so, CANDIDATES[0], providers))
    sessions[CANDIDATES[0]] = defaults
    try:
        clones = {m: options_copy(so) for m in modes[1:]}  # made here: the application's `so` is never changed
    except Exception as exc:  # noqa: BLE001 - any failure of ORT's: the session as given, no choice
        log(f"hexfuse: ONNX Runtime mode: ORT's defaults, not chosen at run time (options not copied: {exc})")
        return defaults
    joins = (
        f"{PARALLEL} joins from the second round"
        if parallel
        else f"not {PARALLEL}: no two nodes of the graph that compute can run at once"
    )
    log(
        f"hexfuse: choosing ONNX Runtime's mode at run time: the first calls (up to {ROUNDS} rounds of "
        f"{BLOCK} calls and {BLOCK_S * 1000:g} ms per mode) alternate among "
        f"{', '.join(CANDIDATES)}; {joins} (no mode from a tuning record made here; "
        f"{ENV_MODE}=off keeps ORT's defaults)"
    )
    return ChoosingSession(
        sessions,
        key,
        log,
        make=lambda mode: _session(source, clones[mode], mode, providers),
        pool=pool,
    )


def remembered_defaults(
    source: str | bytes, so: ort.SessionOptions, providers: list[str], log: Log
) -> ort.InferenceSession | PinnedPoolSession:
    """A session in ORT's defaults, the mode the cache has settled on for the model, whose calls made from the CPUs
    their pool pinned run in ort-seq (`PinnedPoolSession`, its session made when the first such call comes)."""
    defaults, pool = pool_cpus.made_pinning(lambda: _session(source, so, ort_modes.DEFAULT, providers))
    if not pool.threads:  # no pool: no thread to wait for
        return defaults
    beside_so = options_copy(so)
    return PinnedPoolSession(defaults, None, pool, log, lambda: _session(source, beside_so, BESIDE, providers))


def beside_note(cpus: frozenset[int]) -> str:
    """What the log says of a chosen `PinnedPoolSession`."""
    return f"; its calls from CPU {','.join(map(str, sorted(cpus)))}, its pool's, run in {BESIDE}"


def remembered_parallel(
    source: str | bytes, key: str, watch: Watch, so: ort.SessionOptions, providers: list[str], log: Log
) -> WatchedSession:
    """A session in ort-par, the mode the cache has settled on for the model, watched as a choice of it is
    (`WatchedSession`); ORT's defaults' session is made only where it gives way."""
    defaults_so = options_copy(so)

    def make_defaults() -> ort.InferenceSession | None:
        try:
            return _session(source, defaults_so, ort_modes.DEFAULT, providers)
        except Exception as exc:  # noqa: BLE001 - any failure of ORT's: the application's calls run on in ort-par
            log(f"hexfuse: ONNX Runtime mode {PARALLEL} kept, unwatched: a session in ORT's defaults failed: {exc}")
            return None

    session = WatchedSession(
        _session(source, options_copy(so), PARALLEL, providers),
        watch,
        make_defaults,
        lambda mean_us, defaults_us: gave_way_to_defaults(key, mean_us, defaults_us, log),
    )
    log(
        f"hexfuse: ONNX Runtime mode {PARALLEL}'s calls watched: ORT's defaults run them from {WATCH_CALLS} calls "
        f"over {FALLBACK_RATIO:g}x their {watch.limit_us / FALLBACK_RATIO:.0f} us on average while choosing"
    )
    return session


def concurrent_work(graph: onnx.GraphProto) -> bool:
    """Whether two nodes of `graph` that compute have no path between them: work ORT_PARALLEL can run
    at once. Not computing: a node of constants alone (ORT folds it), shape arithmetic (a Shape or Size
    and what computes from shapes and constants alone), VIEW_OPS. A FusedHexPair holds two independent
    branches, and so does a node whose subgraph (an If's branch, a Loop's body) has such work: ORT_PARALLEL
    runs a subgraph's nodes at once too (silero_vad_legacy and whisper_decoder_merged, whose work is in an If:
    ort-par 0.69x and 0.79x ORT's defaults in host_pairs --defaults, session 40). One pass over the nodes
    (in topological order, as ONNX has them), each tensor carrying the computing nodes upstream of it as a
    bitmask: a computing node with fewer upstream than came before it is independent of one of them."""
    constant = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    shapes: set[str] = set()
    upstream: dict[str, int] = {}
    computing = 0  # computing nodes so far
    for node in graph.node:
        if node.domain == DOMAIN or any(concurrent_work(g) for g in subgraphs(node)):
            return True
        reads = [t for t in node.input if t and t not in constant]
        if not reads:
            constant.update(node.output)
            continue
        mask = 0
        for t in reads:
            mask |= upstream.get(t, 0)
        if node.op_type in SHAPE_SOURCES or all(t in shapes for t in reads):
            shapes.update(node.output)
        elif node.op_type not in VIEW_OPS:
            if mask.bit_count() < computing:
                return True
            mask |= 1 << computing
            computing += 1
        upstream.update(dict.fromkeys(node.output, mask))
    return False


def _session(source: str | bytes, so: ort.SessionOptions, mode: str, providers: list[str]) -> ort.InferenceSession:
    """A session in `mode`, of options made for it (`options_copy`)."""
    return ort.InferenceSession(source, sess_options=ort_modes.apply(so, mode), providers=providers)


def options_copy(so: ort.SessionOptions) -> ort.SessionOptions:
    """A SessionOptions equal to `so` and apart from it (ORT's cannot be copied or pickled): the options
    of a session of a one-node model made with it, 3 ms. A mode's session was made of the application's
    own `so`, set to the mode meanwhile, in another thread: a stranger's app saw it change under it (3 of
    140 of its own sessions took one intra-op thread)."""
    return ort.InferenceSession(_one_node(), sess_options=so, providers=["CPUExecutionProvider"]).get_session_options()


@functools.cache
def _one_node() -> bytes:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "options", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8)
    return bytes(model.SerializeToString())
