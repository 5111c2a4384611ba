"""Dynamic quantisation (DynamicQuantizeLinear, MatMulInteger, Cast of int32 to float) lowered and run on
the real host kernel: integer results equal ONNX Runtime's bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import run_cli
from host_support import ORT_SATURATES
from onnx import TensorProto, helper
from onnx.inliner import inline_local_functions
from onnx.reference import ReferenceEvaluator
from test_lower import HostKernel, init, needs_host, pair_model, program_inputs, vi

from hexfuse_onnx import runtime
from hexfuse_onnx.lowering import LoweringError, lower_pair

RNG = np.random.default_rng(5)
U8, I8 = TensorProto.UINT8, TensorProto.INT8


def task_b(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    extra = [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return pair_model(a, nodes, [vi("x", [2, 4])], inputs + extra, [vi("ya", [2, 4])], outputs, list(inits), 13)


def run_both(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list, list]:
    """ONNX Runtime's outputs (or, where this host's ORT rounds the integer products, `definition`'s)
    and the kernel's."""
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32), **feeds}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the ops as written
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    if ORT_SATURATES and any(not np.array_equal(r, g) for r, g in zip(ref, got)):
        ref = definition(m, feeds)
    return ref, got


def definition(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ops' definition: onnx's reference implementation (exact integer products and sums) of the
    pair's function body. (Not exact_products.make_exact: it leaves model-local functions, where the
    pair's products are, and a run-time int8 operand, ConvInteger's X here.)"""
    return [np.asarray(v) for v in ReferenceEvaluator(inline_local_functions(m)).run(None, feeds)]


@needs_host
def test_where_ort_saturates_the_definition_differs_from_it_and_the_kernel_equals_the_definition() -> None:
    """The reference falls back to the definition only where ORT is not exact: on such a host, a uint8 x
    int8 MatMulInteger of large values is off in ORT and exact in the kernel."""
    m = matmul_integer_pair(U8, I8, [4, 64], 64, 8, False, False)
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32), "a": np.full((4, 64), 250, np.uint8)}
    m.graph.initializer[-1].CopyFrom(init("w", np.full((64, 8), 120, np.int8)))  # large products: pairs beyond int16
    exact = definition(m, feeds)[1]
    assert int(exact[0, 0]) == 64 * 250 * 120
    ort_value = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[1]
    assert np.array_equal(ort_value, exact) != ORT_SATURATES
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    assert np.array_equal(got[1], exact)


def dql_pair(shape: list[int]) -> onnx.ModelProto:
    node = helper.make_node("DynamicQuantizeLinear", ["z"], ["q", "s", "zp"], name="dql")
    return task_b([node], [vi("z", shape)], [vi("q", shape, U8), vi("s", [], TensorProto.FLOAT), vi("zp", [], U8)])


INPUTS = {
    "mixed": lambda n: RNG.standard_normal(n) * 3.0,
    "positive": lambda n: RNG.uniform(0.5, 7.0, n),
    "negative": lambda n: -RNG.uniform(0.01, 20.0, n),
    "zeros": lambda n: np.zeros(n),
    "tiny": lambda n: RNG.standard_normal(n) * 1e-30,
    "ties": lambda n: np.round(RNG.standard_normal(n) * 8) / 2,  # halves: ties of the rounding
    "inf": lambda n: np.where(np.arange(n) == 3, np.inf, RNG.standard_normal(n)),
}


@needs_host
@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("shape", [[1], [3, 7], [4, 97, 64]])
def test_dynamic_quantize_linear_equals_ort(kind: str, shape: list[int]) -> None:
    z = INPUTS[kind](int(np.prod(shape))).reshape(shape).astype(np.float32)
    ref, got = run_both(dql_pair(shape), {"z": z})
    for r, g in zip(ref[1:], got[1:]):
        assert r.dtype == g.dtype and r.shape == g.shape and r.tobytes() == g.tobytes()


def matmul_integer_pair(
    ta: int, tb: int, a_shape: list[int], k: int, n: int, zb_per_column: bool, zero_points: bool, za_dims=()
) -> onnx.ModelProto:
    info = np.iinfo(helper.tensor_dtype_to_np_dtype(tb))
    w = RNG.integers(info.min, info.max + 1, (k, n)).astype(helper.tensor_dtype_to_np_dtype(tb))
    zb = RNG.integers(info.min, info.max + 1, (n,) if zb_per_column else ()).astype(w.dtype)
    inits = [init("w", w)] + ([init("zb", zb)] if zero_points else [])
    ins = ["a", "w", "za", "zb"] if zero_points else ["a", "w"]
    node = helper.make_node("MatMulInteger", ins, ["acc"], name="mmi")
    inputs = [vi("a", a_shape, ta)] + ([vi("za", list(za_dims), ta)] if zero_points else [])
    return task_b([node], inputs, [vi("acc", a_shape[:-1] + [n], TensorProto.INT32)], inits)


@needs_host
@pytest.mark.parametrize("ta,tb", [(U8, U8), (U8, I8), (I8, U8), (I8, I8)])
@pytest.mark.parametrize(
    "a_shape,n,per_column,zero_points",
    [([5, 33], 17, False, True), ([2, 9, 64], 130, True, True), ([7, 40], 3, True, True), ([3, 8], 20, False, False)],
)
def test_matmul_integer_equals_ort(ta: int, tb: int, a_shape: list[int], n: int, per_column: bool, zero_points: bool):
    try:
        m = matmul_integer_pair(ta, tb, a_shape, a_shape[-1], n, per_column, zero_points)
        info = np.iinfo(helper.tensor_dtype_to_np_dtype(ta))
        feeds = {"a": RNG.integers(info.min, info.max + 1, a_shape).astype(info.dtype)}
        if zero_points:
            feeds["za"] = np.array(RNG.integers(info.min, info.max + 1), info.dtype)
        ref, got = run_both(m, feeds)
    except ort.capi.onnxruntime_pybind11_state.NotImplemented:
        pytest.skip("ONNX Runtime has no MatMulInteger kernel for these types")
    assert ref[1].dtype == got[1].dtype == np.int32 and np.array_equal(ref[1], got[1])


@needs_host
def test_quantize_dynamic_chain_equals_ort() -> None:
    """DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by the scales, as quantize_dynamic writes a
    MatMul: the float result equals ONNX Runtime's bit for bit (every op is exact or one f32 rounding)."""
    w = RNG.integers(-128, 128, (64, 48)).astype(np.int8)
    inits = [init("w", w), init("zw", np.array(0, np.int8)), init("sw", np.array(0.0123, np.float32))]
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["z"], ["q", "s", "zp"], name="dql"),
        helper.make_node("MatMulInteger", ["q", "w", "zp", "zw"], ["acc"], name="mmi"),
        helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["s", "sw"], ["scale"], name="scales"),
        helper.make_node("Mul", ["accf", "scale"], ["yb"], name="out"),
    ]
    m = task_b(nodes, [vi("z", [3, 10, 64])], [vi("yb", [3, 10, 48])], inits)
    ref, got = run_both(m, {"z": RNG.standard_normal((3, 10, 64)).astype(np.float32)})
    assert ref[1].tobytes() == got[1].tobytes()


def test_matmul_integer_with_a_per_row_zero_point_is_refused() -> None:
    m = matmul_integer_pair(U8, U8, [4, 8], 8, 5, False, True, za_dims=[4])  # ONNX allows it; ORT and the kernel not
    with pytest.raises(LoweringError, match="zero point 'za'"):
        lower_pair(m, m.graph.node[0])


@pytest.mark.skipif(not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="the plugin is not built")
def test_two_streams_of_a_dynamically_quantised_mlp_pair_their_matmul_integers(tmp_path: Path) -> None:
    """colocate counts quantize_dynamic's chain (DynamicQuantizeLinear, MatMulInteger, Cast) as kernel work:
    two requests of a 2-layer MLP pair it, and the plugin's outputs agree with stock ONNX Runtime."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    w1, w2 = RNG.standard_normal((64, 96)).astype(np.float32), RNG.standard_normal((96, 32)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(nodes, "mlp", [vi("x", [8, 64])], [vi("y", [8, 32])], [init("w1", w1), init("w2", w2)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "mlp.onnx")
    quantize_dynamic(tmp_path / "mlp.onnx", tmp_path / "mlp_int8.onnx", weight_type=QuantType.QInt8)
    report = tmp_path / "r.json"
    args = ("colocate", tmp_path / "mlp_int8.onnx", "--requests", "2", "-o", tmp_path / "x2.onnx", "--json", report)
    proc = run_cli(*args, "--target", "host", "--verify", "plugin", "-q")
    assert proc.returncode == 0, proc.stderr
    fused = onnx.load(tmp_path / "x2.onnx")
    body_ops = {n.op_type for f in fused.functions for n in f.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= body_ops, body_ops


def conv_integer_pair(tx: int, tw: int, x_shape: list[int], w_shape: list[int], per_channel: bool, **conv) -> tuple:
    """A ConvInteger with run-time X and zero point of X, constant W and zero point of W; its ORT feeds."""
    ix, iw = (np.iinfo(helper.tensor_dtype_to_np_dtype(d)) for d in (tx, tw))
    w = RNG.integers(iw.min, iw.max + 1, w_shape).astype(iw.dtype)
    zw = RNG.integers(iw.min, iw.max + 1, (w_shape[0],) if per_channel else ()).astype(iw.dtype)
    node = helper.make_node("ConvInteger", ["xq", "w", "zx", "zw"], ["acc"], name="convi", **conv)
    probe = helper.make_graph(
        [node], "p", [vi("xq", x_shape, tx), vi("zx", [], tx)], [vi("acc", None, TensorProto.INT32)],
        [init("w", w), init("zw", zw)],
    )  # fmt: skip
    y_shape = [d.dim_value for d in onnx.shape_inference.infer_shapes(helper.make_model(probe)).graph.output[0]
               .type.tensor_type.shape.dim]  # fmt: skip
    inputs = [vi("xq", x_shape, tx), vi("zx", [], tx)]
    m = task_b([node], inputs, [vi("acc", y_shape, TensorProto.INT32)], [init("w", w), init("zw", zw)])
    feeds = {"xq": RNG.integers(ix.min, ix.max + 1, x_shape).astype(ix.dtype),
             "zx": np.array(RNG.integers(ix.min, ix.max + 1), ix.dtype)}  # fmt: skip
    return m, feeds


@needs_host
@pytest.mark.parametrize("tx,tw", [(U8, U8), (U8, I8), (I8, U8), (I8, I8)])
@pytest.mark.parametrize(
    "x_shape,w_shape,conv",
    [
        ([1, 3, 9, 11], [8, 3, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ([2, 16, 6, 7], [24, 16, 1, 1], {}),
        ([1, 8, 7, 5], [6, 4, 3, 2], {"group": 2, "dilations": [2, 1], "pads": [0, 1, 2, 0]}),
        ([3, 5, 4, 4], [5, 1, 3, 3], {"group": 5, "pads": [1, 1, 1, 1]}),
    ],
)
def test_conv_integer_equals_ort(tx: int, tw: int, x_shape: list[int], w_shape: list[int], conv) -> None:
    """Per-tensor zero points: ORT's ConvInteger takes no other (the C tests cover W's per channel)."""
    m, feeds = conv_integer_pair(tx, tw, x_shape, w_shape, False, **conv)
    ref, got = run_both(m, feeds)
    assert ref[1].dtype == got[1].dtype == np.int32 and np.array_equal(ref[1], got[1])


def test_conv_integer_of_a_3d_conv_is_refused() -> None:
    m, _ = conv_integer_pair(U8, U8, [1, 2, 4, 4, 4], [3, 2, 1, 1, 1], False)
    with pytest.raises(LoweringError, match="only a 2-D conv"):
        lower_pair(m, m.graph.node[0])


@needs_host
def test_quantize_dynamic_conv_chain_equals_ort(tmp_path: Path) -> None:
    """quantize_dynamic's Conv (DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul by the scales): the
    float result equals ONNX Runtime's bit for bit."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    w = RNG.standard_normal((12, 6, 3, 3)).astype(np.float32)
    conv = helper.make_node("Conv", ["z", "w"], ["yb"], name="conv", pads=[1, 1, 1, 1], strides=[2, 1])
    graph = helper.make_graph([conv], "c", [vi("z", [1, 6, 10, 9])], [vi("yb", [1, 12, 5, 9])], [init("w", w)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "c.onnx")
    quantize_dynamic(tmp_path / "c.onnx", tmp_path / "c_int8.onnx", weight_type=QuantType.QUInt8)
    q = onnx.load(tmp_path / "c_int8.onnx")
    assert "ConvInteger" in {n.op_type for n in q.graph.node}
    m = task_b(list(q.graph.node), [vi("z", [1, 6, 10, 9])], [vi("yb", [1, 12, 5, 9])], list(q.graph.initializer))
    ref, got = run_both(m, {"z": RNG.standard_normal((1, 6, 10, 9)).astype(np.float32)})
    assert ref[1].tobytes() == got[1].tobytes()


@needs_host
def test_floor_equals_ort() -> None:
    """Floor is exact: the kernel gives ORT's bits, also for NaN, +-inf, +-0, halves and |x| >= 2^23."""
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, -0.5, 0.5, -1.0, 8388607.5, -8388607.5, 3e9, -3e9, 1e-40, -1e-40]
    z = np.concatenate([special, RNG.uniform(-100, 100, 400 - len(special))]).astype(np.float32).reshape(4, 100)
    m = task_b([helper.make_node("Floor", ["z"], ["yb"], name="floor")], [vi("z", [4, 100])], [vi("yb", [4, 100])])
    ref, got = run_both(m, {"z": z})
    assert ref[1].tobytes() == got[1].tobytes()
