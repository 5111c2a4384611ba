"""The ONNX Runtime plugin (hexfuse_onnx/_lib/libhexfuse_ort.so) runs FusedHexPair nodes with the
dsp/ kernel: results match the original model, the kernel (not the fallback body) ran, corrupt
programs and wrong shapes give clear errors, and one session serves many threads."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from plugin_support import concurrent_errors, lower_zoo
from plugin_support import reference as zoo_reference
from qnn_support import QNN_EP, nodes_by_provider, qnn_devices_or_skip

from hexfuse_onnx import contract as C
from hexfuse_onnx import pipeline, runtime, verify
from hexfuse_onnx.kinds import KINDS
from hexfuse_onnx.lowering import attach_programs, known_tensors

LOWERABLE = ["two_branch", "mha_encoder", "gpt_decode_step", "gpt_decode_step_contrib"]

pytestmark = [
    pytest.mark.slow,  # plugin sessions, ~0.5 s each: the runtime's tier, outside the pass's fast one
    pytest.mark.skipif(
        not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(),
        reason=f"{runtime.LIB_DIR / runtime.PLUGIN_NAME} not built: run `bash custom_ops/build.sh`",
    ),
]


def plugin_session(path: Path | bytes) -> ort.InferenceSession:
    so = runtime.session_options(backend="host")
    so.log_severity_level = 3
    src = path if isinstance(path, bytes) else str(path)
    return ort.InferenceSession(src, sess_options=so, providers=["CPUExecutionProvider"])


def stock_session(path: Path | bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    src = path if isinstance(path, bytes) else str(path)
    return ort.InferenceSession(src, sess_options=so, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def lowered(zoo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lower_zoo(zoo_dir, LOWERABLE, tmp_path_factory.mktemp("plugin"))


def reference(zoo_dir: Path, name: str, seed: int = 3) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    return zoo_reference(zoo_dir, name, seed)


def assert_close(ref: list[np.ndarray], got: list[np.ndarray], tol: float = 1e-4) -> None:
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert r.shape == g.shape
        assert verify.relative_error(r, g) <= tol


@pytest.mark.parametrize("name", LOWERABLE)
def test_plugin_matches_the_original(name: str, zoo_dir: Path, lowered: dict[str, Path]) -> None:
    feeds, ref = reference(zoo_dir, name)
    assert_close(ref, plugin_session(lowered[name]).run(None, feeds))


@pytest.mark.parametrize("name", LOWERABLE)
def test_without_the_plugin_the_fallback_runs(name: str, zoo_dir: Path, lowered: dict[str, Path]) -> None:
    feeds, ref = reference(zoo_dir, name)
    assert_close(ref, stock_session(lowered[name]).run(None, feeds), 1e-5)


def test_altered_fallback_proves_the_kernel_ran(zoo_dir: Path, lowered: dict[str, Path]) -> None:
    m = onnx.load(lowered["two_branch"])
    changed = 0
    for f in m.functions:
        for n in f.node:
            if n.op_type == "Sigmoid":
                n.op_type = "Tanh"
                changed += 1
    assert changed
    altered = m.SerializeToString()
    feeds, ref = reference(zoo_dir, "two_branch")
    by_fallback = stock_session(altered).run(None, feeds)
    assert max(verify.relative_error(r, g) for r, g in zip(ref, by_fallback)) > 1e-3  # the body did change
    assert_close(ref, plugin_session(altered).run(None, feeds))


def _with_program(path: Path, edit) -> bytes:
    m = onnx.load(path)
    for n in m.graph.node:
        if n.domain == C.DOMAIN:
            for a in n.attribute:
                if a.name == C.ATTR_PROGRAM:
                    a.s = edit(a.s)
    return m.SerializeToString()


def test_corrupt_program_fails_at_session_creation(lowered: dict[str, Path]) -> None:
    bad = _with_program(lowered["two_branch"], lambda s: b"XXXX" + s[4:])
    with pytest.raises(Exception, match="not a valid task program.*HFX_ERR_MAGIC"):
        plugin_session(bad)
    truncated = _with_program(lowered["two_branch"], lambda s: s[: len(s) // 2])
    with pytest.raises(Exception, match="not a valid task program"):
        plugin_session(truncated)


def test_missing_program_fails_at_session_creation(lowered: dict[str, Path]) -> None:
    m = onnx.load(lowered["two_branch"])
    for n in m.graph.node:
        keep = [a for a in n.attribute if a.name != C.ATTR_PROGRAM]
        del n.attribute[:]
        n.attribute.extend(keep)
    with pytest.raises(Exception, match="has no 'program' attribute") as refused:
        plugin_session(m.SerializeToString())
    # the function it names exists (it named hexfuse_onnx.lower, a module gone since lowering/), and lowers it
    found = re.search(r"lower the model with hexfuse_onnx\.(\w+)\.(\w+)", str(refused.value))
    assert found is not None, refused.value
    attach = getattr(importlib.import_module(f"hexfuse_onnx.{found[1]}"), found[2])
    lowered_again, failed = attach(m)
    assert not failed and plugin_session(lowered_again.SerializeToString())


def test_wrong_input_shape_fails_at_run(lowered: dict[str, Path]) -> None:
    m = onnx.load(lowered["two_branch"])
    for v in list(m.graph.input) + list(m.graph.output):  # let ORT accept any batch
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    s = plugin_session(m.SerializeToString())
    x = np.zeros((7, 256), np.float32)
    with pytest.raises(Exception, match=r"FusedHexPair.*has shape \[7,256\].*lowered for \[64,256\]"):
        s.run(None, {"x": x})
    s.run(None, {"x": np.zeros((64, 256), np.float32)})  # the session is still usable


def test_eight_threads_share_one_session(zoo_dir: Path, lowered: dict[str, Path]) -> None:
    s = plugin_session(lowered["mha_encoder"])
    cases = [reference(zoo_dir, "mha_encoder", seed=k) for k in range(8)]
    assert not concurrent_errors(s, cases, runs=5, tol=1e-4)


def test_trace_summary_is_written(
    tmp_path: Path, zoo_dir: Path, lowered: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.json"
    monkeypatch.setenv(runtime.ENV_TRACE, str(trace))
    feeds, _ = reference(zoo_dir, "two_branch")
    plugin_session(lowered["two_branch"]).run(None, feeds)
    summary = json.loads(trace.read_text())
    assert summary["events"] > 0 and summary["wall_ns"] > 0
    assert set(summary["busy_ns"]) == {"matrix", "vector", "copy"}


def test_hexagon_backend_says_why_not(lowered: dict[str, Path]) -> None:
    with pytest.raises(runtime.RuntimeUnavailable, match="hexagon backend unavailable"):
        runtime.session_options(backend="hexagon")
    assert runtime.resolve_backend("auto") == "host"


# ---- beside the QNN execution provider (onnxruntime-qnn, HTP backend emulated on x86) -------

# HTP runs float graphs in fp16: QNN's own outputs differ from CPU's by about 1e-3 of the scale.
QNN_TOL = 1e-2


def _tiny_model() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])], "probe", [x], [y]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


@pytest.fixture(scope="module")
def qnn_devices() -> tuple[list, dict[str, str]]:
    """The QNN EP devices with the HTP backend, or a skip that says exactly why not."""
    devices, options, version = qnn_devices_or_skip()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    # A backend that fails to load makes QNN take no node, and ORT would quietly run the model on
    # CPU; with CPU fallback disabled that is an error, and QNN's own reason is in ORT's log.
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.add_provider_for_devices(devices, options)
    with tempfile.TemporaryFile(mode="w+b") as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(_tiny_model(), sess_options=so).run(None, {"x": np.ones((4, 8), np.float32)})
            error = None
        except Exception as e:  # noqa: BLE001 - the reason is the message
            error = e
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = re.sub(r"\x1b\[[0-9;]*m", "", log.read().decode(errors="replace"))
        logged = [line.strip() for line in text.splitlines() if "[E:" in line]
    if error is not None:
        why = "; ".join(logged) or str(error)
        pytest.skip(f"onnxruntime-qnn {version}: the HTP backend does not run a two-op model: {why}")
    return devices, options


@pytest.mark.parametrize("name", ["two_branch", "mha_encoder"])
def test_plugin_beside_the_qnn_ep(
    name: str, zoo_dir: Path, lowered: dict[str, Path], tmp_path: Path, qnn_devices: tuple[list, dict[str, str]]
) -> None:
    devices, options = qnn_devices
    so = runtime.session_options(backend="host")
    so.log_severity_level = 3
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "qnn")
    so.add_provider_for_devices(devices, options)
    s = ort.InferenceSession(str(lowered[name]), sess_options=so)
    feeds, ref = reference(zoo_dir, name)
    got = s.run(None, feeds)
    by = nodes_by_provider(s)
    assert "FusedHexPair" in by.get("CPUExecutionProvider", set()), by  # the plugin ran the pair
    assert by.get(QNN_EP), f"QNN took no node: {by}"  # QNN took the rest
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert r.shape == g.shape
        assert verify.relative_error(r, g) <= QNN_TOL


def _qdq_detector_with_shape_work(folder: Path) -> Path:
    """A QNN-recipe u16u8 QDQ graph as detectors are: two conv branches of a stem, one resized back to the
    other's size read off it (Shape -> Slice -> Concat -> Resize), concatenated, a 1x1 head; rewritten with
    its branches fused (the suite's targets have no call overhead: conftest)."""
    from onnx import TensorProto, helper, numpy_helper

    from models.quantized import quantize

    rng = np.random.default_rng(5)
    nodes, weights = [], []

    def conv(x: str, cin: int, cout: int, name: str, k: int = 3, stride: int = 1) -> str:
        w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(k * k * cin)).astype(np.float32)
        weights.extend(
            [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(np.zeros(cout, np.float32), name + "_b")]
        )
        pads = [k // 2] * 4
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], pads=pads, strides=[stride] * 2))
        nodes.append(helper.make_node("LeakyRelu", [name], [name + "_a"], alpha=0.1))
        return name + "_a"

    stem = conv("x", 3, 16, "stem")
    a = stem
    for i in range(4):
        a = conv(a, 16, 16, f"a{i}")
    b = conv(conv(stem, 16, 16, "b0"), 16, 16, "down", stride=2)
    weights += [
        numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s0", [2]), ("s1", [4]), ("nc", [1, 16]))
    ]
    nodes += [
        helper.make_node("Shape", [a], ["shape"]),
        helper.make_node("Slice", ["shape", "s0", "s1"], ["hw"]),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", [b, "", "", "sizes"], ["up"], mode="nearest"),
        helper.make_node("Concat", [a, "up"], ["cat"], axis=1),
    ]
    head = conv("cat", 32, 16, "head", k=1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 32, 32])
    y = helper.make_tensor_value_info(head, TensorProto.FLOAT, ["n", 16, 32, 32])
    graph = helper.make_graph(nodes, "detector", [x], [y], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "float.onnx")

    images = [{"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(4)]
    quantize(folder / "float.onnx", folder / "qdq.onnx", images, "u16u8")
    r = pipeline.rewrite(folder / "qdq.onnx", folder / "fused.onnx", ["branches"], "host", -1.0)
    assert r.output is not None
    # the batch symbolic through the pass, which folds a static model's shape work (be85035 took the Shape ->
    # Slice -> Concat away and with it the failure); then fixed at 1, as the QNN EP runs static shapes only
    fused = onnx.load(r.output)
    for v in (*fused.graph.input, *fused.graph.output):
        v.type.tensor_type.shape.dim[0].dim_value = 1
    assert any(n.op_type == "Shape" for n in fused.graph.node)
    onnx.save(fused, r.output)
    return r.output


def test_a_rewritten_qdq_model_runs_on_stock_ort_beside_the_qnn_ep(tmp_path: Path, qnn_devices) -> None:
    """ORT's ahead-of-time inlining of the FusedHexPair bodies ended the process under the QNN EP on a
    rewritten QDQ RetinaFace (a stranger's; "Processed 28 nodes. Expected to process 63"), on this graph too
    ("4 ... 12"): `session_options` over options that have the QNN EP sets ORT to inline as it partitions,
    and `InferenceSession` keeps the EPs of the options given (it ran on the CPU alone). Each session is
    made in a child process: the failure is a C++ terminate."""
    fused = _qdq_detector_with_shape_work(tmp_path)
    child = f"""
import json, sys, numpy as np, onnxruntime as ort, hexfuse_onnx
from hexfuse_onnx.tools import qnn
x = {{"x": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}}
cpu = ort.InferenceSession({str(fused)!r}, providers=["CPUExecutionProvider"]).run(None, x)[0]
stock = ort.InferenceSession({str(fused)!r}, sess_options=hexfuse_onnx.session_options(so=qnn.session_options()))
drop_in = hexfuse_onnx.InferenceSession({str(fused)!r}, so=qnn.session_options())
print(json.dumps([stock.get_providers(), drop_in.get_providers(),
                  [float(np.abs(s.run(None, x)[0] - cpu).max() / np.abs(cpu).max()) for s in (stock, drop_in)]]))
"""
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stock, drop_in, errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stock[0] == QNN_EP and drop_in[0] == QNN_EP
    assert max(errors) <= 0.05  # QNN's HTP against the CPU: the quantized outputs' steps, fp16


def test_a_microbatch_pair_as_the_first_rewrites_wrote_it_runs_once_lowered(zoo_dir: Path, tmp_path: Path) -> None:
    """mlp_chain's micro-batch pair as 8bea676 wrote it: the body the program's two copies, no program,
    the halves untyped. Lowered by attach_programs (as the plugin's refusal says), ORT still refused to
    load it with the plugin ('output arg (y__mb0) type inference failed'): attach_programs types them."""
    r = pipeline.rewrite(zoo_dir / "mlp_chain.onnx", tmp_path / "fused.onnx", ["microbatch"])
    assert r.output is not None
    m = onnx.load(r.output)
    (node,) = [n for n in m.graph.node if n.domain == C.DOMAIN]
    m.functions[0].CopyFrom(KINDS["microbatch"].program_function(node, m.functions[0], known_tensors(m.graph)))
    kept = [a for a in node.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
    del node.attribute[:]
    node.attribute.extend(kept)
    halves = [v for v in m.graph.value_info if v.name in node.output]
    assert halves
    for v in halves:
        m.graph.value_info.remove(v)
    lowered, failed = attach_programs(m)
    assert not failed
    feeds, expected = reference(zoo_dir, "mlp_chain")
    got = plugin_session(lowered.SerializeToString()).run(None, feeds)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-6)
