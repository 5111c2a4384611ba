"""Each ORT mode's calls by their place in a visit after a rest, the evidence for the figures host_pairs scores
and the run-time choice compares (a visit's mean call, a mode's typical call: hexfuse_onnx/mode_choice.py, RULE 11):

    python benchmarks/visit_positions.py gtcrn_stream frspell_lemma_int8 --visits 60 --calls 6

Per model, --visits rounds, each visiting every mode once in a shuffled order as host_pairs does (a rest until
the process is quiet, then --calls calls). Per mode and place in the visit: the median call (us), the mean, and
the share of calls over twice the mode's median at later places (its steady state). A median ranks the modes by
their usual call; where a mode's first calls after a rest, or some of its later ones, wait, only the mean sees it.
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
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hexfuse_onnx import ort_modes
from hexfuse_onnx.tools import interleaved, isolated
from hexfuse_onnx.tools.bench import timed_runs
from hexfuse_onnx.tools.zoo import resolve
from models import real


def by_position(sessions: dict[str, Any], feeds: dict[str, Any], visits: int, calls: int) -> dict[str, np.ndarray]:
    """Each mode's calls (us), one row per visit, one column per place in it."""
    times: dict[str, list[list[float]]] = {m: [] for m in sessions}
    rng = random.Random(0)
    for _ in range(visits):
        order = list(sessions)
        rng.shuffle(order)
        for mode in order:
            interleaved.rest_until_quiet()
            times[mode].append(timed_runs(sessions[mode].run, feeds, calls))
    return {m: np.asarray(rows) for m, rows in times.items()}


def report(name: str, times: dict[str, np.ndarray]) -> None:
    print(f"{name}: per place in a visit after a rest, us (median / mean; share over 2x the mode's median)")
    for mode, a in times.items():
        steady = float(np.median(a[:, 2:])) if a.shape[1] > 2 else float(np.median(a))
        places = "  ".join(
            f"{np.median(a[:, k]):6.0f}/{a[:, k].mean():6.0f} ({(a[:, k] > 2 * steady).mean():.0%})"
            for k in range(a.shape[1])
        )
        print(f"  {mode:<11} {places}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="zoo builders or cached real models")
    parser.add_argument("--visits", type=int, default=60)
    parser.add_argument("--calls", type=int, default=6, help="calls per visit")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        for name in args.models:
            path, shapes = resolve(name, Path(work))
            sessions = {m: isolated.ort_session(str(path), m) for m in ort_modes.MODES}
            feeds = real.realistic_inputs(sessions[ort_modes.DEFAULT], name, shapes, 0)
            for s in sessions.values():
                s.run(None, feeds)
            report(name, by_position(sessions, feeds, args.visits, args.calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
