"""Pairs checked alone on the plugin in a model of their own nodes, fed the original's values.

A pair checked alone in the whole rewritten model cost two sessions of that model (captcha_crnn
u16u8: 2353 nodes, about 1 s each unloaded, 13 s a check under load, 158 of its 238 checks). What
that check asks of a QDQ pair's own outputs, that each quantized one is within one step of the
original's (verify.compare_inner), depends only on the pair's nodes and the values that reach
them: so the pairs of a round run side by side in one small model, each its FusedHexPair node (and
the nodes placed around it: a micro-batch's Split and Concat) under a prefix of its own, fed the
original's values of the tensors they read, as ORT computes the original as written
(verify.exact_qdq_options). What a pair does to the graph outputs further on is left to the whole
model's check, which stays end to end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from . import contract as C
from . import verify
from .errors import VerificationError
from .kinds import Pair, kind_of
from .verify import Case, Run, compare_inner

Proto = TypeVar("Proto", onnx.TensorProto, onnx.ValueInfoProto)
# the original's values of tensors it makes inside, one list per case (pipeline.Reference.inner_values)
Values = Callable[[list[str]], dict[str, list[np.ndarray]]]


@dataclass
class PairNodes:
    """What one pair's nodes, renamed in the model of pairs alone, read and make."""

    pair: Pair
    reads: dict[str, str]  # model input (prefixed) -> the original's tensor it is fed
    outputs: dict[str, str]  # model output (prefixed) -> the original's tensor it stands for


@dataclass
class AloneModel:
    model: onnx.ModelProto  # its inputs not yet declared (`typed`)
    pairs: list[PairNodes]

    def reads(self) -> list[str]:
        """The original's tensors the model is fed."""
        return list(dict.fromkeys(t for p in self.pairs for t in p.reads.values()))

    def typed(self, values: dict[str, np.ndarray]) -> bytes:
        """The model serialized with each input typed from a value it is fed (`values`: by the
        original's name); shapes are left open, so it serves cases at other shapes too."""
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for p in self.pairs:
            for name, original in p.reads.items():
                elem = helper.np_dtype_to_tensor_dtype(np.asarray(values[original]).dtype)
                model.graph.input.append(helper.make_tensor_value_info(name, elem, None))
        return model.SerializeToString()


def alone_model(fused: onnx.ModelProto, pairs: list[Pair]) -> AloneModel:
    """The `pairs` (fused in `fused`, disjoint) side by side in one model, each fed from inputs of
    its own (`PairNodes.reads`); the initializers they read are copied in."""
    out = helper.make_graph([], "pairs_alone", [], [])
    initializers = {t.name: t for t in fused.graph.initializer}
    typed = {v.name: v for v in list(fused.graph.value_info) + list(fused.graph.output)}
    made = [_add_pair(fused.graph, pair, f"{pair.id}.{k}/", out, initializers, typed) for k, pair in enumerate(pairs)]
    model = helper.make_model(out, opset_imports=list(fused.opset_import))
    model.ir_version = fused.ir_version
    used = {(n.domain, n.op_type, n.overload) for n in out.node}
    model.functions.extend(f for f in fused.functions if (f.domain, f.name, f.overload) in used)
    return AloneModel(model, made)


def _add_pair(
    graph: onnx.GraphProto,
    pair: Pair,
    prefix: str,
    out: onnx.GraphProto,
    initializers: dict[str, onnx.TensorProto],
    typed: dict[str, onnx.ValueInfoProto],
) -> PairNodes:
    """Add the pair's nodes of `graph` to `out`, every tensor name under `prefix`, with copies of the
    `initializers` they read and the types `typed` of what they make."""
    assert pair.call is not None

    def rename(t: str) -> str:
        return prefix + t if t else t  # an empty name is an absent input

    own = _own_nodes(graph, pair)
    produced = {t for n in own for t in n.output if t}
    reads: dict[str, str] = {}
    for t in dict.fromkeys(t for n in own for t in n.input if t and t not in produced):
        if t in initializers:
            out.initializer.append(_renamed(initializers[t], rename(t)))
        else:
            reads[rename(t)] = t
    for n in own:
        renamed = onnx.NodeProto()
        renamed.CopyFrom(n)
        renamed.name = prefix + n.name
        renamed.input[:] = [rename(t) for t in n.input]
        renamed.output[:] = [rename(t) for t in n.output]
        out.node.append(renamed)
        out.value_info.extend(_renamed(typed[t], rename(t)) for t in n.output if t in typed)
    originals = [kind_of(pair).original_tensor(pair.id, t) for t in pair.call.node.output]
    stands = {rename(t): t for t in originals}
    out.output.extend(onnx.ValueInfoProto(name=t) for t in stands)
    return PairNodes(pair, reads, stands)


def own_output_failures(
    fused: onnx.ModelProto,
    pairs: list[Pair],
    cases: list[Case],
    inner_values: Values,
    quantized: set[str],
    options: Callable[[], ort.SessionOptions],
    also: list[str],
) -> tuple[dict[str, str], list[Pair]]:
    """Why each of the `pairs` (fused in `fused`) whose own quantized outputs are beyond one step of
    the original's fails, by pair id; and the pairs whose small model does not load or run here,
    left to the whole model's check. One session for all of them; one per pair when that fails.
    `also`: the original's tensors wanted later (`inner_values` from the same session)."""
    batch = alone_model(fused, pairs)
    inside = [t for t in batch.reads() if t not in cases[0].feeds]
    wanted = [t for p in batch.pairs for t in p.outputs.values() if t in quantized]
    try:
        values = inner_values(list(dict.fromkeys(inside + wanted + also)))
    except Exception:  # noqa: BLE001 - the original does not give them as outputs: the whole model's check
        return {}, list(pairs)
    ran = _run(batch, cases, values, options)
    groups: list[tuple[AloneModel, list[dict[str, np.ndarray]] | None]]
    if ran is not None:
        groups = [(batch, ran)]
    else:
        singles = [alone_model(fused, [p]) for p in pairs]
        groups = [(one, _run(one, cases, values, options)) for one in singles]
    failing: dict[str, str] = {}
    unrun: list[Pair] = []
    for group, outputs in groups:
        if outputs is None:
            unrun += [p.pair for p in group.pairs]
            continue
        for p in group.pairs:
            why = _beyond_one_step(p, outputs, values, quantized, cases)
            if why:
                failing[p.pair.id] = why
    return failing, unrun


def _run(
    alone: AloneModel,
    cases: list[Case],
    values: dict[str, list[np.ndarray]],
    options: Callable[[], ort.SessionOptions],
) -> list[dict[str, np.ndarray]] | None:
    """The model's outputs on every case (by output name), or None when it does not load or run."""

    def fed(original: str, k: int) -> np.ndarray:
        return cases[k].feeds[original] if original in cases[k].feeds else values[original][k]

    names = [t for p in alone.pairs for t in p.outputs]
    try:
        check = verify.session(alone.typed({t: fed(t, 0) for t in alone.reads()}), options())
        outputs = []
        for k in range(len(cases)):
            feeds = {name: fed(original, k) for p in alone.pairs for name, original in p.reads.items()}
            outputs.append(dict(zip(names, map(np.asarray, check.run(names, feeds)))))
    except Exception:  # noqa: BLE001 - whatever stops it, the whole model's check says it in full
        return None
    return outputs


def _beyond_one_step(
    p: PairNodes,
    outputs: list[dict[str, np.ndarray]],
    values: dict[str, list[np.ndarray]],
    quantized: set[str],
    cases: list[Case],
) -> str:
    """Why the pair's quantized outputs are beyond one step of the original's ('' when they are not)."""
    mine = {name: original for name, original in p.outputs.items() if original in quantized}
    runs = [Run([], {original: out[name] for name, original in mine.items()}) for out in outputs]
    try:
        compare_inner({t: values[t] for t in mine.values()}, runs, list(mine.values()), cases)
    except VerificationError as exc:
        return exc.message
    return ""


def _own_nodes(graph: onnx.GraphProto, pair: Pair) -> list[onnx.NodeProto]:
    """The pair's FusedHexPair node and the nodes placed around it, as the rewritten graph has them
    (with the program), in its order."""
    assert pair.call is not None
    mine = {t for n in [pair.call.node, *(n for _, n in pair.call.tasks.placed)] for t in n.output}
    return [n for n in graph.node if mine.intersection(n.output) and (n.domain != C.DOMAIN or n.overload == pair.id)]


def _renamed(proto: Proto, name: str) -> Proto:
    copy = type(proto)()
    copy.CopyFrom(proto)
    copy.name = name
    return copy
