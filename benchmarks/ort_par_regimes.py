"""ORT's modes on one model in four regimes of calls, the evidence for how the run-time choice treats ort-par
(hexfuse_onnx/mode_choice.py, PARALLEL):

    python benchmarks/ort_par_regimes.py hama_g2p_encoder silero_decoder_v5

back-to-back calls, calls rested --rest-ms apart, and both again beside a busy process (one CPU held by a
Python loop). Per regime and mode: the median and 90th percentile call (us) and the median over ORT's
defaults'. The modes alternate in blocks of --calls calls (each after 5 untimed), forward and back.
With --explorations N, N run-time choices in each regime after (hexfuse_onnx.InferenceSession, a fresh
mode cache, the calls as the regime makes them): the mode chosen and each mode's median/mean counted call.
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
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], "HEXFUSE_PAR_REGIMES_REEXECED")

# ruff: noqa: E402
import argparse
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hexfuse_onnx import mode_cache, mode_choice, ort_modes
from hexfuse_onnx.tools import isolated
from hexfuse_onnx.tools.zoo import resolve
from models import real

SETTLE_CALLS = 5  # untimed calls before each block: the previous mode's pool stops spinning meanwhile


def timed_calls(session: Any, feeds: dict[str, Any], calls: int, rest_s: float) -> list[float]:
    times = []
    for _ in range(calls):
        if rest_s:
            time.sleep(rest_s)
        t0 = time.perf_counter_ns()
        session.run(None, feeds)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return times


def regime(sessions: dict[str, Any], feeds: dict[str, Any], blocks: int, calls: int, rest_s: float) -> dict:
    """Per mode: (median, p90) us over `blocks` blocks of `calls` calls, the modes' order reversed each block."""
    times: dict[str, list[float]] = {m: [] for m in sessions}
    for b in range(blocks):
        for mode in list(sessions)[:: 1 if b % 2 == 0 else -1]:
            timed_calls(sessions[mode], feeds, SETTLE_CALLS, rest_s)
            times[mode] += timed_calls(sessions[mode], feeds, calls, rest_s)
    return {m: (float(np.median(t)), float(np.percentile(t, 90))) for m, t in times.items()}


def explorations(path: Path, feeds: dict[str, Any], count: int, rest_s: float, work: Path) -> list[str]:
    """`count` run-time choices, each in a fresh cache: '<mode chosen> (mode median/mean us, ...)'."""
    found, before = [], os.environ.get(mode_cache.ENV_CACHE)
    try:
        for k in range(count):
            os.environ[mode_cache.ENV_CACHE] = str(work / f"ort_modes.{time.monotonic_ns()}.{k}.json")
            found.append(exploration(path, feeds, rest_s))
    finally:
        if before is None:
            os.environ.pop(mode_cache.ENV_CACHE, None)
        else:
            os.environ[mode_cache.ENV_CACHE] = before
    return found


def exploration(path: Path, feeds: dict[str, Any], rest_s: float) -> str:
    """One session choosing its mode in calls `rest_s` apart: the mode and each mode's median/mean."""
    session = isolated.hexfuse_session(str(path))
    if not getattr(session, "choosing", False):
        return f"nothing: no run-time choice ({mode_choice.ENV_MODE} set, or the model too large)"
    while session.choosing:
        timed_calls(session, feeds, 1, rest_s)
    medians, means = session.exploration.medians(), session.exploration.means()
    return f"{session.mode} ({', '.join(f'{m} {medians[m]:.0f}/{means[m]:.0f}' for m in medians)})"


def model_regimes(name: str, args: argparse.Namespace, work: Path) -> dict[str, tuple[dict, list[str]]]:
    path, shapes = resolve(name, work)
    sessions = {m: isolated.ort_session(str(path), m) for m in args.modes}
    feeds = real.realistic_inputs(sessions[args.modes[0]], name, shapes, args.seed)
    for s in sessions.values():
        timed_calls(s, feeds, 50, 0.0)
    rest_s = args.rest_ms / 1000
    rested_blocks = max(2, args.blocks // 2)  # rested calls take the wall time

    def both(blocks: int, calls: int, rest: float) -> tuple[dict, list[str]]:
        return regime(sessions, feeds, blocks, calls, rest), explorations(path, feeds, args.explorations, rest, work)

    found = {"back-to-back": both(args.blocks, args.calls, 0.0)}
    found["rested"] = both(rested_blocks, args.calls // 2, rest_s)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        found["loaded"] = both(args.blocks, args.calls, 0.0)
        found["loaded, rested"] = both(rested_blocks, args.calls // 2, rest_s)
    finally:
        busy.kill()
        busy.wait()
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="zoo builders, real models (python -m models real list) or files")
    ap.add_argument("--modes", default="ort-default,ort-seq,ort-par", help="ORT modes, ORT's defaults first")
    ap.add_argument("--blocks", type=int, default=12, help="blocks per mode back to back (rested: half)")
    ap.add_argument("--calls", type=int, default=40, help="timed calls per block back to back (rested: half)")
    ap.add_argument("--rest-ms", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--explorations", type=int, default=0, help="run-time choices per regime (rested: ~1 min each)")
    args = ap.parse_args(argv)
    args.modes = args.modes.split(",")
    if args.modes[0] != ort_modes.DEFAULT or not set(args.modes) <= set(ort_modes.MODES):
        ap.error(f"--modes: ORT modes ({', '.join(ort_modes.MODES)}), {ort_modes.DEFAULT} first")
    with tempfile.TemporaryDirectory() as work:
        for name in args.models:
            for label, (stats, chosen) in model_regimes(name, args, Path(work)).items():
                default = stats[ort_modes.DEFAULT][0]
                cells = [f"{m} {med:.0f} us ({med / default:.2f}x, p90 {p90:.0f})" for m, (med, p90) in stats.items()]
                print(f"{name:26s} {label:15s} " + "  ".join(cells), flush=True)
                for line in chosen:
                    print(f"{'':26s} {'':15s} chose {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
