"""GroupQueryAttention's present_key/value length in the pass's shape inference (graph.py): ORT's
symbolic rule gives them the past's length, ORT's CPU kernel makes them max(past, total) long; the
QuantizeLinear after present in a QDQ decoder must get the kernel's length too (a decode step's
pair was lowered for [1,2,15,16] and refused [1,2,16,16] at run time; a prefill's read as empty)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import graph

HEADS, KV, HEAD = 4, 2, 16


def qdq_gqa(seq: int, past: int) -> onnx.ModelProto:
    """qkv -> GroupQueryAttention (packed, no rotary, total_sequence_length a constant) -> present_key
    through QuantizeLinear/DequantizeLinear, as onnxruntime's QDQ quantiser writes a decoder's present."""
    total = past + seq
    node = helper.make_node(
        "GroupQueryAttention",
        ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total"],
        ["y", "present_key", "present_value"],
        domain="com.microsoft",
        num_heads=HEADS,
        kv_num_heads=KV,
    )
    q = helper.make_node("QuantizeLinear", ["present_key", "scale", "zero"], ["present_key_q"])
    dq = helper.make_node("DequantizeLinear", ["present_key_q", "scale", "zero"], ["present_key_dq"])
    past_dims = [1, KV, past, HEAD]
    g = helper.make_graph(
        [node, q, dq],
        "qdq_gqa",
        [
            helper.make_tensor_value_info("qkv", TensorProto.FLOAT, [1, seq, (HEADS + 2 * KV) * HEAD]),
            helper.make_tensor_value_info("past_key", TensorProto.FLOAT, past_dims),
            helper.make_tensor_value_info("past_value", TensorProto.FLOAT, past_dims),
            helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
        ],
        [helper.make_tensor_value_info("present_key_dq", TensorProto.FLOAT, [1, KV, None, HEAD])],
        [
            numpy_helper.from_array(np.array(total, np.int32), "total"),
            numpy_helper.from_array(np.array(0.05, np.float32), "scale"),
            numpy_helper.from_array(np.array(128, np.uint8), "zero"),
        ],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=opsets, ir_version=10)


@pytest.mark.parametrize(("seq", "past"), [(1, 15), (8, 0)], ids=["decode", "prefill"])
def test_quantized_present_has_the_kernels_length(tmp_path: Path, seq: int, past: int) -> None:
    path = tmp_path / "gqa.onnx"
    onnx.save(qdq_gqa(seq, past), path)
    rng = np.random.default_rng(0)
    feeds = {
        "qkv": rng.standard_normal((1, seq, (HEADS + 2 * KV) * HEAD)).astype(np.float32),
        "past_key": rng.standard_normal((1, KV, past, HEAD)).astype(np.float32),
        "past_value": rng.standard_normal((1, KV, past, HEAD)).astype(np.float32),
        "seqlens_k": np.array([past + seq - 1], np.int32),
    }
    ran = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["present_key_dq"], feeds)[0]
    g = graph.load(path)
    assert ran.shape == (1, KV, past + seq, HEAD)
    for name in ("present_key", "present_key_q", "present_key_dq"):
        assert g.info(name).shape == ran.shape, name
