"""What a sixteenth stranger hit with the models of models/README.md's "A fifteenth stranger's
models" (hama's G2P and phoneme ASR): small builders reproducing it, and the real models where they
are cached (`python -m models real fetch NAME`; skipped when not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

from hexfuse_onnx import graph
from hexfuse_onnx.pipeline import analyse
from hexfuse_onnx.report import branch_lines, hidden_lines


def _squeeze_if(i: int, source: str, nested: bool = False) -> tuple[onnx.NodeProto, str]:
    """torch's squeeze of a possibly-1 dim: an If of Squeeze (then) against Identity (else), on
    whether the dim is 1. `nested`: the then branch squeezes inside an If of its own, reading the
    outer tensor two scopes down."""
    out = f"sq{i}"
    squeeze = helper.make_node("Squeeze", [source, "axis0"], [f"t{i}"])
    if nested:
        inner = helper.make_graph([squeeze], f"inner{i}", [], [helper.make_tensor_value_info(f"t{i}", 1, None)])
        keep = helper.make_graph(
            [helper.make_node("Identity", [source], [f"k{i}"])],
            f"keep{i}",
            [],
            [helper.make_tensor_value_info(f"k{i}", 1, None)],
        )
        squeeze = helper.make_node("If", ["one"], [f"t{i}"], then_branch=inner, else_branch=keep)
    then = helper.make_graph([squeeze], f"then{i}", [], [helper.make_tensor_value_info(f"t{i}", 1, None)])
    identity = helper.make_node("Identity", [source], [f"e{i}"])
    other = helper.make_graph([identity], f"else{i}", [], [helper.make_tensor_value_info(f"e{i}", 1, None)])
    return helper.make_node("If", ["one"], [out], then_branch=then, else_branch=other), out


def _many_squeeze_ifs(count: int) -> onnx.ModelProto:
    """A chain of Tanh, each followed by a squeeze-If whose condition is computed (Shape, Gather,
    Equal): neither inference folds it, so each If's branches are inferred as graphs of their own."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["rows"]),
        helper.make_node("Equal", ["rows", "one_i"], ["one"]),
    ]
    source = "x"
    for i in range(count):
        nodes.append(helper.make_node("Tanh", [source], [f"h{i}"]))
        node, source = _squeeze_if(i, f"h{i}", nested=i == 0)
        nodes.append(node)
    nodes.append(helper.make_node("ReduceSum", [source], ["total"], keepdims=0))  # a scalar: its rank is known
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one_i"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
    ]
    g = helper.make_graph(
        nodes,
        "squeeze_ifs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_if_bodies_are_inferred_from_what_they_read_with_the_shapes_ort_gives() -> None:
    # ORT's symbolic inference passes every outer tensor into each If body's inference: hama's
    # unrolled G2P decoder (96 Ifs over 4694 nodes) took 33 s a pass, 6 s with only those read
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    model = _many_squeeze_ifs(6)
    lean = graph._run_symbolic_inference(model)
    sym = SymbolicShapeInference(2**31 - 1, True, False, 0)
    whole = sym.infer_shapes(model, 2**31 - 1, True, False, 0)
    assert lean is not None and whole is not None
    shapes = lambda m: {v.name: v.type for v in [*m.graph.value_info, *m.graph.output]}  # noqa: E731
    assert shapes(lean) == shapes(whole)
    assert "sq5" in shapes(lean)


def test_branches_of_one_op_are_counted_in_one_line_not_analysed(tmp_path: Path) -> None:
    # torch's squeeze-Ifs took 4 log lines and a report line a branch (192 on hama's G2P decoder)
    onnx.save(_many_squeeze_ifs(6), tmp_path / "ifs.onnx")
    a = analyse(tmp_path / "ifs.onnx", target="host")
    assert not a.branches and len(a.single_op_branches) == 12  # the nested If is one op of its branch
    lines = branch_lines(a)
    assert lines == ["12 branch(es) of 6 If(s) hold one op at most (Identity 6, Squeeze 5, If 1): no pair fits"]


def test_real_hama_g2p_unrolled_loads_with_every_shape_and_reports_its_ifs_once() -> None:
    path = cached_or_skip("hama_g2p_unrolled")
    a = analyse(path, target="host")
    assert len(a.graph.nodes) == 4694 and not a.profile.unprofiled
    assert not a.branches and len(a.single_op_branches) == 192
    assert sum("hold one op at most" in line for line in branch_lines(a)) == 1


def test_the_not_looked_at_line_names_the_largest_holders_and_counts_the_rest() -> None:
    # colocate does not enter control flow: hama's G2P x2 named its 192 squeeze-Ifs in one 7 kB line
    (line,) = hidden_lines(_many_squeeze_ifs(8).graph)
    assert line == (
        "not looked at: 18 node(s) inside control-flow subgraphs (4 in If 'sq0', 2 in If 'sq1', 2 in If 'sq2', "
        "2 in If 'sq3', 2 in If 'sq4' and 3 more)"
    )


@pytest.mark.parametrize(
    ("dim", "elem", "length"), [("samples", 1, 16000), ("num_samples", 10, 16000), ("seq", 1, 128)]
)
def test_a_float_input_of_samples_is_analysed_at_one_second(dim: str, elem: int, length: int) -> None:
    # hama's phoneme recogniser ([batch, samples] float) was analysed at 224 samples, 14 ms of audio
    g = helper.make_graph(
        [helper.make_node("Relu", ["waveform"], ["y"])],
        "audio",
        [helper.make_tensor_value_info("waveform", elem, ["batch", dim])],
        [helper.make_tensor_value_info("y", elem, ["batch", dim])],
    )
    binding = graph.representative_binding(helper.make_model(g), {}, "audio")
    assert binding.inputs == {"waveform": [1, length]}
