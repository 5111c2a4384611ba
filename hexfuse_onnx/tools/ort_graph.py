"""Whether stock ONNX Runtime runs the same graph for two models: the original and its rewrite.

Without the plugin, ORT inlines each FusedHexPair's model-local function and optimizes the result.
If the graph it then runs is the original's own optimized graph, node for node, the rewrite costs
stock ORT nothing in any mode by construction, and a timed difference between the two is noise.
Names differ (inlining prefixes them), so each value is named by what computes it: a graph input by
its name, an initializer by its contents, a node's output by its op, attributes and inputs' names
(a Merkle hash over the DAG; an If or Loop body hashed the same way, its outer-scope reads by their
producers' hashes). Two graphs are the same when their multisets of node hashes and their
outputs' hashes agree.
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
from collections import Counter
from pathlib import Path

import onnx


def optimized(path: Path) -> onnx.ModelProto:
    """The graph ORT (CPU, default optimizations) runs for the model at `path`, no plugin."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
        return onnx.load(so.optimized_model_filepath)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little") + p)
    return h.hexdigest()[:24]


def _tensor_bytes(t: onnx.TensorProto) -> bytes:
    unnamed = onnx.TensorProto()
    unnamed.CopyFrom(t)
    unnamed.name = ""
    return unnamed.SerializeToString(deterministic=True)


def _attribute_bytes(node: onnx.NodeProto, value: dict[str, str]) -> bytes:
    """A node's attributes; a branch or loop body by its own hash, its outer-scope reads by theirs."""
    parts = []
    for a in sorted(node.attribute, key=lambda a: a.name):
        bodies = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        if not bodies:
            parts.append(a.SerializeToString(deterministic=True))
            continue
        for g in bodies:
            nodes, outputs, _ = node_hashes(g, value)
            parts.append(
                _digest(
                    a.name.encode(), *sorted(h.encode() for h in nodes.elements()), *map(str.encode, outputs)
                ).encode()
            )
    return b"".join(parts)


def node_hashes(
    graph: onnx.GraphProto, outer: dict[str, str] | None = None
) -> tuple[Counter[str], list[str], dict[str, str]]:
    """Each node's hash (a multiset), the graph outputs' hashes, and the op of each node hash. A body
    (`outer` given: the enclosing graphs' values) names its inputs by position, not by name."""
    value: dict[str, str] = {**(outer or {}), "": "absent"}
    for k, i in enumerate(graph.input):
        value[i.name] = _digest(b"input", str(k).encode() if outer is not None else i.name.encode())
    for t in graph.initializer:
        value[t.name] = _digest(b"initializer", _tensor_bytes(t))
    nodes, ops = Counter[str](), {}
    done = [False] * len(graph.node)
    while not all(done):  # ORT saves a topological order: one pass, unless a node precedes its producer
        progressed = False
        for i, n in enumerate(graph.node):
            if done[i] or not all(x in value for x in n.input):
                continue
            try:
                attributes = _attribute_bytes(n, value)
            except _Unready:  # a body reads an outer value not computed yet
                continue
            h = _digest(n.domain.encode(), n.op_type.encode(), attributes, *(value[x].encode() for x in n.input))
            nodes[h] += 1
            ops[h] = f"{n.domain + '.' if n.domain else ''}{n.op_type}"
            for k, out in enumerate(n.output):
                value[out] = _digest(h.encode(), str(k).encode())
            done[i] = progressed = True
        if not progressed:
            missing = next(
                (x for i, n in enumerate(graph.node) if not done[i] for x in n.input if x not in value),
                "a value a body reads",
            )
            raise (_Unready if outer is not None else ValueError)(f"node input '{missing}' has no producer")
    return nodes, [value.get(o.name, "") for o in graph.output], ops


class _Unready(ValueError):
    """A body reads a value its enclosing graph has not computed yet."""


@functools.lru_cache(maxsize=4)
def _hashes(path: str, mtime_ns: int) -> tuple[Counter[str], list[str], dict[str, str]]:
    """node_hashes of the optimized model at `path` as of `mtime_ns`: an original compared with two rewrites
    (host_pairs: untuned and tuned) is optimized once."""
    return node_hashes(optimized(Path(path)).graph)


def difference(original: Path, rewritten: Path) -> str | None:
    """None when ORT runs the same graph for both models, else what differs, in one line."""
    (a, a_out, a_ops), (b, b_out, b_ops) = (_hashes(str(p), p.stat().st_mtime_ns) for p in (original, rewritten))
    if a == b and a_out == b_out:
        return None
    only_a = Counter(a_ops[h] for h in (a - b).elements())
    only_b = Counter(b_ops[h] for h in (b - a).elements())
    if not only_a and not only_b:
        return "the same nodes compute different graph outputs"
    return (
        f"{sum(a.values())} nodes against {sum(b.values())}; only the original's: {dict(only_a.most_common(4))}, "
        f"only the rewrite's: {dict(only_b.most_common(4))}"
    )
