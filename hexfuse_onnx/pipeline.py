"""The pass end to end: analyse a model, choose pairs, rewrite, verify, write.

Nothing is written unless the rewritten model passed the full checker and matched the
original on stock ONNX Runtime; the input file is only ever read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import graph as graph_mod
from .costmodel import Target, get_target
from .errors import UsageError, VerificationError, WriteError
from .graph import ModelGraph
from .kinds import KINDS, Candidate, Pair, discover
from .lowering import LoweringError
from .modelio import stage
from .profile import GraphProfile, profile_graph
from .rewrite import fuse, prepare
from .select import DEFAULT_MIN_GAIN, Rejection, blocker_of, select
from .verify import DEFAULT_RTOL, Comparison, check, compare

Progress = Callable[[str], None]
PLUGIN_RTOL = 1e-4  # the kernel's fp32 sums run in another order than ONNX Runtime's


@dataclass
class Analysis:
    graph: ModelGraph
    profile: GraphProfile
    target: Target
    candidates: list[Candidate]
    pairs: list[Pair]
    rejected: list[Rejection]
    seconds: dict[str, float] = field(default_factory=dict)


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
) -> Analysis:
    kinds = list(kinds or KINDS)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise UsageError(f"unknown pair kind(s) {', '.join(bad)} (known: {', '.join(KINDS)})")
    try:
        tgt = get_target(target)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    g = graph_mod.load(path, shapes)
    seconds["load"] = time.perf_counter() - t0
    progress(f"loaded {len(g.nodes)} nodes, shapes inferred ({seconds['load']:.2f} s)")
    t0 = time.perf_counter()
    profile = profile_graph(g)
    seconds["profile"] = time.perf_counter() - t0
    if profile.unprofiled:
        progress(f"{len(profile.unprofiled)} node(s) could not be profiled (unknown shapes); they are not paired")
    t0 = time.perf_counter()
    candidates = discover(g, kinds, profile, tgt)
    seconds["discover"] = time.perf_counter() - t0
    progress(f"{len(candidates)} candidate pair(s) ({seconds['discover']:.2f} s)")
    t0 = time.perf_counter()
    pairs, rejected = select(g, profile, candidates, tgt, min_gain)
    seconds["select"] = time.perf_counter() - t0
    progress(f"{len(pairs)} pair(s) chosen ({seconds['select']:.2f} s)")
    return Analysis(g, profile, tgt, candidates, pairs, rejected, seconds)


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
) -> RewriteResult:
    """Analyse, rewrite, verify and write. With no qualifying pair nothing is written.

    Only what lowers is fused: a pair with an op outside the kernel's op set is rejected with
    the op that stopped it, and the rest re-selected. When the rewritten model fails
    verification, each pair is verified alone; the failing ones are rejected with their reason
    and the rest re-selected, so only a verified model is ever written (and nothing when no
    pair survives). With verify_plugin the model must also match with the FusedHexPair plugin
    loaded (within PLUGIN_RTOL), which proves the task programs, not only the fallback.
    """
    out = Path(output) if output else default_output(path)
    if out.exists() and out.resolve() == Path(path).resolve():
        raise WriteError(f"{out}: the output would overwrite the input model; choose another -o")
    analysis = analyse(path, kinds, target, min_gain, shapes, progress)
    _check_keeps_external_data(analysis.graph, Path(path), out)
    seconds = dict(analysis.seconds)
    source_dir = Path(path).resolve().parent
    failed: list[Rejection] = []
    while analysis.pairs:
        t0 = time.perf_counter()
        unlowered = prepare(analysis.graph, analysis.pairs, analysis.target.name)
        seconds["lower"] = time.perf_counter() - t0
        if unlowered:
            failed += [_not_lowered(pair, error, progress) for pair, error in unlowered]
            _reselect(analysis, failed, min_gain)
            continue
        t0 = time.perf_counter()
        fused = fuse(analysis.graph, analysis.pairs)
        seconds["rewrite"] = time.perf_counter() - t0
        progress("verifying: full checker, then stock ONNX Runtime against the original")
        t0 = time.perf_counter()
        staged = stage(fused, out, source_dir)
        try:
            comparison = _verify(path, staged.model_path, shapes, rtol, verify_plugin)
        except VerificationError as whole_error:
            staged.discard()
            failed += _failing_pairs(analysis, path, out, source_dir, shapes, rtol, progress, verify_plugin)
            if not failed:
                raise whole_error
            _reselect(analysis, failed, min_gain)
            if not analysis.pairs:
                raise VerificationError(f"no pair survives verification; first failure: {failed[0].reason}") from None
            continue
        except BaseException:
            staged.discard()
            raise
        seconds["verify"] = time.perf_counter() - t0
        staged.commit()
        return RewriteResult(analysis, out, comparison, seconds)
    return RewriteResult(analysis, None, None, seconds)


def _check_keeps_external_data(g: ModelGraph, path: Path, out: Path) -> None:
    inputs_data = graph_mod.external_data_files(g.model, path)
    for target_file in (out, out.with_name(out.name + ".data")):
        if target_file.resolve() in inputs_data:
            raise WriteError(f"{target_file}: would overwrite the input model's external data; choose another -o")


def _not_lowered(pair: Pair, error: LoweringError, progress: Progress) -> Rejection:
    progress(f"not fusing a {pair.kind} pair ({pair.candidate.note}): {error.message}")
    return Rejection(pair.candidate, f"does not lower: {error.message}", blocker_of(error))


def _verify(
    original: str | os.PathLike[str],
    staged: Path,
    shapes: dict[str, list[int]] | None,
    rtol: float,
    verify_plugin: bool = False,
) -> Comparison:
    check(staged)
    comparison = compare(original, staged, shapes, rtol)
    if verify_plugin:
        from .runtime import session_options

        try:
            compare(original, staged, shapes, max(rtol, PLUGIN_RTOL), rewritten_options=session_options("host"))
        except VerificationError as exc:
            raise VerificationError(f"with the FusedHexPair plugin: {exc.message}") from None
    return comparison


def _failing_pairs(
    analysis: Analysis,
    path: str | os.PathLike[str],
    out: Path,
    source_dir: Path,
    shapes: dict[str, list[int]] | None,
    rtol: float,
    progress: Progress,
    verify_plugin: bool,
) -> list[Rejection]:
    failing = []
    for pair in analysis.pairs:
        prepare(analysis.graph, [pair], analysis.target.name)  # numbered as the only pair
        fused = fuse(analysis.graph, [pair])
        staged = stage(fused, out, source_dir)
        try:
            _verify(path, staged.model_path, shapes, rtol, verify_plugin)
        except VerificationError as exc:
            progress(f"dropping a {pair.kind} pair ({pair.candidate.note}): {exc.message}")
            failing.append(Rejection(pair.candidate, f"fails verification: {exc.message}"))
        finally:
            staged.discard()
    return failing


def _reselect(analysis: Analysis, failed: list[Rejection], min_gain: float) -> None:
    bad = {id(r.candidate) for r in failed}
    candidates = [c for c in analysis.candidates if id(c) not in bad]
    analysis.pairs, rejected = select(analysis.graph, analysis.profile, candidates, analysis.target, min_gain)
    analysis.rejected = failed + rejected
