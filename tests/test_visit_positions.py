"""benchmarks/visit_positions.py: each mode's calls by their place in a visit, and by the CPU the caller was on."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import visit_positions  # noqa: E402

needs_linux = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")


def _add_session() -> ort.InferenceSession:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@needs_linux
def test_each_call_records_the_cpu_its_caller_started_it_on():
    """Pinned to one CPU, every call of every visit was started there; one row per visit, a column per place."""
    allowed = os.sched_getaffinity(0)
    pinned = max(allowed)
    os.sched_setaffinity(0, {pinned})
    try:
        times, cpus = visit_positions.by_position(
            {"a": _add_session(), "b": _add_session()}, {"x": np.ones(4, np.float32)}, visits=2, calls=3
        )
    finally:
        os.sched_setaffinity(0, allowed)
    assert set(times) == set(cpus) == {"a", "b"}
    assert all(t.shape == (2, 3) and (t > 0).all() for t in times.values())
    assert all((c == pinned).all() for c in cpus.values())


@needs_linux
def test_thread_cpus_reads_each_threads_allowed_cpus():
    """The main thread's entry is the CPUs it may run on, as Linux lists them."""
    pinned = max(os.sched_getaffinity(0))
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {pinned})
    try:
        assert visit_positions.thread_cpus()[str(os.getpid())] == str(pinned)
    finally:
        os.sched_setaffinity(0, allowed)
