"""Measure a model in one run: the original on ONNX Runtime's modes (and QNN) against the rewritten
model on the FusedHexPair plugin; medians, spreads and ratios.

    python -m hexfuse_onnx bench MODEL|ZOO_NAME [--backend host] [--baseline ort-seq,ort-par,qnn-htp] [--json F]

Every configuration's outputs are compared with `ort-seq` on the original before anything is
timed; one that disagrees is reported and not timed. Timing alternates the configurations in
blocks over several rounds, so drift hits all alike; a time is one `InferenceSession.run` call.
Ratios are of medians from the same rounds: timings on a shared machine are noisy, a ratio
measured in one run is the figure to trust.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .colocate_bench import STREAM_BASELINES

BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
BASELINES = ("ort-seq", "ort-seq-2t", "ort-par", "qnn-htp")
DEFAULT_BASELINES = ("ort-seq", "ort-seq-2t", "ort-par")
DEFAULT_TARGET = "hexagon-v73"
DEFAULT_TOL = 1e-4
QNN_TOL = 5e-2  # the emulated HTP may run float ops at reduced precision: its error is reported, not refused


def clear_blas_tuning() -> list[str]:
    """Drop the OpenBLAS tuning variables this machine sets (they pin a core type and a cache size
    that are wrong for timing). OpenBLAS reads them when it loads, so call this before the plugin
    is loaded. Returns the ones that were set."""
    present = [v for v in BLAS_VARS if v in os.environ]
    for v in present:
        os.environ.pop(v)
    return present


def reexec_without_blas_tuning(argv: list[str], mark: str = "HEXFUSE_BENCH_REEXECED") -> None:
    """Re-execute `python argv...` without the OpenBLAS variables, before anything loads a BLAS."""
    present = [v for v in BLAS_VARS if v in os.environ]
    if not present:
        return
    if os.environ.get(mark):
        raise SystemExit(f"{', '.join(present)} still set after re-exec; giving up")
    env = {k: v for k, v in os.environ.items() if k not in BLAS_VARS}
    env[mark] = ",".join(f"{v}={os.environ[v]}" for v in present)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *argv], env)


# ---- configurations, checks, timing -------------------------------------------------------------


def sample_stats(a: np.ndarray) -> dict[str, float]:
    """Median, p10 and p90 (microseconds) and the count of a set of timings."""
    return {
        "median_us": float(np.median(a)),
        "p10_us": float(np.percentile(a, 10)),
        "p90_us": float(np.percentile(a, 90)),
        "n": int(a.size),
    }


@dataclass
class Config:
    label: str
    session: Any | None  # onnxruntime.InferenceSession
    check: str = ""
    error: float | None = None
    tol: float = DEFAULT_TOL
    samples: list[float] = field(default_factory=list)  # microseconds
    visit_medians: list[float] = field(default_factory=list)  # us: each counted visit's median call after its first
    extra: dict[str, Any] = field(default_factory=dict)
    make: Callable[[], Any] | None = None  # builds the session in a worker process of its own (isolated.py)

    @property
    def ok(self) -> bool:
        return (self.session is not None or self.make is not None) and not self.check

    def stats(self) -> dict[str, float] | None:
        return sample_stats(np.asarray(self.samples)) if self.samples else None

    def record(self) -> dict[str, Any]:
        return {
            "check": self.check or "ok",
            "relative_error": self.error,
            **(self.stats() or {}),
            "samples_us": [round(x, 2) for x in self.samples],
            **({"visit_medians_us": [round(x, 2) for x in self.visit_medians]} if self.visit_medians else {}),
            **self.extra,
        }

    def median(self) -> float:
        return float(np.median(self.samples)) if self.samples else float("nan")


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def verify_config(
    cfg: Config,
    feeds: dict[str, np.ndarray],
    names: list[str],
    reference: list[np.ndarray],
    tol: float | None = None,
    steps: dict[str, float] | None = None,
) -> None:
    """Run once and compare every output with the reference (within tol, default cfg.tol, or one
    quantization step of a QDQ model's quantized output: `steps`); a mismatch refuses the config."""
    from ..verify import relative_error, within_resolution, within_step

    if tol is not None:
        cfg.tol = tol
    if cfg.session is None:
        return
    try:
        got = cfg.session.run(names, feeds)
    except Exception as exc:  # noqa: BLE001 - reported as the config's check
        cfg.check = f"fails to run: {first_line(exc)}"
        return
    worst = 0.0
    for name, ref, out in zip(names, reference, got):
        ref, out = np.asarray(ref), np.asarray(out)
        if ref.shape != out.shape:
            cfg.check = f"output '{name}' shape {list(out.shape)} != {list(ref.shape)}"
            return
        step = (steps or {}).get(name, 0.0)
        if np.issubdtype(ref.dtype, np.floating):
            err = relative_error(ref, out)
            if not err <= cfg.tol and not within_step(ref, out, step) and not within_resolution(ref, out):
                cfg.error = err
                beyond = f" and more than one quantization step ({step:.3g})" if step else ""
                cfg.check = f"output '{name}' relative error {err:.3g} > {cfg.tol:g}{beyond}"
                return
            worst = max(worst, err)
        elif not np.array_equal(ref, out) and not within_step(ref, out, step):
            cfg.check = f"output '{name}' differs"
            return
    cfg.error = worst


def time_configs(configs: list[Config], feeds: dict[str, np.ndarray], runs: int, rounds: int, warmup: int) -> None:
    """Blocks of warm-up + timed runs per config, alternating configs over `rounds` rounds."""
    live = [c for c in configs if c.ok and c.session is not None]
    rounds = max(1, min(rounds, runs))
    per_round = [runs // rounds + (1 if r < runs % rounds else 0) for r in range(rounds)]
    gc_was = gc.isenabled()
    gc.disable()  # a collection inside a timed run is noise
    try:
        for k in per_round:
            for cfg in live:
                assert cfg.session is not None  # live configs have one
                cfg.samples += timed_runs(cfg.session.run, feeds, k, warmup)
    finally:
        if gc_was:
            gc.enable()


def timed_runs(run: Callable[..., Any], feeds: dict[str, np.ndarray], runs: int, warmup: int = 0) -> list[float]:
    """`warmup` untimed calls of a session's `run`, then the wall time (us) of each of `runs` calls."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        run(None, feeds)
    samples = []
    for _ in range(runs):
        t0 = clock()
        run(None, feeds)
        samples.append((clock() - t0) / 1000.0)
    return samples


BUSY_OTHER_CPUS = 0.2  # CPUs other processes used while timing, above which the timings are the load's


class CpuMeter:
    """How much of the machine other processes used while we ran (/proc/stat and os.times): any
    other busy process distorts the timings."""

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float, float] | None:
        try:
            fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        except (OSError, ValueError, IndexError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
        t = os.times()  # with the worker processes (isolated.py) that have ended
        ours = t.user + t.system + t.children_user + t.children_system
        return sum(fields[:8]) / hz, idle / hz, ours, time.monotonic()

    def others(self) -> dict[str, float] | None:
        end = self._sample()
        if not self.start or not end:
            return None
        total, idle = end[0] - self.start[0], end[1] - self.start[1]
        wall = end[3] - self.start[3]
        if wall <= 0 or total <= 0:
            return None
        ncpu = os.cpu_count() or 1
        machine = (total - idle) / total * ncpu
        ours = (end[2] - self.start[2]) / wall
        return {"machine_busy_cpus": machine, "our_cpus": ours, "other_cpus": max(0.0, machine - ours), "cpus": ncpu}


def load_text(m: dict[str, float] | None) -> str:
    if not m:
        return "other processes' CPU use: could not tell"
    warn = "  <- timings are distorted" if m["other_cpus"] > BUSY_OTHER_CPUS else ""
    return (
        f"CPU use while measuring: ours {m['our_cpus']:.2f}, other processes {m['other_cpus']:.2f} "
        f"of {m['cpus']} CPUs{warn}"
    )


def ort_options(mode: str):
    """SessionOptions of one ORT mode (hexfuse_onnx/ort_modes.py): ort-seq, ort-seq-2t, ort-par,
    ort-default."""
    from ..ort_modes import options

    return options(mode)


# ---- one model ----------------------------------------------------------------------------------


@dataclass
class BenchResult:
    model: str
    fused_pairs: int
    note: str
    configs: list[Config]
    cpu_use: dict[str, float] | None
    seconds: float
    prediction: dict[str, Any] | None = None  # `predicted()`, when bench rewrote the model
    colocated: list[str] = field(default_factory=list)  # modelled figures of a co-located model
    inputs: str = ""  # the input shapes timed, `verify.shapes_label`

    def by_label(self) -> dict[str, Config]:
        return {c.label: c for c in self.configs}

    def best_hexfuse(self) -> Config | None:
        """The faster of `hexfuse` and `hexfuse-2t` (medians of the same rounds)."""
        timed = [c for c in self.configs if c.label in ("hexfuse", "hexfuse-2t") and c.samples]
        return min(timed, key=Config.median) if timed else None

    def ratios(self) -> dict[str, float]:
        """best hexfuse configuration / baseline for every timed baseline (below 1: hexfuse is faster)."""
        hx = self.best_hexfuse()
        if hx is None:
            return {}
        baselines = BASELINES + STREAM_BASELINES
        return {c.label: hx.median() / c.median() for c in self.configs if c.label in baselines and c.samples}

    def best_ort(self) -> Config | None:
        """The fastest timed ORT mode on the original (qnn-htp excluded: emulated)."""
        timed = [c for c in self.configs if c.label in BASELINES and c.label != "qnn-htp" and c.samples]
        return min(timed, key=Config.median) if timed else None

    def auto_over_best_ort(self) -> float | None:
        """The rewritten model with the default session options (`auto`) over the best ORT mode."""
        auto, best = self.by_label().get("auto"), self.best_ort()
        return auto.median() / best.median() if auto and auto.samples and best else None

    def over_serial(self) -> dict[str, float]:
        """`hexfuse` (the default schedule) and `hexfuse-fused` (every call fused) over `hexfuse-serial`
        (every call's tasks in sequence on the calling thread), same ORT options: above 1 costs time."""
        cfgs = self.by_label()
        serial = cfgs.get("hexfuse-serial")
        if not serial or not serial.samples:
            return {}
        return {
            k: c.median() / serial.median() for k in ("hexfuse", "hexfuse-fused") if (c := cfgs.get(k)) and c.samples
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "fused_pairs": self.fused_pairs,
            "note": self.note,
            "seconds": self.seconds,
            "cpu_use": self.cpu_use,
            "prediction": self.prediction,
            "colocated_modelled": self.colocated,
            "inputs": self.inputs,
            "configs": {c.label: c.record() for c in self.configs},
            "hexfuse_over": self.ratios(),
            "hexfuse_best": getattr(self.best_hexfuse(), "label", None),
            "auto_over_best_ort": self.auto_over_best_ort(),
            "over_serial": self.over_serial(),
            "best_ort": getattr(self.best_ort(), "label", None),
        }

    def lines(self) -> list[str]:
        cfgs = self.by_label()
        ref = cfgs.get("ort-seq")
        out = [
            f"{self.model}: {self.fused_pairs} fused pair(s){'; ' + self.note if self.note else ''}",
            f"  inputs {self.inputs}",
            f"  {'configuration':<20} {'median us':>10} {'p10':>10} {'p90':>10} {'/ort-seq':>9}  check",
        ]
        for c in self.configs:
            s = c.stats()
            if c.check or s is None:
                out.append(f"  {c.label:<20} {'':>10} {'':>10} {'':>10} {'':>9}  not timed: {c.check or 'no samples'}")
                continue
            rel = f"{s['median_us'] / ref.median():8.2f}x" if ref and ref.samples else f"{'-':>9}"
            err = f"ok (err {c.error:.1e})" if c.error is not None else "ok"
            note = f"; {c.extra['note']}" if "note" in c.extra else ""
            out.append(
                f"  {c.label:<20} {s['median_us']:10.1f} {s['p10_us']:10.1f} {s['p90_us']:10.1f} {rel}  {err}{note}"
            )
        if self.prediction and self.prediction["pairs_by_kind"]:
            p = self.prediction
            out.append(
                f"  predicted on {p['target']} (cost model, modelled): pairs "
                + ", ".join(f"{k} {n}" for k, n in p["pairs_by_kind"].items())
                + f", {p['pairs_serial_us']:.1f} us serial -> {p['pairs_fused_us']:.1f} us fused, "
                f"{p['gain_of_model']:.1%} of the model's op-by-op time"
            )
        out += [f"  {line}" for line in self.colocated]
        ratios = self.ratios()
        if ratios:
            best = self.best_hexfuse()
            assert best is not None
            out.append(
                f"  {best.label} (the faster hexfuse configuration) / baseline: "
                + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
            )
        serial = self.over_serial()
        if serial:
            out.append(
                "  / hexfuse-serial (tasks in sequence on the caller): "
                + ", ".join(f"{k} {v:.2f}x" for k, v in serial.items())
            )
        auto, best_ort = self.auto_over_best_ort(), self.best_ort()
        if auto is not None and best_ort is not None:
            out.append(f"  auto (default session options) / best ORT mode ({best_ort.label}): {auto:.2f}x")
        out.append("  " + load_text(self.cpu_use))
        return out


def parse_baselines(text: str) -> list[str]:
    from ..errors import UsageError

    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in BASELINES]
    if unknown or not names:
        raise UsageError(f"--baseline: unknown {', '.join(unknown) or '(empty)'}; known: {', '.join(BASELINES)}")
    return list(dict.fromkeys(names))


def predicted(analysis) -> dict[str, Any]:
    """What the cost model says about the chosen pairs (MODELLED for a Hexagon target): pairs by
    kind, their serial and fused time, and the saving against the whole model run op by op."""
    from ..costmodel import task_time
    from ..profile import TaskProfile

    kinds: dict[str, int] = {}
    for p in analysis.pairs:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    serial = sum(p.prediction.serial for p in analysis.pairs)
    fused = sum(p.prediction.fused_call for p in analysis.pairs)
    whole = task_time(TaskProfile.of(list(analysis.profile.nodes.values())), analysis.target)
    return {
        "target": analysis.target.name,
        "pairs_by_kind": kinds,
        "candidates": len(analysis.candidates),
        "pairs_serial_us": serial * 1e6,
        "pairs_fused_us": fused * 1e6,
        "model_op_by_op_us": whole * 1e6,
        "gain_of_model": (serial - fused) / whole if whole > 0 else 0.0,
    }


def planned_target(model: Path) -> str | None:
    """The target a co-located model's pairs were chosen for (its plan's), None for other models."""
    import onnx

    from ..colocate import plan_of

    plan = plan_of(onnx.load(str(model), load_external_data=False))
    return plan.target if plan is not None else None


def _prepare(
    model: Path, work: Path, shapes, target: str, progress
) -> tuple[Path, Path | None, str, dict[str, Any] | None]:
    """(original, rewritten or None, note, prediction): a rewritten input is unfused for the
    baselines (and has no prediction)."""
    import onnx

    from ..contract import DOMAIN
    from ..modelio import stage
    from ..pipeline import rewrite
    from ..rewrite import unfuse

    head = onnx.load(str(model), load_external_data=False)
    if any(n.domain == DOMAIN for n in head.graph.node):
        full = onnx.load(str(model))
        original = work / "original.onnx"
        stage(unfuse(full), original, model.resolve().parent).commit()
        return original, model, "the baselines run its unfused original", None
    progress(f"rewriting {model.name} (target {target})")
    result = rewrite(model, work / "fused.onnx", target=target, shapes=shapes, progress=progress)
    if result.output is None:
        from ..report import none_kept

        why = none_kept(result.analysis.all_rejected())
        return model, None, f"{why}: nothing to fuse, hexfuse not timed", predicted(result.analysis)
    return model, result.output, "", predicted(result.analysis)


def bench(
    model: str | os.PathLike[str],
    backend: str = "host",
    baselines: list[str] | None = None,
    runs: int = 50,
    rounds: int = 5,
    warmup: int = 3,
    shapes: dict[str, list[int]] | None = None,
    target: str | None = None,
    workers: int | None = None,
    seed: int = 0,
    progress: Callable[[str], None] = lambda m: None,
    tol: float = DEFAULT_TOL,
) -> BenchResult:
    """Measure one model (a path; a model without FusedHexPair nodes is rewritten first). `tol`:
    how far the plugin's outputs may be from ort-seq's (relative to each output's scale). `target`:
    the cost-model target; by default a co-located model's own (recorded by `colocate`), else
    hexagon-v73."""
    import onnx

    from ..contract import DOMAIN
    from ..lowering.rewritten import recorded_bindings
    from ..pipeline import runnable_inputs
    from ..qdq import output_steps
    from ..verify import random_inputs, shapes_label
    from . import isolated
    from .colocate_bench import modelled_lines, stream_configs

    baselines = baselines or list(DEFAULT_BASELINES)
    model = Path(model)
    target = target or planned_target(model) or DEFAULT_TARGET
    meter, start = CpuMeter(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hexfuse-bench-") as folder:
        original, fused, note, prediction = _prepare(model, Path(folder), shapes, target, progress)
        original, fused = _seeded(original, fused, Path(folder), progress)
        fused_header = onnx.load(str(fused), load_external_data=False) if fused is not None else None
        n_pairs = sum(1 for n in fused_header.graph.node if n.domain == DOMAIN) if fused_header is not None else 0
        if not shapes:  # symbolic dims: at the shapes the rewrite analysed, as tune (with no pair: would have)
            shapes = (
                recorded_bindings(fused_header)[0]
                if fused_header is not None
                else runnable_inputs(original, None, progress)
            )
        progress("creating sessions and checking every configuration's outputs against ort-seq")
        reference_session = _cpu_session(original, "ort-seq")
        feeds = random_inputs(reference_session, shapes, seed)
        progress(f"inputs {shapes_label(feeds)}")
        names = [o.name for o in reference_session.get_outputs()]
        reference = _run_reference(reference_session, feeds, names, model)

        configs: list[Config] = []

        def add(label: str, make: Callable[[], Any], tol: float = DEFAULT_TOL, **extra: Any) -> None:
            configs.append(Config(label, None, tol=tol, extra=extra, make=make))

        for b in baselines:
            if b == "qnn-htp":
                add(b, partial(_qnn_session, original), QNN_TOL, note=QNN_NOTE)
            else:
                add(b, partial(isolated.ort_session, str(original), b))
        for label, make, what in stream_configs(original, Path(folder)):
            add(label, make, note=what)  # a co-located model: its streams as separate models
        colocated = modelled_lines(original, shapes, target, fused_header)
        if fused is not None:
            for label, make, fused_tol, what in _fused_configs(str(fused), backend, workers, baselines, tol):
                add(label, make, fused_tol, note=what)
        steps = output_steps(onnx.load(str(original), load_external_data=False))
        del reference_session
        progress(f"timing {len(configs)} configuration(s), each in its own process: {runs} runs in {rounds} rounds")
        with isolated.started(configs, feeds, names, reference, steps) as processes:
            processes.time(runs, rounds, warmup)
    seconds = time.perf_counter() - start
    return BenchResult(
        model.name, n_pairs, note, configs, meter.others(), seconds, prediction, colocated, shapes_label(feeds)
    )


def _seeded(original: Path, fused: Path | None, work: Path, progress) -> tuple[Path, Path | None]:
    """Copies of both with their unseeded random ops given seeds where there are any: every configuration
    runs in a process of its own, where ORT would seed such an op otherwise, and its outputs are checked
    against ort-seq's. A seed changes which numbers are drawn, not the kernels timed."""
    from .. import random_ops

    count = random_ops.unseeded_count(original)
    if not count:
        return original, fused
    progress(f"{count} random op(s) without a seed: every configuration runs a copy with seeds given")
    seeded = random_ops.seeded_file(original, work / "original.seeded.onnx")
    return seeded, fused and random_ops.seeded_file(fused, work / "fused.seeded.onnx")


QNN_NOTE = "HTP emulated on x86: its time follows the host, not a device"


def _run_reference(session: Any, feeds: dict[str, np.ndarray], names: list[str], model: Path) -> list[Any]:
    """The original's outputs on the seeded inputs; ModelError (exit 3) with the shapes when it fails
    there (a rewritten model without --shape: caustic_painn's at its default 1 atom, exit 70 before)."""
    from ..errors import ModelError
    from ..verify import shapes_label

    try:
        return list(session.run(names, feeds))
    except Exception as exc:  # noqa: BLE001 - ORT's reason is the message
        raise ModelError(
            f"{model}: the original model fails on seeded random inputs at {shapes_label(feeds)}; give its dims "
            f"with --shape ({first_line(exc)})"
        ) from None


def _fused_configs(
    fused: str, backend: str, workers: int | None, baselines: list[str], tol: float
) -> list[tuple[str, Callable[[], Any], float, str]]:
    """(label, picklable session maker, tolerance, note) of the rewritten model's configurations."""
    from . import isolated

    plugin = partial(isolated.hexfuse_session, fused, "ort-seq", backend=backend, workers=workers)
    out: list[tuple[str, Callable[[], Any], float, str]] = [
        (
            "fallback",
            partial(isolated.ort_session, fused, "ort-seq"),
            DEFAULT_TOL,
            "rewritten model on stock ORT (the pairs' fallback bodies), ort-seq",
        ),
        (
            "auto",
            partial(isolated.hexfuse_session, fused, None, workers=workers),
            tol,
            "hexfuse_onnx.InferenceSession's defaults: backend auto (the plugin only where it is expected to pay), "
            "ORT's default session options (an untuned model's session chooses ORT's mode during its first calls)",
        ),
        (
            "hexfuse",
            plugin,
            tol,
            f"rewritten model with the plugin ({backend} backend), ORT sequential 1 thread around it",
        ),
    ]
    if backend == "host":
        out.append(
            (
                "hexfuse-fused",
                partial(plugin, schedule="fused"),
                tol,
                "the same, every call fused: both tasks at once on the pool (HEXFUSE_SCHEDULE=fused)",
            )
        )
        out.append(
            (
                "hexfuse-serial",
                partial(plugin, schedule="serial"),
                tol,
                "the same, every call's task A then task B on the calling thread alone (HEXFUSE_SCHEDULE=serial)",
            )
        )
    if "ort-seq-2t" in baselines:
        out.append(
            (
                "hexfuse-2t",
                partial(isolated.hexfuse_session, fused, "ort-seq-2t", backend=backend, workers=workers),
                tol,
                "the same with 2 ORT intra-op threads for the unfused nodes",
            )
        )
    return out


def _cpu_session(path: Path, mode: str) -> Any:
    """An InferenceSession of stock ORT's CPU provider in one of ort_options' modes."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), sess_options=ort_options(mode), providers=["CPUExecutionProvider"])


def _qnn_session(path: Path):
    import onnxruntime as ort

    from . import qnn

    so = qnn.session_options(ort_options("ort-seq"))
    return ort.InferenceSession(str(path), sess_options=so)
