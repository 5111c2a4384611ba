"""Stock ONNX Runtime sessions and the seeded inputs the pass verifies on, with numpy and onnxruntime
alone: a probe child (probe.py) imports this and not the onnx package, whose import costs it 1.7 s of
CPU (ml_dtypes) against 0.4 s for numpy and onnxruntime."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import onnxruntime as ort

from .errors import VerificationError

T = TypeVar("T")


def session(path: str | os.PathLike[str] | bytes, extra: ort.SessionOptions | None = None) -> ort.InferenceSession:
    so = extra or ort.SessionOptions()
    so.intra_op_num_threads = so.intra_op_num_threads or 1
    so.log_severity_level = 4  # a failed run is reported once, as an error of ours; ORT's own log would repeat it
    model = path if isinstance(path, bytes) else str(path)
    return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])


def random_inputs(
    session: ort.InferenceSession, shape_overrides: dict[str, list[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded inputs for every session input; unknown dims take the override or 1. Floats are N(0, 1);
    8- and 16-bit integers span their type's range (quantized values and pixels: 0 or 1 would saturate
    a QDQ group and hide how it rounds); other integers and bools are 0 or 1 (ids, lengths, rates)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        shape = (shape_overrides or {}).get(arg.name) or [d if isinstance(d, int) and d >= 0 else 1 for d in arg.shape]
        dtype = numpy_dtype(arg.type, arg.name)
        if np.issubdtype(dtype, np.floating):
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype in FULL_RANGE_INTEGERS:
            info = np.iinfo(dtype)
            feeds[arg.name] = rng.integers(int(info.min), int(info.max) + 1, shape, dtype=dtype)
        else:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def run_random(
    run: Callable[[dict[str, np.ndarray]], T],
    session: ort.InferenceSession,
    shapes: dict[str, list[int]] | None,
    controls: dict[str, np.ndarray] | None = None,
) -> T:
    """`run` on the seeded random inputs at `shapes`; where the model fails on them, on the same inputs
    with the given control values kept (`control_values`), and the first failure raised if it fails on
    those too. Random values first: they take branches users' values do not (Silero VAD's If on the
    sample rate: a random sr took the 8 kHz branch, the given 16000 never), and the user's value only
    where they fail the model (a speed that picks a row out of range: every other batch failed)."""
    feeds = random_inputs(session, shapes)
    try:
        return run(feeds)
    except Exception as first:
        kept = {k: v for k, v in (controls or {}).items() if k in feeds and _alike(v, feeds[k])}
        if not kept:
            raise
        try:
            return run(feeds | kept)
        except Exception:  # noqa: BLE001 - the random inputs' failure is the one reported
            raise first from None


def _alike(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


def control_values(given: dict[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """The given inputs small enough to be control values (a speed, a sample rate, a step count, a
    threshold), which inputs at other shapes keep where random ones fail the model (`run_random`)."""
    return {k: v for k, v in (given or {}).items() if v.size <= CONTROL_ELEMENTS and v.dtype.kind in "biuf"}


CONTROL_ELEMENTS = 16
FULL_RANGE_INTEGERS = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16))


# ONNX Runtime's tensor types that random_inputs makes (strings and complex numbers it cannot)
MADE_TYPES = {
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


def numpy_dtype(ort_type: str, name: str = "") -> np.dtype:
    """The numpy dtype of an ONNX Runtime type (`tensor(float)`); VerificationError naming input `name`
    for a type random_inputs cannot make."""
    short = ort_type.removeprefix("tensor(").removesuffix(")")
    if short not in MADE_TYPES:
        which = f" for input '{name}'" if name else ""
        raise VerificationError(f"cannot make test inputs of type {ort_type}{which}")
    return np.dtype(MADE_TYPES[short])
