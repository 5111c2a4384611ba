"""A float Conv/Gemm/MatMul whose result a QuantizeLinear reads (a 16-bit QDQ group's op) sums on the
host kernel as ONNX Runtime's MLAS does (dsp/src/ops/sgemm_mlas.h): its f32 result equals ORT's bit for
bit, at sizes that cross MLAS's K blocks and its 1-row kernel's groups of 4, whatever OpenBLAS kernel
the machine picks. ORT runs the model as the verification does (1 intra-op thread, its default
optimizations); the weights are graph inputs, as a DequantizeLinear's output is, so ORT neither
pre-packs them nor rewrites the Conv to NCHWc."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_lower import init, needs_host, pair_model, program_inputs, vi

from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.runtime import HostKernel

RNG = np.random.default_rng(12)


def quantized_op(
    op: onnx.NodeProto,
    inputs: dict[str, list[int]],
    out: list[int],
    consts: dict[str, np.ndarray] | None = None,
    before: list[onnx.NodeProto] | None = None,
) -> onnx.ModelProto:
    """A pair whose task A is a Relu and task B `op` (output "y") and a u16 QuantizeLinear of y; y is a
    graph output too. `consts`: initializers; `before`: nodes before op (a DequantizeLinear of them)."""
    q = helper.make_node("QuantizeLinear", ["y", "s", "zp"], ["yq"], name="q")
    consts = consts or {}
    inits = [init("s", np.float32(1e-3)), init("zp", np.uint16(32768))] + [init(n, v) for n, v in consts.items()]
    extra = [vi("s", []), vi("zp", [], TensorProto.UINT16)] + [vi(n, list(v.shape)) for n, v in consts.items()]
    b_inputs = [vi(n, s) for n, s in inputs.items()] + extra
    b_outputs = [vi("y", out), vi("yq", out, TensorProto.UINT16)]
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    return pair_model(
        a, [*(before or []), op, q], [vi("x", [2, 4])], b_inputs, [vi("ya", [2, 4])], b_outputs, inits, 21
    )


def assert_equals_ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """The one-op pair `quantized_op` makes, on the host kernel and on ORT at one thread: its f32 result
    (output 1) bit for bit, its quantized one (output 2) equal."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    assert got[1].tobytes() == ref[1].tobytes()
    assert np.array_equal(got[2], ref[2])


def conv(cin: int, cout: int, hw: tuple[int, int], k: tuple[int, int], **attrs: object) -> onnx.ModelProto:
    group = int(attrs.get("group", 1))  # type: ignore[call-overload]
    s = attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    oh = (hw[0] + p[0] + p[2] - k[0]) // s[0] + 1  # type: ignore[index]
    ow = (hw[1] + p[1] + p[3] - k[1]) // s[1] + 1  # type: ignore[index]
    node = helper.make_node("Conv", ["z", "w", "b"], ["y"], name="conv", **attrs)
    shapes = {"z": [1, cin, *hw], "w": [cout, cin // group, *k], "b": [cout]}
    return quantized_op(node, shapes, [1, cout, oh, ow])


def gemm(m: int, k: int, n: int, trans_a: int = 0, trans_b: int = 0) -> onnx.ModelProto:
    node = helper.make_node("Gemm", ["a", "bm", "c"], ["y"], name="gemm", transA=trans_a, transB=trans_b)
    shapes = {"a": [k, m] if trans_a else [m, k], "bm": [n, k] if trans_b else [k, n], "c": [n]}
    return quantized_op(node, shapes, [m, n])


def conv_transpose(ci: int, co: int, hw: tuple[int, int], k: int, bias: bool, dq: bool = True) -> onnx.ModelProto:
    """Kernel = strides (the lowering's 1x1 Conv, then depth to space); the weights a DequantizeLinear of
    a u8 initializer (a QDQ model's), or (dq False) a float initializer, which ORT pre-packs transposed."""
    wq = RNG.integers(0, 256, [ci, co, k, k]).astype(np.uint8)
    consts = {"wq": wq, "ws": np.float32(0.01), "wz": np.uint8(128)} if dq else {"w": wq.astype(np.float32) / 64}
    if bias:
        consts["b"] = RNG.standard_normal([co]).astype(np.float32)
    dequantize = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dqw")] if dq else []
    node = helper.make_node("ConvTranspose", ["z", "w", *(["b"] if bias else [])], ["y"], name="convt", strides=[k, k])
    return quantized_op(node, {"z": [1, ci, *hw]}, [1, co, hw[0] * k, hw[1] * k], consts, dequantize)


def matmul(a: list[int], b: list[int]) -> onnx.ModelProto:
    node = helper.make_node("MatMul", ["a", "bm"], ["y"], name="matmul")
    return quantized_op(node, {"a": a, "bm": b}, [*a[:-1], b[-1]])


CASES = {
    # K = 360 over 63 pixels: MLAS's K blocks of 256, then the bias
    "conv3x3_two_k_blocks": lambda: conv(40, 24, (9, 7), (3, 3), pads=[1, 1, 1, 1]),
    # a 1x1 conv over 143 pixels, K = 300: blocks of 128
    "conv1x1_three_k_blocks": lambda: conv(300, 20, (11, 13), (1, 1)),
    # 25 taps (6 groups of 4, then 1), stride 2: MLAS's 1-row kernel per channel
    "depthwise5x5_strided": lambda: conv(5, 5, (17, 19), (5, 5), group=5, strides=[2, 2], pads=[2, 2, 2, 2]),
    "depthwise3x3": lambda: conv(7, 7, (13, 11), (3, 3), group=7, pads=[1, 1, 1, 1]),
    # one row, K = 131: groups of 4, then 2, then 1, added to the bias
    "gemm_one_row": lambda: gemm(1, 131, 37),
    "gemm_trans_b_one_k_block": lambda: gemm(5, 300, 20, trans_b=1),
    "gemm_trans_a_three_k_blocks": lambda: gemm(7, 300, 50, trans_a=1),
    # B without batch dims: ORT folds A's batch into M (3 rows, not 3 one-row products)
    "matmul_folded_rows": lambda: matmul([3, 1, 150], [150, 10]),
    "matmul_batched": lambda: matmul([2, 9, 260], [2, 260, 33]),
    # MLAS's 1-row kernel with B transposed: 8 lane sums, reduced as its blocks of 4, 2 and 1 outputs
    "gemm_one_row_trans_b": lambda: gemm(1, 133, 11, trans_b=1),
    # N = 1 (ldb = ldc = 1): the same kernel with A and B swapped, or the plain 1-row one when A is transposed
    "conv_one_pixel": lambda: conv(30, 7, (5, 1), (5, 1)),
    "gemm_one_column": lambda: gemm(7, 150, 1),
    "gemm_one_column_trans_a": lambda: gemm(6, 150, 1, trans_a=1),
    "matmul_folded_one_column": lambda: matmul([2, 3, 50], [50, 1]),
    # a kernel as wide as the input, one input channel per group, unpadded: MLAS's GEMM on the input as is,
    # B transposed (rows 1 float apart); one filter per group is its 1-row kernel's 8 lane sums. FSMN's
    # 20-tap conv along a column, 37 outputs (blocks of 4, then 1), and 2-D with rows 3 floats apart
    "depthwise_column_direct": lambda: conv(16, 16, (56, 1), (20, 1), group=16),
    "conv_full_width_direct": lambda: conv(2, 2, (12, 3), (4, 3), group=2),
    # more filters: MLAS's blocked sgemm; at one pixel too, B's rows 3 floats apart not being a column
    "conv_full_width_filters": lambda: conv(2, 8, (9, 3), (3, 3), group=2),
    "conv_full_width_one_pixel": lambda: conv(1, 7, (5, 3), (5, 3)),
    # a channel too long for the depthwise kernel's work space takes im2col's path: the same sums
    "depthwise_column_direct_long": lambda: conv(1, 1, (530_003, 1), (9, 1)),
    # ConvTranspose: ORT's MLAS runs W^T X, A transposed. One input pixel (centerface's deepest one): its
    # 1-row kernel on X per output channel, not the 1-row kernel with B transposed; K = 300 input channels
    # over 15 pixels: K blocks as A transposed has them; the bias after the sums
    "conv_transpose_one_pixel": lambda: conv_transpose(24, 24, (1, 1), 2, bias=False),
    "conv_transpose_one_pixel_bias": lambda: conv_transpose(23, 5, (1, 1), 2, bias=True),
    "conv_transpose_k_blocks": lambda: conv_transpose(300, 8, (3, 5), 2, bias=True),
    # filters cut into blocks over few pixels (dsp/src/ops/conv.c conv_filters_per_item): 129 filters over 25
    # pixels are blocks of 128 and 1, the 1 still a row of MLAS's sgemm, not its 1-row kernel; 800 filters at
    # one output pixel, blocks of the 1-row kernel's outputs by where they fall in all 800
    "conv3x3_filter_blocks": lambda: conv(256, 129, (5, 5), (3, 3), pads=[1, 1, 1, 1]),
    "conv_one_pixel_filter_blocks": lambda: conv(600, 800, (3, 3), (3, 3)),
    # float weights: ORT pre-packs W^T, MLAS's A is not transposed
    "conv_transpose_one_pixel_float_weights": lambda: conv_transpose(24, 24, (1, 1), 2, bias=False, dq=False),
}


@needs_host
@pytest.mark.parametrize("isa", ["", "avx2", "plain"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_quantized_float_op_equals_ort_bit_for_bit(name: str, isa: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the widest tile kernel the CPU runs, and at the AVX2 and plain-C ones (HEXFUSE_SGEMM_ISA)."""
    if isa:
        monkeypatch.setenv("HEXFUSE_SGEMM_ISA", isa)
    m = CASES[name]()
    feeds = {
        i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in m.graph.input
        if i.type.tensor_type.elem_type == TensorProto.FLOAT
    }
    assert_equals_ort(m, feeds)
