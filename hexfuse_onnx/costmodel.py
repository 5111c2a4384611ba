"""An engine model of a target, predicting a task alone, two tasks in series, and fused.

THIS IS A MODEL, NOT A MEASUREMENT. The targets' figures are data (targets/*.json). Every
Hexagon figure is modelled: either taken from a public document (named in its `source`) or an
assumption (marked so); none was measured on a device. The host figures describe one development
machine; `python -m hexfuse_onnx calibrate` (tools/calibrate.py) fits them from ORT per-op
profiling and from the kernel's own work-item times, and writes the fit that predicts the
plugin's fused calls better as a "host-calibrated" target in JSON (`load_target` reads it,
`register_target` makes it usable by name). `parameter_table` renders any target's parameters
and their sources as markdown rows for the results page.

How the prediction works: each op needs compute on one engine (matrix, vector, or the
memory/DMA path) and bytes from DDR; its work runs at its engine's rate, or at its op class's
(OP_CLASSES: windowed convolution, windowed pooling, transpose, transcendental functions) when
the target has one.
A task runs its ops in order. When two tasks run fused, a fluid simulation advances both at
once: on separate engines (Hexagon) the vector contexts are split by the work share (a task
alone gets all of them), the single matrix engine is time-shared by the same share when both
want it; on a general-worker pool (the host, `general_workers`) an op runs on as many workers of
any engine as its work items allow (`work_items`, the kernel's plan), the two tasks' ops split
the workers by the share and one takes what the other cannot use; unfused, a pool's task runs
node after node on one worker or alone on the pool, whichever is faster (`serial_time`). DDR
bandwidth is split max-min fairly. An op progresses at the rate its scarcest resource allows.
Each op also pays a fixed dispatch/sync overhead, and a matrix op a GEMM call's fixed time on its
engine for each matrix it multiplies (`matrix_op_s`, `NodeProfile.gemm_calls`). This counts contention for
DDR and engines; the on-chip budget is a hard constraint checked by `fits`.
Within a task, intermediates stay in the on-chip arena: DDR carries weights, the task's
inputs and the tensors that leave it (`GraphProfile.task`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from .profile import Engine, NodeProfile, TaskProfile


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
    # Workers that run items of every engine, shared by both tasks (the host pool, where the
    # matrix and vector workers take each other's items); 0: the engines are separate hardware.
    general_workers: Param = Param(0.0, "workers", "separate engines")
    # On a general-worker pool, how long into a call the workers other than the caller take their
    # first item (their wake-up: they sleep between calls that come far apart); the caller runs alone until then.
    join_s: Param = Param(0.0, "s", "not modelled")
    # Fixed time of one GEMM call on top of its FLOPs (dispatch, packing), paid per matrix of a batched
    # MatMul (`NodeProfile.gemm_calls`): a small GEMM runs far below the matrix rate.
    matrix_op_s: Param = Param(0.0, "s", "not modelled")
    # Rates of op classes whose kernels run at a rate of their own (OP_CLASSES), in the unit of
    # their engine's rate (FLOP/s or B/s: the whole engine, or one worker of a general-worker
    # pool); a class not listed runs at its engine's rate.
    class_rates: tuple[tuple[str, Param], ...] = ()
    # Where the unfused baseline runs when not on this target's kernels (the host: stock ORT's
    # kernels, not the plugin's): the serial prediction uses it, the fused one this target.
    baseline: Target | None = None
    # Each graph node is one kernel call (ONNX Runtime's kernels): the program ops a fused op is
    # priced as (`NodeProfile.parts`: attention's GEMMs, softmax, head layout) run inside that one
    # call and pay the op overhead once. False: every program op is dispatched on its own (the
    # plugin's kernel runs a fused op as that many program ops, with a barrier between them).
    node_kernels: bool = False

    def params(self) -> dict[str, Param]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, Param)}

    def rate(self, engine: Engine, int_bits: int = 0, op_class: str = "") -> float:
        """Work per second of one op (FLOP/s, integer ops/s at `int_bits` 8 or 16, or B/s for memory):
        its op class's rate when the target has one (float ops, and the 8-bit classes of
        INT8_OP_CLASSES), else its engine's; the whole
        engine, or on a general-worker pool the one worker that runs the op."""
        for name, rate in self.class_rates:
            if name == op_class and (not int_bits or name in INT8_OP_CLASSES.values()):
                return rate.value
        if engine == Engine.MEMORY:
            return self.dma_bytes.value
        if engine == Engine.MATRIX:
            p = self.matrix_int8_ops if int_bits == 8 else None
            return (p or self.matrix_flops).value
        p = {8: self.vector_int8_ops_per_context, 16: self.vector_int16_ops_per_context}.get(int_bits)
        contexts = 1.0 if self.general_workers.value else self.vector_contexts.value
        return contexts * (p or self.vector_flops_per_context).value

    def to_json(self) -> str:
        """The target as JSON (`load_target` reads it back)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_dict(self) -> dict:
        doc: dict[str, object] = {
            "name": self.name,
            "description": self.description,
            "params": {k: asdict(v) for k, v in self.params().items()},
        }
        if self.class_rates:
            doc["class_rates"] = {k: asdict(v) for k, v in self.class_rates}
        if self.baseline is not None:
            doc["baseline"] = self.baseline.to_dict()
        if self.node_kernels:
            doc["node_kernels"] = True
        return doc

    @classmethod
    def from_json(cls, text: str) -> Target:
        doc = json.loads(text)
        if isinstance(doc, dict) and isinstance(doc.get("target"), dict):
            doc = doc["target"]  # a calibration result carries its target
        try:
            return cls.from_dict(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a cost-model target document: {exc!r}") from None

    @classmethod
    def from_dict(cls, doc: dict) -> Target:
        params = {k: _param(v) for k, v in doc["params"].items()}
        rates = tuple((str(k), _param(v)) for k, v in doc.get("class_rates", {}).items())
        baseline = cls.from_dict(doc["baseline"]) if "baseline" in doc else None
        name, description = str(doc["name"]), str(doc["description"])
        node_kernels = doc.get("node_kernels", False)
        if not isinstance(node_kernels, bool):
            raise ValueError(f"node_kernels must be true or false, not {node_kernels!r}")
        return cls(
            name=name,
            description=description,
            class_rates=rates,
            baseline=baseline,
            node_kernels=node_kernels,
            **params,
        )

    @property
    def vector_flops(self) -> float:
        return self.vector_contexts.value * self.vector_flops_per_context.value


def _param(doc: dict) -> Param:
    return Param(float(doc["value"]), str(doc["unit"]), str(doc["source"]))


# Op classes whose kernels run at rates of their own: a convolution's im2col, a pooling window,
# a transpose's strided reads and a transcendental function do not run at the rate of a GEMM, a
# contiguous copy or an Add. An op not listed
# is of its engine's class ("matrix", "vector", "memory").
OP_CLASSES = {
    **dict.fromkeys(("Conv", "ConvTranspose", "FusedConv"), "conv"),
    **dict.fromkeys(("MaxPool", "AveragePool", "LpPool"), "pool"),  # windows; a global pool is a reduction
    "Transpose": "transpose",  # a strided gather, not a copy of contiguous runs
    **dict.fromkeys(
        ("Exp", "Log", "Sigmoid", "Tanh", "Erf", "Gelu", "FastGelu", "Softmax", "LogSoftmax", "Softplus", "Mish"),
        "transcendental",
    ),
}


# The ops of 8-bit QDQ groups whose HVX kernels run at rates of their own (the hexagon-v73 target's
# class rates, emulated under qemu by dsp/scripts/hvx_packets.py): QADD, QMUL, QMAXPOOL, the
# 256-entry table (QLUT) of a unary function, ConvInteger's im2col conv (ICONV2D), the nearest
# Resize (QRESIZE) and Transpose (TRANSPOSE's HVX tiles). Their rates count ops as the profile does: 1
# per element of Add/Mul, 1 per window tap of MaxPool, 10 per element of the table functions listed, 2
# per MAC of ConvInteger, 1 per byte a nearest Resize or a Transpose reads and writes (memory ops; a
# linear Resize is arithmetic and no QRESIZE).
INT8_OP_CLASSES = {
    "Add": "int8 add",
    "Mul": "int8 mul",
    "MaxPool": "int8 maxpool",
    **dict.fromkeys(("Sigmoid", "Tanh", "Erf", "Softplus"), "int8 lut"),
    "ConvInteger": "int8 conv",
    "Resize": "int8 resize",
    "Transpose": "int8 transpose",
}


def op_class(op: NodeProfile) -> str:
    """The op's rate class: INT8_OP_CLASSES for 8-bit groups (a Resize only when nearest, on the memory
    engine), else OP_CLASSES, except that a pointwise convolution is a GEMM (`is_pointwise`)."""
    linear_resize = op.op_type == "Resize" and op.engine != Engine.MEMORY
    if op.int_bits == 8 and op.op_type in INT8_OP_CLASSES and not linear_resize:
        return INT8_OP_CLASSES[op.op_type]
    name = OP_CLASSES.get(op.op_type, op.engine.value)
    return op.engine.value if name == "conv" and is_pointwise(op) else name


def is_pointwise(conv: NodeProfile) -> bool:
    """A convolution whose GEMM reads its input as it lies (1x1, stride 1: the host kernel's
    CONV_1X1, no im2col), from its profile: the GEMM's K x pixels, (FLOPs / 2)^2 / (weights x
    outputs), is no more than the input's elements (a KxK window makes it about KxK times more)."""
    weights, outputs = conv.weight_bytes / 4, conv.bytes_out / 4
    inputs = (conv.bytes_in - conv.weight_bytes) / 4
    if conv.int_bits or weights <= 0 or outputs <= 0 or inputs <= 0:
        return False
    return (conv.flops / 2) ** 2 / (weights * outputs) <= inputs * (1 + 1e-6)


# The built-in targets are data, not code: hexfuse_onnx/targets/<name>.json. `hexagon-v73` holds
# modelled figures (documents and assumptions, each named in its source), `host` the figures
# measured on one development machine; `calibrate -o` writes a file of the same form for another.
TARGET_DIR = Path(__file__).with_name("targets")


def load_target(path: str | os.PathLike[str]) -> Target:
    """A target written by `Target.to_json` (raises ValueError when the file is not one)."""
    with open(path, encoding="utf-8") as f:
        return Target.from_json(f.read())


TARGETS = {t.name: t for t in map(load_target, sorted(TARGET_DIR.glob("*.json")))}
HEXAGON_V73 = TARGETS["hexagon-v73"]
HOST = TARGETS["host"]


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


def parameter_table(target: Target) -> list[str]:
    """Markdown rows (header first) of the target's parameters: value, unit and source."""
    rows = [
        f"Cost model parameters: `{target.name}` ({target.description})",
        "",
        "| parameter | value | unit | source |",
        "|---|---:|---|---|",
    ]
    named = [*target.params().items(), *((f"rate of {c} ops", p) for c, p in target.class_rates)]
    for key, p in named:
        source = p.source.replace("|", "\\|")
        rows.append(f"| {key} | {p.value:.4g} | {p.unit} | {source} |")
    if target.baseline is not None:
        rows.append(f"| baseline | `{target.baseline.name}` | | the unfused tasks' (serial) times |")
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


def fits(a: TaskProfile, b: TaskProfile, target: Target, shared: int = 0) -> bool:
    """Both tasks' on-chip working sets fit in the on-chip memory together; `shared`: bytes both
    count for tensors both read, resident once (`GraphProfile.shared_footprint`)."""
    return a.footprint + b.footprint - shared <= target.onchip_bytes.value


def task_time(task: TaskProfile, target: Target) -> float:
    """Predicted time of the task alone on the whole target."""
    return signed_time(signature(task), target)


def signed_time(task: Signature, target: Target) -> float:
    """`task_time` of a task's signature."""
    return _simulate_cached((task, ()), target, 1.0)


def serial_time(task: TaskProfile, target: Target) -> float:
    """Predicted time of the task unfused, what a fused pair must beat: `sequential_time`, or on a
    general-worker pool the task alone on the pool where that is faster."""
    return signed_serial_time(signature(task), target)


def node_after_node(ops: Iterable[NodeProfile], target: Target) -> float:
    """Predicted time of the nodes run one after another, each a task of its own (its inputs and
    outputs in DDR): `rewrite`'s modelled_us of a graph, and `colocate`'s of each stream. A run of
    nodes as one task (`serial_time`) keeps its intermediates on chip and takes less."""
    return sum(serial_time(TaskProfile.of([op]), target) for op in ops)


def signed_serial_time(task: Signature, target: Target) -> float:
    """`serial_time` of a task's signature. On a general-worker pool, no slower than the task alone
    on the pool: unfused, a task can use every core too (ORT's intra-op threads), so a fused call
    gains what running two tasks together adds, not one task's own parallelism."""
    sequential = signed_sequential_time(task, target)
    if not target.general_workers.value:
        return sequential
    return min(sequential, signed_time(task, replace(target, node_kernels=True)))


def sequential_time(task: TaskProfile, target: Target) -> float:
    """Predicted time of the task unfused as ONNX Runtime profiles it one node after another: on the
    target's baseline, or on one worker of a general-worker pool (what `calibrate` measures)."""
    return signed_sequential_time(signature(task), target)


def signed_sequential_time(task: Signature, target: Target) -> float:
    """`sequential_time` of a task's signature."""
    if target.baseline is not None:
        return signed_time(task, target.baseline)
    if target.general_workers.value:
        one_thread = Param(1.0, "workers", "one thread")
        return signed_time(task, replace(target, general_workers=one_thread, node_kernels=True))
    return signed_time(task, target)


def predict(a: TaskProfile, b: TaskProfile, target: Target, share_a: float | None = None) -> Prediction:
    """Serial (each task unfused, on the baseline) and fused time; with share_a None the best
    share is searched."""
    return predict_signed(signature(a), signature(b), serial_time(a, target), serial_time(b, target), target, share_a)


def predict_signed(
    a: Signature, b: Signature, serial_a: float, serial_b: float, target: Target, share_a: float | None = None
) -> Prediction:
    """`predict` from the tasks' signatures and serial times, for a search that scores one task
    against many (the signature of a long task costs as much to build as to simulate)."""
    if share_a is None:
        share_a, fused = _best_share((a, b), target)
    else:
        fused = _simulate_cached((a, b), target, share_a)
    return Prediction(serial_a, serial_b, serial_a + serial_b, fused, share_a, target.call_overhead_s.value)


# Work of a task as the simulation sees it (engine, op class, FLOPs, bytes, DDR bytes, integer
# width, work items per op, GEMM calls (`NodeProfile.gemm_calls`), whether it starts a graph node: a
# fused op's later parts do not); equal signatures (repeated layers) share results.
SignatureOp = tuple[Engine, str, float, float, float, int, int, int, bool]
Signature = tuple[SignatureOp, ...]

# How the host kernel cuts an op into work items that its workers share (dsp/src/core.h): a GEMM or
# convolution into blocks of about HFX_GEMM_ITEM_FLOPS, a vector op into HFX_EW_CHUNK elements, a
# copy into HFX_COPY_CHUNK. On a general-worker pool an op runs on as many workers as its items allow.
GEMM_ITEM_FLOPS = float(1 << 23)
VECTOR_ITEM_ELEMENTS = 32768
COPY_ITEM_ELEMENTS = 262144


def work_items(op: NodeProfile) -> int:
    """About how many work items the host kernel cuts the op into (its plan, dsp/src/ops/)."""
    if op.engine == Engine.MATRIX:  # blocks of each matrix of a batched MatMul
        return op.gemm_calls * max(1, math.ceil(op.flops / op.gemm_calls / GEMM_ITEM_FLOPS))
    elements = op.bytes_out / 4
    chunk = COPY_ITEM_ELEMENTS if op.engine == Engine.MEMORY else VECTOR_ITEM_ELEMENTS
    return max(1, math.ceil(elements / chunk))


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


def signature(task: TaskProfile) -> Signature:
    """The task's working ops; an op starts a graph node unless it follows a part of the same node
    (`TaskProfile.of` lists a fused op's parts in its place, one after another)."""
    ops = [op for op in task.ops if op.engine != Engine.NONE]
    return tuple(
        (
            op.engine,
            op_class(op),
            op.flops,
            float(op.bytes),
            float(op.ddr_bytes),
            op.int_bits,
            work_items(op),
            op.gemm_calls,
            k == 0 or ops[k - 1].node != op.node,
        )
        for k, op in enumerate(ops)
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
    return _simulate([_works(t, target) for t in tasks], target, share_a)


@lru_cache(maxsize=4096)
def _works(task: Signature, target: Target) -> list[Work]:
    return [_work(op, target) for op in task]


# ---------------------------------------------------------------------------------------
# The fluid simulation


Work = tuple[Engine, float, float, int, float]


def _work(op: SignatureOp, target: Target) -> Work:
    """(engine, engine work in seconds at the full engine, DDR bytes, work items, dispatch seconds
    before it starts) of a signature entry: the op overhead, except for a fused op's later parts on
    a target whose nodes are one kernel call each (`Target.node_kernels`)."""
    engine, cls, flops, nbytes, ddr_bytes, int_bits, items, gemm_calls, starts_node = op
    work = nbytes if engine == Engine.MEMORY else flops
    fixed = target.matrix_op_s.value * gemm_calls if engine == Engine.MATRIX else 0.0
    dispatch = target.op_overhead_s.value if starts_node or not target.node_kernels else 0.0
    return engine, work / target.rate(engine, int_bits, cls) + fixed, ddr_bytes, items, dispatch


def _parallel(items: int, workers: float) -> float:
    """Workers an op of `items` equal items keeps busy on a pool of `workers`: its items run in
    ceil(items / n) rounds on n whole workers (3 items on 2 workers: 1.5)."""
    n = max(1, math.ceil(workers - 1e-9))
    return min(workers, items / math.ceil(items / n))


def _simulate(queues: list[list[Work]], target: Target, share_a: float) -> float:
    """Time until both op lists have run, sharing engines and DDR (see module docstring).

    Each step runs until an op finishes, a dispatch stall ends or the other workers join. An op
    gets a fraction of its engine: on separate engines an engine wanted by both tasks is split by
    the share, otherwise one op has all of it; on a general-worker pool an op runs on as many
    workers as its items allow (`_parallel`), two ops split the workers by the share and one takes
    what the other cannot use (the kernel's quotas hand an idle worker to the task that has an
    item for it); until the other workers have joined the call, the caller is the one worker.
    Then DDR caps the rates (`_share_ddr1`, `_share_ddr2`). Scalars, not per-step dicts: the colocate alignment
    runs millions of steps."""
    pool, inf = target.general_workers.value, float("inf")
    join = target.join_s.value if pool > 1 else 0.0
    (q0, q1), shares = queues, (share_a, 1.0 - share_a)
    p0 = p1 = 0
    left0 = left1 = 1.0  # fraction of the current op still to do
    # dispatch time still to pay before the current op starts
    stall0, stall1 = (q[0][4] if q else 0.0 for q in queues)
    now = 0.0
    while p0 < len(q0) and p1 < len(q1):
        engine0, seconds0, bytes0, items0, _ = q0[p0]
        engine1, seconds1, bytes1, items1, _ = q1[p1]
        run0, run1 = stall0 <= 0, stall1 <= 0
        if not pool:
            contended = run0 and run1 and engine0 == engine1
            alloc0, alloc1 = (shares if contended else (1.0, 1.0)) if run0 or run1 else (0.0, 0.0)
        else:
            workers = pool if now >= join else min(1.0, pool)
            alloc0 = _parallel(items0, workers) if run0 else 0.0
            alloc1 = _parallel(items1, workers) if run1 else 0.0
            if run0 and run1:
                first = min(alloc0, max(workers * shares[0], workers - alloc1))
                alloc1 = min(alloc1, workers - first)
                alloc0 = min(alloc0, workers - alloc1)
        rate0 = (alloc0 / seconds0 if seconds0 > 0 else inf) if run0 else 0.0
        rate1 = (alloc1 / seconds1 if seconds1 > 0 else inf) if run1 else 0.0
        if run0 and run1:
            rate0, rate1 = _share_ddr2(rate0, rate1, bytes0, bytes1, target.ddr_bytes.value)
        elif run0:
            rate0 = _share_ddr1(rate0, bytes0, target.ddr_bytes.value)
        elif run1:
            rate1 = _share_ddr1(rate1, bytes1, target.ddr_bytes.value)
        dt = join - now if now < join else inf
        if stall0 > 0:
            dt = min(dt, stall0)
        elif rate0 == inf:
            dt = 0.0
        else:
            dt = min(dt, left0 / rate0)
        if stall1 > 0:
            dt = min(dt, stall1)
        elif rate1 == inf:
            dt = 0.0
        else:
            dt = min(dt, left1 / rate1)
        now += dt
        if stall0 > 0:
            stall0 -= dt
            if stall0 <= 1e-15:
                stall0 = 0.0
        else:
            left0 -= dt * rate0 if rate0 != inf else left0
            if left0 <= 1e-9:
                p0, left0, stall0 = p0 + 1, 1.0, _dispatch(q0, p0 + 1)
        if stall1 > 0:
            stall1 -= dt
            if stall1 <= 1e-15:
                stall1 = 0.0
        else:
            left1 -= dt * rate1 if rate1 != inf else left1
            if left1 <= 1e-9:
                p1, left1, stall1 = p1 + 1, 1.0, _dispatch(q1, p1 + 1)
    if p0 < len(q0):
        return _finish_alone(q0[p0:], left0, stall0, now, target, join)
    if p1 < len(q1):
        return _finish_alone(q1[p1:], left1, stall1, now, target, join)
    return now


def _finish_alone(queue: list[Work], left: float, stall: float, now: float, target: Target, join: float) -> float:
    """`_simulate`'s loop once one task is left, step for step the same arithmetic without the
    other task's bookkeeping (most of a long task's steps; all of them for a task alone)."""
    ddr, pool = target.ddr_bytes.value, target.general_workers.value
    inf = float("inf")
    for k, (_, engine_s, nbytes, items, dispatch) in enumerate(queue):
        if k:
            stall = dispatch
        while True:
            until_join = join - now if now < join else inf
            if stall > 0:
                dt = min(until_join, stall)
                now += dt
                stall -= dt
                if stall <= 1e-15:
                    stall = 0.0
                continue
            alloc = _parallel(items, pool if now >= join else min(1.0, pool)) if pool else 1.0
            rate = alloc / engine_s if engine_s > 0 else inf
            rate = _share_ddr1(rate, nbytes, ddr)
            dt = 0.0 if rate == inf else min(until_join, left / rate)
            now += dt
            left -= dt * rate if rate != inf else left
            if left <= 1e-9:
                left = 1.0
                break
    return now


def _dispatch(queue: list[Work], k: int) -> float:
    """The dispatch time before op k of the queue (0 past its end)."""
    return queue[k][4] if k < len(queue) else 0.0


def _share_ddr1(rate: float, nbytes: float, ddr: float) -> float:
    """One running op's rate capped by DDR (an op with no engine work is bound by DDR alone)."""
    need = float("inf") if rate == float("inf") and nbytes > 0 else rate * nbytes
    if not need <= ddr and nbytes > 0:
        return min(rate, min(need, ddr) / nbytes)
    return rate


def _share_ddr2(rate0: float, rate1: float, bytes0: float, bytes1: float, ddr: float) -> tuple[float, float]:
    """Two running ops' rates capped so that their DDR demand fits, max-min fair."""
    inf = float("inf")
    need0 = inf if rate0 == inf and bytes0 > 0 else rate0 * bytes0
    need1 = inf if rate1 == inf and bytes1 > 0 else rate1 * bytes1
    if need0 + need1 <= ddr:
        return rate0, rate1
    rates, need, nbytes = [rate0, rate1], (need0, need1), (bytes0, bytes1)
    remaining = ddr
    for i, k in enumerate((1, 0) if need1 < need0 else (0, 1)):
        grant = min(need[k], remaining / (2 - i))
        remaining -= grant
        if nbytes[k] > 0:
            rates[k] = min(rates[k], grant / nbytes[k])
    return rates[0], rates[1]
