"""The original is run at the shapes the pass analyses and verifies at in a child process: a
binding it does not run at is replaced (the default) or skipped (verification), and ONNX Runtime
dying of SIGFPE at one refuses that shape in one line instead of killing the pass. Real ORT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import error_line, run_cli
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import contract, graph, pipeline, probe
from hexfuse_onnx.errors import EXIT_BAD_MODEL
from hexfuse_onnx.lowering import attach_programs
from hexfuse_onnx.verify import session

C = 16
CW = 4  # fixed_width's channels: two branches at 224x224 within the host's on-chip budget


def pooled(path: Path) -> Path:
    """x[N, 16, H, W] -> 1x1 Conv -> AveragePool 7x7. ORT (NCHWc pooling) dies of SIGFPE at H = 6."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((C, C, 1, 1)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("AveragePool", ["c"], ["y"], name="pool", kernel_shape=[7, 7]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    onnx.save(helper.make_model(helper.make_graph(nodes, "pooled", [x], [y], [w]), opset_imports=[OPSET]), path)
    return path


def fixed_width(path: Path, width: int) -> Path:
    """Two conv branches over x[N, 4, H, W] whose join adds a [1, 1, 1, width] constant: the
    model runs only at W = width, which the declared dims do not say."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((CW, CW, 3, 3)).astype(np.float32) / 12, "wa"),
        numpy_helper.from_array(rng.standard_normal((CW, CW, 1, 1)).astype(np.float32) / 4, "wb"),
        numpy_helper.from_array(rng.standard_normal((1, 1, 1, width)).astype(np.float32), "row"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["ra"], name="relu_a"),
        helper.make_node("Conv", ["x", "wb"], ["b"], name="conv_b"),
        helper.make_node("Sigmoid", ["b"], ["sb"], name="sigmoid_b"),
        helper.make_node("Add", ["ra", "sb"], ["s"], name="join"),
        helper.make_node("Add", ["s", "row"], ["y"], name="row_add"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", CW, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", CW, "H", "W"])
    model = helper.make_model(helper.make_graph(nodes, "fixed_width", [x], [y], inits), opset_imports=[OPSET])
    onnx.save(model, path)
    return path


OPSET = helper.make_opsetid("", 17)


def programs(model: onnx.ModelProto) -> list[bytes]:
    return [a.s for n in model.graph.node for a in n.attribute if a.name == contract.ATTR_PROGRAM]


def shapes(side: int) -> dict[str, list[int]]:
    return {"x": [1, C, side, side]}


def test_a_shape_ort_dies_at_is_refused_and_the_rest_are_tried(tmp_path: Path) -> None:
    path = pooled(tmp_path / "pooled.onnx")
    outcomes = probe.runs_at(path, [shapes(6), shapes(5), shapes(7), shapes(8), shapes(9)], enough=2)
    assert [o.shapes["x"][2] for o in outcomes] == [6, 5, 7, 8]  # stops at the second that runs
    assert outcomes[0].error == "ONNX Runtime died of SIGFPE running the original"
    assert outcomes[1].error is not None and "ComputeOutputSize" in outcomes[1].error
    assert [o.error for o in outcomes[2:]] == [None, None]


def test_one_child_answers_a_question_asked_again_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """colocate checks the merge where rewrite then analyses it: the second asking starts no child."""
    path = pooled(tmp_path / "pooled.onnx")
    children: list[int] = []
    child_run = probe._child_run

    def counted(*args, **kwargs):
        children.append(1)
        return child_run(*args, **kwargs)

    monkeypatch.setattr(probe, "_child_run", counted)
    first = probe.runs_at(path, [shapes(8)], enough=1)
    assert probe.runs_at(str(path), [shapes(8)], enough=1) == first and len(children) == 1
    assert probe.runs_at(path, [shapes(9)], enough=1)[0].shapes == shapes(9) and len(children) == 2
    pooled(path)  # written again: a new file for the probe
    assert probe.runs_at(path, [shapes(8)], enough=1) == first and len(children) == 3


def test_verification_skips_a_binding_ort_dies_at(tmp_path: Path) -> None:
    path = pooled(tmp_path / "pooled.onnx")
    dims = graph.input_dims(onnx.load(str(path)))
    bindings = [graph.bind(dims, {"N": 1, "H": h, "W": h}) for h in (12, 6, 8)]
    said: list[str] = []
    cases: list = []
    ran = pipeline._binding_cases(path, session(path), bindings, False, cases, said.append)
    assert ran == [bindings[0], bindings[2]]
    assert [c.label for c in cases] == ["x=1x16x12x12", "x=1x16x8x8"]
    assert said == [
        "the original model does not run at N=1, H=6, W=6"
        " (ONNX Runtime died of SIGFPE running the original); not verifying there"
    ]


def test_the_default_binding_moves_to_where_the_original_runs(tmp_path: Path) -> None:
    path = fixed_width(tmp_path / "model.onnx", 224)
    said: list[str] = []
    result = pipeline.rewrite(path, tmp_path / "out.onnx", target="host", min_gain=-1.0, progress=said.append)
    assert result.analysis.graph.binding is not None
    assert result.analysis.graph.binding.symbols == {"N": 1, "H": 224, "W": 224}
    assert "the original model does not run at N=1, H=128, W=128; analysing at N=1, H=224, W=224" in said
    assert result.output is not None and len(result.analysis.pairs) == 1
    written = onnx.load(str(result.output))
    assert [d.dim_param or d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim] == [
        "N",
        CW,
        "H",
        "W",
    ]
    # the program lowers again where it was analysed (recorded in the model), not at the default
    again, failed = attach_programs(written)
    assert failed == {}
    assert programs(again) == programs(written)


def test_a_hint_for_the_dim_is_kept(tmp_path: Path) -> None:
    path = fixed_width(tmp_path / "model.onnx", 224)
    a = pipeline.analyse(path, target="host", shapes={"x": [2, CW, 40, 224]})
    assert a.graph.binding is not None and a.graph.binding.symbols == {"N": 2, "H": 40, "W": 224}


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_a_model_that_runs_at_no_default_names_the_dims_to_give(command: str, tmp_path: Path) -> None:
    path = fixed_width(tmp_path / "model.onnx", 100)
    proc = run_cli(command, path, "-q", "--target", "host")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    line = error_line(proc)
    assert "the original model runs with none of 128, 224, 64, 48, 32, 256, 320, 640, 16 for" in line
    assert "'H' ('x' axis 2), 'W' ('x' axis 3) with 'N' ('x' axis 0) at 1 (taken for batches); give those" in line
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "model.fused.onnx").exists()


def unpadded(path: Path) -> Path:
    """Two 3x3 Conv branches without padding over x[N, 4, H, W], joined: no run at H or W below 3."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((CW, CW, 3, 3)).astype(np.float32) / 12, w) for w in "ab"]
    nodes = [
        helper.make_node("Conv", ["x", "a"], ["ca"], name="conv_a"),
        helper.make_node("Relu", ["ca"], ["ra"], name="relu_a"),
        helper.make_node("Conv", ["x", "b"], ["cb"], name="conv_b"),
        helper.make_node("Sigmoid", ["cb"], ["sb"], name="sigmoid_b"),
        helper.make_node("Add", ["ra", "sb"], ["y"], name="join"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", CW, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", CW, "h", "w"])
    onnx.save(helper.make_model(helper.make_graph(nodes, "unpadded", [x], [y], inits), opset_imports=[OPSET]), path)
    return path


def test_bench_of_a_rewritten_model_runs_at_its_analysed_shapes_and_names_those_it_fails_at(tmp_path: Path) -> None:
    """Benched without --shape, a rewritten model took 1 for each symbolic dim, where this one's original
    fails (caustic_painn's at 1 atom): it is timed at the shapes the rewrite analysed now (its bindings).
    A --shape where the original fails: exit 3 with the shapes, where an internal error (exit 70) was."""
    path = unpadded(tmp_path / "model.onnx")
    result = pipeline.rewrite(path, tmp_path / "fused.onnx", target="host", min_gain=-1.0)
    assert result.output is not None
    fast = ("--runs", "1", "--rounds", "1", "--warmup", "0", "-q")
    proc = run_cli("bench", result.output, *fast)
    analysed = "x=" + "x".join(map(str, result.analysis.graph.binding.inputs["x"]))
    assert proc.returncode == 0 and f"inputs {analysed}" in proc.stdout, proc.stderr
    proc = run_cli("bench", result.output, "--shape", "x=1x4x1x1", *fast)
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    line = error_line(proc)
    assert "the original model fails on seeded random inputs at x=1x4x1x1; give its dims with --shape" in line


def gathered(path: Path) -> Path:
    """rows[n, 4] gathered at ids[2, e] (int64), as a graph network gathers its atoms at its edges: dim 0
    of rows is taken for a batch and held at 1, where the random ids 0 or 1 need two rows."""
    nodes = [
        helper.make_node("Gather", ["rows", "ids"], ["g"], name="gather", axis=0),
        helper.make_node("Relu", ["g"], ["y"], name="relu"),
    ]
    rows = helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 4])
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, "e"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "e", 4])
    onnx.save(helper.make_model(helper.make_graph(nodes, "gathered", [rows, ids], [y]), opset_imports=[OPSET]), path)
    return path


def test_a_model_that_runs_at_no_default_names_the_batches_held_at_1(tmp_path: Path) -> None:
    """caustic_painn named 'num_edges' alone, which no value helps: its atom count, dim 0 of pos
    [num_atoms, 3], held at 1, is the cause. Every dim tried is named; with it given, the model runs."""
    path = gathered(tmp_path / "model.onnx")
    proc = run_cli("inspect", path, "-q", "--target", "host")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    line = error_line(proc)
    assert "for 'e' ('ids' axis 1) with 'n' ('rows' axis 0) at 1 (taken for batches); give those dims" in line
    assert run_cli("inspect", path, "-q", "--target", "host", "--shape", "rows=8x4").returncode == 0


def _decoder_inputs() -> onnx.ModelProto:
    """No nodes, a decoder's inputs: TorchScript declares the mask [batch, past_sequence_length +
    sequence_length]."""
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "past + seq"]),
        helper.make_tensor_value_info("past", TensorProto.FLOAT, ["batch", 2, "past", 4]),
    ]
    return helper.make_model(helper.make_graph([], "g", inputs, []))


def test_a_dim_that_is_an_expression_of_others_is_bound_to_its_value() -> None:
    model = _decoder_inputs()
    rep = graph.representative_binding(model, {}, "model")
    assert rep.inputs == {"ids": [1, 128], "mask": [1, 256], "past": [1, 2, 128, 4]}
    hinted = graph.representative_binding(model, {"mask": [1, 9]}, "model")
    assert hinted.inputs["mask"] == [1, 9]  # a --shape value is kept as given
    assert graph.unhinted_dims(model, {}) == {"seq": "'ids' axis 1", "past": "'past' axis 2"}


def test_a_dim_0_that_counts_items_is_no_batch() -> None:
    """A stranger's [frames, features] input was analysed at 1 frame, and minimol's feat [num_nodes, 85] at
    one node (dim 0 taken for a batch); a time-major [seq, batch, 4]'s batch at 128."""
    inputs = [
        helper.make_tensor_value_info("feats", TensorProto.FLOAT, ["frames", 80]),
        helper.make_tensor_value_info("nodes", TensorProto.FLOAT, ["num_nodes", 8]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq_len", "batch", 4]),
        helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, "height", 4]),
    ]
    model = helper.make_model(helper.make_graph([], "g", inputs, []))
    rep = graph.representative_binding(model, {}, "model")
    assert rep.symbols == {"frames": 128, "num_nodes": 128, "seq_len": 128, "batch": 1, "N": 1, "height": 128}
    assert set(graph.unhinted_dims(model, {})) == {"frames", "num_nodes", "seq_len", "height"}
    assert set(graph.unhinted_batches(model, {})) == {"N"}


def test_zero_bindings_empty_one_non_batch_dim_at_a_time() -> None:
    model = _decoder_inputs()
    rep = graph.representative_binding(model, {}, "model")
    # the mask's length follows; the batch is never emptied
    assert [b.inputs for b in graph.zero_bindings(model, rep.symbols)] == [
        {"ids": [1, 0], "mask": [1, 128], "past": [1, 2, 128, 4]},
        {"ids": [1, 128], "mask": [1, 128], "past": [1, 2, 0, 4]},
    ]
    # a dim already at 0 is not verified twice
    hinted = graph.representative_binding(model, {"past": [1, 2, 0, 4]}, "model")
    assert [b.inputs for b in graph.zero_bindings(model, hinted.symbols)] == [
        {"ids": [1, 0], "mask": [1, 0], "past": [1, 2, 0, 4]}
    ]


def test_after_all_free_dims_together_each_is_tried_doubled() -> None:
    # dynamo decoders declare the mask [batch, total_sequence_length]: it must be past + new
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "total"]),
        helper.make_tensor_value_info("past", TensorProto.FLOAT, ["batch", 2, "past", 4]),
    ]
    model = helper.make_model(helper.make_graph([], "g", inputs, []))
    candidates = graph.binding_candidates(model, {}, "model")
    together = [{"seq": v, "total": v, "past": v} for v in (128, *graph.ALTERNATIVE_SYMBOLIC_DIMS)]
    alone = [{"seq": 256, "total": 128, "past": 128}, {"seq": 128, "total": 256, "past": 128}]
    alone.append({"seq": 128, "total": 128, "past": 256})
    assert [{k: v for k, v in c.symbols.items() if k != "batch"} for c in candidates] == together + alone


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama_torchscript", "gpt2_dynamo"])
def test_a_decoder_rewrites_without_shape_and_generates(name: str, tmp_path: Path) -> None:
    from models.exported import MODELS, decoder_spec, generate

    result = pipeline.rewrite(MODELS[name].path, tmp_path / "fused.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    spec = decoder_spec(MODELS[name].path)
    prompt = np.array([[5, 17, 42, 7, 99], [1, 2, 3, 4, 5]], np.int64)
    want = generate(session(MODELS[name].path), spec, prompt, 6)
    np.testing.assert_array_equal(generate(session(result.output), spec, prompt, 6), want)


def test_inspect_proves_pairs_at_the_binding_rewrite_proves_them_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """trueocr_det at 1024x736: the first other binding, 1537x1089, is one its Reshape fails at; rewrite
    proves its pairs at the next, 1536x1088, and keeps the DepthToSpace pair, which inspect refused
    there before ('does not lower at a second shape: ... unknown shape of /shuffle/DepthToSpace_output_0')."""
    from real_support import cached_or_skip

    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    path = cached_or_skip("trueocr_det")
    a = pipeline.analyse(path, shapes={"x": [1, 1, 1024, 736]})
    assert graph.other_bindings(a.graph)[0].symbols == {"H": 1537, "W": 1089}
    proving = pipeline.runnable_proving_binding(path, a.graph)
    assert proving is not None and proving.symbols == {"H": 1536, "W": 1088}
    assert any("'/shuffle/DepthToSpace'" in p.candidate.note for p in a.pairs)
    assert not [r.reason for r in a.rejected if r.reason.startswith("does not lower")]
