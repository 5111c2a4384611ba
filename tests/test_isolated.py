"""tools/isolated.py: each configuration in a worker process of its own, real ORT sessions. What is
checked: every configuration is built and checked against the reference in its worker before any
timing, one whose outputs differ or whose session fails is reported and not timed, and the others
get their runs in rounds. Timings are not asserted."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from hexfuse_onnx import verify
from hexfuse_onnx.tools import isolated
from hexfuse_onnx.tools.bench import Config


def test_workers_check_then_time_each_configuration_alone(zoo_dir: Path, tmp_path: Path) -> None:
    model = str(zoo_dir / "gpt_decode_step.onnx")
    session = verify.session(model)
    feeds = verify.random_inputs(session, seed=0)
    names = [o.name for o in session.get_outputs()]
    reference = session.run(names, feeds)
    wrong = [r + 1.0 if np.issubdtype(r.dtype, np.floating) else r for r in reference]
    configs = [
        Config("ort-seq", None, make=partial(isolated.ort_session, model, "ort-seq")),
        Config("ort-par", None, make=partial(isolated.ort_session, model, "ort-par")),
        Config("missing", None, make=partial(isolated.ort_session, str(tmp_path / "absent.onnx"), "ort-seq")),
    ]
    with isolated.started(configs, feeds, names, reference) as workers:
        bounds = workers.time(runs=6, rounds=3, warmup=1)
    assert bounds == [0, 2, 4, 6]
    assert [len(c.samples) for c in configs] == [6, 6, 0]
    assert configs[0].error == 0.0 and all(x > 0 for x in configs[0].samples)
    assert configs[2].check.startswith("session fails:") and "absent.onnx" in configs[2].check

    refused = [Config("ort-seq", None, make=partial(isolated.ort_session, model, "ort-seq"))]
    with isolated.started(refused, feeds, names, wrong) as workers:
        workers.time(runs=2, rounds=1, warmup=0)
    assert "relative error" in refused[0].check and not refused[0].samples
