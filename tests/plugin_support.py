"""Zoo models lowered for the FusedHexPair plugin, and their stock-ORT reference outputs: shared by
the plugin tests of both backends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from hexfuse_onnx import pipeline, verify
from hexfuse_onnx.lowering import attach_programs


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
