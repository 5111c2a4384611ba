"""The human table and the JSON report of an analysis or a rewrite."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

import onnx

from .costmodel import engine_seconds, node_after_node
from .graph import DEFAULT_PCM_SAMPLES
from .kinds import Pair, kind_of
from .kinds.branches import has_working_fork
from .kinds.dag import dag_facts
from .kinds.microbatch import MIN_BATCH
from .nested import attribute_graphs
from .pipeline import FLOAT16_RTOL, SPREAD_MULTIPLE, Analysis, RewriteResult
from .profile import unknown_shape_origins
from .select import Rejection
from .verify import DEFAULT_RTOL, RESOLUTION_STEPS, Comparison

if TYPE_CHECKING:
    from .colocate_ifs import Switched


def _si(x: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.1f}{prefix}{unit}"
    return f"{x:.0f}{unit}"


def pair_rows(pairs: list[Pair], where: dict[int, str] | None = None) -> list[list[str]]:
    """The table's rows; with `where` (`places`), a column saying which graph each pair lies in."""
    rows = [
        [
            "#",
            "kind",
            *(["in"] if where is not None else []),
            "nodes A+B",
            "engines A/B",
            "FLOPs A/B",
            "bytes A/B",
            "serial us",
            "fused us",
            "call us",
            "gain",
            "share A",
        ]
    ]
    for k, p in enumerate(pairs):
        rows.append(
            [
                str(k),
                p.kind,
                *([where.get(id(p.candidate), "main graph")] if where is not None else []),
                f"{len(p.candidate.task_a)}+{len(p.candidate.task_b)}",
                f"{p.a.dominant_engine().value}/{p.b.dominant_engine().value}",
                f"{_si(p.a.total_flops, '')}/{_si(p.b.total_flops, '')}",
                f"{_si(p.a.total_bytes, 'B')}/{_si(p.b.total_bytes, 'B')}",
                f"{p.prediction.serial * 1e6:.1f}",
                f"{p.prediction.fused * 1e6:.1f}",
                f"{p.prediction.call * 1e6:.1f}",
                f"{p.prediction.gain:.1%}",
                kind_of(p).share_text(p) + (f" ({len(p.share_table.keys)} buckets)" if p.share_table else ""),
            ]
        )
    return rows


def places(a: Analysis) -> dict[int, str]:
    """The If branch each of its candidates lies in, by id() of the candidate (the main graph's are not in it)."""
    return {id(c): b.branch.label for b in a.branches for c in b.analysis.candidates}


def pairs_table(a: Analysis) -> str:
    """The chosen pairs of the main graph and of its If branches; where a branch holds one, with a
    column saying which graph each lies in (a merged decoder's then and else branches hold alike pairs)."""
    return table(pair_rows(a.all_pairs(), places(a) if any(b.analysis.pairs for b in a.branches) else None))


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _found(a: Analysis) -> str:
    kinds = Counter(c.kind for c in a.candidates)
    found = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
    shapes = f" ({a.shape_only} more of shape arithmetic only: not paired)" if a.shape_only else ""
    return f"{len(a.graph.nodes)} nodes; candidates: {found}{shapes}; chosen: {len(a.pairs)}"


def no_candidate_lines(a: Analysis) -> list[str]:
    """Why a graph has no candidate, in one line, when it is a chain at batch 1: nothing in it is
    independent of anything else at the shapes analysed (sequential_chain, ppocr_cls). Not said when
    the work lies in If branches analysed on their own (a merged decoder's main graph is one If)."""
    if a.candidates or a.branches or has_working_fork(a.graph, dag_facts(a.graph)):
        return []
    small = [
        (name, shape)
        for name in a.graph.graph_inputs
        if (shape := a.graph.info(name).shape) and isinstance(shape[0], int) and shape[0] < MIN_BATCH
    ]
    if not small or len(small) < len(a.graph.graph_inputs):
        return []
    name, shape = small[0]
    dims = a.graph.symbolic_dims(name)
    if dims and not isinstance(dims[0], int):  # named, or left free without a name (None: paddle2onnx's -1)
        larger = "x".join(str(d) for d in (MIN_BATCH, *shape[1:]))
        how = f"--shape {name}={larger} analyses a batch of {MIN_BATCH}"
    else:
        how = "the model fixes it"
    return [
        f"no independent work at these shapes: the graph is one chain (no fork has two branches that"
        f" compute) at batch {shape[0]}, and a micro-batch needs axis 0 of at least {MIN_BATCH}"
        f" (input '{name}': {'x'.join(map(str, shape))}; {how})"
    ]


def refused_lines(a: Analysis) -> list[str]:
    """inspect's first line when `rewrite` refuses the model whatever its pairs (Analysis.refused)."""
    return [f"rewrite refuses this model (exit 3, nothing written): {a.refused}"] if a.refused else []


def in_branches_lines(a: Analysis) -> list[str]:
    """Where the work is when the main graph holds no candidate and its If branches were analysed as
    graphs of their own (a merged decoder's main graph is one If): the Ifs, and what their branches hold."""
    if a.candidates or not a.branches:
        return []
    ifs = ", ".join(f"If '{n}'" for n in dict.fromkeys(b.branch.owner_name for b in a.branches))
    found = sum(len(b.analysis.candidates) for b in a.branches)
    chosen = sum(len(b.analysis.pairs) for b in a.branches)
    return [
        f"the main graph's {len(a.graph.nodes)} node(s) hold no candidate: its work lies inside {ifs}, whose"
        f" {len(a.branches)} branch(es) are analysed as graphs of their own: {found} candidate(s) there,"
        f" {chosen} chosen (each branch below)"
    ]


def summary(a: Analysis) -> str:
    lines = [*refused_lines(a), f"target {a.target.name} (modelled: {a.target.description})", _found(a)]
    lines += no_candidate_lines(a) + in_branches_lines(a)
    if a.graph.binding is not None:
        kept = "symbolic in the output" if a.graph.source is not None else "fixed in the output (--freeze-shapes)"
        lines.append(f"symbolic dims analysed at {a.graph.binding.describe()} ({_choice(a)}); {kept}")
    lines += branch_lines(a)
    lines += hidden_lines(a.graph.model.graph, looked_at(a))
    lines += _unprofiled_lines(a)
    lines += _freeze_hint(a)
    return "\n".join(lines)


def _freeze_hint(a: Analysis) -> list[str]:
    """With symbolic input dims, candidates and no pair: the dims computed at run time (Shape nodes)
    that split the branches between them, which --freeze-shapes folds. Smart Turn v3 at 100 us: 59
    candidates of 3+10 nodes, each under a call, and no word of the option; frozen, 4 pairs of 20+8."""
    if a.graph.source is None or not a.candidates or a.all_pairs():
        return []
    shapes = sum(n.op_type == "Shape" for n in a.graph.nodes)
    if not shapes:
        return []
    return [
        f"{shapes} Shape node(s) compute dims at run time and cut the branches between them short; "
        "--freeze-shapes fixes the input dims at the analysed ones and folds that work, which can make "
        "longer pairs (the model then takes those dims only)"
    ]


def verified_at(labels: list[str]) -> str:
    """The verification cases' shapes, each once: a static QDQ model's two seeded input sets have one."""
    shapes = list(dict.fromkeys(labels))
    text = "; ".join(shapes)
    return text if len(shapes) == len(labels) else f"{text} ({len(labels)} input sets)"


GRID = f"or {RESOLUTION_STEPS} steps of the grid its values lie on"  # verify.within_resolution


def plugin_line(c: Comparison) -> str:
    """What `rewrite --verify plugin` proved; for a QDQ model (`plugin_steps` measured), how far its
    quantized outputs on the plugin are from the original, in steps: reported, not a bar."""
    if c.plugin_steps is None and c.ort_spread is None:
        error = f"; relative error {c.plugin_error:.2e}" if c.plugin_error is not None else ""
        bar = "1e-4" if c.plugin_bar is None or c.plugin_bar <= 1e-4 else f"{c.plugin_bar:.3g}"
        bar += " (4 float16 steps: a pair computes float16)" if c.plugin_bar == FLOAT16_RTOL else ""
        return (
            "verified: with the FusedHexPair plugin (host backend) the outputs match ORT computing the "
            f"model as written (within {bar} of each output's scale, {GRID}, or one step of a quantized "
            f"output{error})"
        )
    if c.plugin_steps is None:
        return (
            f"verified: with the FusedHexPair plugin (host backend) each pair output is within 1e-4 ({GRID}) of ORT "
            "computing the pair's nodes on the same inputs, and the rest of the model matches ORT's own; "
            f"its outputs are {c.plugin_error:.2e} relative from the original's, within {c.plugin_bar:.2e}: "
            f"{SPREAD_MULTIPLE:g}x ORT's own spread ({c.ort_spread:.2e}, its graph optimisations off against on)"
        )
    line = (
        "verified: with the FusedHexPair plugin (host backend) each pair output is within one step (1e-4 "
        f"float, {GRID}) of ORT computing the pair's nodes on the same inputs, and the rest of the model "
        "matches ORT's own"
    )
    if c.plugin_steps:
        name, worst = max(c.plugin_steps.items(), key=lambda kv: kv[1])
        line += f"; its outputs are {worst:.3g} step(s) from the original's at worst ('{name}'), as written"
    if c.ort_steps and max(c.ort_steps.values()) > 0:
        name, worst = max(c.ort_steps.items(), key=lambda kv: kv[1])
        line += (
            f"; stock ONNX Runtime's graph optimisations (its QDQ fusions) take the original itself {worst:.4g} "
            f"step(s) from that ('{name}'): a session with the plugin differs from stock ORT's by about as much"
        )
    return line


def _choice(a: Analysis) -> str:
    """Where the binding's values came from: the caller's shapes, or the defaults --shape overrides."""
    assert a.graph.binding is not None
    left = [d for d in a.graph.binding.symbols if d not in a.given_dims]
    if not left:
        return "as given"
    pcm = any(a.graph.binding.symbols[d] == DEFAULT_PCM_SAMPLES for d in left)
    note = "audio input: 1 s of 16 kHz samples; " if pcm else ""
    which = "" if len(left) == len(a.graph.binding.symbols) else f" {', '.join(left)}"
    return f"{note}--shape to choose{which}"


def _unprofiled_lines(a: Analysis) -> list[str]:
    """The nodes not profiled, and where their unknown shapes start: --shape fixes only input dims.
    Nothing when they are only Ifs whose branches were analysed: their work is costed there, and
    their outputs' dims (optimum's merged decoder: `past_decoder_sequence_length + 1`) stay unknown
    even when frozen. An If whose unknown outputs leave nodes after it unprofiled is named."""
    unprofiled = a.profile.unprofiled
    analysed = {owner for owner, _ in looked_at(a)}
    if all(a.graph.nodes[i].output[0] in analysed for i in unprofiled):
        return []
    shown = list(unprofiled.items())[:5]
    lines = [f"{len(unprofiled)} node(s) not profiled, so not paired:"]
    lines += [f"  {a.graph.describe(i)}: {why}" for i, why in shown]
    more = len(unprofiled) - len(shown)
    origins = unknown_shape_origins(a.graph, list(unprofiled))
    if not origins:
        return lines + ([f"  ... and {more} more (use --shape NAME=DIMxDIM to fix input dims)"] if more else [])
    starts = [a.graph.nodes[i] for i in origins[:3]]
    named = ", ".join(f"{n.op_type} '{n.name or n.output[0]}'" for n in starts)  # tf2onnx leaves nodes unnamed
    named += f" and {len(origins) - 3} more" if len(origins) > 3 else ""
    folds = " (--freeze-shapes folds the shape arithmetic the input dims decide)" if a.graph.source else ""
    lines.append(
        f"  {f'... and {more} more; ' if more else ''}the unknown shapes start at {named}, "
        f"whose outputs shape inference does not follow{folds}"
    )
    return lines


def branch_lines(a: Analysis) -> list[str]:
    """One line per If branch the pass analysed as a graph of its own, saying whether the rewrite's
    verification inputs take it; one per branch it could not."""
    lines = []
    for b in a.branches:
        taken = {
            None: "its pairs are verified only where the rewrite's inputs take it",
            True: "the verification inputs take it",
            False: "no verification input takes it, so it is not fused (--inputs that take it)",
        }[b.taken]
        lines.append(f"{b.branch.label}: {_found(b.analysis)}; {taken}")
    lines += [f"not analysed: {why}" for why in a.skipped_branches]
    if a.single_op_branches:
        ops = Counter(n.op_type for b in a.single_op_branches for n in b.model.graph.node if n.op_type != "Constant")
        held = ", ".join(f"{op} {k}" for op, k in ops.most_common()) or "no op"
        ifs = len({b.owner for b in a.single_op_branches})
        count = len(a.single_op_branches)
        lines.append(f"{count} branch(es) of {ifs} If(s) hold one op at most ({held}): no pair fits")
    return lines


def looked_at(a: Analysis) -> set[tuple[str, str]]:
    return {(b.owner, b.attribute) for b in [*(b.branch for b in a.branches), *a.single_op_branches]}


def pair_json(a: Analysis, p: Pair) -> dict:
    g = a.graph
    names = lambda ids: [g.nodes[i].name or g.nodes[i].output[0] for i in ids]  # noqa: E731
    ea, eb = engine_seconds(p.a, a.target), engine_seconds(p.b, a.target)
    return {
        "kind": p.kind,
        "note": p.candidate.note,
        "task_a": {
            "nodes": names(p.candidate.task_a),
            "flops": p.a.total_flops,
            "bytes": p.a.total_bytes,
            "footprint": p.a.footprint,
            "engine_seconds": dict(zip(("matrix", "vector", "memory"), ea)),
        },
        "task_b": {
            "nodes": names(p.candidate.task_b),
            "flops": p.b.total_flops,
            "bytes": p.b.total_bytes,
            "footprint": p.b.footprint,
            "engine_seconds": dict(zip(("matrix", "vector", "memory"), eb)),
        },
        "predicted_us": {
            "a": p.prediction.time_a * 1e6,
            "b": p.prediction.time_b * 1e6,
            "serial": p.prediction.serial * 1e6,
            "fused": p.prediction.fused * 1e6,
            "call": p.prediction.call * 1e6,
        },
        "gain": p.prediction.gain,
        "share_a": p.prediction.share_a,
        "share_table": {"input_elements": list(t.keys), "share_a": list(t.shares)} if (t := p.share_table) else None,
        "complementarity": p.complementarity,
        "microbatch_sizes": list(p.microbatch_sizes or []),
    }


def modelled_us(a: Analysis) -> float:
    """The graph's modelled serial time, node after node (nodes not profiled count 0): what a pair's
    predicted serial time is a share of."""
    return node_after_node(a.profile.nodes.values(), a.target) * 1e6


def analysis_json(a: Analysis) -> dict:
    g = a.graph
    return {
        "model": str(g.path),
        "refused": a.refused,
        "nodes": len(g.nodes),
        "target": {
            "name": a.target.name,
            "modelled": True,
            "params": {k: {"value": v.value, "unit": v.unit, "source": v.source} for k, v in a.target.params().items()},
        },
        "binding": g.binding.symbols if g.binding is not None else None,
        "unprofiled": [{"node": g.describe(i), "reason": why} for i, why in a.profile.unprofiled.items()],
        "modelled_us": modelled_us(a),
        "candidates": len(a.candidates),
        "shape_arithmetic_only": a.shape_only,
        "pairs": [pair_json(a, p) for p in a.pairs],
        "rejected": _rejected_json(a),
        "branches": [
            {
                "where": b.branch.label,
                "nodes": len(b.analysis.graph.nodes),
                "taken": b.taken,
                "modelled_us": modelled_us(b.analysis),
                "candidates": len(b.analysis.candidates),
                "shape_arithmetic_only": b.analysis.shape_only,
                "pairs": [pair_json(b.analysis, p) for p in b.analysis.pairs],
                "rejected": _rejected_json(b.analysis),
            }
            for b in a.branches
        ],
        "branches_not_analysed": a.skipped_branches,
        "single_op_branches": [b.label for b in a.single_op_branches],
        "not_looked_at": [
            {"node": owner, "subgraph_nodes": n} for owner, n in subgraph_nodes(g.model.graph, looked_at(a))
        ],
        "seconds": a.seconds,
    }


def _rejected_json(a: Analysis) -> list[dict]:
    return [
        {"kind": r.candidate.kind, "note": r.candidate.note, "reason": r.reason, "blocker": r.blocker}
        for r in a.rejected
    ]


def rewrite_json(r: RewriteResult) -> dict:
    out = analysis_json(r.analysis)
    out["output"] = str(r.output) if r.output else None
    out["seconds"] = r.seconds
    if r.comparison:
        out["verification"] = r.comparison.as_json()
    return out


def hidden_lines(graph: onnx.GraphProto, looked_at: set[tuple[str, str]] | None = None) -> list[str]:
    """The line naming the nodes inside If/Loop/Scan bodies the pass does not look at (none without):
    `looked_at` (If output, branch attribute) names the branches analysed, whose nested ones count."""
    hidden = subgraph_nodes(graph, looked_at)
    if not hidden:
        return []
    shown = sorted(hidden, key=lambda h: -h[1])[:HIDDEN_SHOWN]  # colocate of hama's G2P: 192 Ifs, a 7 kB line
    where = ", ".join(f"{n} in {owner}" for owner, n in shown)
    where += f" and {len(hidden) - len(shown)} more" if len(hidden) > len(shown) else ""
    return [f"not looked at: {sum(n for _, n in hidden)} node(s) inside control-flow subgraphs ({where})"]


HIDDEN_SHOWN = 5  # subgraph holders named in the "not looked at" line


def subgraph_nodes(graph: onnx.GraphProto, looked_at: set[tuple[str, str]] | None = None) -> list[tuple[str, int]]:
    """For each node of the graph holding subgraphs (If/Loop/Scan bodies), its description and the
    number of nodes inside them the pass does not look at (nested ones included): all but those of
    the branches in `looked_at` (If output, attribute), of which only their nested subgraphs'."""
    out = []
    for node in graph.node:
        count = 0
        for a in node.attribute:
            for body in attribute_graphs(a):
                own = 0 if node.output and (node.output[0], a.name) in (looked_at or set()) else len(body.node)
                count += own + sum(n for _, n in subgraph_nodes(body))
        if count:
            out.append((f"{node.op_type} '{node.name or node.output[0]}'", count))
    return out


def candidate_lines(rejected: list[Rejection], limit: int = 12, where: dict[int, str] | None = None) -> list[str]:
    """`inspect`'s account of the candidates not chosen, the largest first, each with its whole
    reason (a below-the-bar one gives the modelled saving against the call) and, when `where`
    (`places`) names it, the If branch it lies in. Candidates whose lines read alike are one line with their
    count: a stranger's BLSTM listed one LSTM's refusal three times over, and a TCN ten lines of one figure."""
    if not rejected:
        return []
    alike: dict[str, int] = {}
    for r in sorted(rejected, key=lambda r: -len(r.candidate.nodes)):
        c = r.candidate
        place = f", in the {where[id(c)]}" if where and id(c) in where else ""
        line = f"  {c.kind} {c.note} ({len(c.task_a)}+{len(c.task_b)} nodes{place}): {r.reason}"
        alike[line] = alike.get(line, 0) + 1
    head = f"not chosen ({len(rejected)}" + (f", the {limit} largest; all in --json" if len(alike) > limit else "")
    return [head + "):", *(line + (f" (x{n})" if n > 1 else "") for line, n in list(alike.items())[:limit])]


def none_kept(rejected: list[Rejection]) -> str:
    """Why a pass wrote no pair: none qualified, or those that did failed verification."""
    failed = any(r.reason.startswith("fails verification") for r in rejected)
    return "no pair survives verification" if failed else "no pair qualifies"


def rtol_hint(rejected: list[Rejection]) -> list[str]:
    """Where every pair failed verification on stock ORT by a relative error above the bar, the --rtol that
    lets them through: a stranger's float16 IS-Net had each pair refused at 3.9e-4 > 1e-5 and no word of it."""
    failed = [r.reason for r in rejected if r.reason.startswith("fails verification")]
    errors = [re.search(r"relative error ([0-9.e+-]+) > ", reason) for reason in failed]
    if not failed or not all(errors) or any("FusedHexPair plugin" in reason for reason in failed):
        return []
    worst = max(float(m.group(1)) for m in errors if m)
    return [
        f"every pair failed verification by its relative error on stock ONNX Runtime alone (at most {worst:.2g}): "
        f"--rtol {worst * 1.5:.1g} writes them where that accuracy is enough (a float16 model's ops reordered by ORT "
        "differ by about 1e-3)"
    ]


def _failed_where(reason: str) -> str:
    """Which check a pair failed verification on (its reason's full text says how far)."""
    if not reason.startswith("fails verification"):
        return ""
    return "with the plugin" if "FusedHexPair plugin" in reason else "on stock ORT"


def rejection_lines(rejected: list[Rejection]) -> list[str]:
    """One line per reason, most frequent first; candidates that do not lower are counted by the
    op (and its reason) that stopped them: `rejected 116: does not lower: BatchNormalization
    outside the kernel (116)`; those failing verification by the check they failed."""
    reasons: Counter[str] = Counter()
    blockers: dict[str, Counter[str]] = {}
    for r in rejected:
        reason = r.reason.split(":")[0]
        reasons[reason] += 1
        blocker = r.blocker or _failed_where(r.reason)
        if blocker:
            blockers.setdefault(reason, Counter())[blocker] += 1
    lines = []
    for reason, n in reasons.most_common():
        detail = ", ".join(f"{b} ({k})" for b, k in blockers.get(reason, Counter()).most_common())
        lines.append(f"rejected {n}: {reason}" + (f": {detail}" if detail else ""))
    return lines


def switched_lines(r: Switched) -> list[str]:
    """What `colocate --requests 2` did to a merged decoder: one block per combination of the conditions."""
    lines = [
        f"co-located 2 requests, specialised on the graph input '{r.switch}' that decides the model's If: "
        f"{len(r.combinations)} combinations, each a flat co-located model of the branches it takes"
    ]
    for c in r.combinations:
        rw, m = c.result.rewrite, c.result.modelled
        kept = f"{c.pairs} pair(s) kept" if rw.output is not None else none_kept(rw.analysis.rejected)
        lines.append(f"{c.label(r.prefixes)}: {kept}; {m.lines(r.plan.priority)[0] if m else 'not modelled'}")
        lines += ["  " + line for line in rejection_lines(rw.analysis.rejected)]
        v = rw.comparison
        if v is not None:  # its shapes once per input set would fill screens: counted here
            lines.append(
                f"  verified: stock ONNX Runtime matches the merged model on {v.outputs} output(s) (worst relative "
                f"error {v.worst_relative_error:.2e} <= {DEFAULT_RTOL:g}) at {len(v.shapes)} input set(s)"
            )
            lines += ["  " + plugin_line(v)] if v.plugin else []
    return lines


def switched_json(r: Switched) -> dict:
    combinations = [
        {
            "conditions": dict(zip((p[:-1] for p in r.prefixes), c.conditions)),
            "pairs": c.pairs,
            "modelled": c.result.modelled.to_json() if c.result.modelled is not None else None,
            "rewrite": rewrite_json(c.result.rewrite),
        }
        for c in r.combinations
    ]
    return {"switch": r.switch, "streams": r.plan.streams, "combinations": combinations}
