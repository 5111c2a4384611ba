"""Zoo models lowered for the FusedHexPair plugin, and their stock-ORT reference outputs: shared by
the plugin tests of both backends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from hexfuse_onnx import pipeline, verify
from hexfuse_onnx.lowering import attach_programs


def plugin_program_version() -> int:
    """The newest task-program format version the built kernel reads (0 when not built)."""
    import ctypes

    from hexfuse_onnx import runtime

    lib = runtime.LIB_DIR / "libhexfuse_host.so"
    if not lib.is_file():
        return 0
    return int(ctypes.CDLL(str(lib)).hexfuse_host_program_version())


def program_versions(model: onnx.ModelProto) -> set[int]:
    """The format versions of the task programs in a rewritten model."""
    return {int.from_bytes(a.s[4:6], "little") for n in model.graph.node for a in n.attribute if a.name == "program"}


def xfail_if_the_kernel_cannot_read(model_path: Path) -> None:
    """xfail a plugin check of a model whose programs are of a format the built kernel does not read
    yet (v2, symbolic dims: until the C v2 parser is merged); a no-op once it does."""
    import pytest

    newest = max(program_versions(onnx.load(str(model_path), load_external_data=False)), default=1)
    if newest > plugin_program_version():
        pytest.xfail(f"program format v{newest} (symbolic dims): C v2 parser not merged yet")


def lower_zoo(zoo_dir: Path, names: list[str], out: Path) -> dict[str, Path]:
    """Each zoo model rewritten and given its task programs (every pair must lower)."""
    result = {}
    for name in names:
        r = pipeline.rewrite(zoo_dir / f"{name}.onnx", out / f"{name}.fused.onnx")
        assert r.output is not None, name
        model, failed = attach_programs(onnx.load(r.output))
        assert failed == {}, failed
        result[name] = out / f"{name}.prog.onnx"
        onnx.save(model, result[name])
    return result


def reference(zoo_dir: Path, name: str, seed: int) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Seeded inputs of a zoo model and its outputs on stock ONNX Runtime."""
    s = verify.session(zoo_dir / f"{name}.onnx")
    feeds = verify.random_inputs(s, seed=seed)
    return feeds, s.run(None, feeds)


def concurrent_errors(
    session, cases: list[tuple[dict[str, np.ndarray], list[np.ndarray]]], runs: int, tol: float
) -> list[str]:
    """One thread per (feeds, reference) case, each calling `session.run` `runs` times at once
    with the others; every result that is not within `tol` of its reference is reported."""
    import threading

    errors: list[str] = []

    def work(k: int) -> None:
        feeds, ref = cases[k]
        for _ in range(runs):
            worst = max(verify.relative_error(r, g) for r, g in zip(ref, session.run(None, feeds)))
            if worst > tol:
                errors.append(f"thread {k}: relative error {worst}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
