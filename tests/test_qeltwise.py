"""QDQ elementwise groups lowered to QADD, QMUL and QLUT (dsp/ref/ref_qeltwise.h): which groups take
them, which keep the float path, and the host kernel against ONNX Runtime's run of the QDQ model
(its QDQ fusion makes Add/Mul QLinearAdd/QLinearMul; the unary groups run in float or as its own
lookup tables)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import REPO, run_cli
from onnx import TensorProto, helper
from test_lower import init, pair_model, program_inputs, vi
from test_qmatmul import _opcodes

from hexfuse_onnx import verify
from hexfuse_onnx.lowering import attach_programs, lower_pair
from hexfuse_onnx.lowering.abi import Opcode
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR, HostKernel

U8, I8 = TensorProto.UINT8, TensorProto.INT8
NP = {U8: np.uint8, I8: np.int8}
needs_host = pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")


def _q(p: str, name: str, src: str, dst: str, scale: float, zp: int, dt: int, dq: bool) -> tuple:
    """A QuantizeLinear (or DequantizeLinear) of src with its own scale and zero point initializers."""
    op = "DequantizeLinear" if dq else "QuantizeLinear"
    inits = [init(f"{p}{name}_s", np.float32(scale)), init(f"{p}{name}_z", np.array(zp, NP[dt]))]
    return helper.make_node(op, [src, f"{p}{name}_s", f"{p}{name}_z"], [dst]), inits


class Chain:
    """A task of QDQ groups built node by node: inputs, nodes, initializers, its output."""

    def __init__(self, p: str) -> None:
        self.p, self.nodes, self.inits, self.inputs = p, [], [], []

    def add(self, node_and_inits: tuple) -> None:
        self.nodes.append(node_and_inits[0])
        self.inits += node_and_inits[1]

    def model_parts(self, out: str, shape: list[int], dt: int, intermediate: str = "") -> tuple:
        infos = self.inputs + [vi(t.name, list(t.dims), t.data_type) for t in self.inits]
        outs = [vi(o, shape, dt) for o in (intermediate, out) if o]
        return self.nodes, infos, outs, self.inits


def _binary(p: str, op: str, a: list[int], b: list[int], dt: int, rng: np.random.Generator) -> Chain:
    """DQ(x) op DQ(w) -> Q, then DQ -> Sigmoid -> Q (two groups)."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", a, dt), vi(f"{p}w", b, dt)]
    lo = 0 if dt == U8 else -128

    def zp() -> int:
        return int(rng.integers(lo, lo + 256))

    c.add(_q(p, "dx", f"{p}x", f"{p}xf", rng.uniform(0.01, 0.1), zp(), dt, True))
    c.add(_q(p, "dw", f"{p}w", f"{p}wf", rng.uniform(0.01, 0.1), zp(), dt, True))
    c.nodes.append(helper.make_node(op, [f"{p}xf", f"{p}wf"], [f"{p}sf"]))
    s_sum, z_sum = rng.uniform(0.02, 0.2) * (4 if op == "Mul" else 1), zp()
    c.add(_q(p, "qs", f"{p}sf", f"{p}s", s_sum, z_sum, dt, False))
    c.add(_q(p, "ds", f"{p}s", f"{p}sd", s_sum, z_sum, dt, True))
    c.nodes.append(helper.make_node("Sigmoid", [f"{p}sd"], [f"{p}gf"]))
    c.add(_q(p, "qy", f"{p}gf", f"{p}y", 1 / 255, lo, dt, False))
    return c


def _unary_chain(p: str, shape: list[int], dt: int) -> Chain:
    """DQ -> HardSigmoid -> Q -> DQ -> Div by DQ(6) -> Q -> DQ -> Tanh -> Q (three table groups)."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", shape, dt)]
    z = 0 if dt == U8 else -128
    c.add(_q(p, "d0", f"{p}x", f"{p}a", 0.05, z + 100, dt, True))
    c.nodes.append(helper.make_node("HardSigmoid", [f"{p}a"], [f"{p}b"], alpha=0.2, beta=0.5))
    c.add(_q(p, "q0", f"{p}b", f"{p}c", 1 / 255, z, dt, False))
    c.add(_q(p, "d1", f"{p}c", f"{p}cf", 1 / 255, z, dt, True))
    c.inits.append(init(f"{p}six", np.array(z + 200, NP[dt])))
    c.add(_q(p, "d6", f"{p}six", f"{p}sixf", 0.03, z, dt, True))
    c.nodes.append(helper.make_node("Div", [f"{p}cf", f"{p}sixf"], [f"{p}e"]))
    c.add(_q(p, "q1", f"{p}e", f"{p}f", 0.001, z, dt, False))
    c.add(_q(p, "d2", f"{p}f", f"{p}ff", 0.001, z, dt, True))
    c.nodes.append(helper.make_node("Tanh", [f"{p}ff"], [f"{p}g"]))
    c.add(_q(p, "q2", f"{p}g", f"{p}y", 0.002, z + 50, dt, False))
    return c


def _models(a: tuple, b: tuple) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The pair over the two tasks, and the same nodes as a plain QDQ model (what ORT runs)."""
    pair = pair_model(a[0], b[0], a[1], b[1], a[2], b[2], a[3] + b[3], opset=19)
    names = {t.name for t in a[3] + b[3]}
    inputs = [v for v in a[1] + b[1] if v.name not in names]
    graph = helper.make_graph(a[0] + b[0], "qdq", inputs, a[2] + b[2], initializer=a[3] + b[3])
    return pair, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)


def _feeds(plain: onnx.ModelProto, rng: np.random.Generator, exhaustive: bool = False) -> dict[str, np.ndarray]:
    feeds = {}
    for v in plain.graph.input:
        dt = NP[v.type.tensor_type.elem_type]
        shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
        if exhaustive:  # every value of the type along the non-broadcast axis
            feeds[v.name] = np.arange(np.iinfo(dt).min, np.iinfo(dt).max + 1).astype(dt).reshape(shape)
        else:
            feeds[v.name] = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, shape).astype(dt)
    return feeds


def _compare(pair: onnx.ModelProto, plain: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(plain.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(pair, pair.graph.node[0]), program_inputs(pair, pair.graph.node[0], feeds))
    diffs = []
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
        diffs.append(np.abs(r.astype(np.int32) - g.astype(np.int32)))
    return diffs


def test_qdq_elementwise_groups_lower_to_integer_ops() -> None:
    rng = np.random.default_rng(0)
    a = _binary("a_", "Add", [2, 4, 5, 5], [1, 4, 1, 1], U8, rng).model_parts("a_y", [2, 4, 5, 5], U8)
    b = _unary_chain("b_", [3, 7, 11], I8).model_parts("b_y", [3, 7, 11], I8)
    pair, _ = _models(a, b)
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops == [Opcode.QADD, Opcode.QLUT, Opcode.QLUT, Opcode.QLUT, Opcode.QLUT], ops  # no DQ of the constant


def test_mixed_types_keep_the_float_path() -> None:
    """ORT's QLinearAdd wants one type: a u8 + i8 Add stays DQ, ADD, Q."""
    rng = np.random.default_rng(1)
    c = _binary("a_", "Add", [4, 6], [4, 6], U8, rng)
    c.inputs[1] = vi("a_w", [4, 6], I8)
    c.inits[3] = init("a_dw_z", np.array(3, np.int8))
    a = c.model_parts("a_y", [4, 6], U8)
    b = _unary_chain("b_", [5], U8).model_parts("b_y", [5], U8)
    pair, _ = _models(a, b)
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert Opcode.ADD in ops and Opcode.QADD not in ops and ops.count(Opcode.QLUT) == 4, ops


@needs_host
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dt", [U8, I8])
def test_qadd_qmul_equal_onnxruntime_on_every_pair(dt: int, seed: int) -> None:
    """Every (x, w) pair of the type through a broadcast both ways round (A as the scalar span swaps
    QADD's operands): bit for bit equal to ORT's QLinearAdd/QLinearMul, and the Sigmoid tables too.
    The quantized sum is an output: without it ORT's graph optimizations may feed the Sigmoid group
    a value its QDQ semantics do not give (measured: 1 element in 65536 off by one step, i8)."""
    rng = np.random.default_rng(seed)
    a = _binary("a_", "Add", [256, 1], [1, 256], dt, rng).model_parts("a_y", [256, 256], dt, "a_s")
    b = _binary("b_", "Mul", [1, 256], [256, 1], dt, rng).model_parts("b_y", [256, 256], dt, "b_s")
    pair, plain = _models(a, b)
    assert _opcodes(lower_pair(pair, pair.graph.node[0])).count(Opcode.QLUT) == 2
    for d in _compare(pair, plain, _feeds(plain, rng, exhaustive=True)):
        assert d.max() == 0, (d.max(), (d > 0).sum())


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
def test_elementwise_pair_matches_onnxruntime(dt: int) -> None:
    """Odd shapes, both broadcasts, tables: within one step of ORT (measured: equal)."""
    rng = np.random.default_rng(7)
    a = _binary("a_", "Mul", [3, 5, 7], [3, 1, 7], dt, rng).model_parts("a_y", [3, 5, 7], dt)
    b = _unary_chain("b_", [2, 33, 9], dt).model_parts("b_y", [2, 33, 9], dt)
    pair, plain = _models(a, b)
    for d in _compare(pair, plain, _feeds(plain, rng)):
        assert d.max() <= 1 and (d == 0).mean() >= 0.99, (d.max(), (d == 0).mean())


def _contrib_gelu_chain(p: str, shape: list[int], dt: int) -> Chain:
    """DQ -> com.microsoft Gelu -> Q: ORT's optimizer fuses the erf form of GELU into that op."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", shape, dt)]
    z = 0 if dt == U8 else -128
    c.add(_q(p, "d0", f"{p}x", f"{p}a", 0.03, z + 128, dt, True))
    c.nodes.append(helper.make_node("Gelu", [f"{p}a"], [f"{p}b"], domain="com.microsoft"))
    c.add(_q(p, "q0", f"{p}b", f"{p}y", 0.02, z + 10, dt, False))
    return c


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
def test_contrib_gelu_group_is_a_table_equal_to_onnxruntime(dt: int) -> None:
    a = _unary_chain("a_", [256], dt).model_parts("a_y", [256], dt)
    b = _contrib_gelu_chain("b_", [256], dt).model_parts("b_y", [256], dt)
    pair, plain = _models(a, b)
    contrib = helper.make_opsetid("com.microsoft", 1)
    for m in (pair, plain, pair.functions[0]):
        m.opset_import.append(contrib)
    pair.functions[0].value_info.append(vi("b_b", [256]))  # as the pass gives it: ONNX cannot infer contrib ops
    assert _opcodes(lower_pair(pair, pair.graph.node[0])).count(Opcode.QLUT) == 4
    for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(3), exhaustive=True)):
        assert d.max() == 0, (d.max(), (d > 0).sum())


def _pool_chain(p: str, shape: list[int], dt: int, same: bool) -> Chain:
    """DQ -> MaxPool 3x3 s2 p1 -> Q (the same or other parameters), then DQ -> GlobalAveragePool -> Q."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", shape, dt)]
    z = 0 if dt == U8 else -128
    c.add(_q(p, "d0", f"{p}x", f"{p}a", 0.037, z + 90, dt, True))
    c.nodes.append(helper.make_node("MaxPool", [f"{p}a"], [f"{p}b"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    c.add(_q(p, "q0", f"{p}b", f"{p}c", 0.037 if same else 0.021, z + (90 if same else 17), dt, False))
    c.add(_q(p, "d1", f"{p}c", f"{p}cf", 0.037 if same else 0.021, z + (90 if same else 17), dt, True))
    c.nodes.append(helper.make_node("GlobalAveragePool", [f"{p}cf"], [f"{p}g"]))
    c.add(_q(p, "q1", f"{p}g", f"{p}y", 0.013, z + 60, dt, False))
    return c


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
def test_pool_groups_lower_to_integer_pools_and_equal_onnxruntime(dt: int) -> None:
    """MaxPool with equal and with other quantization, GlobalAveragePool over 9x13 and 5x5 planes: the
    integer ops, bit for bit equal to ORT (its QLinearGlobalAveragePool and integer MaxPool)."""
    a = _pool_chain("a_", [2, 5, 17, 25], dt, True).model_parts("a_y", [2, 5, 1, 1], dt, "a_c")
    b = _pool_chain("b_", [1, 7, 9, 9], dt, False).model_parts("b_y", [1, 7, 1, 1], dt, "b_c")
    a[2][0].type.tensor_type.shape.dim[2].dim_value, a[2][0].type.tensor_type.shape.dim[3].dim_value = 9, 13
    b[2][0].type.tensor_type.shape.dim[2].dim_value, b[2][0].type.tensor_type.shape.dim[3].dim_value = 5, 5
    pair, plain = _models(a, b)
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops == [Opcode.QMAXPOOL, Opcode.QGLOBAL_AVGPOOL] * 2, ops
    for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(3))):
        assert d.max() == 0, (d.max(), (d > 0).sum())


def _clamped(p: str, op: str, clamp: str, dt: int) -> Chain:
    """DQ(x) op DQ(w) -> Relu or Clip(0, 6) -> Q, x and w [4, 33]."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", [4, 33], dt), vi(f"{p}w", [4, 33], dt)]
    z = 0 if dt == U8 else -128
    c.add(_q(p, "dx", f"{p}x", f"{p}xf", 0.04, z + 120, dt, True))
    c.add(_q(p, "dw", f"{p}w", f"{p}wf", 0.03, z + 130, dt, True))
    c.nodes.append(helper.make_node(op, [f"{p}xf", f"{p}wf"], [f"{p}s"]))
    if clamp == "Relu":
        c.nodes.append(helper.make_node("Relu", [f"{p}s"], [f"{p}r"]))
    else:
        c.inits += [init(f"{p}lo", np.float32(0)), init(f"{p}hi", np.float32(6))]
        c.nodes.append(helper.make_node("Clip", [f"{p}s", f"{p}lo", f"{p}hi"], [f"{p}r"]))
    c.add(_q(p, "qy", f"{p}r", f"{p}y", 0.05 if op == "Add" else 0.01, z + 70, dt, False))
    return c


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
def test_relu_and_clip_fold_into_the_output_range(dt: int) -> None:
    """Add -> Relu -> Q and Mul -> Clip(0, 6) -> Q: one QADD/QMUL whose range the clamp narrows
    (Q is monotone: exact); ORT runs these groups in float, so within one step of it."""
    a = _clamped("a_", "Add", "Relu", dt).model_parts("a_y", [4, 33], dt)
    b = _clamped("b_", "Mul", "Clip", dt).model_parts("b_y", [4, 33], dt)
    pair, plain = _models(a, b)
    assert _opcodes(lower_pair(pair, pair.graph.node[0])) == [Opcode.QADD, Opcode.QMUL]
    for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(11))):
        assert d.max() <= 1 and (d == 0).mean() >= 0.99, (d.max(), (d == 0).mean())


def _concat_chain(p: str, dt: int, axis: int) -> Chain:
    """DQ(x1), DQ(x2), DQ(x3) -> Concat -> Q: x1 with Y's parameters (an identity table), x2 and x3
    with others (requantised, x3 saturating)."""
    c = Chain(p)
    shapes = [[2, 3, 5], [2, 4, 5], [2, 1, 5]] if axis == 1 else [[2, 3, 5], [2, 3, 2], [2, 3, 7]]
    c.inputs = [vi(f"{p}x{i}", s, dt) for i, s in enumerate(shapes)]
    z = 0 if dt == U8 else -128
    for i, (scale, zp) in enumerate([(0.05, 100), (0.031, 7), (0.2, 201)]):
        c.add(_q(p, f"d{i}", f"{p}x{i}", f"{p}f{i}", scale, z + zp, dt, True))
    c.nodes.append(helper.make_node("Concat", [f"{p}f0", f"{p}f1", f"{p}f2"], [f"{p}cat"], axis=axis))
    c.add(_q(p, "q", f"{p}cat", f"{p}y", 0.05, z + 100, dt, False))
    return c


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
def test_concat_groups_lower_to_qconcat_and_equal_onnxruntime(dt: int) -> None:
    """Concat on axis 1 and on the last axis (written -1): one QCONCAT each, equal to ORT's QLinearConcat."""
    a = _concat_chain("a_", dt, 1).model_parts("a_y", [2, 8, 5], dt)
    b = _concat_chain("b_", dt, -1).model_parts("b_y", [2, 3, 14], dt)
    pair, plain = _models(a, b)
    assert _opcodes(lower_pair(pair, pair.graph.node[0])) == [Opcode.QCONCAT, Opcode.QCONCAT]
    for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(2))):
        assert d.max() == 0, (d.max(), (d > 0).sum())


def _group_then_maxpool(
    p: str, shape: list[int], dt: int, xq: tuple[float, int], op: onnx.NodeProto, yq: tuple[float, int]
) -> Chain:
    """DQ (scale, zero point xq) -> op (a -> b) -> Q (yq), then DQ -> MaxPool 1x1 -> Q (a second
    integer group after it)."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", shape, dt)]
    c.add(_q(p, "d0", f"{p}x", f"{p}a", *xq, dt, True))
    c.nodes.append(op)
    c.add(_q(p, "q0", f"{p}b", f"{p}c", *yq, dt, False))
    c.add(_q(p, "d1", f"{p}c", f"{p}cf", *yq, dt, True))
    c.nodes.append(helper.make_node("MaxPool", [f"{p}cf"], [f"{p}m"], kernel_shape=[1, 1]))
    c.add(_q(p, "q1", f"{p}m", f"{p}y", *yq, dt, False))
    return c


def _avgpool_chain(p: str, shape: list[int], dt: int, **pool) -> Chain:
    """DQ -> AveragePool -> Q, then DQ -> MaxPool 1x1 -> Q."""
    z = 0 if dt == U8 else -128
    pool_node = helper.make_node("AveragePool", [f"{p}a"], [f"{p}b"], **pool)
    return _group_then_maxpool(p, shape, dt, (0.037, z + 90), pool_node, (0.011, z + 17))


AVGPOOLS = [  # (input shape, output H W, AveragePool attributes)
    ([2, 5, 17, 25], (9, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4, "count_include_pad": 1}),
    ([1, 7, 9, 9], (4, 4), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4}),
    ([1, 3, 8, 9], (4, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ([1, 4, 6, 7], (3, 4), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 1], "ceil_mode": 1}),
]


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
@pytest.mark.parametrize("case", range(len(AVGPOOLS) - 1))
def test_avgpool_groups_lower_to_qavgpool_and_equal_onnxruntime(dt: int, case: int) -> None:
    """Padding counted or not, ceil mode, odd planes: QAVGPOOL bit for bit equal to ORT, whose QDQ
    fusion runs QLinearAveragePool for the same group."""
    pair_of = []
    for p, (shape, (oh, ow), pool) in zip(("a_", "b_"), AVGPOOLS[case : case + 2]):
        pair_of.append(_avgpool_chain(p, shape, dt, **pool).model_parts(f"{p}y", [*shape[:2], oh, ow], dt, f"{p}c"))
    pair, plain = _models(*pair_of)
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops == [Opcode.QAVGPOOL, Opcode.QMAXPOOL] * 2, ops
    for seed in range(3):
        for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(seed))):
            assert d.max() == 0, (d.max(), (d > 0).sum())


QEMU_AVGPOOLS = [  # HVX's fixed-point rows (3x3 s1 p1; 2x2 s2), its f32 estimate (5x5 s3 p2) and ORT's
    ([1, 8, 28, 30], (28, 30), {"kernel_shape": [3, 3], "pads": [1] * 4}),
    ([2, 6, 19, 33], (10, 17), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ([1, 5, 21, 140], (7, 47), {"kernel_shape": [5, 5], "strides": [3, 3], "pads": [2] * 4, "count_include_pad": 1}),
]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("qemu-hexagon") is None or not (REPO / "build/hexagon-v73/hexfuse_emulate.elf").is_file(),
    reason="needs qemu-hexagon and the Hexagon images (bash dsp/scripts/build_hexagon.sh)",
)
@pytest.mark.parametrize("dt", [U8, I8])
def test_avgpool_pairs_under_qemu_equal_the_host_kernel(dt: int, tmp_path: Path) -> None:
    """QAVGPOOL's HVX path (window sums, fixed-point outputs, the f32 path near ties) under
    qemu-hexagon v73 on two AveragePool groups: bit for bit the host kernel, as `emulate` checks."""
    for case in range(len(QEMU_AVGPOOLS) - 1):
        pair_of = []
        for p, (shape, (oh, ow), pool) in zip(("a_", "b_"), QEMU_AVGPOOLS[case : case + 2]):
            pair_of.append(_avgpool_chain(p, shape, dt, **pool).model_parts(f"{p}y", [*shape[:2], oh, ow], dt))
        pair, plain = _models(*pair_of)
        assert _opcodes(lower_pair(pair, pair.graph.node[0])) == [Opcode.QAVGPOOL, Opcode.QMAXPOOL] * 2
        model, report = (tmp_path / f"{case}{ext}" for ext in (".onnx", ".json"))
        with_program, failed = attach_programs(pair)
        assert not failed, failed
        onnx.save(with_program, str(model))
        proc = run_cli("emulate", model, "--arch", "v73", "--seed", str(case), "--json", report, "-q")
        assert proc.returncode == 0, proc.stderr
        pairs = json.loads(report.read_text())["pairs"]
        assert len(pairs) == 1 and pairs[0]["bit_exact"] and "qavgpool" in pairs[0]["op_names"], pairs


def test_random_inputs_span_8_and_16_bit_codes_and_keep_other_integers_0_or_1() -> None:
    """verify.random_inputs (emulate's, rewrite's and colocate's seeded inputs): a u8/i8/u16/i16 graph
    input takes every code of its type, so a QDQ group fed by one rounds rather than saturates; int32,
    int64 and bool inputs (ids, lengths, rates) stay 0 or 1, and only they are named as such."""
    types = {"u8": TensorProto.UINT8, "i8": TensorProto.INT8, "u16": TensorProto.UINT16, "i16": TensorProto.INT16}
    others = {"i32": TensorProto.INT32, "i64": TensorProto.INT64, "b": TensorProto.BOOL}
    every = {**types, **others}
    nodes = [helper.make_node("Identity", [n], [n + "_y"]) for n in every]
    graph = helper.make_graph(
        nodes,
        "inputs",
        [helper.make_tensor_value_info(n, t, [256, 256]) for n, t in every.items()],
        [helper.make_tensor_value_info(n + "_y", t, [256, 256]) for n, t in every.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = verify.random_inputs(verify.session(model.SerializeToString()), seed=0)
    for name in types:
        info, x = np.iinfo(feeds[name].dtype), feeds[name].astype(np.int64)
        step = (info.max - info.min) // 256  # 0 for 8 bits: both ends exactly
        assert x.min() <= info.min + step and x.max() >= info.max - step, name
        assert len(np.unique(x)) >= min(256, info.max - info.min + 1), name
    for name in others:
        assert set(np.unique(feeds[name]).tolist()) == {0, 1}, name
    assert verify.integer_inputs(model) == list(others)


def test_avgpool_over_the_plane_is_the_global_pool_and_dilated_stays_float() -> None:
    """ORT's QLinearAveragePool falls back to its global pool for a window over the whole plane
    without pads; it has no dilations, so a dilated AveragePool keeps the float path."""
    whole = _avgpool_chain("a_", [1, 3, 5, 6], U8, kernel_shape=[5, 6]).model_parts("a_y", [1, 3, 1, 1], U8)
    dilated = _avgpool_chain("b_", [1, 2, 9, 9], U8, kernel_shape=[3, 3], dilations=[2, 2])
    pair, _ = _models(whole, dilated.model_parts("b_y", [1, 2, 5, 5], U8))
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops[:2] == [Opcode.QGLOBAL_AVGPOOL, Opcode.QMAXPOOL] and Opcode.AVGPOOL in ops[2:], ops
    assert Opcode.QAVGPOOL not in ops, ops


def _resize_chain(p: str, shape: list[int], dt: int, scales: list[float], same: bool, **modes) -> Chain:
    """DQ -> Resize nearest -> Q (the same or other parameters), then DQ -> MaxPool 1x1 -> Q."""
    z = 0 if dt == U8 else -128
    resize = helper.make_node("Resize", [f"{p}a", "", f"{p}scales"], [f"{p}b"], mode="nearest", **modes)
    yq = (0.037, z + 90) if same else (0.023, z + 40)
    c = _group_then_maxpool(p, shape, dt, (0.037, z + 90), resize, yq)
    c.inits.append(init(f"{p}scales", np.array(scales, np.float32)))
    return c


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
@pytest.mark.parametrize("same", [True, False])
def test_nearest_resize_groups_lower_to_qresize_and_equal_onnxruntime(dt: int, same: bool) -> None:
    """x2 asymmetric/floor (ppocr_det's), and x1.5 by 0.6 half_pixel/round_prefer_ceil: QRESIZE bit for
    bit equal to ORT, which copies the bytes when the parameters are equal and runs the group in
    float when they differ."""
    a = _resize_chain(
        "a_", [2, 3, 5, 7], dt, [1, 1, 2, 2], same, coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    ).model_parts("a_y", [2, 3, 10, 14], dt, "a_c")
    b = _resize_chain("b_", [1, 4, 6, 10], dt, [1, 1, 1.5, 0.6], same, nearest_mode="round_prefer_ceil")
    pair, plain = _models(a, b.model_parts("b_y", [1, 4, 9, 6], dt, "b_c"))
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops == [Opcode.QRESIZE, Opcode.QMAXPOOL] * 2, ops
    for seed in range(3):
        for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(seed))):
            assert d.max() == 0, (d.max(), (d > 0).sum())


def _softmax_chain(p: str, shape: list[int], dt: int, axis: int, sy: float) -> Chain:
    """DQ -> Softmax -> Q, then DQ -> MaxPool 1x1 -> Q."""
    z = 0 if dt == U8 else -128
    softmax = helper.make_node("Softmax", [f"{p}a"], [f"{p}b"], axis=axis)
    return _group_then_maxpool(p, shape, dt, (0.061, z + 90), softmax, (sy, z))


@needs_host
@pytest.mark.parametrize("dt", [U8, I8])
def test_softmax_groups_lower_to_qsoftmax_and_equal_onnxruntime(dt: int) -> None:
    """The last axis of attention scores and a middle axis, output scales 1/256 (a line whose one
    value takes all gives q = 256: saturated, in i8 too) and 1/255: QSOFTMAX bit for bit equal to
    ORT's QLinearSoftmax."""
    a = _softmax_chain("a_", [2, 4, 9, 33], dt, -1, 1 / 256).model_parts("a_y", [2, 4, 9, 33], dt, "a_c")
    b = _softmax_chain("b_", [1, 7, 5, 6], dt, 1, 1 / 255).model_parts("b_y", [1, 7, 5, 6], dt, "b_c")
    pair, plain = _models(a, b)
    ops = _opcodes(lower_pair(pair, pair.graph.node[0]))
    assert ops == [Opcode.QSOFTMAX, Opcode.QMAXPOOL] * 2, ops
    for seed in range(3):
        feeds = _feeds(plain, np.random.default_rng(seed))
        feeds["a_x"][0, 0, 0] = feeds["a_x"][0, 0, 0, 0]  # a line of one value: 1/33 each
        info = np.iinfo(feeds["a_x"].dtype)
        feeds["a_x"][0, 0, 1], feeds["a_x"][0, 0, 1, 5] = info.min, info.max  # one value takes all: q = 256
        for d in _compare(pair, plain, feeds):
            assert d.max() == 0, (d.max(), (d > 0).sum())


@needs_host
def test_qsoftmax_divides_in_double_as_onnxruntime() -> None:
    """ORT 1.32's QLinearSoftmax divides t * floor(1 / s_y) by the f32 sum in double, its table's
    shift a logf: dividing in f32 rounded a quotient just under k + 0.5 to the tie and up
    (svtrv2_captcha u8u8: one byte of 524288, grown to 23 steps by the layers after). Lines near
    their maximum, as attention scores are, at svtrv2's scales: 9 bytes of these 11.5 M differed."""
    shapes = {"a_": [1, 8, 2500, 256], "b_": [1, 16, 6250, 64]}
    tasks = []
    for p, shape in shapes.items():
        softmax = helper.make_node("Softmax", [f"{p}a"], [f"{p}b"], axis=-1)
        chain = _group_then_maxpool(p, shape, U8, (0.065728046, 127), softmax, (1 / 255 if p == "a_" else 1 / 256, 0))
        tasks.append(chain.model_parts(f"{p}y", shape, U8, f"{p}c"))
    pair, plain = _models(*tasks)
    rng = np.random.default_rng(3)
    feeds = {f"{p}x": np.clip(rng.normal(200, 40, shape), 0, 255).astype(np.uint8) for p, shape in shapes.items()}
    for d in _compare(pair, plain, feeds):
        assert d.max() == 0, (d.max(), (d > 0).sum())


def _symbolic_softmax_model(path, axis: int) -> None:
    """x[1, t, 64] -> Q, then two branches DQ -> MatMul(DQ w) -> Q -> DQ -> Softmax(axis) -> Q -> DQ."""
    nodes, inits = [], []

    def q(src: str, dst: str, scale: float, zp: int, dq: bool = False) -> None:
        inits.extend([init(f"{dst}_s", np.float32(scale)), init(f"{dst}_z", np.uint8(zp))])
        nodes.append(
            helper.make_node("DequantizeLinear" if dq else "QuantizeLinear", [src, f"{dst}_s", f"{dst}_z"], [dst])
        )

    q("x", "xq", 0.05, 128)
    for br in "ab":
        inits.append(init(f"{br}w", np.random.default_rng(1).integers(0, 256, (64, 64)).astype(np.uint8)))
        q("xq", f"{br}0", 0.05, 128, dq=True)
        q(f"{br}w", f"{br}wf", 0.01, 128, dq=True)
        nodes.append(helper.make_node("MatMul", [f"{br}0", f"{br}wf"], [f"{br}1"]))
        q(f"{br}1", f"{br}2", 0.2, 128)
        q(f"{br}2", f"{br}3", 0.2, 128, dq=True)
        nodes.append(helper.make_node("Softmax", [f"{br}3"], [f"{br}4"], axis=axis))
        q(f"{br}4", f"{br}5", 1 / 256, 0)
        q(f"{br}5", f"{br}y", 1 / 256, 0, dq=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "t", 64])
    ys = [helper.make_tensor_value_info(f"{b}y", TensorProto.FLOAT, [1, "t", 64]) for b in "ab"]
    graph = helper.make_graph(nodes, "symbolic_qdq_softmax", [x], ys, initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10), path)


@pytest.mark.parametrize("axis,softmax", [(1, Opcode.SOFTMAX), (2, Opcode.QSOFTMAX)])
def test_a_softmax_over_a_symbolic_axis_keeps_the_float_path(tmp_path, axis: int, softmax: Opcode) -> None:
    """QSOFTMAX's table follows the axis length: over a symbolic axis the v2 program could not carry
    it (the safety net refused the pair: "a constant's data depends on the input shape"), so that
    group runs DQ -> SOFTMAX -> Q; over a static axis it stays QSOFTMAX."""
    from hexfuse_onnx import pipeline
    from hexfuse_onnx.lowering.program import layout_of

    _symbolic_softmax_model(tmp_path / "m.onnx", axis)
    result = pipeline.rewrite(tmp_path / "m.onnx", tmp_path / "f.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    program = next(a.s for n in onnx.load(str(result.output)).graph.node for a in n.attribute if a.name == "program")
    assert layout_of(program).version == 2
    ops = _opcodes(program)
    assert ops.count(softmax) == 2 and ops.count(Opcode.QMATMUL) == 2, ops


def _add_quantized_one(p: str) -> Chain:
    """GPT-2's tanh GELU as the QNN recipe quantises it: DQ(tanh) + DQ(1.0 as u8 255 at 1/255) -> Q at
    2/255. Every result is a tie ((2q - 1) / 2 output steps), which ORT's QLinearAdd and its float
    path round to different sides (103 of 256 codes)."""
    c = Chain(p)
    c.inputs = [vi(f"{p}x", [256], U8)]
    c.add(_q(p, "dx", f"{p}x", f"{p}xf", 2 / 255, 128, U8, True))
    c.inits.append(init(f"{p}one", np.array(255, np.uint8)))
    c.add(_q(p, "d1", f"{p}one", f"{p}onef", 1 / 255, 0, U8, True))
    c.nodes.append(helper.make_node("Add", [f"{p}xf", f"{p}onef"], [f"{p}sf"]))
    c.add(_q(p, "qy", f"{p}sf", f"{p}y", 2 / 255, 0, U8, False))
    return c


@needs_host
def test_a_table_of_an_add_of_a_dequantized_constant_is_what_ort_fuses() -> None:
    """The table of DQ(x) + DQ(constant) -> Q is ORT's run of the group with the constant still a
    DequantizeLinear (it fuses the group into QLinearAdd); with the constant as a float it ran the
    float path, one step off on every tie: GPT-2's QDQ MLP pair failed verification downstream."""
    a = _unary_chain("a_", [256], U8).model_parts("a_y", [256], U8)
    b = _add_quantized_one("b_").model_parts("b_y", [256], U8)
    pair, plain = _models(a, b)
    assert Opcode.QLUT in _opcodes(lower_pair(pair, pair.graph.node[0]))
    for d in _compare(pair, plain, _feeds(plain, np.random.default_rng(4), exhaustive=True)):
        assert d.max() == 0, (d.max(), (d > 0).sum())
