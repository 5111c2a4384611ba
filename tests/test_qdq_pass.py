"""QDQ models through the pass: QuantizeLinear / DequantizeLinear ops of the kernel against ONNX
Runtime bit for bit, and the quantized zoo rewritten (stock ORT bit for bit, the plugin within one
quantization step of the original)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import pipeline, rewrite, runtime, verify
from hexfuse_onnx.lowering import attach_programs
from hexfuse_onnx.lowering.abi import Dtype, Engine, Opcode, QuantParam, Role, Task
from hexfuse_onnx.lowering.program import Op, Program, Tensor
from models import quantized
from models.qdq_analysis import steps_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(),
        reason=f"{runtime.LIB_DIR / runtime.PLUGIN_NAME} not built: run `bash custom_ops/build.sh`",
    ),
]

NP = {Dtype.U8: np.uint8, Dtype.I8: np.int8, Dtype.U16: np.uint16, Dtype.I16: np.int16}
SPECIAL = [0.25, 0.75, -0.25, -0.75, 1.25, -1.25, np.nan, np.inf, -np.inf, 1e30, -1e30, 63.75, -64.25, 0.0, -0.0]


def _ort_qdq(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """QuantizeLinear, then DequantizeLinear of the result, on stock ONNX Runtime."""
    zt = onnx.helper.np_dtype_to_tensor_dtype(zp.dtype)
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=axis),
    ]
    g = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [
            helper.make_tensor_value_info("q", zt, list(x.shape)),
            helper.make_tensor_value_info("d", TensorProto.FLOAT, list(x.shape)),
        ],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)  # 21: 16-bit types
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    q, d = s.run(None, {"x": x})
    return q, d


def _kernel_qdq(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int, dtype: Dtype) -> list[np.ndarray]:
    p = Program()
    ids = [
        p.add(Tensor(Dtype.F32, Role.INPUT, Task.A, list(x.shape), io=0)),
        p.add(Tensor(Dtype.F32, Role.INPUT, Task.A, list(scale.shape), io=1)),
        p.add(Tensor(dtype, Role.INPUT, Task.A, list(zp.shape), io=2)),
    ]
    q = p.add(Tensor(dtype, Role.OUTPUT, Task.A, list(x.shape), io=0))
    d = p.add(Tensor(Dtype.F32, Role.OUTPUT, Task.A, list(x.shape), io=1))
    param = [0] * 32
    param[QuantParam.AXIS] = axis if scale.size > 1 else 0
    p.ops.append(Op(Opcode.QUANTIZE_LINEAR, Engine.VECTOR, Task.A, ids, q, list(param)))
    p.ops.append(Op(Opcode.DEQUANTIZE_LINEAR, Engine.VECTOR, Task.A, [q, ids[1], ids[2]], d, list(param)))
    p.n_io = [3, 0, 2, 0]
    return runtime.HostKernel(workers=1).run(p.encode(), [x, scale, zp])


@pytest.mark.parametrize("dtype", [Dtype.U8, Dtype.I8, Dtype.U16, Dtype.I16], ids=["u8", "i8", "u16", "i16"])
@pytest.mark.parametrize("shape,axis", [((1027,), 0), ((3, 5, 7), 1), ((2, 16, 33, 31), 1), ((4, 9), 1)])
def test_quantize_dequantize_match_onnxruntime_bit_for_bit(dtype: Dtype, shape: tuple, axis: int) -> None:
    """Ties at .5, saturation at both ends, NaN and +-inf, odd sizes (ORT's scalar tail), per
    tensor (rank 1) and per axis."""
    rng = np.random.default_rng(7)
    info = np.iinfo(NP[dtype])
    x = rng.uniform(-200, 200, size=shape).astype(np.float32) * (256 if info.bits == 16 else 1)
    x.reshape(-1)[: len(SPECIAL)] = SPECIAL
    channels = 1 if len(shape) == 1 else shape[axis]
    scale = np.where(np.arange(channels) % 2 == 1, 0.5, rng.uniform(0.01, 2.0, channels)).astype(np.float32)
    zp = rng.integers(info.min, info.max + 1, channels).astype(NP[dtype])
    if channels == 1:
        scale, zp = scale.reshape(()), zp.reshape(())
    q_ref, d_ref = _ort_qdq(x, scale, zp, axis)
    q, d = _kernel_qdq(x, scale, zp, axis, dtype)
    assert q.dtype == q_ref.dtype and np.array_equal(q, q_ref)
    assert np.array_equal(d.view(np.uint32), d_ref.view(np.uint32))


# ---- the quantized zoo through the pass --------------------------------------------------------

# the u8u8 models with a candidate (mlp_chain, sequential_chain and ppocr_cls have none)
ZOO = [
    "two_branch_qdq_u8u8",
    "inception_qdq_u8u8",
    "mha_encoder_qdq_u8u8",
    "convnet_heads_qdq_u8u8",
    "gpt_decode_step_qdq_u8u8",
    "ppocr_det_qdq_u8u8",
    "ppocr_rec_qdq_u8u8",
    "centerface_qdq_u8u8",
]


def _with_outputs(model: onnx.ModelProto, names: list[str]) -> bytes:
    """The model with these tensors added as graph outputs (their types from shape inference)."""
    m = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v for v in list(m.graph.value_info) + list(m.graph.output)}
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(types[n] for n in names if n not in have)
    return m.SerializeToString()


def _steps(ref: np.ndarray, got: np.ndarray, step: float) -> float:
    return float(np.abs(ref.astype(np.float64) - got.astype(np.float64)).max()) / step


def _dequantized_steps(ref: np.ndarray, got: np.ndarray, step: float) -> float:
    """Steps between two DequantizeLinear outputs, less the f32 rounding of each (q - zp) * scale
    (one ulp of the value each: at u16 magnitudes that is up to 0.004 steps)."""
    diff = np.abs(ref.astype(np.float64) - got.astype(np.float64)) - 2 * np.spacing(np.abs(ref)).astype(np.float64)
    return float(np.maximum(diff, 0).max()) / step


# the u16u8 models with a candidate but ppocr_det: its pair of 94 groups is 5 steps from ORT at most,
# every group alone within 1 (benchmarks/quantized_pairs.py --groups): a 1-step flip of one group's
# f32 op carries on through the later groups of the same pair
ZOO16 = [n.replace("u8u8", "u16u8") for n in ZOO if not n.startswith("ppocr_det")]
# ORT rewrites DQ(u8 weight) + MatMul into MatMulNBits, by default with int8 activations: hundreds of
# u16 steps from what the QDQ model says. Both sessions compute it in f32 here, as --verify plugin does.
MATMULNBITS_F32 = verify.EXACT_QDQ_CONFIG


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ZOO])
def test_quantized_zoo_fuses_and_matches(name: str, tmp_path: Path) -> None:
    """Every pair's outputs (QuantizeLinear results) on the plugin are within one step of stock ORT's
    run of the original; the model outputs are printed in steps of their final DequantizeLinear."""
    _fuses_and_matches(name, tmp_path, {})


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ZOO16])
def test_sixteen_bit_zoo_fuses_and_matches(name: str, tmp_path: Path) -> None:
    """The same for u16 activations (v2 programs, the f32 op between Q and DQ), ORT's MatMulNBits in f32,
    rewritten with the plugin verified: f32 Conv sums one step from MLAS's grow along a pair (centerface's
    micro-batch chains of up to 19 groups were 29 steps off unverified; 15 of its 17 pairs are refused)."""
    _fuses_and_matches(name, tmp_path, MATMULNBITS_F32, verify_plugin=True, max_steps=U16_UNSEEN_INPUT_STEPS)


# rewrite refuses a u16 pair more than 1 step from ORT on its own inputs in the verification cases; on other inputs
# (seed 3 here) a 1-step flip of an f32 op can carry into the next group of the pair: centerface u16u8,
# 3 pairs since the QDQ ConvTranspose lowers (ac3a0dc), is 2 steps off there (1.9985), 2 on its outputs
U16_UNSEEN_INPUT_STEPS = 2


def _fuses_and_matches(
    name: str, tmp_path: Path, config: dict[str, str], verify_plugin: bool = False, max_steps: float = 1
) -> None:
    if not quantized.base_available(name):
        pytest.skip(f"needs python -m models real fetch {quantized.get(name).base}")
    src = quantized.fetch(name)
    result = pipeline.rewrite(src, tmp_path / "fused.onnx", rtol=0.0, verify_plugin=verify_plugin)
    pairs = result.analysis.pairs
    assert result.output is not None and pairs, f"{name}: no pair fused"
    fused, failed = attach_programs(onnx.load(result.output))
    assert failed == {}, failed
    pair_outputs = rewrite.pair_output_tensors(fused)  # a micro-batch pair's: the whole tensors
    original = verify.session(src)
    feeds = verify.random_inputs(original, seed=3)
    ref = original.run(None, feeds)
    stock = verify.session(result.output).run(None, feeds)
    for r, g in zip(ref, stock):  # the fallback is the original nodes
        assert np.array_equal(r, g, equal_nan=True)
    node = lambda n: (n.domain, n.op_type, tuple(n.input), tuple(n.output))  # noqa: E731
    restored = rewrite.unfuse(onnx.load(result.output))  # without the tasks' copies of shared DQs
    assert sorted(map(node, restored.graph.node)) == sorted(map(node, onnx.load(src).graph.node))
    so, ref_so = runtime.session_options(backend="host"), ort.SessionOptions()
    so.log_severity_level = 3
    for key, value in config.items():
        so.add_session_config_entry(key, value)
        ref_so.add_session_config_entry(key, value)
    types = [v for v in result.analysis.graph.model.graph.value_info if v.name in pair_outputs]  # contrib Q's
    original_model = onnx.load(src)
    for m in (fused, original_model):
        m.graph.value_info.extend(types)
    plugin = ort.InferenceSession(_with_outputs(fused, pair_outputs), so, providers=["CPUExecutionProvider"])
    want = ort.InferenceSession(_with_outputs(original_model, pair_outputs), ref_so, providers=["CPUExecutionProvider"])
    names = [o.name for o in want.get_outputs()]
    got_all, ref_all = plugin.run(names, feeds), want.run(names, feeds)
    got = dict(zip(names, got_all))
    # the bar of --verify plugin: each pair output against ORT computing the pair's nodes on the
    # inputs it saw in the plugin's run (the original with the plugin's pair outputs fed in)
    shadow_bytes, renamed = verify.shadow_model(onnx.load(src), pair_outputs, {t: got[t].dtype for t in pair_outputs})
    shadow = ort.InferenceSession(shadow_bytes, ref_so, providers=["CPUExecutionProvider"])
    own = dict(zip(pair_outputs, shadow.run(list(renamed.values()), {**feeds, **{t: got[t] for t in pair_outputs}})))
    steps = steps_of(onnx.load(src))
    graph_outputs = {o.name for o in original.get_outputs()}
    worst_pair, worst_in_place = 0.0, 0.0
    for n, r, g in zip(names, ref_all, got_all):
        if n in pair_outputs and np.issubdtype(r.dtype, np.integer):
            worst_pair = max(worst_pair, _steps(r, g, 1.0))
            worst_in_place = max(worst_in_place, _steps(own[n], g, 1.0))
        elif n in pair_outputs and n in steps:  # a pair's final DequantizeLinear
            worst_pair = max(worst_pair, _dequantized_steps(r, g, steps[n]))
            worst_in_place = max(worst_in_place, _dequantized_steps(own[n], g, steps[n]))
        elif n in pair_outputs:  # float data movement (a Reshape of a float graph input): exact
            assert np.array_equal(own[n], g), f"{name} {n}: a float pair output that differs"
        if n in graph_outputs and n in steps:
            print(f"{name} model output {n}: {_steps(r, g, steps[n]):.2f} steps")
    print(f"{name}: {len(pairs)} pair(s), worst pair output in place {worst_pair:.0f} step(s) from the original's,")
    print(f"  {worst_in_place:.0f} from ORT on the pair's own inputs")
    assert worst_in_place <= max_steps, f"{name}: a pair output is {worst_in_place} steps from ORT on its inputs"
    if not verify_plugin:  # u8 groups: bit for bit, the later pairs see the original's values too
        assert worst_pair <= max_steps, f"{name}: a pair output is {worst_pair} quantization steps from ONNX Runtime"


def _quantized_outputs(src: Path, options: ort.SessionOptions, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    model = onnx.load(src)
    names = [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    options.log_severity_level = 3
    s = ort.InferenceSession(verify.with_outputs(model, names), options, providers=["CPUExecutionProvider"])
    return s.run(names, feeds)


@pytest.mark.parametrize("name", ["two_branch_qdq_u16u8", "mha_encoder_qdq_u16u8"])
def test_exact_qdq_options_run_the_model_as_written(name: str) -> None:
    """The plugin's reference (verify.exact_qdq_options) equals ORT with no graph optimisation on
    every QuantizeLinear output, bit for bit; ORT's default session, whose MatMulNBits quantizes the
    activations to int8, is more than one step away from it."""
    src = quantized.fetch(name)
    feeds = verify.random_inputs(verify.session(src), seed=3)
    written = ort.SessionOptions()
    written.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = _quantized_outputs(src, written, feeds)
    exact = _quantized_outputs(src, verify.exact_qdq_options(), feeds)
    default = _quantized_outputs(src, ort.SessionOptions(), feeds)
    assert all(np.array_equal(w, e) for w, e in zip(want, exact))
    assert max(_steps(w, d, 1.0) for w, d in zip(want, default)) > 1


@pytest.mark.parametrize("name", ["two_branch_qdq_u16u8", "mha_encoder_qdq_u16u8"])
def test_plugin_verification_pairs_sixteen_bit_matmuls(name: str, tmp_path: Path) -> None:
    """`rewrite --verify plugin` on u16 models whose MatMul groups ORT turns into MatMulNBits: the
    plugin is held to ORT computing the QDQ model as written, and the pair passes (it was refused
    against ORT's int8 MatMulNBits); its outputs are within one step of that reference."""
    _fuses_and_matches(name, tmp_path, MATMULNBITS_F32, verify_plugin=True)


def test_sixteen_bit_pairs_fuse_as_v2_programs(tmp_path: Path) -> None:
    """u16 activations (com.microsoft Q/DQ): the pair lowers to a format v2 program with u16 tensors,
    and its outputs are within one step of ONNX Runtime's run of the QDQ model at basic
    optimizations. ORT's extended level rewrites DQ(u8 weight) + MatMul into MatMulNBits, which
    computes otherwise than the QDQ model says (up to hundreds of u16 steps here)."""
    name = "two_branch_qdq_u16u8"
    src = quantized.fetch(name)
    result = pipeline.rewrite(src, tmp_path / "fused.onnx", rtol=0.0)
    assert result.output is not None and len(result.analysis.pairs) == 1
    fused, failed = attach_programs(onnx.load(result.output))
    assert failed == {}, failed
    node = next(n for n in fused.graph.node if n.op_type == "FusedHexPair")
    program = next(a.s for a in node.attribute if a.name == "program")
    assert int.from_bytes(program[4:6], "little") == 2
    feeds = verify.random_inputs(verify.session(src), seed=3)
    so = runtime.session_options(backend="host")
    so.log_severity_level = 3
    outs = list(node.output)
    types = [v for v in result.analysis.graph.model.graph.value_info if v.name in outs]  # ONNX cannot type contrib Q
    original = onnx.load(src)
    for m in (fused, original):
        m.graph.value_info.extend(types)
    plugin = ort.InferenceSession(_with_outputs(fused, outs), so, providers=["CPUExecutionProvider"])
    basic = ort.SessionOptions()
    basic.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    want = ort.InferenceSession(_with_outputs(original, outs), basic, providers=["CPUExecutionProvider"])
    for n, r, g in zip(outs, want.run(outs, feeds), plugin.run(outs, feeds)):
        assert r.dtype == g.dtype == np.uint16, n
        assert _steps(r, g, 1.0) <= 1, f"{n}: {_steps(r, g, 1.0)} steps"


def test_profile_counts_a_qdq_group_at_its_integer_widths() -> None:
    """The Conv of a u8 group: int8 work and u8 activation bytes, vector work (the build runs it on
    HVX, there is no HMX code); the Q/DQ nodes QCONV2D and the other integer ops absorb cost nothing
    (branch qdqcharge), the others (the input's Q, the output's DQ) are vector work; the hexagon-v73
    model keeps a (sourced, modelled) HMX int8 rate for when there is, the host runs int8 matrix work
    at its float rate."""
    from hexfuse_onnx import costmodel, graph, profile
    from hexfuse_onnx.profile import Engine as EngineClass

    g = graph.load(quantized.fetch("inception_qdq_u8u8"))
    prof = profile.profile_graph(g)
    convs = [i for i, n in enumerate(g.nodes) if n.op_type == "Conv"]
    for i in convs:
        p, x = prof.nodes[i], g.info(g.nodes[i].input[0])
        assert p.int_bits == 8 and p.engine == EngineClass.VECTOR
        assert p.bytes_out == g.info(g.nodes[i].output[0]).numel  # u8: one byte an element
        assert p.bytes_in < x.numel * 4  # the activation at one byte, not four
    qdq_nodes = [i for i, n in enumerate(g.nodes) if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    absorbed = profile.kernel_plan(g).absorbed
    assert len(qdq_nodes) == 30 and len([i for i in qdq_nodes if i not in absorbed]) == 2
    assert all(prof.nodes[i].engine == EngineClass.NONE for i in qdq_nodes if i in absorbed)
    run = [prof.nodes[i] for i in qdq_nodes if i not in absorbed]
    assert all(p.engine == EngineClass.VECTOR and p.int_bits == 0 for p in run)
    v73, host = costmodel.get_target("hexagon-v73"), costmodel.get_target("host")
    assert v73.matrix_int8_ops is not None and "modelled" in v73.matrix_int8_ops.source
    assert v73.rate(EngineClass.MATRIX, 8) == v73.matrix_int8_ops.value > v73.rate(EngineClass.MATRIX, 0)
    assert v73.rate(EngineClass.VECTOR, 16) < v73.rate(EngineClass.VECTOR, 8)
    assert host.rate(EngineClass.MATRIX, 8) == host.matrix_flops.value


needs_hexagon_images = pytest.mark.skipif(
    not (Path(__file__).resolve().parents[1] / "build/hexagon-v73/hexfuse_emulate.elf").is_file(),
    reason="build the Hexagon images first: bash dsp/scripts/build_hexagon.sh",
)


@needs_hexagon_images
def test_a_qdq_pair_under_qemu_equals_the_host_kernel(tmp_path: Path) -> None:
    """inception u8u8's pair (integer convs, pools and concat, u8 outputs) under qemu-hexagon v73: bit for bit."""
    import json
    import shutil

    from cli_support import run_cli

    if shutil.which("qemu-hexagon") is None:
        pytest.skip("qemu-hexagon is not installed")
    result = pipeline.rewrite(quantized.fetch("inception_qdq_u8u8"), tmp_path / "fused.onnx")
    assert result.output is not None
    report = tmp_path / "emu.json"
    proc = run_cli("emulate", result.output, "--arch", "v73", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(report.read_text())["pairs"]
    assert pairs and all(p["bit_exact"] for p in pairs)
    # integer ops ran, not only f32 ones (since ops 80-85, the Q/DQ pairs may lower to no QuantizeLinear)
    assert all(any(n.startswith("q") for n in p["op_names"]) for p in pairs)


@needs_hexagon_images
@pytest.mark.parametrize("name", ["centerface_qdq_u16u8", "convnet_heads_qdq_u16u8"])
def test_sixteen_bit_pairs_under_qemu_equal_the_host_kernel(name: str, tmp_path: Path) -> None:
    """u16 groups run DQ -> f32 Conv/Gemm -> Q; the Conv or Gemm a QUANTIZE_LINEAR reads sums in one
    order on both builds (dsp/src/ops/sgemm_ordered.h), so the quantized results are bit for bit the
    host's under qemu-hexagon v73 (centerface's was one u16 step off with OpenBLAS on the host)."""
    import json
    import shutil

    from cli_support import run_cli

    if shutil.which("qemu-hexagon") is None:
        pytest.skip("qemu-hexagon is not installed")
    result = pipeline.rewrite(quantized.fetch(name), tmp_path / "fused.onnx")
    assert result.output is not None
    report = tmp_path / "emu.json"
    proc = run_cli("emulate", result.output, "--arch", "v73", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(report.read_text())["pairs"]
    assert pairs and any("conv2d" in p["op_names"] or "gemm" in p["op_names"] for p in pairs)
    assert all(p["bit_exact"] for p in pairs), [o for p in pairs for o in p["outputs"] if not o["bit_exact"]]


@needs_hexagon_images
@pytest.mark.parametrize(("name", "conv"), [("dtln_stage2_qdq_u16u8", "conv2d"), ("dtln_stage2_qdq_u8u8", "qconv2d")])
def test_a_conv1d_pair_under_qemu_equals_the_host_kernel(name: str, conv: str, tmp_path: Path) -> None:
    """dtln_stage2, two requests co-located. u16u8: its Conv1Ds reach their QUANTIZE_LINEAR through a
    COPY (the squeeze), and still sum in the Hexagon order on the host, so every output is bit for bit
    the host's under qemu-hexagon v73 (r0/conv1d_3 was one u16 step off at seed 3 before). u8u8: they
    are QCONV2D on [N, C, 1, T] copies, bit for bit too."""
    import json
    import shutil

    from cli_support import run_cli

    if shutil.which("qemu-hexagon") is None:
        pytest.skip("qemu-hexagon is not installed")
    fused, report = tmp_path / "x2.onnx", tmp_path / "emu.json"
    proc = run_cli("colocate", quantized.fetch(name), "--requests", "2", "-o", fused, "-q")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("emulate", fused, "--arch", "v73", "--seed", "3", "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    pairs = json.loads(report.read_text())["pairs"]
    assert any(conv in p["op_names"] for p in pairs), [p["op_names"] for p in pairs]  # other pairs may join it
    assert all(p["bit_exact"] for p in pairs), [o for p in pairs for o in p["outputs"] if not o["bit_exact"]]


def test_qdq_groups_are_taken_whole_or_named() -> None:
    """x -> DQ -> Relu -> Q -> DQ2 -> Sigmoid -> Q2: a task of the Relu alone splits its group; closing
    it takes DQ and Q; a task holding DQ2 without its Sigmoid gives DQ2 back."""
    from hexfuse_onnx import graph, qdq

    s = [numpy_helper.from_array(np.array(0.1, np.float32), "s"), numpy_helper.from_array(np.array(3, np.uint8), "z")]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq"),
        helper.make_node("Relu", ["xf"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"], name="q"),
        helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["rf"], name="dq2"),
        helper.make_node("Sigmoid", ["rf"], ["sg"], name="sigmoid"),
        helper.make_node("QuantizeLinear", ["sg", "s", "z"], ["y"], name="q2"),
    ]
    gp = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [4])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [4])],
        initializer=s,
    )
    g = graph.index_model(helper.make_model(gp, opset_imports=[helper.make_opsetid("", 19)], ir_version=9))
    ids = {n.name: i for i, n in enumerate(g.nodes)}
    relu = [ids["relu"]]
    reason = qdq.split_group(g, relu)
    assert reason is not None and "'relu'" in reason and "'q'" in reason
    closed = qdq.close_groups(g, relu, [])
    assert sorted(closed) == sorted([ids["dq"], ids["relu"], ids["q"]]) and qdq.split_group(g, closed) is None
    assert qdq.release_foreign(g, closed + [ids["dq2"]]) == sorted(closed)
    assert qdq.group_widths(g, ids["relu"]) == {"xf": 1, "r": 1}


def test_a_dequantize_read_outside_the_task_is_left_outside() -> None:
    """x -> DQ -> {Relu -> Q, Sigmoid -> Q2}: a task of DQ, Relu and Q split the group of the Sigmoid,
    which reads the same DQ (llama decode u8u8's rotary halves: 18 branch pairs refused). The DQ
    now stays outside and the task reads its own copy, as ORT gives each group its own."""
    from hexfuse_onnx import graph, qdq

    s = [numpy_helper.from_array(np.array(0.1, np.float32), "s"), numpy_helper.from_array(np.array(3, np.uint8), "z")]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq"),
        helper.make_node("Relu", ["xf"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y1"], name="q"),
        helper.make_node("Sigmoid", ["xf"], ["sg"], name="sigmoid"),
        helper.make_node("QuantizeLinear", ["sg", "s", "z"], ["y2"], name="q2"),
    ]
    outs = [helper.make_tensor_value_info(n, TensorProto.UINT8, [4]) for n in ("y1", "y2")]
    gp = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [4])], outs, s)
    g = graph.index_model(helper.make_model(gp, opset_imports=[helper.make_opsetid("", 19)], ir_version=9))
    ids = {n.name: i for i, n in enumerate(g.nodes)}
    task = [ids["dq"], ids["relu"], ids["q"]]
    assert "feeds node 'sigmoid'" in (qdq.split_group(g, task) or "")
    released = qdq.release_foreign(g, task)
    assert released == [ids["relu"], ids["q"]] and qdq.split_group(g, released) is None


def test_a_quantized_output_may_differ_by_one_step() -> None:
    """The plugin's bar on a QDQ model's quantized outputs (qdq.output_steps): one step, not 1e-4."""
    from hexfuse_onnx.errors import VerificationError
    from hexfuse_onnx.qdq import output_steps

    model = onnx.load(quantized.fetch("convnet_heads_qdq_u8u8"))
    steps = output_steps(model)
    assert steps and set(steps) <= {o.name for o in model.graph.output} and all(0 < s < 1 for s in steps.values())
    ref = np.array([0.0, 0.5, np.nan], np.float32)
    verify._output_error("y", ref, ref + np.float32([0.004, 0, 0]), 1e-4, "", step=0.004)
    for bad in (ref + np.float32([0.009, 0, 0]), np.float32([0.0, 0.5, 0.0])):  # two steps; a NaN lost
        with pytest.raises(VerificationError, match="quantization step"):
            verify._output_error("y", ref, bad, 1e-4, "", step=0.004)
    with pytest.raises(VerificationError, match=r"0\.009 absolute > one quantization step .*\(0\.004\)"):
        verify._output_error("y", ref, ref + np.float32([0.009, 0, 0]), 1e-4, "", step=0.004)  # like with like
    verify._output_error("q", np.uint8([3, 4]), np.uint8([4, 4]), 1e-4, "", step=1.0)
    with pytest.raises(VerificationError):
        verify._output_error("q", np.uint8([3, 4]), np.uint8([5, 4]), 1e-4, "", step=1.0)


def _quantize_model(zero_point: int) -> onnx.ModelProto:
    """x -> QuantizeLinear (u8, scale 0.1) -> q -> DequantizeLinear -> y: q is an inner quantized tensor."""
    s = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    z = numpy_helper.from_array(np.array(zero_point, np.uint8), "z")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
    ]
    gp = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=[s, z],
    )
    return helper.make_model(gp, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def test_an_inner_quantized_tensor_may_differ_by_one_step_only(tmp_path: Path) -> None:
    """verify.compare_inner, the plugin check of a QDQ pair's outputs that are no graph outputs: one
    step passes, two are refused with the tensor named. The values come from verify.run_cases, which
    runs the graph outputs and the inner tensors in one session."""
    from hexfuse_onnx.errors import VerificationError

    original = tmp_path / "original.onnx"
    onnx.save(_quantize_model(3), original)
    feeds = {"x": np.float32([0.0, 1.0, 2.5, 20.0])}
    case = verify.Case("x", feeds, ["y"], [np.zeros(4, np.float32)])
    expected = verify.inner_values(original, ["q"], [case])
    assert np.array_equal(expected["q"][0], np.uint8([3, 13, 28, 203]))
    for zero_point, ok in ((3, True), (4, True), (5, False)):
        rewritten = tmp_path / f"zp{zero_point}.onnx"
        onnx.save(_quantize_model(zero_point), rewritten)
        runs = verify.run_cases(rewritten, [case], inner=["q"])
        assert np.array_equal(runs[0].outputs[0], np.float32([0.0, 1.0, 2.5, 20.0]))  # y: the graph output too
        if ok:
            verify.compare_inner(expected, runs, ["q"], [case])
        else:
            with pytest.raises(VerificationError, match="pair output 'q' is 2 quantization steps"):
                verify.compare_inner(expected, runs, ["q"], [case])
    assert onnx.load(original) == _quantize_model(3)  # the input is only read


def test_a_model_given_to_run_cases_and_inner_values_is_left_as_it_was() -> None:
    """verify.run_cases and inner_values add the inner tensors as graph outputs to what they serialize,
    not to the caller's ModelProto (session 19: run_cases left `q` a graph output of the one it was given)."""
    model = _quantize_model(3)
    before = model.SerializeToString()
    case = verify.Case("x", {"x": np.float32([0.0, 1.0, 2.5, 20.0])}, ["y"], [np.zeros(4, np.float32)])
    (run,) = verify.run_cases(model, [case], inner=["q"])
    assert np.array_equal(run.inner["q"], np.uint8([3, 13, 28, 203]))
    assert np.array_equal(verify.inner_values(model, ["q"], [case])["q"][0], run.inner["q"])
    assert model.SerializeToString() == before
    assert [o.name for o in model.graph.output] == ["y"]


def test_pairs_checked_alone_take_one_session_of_the_original_and_one_of_them_all(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pipeline._failing_pairs checks each pair of a QDQ model alone with the plugin on its own
    outputs, all side by side in one small model fed the original's values (alone.py): one session
    of the original gives those and the pair outputs, one session runs every pair (captcha_crnn
    u16u8: two sessions of the whole rewritten model per pair were 158 of its 238 checks), and a
    pair that passed alone passes again in the next round. Every ONNX Runtime session is counted by
    whether its model has a FusedHexPair node, and by its node count."""
    from hexfuse_onnx import contract as C

    src = quantized.fetch("gpt_decode_step_qdq_u8u8")
    analysis = pipeline.analyse(src)
    reference = pipeline._reference(src, analysis.graph, False, None, pipeline._quiet)
    assert not pipeline._lower_new(analysis, {}, reference.second)
    assert len(analysis.pairs) >= 2
    reference.exact_cases()  # the original's graph outputs: made once, counted apart
    sessions = {"original": 0, "rewritten": 0}
    nodes: list[int] = []
    real_session = verify.session

    def counted(model: str | bytes, extra: ort.SessionOptions | None = None) -> ort.InferenceSession:
        proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model))
        fused = any(n.domain == C.DOMAIN for n in proto.graph.node)
        sessions["rewritten" if fused else "original"] += 1
        nodes.append(len(proto.graph.node)) if fused else None
        return real_session(model, extra)

    monkeypatch.setattr(verify, "session", counted)
    monkeypatch.setattr(pipeline, "ort_session", counted)
    out = tmp_path / "fused.onnx"
    assert not pipeline._failing_pairs(analysis, reference, out, src.parent, 0.0, pipeline._quiet, True)
    assert sessions == {"original": 1, "rewritten": 1}  # the pairs side by side, not the whole model per pair
    assert nodes == [len(analysis.pairs)]
    # a later round (after a re-selection) checks again only the pairs not yet verified alone
    assert not pipeline._failing_pairs(analysis, reference, out, src.parent, 0.0, pipeline._quiet, True)
    assert sessions == {"original": 1, "rewritten": 1}


def test_a_pair_checked_alone_is_refused_on_its_own_outputs_or_left_to_the_whole_model(tmp_path: Path) -> None:
    """gpt_decode_step u8u8's pair quantizing past_key with its QuantizeLinear's zero point 2 above the
    model's (its program lowered with it), run alone beside the right pairs fed the original's values
    (alone.own_output_failures): refused 2 steps from the original's, the others pass. A pair whose
    small model does not load (its program removed) is not refused there but left to the check of
    the whole model, which says why in full."""
    from hexfuse_onnx import alone
    from hexfuse_onnx import contract as C
    from hexfuse_onnx.lowering import lower_pair, set_program

    src = quantized.fetch("gpt_decode_step_qdq_u8u8")
    analysis = pipeline.analyse(src)
    reference = pipeline._reference(src, analysis.graph, False, None, pipeline._quiet)
    assert not pipeline._lower_new(analysis, {}, reference.second)
    made = "past_key_QuantizeLinear_Output"
    wrong = next(p for p in analysis.pairs if p.call is not None and made in p.call.node.output)
    model = pipeline._fuse_all(analysis, reference)
    zero = next(t for t in model.graph.initializer if t.name == "past_key_zero_point")
    shifted = numpy_helper.from_array(numpy_helper.to_array(zero) + np.uint8(2), "past_key_zero_point_shifted")
    model.graph.initializer.append(shifted)
    node = next(n for n in model.graph.node if n.domain == C.DOMAIN and n.overload == wrong.id)
    node.input[list(node.input).index(zero.name)] = shifted.name
    keep = [a for a in node.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
    del node.attribute[:]
    node.attribute.extend(keep)

    def check(inner_values: alone.Values = reference.inner_values) -> tuple[dict[str, str], list[str]]:
        why, unrun = alone.own_output_failures(
            model,
            analysis.pairs,
            reference.exact_cases(),
            inner_values,
            reference.quantized,
            lambda: runtime.session_options("host", so=verify.exact_qdq_options()),
            [],
        )
        return why, [p.id for p in unrun]

    def no_values(names: list[str]) -> dict[str, list[np.ndarray]]:
        raise RuntimeError("the original does not give them as outputs")

    assert check(no_values) == ({}, [p.id for p in analysis.pairs])  # all left to the whole model's check
    assert check() == ({}, [wrong.id])  # no program: ORT refuses the small model, the whole model's check says why
    set_program(node, lower_pair(model, node))
    why, unrun = check()
    assert not unrun and list(why) == [wrong.id]
    assert f"pair output '{made}'" in why[wrong.id] and "is 2 quantization steps" in why[wrong.id]


def test_plugin_verification_keeps_a_u16_pair_whose_sums_are_orts(tmp_path: Path) -> None:
    """ppocr_det u16u8's 352-node branch pair (94 groups): its f32 Convs summed in another order than
    MLAS's flipped a one-step tie that carried on to 6 steps at the pair's output, and the plugin's
    check refused the pair. The host kernel sums a quantized Conv as MLAS does (branch u16exact), so
    the pair is within a step of ORT on the seeded inputs and is written; its squeeze-excite pools, which
    read a DequantizeLinear, as MLAS's plain pool (3-7 steps at the Resize outputs at seed 1 on an AVX2
    host when they summed in the NCHWc pool's order). (A pair that does drift is
    refused by name: test_a_pair_checked_alone_is_refused_on_its_own_outputs_or_left_to_the_whole_model.)"""
    name = "ppocr_det_qdq_u16u8"
    if not quantized.base_available(name):
        pytest.skip(f"needs python -m models real fetch {quantized.get(name).base}")
    src = quantized.fetch(name)
    result = pipeline.rewrite(src, tmp_path / "fused.onnx", rtol=0.0, verify_plugin=True)
    failed = [r.reason for r in result.analysis.rejected if r.reason.startswith("fails verification")]
    assert not failed, failed
    assert result.output is not None and (tmp_path / "fused.onnx").exists()
    sizes = sorted(len(p.a.nodes) + len(p.b.nodes) for p in result.analysis.pairs)
    assert sizes and sizes[-1] > 300, sizes


@pytest.mark.parametrize(
    ("m", "n", "k", "trans_a", "trans_b", "through_copy"),
    [(5, 37, 300, 0, 0, False), (8, 32, 16, 1, 0, False), (4, 20, 9, 0, 1, False), (5, 37, 300, 0, 0, True)],
)
def test_hexagon_order_sums_a_quantized_gemm_in_k_order(
    m: int, n: int, k: int, trans_a: int, trans_b: int, through_copy: bool
) -> None:
    """HostKernel.run(hexagon_order=True): a Gemm whose result a QUANTIZE_LINEAR reads sums each
    element's products for k = 0, 1, ... one at a time, as the Hexagon builds' sgemm does (tile
    edges, a k beyond one packed panel and transposed operands included), also when the result
    reaches the QUANTIZE_LINEAR through a COPY (a Conv1D's squeeze: dtln_stage2 u16u8)."""
    from hexfuse_onnx.lowering.abi import GemmParam
    from hexfuse_onnx.lowering.lowerer import f32_bits

    rng = np.random.default_rng(7)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    p, t = Program(), Task.A
    ia = p.add(Tensor(Dtype.F32, Role.INPUT, t, list(a.shape), io=0))
    ib = p.add(Tensor(Dtype.F32, Role.INPUT, t, list(b.shape), io=1))
    y = p.add(Tensor(Dtype.F32, Role.OUTPUT, t, [m, n], io=0))
    s = p.add(Tensor(Dtype.F32, Role.CONSTANT, t, [], data=np.float32(0.05).tobytes()))
    params = [0] * len(Op(Opcode.GEMM, Engine.MATRIX, t, [], 0).params)
    params[GemmParam.TRANS_A], params[GemmParam.TRANS_B], params[GemmParam.ALPHA] = trans_a, trans_b, f32_bits(1.0)
    p.ops.append(Op(Opcode.GEMM, Engine.MATRIX, t, [ia, ib], y, params))
    quantized = y
    if through_copy:
        quantized = p.add(Tensor(Dtype.F32, Role.SCRATCH, t, [m * n]))
        p.ops.append(Op(Opcode.COPY, Engine.COPY, t, [y], quantized))
    q = p.add(Tensor(Dtype.U8, Role.OUTPUT, t, [m * n] if through_copy else [m, n], io=1))
    p.ops.append(Op(Opcode.QUANTIZE_LINEAR, Engine.VECTOR, t, [quantized, s], q))
    p.n_io = [2, 0, 2, 0]
    got = runtime.HostKernel().run(p.encode(), [a, b], hexagon_order=True)[0]
    a2, b2 = (a.T if trans_a else a), (b.T if trans_b else b)
    want = np.zeros((m, n), np.float32)
    for kk in range(k):
        want = want + a2[:, kk : kk + 1] * b2[kk : kk + 1, :]  # float32: one rounding per product and per sum
    assert np.array_equal(got, want)
