"""Regenerate docs/RESULTS.md: per model, the pairs found by kind, the predicted Hexagon gain
(MODELLED), the measured host ratios against ORT, accuracy, one timeline picture, and the cost
model's calibration.

    python benchmarks/results.py [--runs 30] [--models two_branch,centerface] [--no-real] [-o docs/RESULTS.md]

Everything on the page is measured in this one run (`hexfuse_onnx.tools.bench` per model,
`python -m hexfuse_onnx calibrate --table` run as it is for the cost model,
`hexfuse_onnx.tools.timeline` for the picture); nothing is copied from an earlier run. Real
models are used when they are in the cache (`python -m models real fetch --ci`). The OpenBLAS
tuning variables are removed by re-executing.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from hexfuse_onnx.tools.bench import reexec_without_blas_tuning  # noqa: E402  (loads no BLAS)

if __name__ == "__main__":
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]])

# ruff: noqa: E402
import argparse
import datetime
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort

from hexfuse_onnx.pipeline import rewrite
from hexfuse_onnx.tools import bench, timeline
from hexfuse_onnx.tools.zoo import list_models

DOC = Path(REPO) / "docs" / "RESULTS.md"
PICTURE_MODEL = "mlp_chain"


def default_models(include_real: bool) -> list[str]:
    from models import real

    zoo = list_models()
    names = [m.name for m in zoo if m.source == "builder"]
    if include_real:
        names += [
            m.name
            for m in zoo
            if m.source != "builder" and m.available and m.name in real.MODELS and real.MODELS[m.name].ci
        ]
    return names


def measure(names: list[str], args: argparse.Namespace, say) -> list[dict[str, Any]]:
    from hexfuse_onnx.tools.zoo import plugin_rtol, resolve

    rows = []
    for name in names:
        say(f"bench {name}")
        with tempfile.TemporaryDirectory(prefix="hexfuse-results-") as folder:
            try:
                path, shapes = resolve(name, Path(folder))
                r = bench.bench(
                    path, "host", args.baselines, args.runs, args.rounds, args.warmup, shapes, tol=plugin_rtol(name)
                )
            except Exception as exc:  # noqa: BLE001 - a model that fails is a row saying why
                rows.append({"model": name, "error": f"{type(exc).__name__}: {bench.first_line(exc)}"})
                continue
        print("\n".join(r.lines()), flush=True)
        rows.append({**r.to_json(), "model": name})
    return rows


def picture(model: str, out_png: Path, say) -> list[str]:
    """The timeline of one rewritten zoo model's pairs, drawn into out_png; its summary lines."""
    from hexfuse_onnx.tools.zoo import resolve

    say(f"timeline of {model}")
    with tempfile.TemporaryDirectory(prefix="hexfuse-results-") as folder:
        path, _ = resolve(model, Path(folder))
        fused = rewrite(path, Path(folder) / "fused.onnx").output
        if fused is None:
            return [f"{model}: no pair qualifies, no timeline"]
        lines = timeline.summary_lines(t := timeline.record(fused, runs=10))
        timeline.draw_png(t, out_png)
    return lines


# ---- the page -----------------------------------------------------------------------------------


def _us(x: float | None) -> str:
    return f"{x:,.0f}" if x is not None and x == x else "-"


def _cfg(row: dict[str, Any], label: str) -> dict[str, Any] | None:
    c = row.get("configs", {}).get(label)
    return c if c and c.get("check") == "ok" and c.get("median_us") else None


def _ratio(row: dict[str, Any], num: str, den: str) -> str:
    a, b = _cfg(row, num), _cfg(row, den)
    return f"{a['median_us'] / b['median_us']:.2f}x" if a and b else "-"


def _best_ratio(row: dict[str, Any], baseline: str) -> str:
    """The faster of hexfuse (ORT 1 thread around the plugin) and hexfuse-2t over a baseline."""
    r = row.get("hexfuse_over", {}).get(baseline)
    return f"{r:.2f}x ({row.get('hexfuse_best')})" if r is not None else "-"


def model_table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| model | pairs by kind | predicted on hexagon-v73 (MODELLED): pairs serial → fused µs, share of the model "
        "| ort-seq µs | hexfuse µs | hexfuse / ort-seq | best hexfuse / ort-seq-2t | best hexfuse / ort-par "
        "| fallback / ort-seq | error: fallback, plugin |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | failed: {r['error']} |" + " |" * 8)
            continue
        p = r.get("prediction") or {}
        kinds = (
            ", ".join(f"{k} {n}" for k, n in (p.get("pairs_by_kind") or {}).items())
            or f"none ({p.get('candidates', 0)} candidates)"
        )
        pred = (
            f"{p['pairs_serial_us']:.1f} → {p['pairs_fused_us']:.1f}, {p['gain_of_model']:.1%}"
            if p.get("pairs_by_kind")
            else "-"
        )
        fb, hx = _cfg(r, "fallback"), _cfg(r, "hexfuse")
        err = f"{fb['relative_error']:.0e}, {hx['relative_error']:.0e}" if fb and hx else _why_not(r)
        seq = _cfg(r, "ort-seq")
        out.append(
            f"| {r['model']} | {kinds} | {pred} | {_us(seq and seq['median_us'])} "
            f"| {_us(hx and hx['median_us'])} | {_ratio(r, 'hexfuse', 'ort-seq')} "
            f"| {_best_ratio(r, 'ort-seq-2t')} | {_best_ratio(r, 'ort-par')} "
            f"| {_ratio(r, 'fallback', 'ort-seq')} | {err} |"
        )
    return out


def _why_not(row: dict[str, Any]) -> str:
    bad = [f"{k}: {v['check']}" for k, v in row.get("configs", {}).items() if v.get("check") != "ok"]
    return "; ".join(bad) or ("not fused" if not row.get("fused_pairs") else "-")


CALIBRATE = [sys.executable, "-m", "hexfuse_onnx", "calibrate", "--table", "-q"]


def calibration_section(say) -> list[str]:
    """`python -m hexfuse_onnx calibrate --table` run as it is, its output on the page: the same
    measurement, fit and report a user gets from the command."""
    say(f"calibrating the host cost model: {' '.join(CALIBRATE[1:])}")
    done = subprocess.run(CALIBRATE, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return [f"`calibrate` failed (exit {done.returncode}): {why}"]
    summary, _, rest = done.stdout.strip().partition("\n\nnode (kernel fit)")
    ops, _, tables = rest.partition("\n\n")
    return [
        "The output of `python -m hexfuse_onnx calibrate --table`, run by this script as it is: each model's "
        "pairs are predicted by the fits to the other models (held out). The machine was shared with other "
        "processes while it ran.",
        "",
        "```",
        summary,
        "```",
        "",
        "```",
        "node (kernel fit)" + ops,
        "```",
        "",
        tables,
    ]


def page(rows, timeline_lines, calibration, args, started: float, cpu_use) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rel_png = "img/timeline.png"
    parts = [
        "# Results",
        "",
        f"Generated by `python benchmarks/results.py{' ' + ' '.join(args.argv) if args.argv else ''}` "
        f"on {date} in {time.perf_counter() - started:.0f} s. Do not edit by hand.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, onnxruntime {ort.__version__}. {bench.load_text(cpu_use)}.",
        "",
        _overhead_text(),
        "",
        "**What is measured and what is modelled.** The host columns are measured here, in this run, on "
        "the CPU build of the dsp/ kernel (the plugin's `host` backend): medians of "
        f"{args.runs} `InferenceSession.run` calls per configuration, alternated over {args.rounds} rounds. "
        "There is no Hexagon device here: the hexagon-v73 column is the cost model's prediction, MODELLED "
        "from the parameters listed at the end, not a measurement. Ratios below 1 mean hexfuse is faster. "
        "This 2-vCPU VM's parallelism varies from minute to minute: the same ratio moves by about 20% between "
        "runs, and ORT_PARALLEL (like any multi-threaded configuration) has runs far slower than its median, so "
        "a ratio far from the rest of its row says more about the VM at that minute than about the model.",
        "",
        "Configurations: `ort-seq` the original, ORT sequential, 1 thread; `ort-seq-2t` 2 intra-op threads; "
        "`ort-par` ORT_PARALLEL with 2 inter-op threads; `fallback` the rewritten model on stock ORT (the "
        "pairs' function bodies); `hexfuse` the rewritten model with the FusedHexPair plugin and 1 ORT thread "
        'for the other nodes, `hexfuse-2t` the same with 2 ("best hexfuse" is the faster of the two). Errors are '
        "relative to each output's scale against `ort-seq` on the original; a configuration outside its "
        "tolerance is not timed (1e-4; for the plugin a real model's documented `plugin_rtol` in "
        "models/real.py: ppocr_det 1e-3, magika 1e-2, each with its reason).",
        "",
        *model_table(rows),
        "",
        "## Timeline",
        "",
        f"`{PICTURE_MODEL}` rewritten and run on the plugin (host backend), its last run's work items per "
        "worker (`python -m hexfuse_onnx profile` draws the same):",
        "",
        f"![timeline]({rel_png})",
        "",
        "```",
        *timeline_lines,
        "```",
        "",
        "## Cost model calibration",
        "",
        *calibration,
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--models", help="comma-separated zoo names (default: every builder and the cached CI real models)")
    ap.add_argument("--no-real", action="store_true", help="builders only")
    ap.add_argument("--baseline", default=",".join(bench.DEFAULT_BASELINES))
    ap.add_argument("--no-calibration", action="store_true")
    ap.add_argument("-o", "--output", type=Path, default=DOC)
    args = ap.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.baselines = bench.parse_baselines(args.baseline)
    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[results {time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    names = args.models.split(",") if args.models else default_models(not args.no_real)
    meter = bench.CpuMeter()
    rows = measure(names, args, say)
    png = args.output.parent / "img" / "timeline.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    timeline_lines = picture(PICTURE_MODEL, png, say)
    calibration = ["Not run (--no-calibration)."] if args.no_calibration else calibration_section(say)
    text = page(rows, timeline_lines, calibration, args, started, meter.others())
    tmp = args.output.with_name(f".{args.output.name}.tmp")
    tmp.write_text(text)
    tmp.replace(args.output)
    say(f"wrote {args.output} and {png}")
    return 0


def _overhead_text() -> str:
    """Whether pairs were chosen with the target's own per-call overhead (HEXFUSE_CALL_OVERHEAD_US)."""
    us = os.environ.get("HEXFUSE_CALL_OVERHEAD_US")
    if us is None:
        return "Pairs are chosen with each target's own per-call overhead (hexagon-v73: 100 us, modelled)."
    return (
        f"Pairs were chosen with the per-call overhead set to {us} us (HEXFUSE_CALL_OVERHEAD_US), so that the "
        "kernel is measured: at hexagon-v73's modelled 100 us per call, no pair of the zoo builders qualifies."
    )


if __name__ == "__main__":
    sys.exit(main())
