"""Prove a rewritten model before it is written: full checker, then stock ORT against the original.

Both models run on ONNX Runtime's CPU provider with no plugin, on the same seeded random
inputs. Float outputs must agree within `rtol` relative to the output's scale
(|a - b| <= rtol * max|reference|, elementwise); other outputs must be equal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort

from .errors import ModelError, VerificationError

DEFAULT_RTOL = 1e-5


@dataclass
class Comparison:
    outputs: int
    worst_output: str
    worst_relative_error: float


def check(path: str | os.PathLike[str]) -> None:
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:
        raise VerificationError(f"rewritten model fails onnx.checker (full check): {_first_line(exc)}") from None


def random_inputs(
    session: ort.InferenceSession, shape_overrides: dict[str, list[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded inputs for every session input; unknown dims take the override or 1."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        shape = (shape_overrides or {}).get(arg.name) or [d if isinstance(d, int) and d >= 0 else 1 for d in arg.shape]
        dtype = _numpy_dtype(arg.type)
        if np.issubdtype(dtype, np.floating):
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def session(path: str | os.PathLike[str], extra: ort.SessionOptions | None = None) -> ort.InferenceSession:
    so = extra or ort.SessionOptions()
    so.intra_op_num_threads = so.intra_op_num_threads or 1
    so.log_severity_level = 4  # a failed run is reported once, as an error of ours; ORT's own log would repeat it
    return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])


def compare(
    original: str | os.PathLike[str],
    rewritten: str | os.PathLike[str],
    shape_overrides: dict[str, list[int]] | None = None,
    rtol: float = DEFAULT_RTOL,
    rewritten_options: ort.SessionOptions | None = None,
    seed: int = 0,
) -> Comparison:
    """Run both on stock ORT with the same inputs; raise VerificationError on any mismatch, and
    ModelError when the original itself fails to run on the inputs (exit 3)."""
    try:
        ref_session = session(original)
    except Exception as exc:
        raise VerificationError(f"the original model does not run on ONNX Runtime: {_first_line(exc)}") from None
    try:
        new_session = session(rewritten, rewritten_options)
    except Exception as exc:
        raise VerificationError(f"the rewritten model does not load in ONNX Runtime: {_first_line(exc)}") from None
    feeds = random_inputs(ref_session, shape_overrides, seed)
    names = [o.name for o in ref_session.get_outputs()]
    expected = _run_original(original, ref_session, names, feeds)
    try:
        got = new_session.run(names, feeds)
    except Exception as exc:
        raise VerificationError(f"the rewritten model fails to run: {_first_line(exc)}") from None
    worst = ("", 0.0)
    for name, ref, out in zip(names, expected, got):
        ref, out = np.asarray(ref), np.asarray(out)
        if ref.shape != out.shape:
            raise VerificationError(
                f"output '{name}': shape {list(out.shape)} differs from the original's {list(ref.shape)}"
            )
        if np.issubdtype(ref.dtype, np.floating):
            err = relative_error(ref, out)
            if not err <= rtol:  # also catches NaN
                raise VerificationError(
                    f"output '{name}' differs from the original: relative error {err:.3g} > {rtol:g}"
                )
            worst = max(worst, (name, err), key=lambda w: w[1])
        elif not np.array_equal(ref, out):
            raise VerificationError(f"output '{name}' differs from the original")
    return Comparison(len(names), worst[0], worst[1])


def original_runs(original: str | os.PathLike[str], shape_overrides: dict[str, list[int]] | None = None) -> None:
    """Raise ModelError when the original model does not load or run on the test inputs `compare` makes."""
    try:
        ref_session = session(original)
    except Exception as exc:  # noqa: BLE001 - the input is at fault (e.g. complex tensors): no pair can pass
        raise ModelError(f"{original}: the original model does not load in ONNX Runtime: {_first_line(exc)}") from None
    names = [o.name for o in ref_session.get_outputs()]
    _run_original(original, ref_session, names, random_inputs(ref_session, shape_overrides))


def _run_original(
    original: str | os.PathLike[str], s: ort.InferenceSession, names: list[str], feeds: dict[str, np.ndarray]
) -> list:
    try:
        return s.run(names, feeds)
    except Exception as exc:  # the input (or its --shape values) is at fault, not the rewrite: no pair can pass
        raise ModelError(
            f"{original}: the original model fails to run on ONNX Runtime with the test inputs "
            f"(are the --shape values consistent?): {_first_line(exc)}"
        ) from None


def relative_error(ref: np.ndarray, out: np.ndarray) -> float:
    """max|out - ref| / max|ref| (0 when both are all zero); NaN where they disagree on NaN."""
    if ref.size == 0:
        return 0.0
    if not np.array_equal(np.isnan(ref), np.isnan(out)):
        return float("nan")
    mask = ~np.isnan(ref) & (ref != out)  # equal values (equal infinities too) differ by nothing
    if not mask.any():
        return 0.0
    finite = np.isfinite(ref)
    scale = float(np.max(np.abs(ref[finite]))) if finite.any() else 0.0
    diff = float(np.max(np.abs(out[mask].astype(np.float64) - ref[mask])))
    return diff / scale if scale > 0 else diff


def _numpy_dtype(ort_type: str) -> np.dtype:
    name = ort_type.removeprefix("tensor(").removesuffix(")")
    table = {
        "float": np.float32,
        "double": np.float64,
        "float16": np.float16,
        "int64": np.int64,
        "int32": np.int32,
        "int8": np.int8,
        "uint8": np.uint8,
        "bool": np.bool_,
        "int16": np.int16,
        "uint16": np.uint16,
        "uint32": np.uint32,
        "uint64": np.uint64,
    }
    if name not in table:
        raise VerificationError(f"cannot make test inputs of type {ort_type}")
    return np.dtype(table[name])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:400]
