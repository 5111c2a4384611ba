"""LogSoftmax lowered onto the kernel's LOG_SOFTMAX and run on the real host kernel against ONNX Runtime:
(x - max) - log(sum exp(x - max)) along any axis (opset 13 on), float32 within 1e-6 of each output's scale, float16
(widened, rounded once at the pair's end) within one float16 step of each value (of 1 below 1), with values far
below the line's maximum (exps that underflow: Log of a Softmax would give -inf there); lines of all -inf, or with a
NaN or +inf, are NaN throughout and a -inf value gives -inf, as ORT's. Below opset 13 the op coerces its input to
2-D: along the last axis it lowers, along another it is refused. (Its bits where a QuantizeLinear reads it, ORT's:
tests/test_mlas_exp.py.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from test_lower import needs_host, vi
from test_lower_exporter_ops import opcodes
from test_lower_logic import F16, F32, NP, run_both, task_b

from hexfuse_onnx.lowering import LoweringError
from hexfuse_onnx.lowering.abi import Opcode

RNG = np.random.default_rng(25)
# (input shape, axis): a CTC head's [batch, time, classes] (PP-OCR's 6625), a decoder step's 160 symbols, inner and
# outer axes of rank 4, a line of one value, a whole rank-1 input
CASES = [
    ([1, 40, 6625], -1),
    ([2, 160], 1),
    ([1, 25, 97], 2),
    ([2, 5, 4, 3], 1),
    ([2, 5, 4, 3], -4),
    ([3, 1], -1),
    ([9], 0),
]


def log_softmax_pair(dtype: int, shape: list[int], axis: int | None, opset: int = 13) -> onnx.ModelProto:
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("LogSoftmax", ["p"], ["yb"], name="log_softmax", **attrs)
    return task_b([node], [vi("p", shape, dtype)], [vi("yb", shape, dtype)], opset=opset)


def spread_values(dtype: int, shape: list[int]) -> np.ndarray:
    """Normal values times 8, one in ten far below the rest (-1e4 and -90 .. -110: exps of 0 and denormals)"""
    x = RNG.standard_normal(shape) * 8
    flat = x.reshape(-1)
    picks = RNG.choice(flat.size, size=flat.size // 10, replace=False)
    flat[picks] = RNG.choice([-1e4, -90.0, -100.5, -110.0], size=picks.size)
    return x.astype(NP[dtype])


def assert_close(ref: np.ndarray, got: np.ndarray) -> None:
    """float32: within 1e-6 of the output's scale; float16: within one float16 step of each value (of 1 below 1)"""
    assert ref.dtype == got.dtype and ref.shape == got.shape
    r, g = ref.astype(np.float64), got.astype(np.float64)
    if ref.dtype == np.float16:
        bound = np.spacing(np.maximum(np.abs(ref), np.float16(1))).astype(np.float64)
    else:
        bound = 1e-6 * np.abs(r).max()
    assert np.all(np.abs(r - g) <= bound), np.abs(r - g).max()


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_log_softmax_matches_ort(dtype: int) -> None:
    for shape, axis in CASES:
        m = log_softmax_pair(dtype, shape, axis)
        assert opcodes(m) == [Opcode.RELU] + [Opcode.CAST] * (dtype == F16) + [Opcode.LOG_SOFTMAX] + [Opcode.CAST] * (
            dtype == F16
        )
        ref, got = run_both(m, {"p": spread_values(dtype, shape)})
        assert_close(ref[1], got[1])


INF, NAN = np.inf, np.nan
SPECIAL = np.array(  # each line longer than the kernel's 8-lane blocks
    [
        [-INF] * 11,
        [1, 2, NAN, 0, 5, 1, 2, 3, 4, 5, 6],
        [1, 2, 3, INF, 5, 1, 2, 3, 4, 5, 6],
        [-INF, 2, 3, 0, 5, 1, 2, -INF, 4, 5, 6],
        [2.5] * 11,
        [0, 0.25, 3e38, -3e38, 1, 2, 3, 4, 5, 6, 7],
    ],
    np.float32,
)


@needs_host
@pytest.mark.parametrize("dtype", [F32, F16], ids=["f32", "f16"])
def test_infinities_and_nan_as_ort(dtype: int) -> None:
    """All -inf, a NaN or a +inf make the line NaN (x - max is NaN somewhere, so is the sum); a -inf value gives
    -inf; x - max below -FLT_MAX is -inf; equal values -log(11). float16 lines of 3e38 are inf already."""
    with np.errstate(over="ignore"):
        x = SPECIAL.astype(NP[dtype])
    ref, got = run_both(log_softmax_pair(dtype, list(x.shape), -1), {"p": x})
    r, g = ref[1], got[1]
    assert np.array_equal(np.isnan(r), np.isnan(g)) and np.isnan(r[:3]).all()
    assert np.array_equal(np.isneginf(r), np.isneginf(g)) and np.isneginf(r[3, [0, 7]]).all()
    finite = np.isfinite(r)
    assert np.array_equal(finite, np.isfinite(g))
    assert_close(np.where(finite, r, 0), np.where(finite, g, 0))


@needs_host
@pytest.mark.parametrize("opset", [11, 12])
@pytest.mark.parametrize(("shape", "axis"), [([4, 37], None), ([2, 3, 37], 2), ([2, 3, 37], -1)])
def test_old_opsets_lower_along_the_last_axis(opset: int, shape: list[int], axis: int | None) -> None:
    """Below opset 13 the input is coerced to [prod(dims[:axis]), prod(dims[axis:])], axis 1 by default: along the
    last axis that is the same line"""
    m = log_softmax_pair(F32, shape, axis, opset)
    ref, got = run_both(m, {"p": spread_values(F32, shape)})
    assert_close(ref[1], got[1])


@pytest.mark.parametrize(("shape", "axis"), [([2, 3, 37], None), ([2, 3, 37], 0), ([2, 3, 37], -2)])
def test_old_opsets_refuse_another_axis(shape: list[int], axis: int | None) -> None:
    """Coerced to 2-D, the op runs over every axis from `axis` on: not one axis of the kernel's"""
    with pytest.raises(LoweringError, match="coerces to 2-D"):
        opcodes(log_softmax_pair(F32, shape, axis, 11))
