"""Does the FusedHexPair plugin (host backend) beat ONNX Runtime on the pairs it fuses?

    python benchmarks/host_pairs.py [--runs 50] [--models two_branch,mha_encoder] [--json OUT]
    python benchmarks/host_pairs.py --defaults --json OUT [--resume]    # (c) alone; --resume: go on with OUT

For each zoo model that rewrites (`hexfuse_onnx.pipeline.rewrite`; models with no fused pair are
skipped with the reason), in one process and on the same seeded inputs
(`hexfuse_onnx.verify.random_inputs`):

(a) every fused pair in isolation. "original" is a model holding only the pair's original nodes
    (the function body as a standalone graph: the pair's inputs and outputs, weights as
    initializers); "fused" is the same pair as one FusedHexPair node. Configurations:
      ort-seq      original, ORT_SEQUENTIAL, intra_op_num_threads=1
      ort-seq-2t   original, ORT_SEQUENTIAL, intra_op_num_threads=2
      ort-par      original, ORT_PARALLEL, inter_op_num_threads=2, intra_op_num_threads=1
      plugin @s    fused, plugin registered (host backend), ORT intra_op 1; s = share_a
    share_a is swept (--shares; the model's own share too), one session per share in this one
    process (the kernel's worker pool is process-wide), then the model's share and the best one
    are timed against the ORT modes. One traced run (HEXFUSE_TRACE) at each gives the engines'
    busy time and overlap.
(b) the whole original model (ort-seq, ort-seq-2t, ort-par) against the whole rewritten model with the
    plugin (ort-seq and ort-seq-2t around it; also with every pair set to its best share from (a)).
(c) drop-in (`--defaults` runs only this): every zoo builder and every real model in the cache
    (models/real.py, never downloaded here), rewritten for --target (a real model whose entry gives its integer
    inputs' ranges, int_ranges: a sample rate, token ids, or control values, fixed_inputs: a speed, is
    rewritten, tuned and timed on models.real.realistic_inputs, as a user passes --inputs), run as an
    application would after the one-line change, `hexfuse_onnx.InferenceSession(model)` with its defaults (backend
    auto, ORT's default session options), against the best ORT mode of the original (ort-seq,
    ort-seq-2t, ort-par, and ORT's defaults "ort-default"; hexfuse_onnx/ort_modes.py); target <=
    DEFAULTS_TARGET. In the same rounds: the rewritten model after `tune` on this machine
    (--tune-runs, --tune-rounds; the kept pairs and the ORT mode it chose are printed) with the
    same defaults, target <= PAIR_TARGET where a pair was kept, else <= DEFAULTS_TARGET. --models
    limits (c) to the models named (zoo builders or cached real models). All sessions of (c) live in
    this one process, as the drop-in replaces onnxruntime.InferenceSession in an application's, and
    are timed by hexfuse_onnx/tools/interleaved.py: --defaults-rounds rounds, each visiting every
    configuration once in a shuffled order after a rest until ORT's spinning threads are quiet; a
    ratio is the median of the per-round ratios with its bootstrap 95% interval. Timing each
    configuration in a process of its own could not resolve 2%: the same graph and options in two
    processes differed 0.67-1.27x (issue 13). With --resolve-rounds N, a model whose verdict is unresolved
    after --defaults-rounds is timed on (within --resolve-budget), looked at again at twice the rounds, up to
    N, and stops at the first look where every interval is met or NOT met (met by construction, below: at the
    first look only); every look's interval is then at 95% split over the looks (Bonferroni), so stopping
    early keeps a wrong verdict at 5% or less. An A/A control runs in the same rounds: a twin session
    of the mode a short pilot found fastest. An untuned model's session chooses ORT's mode during its
    first calls (hexfuse_onnx/mode_choice.py; a fresh cache per run, so every run chooses again): it
    chooses during discarded rounds of the same visits, until it has chosen, before the counted
    rounds (the regime it is measured in, as an application keeps its own), and the mode it chose
    and the rounds it took are printed. Whether stock ORT runs the original's own optimized graph
    for the rewrite is checked node for node (hexfuse_onnx/ort_graph.py); a session that runs
    it in the mode that measured best is met by construction (its timed ratio is an A/A
    comparison: noise), and its interval is printed beside that verdict. A visit's figure is the mean of all its
    calls, the first after the rest included (interleaved.visit: what an application calling in bursts waits for);
    each session is also compared by each visit's median call after its first (`by_warm_median`, the figure until
    RULE 11, not judged), which ranked ort-par first where its first calls after a rest waited (docs/DROPIN.md).
    Over every model (c) takes about 4 hours on a 2-vCPU VM: --json is written after each model, and --resume
    takes the models OUT holds from a run with the same settings (a failed one is timed again; a model that
    fails is reported, the run goes on, exit 1).

Every configuration's outputs are checked against ort-seq on the original first
(hexfuse_onnx.verify.relative_error <= --tol); a configuration that disagrees is reported and not
timed. Timing: each configuration runs in blocks (warm-up, then runs/rounds timed runs) and the
blocks of one comparison alternate over --rounds rounds, so drift hits every configuration alike.
A time is one `InferenceSession.run` call from Python (its fixed overhead is in every row).
Figures are medians with p10/p90 in microseconds; the ratios are of medians from the same rounds.

The OpenBLAS tuning variables this machine sets (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) are removed
from this process: the script re-executes itself without them, then prints the BLAS core type the
plugin's OpenBLAS uses.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from hexfuse_onnx.tools.bench import BLAS_VARS, reexec_without_blas_tuning  # noqa: E402  (loads no BLAS)

_REEXEC_MARK = "HEXFUSE_BENCH_REEXECED"

if __name__ == "__main__":
    reexec_without_blas_tuning([os.path.abspath(__file__), *sys.argv[1:]], _REEXEC_MARK)

# ruff: noqa: E402
import argparse
import copy
import ctypes
import functools
import json
import platform
import shutil
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

import models
from hexfuse_onnx import (
    choice_stats,
    mode_cache,
    mode_choice,
    modelio,
    ort_graph,
    ort_modes,
    random_ops,
    runtime,
    tuning,
)
from hexfuse_onnx import contract as C
from hexfuse_onnx.costmodel import engine_seconds
from hexfuse_onnx.nested import all_nodes
from hexfuse_onnx.pipeline import rewrite
from hexfuse_onnx.profile import Engine
from hexfuse_onnx.tools import interleaved, isolated
from hexfuse_onnx.tools.bench import Config, CpuMeter, load_text, ort_options, time_configs, verify_config
from hexfuse_onnx.tools.tune import tune
from hexfuse_onnx.verify import random_inputs
from models import real

DEFAULT_SHARES = "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9"
PAIR_TARGET = 1.0  # plugin / best ORT mode, on complementary pairs
MODEL_TARGET = 1.05  # whole rewritten model with plugin / best ORT mode on the original
DEFAULTS_TARGET = 1.02  # rewritten model with hexfuse_onnx.InferenceSession's defaults / best ORT mode
PILOT_ROUNDS = 10  # (c): rounds that pick the mode whose twin is the A/A control
ORT_MODES = ort_modes.BASELINES  # the pairs' and whole models' baselines; (c) adds ORT's defaults


# ---- environment -------------------------------------------------------------------------------


def blas_info() -> dict[str, Any]:
    """Which OpenBLAS the plugin links and which core kernel it picked."""
    info: dict[str, Any] = {
        "removed_env": os.environ.get(_REEXEC_MARK, ""),
        "env_now": {v: os.environ.get(v) for v in BLAS_VARS},
    }
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-not-found]

        info["threadpoolctl"] = [
            {k: d.get(k) for k in ("internal_api", "filepath", "version", "architecture", "num_threads")}
            for d in threadpool_info()
        ]
    except ImportError:
        info["threadpoolctl"] = None
    try:  # the library the plugin links (ldd: libscipy_openblas.so from scipy-openblas32)
        import scipy_openblas32

        lib = Path(scipy_openblas32.get_lib_dir()) / f"lib{scipy_openblas32.get_library()}.so"
        dll = ctypes.CDLL(str(lib))
        dll.scipy_openblas_get_corename.restype = ctypes.c_char_p
        dll.scipy_openblas_get_config.restype = ctypes.c_char_p
        info["plugin_openblas"] = {
            "path": str(lib),
            "corename": dll.scipy_openblas_get_corename().decode(),
            "config": dll.scipy_openblas_get_config().decode(),
        }
    except Exception as exc:  # noqa: BLE001 - report, do not fail
        info["plugin_openblas"] = {"error": f"could not tell: {type(exc).__name__}: {exc}"}
    return info


def mapped_blas_libraries() -> list[str]:
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in text.splitlines() if "blas" in line.lower() and "/" in line})


# ---- sessions, checks, timing ------------------------------------------------------------------


def make_session(path: Path, mode: str, plugin: bool, trace: Path | None = None) -> ort.InferenceSession:
    """A session; with plugin, the FusedHexPair library is registered (host backend). HEXFUSE_TRACE
    is read when a kernel is created, so it is set for this session's creation only."""
    so = ort_options(mode)
    if not plugin:
        return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    os.environ.pop(runtime.ENV_TRACE, None)
    try:  # a trace shows the fused schedule: the adaptive one might run the traced call serial
        so = runtime.session_options("host", trace=trace, so=so, schedule="fused" if trace else None)
        return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    finally:  # session_options leaves them set for every later session
        os.environ.pop(runtime.ENV_TRACE, None)
        os.environ.pop(runtime.ENV_SCHEDULE, None)


def _summarize_trace(doc: dict[str, Any]) -> dict[str, Any]:
    doc.pop("trace_events", None)
    wall = doc.get("run_wall_ns") or doc.get("wall_ns") or 0
    busy = doc.get("busy_ns", {})

    def pct(ns: float) -> float:
        return 100.0 * ns / wall if wall else float("nan")

    doc["pct_of_kernel_wall"] = {
        "matrix": pct(busy.get("matrix", 0)),
        "vector": pct(busy.get("vector", 0)),
        "copy": pct(busy.get("copy", 0)),
        "matrix_vector_overlap": pct(doc.get("matrix_vector_overlap_ns", 0)),
        "task_overlap": pct(doc.get("task_overlap_ns", 0)),
        "items_span": pct(doc.get("wall_ns", 0)),
    }
    return doc


def read_traces(
    session: ort.InferenceSession, feeds: dict[str, np.ndarray], paths: dict[str, Path], runs: int
) -> dict[str, dict[str, Any]]:
    """`runs` traced runs; each file in `paths` (one per FusedHexPair node) holds that node's last
    call. Per node: the run with the median kernel wall time, and how many of the runs had any
    matrix/vector overlap at all."""
    session.run(None, feeds)  # warm-up
    docs: dict[str, list[dict[str, Any]]] = {k: [] for k in paths}
    errors: dict[str, str] = {}
    for _ in range(max(1, runs)):
        t0 = time.perf_counter_ns()
        session.run(None, feeds)
        call_us = (time.perf_counter_ns() - t0) / 1000.0
        for key, path in paths.items():
            try:
                doc = _summarize_trace(json.loads(path.read_text()))
            except (OSError, ValueError) as exc:
                errors[key] = f"no trace: {exc}"
                continue
            doc["session_run_us"] = call_us
            docs[key].append(doc)
    out = {}
    for key, runs_ in docs.items():
        if not runs_:
            out[key] = {"error": errors.get(key, "no trace")}
            continue
        runs_.sort(key=lambda d: d.get("run_wall_ns", 0))
        pick = dict(runs_[len(runs_) // 2])
        pick["traced_runs"] = len(runs_)
        pick["runs_with_matrix_vector_overlap"] = sum(1 for d in runs_ if d.get("matrix_vector_overlap_ns", 0) > 0)
        pick["matrix_vector_overlap_pct_per_run"] = [
            round(d["pct_of_kernel_wall"]["matrix_vector_overlap"], 1) for d in runs_
        ]
        pick["kernel_wall_us_per_run"] = [round(d.get("run_wall_ns", 0) / 1000.0, 1) for d in runs_]
        out[key] = pick
    return out


def trace_file_name(node_name: str) -> str:
    """The file the kernel writes for HEXFUSE_TRACE=<dir>/{node}.trace.json ('/' becomes '_')."""
    return node_name.replace("/", "_") + ".trace.json"


# ---- pair extraction ---------------------------------------------------------------------------


def _types(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001
        inferred = model
    g = inferred.graph
    return {v.name: v for v in list(g.input) + list(g.value_info) + list(g.output) if v.type.tensor_type.elem_type}


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    out = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    t = onnx.TensorProto()
                    t.CopyFrom(a.t)
                    t.name = n.output[0]
                    out[n.output[0]] = t
    return out


def pair_models(
    fused: onnx.ModelProto,
    node: onnx.NodeProto,
    fn: onnx.FunctionProto,
    types: dict[str, onnx.ValueInfoProto],
    consts: dict[str, onnx.TensorProto],
) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(original nodes only, one FusedHexPair node), with the pair's inputs and outputs."""
    mapping = dict(zip(fn.input, node.input)) | dict(zip(fn.output, node.output))
    actual = set(node.input) | set(node.output)
    body = []
    for n in fn.node:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        for k, t in enumerate(m.input):
            m.input[k] = mapping.get(t, t)
        for k, t in enumerate(m.output):
            if t in actual and t not in mapping:
                raise ValueError(f"body tensor '{t}' collides with a pair input/output name")
            m.output[k] = mapping.get(t, t)
        body.append(m)
    inputs, inits = [], []
    for t in dict.fromkeys(x for x in node.input if x):
        if t in consts:
            inits.append(consts[t])
        elif t in types:
            inputs.append(types[t])
        else:
            raise ValueError(f"no type for pair input '{t}'")
    outputs = []
    for t in node.output:
        if t and t not in types:
            raise ValueError(f"no type for pair output '{t}'")
        if t:
            outputs.append(types[t])
    opsets = [o for o in fused.opset_import]
    plain = helper.make_model(
        helper.make_graph(body, f"{node.overload}_original", inputs, outputs, inits),
        opset_imports=[o for o in opsets if o.domain != C.DOMAIN],
        ir_version=fused.ir_version,
    )
    single = helper.make_model(
        helper.make_graph([copy.deepcopy(node)], f"{node.overload}_fused", inputs, outputs, inits),
        opset_imports=opsets,
        ir_version=fused.ir_version,
        functions=[fn],
    )
    return plain, single


def with_share(model: onnx.ModelProto, shares: dict[str, float]) -> onnx.ModelProto:
    """A copy with share_a of the FusedHexPair nodes named by overload replaced."""
    m = copy.deepcopy(model)
    for n in m.graph.node:
        if n.domain == C.DOMAIN and n.op_type == C.OP_TYPE and n.overload in shares:
            for a in n.attribute:
                if a.name == C.ATTR_SHARE_A:
                    a.f = float(shares[n.overload])
    return m


def share_of(node: onnx.NodeProto) -> float:
    for a in node.attribute:
        if a.name == C.ATTR_SHARE_A:
            return float(a.f)
    return 0.5


def dominant(task, target) -> str:
    secs = engine_seconds(task, target)
    names = (Engine.MATRIX.value, Engine.VECTOR.value, Engine.MEMORY.value)
    return names[int(np.argmax(secs))] if max(secs) > 0 else "none"


# ---- printing ----------------------------------------------------------------------------------


def fmt_us(x: float | None) -> str:
    return f"{x:9.1f}" if x is not None and x == x else "        -"


def row(cfg: Config, best_ort: float | None) -> str:
    s = cfg.stats()
    if not cfg.ok:
        status = "not timed: " + (cfg.check or "no session")
        return f"    {cfg.label:<30} {'':>9} {'':>9} {'':>9} {'':>8}  {status}"
    ratio = f"{s['median_us'] / best_ort:7.2f}x" if best_ort else "       -"
    err = f"ok (err {cfg.error:.1e})" if cfg.error is not None else "ok"
    return f"    {cfg.label:<30} {fmt_us(s['median_us'])} {fmt_us(s['p10_us'])} {fmt_us(s['p90_us'])} {ratio}  {err}"


def header() -> str:
    return f"    {'configuration':<30} {'median':>9} {'p10':>9} {'p90':>9} {'/bestORT':>8}  check"


def trace_line(label: str, t: dict[str, Any] | None) -> str:
    if not t or "error" in t:
        return f"    trace {label}: {(t or {}).get('error', 'none')}"
    p = t["pct_of_kernel_wall"]
    return (
        f"    trace {label} (median-wall run of {t.get('traced_runs')}): node {t.get('node')} "
        f"kernel wall {t.get('run_wall_ns', 0) / 1000:.1f} us "
        f"(session.run incl. trace write {t['session_run_us']:.1f} us), workers {t.get('workers')}, "
        f"serialized {t.get('serialized')}: "
        f"matrix busy {p['matrix']:.0f}%, vector busy {p['vector']:.0f}%, copy busy {p['copy']:.0f}%, "
        f"matrix/vector overlap {p['matrix_vector_overlap']:.0f}%, task overlap {p['task_overlap']:.0f}%, "
        f"items span {p['items_span']:.0f}% of kernel wall; m/v overlap > 0 in "
        f"{t.get('runs_with_matrix_vector_overlap')}/{t.get('traced_runs')} traced runs"
    )


# ---- the benchmark -----------------------------------------------------------------------------


def best_ort(configs: list[Config]) -> Config | None:
    timed = [c for c in configs if c.label in ORT_MODES and c.samples]
    return min(timed, key=Config.median) if timed else None


def bench_pair(
    args,
    work: Path,
    fused: onnx.ModelProto,
    node: onnx.NodeProto,
    fn: onnx.FunctionProto,
    pair_info: dict[str, Any],
    types,
    consts,
) -> dict[str, Any]:
    pid = node.overload
    out: dict[str, Any] = {"pair": pid, **pair_info}
    try:
        plain, single = pair_models(fused, node, fn, types, consts)
    except ValueError as exc:
        out["skipped"] = f"cannot extract the pair: {exc}"
        print(f"  pair {pid}: skipped ({out['skipped']})")
        return out
    plain_path, single_path = work / f"{pid}.original.onnx", work / f"{pid}.fused.onnx"
    onnx.save(plain, plain_path)
    onnx.save(single, single_path)

    ref_sess = make_session(plain_path, "ort-seq", plugin=False)
    feeds = random_inputs(ref_sess, seed=args.seed)
    names = [o.name for o in ref_sess.get_outputs()]
    reference = ref_sess.run(names, feeds)

    model_share = share_of(node)
    shares = sorted(set(round(s, 4) for s in args.shares) | {round(model_share, 4)})
    share_cfgs: dict[float, Config] = {}
    for s in shares:
        path = work / f"{pid}.share{s:.4f}.onnx"
        onnx.save(with_share(single, {pid: s}), path)
        label = f"plugin @{s:.2f}" + (" (model)" if s == round(model_share, 4) else "")
        try:
            cfg = Config(label, make_session(path, "ort-seq", plugin=True), extra={"share_a": s, "path": str(path)})
        except Exception as exc:  # noqa: BLE001
            cfg = Config(label, None, check=f"session fails: {str(exc).splitlines()[0][:200]}", extra={"share_a": s})
        verify_config(cfg, feeds, names, reference, args.tol)
        share_cfgs[s] = cfg
    sweep_cfgs = list(share_cfgs.values())
    time_configs(sweep_cfgs, feeds, args.sweep_runs, args.rounds, args.warmup)
    timed = [c for c in sweep_cfgs if c.samples]
    best_share = min(timed, key=Config.median).extra["share_a"] if timed else None
    out["sweep"] = [{"share_a": c.extra["share_a"], **c.record()} for c in sweep_cfgs]

    ort_cfgs = [Config("ort-seq", ref_sess)]
    ort_cfgs += [Config(m, make_session(plain_path, m, plugin=False)) for m in ORT_MODES[1:]]
    for c in ort_cfgs:
        verify_config(c, feeds, names, reference, args.tol)
    main = list(ort_cfgs)
    chosen = {round(model_share, 4): "model share"}
    if best_share is not None:
        chosen[best_share] = "best share" if best_share not in chosen else "model share = best share"
    for s, why in chosen.items():
        src = share_cfgs[s]
        main.append(
            Config(
                src.label.replace(" (model)", "") + f" [{why}]",
                src.session,
                src.check,
                src.error,
                extra=dict(src.extra),
            )
        )
    time_configs(main, feeds, args.runs, args.rounds, args.warmup)

    traces = {}
    for s in chosen:
        tpath = work / f"{pid}.share{s:.4f}.trace.json"
        if share_cfgs[s].ok:
            sess = make_session(Path(share_cfgs[s].extra["path"]), "ort-seq", plugin=True, trace=tpath)
            traces[f"{s:.2f}"] = read_traces(sess, feeds, {"t": tpath}, args.trace_runs)["t"]
            del sess

    b = best_ort(main)
    print(
        f"  pair {pid} ({pair_info['kind']}): A {pair_info['a_nodes']} nodes {pair_info['a_ops']} "
        f"[{pair_info['a_dominant']}], B {pair_info['b_nodes']} nodes {pair_info['b_ops']} "
        f"[{pair_info['b_dominant']}]; complementarity {pair_info['complementarity']:.2f}; "
        f"model share_a {model_share:.2f}"
    )
    print(header())
    for c in main:
        print(row(c, b.median() if b else None))
    sweep_txt = "  ".join(
        f"{c.extra['share_a']:.2f}:{c.median():.0f}" if c.samples else f"{c.extra['share_a']:.2f}:wrong"
        for c in sweep_cfgs
    )
    print(f"    share_a sweep (median us, {args.sweep_runs} runs each): {sweep_txt}")
    for label, t in traces.items():
        print(trace_line(f"@{label}", t))

    plugin_rows = [c for c in main if c.label.startswith("plugin") and c.samples]
    result_rows = {c.label: c.record() for c in main}
    out.update({"model_share_a": model_share, "best_share_a": best_share, "configs": result_rows, "traces": traces})
    if b and plugin_rows:
        at_model = next((c for c in plugin_rows if "model share" in c.label), None)
        at_best = next((c for c in plugin_rows if "best share" in c.label), None)
        ratios = {
            "best_ort": b.label,
            "plugin_model_share_over_best_ort": at_model.median() / b.median() if at_model else None,
            "plugin_best_share_over_best_ort": at_best.median() / b.median() if at_best else None,
        }
        r = ratios["plugin_best_share_over_best_ort"]
        complementary = pair_info["a_dominant"] != pair_info["b_dominant"]
        ratios["complementary"] = complementary
        ratios["target"] = PAIR_TARGET
        ratios["met"] = (r is not None and r <= PAIR_TARGET) if complementary else None
        out["ratios"] = ratios
        verdict = (
            ("met" if ratios["met"] else "NOT met")
            if complementary
            else "n/a: tasks share a dominant engine (not complementary)"
        )
        m = ratios["plugin_model_share_over_best_ort"]
        print(
            f"    ratio plugin/best ORT ({b.label}): at model share {m:.2f}x, at best share "
            f"{r:.2f}x; target <= {PAIR_TARGET:.2f}x on complementary pairs: {verdict}"
        )
    else:
        out["ratios"] = None
        print("    ratio: not available (a configuration was refused)")
    return out


def bench_whole(args, work: Path, orig_path: Path, fused_path: Path, best_shares: dict[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ref_sess = make_session(orig_path, "ort-seq", plugin=False)
    feeds = random_inputs(ref_sess, seed=args.seed)
    names = [o.name for o in ref_sess.get_outputs()]
    reference = ref_sess.run(names, feeds)
    cfgs = [Config("ort-seq", ref_sess)] + [Config(m, make_session(orig_path, m, plugin=False)) for m in ORT_MODES[1:]]
    fused = onnx.load(str(fused_path))
    tuned_path = work / "whole.best_shares.onnx"
    onnx.save(with_share(fused, best_shares), tuned_path)
    plugin_cfgs = [("plugin seq 1t", fused_path, "ort-seq"), ("plugin seq 2t", fused_path, "ort-seq-2t")]
    if best_shares:
        plugin_cfgs.append(("plugin seq 1t best sh.", tuned_path, "ort-seq"))
    for label, path, mode in plugin_cfgs:
        try:
            cfgs.append(Config(label, make_session(path, mode, plugin=True), extra={"path": str(path), "mode": mode}))
        except Exception as exc:  # noqa: BLE001
            cfgs.append(Config(label, None, check=f"session fails: {str(exc).splitlines()[0][:200]}"))
    for c in cfgs:
        verify_config(c, feeds, names, reference, args.tol)
    time_configs(cfgs, feeds, args.runs, args.rounds, args.warmup)
    b = best_ort(cfgs)
    print("  whole model: original (ORT modes) vs rewritten with the plugin")
    print(header())
    for c in cfgs:
        print(row(c, b.median() if b else None))
    tdir = work / "whole_traces"
    tdir.mkdir(exist_ok=True)
    traces: dict[str, Any] = {}
    first = next((c for c in cfgs if c.label.startswith("plugin") and c.ok), None)
    if first:
        pair_nodes = [n.name for n in fused.graph.node if n.domain == C.DOMAIN and n.op_type == C.OP_TYPE]
        sess = make_session(
            Path(first.extra["path"]), first.extra["mode"], plugin=True, trace=tdir / "{node}.trace.json"
        )
        traces = read_traces(sess, feeds, {n: tdir / trace_file_name(n) for n in pair_nodes}, args.trace_runs)
        for node_name, t in traces.items():
            print(trace_line(f"{node_name} in the whole model ({first.label})", t))
    out["configs"] = {c.label: c.record() for c in cfgs}
    out["traces"] = traces
    plugins = [c for c in cfgs if c.label.startswith("plugin") and c.samples]
    as_rewritten = [c for c in plugins if "best sh." not in c.label]
    if b and as_rewritten:
        best_plugin = min(as_rewritten, key=Config.median)
        r = best_plugin.median() / b.median()
        out["ratio"] = {
            "best_ort": b.label,
            "plugin": best_plugin.label,
            "plugin_over_best_ort": r,
            "target": MODEL_TARGET,
            "met": r <= MODEL_TARGET,
        }
        tuned = next((c for c in plugins if "best sh." in c.label), None)
        if tuned:
            out["ratio"]["best_shares_over_best_ort"] = tuned.median() / b.median()
        print(
            f"    ratio rewritten+plugin ({best_plugin.label}) / original best ORT ({b.label}): {r:.2f}x; "
            f"target <= {MODEL_TARGET:.2f}x: {'met' if r <= MODEL_TARGET else 'NOT met'}"
            + (f"; with best shares {tuned.median() / b.median():.2f}x" if tuned else "")
        )
    else:
        out["ratio"] = None
        print("    ratio: not available (a configuration was refused)")
    return out


def skip_reason(result) -> str:
    reasons = list(dict.fromkeys(r.reason for r in result.analysis.rejected))
    if not result.analysis.candidates:
        return "no candidate pair found"
    if not reasons:
        return "no pair qualifies"
    more = f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else ""
    return "no pair qualifies: " + "; ".join(reasons[:3]) + more


def bench_model(args, name: str, root: Path) -> dict[str, Any]:
    work = root / name
    work.mkdir(parents=True, exist_ok=True)
    meter = CpuMeter()
    out = _bench_model(args, name, work)
    if "skipped" not in out:
        out["cpu_use"] = meter.others()
        print("  " + load_text(out["cpu_use"]))
    return out


def _bench_model(args, name: str, work: Path) -> dict[str, Any]:
    orig_path, fused_path = work / f"{name}.onnx", work / f"{name}.fused.onnx"
    onnx.save(models.build(name), orig_path)
    try:
        res = rewrite(orig_path, fused_path, target=args.target, verify_plugin=False)
    except Exception as exc:  # noqa: BLE001
        reason = f"rewrite failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        print(f"\n== {name}: skipped ({reason})")
        return {"model": name, "skipped": reason}
    if res.output is None:
        reason = skip_reason(res)
        print(f"\n== {name}: skipped ({reason})")
        return {"model": name, "skipped": reason}
    fused = onnx.load(str(fused_path))
    fn_by_key = {(f.domain, f.name, f.overload): f for f in fused.functions}
    nodes = [n for n in fused.graph.node if n.domain == C.DOMAIN and n.op_type == C.OP_TYPE]
    print(f"\n== {name}: {len(nodes)} fused pair(s) (rewrite target {args.target})")
    by_id = {p.id: p for p in res.analysis.pairs}
    g = res.analysis.graph
    types, consts = _types(fused), _constants(fused)
    pairs_out, best_shares = [], {}
    for node in nodes:
        p = by_id.get(node.overload)
        ops_a = [g.nodes[i].op_type for i in p.candidate.task_a] if p else []
        ops_b = [g.nodes[i].op_type for i in p.candidate.task_b] if p else []
        info = {
            "kind": p.kind if p else "?",
            "note": p.candidate.note if p else "",
            "a_nodes": len(ops_a),
            "b_nodes": len(ops_b),
            "a_ops": _short(ops_a),
            "b_ops": _short(ops_b),
            "a_dominant": dominant(p.a, res.analysis.target) if p else "?",
            "b_dominant": dominant(p.b, res.analysis.target) if p else "?",
            "complementarity": p.complementarity if p else float("nan"),
            "est_serial_us": p.prediction.serial * 1e6 if p else None,
            "est_fused_us": p.prediction.fused * 1e6 if p else None,
        }
        r = bench_pair(
            args, work, fused, node, fn_by_key[(node.domain, node.op_type, node.overload)], info, types, consts
        )
        if r.get("best_share_a") is not None:
            best_shares[node.overload] = r["best_share_a"]
        pairs_out.append(r)
    whole = bench_whole(args, work, orig_path, fused_path, best_shares)
    return {"model": name, "target": args.target, "pairs": pairs_out, "whole": whole}


def default_models() -> list[str]:
    """Every zoo builder, then every real model already in the cache (none is downloaded)."""
    from hexfuse_onnx.tools.zoo import list_models

    real = [m.name for m in list_models() if m.kind not in ("synthetic", "qdq", "decoder") and m.path is not None]
    return [*models.BUILDERS, *real]


KEEP_EVERY_PAIR = -10.0  # a min_gain no real pair falls below: every lowerable pair gets a fallback body


def rewrite_every_pair(
    path: Path, out: Path, target: str, shapes: dict[str, list[int]] | None, inputs: dict[str, np.ndarray] | None
):
    """The model rewritten with every lowerable pair kept, paying or not: the most fallback bodies
    stock ORT can be given (on a machine without a cDSP, `auto` runs them)."""
    return rewrite(
        path, out, target=target, shapes=shapes, min_gain=KEEP_EVERY_PAIR, verify_plugin=False, inputs=inputs
    )


def given_inputs(path: Path, name: str, shapes: dict[str, list[int]] | None, seed: int) -> dict[str, np.ndarray] | None:
    """A real model's realistic inputs where the zoo gives ranges for its integer inputs (a sample rate,
    token ids: random ones are 0 or 1) or values of its control inputs (Kokoro's speed), as a user gives
    them to rewrite and tune with --inputs; else None, and both make their own."""
    entry = real.MODELS.get(name)
    if entry is None or not (entry.int_ranges or entry.fixed_inputs):
        return None
    return real.realistic_inputs(isolated.ort_session(str(path), "ort-seq"), name, shapes, seed)


def bench_defaults(args, name: str, work: Path) -> dict[str, Any]:
    """The original in every ORT mode and ORT's defaults against the rewritten model with
    hexfuse_onnx.InferenceSession's defaults (backend auto), same inputs, alternating rounds."""
    from hexfuse_onnx.tools.zoo import plugin_rtol, resolve

    work.mkdir(parents=True, exist_ok=True)
    orig_path, shapes = resolve(name, work)
    fused_path = work / f"{name}.fused.onnx"
    given = given_inputs(orig_path, name, shapes, args.seed)
    if random_ops.unseeded_count(orig_path):  # else ORT seeds them by node index, which a rewrite changes
        orig_path = random_ops.seeded_file(orig_path, work / f"{name}.seeded.onnx")  # timed alike: the same kernels
    try:  # as a user would: without --shape where the model allows it
        res = rewrite_every_pair(orig_path, fused_path, args.target, None, given)
    except Exception:  # noqa: BLE001
        try:
            res = rewrite_every_pair(orig_path, fused_path, args.target, shapes, given)
        except Exception as exc:  # noqa: BLE001
            why = f"rewrite failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            return {"model": name, "skipped": why}
    if res.output is None:
        return {"model": name, "skipped": skip_reason(res) + ": the rewritten model is the original"}
    header = tuning.load_header(fused_path)  # what runtime.InferenceSession reads
    n_pairs = sum(1 for n in all_nodes(header.graph) if n.domain == C.DOMAIN)  # an If's branches' too (silero_vad)
    tuned_path = work / f"{name}.tuned.onnx"
    tuned = tune(
        fused_path,
        tuned_path,
        "host",
        args.tune_runs,
        args.tune_rounds,
        input_shapes=None if given else shapes,  # tune times given inputs at their own shapes
        progress=lambda m: None,
        inputs=given,
        **({"budget_s": args.budget} if args.budget else {}),
    )
    kept = [p.pair_id for p in tuned.kept]
    tol = max(args.tol, plugin_rtol(name))
    cfgs = [Config(m, isolated.ort_session(str(orig_path), m)) for m in ort_modes.MODES]
    feeds = given or random_inputs(cfgs[1].session, shapes, seed=args.seed)
    names = [o.name for o in cfgs[1].session.get_outputs()]
    # ort-seq on the original, in a session of its own: every check is a session's first run, where a seeded
    # random op draws what it drew here (it draws on from run to run of a session)
    reference = isolated.ort_session(str(orig_path), "ort-seq").run(names, feeds)
    for cfg in cfgs:
        verify_config(cfg, feeds, names, reference)
    pilot = [Config(c.label, c.session) for c in cfgs if c.ok]
    interleaved.time_interleaved(pilot, feeds, PILOT_ROUNDS, seed=args.seed, budget_s=args.budget)
    twin_of = min(pilot, key=Config.median).label  # the A/A control: the likely best mode, twice
    cfgs.append(Config(f"{twin_of} twin", isolated.ort_session(str(orig_path), twin_of)))
    for label, path in (("hexfuse defaults", fused_path), ("hexfuse tuned defaults", tuned_path)):
        cfgs.append(Config(label, isolated.hexfuse_session(str(path)), tol=tol))
    by = {c.label: c for c in cfgs}
    choosing = interleaved.still_choosing(cfgs)  # the tuned one too on short calls
    untuned_chooses = by["hexfuse defaults"] in choosing
    if not untuned_chooses and not mode_choice.too_large(str(fused_path), header):  # it must choose here and now
        why = f"the untuned session took a cached ORT mode ({mode_cache.cache_path()}), it did not choose"
        return {"model": name, "skipped": why}
    if not untuned_chooses:  # it runs ORT's defaults, as it would for a user
        by["hexfuse defaults"].extra.update(ort_mode_chosen=ort_modes.DEFAULT, too_large_to_choose=True)
    for cfg in cfgs[len(ort_modes.MODES) :]:
        verify_config(cfg, feeds, names, reference)
    warm_rounds: list[bool] = []

    def still_choosing() -> list[Config]:  # a session chooses in discarded rounds of the visits it is measured in
        chooses = interleaved.still_choosing(choosing)
        warm_rounds.append(bool(chooses))
        if not chooses:
            record_choices(choosing, sum(warm_rounds))
        return chooses

    tuned_target = tuned_target_of(kept)
    graph_diff = {  # None: stock ORT runs the original's own optimized graph for it (a tuned pair runs the plugin)
        "hexfuse defaults": ort_graph.difference(orig_path, unfused_as_run(fused_path, header, work)),
        "hexfuse tuned defaults": ort_graph.difference(orig_path, tuned_path) if not kept else "pairs kept",
    }
    looks = look_rounds(args.defaults_rounds, args.resolve_rounds)
    level = interval_level(looks)

    def judged() -> dict[str, Judged]:
        best = best_mode(cfgs)
        targets = {"hexfuse defaults": DEFAULTS_TARGET, "hexfuse tuned defaults": tuned_target}
        return {
            label: judge(by[label], best, mode_run(by[label].extra, tuned.ort_mode.mode, label), diff, target, level)
            for (label, diff), target in zip(graph_diff.items(), targets.values(), strict=True)
        }

    def resolved() -> bool:  # at a look, every verdict met or NOT met: more rounds would not change it
        rounds = len(by["hexfuse defaults"].samples)
        return rounds in looks and settles(judged().values(), first_look=rounds == looks[0])

    meter = CpuMeter()
    rests = interleaved.time_interleaved(
        cfgs,
        feeds,
        looks[-1],
        seed=args.seed,
        warm_up=still_choosing,
        budget_s=args.resolve_budget if args.resolve_rounds else args.budget,
        settled=resolved,
    )
    if any("ort_mode_chosen" not in c.extra for c in choosing):  # the warm-up ran out while one still chose
        record_choices(choosing, sum(warm_rounds))
    for cfg in choosing:  # a ChallengedSession's trial of ort-par may have changed the mode since
        if cfg.session.mode != cfg.extra.get("ort_mode_chosen"):
            cfg.extra["ort_mode_at_end"] = cfg.session.mode
    best = best_mode(cfgs)
    verdicts = judged()
    ratio, tuned_ratio = verdicts["hexfuse defaults"].ratio, verdicts["hexfuse tuned defaults"].ratio
    twin = interleaved.ratio_interval(by[f"{twin_of} twin"], by[twin_of], level=level) if by[twin_of].samples else None
    same = {  # each session against the original in the ORT mode it runs: the rewrite's own cost
        label: interleaved.ratio_interval(by[label], by[mode], level=level)
        for label in ("hexfuse defaults", "hexfuse tuned defaults")
        if by[label].samples
        and (mode := mode_run(by[label].extra, tuned.ort_mode.mode, label)) in by
        and by[mode].samples
    }
    by_construction = {label: j.by_construction for label, j in verdicts.items()}
    out = {
        "model": name,
        "pairs": n_pairs,
        "rounds": max(len(c.samples) for c in cfgs),  # as timed: --budget may cut --defaults-rounds
        "configs": {c.label: c.record() for c in cfgs},
        "rest_s": rests,
        "best_ort": best.label if best else None,
        "defaults_over_best_ort": ratio,
        "tuned_defaults_over_best_ort": tuned_ratio,
        "aa_twin": {"mode": twin_of, "ratio": twin},
        "tuned": {
            "kept": kept,
            "ort_mode": tuned.ort_mode.record(),
            "final_check": tuned.final.record() if tuned.final else None,
            "pairs": [p.record() for p in tuned.pairs],
        },
        "over_own_mode_on_original": same,
        "ort_graph_difference": graph_diff,
        "same_graph_and_mode_as_best": by_construction,
        "met": verdicts["hexfuse defaults"].verdict == "met",
        "tuned_met": verdicts["hexfuse tuned defaults"].verdict == "met",
        "interval_level": level,
        "looks": looks,
        "cpu_use": meter.others(),
        "by_warm_median": by_warm_median(cfgs, level),
    }

    def verdict(label: str) -> str:
        j = verdicts[label]
        if j.ratio is None:
            return "not timed"
        why = "met: the original's graph in the best mode" if j.by_construction else j.verdict
        return f"{_ci(j.ratio)} ({why}, <= {j.target:.2f}x{_looked_text(looks, level, out['rounds'])})"

    extra = by["hexfuse defaults"].extra
    how = "too large to choose" if extra.get("too_large_to_choose") else f"in {extra.get('warm_up_rounds', '?')} rounds"
    print(
        f"  {name:<24} {n_pairs:>3} pair(s)  best ORT {best.median() if best else float('nan'):10.1f} us "
        f"({best.label if best else '-':>11})  untuned defaults {by['hexfuse defaults'].median():10.1f} us "
        f"(chose {extra.get('ort_mode_chosen') or '-'} {how}) -> "
        f"{verdict('hexfuse defaults')}"
    )
    tuned_chose = by["hexfuse tuned defaults"].extra.get("ort_mode_chosen")
    tuned_mode = (
        f"chose {tuned_chose} at run time (tune's: {tuned.ort_mode.mode})" if tuned_chose else tuned.ort_mode.mode
    )
    print(
        f"      tuned here: {len(kept)} of {n_pairs} pair(s) kept{' (' + ', '.join(kept) + ')' if kept else ''}, "
        f"ORT mode {tuned_mode}; tuned defaults {by['hexfuse tuned defaults'].median():10.1f} us "
        f"-> {verdict('hexfuse tuned defaults')}"
    )
    for label, diff in graph_diff.items():
        print(f"      {label}: stock ORT runs {'the original graph' if diff is None else 'another graph: ' + diff}")
    if tuned.final is not None:
        print(f"      tune's whole-model check: {tuned.final.why} -> {'kept' if tuned.final.won else 'unfused'}")
    print(
        f"      A/A {twin_of} twin / {twin_of} {_ci(twin) if twin else '-'}; against the original in the mode "
        "each runs: " + ", ".join(f"{k} {_ci(v)}" for k, v in same.items()) + f"; {load_text(out['cpu_use'])}"
    )
    median = out["by_warm_median"]
    if median:
        print(
            f"      by each visit's median call after its first (the figure until RULE 11, not judged): "
            f"best {median['best_ort']}; " + ", ".join(f"{k} {_ci(v)}" for k, v in median.items() if k != "best_ort")
        )
    return out


def unfused_as_run(fused_path: Path, header: onnx.ModelProto, work: Path) -> Path:
    """The model the untuned session hands stock ORT here (no cDSP, not tuned: the plugin is not
    registered): runtime.unfused_source's bytes, written to a file in `work`, or the file itself."""
    source = runtime.unfused_source(fused_path, header)
    if isinstance(source, str):
        return Path(source)
    path = work / f"{fused_path.stem}.unfused.onnx"
    path.write_bytes(source)
    return path


def mode_run(extra: dict[str, Any], tuned_mode: str | None, label: str) -> str | None:
    """The ORT mode a hexfuse session runs, from its record's extras: the one it chose, or the tuned model's."""
    return extra.get("ort_mode_chosen") or (tuned_mode if "tuned" in label else None)


def by_warm_median(cfgs: list[Config], level: float) -> dict[str, Any]:
    """The hexfuse sessions against the best ORT mode by each visit's median call after its first
    (`interleaved.visit`), the verdicts' figure until RULE 11: blind to a mode's calls that wait. Not judged:
    recorded beside the verdicts so a run shows what the change of figure changed."""
    medians = [Config(c.label, None, samples=c.visit_medians) for c in cfgs if c.visit_medians]
    best = best_mode(medians)
    if best is None:
        return {}
    return {
        "best_ort": best.label,
        **{
            c.label: interleaved.ratio_interval(c, best, level=level)
            for c in medians
            if c.label in ("hexfuse defaults", "hexfuse tuned defaults")
        },
    }


def record_choices(choosing: list[Config], warm_up_rounds: int) -> None:
    """Into each choosing session's extra: the ORT mode it chose, the discarded rounds it took, and what
    its exploration saw (block means round by round, each mode's typical call of them, and its counted calls,
    as at the median input size: a rule that weighs them otherwise is replayed on them,
    benchmarks/choice_replay.py)."""
    for cfg in choosing:
        cfg.extra["ort_mode_chosen"] = cfg.session.mode
        cfg.extra["warm_up_rounds"] = warm_up_rounds
        explored = cfg.session.exploration
        rounds = [r for r in explored.rounds if r]
        times = explored.times()  # one fit of the size trend serves the figures below
        cfg.extra["explored"] = {
            "typical_us": mode_choice.typical_calls(rounds),
            "median_us": choice_stats.medians(times),
            "mean_us": choice_stats.means(times),
            "rounds": rounds,
            "live": explored.live,
            "samples_us": {m: [round(float(t), 2) for t in calls] for m, calls in times.items()},
        }


def best_mode(cfgs: list[Config]) -> Config | None:
    """The original in the ORT mode with the lowest median so far."""
    return min((c for c in cfgs if c.samples and c.label in ort_modes.MODES), key=Config.median, default=None)


@dataclass(frozen=True)
class Judged:
    """A hexfuse session against the best ORT mode: its ratio interval, whether stock ORT runs the
    original's graph in that mode for it (the ratio is then an A/A comparison), and the verdict."""

    ratio: tuple[float, float, float] | None
    by_construction: bool
    target: float
    verdict: str


def judge(
    cfg: Config, best: Config | None, mode: str | None, graph_diff: str | None, target: float, level: float
) -> Judged:
    ratio = interleaved.ratio_interval(cfg, best, level=level) if best and cfg.samples else None
    construction = ratio is not None and graph_diff is None and best is not None and mode == best.label
    return Judged(ratio, construction, target, "met" if construction else interval_verdict(ratio, target))


def settles(verdicts: Iterable[Judged], first_look: bool) -> bool:
    """Whether a look ends the timing: every verdict met or NOT met by its interval. A verdict met by
    construction (the session runs the original's graph in the mode measured best) ends it at the first
    look only, where one look would have ended anyway: which mode measures best changes from look to
    look, and stopping at a later one where it happened to match the chosen mode would pick the noise."""
    return all(
        interval_verdict(j.ratio, j.target) in ("met", "NOT met") or (first_look and j.by_construction)
        for j in verdicts
    )


def look_rounds(first: int, most: int) -> list[int]:
    """The rounds after which (c) looks at its verdicts: `first`, then doubling, then `most`
    (--resolve-rounds; 0 or at most `first`: `first` alone)."""
    looks = [first]
    while looks[-1] * 2 <= most:
        looks.append(looks[-1] * 2)
    return looks + [most] if most > looks[-1] else looks


def interval_level(looks: list[int]) -> float:
    """Every look's interval level: 95% split over the looks (Bonferroni), so that stopping at the
    first look where no verdict is unresolved keeps a wrong verdict at 5% or less."""
    return 1.0 - 0.05 / len(looks)


def _looked_text(looks: list[int], level: float, rounds: int) -> str:
    """`, 98.75% interval, 60 rounds` where the timing had several looks (--resolve-rounds), else nothing."""
    return f", {100 * level:.2f}% interval, {rounds} rounds" if len(looks) > 1 else ""


def tuned_target_of(kept: list[str]) -> float:
    """The tuned model's target: PAIR_TARGET where tune kept a pair, else DEFAULTS_TARGET."""
    return PAIR_TARGET if kept else DEFAULTS_TARGET


def interval_verdict(r: tuple[float, float, float] | None, target: float) -> str:
    """met: the whole 95% interval at or under the target; NOT met: all of it above; else unresolved."""
    if r is None:
        return "not timed"
    return "met" if r[2] <= target else "NOT met" if r[1] > target else "unresolved"


def _ci(r: tuple[float, float, float]) -> str:
    """A median ratio and its 95% interval."""
    return f"{r[0]:.3f}x [{r[1]:.3f}, {r[2]:.3f}]"


def run_defaults(
    args, root: Path, earlier: dict[str, dict[str, Any]], save: Callable[[list[dict[str, Any]]], None]
) -> list[dict[str, Any]]:
    """(c) for every model; a model `earlier` holds (--resume) is taken as it was timed. `save` gets the results
    after each model: a run of hours that stops keeps what it timed."""
    print(
        f"\nDrop-in: rewritten (target {args.target}, every lowerable pair kept) with "
        f"hexfuse_onnx.InferenceSession's defaults / best ORT mode of the original (target <= {DEFAULTS_TARGET:.2f}x)"
    )
    results: list[dict[str, Any]] = []
    for name in args.models or default_models():
        if name in earlier:
            results.append(earlier[name])
            print(f"  {name:<24} timed earlier in this run ({args.json}): not timed again")
            continue
        results.append(time_defaults(args, name, root))
        save(results)
    print_defaults_summary(results)
    return results


def time_defaults(args, name: str, root: Path) -> dict[str, Any]:
    """(c) for one model; an exception is printed with its traceback and recorded as `failed`: one model's
    failure does not lose the others' hours of figures."""
    t0 = time.perf_counter()
    try:
        r = bench_defaults(args, name, root / "defaults" / name)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        r = {"model": name, "failed": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
    r["wall_s"] = round(time.perf_counter() - t0, 1)  # rewrite, tune and timing: what a full run costs
    r["commit"] = code_commit()  # a resumed run's models may come from several
    if "failed" in r:
        print(f"  {name:<24} FAILED: {r['failed']}")
    elif "skipped" in r:
        print(f"  {name:<24} skipped: {r['skipped'][:300]}")
    else:
        print(f"      {r['wall_s']:.0f} s for this model (rewrite, tune, timing)")
    return r


@functools.cache
def code_commit() -> str:
    """The checkout's commit, `+changes` when its tracked files differ from it; `unknown` outside git."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "-uno"], cwd=here, capture_output=True, text=True)
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def print_defaults_summary(results: list[dict[str, Any]]) -> None:
    failed = [r["model"] for r in results if "failed" in r]
    if failed:
        print(f"  FAILED (traceback above): {', '.join(failed)}")
    commits = sorted({r.get("commit", "not recorded") for r in results})
    if len(commits) > 1:
        counts = ", ".join(f"{c} ({sum(r.get('commit', 'not recorded') == c for r in results)})" for c in commits)
        print(f"  models timed on several checkouts (--resume): {counts}")
    timed = [r for r in results if r.get("defaults_over_best_ort") is not None]
    if not timed:
        return
    worst = max(timed, key=lambda r: r["defaults_over_best_ort"][0])
    print(
        f"  {sum(r['met'] for r in timed)}/{len(timed)} timed models at or under {DEFAULTS_TARGET:.2f}x "
        "(the whole interval, 95% over its looks, or the original's graph in the best mode); "
        f"worst {worst['model']} {_ci(worst['defaults_over_best_ort'])} (untuned)"
    )
    tuned = [r for r in timed if r.get("tuned_defaults_over_best_ort") is not None]
    if tuned:
        worst = max(tuned, key=lambda r: r["tuned_defaults_over_best_ort"][0])
        print(
            f"  tuned here: {sum(r['tuned_met'] for r in tuned)}/{len(tuned)} at or under their target "
            f"({PAIR_TARGET:.2f}x with kept pairs, else {DEFAULTS_TARGET:.2f}x); worst {worst['model']} "
            f"{_ci(worst['tuned_defaults_over_best_ort'])}"
        )
    twins = [
        (abs(r["aa_twin"]["ratio"][0] - 1), r["model"], r["aa_twin"]["ratio"]) for r in timed if r["aa_twin"]["ratio"]
    ]
    if twins:
        _, model, r = max(twins)
        print(f"  A/A control (a twin session of the same mode): widest {model} {_ci(r)}")


RESUME_SETTINGS = (
    "target",
    "seed",
    "tol",
    "defaults_rounds",
    "tune_runs",
    "tune_rounds",
    "budget",
    "resolve_rounds",
    "resolve_budget",
)


def settings(args) -> dict[str, Any]:
    """The options a model's figures depend on: a resumed run must have the same."""
    return {k: getattr(args, k) for k in RESUME_SETTINGS}


def resumable(path: Path, wanted: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The models an earlier --defaults run wrote to `path` timed or skipped (a failed one is timed again),
    by name; ValueError, in one line, when it ran with other settings or is not such a file."""
    try:
        doc = json.loads(path.read_text())
        done, had = doc["defaults"], doc["settings"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a host_pairs --defaults JSON to resume ({type(exc).__name__}: {exc})") from None
    other = {k: (had.get(k), v) for k, v in wanted.items() if had.get(k) != v}
    if other:
        diff = ", ".join(f"{k} {a!r} there, {b!r} here" for k, (a, b) in other.items())
        raise ValueError(f"{path}: written with other settings ({diff}); resume with the same")
    return {r["model"]: r for r in done if "failed" not in r}


def print_summary(results: list[dict[str, Any]]) -> None:
    """One line per pair and per whole model: the figures the targets are about."""
    print("\nSummary (medians in us; ratio = plugin / best ORT mode, same rounds)")
    print(
        f"  {'model / pair':<42} {'best ORT':>16} {'plugin @model':>14} {'plugin @best':>18} {'ratio':>6}  "
        f"{'target':<8} {'m/v overlap':>11}  verdict"
    )
    print(f"  {'':<42} {'':>16} {'':>14} {'':>18} {'':>6}  {'':<8} {'(run, >0 in)':>11}")
    for m in results:
        if "skipped" in m:
            print(f"  {m['model']:<42} skipped: {m['skipped'][:90]}")
            continue
        for p in m["pairs"]:
            label = f"{m['model']} {p['pair']} ({p.get('kind')})"
            r = p.get("ratios")
            if p.get("skipped") or not r:
                print(f"  {label:<42} {p.get('skipped') or 'not timed (a configuration was refused)'}")
                continue
            cfgs = p["configs"]
            bo = cfgs[r["best_ort"]]["median_us"]
            at_m = next((v for k, v in cfgs.items() if "model share" in k), {}).get("median_us", float("nan"))
            at_b = next((v for k, v in cfgs.items() if "best share" in k), {}).get("median_us", float("nan"))
            tr = p["traces"].get(f"{p['best_share_a']:.2f}") or {}
            ov = tr.get("pct_of_kernel_wall", {}).get("matrix_vector_overlap", float("nan"))
            ov_runs = f"{tr.get('runs_with_matrix_vector_overlap', '?')}/{tr.get('traced_runs', '?')}"
            verdict = ("met" if r["met"] else "NOT met") if r["complementary"] else "n/a (not complementary)"
            best_ratio = r["plugin_best_share_over_best_ort"]
            print(
                f"  {label:<42} {bo:8.1f} {r['best_ort']:>7} {at_m:14.1f} {at_b:10.1f} @{p['best_share_a']:.2f}   "
                f"{best_ratio:5.2f}x  <={PAIR_TARGET:.2f}x  {ov:4.0f}% {ov_runs:>6}  {verdict}"
            )
        w = m["whole"]
        r = w.get("ratio")
        label = f"{m['model']} whole model"
        if not r:
            print(f"  {label:<42} not timed (a configuration was refused)")
            continue
        bo = w["configs"][r["best_ort"]]["median_us"]
        bp = w["configs"][r["plugin"]]["median_us"]
        tuned = r.get("best_shares_over_best_ort")
        tuned_txt = f"; {tuned:.2f}x with best shares" if tuned else ""
        print(
            f"  {label:<42} {bo:8.1f} {r['best_ort']:>7} {bp:14.1f} {r['plugin']:>18}   "
            f"{r['plugin_over_best_ort']:5.2f}x  <={MODEL_TARGET:.2f}x  {'':>11}  "
            f"{'met' if r['met'] else 'NOT met'}{tuned_txt}"
        )


def _short(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for o in ops:
        counts[o] = counts.get(o, 0) + 1
    return ",".join(f"{o}x{k}" if k > 1 else o for o, k in counts.items())


def _shares(text: str) -> list[float]:
    try:
        vals = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --shares {text!r}") from None
    if not vals or any(not 0.0 <= v <= 1.0 for v in vals):
        raise argparse.ArgumentTypeError("--shares must be numbers in [0, 1]")
    return vals


def json_doc(
    args,
    blas: dict[str, Any],
    results: list[dict[str, Any]],
    defaults: list[dict[str, Any]],
    seconds: float,
    cpu_use: Any,
) -> dict[str, Any]:
    """Every figure of the run so far; `cpu_use` None until the run has ended."""
    return {
        "argv": sys.argv,
        "runs": args.runs,
        "sweep_runs": args.sweep_runs,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "settings": settings(args),  # target, seed, tol and (c)'s options
        "complete": cpu_use is not None,
        "onnxruntime": ort.__version__,
        "cpus": os.cpu_count(),
        "blas": blas,
        "seconds": seconds,
        "cpu_use": cpu_use,
        "models": results,
        "defaults": defaults,
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Atomically: a run stopped while writing keeps the previous file."""
    modelio.write_text(path, json.dumps(doc, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="timed runs per configuration (default 50)")
    ap.add_argument("--sweep-runs", type=int, default=None, help="timed runs per share in the sweep (default runs/2)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before each block (default 3)")
    ap.add_argument("--rounds", type=int, default=5, help="blocks per configuration, alternated (default 5)")
    ap.add_argument(
        "--models", default=None, help=f"comma-separated zoo models (default all: {','.join(models.BUILDERS)})"
    )
    ap.add_argument(
        "--shares", type=_shares, default=_shares(DEFAULT_SHARES), help=f"share_a sweep (default {DEFAULT_SHARES})"
    )
    ap.add_argument("--target", default="hexagon-v73", help="cost-model target of the rewrite (default hexagon-v73)")
    ap.add_argument(
        "--workers", type=int, default=None, help="HEXFUSE_WORKERS for the process-wide pool (default: the kernel's)"
    )
    ap.add_argument(
        "--trace-runs",
        type=int,
        default=21,
        help="traced runs per traced configuration; the median-wall one is shown (default 21)",
    )
    ap.add_argument("--tol", type=float, default=1e-4, help="max relative error against ORT (default 1e-4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    ap.add_argument("--keep", type=Path, default=None, help="keep the generated models in this folder")
    ap.add_argument("--tune-runs", type=int, default=20, help="(c): runs per configuration of `tune` (default 20)")
    ap.add_argument("--tune-rounds", type=int, default=4, help="(c): rounds of `tune` (default 4)")
    ap.add_argument(
        "--defaults-rounds",
        type=int,
        default=200,
        help="(c): rounds, each one visit per configuration in a shuffled order (default 200)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="(c): fewer --defaults-rounds (at least 8) where they would take longer than this, and tune's "
        "--budget (default 0: every round here, tune's own default there)",
    )
    ap.add_argument(
        "--resolve-rounds",
        type=int,
        default=0,
        metavar="N",
        help="(c): where a verdict is unresolved after --defaults-rounds, time on, looking again at twice the "
        "rounds, up to N; every look's interval is 95%% split over the looks (default 0: one look)",
    )
    ap.add_argument(
        "--resolve-budget",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="(c) with --resolve-rounds: the timing's budget in place of --budget (tune keeps --budget; default 600)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="(c) with --json: take the models the --json file of an earlier run with the same settings timed, "
        "time the rest (the file is written after every model)",
    )
    ap.add_argument(
        "--defaults",
        action="store_true",
        help="only (c): every zoo builder and cached real model with hexfuse_onnx.InferenceSession's defaults",
    )
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    args.sweep_runs = args.sweep_runs or max(5, args.runs // 2)
    names = [m.strip() for m in args.models.split(",")] if args.models else list(models.BUILDERS)
    known = default_models() if args.defaults else list(models.BUILDERS)
    unknown = [m for m in names if m not in known]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    args.models = names if args.models else None
    if args.resume and not (args.defaults and args.json):
        ap.error("--resume needs --defaults and --json")
    earlier: dict[str, dict[str, Any]] = {}
    if args.resume and args.json.exists():
        try:
            earlier = resumable(args.json, settings(args))
        except ValueError as exc:
            ap.error(str(exc))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
    if args.workers is not None:
        os.environ[runtime.ENV_WORKERS] = str(args.workers)
    os.environ.pop(runtime.ENV_TRACE, None)
    try:
        runtime.library_path()
    except runtime.RuntimeUnavailable as exc:
        print(f"host_pairs: {exc}", file=sys.stderr)
        return 1

    blas = blas_info()
    print("host_pairs: FusedHexPair plugin (host backend) vs ONNX Runtime, times in microseconds")
    print(
        f"  python {platform.python_version()}, onnxruntime {ort.__version__}, onnx {onnx.__version__}, "
        f"{os.cpu_count()} CPU(s), {platform.processor() or platform.machine()}"
    )
    removed = blas["removed_env"]
    print(
        f"  OpenBLAS tuning variables: {'removed by re-exec (' + removed + ')' if removed else 'not set'}; "
        f"now {blas['env_now']}"
    )
    ob = blas["plugin_openblas"]
    if "corename" in ob:
        print(f"  plugin BLAS: {ob['path']}: core type {ob['corename']} ({ob['config']})")
    else:
        print(f"  plugin BLAS: {ob['error']}")
    if blas["threadpoolctl"] is None:
        print("  threadpoolctl: not installed (core type read from OpenBLAS directly)")
    else:
        for d in blas["threadpoolctl"]:
            print(
                f"  threadpoolctl: {d['internal_api']} {d['version']} {d['architecture']} "
                f"threads {d['num_threads']} {d['filepath']}"
            )
    print(
        f"  runs {args.runs} (sweep {args.sweep_runs}) in {args.rounds} alternating rounds, warm-up {args.warmup} "
        f"per block; check: relative error <= {args.tol:g} against ort-seq"
    )

    t_start = time.perf_counter()
    meter = CpuMeter()
    root = Path(tempfile.mkdtemp(prefix="host_pairs."))
    # a fresh cache: every run's sessions choose ORT's mode at run time themselves (mode_choice)
    os.environ[mode_cache.ENV_CACHE] = str(root / "ort_modes.json")
    results: list[dict[str, Any]] = []
    defaults: list[dict[str, Any]] = []

    def save(so_far: list[dict[str, Any]]) -> None:
        if args.json:
            write_json(args.json, json_doc(args, blas, results, so_far, time.perf_counter() - t_start, None))

    try:
        for name in [] if args.defaults else names:
            results.append(bench_model(args, name, root))
        defaults = run_defaults(args, root, earlier, save)
    finally:
        if args.keep:
            shutil.copytree(root, args.keep, dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
    if results:
        print_summary(results)
    mapped = mapped_blas_libraries()
    elapsed = time.perf_counter() - t_start
    cpu_use = meter.others()
    print(f"\nBLAS libraries mapped in this process: {', '.join(mapped) or 'none found'}")
    print(load_text(cpu_use))
    print(f"total {elapsed:.1f} s")
    if args.json:
        doc = json_doc(args, blas, results, defaults, elapsed, cpu_use)
        doc["blas_mapped"] = mapped
        write_json(args.json, doc)
        print(f"wrote {args.json}")
    return 1 if any("failed" in r for r in defaults) else 0


if __name__ == "__main__":
    sys.exit(main())
