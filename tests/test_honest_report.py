"""The text report says what stopped the pass: the ops outside the kernel with their counts, the
nodes inside control-flow subgraphs it did not look at; a missing output folder is refused
before any analysis."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
from cli_support import error_line, listing, run_cli
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx.errors import EXIT_WRITE_FAILED


def atan_branches(n: int = 3):
    """x feeds n branches, each MatMul -> Atan (no lowering); their Sum is the output."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    for k in range(n):
        inits.append(numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), f"w{k}"))
        nodes += [
            helper.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"], name=f"mm{k}"),
            helper.make_node("Atan", [f"m{k}"], [f"e{k}"], name=f"atan{k}"),
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
    src = dirs.save("atan.onnx", atan_branches())
    proc = run_cli("inspect", src, "--json", dirs.out / "r.json")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("rejected")]
    doc = json.loads((dirs.out / "r.json").read_text())
    n = sum(1 for r in doc["rejected"] if r["reason"].startswith("does not lower"))
    assert n >= 3 and all(r["blocker"] == "Atan outside the kernel" for r in doc["rejected"] if r["blocker"])
    assert f"rejected {n}: does not lower: Atan outside the kernel ({n})" in lines


def test_inspect_lists_each_candidate_not_chosen_with_its_reason(dirs) -> None:
    """A stranger's `inspect` printed counts only: which fork, how big, and why each was refused."""
    src = dirs.save("atan.onnx", atan_branches())
    proc = run_cli("inspect", src, "-q")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = next(k for k, ln in enumerate(lines) if ln.startswith("not chosen ("))
    listed = [ln for ln in lines[head + 1 :] if ln.startswith("  ")]
    assert lines[head] == f"not chosen ({sum(map(times_listed, listed))}):"
    assert listed and all("nodes): does not lower: " in ln and "Atan" in ln for ln in listed)


def test_candidates_whose_lines_read_alike_are_one_line_with_their_count() -> None:
    """A stranger's BLSTM had inspect list one LSTM's refusal three times, word for word."""
    from types import SimpleNamespace

    from hexfuse_onnx.report import candidate_lines

    def refused(a: int, b: int, why: str) -> SimpleNamespace:
        nodes = list(range(a + b))
        tasks = {"task_a": nodes[:a], "task_b": nodes[a:]}
        candidate = SimpleNamespace(kind="branches", note="fork x -> join y", nodes=nodes, **tasks)
        return SimpleNamespace(candidate=candidate, reason=why)

    lstm, small = "does not lower: LSTM", "saving below the call overhead"
    rejected = [refused(1, 5, lstm), refused(4, 5, lstm), refused(1, 5, lstm), refused(1, 5, small)]
    rejected.append(refused(1, 5, lstm))
    assert candidate_lines(rejected) == [
        "not chosen (5):",
        f"  branches fork x -> join y (4+5 nodes): {lstm}",
        f"  branches fork x -> join y (1+5 nodes): {lstm} (x3)",
        f"  branches fork x -> join y (1+5 nodes): {small}",
    ]
    assert candidate_lines(rejected, limit=1)[0] == "not chosen (5, the 1 largest; all in --json):"


def times_listed(line: str) -> int:
    """How many candidates a line of `inspect`'s not-chosen list stands for: "... (x3)" three alike."""
    alike = re.search(r" \(x(\d+)\)$", line)
    return int(alike.group(1)) if alike else 1


def if_model():
    """Relu, then an If whose branches hold 2 and 4 nodes, the else branch's last an If of its own
    whose branches hold 1 node each."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    out = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])

    def branch(name: str, ops: list[str]):
        nodes, prev = [], "r"
        for k, op in enumerate(ops):
            nodes.append(helper.make_node(op, [prev], [f"{name}{k}"], name=f"{name}/{op}{k}"))
            prev = f"{name}{k}"
        nodes.append(helper.make_node("Identity", [prev], ["b_" + name], name=f"{name}/out"))
        if name == "else":
            inner = [
                helper.make_graph([helper.make_node("Identity", ["r"], [t], name=t)], t, [], [_vector4(t)])
                for t in "pq"
            ]
            nodes.append(
                helper.make_node("If", ["c"], ["n"], name="nested", then_branch=inner[0], else_branch=inner[1])
            )
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


def _vector4(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4])


def test_if_branches_are_analysed_and_nested_control_flow_named_as_not_looked_at(dirs) -> None:
    src = dirs.save("if.onnx", if_model())
    proc = run_cli("inspect", src, "--json", dirs.out / "r.json")
    assert proc.returncode == 0, proc.stderr
    assert "then branch of If 'cond': 2 nodes; candidates: none; chosen: 0" in proc.stdout
    assert "else branch of If 'cond': 4 nodes" in proc.stdout
    assert "not looked at: 2 node(s) inside control-flow subgraphs (2 in If 'cond')" in proc.stdout
    doc = json.loads((dirs.out / "r.json").read_text())
    assert doc["not_looked_at"] == [{"node": "If 'cond'", "subgraph_nodes": 2}]
    assert [b["where"] for b in doc["branches"]] == ["then branch of If 'cond'", "else branch of If 'cond'"]


def test_missing_output_folder_is_refused_before_analysis(dirs) -> None:
    src = dirs.save("atan.onnx", atan_branches())
    missing = dirs.out / "no" / "such" / "x.onnx"
    proc = run_cli("rewrite", src, "-o", missing)  # not -q: analysis would print progress lines
    assert proc.returncode == EXIT_WRITE_FAILED
    line = error_line(proc)
    assert "output folder" in line and "does not exist" in line and str(missing) in line
    assert listing(dirs.out) == []


def test_blocker_names_the_op_not_the_node() -> None:
    from hexfuse_onnx.lowering import LoweringError
    from hexfuse_onnx.select import blocker_of

    assert blocker_of(LoweringError("Erf", "n1", "op is outside the kernel's op set")) == "Erf outside the kernel"
    domain = LoweringError("FastGelu", "n2", "domain 'com.microsoft' is outside the kernel's op set")
    assert blocker_of(domain) == "com.microsoft::FastGelu outside the kernel"
    cast = LoweringError("Cast", "n3", "Cast from INT64 to FLOAT: the kernel runs float32 only")
    assert blocker_of(cast) == "Cast: Cast from INT64 to FLOAT: the kernel runs float32 only"
    # the tensors' names too: flan-t5's decoder listed 30 blockers, one per Gather output
    by_input = [
        LoweringError("Unsqueeze", f"u{k}", f"'g{k}' is not float32 (the kernel runs float32 only)") for k in (1, 2)
    ]
    assert {blocker_of(e) for e in by_input} == {"Unsqueeze: a tensor is not float32 (the kernel runs float32 only)"}
    by_output = LoweringError("Concat", "c", "output '/m/Concat_output_0' is shape arithmetic the lowering computes")
    assert blocker_of(by_output) == "Concat: an output is shape arithmetic the lowering computes"
    mode = LoweringError("Resize", "r", "mode 'cubic' is not supported (nearest and linear only)")
    assert blocker_of(mode) == "Resize: mode 'cubic' is not supported (nearest and linear only)"


def test_original_failing_on_the_test_inputs_is_a_bad_model(tmp_path) -> None:
    """Inconsistent --shape values (or a model that cannot run on them): the input is at fault, so
    it is one ModelError (exit 3), not a verification failure blamed on every pair in turn."""
    import pytest

    from hexfuse_onnx import verify
    from hexfuse_onnx.errors import EXIT_BAD_MODEL, ModelError

    picks = helper.make_node("Gather", ["x", "i"], ["y"], name="row5", axis=0)
    g = helper.make_graph(
        [picks],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=[numpy_helper.from_array(np.array(5, np.int64), "i")],
    )
    src = tmp_path / "gather.onnx"
    src.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert verify.compare(src, src, {"x": [6, 4]}).outputs == 1
    with pytest.raises(ModelError, match="the original model fails to run") as info:
        verify.compare(src, src, {"x": [2, 4]})
    assert info.value.exit_code == EXIT_BAD_MODEL


def test_inconsistent_shape_values_are_one_line_and_exit_3(dirs) -> None:
    """x and m share the symbolic batch n; giving them different batches breaks the original."""
    from hexfuse_onnx.errors import EXIT_BAD_MODEL

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a1"], name="mm"),
        helper.make_node("Relu", ["a1"], ["a2"], name="relu"),
        helper.make_node("Mul", ["m", "m"], ["b1"], name="mul"),
        helper.make_node("Tanh", ["b1"], ["b2"], name="tanh"),
        helper.make_node("Add", ["a2", "b2"], ["y"], name="join"),
    ]
    batch = [helper.make_tensor_value_info(t, TensorProto.FLOAT, ["n", 64]) for t in ("x", "m")]
    g = helper.make_graph(nodes, "g", batch, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])], [w])
    src = dirs.save("batch.onnx", helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    proc = run_cli("rewrite", src, "-o", dirs.out / "out.onnx", "--shape", "x=2x64", "--shape", "m=3x64", "-q")
    assert proc.returncode == EXIT_BAD_MODEL
    assert "--shape gives dim 'n' two values, 2 and 3" in error_line(proc)  # found before any run
    assert listing(dirs.out) == []
    consistent = run_cli("rewrite", src, "-o", dirs.out / "out.onnx", "--shape", "x=2x64", "--shape", "m=2x64", "-q")
    assert consistent.returncode == 0, consistent.stderr


def test_unknown_shapes_are_traced_to_the_op_they_start_at(dirs) -> None:
    """SVTRv2 (azcrawlerpy-recaptcha-text): 24 nodes not profiled below If outputs, and the report
    told the user to fix input dims with --shape, which were already fixed."""

    def branch(name: str, node: onnx.NodeProto) -> onnx.GraphProto:
        return helper.make_graph(
            [node], name, [], [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, [None, 64])]
        )

    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
        helper.make_node(
            "If",
            ["c"],
            ["p"],
            name="pad",
            then_branch=branch("then", helper.make_node("Identity", ["x"], ["t"])),
            else_branch=branch("else", helper.make_node("Concat", ["x", "x"], ["e"], axis=0)),
        ),
        *[helper.make_node("Relu" if k % 2 else "Sigmoid", [f"h{k}"], [f"h{k + 1}"], name=f"act{k}") for k in range(7)],
    ]
    nodes[2].output[0] = "h0"
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
    y = helper.make_tensor_value_info("h7", TensorProto.FLOAT, [None, 64])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], initializer=[zero]), opset_imports=[helper.make_opsetid("", 17)]
    )
    proc = run_cli("inspect", dirs.save("if_pad.onnx", model), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "8 node(s) not profiled, so not paired:" in proc.stdout
    assert (
        "  ... and 3 more; the unknown shapes start at If 'pad', whose outputs shape inference does not follow\n"
        in proc.stdout
    )
    assert "--shape NAME" not in proc.stdout


def qdq_gemm_chain(batch: int | str) -> onnx.ModelProto:
    """x -> DQ(Q(x)) -> Gemm (u8 weight) -> Q -> DQ -> Tanh -> Q -> DQ: one chain of QDQ groups."""
    rng = np.random.default_rng(0)
    scale = numpy_helper.from_array(np.array(0.02, np.float32), "s")
    zero = numpy_helper.from_array(np.array(128, np.uint8), "z")
    w = numpy_helper.from_array(rng.integers(0, 256, (64, 64), dtype=np.uint8), "w")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wd"]),
        helper.make_node("Gemm", ["xd", "wd"], ["g"], name="gemm"),
        helper.make_node("QuantizeLinear", ["g", "s", "z"], ["gq"]),
        helper.make_node("DequantizeLinear", ["gq", "s", "z"], ["gd"]),
        helper.make_node("Tanh", ["gd"], ["t"], name="tanh"),
        helper.make_node("QuantizeLinear", ["t", "s", "z"], ["tq"]),
        helper.make_node("DequantizeLinear", ["tq", "s", "z"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 64])],
        initializer=[scale, zero, w],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CHAIN_AT_BATCH_ONE = (
    "no independent work at these shapes: the graph is one chain (no fork has two branches that compute)"
    " at batch 1, and a micro-batch needs axis 0 of at least 2 (input 'x': 1x64; "
)


def test_a_chain_at_batch_one_says_why_it_has_no_candidate(dirs) -> None:
    fixed = run_cli("inspect", dirs.save("fixed.onnx", qdq_gemm_chain(1)))
    assert fixed.returncode == 0, fixed.stderr
    assert "candidates: none" in fixed.stdout
    assert CHAIN_AT_BATCH_ONE + "the model fixes it)" in fixed.stdout
    src = dirs.save("batch.onnx", qdq_gemm_chain("batch"))
    default = run_cli("inspect", src, "--shape", "x=1x64")
    assert CHAIN_AT_BATCH_ONE + "--shape x=2x64 analyses a batch of 2)" in default.stdout
    wider = run_cli("inspect", src, "--shape", "x=2x64")
    assert wider.returncode == 0, wider.stderr
    assert "no independent work" not in wider.stdout
    assert "1 microbatch" in wider.stdout


def test_a_chain_whose_batch_dim_is_minus_one_is_offered_a_larger_batch(dirs) -> None:
    """paddle2onnx writes a free batch as dim_value -1 (ppocr_cls: x is [-1, 3, ?, ?]); the pass binds
    it as a symbolic dim, and the line said "the model fixes it" where --shape makes a batch of 2."""
    src = dirs.save("minus_one.onnx", qdq_gemm_chain(-1))
    default = run_cli("inspect", src)
    assert default.returncode == 0, default.stderr
    assert CHAIN_AT_BATCH_ONE + "--shape x=2x64 analyses a batch of 2)" in default.stdout


def test_verification_failures_are_counted_by_the_check_they_failed() -> None:
    """`rewrite -q` printed 'rejected 1: fails verification' alone (sweep9)."""
    from hexfuse_onnx.kinds.base import Candidate
    from hexfuse_onnx.report import rejection_lines
    from hexfuse_onnx.select import Rejection

    def rejection(reason: str) -> Rejection:
        return Rejection(Candidate("branches", [0], [1]), reason)

    lines = rejection_lines(
        [
            rejection("fails verification: stock ONNX Runtime differs from the original by 0.0142 relative"),
            rejection("fails verification: with the FusedHexPair plugin: pair output 'y' is 3 steps from ORT"),
            rejection("fails verification with the other pairs: with the FusedHexPair plugin: 'z' is 2 steps off"),
            rejection("saving below the call overhead"),
        ]
    )
    assert lines == [
        "rejected 2: fails verification: on stock ORT (1), with the plugin (1)",
        "rejected 1: fails verification with the other pairs: with the plugin (1)",
        "rejected 1: saving below the call overhead",
    ]
