"""Command line: `python -m hexfuse_onnx rewrite|inspect|unfuse|profile|zoo|bench|calibrate|emulate|tune|colocate ...`.

Exit codes: 0 done (also when no pair qualifies or none survives verification), 2 bad command line,
3 bad input model, 4 verification failed (nothing written), 5 output not writable, 70 internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import __version__
from .costmodel import TARGETS
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, HexfuseError, NothingToFuse, stdout_closed
from .graph import parse_shape_overrides, read_model
from .hybrid import DEFAULT_PAST, DEFAULT_PREFILL, DEFAULT_PREFILL_PAST
from .kinds import KINDS
from .modelio import check_output_folder
from .select import DEFAULT_MIN_GAIN
from .tools import calibration as calibrate_defaults
from .tools import tune as tune_defaults
from .tools.bench import BASELINES, DEFAULT_BASELINES
from .verify import DEFAULT_RTOL

EPILOG = (
    "exit codes: 0 ok (also when no pair qualifies or none survives verification), 2 bad command line, "
    "3 bad input model, 4 verification failed (nothing written), 5 output not writable, 70 internal error"
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hexfuse-onnx", description="Horizontal fusion of ONNX models for Hexagon NPUs.", epilog=EPILOG
    )
    p.add_argument("--version", action="version", version=f"hexfuse-onnx {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("model", help="input .onnx file (never modified), or a zoo model's name")
        sp.add_argument(
            "--kinds",
            default=",".join(KINDS),
            help=f"pair kinds to look for, comma-separated (default: {','.join(KINDS)})",
        )
        sp.add_argument(
            "--target",
            default="hexagon-v73",
            type=_target,
            help=f"cost-model target: {', '.join(sorted(TARGETS))}, or a target JSON written by "
            "`calibrate -o` (default: hexagon-v73, modelled)",
        )
        sp.add_argument(
            "--min-gain",
            type=float,
            default=DEFAULT_MIN_GAIN,
            help=f"smallest predicted gain, a fraction of the serial time (default {DEFAULT_MIN_GAIN})",
        )
        sp.add_argument(
            "--shape",
            action="append",
            metavar="NAME=DxDxD",
            help="the shape to analyse and verify at, e.g. input_ids=1x128 (repeatable); symbolic dims stay "
            "symbolic in the written model unless --freeze-shapes",
        )
        sp.add_argument("--json", metavar="REPORT", help="also write a JSON report here")
        sp.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    rw = sub.add_parser("rewrite", help="fuse pairs, verify, and write the model", epilog=EPILOG)
    common(rw)
    rw.add_argument("-o", "--output", help="output .onnx (default: IN.fused.onnx beside the input)")
    rw.add_argument(
        "--verify",
        choices=("ort", "plugin"),
        default="ort",
        help="ort: stock ONNX Runtime must match (default); plugin: also with the FusedHexPair "
        "plugin loaded (host backend), within 1e-4 or 8 steps of an output's value grid (a QDQ model's "
        "quantized outputs: one step)",
    )
    rw.add_argument(
        "--rtol",
        type=float,
        default=DEFAULT_RTOL,
        help=f"verification tolerance, relative to each output's scale (default {DEFAULT_RTOL:g})",
    )
    rw.add_argument(
        "--freeze-shapes",
        action="store_true",
        help="write the input shapes analysed at (--shape, else the --inputs', else the defaults) into the model",
    )
    rw.add_argument(
        "--inputs",
        action="append",
        metavar="NPZ|NAME:NPY",
        help="real graph inputs to verify on: data.npz, or NAME:file.npy (repeatable); without --shape, "
        "their shapes are the ones analysed at (default: seeded random inputs; for a zoo model whose entry "
        "fixes control inputs, a speed, those set as its users set them)",
    )

    ins = sub.add_parser(
        "inspect",
        help="print the candidate pairs: those chosen with their figures, the rest with why; writes nothing but --json",
        epilog=EPILOG,
    )
    common(ins)
    ins.add_argument(
        "--freeze-shapes",
        action="store_true",
        help="analyse as rewrite --freeze-shapes does: input dims fixed, the shape arithmetic they decide folded",
    )
    ins.add_argument(
        "--inputs",
        action="append",
        metavar="NPZ|NAME:NPY",
        help="real graph inputs as rewrite takes them: without --shape, their shapes are the ones analysed at "
        "(where random inputs do not run the model: a sample rate, a token id)",
    )

    pr = sub.add_parser("profile", help="run a model on the plugin and write its engine timeline", epilog=EPILOG)
    pr.add_argument(
        "model", help="a rewritten model (an original one or a zoo name is rewritten first, into a temporary file)"
    )
    pr.add_argument("-o", "--output", required=True, help="Chrome-trace/Perfetto JSON to write")
    pr.add_argument("--png", help="also draw the timeline into this PNG (needs the timeline extra: matplotlib)")
    pr.add_argument("--runs", type=int, default=10, help="runs before the recorded one (default 10)")
    pr.add_argument("--workers", type=int, help="vector workers of the kernel's pool")
    pr.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    zo = sub.add_parser("zoo", help="list the zoo models (builders and real models) and their status", epilog=EPILOG)
    zo.add_argument(
        "--analyse",
        action="store_true",
        help="also run the analysis on every available model: pairs found by kind, predicted gain",
    )
    zo.add_argument("--target", default="hexagon-v73", type=_target, help="cost-model target of --analyse")
    zo.add_argument("--cache-dir", help="real-model cache (default $HEXFUSE_REAL_CACHE or ~/.cache/hexfuse-onnx/real)")

    be = sub.add_parser(
        "bench", help="time the original on ORT (and QNN) against the rewritten model on the plugin", epilog=EPILOG
    )
    be.add_argument("model", help="a .onnx file (rewritten first when it has no FusedHexPair) or a zoo name")
    be.add_argument(
        "--backend", default="host", choices=("auto", "host", "hexagon"), help="the plugin's backend (default host)"
    )
    be.add_argument(
        "--baseline",
        default=",".join(DEFAULT_BASELINES),
        help=f"comma-separated, from {','.join(BASELINES)} (default {','.join(DEFAULT_BASELINES)})",
    )
    be.add_argument("--runs", type=int, default=50, help="timed runs per configuration (default 50)")
    be.add_argument("--rounds", type=int, default=5, help="alternating rounds the runs are spread over (default 5)")
    be.add_argument("--warmup", type=int, default=3, help="untimed runs before each block (default 3)")
    be.add_argument("--workers", type=int, help="vector workers of the kernel's pool")
    be.add_argument(
        "--target",
        type=_target,
        help="cost-model target of the rewrite (default: a co-located model's own target, else hexagon-v73)",
    )
    be.add_argument("--shape", action="append", metavar="NAME=DxDxD", help="fix a graph input's dims (repeatable)")
    be.add_argument("--cache-dir", help="real-model cache (default $HEXFUSE_REAL_CACHE or ~/.cache/hexfuse-onnx/real)")
    be.add_argument(
        "--tol",
        type=float,
        default=None,
        help="largest relative error of the plugin against ort-seq (default 1e-4, or a real model's "
        "documented plugin_rtol; a float output may also be within 8 steps of its values' grid, a QDQ "
        "model's quantized output one step off)",
    )
    be.add_argument("--json", metavar="REPORT", help="also write every figure (raw samples too) here")
    be.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    ca = sub.add_parser(
        "calibrate",
        help="fit the host cost model to ORT profiling and to the kernel's own item "
        "times; measure both fits' fused-call error against the plugin",
        epilog=EPILOG,
    )
    ca.add_argument("models", nargs="*", help="models or zoo names to calibrate on (default: every zoo builder)")
    ca.add_argument("-o", "--output", help="write the result JSON (use it with --target FILE of rewrite/inspect)")
    ca.add_argument(
        "--runs",
        type=int,
        default=calibrate_defaults.DEFAULT_RUNS,
        help="profiled and traced runs per model after warm-up (default %(default)s)",
    )
    ca.add_argument(
        "--warmup",
        type=int,
        default=calibrate_defaults.DEFAULT_WARMUP,
        help="untimed runs first (default %(default)s)",
    )
    ca.add_argument("--table", action="store_true", help="also print the parameter tables (markdown)")
    ca.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    em = sub.add_parser(
        "emulate",
        help="run every FusedHexPair under qemu-hexagon on the model's real tensors; compare with the host kernel",
        epilog=EPILOG + "; emulate: 4 an output differs from the host kernel beyond the tolerance, "
        "2 also when qemu-hexagon or the Hexagon image is missing; a pair in an If branch the inputs do not take "
        "is listed as not reached (exit 0 when every reached pair passes)",
    )
    em.add_argument("model", help="a model written by `rewrite`")
    em.add_argument("--arch", default="v73", choices=("v67", "v73"), help="Hexagon image to run (default v73)")
    em.add_argument("--inputs", metavar="NPZ", help="graph inputs by name (default: seeded random inputs)")
    em.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    em.add_argument(
        "--rtol",
        type=float,
        default=1e-4,
        help="float outputs: largest max|emulated - host| / max|host| (default 1e-4); integer outputs must be equal",
    )
    em.add_argument("--build-root", help="where dsp/scripts/build_hexagon.sh wrote the images (default <repo>/build)")
    em.add_argument("--json", metavar="REPORT", help="also write every figure here")
    em.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    tu = sub.add_parser(
        "tune",
        help="time each FusedHexPair fused (over a sweep of shares) against unfused on this machine; keep the "
        "winners at their best share, unfuse the rest, and record the figures in the model",
        epilog=EPILOG,
    )
    tu.add_argument("model", help="a model written by `rewrite` (never modified)")
    tu.add_argument("-o", "--output", required=True, help="the tuned .onnx to write")
    tu.add_argument(
        "--backend", default="host", choices=("host", "hexagon"), help="the backend to tune for (default host)"
    )
    tu.add_argument(
        "--runs",
        type=int,
        default=tune_defaults.DEFAULT_RUNS,
        help="runs x rounds interleaved rounds, each timing every configuration once, in this process; the "
        "spread is measured across them (default %(default)s)",
    )
    tu.add_argument(
        "--rounds",
        type=int,
        default=tune_defaults.DEFAULT_ROUNDS,
        help="see --runs (default %(default)s)",
    )
    tu.add_argument(
        "--margin",
        type=float,
        default=tune_defaults.DEFAULT_MARGIN,
        help="a pair, timed on its own nodes, is kept when its saving minus its run-to-run spread is at least this "
        "fraction of its unfused time; the whole tuned model must then beat the original by it too (default "
        "%(default)s; negative keeps pairs that lose by less, for development)",
    )
    tu.add_argument(
        "--shares",
        type=_shares,
        help="comma-separated shares of task A to try (default: the node's own and "
        + ",".join(map(str, tune_defaults.SWEEP))
        + ")",
    )
    tu.add_argument(
        "--session",
        default=tune_defaults.BEST_MODE,
        choices=tune_defaults.SESSION_MODES,
        help="ONNX Runtime's mode for the tuned model: best (time ORT's modes here on the unfused model and record "
        "the fastest; sessions of the tuned model use it) or one of them, recorded as given; the pairs are "
        "timed under it (default %(default)s)",
    )
    tu.add_argument(
        "--budget",
        type=float,
        default=tune_defaults.DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help="each timing (ORT's modes, a pair's screen, the final check) runs the rounds that fit in this long "
        "where all of them would take longer, at least 8 (a detector's 1-2 s calls: minutes, not an hour; default "
        "%(default)g; 0: every round)",
    )
    tu.add_argument("--workers", type=int, help="vector workers of the kernel's pool")
    tu.add_argument("--shape", action="append", metavar="NAME=DxDxD", help="fix a graph input's dims (repeatable)")
    tu.add_argument(
        "--inputs",
        action="append",
        metavar="NPZ|NAME:NPY",
        help="real graph inputs to time on, as rewrite takes them (where random inputs do not run the model: a "
        "sample rate, a token id; default: seeded random inputs at the shapes rewrite analysed)",
    )
    tu.add_argument("--json", metavar="REPORT", help="also write every figure (raw samples too) here")
    tu.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    co = sub.add_parser(
        "colocate",
        help="merge two models (or N copies of one) into one model and pair segments across them",
        epilog=EPILOG,
    )
    co.add_argument("models", nargs="*", metavar="MODEL", help="A.onnx B.onnx, or one model with --requests N")
    co.add_argument(
        "--hybrid",
        metavar="DECODER",
        help="instead of MODELs: a decoder with a KV cache serving a prefill and a decode request in one model",
    )
    co.add_argument(
        "--prefill",
        type=int,
        default=DEFAULT_PREFILL,
        help=f"--hybrid: prefill chunk tokens (default {DEFAULT_PREFILL})",
    )
    co.add_argument(
        "--prefill-past",
        type=int,
        default=DEFAULT_PREFILL_PAST,
        help=f"--hybrid: tokens of earlier chunks the prefill has cached (default {DEFAULT_PREFILL_PAST})",
    )
    co.add_argument(
        "--past",
        type=int,
        default=DEFAULT_PAST,
        help=f"--hybrid: tokens the decode has cached (default {DEFAULT_PAST})",
    )
    co.add_argument("-o", "--output", required=True, help="output .onnx")
    co.add_argument("--requests", type=int, default=1, help="co-locate N copies of one model (weights shared)")
    co.add_argument("--names", help="stream names, comma-separated: the prefix of each stream's names (default a,b)")
    co.add_argument(
        "--priority",
        help="latency-critical stream, A or B (the first or second) or its --names name: its modelled latency is "
        "bounded (--hybrid: prefill or decode)",
    )
    co.add_argument(
        "--max-slowdown", type=float, default=0.05, help="with --priority: largest modelled slowdown (default 0.05)"
    )
    co.add_argument("--kinds", default="colocate", help="pair kinds, comma-separated (default: colocate)")
    co.add_argument("--target", default="hexagon-v73", type=_target, help="cost-model target (default hexagon-v73)")
    co.add_argument("--min-gain", type=float, default=DEFAULT_MIN_GAIN, help="smallest predicted gain of a pair")
    co.add_argument(
        "--shape",
        action="append",
        metavar="NAME=DxDxD",
        help="fix a merged input's dims, e.g. a/x=1x64 (with --requests N, x=1x64 fixes x in every copy)",
    )
    co.add_argument(
        "--freeze-shapes",
        action="store_true",
        help="write the model with the --shape dims (and a zoo model's own) fixed and the integer shape work "
        "they decide folded, as --hybrid does: pairs then need no shape expressions",
    )
    co.add_argument("--verify", choices=("ort", "plugin"), default="ort", help="as for rewrite (default ort)")
    co.add_argument(
        "--inputs",
        action="append",
        metavar="NPZ|NAME:NPY",
        help="real inputs of the merged model, by merged name (r0/x): as for rewrite (repeatable)",
    )
    co.add_argument("--cache-dir", help="real-model cache (default $HEXFUSE_REAL_CACHE or ~/.cache/hexfuse-onnx/real)")
    co.add_argument("--json", metavar="REPORT", help="also write a JSON report here")
    co.add_argument("-q", "--quiet", action="store_true", help="no progress messages")

    un = sub.add_parser("unfuse", help="restore the original nodes of every FusedHexPair", epilog=EPILOG)
    un.add_argument("model", help="a model written by `rewrite`")
    un.add_argument("-o", "--output", required=True, help="output .onnx")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("bench", "calibrate", "tune") and argv is None:
        from .tools.bench import reexec_without_blas_tuning

        reexec_without_blas_tuning(["-m", "hexfuse_onnx", *sys.argv[1:]])
    progress = (lambda msg: None) if getattr(args, "quiet", False) else _progress()
    commands = {
        "rewrite": _rewrite,
        "inspect": _inspect,
        "profile": _profile,
        "zoo": _zoo,
        "bench": _bench,
        "calibrate": _calibrate,
        "unfuse": _unfuse,
        "emulate": _emulate,
        "tune": _tune,
        "colocate": _colocate,
    }
    try:
        return commands[args.command](args, progress)
    except NothingToFuse as exc:
        print(f"{exc.message}; nothing written")
        return exc.exit_code
    except HexfuseError as exc:
        print(f"hexfuse-onnx: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hexfuse-onnx: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return stdout_closed()
    except Exception as exc:  # a bug: say so plainly, with the type, not a traceback
        print(
            f"hexfuse-onnx: internal error ({type(exc).__name__}: {exc}); nothing written. "
            "Please report it with the model.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _progress():
    start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[hexfuse {time.perf_counter() - start:6.2f}s] {msg}", file=sys.stderr, flush=True)

    return say


def _kinds(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


def _refuse_same_file(path: str | None, *others: str | None) -> None:
    """A report or output path that would overwrite the input or another output is refused."""
    from .errors import UsageError

    if path is None:
        return
    for other in others:
        if other is not None and Path(path).resolve() == Path(other).resolve():
            raise UsageError(f"{path}: would overwrite {other}; give a different path")


def _zoo_model(args: argparse.Namespace, folder: str) -> dict[str, list[int]]:
    """A zoo name given for MODEL becomes its file (`tools.zoo.resolve`; a builder is written into
    `folder`); returns the --shape hints, else the zoo model's own shapes."""
    shapes = parse_shape_overrides(getattr(args, "shape", None))  # profile has no --shape
    if Path(args.model).suffix == ".onnx" or Path(args.model).exists():
        return shapes
    from .tools.zoo import resolve

    path, own = resolve(args.model, Path(folder))
    if args.command == "rewrite" and not args.output:
        args.output = f"{args.model}.fused.onnx"  # in the working folder, not the model cache
    args.model = str(path)
    return shapes or own or {}


def _given_inputs(args: argparse.Namespace, name: str, shapes: dict[str, list[int]], progress) -> dict | None:
    """The inputs rewrite verifies on: --inputs; else, for a zoo name (`name`, which _zoo_model made
    args.model's file), its own (`tools.zoo.zoo_inputs`: a real model's control inputs set as its
    users set them); else None, and the pass draws seeded random inputs. (inspect runs no model:
    only the --inputs' shapes matter to it.)"""
    from .verify import load_inputs

    if args.inputs:
        return load_inputs(args.inputs)
    if name == args.model:  # a file
        return None
    from .tools.zoo import zoo_inputs

    return zoo_inputs(name, Path(args.model), shapes, progress)


def _rewrite(args: argparse.Namespace, progress) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hexfuse-zoo-") as folder:
        name = args.model
        shapes = _zoo_model(args, folder)
        return _rewrite_file(args, name, shapes, progress)


def _rewrite_file(args: argparse.Namespace, name: str, shapes: dict[str, list[int]], progress) -> int:
    from .pipeline import default_output, rewrite
    from .report import none_kept, pairs_table, rejection_lines, rewrite_json, rtol_hint, summary

    output = args.output or str(default_output(args.model))
    _refuse_same_file(args.json, args.model, output)
    check_output_folder(args.json)
    check_output_folder(output)
    result = rewrite(
        args.model,
        args.output,
        _kinds(args.kinds),
        args.target,
        args.min_gain,
        shapes,
        args.rtol,
        progress,
        verify_plugin=args.verify == "plugin",
        freeze_shapes=args.freeze_shapes,
        inputs=_given_inputs(args, name, shapes, progress),
    )
    a = result.analysis
    print(summary(a))
    for line in rejection_lines(a.all_rejected()):
        print(line)
    if result.output is None:
        if a.unloadable:
            print(f"note: {a.unloadable}")
        print(f"{none_kept(a.all_rejected())}; nothing written")
        for line in rtol_hint(a.all_rejected()):
            print(line)
    else:
        print(pairs_table(a))
        for line in _verified_lines(result.comparison, args.rtol):
            print(line)
        print(f"wrote {result.output}")
    if args.json:
        _write_json(args.json, rewrite_json(result))
    return EXIT_OK


def _verified_lines(c, rtol: float, original: str = "the original") -> list[str]:
    """What a written model was verified against (rewrite; colocate, whose original is the merge)."""
    from .report import GRID, plugin_line, verified_at

    assert c is not None
    against = original if c.pairless is None else "the rewrite without pairs"
    lines = [
        f"verified: full checker passed; stock ONNX Runtime matches {against} on {c.outputs} output(s) "
        f"(worst relative error {c.worst_relative_error:.2e}; bar {rtol:g} of each output's scale, {GRID}) "
        f"at {verified_at(c.shapes)}"
    ]
    if c.pairless is not None:
        lines.append(
            f"  the rewrite without pairs is {c.pairless:.2e} from the original on stock ORT, which optimises it "
            f"otherwise (fixed shapes: other kernels), and within {rtol:g} with graph optimisations off"
        )
    if c.plugin:
        lines.append(plugin_line(c))
    return lines


def _inspect(args: argparse.Namespace, progress) -> int:
    import tempfile

    from .pipeline import analyse
    from .report import analysis_json, candidate_lines, pairs_table, places, rejection_lines, summary
    from .verify import load_inputs

    with tempfile.TemporaryDirectory(prefix="hexfuse-zoo-") as folder:
        shapes = _zoo_model(args, folder)
        _refuse_same_file(args.json, args.model)
        check_output_folder(args.json)
        feeds = load_inputs(args.inputs) if args.inputs else None
        kinds = _kinds(args.kinds)
        a = analyse(args.model, kinds, args.target, args.min_gain, shapes, progress, args.freeze_shapes, inputs=feeds)
    print(summary(a))
    if a.all_pairs():
        print(pairs_table(a))
    for line in [*rejection_lines(a.all_rejected()), *candidate_lines(a.all_rejected(), where=places(a))]:
        print(line)
    if args.json:
        _write_json(args.json, analysis_json(a))
    return EXIT_OK


def _profile(args: argparse.Namespace, progress) -> int:
    import tempfile

    from .pipeline import rewrite
    from .subgraphs import pairs_within
    from .tools import timeline

    _refuse_same_file(args.output, args.model)
    check_output_folder(args.output)
    check_output_folder(args.png)
    if args.png:
        timeline.check_png_support()
    with tempfile.TemporaryDirectory(prefix="hexfuse-profile-") as folder:
        shapes = _zoo_model(args, folder)
        model = Path(args.model)
        head = read_model(model, load_external_data=False)  # one line and exit 3 for a bad file
        if not pairs_within(head.graph):
            progress("the model has no FusedHexPair: rewriting it first")
            result = rewrite(model, Path(folder) / "fused.onnx", shapes=shapes, progress=progress)
            if result.output is None:
                print("no pair qualifies; nothing to profile")
                return EXIT_OK
            model = result.output
        progress("running on the plugin (host backend) with tracing")
        timelines = timeline.record(model, runs=args.runs, workers=args.workers)
        missed = timeline.not_run(model, timelines)
    _write_json(args.output, timeline.chrome_trace(timelines))
    if args.png:
        timeline.draw_png(timelines, args.png)
    print("\n".join(timeline.summary_lines(timelines)))
    if missed:
        print(f"{len(missed)} pair(s) not run: in If branches no input took ({', '.join(missed)})")
    print(
        "device busy: time any worker ran an item, as a share of the kernel's wall time; "
        "engine busy: the same per engine class"
    )
    print(f"wrote {args.output}" + (f" and {args.png}" if args.png else ""))
    return EXIT_OK


def _zoo(args: argparse.Namespace, progress) -> int:
    from .tools.zoo import list_models

    entries = list_models(args.cache_dir)
    width, kinds = max(len(m.name) for m in entries), max(len(m.kind) for m in entries)
    print(f"{'name':<{width}}  {'kind':<{kinds}} {'source':<44} status")
    for m in entries:
        print(f"{m.name:<{width}}  {m.kind:<{kinds}} {m.source[:44]:<44} {m.status}")
        if args.analyse and m.available:
            print(f"{'':<{width}}  -> {_analysis_line(m, args.target, progress)}")
    print(
        "\nbuild the builders with `python -m models build --all -o DIR`; fetch real models with "
        "`python -m models real fetch NAME|--ci|--all`"
    )
    return EXIT_OK


def _analysis_line(entry, target: str, progress) -> str:
    import tempfile

    from .pipeline import analyse
    from .tools.zoo import resolve

    with tempfile.TemporaryDirectory(prefix="hexfuse-zoo-") as folder:
        try:
            path, shapes = resolve(entry.name, Path(folder))
            a = analyse(path, target=target, shapes=shapes)
        except HexfuseError as exc:
            return f"analysis fails: {exc.message}"
    pairs = a.all_pairs()  # If branches' too
    if not pairs:
        return f"{len(a.graph.nodes)} nodes, {len(a.candidates)} candidate(s), no pair qualifies"
    kinds: dict[str, int] = {}
    for p in pairs:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    serial = sum(p.prediction.serial for p in pairs)
    fused = sum(p.prediction.fused_call for p in pairs)
    return (
        f"{len(a.graph.nodes)} nodes, pairs: "
        + ", ".join(f"{k} {n}" for k, n in kinds.items())
        + f"; predicted on {target}: {serial * 1e6:.0f} us serial -> {fused * 1e6:.0f} us fused (modelled)"
    )


def _bench(args: argparse.Namespace, progress) -> int:
    import tempfile

    from .errors import UsageError
    from .tools.bench import bench, clear_blas_tuning, parse_baselines
    from .tools.zoo import plugin_rtol, resolve

    cleared = clear_blas_tuning()  # the process entry point re-executes without them; API calls get this
    if args.runs < 1 or args.rounds < 1 or args.warmup < 0:
        raise UsageError("--runs and --rounds must be >= 1, --warmup >= 0")
    _refuse_same_file(args.json, args.model)
    check_output_folder(args.json)
    baselines = parse_baselines(args.baseline)
    with tempfile.TemporaryDirectory(prefix="hexfuse-zoo-") as folder:
        path, shapes = resolve(args.model, Path(folder), args.cache_dir)
        read_model(path, load_external_data=False)  # one line and exit 3 for a missing or bad file
        shapes = {**(shapes or {}), **parse_shape_overrides(args.shape)}
        tol = args.tol if args.tol is not None else plugin_rtol(args.model)
        result = bench(
            path,
            args.backend,
            baselines,
            args.runs,
            args.rounds,
            args.warmup,
            shapes or None,
            args.target,
            args.workers,
            progress=progress,
            tol=tol,
        )
    if cleared:
        progress(f"removed {', '.join(cleared)} from this process (benchmarks run without them)")
    print("\n".join(result.lines()))
    if args.json:
        _write_json(args.json, result.to_json())
        print(f"wrote {args.json}")
    return EXIT_OK


def _calibrate(args: argparse.Namespace, progress) -> int:
    import tempfile

    from .errors import UsageError
    from .tools import calibrate
    from .tools.bench import clear_blas_tuning
    from .tools.zoo import resolve

    clear_blas_tuning()
    if args.runs < 1 or args.warmup < 0:
        raise UsageError("--runs must be >= 1, --warmup >= 0")
    _refuse_same_file(args.output, *args.models)
    check_output_folder(args.output)
    with tempfile.TemporaryDirectory(prefix="hexfuse-calibrate-") as folder:
        if args.models:
            paths = [resolve(name, Path(folder))[0] for name in args.models]
            result = calibrate.calibrate(paths, progress, args.runs, args.warmup)
        else:
            result = calibrate.calibrate_zoo(Path(folder), progress, args.runs, args.warmup)
    print("\n".join(result.summary_lines()))
    if args.table:
        if result.kernel_fit_rows:
            print("\n" + "\n".join(result.op_lines()))
        print("\n" + "\n".join(result.parameter_tables()))
    if args.output:
        _write_text(args.output, result.to_json())
        print(f"wrote {args.output} (target '{result.target.name}': {result.choice_note})")
    return EXIT_OK


def _colocate(args: argparse.Namespace, progress) -> int:
    import tempfile

    from .colocate import colocate, stream_names
    from .errors import UsageError
    from .tools.zoo import resolve
    from .verify import load_inputs

    _priority(args)  # a stream it names is checked before any work
    if args.hybrid is not None:
        return _hybrid(args, progress)
    if len(args.models) > 2 or args.requests < 1 or (len(args.models) == 1) == (args.requests == 1):
        raise UsageError("colocate takes two models, or one model with --requests N (N >= 2), or --hybrid DECODER")
    _refuse_same_file(args.json, *args.models, args.output)
    check_output_folder(args.json)
    names = [n.strip() for n in args.names.split(",")] if args.names else None
    with tempfile.TemporaryDirectory(prefix="hexfuse-zoo-") as folder:
        resolved = [resolve(m, Path(folder), args.cache_dir) for m in args.models]
        count = max(len(resolved), args.requests)
        sources = resolved if len(resolved) == 2 else resolved * count
        models = args.models if len(resolved) == 2 else args.models * count  # each stream's name or path
        prefixes = stream_names(len(resolved), args.requests, names)
        shapes = {p + k: v for p, (_, s) in zip(prefixes, sources) for k, v in (s or {}).items()}
        shapes.update(_stream_shapes(parse_shape_overrides(args.shape), prefixes, args.requests))
        switched = _switched(args, resolved[0][0], names, shapes, progress) if args.requests == 2 else None
        if switched is not None:
            return switched
        r = colocate(
            [path for path, _ in resolved],
            args.output,
            args.requests,
            names,
            _priority(args),
            args.max_slowdown,
            args.target,
            _kinds(args.kinds),
            args.min_gain,
            shapes,
            progress,
            verify_plugin=args.verify == "plugin",
            feeds=load_inputs(args.inputs)
            if args.inputs
            else _stream_inputs(models, sources, prefixes, shapes, progress),
            specialise=args.freeze_shapes,
        )
    return _colocated(args, r)


def _stream_inputs(models: list[str], sources, prefixes: list[str], shapes, progress) -> dict | None:
    """Where a zoo name's entry sets control inputs as its users set them (`tools.zoo.zoo_inputs`),
    every stream's inputs by merged name: that model's own, seeded per stream (a model without such
    an entry: seeded random ones where it runs); else None, and colocate draws seeded random inputs."""
    from .feeds import random_inputs, session
    from .pipeline import runnable_inputs
    from .tools.zoo import zoo_inputs

    streams = [
        (p, Path(path), {k[len(p) :]: v for k, v in shapes.items() if k.startswith(p)})
        for p, (path, _) in zip(prefixes, sources)
    ]
    found = [
        zoo_inputs(name, path, own, progress, seed) for seed, (name, (_, path, own)) in enumerate(zip(models, streams))
    ]
    if all(f is None for f in found):
        return None
    feeds: dict = {}
    for seed, ((prefix, path, own), inputs) in enumerate(zip(streams, found)):
        inputs = (
            inputs if inputs is not None else random_inputs(session(path), runnable_inputs(path, own, progress), seed)
        )
        feeds |= {prefix + k: v for k, v in inputs.items()}
    return feeds


def _switched(args: argparse.Namespace, path: str | Path, names, shapes, progress) -> int | None:
    """Two requests of a model whose If is decided by a graph input (a merged decoder): each combination
    of the streams' conditions co-located (colocate_ifs.py); None for any other model."""
    from .colocate_ifs import colocate_switched, switch_of
    from .graph import read_model
    from .report import switched_json, switched_lines
    from .verify import load_inputs

    switch = switch_of(read_model(path, load_external_data=False))
    if switch is None:
        return None
    r = colocate_switched(
        path,
        args.output,
        switch,
        names,
        progress,
        feeds=load_inputs(args.inputs) if args.inputs else None,
        priority=_priority(args),
        max_slowdown=args.max_slowdown,
        target=args.target,
        kinds=_kinds(args.kinds),
        min_gain=args.min_gain,
        shapes=shapes,
        verify_plugin=args.verify == "plugin",
        specialise=args.freeze_shapes,
    )
    for line in switched_lines(r):
        print(line)
    print(f"written model: full checker passed; {r.compared_outputs} output(s) equal their combination's exactly")
    print(f"wrote {r.output}")
    if args.json:
        _write_json(args.json, {"colocate": switched_json(r)})
    return EXIT_OK


def _stream_shapes(given: dict[str, list[int]], prefixes: list[str], requests: int) -> dict[str, list[int]]:
    """--shape by merged name (`r0/audio`); with --requests N, a name of the model's own (`audio`)
    fixes that input in every copy."""
    if requests < 2:
        return given
    own = {k: v for k, v in given.items() if not any(k.startswith(p) for p in prefixes)}
    return {**{k: v for k, v in given.items() if k not in own}, **{p + k: v for p in prefixes for k, v in own.items()}}


def _hybrid(args: argparse.Namespace, progress) -> int:
    import tempfile

    from .errors import UsageError
    from .hybrid import Requests, hybrid
    from .tools.zoo import resolve

    if args.models or args.requests != 1 or args.names or args.shape or args.inputs:
        raise UsageError(
            "--hybrid takes one decoder and no MODEL, --requests, --names, --shape or --inputs "
            "(--prefill, --prefill-past and --past give the shapes)"
        )
    _refuse_same_file(args.json, args.hybrid, args.output)
    check_output_folder(args.json)
    requests = Requests(args.prefill, args.prefill_past, args.past)
    with tempfile.TemporaryDirectory(prefix="hexfuse-zoo-") as folder:
        path, _ = resolve(args.hybrid, Path(folder), args.cache_dir)
        r = hybrid(
            path,
            args.output,
            requests,
            args.target,
            _kinds(args.kinds),
            args.min_gain,
            progress,
            verify_plugin=args.verify == "plugin",
            priority=_priority(args),
            max_slowdown=args.max_slowdown,
        )
    return _colocated(args, r, {"hybrid": vars(requests)})


def _colocated(args: argparse.Namespace, r, extra: dict | None = None) -> int:
    """Print (and with --json write) what `colocate` did."""
    from .report import hidden_lines, none_kept, pair_rows, rejection_lines, rewrite_json, table

    plan = r.merged.plan
    print(
        f"merged {len(plan.streams)} streams ({', '.join(p[:-1] for p in plan.streams)}); "
        f"{plan.shared_weights} weight(s) shared; {r.compared_outputs} output(s) equal their source's exactly"
        f"{r.compared_how}"
    )
    rw = r.rewrite
    if rw.output is not None:
        print(table(pair_rows(rw.analysis.pairs)))
        for line in _verified_lines(rw.comparison, DEFAULT_RTOL, "the merged model"):
            print(line)
    else:
        print(f"{none_kept(rw.analysis.rejected)}; the merged model is written unpaired")
    for line in rejection_lines(rw.analysis.rejected) + hidden_lines(rw.analysis.graph.model.graph):
        print(line)
    m = r.modelled
    if m is not None:
        for line in m.lines(plan.priority):
            print(line)
    print(f"wrote {r.output}")
    if args.json:
        doc = rewrite_json(rw)
        doc["colocate"] = {
            "streams": plan.streams,
            "sources": plan.sources,
            "shared_weights": plan.shared_weights,
            "compared_outputs": r.compared_outputs,
            "priority": plan.priority,
            "max_slowdown": plan.max_slowdown,
            "modelled": m.to_json() if m is not None else None,
            **(extra or {}),
        }
        _write_json(args.json, doc)
    return EXIT_OK


def _target(text: str) -> str:
    """A target name, or a target JSON file (registered under its name)."""
    from .costmodel import load_target, register_target

    if text in TARGETS:
        return text
    if text.endswith(".json") and Path(text).is_file():
        try:
            target = load_target(text)
        except (OSError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"{text}: {exc}") from None
        register_target(target)
        return target.name
    raise argparse.ArgumentTypeError(
        f"unknown target '{text}' (known: {', '.join(sorted(TARGETS))}, or a .json written by `calibrate -o`)"
    )


def _priority(args: argparse.Namespace) -> int | None:
    """--priority as a stream index: A or B (the first or second), or a stream's name (--names, else a and
    b for two models, r0, r1, ... for --requests N; --hybrid: prefill, decode)."""
    from .colocate import stream_names
    from .errors import UsageError

    if not args.priority:
        return None
    if args.priority in ("A", "B"):
        return "AB".index(args.priority)
    if args.hybrid is not None:  # its streams are named as the requests they serve
        from .hybrid import DECODE, PREFILL

        names = [PREFILL, DECODE]
    else:
        given = [n.strip() for n in args.names.split(",")] if args.names else None
        names = [prefix[:-1] for prefix in stream_names(len(args.models), args.requests, given)]
    if args.priority in names:
        return names.index(args.priority)
    raise UsageError(f"--priority {args.priority}: no such stream (A or B, or a stream's name: {', '.join(names)})")


def _unfuse(args: argparse.Namespace, progress) -> int:
    from .graph import check_structure, read_model
    from .modelio import stage
    from .rewrite import unfuse
    from .verify import check

    _refuse_same_file(args.output, args.model)
    model = read_model(args.model, load_external_data=False)
    # a cycle or dangling input is named here; no shape is inferred (a rewritten ViT's took 30-150 s)
    check_structure(model, Path(args.model))
    restored = unfuse(model)
    staged = stage(restored, args.output, Path(args.model).resolve().parent)
    try:
        check(staged.model_path)
    except BaseException:
        staged.discard()
        raise
    staged.commit()
    print(f"wrote {args.output}")
    return EXIT_OK


def _emulate(args: argparse.Namespace, progress) -> int:
    from .errors import EXIT_VERIFY_FAILED
    from .tools import emulate

    _refuse_same_file(args.json, args.model)
    check_output_folder(args.json)
    build_root = Path(args.build_root) if args.build_root else None
    qemu, results = emulate.emulate(args.model, args.arch, args.inputs, args.rtol, args.seed, build_root, progress)
    print(f"qemu-hexagon {'.'.join(map(str, qemu.version))} ({qemu.path}), {args.arch} image")
    for r in results:
        print("\n".join(emulate.pair_lines(r)))
    print(emulate.NOTE)
    if args.json:
        _write_json(args.json, emulate.report_json(qemu, args.arch, args.rtol, results))
        print(f"wrote {args.json}")
    bad = [r.name for r in results if not r.ok]
    if bad:
        print(f"hexfuse-onnx: error: {len(bad)} pair(s) differ from the host kernel: {', '.join(bad)}", file=sys.stderr)
        return EXIT_VERIFY_FAILED
    reached = [r for r in results if r.reached]
    print(f"all {len(reached)} pair(s) reached within tolerance of the host kernel" + emulate.unreached_note(results))
    return EXIT_OK


def _shares(text: str) -> list[float]:
    try:
        return [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of numbers") from None


def _tune(args: argparse.Namespace, progress) -> int:
    from .tools.bench import clear_blas_tuning
    from .tools.tune import tune
    from .verify import load_inputs

    clear_blas_tuning()
    _refuse_same_file(args.output, args.model)
    _refuse_same_file(args.json, args.model, args.output)
    check_output_folder(args.json)
    result = tune(
        args.model,
        args.output,
        args.backend,
        args.runs,
        args.rounds,
        args.margin,
        args.shares,
        args.workers,
        args.session,
        parse_shape_overrides(args.shape),
        progress,
        load_inputs(args.inputs) if args.inputs else None,
        args.budget,
    )
    print("\n".join(result.lines()))
    print(f"wrote {args.output}")
    if args.json:
        _write_json(args.json, result.record(samples=True))
        print(f"wrote {args.json}")
    return EXIT_OK


def _write_json(path: str, data: dict) -> None:
    _write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def _write_text(path: str, text: str) -> None:
    from .errors import WriteError
    from .modelio import write_text

    try:
        write_text(Path(path), text)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write the JSON report: {exc.strerror}") from None
