"""The run-time ORT mode choice's rule (hexfuse_onnx/mode_choice.py `Exploration`) on simulated calls, no
ONNX Runtime: how often it leaves ORT's defaults for a slower mode and how often it finds a faster one,
where the machine's noise is known and the same for every rule (issue 13):

    python benchmarks/choice_simulation.py --workloads fixed,text_lines,decoder,one_generation --trials 200

Each workload yields calls (time in us with every mode alike, input elements): `fixed` one size,
`text_lines` an OCR recogniser's lines of 80-3200 widths, `pages` a detector's
pages of 320-960 sides (81-573 ms calls: 2 rounds), `decoder` prefill and steps over a growing
past, generation after generation, `one_generation` one past growing throughout. A mode's call takes its
factor times that, times noise: 3% per call, a machine state that changes every ~30 ms (5%), and 1% of
calls disturbed 2-6x. `--size-blind` records every call as size 1 (the rule before it compared calls by
size). Per case: the modes chosen over --trials explorations, and the mean factor of the choice (1.0:
no worse than ORT's defaults on average).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hexfuse_onnx.mode_choice import Exploration  # noqa: E402

Calls = Iterator[tuple[float, float]]
KV = 2 * 6 * 8 * 64  # a past position's elements: 6 layers' keys and values, 8 heads of 64


def fixed(rng: np.random.Generator) -> Calls:
    while True:
        yield 800.0, 64_000.0


def text_lines(rng: np.random.Generator) -> Calls:
    while True:
        width = 8 * int(rng.integers(10, 400))
        yield 300.0 + width, 3.0 * 48 * width


def pages(rng: np.random.Generator) -> Calls:
    while True:
        height, width = (32 * int(rng.integers(10, 31)) for _ in range(2))
        yield 20_000.0 + 0.6 * height * width, 3.0 * height * width


def decoder(rng: np.random.Generator) -> Calls:
    while True:
        start = int(rng.integers(10, 200))
        yield 3000.0 + 15.0 * start, float(start)
        for past in range(start, start + int(rng.integers(20, 120))):
            yield 400.0 + 4.0 * past, 2.0 + past + KV * past


def one_generation(rng: np.random.Generator) -> Calls:
    past = 0
    while True:
        past += 1
        yield 400.0 + 4.0 * past, 2.0 + past + KV * past


WORKLOADS: dict[str, Callable[[np.random.Generator], Calls]] = {
    f.__name__: f for f in (fixed, text_lines, pages, decoder, one_generation)
}
CASES = {
    "all alike": {"ort-default": 1.0, "ort-seq": 1.0, "ort-seq-2t": 1.0},
    "ort-seq 5% slower": {"ort-default": 1.0, "ort-seq": 1.05, "ort-seq-2t": 1.0},
    "ort-seq 5% faster": {"ort-default": 1.0, "ort-seq": 0.95, "ort-seq-2t": 1.0},
    "ort-seq 10% faster": {"ort-default": 1.0, "ort-seq": 0.90, "ort-seq-2t": 1.0},
}


def explore(calls: Calls, factors: dict[str, float], rng: np.random.Generator, size_blind: bool) -> str:
    exploration = Exploration(list(factors))
    t, state, state_ends = 0, 1.0, 0
    while (mode := exploration.mode()) is not None:
        us, size = next(calls)
        if t >= state_ends:
            state, state_ends = float(np.exp(rng.normal(0, 0.05))), t + int(rng.exponential(30e6))
        us *= factors[mode] * state * float(np.exp(rng.normal(0, 0.03)))
        if rng.random() < 0.01:
            us *= rng.uniform(2, 6)
        t0 = t + 20_000
        t = t0 + int(us * 1000)
        exploration.record(mode, t0, t, 1.0 if size_blind else size)
    return str(exploration.chosen)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--size-blind", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    for name in args.workloads.split(","):
        for case, factors in CASES.items():
            rng = np.random.default_rng(args.seed)
            chosen = [explore(WORKLOADS[name](rng), factors, rng, args.size_blind) for _ in range(args.trials)]
            counts = ", ".join(f"{m} {n}" for m, n in sorted(Counter(chosen).items()))
            mean = np.mean([factors[m] for m in chosen])
            print(f"{name:<15} {case:<19} chose {counts:<44} mean factor {mean:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
