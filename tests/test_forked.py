"""forked.call: native code that aborts in the child refuses that computation with one line; results and
exceptions come back as they were. Shape inference at another binding (ModelGraph.infos_at) runs there:
onnx 1.23 asserted (SIGABRT) in a Slice after Convs had shrunk a map below zero (colocate's share bucket of
waifu2x at 16 px), and took the pass with it."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import forked, graph
from hexfuse_onnx.errors import ModelError


def test_the_result_comes_back() -> None:
    assert forked.call(lambda: {"pid": os.getpid(), "dims": (1, 2)}, "x")["dims"] == (1, 2)
    assert forked.call(os.getpid, "x") != os.getpid()


def test_an_exception_comes_back_as_it_was() -> None:
    with pytest.raises(ValueError, match="bad dims"):
        forked.call(lambda: (_ for _ in ()).throw(ValueError("bad dims")), "x")


def test_a_child_that_aborts_is_one_model_error_naming_the_signal() -> None:
    with pytest.raises(ModelError, match=r"^shape inference at h=2: native code died there \(SIGABRT\)$"):
        forked.call(os.abort, "shape inference at h=2")


def shrinking_convs(tmp_path: Path) -> Path:
    """x[1, 3, h, h] -> two 3x3 Convs without pads -> Slice [4, -4) of axis 2: at h = 2 onnx infers a map of
    -2 and its Slice inference clamps with hi < lo."""
    w = numpy_helper.from_array(np.ones([3, 3, 3, 3], np.float32), "w")
    bounds = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in [("s", 4), ("e", -4), ("a", 2)]]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"]),
        helper.make_node("Conv", ["c1", "w"], ["c2"]),
        helper.make_node("Slice", ["c2", "s", "e", "a"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "h"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, None, None])],
        [w, *bounds],
    )
    path = tmp_path / "shrinking.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), path)
    return path


def test_shape_inference_at_another_binding_never_takes_the_process(tmp_path: Path) -> None:
    g = graph.load(shrinking_convs(tmp_path), {"x": [1, 3, 64, 64]})
    assert g.infos_at(graph.ShapeBinding({"h": 32}, {"x": [1, 3, 32, 32]}))["y"].shape == (1, 3, 20, 28)
    try:
        g.infos_at(graph.ShapeBinding({"h": 2}, {"x": [1, 3, 2, 2]}))
    except ModelError as exc:
        assert str(exc).startswith("shape inference at h=2:")


def test_garbage_holding_an_ort_session_is_not_collected_in_the_child() -> None:
    """A CI worker hung: a collection in the child freed an ONNX Runtime session left in an old traceback, whose
    destructor waited for its pool's threads, which are not in the child. The child's collector is off."""
    node = helper.make_node("Relu", ["x"], ["y"])
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2  # a pool whose threads the child does not have
    session = ort.InferenceSession(helper.make_model(g).SerializeToString(), so)
    session.run(None, {"x": np.ones(4, np.float32)})  # its threads now wait for work
    gc.collect()  # the counts start at 0: the cycle below is the youngest garbage, left to the child's collections
    cycle: list[object] = [session]
    cycle.append(cycle)
    del cycle, session
    try:
        made = forked.call(lambda: len([[k] for k in range(200_000)]), "allocating", timeout_s=30)
    finally:
        gc.collect()
    assert made == 200_000


def test_a_child_that_never_answers_is_killed_at_the_deadline() -> None:
    with pytest.raises(ModelError, match=r"^waiting: no result in 1 s$"):
        forked.call(lambda: time.sleep(30), "waiting", timeout_s=1)
