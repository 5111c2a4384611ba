"""Calibrate the host cost model from ONNX Runtime profiling, and measure its prediction error.

    result = calibrate(["a.onnx", "b.onnx"], progress=print)
    result.ort_target               # "host-ort-fit": fit to ORT profiling
    result.kernel_target            # "host-kernel-fit": fit to the kernel's own item times
    result.chosen_median_abs_error  # the headline: the chosen fit's held-out median |predicted/measured - 1|
    result.held_out_error("kernel")  # each fit's fused-call error, every model predicted by fits without it
    result.median_abs_error         # ORT fit, in-sample (fitted and checked on the same models)
    result.target                   # "host-calibrated": the fit with the lower held-out error (result.chosen_fit)

Every time measured over repeated runs is summarised by its lower quartile (`over_runs`,
RUN_QUANTILE), not its median: on a shared machine another process's preemption makes a run
slower, never faster, and the longer the call the likelier it is preempted.

1. Per-op times: each model runs on stock ORT (one intra-op thread, sequential, no graph
   optimisation so every node runs as written) with the ORT profiler on; the profile's node
   events of the runs after warm-up are matched to the graph's NodeProfile by node name. Every
   node runs on the calling thread, so its run delay read around each run (/proc schedstat) is the
   time other processes took from that run; it comes off the nodes it lengthened (those slower
   than in their fastest run, `without_run_delay`), as the fused call's measured time is its wall
   time less its preemption (a nice-19 run beside a benchmark is preempted for most of a
   millisecond op: mlp_chain's MatMuls profiled 11 ms at the lower quartile, 2.3 ms less it). The
   runs come in blocks that alternate with the plugin's runs of step 3 and go round all the
   models (`measure_models`), so that every measurement sees the shared machine alike; the pairs
   are those the pass makes for the base target (every lowerable pair kept).
2. Fit: the cost model of one op is op_overhead + max(work / rate (+ matrix_op_s for each matrix a
   matrix op multiplies: a GEMM call's fixed time), DDR bytes / DDR bandwidth), work being the FLOPs
   of matrix and vector ops and the bytes of memory ops, the rate its op class's
   (costmodel.OP_CLASSES: conv, pool, transpose, transcendental) or its engine's; a fused op
   (attention) is the program ops it runs (`NodeProfile.parts`), each with its overhead, work and
   rate, as the cost model runs it. The fit alternates between assigning each op to its binding
   resource and one linear least-squares fit of that assignment (numpy.linalg.lstsq, rows weighted
   by 1/time: relative error; the kernel fit of 4. by 1/the time of the op's pair), which gives the
   shared overhead, a GEMM call's fixed time, one rate per engine and op class, and the DDR
   bandwidth. It starts with every op engine-bound; the bandwidth never falls below the largest a
   work-dominated op reached.
3. Prediction error: each model is rewritten for the calibrated target with every lowerable
   pair kept (min_gain below any real loss), and run with the FusedHexPair plugin and the kernel
   trace: each call's hfx_run wall time less the time other processes took from it (the measured
   fused time: the mean over the threads that ran its items of their time runnable but not running,
   Linux's run delay from /proc schedstat, which the kernel reads per worker around the timed call;
   under sustained load every run of a long call is preempted, so no statistic of the wall times
   recovers it) and its work-item span come
   from the same runs (measuring them in separate runs let the VM's speed, which drifts from
   minute to minute, into the error). The fused prediction runs the fitted rates on the kernel's
   schedule (`on_the_kernel`): ORT's per-node overhead is replaced by the kernel's measured time
   between a task's items per op, and the host pool's workers take each other's items
   (costmodel's `general_workers`, an op on as many workers as its items allow); how much of the
   second worker a call got is measured from the same traces, on the pairs whose program had work
   for two (on a loaded 2-vCPU VM often little), and how long into a call that woke the pool the
   other workers took their first item (`join_s`: the caller runs alone until then; a call that
   finds them spinning has them at once). The per-call cost outside the work items is the
   wake-up of the pool: its workers spin POOL_SPIN_S after their last item, then sleep, so a call
   that comes later pays it before its first item and one right after another does not; both are
   measured (call time - work-item span, the median of each kind of call) on the two pairs in
   series of a probe model that is in no measured model but measured with them (the first
   called after the run before, the second right after it; a worker just past its spin is still on
   its way to sleep and costs about half a wake-up: WAKE_REGIMES). The predicted time of a call in
   a regime is costmodel.predict(...).fused at the share the plugin used (with the join delay
   unless the workers were spinning) plus that regime's overhead, and a pair's predicted call is
   the one at RUN_QUANTILE of its calls' regimes, as its measured call is their RUN_QUANTILE
   (`at_run_quantile`: a mean over the regimes made a 6 us pair whose calls were 40% cold 10 us,
   +47%, where its lower quartile, a warm call, took 6 us). The serial
   prediction (ORT's one thread, the fit as profiled) is compared with the ORT-profiled time of
   the pair's original nodes.
4. A second fit, to the kernel's own item times: the plugin's host kernels are not ORT's (its
   Conv, pooling and small GEMMs are slower), so rates fitted to ORT can mispredict it. The
   traced runs of step 3 give, per call, every work item's program op and duration; the sum of
   an op's item durations (worker time: an op cut into items run by both workers counts both),
   averaged over the runs at the quantile of the call's summed item time (so that a pair's per-op
   times add up to its work `over_runs`: `op_seconds_at_quantile`), is attributed to the graph node
   the op was lowered from
   (`lowering.program_op_nodes`; both micro-batch copies of a chain node add up to that node).
   Those per-node times, with the same one-op NodeProfiles as the ORT fit, go through the same
   `fit_target`, and the fit predicts the same measured calls (same share, same call overhead).
   In-sample, this fit is checked on the very runs it was fitted to (held out, 5., it is not). Item times leave out
   the kernel's time between items (dispatch, the barrier between ops, waiting for a worker:
   the `kernel_gap_per_op_s` column), so the measured median gap per op is added to its op
   overhead. Its ops' DDR bytes are counted in the pair's tasks, as the prediction counts them.
   Unfused, a pair's nodes run on stock ORT: the kernel fit carries the ORT fit as its
   `baseline`, which predicts its serial times.
5. The error reported is held out (`held_out_rows`): leave one model out, fit both targets to the
   other models' ORT-profiled ops, kernel item times and traced calls (the kernel's gap per op,
   its pool's workers and join), with the probe's call overheads, and predict the left-out model's pairs; the
   median |error| over all pairs is the headline. What a held-out prediction takes from its own
   pair is its schedule, not its times: the share the plugin ran it at and how long the pool had
   been idle before each call (which wake-up it paid). The in-sample errors are shown beside it.
   `-o` writes the fit (to every model) with the lower held-out median fused-call error as
   "host-calibrated" and says which.

The steps live in `tools/calibration/`: `ort_profile` (1), `kernel_trace` and `measure` (the
plugin's traced runs and each pair's measurement, alternating with 1), `fitting` (2), `schedule`
(the kernel's schedule and call overhead of 3), `held_out` (both fits, 4 and 5), `report` (the
result, its JSON and tables), `records` (what they pass each other). This module runs them.

Run it as `python -m hexfuse_onnx calibrate [-o FILE] [--table] [MODEL ...]` (the zoo when no
model is given); the CLI re-executes itself without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE first.
`--target FILE.json` of rewrite/inspect uses the written target. `benchmarks/results.py` runs the
same command and puts its output on docs/RESULTS.md. Timings are noisy on a shared 2-core VM:
nothing here asserts an error bound.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import onnx

from .. import costmodel
from ..costmodel import Target
from .calibration import DEFAULT_RUNS, DEFAULT_WARMUP
from .calibration.fitting import CALIBRATED_NAME, KERNEL_FIT, ORT_FIT
from .calibration.held_out import FittedTargets, fit_targets, held_out_rows
from .calibration.measure import PROBE_NAME, measure_models, wake_probe_model
from .calibration.records import OpTiming, PairMeasurement, PairRow, Progress, quiet
from .calibration.report import CalibrationResult, where_measured
from .calibration.schedule import probe_leads


def calibrate(
    model_paths: Sequence[str | os.PathLike[str]],
    progress: Progress = quiet,
    runs: int = DEFAULT_RUNS,
    warmup: int = DEFAULT_WARMUP,
    base: Target = costmodel.HOST,
) -> CalibrationResult:
    """Fit a host target to the models' ORT-profiled ops and a second to the kernel's own per-op
    item times of their pairs on the plugin, measure both fits' fused and serial prediction error
    on those pairs held out (leave one model out) and in-sample (see the module doc). The fit with
    the lower held-out error is registered as CALIBRATED_NAME."""
    where = where_measured()
    all_ops: list[OpTiming] = []
    pairs: list[PairMeasurement] = []
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        probe_path = Path(folder) / f"{PROBE_NAME}.onnx"
        onnx.save(wake_probe_model(), probe_path)
        *measured, (_, _, probe) = measure_models([*model_paths, probe_path], base, Path(folder), runs, warmup)
    for path, (_, ops, model_pairs) in zip(model_paths, measured):
        progress(f"{Path(path).name}: {len(ops)} op(s) profiled on ORT, {len(model_pairs)} pair(s) on the plugin")
        all_ops += ops
        pairs += model_pairs
    leads = probe_leads([m.row for m in probe], progress)
    fitted = fit_targets(all_ops, pairs, base, where, progress, leads)
    result = _result(fitted, pairs, where, held_out_rows(all_ops, pairs, base, where, leads))
    for t in (result.ort_target, result.kernel_target, result.target):
        if t is not None:
            costmodel.register_target(t)
    return result


def _result(
    fitted: FittedTargets, pairs: list[PairMeasurement], where: str, held_out: dict[str, list[PairRow]]
) -> CalibrationResult:
    """Both fits' rows and predictions of `pairs`, the chosen fit as CALIBRATED_NAME."""
    result = CalibrationResult(
        fitted.ort_target,
        fitted.ort_fit.rows,
        fitted.predicted_rows(pairs, ORT_FIT),
        where,
        fitted.ort_fit.ddr_bound,
        ort_target=fitted.ort_target,
        kernel_target=fitted.kernel_target,
        kernel_fit_rows=fitted.kernel_fit.rows if fitted.kernel_fit else [],
        kernel_pair_rows=fitted.predicted_rows(pairs, KERNEL_FIT),
        kernel_ddr_bound=fitted.kernel_fit.ddr_bound if fitted.kernel_fit else [],
        unmodelled_kernel_s={f"{m.row.model}:{m.row.node}": m.unmodelled_s for m in pairs},
        held_out=held_out,
    )
    result.choose()
    chosen = fitted.target(result.chosen_fit)
    assert chosen is not None
    result.target = replace(
        chosen,
        name=CALIBRATED_NAME,
        description=f"{chosen.description}; chosen over the other fit: {result.choice_note}",
    )
    return result


def calibrate_zoo(
    folder: Path, progress: Progress = quiet, runs: int = DEFAULT_RUNS, warmup: int = DEFAULT_WARMUP
) -> CalibrationResult:
    """`calibrate` on every zoo builder, written into `folder`; where the zoo is not here (an installed
    package: `models/` ships with the source tree), a UsageError asking for models."""
    from ..errors import UsageError
    from .zoo import models_package, resolve

    try:
        builders = models_package().BUILDERS
    except UsageError as exc:
        raise UsageError(
            f"calibrate without models runs the zoo's builders, and {exc.args[0].split(':')[0]}: give the models "
            "to calibrate on (`calibrate model.onnx [more.onnx ...] -o host.json`; pairs of two models or more "
            "give a held-out error), or run from a hexfuse-onnx checkout"
        ) from None
    return calibrate([resolve(name, folder)[0] for name in builders], progress, runs, warmup)
