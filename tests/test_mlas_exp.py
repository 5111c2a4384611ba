"""An Exp, Erf, Gelu, Softmax, LogSoftmax, LayerNormalization, RMS norm, GlobalAveragePool, ReduceSum, ReduceMean or
bilinear Resize whose result a QuantizeLinear reads (a 16-bit QDQ group's op) computes on the host
kernel as ONNX Runtime 1.32 does on x86-64 with AVX512F, or with AVX2 and FMA3 only (MLAS's kernels
for the CPU: dsp/src/ops/mlas_math.h, norm.c, pool.c, reduce.c, resize.c): its f32 result equals ORT's
bit for bit, at line lengths that cross the kernels'
lanes and blocks, on other axes than the last, and with values far below the line's maximum (exps that
underflow to denormals and 0) or large enough to overflow. ORT runs the model as the verification does
(1 intra-op thread)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_lower import init, needs_host, pair_model, program_inputs, vi
from test_mlas_order import assert_equals_ort, quantized_op

from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.runtime import HostKernel

RNG = np.random.default_rng(16)

CPUINFO = Path("/proc/cpuinfo")
needs_fma3 = pytest.mark.skipif(
    not CPUINFO.exists() or " fma " not in CPUINFO.read_text(),
    reason="the kernel follows MLAS's AVX512F and FMA3 kernels, not its SSE2 ones",
)


def softmax(shape: list[int], axis: int, op: str = "Softmax") -> onnx.ModelProto:
    node = helper.make_node(op, ["z"], ["y"], name=op.lower(), axis=axis)
    return quantized_op(node, {"z": shape}, shape)


def unary(op: str, shape: list[int]) -> onnx.ModelProto:
    return quantized_op(helper.make_node(op, ["z"], ["y"], name=op.lower()), {"z": shape}, shape)


def layernorm(shape: list[int], bias: bool) -> onnx.ModelProto:
    ins = ["z", "g", "b"] if bias else ["z", "g"]
    node = helper.make_node("LayerNormalization", ins, ["y"], name="layernorm", axis=-1, epsilon=1e-5)
    shapes = {"z": shape, "g": shape[-1:], "b": shape[-1:]}
    return quantized_op(node, {n: shapes[n] for n in ins}, shape)


def rmsnorm(op: str, shape: list[int]) -> onnx.ModelProto:
    """ONNX RMSNormalization (opset 23) or com.microsoft's SkipSimplifiedLayerNormalization (its sum output
    unused) over the last axis. (ORT's SimplifiedLayerNormalization, the same kernel as RMSNormalization,
    is left out: ORT 1.32 crashes creating a session of this pair with one.)"""
    skip = op == "SkipSimplifiedLayerNormalization"
    ins = ["z", "k", "g"] if skip else ["z", "g"]
    domain = "com.microsoft" if skip else ""
    node = helper.make_node(
        op, ins, ["y"], name="rmsnorm", domain=domain, epsilon=1e-5, **({} if skip else {"axis": -1})
    )
    m = quantized_op(node, {"z": shape, "k": shape, "g": shape[-1:]} if skip else {"z": shape, "g": shape[-1:]}, shape)
    for imports in (m.opset_import, m.functions[0].opset_import):
        next(o for o in imports if o.domain == "").version = 23
        imports.append(helper.make_opsetid("com.microsoft", 1))
    m.functions[0].value_info.extend(o for o in m.graph.output if o.name in ("y", "yq"))
    return m


def resize(shape: list[int], scales: list[float], **attrs: object) -> onnx.ModelProto:
    node = helper.make_node("Resize", ["z", "", "sc"], ["y"], name="resize", mode="linear", **attrs)
    out = [int(d * s) for d, s in zip(shape, scales, strict=True)]
    return quantized_op(node, {"z": shape}, out, {"sc": np.array(scales, np.float32)})


def global_avgpool(shape: list[int]) -> onnx.ModelProto:
    node = helper.make_node("GlobalAveragePool", ["z"], ["y"], name="gap")
    return quantized_op(node, {"z": shape}, shape[:2] + [1] * (len(shape) - 2))


def reduce(op: str, shape: list[int], axes: list[int]) -> onnx.ModelProto:
    node = helper.make_node(op, ["z", "axes"], ["y"], name=op.lower())
    out = [1 if i in axes else d for i, d in enumerate(shape)]
    return quantized_op(node, {"z": shape}, out, {"axes": np.array(axes, np.int64)})


CASES = {
    "softmax_d1": lambda: softmax([5, 1], -1),
    "softmax_d15": lambda: softmax([7, 15], -1),
    "softmax_d17": lambda: softmax([6, 17], -1),
    "softmax_d49": lambda: softmax([4, 49], -1),
    "softmax_d100": lambda: softmax([3, 5, 100], -1),
    "softmax_d1001": lambda: softmax([2, 1001], -1),
    "softmax_axis1": lambda: softmax([2, 37, 6], 1),
    # (x - max) - logf(sum): the sums as Softmax's
    "log_softmax_d1": lambda: softmax([5, 1], -1, "LogSoftmax"),
    "log_softmax_d17": lambda: softmax([6, 17], -1, "LogSoftmax"),
    "log_softmax_d160": lambda: softmax([3, 160], -1, "LogSoftmax"),
    "log_softmax_d1001": lambda: softmax([2, 1001], -1, "LogSoftmax"),
    "log_softmax_axis1": lambda: softmax([2, 37, 6], 1, "LogSoftmax"),
    "exp_odd": lambda: unary("Exp", [3, 7, 41]),
    # erf's two polynomials split at |x| = 0.921875; 1.0 from |x| = 3.78 up
    "erf_odd": lambda: unary("Erf", [5, 77]),
    "gelu_odd": lambda: unary("Gelu", [2, 9, 43]),
    # 8 FMA lanes, then groups of 4 as products, then 1-3 by FMA
    "layernorm_d8": lambda: layernorm([6, 8], True),
    "layernorm_d13": lambda: layernorm([5, 13], True),
    "layernorm_d15_no_bias": lambda: layernorm([5, 15], False),
    "layernorm_d100": lambda: layernorm([2, 3, 100], True),
    "layernorm_d131": lambda: layernorm([4, 131], False),
    # d < 8: Welford's mean and deviations
    "layernorm_d1": lambda: layernorm([5, 1], True),
    "layernorm_d2_no_bias": lambda: layernorm([6, 2], False),
    "layernorm_d3": lambda: layernorm([2, 4, 3], True),
    "layernorm_d7": lambda: layernorm([7, 7], True),
    "layernorm_d7_no_bias": lambda: layernorm([3, 7], False),
    # d < 16 (and a Skip norm at any d): products in order; d >= 16 the LayerNormalization's lanes
    "rmsnorm_d5": lambda: rmsnorm("RMSNormalization", [6, 5]),
    "rmsnorm_d15": lambda: rmsnorm("RMSNormalization", [4, 15]),
    "rmsnorm_d16": lambda: rmsnorm("RMSNormalization", [4, 16]),
    "rmsnorm_d64": lambda: rmsnorm("RMSNormalization", [1, 3, 64]),
    "rmsnorm_d131": lambda: rmsnorm("RMSNormalization", [2, 131]),
    "skip_simplified_d7": lambda: rmsnorm("SkipSimplifiedLayerNormalization", [1, 4, 7]),
    "skip_simplified_d64": lambda: rmsnorm("SkipSimplifiedLayerNormalization", [1, 3, 64]),
    # 4 lanes, then the last 1-3 one by one; 1, 2 and 3 spatial axes
    "global_avgpool_7x7": lambda: global_avgpool([2, 3, 7, 7]),
    "global_avgpool_40x40": lambda: global_avgpool([1, 8, 40, 40]),
    # channels a multiple of the NCHWc block (8; 16 with AVX512F): ORT's NCHWc pool, values in order
    "global_avgpool_nchwc": lambda: global_avgpool([1, 16, 9, 11]),
    "global_avgpool_24ch": lambda: global_avgpool([2, 24, 5, 6]),
    "global_avgpool_1x3": lambda: global_avgpool([1, 4, 1, 3]),
    "global_avgpool_1d": lambda: global_avgpool([1, 3, 17]),
    "global_avgpool_3d": lambda: global_avgpool([1, 2, 3, 4, 5]),
    # bilinear: 4 taps, each times its weights' product, added in order (ranks 2 and 4)
    "resize_x4": lambda: resize([1, 2, 5, 7], [1, 1, 4, 4]),
    "resize_2x3": lambda: resize([1, 3, 6, 5], [1, 1, 2, 3]),
    "resize_rank2": lambda: resize([5, 7], [2, 3]),
    "resize_align_corners": lambda: resize([1, 1, 6, 9], [1, 1, 3, 2], coordinate_transformation_mode="align_corners"),
    "resize_asymmetric": lambda: resize([2, 1, 7, 4], [1, 1, 2, 4], coordinate_transformation_mode="asymmetric"),
    # ORT's fast shapes (axes of 1 dropped): R and KR Eigen's 4-float packets from the 16-byte boundary,
    # RK rows in order, KRK MLAS's 1-row kernel (groups of 4 rows), RKR Eigen's sum per block
    "reducesum_r": lambda: reduce("ReduceSum", [1, 103], [1]),
    "reducesum_kr": lambda: reduce("ReduceSum", [6, 37], [1]),
    "reducesum_kr_short": lambda: reduce("ReduceSum", [5, 3], [1]),
    "reducesum_kr_long": lambda: reduce("ReduceSum", [3, 1001], [1]),
    "reducesum_rk": lambda: reduce("ReduceSum", [1, 37, 45], [1]),
    "reducesum_krk": lambda: reduce("ReduceSum", [2, 31, 7], [1]),
    "reducesum_krk_merged": lambda: reduce("ReduceSum", [2, 3, 4, 5], [1, 2]),
    "reducesum_rkr": lambda: reduce("ReduceSum", [3, 17, 9], [0, 2]),
    "reducemean_kr": lambda: reduce("ReduceMean", [4, 13], [1]),
    "reducemean_rk": lambda: reduce("ReduceMean", [7, 30], [0]),
    "reducemean_krk": lambda: reduce("ReduceMean", [2, 9, 5], [1]),
}


def values(shape: list[int], spread: float) -> np.ndarray:
    """Normal values times `spread`, a few of them far out (a mask's -1e4, -90 .. -110: denormal exps)"""
    x = (RNG.standard_normal(shape) * spread).astype(np.float32)
    flat = x.reshape(-1)
    picks = RNG.choice(flat.size, size=max(1, flat.size // 10), replace=False)
    flat[picks] = RNG.choice(np.array([-1e4, -90.0, -100.5, -103.0, -104.5, -110.0], np.float32), size=picks.size)
    return x


@needs_host
@needs_fma3
@pytest.mark.parametrize("spread", [1.0, 8.0, 30.0])
@pytest.mark.parametrize("name", sorted(CASES))
def test_quantized_exp_and_softmax_equal_ort_bit_for_bit(name: str, spread: float) -> None:
    m = CASES[name]()
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    feeds = {n: RNG.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    feeds["z"] = values(shapes["z"], spread)
    assert_equals_ort(m, feeds)


def dequantized_global_avgpool(shape: list[int]) -> onnx.ModelProto:
    """DQ(u16 zq) -> GlobalAveragePool -> Q as a QDQ model has it, in task B of a pair (`quantized_op`'s)."""
    u16 = TensorProto.UINT16
    nodes = [
        helper.make_node("DequantizeLinear", ["zq", "s", "zp"], ["z"], name="dq"),
        helper.make_node("GlobalAveragePool", ["z"], ["y"], name="gap"),
        helper.make_node("QuantizeLinear", ["y", "s", "zp"], ["yq"], name="q"),
    ]
    out = shape[:2] + [1] * (len(shape) - 2)
    inits = [init("s", np.float32(1e-3)), init("zp", np.uint16(32768))]
    b_inputs = [vi("zq", shape, u16), vi("s", []), vi("zp", [], u16)]
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    return pair_model(
        a, nodes, [vi("x", [2, 4])], b_inputs, [vi("ya", [2, 4])], [vi("y", out), vi("yq", out, u16)], inits, 21
    )


@needs_host
@needs_fma3
@pytest.mark.parametrize("channels", [16, 192])
def test_a_dequantized_global_avgpool_sums_as_orts_plain_pool(channels: int) -> None:
    """ORT 1.32 takes its NCHWc pool (values in order) for a GlobalAveragePool of a graph input whose
    channels are a multiple of the NCHWc block, but not of a DequantizeLinear's output: MLAS's plain pool
    kernel (4 lanes) there. The kernel took the NCHWc order for both: ppocr_det u16u8's 192-channel
    squeeze-excite pools were a step off (in order 18 of 192 channels equal to ORT, 4 lanes 192)."""
    shape = [1, channels, 20, 20]
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32), "zq": RNG.integers(0, 65536, shape).astype(np.uint16)}
    assert_equals_ort(dequantized_global_avgpool(shape), feeds)


@needs_host
@needs_fma3
@pytest.mark.parametrize("op", ["Exp", "Erf", "Gelu"])
def test_quantized_unary_of_extremes_equals_ort(op: str) -> None:
    """Exp: overflow to inf from 88.72 up, denormals and 0 below -87.3, NaN in NaN out, -inf to 0"""
    m = unary(op, [1, 12])
    z = np.array([[88.72, 88.73, 89.0, 200.0, -87.5, -100.0, -103.9, -104.0, -1e30, np.nan, -np.inf, 0.0]], np.float32)
    feeds = {"x": np.ones([2, 4], np.float32), "z": z}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    assert got[1].tobytes() == ref[1].tobytes()
