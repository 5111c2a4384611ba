"""Ops of detectors, OCR and super-resolution heads lowered onto the kernel and run on the real host kernel against
ONNX Runtime: Elu and Selu (CLIP, EXP, SUB, MUL, ADD: within a few ulp of exp), Softplus (SOFTPLUS, ORT's formula
x + log1p(exp(-x)) above 0, log1p(exp(x)) else, Eigen's exp and log1p: bit for bit) and Mish (SOFTPLUS, TANH, MUL),
Round (ties to even, bit for bit), GlobalMaxPool (GLOBAL_MAXPOOL, bit for bit, any spatial rank), DepthToSpace in
both modes and SpaceToDepth (COPY, TRANSPOSE, COPY: bit for bit). float16 where ORT's CPU kernel takes it: widened,
computed in float32, rounded once at the pair's end."""

from __future__ import annotations

import struct

import numpy as np
import onnx
import pytest
from onnx import helper
from test_lower import _op_records, needs_host, vi
from test_lower_attention import KERNEL_ENGINE, plain
from test_lower_exporter_ops import opcodes
from test_lower_logic import F16, F32, NP, assert_same_bits, run_both, task_b

from hexfuse_onnx import graph
from hexfuse_onnx.fused_work import fused_work
from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Engine, Opcode

RNG = np.random.default_rng(26)
INF, NAN = np.inf, np.nan


def unary_pair(op: str, dtype: int, shape: list[int], opset: int = 17, **attrs: object) -> onnx.ModelProto:
    node = helper.make_node(op, ["p"], ["yb"], name=op.lower(), **attrs)
    out = [vi("yb", None, dtype)]  # the output's shape from inference
    return task_b([node], [vi("p", shape, dtype)], out, opset=opset)


def widened(dtype: int, ops: list[Opcode]) -> list[int]:
    """Task A's RELU, then task B's ops, between CASTs for float16"""
    cast = [Opcode.CAST] * (dtype == F16)
    return [Opcode.RELU, *cast, *ops, *cast]


def assert_close(ref: np.ndarray, got: np.ndarray, rel: float) -> None:
    """Within rel of each value (1e-38 absolute: denormals), NaN where ORT's is; float16 one step of each value
    (rounded once from float32: at most half a step off, or a step where the float32 results straddle a tie)"""
    assert ref.dtype == got.dtype and ref.shape == got.shape
    assert np.array_equal(np.isnan(ref), np.isnan(got))
    r, g = ref.astype(np.float64), got.astype(np.float64)
    if ref.dtype == np.float16:
        bound = np.spacing(np.abs(ref)).astype(np.float64)
    else:
        bound = rel * np.abs(r) + 1e-38
    near = (r == g) | (np.abs(r - g) <= bound) | np.isnan(r)
    assert np.all(near), (ref[~near][:5], got[~near][:5])


def softplus_values(dtype: int, shape: list[int]) -> np.ndarray:
    """Normal values times 12, one in ten far out (+-1e4, -90 .. -110: exps that underflow, denormals), specials"""
    x = RNG.standard_normal(shape) * 12
    flat = x.reshape(-1)
    picks = RNG.choice(flat.size, size=flat.size // 10, replace=False)
    flat[picks] = RNG.choice([-1e4, 1e4, -90.0, -100.5, -110.0, 88.5, 1e-8], size=picks.size)
    flat[:6] = [NAN, INF, -INF, 0.0, -0.0, 17.0]
    return x.astype(NP[dtype])


@needs_host
@pytest.mark.parametrize("shape", [[1, 32, 40, 40], [7], [2, 3, 1001]])
def test_softplus_matches_ort_bit_for_bit(shape: list[int]) -> None:
    """Eigen's packet exp and log1p over whole packets of 4, the C library's over the last 1-3 (shapes [7] and
    [2, 3, 1001])"""
    m = unary_pair("Softplus", F32, shape)
    assert opcodes(m) == widened(F32, [Opcode.SOFTPLUS])
    assert_same_bits(*run_both(m, {"p": softplus_values(F32, shape)}))


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_mish_matches_ort(dtype: int) -> None:
    """float16 against ORT's float32 Mish rounded to float16: ORT runs Mish's body in float16, rounding each op's
    result (far below 0, x exp(x) then a few % off)"""
    shape = [1, 16, 20, 20]
    m = unary_pair("Mish", dtype, shape, opset=18)
    assert opcodes(m) == widened(dtype, [Opcode.SOFTPLUS, Opcode.TANH, Opcode.MUL])
    x = softplus_values(dtype, shape)
    got = run_both(m, {"p": x})[1][1]
    ref = run_both(unary_pair("Mish", F32, shape, opset=18), {"p": x.astype(np.float32)})[0][1]
    assert_close(ref.astype(NP[dtype]), got, 2e-6)


@needs_host
@pytest.mark.parametrize(
    ("op", "attrs"),
    [("Elu", {}), ("Elu", {"alpha": 0.3}), ("Selu", {}), ("Selu", {"alpha": 2.0, "gamma": 0.5})],
    ids=["elu", "elu-0.3", "selu", "selu-2-0.5"],
)
def test_elu_and_selu_match_ort(op: str, attrs: dict[str, float]) -> None:
    """Audio models' Elu (DNSMOS, AECMOS) stopped every pair: max(x, 0) + alpha (exp(min(x, 0)) - 1), Selu
    that times gamma. Below 0 exp(x) - 1 cancels: a few ulp of the kernel's exp near 1 (scaled by alpha
    and gamma) off ORT's, above 0 x itself."""
    shape = [1, 16, 20, 20]
    m = unary_pair(op, F32, shape, **attrs)
    ops = [Opcode.CLIP, Opcode.CLIP, Opcode.EXP, Opcode.SUB, Opcode.MUL, Opcode.ADD]
    assert opcodes(m) == widened(F32, ops + [Opcode.MUL] * (op == "Selu"))
    x = softplus_values(F32, shape)
    ref, got = run_both(m, {"p": x})
    scale = attrs.get("alpha", 1.0 if op == "Elu" else 1.68) * attrs.get("gamma", 1.0 if op == "Elu" else 1.06)
    np.testing.assert_allclose(got[1], ref[1], rtol=2e-6, atol=4.0 * 2**-24 * scale)
    positive = x > 0
    assert np.array_equal(got[1][positive], ref[1][positive])


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_round_matches_ort_bit_for_bit(dtype: int) -> None:
    """Ties to even (0.5, 1.5, 2.5, -2.5), -0.3 to -0, 2^23 - 0.5, and beyond: as ORT's"""
    edges = [0.5, 1.5, 2.5, -2.5, -0.5, -0.3, 0.49999997, 8388607.5, -8388607.5, 16777216.0, NAN, INF, -INF, -0.0]
    x = np.concatenate([np.array(edges), RNG.standard_normal(4093) * 50, np.round(RNG.standard_normal(64) * 9) + 0.5])
    m = unary_pair("Round", dtype, [x.size])
    assert opcodes(m) == widened(dtype, [Opcode.ROUND])
    ref, got = run_both(m, {"p": x.astype(NP[dtype])})
    assert_same_bits(ref, got)


@needs_host
@pytest.mark.parametrize("shape", [[1, 128, 1024], [1, 40, 35], [2, 3, 7, 5], [1, 4, 2, 3, 5], [3, 2, 1, 1]])
def test_global_max_pool_matches_ort_bit_for_bit(shape: list[int]) -> None:
    """magika's [1, 128, 1024]; rank 4 and 5; -inf, +inf; NaNs at every position of some channel: ORT passes
    over all but one at the last element of the last whole block of 4"""
    x = RNG.standard_normal(shape).astype(np.float32) * 4
    flat = x.reshape(shape[0] * shape[1], -1)
    flat[0, 0], flat[-1, -1] = -INF, INF
    for c in range(1, flat.shape[0] - 1):
        flat[c, (c - 1) % flat.shape[1]] = NAN
    m = unary_pair("GlobalMaxPool", F32, shape)
    assert opcodes(m) == widened(F32, [Opcode.GLOBAL_MAXPOOL])
    ref, got = run_both(m, {"p": x})
    assert_same_bits(ref, got)


@needs_host
def test_global_max_pool_of_minus_inf_is_orts() -> None:
    m = unary_pair("GlobalMaxPool", F32, [1, 2, 3])
    ref, got = run_both(m, {"p": np.array([[[-INF] * 3, [-INF, -1e38, -INF]]], np.float32)})
    assert_same_bits(ref, got)


DEPTH_SPACE = [
    ("DepthToSpace", "DCR", [1, 12, 5, 7], 2),  # PixelShuffle's 3 channels x 2 x 2
    ("DepthToSpace", "CRD", [2, 18, 4, 3], 3),
    ("DepthToSpace", "DCR", [1, 4, 1, 1], 2),
    ("SpaceToDepth", "DCR", [2, 3, 8, 6], 2),
    ("SpaceToDepth", "DCR", [1, 5, 9, 3], 3),
]


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("op, mode, shape, block", DEPTH_SPACE)
def test_depth_space_matches_ort_bit_for_bit(op: str, mode: str, shape: list[int], block: int, dtype: int) -> None:
    attrs = {"blocksize": block, **({"mode": mode} if op == "DepthToSpace" else {})}
    m = unary_pair(op, dtype, shape, opset=13, **attrs)
    assert opcodes(m) == widened(dtype, [Opcode.COPY, Opcode.TRANSPOSE, Opcode.COPY])
    ref, got = run_both(m, {"p": RNG.standard_normal(shape).astype(NP[dtype])})
    assert_same_bits(ref, got)


@pytest.mark.parametrize("op", ["DepthToSpace", "SpaceToDepth", "Mish", "Elu", "Selu"])
def test_the_cost_model_counts_the_program_ops(op: str) -> None:
    """fused_work's entries: one per program op of task B, on its engine"""
    attrs = {"blocksize": 2} if op in ("DepthToSpace", "SpaceToDepth") else {}
    m = unary_pair(op, F32, [1, 8, 4, 6], opset=18, **attrs)
    engines = [Engine(struct.unpack_from("<B", r, 2)[0]) for r in _op_records(lower_pair(m, m.graph.node[0]))]
    g = graph.index_model(plain(m))
    node = next(n for n in g.nodes if n.op_type == op)
    assert [KERNEL_ENGINE[e] for e, _, _, _ in fused_work(g, node)] == engines[1:]  # after task A's RELU


def test_depth_to_space_of_another_rank_is_refused() -> None:
    m = unary_pair("DepthToSpace", F32, [1, 8, 4], opset=13, blocksize=2)
    with pytest.raises(LoweringError, match="rank-4"):
        opcodes(m)
