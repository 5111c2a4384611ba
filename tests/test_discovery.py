"""Each discovery finds what it must on the zoo, and nothing where it must not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
from hexfuse_onnx import graph, pipeline
from hexfuse_onnx.costmodel import HEXAGON_V73
from hexfuse_onnx.kinds import KINDS, Candidate, discover
from hexfuse_onnx.kinds.dag import dag_facts, independence_problem
from hexfuse_onnx.profile import profile_graph
from models import quantized

KIND_BRANCHES, KIND_MICROBATCH, KIND_PREFILL_DECODE = "branches", "microbatch", "prefill_decode"


def candidates(g: graph.ModelGraph, kinds: list[str]) -> list[Candidate]:
    return discover(g, kinds, profile_graph(g), HEXAGON_V73).candidates


def kinds_found(path: Path) -> dict[str, int]:
    g = graph.load(path)
    out: dict[str, int] = {}
    for c in candidates(g, list(KINDS)):
        out[c.kind] = out.get(c.kind, 0) + 1
    return out


def names(g: graph.ModelGraph, ids: list[int]) -> set[str]:
    return {g.nodes[i].name for i in ids}


def test_sequential_chain_gives_no_candidate(zoo_dir: Path) -> None:
    assert kinds_found(zoo_dir / "sequential_chain.onnx") == {}


def test_two_branch_finds_the_matrix_vector_pair(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "two_branch.onnx")
    assert [c.kind for c in a.candidates].count(KIND_BRANCHES) == 1
    (pair,) = a.pairs
    tasks = [names(a.graph, pair.candidate.task_a), names(a.graph, pair.candidate.task_b)]
    assert any(all(n.startswith("matrix/") for n in t) for t in tasks)
    assert any(all(n.startswith("vector/") for n in t) for t in tasks)
    assert {pair.a.dominant_engine().value, pair.b.dominant_engine().value} == {"matrix", "vector"}
    assert pair.complementarity > 0.9
    assert pair.prediction.fused < pair.prediction.serial


def test_inception_pairs_branches_of_the_one_fork(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "inception.onnx")
    branch_sets = [c for c in a.candidates if c.kind == KIND_BRANCHES]
    assert len(branch_sets) >= 6  # every pair of the four branches at least
    assert a.pairs and all(p.kind == KIND_BRANCHES for p in a.pairs)


def test_mha_offers_v_projection_against_the_softmax_side(zoo_dir: Path) -> None:
    g = graph.load(zoo_dir / "mha_encoder.onnx")
    found = [(names(g, c.task_a), names(g, c.task_b)) for c in candidates(g, [KIND_BRANCHES])]
    v_branch = {"attn/v_proj/matmul", "attn/v_proj/add", "attn/v/reshape", "attn/v/transpose"}
    assert any((v_branch == a and "attn/softmax" in b) or (v_branch == b and "attn/softmax" in a) for a, b in found)
    scores = {"attn/scores/matmul", "attn/scale", "attn/softmax"}  # QK^T merges Q and K: its subtree is a branch
    assert (v_branch, scores) in found or (scores, v_branch) in found
    assert KIND_MICROBATCH not in kinds_found(zoo_dir / "mha_encoder.onnx")  # batch 1


def test_mlp_chain_is_micro_batched(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "mlp_chain.onnx")
    assert [c.kind for c in a.candidates] == [KIND_MICROBATCH]
    (pair,) = a.pairs
    assert pair.microbatch_sizes is not None and sum(pair.microbatch_sizes) == 8
    assert len(pair.candidate.task_a) == len(a.graph.nodes)  # the whole chain


def test_mlp_chain_after_quant_pre_process_is_micro_batched(tmp_path: Path) -> None:
    """quant_pre_process writes each rank-3 Gemm as Reshape -> Gemm -> Reshape and HardSwish as
    x * HardSigmoid(x): the chain runs through both, whole, as on the zoo's own mlp_chain."""
    a = pipeline.analyse(quantized.prepare(models.build("mlp_chain"), tmp_path))
    ops = [n.op_type for n in a.graph.nodes]
    assert ops.count("Reshape") == 4 and "HardSigmoid" in ops and "HardSwish" not in ops
    assert [c.kind for c in a.candidates] == [KIND_MICROBATCH]
    (pair,) = a.pairs
    assert sorted(pair.candidate.task_a) == list(range(len(a.graph.nodes)))
    assert pair.microbatch_sizes is not None and sum(pair.microbatch_sizes) == 8


def _reshape_chain(to: list[int]) -> graph.ModelGraph:
    """x [4, 6, 16] -> MatMul -> Relu -> Reshape(to) -> Softmax(last axis)."""
    h = helper
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "w")
    shape = numpy_helper.from_array(np.array(to, np.int64), "to")
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        h.make_node("Relu", ["mm"], ["r"], name="relu"),
        h.make_node("Reshape", ["r", "to"], ["rs"], name="reshape"),
        h.make_node("Softmax", ["rs"], ["y"], name="softmax", axis=-1),
    ]
    g = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6, 16])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, shape],
    )
    return graph.index_model(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))


@pytest.mark.parametrize(
    ("to", "chain"),
    [
        ([24, 16], {"mm", "relu", "reshape", "softmax"}),  # merges [b, s] rows: batch rows stay whole
        ([-1, 16], {"mm", "relu", "reshape", "softmax"}),
        ([12, 32], {"mm", "relu", "reshape", "softmax"}),  # 3 rows per batch row
        ([6, 64], {"mm", "relu"}),  # 6 rows: a row holds parts of two batch rows
        ([2, 192], {"mm", "relu"}),
        ([0, 96], {"mm", "relu"}),  # axis 0 copied from the input: a copy's rows would not scale
    ],
)
def test_a_reshape_joins_the_chain_only_when_it_keeps_batch_rows_whole(to: list[int], chain: set[str]) -> None:
    g = _reshape_chain(to)
    (c,) = candidates(g, [KIND_MICROBATCH])
    assert names(g, c.task_a) == chain


def test_a_fork_joins_the_chain_only_as_a_short_vector_diamond() -> None:
    """x * Sigmoid(x) stays in the chain; a residual block (a MatMul beside the skip) ends it."""
    h = helper
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "w")
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m1"], name="mm1"),
        h.make_node("Sigmoid", ["m1"], ["s"], name="sigmoid"),
        h.make_node("Mul", ["m1", "s"], ["swish"], name="swish"),
        h.make_node("MatMul", ["swish", "w"], ["m2"], name="mm2"),
        h.make_node("Add", ["swish", "m2"], ["res"], name="residual"),
        h.make_node("Softmax", ["res"], ["y"], name="softmax", axis=-1),
    ]
    g = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6, 16])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    g = graph.index_model(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))
    found = [names(g, c.task_a) for c in candidates(g, [KIND_MICROBATCH])]
    assert found == [{"mm1", "sigmoid", "swish"}, {"mm2", "residual", "softmax"}]


def test_micro_batch_split_is_chosen_by_the_model_not_fixed(zoo_dir: Path) -> None:
    from hexfuse_onnx.costmodel import get_target
    from hexfuse_onnx.select import evaluate

    a = pipeline.analyse(zoo_dir / "mlp_chain.onnx")
    pair = evaluate(a.graph, a.profile, a.candidates[0], get_target("hexagon-v73"))
    assert not isinstance(pair, str)
    # the chosen split is the best of those tried, and 1:1 is only one of several tried
    from hexfuse_onnx.costmodel import predict

    whole = a.profile.task(a.candidates[0].task_a)
    assert whole is not None
    for rows in (1, 2, 6, 7):
        other = predict(whole.scaled(rows / 8), whole.scaled((8 - rows) / 8), get_target("hexagon-v73"))
        assert pair.prediction.fused <= other.fused + 1e-12


def test_a_task_the_graph_reads_nothing_of_is_refused(tmp_path: Path) -> None:
    """ddddocr_ocr's QDQ versions: the quantizer leaves the LSTM's Y_h and Y_c dequantized for no
    reader; the branches kind paired those two DequantizeLinear nodes into a FusedHexPair node
    without outputs, which the plugin refused to load. A task none of whose tensors the rest of the
    graph reads is refused as dead; a live pair over the same fork is not."""
    from hexfuse_onnx.select import evaluate

    w = [numpy_helper.from_array(np.full((64, 64), 0.01 * k, np.float32), f"w{k}") for k in range(4)]
    nodes = [helper.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"]) for k in range(4)]
    nodes += [helper.make_node("Relu", [f"m{k}"], [f"r{k}"]) for k in range(4)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
    ys = [helper.make_tensor_value_info(f"r{k}", TensorProto.FLOAT, [64, 64]) for k in range(2)]
    g = helper.make_graph(nodes, "dead", [x], ys, initializer=w)  # r2 and r3: read by nothing
    path = tmp_path / "dead.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    a = pipeline.analyse(path, target="host")
    by_name = {n.output[0]: i for i, n in enumerate(a.graph.nodes)}
    live, live2, dead, dead2 = ([by_name[f"m{k}"], by_name[f"r{k}"]] for k in range(4))
    for task_a, task_b, why in ((live, dead, "task B"), (dead, dead2, "task A"), (dead2, live2, "task A")):
        got = evaluate(a.graph, a.profile, Candidate("branches", task_a, task_b), a.target)
        assert isinstance(got, str) and got.startswith(f"{why} makes nothing the graph reads"), got
        assert "(dead nodes, the first node 'm" in got
    got = evaluate(a.graph, a.profile, Candidate("branches", live, live2), a.target)
    assert not (isinstance(got, str) and "makes nothing" in got), got


def test_prefill_decode_pair_in_gpt_step(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "gpt_decode_step.onnx")
    pd = [c for c in a.candidates if c.kind == KIND_PREFILL_DECODE]
    assert len(pd) == 1
    tasks = [names(a.graph, pd[0].task_a), names(a.graph, pd[0].task_b)]
    assert {next(iter(t)).split("/")[0] for t in tasks} == {"prefill", "decode"}
    assert all(len({n.split("/")[0] for n in t}) == 1 for t in tasks)  # a block never mixes requests
    assert a.pairs[0].kind == KIND_PREFILL_DECODE


def test_prefill_decode_pair_with_contrib_attention(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "gpt_decode_step_contrib.onnx")
    pd = [c for c in a.candidates if c.kind == KIND_PREFILL_DECODE]
    assert len(pd) == 1
    ops = {a.graph.nodes[i].op_type for i in pd[0].nodes}
    assert "MultiHeadAttention" in ops


def test_convnet_heads_pairs_parallel_heads(zoo_dir: Path) -> None:
    assert kinds_found(zoo_dir / "convnet_heads.onnx").get(KIND_BRANCHES, 0) >= 3


def test_no_node_in_two_chosen_pairs(zoo_dir: Path) -> None:
    for path in zoo_dir.glob("*.onnx"):
        a = pipeline.analyse(path)
        seen: set[int] = set()
        for p in a.pairs:
            assert not seen & p.candidate.nodes, path.name
            seen |= p.candidate.nodes


def test_min_gain_threshold_rejects_everything_when_high(zoo_dir: Path) -> None:
    a = pipeline.analyse(zoo_dir / "two_branch.onnx", min_gain=0.99)
    assert a.pairs == [] and a.rejected and "min-gain" in a.rejected[0].reason


def test_on_chip_budget_rejects_pairs_that_do_not_fit(zoo_dir: Path) -> None:
    from dataclasses import replace

    from hexfuse_onnx.costmodel import HEXAGON_V73, Param
    from hexfuse_onnx.select import select

    a = pipeline.analyse(zoo_dir / "two_branch.onnx")
    tiny = replace(HEXAGON_V73, onchip_bytes=Param(1024, "B", "test"))
    pairs, rejected = select(a.graph, a.profile, a.candidates, tiny)
    assert pairs == [] and "on-chip budget" in rejected[0].reason


def _dag(edges: list[tuple[str, str]], nodes: list[str]) -> graph.ModelGraph:
    """A model with one Add/Relu node per name; edges name producer -> consumer."""
    inputs = {n: [src for src, dst in edges if dst == n] for n in nodes}
    made = []
    for n in nodes:
        srcs = [f"{s}_out" for s in inputs[n]] or ["x"]
        if len(srcs) == 1:
            made.append(helper.make_node("Relu", srcs, [f"{n}_out"], name=n))
        else:
            made.append(helper.make_node("Sum", srcs, [f"{n}_out"], name=n))
    sinks = [n for n in nodes if not any(src == n for src, _ in edges)]
    g = helper.make_graph(
        made,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"{s}_out", TensorProto.FLOAT, [2]) for s in sinks],
    )
    return graph.index_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


def test_independence_check_catches_paths_and_non_convex_sets() -> None:
    # x -> a -> b -> c ; x -> d ; c,d -> e
    g = _dag([("a", "b"), ("b", "c"), ("c", "e"), ("d", "e")], ["a", "b", "c", "d", "e"])
    f = dag_facts(g)
    ids = {n.name: i for i, n in enumerate(g.nodes)}
    s = lambda *ns: {ids[n] for n in ns}  # noqa: E731
    assert independence_problem(f, s("a", "b", "c"), s("d")) is None
    assert "path" in independence_problem(f, s("a"), s("b"))
    assert "not convex" in independence_problem(f, s("a", "c"), s("d"))
    assert independence_problem(f, s("a"), s("a", "d")) == "the tasks share nodes"


def test_a_wide_fork_pairs_its_largest_branch_too() -> None:
    """x feeds 10 single Relus first and then a chain of 6 (as captcha_crnn's sequence feeds 21 steps of
    its forward LSTM, then the Slice that starts the backward one): the chain is a branch of its own."""
    nodes = [helper.make_node("Relu", ["x"], [f"s{k}"], name=f"short{k}") for k in range(10)]
    nodes += [helper.make_node("Tanh", ["x" if k == 0 else f"c{k - 1}"], [f"c{k}"], name=f"long{k}") for k in range(6)]
    nodes.append(helper.make_node("Sum", [*(f"s{k}" for k in range(10)), "c5"], ["y"], name="join"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    model = helper.make_model(helper.make_graph(nodes, "wide", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    g = graph.index_model(model)
    chain = {f"long{k}" for k in range(6)}
    found = [(names(g, c.task_a), names(g, c.task_b)) for c in candidates(g, [KIND_BRANCHES])]
    assert any(chain in (a, b) for a, b in found)
    assert any({"short0"} in (a, b) for a, b in found)  # the first ones stay


def test_towers_that_start_at_a_merge_pair_whole() -> None:
    """Two MatMul towers each start at Mul(Gather_k(ids), mask) with the mask shared (stranger26's
    odd_inputs): each Mul's immediate dominator is the graph inputs' SOURCE, no consumer of a fork,
    so only the Gathers and the mask were paired. Each tower is a branch headed by its merge."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
        for n, s in [("E1", (50, 64)), ("E2", (50, 64)), ("W1", (64, 64)), ("W2", (64, 64))]
    ]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "ax"))
    nodes = [helper.make_node("Unsqueeze", ["mask", "ax"], ["m"], name="unsq")]
    for k, act in (("1", "Relu"), ("2", "Tanh")):
        nodes += [
            helper.make_node("Gather", [f"E{k}", "ids"], [f"e{k}"], name=f"gather{k}"),
            helper.make_node("Mul", [f"e{k}", "m"], [f"em{k}"], name=f"mul{k}"),
            helper.make_node("MatMul", [f"em{k}", f"W{k}"], [f"h{k}"], name=f"matmul{k}"),
            helper.make_node(act, [f"h{k}"], [f"o{k}"], name=f"act{k}"),
        ]
    nodes.append(helper.make_node("Add", ["o1", "o2"], ["y"], name="join"))
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [32])
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, [32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])
    graph_ = helper.make_graph(nodes, "towers", [ids, mask], [y], inits)
    g = graph.index_model(helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 17)]))
    found = [(names(g, c.task_a), names(g, c.task_b)) for c in candidates(g, [KIND_BRANCHES])]
    assert ({"mul1", "matmul1", "act1"}, {"mul2", "matmul2", "act2"}) in found


def _transpose_then_chain(tmp_path: Path, config: str) -> Path:
    """x[64, 16] -> Transpose -> MatMul(w) -> Tanh -> Transpose, quantized by the QNN recipe: the
    chain between the Transposes (which mix rows) reads the first one's QuantizeLinear's integer
    output, as ddddocr_ocr's tail reads its LSTM's, and ends where the second one's group begins."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.2, (64, 256)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Transpose", ["x"], ["s"], name="transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["s", "w"], ["m"], name="matmul"),
        helper.make_node("Tanh", ["m"], ["t"], name="tanh"),
        helper.make_node("Transpose", ["t"], ["y"], name="transpose_back", perm=[1, 0]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 16])
    model = helper.make_model(
        helper.make_graph(nodes, "transpose_chain", [x], [y], initializer=[w]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    src, dest = tmp_path / "float.onnx", tmp_path / f"qdq_{config}.onnx"
    onnx.save(model, src)
    feeds = [{"x": rng.normal(0, 1, (64, 16)).astype(np.float32)} for _ in range(4)]
    quantized.quantize(src, dest, feeds, config)
    return dest


@pytest.mark.parametrize("config", ["u8u8", "u16u8"])
def test_a_chain_after_an_ops_quantize_starts_at_its_integer_tensor(tmp_path: Path, config: str) -> None:
    """The QuantizeLinear of an op before the chain belongs to that op's QDQ group, the
    DequantizeLinear after it to the next op's: a micro-batch chain split both (ddddocr_ocr:
    "'361_QuantizeLinear' quantizes node 'LSTM_79' outside the task", its only live candidate;
    mha_encoder: "'gemm_output_reshape_arg_DequantizeLinear' feeds node 'gemm_output_reshape_new_
    reshape' outside the task"). The chain starts at the DequantizeLinear and ends at the
    QuantizeLinear instead, on integer tensors, and the rewrite matches stock ORT bit for bit."""
    from hexfuse_onnx.select import evaluate

    path = _transpose_then_chain(tmp_path, config)
    a = pipeline.analyse(path, ["microbatch"])
    (c,) = [c for c in a.candidates if c.kind == KIND_MICROBATCH]
    ops = [a.graph.nodes[i].op_type for i in c.task_a]
    assert ops[0] == "DequantizeLinear" and ops[-1] == "QuantizeLinear" and "Transpose" not in ops
    assert {"MatMul", "Tanh"} <= set(ops)
    got = evaluate(a.graph, a.profile, c, a.target)
    assert not (isinstance(got, str) and got.startswith("splits a QDQ group")), got
    if config == "u16u8":
        return  # ORT makes the original's DQ(weight) + MatMul a MatMulNBits (test_rewrite: refused)
    r = pipeline.rewrite(path, tmp_path / "fused.onnx", ["microbatch"], min_gain=-1.0)  # kept whatever it saves
    assert r.output is not None and r.comparison is not None and r.comparison.worst_relative_error == 0.0
    assert [p.kind for p in r.analysis.pairs] == [KIND_MICROBATCH]


def _shape_chains_beside_two_branches(path: Path) -> Path:
    """x [batch, 256] -> a MatMul branch and a Sigmoid -> Tanh branch, added and reshaped to a shape
    torch-style: Shape -> Gather -> Unsqueeze of the Tanh branch's output (a chain inside that
    branch, read by the Concat outside it) and of x (a branch of its own), then Concat."""
    h = helper
    w = numpy_helper.from_array(np.full((256, 256), 0.01, np.float32), "w")
    zero, axis0, one = (
        numpy_helper.from_array(np.array(v, np.int64), n) for v, n in ((0, "zero"), ([0], "axis0"), ([1], "one"))
    )
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        h.make_node("Relu", ["mm"], ["a"], name="relu"),
        h.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
        h.make_node("Tanh", ["s"], ["b"], name="tanh"),
        h.make_node("Shape", ["b"], ["b_shape"], name="shape_b"),
        h.make_node("Gather", ["b_shape", "zero"], ["b_rows"], name="rows_b", axis=0),
        h.make_node("Unsqueeze", ["b_rows", "axis0"], ["b_rows1"], name="unsqueeze_b"),
        h.make_node("Shape", ["x"], ["x_shape"], name="shape_x"),
        h.make_node("Gather", ["x_shape", "one"], ["x_cols"], name="cols_x", axis=0),
        h.make_node("Mul", ["x_cols", "one"], ["x_cols1"], name="mul_x"),
        h.make_node("Concat", ["b_rows1", "x_cols1"], ["to"], name="concat", axis=0),
        h.make_node("Add", ["a", "b"], ["sum"], name="add"),
        h.make_node("Reshape", ["sum", "to"], ["y"], name="reshape"),
    ]
    g = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256])],
        [w, zero, axis0, one],
    )
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), path)
    return path


def test_shape_arithmetic_is_in_no_candidate_and_counted_once(tmp_path: Path) -> None:
    """The shape chains run where they are: the two real branches pair without the chain in the
    Tanh branch (whose Unsqueeze a task cannot make for the Concat: lowering refused the pair), and
    the four candidates pairing the chain of x (with either real branch, both, and the Add merging
    them) are counted, not refused one by one."""
    from hexfuse_onnx import report

    a = pipeline.analyse(_shape_chains_beside_two_branches(tmp_path / "shapes.onnx"), probe_binding=False)
    shape_nodes = {"shape_b", "rows_b", "unsqueeze_b", "shape_x", "cols_x", "mul_x", "concat"}
    assert all(not names(a.graph, list(c.nodes)) & shape_nodes for c in a.candidates)
    (pair,) = a.pairs
    assert {frozenset(names(a.graph, pair.candidate.task_a)), frozenset(names(a.graph, pair.candidate.task_b))} == {
        frozenset({"mm", "relu"}),
        frozenset({"sigmoid", "tanh"}),
    }
    assert pair.program is not None
    assert a.shape_only == 4 and not a.rejected
    assert "(4 more of shape arithmetic only: not paired)" in report.summary(a)


def test_shorter_branches_are_halves_that_stay_independent(zoo_dir: Path) -> None:
    """A branches pair refused at lowering (its tasks' scratch overflowing the kernel's arena) or by
    verification is offered as two pairs of halves: first with first, second with second."""
    g = graph.load(zoo_dir / "inception.onnx")
    facts, profile = dag_facts(g), profile_graph(g)
    found = discover(g, [KIND_BRANCHES], profile, HEXAGON_V73).candidates
    c = max(found, key=lambda c: min(len(c.task_a), len(c.task_b)))
    halves = KINDS[KIND_BRANCHES].shorter(g, profile, c, HEXAGON_V73)
    assert len(halves) == 2, [(len(c.task_a), len(c.task_b))]
    first, second = halves
    for h in halves:
        assert h.kind == KIND_BRANCHES and independence_problem(facts, set(h.task_a), set(h.task_b)) is None
    assert set(first.task_a) <= set(c.task_a) and set(second.task_a) <= set(c.task_a)
    assert not set(first.task_a) & set(second.task_a) and not set(first.task_b) & set(second.task_b)
    assert max(first.task_a) < min(second.task_a) and max(first.task_b) < min(second.task_b)
