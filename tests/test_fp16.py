"""float16 networks (uvdoc, hama, slovorez_morph: float16 weights and activations) pair: the kernel
computes their tensors in float32 between a pair's boundaries, a float16 input widened by CAST where it
is first read and each float16 output rounded once by CAST (lowering/lowerer.py). Run on the real host
kernel against ONNX Runtime's float16 run and a float32 run of the same graph; stock ORT runs the
rewritten model's float16 body bit for bit as the original."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import HostKernel, needs_host, pair_model, program_inputs, vi
from test_lower_dynamic_quant import run_both

from hexfuse_onnx import pipeline, runtime, verify
from hexfuse_onnx.kinds.colocate import unlowerable
from hexfuse_onnx.lowering import attach_programs, lower_pair
from hexfuse_onnx.lowering.abi import Dtype, Layout, Opcode
from hexfuse_onnx.lowering.program import layout_of

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT
RNG = np.random.default_rng(16)


def two_branch(dtype: int) -> onnx.ModelProto:
    """x -> Conv 3x3 -> Relu (matrix) beside x * Sigmoid(x) through a Cast to float32 and back (vector),
    added: uvdoc's bridges and hama's SiLU in one fork, in `dtype` (the weights are float16 values)."""
    np_dtype, rng = helper.tensor_dtype_to_np_dtype(dtype), np.random.default_rng(3)  # the same weights each time
    w = (0.1 * rng.standard_normal((32, 32, 3, 3))).astype(np.float16).astype(np_dtype)
    bias = (0.1 * rng.standard_normal(32)).astype(np.float16).astype(np_dtype)
    nodes = [
        helper.make_node("Conv", ["x", "w", "bias"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["a"], name="relu"),
        helper.make_node("Cast", ["x"], ["x32"], name="widen", to=F32),
        helper.make_node("Sigmoid", ["x32"], ["s32"], name="sigmoid"),
        helper.make_node("Cast", ["s32"], ["s"], name="narrow", to=dtype),
        helper.make_node("Mul", ["x", "s"], ["b"], name="silu"),
        helper.make_node("Add", ["a", "b"], ["y"], name="join"),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")]
    g = helper.make_graph(nodes, "fork", [vi("x", [1, 32, 48, 48], dtype)], [vi("y", [1, 32, 48, 48], dtype)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def run(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray], so: ort.SessionOptions | None = None) -> Any:
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@needs_host
def test_a_float16_fork_pairs_and_runs_on_the_plugin_within_float16_steps(tmp_path: Path) -> None:
    path = tmp_path / "fork16.onnx"
    onnx.save(two_branch(F16), path)
    result = pipeline.rewrite(path, tmp_path / "fused.onnx", verify_plugin=True)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    fused = onnx.load(str(result.output))
    assert sorted(n.op_type for n in fused.graph.node) == ["Add", "FusedHexPair"]  # the join stays outside
    x = RNG.uniform(-4, 4, (1, 32, 48, 48)).astype(np.float16)
    original = run(path, {"x": x})
    stock = run(result.output, {"x": x})
    assert stock.dtype == np.float16 and stock.tobytes() == original.tobytes()  # the float16 body, bit for bit
    plugin = run(result.output, {"x": x}, runtime.session_options("host"))
    assert plugin.dtype == np.float16
    # ORT's float16 run rounds every op; the pair rounds at the Cast and its output: both are within
    # float16 steps of the float32 run of the same graph, and of each other
    exact = run(two_branch(F32), {"x": x.astype(np.float32)})
    assert verify.relative_error(original, plugin) <= pipeline.FLOAT16_RTOL
    assert verify.relative_error(exact, plugin.astype(np.float32)) <= 2.0**-10
    assert verify.relative_error(exact, original.astype(np.float32)) <= pipeline.FLOAT16_RTOL


def _ops(program: bytes) -> list[tuple[Opcode, list[Dtype], Dtype]]:
    """Each op's opcode, its inputs' dtypes and its output's, read back from the encoded program."""
    lay = layout_of(program)
    dtypes = [program[lay.tensors_off + k * Layout.TENSOR_RECORD_BYTES] for k in range(lay.n_tensors)]
    out = []
    for k in range(lay.n_ops):
        at = lay.ops_off + k * Layout.OP_RECORD_BYTES
        opcode, _, _, n_in, _, _, *rest = struct.unpack_from("<HBBBBH8I2I", program, at)
        out.append((Opcode(opcode), [Dtype(dtypes[i]) for i in rest[:n_in]], Dtype(dtypes[rest[8]])))
    return out


def test_a_float16_input_is_widened_once_and_a_float16_output_rounded_once() -> None:
    """x (float16) read by two ops: one CAST to f32; y written in f32 and cast to f16 at the end."""
    nodes_b = [helper.make_node("Relu", ["h"], ["r"], name="relu"), helper.make_node("Add", ["r", "h"], ["y"])]
    m = pair_model(
        [helper.make_node("Sigmoid", ["x"], ["ya"])], nodes_b, [vi("x", [4])], [vi("h", [2, 8], F16)],
        [vi("ya", [4])], [vi("y", [2, 8], F16)], [],
    )  # fmt: skip
    ops = _ops(lower_pair(m, m.graph.node[0]))
    casts = [(ins, out) for op, ins, out in ops if op == Opcode.CAST]
    assert casts == [([Dtype.F16], Dtype.F32), ([Dtype.F32], Dtype.F16)]
    assert [op for op, _, _ in ops if op != Opcode.CAST] == [Opcode.SIGMOID, Opcode.RELU, Opcode.ADD]


@needs_host
@pytest.mark.parametrize("source", [F32, TensorProto.INT32])
def test_a_cast_to_float16_rounds_as_ort(source: int) -> None:
    """Cast to float16 rounds to nearest, ties to even (the kernel's CAST, there and back): every
    float32 value at a rounding edge, subnormal, beyond 65504 and NaN, as ONNX Runtime's Cast."""
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].astype(np.float32)
    mids = (finite[:-1] + np.diff(finite) / 2).astype(np.float32)  # exact ties (and their neighbours below)
    edges = np.concatenate([finite, mids, np.nextafter(mids, np.float32(np.inf)), [65519.0, 65520.0, -7e4, np.nan]])
    values = edges.astype(np.float32) if source == F32 else RNG.integers(-70000, 70000, 20000).astype(np.int32)
    n = values.size
    m = pair_model(
        [helper.make_node("Relu", ["x"], ["ya"])], [helper.make_node("Cast", ["z"], ["yb"], name="cast", to=F16)],
        [vi("x", [4])], [vi("z", [n], source)], [vi("ya", [4])], [vi("yb", [n], F16)], [],
    )  # fmt: skip
    feeds = {"x": np.ones(4, np.float32), "z": values}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[1]
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))[1]
    assert got.dtype == np.float16
    nan = np.isnan(ref)
    assert np.array_equal(nan, np.isnan(got)) and got[~nan].tobytes() == ref[~nan].tobytes()
    with np.errstate(over="ignore"):  # beyond 65504: inf, as the Cast gives
        assert np.array_equal(got[~nan], values[~nan].astype(np.float16))  # numpy's rounding too


@pytest.mark.parametrize(
    ("elem", "why"), [(F16, ""), (TensorProto.BFLOAT16, " (reads bfloat16, not float32 or float16)")]
)
def test_colocate_holds_float16_nodes_and_names_bfloat16(elem: int, why: str, tmp_path: Path) -> None:
    """colocate's report said a float16 Cast "reads float16, not float32": the kernel now computes it."""
    from hexfuse_onnx import graph
    from hexfuse_onnx.profile import profile_graph

    nodes = [helper.make_node("Cast", ["h"], ["f"], to=F32), helper.make_node("Relu", ["f"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("h", [4, 64], elem)], [vi("y", [4, 64])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    mg = graph.load(tmp_path / "m.onnx")
    assert unlowerable(mg, profile_graph(mg), 0) == why


@needs_host
def test_a_float16_embedding_is_gathered_as_stored_and_equals_ort() -> None:
    """hama's character embedding: the float16 table is gathered by run-time ids as it is stored, only
    the rows widened (the whole table in float32 scratch every call would be 4x its rows); exact."""
    table = RNG.standard_normal((1000, 64)).astype(np.float16)
    m = pair_model(
        [helper.make_node("Relu", ["x"], ["ya"])], [helper.make_node("Gather", ["emb", "ids"], ["yb"], name="embed")],
        [vi("x", [2, 4])], [vi("emb", [1000, 64], F16), vi("ids", [2, 5], TensorProto.INT64)],
        [vi("ya", [2, 4])], [vi("yb", [2, 5, 64], F16)], [numpy_helper.from_array(table, "emb")],
    )  # fmt: skip
    program = lower_pair(m, m.graph.node[0])
    gathers = [(ins, out) for op, ins, out in _ops(program) if op == Opcode.GATHER_ROWS]
    assert gathers == [([Dtype.F16, Dtype.I64], Dtype.F16)]
    ids = RNG.integers(-1000, 1000, (2, 5))
    ref, got = run_both(m, {"ids": ids})
    assert got[1].dtype == np.float16 and got[1].tobytes() == ref[1].tobytes()


def _gru(k: int, x: str, y: str) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    rng = np.random.default_rng(k)
    ws = [(0.3 * rng.standard_normal(s)).astype(np.float16) for s in ((1, 24, 8), (1, 24, 8), (1, 48))]
    names = [f"w{k}", f"r{k}", f"b{k}"]
    node = helper.make_node("GRU", [x, *names], [y], hidden_size=8, linear_before_reset=1)
    return node, [numpy_helper.from_array(w, n) for w, n in zip(ws, names)]


def pair_between_grus() -> onnx.ModelProto:
    """A pair whose task A reads a float16 GRU's output and whose outputs each feed a float16 GRU: ONNX
    Runtime has no float16 GRU, casts around it, and drops the Cast next to an op taking any type."""
    m = pair_model(
        [helper.make_node("Squeeze", ["y1", "axes"], ["s"]), helper.make_node("Relu", ["s"], ["a"])],
        [helper.make_node("Sigmoid", ["x2"], ["b"])],
        [vi("y1", [6, 1, 1, 8], F16), vi("axes", [1], TensorProto.INT64)], [vi("x2", [6, 1, 8], F16)],
        [vi("a", [6, 1, 8], F16)], [vi("b", [6, 1, 8], F16)],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )  # fmt: skip
    g = m.graph
    grus = [_gru(1, "x", "y1"), _gru(2, "a", "y2"), _gru(3, "b", "y3")]
    pair = g.node.pop()
    g.node.extend([grus[0][0], pair, grus[1][0], grus[2][0]])
    g.initializer.extend(w for _, ws in grus for w in ws)
    del g.input[:], g.output[:]
    g.input.extend([vi("x", [6, 1, 8], F16), vi("x2", [6, 1, 8], F16)])
    g.output.extend([vi("y2", [6, 1, 1, 8], F16), vi("y3", [6, 1, 1, 8], F16)])
    g.value_info.extend([vi("y1", [6, 1, 1, 8], F16), vi("a", [6, 1, 8], F16), vi("b", [6, 1, 8], F16)])
    return attach_programs(m)[0]


@needs_host
@pytest.mark.parametrize("level", ["ORT_DISABLE_ALL", "ORT_ENABLE_ALL"])
def test_a_pair_next_to_ops_ort_runs_in_float32_rounds_and_widens_there(level: str) -> None:
    """The pair got the GRU's float32 output where its program reads float16 (refused: 'input 0 has
    dtype float32'), and wrote float16 where ORT read float32 (garbage: 0.87 relative on
    hama_g2p_encoder at ORT's defaults). The plugin rounds the input and widens the output there."""
    m = pair_between_grus()
    feeds = {k: RNG.standard_normal((6, 1, 8)).astype(np.float16) for k in ("x", "x2")}
    so = runtime.session_options("host")
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    stock = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    plugin = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for want, got in zip(stock, plugin):
        assert got.dtype == np.float16 and verify.relative_error(want, got) <= pipeline.FLOAT16_RTOL
