"""Co-locate models: merge two models (or N copies of one) into one model that runs them all.

Every name of stream k (inputs, outputs, initializers, value_info, node outputs and node names,
subgraphs included) gets the prefix `<name>/`: `a/` and `b/` for two models, `r0/`, `r1/`, ...
for `--requests N` copies. Copies of one file share their weights: each initializer is kept once,
as `shared/<name>` (listed once as a graph input where an old export listed it as one). Opset
imports are reconciled to the highest version of each domain when every op of the older model has
the same definition there (else the default domain is converted with onnx's version converter);
the IR version is the higher one. The streams and the pairing intent (which streams pair,
`--priority`, `--max-slowdown`) are recorded in the model's metadata under METADATA_KEY, where the
`colocate` pair kind (kinds/colocate.py) reads them: a pair kind sees only the graph.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import helper

from . import random_ops
from .contract import DOMAIN
from .errors import ModelError, UsageError, VerificationError, first_line
from .graph import _is_symbol_name as is_symbol_name  # graph.py is owned elsewhere: not renamed there
from .graph import node_reads, read_model, toposort
from .nested import all_nodes, subgraphs

if TYPE_CHECKING:
    from .kinds.colocate import Modelled
    from .pipeline import RewriteResult

METADATA_KEY = "hexfuse.colocate"
SHARED_PREFIX = "shared/"
DEFAULT_MAX_SLOWDOWN = 0.05


@dataclass
class Plan:
    """What the merged model holds and how its streams are to be paired (stored as metadata)."""

    streams: list[str]  # name prefixes, "a/" ...
    sources: list[str]  # the file each stream came from
    pairs: list[tuple[int, int]]  # streams paired with each other
    priority: int | None = None  # index of the latency-critical stream
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN
    shared_weights: int = 0  # initializers kept once for several streams
    target: str | None = None  # the cost-model target the pairs are chosen for (`bench` models with it)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        doc = json.loads(text)
        doc["pairs"] = [tuple(p) for p in doc["pairs"]]
        return cls(**doc)


@dataclass
class Merged:
    model: onnx.ModelProto
    plan: Plan
    notes: list[str] = field(default_factory=list)  # opset reconciliations done


def plan_of(model: onnx.ModelProto) -> Plan | None:
    """The co-location plan recorded in a merged model, or None for any other model."""
    for p in model.metadata_props:
        if p.key == METADATA_KEY:
            try:
                return Plan.from_json(p.value)
            except (ValueError, TypeError, KeyError):
                return None
    return None


def stream_names(n_models: int, requests: int, names: list[str] | None) -> list[str]:
    count = max(n_models, requests)
    if names is None:
        names = ["a", "b"] if n_models == 2 else [f"r{k}" for k in range(count)]
    if len(names) != count:
        raise UsageError(f"--names gives {len(names)} name(s) for {count} stream(s)")
    bad = [n for n in names if not n or n.strip() != n]
    if bad:
        raise UsageError("--names: a stream name must be non-empty and have no surrounding spaces")
    if len(set(names)) != len(names):
        raise UsageError(f"--names: every stream needs a name of its own ({', '.join(names)})")
    if any("/" in n for n in names):
        raise UsageError(f"--names: a stream name cannot hold '/', which ends a stream's prefix ({', '.join(names)})")
    return [n + "/" for n in names]


def merge(
    paths: list[str | os.PathLike[str]],
    requests: int = 1,
    names: list[str] | None = None,
    priority: int | None = None,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
    target: str | None = None,
    share_weights: bool = False,
) -> Merged:
    """One model running every stream. Two paths, or one path with requests >= 2 copies; `target`
    is recorded in the plan as the target its pairs are chosen for. `share_weights`: the two paths
    are versions of one model (colocate_ifs.py: its If's two branches inlined), whose initializers
    held alike by both are kept once."""
    if len(paths) not in (1, 2) or (len(paths) == 1 and requests < 2) or (len(paths) == 2 and requests > 1):
        raise UsageError("co-locate two models, or one model with --requests N (N >= 2)")
    prefixes = stream_names(len(paths), requests, names)
    same_file = len(paths) == 1 or share_weights or _same_file(Path(paths[0]), Path(paths[1]))
    sources = [read_model(p) for p in paths]
    for path, m in zip(paths, sources):
        _in_order(m, path)
        _refuse_rewritten(m, Path(path))
    notes: list[str] = []
    opsets = _reconcile_opsets(sources, [str(p) for p in paths], notes)
    files = [str(paths[0])] * requests if len(paths) == 1 else [str(p) for p in paths]
    if same_file:
        sources = [_weights_as_initializers(m) for m in sources]
    copies = [sources[0]] * requests if len(paths) == 1 else sources
    # An initializer that is also a graph output (a QDQ MarbleNet's folded 'signal_len') stays each
    # stream's: its output is the stream's; shared, no stream had it (KeyError 'r0/signal_len').
    outputs = {v.name for m in copies for v in m.graph.output}
    shared = _held_alike(copies, outputs) if same_file else set()

    merged = onnx.ModelProto()
    merged.ir_version = max(m.ir_version for m in sources)
    merged.producer_name = "hexfuse-onnx colocate"
    merged.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(opsets.items()))
    graph = merged.graph
    graph.name = "colocate(" + ", ".join(m.graph.name or "main" for m in sources) + ")"
    seen: dict[str, int] = {}  # merged name -> the stream that uses it
    for k, (prefix, source, model) in enumerate(zip(prefixes, files, copies)):
        renamed = _renamed_graph(model.graph, _renamer(prefix, shared), prefix)
        _refuse_clashes(renamed, k, prefixes, shared, seen)
        for kept in ("output", "value_info", "node", "sparse_initializer"):
            getattr(graph, kept).extend(getattr(renamed, kept))
        # A shared weight that an old export also lists as an input stays one (overridable) input:
        # ONNX Runtime folds only initializers that are not inputs, and results must not change.
        graph.input.extend(v for v in renamed.input if k == 0 or not v.name.startswith(SHARED_PREFIX))
        graph.initializer.extend(
            t for t in renamed.initializer if not (t.name.startswith(SHARED_PREFIX) and prefix != prefixes[0])
        )
        _merge_functions(merged, model, source)
        merged.metadata_props.extend(
            onnx.StringStringEntryProto(key=prefix + p.key, value=p.value) for p in model.metadata_props
        )
    pairs = [(k, k + 1) for k in range(0, len(prefixes) - 1, 2)]
    plan = Plan(prefixes, files, pairs, priority, max_slowdown, len(shared) if len(copies) > 1 else 0, target)
    merged.metadata_props.append(onnx.StringStringEntryProto(key=METADATA_KEY, value=plan.to_json()))
    merged.doc_string = "co-located by hexfuse-onnx: " + ", ".join(f"{p} {f}" for p, f in zip(prefixes, files))
    return Merged(merged, plan, notes)


def _held_alike(copies: list[onnx.ModelProto], outputs: set[str]) -> set[str]:
    """The initializers (no graph output) every copy holds with the same value: all of them for
    copies of one file."""
    held = {t.name: t for t in copies[0].graph.initializer if t.name not in outputs}
    for other in copies[1:]:
        if other is copies[0]:
            continue
        theirs = {t.name: t for t in other.graph.initializer}
        held = {n: t for n, t in held.items() if n in theirs and theirs[n].SerializeToString() == t.SerializeToString()}
    return set(held)


def _in_order(model: onnx.ModelProto, path: str | os.PathLike[str]) -> bool:
    """Put the model's main graph's nodes in topological order (stable: as written when they are);
    whether any moved. ONNX Runtime sorts them itself, the full checker the merge must pass does not:
    rapid-table-det's paddle2onnx detector lists a Cast before the Squeeze it reads."""
    g = model.graph
    nodes = list(g.node)
    available = {t.name for t in g.initializer} | {v.name for v in g.input}
    order = toposort(nodes, [node_reads(n) for n in nodes], available, str(path))
    if order == list(range(len(nodes))):
        return False
    g.ClearField("node")
    g.node.extend(nodes[i] for i in order)
    return True


SHARED_CONSTANT_BYTES = 1024  # a Constant node's tensor at least this large is a weight, shared as one


def _weights_as_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its main graph's Constant nodes holding a weight (a `value` tensor of at least
    SHARED_CONSTANT_BYTES that is no graph output) made initializers, which the streams then share:
    paddle2onnx writes every weight so (SLANet: 727 Constants, no initializer), and two requests of
    it shared none (the merged model 2x its weights). Outputs are unchanged; shape constants stay."""
    outputs = {v.name for v in model.graph.output}
    weights = [
        n
        for n in model.graph.node
        if n.op_type == "Constant"
        and n.domain in ("", "ai.onnx")
        and len(n.output) == 1
        and n.output[0] not in outputs
        and len(n.attribute) == 1
        and n.attribute[0].name == "value"
        and len(n.attribute[0].t.raw_data) + 4 * len(n.attribute[0].t.float_data) >= SHARED_CONSTANT_BYTES
    ]
    if not weights:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    gone = {n.output[0] for n in weights}
    kept = [n for n in out.graph.node if not (n.op_type == "Constant" and n.output and n.output[0] in gone)]
    out.graph.ClearField("node")
    out.graph.node.extend(kept)
    for n in weights:
        t = onnx.TensorProto()
        t.CopyFrom(n.attribute[0].t)
        t.name = n.output[0]
        out.graph.initializer.append(t)
    return out


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_rewritten(model: onnx.ModelProto, path: Path) -> None:
    if any(n.domain == DOMAIN for n in model.graph.node):
        raise ModelError(f"{path}: already rewritten (has FusedHexPair nodes); co-locate its original (`unfuse` it)")


def _renamer(prefix: str, shared: set[str]) -> Callable[[str], str]:
    def rename(name: str) -> str:
        if not name:
            return name  # an omitted optional input or output
        return SHARED_PREFIX + name if name in shared else prefix + name

    return rename


def _renamed_graph(graph: onnx.GraphProto, rename: Callable[[str], str], node_prefix: str) -> onnx.GraphProto:
    out = onnx.GraphProto()
    out.CopyFrom(graph)
    _rename_in_place(out, rename, node_prefix)
    return out


def _rename_in_place(graph: onnx.GraphProto, rename: Callable[[str], str], node_prefix: str) -> None:
    """Tensors renamed by `rename` (shared ones take one name); a node's name always takes the stream's
    prefix: a node named as a shared tensor is still one per stream (ORT refuses duplicate node names)."""
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        v.name = rename(v.name)
        for d in v.type.tensor_type.shape.dim:
            # each stream's symbolic lengths are its own; '?' (an exporter's "unknown") stays unknown
            if d.HasField("dim_param") and is_symbol_name(d.dim_param):
                d.dim_param = _renamed_dim(d.dim_param, rename)
    for t in graph.initializer:
        t.name = rename(t.name)
    for s in graph.sparse_initializer:
        s.values.name = rename(s.values.name)
    for n in graph.node:
        n.input[:] = [rename(t) for t in n.input]
        n.output[:] = [rename(t) for t in n.output]
        if n.name:
            n.name = node_prefix + n.name
        for sub in subgraphs(n):
            _rename_in_place(sub, rename, node_prefix)


_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_DIM_FUNCTIONS = {"floor", "ceiling", "ceil", "Min", "Max", "min", "max", "Mod", "mod"}


def dim_symbol(name: str) -> str:
    """A prefixed name as a dim symbol: `a/batch` -> `a_batch`."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", name)


def _renamed_dim(text: str, rename: Callable[[str], str]) -> str:
    """Each symbol inside a dim renamed as an identifier (`batch*seq` -> `a_batch*a_seq`), so an
    expression stays an expression rather than `a/batch*seq`, which reads as a division."""

    def one(m: re.Match[str]) -> str:
        return m[0] if m[0] in _DIM_FUNCTIONS else dim_symbol(rename(m[0]))

    return _DIM_NAME.sub(one, text)


def _graph_names(graph: onnx.GraphProto) -> Iterable[str]:
    yield from (v.name for v in graph.input)
    yield from (v.name for v in graph.output)
    yield from (t.name for t in graph.initializer)
    yield from (t for n in graph.node for t in n.output if t)


def _refuse_clashes(
    graph: onnx.GraphProto, stream: int, prefixes: list[str], shared: set[str], seen: dict[str, int]
) -> None:
    """Prefixed names of two streams must differ (a stream name containing '/' can make
    'a/' + 'b/x' equal 'a/b/' + 'x'); shared weights are meant to be one name."""
    shared_names = {SHARED_PREFIX + s for s in shared}
    for name in _graph_names(graph):
        if name in shared_names:
            continue
        other = seen.get(name)
        if other is not None and other != stream:
            raise ModelError(
                f"streams {other + 1} ('{prefixes[other][:-1]}') and {stream + 1} ('{prefixes[stream][:-1]}') "
                f"both name a tensor '{name}' after prefixing: their inputs and outputs cannot be told apart; "
                "choose other --names"
            )
        seen[name] = stream


def _merge_functions(merged: onnx.ModelProto, model: onnx.ModelProto, source: str) -> None:
    have = {(f.domain, f.name, f.overload): f for f in merged.functions}
    for f in model.functions:
        key = (f.domain, f.name, f.overload)
        if key not in have:
            merged.functions.append(f)
        elif have[key].SerializeToString() != f.SerializeToString():
            raise ModelError(
                f"{source}: model-local function {f.domain}::{f.name} differs from the other model's function "
                "of the same name; the two cannot share one model"
            )


# ---- opsets ------------------------------------------------------------------------------------


def _reconcile_opsets(models: list[onnx.ModelProto], paths: list[str], notes: list[str]) -> dict[str, int]:
    """The highest version of each domain; a model importing an older one is kept when its ops are
    defined alike there, converted when the default domain's are not, refused otherwise."""
    wanted: dict[str, int] = {}
    for m in models:
        for o in m.opset_import:
            domain = "" if o.domain == "ai.onnx" else o.domain
            wanted[domain] = max(wanted.get(domain, 0), o.version)
    for k, m in enumerate(models):
        own = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}
        for domain, version in own.items():
            if version == wanted[domain]:
                continue
            changed = _changed_ops(m.graph, domain, version, wanted[domain])
            if not changed:
                continue
            if domain != "":
                raise ModelError(
                    f"{paths[k]}: op '{changed[0]}' of {domain} opset {version} is defined differently in opset "
                    f"{wanted[domain]} that the other model imports; the opsets cannot be reconciled"
                )
            models[k] = _converted(m, wanted[domain], paths[k], changed[0])
            notes.append(f"{paths[k]}: converted from opset {version} to {wanted[domain]} ({changed[0]} changed)")
    return wanted


def _changed_ops(graph: onnx.GraphProto, domain: str, old: int, new: int) -> list[str]:
    """Ops of `domain` in the graph whose definition differs between the two opset versions (an op
    onnx does not know, such as a contrib op in a versioned domain, counts as changed)."""
    changed = []
    for n in all_nodes(graph):
        if ("" if n.domain == "ai.onnx" else n.domain) != domain or n.op_type in changed:
            continue
        try:
            before = onnx.defs.get_schema(n.op_type, old, domain).since_version
            after = onnx.defs.get_schema(n.op_type, new, domain).since_version
        except onnx.defs.SchemaError:
            changed.append(n.op_type)
            continue
        if before != after:
            changed.append(n.op_type)
    return changed


def _converted(model: onnx.ModelProto, version: int, path: str, op: str) -> onnx.ModelProto:
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(model, version)
    except Exception as exc:  # noqa: BLE001 - the converter raises bare RuntimeErrors
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ModelError(
            f"{path}: its opset cannot be raised to {version} to match the other model "
            f"(op '{op}' changed; onnx's version converter: {first})"
        ) from None
    return converted


# ---- checking and splitting --------------------------------------------------------------------


def stream_model(model: onnx.ModelProto, prefix: str) -> onnx.ModelProto:
    """One stream of a merged (not rewritten) model as a model of its own, names still prefixed."""
    g = model.graph
    out = onnx.ModelProto()
    out.ir_version = model.ir_version
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    mine = [n for n in g.node if any(t.startswith(prefix) for t in n.output)]
    used = {t for n in mine for t in _reads(n)}
    graph = out.graph
    graph.name = prefix[:-1]
    graph.node.extend(mine)
    graph.input.extend(v for v in g.input if v.name.startswith(prefix) or v.name in used)
    graph.output.extend(v for v in g.output if v.name.startswith(prefix))
    graph.initializer.extend(t for t in g.initializer if t.name.startswith(prefix) or t.name in used)
    graph.value_info.extend(v for v in g.value_info if v.name.startswith(prefix))
    return out


def _reads(node: onnx.NodeProto) -> list[str]:
    from .graph import node_reads

    return node_reads(node)


def _check_shapes(model: onnx.ModelProto, plan: Plan, shapes: dict[str, list[int]]) -> None:
    """--shape takes merged names (`r0/x`); a name no merged input has would be ignored silently. Each
    given shape must have its input's rank and keep the dims its model fixes (named by its source)."""
    from .graph import check_shape_override

    weights = {t.name for t in model.graph.initializer}
    inputs = [v.name for v in model.graph.input if v.name not in weights]
    unknown = sorted(set(shapes) - set(inputs))
    if unknown:
        raise UsageError(
            f"--shape names no input of the merged model: {', '.join(unknown)} "
            f"(its inputs, by stream prefix: {', '.join(inputs)})"
        )
    for v in model.graph.input:
        if v.name in shapes:
            source = next(s for p, s in zip(plan.streams, plan.sources) if v.name.startswith(p))
            check_shape_override(v, shapes[v.name], source)


def check_outputs(
    merged_path: Path,
    plan: Plan,
    shapes: dict[str, list[int]],
    seed: int = 0,
    feeds: dict[str, np.ndarray] | None = None,
    op_for_op: bool = False,
    opened_as: dict[str, Path] | None = None,
) -> tuple[int, str]:
    """Each stream's outputs in the merged model must equal, bit for bit, its source model's outputs
    on the same inputs (`feeds` by merged name, else seeded random ones; stock ONNX Runtime, one
    thread each). `op_for_op`: both run without ORT's graph optimisations (ORT_DISABLE_ALL), for a
    specialised model, where ORT fuses and folds differently once shapes are constant
    (gpt2_torchscript: logits 1e-6 apart at ORT_ENABLE_BASIC; ppocr_rec: 9.5e-7) though every op
    computes the same. Where ORT's optimisations differ on the merge alone, the outputs are
    compared op for op too: a weight shared by the streams feeds two DequantizeLinear consumers,
    so ORT no longer turns DQ + MatMul into MatMulNBits with int8 activations (fsmn_vad_qdq_u16u8:
    2.5% of the logits' scale apart, exact op for op). `opened_as`: the file a stream's source is
    run from, where not its own (seeded: `_seeded_for_check`). Returns the outputs compared, and where
    they were compared op for op after ORT's optimised runs differed, how far those were apart (else '')."""
    from .verify import check_inputs_match, random_inputs, session

    given = feeds is not None
    if feeds is None:
        feeds = random_inputs(session(merged_path), shapes, seed)
    else:
        check_inputs_match(session(merged_path), feeds)
    opened_as = opened_as or {}
    outputs: dict[bool, Outputs] = {}  # each regime's source outputs (True: op for op), each run once

    def compare(unoptimised: bool) -> int:
        if unoptimised not in outputs:
            outputs[unoptimised] = _source_outputs(plan, feeds, unoptimised, given, opened_as)
        return _compare_outputs(merged_path, plan, feeds, outputs[unoptimised], unoptimised)

    if op_for_op:
        compared = compare(True)
        why = "the fixed shapes let stock ORT fuse the merge otherwise than its sources"
    else:
        why = "stock ORT runs the merge otherwise than its sources"
    try:
        return compare(False), ""
    except VerificationError as exc:
        optimised = exc.message
    if not op_for_op:
        compared = compare(True)
        why += (
            " (a weight the streams share is fused no more, e.g. its DequantizeLinear + MatMul stay float where ORT "
            "makes a source's MatMulNBits with int8 activations)"
        )
    return compared, (
        f" op for op (ORT's graph optimisations off); with them on, {why}: {optimised}"
        f"{_own_drift(outputs[False], outputs[True])}"
    )


Outputs = dict[str, list[tuple[str, np.ndarray]]]  # stream prefix -> its source's (output name, value), in order


def _own_drift(optimised: Outputs, unoptimised: Outputs) -> str:
    """How far ORT's optimisations move the sources' own outputs from their op-for-op values, as the yardstick
    of a merge that differs from them only with optimisations on (Moonshine's dynamically quantised decoder as
    a hybrid with no past: its prefill logits 0.26 of their scale from the decoder's, the decoder's own 3.2e-07)."""
    worst = 0.0
    for prefix, values in optimised.items():
        for (_, ref), (_, out) in zip(values, unoptimised[prefix]):
            if ref.dtype.kind == "f" and ref.shape == out.shape and ref.size:
                worst = max(worst, _relative(ref, out))
    return f"; ORT's optimisations move the sources' own outputs by up to {worst:.2g} of their scale" if worst else ""


def _relative(ref: np.ndarray, out: np.ndarray) -> float:
    """The largest difference as a fraction of the output's largest magnitude (0 for all-zero outputs)."""
    scale = float(np.nanmax(np.abs(ref.astype(np.float64)))) if ref.size else 0.0
    apart = float(np.nanmax(np.abs(ref.astype(np.float64) - out))) if ref.size else 0.0
    return apart / scale if scale > 0 else 0.0


def _source_outputs(
    plan: Plan, feeds: dict[str, np.ndarray], op_for_op: bool, given: bool, opened_as: dict[str, Path]
) -> Outputs:
    """Each stream's source run on its part of `feeds` (op for op, or as ORT optimises it); ModelError naming the
    inputs where a source fails on them."""
    from .verify import session, shapes_label, unoptimised_options

    expected = {}
    for prefix, source in zip(plan.streams, plan.sources):
        own = session(opened_as.get(prefix, source), unoptimised_options() if op_for_op else None)
        own_feeds = {a.name: feeds[prefix + a.name] for a in own.get_inputs()}
        own_names = [o.name for o in own.get_outputs()]
        try:
            expected[prefix] = list(zip(own_names, own.run(own_names, own_feeds)))
        except Exception as exc:  # noqa: BLE001 - ORT's own error, quoted
            if given:
                raise ModelError(
                    f"{source}: the model fails on the --inputs ({shapes_label(own_feeds)}): {first_line(exc)}"
                ) from None
            model = onnx.load(source, load_external_data=False)
            same = [prefix, *(p for p, s in zip(plan.streams, plan.sources) if s == source and p != prefix)]
            raise ModelError(
                f"{source}: the model fails on the inputs the merge is checked with "
                f"({shapes_label({prefix + k: v for k, v in own_feeds.items()})}; seeded random values; dims not "
                f"given by --shape are 1, as it runs at none the pass tries){_real_inputs_hint(model, same)}: "
                f"{first_line(exc)}"
            ) from None
    return expected


def _compare_outputs(
    merged_path: Path, plan: Plan, feeds: dict[str, np.ndarray], expected: Outputs, op_for_op: bool
) -> int:
    """The merged model run as its sources were (`op_for_op`): its outputs against theirs (`expected`), bit for
    bit; VerificationError naming the first that differs, and by how much."""
    from .verify import session, unoptimised_options

    merged = session(merged_path, unoptimised_options() if op_for_op else None)
    names = [o.name for o in merged.get_outputs()]
    try:
        got = dict(zip(names, merged.run(names, feeds)))
    except Exception as exc:  # noqa: BLE001
        raise VerificationError(f"the merged model fails where its sources run: {first_line(exc)}") from None
    compared = 0
    for prefix, source in zip(plan.streams, plan.sources):
        for name, ref in expected[prefix]:
            out = got[prefix + name]
            if ref.shape != out.shape or not np.array_equal(ref, out, equal_nan=ref.dtype.kind == "f"):
                apart = ""
                if ref.shape == out.shape and ref.dtype.kind == "f" and ref.size:
                    gap = float(np.nanmax(np.abs(ref.astype(np.float64) - out)))
                    apart = f" by up to {gap:.3g} ({_relative(ref, out):.2g} of its scale)"
                raise VerificationError(
                    f"the merged model's output '{prefix + name}' differs from {source}'s own output '{name}'{apart}"
                )
            compared += 1
    return compared


_MASK_NAME = re.compile(r"mask", re.IGNORECASE)


def _real_inputs_hint(model: onnx.ModelProto, prefixes: list[str]) -> str:
    """The integer inputs random 0/1 may break, to give with --inputs by merged name (`prefixes`: the
    streams of this model); for one named like a mask, its usual value, said rather than assumed."""
    from .verify import integer_inputs

    names = integer_inputs(model)
    if not names:
        return ""
    merged = ", ".join(prefixes[0] + n for n in names)
    others = f" and the same for {', '.join(prefixes[1:])}" if len(prefixes) > 1 else ""
    hint = f"; its integer input(s) {', '.join(map(repr, names))} get random 0 or 1, which may be the cause: "
    hint += f"give real ones with --inputs, by merged name ({merged}{others})"
    masks = [n for n in names if _MASK_NAME.search(n)]
    if masks:
        hint += (
            f"; {', '.join(map(repr, masks))} {'is' if len(masks) == 1 else 'are'} named like an attention mask: "
            "usually all ones, as long as the keys (past + new tokens)"
        )
    return hint


def _checked_shapes(
    merged_path: Path, shapes: dict[str, list[int]], progress: Callable[[str], None]
) -> dict[str, list[int]]:
    """The input shapes the merge is checked at: where the pass analyses it (`--shape`, the other
    dims where the merged model runs: `pipeline.runnable_inputs`, as `rewrite` searches them);
    where it runs at none, `shapes` and the other dims 1, whose failure names what to give."""
    from . import pipeline

    try:
        return pipeline.runnable_inputs(merged_path, shapes, progress)
    except ModelError:
        return shapes


# ---- end to end: merge, prove the merge, pair and rewrite, write -------------------------------


@dataclass
class Result:
    merged: Merged
    output: Path
    compared_outputs: int  # stream outputs proven equal to their source's
    rewrite: RewriteResult
    modelled: Modelled | None  # the written model's modelled times (None: no co-location plan)
    checked_at: dict[str, list[int]] = field(default_factory=dict)  # the input dims the merge was checked at
    compared_how: str = ""  # where the outputs were equal op for op only: how ORT's optimised runs differed


def colocate(
    paths: list[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    requests: int = 1,
    names: list[str] | None = None,
    priority: int | None = None,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
    target: str = "hexagon-v73",
    kinds: list[str] | None = None,
    min_gain: float | None = None,
    shapes: dict[str, list[int]] | None = None,
    progress: Callable[[str], None] = lambda _: None,
    verify_plugin: bool = False,
    feeds: dict[str, np.ndarray] | None = None,
    specialise: bool = False,
    share_weights: bool = False,
) -> Result:
    """Merge, check the merge (full checker; every stream's outputs bit-equal to its source's on
    stock ONNX Runtime), then pair and rewrite it with the normal pipeline, which verifies again and
    writes atomically. `shapes` are input dims by merged name (`a/x`); with `specialise` the written
    model has them fixed and the integer computations they decide folded (fold.py); the rewrite
    verifies on `feeds` too; `share_weights` as `merge`'s. Nothing is written on error."""
    import tempfile

    from . import pipeline
    from .errors import WriteError
    from .kinds.colocate import Colocate, modelled
    from .kinds.dag import dag_facts
    from .modelio import check_output_folder, stage

    out = Path(output)
    if max_slowdown < 0:
        raise UsageError("--max-slowdown must be >= 0")
    for p in paths:
        if out.resolve() == Path(p).resolve():
            raise WriteError(f"{out}: the output would overwrite an input model; choose another -o")
    check_output_folder(out)
    merged = merge(paths, requests, names, priority, max_slowdown, target, share_weights)
    _check_shapes(merged.model, merged.plan, shapes or {})
    progress(f"merged {len(merged.plan.streams)} streams ({merged.plan.shared_weights} weights shared)")
    for note in merged.notes:
        progress(note)
    unfrozen = Merged(merged.model, merged.plan) if specialise else None
    if specialise:
        from .fold import specialise as fold

        merged.model, folded = fold(merged.model, shapes or {}, inline_ifs=True)
        free = [v.name for v in merged.model.graph.input if _free_dims(v)]
        still = f"; still symbolic (no --shape gives them): {', '.join(free)}" if free else ""
        progress(f"input dims fixed; {len(folded)} integer node(s) they decide folded to constants{still}")
    try:
        folder = tempfile.mkdtemp(prefix=f".{out.name}.colocate-", dir=out.parent)
    except OSError as exc:
        raise WriteError(f"{out.parent}: output directory is not writable ({exc.strerror})") from None
    try:
        merged_path = Path(folder) / "merged.onnx"
        stage(merged.model, merged_path, None).commit()
        try:
            _check_merge(merged_path, paths)
        except VerificationError:
            if unfrozen is not None:  # frozen at dims the sources may not run at: that is named (exit 3)
                _check_runs_unfrozen(unfrozen, shapes or {}, Path(folder))
            raise
        at = shapes or {} if feeds is not None else _checked_shapes(merged_path, shapes or {}, progress)
        checked, sources = _seeded_for_check(merged_path, merged, Path(folder))
        compared, how = check_outputs(checked, merged.plan, at, feeds=feeds, op_for_op=specialise, opened_as=sources)
        progress(f"merged model: full checker passed, {compared} output(s) equal their source's exactly{how}")
        result = pipeline.rewrite(
            merged_path,
            out,
            kinds or [Colocate.name],
            target,
            min_gain=pipeline.DEFAULT_MIN_GAIN if min_gain is None else min_gain,
            shapes=shapes,
            progress=progress,
            verify_plugin=verify_plugin,
            inputs=feeds,  # --inputs, or a hybrid's masks of ones: GroupQueryAttention refuses random lengths
        )
        if result.output is None:
            stage(merged.model, out, None).commit()
        a = result.analysis
        chosen = a.pairs if result.output is not None else []
        model_time = modelled(a.graph, a.profile, dag_facts(a.graph), chosen, a.target)
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return Result(merged, out, compared, result, model_time, at, how)


def _check_runs_unfrozen(unfrozen: Merged, shapes: dict[str, list[int]], folder: Path) -> None:
    """The merge before --freeze-shapes, run at `shapes` as an unfrozen merge is checked: a model that does
    not run at those dims (PP-OCR's detector at 300x300, not a multiple of 32) fails here with ORT's reason
    (ModelError), where its frozen copy failed only the checker's shape inference."""
    from .modelio import stage

    path = folder / "unfrozen.onnx"
    stage(unfrozen.model, path, None).commit()
    checked, sources = _seeded_for_check(path, unfrozen, folder)
    check_outputs(checked, unfrozen.plan, shapes, opened_as=sources)


def _seeded_for_check(merged_path: Path, merged: Merged, folder: Path) -> tuple[Path, dict[str, Path]]:
    """The merged model and each stream's source as the merge check runs them: as they are, or, where
    random ops have no seed (ORT would seed them by node index, which the merge changes), copies with
    seeds given by merged name, so each stream draws its own numbers and its source the same ones. The
    rewrite that follows verifies a seeded copy of its own and writes the model unseeded (random_ops)."""
    if not random_ops.unseeded(merged.model):
        return merged_path, {}
    sources = {
        prefix: random_ops.seeded_file(Path(source), folder / f"source{k}.seeded.onnx", prefix)
        for k, (prefix, source) in enumerate(zip(merged.plan.streams, merged.plan.sources))
    }
    return random_ops.seeded_file(merged_path, folder / "merged.seeded.onnx"), sources


def _check_merge(merged_path: Path, paths: list[str | os.PathLike[str]]) -> None:
    """The merge passes the full checker; when a source does not either, that is named (exit 3), not
    the merge (exit 4): the full check is what colocate asks of an input that `rewrite` does not."""
    from .verify import check

    try:
        check(merged_path)
    except VerificationError:
        for path in dict.fromkeys(map(str, paths)):
            try:  # as merged: its nodes sorted (`_in_order`)
                onnx.checker.check_model(_as_merged(path), full_check=True)
            except Exception as exc:  # noqa: BLE001 - the checker's own errors, with its message
                raise ModelError(
                    f"{path}: the input model fails onnx.checker's full check (shape inference), which a "
                    f"co-located model must pass: {first_line(exc, 300)}"
                ) from None
        raise


def _as_merged(path: str) -> str | onnx.ModelProto:
    """The source as the merge read it: the file, or the model with its nodes sorted when they were not."""
    model = read_model(path)
    return model if _in_order(model, path) else path


def _free_dims(v: onnx.ValueInfoProto) -> bool:
    return any(not d.HasField("dim_value") or d.dim_value < 0 for d in v.type.tensor_type.shape.dim)  # 0: an empty past
