"""How fast is the pass on large graphs? Analysis and rewrite time of synthetic models.

    python benchmarks/pass_speed.py [--sizes 1000,10000,50000] [--repeat 3] [--repeat-large 1]

For each size, a synthetic model (`models.build_synthetic(n, seed)`) is saved to a
temporary folder (not timed), then timed:

- analysis: `hexfuse_onnx.pipeline.analyse` = load + shape inference, profile, discover, select
- rewrite:  `hexfuse_onnx.rewrite.prepare` (each pair's node, body and lowered program) +
  `fuse` (of the pairs that lower) + `hexfuse_onnx.modelio.stage` (the staged file is written,
  then discarded); ORT verification is not included.

Each figure is the median over the runs. "x/node" is the time per node relative to the
previous size: 1.00 means exactly linear growth, 2.00 means twice the per-node cost.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import onnx  # noqa: E402

from hexfuse_onnx.modelio import stage  # noqa: E402
from hexfuse_onnx.pipeline import analyse  # noqa: E402
from hexfuse_onnx.rewrite import fuse, prepare  # noqa: E402
from models import build_synthetic  # noqa: E402

STAGES = ("load", "profile", "discover", "select")


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        mult = 1000 if part.endswith("k") else 1
        out.append(int(float(part.rstrip("k")) * mult))
    if not out or any(n < 1 for n in out):
        raise argparse.ArgumentTypeError(f"bad --sizes {text!r}")
    return out


def measure(path: Path, out_dir: Path, clock=time.perf_counter) -> dict[str, float]:
    gc.collect()  # start each phase from a collected heap, so garbage of earlier runs is not billed here
    t0 = clock()
    a = analyse(path, lower=False)  # the "rewrite" phase below lowers
    analysis = clock() - t0
    gc.collect()
    t0 = clock()
    prepare(a.graph, a.pairs, a.target)
    fused = fuse(a.graph, [p for p in a.pairs if p.program is not None])
    staged = stage(fused, out_dir / "fused.onnx", path.parent)
    rewrite = clock() - t0
    staged.discard()
    row = {k: a.seconds.get(k, 0.0) for k in STAGES}
    row.update(analysis=analysis, rewrite=rewrite, pairs=len(a.pairs), nodes=len(a.graph.nodes))
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--sizes",
        type=_sizes,
        default=[1000, 10000, 50000],
        help="node counts, comma-separated (1k suffix allowed; default 1000,10000,50000)",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per size; the median is shown (default 3)")
    p.add_argument(
        "--repeat-large", type=int, default=1, help="runs for sizes >= 50000 nodes (default 1; capped at --repeat)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="clock of the analysis/rewrite totals: wall (perf_counter) or this process's CPU time "
        "(process_time; steadier on a busy machine). Stage columns are always wall time.",
    )
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="hexfuse_bench_"))
    rows = []
    try:
        for n in args.sizes:
            path = work / f"synthetic_{n}.onnx"
            onnx.save_model(build_synthetic(n, args.seed), str(path))
            runs = args.repeat if n < 50000 else max(1, min(args.repeat, args.repeat_large))
            clock = time.process_time if args.clock == "cpu" else time.perf_counter
            results = [measure(path, work, clock) for _ in range(runs)]
            med = {k: statistics.median(r[k] for r in results) for k in results[0]}
            med["runs"] = runs
            rows.append(med)
            print(
                f"  {n} nodes: analysis {med['analysis']:.2f} s, rewrite {med['rewrite']:.2f} s (median of {runs})",
                file=sys.stderr,
                flush=True,
            )
            path.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    c = args.clock
    header = [
        "nodes",
        "runs",
        "pairs",
        "load+infer s",
        "profile s",
        "discover s",
        "select s",
        f"analysis s ({c})",
        f"rewrite s ({c})",
        "analysis us/node",
        "rewrite us/node",
        "analysis x/node",
        "rewrite x/node",
    ]
    table = [header]
    prev = None
    for r in rows:
        n = r["nodes"]
        per_a, per_r = r["analysis"] / n * 1e6, r["rewrite"] / n * 1e6
        grow_a = f"{per_a / prev[0]:.2f}" if prev else "-"
        grow_r = f"{per_r / prev[1]:.2f}" if prev else "-"
        table.append(
            [f"{int(n)}", f"{r['runs']}", f"{int(r['pairs'])}"]
            + [f"{r[k]:.3f}" for k in STAGES]
            + [f"{r['analysis']:.3f}", f"{r['rewrite']:.3f}", f"{per_a:.1f}", f"{per_r:.1f}", grow_a, grow_r]
        )
        prev = (per_a, per_r)
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    for k, row in enumerate(table):
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print(f"stage columns: wall time inside analyse(); totals: {c} clock; median per size")
    print("x/node: time per node relative to the previous size (1.00 = linear growth)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
