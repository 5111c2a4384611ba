"""Which host kernels lose to ONNX Runtime's, per op type, on a rewritten model's own pairs.

    python benchmarks/op_times.py MODEL.fused.onnx [--runs 40] [--schedule serial|fused] [--stat min|median] [--top 12]

Exit codes: 0 ok, 2 no such file, 3 no FusedHexPair node with a program.

MODEL is any model with FusedHexPair nodes (`rewrite`, `colocate`, `colocate --hybrid` outputs). In one
process and alternating blocks: the model on the plugin (host backend, kernel trace on, the schedule
given) and its unfused original on stock ORT (profiler on, one thread, no graph optimisation, the same
inputs: `verify.random_inputs` of the rewritten model's inputs). Per op type of the pairs' nodes: the
summed host-kernel item time against ORT's kernel time of the same nodes; then the `--top` ops by
kernel time. `--stat min` takes each op's fastest run, which a loaded machine disturbs least.

ORT's profiled times include its per-node cost (about 2 us here), so small ops look cheap on the kernel.
A micro-batch pair's two halves add up to their original node. The OpenBLAS tuning variables are removed
from this process (it re-executes itself without them).
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from hexfuse_onnx.tools.bench import reexec_without_blas_tuning  # noqa: E402  (loads no BLAS)

if __name__ == "__main__":
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], "HEXFUSE_OP_TIMES_REEXECED")

# ruff: noqa: E402
import argparse
import json
import re
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx
import onnxruntime as ort

from hexfuse_onnx.lowering import program_op_maps
from hexfuse_onnx.lowering.lowerer import OpOrigin
from hexfuse_onnx.rewrite import unfuse
from hexfuse_onnx.runtime import InferenceSession
from hexfuse_onnx.tools.bench import CpuMeter, load_text
from hexfuse_onnx.tools.calibration.kernel_trace import trace_op_seconds
from hexfuse_onnx.tools.calibration.ort_profile import node_times, profiling_options
from hexfuse_onnx.verify import random_inputs

BLOCKS = 4
WARMUP = 3
MICROBATCH_SUFFIX = re.compile(r"__.+_mb[01]$")  # kinds.microbatch.suffixes


def original_for_ort(fused: onnx.ModelProto) -> onnx.ModelProto:
    """The unfused model with the rewritten model's graph inputs (dims the rewrite left symbolic stay
    so), every node named (ORT's profile names a node by its name)."""
    original = unfuse(fused)
    inputs = {i.name: i for i in fused.graph.input}
    for i in original.graph.input:
        if i.name in inputs:
            i.CopyFrom(inputs[i.name])
    del original.graph.value_info[:]
    for n in original.graph.node:
        n.name = n.name or f"node:{n.output[0]}"
    return original


def ort_name(o: OpOrigin, names: set[str], by_output: dict[str, str]) -> str | None:
    """The original node a program op's time belongs to, as ORT's profile names it (None: the profile
    has no time for it)."""
    outputs = (o.output, MICROBATCH_SUFFIX.sub("", o.output))
    candidates = (o.node, MICROBATCH_SUFFIX.sub("", o.node), *(by_output.get(t, "") for t in outputs))
    return next((c for c in candidates if c in names), None)


def measure(fused_path: Path, runs: int, schedule: str, folder: Path) -> tuple[list[dict], dict[str, list[float]]]:
    """(per traced run: pair node -> program op -> seconds, ORT node name -> seconds per run)."""
    fused = onnx.load(str(fused_path))
    original = folder / "original.onnx"
    onnx.save(original_for_ort(fused), str(original))
    reference = ort.InferenceSession(
        str(original), sess_options=profiling_options(folder), providers=["CPUExecutionProvider"]
    )
    feeds = random_inputs(reference)
    pattern = str(folder / "{node}.json")
    so = profiling_options(folder)
    so.enable_profiling = False
    plugin = InferenceSession(str(fused_path), backend="host", trace=pattern, so=so, schedule=schedule)
    pairs = sorted(program_op_maps(fused))
    traced: list[dict] = []
    for block in range(BLOCKS):
        for i in range(WARMUP * (block == 0) + runs // BLOCKS):
            plugin.run(None, feeds)
            if block or i >= WARMUP:
                traced.append({p: trace_op_seconds(trace_doc(pattern, p)) for p in pairs})
        for _ in range(WARMUP * (block == 0) + runs // BLOCKS):
            reference.run(None, feeds)
    return traced, node_times(json.loads(Path(reference.end_profiling()).read_text()), WARMUP)


def trace_doc(pattern: str, node: str) -> dict:
    return json.loads(Path(pattern.replace("{node}", node.replace("/", "_"))).read_text())


def report(fused_path: Path, runs: int, schedule: str, stat: Callable[[list[float]], float], top: int) -> None:
    with tempfile.TemporaryDirectory(prefix="op-times-") as folder:
        traced, ort_times = measure(fused_path, runs, schedule, Path(folder))
        fused = onnx.load(str(fused_path), load_external_data=False)
    original = original_for_ort(fused)
    op_type = {n.name: n.op_type for n in original.graph.node}
    by_output = {n.output[0]: n.name for n in original.graph.node}
    rows = []  # (kernel seconds, op type, program op's node, ORT node or None)
    for pair, origins in program_op_maps(fused).items():
        for o in origins:
            seconds = stat([run[pair].get(o.op, 0.0) for run in traced])
            rows.append((seconds, o.op_type, o.node or o.output, ort_name(o, set(ort_times), by_output)))
    kernel: dict[str, float] = {}
    count: dict[str, int] = {}
    for seconds, kind, _, _ in rows:
        kernel[kind] = kernel.get(kind, 0.0) + seconds
        count[kind] = count.get(kind, 0) + 1
    ort_by_type: dict[str, float] = {}
    for name in {r[3] for r in rows if r[3] is not None}:
        ort_by_type[op_type[name]] = ort_by_type.get(op_type[name], 0.0) + stat(ort_times[name])
    print(f"{fused_path.name}: schedule {schedule}, {stat.__name__} of {len(traced)} runs per op")
    print(f"  {'op type':<22} {'ops':>4} {'kernel us':>10} {'ORT us':>9} {'kernel/ORT':>10}")
    for kind in sorted(kernel, key=lambda k: ort_by_type.get(k, 0.0) - kernel[k]):
        k, o = kernel[kind] * 1e6, ort_by_type.get(kind, 0.0) * 1e6
        print(f"  {kind:<22} {count[kind]:>4} {k:10.1f} {o:9.1f} {f'{k / o:.2f}x' if o else 'n/a':>10}")
    print(f"  {'all':<27} {sum(kernel.values()) * 1e6:10.1f} {sum(ort_by_type.values()) * 1e6:9.1f}")
    for seconds, kind, node, name in sorted(rows, key=lambda r: -r[0])[:top]:
        o = f"{stat(ort_times[name]) * 1e6:9.1f}" if name else f"{'n/a':>9}"
        print(f"    {seconds * 1e6:8.1f} us  ORT {o}  {kind:<12} {node[-60:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--schedule", choices=("serial", "fused"), default="serial")
    ap.add_argument("--stat", choices=("min", "median"), default="min")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    if not args.model.is_file():
        print(f"op_times: {args.model}: no such file", file=sys.stderr)
        return 2
    if not program_op_maps(onnx.load(str(args.model), load_external_data=False)):
        print(f"op_times: {args.model}: no FusedHexPair node with a program (rewrite the model first)", file=sys.stderr)
        return 3
    meter = CpuMeter()
    report(args.model, args.runs, args.schedule, min if args.stat == "min" else statistics.median, args.top)
    print(load_text(meter.others()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
