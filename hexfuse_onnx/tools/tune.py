"""Tune a fused model for this machine: keep each FusedHexPair only where it wins here.

    python -m hexfuse_onnx tune model.fused.onnx -o model.tuned.onnx [--backend host|hexagon] [--json F]

Aker's "choose the fused or the original version", per device. Every session is one of this
process, timed interleaved (interleaved.py: each round visits every configuration once, in a
shuffled order, after a rest until the process's threads are quiet): ORT's modes, each pair's
configurations and the whole tuned model.
Each pair is first screened on its own nodes: its FusedHexPair node as a model of its own (at each
share of a sweep) against its function body's nodes on stock ORT, fed with the values it read in one
run of the model on tune's inputs (branch_runs.capture; subgraphs.subgraph_model makes the model).
Timed through the whole model, a pair's saving (tens of us) drowned in the call's spread (ms), and
each share cost a session of the whole model. Alone, a call is short: a visit times many (SCREEN_VISIT). At most
1 + the sweep's shares sessions exist at once, and the plugin's host kernel runs them all on one
process-wide worker pool whose idle workers sleep (dsp/src/platform_posix.c).
A pair passes the screen when its saving, 1 - fused/unfused of the medians at its best share, minus
the run-to-run spread of that saving (the median absolute deviation of the per-round savings from it)
is at least the margin; the rest are unfused without a whole-model run. A screen in whose first 8
rounds every share saved less than the margin stops there (`lost_every_round`). A negative margin passes
pairs that lose by less than it (for development). Kept pairs get their best share written into
`share_a` (the kernel reads the share from that attribute when the session is created; the task
program does not contain it) and lose any table of modelled shares per shape bucket (tune times one
shape; a measured table would need the sweep at every bucket's shapes). With pairs past the screen,
the tuned model is then run as an application runs it (`hexfuse_onnx.InferenceSession(model)`: the
plugin and ORT's mode from its record), in this process, against the original in every ORT mode,
their calls interleaved (interleaved.py: two processes of one graph differed 0.67-1.27x, sessions of
one process 0.3-0.4%); unless the whole 95% interval of tuned/original (the original's fastest mode)
is at or under 1 - margin, and the kept pairs' savings on their own nodes make that margin of the
original's time, every pair is unfused (judge_whole_model): what a pair gains alone it may lose among
its neighbours, and a whole-model gain larger than its pairs' is noise. Each pair's record says which stage decided it.
Pairs inside If branches (the pass fuses there: a merged decoder's `use_cache_branch` If holds them
all) read their values from their branch run as a model of its own on the outer values the model
computed for it (branch_runs.py, as emulate does): the branch tune's random inputs take, and the
other on them set to take it where its condition allows (subgraphs.feeds_taking: a bool input, or
Equal of an input and a constant), as rewrite's verification does. A pair no input reaches (a
condition tune cannot set, a Loop body) is reported not reached and unfused: it was not shown to
win. The final check runs on each input set that reaches a kept pair, the verification on every one.
Every timing runs runs x rounds rounds, or as many as fit --budget seconds where those would take
longer (at least 8: interleaved.rounds_within): at the defaults, a detector's 1-2 s calls took tune
over an hour.
The measured figures go into the tuned model's metadata
(hexfuse_onnx/tuning.py, which `session_options(backend="auto")` reads) and into the --json
report. The tuned model is written only after it passed the full checker and matched the input on
stock ONNX Runtime and on the plugin.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from .. import contract as C
from .. import mode_choice, ort_modes, random_ops, runtime, tuning, verify
from ..branch_runs import (
    NOT_TAKEN,
    bodies_with_pairs,
    branch_label,
    branch_reads,
    branch_runs,
    capture,
    is_if,
    is_pair,
    typed,
)
from ..errors import ModelError, UsageError, VerificationError
from ..graph import load, node_reads, outer_scope_names, read_model
from ..lowering.rewritten import recorded_bindings
from ..modelio import check_output_folder, stage
from ..pipeline import PLUGIN_RTOL
from ..rewrite import own_nodes, unfuse
from ..subgraphs import conditions_taken, feeds_taking, no_pair_message, pairs_within, subgraph_model
from ..verify import (
    DEFAULT_RTOL,
    Case,
    check,
    check_inputs_match,
    compare_cases,
    random_inputs,
    run_original,
    shapes_label,
)
from . import interleaved, isolated
from .bench import BUSY_OTHER_CPUS, Config, CpuMeter, first_line, sample_stats, verify_config

DEFAULT_RUNS = 30
DEFAULT_ROUNDS = 5
DEFAULT_MARGIN = 0.02
DEFAULT_BUDGET_S = 120.0  # --budget: a timing whose rounds would take longer runs fewer (interleaved.rounds_within)
SWEEP = (0.25, 0.5, 0.75)  # shares tried besides the node's own
BEST_MODE = "best"  # --session: measure ORT's modes here and take the fastest
SESSION_MODES = (BEST_MODE, *ort_modes.MODES)
WHOLE_VISIT = (interleaved.VISIT_S, interleaved.VISIT_CALLS)  # a visit's timed calls: (fill seconds, at most)
SCREEN_VISIT = (interleaved.VISIT_S, 200)  # a pair's own nodes take tens of us: more calls fill a visit
SCREEN, FINAL = "screen", "final check"  # the stage that decided a pair (PairResult.decided_by)
CRITERION = (
    "screened on the pair's own nodes (its FusedHexPair node against its body's nodes, on the values it read in one "
    "run of the model): kept for the whole-model check when saving - spread >= margin; saving = 1 - fused/unfused "
    "(medians of all rounds, fused at the best share); spread = median absolute deviation of the per-round savings "
    "from it"
)
MODE_CRITERION = (
    f"ORT's defaults unless a mode with a pool saves {mode_choice.LEAVE_GAIN:.0%} in its median visit (a visit's "
    f"figure: its mean call) and is faster in its rounds by a one-sided signed-rank test at p <= "
    f"{mode_choice.LEAVE_P:.3g}, or ort-seq (no pool) has a lower median visit and passes the same test (then the "
    "fastest such; the run-time choice's rule), on the tuned model (with kept pairs: on the plugin)"
)
FINAL_CRITERION = (
    "with kept pairs, the tuned model as hexfuse_onnx.InferenceSession runs it against the original in every ORT "
    "mode, all in this one process, interleaved (tools/interleaved.py: runs x rounds rounds, each visiting every "
    "configuration once in a shuffled order): kept when the whole 95% interval of tuned/original (the median of the "
    "per-round ratios, the original in its fastest mode by median) is at or under 1 - margin, and the kept pairs' own "
    "savings (unfused - fused medians on their own nodes, summed) are at least margin x the original's median: a "
    "whole-model gain its pairs cannot make is noise"
)

Progress = Callable[[str], None]


@dataclass
class Timing:
    """One configuration's times (microseconds), round by round."""

    rounds: list[list[float]]

    def all(self) -> np.ndarray:
        return np.concatenate([np.asarray(r) for r in self.rounds])

    def median(self) -> float:
        return float(np.median(self.all()))

    def stats(self) -> dict[str, float]:
        a = self.all()
        return {**sample_stats(a), "mad_us": float(np.median(np.abs(a - np.median(a))))}


def replaces_defaults(mode: str, timing: Timing, default: Timing) -> bool:
    """Whether `mode` replaces ORT's defaults by the run-time choice's rule (mode_choice.replaces_defaults on
    the median visits, each a visit's mean call, and the per-round ratios)."""
    saving, _, rounds = saving_and_spread(timing, default)
    return mode_choice.replaces_defaults(mode, 1.0 - saving, np.log1p(-np.asarray(rounds)).tolist())


def mode_figures(mode: str, timings: dict[str, Timing]) -> str:
    default = timings[ort_modes.DEFAULT]
    saving, spread, _ = saving_and_spread(timings[mode], default)
    return (
        f"{mode} {timings[mode].median():.1f} us vs ORT's defaults {default.median():.1f} us, "
        f"saving {saving:.1%} ± {spread:.1%}"
    )


def saving_and_spread(faster: Timing, slower: Timing) -> tuple[float, float, list[float]]:
    """1 - faster/slower of the medians, the median absolute deviation of the per-round savings from
    it, and the per-round savings."""
    saving = 1.0 - faster.median() / slower.median()
    rounds = [1.0 - float(np.median(f)) / float(np.median(u)) for f, u in zip(faster.rounds, slower.rounds)]
    return saving, float(np.median(np.abs(np.asarray(rounds) - saving))), rounds


@dataclass
class PairResult:
    pair_id: str
    node: str
    kind: str
    original_share: float
    estimates: dict[str, float]
    unfused: Timing | None = None
    fused: dict[float, Timing] = field(default_factory=dict)
    refused: dict[float, str] = field(default_factory=dict)  # share -> why the plugin's run was not timed
    best_share: float | None = None
    saving: float = 0.0
    spread: float = 0.0
    round_savings: list[float] = field(default_factory=list)
    kept: bool = False
    where: str = ""  # "" in the main graph, else the If branch it sits in (Scope.where)
    not_reached: str = ""  # why it was not timed (then it is unfused: it was not shown to win)
    decided_by: str = ""  # SCREEN (unfused on its own nodes) or FINAL (the whole-model check); "" not reached

    def decide(self, margin: float) -> None:
        if self.unfused is None or not self.fused:
            return
        self.best_share = min(self.fused, key=lambda s: self.fused[s].median())
        self.saving, self.spread, self.round_savings = saving_and_spread(self.fused[self.best_share], self.unfused)
        self.kept = self.saving - self.spread >= margin

    def saved_us(self) -> float:
        """unfused - fused (at the best share) medians on its own nodes; 0 where it was not timed."""
        if self.unfused is None or self.best_share is None:
            return 0.0
        return self.unfused.median() - self.fused[self.best_share].median()

    def record(self, samples: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pair": self.pair_id,
            "node": self.node,
            "kind": self.kind,
            "where": self.where,
            "not_reached": self.not_reached,
            "kept": self.kept,
            "decided_by": self.decided_by,
            "share_a": self.best_share,
            "original_share_a": self.original_share,
            "saving": self.saving,
            "spread": self.spread,
            "round_savings": self.round_savings,
            "shares": {f"{s:.3g}": t.median() for s, t in sorted(self.fused.items())},
            "refused": {f"{s:.3g}": why for s, why in sorted(self.refused.items())},
            **self.estimates,
        }
        if self.unfused is not None:
            out["unfused"] = self.unfused.stats()
        if self.best_share is not None:
            out["fused"] = self.fused[self.best_share].stats()
        if samples:
            out["samples_us"] = {
                "unfused": self.unfused.rounds if self.unfused else [],
                **{f"{s:.3g}": t.rounds for s, t in sorted(self.fused.items())},
            }
        return out


@dataclass
class ModeChoice:
    """ONNX Runtime's own execution mode for this machine: every mode timed on the unfused model
    (stock ORT), or the one given with --session (then nothing is timed)."""

    mode: str
    why: str
    timings: dict[str, Timing] = field(default_factory=dict)
    saving: float = 0.0  # the fastest mode's over ORT's defaults
    spread: float = 0.0

    @classmethod
    def given(cls, mode: str) -> ModeChoice:
        return cls(mode, "given with --session")

    @classmethod
    def measured(cls, timings: dict[str, Timing], concurrent: bool = False) -> ModeChoice:
        """ORT's defaults, unless modes beat them clearly (then the fastest of those), by the run-time
        choice's rule (`replaces_defaults`). On an Intel Xeon VM a pooled mode's speed followed where the
        calling thread ran (ORT pins its default pool's worker; docs/DROPIN.md): tune took ort-seq-2t
        or ort-seq on savings within their spread (u2netp 2.3% +- 3.3%, dtln_stage2 30.9% +- 31.4%)
        that host_pairs' final rounds then saw reversed (1.007x, 1.366x); the rule after, a saving
        beyond the median absolute deviation of the per-round savings, asked every round to agree
        within it and kept the defaults for gtcrn_stream where ort-par saved 5.9% +- 7.2% over 30
        rounds (host_pairs: 1.105x the best mode). Chosen among the run-time
        choice's CANDIDATES, and ort-par where the model has work to run at once (`concurrent`);
        elsewhere ort-par is timed and reported, not chosen."""
        default = timings[ort_modes.DEFAULT]
        admitted = [m for m in timings if m in mode_choice.CANDIDATES]
        if concurrent and mode_choice.PARALLEL in timings:
            admitted.append(mode_choice.PARALLEL)
        fastest = min(admitted, key=lambda m: timings[m].median())
        clear = [m for m in admitted if m == ort_modes.DEFAULT or replaces_defaults(m, timings[m], default)]
        chosen = min(clear, key=lambda m: timings[m].median())

        why = f"fastest here: {mode_figures(chosen, timings)}"
        others = [m for m in admitted if m != chosen]
        if chosen == ort_modes.DEFAULT == fastest and others:  # not the defaults against themselves
            runner_up = min(others, key=lambda m: timings[m].median())
            why = f"ORT's defaults, the fastest here; next {mode_figures(runner_up, timings)}"
        elif chosen == ort_modes.DEFAULT != fastest:
            why = f"ORT's defaults, not clearly beaten: {mode_figures(fastest, timings)}"
        elif chosen != fastest:
            why = (
                f"the fastest that clearly beats ORT's defaults: {mode_figures(chosen, timings)}; "
                f"not clearly: {mode_figures(fastest, timings)}"
            )
        return cls(chosen, why, timings, *saving_and_spread(timings[chosen], default)[:2])

    def under_load(self, load: dict[str, float] | None) -> ModeChoice:
        """ORT's defaults in place of another mode timed while other processes used more than
        BUSY_OTHER_CPUS: a stranger's tune on a loaded machine took ort-seq, "saving 37.0% ± 11.5%",
        that ran the model 1.65x ORT's defaults once the machine was quiet. The figures stay."""
        if not load or load["other_cpus"] <= BUSY_OTHER_CPUS or self.mode == ort_modes.DEFAULT:
            return self
        why = (
            f"ORT's defaults: other processes used {load['other_cpus']:.2f} of {load['cpus']:g} CPUs while the "
            f"modes were timed, and a mode chosen so follows the load (measured: {self.why}); tune again quiet"
        )
        return replace(self, mode=ort_modes.DEFAULT, why=why, saving=0.0, spread=0.0)

    def record(self, samples: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "why": self.why, "criterion": MODE_CRITERION}
        if self.timings:
            out |= {
                "measured_on": "the tuned model: stock ONNX Runtime unfused, or with its kept pairs on the plugin",
                "saving": self.saving,
                "spread": self.spread,
                "modes": {m: t.stats() for m, t in self.timings.items()},
            }
        if samples:
            out["samples_us"] = {m: t.rounds for m, t in self.timings.items()}
        return out


@dataclass
class FinalCheck:
    """The tuned model, run as an application runs it (`hexfuse_onnx.InferenceSession(model)` with
    ORT's default options: the plugin and ORT's mode from its tuning record), against the original
    in every ORT mode, all in this process, one figure per configuration and round (interleaved.py).
    The pairs stay only when the tuned model beats the original's fastest mode by the margin, the
    whole 95% interval of the ratio included (the pairs were each timed alone, against one mode
    chosen earlier; together, or against a mode that is fastest in another run, they may lose)."""

    original_mode: str  # the original's fastest mode here
    won: bool
    why: str
    tuned: Config | None = None
    originals: dict[str, Config] = field(default_factory=dict)
    ratio: tuple[float, float, float] | None = None  # tuned / original: median, 95% interval
    case: str = ""  # the inputs it ran on (Case.label)
    others: list[FinalCheck] = field(default_factory=list)  # on inputs that take other If branches

    @property
    def all_won(self) -> bool:
        return self.won and all(o.won for o in self.others)

    def record(self, samples: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "original_mode": self.original_mode,
            "won": self.all_won,
            "why": self.why,
            "criterion": FINAL_CRITERION,
            "case": self.case,
        }
        if self.others:
            out["other_cases"] = [o.record(samples) for o in self.others]
        if self.tuned is not None and self.originals and self.ratio is not None:
            out |= {"tuned": self.tuned.stats(), "original": self.originals[self.original_mode].stats()}
            out |= {"originals": {m: c.stats() for m, c in self.originals.items()}}
            out |= {"ratio": self.ratio[0], "interval": list(self.ratio[1:]), "rounds": len(self.tuned.samples)}
            if samples:
                out["samples_us"] = {"tuned": self.tuned.samples} | {m: c.samples for m, c in self.originals.items()}
        return out


def judge_whole_model(
    tuned: Config, originals: dict[str, Config], tuned_mode: str, margin: float, pairs_save_us: float = math.inf
) -> FinalCheck:
    """The final check's verdict from figures timed in the same rounds (interleaved.py): tuned/original
    is the median of the per-round ratios against the original's fastest mode (by median), with its
    bootstrap 95% interval; won when the whole interval is at or under 1 - margin (a negative margin
    lets the tuned model lose by less than it) and the kept pairs, timed on their own nodes, save
    `pairs_save_us` of at least margin x the original's median: t5_small_int8_encoder's one kept pair
    saved 5 us of an 11 ms call and the whole model "won" at 0.864x [0.795, 0.952] while other
    processes ran (its rounds' p90 twice their median); host_pairs then timed it at 1.029x."""
    best = min(originals, key=lambda m: originals[m].median())
    ratio = interleaved.ratio_interval(tuned, originals[best])
    needed = margin * originals[best].median()
    won = ratio[2] <= 1.0 - margin and pairs_save_us >= needed
    why = (
        f"tuned {tuned.median():.1f} us ({tuned_mode}) vs the original {originals[best].median():.1f} us ({best}, the "
        f"fastest of {len(originals)} ORT modes), {len(tuned.samples)} interleaved rounds in one process: "
        f"{ratio[0]:.3f}x [95% {ratio[1]:.3f}, {ratio[2]:.3f}] (kept at or under {1.0 - margin:.3f}x)"
    )
    if pairs_save_us < needed:
        why += (
            f"; the kept pairs save {pairs_save_us:.1f} us on their own nodes, under the {needed:.1f} us "
            f"({margin:.0%} of the original) it must save: a larger whole-model gain is not theirs"
        )
    return FinalCheck(best, won, why, tuned, originals, ratio)


@dataclass
class TuneResult:
    source: Path
    output: Path
    backend: str
    settings: dict[str, Any]
    pairs: list[PairResult]
    machine: dict[str, Any]
    date: str
    ort_mode: ModeChoice
    final: FinalCheck | None = None  # None: no pair was kept before it
    comparison_note: str = ""

    @property
    def kept(self) -> list[PairResult]:
        return [p for p in self.pairs if p.kept]

    def record(self, samples: bool = False) -> dict[str, Any]:
        """The tuning record (tuning.METADATA_KEY); with samples, the --json report."""
        return {
            "version": tuning.RECORD_VERSION,
            "tool": "hexfuse-onnx tune",
            "source": self.source.name,
            "backend": self.backend,
            "machine": self.machine,
            "fingerprint": tuning.fingerprint(self.machine),
            "date": self.date,
            **self.settings,
            "criterion": CRITERION,
            "kept": [p.pair_id for p in self.kept],
            "pairs": [p.record(samples) for p in self.pairs],
            "ort_mode": self.ort_mode.record(samples),
            "final_check": self.final.record(samples) if self.final else None,
        }

    def lines(self) -> list[str]:
        header = (
            f"{'pair':<10} {'kind':<15} {'unfused us (p10-p90)':>24} {'fused us (p10-p90)':>24} "
            f"{'share':>6} {'saving':>8} {'spread':>7} {'decided by':<11}  decision"
        )
        out = [header]
        headed, where = any(p.where for p in self.pairs), None  # a heading per place, with pairs in If branches
        for p in self.pairs:
            if headed and p.where != where:
                where = p.where
                out.append(f"in the {where}:" if where else "in the main graph:")
            u = p.unfused.stats() if p.unfused else None
            f = p.fused[p.best_share].stats() if p.best_share is not None else None
            decision = "kept" if p.kept else "unfused"
            if p.not_reached:
                decision += f" ({p.not_reached})"
            elif f is None:
                decision += f" (plugin not timed: {next(iter(p.refused.values()), 'no sample')})"
            out.append(
                f"{p.pair_id:<10} {p.kind:<15} {_span(u):>24} {_span(f):>24} "
                f"{_share(p.best_share):>6} {p.saving:>+8.1%} {p.spread:>7.1%} {p.decided_by or '-':<11}  {decision}"
            )
        s = self.settings
        missed = sum(bool(p.not_reached) for p in self.pairs)
        out.append(
            f"{len(self.kept)} of {len(self.pairs)} pair(s) kept on the {self.backend} backend "
            + (f"({missed} not reached, so unfused) " if missed else "")
            + f"(margin {s['margin']:.1%}; {s['runs'] * s['rounds']} interleaved rounds ({s['runs']} x {s['rounds']})"
            + f"{_cut(s)}, "
            f"pairs timed on their own nodes under ORT mode {s['pairs_ort_mode']}; machine "
            f"{tuning.fingerprint(self.machine)})"
        )
        if self.final is not None:
            verdict = "kept" if self.final.all_won else "every pair unfused: the tuned model does not win"
            for check in (self.final, *self.final.others):
                on = f" on {check.case}" if self.final.others else ""
                out.append(f"whole model{on}: {check.why}")
            out[-1] += f" -> {verdict}"
        if not self.kept:
            out.append("no pair wins here: the output is the original model (every pair unfused)")
        out.append(f"ONNX Runtime's mode for this model here: {self.ort_mode.mode} ({self.ort_mode.why})")
        out.append(self.comparison_note)
        return out


def _span(stats: dict[str, float] | None) -> str:
    if stats is None:
        return "-"
    return f"{stats['median_us']:.1f} ({stats['p10_us']:.0f}-{stats['p90_us']:.0f})"


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.2f}"


# ---- inputs ------------------------------------------------------------------------------------


def _cut(settings: dict[str, Any]) -> str:
    """How a timing budget cuts the rounds, for a report line ('' without one)."""
    budget = settings.get("budget_s", 0.0)
    least = interleaved.BUDGET_LEAST_ROUNDS
    return f" or, where those take over {budget:g} s, as many as fit it (at least {least})" if budget else ""


def check_settings(runs: int, rounds: int, margin: float, shares: list[float] | None) -> None:
    if runs < rounds or rounds < 2:
        raise UsageError("--rounds must be >= 2 (the spread is measured across rounds), --runs >= --rounds")
    if not math.isfinite(margin):
        raise UsageError(f"--margin must be a number (a fraction of the unfused time), got {margin}")
    bad = [s for s in shares or [] if not 0.0 < s < 1.0]
    if bad:
        raise UsageError(f"--shares: {', '.join(map(str, bad))} not in (0, 1)")


def fused_pairs(model: onnx.ModelProto, path: Path) -> list[onnx.NodeProto]:
    """Every pair of the model: of its main graph and of its subgraphs (If branches), in node order."""
    nodes = pairs_within(model.graph)
    if not nodes:
        raise ModelError(no_pair_message(str(path)))
    for n in nodes:
        if not any(a.name == C.ATTR_PROGRAM for a in n.attribute):
            raise ModelError(
                f"{path}: node '{n.name}' has no task program ('{C.ATTR_PROGRAM}'); rewrite the model again"
            )
    return nodes


def _attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    return next((a for a in node.attribute if a.name == name), None)


def with_share(model: onnx.ModelProto, pair_id: str, share: float) -> None:
    """Set share_a of the pair's node in place. A modelled table of shares per shape bucket is
    dropped: the kernel would run the table's share instead, and tune measures one shape only."""
    node = next(n for n in pairs_within(model.graph) if n.overload == pair_id)
    kept = [a for a in node.attribute if a.name not in (C.ATTR_SHARE_BUCKETS, C.ATTR_SHARE_TABLE)]
    del node.attribute[:]
    node.attribute.extend(kept)
    attr = _attr(node, C.ATTR_SHARE_A)
    if attr is None:
        node.attribute.append(onnx.helper.make_attribute(C.ATTR_SHARE_A, float(share)))
    else:
        attr.f = float(share)


def only_pair_fused(model: onnx.ModelProto, pair_id: str, share: float) -> onnx.ModelProto:
    others = {n.overload for n in pairs_within(model.graph) if n.overload != pair_id}
    variant = unfuse(model, others)
    with_share(variant, pair_id, share)
    return variant


def tuned_model(
    model: onnx.ModelProto, pairs: list[PairResult], record: dict[str, Any] | None = None
) -> onnx.ModelProto:
    """The input with the losing pairs unfused, the kept ones at their best share, and the record."""
    out = unfuse(model, {p.pair_id for p in pairs if not p.kept})
    for p in pairs:
        if p.kept:
            assert p.best_share is not None
            with_share(out, p.pair_id, p.best_share)
    if record is not None:
        tuning.write_record(out, record)
    return out


# ---- measuring ---------------------------------------------------------------------------------


def _pair_result(node: onnx.NodeProto) -> PairResult:
    share = _attr(node, C.ATTR_SHARE_A)
    kind = _attr(node, C.ATTR_KIND)
    estimates = {k: float(a.f) for k in (C.ATTR_EST_SERIAL_US, C.ATTR_EST_FUSED_US) if (a := _attr(node, k))}
    return PairResult(
        node.overload, node.name, kind.s.decode() if kind else "", float(share.f) if share else 0.5, estimates
    )


def sweep(original_share: float, shares: list[float] | None) -> list[float]:
    chosen = shares if shares else [original_share, *SWEEP]
    return sorted({round(float(s), 4) for s in chosen})


def measure_pair(
    model: onnx.ModelProto,
    case: Case,
    result: PairResult,
    shares: list[float],
    settings: dict[str, Any],
) -> None:
    """Time the pair's own node as a model (`pair_case`), fused at each share, against its body's
    nodes on stock ORT, all in the pairs' ORT mode, on the case's inputs: sessions of this process
    (time_here), a visit of many calls each (SCREEN_VISIT)."""
    mode = settings["pairs_ort_mode"]
    configs = [Config("unfused", isolated.ort_session(unfuse(model).SerializeToString(), mode))]
    with runtime.plugin_environment_restored():
        for share in shares:
            variant = only_pair_fused(model, result.pair_id, share).SerializeToString()
            configs.append(plugin_config(f"{share}", variant, mode, settings))
    lost = partial(lost_every_round, configs, settings["margin"])
    timed = time_here(configs, case, settings, SCREEN_VISIT, settled=lost)
    if "unfused" in timed:
        result.unfused = per_round(timed["unfused"])
    for cfg in configs[1:]:
        if cfg.label in timed:
            result.fused[float(cfg.label)] = per_round(cfg)
        else:
            result.refused[float(cfg.label)] = cfg.check or "no sample"
    result.decide(settings["margin"])


def lost_every_round(configs: list[Config], margin: float) -> bool:
    """Whether every share of a pair's screen (configs[1:], against configs[0], unfused) saved less
    than `margin` in every round so far: a pair that would pass, whose median round saves the margin,
    loses 8 rounds in a row with p = 1/256 (a sign test), so its screen stops. table_edge_det_int8's
    pair8 took 100 s to show fused 3x slower (60 ms against 20 ms)."""
    unfused = configs[0].samples
    timed = [c for c in configs[1:] if c.samples]
    return bool(timed) and all(1.0 - f / u < margin for c in timed for f, u in zip(c.samples, unfused))


def per_round(cfg: Config) -> Timing:
    """A configuration timed by time_here: one figure per interleaved round."""
    return Timing([[x] for x in cfg.samples])


def plugin_config(label: str, model: bytes, mode: str, settings: dict[str, Any]) -> Config:
    """The model's session with the plugin on settings' backend, in ORT mode `mode`; a session that
    cannot be made is a configuration refused with the reason."""
    try:
        session = _plugin_session(model, mode, settings)()
    except Exception as exc:  # noqa: BLE001 - reported as the configuration's check
        return Config(label, None, check=f"session fails: {first_line(exc)}", tol=PLUGIN_RTOL)
    return Config(label, session, tol=PLUGIN_RTOL)


def _plugin_session(model: bytes, mode: str, settings: dict[str, Any]) -> partial[Any]:
    """What builds the model's session with the plugin on settings' backend, in ORT mode `mode`."""
    return partial(isolated.hexfuse_session, model, mode, backend=settings["backend"], workers=settings["workers"])


def choose_ort_mode(model: bytes, case: Case, settings: dict[str, Any], plugin: bool = False) -> ModeChoice:
    """Time the model in each of ONNX Runtime's modes (with the plugin on settings' backend, or on
    stock ORT), every session in this process, interleaved (time_here), and choose one. In worker
    processes of their own, tune chose ort-seq-2t for two_branch where interleaved rounds had
    ort-seq 4.9% faster."""
    with runtime.plugin_environment_restored():
        configs = [
            plugin_config(m, model, m, settings) if plugin else Config(m, isolated.ort_session(model, m))
            for m in ort_modes.MODES
        ]
    meter = CpuMeter()
    timed = time_here(configs, case, settings)
    if ort_modes.DEFAULT not in timed:
        return ModeChoice(ort_modes.DEFAULT, f"ORT's defaults not timed: {configs[0].check}")
    concurrent = mode_choice.concurrent_work(onnx.load_model_from_string(model).graph)
    return ModeChoice.measured({m: per_round(c) for m, c in timed.items()}, concurrent).under_load(meter.others())


def time_here(
    configs: list[Config],
    case: Case,
    settings: dict[str, Any],
    visit: tuple[float, int] = WHOLE_VISIT,
    settled: Callable[[], bool] | None = None,
) -> dict[str, Config]:
    """Every configuration a session of this process: checked against the case's outputs, then timed by
    interleaved.py over runs x rounds rounds (one figure per round: the median of a visit's calls, as
    many as fill visit[0] s, at most visit[1]; fewer where they would take over settings' budget_s, or
    once `settled()`), after discarded rounds while a session still chooses its ORT mode. Returns
    those that were timed. Two processes of one graph differed 0.67-1.27x; two sessions of one
    process, interleaved, by 0.3-0.4%."""
    for cfg in configs:
        verify_config(cfg, case.feeds, case.names, case.expected)

    rounds = settings["runs"] * settings["rounds"]
    interleaved.time_interleaved(
        configs,
        case.feeds,
        rounds,
        warm_up=lambda: interleaved.still_choosing(configs),
        visit_s=visit[0],
        visit_calls=visit[1],
        budget_s=settings.get("budget_s", 0.0),
        settled=settled,
    )
    return {c.label: c for c in configs if c.samples}


def final_check(
    tuned: bytes,
    mode: str,
    unfused: bytes,
    case: Case,
    settings: dict[str, Any],
    pairs_save_us: float,
) -> FinalCheck:
    """Time the tuned model (`tuned`: its kept pairs and its tuning record, which sets ORT's mode
    `mode`) as an application runs it against the original in every ORT mode (time_here), on the
    case's inputs; `pairs_save_us`: what its kept pairs save on their own nodes (judge_whole_model)."""
    with runtime.plugin_environment_restored():
        configs = [Config("tuned", app_session(tuned, settings)(), tol=PLUGIN_RTOL)]
    configs += [Config(m, isolated.ort_session(unfused, m)) for m in ort_modes.MODES]
    timed = time_here(configs, case, settings)
    originals = {m: timed[m] for m in ort_modes.MODES if m in timed}
    if "tuned" not in timed or not originals:
        failed = next(c for c in configs if c.label not in timed)
        return FinalCheck(mode, False, f"not timed: {failed.label}: {failed.check or 'no sample'}", case=case.label)
    final = judge_whole_model(timed["tuned"], originals, mode, settings["margin"], pairs_save_us)
    final.case = case.label
    return final


def app_session(model: bytes, settings: dict[str, Any]) -> partial[Any]:
    """What builds `hexfuse_onnx.InferenceSession(model)` as an application does: ORT's default
    options, backend auto (the tuned backend given only where auto would run another here), the
    workers tune was given."""
    kwargs: dict[str, Any] = {"workers": settings["workers"]}
    if runtime.resolve_backend("auto") != settings["backend"]:
        kwargs["backend"] = settings["backend"]
    return partial(isolated.hexfuse_session, model, None, **kwargs)


def tune(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    backend: str = "host",
    runs: int = DEFAULT_RUNS,
    rounds: int = DEFAULT_ROUNDS,
    margin: float = DEFAULT_MARGIN,
    shares: list[float] | None = None,
    workers: int | None = None,
    session: str = BEST_MODE,
    input_shapes: dict[str, list[int]] | None = None,
    progress: Progress = lambda m: None,
    inputs: dict[str, np.ndarray] | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
) -> TuneResult:
    """Measure every pair of `source` on this machine and write the tuned model to `output`, on
    `inputs` when given (where random ones do not run the model: a sample rate), else on seeded
    random inputs at `input_shapes` or the shapes the pass analysed the model at. Each timing runs
    runs x rounds rounds, fewer where they would take over `budget_s` (0: no limit). A model with random
    ops without a seed is tuned and verified as a copy with seeds given and written without them
    (random_ops), as rewrite writes it."""
    unseeded = random_ops.unseeded_count(source)
    if unseeded:
        again = partial(
            tune,
            backend=backend,
            runs=runs,
            rounds=rounds,
            margin=margin,
            shares=shares,
            workers=workers,
            session=session,
            input_shapes=input_shapes,
            inputs=inputs,
            budget_s=budget_s,
        )
        return _tune_seeded(Path(source), Path(output), unseeded, progress, again)
    source, output = Path(source), Path(output)
    check_settings(runs, rounds, margin, shares)
    if not budget_s >= 0:
        raise UsageError(f"--budget must be 0 (no limit) or a number of seconds, got {budget_s}")
    if inputs is not None and input_shapes:
        raise UsageError("--shape and --inputs together: tune times the given inputs at their own shapes")
    if session not in SESSION_MODES:
        raise UsageError(f"--session: unknown '{session}' (known: {', '.join(SESSION_MODES)})")
    if backend not in ("host", "hexagon"):
        raise UsageError(f"--backend: '{backend}' is not host or hexagon (tuning measures one backend)")
    check_output_folder(output)  # before any timing
    load(source)  # validated: a missing file, a cycle or a dangling input is named here
    model = read_model(source)
    tuning.drop_record(model)  # an earlier tuning's mode must not reach the sessions timed here
    fused_pairs(model, source)  # a model with no pair, or a pair without its program, is refused here
    if not input_shapes:  # symbolic dims: time at the shapes the pass analysed the model at
        input_shapes, _ = recorded_bindings(model)
    runtime.resolve_backend(backend)
    runtime.library_path()
    settings = {
        "backend": backend,
        "runs": runs,
        "rounds": rounds,
        "margin": margin,
        "workers": workers,
        "session": session,
        "budget_s": budget_s,
    }
    unfused = unfuse(model).SerializeToString()
    reference = reference_session(unfused)
    if inputs is not None:
        check_inputs_match(reference, inputs)
    feeds = inputs if inputs is not None else random_inputs(reference, input_shapes, seed=0)
    main = original_case(reference, feeds, source, GIVEN_INPUTS if inputs is not None else RANDOM_INPUTS)
    if session == BEST_MODE:
        progress(f"{source.name}: timing ONNX Runtime's modes ({', '.join(ort_modes.MODES)}) on the unfused model")
        mode = choose_ort_mode(unfused, main, settings)
    else:
        mode = ModeChoice.given(session)
    settings["pairs_ort_mode"] = screen_mode(mode.mode)
    progress(f"  ORT mode {mode.mode}: {mode.why}")
    found, missed = scopes(model, reference, main, progress)
    del reference
    timed = sum(len(s.pairs) for s in found)
    most = math.ceil((timed + 2) * budget_s / 60)  # the pairs' timings and the final check's two
    bound = f" (--budget {budget_s:g} s bounds each of these timings and the final check's: at most ~{most} min)"
    bound = bound if budget_s and timed else ""
    progress(
        f"{source.name}: {timed} pair(s) reached; timing each on its own nodes, fused against unfused, on the "
        f"{backend} backend{bound}"
    )
    results: dict[str, PairResult] = {}
    for scope in found:
        results |= screen_scope(scope, shares, settings, progress, len(results), timed)
    pairs = [*results.values(), *(unreached(node, where, why) for node, where, why in missed.values())]
    final = None
    if any(r.kept for r in pairs):
        cases = cases_reaching(found, {r.pair_id for r in pairs if r.kept})
        mode, final = whole_model(model, pairs, mode, unfused, cases, settings, progress)
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    tuned = TuneResult(source, output, backend, settings, pairs, tuning.machine(), date, mode, final)
    wholes = list({id(s.whole): s.whole for s in found}.values())
    tuned.comparison_note = write_tuned(model, tuned, source, output, wholes, progress)
    return tuned


def _tune_seeded(
    source: Path, output: Path, unseeded: int, progress: Progress, again: Callable[..., TuneResult]
) -> TuneResult:
    """`again(copy, copy_out, progress=...)` (tune with the caller's settings) on a copy with seeds given,
    its output written to `output` without them."""

    def finish(result: TuneResult, copy: random_ops.SeededCopy) -> None:
        copy.commit(output)
        result.source, result.output = source, output
        result.comparison_note = copy.said(result.comparison_note, output)

    return random_ops.run_seeded(source, output, unseeded, progress, again, finish)


def screen_mode(mode: str) -> str:
    """The ORT mode a pair's own nodes are timed in: the tuned model's, but ORT's defaults for ort-par.
    ORT_PARALLEL hands each of a few tiny nodes to its inter-op pool and waits for a thread to wake:
    gtcrn_stream's pair bodies ran in 21-29 us at p10 and 24 us to 12 ms in median under it (10-14 us
    in ort-seq), and such a screen passed pairs on savings of wake-ups, not work, which the whole-model
    check then unfused. The whole model is still timed in ort-par."""
    return ort_modes.DEFAULT if mode == mode_choice.PARALLEL else mode


def reference_session(model: bytes) -> ort.InferenceSession:
    """Stock ORT's session that gives the reference outputs (no pair fused)."""
    return ort.InferenceSession(model, sess_options=ort_modes.options("ort-seq"), providers=["CPUExecutionProvider"])


def original_case(reference: ort.InferenceSession, feeds: dict[str, np.ndarray], source: Path, label: str) -> Case:
    """The unfused model's outputs on tune's inputs; ModelError when it fails on them."""
    try:
        return run_original(reference, feeds, label)
    except VerificationError as exc:
        values = "given values" if label == GIVEN_INPUTS else "seeded random values: give real ones with --inputs"
        raise ModelError(
            f"{source}: the model fails on the inputs tune runs it with ({shapes_label(feeds)}; {values}): "
            f"{exc.message}"
        ) from None


@dataclass
class Scope:
    """Where pairs sit, run once to capture what they read: the main graph on tune's inputs, or an If
    branch of it as a model of its own (branch_runs) on the outer values the model computed for it, on
    inputs that take it."""

    where: str  # "" the main graph; else "then branch of If 'X'" (+ " (random inputs set to take it)")
    model: onnx.ModelProto  # the fused model, or its fused branch as a model
    case: Case  # the scope's inputs and its outputs with no pair fused (stock ORT)
    whole: Case  # the whole model's inputs that reach the scope, and its outputs unfused
    pairs: list[onnx.NodeProto]


RANDOM_INPUTS = "tune's random inputs"  # the main case's label
GIVEN_INPUTS = "the given inputs"  # ... when the user gave them (--inputs)
DEEPER = "not reached: tune times the pairs of the main graph and of its Ifs' branches, not deeper ones"


def scopes(
    model: onnx.ModelProto, reference: ort.InferenceSession, main: Case, progress: Progress
) -> tuple[list[Scope], dict[str, tuple[onnx.NodeProto, str, str]]]:
    """The main graph, then each branch of its Ifs that holds pairs, as scopes; and the pairs none
    reaches (pair id -> node, where, why): a branch no input reaches, a Loop/Scan body, an If within
    a branch (the pass puts no pair in the last two)."""
    found = [Scope("", model, main, main, [n for n in model.graph.node if is_pair(n)])]
    missed: dict[str, tuple[onnx.NodeProto, str, str]] = {}
    for node in (n for n in model.graph.node if is_if(n)):
        for attribute, body in bodies_with_pairs(node).items():
            scope = branch_scope(model, node, attribute, reference, main)
            if isinstance(scope, str):
                progress(f"the {branch_label(attribute, node)}: {scope}; its pairs are unfused")
                missed |= {p.overload: (p, branch_label(attribute, node), scope) for p in pairs_within(body)}
            else:
                found.append(scope)
    reached = {p.overload for s in found for p in s.pairs} | set(missed)
    missed |= {
        p.overload: (p, "a nested subgraph", DEEPER) for p in pairs_within(model.graph) if p.overload not in reached
    }
    return found, missed


def branch_scope(
    model: onnx.ModelProto, node: onnx.NodeProto, attribute: str, reference: ort.InferenceSession, main: Case
) -> Scope | str:
    """The If's branch as a scope, reached on tune's inputs when they take it, else on them set to
    take it (subgraphs.feeds_taking: a bool input, or Equal of an input and a constant), as emulate
    and rewrite's verification do; or why it is not reached."""
    label, then, condition = branch_label(attribute, node), attribute == "then_branch", node.input[0]
    values = capture(model, branch_reads(node), main.feeds)
    whole, where = main, label
    if conditions_taken([values[condition]]) != {then}:
        feeds = feeds_taking(model, condition, main.feeds, then)
        if feeds is None:
            return f"{NOT_TAKEN}, and its condition '{condition}' is no input tune can set"
        try:
            whole = run_original(reference, feeds, f"{main.label} set to take the {label}")
            values = capture(model, branch_reads(node), feeds)
        except Exception as exc:  # noqa: BLE001 - ORT refuses them: the branch is not reached, saying why
            return f"not reached: the model fails on the {_inputs(main)} set to take it: {first_line(exc)}"
        where += f" ({_inputs(main)} set to take it)"
    run = next(r for r in branch_runs(model, node, values) if r.attribute == attribute)
    if run.model is None:
        return run.not_reached
    try:
        case = run_original(reference_session(unfuse(run.model).SerializeToString()), run.feeds, f"the {label}")
    except Exception as exc:  # noqa: BLE001 - reported as why its pairs are not timed
        return f"not reached: the branch does not run as a model of its own: {first_line(exc)}"
    return Scope(where, run.model, case, whole, [n for n in run.model.graph.node if is_pair(n)])


def _inputs(main: Case) -> str:
    return "random inputs" if main.label == RANDOM_INPUTS else main.label


def unreached(node: onnx.NodeProto, where: str, why: str) -> PairResult:
    result = _pair_result(node)
    result.where, result.not_reached = where, why
    return result


def screen_scope(
    scope: Scope,
    shares: list[float] | None,
    settings: dict[str, Any],
    progress: Progress,
    done: int,
    total: int,
) -> dict[str, PairResult]:
    """Each pair of the scope timed on its own nodes (`own_graph`): fused at each share of the sweep
    against its body's nodes, on the values they read in one run of the scope's model. A pair that
    wins there is kept for the whole-model check to confirm; the rest are unfused by this screen."""
    if not scope.pairs:
        return {}
    pieces = {p.overload: own_graph(scope.model, p) for p in scope.pairs}
    wanted = [t for g in pieces.values() for t in (*outer_scope_names(g), *(o.name for o in g.output))]
    values = capture(scope.model, wanted, scope.case.feeds, scope.where)
    results = {}
    where = f" in the {scope.where}" if scope.where else ""
    for k, node in enumerate(scope.pairs, done + 1):
        result = _pair_result(node)
        result.where = scope.where
        tried = sweep(result.original_share, shares)
        progress(
            f"pair {k}/{total} {result.node} ({result.kind}){where}: on its own nodes, unfused vs fused at share "
            f"{', '.join(f'{s:.2f}' for s in tried)}; {settings['runs'] * settings['rounds']} interleaved rounds"
            f"{_cut(settings)} in this process"
        )
        own = pair_case(scope.model, pieces[node.overload], values)
        if isinstance(own, str):
            result.refused = dict.fromkeys(tried, own)
        else:
            measure_pair(*own, result, tried, settings)
        result.decided_by = FINAL if result.kept else SCREEN
        progress(_screen_line(result))
        results[result.pair_id] = result
    return results


def _screen_line(result: PairResult) -> str:
    """A pair's screen, as it ends: its timings and decision, or why the plugin's run was not timed (a stranger
    read "fused - us at share -: saving +0.0% ± 0.0%" where the plugin's result was 4.9e-4 off ORT's)."""
    unfused = f"  {result.pair_id}: unfused {_span(result.unfused.stats() if result.unfused else None)} us, "
    if result.best_share is None:
        return unfused + f"fused not timed ({next(iter(result.refused.values()), 'no sample')}) -> unfused"
    return (
        unfused + f"fused {_span(result.fused[result.best_share].stats())} us at share {_share(result.best_share)}: "
        f"saving {result.saving:+.1%} ± {result.spread:.1%} -> "
        f"{'kept for the whole-model check' if result.kept else 'unfused'}"
    )


def own_graph(model: onnx.ModelProto, call: onnx.NodeProto) -> onnx.GraphProto:
    """The pair's own nodes in the model (rewrite.own_nodes: its FusedHexPair node and what its kind
    placed around it) as a graph whose outputs, untyped, are what the rest of the model reads of them;
    what they make inside keeps the model's types (ORT cannot infer a FusedHexPair's output type)."""
    nodes = own_nodes(model, call)
    made = {t for n in nodes for t in n.output}
    read = {t for n in model.graph.node if not made.intersection(n.output) for t in node_reads(n)}
    read |= {o.name for o in model.graph.output}
    outputs = [onnx.ValueInfoProto(name=t) for n in nodes for t in n.output if t in read]
    inside = [v for v in model.graph.value_info if v.name in made and v.name not in read]
    return onnx.helper.make_graph(nodes, call.overload, [], outputs, value_info=inside)


def pair_case(
    model: onnx.ModelProto, own: onnx.GraphProto, values: dict[str, np.ndarray]
) -> tuple[onnx.ModelProto, Case] | str:
    """The pair's own nodes as a model of their own (subgraphs.subgraph_model; `unfuse` gives its
    body's nodes) on the captured values they read, with its outputs unfused on them (stock ORT); or
    why they do not run so."""
    graph = onnx.GraphProto()
    graph.CopyFrom(own)
    del graph.output[:]
    graph.output.extend(typed(o.name, values) or o for o in own.output)
    piece, problem = subgraph_model(model, graph, lambda name: typed(name, values))
    if piece is None:
        return f"its own nodes are no model: {problem}"
    feeds = {v.name: values[v.name] for v in piece.graph.input}
    try:
        unfused = reference_session(unfuse(piece).SerializeToString())
        return piece, run_original(unfused, feeds, f"the values {own.name} read")
    except Exception as exc:  # noqa: BLE001 - reported as why the pair is not timed
        return f"its own nodes do not run as a model: {first_line(exc)}"


def cases_reaching(found: list[Scope], kept: set[str]) -> list[Case]:
    """The whole model's inputs that reach the kept pairs: one per scope holding one, without repeats."""
    holding = [s.whole for s in found if any(p.overload in kept for p in s.pairs)]
    return list({id(c): c for c in holding}.values())


def whole_model(
    model: onnx.ModelProto,
    results: list[PairResult],
    first: ModeChoice,
    unfused: bytes,
    cases: list[Case],
    settings: dict[str, Any],
    progress: Progress,
) -> tuple[ModeChoice, FinalCheck]:
    """With kept pairs: ORT's mode chosen again on the tuned model with the plugin (--session best),
    then the tuned model, as an application runs it, against the original in every ORT mode, on each
    of `cases` (the inputs that reach the kept pairs: one per If branch they sit in); when it does not
    win on every one, every pair is unfused and the mode is the one chosen on the original. Returns
    (mode, final check: on the first case, the others in its `others`)."""
    kept = tuned_model(model, results).SerializeToString()
    mode = first
    if settings["session"] == BEST_MODE:
        progress("timing ONNX Runtime's modes again on the tuned model, with the plugin")
        mode = choose_ort_mode(kept, cases[0], settings, plugin=True)
        mode.why += " (the tuned model with its kept pairs on the plugin)"
        progress(f"  ORT mode {mode.mode}: {mode.why}")
    app_model = tuned_model(model, results, session_record(settings["backend"], mode)).SerializeToString()
    finals = []
    for case in cases:
        progress(
            "timing the tuned model (as hexfuse_onnx.InferenceSession runs it) against the original in every ORT "
            f"mode on {case.label}"
        )
        finals.append(final_check(app_model, mode.mode, unfused, case, settings, own_savings_us(results)))
        progress(f"  {finals[-1].why} -> {'wins' if finals[-1].won else 'does not win'}")
    final = finals[0]
    final.others = finals[1:]
    if final.all_won:
        return mode, final
    progress("  every pair unfused: the tuned model does not win on every input")
    for r in results:
        r.kept = False
    return first, final


def own_savings_us(results: list[PairResult]) -> float:
    """What the kept pairs save on their own nodes, summed: unfused - fused (at the best share) medians."""
    return sum(r.saved_us() for r in results if r.kept)


def session_record(backend: str, mode: ModeChoice) -> dict[str, Any]:
    """The part of a tuning record that sessions read (tuning.tuned_here, tuning.ort_mode_here): what
    the final check's tuned model carries before its full record is known."""
    machine = tuning.machine()
    return {
        "version": tuning.RECORD_VERSION,
        "backend": backend,
        "machine": machine,
        "fingerprint": tuning.fingerprint(machine),
        "ort_mode": mode.record(),
    }


def write_tuned(
    model: onnx.ModelProto,
    result: TuneResult,
    source: Path,
    output: Path,
    wholes: list[Case],
    progress: Progress,
) -> str:
    """Stage the tuned model, check it (full checker; stock ORT and, with kept pairs, the plugin
    against the input, on every input set that reaches a scope: `wholes`, one per If branch taken),
    then move it into place. Returns the verification line."""
    tuned = tuned_model(model, result.pairs, result.record())
    staged = stage(tuned, output, source.resolve().parent)
    try:
        progress("verifying the tuned model (full checker, stock ONNX Runtime, plugin)")
        check(staged.model_path)
        original = verify.session(source)
        cases = [run_original(original, c.feeds, c.label) for c in wholes]
        stock = compare_cases(staged.model_path, cases, DEFAULT_RTOL)
        note = (
            f"verified: stock ONNX Runtime matches the input on {len(cases)} input set(s) (worst relative error "
            f"{stock.worst_relative_error:.1e})"
        )
        if result.kept:
            with runtime.plugin_environment_restored():
                options = runtime.session_options(result.backend, result.settings["workers"])
                plugin = compare_cases(staged.model_path, cases, PLUGIN_RTOL, rewritten_options=options)
            note += f"; with the plugin too ({plugin.worst_relative_error:.1e} <= {PLUGIN_RTOL:g})"
    except BaseException:
        staged.discard()
        raise
    staged.commit()
    return note
