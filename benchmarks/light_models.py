"""Acceptance harness of issue 11 on the light models of the installed onnx package.

onnx ships `backend/test/data/light/*.onnx`: real architectures (AlexNet, DenseNet-121,
Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) whose weights are
ConstantOfShape nodes filling 0.02. `prepare` turns each into a model worth fusing: every float
weight becomes seeded random values of its shape (He-scaled for Conv/Gemm weights, BatchNorm
variance positive, the classifier scaled to logits of unit spread), the Reshape shapes copy the
batch instead of fixing it, and the input is declared [N, 3, H, W] (H and W only where the
original runs at another spatial size; fixed pooling before a Gemm does not). Then, per target,
`rewrite` runs with `--shape` fixed to the model's own shape and without it; the script reports
pairs, what blocked the rest, time, whether the written model kept the input dims, and the worst
relative error of fallback (stock ORT) and plugin (host backend) against the original at three
input shapes.

    python benchmarks/light_models.py                          # every light model, both targets
    python benchmarks/light_models.py --models squeezenet,resnet50 --targets host
    python benchmarks/light_models.py --call-overhead-us 0 --json build/light.json   # the call not counted

Timings are wall seconds of one pass on a loaded 2-core machine: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
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
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hexfuse_onnx import pipeline, verify  # noqa: E402
from hexfuse_onnx.costmodel import CALL_OVERHEAD_ENV  # noqa: E402
from hexfuse_onnx.errors import HexfuseError  # noqa: E402
from hexfuse_onnx.report import rejection_lines  # noqa: E402

SPATIAL_TRIES = (200, 256, 192)  # first the original accepts is the "other spatial size"
TARGETS = ("hexagon-v73", "host")


def light_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_names() -> list[str]:
    return sorted(p.stem.removeprefix("light_") for p in light_dir().glob("light_*.onnx"))


@dataclass
class Prepared:
    name: str
    path: Path
    input_name: str
    shapes: list[list[int]]  # own shape, batch 2, other spatial size (when accepted)
    spatial_note: str


# --- weights -------------------------------------------------------------------------------------


def _consumers(graph: onnx.GraphProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, i))
    return uses


Role = tuple[onnx.NodeProto | None, int]


def _role(name: str, uses: dict[str, list[tuple[onnx.NodeProto, int]]]) -> Role:
    """The node a weight feeds and at which input, looking through Unsqueeze/Reshape."""
    for node, index in uses.get(name, []):
        if node.op_type in ("Unsqueeze", "Reshape") and index == 0:
            return _role(node.output[0], uses)
        return node, index
    return None, -1


def _fan_in(node: onnx.NodeProto, shape: tuple[int, ...]) -> int:
    if node.op_type == "Conv":
        return int(np.prod(shape[1:]))
    trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
    return shape[1] if trans_b else shape[0]


def _random_weight(shape: tuple[int, ...], role: Role, rng: np.random.Generator) -> np.ndarray:
    node, index = role
    op = node.op_type if node is not None else ""
    if node is not None and op in ("Conv", "Gemm") and index == 1 and len(shape) >= 2:
        return rng.normal(0.0, math.sqrt(2.0 / _fan_in(node, shape)), shape)
    if op == "BatchNormalization" and index in (1, 4):  # scale, variance
        return rng.uniform(0.5, 1.5, shape)
    if op == "Mul":  # the affine scale Caffe2 exports after a BatchNorm
        return rng.uniform(0.5, 1.5, shape)
    return rng.normal(0.0, 0.1, shape)  # biases, BatchNorm mean and shift, Add's shift


def randomize_weights(model: onnx.ModelProto, seed: int) -> None:
    """Float ConstantOfShape weights and float initializers become seeded random initializers."""
    g = model.graph
    rng = np.random.default_rng(seed)
    uses = _consumers(g)
    inits = {t.name: t for t in g.initializer}
    keep, new_inits = [], []
    for node in g.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if node.op_type == "ConstantOfShape" and node.input[0] in inits and (value is None or value.data_type == 1):
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
            data = _random_weight(shape, _role(node.output[0], uses), rng).astype(np.float32)
            new_inits.append(numpy_helper.from_array(data, node.output[0]))
        else:
            keep.append(node)
    for t in g.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            data = _random_weight(tuple(t.dims), _role(t.name, uses), rng).astype(np.float32)
            t.CopyFrom(numpy_helper.from_array(data, t.name))
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(new_inits)
    names = {t.name for t in g.initializer}
    used = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name in used]  # the ConstantOfShape shapes go
    del g.initializer[:]
    g.initializer.extend(kept)
    real_inputs = [v for v in g.input if v.name not in names]  # weights listed as inputs become constants
    del g.input[:]
    g.input.extend(real_inputs)
    model.ir_version = max(model.ir_version, 4)  # IR 3 wants every initializer listed as an input


# Ops between the classifier and Softmax that scale with it: scaling its weight and bias by c > 0
# scales the logits by c.
_HOMOGENEOUS = ("Relu", "Dropout", "Reshape", "Flatten", "AveragePool", "GlobalAveragePool")


def temper_logits(model: onnx.ModelProto, input_name: str, shape: list[int], seed: int) -> None:
    """Scale the classifier so the logits have unit spread: random weights otherwise make the
    final Softmax one-hot, which hides any error of the layers before it."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    softmax = next((n for n in g.node if n.op_type == "Softmax"), None)
    if softmax is None:
        return
    node = producer.get(softmax.input[0])
    while node is not None and node.op_type in _HOMOGENEOUS:
        node = producer.get(node.input[0])
    if node is None or node.op_type not in ("Gemm", "Conv"):
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.add().name = softmax.input[0]
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    spread = float(np.std(session.run([softmax.input[0]], {input_name: x})[0]))
    inits = {t.name: t for t in g.initializer}
    for name in node.input[1:]:
        while name not in inits and name in producer and producer[name].op_type in ("Reshape", "Unsqueeze"):
            name = producer[name].input[0]  # inception_v1 reshapes its classifier weight
        scaled = numpy_helper.to_array(inits[name]) / np.float32(spread)
        inits[name].CopyFrom(numpy_helper.from_array(scaled.astype(np.float32), name))


# --- shapes --------------------------------------------------------------------------------------


def free_batch_in_reshapes(model: onnx.ModelProto) -> None:
    """Reshape targets that fix the batch to 1 copy it instead (0); a flatten to [1, K] becomes Flatten."""
    g = model.graph
    uses = _consumers(g)
    for t in g.initializer:
        if t.data_type != onnx.TensorProto.INT64 or not all(n.op_type == "Reshape" and i == 1 for n, i in uses[t.name]):
            continue
        shape = numpy_helper.to_array(t).copy()
        if shape.size == 2 and shape[0] == 1:
            for node, _ in uses[t.name]:
                node.op_type = "Flatten"
                del node.input[1:]
                node.attribute.append(onnx.helper.make_attribute("axis", 1))
        elif shape.size and shape[0] == 1:
            shape[0] = 0
            t.CopyFrom(numpy_helper.from_array(shape, t.name))


def declare_input(model: onnx.ModelProto, dims: list[int | str]) -> None:
    (inp,) = model.graph.input
    shape = inp.type.tensor_type.shape
    for d, v in zip(shape.dim, dims):
        d.Clear()
        if isinstance(v, str):
            d.dim_param = v
        else:
            d.dim_value = v
    for out in model.graph.output:  # output sizes follow the input now
        for d in out.type.tensor_type.shape.dim:
            d.Clear()
    del model.graph.value_info[:]


def _runs(path: Path, input_name: str, shape: list[int]) -> bool:
    """Whether the model runs at this input shape, asked in a child process: ONNX Runtime (1.32,
    all optimizations on) dies of SIGFPE where a fixed 7x7 AveragePool gets a smaller map, as
    resnet50 at 192x192 and inception_v1 at 200x200 do (its NCHWc pooling)."""
    probe = (
        "import sys, numpy as np, onnxruntime as ort; "
        "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); "
        "s.run(None, {sys.argv[2]: np.zeros([int(d) for d in sys.argv[3:]], np.float32)})"
    )
    child = subprocess.run([sys.executable, "-c", probe, str(path), input_name, *map(str, shape)], capture_output=True)
    return child.returncode == 0


def prepare(name: str, cache: Path, seed: int = 0) -> Prepared:
    model = onnx.load(str(light_dir() / f"light_{name}.onnx"))
    randomize_weights(model, seed)
    free_batch_in_reshapes(model)
    (inp,) = model.graph.input
    own = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    temper_logits(model, inp.name, own, seed)
    path = cache / f"{name}.onnx"
    declare_input(model, ["N", own[1], "H", "W"])
    onnx.save(model, str(path))
    other = next((s for s in SPATIAL_TRIES if _runs(path, inp.name, [2, own[1], s, s])), None)
    if other is None:
        declare_input(model, ["N", *own[1:]])
        onnx.save(model, str(path))
        note = (
            f"spatial size fixed: the original runs at none of {SPATIAL_TRIES} (pooling before Gemm, Reshape of H, W)"
        )
        shapes = [own, [2, *own[1:]], [3, *own[1:]]]
    else:
        note = f"spatial {other}x{other} accepted"
        shapes = [own, [2, *own[1:]], [2, own[1], other, other]]
    onnx.checker.check_model(str(path), full_check=True)
    return Prepared(name, path, inp.name, shapes, note)


# --- the checks ----------------------------------------------------------------------------------


@dataclass
class Run:
    target: str
    fixed_shape: bool
    candidates: int = 0
    pairs: int = 0
    rejected: list[str] = field(default_factory=list)
    seconds: float = 0.0
    written: bool = False
    dims_kept: bool | None = None
    fallback: list[str] = field(default_factory=list)  # per shape: worst relative error or the failure
    plugin: list[str] = field(default_factory=list)
    error: str = ""


def input_dims(path: Path) -> list[list[int | str]]:
    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    return [
        [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in model.graph.input
        if v.name not in inits
    ]


def worst_error(original: Path, fused: Path, feeds: dict[str, list[int]], plugin: bool) -> str:
    from hexfuse_onnx.runtime import session_options

    options: ort.SessionOptions | None = session_options("host") if plugin else None
    try:
        c = verify.compare(original, fused, feeds, rtol=math.inf, rewritten_options=options)
    except HexfuseError as exc:
        if "Got invalid dimensions" in exc.message:
            return "FAIL: refuses the shape"
        return f"FAIL: {exc.message[:100]}"
    return f"{c.worst_relative_error:.1e}"


def run_one(m: Prepared, target: str, fixed: bool, out_dir: Path, with_plugin: bool) -> Run:
    run = Run(target, fixed)
    out = out_dir / f"{m.name}.{target}.{'shape' if fixed else 'noshape'}.fused.onnx"
    shapes = {m.input_name: m.shapes[0]} if fixed else None
    t0 = time.perf_counter()
    try:
        result = pipeline.rewrite(m.path, out, target=target, shapes=shapes)
    except HexfuseError as exc:
        run.error = f"exit {exc.exit_code}: {exc.message[:120]}"
        return run
    run.seconds = time.perf_counter() - t0
    run.candidates = len(result.analysis.candidates)
    run.pairs = len(result.analysis.pairs) if result.output else 0
    run.rejected = rejection_lines(result.analysis.rejected)
    if result.output is None:
        return run
    run.written = True
    run.dims_kept = input_dims(out) == input_dims(m.path)
    for shape in m.shapes:
        feeds = {m.input_name: shape}
        run.fallback.append(worst_error(m.path, out, feeds, plugin=False))
        if with_plugin:
            run.plugin.append(worst_error(m.path, out, feeds, plugin=True))
    return run


def _fmt(shapes: list[list[int]]) -> str:
    return ", ".join("x".join(map(str, s)) for s in shapes)


def run_model(name: str, targets: list[str], cache: Path, with_plugin: bool, record: Path) -> None:
    """Prepare one model and run every target with and without --shape; the runs so far are in
    `record` after each, so a crash loses only the run it happened in."""
    t0 = time.perf_counter()
    m = prepare(name, cache)
    print(f"\n== {name}: shapes {_fmt(m.shapes)}; {m.spatial_note} (prepared in {time.perf_counter() - t0:.1f} s)")
    entry: dict = {"prepared": {**asdict(m), "path": str(m.path)}, "runs": []}
    for target in targets:
        for fixed in (True, False):
            try:
                r = run_one(m, target, fixed, cache, with_plugin)
            except Exception as exc:  # noqa: BLE001 - one model's crash is a finding, not the end of the run
                r = Run(target, fixed, error=f"internal error: {exc!r}"[:160])
                traceback.print_exc()
            _print_run(r)
            entry["runs"].append(asdict(r))
            record.write_text(json.dumps(entry))
    sys.stdout.flush()


def _run_in_child(name: str, args: argparse.Namespace, cache: Path) -> dict:
    """One model in its own process: ONNX Runtime kills the process with SIGFPE on some shapes (_runs)."""
    record = cache / f"{name}.runs.json"
    record.unlink(missing_ok=True)
    argv = [sys.executable, __file__, "--models", name, "--targets", args.targets, "--cache", str(cache)]
    argv += ["--child", str(record)] + ["--no-plugin"] * args.no_plugin
    sys.stdout.flush()
    code = subprocess.run(argv).returncode
    entry = json.loads(record.read_text()) if record.exists() else {"prepared": None, "runs": []}
    done = {(r["target"], r["fixed_shape"]) for r in entry["runs"]}
    missing = [(t, f) for t in args.targets.split(",") for f in (True, False) if (t, f) not in done]
    why = f"died of signal {-code}" if code < 0 else f"exited {code}"
    for k, (target, fixed) in enumerate(missing):
        error = f"the process {why}" if k == 0 else "not run: the process died before"
        entry["runs"].append(asdict(Run(target, fixed, error=error)))
        if k == 0:
            _print_run(Run(target, fixed, error=error))
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help=f"comma-separated, of: {', '.join(light_names())}")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--cache", type=Path, help="keep prepared and rewritten models here (default: a temp dir, removed)")
    ap.add_argument("--no-plugin", action="store_true", help="check fallback only")
    ap.add_argument(
        "--call-overhead-us", type=float, help="replace every target's per-call overhead (HEXFUSE_CALL_OVERHEAD_US)"
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one model, its runs into this file
    args = ap.parse_args(argv)
    if args.call_overhead_us is not None:
        os.environ[CALL_OVERHEAD_ENV] = str(args.call_overhead_us)
    names = args.models.split(",") if args.models else light_names()
    unknown = sorted(set(names) - set(light_names()))
    if unknown:
        print(f"unknown light model(s): {', '.join(unknown)} (have: {', '.join(light_names())})", file=sys.stderr)
        return 2
    cache = args.cache or Path(tempfile.mkdtemp(prefix="hexfuse-light-"))
    cache.mkdir(parents=True, exist_ok=True)
    if args.child:
        run_model(names[0], args.targets.split(","), cache, not args.no_plugin, args.child)
        return 0
    skipped = [n for n in light_names() if n not in names]
    print(f"onnx {onnx.__version__} light models in {light_dir()}; cache {cache}")
    if skipped:
        print(f"skipped: {', '.join(skipped)}")
    report: dict[str, dict] = {}
    try:
        for name in names:
            report[name] = _run_in_child(name, args, cache)
    finally:
        if args.cache is None:  # about 1.5 GB of models for the full set
            shutil.rmtree(cache, ignore_errors=True)
    _print_summary({name: [Run(**r) for r in entry["runs"]] for name, entry in report.items()})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return 0


def _print_run(r: Run) -> None:
    mode = "--shape" if r.fixed_shape else "no --shape"
    if r.error:
        print(f"  {r.target:11s} {mode:10s} {r.error}")
        return
    print(
        f"  {r.target:11s} {mode:10s} pairs {r.pairs:3d}  {r.seconds:6.1f} s  input dims {_dims(r):5s}"
        f"  fallback [{', '.join(r.fallback)}]  plugin [{', '.join(r.plugin)}]"
    )
    for line in r.rejected or ["no candidate pair"] * (r.candidates == 0):
        print(f"      {line}")


def _print_summary(report: dict[str, list[Run]]) -> None:
    """One line per model and target, with --shape | without: pairs, input dims, worst error over the shapes."""
    print("\nwith --shape | without       pairs     input dims     fallback (3 shapes)          plugin (3 shapes)")
    for name, runs in report.items():
        for fixed, free in zip(runs[::2], runs[1::2]):
            print(
                f"{name:13s} {fixed.target:12s} {_pairs(fixed):>3s} | {_pairs(free):3s}"
                f" {_dims(fixed):>5s} | {_dims(free):5s}"
                f"  {_worst(fixed.fallback):>12s} | {_worst(free.fallback):12s}"
                f"  {_worst(fixed.plugin):>12s} | {_worst(free.plugin)}"
            )


def _pairs(r: Run) -> str:
    return "ERR" if r.error else str(r.pairs)


def _dims(r: Run) -> str:
    return {None: "-", True: "kept", False: "FIXED"}[r.dims_kept]


def _worst(results: list[str]) -> str:
    failed = [r for r in results if r.startswith("FAIL")]
    if failed:
        return f"{len(failed)} of {len(results)} fail"
    return f"{max(float(r) for r in results):.1e}" if results else "-"


if __name__ == "__main__":
    sys.exit(main())
