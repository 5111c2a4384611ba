"""`python -m hexfuse_onnx emulate`: every FusedHexPair of rewritten zoo models runs under qemu-hexagon
(hexfuse_emulate.elf: the real parser, coop scheduler and kernels built for Hexagon) on the model's
real tensors, and its outputs match the host kernel. Corrupt programs and job files are refused."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import REPO, assert_mentions, error_line, run_cli

from hexfuse_onnx import contract as C
from hexfuse_onnx.pipeline import rewrite
from hexfuse_onnx.tools import emulate
from models.graph_builder import GraphBuilder

QEMU = os.environ.get("QEMU_HEXAGON") or shutil.which("qemu-hexagon")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(QEMU is None, reason="qemu-hexagon is not installed (apt-get install qemu-user)"),
]

MODELS = ("two_branch", "inception", "gpt_decode_step")  # kinds: branches (matrix + vector, conv), prefill_decode


@pytest.fixture(scope="module")
def fused(zoo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fused")
    out = {}
    for name in MODELS:
        result = rewrite(zoo_dir / f"{name}.onnx", folder / f"{name}.fused.onnx")
        assert result.output is not None, f"{name}: no pair fused"
        out[name] = result.output
    return out


def _pairs(path: Path) -> list[onnx.NodeProto]:
    return emulate.fused_nodes(onnx.load(str(path)))


@pytest.mark.parametrize("name,arch", [("two_branch", "v67"), ("inception", "v73"), ("gpt_decode_step", "v73")])
def test_every_pair_runs_and_matches_the_host_kernel(hexagon_images, fused, tmp_path, name, arch):
    report = tmp_path / "report.json"
    proc = run_cli("emulate", fused[name], "--arch", arch, "--json", report, "-q")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    nodes = _pairs(fused[name])
    assert [p["name"] for p in data["pairs"]] == [n.name for n in nodes]
    for pair, node in zip(data["pairs"], nodes):
        assert pair["ok"] and pair["stats"]["arch"] == arch
        assert len(pair["outputs"]) == len(node.output)
        assert all(o["rel"] <= emulate.DEFAULT_RTOL for o in pair["outputs"])
        assert pair["stats"]["serial_equals_fused"] is True
        for run in ("fused", "serial"):
            stats = pair["stats"]["runs"][run]
            assert stats["trace_dropped"] == 0 and stats["items"] == sum(stats["op_items"]) > 0
            assert all(n > 0 for n in stats["op_items"]), "an op ran no item"
            assert sum(stats["op_packets"]) == stats["item_packets"] == sum(stats["engine_packets"])
            assert 0 < stats["item_packets"] < stats["call_packets"]
        assert pair["stats"]["runs"]["serial"]["serialized"] == 1
    assert f"pair {nodes[0].name}" in proc.stdout and "not device cycles" in proc.stdout


def _float_matmul_pair(path: Path, rows: int) -> Path:
    """x [rows, 1024]: two MatMuls (a 1024x256 B: at one row the matrix kernel's row loop, `gemv`, on
    both builds; at 8 rows the sgemm, in tiles and panels of k; then 256x256) beside Sigmoid, Mul,
    Tanh and Softmax, both chains float graph outputs: no QuantizeLinear reads them."""
    g = GraphBuilder("float_matmul_pair", seed=3)
    x = g.input("x", [rows, 1024])
    h = g.op("MatMul", [x, g.weight("w0", [1024, 256])], "matmul0")
    g.output(g.op("MatMul", [h, g.weight("w1", [256, 256])], "matmul1", outputs=["a"]), [rows, 256])
    v = g.op("Mul", [g.op("Sigmoid", [x], "sigmoid"), g.bias("gain", 1024, scale=1.0)], "mul")
    g.output(g.op("Softmax", [g.op("Tanh", [v], "tanh")], "softmax", axis=-1, outputs=["b"]), [rows, 1024])
    onnx.save(g.model(), path)
    return path


@pytest.mark.parametrize("rows", [1, 8])
def test_float_outputs_no_quantize_linear_reads_are_bit_exact(hexagon_images, tmp_path, rows):
    """Issue 12: the host reference sums every float op as the Hexagon build does, not only those a
    QUANTIZE_LINEAR reads; the MatMuls' output, OpenBLAS's sums before, is then bit-exact at --rtol 0.
    The plugin's own sums (OpenBLAS) are reported beside it, and differ."""
    src = _float_matmul_pair(tmp_path / "model.onnx", rows)
    result = rewrite(src, tmp_path / "fused.onnx", target="host", min_gain=-1.0)
    assert result.output is not None
    report = tmp_path / "report.json"
    proc = run_cli("emulate", result.output, "--arch", "v73", "--rtol", "0", "--json", report, "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (pair,) = json.loads(report.read_text())["pairs"]
    outputs = {o["name"]: o for o in pair["outputs"]}
    assert "a" in outputs and pair["bit_exact"], pair["outputs"]
    assert all(o["max_abs"] == 0 for o in outputs.values())
    assert outputs["a"]["plugin_rel"] > 0
    assert "a: bit-exact yes; max abs 0, rel 0 (rtol 0): ok; the plugin's own sums: rel" in proc.stdout


def test_tolerance_is_enforced():
    """A float output one ulp off fails at rtol 0 and passes within 1e-4; an integer one must be equal,
    or within the steps given (a quantized f32 result)."""
    host = np.linspace(-1, 1, 64, dtype=np.float32)
    off = host.copy()
    off[5] = np.nextafter(off[5], np.float32(2))
    check = emulate.check_output("y", off, host, 0.0)
    assert not check.ok and not check.bit_exact and check.first_mismatch == (5, float(off[5]), float(host[5]))
    assert emulate.check_output("y", off, host, 1e-4).ok
    codes = np.arange(64, dtype=np.uint8)
    assert not emulate.check_output("q", codes + (codes == 9), codes, 1e-4).ok
    assert emulate.check_output("q", codes + (codes == 9), codes, 0.0, steps=1).ok


def test_corrupt_program_is_refused(hexagon_images, fused, tmp_path):
    model = onnx.load(str(fused["two_branch"]))
    node = emulate.fused_nodes(model)[0]
    attr = next(a for a in node.attribute if a.name == C.ATTR_PROGRAM)
    program = bytearray(attr.s)
    program[60] ^= 0x40  # inside the tensor table: the CRC-32 no longer matches
    attr.s = bytes(program)
    bad = tmp_path / "bad.fused.onnx"
    onnx.save(model, bad)
    before = bad.read_bytes()
    proc = run_cli("emulate", bad, "--arch", "v67", "-q")
    assert proc.returncode == 3
    assert_mentions(error_line(proc), "program refused", "checksum")
    assert bad.read_bytes() == before


def test_inputs_from_npz(hexagon_images, fused, zoo_dir, tmp_path):
    graph = onnx.load(str(zoo_dir / "two_branch.onnx")).graph
    rng = np.random.default_rng(7)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    np.savez(tmp_path / "in.npz", **{k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()})
    proc = run_cli("emulate", fused["two_branch"], "--arch", "v67", "--inputs", tmp_path / "in.npz", "-q")
    assert proc.returncode == 0, proc.stderr
    np.savez(tmp_path / "wrong.npz", not_an_input=np.zeros(3, np.float32))
    proc = run_cli("emulate", fused["two_branch"], "--arch", "v67", "--inputs", tmp_path / "wrong.npz", "-q")
    assert proc.returncode == 2
    assert_mentions(error_line(proc), "wrong.npz", "no array named")


def test_the_pass_never_imports_tools():
    """Every module of the pass and the runtime, imported together, leaves tools/ unloaded.

    Only the CLI (and `python -m hexfuse_onnx`) may import tools/ for its commands."""
    code = """
import importlib, pathlib, sys
outside = ("hexfuse_onnx.tools", "hexfuse_onnx.cli", "hexfuse_onnx.__main__")
files = pathlib.Path("hexfuse_onnx").rglob("*.py")  # not pkgutil.walk_packages: it imports tools/ to list it
names = [".".join(f.with_suffix("").parts).removesuffix(".__init__") for f in files]
passes = [n for n in names if not n.startswith(outside)]
for name in passes:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.startswith("hexfuse_onnx.tools"))
print(len(passes), *loaded)
sys.exit(1 if loaded or len(passes) < 20 else 0)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _image_run(images: Path, job: bytes, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "job").write_bytes(job)
    image = images / emulate.ARCHS["v67"] / emulate.IMAGE
    cmd = [QEMU, str(image), str(tmp_path / "job"), str(tmp_path / "result")]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)


def test_corrupt_job_files_are_refused(hexagon_images, fused, tmp_path):
    node = _pairs(fused["two_branch"])[0]
    program = next(a.s for a in node.attribute if a.name == C.ATTR_PROGRAM)
    good = emulate.job_bytes(program, [], 0.5)  # well formed, but the program has inputs
    cases = {
        "magic": b"XXXX" + good[4:],
        "truncated": good[:-1],
        "longer": good + b"\0",
        "share": good[:20] + struct.pack("<f", float("nan")) + good[24:],
        "input count": good,
    }
    for what, job in cases.items():
        proc = _image_run(hexagon_images, job, tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 3, (what, proc.returncode, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("hexfuse_emulate: bad job:"), (what, proc.stderr)
        assert not (tmp_path / "result").exists()


def test_a_polymorphic_pair_runs_at_the_analysed_shape_and_at_other_inputs(hexagon_images, tmp_path):
    # a v2 program is specialized to the captured inputs' shapes before it goes to the image
    sys.path.insert(0, str(Path(__file__).parent))
    from test_symbolic_shapes import C_IN, conv_two_branch

    src = conv_two_branch(tmp_path / "model.onnx")
    result = rewrite(src, tmp_path / "fused.onnx", target="host", min_gain=-1.0, shapes={"x": [1, C_IN, 16, 16]})
    assert result.output is not None
    report = tmp_path / "report.json"
    np.savez(tmp_path / "other.npz", x=np.random.default_rng(0).standard_normal((2, C_IN, 24, 40)).astype(np.float32))
    for extra in ([], ["--inputs", tmp_path / "other.npz"]):
        proc = run_cli("emulate", result.output, "--arch", "v73", "--json", report, "-q", *extra)
        assert proc.returncode == 0, proc.stderr
        (pair,) = json.loads(report.read_text())["pairs"]
        assert pair["ok"] and all(o["rel"] <= emulate.DEFAULT_RTOL for o in pair["outputs"])


def test_a_large_pair_lists_its_ops_with_the_most_packets() -> None:
    """Two co-located decode steps make one pair of 358 ops: the report lists the 12 largest, in
    program order, and says where the rest are (it printed all 358, 700 lines)."""
    n = 30
    run = {
        "items": n,
        "call_packets": 1000,
        "serialized": False,
        "engine_packets": [0, 500, 0],
        "worker_packets": [500],
        "item_packets": 500,
        "op_packets": list(range(n)),
        "op_items": [1] * n,
    }
    stats = {
        "arch": "v73",
        "serial_equals_fused": True,
        "runs": {"fused": run, "serial": run},
        "ops": [{"task": 0, "engine": 1, "opcode": 0}] * n,
    }
    lines = emulate.pair_lines(emulate.PairResult("p", "colocate", [], stats, [f"op{i}" for i in range(n)]))
    listed = [ln.split()[1] for ln in lines if ln.startswith("    ")]
    assert listed == [f"op{i}" for i in range(n - emulate.LISTED_OPS, n)]
    assert any(f"the {emulate.LISTED_OPS} ops with the most packets, of {n} (all in --json)" in ln for ln in lines)
