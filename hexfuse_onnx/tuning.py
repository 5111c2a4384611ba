"""The tuning record a tuned model carries, and the machine it was measured on.

`python -m hexfuse_onnx tune` (hexfuse_onnx/tools/tune.py) times every FusedHexPair of a model fused
and unfused on one machine and backend, and writes what it measured into the tuned model's
metadata_props under `METADATA_KEY` (JSON). `runtime.session_options(backend="auto", model=...)`
reads it back: a model tuned on this machine for the backend the plugin would use here is worth
registering the plugin for; any other model runs on stock ONNX Runtime. The record also names
ONNX Runtime's own execution mode that ran the model fastest here (`ort_modes`), which sessions of
the model on this machine use unless their options set the execution themselves, or, where stock ORT
runs the model unfused on calls short enough, an InferenceSession chooses the mode again at run time
(runtime.apply_tuned_mode).

A machine is what decides which pairs win: the CPU (architecture, model name, logical CPUs) and the
versions of ONNX Runtime and hexfuse-onnx (either changes the kernels timed on each side).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any, NamedTuple

import onnx

from . import __version__, ort_modes

METADATA_KEY = "hexfuse.tuning"
RECORD_VERSION = 1


def machine() -> dict[str, Any]:
    """What identifies this machine for tuning (readable; `fingerprint` hashes it)."""
    import onnxruntime

    return {
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count() or 0,
        "onnxruntime": onnxruntime.__version__,
        "hexfuse_onnx": __version__,
    }


def fingerprint(description: dict[str, Any] | None = None) -> str:
    """A short stable hash of `machine()` (or of the description given)."""
    text = json.dumps(description if description is not None else machine(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (x86 'model name', Arm 'Hardware' or 'CPU part')."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or "unknown"
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    for key in ("model name", "Hardware", "CPU part"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or "unknown"


def read_record(model: onnx.ModelProto) -> dict[str, Any] | None:
    """The tuning record of a model, or None when it has none (or an unreadable one)."""
    for prop in model.metadata_props:
        if prop.key == METADATA_KEY:
            try:
                record = json.loads(prop.value)
            except ValueError:
                return None
            return record if isinstance(record, dict) else None
    return None


def write_record(model: onnx.ModelProto, record: dict[str, Any]) -> None:
    """Set (or replace) the model's tuning record in place."""
    drop_record(model)
    model.metadata_props.add(key=METADATA_KEY, value=json.dumps(record, sort_keys=True))


def drop_record(model: onnx.ModelProto) -> None:
    """Remove the model's tuning record (if any) in place."""
    kept = [p for p in model.metadata_props if p.key != METADATA_KEY]
    model.ClearField("metadata_props")
    model.metadata_props.extend(kept)


def load_header(model: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """The model without its external weights (enough to read metadata)."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        return onnx.load_model_from_string(model)
    return onnx.load_model(str(model), load_external_data=False)


class TunedMode(NamedTuple):
    mode: str
    why: str
    call_us: float | None  # the median call tune timed in that mode; None when it timed none


def ort_mode_here(model: onnx.ModelProto) -> TunedMode | None:
    """The ONNX Runtime mode a tuning record made on this machine chose; None for an untuned model,
    a record from elsewhere, or one without a known mode."""
    record = read_record(model)
    if record is None or record.get("fingerprint") != fingerprint():
        return None
    choice = record.get("ort_mode")
    if not isinstance(choice, dict) or choice.get("mode") not in ort_modes.MODES:
        return None
    mode = str(choice["mode"])
    timed = (choice.get("modes") or {}).get(mode) or {}
    call_us = timed.get("median_us")
    return TunedMode(mode, str(choice.get("why", "")), float(call_us) if call_us is not None else None)


def tuned_here(model: onnx.ModelProto, backend: str) -> str | None:
    """None when the model was tuned on this machine for `backend`; else why it does not count."""
    record = read_record(model)
    if record is None:
        return "the model has not been tuned (no 'hexfuse.tuning' metadata; run `python -m hexfuse_onnx tune`)"
    here = fingerprint()
    if record.get("fingerprint") != here:
        return f"the model was tuned on another machine (fingerprint {record.get('fingerprint')}, this one {here})"
    if record.get("backend") != backend:
        return f"the model was tuned for the {record.get('backend')} backend, this machine runs {backend}"
    return None
