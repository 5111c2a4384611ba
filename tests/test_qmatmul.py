"""QDQ MatMul/Gemm groups lowered to QMATMUL (integer MatMul, ORT's requantisation): which groups
take it, which keep the float path, and the host kernel against ONNX Runtime's run of the QDQ model
(its QDQ fusion makes them QLinearMatMul / QGemm)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import init, pair_model, program_inputs, vi

from hexfuse_onnx.exact_products import make_exact
from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.lowering.abi import Opcode, Role
from hexfuse_onnx.lowering.program import tensor_records
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR, HostKernel

NP = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}
# nodes, inputs, outputs, initializers of one QDQ group
Group = tuple[list[onnx.NodeProto], list[onnx.ValueInfoProto], list[onnx.ValueInfoProto], list[onnx.TensorProto]]


def _opcodes(program: bytes) -> list[Opcode]:
    n_ops, ops_off = struct.unpack_from("<I", program, 20)[0], struct.unpack_from("<I", program, 36)[0]
    return [Opcode(struct.unpack_from("<H", program, ops_off + 176 * i)[0]) for i in range(n_ops)]


def _group(
    p: str, a_shape: list[int], k: int, n: int, at: int, bt: int, yt: int, *, gemm: dict | None = None,
    per_column: bool = False, bias_scale: float | None = None, seed: int = 0,
) -> Group:  # fmt: skip
    """x (at) -> DQ, W (bt) -> DQ -> MatMul (or Gemm with `gemm` attributes, bias DQ'd from i32) -> Q (yt)."""
    rng = np.random.default_rng(seed)
    trans_b = bool(gemm and gemm.get("transB"))
    w_shape = [n, k] if trans_b else [k, n]
    info_b = np.iinfo(NP[bt])
    sa, sy = np.float32(0.02), np.float32(0.05)
    sb = rng.uniform(0.002, 0.01, n if per_column else ()).astype(np.float32)
    zb = (np.zeros(n, NP[bt]) if per_column else np.array(0, NP[bt])) if bt == TensorProto.INT8 else None
    if zb is None:
        zb = rng.integers(100, 156, n if per_column else ()).astype(np.uint8)
    inits = [
        init(f"{p}w", rng.integers(info_b.min, info_b.max + 1, w_shape).astype(NP[bt])),
        init(f"{p}sa", sa),
        init(f"{p}za", np.array(128 if at == TensorProto.UINT8 else 3, NP[at])),
        init(f"{p}sb", sb),
        init(f"{p}zb", zb),
        init(f"{p}sy", sy),
        init(f"{p}zy", np.array(120 if yt == TensorProto.UINT8 else -5, NP[yt])),
    ]
    axis = 0 if trans_b else 1
    nodes = [
        helper.make_node("DequantizeLinear", [f"{p}x", f"{p}sa", f"{p}za"], [f"{p}xf"]),
        helper.make_node("DequantizeLinear", [f"{p}w", f"{p}sb", f"{p}zb"], [f"{p}wf"], axis=axis),
    ]
    mm_inputs = [f"{p}xf", f"{p}wf"]
    if gemm is not None:
        acc_scale = (sa * sb).astype(np.float32) if bias_scale is None else np.float32(bias_scale)
        inits += [init(f"{p}bq", rng.integers(-3000, 3000, n).astype(np.int32)), init(f"{p}bs", acc_scale)]
        nodes.append(helper.make_node("DequantizeLinear", [f"{p}bq", f"{p}bs"], [f"{p}bf"], axis=0))
        mm_inputs.append(f"{p}bf")
        nodes.append(helper.make_node("Gemm", mm_inputs, [f"{p}mm"], **gemm))
    else:
        nodes.append(helper.make_node("MatMul", mm_inputs, [f"{p}mm"]))
    nodes.append(helper.make_node("QuantizeLinear", [f"{p}mm", f"{p}sy", f"{p}zy"], [f"{p}y"]))
    out_shape = [*a_shape[:-1], n] if gemm is None or not gemm.get("transA") else [a_shape[1], n]
    inputs = [vi(f"{p}x", a_shape, at)] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return nodes, inputs, [vi(f"{p}y", out_shape, yt)], inits


def _pair(a: tuple, b: tuple, opset: int = 19) -> onnx.ModelProto:
    return pair_model(a[0], b[0], a[1], b[1], a[2], b[2], a[3] + b[3], opset=opset)


def _plain(a: tuple, b: tuple, opset: int = 19) -> onnx.ModelProto:
    """The same groups as a plain QDQ model (what ONNX Runtime runs)."""
    graph = helper.make_graph(
        a[0] + b[0], "qdq", [a[1][0], b[1][0]], a[2] + b[2], initializer=a[3] + b[3]
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


U8, I8 = TensorProto.UINT8, TensorProto.INT8
CASES = {
    "matmul_u8u8_gemm_u8i8_bias_per_column": (
        dict(a_shape=[2, 5, 33], k=33, n=17, at=U8, bt=U8, yt=U8),
        dict(a_shape=[7, 40], k=40, n=300, at=U8, bt=I8, yt=U8, gemm={"transB": 1}, per_column=True),
    ),
    "matmul_i8i8_gemm_i8i8_bias": (
        dict(a_shape=[9, 16], k=16, n=5, at=I8, bt=I8, yt=I8),
        dict(a_shape=[3, 24], k=24, n=8, at=I8, bt=I8, yt=I8, gemm={}),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_qdq_matmul_and_gemm_groups_lower_to_qmatmul(case: str) -> None:
    a, b = CASES[case]
    ops = _opcodes(lower_pair(m := _pair(_group("a_", **a), _group("b_", **b)), m.graph.node[0]))
    assert ops == [Opcode.QMATMUL, Opcode.QMATMUL], ops  # each DQ, op and Q: one op


def test_groups_that_do_not_fit_keep_the_float_path() -> None:
    """transA, and a bias whose scale is not s_a * s_b: DQ, GEMM, Q as before."""
    a = _group("a_", [24, 3], 24, 8, U8, U8, U8, gemm={"transA": 1})
    b = _group("b_", [3, 24], 24, 8, U8, I8, U8, gemm={}, bias_scale=0.001)
    ops = _opcodes(lower_pair(m := _pair(a, b), m.graph.node[0]))
    assert ops.count(Opcode.GEMM) == 2 and Opcode.QMATMUL not in ops, ops


def _ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """ORT's outputs of `model`, its fused QLinearMatMul/QGemm, exact: where this host's ORT saturates
    uint8 x int8 products (up to 100 steps off), of the model made exact (exact_products.make_exact)."""
    exact = onnx.ModelProto()
    exact.CopyFrom(model)
    make_exact(exact)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(exact.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
@pytest.mark.parametrize("case", list(CASES))
def test_qmatmul_equals_onnxruntime(case: str) -> None:
    """Equal to ORT's QLinearMatMul/QGemm bit for bit (`_ort_run`: exact where ORT's u8 x i8 kernel
    without VNNI saturates 16-bit pair sums; one step apart on 1% before, against its float path)."""
    a, b = CASES[case]
    ga, gb = _group("a_", **a), _group("b_", **b)
    m, plain = _pair(ga, gb), _plain(ga, gb)
    rng = np.random.default_rng(5)
    feeds = {}
    for g in (ga, gb):
        x = g[1][0]
        dt = NP[x.type.tensor_type.elem_type]
        shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
        feeds[x.name] = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, shape).astype(dt)
    ref = _ort_run(plain, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


def _conv_group(p: str, xt: int, wt: int, yt: int, *, bias: bool, seed: int = 0) -> Group:
    """x [1,4,9,7] (xt) -> DQ, W [6,2,3,3] (wt, per output channel) -> DQ [, bias] -> Conv group 2, pads,
    strides 2 1 -> Q (yt)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(NP[wt])
    sa, sy = np.float32(0.03), np.float32(0.04)
    sw = rng.uniform(0.002, 0.01, 6).astype(np.float32)
    inits = [
        init(f"{p}w", rng.integers(info.min, info.max + 1, [6, 2, 3, 3]).astype(NP[wt])),
        init(f"{p}sa", sa),
        init(f"{p}za", np.array(128 if xt == U8 else -2, NP[xt])),
        init(f"{p}sw", sw),
        init(f"{p}zw", np.zeros(6, NP[wt])),
        init(f"{p}sy", sy),
        init(f"{p}zy", np.array(100 if yt == U8 else 4, NP[yt])),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", [f"{p}x", f"{p}sa", f"{p}za"], [f"{p}xf"]),
        helper.make_node("DequantizeLinear", [f"{p}w", f"{p}sw", f"{p}zw"], [f"{p}wf"], axis=0),
    ]
    conv_in = [f"{p}xf", f"{p}wf"]
    if bias:
        inits += [
            init(f"{p}bq", rng.integers(-2000, 2000, 6).astype(np.int32)),
            init(f"{p}bs", (sa * sw).astype(np.float32)),
        ]
        nodes.append(helper.make_node("DequantizeLinear", [f"{p}bq", f"{p}bs"], [f"{p}bf"], axis=0))
        conv_in.append(f"{p}bf")
    nodes.append(helper.make_node("Conv", conv_in, [f"{p}c"], group=2, pads=[1, 0, 2, 1], strides=[2, 1]))
    nodes.append(helper.make_node("QuantizeLinear", [f"{p}c", f"{p}sy", f"{p}zy"], [f"{p}y"]))
    inputs = [vi(f"{p}x", [1, 4, 9, 7], xt)] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return nodes, inputs, [vi(f"{p}y", [1, 6, 5, 6], yt)], inits


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_qdq_conv_groups_lower_to_qconv2d_and_match_onnxruntime() -> None:
    """u8 x u8 with a bias, i8 x i8 without: QCONV2D each, equal to ORT's QLinearConv."""
    ga, gb = _conv_group("a_", U8, U8, U8, bias=True), _conv_group("b_", I8, I8, I8, bias=False, seed=1)
    m, plain = _pair(ga, gb), _plain(ga, gb)
    program = lower_pair(m, m.graph.node[0])
    assert _opcodes(program) == [Opcode.QCONV2D, Opcode.QCONV2D]
    rng = np.random.default_rng(9)
    feeds = {
        "a_x": rng.integers(0, 256, [1, 4, 9, 7]).astype(np.uint8),
        "b_x": rng.integers(-128, 128, [1, 4, 9, 7]).astype(np.int8),
    }
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(program, program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


def _as_qoperator(g: Group) -> Group:
    """The QDQ group as the one QOperator node onnxruntime.quantization writes for it (QLinearConv,
    QLinearMatMul), on the same initializers (a Conv bias: its int32 values)."""
    nodes, inputs, outputs, inits = g
    op = nodes[-2]
    p = op.output[0][:2]
    args = [f"{p}x", f"{p}sa", f"{p}za", f"{p}w"]
    if op.op_type == "Conv":
        args += [f"{p}sw", f"{p}zw", f"{p}sy", f"{p}zy"] + ([f"{p}bq"] if len(op.input) > 2 else [])
        node = helper.make_node(
            "QLinearConv", args, [f"{p}y"], **{a.name: helper.get_attribute_value(a) for a in op.attribute}
        )
    else:
        node = helper.make_node("QLinearMatMul", args + [f"{p}sb", f"{p}zb", f"{p}sy", f"{p}zy"], [f"{p}y"])
    kept = [t for t in inits if t.name != f"{p}bs"]
    return [node], [v for v in inputs if v.name != f"{p}bs"], outputs, kept


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_qoperator_nodes_lower_as_their_qdq_groups() -> None:
    """QLinearConv (u8 x u8, bias) and QLinearMatMul (u8 x i8, per column): QCONV2D and QMATMUL whose
    outputs equal those of the same groups written as QDQ bit for bit, and ORT's (`_ort_run`)."""
    ga = _conv_group("a_", U8, U8, U8, bias=True)
    gb = _group("b_", [2, 5, 33], 33, 17, U8, I8, U8, per_column=True)
    qa, qb = _as_qoperator(ga), _as_qoperator(gb)
    m_qop, m_qdq = _pair(qa, qb), _pair(ga, gb)
    program = lower_pair(m_qop, m_qop.graph.node[0])
    assert _opcodes(program) == [Opcode.QCONV2D, Opcode.QMATMUL]
    rng = np.random.default_rng(11)
    feeds = {
        "a_x": rng.integers(0, 256, [1, 4, 9, 7]).astype(np.uint8),
        "b_x": rng.integers(0, 256, [2, 5, 33]).astype(np.uint8),
    }
    got = HostKernel().run(program, program_inputs(m_qop, m_qop.graph.node[0], feeds))
    same = HostKernel().run(lower_pair(m_qdq, m_qdq.graph.node[0]), program_inputs(m_qdq, m_qdq.graph.node[0], feeds))
    ref = _ort_run(_plain(qa, qb), feeds)
    for g, s, r in zip(got, same, ref):
        assert g.dtype == s.dtype == r.dtype == np.uint8 and np.array_equal(g, s)
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


def test_qoperator_ops_without_a_kernel_are_named() -> None:
    """com.microsoft QLinearLeakyRelu (no kernel, no chain): refused with the op."""
    from hexfuse_onnx.lowering import LoweringError

    nodes, inputs, outputs, inits = _as_qoperator(_conv_group("a_", U8, U8, U8, bias=False))
    leaky = helper.make_node(
        "QLinearLeakyRelu", ["b_x", "b_s", "b_z", "b_s", "b_z"], ["b_y"], alpha=0.1, domain="com.microsoft"
    )
    b_inits = [init("b_s", np.float32(0.1)), init("b_z", np.array(3, np.uint8))]
    b_in = [vi("b_x", [4], U8)] + [vi(t.name, [], t.data_type) for t in b_inits]
    m = pair_model(nodes, [leaky], inputs, b_in, outputs, [vi("b_y", [4], U8)], inits + b_inits, opset=19)
    with pytest.raises(LoweringError, match="QLinearLeakyRelu.*outside the kernel"):
        lower_pair(m, m.graph.node[0])


def _two_steps_of_one_weight() -> Group:
    """Two u8 groups in a chain that read one weight initializer through DequantizeLinears of their
    own, as the unrolled steps of a recurrent net do (captcha_crnn_qdq_u8u8's LSTM: 20 per direction)."""
    nodes, inputs, outputs, inits = _group("a_", [4, 64], 64, 64, U8, U8, U8)
    nodes = nodes + [
        helper.make_node("DequantizeLinear", ["a_y", "a_sy", "a_zy"], ["a_yf"]),
        helper.make_node("DequantizeLinear", ["a_w", "a_sb", "a_zb"], ["a_wf2"], axis=1),
        helper.make_node("MatMul", ["a_yf", "a_wf2"], ["a_mm2"]),
        helper.make_node("QuantizeLinear", ["a_mm2", "a_sy", "a_zy"], ["a_y2"]),
    ]
    return nodes, inputs, [vi("a_y2", [4, 64], U8)], inits


def test_steps_reading_one_weight_share_its_program_constant() -> None:
    ga, gb = _two_steps_of_one_weight(), _group("b_", [3, 16], 16, 8, U8, U8, U8)
    m, plain = _pair(ga, gb), _plain(ga, gb)
    program = lower_pair(m, m.graph.node[0])
    assert _opcodes(program) == [Opcode.QMATMUL] * 3
    weights = [dims for role, _, dims in tensor_records(program) if role == Role.CONSTANT and dims == [64, 64]]
    assert len(weights) == 1, weights
    if not (LIB_DIR / HOST_NAME).is_file():
        pytest.skip("run `bash custom_ops/build.sh`")
    rng = np.random.default_rng(3)
    feeds = {"a_x": rng.integers(0, 256, [4, 64]).astype(np.uint8)}
    feeds["b_x"] = rng.integers(0, 256, [3, 16]).astype(np.uint8)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(program, program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(ref, got):
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


U16 = TensorProto.UINT16
NPX = {U8: np.uint8, I8: np.int8, U16: np.uint16}
RATIOS = (0.375, 0.625, 1.25)  # s_x s_w / s_y of the 1-D groups: t = acc * ratio is a tie for many acc


def _weight_scales(sx: np.float32, sy: np.float32, m: int) -> np.ndarray:
    """Per output channel weight scales whose f32(f32(s_x s_w) / s_y) is exactly one of RATIOS (the
    integer kernel's and ORT's requantization then meets exact ties; the float path's sums land on
    either side of them)."""
    out = []
    for c in range(m):
        want = np.float32(RATIOS[c % len(RATIOS)])
        sw = np.float32(want * sy / sx)
        while np.float32(np.float32(sx * sw) / sy) != want:
            sw = np.nextafter(sw, np.float32(np.inf) if np.float32(np.float32(sx * sw) / sy) < want else np.float32(0))
        out.append(sw)
    return np.array(out, np.float32)


def _conv1d_group(p: str, xt: int, *, t: int, group: int, stride: int, float_bias: bool, seed: int) -> Group:
    """x [1, 4, t] (xt) -> DQ, W [6, 4/group, 3] u8 per output channel -> DQ, bias (a float initializer,
    ties of bias / (s_x s_w) among it, or int32 behind a DequantizeLinear) -> Conv 1-D pads 1 2,
    dilation 2 -> Q (xt)."""
    rng = np.random.default_rng(seed)
    sx, sy = np.float32(0.0173), np.float32(0.0311)
    sw = _weight_scales(sx, sy, 6)
    acc_scale = (sx * sw).astype(np.float32)
    wide = xt == U16
    bias_q = rng.integers(-5000, 5000, 6) if wide else rng.integers(-60, 60, 6)
    zw = rng.integers(110, 140, 6)
    inits = [
        init(f"{p}w", (zw[:, None, None] + rng.integers(-8, 9, [6, 4 // group, 3])).astype(np.uint8)),
        init(f"{p}sx", sx),
        init(f"{p}zx", np.array(30000 if wide else 128, NPX[xt])),
        init(f"{p}sw", sw),
        init(f"{p}zw", zw.astype(np.uint8)),
        init(f"{p}sy", sy),
        init(f"{p}zy", np.array(31000 if wide else 100, NPX[xt])),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", [f"{p}x", f"{p}sx", f"{p}zx"], [f"{p}xf"]),
        helper.make_node("DequantizeLinear", [f"{p}w", f"{p}sw", f"{p}zw"], [f"{p}wf"], axis=0),
    ]
    if float_bias:  # half of them at k + 0.5 steps: ORT rounds them half to even
        bias = ((bias_q + np.where(np.arange(6) % 2, 0.5, 0.3)) * acc_scale).astype(np.float32)
        inits.append(init(f"{p}b", bias))
    else:
        inits += [init(f"{p}bq", bias_q.astype(np.int32)), init(f"{p}bs", acc_scale)]
        nodes.append(helper.make_node("DequantizeLinear", [f"{p}bq", f"{p}bs"], [f"{p}b"], axis=0))
    out_t = (t + 3 - 4 - 1) // stride + 1
    nodes += [
        helper.make_node(
            "Conv", [f"{p}xf", f"{p}wf", f"{p}b"], [f"{p}c"], group=group, pads=[1, 2], strides=[stride], dilations=[2]
        ),
        helper.make_node("QuantizeLinear", [f"{p}c", f"{p}sy", f"{p}zy"], [f"{p}y"]),
    ]
    inputs = [vi(f"{p}x", [1, 4, t], xt)] + [vi(v.name, list(v.dims), v.data_type) for v in inits]
    return nodes, inputs, [vi(f"{p}y", [1, 6, out_t], xt)], inits


def _conv1d_pair(xt: int, seed: int) -> tuple[Group, Group]:
    a = _conv1d_group("a_", xt, t=37, group=2, stride=1, float_bias=True, seed=seed)
    return a, _conv1d_group("b_", xt, t=129, group=1, stride=2, float_bias=False, seed=seed + 100)


def _conv1d_feeds(xt: int, seed: int) -> dict[str, np.ndarray]:
    """x near its zero point, so that few outputs saturate."""
    rng = np.random.default_rng(seed)
    zx, spread = (30000, 2000) if xt == U16 else (128, 8)
    return {
        k: (zx + rng.integers(-spread, spread + 1, [1, 4, t])).astype(NPX[xt]) for k, t in (("a_x", 37), ("b_x", 129))
    }


def _ort(plain: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
@pytest.mark.parametrize("seed", range(4))
def test_1d_u8_conv_groups_lower_to_qconv2d_and_equal_onnxruntime(seed: int) -> None:
    """1-D u8 x u8 Convs, a float bias (ORT quantizes it to int32, ties among it) and an int32 one:
    QCONV2D on [N, C, 1, T] views, equal to ORT's QLinearConv on every element, ties included (the
    float path was one step off on 3-7% of them, as on whisper_encoder_qdq_u8u8's conv1)."""
    ga, gb = _conv1d_pair(U8, seed)
    m, feeds = _pair(ga, gb), _conv1d_feeds(U8, seed)
    program = lower_pair(m, m.graph.node[0])
    assert _opcodes(program) == [Opcode.COPY, Opcode.QCONV2D, Opcode.COPY] * 2
    got = HostKernel().run(program, program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(_ort(_plain(ga, gb), feeds), got):
        assert r.dtype == g.dtype == np.uint8 and r.shape == g.shape
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
@pytest.mark.parametrize("seed", range(4))
def test_1d_u16_conv_groups_keep_the_float_path_with_ort_bias(seed: int) -> None:
    """u16 x u8: ORT does not fuse (float Conv), but it still quantizes a float bias to int32 and adds
    it dequantized: so does the float path, within one step of ORT (its float sums differ at ties)."""
    ga, gb = _conv1d_pair(U16, seed)
    m, feeds = _pair(ga, gb, opset=21), _conv1d_feeds(U16, seed)
    program = lower_pair(m, m.graph.node[0])
    assert Opcode.QCONV2D not in _opcodes(program) and _opcodes(program).count(Opcode.CONV2D) == 2
    got = HostKernel().run(program, program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(_ort(_plain(ga, gb, opset=21), feeds), got):
        diff = np.abs(r.astype(np.int32) - g.astype(np.int32))
        assert r.dtype == g.dtype == np.uint16 and diff.max() <= 1 and (diff == 0).mean() >= 0.99, diff.max()


def _through(g: Group, act: str) -> Group:
    """The group with `act` between its Conv and QuantizeLinear."""
    nodes, inputs, outputs, inits = g
    conv, q = nodes[-2], nodes[-1]
    conv.output[0] = f"{conv.output[0]}0"
    return [*nodes[:-1], helper.make_node(act, [conv.output[0]], [q.input[0]]), q], inputs, outputs, inits


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_a_float_bias_is_quantized_where_onnxruntime_quantizes_it() -> None:
    """ORT quantizes the float bias of a Conv whose output reaches its Q through a Relu, and keeps it
    of one through a Sigmoid: so does the float path (each choice the other way is one step off on
    6-11% of the elements)."""
    ga = _through(_conv1d_group("a_", U8, t=37, group=2, stride=1, float_bias=True, seed=0), "Relu")
    gb = _through(_conv1d_group("b_", U8, t=37, group=2, stride=1, float_bias=True, seed=1), "Sigmoid")
    m, feeds = _pair(ga, gb), {"a_x": _conv1d_feeds(U8, 0)["a_x"], "b_x": _conv1d_feeds(U8, 1)["a_x"]}
    program = lower_pair(m, m.graph.node[0])
    assert _opcodes(program).count(Opcode.CONV2D) == 2
    got = HostKernel().run(program, program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(_ort(_plain(ga, gb), feeds), got):
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


def _with_float_bias(g: Group) -> Group:
    """A Gemm group's int32 bias behind its DequantizeLinear as the float initializer of k + 0.5 steps."""
    nodes, inputs, outputs, inits = g
    p = nodes[0].output[0][:2]
    values = {t.name: numpy_helper.to_array(t) for t in inits}
    bias = ((values[f"{p}bq"] + 0.5) * values[f"{p}bs"]).astype(np.float32)
    kept = [t for t in inits if t.name not in (f"{p}bq", f"{p}bs")] + [init(f"{p}bf", bias)]
    ins = [v for v in inputs if v.name not in (f"{p}bq", f"{p}bs")] + [vi(f"{p}bf", [bias.size])]
    return [n for n in nodes if n.output[0] != f"{p}bf"], ins, outputs, kept


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_gemm_groups_with_a_float_bias_lower_to_qmatmul() -> None:
    """u8 Gemms whose bias is a float initializer (per column and per tensor weight scales): QMATMUL
    with the int32 bias ORT makes of it, equal to ORT's QGemm."""
    ga = _with_float_bias(_group("a_", [7, 40], 40, 30, U8, U8, U8, gemm={"transB": 1}, per_column=True))
    gb = _with_float_bias(_group("b_", [3, 24], 24, 8, U8, U8, U8, gemm={}))
    m = _pair(ga, gb)
    program = lower_pair(m, m.graph.node[0])
    assert _opcodes(program) == [Opcode.QMATMUL, Opcode.QMATMUL]
    rng = np.random.default_rng(1)
    feeds = {
        "a_x": rng.integers(0, 256, [7, 40]).astype(np.uint8),
        "b_x": rng.integers(0, 256, [3, 24]).astype(np.uint8),
    }
    got = HostKernel().run(program, program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(_ort(_plain(ga, gb), feeds), got):
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


def _conv_transpose_group(p: str, seed: int) -> Group:
    """x [1, 4, 33] u16 -> DQ, W [4, 6, 2] u8 -> DQ, a float bias of k + 0.5 steps -> ConvTranspose 1-D,
    kernel = strides -> Q u16."""
    rng = np.random.default_rng(seed)
    sx, sw, sy = np.float32(0.0173), np.float32(1.79), np.float32(0.0311)  # an accumulator step ~ a Y step
    bias = ((rng.integers(-5000, 5000, 6) + 0.5) * np.float32(sx * sw)).astype(np.float32)
    inits = [
        init(f"{p}w", rng.integers(120, 137, [4, 6, 2]).astype(np.uint8)),
        *(init(f"{p}{k}", v) for k, v in (("sx", sx), ("sw", sw), ("sy", sy), ("b", bias))),
        init(f"{p}zx", np.array(30000, np.uint16)),
        init(f"{p}zw", np.array(128, np.uint8)),
        init(f"{p}zy", np.array(31000, np.uint16)),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", [f"{p}x", f"{p}sx", f"{p}zx"], [f"{p}xf"]),
        helper.make_node("DequantizeLinear", [f"{p}w", f"{p}sw", f"{p}zw"], [f"{p}wf"]),
        helper.make_node("ConvTranspose", [f"{p}xf", f"{p}wf", f"{p}b"], [f"{p}c"], strides=[2]),
        helper.make_node("QuantizeLinear", [f"{p}c", f"{p}sy", f"{p}zy"], [f"{p}y"]),
    ]
    inputs = [vi(f"{p}x", [1, 4, 33], U16)] + [vi(v.name, list(v.dims), v.data_type) for v in inits]
    return nodes, inputs, [vi(f"{p}y", [1, 6, 66], U16)], inits


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_a_conv_transpose_adds_the_bias_onnxruntime_quantized() -> None:
    """u16 ConvTransposes with a float bias: ORT quantizes it too, the float path adds it so, and
    equals ORT (with the bias as written: one step off on about half the elements)."""
    ga, gb = _conv_transpose_group("a_", 0), _conv_transpose_group("b_", 1)
    m, rng = _pair(ga, gb, opset=21), np.random.default_rng(2)
    feeds = {k: (30000 + rng.integers(-500, 501, [1, 4, 33])).astype(np.uint16) for k in ("a_x", "b_x")}
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    for r, g in zip(_ort(_plain(ga, gb, opset=21), feeds), got):
        assert np.array_equal(r, g), np.abs(r.astype(np.int32) - g.astype(np.int32)).max()


@pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")
def test_1d_integer_convs_pair_at_a_symbolic_length(tmp_path: Path) -> None:
    """Two 1-D u8 groups of symbolic length T: their pair (a v2 program, its copies' dims following
    T) is rewritten, verified on the plugin at two lengths, and holds QCONV2D."""
    from hexfuse_onnx import pipeline

    ga = _conv1d_group("a_", U8, t=37, group=2, stride=1, float_bias=True, seed=0)
    gb = _conv1d_group("b_", U8, t=37, group=1, stride=1, float_bias=False, seed=1)
    m = _plain(ga, gb)
    for v in m.graph.input:
        v.type.tensor_type.shape.dim[2].dim_param = "T"
    for v in m.graph.output:
        v.type.tensor_type.shape.dim[2].dim_param = f"{v.name}_T"
    onnx.save(m, tmp_path / "m.onnx")
    shapes = {"a_x": [1, 4, 37], "b_x": [1, 4, 37]}
    result = pipeline.rewrite(tmp_path / "m.onnx", tmp_path / "f.onnx", shapes=shapes, verify_plugin=True)
    assert result.output is not None
    fused = onnx.load(result.output)
    pair = next(n for n in fused.graph.node if n.op_type == "FusedHexPair")
    assert _opcodes(lower_pair(fused, pair)).count(Opcode.QCONV2D) == 2
