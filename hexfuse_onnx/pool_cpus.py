"""The CPUs an ONNX Runtime session's pool threads are pinned to, and the CPU a call starts on (Linux).

ORT's defaults (intra-op threads not set) make one pool thread per core beyond the caller's and pin each to its
core; a thread count set explicitly pins none. The caller's thread is not pinned: where it sits on a pool thread's
CPU, a call waits about a time slice for that thread to run. On the 2-vCPU Intel VM the one pool thread sat on CPU
1, and calls made from there stalled on 15% (gtcrn_stream) and 4% (frspell_lemma_int8) of them, none from CPU 0;
with the caller held on CPU 1 trueocr_rec ran at 3.0x ort-seq's time (benchmarks/visit_positions.py,
docs/DROPIN.md). ort-seq has no pool, so nothing to wait for: `mode_choice.PinnedPoolSession` runs such calls in it.
Elsewhere than Linux nothing is found: no CPUs, no dispatch.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

TASKS = Path("/proc/self/task")
READS = 100  # a pool's threads are read until pinned this many times at most ...
READ_EVERY_S = 0.01  # ... at most this often (a read: ~23 us a thread): a second of calls
T = TypeVar("T")


def _sched_getcpu() -> Callable[[], int] | None:
    try:
        return ctypes.CDLL(None).sched_getcpu
    except (AttributeError, OSError):
        return None


current_cpu = _sched_getcpu() or (lambda: -1)  # 0.13 us a call (ctypes); -1 where it cannot be told


def parse_cpu_list(text: str) -> frozenset[int]:
    """Linux's CPU list ("0-2,5") as a set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def allowed_cpus(status: str) -> frozenset[int]:
    """The Cpus_allowed_list of a thread's /proc status text; empty when it has none."""
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1])
    return frozenset()


def thread_ids() -> frozenset[str]:
    """This process's threads (empty where /proc is not)."""
    try:
        return frozenset(p.name for p in TASKS.iterdir())
    except OSError:
        return frozenset()


def pinned_among(threads: frozenset[str], process_cpus: frozenset[int]) -> frozenset[int]:
    """The CPUs the `threads` are pinned to: each one's allowed CPUs where they are fewer than the process's."""
    pinned: set[int] = set()
    for tid in threads:
        try:
            cpus = allowed_cpus((TASKS / tid / "status").read_text())
        except OSError:  # the thread ended
            continue
        if cpus and cpus < process_cpus:
            pinned |= cpus
    return frozenset(pinned)


class PinnedPool:
    """The CPUs one session's pool threads (`threads`) are pinned to, read from /proc when asked until found: ORT
    1.32 pins a pool thread from inside it, so right after the session is made it may not be yet (beside a busy
    process, 138 of 200 sessions of ORT's defaults had not). Read at most once per READ_EVERY_S, READS times (a pool
    that stays unpinned costs no more); `process` is the CPUs the process may run on."""

    def __init__(
        self, threads: frozenset[str], found: frozenset[int] = frozenset(), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threads, self.process, self._clock = threads, process_cpus(), clock
        self._found = found  # known already: no read
        self._reads_left, self._next = READS, 0.0

    def cpus(self) -> frozenset[int]:
        if self._found or not self.threads:
            return self._found
        now = self._clock()
        if self._reads_left and self._next <= now:
            self._reads_left, self._next = self._reads_left - 1, now + READ_EVERY_S
            self._found = pinned_among(self.threads, self.process)
        return self._found


def made_pinning(make: Callable[[], T]) -> tuple[T, PinnedPool]:
    """`make()`'s result and the pool of the threads it started (an ORT session's)."""
    before = thread_ids()
    made = make()
    return made, PinnedPool(thread_ids() - before)


def process_cpus() -> frozenset[int]:
    """The CPUs this process may run on (empty where the platform does not say)."""
    return frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
