"""How much could the host backend gain by running ONNX Runtime's own kernels (the C API's
CreateOp/InvokeOp) instead of its own? An upper bound, measured on the zoo pairs.

    python benchmarks/invokeop_bound.py [--runs 20] [--models two_branch,inception]

For every pair the pass makes of each zoo builder (every lowerable pair kept), in one process and in
alternating blocks (`tools.calibration.measure.measure_model`): each original node's kernel time on stock ORT
(ORT profiler, one thread, no graph optimisation: the time an InvokeOp of that node could take at
best, before InvokeOp's own per-call cost), and each node's time on the plugin's host kernel (the
summed durations of its work items in the traced fused calls).

Per pair: the summed op time of each task on both routes; the InvokeOp route's best possible fused
span, max(A, B, (A + B) / 2) with ORT's times (an op runs whole on one of the pool's two workers:
ORT's kernels cannot be cut into the plan's items); and the measured span of the host kernels,
over that bound and over ORT's A + B (the route's bound when its ops run one at a time, as InvokeOp
behind a global mutex does). Per op class: kernel time / ORT time. Figures are ratios from one
run; the machine is shared.

The OpenBLAS tuning variables are removed from this process (it re-executes itself without them).
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from hexfuse_onnx.tools.bench import reexec_without_blas_tuning  # noqa: E402  (loads no BLAS)

if __name__ == "__main__":
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], "HEXFUSE_INVOKEOP_REEXECED")

# ruff: noqa: E402
import argparse
import tempfile
from pathlib import Path

import models
from hexfuse_onnx import costmodel
from hexfuse_onnx.tools.bench import CpuMeter, load_text
from hexfuse_onnx.tools.calibration import measure, records
from hexfuse_onnx.tools.zoo import resolve


def pair_lines(name: str, medians: dict[int, float], measured: list[records.PairMeasurement]) -> list[dict]:
    """Per pair: each task's summed op time on ORT and on the host kernel, the InvokeOp bound and
    the measured kernel span (microseconds)."""
    rows = []
    for m in measured:
        c = m.pair.candidate
        kernel = {t.node: t.seconds for t in m.kernel_ops}
        ort = [sum(medians.get(i, 0.0) for i in ids) for ids in (c.task_a, c.task_b)]
        if c.task_a == c.task_b:  # a micro-batch pair: each task is half the chain
            ort = [ort[0] / 2, ort[0] / 2]
        kern = sum(kernel.values())
        bound = max(ort[0], ort[1], (ort[0] + ort[1]) / 2)
        rows.append(
            {
                "pair": f"{name}:{m.row.node}",
                "kind": m.row.kind,
                "nodes": len(c.nodes),
                "ort_a_us": ort[0] * 1e6,
                "ort_b_us": ort[1] * 1e6,
                "kernel_work_us": kern * 1e6,
                "invokeop_span_bound_us": bound * 1e6,
                "kernel_span_us": m.row.measured_span_s * 1e6,
            }
        )
    return rows


def ratio(num: float, den: float) -> str:
    """num / den as '1.23x', or 'n/a' when ORT's profile named none of the pair's nodes (den 0)."""
    return f"{num / den:.2f}x" if den > 0 else "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--models", default=None, help=f"comma-separated zoo builders (default all: {','.join(models.BUILDERS)})"
    )
    args = ap.parse_args(argv)
    names = args.models.split(",") if args.models else list(models.BUILDERS)
    meter = CpuMeter()
    rows: list[dict] = []
    classes: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="invokeop-bound-") as folder:
        for name in names:
            path, _ = resolve(name, Path(folder))
            medians, ops, measured = measure.measure_model(path, costmodel.HOST, Path(folder), args.runs)
            rows += pair_lines(name, medians, measured)
            ort_by_node = {t.node: t for t in ops}
            for m in measured:
                for t in m.kernel_ops:
                    o = ort_by_node.get(t.node)
                    if o is not None:
                        sums = classes.setdefault(costmodel.op_class(o.op), [0.0, 0.0])
                        sums[0] += t.seconds
                        sums[1] += o.seconds
    print("per pair (us): ORT's kernels (profiled, one thread) vs the host kernels (traced fused calls)")
    print(
        f"  {'pair':<40} {'kind':<15} {'ORT A':>8} {'ORT B':>8} {'ORT A+B':>8} {'kernel A+B':>10} "
        f"{'InvokeOp span >=':>16} {'kernel span':>11} {'/bound':>7} {'/ORT A+B':>8}"
    )
    for r in rows:
        print(
            f"  {r['pair']:<40} {r['kind']:<15} {r['ort_a_us']:8.1f} {r['ort_b_us']:8.1f} "
            f"{r['ort_a_us'] + r['ort_b_us']:8.1f} {r['kernel_work_us']:10.1f} {r['invokeop_span_bound_us']:16.1f} "
            f"{r['kernel_span_us']:11.1f} {ratio(r['kernel_span_us'], r['invokeop_span_bound_us']):>7} "
            f"{ratio(r['kernel_span_us'], r['ort_a_us'] + r['ort_b_us']):>8}"
        )
    print("\nper op class: summed host-kernel item time / summed ORT time of the same nodes")
    for cls, (kern, ort) in sorted(classes.items()):
        print(f"  {cls:<15} kernel {kern * 1e6:9.1f} us  ORT {ort * 1e6:9.1f} us  {kern / ort:5.2f}x")
    print(load_text(meter.others()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
