"""Per quantized model: pairs fused, candidates refused and why, and the plugin's worst error in
quantization steps against ONNX Runtime running the same quantized model.

    python benchmarks/quantized_pairs.py                      # every cached quantized model
    python benchmarks/quantized_pairs.py --models two_branch_qdq_u16u8,centerface_qop

No timing. A pair output that is an integer tensor (a QuantizeLinear's, a QLinear op's) is compared
in integer units (1 = one step); a float one made by a DequantizeLinear with a per-tensor scale in
steps of that scale; any other float one (a weight-only int8 model's) must be within the plugin's
1e-4 relative and counts 0. The rewrite verifies with the plugin (`--verify plugin`: a pair output
more than one step from ORT computing the pair's nodes on the inputs it saw is refused). Columns:
the pair outputs in place against ORT's run of the original (they drift with what the pairs before
them made), against ORT on the pair's own inputs (the bar), both on seeded inputs (seed 3, or the
worst of `--seeds`), and the graph outputs' distance from the original on the rewrite's verification
inputs. The fallback (stock ORT on the rewritten model) must equal the original bit for bit.
`--groups` also runs every QDQ group (DequantizeLinear inputs, the op, its QuantizeLinear; a QLinear
node alone) of every pair as a pair of its own on ORT's values of its integer inputs: the error each
group makes, before later groups of the same pair carry it on.

`--ort-exactness 1` only compares ORT's sessions (its defaults, MatMulNBits in f32, the
QDQSelectorActionTransformer off) with ORT_DISABLE_ALL on every QuantizeLinear output of each model;
`--ort-exactness N` ORT_DISABLE_ALL at 1 intra-op thread with MatMulNBits f32 at N (no rewrite).
`--model-groups` only runs every QDQ group of the whole model alone on the host kernel against ORT's
Q output on ORT's values of its inputs, per op type (where flips start). `--ort-self` only compares
ORT with itself on the same outputs, all sessions with MatMulNBits f32: ORT_ENABLE_ALL at 1 and 2
intra-op threads, ORT_ENABLE_BASIC, ORT_DISABLE_ALL at 2, each against ORT_DISABLE_ALL at 1 (worst
steps and elements off, over `--seeds`).

`--ort-threads` adds ORT against itself on the pair outputs: 1 intra-op thread against 2, 4, 6, 8
and 16. `--modelled` adds the modelled hexagon-v73 serial/fused time of the pairs the rewrite kept,
before (the documented HVX integer rates) and after grounding them under qemu. `--emulate` runs every pair of the
rewritten model under qemu (`python -m hexfuse_onnx emulate M --arch v73 --seed 3`): bit-exact
against the host kernel or not, and qemu's packets per pair, serial / fused. Inputs are seeded, at
the shapes the pass analysed.

Models: the QDQ zoo (models/quantized.py), centerface_qdq / centerface_qop (models/real.py's
derived models) and the models shipped quantized (quantized.SHIPPED_QUANTIZED), where cached. The
rewrite uses the default target (hexagon-v73) with the per-call overhead set to 0
(HEXFUSE_CALL_OVERHEAD_US, as the tests do): these small pairs would not pay for a modelled 100 us
call. The column after it: the pairs `rewrite` keeps at the target's own call overhead (stock ORT
verification only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hexfuse_onnx import contract as C  # noqa: E402
from hexfuse_onnx import costmodel, graph, pipeline, report, rewrite, runtime, verify  # noqa: E402
from hexfuse_onnx.errors import HexfuseError, VerificationError  # noqa: E402
from hexfuse_onnx.kinds import Candidate, Pair  # noqa: E402
from hexfuse_onnx.lowering import attach_programs, lower_function  # noqa: E402
from hexfuse_onnx.select import evaluate  # noqa: E402
from hexfuse_onnx.tools import emulate  # noqa: E402
from models import quantized, real  # noqa: E402
from models.qdq_analysis import steps_of  # noqa: E402

DERIVED = ("centerface_qdq", "centerface_qop", *quantized.SHIPPED_QUANTIZED)  # real models, int8 as made or shipped


def model_paths() -> dict[str, Path]:
    """Every quantized model cached on this machine, by name."""
    out = {name: p for name in quantized.MODELS if (p := quantized.cached_path(name)) is not None}
    for name in DERIVED:
        if (path := real.cached_path(name)) is not None:
            out[name] = Path(path)
    return out


def with_outputs(model: onnx.ModelProto, names: list[str]) -> bytes:
    """The model with these tensors added as graph outputs (typed by the pass's value_info)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    types = {v.name: v for v in list(m.graph.value_info) + list(m.graph.output)}
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(types[n] for n in names if n not in have)
    return m.SerializeToString()


# ONNX Runtime configurations the plugin is compared under (the plugin's session and the reference
# get the same one, so nodes outside the pairs compute alike): its defaults, and its defaults with
# com.microsoft MatMulNBits in f32, the reference `rewrite --verify plugin` holds the plugin to
# (verify.EXACT_QDQ_CONFIG). At its extended level ORT rewrites DQ(8-bit weight) + MatMul into
# MatMulNBits, whose default accuracy level 4 quantizes the activations to int8 blockwise: not what
# the QDQ model says, and hundreds of u16 steps away from it.
CONFIGS = {"default": {}, "matmulnbits f32": verify.EXACT_QDQ_CONFIG}


def _options(config: dict[str, str], plugin: bool) -> ort.SessionOptions:
    """One intra-op thread, as the verification runs ORT (verify.session): ORT's own results move with
    its thread count (whisper_encoder u16u8: 25 steps at 2 threads, `--ort-self`)."""
    so = runtime.session_options(backend="host") if plugin else ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    return so


def worst_steps(fused: onnx.ModelProto, typed: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, float]:
    """Per ORT configuration, the plugin's worst pair output error in quantization steps against
    ORT running the original."""
    pair_outputs = rewrite.pair_output_tensors(fused)
    fused_typed = onnx.ModelProto()
    fused_typed.CopyFrom(fused)
    fused_typed.graph.value_info.extend(v for v in typed.graph.value_info if v.name in pair_outputs)
    fused_bytes, typed_bytes = with_outputs(fused_typed, pair_outputs), with_outputs(typed, pair_outputs)
    steps = steps_of(typed)
    worst = {}
    for label, config in CONFIGS.items():
        plugin = ort.InferenceSession(fused_bytes, _options(config, True), providers=["CPUExecutionProvider"])
        want = ort.InferenceSession(typed_bytes, _options(config, False), providers=["CPUExecutionProvider"])
        names = [o.name for o in plugin.get_outputs() if o.name in pair_outputs]
        pairs = zip(names, want.run(names, feeds), plugin.run(names, feeds))
        worst[label] = max((_steps(n, r, g, steps) for n, r, g in pairs), default=0.0)
    return worst


def in_place_steps(fused: Path, src: Path, typed: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> float:
    """The plugin's worst pair output error in steps against ORT computing the pair's own nodes on
    the inputs the pair saw in the plugin's run (`--verify plugin`'s bar: verify.shadow_model)."""
    made = rewrite.pair_output_tensors(onnx.load(fused, load_external_data=False))
    case = verify.Case("seed 3", feeds, [], [])
    run = verify.run_cases(fused, [case], _options(verify.EXACT_QDQ_CONFIG, True), made)[0]
    model, renamed = verify.shadow_model(onnx.load(src), made, {t: run.inner[t].dtype for t in made})
    shadow = ort.InferenceSession(model, _options(verify.EXACT_QDQ_CONFIG, False), providers=["CPUExecutionProvider"])
    own = shadow.run(list(renamed.values()), {**feeds, **run.inner})
    steps = steps_of(typed)
    return max((_steps(t, r, run.inner[t], steps) for t, r in zip(made, own)), default=0.0)


# intra-op thread counts ORT's own run of the original is compared at, against 1 thread (`--ort-threads`)
THREADS = (2, 4, 6, 8, 16)


def ort_spread(fused: onnx.ModelProto, typed: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[int, float]:
    """ORT against itself on the pair outputs: the worst difference in steps between its run of the
    original at 1 intra-op thread and at each of THREADS (MatMulNBits in f32). MLAS sums a GEMM in K
    blocks that follow its thread split, so this is how far "ORT's result" moves with the machine."""
    pair_outputs = rewrite.pair_output_tensors(fused)
    typed_bytes, steps = with_outputs(typed, pair_outputs), steps_of(typed)

    def run(threads: int) -> list[np.ndarray]:
        so = _options(CONFIGS["matmulnbits f32"], False)
        so.intra_op_num_threads = threads
        return ort.InferenceSession(typed_bytes, so, providers=["CPUExecutionProvider"]).run(pair_outputs, feeds)

    one = run(1)
    return {
        t: max((_steps(n, r, g, steps) for n, r, g in zip(pair_outputs, one, run(t))), default=0.0) for t in THREADS
    }


# ORT sessions compared with ORT_DISABLE_ALL (every node as written) by `--ort-exactness`
EXACTNESS = {
    "default": {},
    "MatMulNBits f32": verify.EXACT_QDQ_CONFIG,
    "no QDQSelectorActionTransformer": {"optimization.disable_specified_optimizers": "QDQSelectorActionTransformer"},
}


def ort_exactness(src: Path, threads: int = 1) -> dict[str, float]:
    """Per ORT session in EXACTNESS, its worst difference in steps from ORT_DISABLE_ALL over every
    QuantizeLinear output of the model (seeds 0 and 3); with `threads`, ORT_DISABLE_ALL at 1 thread
    against the "MatMulNBits f32" session at that many (ORT's own spread)."""
    model = onnx.load(src)
    names = [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    data = verify.with_outputs(model, names)

    def run(config: dict[str, str] | None, feeds: dict[str, np.ndarray], n: int = 1) -> list[np.ndarray]:
        so = _options(config or {}, False)
        so.intra_op_num_threads = n
        if config is None:
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(names, feeds)

    configs = {k: (v, 1) for k, v in EXACTNESS.items()}
    if threads > 1:
        configs = {f"MatMulNBits f32, {threads} threads": (verify.EXACT_QDQ_CONFIG, threads)}
    worst = dict.fromkeys(configs, 0.0)
    for seed in (0, 3):
        feeds = verify.random_inputs(verify.session(data), seed=seed)
        written = run(None, feeds)
        for label, (config, n) in configs.items():
            got = run(config, feeds, n)
            worst[label] = max(
                [worst[label]]
                + [float(np.abs(w.astype(np.int64) - g.astype(np.int64)).max()) for w, g in zip(written, got)]
            )
    return worst


# ORT against itself (`--ort-self`): optimization level and intra-op threads of each session, all with
# MatMulNBits in f32 (verify.EXACT_QDQ_CONFIG), against ORT_DISABLE_ALL at 1 thread
LEVELS = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC}
SELF = {"all, 1 thread": ("all", 1), "all, 2": ("all", 2), "basic, 1": ("basic", 1), "disable, 2": (None, 2)}


def ort_self(src: Path, seeds: tuple[int, ...]) -> dict[str, tuple[float, int]]:
    """Per session of SELF, its worst difference in steps from ORT_DISABLE_ALL at 1 thread over every
    QuantizeLinear output of the model, and how many elements differ, over the seeds."""
    model = onnx.load(src)
    names = [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    data = verify.with_outputs(model, names)

    def run(level: str | None, threads: int, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        so = _options(verify.EXACT_QDQ_CONFIG, False)
        so.intra_op_num_threads = threads
        so.graph_optimization_level = LEVELS[level] if level else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(names, feeds)

    worst = dict.fromkeys(SELF, (0.0, 0))
    for seed in seeds:
        feeds = verify.random_inputs(verify.session(data), seed=seed)
        written = run(None, 1, feeds)
        for label, (level, threads) in SELF.items():
            diffs = [
                np.abs(w.astype(np.int64) - g.astype(np.int64)) for w, g in zip(written, run(level, threads, feeds))
            ]
            top = max([worst[label][0]] + [float(d.max()) for d in diffs if d.size])
            worst[label] = (top, worst[label][1] + sum(int((d > 0).sum()) for d in diffs))
    return worst


def _steps(name: str, ref: np.ndarray, got: np.ndarray, steps: dict[str, float]) -> float:
    diff = float(np.abs(ref.astype(np.float64) - got.astype(np.float64)).max())
    if np.issubdtype(ref.dtype, np.integer):
        return diff
    if name in steps:
        rounding = 2 * np.spacing(np.abs(ref)).astype(np.float64)  # f32 rounding of each (q - zp) * scale
        return (
            float(np.maximum(np.abs(ref.astype(np.float64) - got.astype(np.float64)) - rounding, 0).max()) / steps[name]
        )
    if verify.relative_error(ref, got) > pipeline.PLUGIN_RTOL:  # unquantized (weight-only int8): the plugin's bar
        raise AssertionError(f"{name}: a float pair output without a step differs by {diff}")
    return 0.0


def _groups(fn: onnx.FunctionProto | onnx.GraphProto) -> list[list[onnx.NodeProto]]:
    """The QDQ groups of a pair body: a compute op with the Constant / DequantizeLinear nodes that feed
    it and its QuantizeLinear; a QLinear op (integer in and out) alone."""
    made = {o: n for n in fn.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in fn.node:
        for t in n.input:
            readers.setdefault(t, []).append(n)
    out = []
    for n in fn.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear", "Constant"):
            continue
        if n.op_type.startswith("QLinear"):
            out.append([n])
            continue
        qs = [r for r in readers.get(n.output[0], []) if r.op_type == "QuantizeLinear"]
        feeds = [made[t] for t in n.input if t in made and made[t].op_type in ("DequantizeLinear", "Constant")]
        if qs:
            out.append([*feeds, n, qs[0]])
    return out


def _original_name(t: str, known: set[str]) -> str:
    """A body tensor's name in the original graph (a task's DequantizeLinear copy: `<name>__<tag>`)."""
    base = t.rsplit("__", 1)[0]
    return base if "__" in t and base in known else t


def _group_call(
    nodes: list[onnx.NodeProto], opsets: list, types: dict[str, onnx.TypeProto]
) -> tuple[onnx.NodeProto, onnx.FunctionProto]:
    """A one-task FusedHexPair over the group, its tensors named and typed as the graph's."""
    made = {o for n in nodes for o in n.output}
    inputs = list(dict.fromkeys(t for n in nodes for t in n.input if t and t not in made))
    outputs = [nodes[-1].output[0]]
    fn = onnx.helper.make_function(C.DOMAIN, C.OP_TYPE, inputs, outputs, nodes, opsets)
    fn.value_info.extend(onnx.helper.make_value_info(t, types[t]) for t in made if t in types)
    node = onnx.helper.make_node(
        C.OP_TYPE, inputs, outputs, domain=C.DOMAIN, num_inputs_a=len(inputs), num_outputs_a=1,
        num_nodes_a=len(nodes),
    )  # fmt: skip
    return node, fn


def worst_group(
    fused: onnx.ModelProto, typed: onnx.ModelProto, config: dict[str, str], feeds: dict[str, np.ndarray]
) -> float:
    """The worst error, in steps, of any one group of the pairs run alone on ORT's values of its inputs."""
    inits = {t.name: t for t in typed.graph.initializer}
    types = {v.name: v.type for v in list(typed.graph.value_info) + list(typed.graph.input) + list(typed.graph.output)}
    types.update({t.name: onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in inits.values()})
    opsets = list(fused.opset_import)
    groups = []
    for fn in fused.functions:
        for nodes in _groups(fn):
            copies = [onnx.NodeProto.FromString(n.SerializeToString()) for n in nodes]
            for n in copies:
                n.input[:] = [_original_name(t, set(types)) for t in n.input]
                n.output[:] = [_original_name(t, set(types)) for t in n.output]
            groups.append(_group_call(copies, opsets, types))
    wanted = sorted({t for node, _ in groups for t in [*node.input, *node.output] if t not in inits})
    values = _run_with_outputs(typed, wanted, config, feeds)
    arrays = {name: onnx.numpy_helper.to_array(t) for name, t in inits.items()}
    host, worst = runtime.HostKernel(), 0.0
    for node, fn in groups:
        program = lower_function(node, fn, inits, types, 21, fused.ir_version).program
        got = host.run(program, [values[t] if t in values else arrays[t] for t in node.input])[0]
        worst = max(worst, _steps(node.output[0], values[node.output[0]], got, {}))
    return worst


def model_groups(src: Path, seed: int) -> dict[str, list[int]]:
    """Every QDQ group of the whole model (not only the pairs') run alone on the host kernel on ORT's
    values of its inputs (MatMulNBits in f32, 1 thread), per compute op type: groups, groups one step
    or more off, elements off, worst steps; "<op> (not lowered)" counts the groups that do not lower.
    Where a pair's flips start, before its later groups carry them on."""
    g = graph.load(src)
    typed = onnx.load(src)
    typed.graph.value_info.extend(g.model.graph.value_info)
    inits = {t.name: t for t in typed.graph.initializer}
    types = {v.name: v.type for v in list(typed.graph.value_info) + list(typed.graph.input) + list(typed.graph.output)}
    types.update({t.name: onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in inits.values()})
    groups = [(*_group_call(nodes, list(typed.opset_import), types), nodes) for nodes in _groups(typed.graph)]
    feeds = verify.random_inputs(verify.session(src), g.binding.inputs if g.binding else None, seed=seed)
    wanted = sorted({t for node, _, _ in groups for t in [*node.input, *node.output] if t in types and t not in inits})
    values = _run_with_outputs(typed, wanted, verify.EXACT_QDQ_CONFIG, feeds)
    arrays = {name: onnx.numpy_helper.to_array(t) for name, t in inits.items()}
    host, stats = runtime.HostKernel(), {}
    for node, fn, nodes in groups:
        op = nodes[-2].op_type
        try:
            program = lower_function(node, fn, inits, types, 21, typed.ir_version).program
            got = host.run(program, [values[t] if t in values else arrays[t] for t in node.input])[0]
        except (HexfuseError, KeyError):
            stats.setdefault(f"{op} (not lowered)", [0, 0, 0, 0])[0] += 1
            continue
        off = np.abs(got.astype(np.int64) - values[node.output[0]].astype(np.int64))
        row = stats.setdefault(op, [0, 0, 0, 0])
        row[0], row[1], row[2] = row[0] + 1, row[1] + int(off.max(initial=0) > 0), row[2] + int((off > 0).sum())
        row[3] = max(row[3], int(off.max(initial=0)))
    return stats


def print_model_groups(names: list[str], seeds: tuple[int, ...]) -> int:
    paths = model_paths()
    for name in names:
        for seed in seeds:
            stats = model_groups(paths[name], seed)
            cells = [
                f"{op} {n} groups, {bad} off ({elems} elements, {top} steps)"
                for op, (n, bad, elems, top) in stats.items()
            ]
            print(f"{name}, seed {seed}: " + "; ".join(sorted(cells)), flush=True)
    return 0


def _run_with_outputs(
    typed: onnx.ModelProto, names: list[str], config: dict[str, str], feeds: dict[str, np.ndarray]
) -> dict:
    """The values of these tensors (graph inputs among them) on ORT's run of the original."""
    made = [n for n in names if n not in feeds]
    want = ort.InferenceSession(with_outputs(typed, made), _options(config, False), providers=["CPUExecutionProvider"])
    return {**{n: feeds[n] for n in names if n in feeds}, **dict(zip(made, want.run(made, feeds)))}


# hexagon-v73 as it was before its HVX integer rates were grounded under qemu: the document figures
# the emulated ones replaced (git show bcf3c31^:hexfuse_onnx/targets/hexagon-v73.json), no emulated
# class rates. The profile (8-bit Conv/MatMul on HVX) is today's in both.
DOCUMENTED = {
    "vector_int8_ops_per_context": costmodel.Param(256e9, "op/s", "modelled (document): vrmpy, 32 lanes x 4 MACs"),
    "vector_int16_ops_per_context": costmodel.Param(128e9, "op/s", "modelled (document): vmpyh-class, 64 MACs"),
}


def ungrounded(target: costmodel.Target) -> costmodel.Target:
    rates = tuple((k, p) for k, p in target.class_rates if not p.source.startswith("emulated"))
    return replace(target, name=f"{target.name}-ungrounded", class_rates=rates, **DOCUMENTED)


def modelled_us(analysis: pipeline.Analysis) -> dict[str, tuple[float, float]]:
    """Serial and fused time of the pairs the rewrite kept (verified), summed, at hexagon-v73 with
    its emulated HVX rates and with the documented ones they replaced. Not the pairs `analyse`
    chooses: verification drops or replaces some (maskseq u16u8: 15 chosen, 1 kept)."""
    grounded = costmodel.get_target("hexagon-v73")
    out = {}
    for label, target in (("before", ungrounded(grounded)), ("after", grounded)):
        pairs = [_at(scope, p.candidate, target) for scope in analysis.scopes() for p in scope.pairs]
        out[label] = (sum(p.prediction.serial for p in pairs) * 1e6, sum(p.prediction.fused for p in pairs) * 1e6)
    return out


def _at(scope: pipeline.Analysis, candidate: Candidate, target: costmodel.Target) -> Pair:
    """The kept candidate's pair as the pass evaluates it at `target` (its best share there)."""
    pair = evaluate(scope.graph, scope.profile, candidate, target)
    if not isinstance(pair, Pair):
        raise AssertionError(f"a kept {candidate.kind} pair ({candidate.note}) is refused at {target.name}: {pair}")
    return pair


def pairs_at_default_overhead(src: Path, out_dir: Path) -> int:
    """How many pairs `rewrite` keeps at the target's own per-call overhead (verified on stock ORT)."""
    saved = os.environ.pop(costmodel.CALL_OVERHEAD_ENV, None)
    try:
        return len(pipeline.rewrite(src, out_dir / "default-overhead.onnx", rtol=0.0).analysis.pairs)
    except VerificationError:  # a pair that passes alone fails in the whole model, the only one left
        return 0
    finally:
        if saved is not None:
            os.environ[costmodel.CALL_OVERHEAD_ENV] = saved


def _packets(n: int) -> str:
    return f"{n / 1e3:.0f} k" if n < 1e6 else f"{n / 1e6:.2f} M"


def emulated(fused: Path) -> tuple[str, str]:
    """Every pair under qemu 10 (-cpu v73, seed 3) against the host kernel: whether all are bit-exact
    (else how far), and qemu's packets per pair, serial / fused."""
    try:
        _, results = emulate.emulate(fused, "v73", seed=3)
    except HexfuseError as exc:
        return f"fails: {exc.message}", "-"
    results = [r for r in results if r.reached]  # a pair in a branch the inputs do not take has no figures
    exact = sum(r.bit_exact for r in results)
    if exact == len(results) and all(r.ok for r in results):
        verdict = "yes"
    else:
        worst = max((o.rel if o.rel != float("inf") else o.max_abs) for r in results for o in r.outputs)
        bad = [r.name for r in results if not r.ok]
        verdict = f"{exact} of {len(results)} bit-exact, worst {worst:.2g}" + (f"; MISMATCH {bad}" if bad else "")
    runs = [(r.stats["runs"]["serial"], r.stats["runs"]["fused"]) for r in results]
    packets = "; ".join(f"{_packets(s['call_packets'])} / {_packets(f['call_packets'])}" for s, f in runs)
    return verdict, packets


def analyse(
    name: str,
    src: Path,
    out_dir: Path,
    groups: bool = False,
    modelled: bool = False,
    ort_threads: bool = False,
    emulate_pairs: bool = False,
    seeds: tuple[int, ...] = (3,),
) -> dict:
    row: dict = {"model": name, "pairs": 0, "refused": [], "steps": None, "pairs_default": None, "in_place": None}
    row["pairs_default"] = pairs_at_default_overhead(src, out_dir)
    try:
        result = pipeline.rewrite(src, out_dir / f"{name}.fused.onnx", rtol=0.0, verify_plugin=True)
    except VerificationError as exc:  # a pair that passes alone fails in the whole model, the only one left
        return {**row, "refused": [exc.message]}
    row.update(pairs=len(result.analysis.pairs), refused=report.rejection_lines(result.analysis.rejected))
    if modelled:
        row["modelled"] = modelled_us(result.analysis)
    if result.output is None:
        return row
    fused, failed = attach_programs(onnx.load(result.output))
    if failed:
        row["refused"].append(f"no program: {failed}")
    typed = onnx.load(src)
    typed.graph.value_info.extend(result.analysis.graph.model.graph.value_info)
    original, stock = verify.session(src), verify.session(result.output)
    binding = result.analysis.graph.binding  # symbolic dims: where the pass analysed and verified
    for seed in seeds:
        feeds = verify.random_inputs(original, binding.inputs if binding else None, seed=seed)
        for r, g in zip(original.run(None, feeds), stock.run(None, feeds)):
            if not np.array_equal(r, g, equal_nan=True):
                raise AssertionError(f"{name}: the fallback differs from the original")
        steps = worst_steps(fused, typed, feeds)
        row["steps"] = {k: max(v, (row["steps"] or {}).get(k, 0.0)) for k, v in steps.items()}
        row["in_place"] = max(row["in_place"] or 0.0, in_place_steps(result.output, src, typed, feeds))
    assert result.comparison is not None
    row["outputs"] = max((result.comparison.plugin_steps or {}).values(), default=0.0)
    if groups:
        row["group"] = worst_group(fused, typed, CONFIGS["matmulnbits f32"], feeds)
    if ort_threads:
        row["ort"] = ort_spread(fused, typed, feeds)
    if emulate_pairs:
        row["emulate"] = emulated(result.output)
    return row


def _us(modelled: dict[str, tuple[float, float]]) -> str:
    return " -> ".join(f"{serial:.1f}/{fused:.1f}" for serial, fused in modelled.values())


def print_exactness(names: list[str], threads: int) -> int:
    paths = model_paths()
    for name in names:
        worst = ort_exactness(paths[name], threads)
        print(f"{name}: " + "; ".join(f"{label} {steps:.0f}" for label, steps in worst.items()), flush=True)
    return 0


def print_self(names: list[str], seeds: tuple[int, ...]) -> int:
    paths = model_paths()
    for name in names:
        worst = ort_self(paths[name], seeds)
        cells = "; ".join(f"{label} {top:.0f} ({n} elements)" for label, (top, n) in worst.items())
        print(f"{name}: {cells}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated names (default: every cached quantized model)")
    ap.add_argument("--groups", action="store_true", help="also the worst error of any one QDQ group, run alone")
    ap.add_argument("--modelled", action="store_true", help="also modelled v73 us before/after grounding HVX rates")
    ap.add_argument("--ort-threads", action="store_true", help="also ORT against itself at 1 and more threads")
    ap.add_argument("--emulate", action="store_true", help="also every pair under qemu (v73, seed 3): exact, packets")
    ap.add_argument(
        "--seeds", default="3", help="comma-separated input seeds; the error columns give the worst (default: 3)"
    )
    ap.add_argument(
        "--ort-exactness",
        type=int,
        metavar="THREADS",
        help="only ORT against ORT_DISABLE_ALL on every QuantizeLinear output (1), or ORT's own spread at THREADS",
    )
    ap.add_argument(
        "--ort-self",
        action="store_true",
        help="only ORT against itself: levels all/basic, 1 and 2 threads, against ORT_DISABLE_ALL at 1 thread",
    )
    ap.add_argument(
        "--model-groups",
        action="store_true",
        help="only every QDQ group of the whole model alone on the host kernel against ORT, per op type",
    )
    args = ap.parse_args(argv)
    seeds = tuple(int(v) for v in args.seeds.split(","))
    if args.model_groups:
        return print_model_groups(args.models.split(",") if args.models else sorted(model_paths()), seeds)
    if args.ort_self:
        return print_self(args.models.split(",") if args.models else sorted(model_paths()), seeds)
    if args.ort_exactness:
        return print_exactness(args.models.split(",") if args.models else sorted(model_paths()), args.ort_exactness)
    os.environ.setdefault("HEXFUSE_CALL_OVERHEAD_US", "0")  # the zoo's small pairs: count fusion, not the call
    paths = model_paths()
    names = args.models.split(",") if args.models else sorted(paths)
    head = "| model | pairs | pairs at the default call overhead | refused candidates (why: op, count) |"
    head += " plugin vs ORT, steps (default / MatMulNBits f32) |"
    head += " vs ORT on the pair's own inputs, steps | graph outputs vs the original (verification inputs), steps |"
    head += " emulate v73: bit-exact | qemu packets per pair, serial / fused |" if args.emulate else ""
    head += " worst group alone, steps |" if args.groups else ""
    head += " modelled v73 serial/fused us, before -> after grounding |" if args.modelled else ""
    head += f" ORT 1 thread vs {'/'.join(map(str, THREADS))}, steps |" if args.ort_threads else ""
    print(head)
    print("|---" * head.count(" |") + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name not in paths:
                print(f"| {name} | not cached | | | | | |")
                continue
            row = analyse(
                name, paths[name], Path(tmp), args.groups, args.modelled, args.ort_threads, args.emulate, seeds
            )
            steps = "-" if row["steps"] is None else " / ".join(f"{v:.0f}" for v in row["steps"].values())
            group = f" {row['group']:.0f} |" if "group" in row else (" - |" if args.groups else "")
            us = f" {_us(row['modelled'])} |" if "modelled" in row else ""
            spread = f" {'/'.join(f'{v:.0f}' for v in row['ort'].values())} |" if "ort" in row else ""
            spread = spread or (" - |" if args.ort_threads else "")
            qemu = "".join(f" {c} |" for c in row.get("emulate", ("-", "-"))) if args.emulate else ""
            own = "- | -" if row["in_place"] is None else f"{row['in_place']:.0f} | {row['outputs']:.0f}"
            cells = f"{steps} | {own} |{qemu}{group}{us}{spread}"
            refused = "; ".join(row["refused"]) or "-"
            print(f"| {name} | {row['pairs']} | {row['pairs_default']} | {refused} | {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
