"""fold.specialise on what torch writes for a size it cannot prove: Size of a shape vector, and an
If on arithmetic of it (svtrv2_captcha's `expand`), which no shape inference follows."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import fold, graph


def _int64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _expand_model(branch_tensor: str = "reps") -> onnx.ModelProto:
    """y = Tile(x, repeats), repeats = If(3 - Size(Concat(d0, 1, 1)) < 0, then: [1, 1, 1, 1],
    else: [1, 1, 2]): the else branch always runs, and the dims ONNX's inference gives up on
    stay symbolic. `branch_tensor` names what the else branch makes (a name the graph has
    clashes)."""
    then_branch = helper.make_graph(  # of another length, as svtrv2's: no inference merges them
        [helper.make_node("Constant", [], ["ones"], value=_int64("v", [1, 1, 1, 1]))],
        "then",
        [],
        [helper.make_tensor_value_info("ones", TensorProto.INT64, [4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Concat", ["one", "two"], [branch_tensor], axis=0)],
        "else",
        [],
        [helper.make_tensor_value_info(branch_tensor, TensorProto.INT64, [3])],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], start=0, end=1),
        helper.make_node("Concat", ["shape", "one", "one"], ["three"], axis=0),
        helper.make_node("Size", ["three"], ["n"]),
        helper.make_node("Sub", ["limit", "n"], ["left"]),
        helper.make_node("Less", ["left", "zero"], ["cond"]),
        helper.make_node("If", ["cond"], ["repeats"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Tile", ["x", "repeats"], ["tiled"]),
        helper.make_node("Relu", ["tiled"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "torch_expand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", None, None])],
        [_int64("one", [1]), _int64("two", [1, 2]), _int64("limit", [3]), _int64("zero", [0])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(["y"], {"x": x})[0])


def test_an_if_on_constant_size_arithmetic_becomes_its_branch():
    model = _expand_model()
    folded, shapes = fold.specialise(model, {}, inline_ifs=True)
    assert "If" not in [n.op_type for n in folded.graph.node]
    assert shapes["n"] == () and shapes["cond"] == (1,)  # Size, then Less, folded
    onnx.checker.check_model(folded, full_check=True)
    for dims in [(1, 4, 5), (2, 4, 3)]:  # the dims left symbolic still vary
        x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
        np.testing.assert_array_equal(_run(folded, x), _run(model, x))


def test_an_if_whose_branch_makes_a_name_the_graph_has_stays():
    model = _expand_model(branch_tensor="tiled")
    folded, _ = fold.specialise(model, {}, inline_ifs=True)
    assert "If" in [n.op_type for n in folded.graph.node]


def test_an_if_is_kept_unless_the_copy_replaces_the_model():
    """A condition known at the dims the pass analyses may not be at others (Silero VAD's nested
    Ifs paired wrongly when inference inlined them): only --freeze-shapes inlines."""
    folded, shapes = fold.specialise(_expand_model(), {})
    assert "If" in [n.op_type for n in folded.graph.node] and "cond" in shapes


def test_frozen_shapes_after_an_if_on_constant_size_arithmetic(tmp_path, monkeypatch):
    """ONNX's inference leaves the If's output and everything after unknown: svtrv2_captcha's
    decoder, 11 nodes not profiled, 22 candidates refused. ORT's symbolic inference, which follows
    this toy, refuses svtrv2 whole: here it is kept out as there. With --freeze-shapes the If is
    its branch."""
    monkeypatch.setattr(graph, "_run_symbolic_inference", lambda model, complete_only=False: None)
    path = tmp_path / "expand.onnx"
    onnx.save(_expand_model(), path)
    g = graph.load(path, shape_overrides={"x": [1, 4, 5]}, freeze_shapes=True)
    assert g.infos["y"].shape == (1, 4, 10)
    assert "If" not in [n.op_type for n in g.nodes]
