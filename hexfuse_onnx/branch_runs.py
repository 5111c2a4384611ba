"""An If branch of a model run as a model of its own, on the outer values the model computed for it.

ONNX Runtime gives no value from inside an If branch, so the tools that need a branch's own figures
(emulate: a pair's input tensors; tune: a pair's time, fused and unfused) capture, on stock ORT, the
If's condition and the outer values its branches read (`capture`), and run the branch the condition
takes as a model of its own on them (`branch_runs`, `subgraphs.subgraph_model`). The other branch is
not reached on those inputs; a caller reaches it on inputs set to take it (`subgraphs.feeds_taking`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from . import contract as C
from . import subgraphs
from .errors import ModelError, first_line
from .graph import outer_scope_names
from .subgraphs import conditions_taken, constant_values, pairs_within, subgraph_model
from .verify import session

NOT_TAKEN = "not reached on these inputs"  # a pair in an If branch the inputs do not take


@dataclass
class BranchRun:
    """One branch of an If that holds a pair: as a model of its own with its inputs, or why not."""

    attribute: str  # "then_branch" or "else_branch"
    label: str  # "then branch of If 'X'"
    body: onnx.GraphProto  # the branch in the model
    model: onnx.ModelProto | None = None  # None: not reached
    feeds: dict[str, np.ndarray] = field(default_factory=dict)  # the outer values it read
    not_reached: str = ""


def is_pair(node: onnx.NodeProto) -> bool:
    return (node.domain, node.op_type) == (C.DOMAIN, C.OP_TYPE)


def is_if(node: onnx.NodeProto) -> bool:
    return node.op_type == "If" and node.domain in ("", "ai.onnx")


def bodies_with_pairs(node: onnx.NodeProto) -> dict[str, onnx.GraphProto]:
    """The node's subgraphs (If branches, Loop/Scan bodies) that hold a pair, by attribute name; then
    before else."""
    graphs = sorted(node.attribute, key=lambda a: a.name != "then_branch")
    return {a.name: a.g for a in graphs if a.type == onnx.AttributeProto.GRAPH and pairs_within(a.g)}


def branch_label(attribute: str, node: onnx.NodeProto) -> str:
    """subgraphs.branch_label of the If `node`: "then branch of If 'X'"."""
    return subgraphs.branch_label(attribute, node.name or node.output[0])


def branch_reads(node: onnx.NodeProto) -> list[str]:
    """What `branch_runs` needs captured for the If `node`: its condition and the outer values its
    branches that hold a pair read."""
    return [node.input[0], *(t for body in bodies_with_pairs(node).values() for t in outer_scope_names(body))]


def branch_runs(model: onnx.ModelProto, node: onnx.NodeProto, values: dict[str, np.ndarray]) -> list[BranchRun]:
    """The branches of the If `node` that hold a pair, then before else: the one the captured
    condition takes as a model of its own on the outer values it read (`values`: `capture` of
    `branch_reads(node)`); the other not reached, saying why."""
    then = conditions_taken([values[node.input[0]]]) == {True}
    runs = []
    for attribute, body in bodies_with_pairs(node).items():
        run = BranchRun(attribute, branch_label(attribute, node), body)
        if (attribute == "then_branch") != then:
            run.not_reached = f"{NOT_TAKEN} (the condition '{node.input[0]}' is {str(then).lower()})"
        else:
            run.model, problem = subgraph_model(model, body, lambda name: typed(name, values))
            run.not_reached = f"not reached: {problem}" if problem else ""
            if run.model is not None:
                run.feeds = {v.name: values[v.name] for v in run.model.graph.input}
        runs.append(run)
    return runs


def typed(name: str, values: dict[str, np.ndarray]) -> onnx.ValueInfoProto | None:
    """A captured outer value as a graph input of its type and shape (None: not a tensor)."""
    value = values.get(name)
    if not isinstance(value, np.ndarray):
        return None
    elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
    return onnx.helper.make_tensor_value_info(name, elem, list(value.shape))


def capture(
    model: onnx.ModelProto, names: list[str], feeds: dict[str, np.ndarray], where: str = ""
) -> dict[str, np.ndarray]:
    """The values of tensors of the main graph, from stock ORT running the model (each pair runs its
    fallback body), with the feeds, initializers and Constants they may be. ORT failing on them is
    the model's problem (exit 3), said in one line naming `where` (a branch run as a model)."""
    known = {**feeds, **{t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}}
    known.update((name, onnx.numpy_helper.to_array(t)) for name, t in constant_values(model.graph).items())
    wanted = list(dict.fromkeys(t for t in names if t and t not in known))
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    existing = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=t) for t in wanted if t not in existing)
    with tempfile.TemporaryDirectory(prefix="hexfuse-capture-") as folder:
        path = Path(folder) / "probe.onnx"
        onnx.save(probe, path)
        try:
            values = session(path).run(wanted, feeds) if wanted else []
        except Exception as exc:  # noqa: BLE001 - ORT's own error, quoted
            graph = f"the {where}, run as a model of its own" if where else "the model"
            raise ModelError(f"ONNX Runtime cannot run {graph} on these inputs: {first_line(exc)}") from None
    return {**known, **dict(zip(wanted, values))}
