"""The text report says what stopped the pass: the ops outside the kernel with their counts, the
nodes inside control-flow subgraphs it did not look at; a missing output folder is refused
before any analysis."""

from __future__ import annotations

import json

import numpy as np
from cli_support import error_line, listing, run_cli
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx.errors import EXIT_WRITE_FAILED


def erf_branches(n: int = 3):
    """x feeds n branches, each MatMul -> Erf; their Sum is the output."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    for k in range(n):
        inits.append(numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), f"w{k}"))
        nodes += [
            helper.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"], name=f"mm{k}"),
            helper.make_node("Erf", [f"m{k}"], [f"e{k}"], name=f"erf{k}"),
        ]
    nodes.append(helper.make_node("Sum", [f"e{k}" for k in range(n)], ["y"], name="sum"))
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])],
        initializer=inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_blocking_op_is_named_with_its_count(dirs) -> None:
    src = dirs.save("erf.onnx", erf_branches())
    proc = run_cli("inspect", src, "--json", dirs.out / "r.json")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("rejected")]
    doc = json.loads((dirs.out / "r.json").read_text())
    n = sum(1 for r in doc["rejected"] if r["reason"].startswith("does not lower"))
    assert n >= 3 and all(r["blocker"] == "Erf outside the kernel" for r in doc["rejected"] if r["blocker"])
    assert f"rejected {n}: does not lower: Erf outside the kernel ({n})" in lines


def if_model():
    """Relu, then an If whose branches hold 2 and 3 nodes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    out = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])

    def branch(name: str, ops: list[str]):
        nodes, prev = [], "r"
        for k, op in enumerate(ops):
            nodes.append(helper.make_node(op, [prev], [f"{name}{k}"], name=f"{name}/{op}{k}"))
            prev = f"{name}{k}"
        nodes.append(helper.make_node("Identity", [prev], ["b_" + name], name=f"{name}/out"))
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info("b_" + name, TensorProto.FLOAT, [4])])

    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("ReduceSum", ["r"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
        helper.make_node(
            "If",
            ["c"],
            ["b"],
            name="cond",
            then_branch=branch("then", ["Exp"]),
            else_branch=branch("else", ["Neg", "Tanh"]),
        ),
    ]
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    g = helper.make_graph(nodes, "g", [x], [out], initializer=[zero])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_nodes_inside_control_flow_are_named_as_not_looked_at(dirs) -> None:
    src = dirs.save("if.onnx", if_model())
    proc = run_cli("inspect", src, "--json", dirs.out / "r.json")
    assert proc.returncode == 0, proc.stderr
    assert "not looked at: 5 node(s) inside control-flow subgraphs (5 in If 'cond')" in proc.stdout
    doc = json.loads((dirs.out / "r.json").read_text())
    assert doc["not_looked_at"] == [{"node": "If 'cond'", "subgraph_nodes": 5}]


def test_missing_output_folder_is_refused_before_analysis(dirs) -> None:
    src = dirs.save("erf.onnx", erf_branches())
    missing = dirs.out / "no" / "such" / "x.onnx"
    proc = run_cli("rewrite", src, "-o", missing)  # not -q: analysis would print progress lines
    assert proc.returncode == EXIT_WRITE_FAILED
    line = error_line(proc)
    assert "output folder" in line and "does not exist" in line and str(missing) in line
    assert listing(dirs.out) == []
