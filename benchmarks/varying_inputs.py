"""The run-time ORT mode choice (hexfuse_onnx/mode_choice.py) on calls whose inputs change size from
call to call, as applications make them (issue 13): an OCR detector's pages of other sizes, its
recogniser's text lines of other widths, an ASR decoder's steps over a growing past.

    python benchmarks/varying_inputs.py ppocr_det ppocr_rec moonshine_tiny_decoder --explorations 6 --rounds 60

In one process: the original model in each of ORT's modes, and 2 x --explorations untuned
`hexfuse_onnx.InferenceSession`s (a fresh mode cache: each chooses), one after another, each choosing in
back-to-back calls over the workload's stream of inputs. Half see each call's input size
(`mode_choice.feed_size`), half are blind to it ("size-blind": feed_size held at 1, the choice before
it compared calls by size). Then --rounds counted rounds: each takes the stream's next input and
visits every ORT mode once in a shuffled order (interleaved.visit_round: a rest before each visit);
the best mode has the lowest median, and a choice costs its mode's median per-round ratio to it.
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
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], "HEXFUSE_VARYING_REEXECED")

# ruff: noqa: E402
import argparse
import json
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hexfuse_onnx import mode_cache, mode_choice, ort_modes
from hexfuse_onnx.tools import interleaved, isolated
from hexfuse_onnx.tools.bench import Config, CpuMeter, load_text
from hexfuse_onnx.tools.zoo import resolve

Stream = Iterator[dict[str, np.ndarray]]


def text_lines(session: Any, rng: np.random.Generator) -> Stream:
    """PP-OCR's recogniser: one text line a call, resized to 48 high, 80-960 wide in steps of 8."""
    while True:
        width = 8 * int(rng.integers(10, 121))
        yield {"x": rng.standard_normal((1, 3, 48, width), dtype=np.float32)}


def page_images(session: Any, rng: np.random.Generator) -> Stream:
    """PP-OCR's detector: one page or photo a call, resized (as RapidOCR does) to sides of 320-960 in
    steps of 32."""
    while True:
        height, width = (32 * int(rng.integers(10, 31)) for _ in range(2))
        yield {"x": rng.standard_normal((1, 3, height, width), dtype=np.float32)}


def moonshine_steps(session: Any, rng: np.random.Generator) -> Stream:
    """Moonshine's merged decoder: per utterance (40-300 encoder frames), a first step that makes the
    cross-attention cache, then one token a step over a past of 1-47 tokens."""
    past_names = [i.name for i in session.get_inputs() if i.name.startswith("past_key_values")]
    while True:
        frames = int(rng.integers(40, 301))
        hidden = rng.standard_normal((1, frames, 288), dtype=np.float32)
        for past in range(int(rng.integers(8, 48))):
            feed: dict[str, np.ndarray] = {
                "input_ids": rng.integers(0, 32768, (1, 1)).astype(np.int64),
                "encoder_hidden_states": hidden,
                "use_cache_branch": np.array([past > 0]),
            }
            for name in past_names:
                length = past if ".decoder." in name else frames if past else 0
                feed[name] = rng.standard_normal((1, 8, length, 36), dtype=np.float32)
            yield feed


WORKLOADS: dict[str, Callable[[Any, np.random.Generator], Stream]] = {
    "ppocr_det": page_images,
    "ppocr_rec": text_lines,
    "moonshine_tiny_decoder": moonshine_steps,
}


def choose(path: Path, stream: Stream, blind: bool) -> tuple[str, int]:
    """(the mode an untuned session chose, its calls) over the stream, back to back; blind: every call's
    size taken as 1."""
    Path(os.environ[mode_cache.ENV_CACHE]).unlink(missing_ok=True)  # else a confirmed choice is taken
    session = isolated.hexfuse_session(str(path))
    feed_size = mode_choice.feed_size
    mode_choice.feed_size = (lambda feed: 1.0) if blind else feed_size  # type: ignore[assignment]
    try:
        calls = 0
        while session.choosing:
            session.run(None, next(stream))
            calls += 1
    finally:
        mode_choice.feed_size = feed_size
    return str(session.mode), calls


def measure(name: str, explorations: int, rounds: int, seed: int, work: Path) -> dict[str, Any]:
    os.environ[mode_cache.ENV_CACHE] = str(work / "ort_modes.json")  # emptied before each session: it chooses
    path, _ = resolve(name, work)
    modes = [Config(m, isolated.ort_session(str(path), m)) for m in ort_modes.MODES]
    stream = WORKLOADS[name](modes[0].session, np.random.default_rng(seed))
    chosen: dict[str, list[tuple[str, int]]] = {"size-aware": [], "size-blind": []}
    for _ in range(explorations):
        for regime in chosen:
            chosen[regime].append(choose(path, stream, regime == "size-blind"))
    meter = CpuMeter()
    calls = interleaved.calls_per_visit(modes, next(stream))
    rng = random.Random(seed)
    for _ in range(rounds):
        for cfg, _rest, figure, _median in interleaved.visit_round(modes, next(stream), calls, rng):
            cfg.samples.append(figure)
    best = min(modes, key=Config.median)
    ratio = {c.label: interleaved.ratio_interval(c, best) for c in modes}
    result: dict[str, Any] = {"model": name, "best": best.label, "mode_over_best": ratio, "cpu_use": meter.others()}
    for regime, picks in chosen.items():
        result[regime] = {
            "chosen": [m for m, _ in picks],
            "calls": [n for _, n in picks],
            "cost": [ratio[m][0] for m, _ in picks],
            "right": sum(m == best.label or ratio[m][1] <= 1.0 for m, _ in picks),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", choices=sorted(WORKLOADS))
    ap.add_argument("--explorations", type=int, default=6, help="explorations per regime")
    ap.add_argument("--rounds", type=int, default=60, help="counted rounds that find the best mode")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    results = []
    for name in args.models:
        with tempfile.TemporaryDirectory(prefix="varying_inputs.") as work:
            r = measure(name, args.explorations, args.rounds, args.seed, Path(work))
        results.append(r)
        ratios = ", ".join(f"{m} {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for m, v in r["mode_over_best"].items())
        print(f"{name}: best {r['best']} ({args.rounds} rounds; mode / best: {ratios}); {load_text(r['cpu_use'])}")
        for regime in ("size-aware", "size-blind"):
            x = r[regime]
            counts = ", ".join(f"{m} x{n}" for m, n in Counter(x["chosen"]).most_common())
            print(
                f"  {regime}: chose {counts}: the best or tied {x['right']}/{len(x['chosen'])}, median cost "
                f"{float(np.median(x['cost'])):.3f}x, worst {max(x['cost']):.3f}x, median calls to choose "
                f"{float(np.median(x['calls'])):.0f}"
            )
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
