"""The v2 quantization section: lowered QDQ programs carry each integer tensor's scale and zero
point, the kernel accepts them and still matches ONNX Runtime, and refuses a section that
disagrees with an op (dsp/README.md "Quantization section")."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from test_lower import program_inputs
from test_qeltwise import U8, _binary, _compare, _models, _pool_chain
from test_qmatmul import CASES, _group, _pair

from hexfuse_onnx.errors import HexfuseError
from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.lowering.abi import Dtype, Layout
from hexfuse_onnx.lowering.program import layout_of, op_quantization, read_quantization
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR, HostKernel

needs_host = pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason="run `bash custom_ops/build.sh`")


def _qmatmul_program() -> tuple[bytes, dict]:
    a, b = CASES["matmul_u8u8_gemm_u8i8_bias_per_column"]
    ga, gb = _group("a_", **a), _group("b_", **b)
    m = _pair(ga, gb)
    inits = {t.name: t for t in ga[3] + gb[3]}
    return lower_pair(m, m.graph.node[0]), inits


def _value(inits: dict, name: str) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(inits[name]).reshape(-1)


def test_qmatmul_programs_carry_the_model_quantization() -> None:
    """A (per tensor), B (per column of the Gemm's transB weight), Y and the bias (s_a s_b, zero 0)."""
    program, inits = _qmatmul_program()
    assert layout_of(program).version == 2
    q = read_quantization(program)
    by_role = sorted(q.values(), key=lambda e: (len(e.scales), e.dtype))
    assert len(q) == 7, q  # A, B, Y of the MatMul; A, B, Y, bias of the Gemm
    per_column = [e for e in q.values() if e.axis >= 0]
    assert {(e.dtype, e.axis, len(e.scales)) for e in per_column} == {(Dtype.I8, 1, 300), (Dtype.I32, 0, 300)}
    sa, sb = np.float32(_value(inits, "b_sa")[0]), _value(inits, "b_sb")
    weights = next(e for e in per_column if e.dtype == Dtype.I8)
    bias = next(e for e in per_column if e.dtype == Dtype.I32)
    assert np.array_equal(np.float32(weights.scales), sb) and set(bias.zero_points) == {0}
    assert np.array_equal(np.float32(bias.scales), (sa * sb).astype(np.float32))
    assert {(e.scales[0], e.zero_points[0]) for e in by_role if e.dtype == Dtype.U8} >= {
        (float(np.float32(0.02)), 128),
        (float(np.float32(0.05)), 120),
    }
    assert "per channel of axis 1 (300)" in weights.describe()
    ops = op_quantization(program)  # what the trace's events carry
    assert (
        ops[0].startswith("in 0: u8 scale 0.02 zero point 128; in 1: ")
        and "out: u8 scale 0.05 zero point 120" in ops[0]
    )


def test_elementwise_programs_carry_every_integer_tensor() -> None:
    rng = np.random.default_rng(0)
    a = _binary("a_", "Add", [2, 4, 5, 5], [1, 4, 1, 1], U8, rng).model_parts("a_y", [2, 4, 5, 5], U8)
    b = _pool_chain("b_", [1, 7, 9, 9], U8, False).model_parts("b_y", [1, 7, 1, 1], U8, "b_c")
    pair, _ = _models(a, b)
    program = lower_pair(pair, pair.graph.node[0])
    q = read_quantization(program)
    # task A: x, w, the sum, the sigmoid's output; task B: x, the max-pooled c, y
    assert len(q) == 7 and all(e.axis == -1 for e in q.values()), q
    assert "u8 scale 0.013 zero point 60" in {e.describe() for e in q.values()}


def _patch_entry_scale(program: bytes, tensor_dtype: Dtype) -> bytes:
    """The program with the scale of the first per-tensor entry of that dtype one ulp larger (the
    CRC recomputed). The entry's scale is a constant of its own (the
    ops read combined scales), so only the section changes."""
    lay = layout_of(program)
    (n,) = struct.unpack_from("<I", program, lay.quant_off)
    out = bytearray(program)
    for k in range(n):
        tid, scale, _, axis = struct.unpack_from("<IIIi", program, lay.quant_off + 4 + 16 * k)
        dtype = program[lay.tensors_off + tid * Layout.TENSOR_RECORD_BYTES]
        if dtype != tensor_dtype or axis != -1:
            continue
        data_at = (
            lay.data_off
            + struct.unpack_from("<I", program, lay.tensors_off + scale * Layout.TENSOR_RECORD_BYTES + 40)[0]
        )
        struct.pack_into("<I", out, data_at, struct.unpack_from("<I", program, data_at)[0] + 1)
        struct.pack_into("<I", out, len(out) - 4, zlib.crc32(bytes(out[:-4])))
        return bytes(out)
    raise AssertionError("no such entry")


@needs_host
def test_kernel_refuses_a_section_that_disagrees() -> None:
    program, _ = _qmatmul_program()
    HostKernel().parse(program)
    bad = _patch_entry_scale(program, Dtype.U8)
    with pytest.raises(
        HexfuseError, match=r"HFX_ERR_QUANT at byte \d+: op \d \(QMatMul\): scale s_a s_b / s_y of tensor \d+"
    ):
        HostKernel().parse(bad)


@needs_host
def test_programs_with_the_section_match_onnxruntime() -> None:
    """The same pair run with and without its section (v2 against the section-less bytes): equal
    outputs; the ORT comparisons of tests/test_qmatmul.py and test_qeltwise.py run with it."""
    rng = np.random.default_rng(1)
    a = _binary("a_", "Mul", [3, 8, 8], [3, 8, 8], U8, rng).model_parts("a_y", [3, 8, 8], U8)
    b = _pool_chain("b_", [2, 5, 17, 25], U8, True).model_parts("b_y", [2, 5, 1, 1], U8, "b_c")
    b[2][0].type.tensor_type.shape.dim[2].dim_value, b[2][0].type.tensor_type.shape.dim[3].dim_value = 9, 13
    pair, plain = _models(a, b)
    program = lower_pair(pair, pair.graph.node[0])
    lay = layout_of(program)
    bare = bytearray(program[: lay.quant_off] + program[-4:])
    struct.pack_into("<I", bare, 8, len(bare))  # total_bytes
    struct.pack_into("<I", bare, 52, 0)  # quant_bytes
    struct.pack_into("<I", bare, len(bare) - 4, zlib.crc32(bytes(bare[:-4])))
    feeds = {v.name: rng.integers(0, 256, [d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.uint8)
             for v in plain.graph.input}  # fmt: skip
    inputs = program_inputs(pair, pair.graph.node[0], feeds)
    kernel = HostKernel()
    with_section, without = kernel.run(program, inputs), kernel.run(bytes(bare), inputs)
    assert len(with_section) == 3
    for x, y in zip(with_section, without):
        assert x.dtype == np.uint8 and np.array_equal(x, y)
    assert max(d.max() for d in _compare(pair, plain, feeds)) == 0


def test_a_tensor_quantized_two_ways_gets_no_entry() -> None:
    """Two ops that read one integer tensor with different parameters: the kernel would refuse one
    of them against any entry, so the tensor has none (equal parameters keep it)."""
    from hexfuse_onnx.lowering.abi import Role, Task
    from hexfuse_onnx.lowering.program import Program, QuantEntry, Tensor

    p = Program()

    def const(value: np.ndarray, dtype: Dtype) -> int:
        return p.add(Tensor(dtype, Role.CONSTANT, Task.A, list(value.shape), data=value.tobytes()))

    x, y = (p.add(Tensor(Dtype.U8, Role.INPUT, Task.A, [4], io=i)) for i in range(2))
    zero = const(np.array([3], np.uint8), Dtype.U8)
    s1, s1_again, s2 = (const(np.array([v], np.float32), Dtype.F32) for v in (0.5, 0.5, 0.25))
    p.quantize(x, QuantEntry(s1, zero))
    p.quantize(x, QuantEntry(s1_again, zero))  # the same values in another constant
    p.quantize(y, QuantEntry(s1, zero))
    p.quantize(y, QuantEntry(s2, zero))
    p.quantize(y, QuantEntry(s1, zero))
    assert p.quant == {x: QuantEntry(s1, zero)}
