"""The calibration's result: both fits, their prediction errors, its JSON and its tables."""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ... import costmodel
from ...costmodel import Target
from .fitting import FIT_LABELS, KERNEL_FIT, ORT_FIT, FitRow, median_abs
from .records import RUN_QUANTILE, PairRow


def _pair_prediction(r: PairRow) -> dict:
    return {
        "predicted_fused_s": r.predicted_fused_s,
        "predicted_call_s": r.predicted_call_s,
        "predicted_serial_s": r.predicted_serial_s,
        "fused_error": r.fused_error,
        "span_error": r.span_error,
        "serial_error": r.serial_error,
    }


_MEASURED_FIELDS = (
    "model",
    "node",
    "kind",
    "note",
    "share_a",
    "serialized",
    "measured_call_s",
    "preempted_s",
    "measured_span_s",
    "measured_serial_s",
    "call_overhead_s",
    "kernel_work_s",
    "task_overlap",
    "kernel_gap_per_op_s",
)


@dataclass(frozen=True)
class FitErrors:
    """Median |predicted / measured - 1| of one fit: fused call, fused work span, serial
    (against ORT's time of the original nodes), and the per-op residual of the fit itself."""

    fused: float
    span: float
    serial: float
    residual: float


@dataclass
class CalibrationResult:
    """Both fits, and their prediction errors on the same measured plugin calls.

    The rows without prefix (`fit_rows`, `pair_rows`, `ddr_bound`, `median_abs_error`, ...) are
    the fit to ORT profiling (`ort_target`); the `kernel_` ones the fit to the kernel's own item
    times (`kernel_target`). Both are fitted on every measured model and their `pair_rows` are
    in-sample (the kernel fit's op times come from the very calls it predicts). `held_out` holds
    each fit's prediction of every pair by fits made without the pair's model (`held_out_rows`):
    that is the prediction error the result reports. `target` is the one the JSON carries
    (`costmodel.load_target` reads it) and `calibrate` registers, named CALIBRATED_NAME: the fit
    with the lower held-out median fused-call error, `chosen_fit` ("ort" or "kernel") says which."""

    target: Target
    fit_rows: list[FitRow]
    pair_rows: list[PairRow]
    where: str
    ddr_bound: list[str] = field(default_factory=list)
    ort_target: Target | None = None  # None: `target` is the ORT fit
    kernel_target: Target | None = None  # None: no kernel fit (no pair measured)
    kernel_fit_rows: list[FitRow] = field(default_factory=list)
    kernel_pair_rows: list[PairRow] = field(default_factory=list)
    kernel_ddr_bound: list[str] = field(default_factory=list)
    unmodelled_kernel_s: dict[str, float] = field(default_factory=dict)  # pair -> item time on no-work nodes
    chosen_fit: str = ORT_FIT
    held_out: dict[str, list[PairRow]] = field(default_factory=dict)  # fit -> rows predicted without their model

    def rows(self, fit: str, held_out: bool = False) -> list[PairRow]:
        if held_out:
            return self.held_out.get(fit, [])
        return self.pair_rows if fit == ORT_FIT else self.kernel_pair_rows

    def errors(self, fit: str, held_out: bool = False) -> FitErrors:
        """Median |error| of one fit (ORT_FIT or KERNEL_FIT) over the same measured calls, in-sample
        or held out."""
        pairs = self.rows(fit, held_out)
        ops = self.fit_rows if fit == ORT_FIT else self.kernel_fit_rows
        return FitErrors(
            fused=median_abs(r.fused_error for r in pairs),
            span=median_abs(r.span_error for r in pairs),
            serial=median_abs(r.serial_error for r in pairs),
            residual=median_abs(r.rel_error for r in ops),
        )

    @property
    def median_abs_error(self) -> float:
        """Fit to ORT profiling, in-sample: fused time of a call, |predicted / measured - 1|, median over the pairs."""
        return self.errors(ORT_FIT).fused

    @property
    def kernel_median_abs_error(self) -> float:
        """Fit to the kernel's item times, in-sample: the same, on the same measured calls."""
        return self.errors(KERNEL_FIT).fused

    def held_out_error(self, fit: str) -> float:
        """The fit's median |fused call error| over the pairs, each predicted without its model."""
        return self.errors(fit, held_out=True).fused

    @property
    def chosen_median_abs_error(self) -> float:
        """The headline: the chosen fit's held-out median |fused call error| (in-sample when only
        one model was measured)."""
        held = self.held_out_error(self.chosen_fit)
        return held if np.isfinite(held) else self.errors(self.chosen_fit).fused

    def choose(self) -> None:
        """Choose the fit with the lower held-out median |fused call error| (in-sample without one)."""
        if self.kernel_target is None:
            self.chosen_fit = ORT_FIT
            return
        held = {f: self.held_out_error(f) for f in (ORT_FIT, KERNEL_FIT)}
        if not all(np.isfinite(v) for v in held.values()):
            held = {f: self.errors(f).fused for f in held}
        self.chosen_fit = KERNEL_FIT if held[KERNEL_FIT] < held[ORT_FIT] else ORT_FIT

    @property
    def choice_note(self) -> str:
        if self.kernel_target is None:
            return f"the {FIT_LABELS[ORT_FIT]} (no kernel fit: no pair was measured)"
        other = KERNEL_FIT if self.chosen_fit == ORT_FIT else ORT_FIT
        held = all(self.held_out.get(f) for f in (ORT_FIT, KERNEL_FIT))
        errors = {f: self.held_out_error(f) if held else self.errors(f).fused for f in (ORT_FIT, KERNEL_FIT)}
        how = "held-out" if held else "in-sample (one model: nothing to hold out)"
        return (
            f"the {FIT_LABELS[self.chosen_fit]}: the lower {how} median |fused call error| "
            f"({errors[self.chosen_fit]:.1%}; {FIT_LABELS[other]}: {errors[other]:.1%})"
        )

    def _fit_dict(self, key: str) -> dict | None:
        if key == ORT_FIT:
            target, rows, ddr = self.ort_target or self.target, self.fit_rows, self.ddr_bound
        elif self.kernel_target is None:
            return None
        else:
            target, rows, ddr = self.kernel_target, self.kernel_fit_rows, self.kernel_ddr_bound
        e, held = self.errors(key), self.errors(key, held_out=True)
        return {
            "label": FIT_LABELS[key],
            "target": target.to_dict(),
            "held_out_median_abs_error": held.fused,
            "held_out_median_abs_serial_error": held.serial,
            "median_abs_error": e.fused,
            "median_abs_span_error": e.span,
            "median_abs_serial_error": e.serial,
            "median_abs_op_residual": e.residual,
            "ddr_bound_ops": ddr,
            "ops": [{**asdict(r), "rel_error": r.rel_error} for r in rows],
        }

    def _by_pair(self, fit: str, held_out: bool) -> dict[tuple[str, str], PairRow]:
        return {(r.model, r.node): r for r in self.rows(fit, held_out)}

    def to_dict(self) -> dict:
        """`target` (what load_target reads) is the chosen fit; `fits` holds both, `pairs` the
        measured calls with each fit's prediction, in-sample ("ort_fit", "kernel_fit") and held out
        ("ort_fit_held_out", "kernel_fit_held_out")."""
        columns = {
            f"{fit}_fit{'_held_out' if held else ''}": self._by_pair(fit, held)
            for fit in (ORT_FIT, KERNEL_FIT)
            for held in (False, True)
        }
        pairs = []
        for r in self.pair_rows:
            predictions = {name: rows.get((r.model, r.node)) for name, rows in columns.items()}
            pairs.append(
                {
                    **{f: getattr(r, f) for f in _MEASURED_FIELDS},
                    "unmodelled_kernel_s": self.unmodelled_kernel_s.get(f"{r.model}:{r.node}", 0.0),
                    **{name: _pair_prediction(p) if p else None for name, p in predictions.items()},
                }
            )
        return {
            "target": self.target.to_dict(),
            "target_fit": self.chosen_fit,
            "target_note": f"carries {self.choice_note}",
            "where": self.where,
            "run_quantile": RUN_QUANTILE,
            "median_abs_error": self.chosen_median_abs_error,
            "median_abs_error_is": "held out (leave one model out)"
            if self.held_out.get(self.chosen_fit)
            else "in-sample",
            "fits": {key: self._fit_dict(key) for key in (ORT_FIT, KERNEL_FIT)},
            "pairs": pairs,
        }

    def to_json(self) -> str:
        """The result as JSON; `costmodel.load_target` reads the target from it."""
        return json.dumps(self.to_dict(), indent=2, default=_json_float) + "\n"

    def summary_lines(self) -> list[str]:
        return [*self._fit_lines(), "", *self._pair_lines(), "", *self._median_lines()]

    def _fit_lines(self) -> list[str]:
        fits = [(ORT_FIT, self.ort_target or self.target, self.fit_rows)]
        if self.kernel_target is not None:
            fits.append((KERNEL_FIT, self.kernel_target, self.kernel_fit_rows))
        overhead = self.target.call_overhead_s.value
        lines = [
            f"calibrated host targets ({self.where}); both predict a call as the fused time plus the measured "
            f"call overhead: {overhead * 1e6:.1f} us for a call that wakes the pool "
            f"({self.target.call_overhead_s.source})",
            f"  every time is the {RUN_QUANTILE:.0%} quantile of its runs (a run preempted by another process is "
            "slower, never faster: the slow tail is the machine's load)",
        ]
        for key, t, rows in fits:
            lines.append(
                f"  {FIT_LABELS[key]} ('{t.name}'): matrix {t.matrix_flops.value / 1e9:.1f} GFLOP/s, "
                f"vector {t.vector_flops / 1e9:.2f} GFLOP/s, memory {t.dma_bytes.value / 1e9:.2f} GB/s, "
                f"DDR {t.ddr_bytes.value / 1e9:.1f} GB/s, op overhead {t.op_overhead_s.value * 1e6:.1f} us, "
                f"matrix op {t.matrix_op_s.value * 1e6:.1f} us; "
                f"{len(rows)} ops, median |residual| {self.errors(key).residual:.1%}"
            )
        if self.kernel_target is not None:
            lines.append(
                "  residual: per op, of its own time; the kernel fit counts each op's error relative to its pair's "
                "time (a call is the sum of its ops), so its short ops' residuals are large"
            )
        return lines

    def _pair_lines(self) -> list[str]:
        held = {f: self._by_pair(f, True) for f in (ORT_FIT, KERNEL_FIT)}
        inside = self._by_pair(KERNEL_FIT, False)
        lines = [
            "pair                                   kind            share  meas us  preempt  span us  work/span  "
            "overlap  gap/op us  cold  call oh | held out: ORT fit  error  kernel fit  error | in-sample: "
            "ORT  kernel | serial meas  ORT fit  error"
        ]
        for r in self.pair_rows:
            key = (r.model, r.node)
            predicted = "".join(
                f"{p.predicted_call_s * 1e6:{w}.0f} {p.fused_error:+6.0%}"
                if (p := held[f].get(key))
                else f"{'-':>{w + 7}}"
                for f, w in ((ORT_FIT, 18), (KERNEL_FIT, 12))
            )
            k = inside.get(key)
            ratio = r.kernel_work_s / r.measured_span_s if r.measured_span_s > 0 else float("nan")
            lines.append(
                f"{r.model + ':' + r.node:<38} {r.kind:<15} {r.share_a:5.2f} {r.measured_call_s * 1e6:8.0f} "
                f"{r.preempted_s * 1e6:8.0f} {r.measured_span_s * 1e6:8.0f} {ratio:10.2f} {r.task_overlap:8.0%} "
                f"{r.kernel_gap_per_op_s * 1e6:10.1f} {r.cold_share:5.0%} {r.call_overhead_s * 1e6:8.1f} |"
                f"{predicted} | {r.fused_error:+15.0%} {(k.fused_error if k else float('nan')):+7.0%} | "
                f"{r.measured_serial_s * 1e6:11.0f} {r.predicted_serial_s * 1e6:8.0f} {r.serial_error:+6.0%}"
                + ("  (serialised)" if r.serialized else "")
            )
        return lines

    def _median_lines(self) -> list[str]:
        fits = [f for f in (ORT_FIT, KERNEL_FIT) if f == ORT_FIT or self.kernel_target is not None]

        def each(figure: Callable[[str], float]) -> str:
            return ", ".join(f"{FIT_LABELS[f]} {figure(f):.1%}" for f in fits)

        models = len({r.model for r in self.pair_rows})
        # held out, each model's pairs are predicted by the others' fits: with one model there are none
        alone = "none: held out needs pairs of two models or more (one given)"
        lines = [
            f"median |error| over {len(self.pair_rows)} pairs of {models} models, fused call, held out (each model's "
            f"pairs predicted by the fits to the other models' ops and calls; target <= 20%): "
            + (each(self.held_out_error) if models > 1 else alone),
            "  serial, held out (ORT-profiled original nodes, less their run delay): "
            + (each(lambda f: self.errors(f, True).serial) if models > 1 else alone),
            f"  in-sample (fitted to all the pairs' models, checked on the same calls): fused call "
            f"{each(lambda f: self.errors(f).fused)}; fused work span {each(lambda f: self.errors(f).span)}; "
            f"serial {each(lambda f: self.errors(f).serial)}",
            "  meas: hfx_run's wall time less preempt, the time other processes took from the call (the mean "
            "over its working threads of their time runnable but not running: Linux run delay; median shown)",
            "  work/span: summed work-item time over the span (2 = both workers busy throughout); overlap: "
            "share of the span both tasks ran an item; gap/op: time per op no item ran (in the span, in no "
            "item's time); cold: share of the calls that found the pool's workers asleep; call oh: the wake-up "
            "cost of the call a prediction stands for (the regime of the pair's calls at their lower quartile, as "
            "measured)",
        ]
        if self.kernel_target is not None:
            unmodelled = sum(self.unmodelled_kernel_s.values())
            lines.append(
                f"  kernel item time on nodes the cost model gives no work (Reshape, ...): {unmodelled * 1e6:.0f} us "
                "over all pairs"
            )
        lines.append(f"target '{self.target.name}' (written by -o, fitted to every model): {self.choice_note}")
        return lines

    def op_lines(self) -> list[str]:
        """Per node of the kernel fit: its ORT-profiled time (when the ORT fit has it), its kernel
        item time and what the kernel fit predicts."""
        ort = {(r.model, r.node): r for r in self.fit_rows}
        lines = [
            "node (kernel fit)                               op_type     engine   ORT us  kernel us  "
            "kernel/ORT  kernel-fit pred us  residual"
        ]
        for r in self.kernel_fit_rows:
            o = ort.get((r.model, r.node))
            ort_us = f"{o.measured_s * 1e6:8.1f}" if o else f"{'-':>8}"
            ratio = f"{r.measured_s / o.measured_s:10.2f}" if o and o.measured_s > 0 else f"{'-':>10}"
            lines.append(
                f"{r.model + ':' + r.node:<47} {r.op_type:<11} {r.engine:<6} {ort_us} {r.measured_s * 1e6:10.1f}  "
                f"{ratio}  {r.predicted_s * 1e6:18.1f}  {r.rel_error:+8.0%}"
            )
        return lines

    def parameter_tables(self) -> list[str]:
        """Markdown: each fit's parameters, then hexagon-v73's (all modelled)."""
        fits = [(ORT_FIT, self.ort_target or self.target), (KERNEL_FIT, self.kernel_target)]
        lines: list[str] = []
        for key, t in fits:
            if t is not None:
                chosen = " (chosen: written by -o as " + f"'{self.target.name}')" if key == self.chosen_fit else ""
                lines += [f"{FIT_LABELS[key]}{chosen}:", "", *costmodel.parameter_table(t), ""]
        return [*lines, *costmodel.parameter_table(costmodel.HEXAGON_V73)]


def _json_float(x: object) -> object:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


def where_measured() -> str:
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpus), {datetime.date.today().isoformat()}"
