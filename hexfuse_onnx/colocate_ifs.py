"""Co-locate two requests of a model whose main graph switches on a graph input.

optimum's merged decoder is one If on `use_cache_branch` (a bool graph input): its then branch is a
decode step, its else branch the first step. Two requests of it merged as they are hold two Ifs, and
the colocate kind pairs nothing inside them. Here each of the four combinations of the two streams'
conditions is co-located as a flat model is (colocate.colocate: merged, checked, paired, verified):
each stream is its source with the If replaced by the branch the combination takes (the outer-scope
values the branch read are then the main graph's own names). The four models are nested in Ifs on
the two streams' conditions:

    If(r0 cond) then: If(r1 cond) then: r0 then + r1 then   else: r0 then + r1 else
                else: If(r1 cond) then: r0 else + r1 then   else: r0 else + r1 else

The written model passes the full checker and gives, at each combination, bit for bit what that
combination's co-located model gives (stock ORT, op for op), which colocate proved against the
sources. The condition may reach the If through Identity and Cast nodes.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from . import contract as C
from .colocate import METADATA_KEY, Plan, Result, _rename_in_place, colocate, stream_names
from .errors import HexfuseError, VerificationError, WriteError, first_line
from .graph import node_reads, outer_scope_names, read_model
from .nested import all_nodes, subgraphs
from .rewrite import pair_number

SWITCH_OPS = ("Identity", "Cast")
COMBINATIONS = ((True, True), (True, False), (False, True), (False, False))
SWITCH_PREFIX = "hexfuse/switch/"  # the main graph's copies of the condition's Identity/Cast nodes


@dataclass
class Switch:
    node: onnx.NodeProto  # the main graph's If
    source: str  # the graph input deciding it
    chain: list[onnx.NodeProto]  # the Identity/Cast nodes from the input to the condition, in order


def switch_of(model: onnx.ModelProto) -> Switch | None:
    """The main graph's one If whose condition is a graph input, directly or through Identity/Cast;
    None for a model with no If, several, or a condition computed otherwise."""
    g = model.graph
    ifs = [n for n in g.node if n.op_type == "If" and n.domain in ("", "ai.onnx")]
    if len(ifs) != 1:
        return None
    producers = {t: n for n in g.node for t in n.output}
    inputs = {v.name for v in g.input} - {t.name for t in g.initializer}
    name, chain = ifs[0].input[0], list[onnx.NodeProto]()
    while name not in inputs:
        node = producers.get(name)
        if node is None or node.op_type not in SWITCH_OPS or node.domain not in ("", "ai.onnx"):
            return None
        chain.insert(0, node)
        name = node.input[0]
    return Switch(ifs[0], name, chain)


def taken(model: onnx.ModelProto, switch: Switch, then: bool) -> onnx.ModelProto:
    """The model with its If replaced by the nodes of the branch `then` picks and an Identity per If
    output the branch names otherwise; the condition's nodes and the initializers nothing reads any more dropped."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    at = next(i for i, n in enumerate(g.node) if n.output[:1] == switch.node.output[:1])
    node = g.node[at]
    attribute = "then_branch" if then else "else_branch"
    body = next(a.g for a in node.attribute if a.name == attribute)
    inlined = list(body.node) + [
        helper.make_node("Identity", [b.name], [o], name=f"{node.name or o}/{attribute}/{o}")
        for b, o in zip(body.output, node.output)
        if o and b.name != o  # optimum's branches make the If's output names themselves
    ]
    nodes = list(g.node)[:at] + inlined + list(g.node)[at + 1 :]
    for link in reversed(switch.chain):  # the condition's nodes, unless something else reads them
        read = {t for n in nodes for t in node_reads(n)} | {v.name for v in g.output}
        if not read.intersection(link.output):
            nodes = [n for n in nodes if n.output[:] != link.output[:]]
    g.ClearField("node")
    g.node.extend(nodes)
    g.initializer.extend(body.initializer)
    g.sparse_initializer.extend(body.sparse_initializer)
    g.value_info.extend(body.value_info)
    read = {t for n in g.node for t in node_reads(n)} | {v.name for v in g.output} | {v.name for v in g.input}
    kept = [t for t in g.initializer if t.name in read]
    g.ClearField("initializer")
    g.initializer.extend(kept)
    return out


# ---- the four combinations, co-located and nested ------------------------------------------------


@dataclass
class Combination:
    conditions: tuple[bool, bool]  # each stream's condition
    result: Result  # its flat co-located model, checked, paired and verified by colocate

    def label(self, prefixes: list[str]) -> str:
        return _label(prefixes, self.conditions)

    @property
    def pairs(self) -> int:
        return len(self.result.rewrite.analysis.pairs) if self.result.rewrite.output is not None else 0


@dataclass
class Switched:
    output: Path
    switch: str  # the graph input the source's If is decided by
    prefixes: list[str]
    combinations: list[Combination]
    compared_outputs: int  # the written model's outputs proven equal to its combinations' models
    plan: Plan


def colocate_switched(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    switch: Switch,
    names: list[str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
    feeds: dict[str, np.ndarray] | None = None,
    **options: Any,
) -> Switched:
    """Two requests of the model at `path`, its If (`switch`) specialised per combination of the
    streams' conditions (see the module docstring); `options` as colocate's. Nothing is written on error."""
    from .modelio import check_output_folder, stage
    from .verify import check

    out = Path(output)
    if out.resolve() == Path(path).resolve():
        raise WriteError(f"{out}: the output would overwrite an input model; choose another -o")
    check_output_folder(out)
    prefixes = stream_names(1, 2, names)
    model = read_model(path)
    try:
        folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.switch-", dir=out.parent))
    except OSError as exc:
        raise WriteError(f"{out.parent}: output directory is not writable ({exc.strerror})") from None
    try:
        flat = {}
        for then in (True, False):
            flat[then] = folder / f"{'then' if then else 'else'}.onnx"
            stage(taken(model, switch, then), flat[then], Path(path).resolve().parent).commit()
        combinations = [
            _combination(path, folder, flat, conditions, prefixes, switch, progress, feeds, options)
            for conditions in COMBINATIONS
        ]
        first = combinations[0].result.merged.plan
        plan = Plan(
            prefixes, [str(path)] * 2, [(0, 1)], first.priority, first.max_slowdown, first.shared_weights, first.target
        )
        models = [read_model(c.result.output) for c in combinations]
        staged = stage(nested(switch, prefixes, models, plan), out, None)
        try:
            check(staged.model_path)
            compared = sum(_check_combination(staged.model_path, switch, prefixes, c, feeds) for c in combinations)
        except BaseException:
            staged.discard()
            raise
        staged.commit()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    progress(f"written model: full checker passed, {compared} output(s) equal their combination's model exactly")
    return Switched(out, switch.source, prefixes, combinations, compared, plan)


def _combination(
    path: str | os.PathLike[str],
    folder: Path,
    flat: dict[bool, Path],
    conditions: tuple[bool, bool],
    prefixes: list[str],
    switch: Switch,
    progress: Callable[[str], None],
    feeds: dict[str, np.ndarray] | None,
    options: dict[str, Any],
) -> Combination:
    """The branches `conditions` take (files in `flat`) co-located by colocate, into `folder`."""
    label = _label(prefixes, conditions)
    progress(f"{switch.source}: {label}: co-locating the branches taken")
    try:
        result = colocate(
            [flat[c] for c in conditions],
            folder / f"{''.join('t' if c else 'e' for c in conditions)}.onnx",
            names=[p[:-1] for p in prefixes],
            progress=functools.partial(_labelled, progress, label),
            feeds=feeds,
            share_weights=True,
            **options,
        )
    except HexfuseError as exc:  # named by the file the user gave, not the branch's temporary one
        for then, branch in flat.items():
            exc.message = exc.message.replace(str(branch), f"{path} ({'then' if then else 'else'} branch)")
        exc.args = (exc.message,)
        raise
    return Combination(conditions, result)


def _label(prefixes: list[str], conditions: tuple[bool, ...]) -> str:
    return ", ".join(f"{p[:-1]} {'then' if c else 'else'}" for p, c in zip(prefixes, conditions))


def _labelled(progress: Callable[[str], None], label: str, line: str) -> None:
    progress(f"[{label}] {line}")


def _check_combination(
    path: Path, switch: Switch, prefixes: list[str], combination: Combination, feeds: dict[str, np.ndarray] | None
) -> int:
    """The written model at the combination's conditions gives what the combination's co-located
    model gives, bit for bit (both op for op on stock ORT, at the inputs colocate checked it with)."""
    from .verify import random_inputs, session, unoptimised_options

    flat = session(combination.result.output, unoptimised_options())
    given = dict(feeds) if feeds is not None else random_inputs(flat, combination.result.checked_at, 0)
    for prefix, condition in zip(prefixes, combination.conditions):
        given[prefix + switch.source] = np.full_like(given[prefix + switch.source], condition)
    names = [o.name for o in flat.get_outputs()]
    expected = flat.run(names, given)
    try:
        got = session(path, unoptimised_options()).run(names, given)
    except Exception as exc:  # noqa: BLE001 - ORT's own error, quoted
        raise VerificationError(
            f"the nested model fails at {combination.label(prefixes)} where that combination runs: {first_line(exc)}"
        ) from None
    for name, ref, value in zip(names, expected, got):
        if ref.shape != value.shape or not np.array_equal(ref, value, equal_nan=ref.dtype.kind == "f"):
            raise VerificationError(
                f"the nested model's output '{name}' at {combination.label(prefixes)} differs from that "
                "combination's co-located model"
            )
    return len(names)


def nested(switch: Switch, prefixes: list[str], models: list[onnx.ModelProto], plan: Plan) -> onnx.ModelProto:
    """One model: the combinations' models (in COMBINATIONS' order) as the leaves of Ifs on the
    streams' conditions, their pairs renumbered. The weights they hold alike are kept once per
    first-stream branch, in the If between the leaves: ONNX Runtime prepacks a MatMul's weight
    from its own graph or the one holding it, not from the main graph two Ifs up, and unpacked it
    sums otherwise (4.5e-6 from the original in tests/test_colocate_ifs.py)."""
    _renumber_pairs(models)
    hoisted = _never_differing(models)
    out = onnx.ModelProto()
    out.ir_version = max(m.ir_version for m in models)
    out.producer_name = "hexfuse-onnx colocate"
    opsets: dict[str, int] = {}
    for o in (o for m in models for o in m.opset_import):
        opsets[o.domain] = max(opsets.get(o.domain, 0), o.version)
    out.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(opsets.items()))
    functions = {(f.domain, f.name, f.overload): f for m in models for f in m.functions}
    out.functions.extend(functions.values())
    g = out.graph
    g.name = f"colocate({models[0].graph.name}) switched on {switch.source}"
    g.input.extend({v.name: v for m in models for v in m.graph.input}.values())
    g.output.extend(_unified(m.graph.output for m in models))
    conditions = [_condition(g, switch, prefix) for prefix in prefixes]
    leaves = {c: _leaf(m, hoisted, _tag(prefixes, c)) for c, m in zip(COMBINATIONS, models)}
    outputs = [v.name for v in g.output]
    halves = []
    for first in (True, False):
        tag = _tag(prefixes[:1], (first,))
        then, other = leaves[(first, True)], leaves[(first, False)]
        inner = helper.make_graph(
            [_if(conditions[1], [o + tag for o in outputs], then, other, f"{SWITCH_PREFIX}if{tag}")],
            tag,
            [],
            _unified([then.output, other.output], functools.partial(_retagged, tag=tag)),
        )
        read = set(outer_scope_names(then)) | set(outer_scope_names(other))
        inner.initializer.extend(t for name, t in hoisted.items() if name in read)
        halves.append(inner)
    g.node.append(_if(conditions[0], outputs, halves[0], halves[1], f"{SWITCH_PREFIX}if"))
    out.metadata_props.extend(_alike_metadata(models))
    out.metadata_props.append(onnx.StringStringEntryProto(key=METADATA_KEY, value=plan.to_json()))
    out.doc_string = f"co-located by hexfuse-onnx: two requests of {plan.sources[0]}, specialised on {switch.source}"
    return out


def _tag(prefixes: list[str], conditions: tuple[bool, ...]) -> str:
    return "@" + ",".join(f"{p[:-1]}={'then' if c else 'else'}" for p, c in zip(prefixes, conditions))


def _retagged(name: str, tag: str) -> str:
    return name[: name.index("@")] + tag


def _if(condition: str, outputs: list[str], then: onnx.GraphProto, other: onnx.GraphProto, name: str) -> onnx.NodeProto:
    return helper.make_node("If", [condition], outputs, name=name, then_branch=then, else_branch=other)


def _condition(g: onnx.GraphProto, switch: Switch, prefix: str) -> str:
    """The stream's condition in the main graph: its Identity/Cast nodes copied under SWITCH_PREFIX
    (the leaves keep their own names)."""
    name = prefix + switch.source
    for node in switch.chain:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[0] = name
        name = SWITCH_PREFIX + prefix + node.output[0]
        copy.output[:] = [name]
        copy.name = SWITCH_PREFIX + prefix + (node.name or node.output[0])
        g.node.append(copy)
    return name


def _leaf(model: onnx.ModelProto, hoisted: dict[str, onnx.TensorProto], tag: str) -> onnx.GraphProto:
    """The combination's main graph as a branch: no inputs (they are the main graph's), its outputs
    renamed by `tag` (an If's outputs are the outer graph's names), its weights but the hoisted ones."""
    leaf = onnx.GraphProto()
    leaf.CopyFrom(model.graph)
    leaf.name = tag[1:]
    leaf.ClearField("input")
    kept = [t for t in leaf.initializer if t.name not in hoisted]
    leaf.ClearField("initializer")
    leaf.initializer.extend(kept)
    outputs = {v.name for v in leaf.output}
    _rename_in_place(leaf, lambda n: n + tag if n in outputs else n, "")
    return leaf


def _never_differing(models: list[onnx.ModelProto]) -> dict[str, onnx.TensorProto]:
    """The initializers no two models hold with different values under that name (unlike colocate.py's
    _held_alike, a name some models lack still counts)."""
    seen: dict[str, tuple[bytes, onnx.TensorProto]] = {}
    differ: set[str] = set()
    for m in models:
        for t in m.graph.initializer:
            data = t.SerializeToString()
            if t.name in seen and seen[t.name][0] != data:
                differ.add(t.name)
            seen.setdefault(t.name, (data, t))
    return {n: t for n, (_, t) in seen.items() if n not in differ}


def _unified(lists: Any, rename: Callable[[str], str] = lambda n: n) -> list[onnx.ValueInfoProto]:
    """One value info per (renamed) name across the lists: the element type, and the dims all agree on."""
    merged: dict[str, onnx.ValueInfoProto] = {}
    for values in lists:
        for v in values:
            name = rename(v.name)
            if name not in merged:
                merged[name] = onnx.ValueInfoProto()
                merged[name].CopyFrom(v)
                merged[name].name = name
                continue
            shape = merged[name].type.tensor_type.shape
            dims = v.type.tensor_type.shape.dim
            if not v.type.tensor_type.HasField("shape") or len(shape.dim) != len(dims):
                merged[name].type.tensor_type.ClearField("shape")
                continue
            for d, other in zip(shape.dim, dims):
                if d.SerializeToString() != other.SerializeToString():
                    d.Clear()
    return list(merged.values())


def _alike_metadata(models: list[onnx.ModelProto]) -> list[onnx.StringStringEntryProto]:
    """The metadata entries every combination's model has alike (not its co-location plan)."""
    entries = [{p.key: p.value for p in m.metadata_props} for m in models]
    return [
        onnx.StringStringEntryProto(key=k, value=v)
        for k, v in entries[0].items()
        if k != METADATA_KEY and all(e.get(k) == v for e in entries[1:])
    ]


_PAIR_NAME = re.compile(r"(?<=hexfuse/)pair\d+(?=/|$)")


def _renumber_pairs(models: list[onnx.ModelProto]) -> None:
    """Number the pairs of all the models as one model's (each was numbered from pair0): a function
    body is found by its overload, model-wide."""
    first = 0
    for m in models:
        nodes = list(all_nodes(m.graph)) + [n for f in m.functions for n in all_nodes_of(f)]
        ids = sorted(
            {n.overload for n in nodes if n.domain == C.DOMAIN and pair_number(n.overload) is not None},
            key=lambda i: pair_number(i) or 0,
        )
        mapping = {old: f"pair{first + k}" for k, old in enumerate(ids)}
        first += len(ids)
        if not mapping:
            continue

        def renamed(name: str, mapping: dict[str, str] = mapping) -> str:
            return _PAIR_NAME.sub(lambda x: mapping.get(x[0], x[0]), name)

        for n in nodes:
            n.overload = mapping.get(n.overload, n.overload)
            n.name = renamed(n.name)
            n.input[:] = [renamed(t) for t in n.input]
            n.output[:] = [renamed(t) for t in n.output]
        for f in m.functions:
            f.overload = mapping.get(f.overload, f.overload)
            f.input[:] = [renamed(t) for t in f.input]
            f.output[:] = [renamed(t) for t in f.output]
            for v in f.value_info:
                v.name = renamed(v.name)
        for v in list(m.graph.value_info) + list(m.graph.output):
            v.name = renamed(v.name)


def all_nodes_of(function: onnx.FunctionProto) -> list[onnx.NodeProto]:
    return [n for top in function.node for n in [top, *_nested(top)]]


def _nested(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    return [n for sub in subgraphs(node) for n in all_nodes(sub)]
