"""An engine model of a target, predicting a task alone, two tasks in series, and fused.

THIS IS A MODEL, NOT A MEASUREMENT. Every Hexagon figure below is modelled: either taken from a
public document (named in its `source`) or an assumption (marked so); none was measured on a
device. The host figures describe this development machine; `hexfuse_onnx.calibrate` fits them
from ORT per-op profiling and from the kernel's own work-item times, and writes the fit that
predicts the plugin's fused calls better as a "host-calibrated" target in JSON (`load_target` reads it,
`register_target` makes it usable by name). `parameter_table` renders any target's parameters
and their sources as markdown rows for the results page.

How the prediction works: each op needs compute on one engine (matrix, vector, or the
memory/DMA path) and bytes from DDR. A task runs its ops in order. When two tasks run fused,
a fluid simulation advances both at once: the vector contexts are split by the work share
(a task alone gets all of them), the single matrix engine is time-shared by the same share
when both want it, and DDR bandwidth is split max-min fairly. An op progresses at the rate
its scarcest resource allows. Each op also pays a fixed dispatch/sync overhead. This counts
contention for DDR and engines; the on-chip budget is a hard constraint checked by `fits`.
Within a task, intermediates stay in the on-chip arena: DDR carries weights, the task's
inputs and the tensors that leave it (`GraphProfile.task`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

from .profile import Engine, TaskProfile


@dataclass(frozen=True)
class Param:
    value: float
    unit: str
    source: str  # a citation, "measured: ...", or "assumption: ..."


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    matrix_flops: Param  # matrix engine throughput, whole engine
    vector_contexts: Param  # vector workers (HVX contexts / CPU cores for vector work)
    vector_flops_per_context: Param
    dma_bytes: Param  # copy engine throughput (memory-class ops)
    ddr_bytes: Param  # DDR bandwidth reachable by the accelerator
    onchip_bytes: Param  # on-chip memory both tasks' working sets must share (VTCM)
    op_overhead_s: Param  # dispatch + sync per op inside the persistent kernel
    # Fixed cost of one FusedHexPair kernel call (runtime glue, pool wake-up and join): a pair pays
    # it once on top of its tasks' fused time (`Prediction.call`); calibration measures it.
    call_overhead_s: Param = Param(0.0, "s", "not modelled")
    # Integer rates, for the op of a QDQ group (`NodeProfile.int_bits`): 2 ops per MAC, as FLOPs.
    # A target without them runs integer work at its float rates.
    matrix_int8_ops: Param | None = None
    vector_int8_ops_per_context: Param | None = None
    vector_int16_ops_per_context: Param | None = None

    def params(self) -> dict[str, Param]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, Param)}

    def to_json(self) -> str:
        """The target as JSON (`load_target` reads it back)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "params": {k: asdict(v) for k, v in self.params().items()},
        }

    @classmethod
    def from_json(cls, text: str) -> Target:
        doc = json.loads(text)
        if isinstance(doc, dict) and isinstance(doc.get("target"), dict):
            doc = doc["target"]  # a calibration result carries its target
        try:
            params = {k: Param(float(v["value"]), str(v["unit"]), str(v["source"])) for k, v in doc["params"].items()}
            return cls(name=str(doc["name"]), description=str(doc["description"]), **params)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a cost-model target document: {exc!r}") from None

    @property
    def vector_flops(self) -> float:
        return self.vector_contexts.value * self.vector_flops_per_context.value

    def rate(self, engine: Engine, int_bits: int) -> float:
        """Ops per second of a matrix or vector op, at its integer width (0: float)."""
        if engine == Engine.MATRIX:
            p = self.matrix_int8_ops if int_bits == 8 else None
            return (p or self.matrix_flops).value
        p = {8: self.vector_int8_ops_per_context, 16: self.vector_int16_ops_per_context}.get(int_bits)
        return self.vector_contexts.value * (p or self.vector_flops_per_context).value


_HEXAGON_CLOCK_HZ = 1.0e9  # modelled (assumption): cDSP clock of about 1 GHz (not published per SKU)

# Every figure of this target is MODELLED, none measured: "modelled (assumption)" is a figure we
# chose, "modelled (document)" one read from the public document named.
HEXAGON_V73 = Target(
    name="hexagon-v73",
    description=(
        "Hexagon v73 cDSP (Snapdragon 8 Gen 2 class): HMX + 4 HVX-128B contexts + VTCM (modelled, not measured)"
    ),
    matrix_flops=Param(
        4096 * _HEXAGON_CLOCK_HZ,
        "FLOP/s",
        "modelled (assumption): HMX 2048 fp16 MAC/cycle at an assumed 1 GHz; Qualcomm publishes no HMX rate",
    ),
    vector_contexts=Param(
        4,
        "contexts",
        "modelled (assumption): 4 HVX contexts on the v73 cDSP; the Hexagon V73 HVX "
        "Programmer's Reference describes per-context 128-byte vectors, the context "
        "count is part-specific",
    ),
    vector_flops_per_context=Param(
        64 * _HEXAGON_CLOCK_HZ,
        "FLOP/s",
        "modelled (assumption): 32 fp32 (qf32) lanes x multiply-add per cycle per "
        "context at an assumed 1 GHz (128-byte vectors: Hexagon V73 HVX "
        "Programmer's Reference)",
    ),
    dma_bytes=Param(30e9, "B/s", "modelled (assumption): user DMA limited by the DDR share below"),
    ddr_bytes=Param(
        30e9,
        "B/s",
        "modelled (assumption): about half of the LPDDR5X-8533 x64 peak (68 GB/s, "
        "Snapdragon 8 Gen 2 spec sheet) reachable by the cDSP",
    ),
    onchip_bytes=Param(
        8 * 2**20, "B", "modelled (document): 8 MB VTCM on v73 per the Hexagon SDK documentation (not measured here)"
    ),
    op_overhead_s=Param(2e-6, "s", "modelled (assumption): per-op barrier/dispatch inside a persistent kernel"),
    call_overhead_s=Param(
        100e-6,
        "s",
        "modelled (assumption): one FastRPC round trip to the cDSP per kernel "
        "call, order of 100 us; not measured (no device here)",
    ),
    matrix_int8_ops=Param(
        8192 * _HEXAGON_CLOCK_HZ,
        "op/s",
        "modelled (assumption): HMX int8 at twice its fp16 rate (4096 MAC/cycle) at an assumed 1 GHz; "
        "Qualcomm publishes no HMX rate",
    ),
    vector_int8_ops_per_context=Param(
        256 * _HEXAGON_CLOCK_HZ,
        "op/s",
        "modelled (document): vrmpy, 32 lanes x 4 8-bit multiply-adds per cycle per context (Hexagon V73 "
        "HVX Programmer's Reference), at an assumed 1 GHz",
    ),
    vector_int16_ops_per_context=Param(
        128 * _HEXAGON_CLOCK_HZ,
        "op/s",
        "modelled (document): vmpyh-class, 64 16-bit multiply-adds per cycle per context (Hexagon V73 "
        "HVX Programmer's Reference), at an assumed 1 GHz",
    ),
)

# The defaults of this machine. `hexfuse_onnx.calibrate` fits a "host-calibrated" target from ORT
# per-op profiling; the figures below stay the pass's defaults for `--target host`.
HOST = Target(
    name="host",
    description="this x86 development machine: 1 matrix worker + 1 vector worker (2 cores)",
    matrix_flops=Param(
        80e9,
        "FLOP/s",
        "measured: 79-85 GFLOP/s single-thread fp32, least-squares fit to 49 ORT-profiled "
        "MatMul/Gemm/Conv ops of the zoo (hexfuse_onnx.calibrate, this 2-core VM, 2026-11-29; "
        "its larger MatMuls reach about 97); the 225-240 GFLOP/s measured on another VM is not reached here",
    ),
    vector_contexts=Param(1, "workers", "2 cores: one matrix worker, one vector worker (the pool's default)"),
    vector_flops_per_context=Param(8e9, "FLOP/s", "assumption: see hexfuse_onnx.calibrate for the fitted figure"),
    dma_bytes=Param(8e9, "B/s", "assumption: single-core memcpy-class throughput; see hexfuse_onnx.calibrate"),
    ddr_bytes=Param(20e9, "B/s", "assumption: two-core DRAM bandwidth; see hexfuse_onnx.calibrate"),
    onchip_bytes=Param(8 * 2**20, "B", "the host kernel's scratch arena (hfx_pool_config_init default, 8 MiB)"),
    op_overhead_s=Param(5e-6, "s", "assumption: per-op work-item dispatch on the host pool"),
    call_overhead_s=Param(
        40e-6,
        "s",
        "measured: 14-74 us per FusedHexPair call on this VM in hexfuse_onnx.calibrate "
        "runs after the caller-as-worker scheduler (median over 10 zoo pairs of "
        "hfx_run's wall time minus the work-item span, same traced runs, 2026-11-29); "
        "noisy",
    ),
)

TARGETS = {t.name: t for t in (HEXAGON_V73, HOST)}


# Overrides every target's per-call overhead, in microseconds (the test suite sets 0: its zoo graphs
# are miniatures whose pairs save less than a Hexagon call, and it tests the pass's mechanics).
CALL_OVERHEAD_ENV = "HEXFUSE_CALL_OVERHEAD_US"


def get_target(name: str) -> Target:
    """The named target, its call overhead replaced when HEXFUSE_CALL_OVERHEAD_US is set."""
    try:
        target = TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target '{name}' (known: {', '.join(TARGETS)})") from None
    override = os.environ.get(CALL_OVERHEAD_ENV, "").strip()
    if not override:
        return target
    try:
        us = float(override)
    except ValueError:
        raise ValueError(f"{CALL_OVERHEAD_ENV}={override!r} is not a number of microseconds") from None
    if not 0 <= us < float("inf"):
        raise ValueError(f"{CALL_OVERHEAD_ENV}={override!r} must be >= 0 microseconds")
    return replace(target, call_overhead_s=Param(us * 1e-6, "s", f"set by {CALL_OVERHEAD_ENV}"))


def register_target(target: Target) -> None:
    """Make `target` known by name to `get_target` (and so to `pipeline.analyse`/`rewrite`)."""
    TARGETS[target.name] = target


def load_target(path: str | os.PathLike[str]) -> Target:
    """A target written by `Target.to_json` (raises ValueError when the file is not one)."""
    with open(path, encoding="utf-8") as f:
        return Target.from_json(f.read())


def parameter_table(target: Target) -> list[str]:
    """Markdown rows (header first) of the target's parameters: value, unit and source."""
    rows = [
        f"Cost model parameters: `{target.name}` ({target.description})",
        "",
        "| parameter | value | unit | source |",
        "|---|---:|---|---|",
    ]
    for key, p in target.params().items():
        source = p.source.replace("|", "\\|")
        rows.append(f"| {key} | {p.value:.4g} | {p.unit} | {source} |")
    return rows


@dataclass(frozen=True)
class Prediction:
    """Serial time (A then B, each node a call of its own), the two tasks' fused time, and the
    fixed cost of the one kernel call the fused pair adds (`Target.call_overhead_s`)."""

    time_a: float
    time_b: float
    serial: float
    fused: float
    share_a: float
    call: float = 0.0

    @property
    def fused_call(self) -> float:
        """The fused pair's predicted time as a call: its tasks fused plus the call overhead."""
        return self.fused + self.call

    @property
    def saved(self) -> float:
        """Time the pair saves against serial, after paying for its call."""
        return self.serial - self.fused_call

    @property
    def gain(self) -> float:
        """Fraction of the serial time saved by fusing, after paying for the call."""
        return self.saved / self.serial if self.serial > 0 else 0.0


def fits(a: TaskProfile, b: TaskProfile, target: Target) -> bool:
    """Both tasks' on-chip working sets fit in the on-chip memory together."""
    return a.footprint + b.footprint <= target.onchip_bytes.value


def task_time(task: TaskProfile, target: Target) -> float:
    """Predicted time of the task alone on the whole target."""
    return _simulate_cached((_signature(task), ()), target, 1.0)


def predict(a: TaskProfile, b: TaskProfile, target: Target, share_a: float | None = None) -> Prediction:
    """Serial and fused time; with share_a None the best share is searched."""
    ta, tb = task_time(a, target), task_time(b, target)
    tasks = (_signature(a), _signature(b))
    if share_a is None:
        share_a, fused = _best_share(tasks, target)
    else:
        fused = _simulate_cached(tasks, target, share_a)
    return Prediction(ta, tb, ta + tb, fused, share_a, target.call_overhead_s.value)


# Work of a task as the simulation sees it; equal signatures (repeated layers) share results.
Signature = tuple[tuple[Engine, float, float, float, int], ...]


def engine_seconds(t: TaskProfile, target: Target) -> tuple[float, float, float]:
    """Time the task keeps each engine busy: (matrix, vector, memory)."""
    return (
        sum(op.flops / target.rate(op.engine, op.int_bits) for op in t.ops if op.engine == Engine.MATRIX),
        sum(op.flops / target.rate(op.engine, op.int_bits) for op in t.ops if op.engine == Engine.VECTOR),
        t.bytes[Engine.MEMORY] / target.dma_bytes.value,
    )


def complementarity(a: TaskProfile, b: TaskProfile, target: Target) -> float:
    """1 - cosine similarity of the engine-time vectors: 0 for same mix, 1 for disjoint engines."""
    ea, eb = engine_seconds(a, target), engine_seconds(b, target)
    na, nb = math.sqrt(sum(x * x for x in ea)), math.sqrt(sum(x * x for x in eb))
    if na == 0 or nb == 0:
        return 0.0
    return 1.0 - sum(x * y for x, y in zip(ea, eb)) / (na * nb)


def _signature(task: TaskProfile) -> Signature:
    return tuple(
        (op.engine, op.flops, float(op.bytes), float(op.ddr_bytes), op.int_bits)
        for op in task.ops
        if op.engine != Engine.NONE
    )


@lru_cache(maxsize=65536)
def _best_share(tasks: tuple[Signature, Signature], target: Target) -> tuple[float, float]:
    """Coarse grid, then a local refinement: the share of the vector workers given to A."""
    best = min((_simulate_cached(tasks, target, s), s) for s in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9))
    lo, hi = max(0.05, best[1] - 0.1), min(0.95, best[1] + 0.1)
    for k in range(5):
        s = lo + (hi - lo) * k / 4
        best = min(best, (_simulate_cached(tasks, target, s), s))
    return round(best[1], 3), best[0]


@lru_cache(maxsize=65536)
def _simulate_cached(tasks: tuple[Signature, Signature], target: Target, share_a: float) -> float:
    return _simulate([list(t) for t in tasks], target, share_a)


# ---------------------------------------------------------------------------------------
# The fluid simulation


def _work(op: tuple[Engine, float, float, float, int], target: Target) -> tuple[Engine, float, float]:
    """(engine, engine work in seconds at the full engine, DDR bytes) of a signature entry."""
    engine, flops, nbytes, ddr_bytes, int_bits = op
    if engine in (Engine.MATRIX, Engine.VECTOR):
        return engine, flops / target.rate(engine, int_bits), ddr_bytes
    return engine, nbytes / target.dma_bytes.value, ddr_bytes


def _simulate(tasks: list[list[tuple[Engine, float, float, float, int]]], target: Target, share_a: float) -> float:
    """Time until both op lists have run, sharing engines and DDR (see module docstring)."""
    queues = [[_work(op, target) for op in ops] for ops in tasks]
    overhead = target.op_overhead_s.value
    ddr = target.ddr_bytes.value
    pos = [0, 0]
    left = [1.0, 1.0]  # fraction of the current op still to do
    stall = [overhead, overhead]  # dispatch time still to pay before the current op starts
    now = 0.0
    shares = (share_a, 1.0 - share_a)
    while True:
        active = [k for k in (0, 1) if pos[k] < len(queues[k])]
        if not active:
            return now
        engines = {k: queues[k][pos[k]][0] for k in active if stall[k] <= 0}
        # Engine allocation: a contended engine is split by the share; otherwise all of it.
        rates: dict[int, float] = {}
        ddr_need: dict[int, float] = {}
        for k, e in engines.items():
            _, engine_s, nbytes = queues[k][pos[k]]
            contended = sum(1 for e2 in engines.values() if e2 == e) > 1
            alloc = shares[k] if contended else 1.0
            rates[k] = alloc / engine_s if engine_s > 0 else float("inf")
            ddr_need[k] = rates[k] * nbytes
        _share_ddr(rates, ddr_need, {k: queues[k][pos[k]][2] for k in engines}, ddr)
        # Next event: an op finishing or a stall ending.
        dt = float("inf")
        for k in active:
            if stall[k] > 0:
                dt = min(dt, stall[k])
            elif rates[k] == float("inf"):
                dt = 0.0
            else:
                dt = min(dt, left[k] / rates[k])
        now += dt
        for k in active:
            if stall[k] > 0:
                stall[k] -= dt
                if stall[k] <= 1e-15:
                    stall[k] = 0.0
                continue
            left[k] -= dt * rates[k] if rates[k] != float("inf") else left[k]
            if left[k] <= 1e-9:
                pos[k] += 1
                left[k] = 1.0
                stall[k] = overhead


def _share_ddr(rates: dict[int, float], need: dict[int, float], nbytes: dict[int, float], ddr: float) -> None:
    """Cap op rates so that DDR demand fits, max-min fair between the running ops."""
    for k in rates:  # an op with no engine work is bound by DDR alone
        if rates[k] == float("inf") and nbytes[k] > 0:
            need[k] = float("inf")
    total = sum(need.values())
    if total <= ddr:
        return
    remaining, users = ddr, sorted(need, key=lambda k: need[k])
    for i, k in enumerate(users):
        fair = remaining / (len(users) - i)
        grant = min(need[k], fair)
        remaining -= grant
        if nbytes[k] > 0:
            rates[k] = min(rates[k], grant / nbytes[k])
