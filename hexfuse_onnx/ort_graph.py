"""Whether stock ONNX Runtime runs the same graph for two models: the original and its rewrite.

Without the plugin, ORT inlines each FusedHexPair's model-local function and optimizes the result.
If the graph it then runs is the original's own optimized graph, node for node, the rewrite costs
stock ORT nothing in any mode by construction, and a timed difference between the two is noise.
Names differ (inlining prefixes them), so each value is named by what computes it: a graph input by
its name, an initializer by its contents, a node's output by its op, attributes and inputs' names
(a Merkle hash over the DAG; an If or Loop body hashed the same way, its outer-scope reads by their
producers' hashes). Two graphs are the same when their multisets of node hashes and their
outputs' hashes agree.

A rewrite adds model-local functions, and a model holding any function has ORT expand the ops it has
no kernel for (HardSwish, Mish: an ONNX function each) ahead of its graph optimisations
(InlineFunctionsAOT), where it expands them after them otherwise: its level-1 transforms then see
x * HardSigmoid(x) read x twice, and EnsureUniqueDQForNodeUnit copies the DequantizeLinear before it,
so on x86 QDQS8ToU8 leaves that QuantizeLinear int8 (it converts a Q read by one DQ) and the int8
QDQ Conv before it runs in float, its rounding not QLinearConv's (`function_difference`).
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
from collections import Counter
from pathlib import Path

import onnx
from onnx import helper

from .nested import attribute_graphs


def optimized(path: Path) -> onnx.ModelProto:
    """The graph ORT (CPU, default optimizations) runs for the model at `path`, no plugin."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
        model = onnx.load(so.optimized_model_filepath, load_external_data=False)
    # ORT's copy names the original's external data files, relative to the original (khmersm's model.onnx.data)
    onnx.load_external_data_for_model(model, str(path.parent))
    return model


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little") + p)
    return h.hexdigest()[:24]


def _tensor_bytes(t: onnx.TensorProto) -> bytes:
    unnamed = onnx.TensorProto()
    unnamed.CopyFrom(t)
    unnamed.name = ""
    unnamed.ClearField("data_location")  # set (to DEFAULT) where the data was loaded from a file: same bytes
    return unnamed.SerializeToString(deterministic=True)


def _attribute_bytes(node: onnx.NodeProto, value: dict[str, str]) -> bytes:
    """A node's attributes; a branch or loop body by its own hash, its outer-scope reads by theirs."""
    parts = []
    for a in sorted(node.attribute, key=lambda a: a.name):
        bodies = attribute_graphs(a)
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


def difference(original: Path, rewritten: Path, dq_copies: bool = False) -> str | None:
    """None when ORT runs the same graph for both models, else what differs, in one line. `dq_copies`:
    a DequantizeLinear and its copies (one node hash) count as one; they compute one value."""
    (a, a_out, a_ops), (b, b_out, b_ops) = (_hashes(str(p), p.stat().st_mtime_ns) for p in (original, rewritten))
    if dq_copies:
        a, b = _once_each_dq(a, a_ops), _once_each_dq(b, b_ops)
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


def _once_each_dq(nodes: Counter[str], ops: dict[str, str]) -> Counter[str]:
    return Counter({h: 1 if ops[h] == "DequantizeLinear" else k for h, k in nodes.items()})


def expanded_ops(model: onnx.ModelProto) -> list[str]:
    """The ops of `model`'s main graph that stock ORT (CPU) expands from their ONNX function, having
    no kernel for them at the model's opset; the ones a function in the model makes it expand early."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ortc

    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    kernels = {
        (k.domain or "ai.onnx", k.op_name) for k in ortc.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"
    }
    found = []
    for n in model.graph.node:
        domain = n.domain or "ai.onnx"
        if (domain, n.op_type) in kernels or domain not in ("ai.onnx",) or n.op_type in found:
            continue
        try:
            schema = onnx.defs.get_schema(n.op_type, opsets.get(domain, 1), n.domain)
        except onnx.defs.SchemaError:
            continue
        if any(getattr(schema, a) for a in ("has_function", "has_context_dependent_function")):  # not in the stubs
            found.append(n.op_type)
    return found


def function_difference(path: Path) -> str | None:
    """What stock ORT runs differently for the model at `path` (held in one file) once the model holds a
    function, as a rewrite does (an unused one is enough), a DequantizeLinear's copies counting as one;
    None when it runs the same graph. The original's optimized graph is compared with that of a copy
    holding a function that computes Identity."""
    model = with_function(onnx.load(str(path)))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "with_function.onnx"
        onnx.save(model, str(copy))
        if difference(path, copy, dq_copies=True) is None:
            return None
        alone, held = (_op_counts(p) for p in (path, copy))
    return f"ORT runs {_ops(alone - held)} of the original as {_ops(held - alone)}"


def with_function(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` holding one more model-local function, which nothing calls (it computes Identity)."""
    body = [helper.make_node("Identity", ["x"], ["y"])]
    model.functions.append(
        helper.make_function("hexfuse.probe", "Unused", ["x"], ["y"], body, [helper.make_opsetid("", 13)])
    )
    return model


def lost_kernels(original: Path, rewritten: Path) -> str | None:
    """The quantized kernels (ORT's fusions of a QDQ group: QLinearConv, QGemm, MatMulIntegerToFloat,
    ...) ORT runs fewer of for `rewritten` than for `original`, in one line; None when none. A rewrite
    may run more (a micro-batch pair's halves), but one fewer runs a QDQ group in float, rounded
    otherwise; how often that moves an output step depends on the inputs, and ORT's graph does not."""
    alone, rewrite = (
        Counter({op: k for op, k in _op_counts(p).items() if _quantized_kernel(op)}) for p in (original, rewritten)
    )
    lost = alone - rewrite
    return None if not lost else f"ORT runs {_ops(lost)} fewer for the rewrite than for the original"


def _quantized_kernel(op: str) -> bool:
    name = op.split(".")[-1]
    return name.startswith("QLinear") or name in _QUANTIZED


_QUANTIZED = {"QGemm", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "MatMulNBits", "ConvInteger", "MatMulInteger"}


def _op_counts(path: Path) -> Counter[str]:
    """How many nodes of each op ORT runs for the model at `path`, a DequantizeLinear's copies as one."""
    nodes, _, ops = _hashes(str(path), path.stat().st_mtime_ns)
    return Counter(ops[h] for h in _once_each_dq(nodes, ops).elements())


def _ops(counts: Counter[str]) -> str:
    """The four commonest ops, computing ones before the QDQ nodes and Transposes around them."""
    ranked = sorted(counts.items(), key=lambda item: (item[0].split(".")[-1] in _AROUND, -item[1]))
    return ", ".join(f"{k} {op}" for op, k in ranked[:4]) or "nothing"


_AROUND = {"QuantizeLinear", "DequantizeLinear", "Transpose"}


REDUCTIONS = ("ReduceMean", "ReduceSum")


def pushed_transposes(path: Path | None, model: onnx.ModelProto) -> dict[str, list[int]]:
    """The ReduceMean and ReduceSum nodes of the main graph that ORT's optimizer (CPU, default level) makes read
    the input of the Transpose before them, by node name, with that Transpose's perm: ORT then sums that tensor, in
    its order (moonshine_tiny_encoder's first layer norm), which the kernel follows (HFX_P_REDUCE_ORT_PERM). ORT
    moves some such Transposes and not others (a perm [2, 0, 1] read by a Sub too: not), so it is asked, once, and
    only where the model has a reduction of a Transpose with a perm."""
    producer = {o: n for n in model.graph.node for o in n.output}
    candidates: dict[str, onnx.NodeProto] = {}
    for n in model.graph.node:
        t = producer.get(n.input[0]) if n.op_type in REDUCTIONS and n.domain in ("", "ai.onnx") and n.input else None
        if n.name and t is not None and t.op_type == "Transpose" and any(a.name == "perm" for a in t.attribute):
            candidates[n.name] = t
    if not candidates or path is None:
        return {}
    try:
        ran = _first_inputs(str(path), path.stat().st_mtime_ns)
    except Exception:  # noqa: BLE001 - a model ORT cannot optimize: the kernel sums the Transpose's output
        return {}
    return {
        name: list(helper.get_attribute_value(next(a for a in t.attribute if a.name == "perm")))
        for name, t in candidates.items()
        if name in ran and ran[name] == t.input[0]
    }


@functools.lru_cache(maxsize=8)
def _first_inputs(path: str, _mtime_ns: int) -> dict[str, str]:
    """Each node's first input in the graph ORT runs for the model at `path`, by node name: asked once
    per file, not once per selection round (moonshine_tiny_encoder's rewrite prepares pairs 8 times)."""
    return {n.name: n.input[0] for n in optimized(Path(path)).graph.node if n.input}
