"""Run the original model at input shapes in a child process, to learn where it runs.

ONNX Runtime can die instead of failing at a shape it cannot take: version 1.2x's NCHWc
AveragePool divides by zero (SIGFPE) when a fixed 7x7 window exceeds the map, as ResNet-50's does
at 112x112. The pass asks a child process, so that such a death refuses that shape with one line
and the pass goes on. The child runs the seeded random inputs the pass verifies on
(`verify.random_inputs`, seed 0) and reports each shape in order: `ok`, or `fail` and why, or
`skip` for a candidate after enough ran. The same question about the same file is asked once per
process: `colocate` checks the merge where `rewrite` then analyses it, and a child costs seconds.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import first_line

PROBE_TIMEOUT_S = 900
LOAD_FAILED = "the original does not load in ONNX Runtime"


@dataclass(frozen=True)
class Outcome:
    shapes: dict[str, list[int]]
    error: str | None  # None: the original ran at these shapes


def runs_at(
    path: str | os.PathLike[str],
    candidates: list[dict[str, list[int]]],
    enough: int,
    also: list[dict[str, list[int]]] | None = None,
    controls: dict[str, np.ndarray] | None = None,
) -> list[Outcome]:
    """The original's outcome at each candidate in order, up to the `enough`-th that runs; then its
    outcome at each of `also`, tried in the same child whatever happened before (one each, last).
    Where random inputs fail, inputs of `controls` keep their values (feeds.run_random)."""
    file = os.stat(path)  # the file as it is now: a rewritten file is asked again
    kept = {k: [str(v.dtype), v.shape, v.ravel().tolist()] for k, v in (controls or {}).items()}
    request = json.dumps([candidates, enough, also or [], kept])
    return list(_runs_at(str(Path(path).resolve()), file.st_mtime_ns, file.st_size, request))


@functools.lru_cache(maxsize=64)
def _runs_at(path: str, _mtime_ns: int, _size: int, request: str) -> tuple[Outcome, ...]:
    candidates, enough, also, kept = json.loads(request)
    items = [*candidates, *also]
    tried: list[Outcome | None] = []  # None: a candidate left untried once enough ran
    while len(tried) < len(items):
        ran = sum(o is not None and o.error is None for o in tried[: len(candidates)])
        counted = max(0, len(candidates) - len(tried))
        tried += _child_run(Path(path), items[len(tried) :], counted, enough - ran, kept)
    return tuple(o for o in tried[: len(candidates)] if o is not None) + tuple(o for o in tried[len(candidates) :] if o)


def _child_run(
    path: Path, items: list[dict[str, list[int]]], counted: int, enough: int, kept: dict[str, Any]
) -> list[Outcome | None]:
    """Outcomes from one child (the first `counted` items stop at the `enough`-th that runs); a
    child that dies refuses the shape it was running, the last."""
    request = json.dumps({"path": str(path), "shapes": items, "counted": counted, "enough": enough, "kept": kept})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), *sys.path]))
    try:
        child = subprocess.run(
            [sys.executable, "-c", "from hexfuse_onnx.probe import child_main; child_main()"],
            input=request,
            capture_output=True,
            text=True,
            env=env,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return [Outcome(items[0], f"ONNX Runtime did not finish within {PROBE_TIMEOUT_S} s")]
    outcomes: list[Outcome | None] = []
    for line in child.stdout.splitlines():
        status, _, why = line.partition(" ")
        shapes = items[len(outcomes)]
        outcomes.append(None if status == "skip" else Outcome(shapes, None if status == "ok" else why))
    if child.returncode != 0 and len(outcomes) < len(items):
        outcomes.append(Outcome(items[len(outcomes)], _death(child.returncode, child.stderr)))
    return outcomes or [Outcome(items[0], _death(child.returncode, child.stderr))]


def _death(code: int, stderr: str) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"ONNX Runtime died of {name} running the original"
    last = (stderr.strip().splitlines() or ["no message"])[-1][:300]
    return f"the probe process exited {code}: {last}"


def child_main() -> None:
    """The child: read the request from stdin, print one line per shape tried."""
    from .feeds import run_random, session  # not verify: the onnx package costs a child 1.7 s

    request = json.loads(sys.stdin.read())
    try:
        original = session(request["path"])
    except Exception as exc:  # noqa: BLE001
        why = f"{LOAD_FAILED}: {first_line(exc)}"
        print("\n".join(f"fail {why}" for _ in request["shapes"]), flush=True)
        return
    counted, ran = request["counted"], 0
    controls = {k: np.array(v, dtype).reshape(shape) for k, (dtype, shape, v) in request["kept"].items()}
    for i, shapes in enumerate(request["shapes"]):
        if i < counted and ran >= request["enough"]:
            print("skip", flush=True)
            continue
        try:
            run_random(lambda feeds: original.run(None, feeds), original, shapes, controls)
        except Exception as exc:  # noqa: BLE001
            print(f"fail {first_line(exc)}", flush=True)
            continue
        print("ok", flush=True)
        ran += i < counted
