"""Each ORT mode's calls by their place in a visit after a rest, the evidence for the figures host_pairs scores
and the run-time choice compares (a visit's mean call, a mode's typical call: hexfuse_onnx/mode_choice.py, RULE 11),
and ORT's defaults as the run-time choice runs them (defaults+seq, RULE 12):

    python benchmarks/visit_positions.py gtcrn_stream frspell_lemma_int8 --visits 60 --calls 6

Per model, --visits rounds, each visiting every mode once in a shuffled order as host_pairs does (a rest until
the process is quiet, then --calls calls). Per mode and place in the visit: the median call (us), the mean, and
the share of calls over twice the mode's median at later places (its steady state). A median ranks the modes by
their usual call; where a mode's first calls after a rest, or some of its later ones, wait, only the mean sees it.
Then per mode the CPUs its pool threads may run on (ORT pins the threads of its default pool, one per core after
the first) and its calls after a visit's first by the CPU the calling thread started them on, with the share that
stalled (over 2.5x their median): on the 2-vCPU Intel VM ORT's defaults stalled on a share of the calls made from
CPU 1, where their one pool thread is pinned, and on almost none made from CPU 0 (docs/DROPIN.md, session 48).
defaults+seq runs those calls in ort-seq (mode_choice.PinnedPoolSession). Last, each one's mean call over all
visits against the lowest: what an application waits for.
OPENBLAS_* are removed from this process.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from hexfuse_onnx.tools.bench import reexec_without_blas_tuning  # noqa: E402  (loads no BLAS)

if __name__ == "__main__":
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], "HEXFUSE_VISIT_POSITIONS_REEXECED")

# ruff: noqa: E402
import argparse
import glob
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hexfuse_onnx import mode_choice, ort_modes, pool_cpus
from hexfuse_onnx.tools import interleaved, isolated
from hexfuse_onnx.tools.zoo import resolve
from models import real

STALL = 2.5  # a call over this many times its mode's median stalled (a time slice: 3-8 ms on 0.3-2 ms calls)
BESIDE = "defaults+seq"  # ORT's defaults, their pool's CPUs' calls in ort-seq: what the run-time choice runs (RULE 12)


def thread_cpus() -> dict[str, str]:
    """This process's threads and the CPUs each may run on (Linux's Cpus_allowed_list; {} elsewhere)."""
    found = {}
    for task in glob.glob("/proc/self/task/*/status"):
        with open(task) as f:
            allowed = [line.split()[1] for line in f if line.startswith("Cpus_allowed_list")]
        found[task.split("/")[-2]] = allowed[0] if allowed else "?"
    return found


def by_position(
    sessions: dict[str, Any], feeds: dict[str, Any], visits: int, calls: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each mode's calls (us) and the CPU the caller started each on, one row per visit, one column per place."""
    times: dict[str, list[list[float]]] = {m: [] for m in sessions}
    cpus: dict[str, list[list[int]]] = {m: [] for m in sessions}
    rng = random.Random(0)
    for _ in range(visits):
        order = list(sessions)
        rng.shuffle(order)
        for mode in order:
            interleaved.rest_until_quiet()
            row, where = [], []
            for _ in range(calls):
                where.append(pool_cpus.current_cpu())
                t0 = time.perf_counter_ns()
                sessions[mode].run(None, feeds)
                row.append((time.perf_counter_ns() - t0) / 1000.0)
            times[mode].append(row)
            cpus[mode].append(where)
    return {m: np.asarray(r) for m, r in times.items()}, {m: np.asarray(c) for m, c in cpus.items()}


def report(name: str, times: dict[str, np.ndarray]) -> None:
    print(f"{name}: per place in a visit after a rest, us (median / mean; share over 2x the mode's median)")
    for mode, a in times.items():
        steady = float(np.median(a[:, 2:])) if a.shape[1] > 2 else float(np.median(a))
        places = "  ".join(
            f"{np.median(a[:, k]):6.0f}/{a[:, k].mean():6.0f} ({(a[:, k] > 2 * steady).mean():.0%})"
            for k in range(a.shape[1])
        )
        print(f"  {mode:<12} {places}")


def report_cpus(times: dict[str, np.ndarray], cpus: dict[str, np.ndarray], pools: dict[str, list[str]]) -> None:
    print(f"  calls after a visit's first by the CPU the caller started them on: calls (share over {STALL:g}x median)")
    for mode, a in times.items():
        later, where = a[:, 1:], cpus[mode][:, 1:]  # a visit's first call is slow in every mode (its caches)
        stalled = later > STALL * float(np.median(later))
        by_cpu = "  ".join(
            f"CPU {c}: {int((where == c).sum())} ({stalled[where == c].mean():.0%})" for c in np.unique(where)
        )
        print(f"  {mode:<12} pool threads on CPUs {','.join(pools[mode]) or '-':<8} {by_cpu}")


def report_means(times: dict[str, np.ndarray]) -> None:
    """Each configuration's mean call over all its visits, over the lowest: what an application waits for."""
    means = {m: float(a.mean()) for m, a in times.items()}
    lowest = min(means.values())
    print("  mean call, all visits, over the lowest: " + "  ".join(f"{m} {v / lowest:.3f}" for m, v in means.items()))


def sessions_of(path: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A session per ORT mode and one as the run-time choice runs ORT's defaults (BESIDE, where they have a pool),
    and the CPUs each one's pool threads may run on."""
    sessions, pools = {}, {}
    for mode in ort_modes.MODES:
        before = thread_cpus()
        sessions[mode] = isolated.ort_session(str(path), mode)
        pools[mode] = sorted(cpus for t, cpus in thread_cpus().items() if t not in before)
    defaults, pool = pool_cpus.made_pinning(lambda: isolated.ort_session(str(path), ort_modes.DEFAULT))
    if pool.threads:
        beside = isolated.ort_session(str(path), mode_choice.BESIDE)
        sessions[BESIDE] = mode_choice.PinnedPoolSession(defaults, beside, pool, print)
        pools[BESIDE] = pools[ort_modes.DEFAULT]
    return sessions, pools


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="zoo builders or cached real models")
    parser.add_argument("--visits", type=int, default=60)
    parser.add_argument("--calls", type=int, default=6, help="calls per visit")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        for name in args.models:
            path, shapes = resolve(name, Path(work))
            sessions, pools = sessions_of(path)
            feeds = real.realistic_inputs(sessions[ort_modes.DEFAULT], name, shapes, 0)
            for s in sessions.values():
                s.run(None, feeds)
            times, cpus = by_position(sessions, feeds, args.visits, args.calls)
            report(name, times)
            report_cpus(times, cpus, pools)
            report_means(times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
