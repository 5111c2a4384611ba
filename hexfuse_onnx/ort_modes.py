"""ONNX Runtime's own execution modes: the baselines `bench` times, the modes `tune` chooses among
for a machine, and the one a tuned model's sessions run with (`runtime.session_options`).

    ort-default  SessionOptions() as ORT makes it (intra-op threads: ORT's choice, one per core;
                 sequential)
    ort-seq      ORT_SEQUENTIAL, 1 intra-op thread
    ort-seq-2t   ORT_SEQUENTIAL, 2 intra-op threads
    ort-par      ORT_PARALLEL, 2 inter-op threads of 1 intra-op thread each

The fastest of them is "the best ORT mode" the benchmarks compare against. On a loaded machine
ORT's defaults can be well behind it (intra-op threads that spin for a core another process holds).
"""

from __future__ import annotations

import onnxruntime as ort

DEFAULT = "ort-default"
MODES = (DEFAULT, "ort-seq", "ort-seq-2t", "ort-par")
BASELINES = MODES[1:]  # the modes `bench` times the original in by default

# SessionOptions fields a mode sets: a user's SessionOptions where one differs from ORT's default
# has its execution chosen by the user, and a tuned mode is not applied to it.
EXECUTION_FIELDS = ("execution_mode", "intra_op_num_threads", "inter_op_num_threads")


def apply(so: ort.SessionOptions, mode: str) -> ort.SessionOptions:
    """Set `so`'s execution mode and thread counts to `mode` (ORT's defaults first; other fields
    untouched)."""
    if mode not in MODES:
        raise ValueError(f"unknown ORT mode {mode!r} (known: {', '.join(MODES)})")
    fresh = ort.SessionOptions()
    for f in EXECUTION_FIELDS:
        setattr(so, f, getattr(fresh, f))
    if mode == "ort-seq":
        so.execution_mode, so.intra_op_num_threads = ort.ExecutionMode.ORT_SEQUENTIAL, 1
    elif mode == "ort-seq-2t":
        so.execution_mode, so.intra_op_num_threads = ort.ExecutionMode.ORT_SEQUENTIAL, 2
    elif mode == "ort-par":
        so.execution_mode, so.inter_op_num_threads, so.intra_op_num_threads = ort.ExecutionMode.ORT_PARALLEL, 2, 1
    return so


def options(mode: str) -> ort.SessionOptions:
    """New SessionOptions in `mode`, ORT's warnings off (the timing tools' sessions)."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return apply(so, mode)


def user_settings(so: ort.SessionOptions | None) -> list[str]:
    """The execution fields of `so` that differ from ORT's defaults: what a user chose."""
    if so is None:
        return []
    fresh = ort.SessionOptions()
    return [f for f in EXECUTION_FIELDS if getattr(so, f) != getattr(fresh, f)]
