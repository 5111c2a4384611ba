"""Prove a rewritten model before it is written: full checker, then stock ORT against the original.

Both models run on ONNX Runtime's CPU provider with no plugin, on the same inputs: the cases
(`Case`), each a set of seeded random inputs at one shape or the user's real inputs, with the
original's outputs computed once. Float outputs must agree within `rtol` relative to the
output's scale (|a - b| <= rtol * max|reference|, elementwise), or within RESOLUTION_STEPS steps of
the grid both tensors' values lie on (`within_resolution`: a Sigmoid's tail resolves 2^-25 absolute,
1e-4 of a score of 3e-4; at most 4.8e-7 absolute); other outputs must be equal. Every float bar
below is that pair: its rtol, or the output's own resolution.

The plugin is held to ORT's execution of the QDQ model as written (`exact_qdq_options`), not to
ORT's default session: at its extended level ORT rewrites DequantizeLinear(8-bit weight) + MatMul
into com.microsoft MatMulNBits, whose default accuracy level 4 quantizes the activations to int8
per block, which the QDQ model does not say (u16 models: 244-1514 steps from it). At accuracy level
1 MatMulNBits computes in f32, and ORT's result equals its run with no graph optimisation at all
(ORT_DISABLE_ALL) on every QuantizeLinear output of the zoo's u16u8 models; ORT's other QDQ fusions
(the 8-bit QLinearConv/QLinearMatMul the kernel follows) stay on. The rewritten model on stock ORT
(the fallback) is compared at ORT's defaults, as an application runs it.

A one-step difference at a pair's output (the f32 op of a 16-bit group summed in another order than
MLAS: an exact rounding tie in ORT's f32) grows through the layers after it, as ORT's own does between
thread counts (fsmn_vad_qdq_u16u8's logits: 10-14 steps apart at 1 and 2 intra-op threads): an end
to end bar on the graph outputs refuses pairs that are right. So the plugin's run of a QDQ model is
decomposed into what the plugin changes (pipeline._check_decomposed), with one more session: the
original with every pair output fed in (`shadow_model`), fed the plugin's values of them. Each pair
output must be within one quantization step of ORT computing the pair's own nodes on the very inputs
the pair saw (1e-4 relative for a float one no QDQ node makes, equal for other integers), and every
graph output ORT's own ops make from the same values must agree at the stock bar (`rtol`; equal for
integers): both sessions run the same nodes at 1 intra-op thread. How far the graph outputs are from
the original's, in steps, is reported, not a bar. Pairs in If branches, whose outputs are not fed in,
keep the end-to-end bar (1e-4, or one step of a quantized graph output). A float model's plugin run
is compared end to end, within 1e-4; beyond it, decomposed as a QDQ model's and within a multiple of
ORT's own spread (`optimisation_spread`, pipeline._within_spread). The outputs of a pair that reads or
makes float16 (and every graph output of a model with one) are held to 4 float16 steps instead
(pipeline.FLOAT16_RTOL): the kernel computes float16 in float32 and rounds once, ORT at every op.
Last, the plugin runs the model as written, no output added, as an application's session does: its
graph outputs must be those of the checked run, at the same bar (pipeline._check_as_applications_run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort

from .errors import ModelError, UsageError, VerificationError, first_line
from .exact_products import make_exact
from .feeds import FULL_RANGE_INTEGERS, MADE_TYPES, random_inputs, session

DEFAULT_RTOL = 1e-5
# A float output is also within its bar when every element is within this many steps of the grid its
# values lie on (`within_resolution`): one ulp more or less in a Sigmoid's input moves MLAS's result
# (and the kernel's, the same steps) up to 7 steps of its 2^-25 grid below 1/2 (200k inputs in
# [-17, -1]), and a logit 1e-4 of itself off (the bar on the logit) moves a score of 3e-4 by 8.
RESOLUTION_STEPS = 8
# The coarsest grid counted (float32's spacing at 1/2, where a Sigmoid rounds): a grid read from a few
# values can be coarser by chance (a factor 2 per trailing zero of each), and exact integers in a
# float tensor (a mask) are no rounding at all: at most 8 x 2^-24 = 4.8e-7 absolute is ever allowed.
COARSEST_GRID = 2.0**-24
# ORT's MatMulNBits that its QDQ transformer makes of DQ(weight) + MatMul computes in f32, not int8
EXACT_QDQ_CONFIG = {"session.qdq_matmulnbits_accuracy_level": "1"}


@dataclass
class Comparison:
    outputs: int
    worst_output: str
    worst_relative_error: float
    shapes: list[str] = field(default_factory=list)  # the cases verified, by their labels
    pairless: float | None = None  # when verified against the rewrite without pairs: its error from the original
    plugin_steps: dict[str, float] | None = None  # QDQ, on the plugin: quantized outputs' steps from the original
    plugin: bool = False  # the FusedHexPair plugin (host backend) was verified too
    plugin_error: float | None = None  # float model, on the plugin: graph outputs' relative error from the original
    plugin_bar: float | None = None  # the bar plugin_error was held to (pipeline.PLUGIN_RTOL or ORT's spread grown)
    ort_spread: float | None = None  # when the bar is ORT's spread grown: optimisation_spread of the original
    ort_steps: dict[str, float] | None = None  # QDQ: stock ORT's (its QDQ fusions) steps from the original as written

    def as_json(self) -> dict:
        """What was verified, as the JSON report and the written model's metadata say it
        (contract.METADATA_VERIFICATION)."""
        return {
            "checker": "full",
            "runtime": "onnxruntime CPU, no plugin",  # what `worst_relative_error` is of
            "plugin_verified": self.plugin,  # --verify plugin: the host backend passed too
            "outputs": self.outputs,
            "worst_relative_error": self.worst_relative_error,
            "shapes": self.shapes,
            "pairless_relative_error": self.pairless,
            "plugin_output_steps": self.plugin_steps,
            "plugin_relative_error": self.plugin_error,  # a float model's graph outputs on the plugin
            "plugin_bar": self.plugin_bar,  # what plugin_relative_error was held to
            "ort_optimisation_spread": self.ort_spread,  # when plugin_bar is a multiple of it
            "ort_output_steps": self.ort_steps,  # stock ORT's own distance from the QDQ model as written
        }


@dataclass
class Case:
    """Inputs the original ran on, and its outputs."""

    label: str  # "x=1x3x128x128" or "--inputs (x=...)"
    feeds: dict[str, np.ndarray]
    names: list[str]
    expected: list[np.ndarray]


def shapes_label(feeds: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{k}={'x'.join(map(str, v.shape)) or 'scalar'}" for k, v in feeds.items())


def run_original(original: ort.InferenceSession, feeds: dict[str, np.ndarray], label: str = "") -> Case:
    """The original's outputs on these inputs; VerificationError (one line) when it fails."""
    names = [o.name for o in original.get_outputs()]
    try:
        expected = original.run(names, feeds)
    except Exception as exc:
        raise VerificationError(first_line(exc, 400)) from None
    return Case(label or shapes_label(feeds), feeds, names, [np.asarray(e) for e in expected])


def load_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    """`--inputs data.npz` or `--inputs NAME:file.npy` (repeatable): graph inputs by name."""
    if len(specs) == 1 and ":" not in specs[0]:
        try:
            with np.load(specs[0]) as data:
                return {k: data[k] for k in data.files}
        except Exception as exc:  # noqa: BLE001 - missing, not an npz, ...
            raise UsageError(f"--inputs {specs[0]}: cannot read it as .npz: {first_line(exc, 400)}") from None
    feeds = {}
    for spec in specs:
        name, sep, path = spec.rpartition(":")
        if not sep or not name:
            raise UsageError(f"bad --inputs '{spec}': expected data.npz or NAME:file.npy")
        try:
            feeds[name] = np.load(path)
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--inputs {spec}: cannot read {path} as .npy: {first_line(exc, 400)}") from None
    return feeds


def check_inputs_match(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> None:
    """--inputs name every graph input and nothing else, each array of the declared type, rank and fixed
    dims (UsageError naming the first that is not): ORT's own refusal comes later and as a model's failure."""
    wanted = [a.name for a in session.get_inputs()]
    missing, unknown = sorted(set(wanted) - set(feeds)), sorted(set(feeds) - set(wanted))
    if missing or unknown:
        what = [f"lacks {', '.join(missing)}"] if missing else []
        what += [f"names no graph input: {', '.join(unknown)}"] if unknown else []
        raise UsageError(f"--inputs {'; '.join(what)} (inputs: {', '.join(wanted)})")
    for arg in session.get_inputs():
        problem = _declared_mismatch(arg, feeds[arg.name])
        if problem:
            raise UsageError(f"--inputs {arg.name}: {problem}")


def _declared_mismatch(arg: ort.NodeArg, value: np.ndarray) -> str:
    """How `value` differs from the graph input ORT declares (`arg`: its type and shape), or ''."""
    short = arg.type.removeprefix("tensor(").removesuffix(")")
    if short in MADE_TYPES and np.asarray(value).dtype != np.dtype(MADE_TYPES[short]):
        return f"is {np.asarray(value).dtype}, the model takes {np.dtype(MADE_TYPES[short]).name}"
    shape, declared = np.shape(value), arg.shape or []
    dims = "x".join(str(d) if isinstance(d, int) and d >= 0 else "?" for d in declared) or "a scalar"
    if len(shape) != len(declared):
        return f"has rank {len(shape)} ({'x'.join(map(str, shape))}), the model declares {dims}"
    for axis, (got, want) in enumerate(zip(shape, declared)):
        if isinstance(want, int) and want >= 0 and got != want:
            return f"is {'x'.join(map(str, shape))}, the model declares {dims} (dim {axis} is {want})"
    return ""


def check(path: str | os.PathLike[str]) -> None:
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:
        raise VerificationError(f"rewritten model fails onnx.checker (full check): {first_line(exc, 400)}") from None


def _input_types(model: onnx.ModelProto) -> dict[str, str]:
    """The graph inputs' tensor types as ONNX Runtime names them without `tensor()`: 'float', 'string'."""
    inits = {t.name for t in model.graph.initializer}
    return {
        v.name: onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower()
        for v in model.graph.input
        if v.name not in inits and v.type.tensor_type.elem_type
    }


def integer_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs random_inputs gives 0 or 1: integers other than 8- or 16-bit ones, and bools."""
    full_range = {np.dtype(t).name for t in FULL_RANGE_INTEGERS}
    zero_one = {t for t, dtype in MADE_TYPES.items() if np.dtype(dtype).kind in "iub" and t not in full_range}
    return [name for name, t in _input_types(model).items() if t in zero_one]


def unmade_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs random_inputs cannot make (a string, a complex number): `'phs' (tensor(string))`."""
    return [f"'{name}' (tensor({t}))" for name, t in _input_types(model).items() if t not in MADE_TYPES]


def random_integer_note(model: onnx.ModelProto) -> str:
    """Why random inputs may be the cause when a model fails on them: its integer inputs get 0 or 1
    (a sample rate, a token id, a length), which '' when it has none."""
    names = integer_inputs(model)
    if not names:
        return ""
    return (
        f"; its integer input(s) {', '.join(repr(n) for n in names)} get random 0 or 1, which may be the cause: "
        "give real ones with --inputs NAME:file.npy"
    )


def exact_qdq_options(so: ort.SessionOptions | None = None) -> ort.SessionOptions:
    """`so` (or new options) with EXACT_QDQ_CONFIG: ORT computes a QDQ model as it is written."""
    so = so or ort.SessionOptions()
    for key, value in EXACT_QDQ_CONFIG.items():
        so.add_session_config_entry(key, value)
    return so


def compare(
    original: str | os.PathLike[str],
    rewritten: str | os.PathLike[str],
    shape_overrides: dict[str, list[int]] | None = None,
    rtol: float = DEFAULT_RTOL,
    rewritten_options: ort.SessionOptions | None = None,
    seed: int = 0,
    exact: bool = False,
) -> Comparison:
    """Run both on stock ORT with the same inputs; raise VerificationError on any mismatch, and
    ModelError when the original itself fails to run on the inputs (exit 3). `exact`: both with the
    integer products this host's ORT saturates made exact (`exact_copy`), as the plugin's kernel
    computes them: the plugin's reference."""
    ref_model: str | os.PathLike[str] | bytes = exact_copy(original).SerializeToString() if exact else original
    new_model = exact_copy(rewritten) if exact else rewritten
    try:
        ref_session = session(ref_model)
    except Exception as exc:
        raise VerificationError(f"the original model does not run on ONNX Runtime: {first_line(exc, 400)}") from None
    try:
        case = run_original(ref_session, random_inputs(ref_session, shape_overrides, seed))
    except VerificationError as exc:  # the input (or its --shape values) is at fault, not the rewrite
        raise ModelError(
            f"{original}: the original model fails to run on ONNX Runtime with the test inputs "
            f"(are the --shape values consistent?): {exc.message}"
        ) from None
    return compare_cases(new_model, [case], rtol, rewritten_options)


def exact_copy(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """The model at `path` with the integer products this host's ORT saturates made exact
    (exact_products.make_exact: the same values); the file is not changed."""
    model = onnx.load(str(path))
    make_exact(model)
    return model


def compare_cases(
    rewritten: str | os.PathLike[str] | onnx.ModelProto,
    cases: list[Case],
    rtol: float = DEFAULT_RTOL,
    rewritten_options: ort.SessionOptions | None = None,
    steps: dict[str, float] | None = None,
) -> Comparison:
    """Run the rewritten model on every case; raise VerificationError (naming the case's shapes
    when there are several) on any mismatch. An output in `steps` (a QDQ model's quantized
    output: qdq.output_steps) may also differ by up to that one quantization step."""
    return compare_runs(run_cases(rewritten, cases, rewritten_options), cases, rtol, steps)


@dataclass
class Run:
    """The rewritten model's values on one case: its graph outputs (in the case's order) and the
    tensors it makes inside that were asked for (`run_cases`)."""

    outputs: list[np.ndarray]
    inner: dict[str, np.ndarray]


def run_cases(
    rewritten: str | os.PathLike[str] | onnx.ModelProto,
    cases: list[Case],
    rewritten_options: ort.SessionOptions | None = None,
    inner: list[str] | None = None,
) -> list[Run]:
    """The rewritten model's values on every case from one session, the tensors `inner` it makes
    inside (a QDQ pair's outputs) added as graph outputs. ORT removes or fuses no node whose output
    is a graph output, and the tensors asked for are FusedHexPair outputs, which it fuses with
    nothing: the graph outputs are those of the model as written (captcha_crnn u16u8's first 10
    pairs: bit for bit). A session of the whole model costs more than its runs, so one serves both."""
    inner = list(dict.fromkeys(inner or []))
    loaded = rewritten if isinstance(rewritten, onnx.ModelProto) else onnx.load(str(rewritten)) if inner else None
    model: str | bytes = with_outputs(loaded, inner) if loaded is not None else str(rewritten)
    try:
        new_session = session(model, rewritten_options)
    except Exception as exc:
        raise VerificationError(f"the rewritten model does not load in ONNX Runtime: {first_line(exc, 400)}") from None
    runs = []
    for case in cases:
        names = list(dict.fromkeys(case.names + inner))
        try:
            got = dict(zip(names, new_session.run(names, case.feeds)))
        except Exception as exc:
            raise VerificationError(
                f"the rewritten model fails to run{_where(case, cases)}: {first_line(exc, 400)}"
            ) from None
        runs.append(Run([np.asarray(got[n]) for n in case.names], {n: np.asarray(got[n]) for n in inner}))
    return runs


def _where(case: Case, cases: list[Case]) -> str:
    """ " at <shapes>" naming the case in a message, when there are several to tell apart."""
    return f" at {case.label}" if len(cases) > 1 else ""


def compare_runs(
    runs: list[Run], cases: list[Case], rtol: float = DEFAULT_RTOL, steps: dict[str, float] | None = None
) -> Comparison:
    """The graph outputs of `runs` (run_cases) against the cases' expected ones, as compare_cases."""
    worst = ("", 0.0)
    for case, run in zip(cases, runs):
        for name, ref, out in zip(case.names, case.expected, run.outputs):
            err = _output_error(name, ref, out, rtol, _where(case, cases), (steps or {}).get(name, 0.0))
            worst = max(worst, (name, err), key=lambda w: w[1])
    return Comparison(len(cases[0].names), worst[0], worst[1], [c.label for c in cases])


def inner_values(
    original: str | os.PathLike[str] | onnx.ModelProto,
    names: list[str],
    cases: list[Case],
    options: ort.SessionOptions | None = None,
) -> dict[str, list[np.ndarray]]:
    """The original's values of the tensors `names` it makes inside, on every case (one session)."""
    model = original if isinstance(original, onnx.ModelProto) else onnx.load(str(original))
    ref_session = session(with_outputs(model, names), options)
    inputs = {i.name for i in ref_session.get_inputs()}
    runs = [ref_session.run(names, {k: v for k, v in c.feeds.items() if k in inputs}) for c in cases]
    return {name: [np.asarray(run[k]) for run in runs] for k, name in enumerate(names)}


def compare_inner(expected: dict[str, list[np.ndarray]], runs: list[Run], names: list[str], cases: list[Case]) -> None:
    """Integer tensors both models make inside (a QDQ pair's outputs) within one step of the
    original's (`expected`: inner_values) on every case (`runs`: run_cases with them): raise
    VerificationError naming the first beyond it."""
    for k, name, ref, out in _inner_outputs(expected, runs, names):
        steps = float(np.abs(np.asarray(out, np.float64) - np.asarray(ref, np.float64)).max(initial=0.0))
        if steps > 1:
            raise VerificationError(
                f"pair output '{name}'{_where(cases[k], cases)} is {steps:.0f} quantization steps from the original's"
            )


def _inner_outputs(
    expected: dict[str, list[np.ndarray]], runs: list[Run], names: list[str]
) -> Iterator[tuple[int, str, np.ndarray, np.ndarray]]:
    """(case index, name, original's value, rewritten's value) of the inner tensors `names`, case by case."""
    for k, run in enumerate(runs):
        for name in names:
            yield k, name, np.asarray(expected[name][k]), run.inner[name]


SHADOW_SUFFIX = "__ort"  # ORT's own value of a pair output in the shadow model (`shadow_model`)


def shadow_model(model: onnx.ModelProto, made: list[str], dtypes: dict[str, np.dtype]) -> tuple[bytes, dict[str, str]]:
    """The original `model` with each tensor of `made` (pair outputs: pipeline's `_pair_outputs`)
    renamed at its producer, and the tensor itself a graph input (typed from `dtypes`, by name, its
    shape left open): its readers, in the main graph or in an If/Loop body through the outer
    scope, read what it is fed. Its outputs: the other graph outputs, then each renamed tensor. Fed
    the plugin's values of `made`, it runs every node a pair does not replace on the values they
    read in the plugin's run. Returns the model serialized and the renamed tensor of each of `made`."""
    g = model.graph
    names = {t for n in g.node for t in [*n.input, *n.output]} | {v.name for v in g.input}
    suffix = SHADOW_SUFFIX
    while any(t + suffix in names for t in made):
        suffix += "_"
    renamed = {t: t + suffix for t in made}
    produced: set[str] = set()
    for n in g.node:
        produced.update(t for t in n.output if t in renamed)
        n.output[:] = [renamed.get(t, t) for t in n.output]
    missing = [t for t in made if t not in produced]
    if missing:
        raise VerificationError(f"the original makes no tensor '{missing[0]}' in its main graph (a pair output)")
    for v in g.value_info:
        v.name = renamed.get(v.name, v.name)
    elem = {t: onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtypes[t])) for t in made}
    g.input.extend(onnx.helper.make_tensor_value_info(t, elem[t], None) for t in made)
    outputs = [o for o in g.output if o.name not in renamed]
    del g.output[:]
    g.output.extend(outputs)
    g.output.extend(onnx.ValueInfoProto(name=r) for r in renamed.values())
    return model.SerializeToString(), renamed


def unoptimised_options() -> ort.SessionOptions:
    """ORT computing a model as written: no graph optimisation (fusions, layouts, kernels chosen by shape)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def optimisation_spread(original: str | os.PathLike[str], cases: list[Case]) -> float:
    """The largest relative error of the original's float outputs with ONNX Runtime's graph
    optimisations off against the cases' (made with them on): how far the model carries a
    rounding difference of ORT's own."""
    plain = session(original, unoptimised_options())
    worst = 0.0
    for case in cases:
        for ref, out in zip(case.expected, plain.run(case.names, case.feeds)):
            if ref.dtype.kind == "f":
                err = relative_error(ref, np.asarray(out))
                worst = max(worst, err if err == err else float("inf"))
    return worst


def with_outputs(model: onnx.ModelProto, names: list[str]) -> bytes:
    """The model serialized with these tensors added as graph outputs (ORT infers their types);
    `model` is left as it was (the outputs are removed again, not added to a copy of its weights)."""
    have = {o.name for o in model.graph.output}
    count = len(model.graph.output)
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
    try:
        return model.SerializeToString()
    finally:
        del model.graph.output[count:]


def _output_error(name: str, ref: np.ndarray, out: np.ndarray, rtol: float, where: str, step: float = 0.0) -> float:
    if ref.shape != out.shape:
        raise VerificationError(
            f"output '{name}'{where}: shape {list(out.shape)} differs from the original's {list(ref.shape)}"
        )
    if np.issubdtype(ref.dtype, np.floating):
        err = relative_error(ref, out)
        if not err <= rtol and not within_step(ref, out, step) and not within_resolution(ref, out):  # NaN too
            worst = float(np.nanmax(np.abs(np.asarray(out, np.float64) - np.asarray(ref, np.float64)), initial=0.0))
            beyond = f"one quantization step or ORT's own spread ({step:.3g})"
            steps = f", and {worst:.3g} absolute > {beyond}" if step else ""
            raise VerificationError(
                f"output '{name}'{where} differs from the original: relative error {err:.3g} > {rtol:g}{steps}"
            )
        return err
    if not np.array_equal(ref, out) and not within_step(ref, out, step):
        raise VerificationError(f"output '{name}'{where} differs from the original")
    return 0.0


def within_step(ref: np.ndarray, out: np.ndarray, step: float) -> bool:
    """Every element within `step`, plus the float rounding of the two dequantized values (one
    ulp of each: a u16 step of a softmax, 1.5e-5, is 1.0001 steps apart at 0.023 in f32); False
    where the NaNs differ or without a step."""
    if step <= 0:
        return False
    rounding: np.ndarray | float = 0.0
    if ref.dtype.kind == "f":
        if not np.array_equal(np.isnan(ref), np.isnan(out)):
            return False
        rounding = np.nan_to_num(np.spacing(np.abs(ref)) + np.spacing(np.abs(out)).astype(ref.dtype))
    diff = np.nan_to_num(np.abs(out.astype(np.float64) - ref.astype(np.float64)))
    return bool(np.all(diff <= step * (1 + 1e-5) + rounding))


def within_resolution(ref: np.ndarray, out: np.ndarray) -> bool:
    """Every element within RESOLUTION_STEPS steps of the grid both tensors' values lie on
    (`resolution`); False where the NaNs differ or no value is nonzero. A bar of the output's own
    resolution beside the relative one: it matters only where the grid is coarser than rtol of the
    output's scale, a Sigmoid's tail (below)."""
    if not np.array_equal(np.isnan(ref), np.isnan(out)):
        return False
    mask = ~np.isnan(ref) & (ref != out)
    if not mask.any():
        return True
    diff = float(np.max(np.abs(out[mask].astype(np.float64) - ref[mask].astype(np.float64))))
    return diff <= RESOLUTION_STEPS * resolution(ref, out)


def resolution(ref: np.ndarray, out: np.ndarray) -> float:
    """The spacing of the grid every finite nonzero value of both tensors lies on (the largest power
    of two dividing them all), at most COARSEST_GRID; 0 when they hold no such value. A tensor's
    values usually resolve their own float spacing, and this is about that of the smallest of them;
    a Sigmoid's below 1/2 resolve 2^-25 whatever their size (MLAS and the kernel, hfx_sigmoid, round
    0.5 + x p / q, |x p / q| in [1/4, 1/2)): a score of 3e-4 one step off is 1e-4 of itself off."""
    values = np.concatenate([np.ravel(ref), np.ravel(out)]).astype(np.float64)
    values = values[np.isfinite(values) & (values != 0)]
    if not values.size:
        return 0.0
    fraction, exponent = np.frexp(values)  # value = fraction 2^exponent, fraction 2^53 an integer
    mantissa = np.abs(fraction * 2.0**53).astype(np.int64)
    lowest = np.ldexp((mantissa & -mantissa).astype(np.float64), exponent - 53)
    return min(float(lowest.min()), COARSEST_GRID)


def relative_error(ref: np.ndarray, out: np.ndarray) -> float:
    """max|out - ref| / max|ref| (0 when both are all zero); NaN where they disagree on NaN."""
    if ref.size == 0:
        return 0.0
    if not np.array_equal(np.isnan(ref), np.isnan(out)):
        return float("nan")
    mask = ~np.isnan(ref) & (ref != out)  # equal values (equal infinities too) differ by nothing
    if not mask.any():
        return 0.0
    finite = np.isfinite(ref)
    scale = float(np.max(np.abs(ref[finite]))) if finite.any() else 0.0
    diff = float(np.max(np.abs(out[mask].astype(np.float64) - ref[mask])))
    return diff / scale if scale > 0 else diff
