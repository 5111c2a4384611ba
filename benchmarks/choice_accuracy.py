"""How often the run-time ORT mode choice (hexfuse_onnx/mode_choice.py) takes the mode the drop-in
benchmark finds fastest, over many explorations of one model in one process (issue 13):

    python benchmarks/choice_accuracy.py two_branch --explorations 8 --rounds 100

Sessions (all in this process, as benchmarks/host_pairs.py --defaults has them): the original model
in each of ORT's modes, and 2 x --explorations untuned `hexfuse_onnx.InferenceSession`s, which each
choose a mode during their first calls (a fresh mode cache in a temporary directory: none takes an
earlier choice). Half choose in back-to-back calls ("back-to-back": isolated.settle, the benchmark's
warm-up before this branch); half in discarded interleaved rounds of rested visits
(interleaved.time_interleaved's warm-up, the regime the benchmark measures in: "rested"). Then
--rounds counted interleaved rounds time every session; the best mode is the ORT mode with the
lowest median. A choice is right when it is the best mode, or tied with it: its per-round ratio to
the best mode has a 95% interval that includes 1.0. OPENBLAS_* are removed from this process.

Whether a choice between two modes matters at all (the drop-in target: within 1.02x of the best):

    python benchmarks/choice_accuracy.py centerface --explorations 0 --modes ort-default,ort-seq-2t --rounds 800

times only the original in those modes: two visits a round, where host_pairs.py --defaults makes seven.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from hexfuse_onnx.tools.bench import reexec_without_blas_tuning  # noqa: E402  (loads no BLAS)

if __name__ == "__main__":
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], "HEXFUSE_CHOICE_REEXECED")

# ruff: noqa: E402
import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hexfuse_onnx import mode_cache, mode_choice, ort_modes
from hexfuse_onnx.tools import interleaved, isolated
from hexfuse_onnx.tools.bench import Config, CpuMeter, load_text
from hexfuse_onnx.tools.zoo import resolve
from models import real


def explore(name: str, explorations: int, rounds: int, seed: int, work: Path, timed: list[str]) -> dict[str, Any]:
    os.environ[mode_cache.ENV_CACHE] = str(work / "ort_modes.json")  # fresh: every session chooses
    path, shapes = resolve(name, work)
    modes = [Config(m, isolated.ort_session(str(path), m)) for m in timed]
    feeds = real.realistic_inputs(modes[0].session, name, shapes, seed)
    b2b = [Config(f"back-to-back {i}", isolated.hexfuse_session(str(path))) for i in range(explorations)]
    rested = [Config(f"rested {i}", isolated.hexfuse_session(str(path))) for i in range(explorations)]
    assert all(c.session.choosing for c in b2b + rested), "a session took a cached choice"
    for cfg in b2b:
        isolated.settle(cfg.session, feeds)
    meter = CpuMeter()
    interleaved.time_interleaved(
        modes + rested, feeds, rounds, seed=seed, warm_up=lambda: interleaved.still_choosing(rested)
    )
    best = min(modes, key=Config.median)
    ratio = {c.label: interleaved.ratio_interval(c, best) for c in modes}

    def right(chosen: str) -> bool:
        return chosen == best.label or chosen in ratio and ratio[chosen][1] <= 1.0

    result = {"model": name, "best": best.label, "mode_over_best": ratio, "cpu_use": meter.others()}
    for regime, sessions in (("back-to-back", b2b), ("rested", rested)) if explorations else ():
        chosen = [str(c.session.mode) for c in sessions]
        result[regime] = {
            "chosen": chosen,
            "best": sum(m == best.label for m in chosen),
            "right": sum(right(m) for m in chosen),
            "cost": [ratio[m][0] if m in ratio else float("nan") for m in chosen],
            "explored": explored_over_best([c.session.exploration for c in sessions], best.label),
            "rounds": [[r for r in c.session.exploration.rounds if r] for c in sessions],
        }
    return result


def explored_over_best(explorations: list[Any], best: str) -> dict[str, dict[str, Any]]:
    """Per mode, its typical call in each exploration over the best mode's (mode_choice.typical_calls), and the
    calls of it each exploration timed. Beside the counted rounds' ratio: a median ratio near the counted one with
    a wide spread across explorations is sampling noise (too few calls per mode); a median ratio away from it is
    the exploration's regime ranking modes otherwise."""
    out: dict[str, dict[str, Any]] = {}
    typical = [(e, mode_choice.typical_calls(e.rounds)) for e in explorations]
    for mode in ort_modes.MODES:
        pairs = [(t[mode] / t[best], len(e.samples[mode])) for e, t in typical if mode in t and best in t]
        if pairs:
            ratios = [r for r, _ in pairs]
            out[mode] = {"ratios": ratios, "median": float(np.median(ratios)), "calls": [n for _, n in pairs]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--explorations", type=int, default=8, help="explorations per regime")
    ap.add_argument("--rounds", type=int, default=100, help="counted interleaved rounds that find the best mode")
    ap.add_argument(
        "--modes",
        default=",".join(ort_modes.MODES),
        help="comma-separated ORT modes timed on the original (default all); with --explorations 0, "
        "only these: e.g. whether the two modes a choice swaps between differ by more than a target",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    timed = args.modes.split(",")
    if unknown := [m for m in timed if m not in ort_modes.MODES]:
        ap.error(f"unknown ORT mode(s) {', '.join(unknown)} (known: {', '.join(ort_modes.MODES)})")
    results = []
    for name in args.models:
        with tempfile.TemporaryDirectory(prefix="choice_accuracy.") as work:
            r = explore(name, args.explorations, args.rounds, args.seed, Path(work), timed)
        results.append(r)
        ratios = ", ".join(f"{m} {interleaved_ci(v)}" for m, v in r["mode_over_best"].items())
        print(f"{name}: best {r['best']} ({args.rounds} rounds; mode / best: {ratios}); {load_text(r['cpu_use'])}")
        for regime in ("back-to-back", "rested") if args.explorations else ():
            x = r[regime]
            counts = ", ".join(f"{m} x{n}" for m, n in Counter(x["chosen"]).most_common())
            print(
                f"  {regime:<28} chose {counts}: the best {x['best']}/{len(x['chosen'])}, the best or tied "
                f"{x['right']}/{len(x['chosen'])}, median cost {sorted(x['cost'])[len(x['cost']) // 2]:.3f}x"
            )
            explored = ", ".join(f"{m} {spread_text(e)}" for m, e in x["explored"].items())
            print(f"    explored mode / {r['best']} (median [range] over explorations): {explored}")
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    return 0


def spread_text(e: dict[str, Any]) -> str:
    return f"{e['median']:.3f} [{min(e['ratios']):.3f}, {max(e['ratios']):.3f}] {np.median(e['calls']):.0f} calls"


def interleaved_ci(r: tuple[float, float, float]) -> str:
    return f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"


if __name__ == "__main__":
    sys.exit(main())
