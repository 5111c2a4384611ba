"""Engine timelines of a fused model run on the plugin: Chrome-trace/Perfetto JSON, a PNG, and
the figures that expose false high utilisation.

The plugin writes one trace per FusedHexPair node and run (`HEXFUSE_TRACE` with `{node}`): every
work item with its worker, engine, task, op, start and end. "Device busy" is the time at least
one worker ran an item; each engine's busy time is the time that engine class ran one. A device
that is busy 100% of the kernel's wall time while its matrix engine is busy 40% of it is what
fusion sets out to fix.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from .. import contract as C
from ..branch_runs import bodies_with_pairs, is_if, is_pair
from ..errors import HexfuseError, ModelError, UsageError, first_line
from ..lowering.rewritten import recorded_bindings
from ..subgraphs import feeds_taking, no_pair_message, pairs_within
from ..verify import random_inputs, random_integer_note, shapes_label

ENGINES = ("matrix", "vector", "copy")


@dataclass
class PairTimeline:
    node: str
    share_a: float
    workers: int
    serialized: bool
    events: list[dict]  # worker, engine, task, op, item, start_ns, end_ns (from the kernel's t0)
    wall_ns: int = 0
    device_busy_ns: int = 0
    engine_busy_ns: dict[str, int] = field(default_factory=dict)
    matrix_vector_overlap_ns: int = 0
    quantization: dict[int, str] = field(default_factory=dict)  # op -> its tensors' quantization (v2 section)

    def fractions(self) -> dict[str, float]:
        wall = max(self.wall_ns, 1)
        out = {"device": self.device_busy_ns / wall}
        out.update({e: self.engine_busy_ns.get(e, 0) / wall for e in ENGINES})
        out["matrix&vector"] = self.matrix_vector_overlap_ns / wall
        return out


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _overlap_ns(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Time covered by both interval sets."""
    both = _union_ns(a) + _union_ns(b) - _union_ns(a + b)
    return max(both, 0)


def pair_timeline(trace: dict) -> PairTimeline:
    events = trace["trace_events"]
    t = PairTimeline(trace["node"], float(trace["share_a"]), int(trace["workers"]), bool(trace["serialized"]), events)
    spans = [(e["start_ns"], e["end_ns"]) for e in events]
    t.wall_ns = max((e for _, e in spans), default=0) - min((s for s, _ in spans), default=0)
    t.device_busy_ns = _union_ns(spans)
    by_engine = {e: [(x["start_ns"], x["end_ns"]) for x in events if x["engine"] == e] for e in ENGINES}
    t.engine_busy_ns = {e: _union_ns(v) for e, v in by_engine.items()}
    t.matrix_vector_overlap_ns = _overlap_ns(by_engine["matrix"], by_engine["vector"])
    return t


def record(
    model_path: str | os.PathLike[str], runs: int = 10, backend: str = "host", workers: int | None = None
) -> list[PairTimeline]:
    """Run a rewritten model on the plugin and return the last run's timeline of every pair it ran
    (`not_run` names the others). A pair in an If branch runs where the inputs take its branch: the
    seeded random inputs, then those set to take each branch of a main-graph If that holds pairs
    where its condition allows (subgraphs.feeds_taking), `runs` times each."""
    from ..runtime import InferenceSession

    model = onnx.load(str(model_path), load_external_data=False)
    pairs = [n.name for n in pairs_within(model.graph)]
    if not pairs:
        raise HexfuseError(no_pair_message(str(model_path)))
    with tempfile.TemporaryDirectory(prefix="hexfuse-trace-") as folder:
        pattern = str(Path(folder) / "{node}.json")
        session = InferenceSession(model_path, backend=backend, workers=workers, trace=pattern, schedule="fused")
        analysed, _ = recorded_bindings(model)  # symbolic dims: at the shapes the pass analysed the model at
        feeds = random_inputs(session, analysed, seed=0)
        for inputs in [feeds, *_taking_branches(model, feeds)]:
            try:
                session.run(None, inputs)
            except Exception as exc:  # ORT's own failure on these inputs: the model's, not ours
                raise ModelError(
                    f"{model_path}: the model fails on the inputs profile runs it with ({shapes_label(inputs)}; "
                    f"seeded random values{random_integer_note(model)}): {first_line(exc)}"
                ) from None
            for _ in range(max(0, runs - 1)):
                session.run(None, inputs)
        timelines, missed = [], []
        in_main = {n.name for n in model.graph.node if is_pair(n)}
        for name in pairs:
            path = Path(pattern.replace("{node}", name.replace("/", "_")))
            if not path.is_file() and name in in_main:
                raise HexfuseError(f"the plugin wrote no trace for '{name}' (did it run the node?)")
            if not path.is_file():  # in an If branch no input took
                missed.append(name)
                continue
            timelines.append(pair_timeline(json.loads(path.read_text())))
            timelines[-1].quantization = _op_quantization(model, name)
    if not timelines:
        raise ModelError(
            f"{model_path}: no pair ran on the inputs profile runs it with: its {len(missed)} pair(s) sit in If "
            "branches whose conditions it cannot set"
        )
    return timelines


def not_run(model_path: str | os.PathLike[str], timelines: list[PairTimeline]) -> list[str]:
    """The pairs of the model `record` has no timeline of: in If branches no input it ran took."""
    ran = {t.node for t in timelines}
    model = onnx.load(str(model_path), load_external_data=False)
    return [n.name for n in pairs_within(model.graph) if n.name not in ran]


def _taking_branches(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """`feeds` set to take each branch of the main graph's Ifs that hold pairs, where the condition allows."""
    out: list[dict[str, np.ndarray]] = []
    for node in (n for n in model.graph.node if is_if(n)):
        for attribute in bodies_with_pairs(node):
            taking = feeds_taking(model, node.input[0], feeds, attribute == "then_branch")
            if taking is not None and not any(_same(taking, f) for f in [feeds, *out]):
                out.append(taking)
    return out


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _op_quantization(model: onnx.ModelProto, pair: str) -> dict[int, str]:
    from ..lowering.program import op_quantization

    node = next(n for n in pairs_within(model.graph) if n.name == pair)
    program = next((a.s for a in node.attribute if a.name == C.ATTR_PROGRAM), b"")
    return op_quantization(program) if program else {}


def chrome_trace(timelines: list[PairTimeline]) -> dict:
    """Chrome trace event format (chrome://tracing, Perfetto): a process per pair, a thread per worker."""
    events: list[dict] = []
    for pid, t in enumerate(timelines):
        events.append(
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{t.node} (share_a {t.share_a})"}}
        )
        for w in sorted({e["worker"] for e in t.events}):
            engine = next(e["engine"] for e in t.events if e["worker"] == w)
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": w,
                    "args": {"name": f"worker {w} ({'matrix' if w == 0 and engine == 'matrix' else 'vector'})"},
                }
            )
        for e in t.events:
            events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": e["worker"],
                    "name": f"task {e['task']} op {e['op']}",
                    "cat": e["engine"],
                    "ts": e["start_ns"] / 1000.0,
                    "dur": max(e["end_ns"] - e["start_ns"], 1) / 1000.0,
                    "args": {
                        "engine": e["engine"],
                        "task": e["task"],
                        "op": e["op"],
                        "item": e["item"],
                        **({"quantization": t.quantization[e["op"]]} if e["op"] in t.quantization else {}),
                    },
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def check_png_support() -> None:
    """Refuse --png up front when matplotlib (the `timeline` extra) is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(
            "--png needs matplotlib, which is not installed: pip install 'hexfuse-onnx[timeline]'"
        ) from None


def draw_png(timelines: list[PairTimeline], path: str | os.PathLike[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(timelines),
        1,
        figsize=(10, 1.2 + 0.9 * max(len({e["worker"] for e in t.events}) for t in timelines) * len(timelines)),
        squeeze=False,
    )
    colours = {"A": "#1f77b4", "B": "#ff7f0e"}
    hatches = {"matrix": "", "vector": "//", "copy": ".."}
    for ax, t in zip(axes[:, 0], timelines):
        workers = sorted({e["worker"] for e in t.events})
        for e in t.events:
            y = workers.index(e["worker"])
            ax.barh(
                y,
                (e["end_ns"] - e["start_ns"]) / 1000.0,
                left=e["start_ns"] / 1000.0,
                height=0.8,
                color=colours.get(e["task"], "grey"),
                hatch=hatches.get(e["engine"], ""),
                edgecolor="black",
                linewidth=0.3,
            )
        ax.set_yticks(range(len(workers)), [f"worker {w}" for w in workers])
        f = t.fractions()
        ax.set_title(
            f"{t.node}: device busy {f['device']:.0%}, matrix {f['matrix']:.0%}, vector {f['vector']:.0%}, "
            f"both {f['matrix&vector']:.0%} of {t.wall_ns / 1000:.0f} us",
            fontsize=9,
        )
        ax.set_xlabel("microseconds")
    handles = [matplotlib.patches.Patch(facecolor=c, label=f"task {k}") for k, c in colours.items()]
    handles += [
        matplotlib.patches.Patch(facecolor="white", edgecolor="black", hatch=h, label=e) for e, h in hatches.items()
    ]
    fig.legend(handles=handles, loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path), dpi=120)
    plt.close(fig)


def summary_lines(timelines: list[PairTimeline]) -> list[str]:
    lines = ["pair                 wall us  device busy  matrix busy  vector busy  copy busy  matrix&vector"]
    for t in timelines:
        f = t.fractions()
        lines.append(
            f"{t.node:<20} {t.wall_ns / 1000:7.0f}  {f['device']:11.0%}  {f['matrix']:11.0%}  "
            f"{f['vector']:11.0%}  {f['copy']:9.0%}  {f['matrix&vector']:13.0%}"
        )
    return lines
