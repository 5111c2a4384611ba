"""QDQ Conv / ConvTranspose / Gemm / MatMul groups against ONNX Runtime's run of the same QDQ model:
a float weight initializer (ORT quantizes a Conv's, ConvTranspose's or Gemm's to int8, `qbias`), and
the type combinations ORT fuses into QLinearConv / QLinearMatMul / QGemm or leaves as DQ -> float op
-> Q (`qmatmul.ort_fuses`). Each group: the integer kernel where ORT fuses, the float path where it
does not (i8 Conv/MatMul apart: the kernel, as ORT's ARM builds fuse them), within one step of ORT
on every element over seeds, on values at ties of every rounding (dyadic scales) and off them."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import init, pair_model, program_inputs, vi
from test_qmatmul import _opcodes

from hexfuse_onnx import graph, pipeline, profile
from hexfuse_onnx.lowering import lower_pair, program_op_nodes
from hexfuse_onnx.lowering.abi import Engine, Opcode
from hexfuse_onnx.lowering.lowerer import KERNEL_ENGINE
from hexfuse_onnx.lowering.program import layout_of
from hexfuse_onnx.lowering.qbias import quantized_weight
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR, HostKernel
from models import quantized

U8, I8, U16, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.FLOAT
NP = {U8: np.uint8, I8: np.int8, U16: np.uint16}
ZERO = {U8: 128, I8: 3, U16: 30000}  # X's zero point
# op -> X shape, W shape, Y shape, attributes
SHAPES = {
    "Conv": ([1, 4, 9, 7], [6, 4, 3, 3], [1, 6, 9, 7], {"pads": [1, 1, 1, 1]}),
    "ConvTranspose": ([1, 4, 5, 5], [4, 6, 2, 2], [1, 6, 10, 10], {"strides": [2, 2]}),
    "Gemm": ([5, 24], [24, 8], [5, 8], {}),
    "GemmT": ([5, 24], [8, 24], [5, 8], {"transB": 1}),
    "MatMul": ([2, 5, 24], [24, 8], [2, 5, 8], {}),
}
Group = tuple[list[onnx.NodeProto], list[onnx.ValueInfoProto], list[onnx.ValueInfoProto], list[onnx.TensorProto]]


def _weights(rng: np.random.Generator, shape: list[int], ties: bool) -> np.ndarray:
    """Float weights. At ties: multiples of 2^-8 within [-1, 127/128] (both ends present), so that
    ORT's int8 scale is 2^-7, its zero point 0, and the odd multiples lie at ties of W / s_w."""
    if not ties:
        return rng.normal(0, 0.1, shape).astype(np.float32)
    w = rng.integers(-32, 33, shape).astype(np.float32) / np.float32(256)
    w.reshape(-1)[:2] = [-1.0, 127 / 128]
    return w


def _group(p: str, op: str, xt: int, wt: int, yt: int, *, ties: bool, seed: int, int32_bias: bool = False) -> Group:
    """x (xt) -> DQ, W (wt: u8/i8 behind a DequantizeLinear, or a float initializer) [, a float bias, or
    an int32 one behind a DequantizeLinear] -> op -> Q (yt). At ties: s_x s_w / s_y = 2^-6 (and 2^-7
    the weight scale of an integer W), a float bias at k + 0.5 steps of s_x s_w; else arbitrary scales."""
    rng = np.random.default_rng(seed)
    x_shape, w_shape, y_shape, attrs = SHAPES[op]
    kind = "Gemm" if op == "GemmT" else op
    sx = np.float32(2.0**-5 if ties else 0.0173)
    sw = np.float32(2.0**-7 if ties else 0.0023)
    sy = np.float32(sx * sw * 64 if ties else 0.0035)
    zx, zy = ZERO[xt], ZERO[xt] - 8
    inits = [init(f"{p}sx", sx), init(f"{p}zx", np.array(zx, NP[xt])), init(f"{p}sy", sy)]
    inits.append(init(f"{p}zy", np.array(zy if yt == xt else ZERO[yt] - 8, NP[yt])))
    nodes = [helper.make_node("DequantizeLinear", [f"{p}x", f"{p}sx", f"{p}zx"], [f"{p}xf"])]
    if wt == F:
        inits.append(init(f"{p}wf", _weights(rng, w_shape, ties)))
    else:
        zw = 0 if wt == I8 else 128
        inits += [init(f"{p}w", (zw + rng.integers(-16, 17, w_shape)).astype(NP[wt])), init(f"{p}sw", sw)]
        inits.append(init(f"{p}zw", np.array(zw, NP[wt])))
        nodes.append(helper.make_node("DequantizeLinear", [f"{p}w", f"{p}sw", f"{p}zw"], [f"{p}wf"]))
    inputs = [f"{p}xf", f"{p}wf"]
    if kind != "MatMul":
        cols = y_shape[1] if kind != "Gemm" else y_shape[-1]
        acc = np.float32(sx * sw)
        if int32_bias:
            inits += [init(f"{p}bq", rng.integers(-200, 200, cols).astype(np.int32)), init(f"{p}bs", acc)]
            nodes.append(helper.make_node("DequantizeLinear", [f"{p}bq", f"{p}bs"], [f"{p}b"]))
        else:
            inits.append(init(f"{p}b", ((rng.integers(-200, 200, cols) + 0.5) * acc).astype(np.float32)))
        inputs.append(f"{p}b")
    nodes.append(helper.make_node(kind, inputs, [f"{p}c"], **attrs))
    nodes.append(helper.make_node("QuantizeLinear", [f"{p}c", f"{p}sy", f"{p}zy"], [f"{p}y"]))
    ins = [vi(f"{p}x", x_shape, xt)] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return nodes, ins, [vi(f"{p}y", y_shape, yt)], inits


def _models(a: Group, b: Group) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The pair over both groups, and the plain QDQ model ORT runs."""
    pair = pair_model(a[0], b[0], a[1], b[1], a[2], b[2], a[3] + b[3], opset=21)
    graph = helper.make_graph(a[0] + b[0], "qdq", [a[1][0], b[1][0]], a[2] + b[2], initializer=a[3] + b[3])
    return pair, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _feeds(groups: tuple[Group, Group], seed: int) -> dict[str, np.ndarray]:
    """x within 48 steps of its zero point (few outputs saturate)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for g in groups:
        x = g[1][0]
        dt = NP[x.type.tensor_type.elem_type]
        z = ZERO[x.type.tensor_type.elem_type]
        feeds[x.name] = (z + rng.integers(-48, 49, [d.dim_value for d in x.type.tensor_type.shape.dim])).astype(dt)
    return feeds


def _check(a: Group, b: Group, seed: int) -> list[Opcode]:
    """The pair's outputs (host kernel) within one step of ORT's on every element: its opcodes."""
    pair, plain = _models(a, b)
    program = lower_pair(pair, pair.graph.node[0])
    feeds = _feeds((a, b), seed)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(program, program_inputs(pair, pair.graph.node[0], feeds))
    for r, g in zip(ref, got):
        diff = np.abs(r.astype(np.int32) - g.astype(np.int32))
        assert r.dtype == g.dtype and r.shape == g.shape and diff.max() <= 1, (diff.max(), (diff > 1).mean())
        assert (diff == 0).mean() >= 0.98, (diff == 0).mean()
        info = np.iinfo(r.dtype)
        assert np.isin(r, [info.min, info.max]).mean() < 0.2  # the values are not mostly saturated
    return _opcodes(program)


needs_lib = pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
INTEGER = {Opcode.QCONV2D, Opcode.QMATMUL}


@needs_lib
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "a_op, b_op, xt, fused",
    [
        ("Conv", "Gemm", U8, 2),  # ORT: QLinearConv, QGemm on its int8 weights
        ("GemmT", "Conv", I8, 1),  # QGemm (i8 x i8); the i8 Conv: a float Conv on x86, the kernel here
        ("ConvTranspose", "MatMul", U8, 0),  # never fused; a MatMul's float weight is not quantized
        ("Conv", "GemmT", U16, 0),  # 16-bit: float ops on its int8 weights (a Gemm of transB 0: MatMulNBits)
    ],
)
def test_float_weights_are_quantized_where_onnxruntime_quantizes_them(
    a_op: str, b_op: str, xt: int, fused: int, ties: bool, seed: int
) -> None:
    """Float weight initializers, ties of W / s_w, of the bias and of the output among them: within one
    step of ORT everywhere (with the weights as written all 24 fail: 2-3 steps off, or 62-89% equal)."""
    a = _group("a_", a_op, xt, F, xt, ties=ties, seed=seed)
    b = _group("b_", b_op, xt, F, xt, ties=ties, seed=seed + 10)
    ops = _check(a, b, seed)
    assert sum(o in INTEGER for o in ops) == (2 if xt == I8 else fused), ops


@needs_lib
@pytest.mark.parametrize("seed", range(3))
def test_a_float_weight_beside_a_dequantized_bias_stays_as_written(seed: int) -> None:
    """ORT's transformer leaves a node whose bias is not an initializer (here an int32 DequantizeLinear's
    output) as written, float weight included: a float Conv and Gemm, and so the float path here (with
    the weight quantized: 2 steps off, or 69% equal)."""
    a = _group("a_", "Conv", U8, F, U8, ties=False, seed=seed, int32_bias=True)
    b = _group("b_", "Gemm", U8, F, U8, ties=False, seed=seed + 10, int32_bias=True)
    assert not set(_check(a, b, seed)) & INTEGER


@needs_lib
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "op, xt, wt, yt, integer",
    [
        ("Conv", U8, I8, U8, True),
        ("Conv", U8, U8, I8, False),  # Y not of X's type
        ("Conv", I8, U8, I8, False),  # an i8 X wants an i8 W
        ("Conv", I8, I8, I8, True),  # a float Conv in ORT on x86 (QDQIsInt8Allowed), QLinearConv on ARM
        ("MatMul", I8, I8, I8, True),  # the same
        ("MatMul", U8, U8, U8, True),
        ("MatMul", I8, I8, U8, False),
        ("MatMul", I8, U8, I8, False),
        ("Gemm", I8, I8, I8, True),
        ("Gemm", U8, I8, I8, False),
        ("GemmT", I8, U8, I8, False),
    ],
)
def test_integer_kernel_only_for_the_types_onnxruntime_fuses(
    op: str, xt: int, wt: int, yt: int, integer: bool, seed: int
) -> None:
    """ORT's selectors' type conditions: the kernel where they hold, the float path where not, within
    one step of ORT at ties (dyadic scales: the float path's sums exact) and off them."""
    a = _group("a_", op, xt, wt, yt, ties=True, seed=seed)
    b = _group("b_", op, xt, wt, yt, ties=False, seed=seed + 10)
    ops = _check(a, b, seed)
    assert sum(o in INTEGER for o in ops) == (2 if integer else 0), ops


@pytest.mark.parametrize("case", ["normal", "ties", "positive", "zero"])
def test_the_int8_weight_is_onnxruntimes_bit_for_bit(case: str, tmp_path: Path) -> None:
    """ORT's quantized weight, scale and zero point (its optimized model at the basic level) against
    `quantized_weight`: normal weights, every W / s_w at a tie (a scale not a power of two), weights
    all above 0 (the range then starts at 0), all 0 (scale 1)."""
    rng = np.random.default_rng(7)
    w = rng.normal(0, 0.05, [16, 8, 3, 3]).astype(np.float32)
    if case == "ties":
        lo, hi = np.float32(-0.3), np.float32(0.5)
        w = (rng.integers(-60, 100, w.shape) + 0.5).astype(np.float32) * np.float32(np.float32(hi - lo) / 255)
        w.reshape(-1)[:2] = [lo, hi]
    elif case != "normal":
        w = np.abs(w) + np.float32(0.01) if case == "positive" else np.zeros_like(w)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
        helper.make_node("Conv", ["xf", "w"], ["c"]),
        helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["y"]),
    ]
    inits = [init("w", w), init("sx", np.float32(0.02)), init("sy", np.float32(0.05))]
    inits += [init("zx", np.array(128, np.uint8)), init("zy", np.array(128, np.uint8))]
    graph = helper.make_graph(nodes, "g", [vi("x", [1, 8, 5, 5], U8)], [vi("y", [1, 16, 3, 3], U8)], initializer=inits)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    made = {t.name: numpy_helper.to_array(t) for t in onnx.load(tmp_path / "opt.onnx").graph.initializer}
    q = next(v for v in made.values() if v.dtype == np.int8 and v.shape == w.shape)
    scale, zero = (next(v for k, v in made.items() if k.endswith(s)) for s in ("_weight_scale", "_weight_zp"))
    mine = quantized_weight(w)
    assert mine.scale == scale and mine.zero == int(zero) and np.array_equal(mine.q, q)


def _activation_only(folder: Path) -> onnx.ModelProto:
    """The zoo's QDQ model in `folder` with each weight and bias DequantizeLinear replaced by the float
    initializer it quantized (float.onnx beside it: onnxruntime's quantizer names it X_quantized)."""
    model, floats = onnx.load(folder / "model.onnx"), onnx.load(folder / quantized.PREPARED)
    values = {t.name: t for t in floats.graph.initializer}
    constants = {t.name for t in model.graph.initializer}
    kept = []
    for n in model.graph.node:
        source = n.input[0].removesuffix("_quantized") if n.op_type == "DequantizeLinear" else ""
        if n.input[0] in constants and source in values:
            model.graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(values[source]), n.output[0]))
        else:
            kept.append(n)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    used = {i for n in kept for i in n.input}
    inits = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    return model


@needs_lib
def test_an_activation_only_qdq_model_pairs_within_one_step_of_onnxruntime(tmp_path: Path) -> None:
    """centerface_qdq_u8u8 (the zoo's, when made) with float weights and biases, as a quantizer that
    leaves them float writes it: ORT quantizes them again (QLinearConv on its int8; its ConvTransposes
    float on DQ(Q(W))). `rewrite --verify plugin --rtol 0` keeps pairs of QCONV2D (15 chosen, outputs 0
    steps from the original; before: all 27 candidates refused, 2-3 steps from ORT)."""
    path = quantized.cached_path("centerface_qdq_u8u8")
    if path is None:
        pytest.skip("python -m models quantized build centerface_qdq_u8u8")
    onnx.save(_activation_only(path.parent), tmp_path / "m.onnx")
    result = pipeline.rewrite(tmp_path / "m.onnx", tmp_path / "f.onnx", rtol=0.0, verify_plugin=True)
    assert result.output is not None
    fused = onnx.load(result.output)
    ops = [o for n in fused.graph.node if n.op_type == "FusedHexPair" for o in _opcodes(lower_pair(fused, n))]
    assert Opcode.QCONV2D in ops


@pytest.mark.parametrize(
    "op, xt, wt, yt",
    [
        ("Conv", U8, U8, U8),  # ORT: QLinearConv
        ("Conv", U8, F, U8),  # QLinearConv on ORT's int8 of the float weight
        ("Conv", U16, U8, U16),  # 16-bit: DQ -> Conv -> Q
        ("ConvTranspose", U8, U8, U8),  # never fused
        ("MatMul", U8, F, U8),  # a MatMul's float weight stays float: DQ -> MatMul -> Q
        ("Conv", U8, U8, I8),  # Y not of X's type: ORT leaves the group unfused
    ],
)
def test_the_profile_costs_a_group_as_the_lowering_runs_it(op: str, xt: int, wt: int, yt: int) -> None:
    """The profile of a QDQ group's op has the engine and integer width of the program op the
    lowering emits for it (QCONV2D/QMATMUL: 8-bit on the vector engine; else the f32 op on the
    matrix engine), and reads its inputs, the weight among them, at the integer widths of the
    integer kernel (a float weight: ORT's int8 of it), else at 4 bytes. Before branch qcost the
    profile said 8-bit vector work for the ConvTranspose, float-weight MatMul and u8 -> i8 groups,
    16-bit for the u16 one, and counted the float weight at 4 bytes beside QCONV2D."""
    a = _group("a_", op, xt, wt, yt, ties=False, seed=0, int32_bias=wt != F)
    b = _group("b_", "Gemm", U8, U8, U8, ties=False, seed=1, int32_bias=True)
    pair, plain = _models(a, b)
    node = pair.graph.node[0]
    program, origins = lower_pair(pair, node), program_op_nodes(pair, node)
    records = [layout_of(program).ops_off + 176 * o.op for o in origins if o.task == 0 and o.op_type == op]
    ops = [(Opcode(struct.unpack_from("<H", program, at)[0]), Engine(program[at + 2])) for at in records]
    emitted = [(code, engine) for code, engine in ops if engine != Engine.COPY]  # not its layout copies
    g = graph.index_model(plain)
    i = next(k for k, n in enumerate(g.nodes) if n.output[0] == "a_c")
    p = profile.profile_node(g, i)
    assert not isinstance(p, str), p
    integer = emitted[0][0] in INTEGER
    assert len(emitted) == 1 and emitted[0][1] == KERNEL_ENGINE[p.engine], (emitted, p.engine)
    assert p.int_bits == (8 if integer else 0), (emitted, p.int_bits)
    widths = {"a_xf": 2 if xt == U16 else 1, "a_wf": 1} if integer else {}
    reads = sum(g.info(t).numel * widths.get(t, 4) for t in g.nodes[i].input)  # type: ignore[operator]
    assert p.bytes_in == reads, (p.bytes_in, reads)
