"""Both fits (ORT profiling, the kernel's item times) of one set of measurements, and their
leave-one-model-out prediction of every pair (calibration step 5)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...costmodel import Target
from .fitting import (
    FIT_LABELS,
    KERNEL_FIT,
    KERNEL_FIT_NAME,
    KERNEL_MEASURED_BY,
    ORT_FIT,
    ORT_FIT_NAME,
    Fit,
    fit_target,
    pair_times,
)
from .records import OpTiming, PairMeasurement, PairRow, Progress, quiet
from .schedule import measured_leads, on_the_kernel, predicted_row, with_call_overhead


@dataclass(frozen=True)
class FittedTargets:
    """Both fits of one set of measurements, each as the kernel runs a fused call."""

    ort_fit: Fit
    ort_target: Target
    kernel_fit: Fit | None  # None: no pair measured on the kernel
    kernel_target: Target | None
    leads: tuple[float, ...] | None  # call - span per WAKE_REGIMES (None: the measured pairs')

    def target(self, fit: str) -> Target | None:
        return self.ort_target if fit == ORT_FIT else self.kernel_target

    def predicted_rows(self, pairs: list[PairMeasurement], fit: str) -> list[PairRow]:
        """The pairs' rows as the fit predicts them (fused call, serial), each with its call overhead
        (its calls' mix of WAKE_REGIMES at `leads`); empty for a fit that was not made."""
        target = self.target(fit)
        if target is None:
            return []
        rows = [predicted_row(m, target) for m in pairs]
        return with_call_overhead(target, rows, leads=self.leads)[1]


def fit_targets(
    ops: list[OpTiming],
    pairs: list[PairMeasurement],
    base: Target,
    where: str = "",
    progress: Progress = quiet,
    leads: tuple[float, ...] | None = None,
) -> FittedTargets:
    """The fit to ORT-profiled `ops`, and the fit to the kernel's item times of `pairs`, each run on
    the kernel's schedule as measured on `pairs` (`on_the_kernel`), with the call overhead of `leads`
    (`with_call_overhead`; None: measured on `pairs`)."""
    fit = fit_target(ops, base, ORT_FIT_NAME, where)
    progress(f"{FIT_LABELS[ORT_FIT]}: {len(fit.rows)} ops, median |residual| {fit.median_abs_residual:.1%}")
    rows = [m.row for m in pairs]
    leads = leads if leads is not None else measured_leads(rows)
    ort_target, _ = with_call_overhead(
        on_the_kernel(fit.target, pairs, where, replace_overhead=True), rows, where, leads
    )
    kernel_ops = [t for m in pairs for t in m.kernel_ops]
    if not kernel_ops:
        return FittedTargets(fit, ort_target, None, None, leads)
    kfit = fit_target(
        kernel_ops,
        replace(fit.target, description=base.description),  # a rate items cannot fit keeps the ORT fit's
        KERNEL_FIT_NAME,
        where,
        KERNEL_MEASURED_BY,
        "the kernel's own per-op work-item times (plugin trace of the fused pairs), each op's error "
        "relative to its pair's summed time",
        pair_times([m.kernel_ops for m in pairs]),
        node_kernels=False,
    )
    progress(f"{FIT_LABELS[KERNEL_FIT]}: {len(kfit.rows)} ops, median |residual| {kfit.median_abs_residual:.1%}")
    kernel_target = on_the_kernel(replace(kfit.target, baseline=fit.target), pairs, where)
    kernel_target, _ = with_call_overhead(kernel_target, rows, where, leads)
    return FittedTargets(fit, ort_target, kfit, kernel_target, leads)


def held_out_rows(
    ops: list[OpTiming],
    pairs: list[PairMeasurement],
    base: Target,
    where: str = "",
    leads: tuple[float, ...] | None = None,
) -> dict[str, list[PairRow]]:
    """Each fit's prediction of every pair by a fit that saw nothing of the pair's model: leave one
    model out, fit both targets on the other models' ORT-profiled ops, kernel item times and calls,
    predict the left-out model's pairs. The call overhead is `leads` (the wake-up probe's, measured
    apart from every model), else the other models' calls'. Per fit (ORT_FIT, KERNEL_FIT), the rows in `pairs`' order;
    a pair whose model is the only one measured gets no held-out row."""
    out: dict[str, dict[int, PairRow]] = {ORT_FIT: {}, KERNEL_FIT: {}}
    for model in dict.fromkeys(m.row.model for m in pairs):
        kept = [k for k, m in enumerate(pairs) if m.row.model == model]
        train = [m for m in pairs if m.row.model != model]
        train_ops = [t for t in ops if t.model != model]
        if not train or not train_ops:
            continue
        fitted = fit_targets(train_ops, train, base, where, leads=leads)
        for fit, rows in out.items():
            rows.update(zip(kept, fitted.predicted_rows([pairs[k] for k in kept], fit)))
    return {fit: [rows[k] for k in sorted(rows)] for fit, rows in out.items()}
