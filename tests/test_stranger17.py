"""What a seventeenth stranger hit with the models of models/README.md's "A sixteenth stranger's
models" (trueocr's detector, recogniser and reading-order model) and serving them: small builders
reproducing it, and the real models where they are cached (`python -m models real fetch NAME`;
skipped when not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

from hexfuse_onnx import graph, pipeline
from hexfuse_onnx.lowering import lowerer as lowerer_mod
from hexfuse_onnx.lowering import traced
from hexfuse_onnx.lowering.program import Program
from models import real


def _qdq_conv1d_with_shape_reader(folder: Path) -> Path:
    """A 1-D conv net quantised by quantize_static (QDQ, per channel) as a user does: a HardSwish read
    by a Shape (for a Reshape to its own dims, as torch writes it), a QDQ Conv and that Reshape. Its
    DequantizeLinear is lowered for the Shape's sake, then read by nothing (the integer groups read
    the codes): trueocr_rec's context branch, quantised so."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(17)
    weights = {
        "w0": rng.standard_normal((16, 8, 3)),
        "b0": rng.standard_normal(16),
        "wa": rng.standard_normal((16, 16, 3)),
        "ba": rng.standard_normal(16),
        "wb": rng.standard_normal((16, 16, 1)),
        "bb": rng.standard_normal(16),
    }
    inits = [numpy_helper.from_array((0.3 * v).astype(np.float32), k) for k, v in weights.items()]
    inits += [numpy_helper.from_array(np.array([i], np.int64), f"i{i}") for i in range(3)]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["h"], kernel_shape=[3], pads=[1, 1]),
        helper.make_node("HardSwish", ["h"], ["a"]),
        helper.make_node("Shape", ["a"], ["s"]),
        *[helper.make_node("Gather", ["s", f"i{i}"], [f"d{i}"], axis=0) for i in range(3)],
        helper.make_node("Concat", ["d0", "d1", "d2"], ["shape"], axis=0),
        helper.make_node("Reshape", ["a", "shape"], ["r"]),
        helper.make_node("Conv", ["r", "wa", "ba"], ["ya"], kernel_shape=[3], pads=[1, 1]),
        helper.make_node("Relu", ["ya"], ["za"]),
        helper.make_node("Conv", ["a", "wb", "bb"], ["yb"], kernel_shape=[1]),
        helper.make_node("Sigmoid", ["yb"], ["zb"]),
        helper.make_node("Add", ["za", "zb"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "qconv1d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, "L"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, "L"])],
        inits,
    )
    src, dest = folder / "f.onnx", folder / "q.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), src)
    quantize_static(
        str(src),
        str(dest),
        real.calibration_reader([{"x": rng.standard_normal((1, 8, 64)).astype(np.float32)} for _ in range(4)]),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    return dest


def _placeholder_values(prog: Program, d: traced.TracedDim) -> int:
    """A traced dim's expression evaluated at the program's own dims."""
    subs = {}
    for s in d.expr.free_symbols:
        m = traced._PLACEHOLDER.match(s.name)
        assert m is not None, s
        subs[s] = int(prog.tensors[int(m.group(1))].dims[int(m.group(2))])
    return int(d.expr.xreplace(subs))


def test_traced_scratch_dims_name_their_tensors_after_unread_ops_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trueocr_rec quantised by quantize_static: `rewrite --verify plugin` at 0 us was an internal
    # error (IndexError, exit 70). The lowering drops the unread DequantizeLinear's op and renumbers
    # the tensors, and a 1-D Conv's [N, C, 1, L] view, traced from its input by id, named the tensor
    # one place on: a rank-1 constant there, or a wrong dim
    programs: list[Program] = []
    drop = lowerer_mod.Lowerer._drop_unread

    def recorded(self: lowerer_mod.Lowerer) -> None:
        drop(self)
        programs.append(self.prog)

    monkeypatch.setattr(lowerer_mod.Lowerer, "_drop_unread", recorded)
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    out = tmp_path / "fused.onnx"
    result = pipeline.rewrite(_qdq_conv1d_with_shape_reader(tmp_path), out, verify_plugin=True)
    assert result.output == out and len(result.analysis.pairs) == 1
    dims = [(p, d) for p in programs for t in p.tensors for d in t.dims if isinstance(d, traced.TracedDim)]
    assert dims, "no traced dim: the 1-D Conv's view was not lowered"
    assert all(_placeholder_values(p, d) == int(d) for p, d in dims)


def test_rewrite_says_what_it_does_between_choosing_and_verifying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trueocr_det at 0 us: "1 pair(s) chosen" at 20 s, then nothing until "verifying" at 98 s, and
    # the free dims' check in a child process (9-18 s under load) hidden in the load's seconds
    from cli_support import run_cli

    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    proc = run_cli("rewrite", _qdq_conv1d_with_shape_reader(tmp_path), "-o", tmp_path / "fused.onnx")
    assert proc.returncode == 0, proc.stderr
    said = [line.split("] ", 1)[-1] for line in proc.stderr.splitlines()]
    steps = ["free dims: the original runs at L=128", "loaded", "chosen", "reference", "lowered", "verifying"]
    at = [next((i for i, line in enumerate(said) if step in line), -1) for step in steps]
    assert -1 not in at and at == sorted(at), proc.stderr


def test_renumbered_follows_the_new_ids_and_untraces_a_gone_tensor() -> None:
    kept = traced.TracedDim(6, traced.placeholder(5, 1) * 2)
    lost = traced.TracedDim(4, traced.placeholder(3, 0))
    out = traced.renumbered([kept, lost, 7], {5: 4, 7: 6})
    assert [int(d) for d in out] == [6, 4, 7]
    assert isinstance(out[0], traced.TracedDim) and out[0].expr == traced.placeholder(4, 1) * 2
    assert not isinstance(out[1], traced.TracedDim)


def _resize_by_computed_sizes() -> onnx.ModelProto:
    """A Conv at stride 2, then a Resize back to the input's H and W (sizes from Shape, Slice,
    Concat), as trueocr_det's three Resize: ORT's rule simplified each size with sympy."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Slice", ["sx", "two", "four"], ["hw"]),
        helper.make_node("Shape", ["c"], ["sc"]),
        helper.make_node("Slice", ["sc", "zero", "two"], ["nc"]),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["c", "", "", "sizes"], ["y"], mode="linear"),
    ]
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "w"),
        *[numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("two", 2), ("four", 4))],
    ]
    g = helper.make_graph(
        nodes,
        "resize_sizes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_resize_by_computed_sizes_is_inferred_as_ort_infers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # trueocr_det: 10 s a pass of ORT's inference, 4 s without its simplify, the same 164 shapes
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    model = _resize_by_computed_sizes()
    with monkeypatch.context() as patched:  # ours must not fall back to ORT's rule
        patched.setattr(SymbolicShapeInference, "_infer_Resize", lambda self, node: 1 / 0)
        ours = graph._run_symbolic_inference(model)
    monkeypatch.setattr(graph, "_resize_rule", lambda sym: sym.dispatcher_["Resize"])
    orts = graph._run_symbolic_inference(model)
    assert ours is not None and orts is not None
    shapes = lambda m: {v.name: str(v.type) for v in [*m.graph.value_info, *m.graph.output]}  # noqa: E731
    assert shapes(ours) == shapes(orts)
    y = next(v for v in ours.graph.output if v.name == "y").type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in y] == [1, 4, "H", "W"]


@pytest.mark.slow
def test_real_trueocr_rec_quantized_by_the_user_rewrites_at_zero_overhead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """trueocr_rec through onnxruntime's quant_pre_process and quantize_static (QDQ, u8 activations,
    per-channel s8 weights, seeded text-line ink maps): at 0 us its 4 branch pairs (the context
    branch beside the line's, the head's, since Mod lowers one holding the width mask's Mod, and since
    ArgMax lowers the CTC decode's ArgMax beside the confidence's ReduceMax) are written, checked on the
    plugin."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre, q = tmp_path / "pre.onnx", tmp_path / "q.onnx"
    quant_pre_process(str(cached_or_skip("trueocr_rec")), str(pre))
    rng = np.random.default_rng(17)
    lines = [(rng.random((1, 1, 96, 256)) < 0.2).astype(np.float32) for _ in range(8)]  # ink maps: 0 paper, 1 ink
    quantize_static(
        str(pre),
        str(q),
        real.calibration_reader([{"x": x, "widths": np.array([256], np.int64)} for x in lines]),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    monkeypatch.setenv("HEXFUSE_CALL_OVERHEAD_US", "0")
    out = tmp_path / "fused.onnx"
    result = pipeline.rewrite(q, out, verify_plugin=True)
    assert result.output == out
    fused = onnx.load(out)
    assert [n.op_type for n in fused.graph.node].count("FusedHexPair") == 4
    assert {"Mod", "ArgMax"} <= {n.op_type for f in fused.functions for n in f.node}
