"""The concurrency a co-located model must beat on the host (HFuse's point: existing concurrency is
the baseline), added to `bench` when the model carries a co-location plan:

- streams-seq / streams-seq-2t: each stream as its own model on ORT, one after another (1 or 2
  intra-op threads; the better of the two is the "best thread count" baseline);
- streams-2threads: the streams as separate ORT sessions (1 thread each) run at once from two
  threads, the CPU's "two streams".

ORT_PARALLEL on the merged model (ort-par), its fallback and the plugin are bench's own configs.
The streams are cut out of the merged model itself (`colocate.stream_model`), so the baselines need
no file but the one benchmarked.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ..colocate import Plan, plan_of, stream_model
from ..contract import DOMAIN

STREAM_BASELINES = ("streams-seq", "streams-seq-2t", "streams-2threads")


class _Streams:
    """Sessions of the streams behind one `run(names, feeds)` that answers like the merged model."""

    def __init__(self, sessions: list[Any], output_names: list[str], concurrent: bool) -> None:
        self.sessions = sessions
        self.output_names = output_names
        self.inputs = [[i.name for i in s.get_inputs()] for s in sessions]
        self.pool = ThreadPoolExecutor(len(sessions)) if concurrent else None

    def _one(self, k: int, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        s = self.sessions[k]
        names = [o.name for o in s.get_outputs()]
        return dict(zip(names, s.run(names, {n: feeds[n] for n in self.inputs[k]})))

    def run(self, names: list[str] | None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        outputs: dict[str, np.ndarray] = {}
        if self.pool is None:
            for k in range(len(self.sessions)):
                outputs.update(self._one(k, feeds))
        else:
            for part in self.pool.map(lambda k: self._one(k, feeds), range(len(self.sessions))):
                outputs.update(part)
        return [outputs[n] for n in (names or self.output_names)]


def stream_sessions(paths: list[str], output_names: list[str], mode: str, concurrent: bool) -> _Streams:
    """The streams' models as ORT sessions in one of ORT's modes (ort_modes) behind one `run`."""
    import onnxruntime as ort

    from .. import ort_modes

    made = [
        ort.InferenceSession(p, sess_options=ort_modes.options(mode), providers=["CPUExecutionProvider"]) for p in paths
    ]
    return _Streams(made, output_names, concurrent)


def stream_configs(original: Path, work: Path) -> list[tuple[str, Callable[[], _Streams], str]]:
    """(label, session maker, note) of each stream baseline; empty when the model is not co-located.
    The makers are picklable (each baseline runs in a process of its own: isolated.py)."""
    model = onnx.load(str(original))
    plan = plan_of(model)
    if plan is None:
        return []
    paths = []
    for k, prefix in enumerate(plan.streams):
        paths.append(str(work / f"stream{k}.onnx"))
        onnx.save(stream_model(model, prefix), paths[-1])
    names = [o.name for o in model.graph.output]
    streams = ", ".join(p[:-1] for p in plan.streams)
    notes = {
        "streams-seq": ("ort-seq", False, f"{streams} as separate models, one after another, 1 thread"),
        "streams-seq-2t": ("ort-seq-2t", False, f"{streams} one after another, 2 intra-op threads each"),
        "streams-2threads": ("ort-seq", True, f"{streams} as {len(plan.streams)} sessions run at once, a thread each"),
    }
    return [(k, partial(stream_sessions, paths, names, m, c), note) for k, (m, c, note) in notes.items()]


def modelled_lines(
    original: Path, shapes: dict[str, list[int]] | None, target: str, fused: onnx.ModelProto | None = None
) -> list[str]:
    """The cost model's view of the co-located model on the target: with the pairs of `fused` (the header of
    the model measured), where the analysis chose them too (a pair that verification refused is not there: a
    stranger's bench of a `--verify plugin` model of 5 pairs printed the 11 of the plain analysis)."""
    from ..kinds.colocate import Colocate, modelled
    from ..kinds.dag import dag_facts
    from ..pipeline import analyse

    plan: Plan | None = plan_of(onnx.load(str(original), load_external_data=False))
    if plan is None:
        return []
    a = analyse(original, kinds=[Colocate.name], target=target, shapes=shapes)
    pairs = a.pairs
    if fused is not None:
        inside = _paired_node_names(fused)
        pairs = [p for p in pairs if any(a.graph.nodes[i].name in inside for i in p.candidate.nodes)]
    m = modelled(a.graph, a.profile, dag_facts(a.graph), pairs, a.target)
    return [] if m is None else m.lines(plan.priority)


def _paired_node_names(model: onnx.ModelProto) -> set[str]:
    """The names of the nodes the model's FusedHexPair bodies hold."""
    return {n.name for f in model.functions if f.domain == DOMAIN for n in f.node if n.name}
