"""What calibration measures: op timings, pair rows and pair measurements, and `over_runs`,
how a time over repeated runs is summarised."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ...kinds import Pair
from ...profile import Engine, NodeProfile, TaskProfile

Progress = Callable[[str], None]


def quiet(_: str) -> None:
    pass


# A time measured over repeated runs is summarised by this quantile of its runs, not the median: on a
# shared machine a run that another process preempted takes longer, never shorter, so the slow tail
# is the load, not the kernel; the lower quartile is a run that was not preempted, yet not the
# single luckiest one (the minimum of N falls with N).
RUN_QUANTILE = 0.25


def over_runs(seconds: Iterable[float]) -> float:
    """A time over repeated runs: its RUN_QUANTILE (NaN without runs)."""
    values = list(seconds)
    return float(np.quantile(values, RUN_QUANTILE)) if values else float("nan")


@dataclass(frozen=True)
class OpTiming:
    """One op's measured time (`over_runs` of the profiled runs) and its profile."""

    model: str
    node: str
    op_type: str
    op: NodeProfile  # as a one-op task sees it (ddr_bytes: everything it reads and writes)
    seconds: float
    runs: int

    @property
    def work(self) -> float:
        """The fit's work unit: FLOPs for matrix and vector ops, bytes for memory ops."""
        return float(self.op.bytes) if self.op.engine == Engine.MEMORY else self.op.flops


@dataclass(frozen=True)
class PairRow:
    model: str
    node: str
    kind: str
    note: str
    share_a: float
    serialized: bool
    predicted_fused_s: float  # costmodel fused time at the plugin's share (no call overhead)
    measured_call_s: float  # the kernel call (hfx_run's wall less preempted_s, same traced runs as the span)
    measured_span_s: float  # the kernel's work-item span (trace)
    predicted_serial_s: float
    measured_serial_s: float  # ORT-profiled time of the pair's original nodes
    call_overhead_s: float = 0.0  # added to predicted_fused_s for a call
    kernel_work_s: float = 0.0  # sum of the call's work-item durations (trace): work/span > 1 is parallelism
    task_overlap: float = float("nan")  # share of the span both tasks had an item running (trace)
    kernel_gap_per_op_s: float = float("nan")  # in-kernel time between a task's items, per op (trace)
    cold_share: float = float("nan")  # share of the calls that had to wake the pool (TracedPair)
    cold_join_s: float = float("nan")
    wake_shares: tuple[float, ...] = ()  # per WAKE_REGIMES (TracedPair)
    wake_leads_s: tuple[float, ...] = ()
    regime_fused_s: tuple[float, ...] = ()  # per WAKE_REGIMES: the predicted fused time of a call in it
    preempted_s: float = 0.0  # median time of a call other processes took, not in measured_call_s (trace)

    @property
    def predicted_call_s(self) -> float:
        return self.predicted_fused_s + self.call_overhead_s

    @property
    def fused_error(self) -> float:
        return self.predicted_call_s / self.measured_call_s - 1.0

    @property
    def span_error(self) -> float:
        return self.predicted_fused_s / self.measured_span_s - 1.0 if self.measured_span_s > 0 else float("nan")

    @property
    def serial_error(self) -> float:
        return self.predicted_serial_s / self.measured_serial_s - 1.0 if self.measured_serial_s > 0 else float("nan")


@dataclass(frozen=True)
class PairMeasurement:
    """A pair measured on the plugin, with what re-predicting it for another target needs."""

    row: PairRow  # predicted by the target the model was rewritten for
    pair: Pair
    serial_task: TaskProfile | None  # the serial baseline's task (a micro-batch pair: the unsplit chain)
    kernel_ops: list[OpTiming]  # the pair's working nodes: summed kernel item time per call
    unmodelled_s: float  # kernel item time of ops on nodes the cost model gives no work (Reshape, ...)
