"""More bad inputs through the real command line (extends tests/test_cli_errors.py, which covers
missing/empty/garbage files, cycles, dangling inputs, unknown domains, duplicate producers, bad
--shape values and missing or same-as-input output paths).

Here: IR version and opset (too old, too new, missing), dtypes ONNX Runtime or the verifier
cannot handle, duplicate graph output (and input, initializer) names, external data that is
missing, too short or outside the model's folder, an output that would overwrite the input's
external data, a model over 2 GB with external data, an output folder that is not writable,
and an output path that is a FIFO or a device node.

Every refusal: one line on stderr that names the cause, a specific non-zero exit code, nothing in
the output folder (no staging leftovers), the input byte-identical (sha256). Tests marked
`xfail(strict=True, reason="BUG: ...")` describe a real defect; they pass (and must lose their
marker) once it is fixed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import Dirs, assert_mentions, error_line, listing, run_cli, run_cli_process, snapshot
from onnx import TensorProto, helper, numpy_helper

import models

REPO = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_USAGE, EXIT_BAD_MODEL, EXIT_VERIFY, EXIT_WRITE, EXIT_INTERNAL = 0, 2, 3, 4, 5, 70


# ---------------------------------------------------------------------------------------
# Helpers (the same conventions as tests/test_cli_errors.py)


def zoo(name: str = "two_branch") -> onnx.ModelProto:
    return models.build(name)


def refused(
    proc: subprocess.CompletedProcess[str], dirs: Dirs, before: dict[str, str], codes: tuple[int, ...], *words: str
) -> str:
    """The common checks of a refusal; returns the error line."""
    assert proc.returncode in codes, f"exit {proc.returncode}, expected {codes}\n{proc.stdout}\n{proc.stderr}"
    line = error_line(proc)
    assert_mentions(line, *words)
    assert listing(dirs.out) == [], f"something was written: {listing(dirs.out)}"
    assert snapshot(dirs.inp) == before, "the input folder changed"
    return line


# ---------------------------------------------------------------------------------------
# IR version and opset


def _with(model: onnx.ModelProto, edit) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    edit(m)
    return m


def _ir(v: int):
    def edit(m: onnx.ModelProto) -> None:
        m.ir_version = v

    return edit


def _opset(v: int | None):
    def edit(m: onnx.ModelProto) -> None:
        if v is None:
            del m.opset_import[:]
        else:
            next(o for o in m.opset_import if o.domain in ("", "ai.onnx")).version = v

    return edit


OLD_VERSIONS = [
    ("ir_2", _ir(2), ["IR version 2", "too old"]),
    ("ir_unset", _ir(0), ["IR version 0", "too old"]),
    ("opset_5", _opset(5), ["opset 5", "too old"]),
    ("no_default_opset", _opset(None), ["no default ONNX opset"]),
]


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
@pytest.mark.parametrize("case,edit,words", OLD_VERSIONS, ids=[c[0] for c in OLD_VERSIONS])
def test_too_old_or_missing_version_is_refused(dirs, command, case, edit, words):
    src = dirs.save(f"{case}.onnx", _with(zoo(), edit))
    before = snapshot(dirs.inp)
    args = ["-o", dirs.out / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, src, "-q", *args)
    refused(proc, dirs, before, (EXIT_BAD_MODEL,), src.name, *words)


# A model invalid for onnx.checker is refused as a bad input (exit 3) naming the cause, whether or
# not a pair would qualify, and never blamed on the rewritten model.
INVALID_FOR_CHECKER = [
    ("ir_99_with_pair", "two_branch", _ir(99), ["99"]),
    ("ir_99_no_pair", "sequential_chain", _ir(99), ["99"]),
    ("opset_99_with_pair", "two_branch", _opset(99), ["opset", "99"]),
    ("opset_99_no_pair", "sequential_chain", _opset(99), ["opset", "99"]),
    ("duplicate_input_name", "two_branch", lambda m: m.graph.input.append(m.graph.input[0]), ["'x'"]),
    (
        "duplicate_initializer_name",
        "two_branch",
        lambda m: m.graph.initializer.append(m.graph.initializer[0]),
        ["matrix/matmul0/weight"],
    ),
]


@pytest.mark.parametrize("case,base,edit,words", INVALID_FOR_CHECKER, ids=[c[0] for c in INVALID_FOR_CHECKER])
def test_model_invalid_for_the_checker_is_a_bad_model(dirs, case, base, edit, words):
    src = dirs.save(f"{case}.onnx", _with(zoo(base), edit))
    before = snapshot(dirs.inp)
    proc = run_cli("rewrite", src, "-q", "-o", dirs.out / "out.onnx")
    line = refused(proc, dirs, before, (EXIT_BAD_MODEL,), src.name, *words)
    assert "rewritten" not in line.lower(), line


# ---------------------------------------------------------------------------------------
# dtypes


def _with_extra_io(dtype: int, name: str) -> onnx.ModelProto:
    """two_branch (which has a pair) plus an input of `dtype` passed through an Identity."""
    m = zoo()
    m.graph.input.append(helper.make_tensor_value_info(name, dtype, [2]))
    m.graph.node.append(helper.make_node("Identity", [name], [f"{name}_out"], name=f"{name}_identity"))
    m.graph.output.append(helper.make_tensor_value_info(f"{name}_out", dtype, [2]))
    return m


DTYPES = [
    ("string", TensorProto.STRING, ["string"]),
    ("complex64", TensorProto.COMPLEX64, ["complex64"]),
    ("complex128", TensorProto.COMPLEX128, ["complex128"]),
]


@pytest.mark.parametrize("case,dtype,words", DTYPES, ids=[c[0] for c in DTYPES])
def test_unsupported_dtype_beside_a_pair_is_refused(dirs, case, dtype, words):
    # ONNX Runtime cannot run complex tensors at all; the verifier cannot make string test inputs.
    # Either is a refusal: "bad input" (3) or "cannot verify" (4), naming the dtype.
    src = dirs.save(f"{case}.onnx", _with_extra_io(dtype, "odd"))
    before = snapshot(dirs.inp)
    proc = run_cli("rewrite", src, "-q", "-o", dirs.out / "out.onnx")
    refused(proc, dirs, before, (EXIT_BAD_MODEL, EXIT_VERIFY), *words)


@pytest.mark.parametrize("case,dtype,words", DTYPES, ids=[c[0] for c in DTYPES])
def test_unsupported_dtype_without_a_pair_declines(dirs, case, dtype, words):
    """Nothing to fuse, nothing to verify: the documented 'no pair qualifies', exit 0, nothing written."""
    x = helper.make_tensor_value_info("x", dtype, [2, 3])
    y = helper.make_tensor_value_info("y", dtype, [2, 3])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g", [x], [y])
    src = dirs.save(f"{case}.onnx", helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10))
    before = snapshot(dirs.inp)
    proc = run_cli("rewrite", src, "-q", "-o", dirs.out / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "no pair qualifies" in proc.stdout
    assert listing(dirs.out) == []
    assert snapshot(dirs.inp) == before


# ---------------------------------------------------------------------------------------
# Duplicate graph output names (the onnx checker accepts them; the ONNX IR requires unique
# graph outputs, see onnx-ir's OutputFixPass, "as required by the ONNX specification").


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_duplicate_graph_output_names_are_refused(dirs, command):
    m = zoo()
    m.graph.output.append(m.graph.output[0])
    src = dirs.save("dup_outputs.onnx", m)
    before = snapshot(dirs.inp)
    args = ["-o", dirs.out / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, src, "-q", *args)
    refused(proc, dirs, before, (EXIT_BAD_MODEL,), src.name, "'y'", "output")


# ---------------------------------------------------------------------------------------
# External data


def externalize(model: onnx.ModelProto, data_file: Path, location: str, gap: int = 4096) -> onnx.ModelProto:
    """Move every initializer's bytes to `data_file` (after a `gap`, 64-byte aligned) under `location`."""
    blob = bytearray(gap)
    for t in model.graph.initializer:
        raw = numpy_helper.to_array(t).tobytes()
        offset = len(blob)
        blob += raw + bytes(-len(raw) % 64)
        for f in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
            t.ClearField(f)
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            e = t.external_data.add()
            e.key, e.value = k, v
    data_file.write_bytes(bytes(blob))
    return model


@pytest.fixture
def external(dirs: Dirs) -> Path:
    """two_branch with its weights in in/weights.data."""
    return dirs.save("model.onnx", externalize(zoo(), dirs.inp / "weights.data", "weights.data"))


def test_external_model_rewrites(dirs, external):
    """The good path the refusals below are measured against."""
    before = snapshot(dirs.inp)
    out = dirs.out / "out.onnx"
    proc = run_cli("rewrite", external, "-q", "-o", out)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert listing(dirs.out) == ["out.onnx", "out.onnx.data"]
    assert snapshot(dirs.inp) == before


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_external_data_file_missing(dirs, external, command):
    (dirs.inp / "weights.data").unlink()
    before = snapshot(dirs.inp)
    args = ["-o", dirs.out / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, external, "-q", *args)
    refused(proc, dirs, before, (EXIT_BAD_MODEL,), external.name, "external data", "weights.data", "missing")


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
@pytest.mark.parametrize("keep", [0, 4096, -1], ids=["empty", "gap_only", "one_byte_short"])
def test_external_data_file_too_short(dirs, external, command, keep):
    data = dirs.inp / "weights.data"
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(size - 1 if keep < 0 else keep)
    before = snapshot(dirs.inp)
    args = ["-o", dirs.out / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, external, "-q", *args)
    refused(proc, dirs, before, (EXIT_BAD_MODEL,), external.name, "weights.data", "shorter")


def test_external_data_outside_the_model_folder(dirs):
    src = dirs.save("up.onnx", externalize(zoo(), dirs.inp.parent / "up.data", "../up.data"))
    before = snapshot(dirs.inp)
    proc = run_cli("rewrite", src, "-q", "-o", dirs.out / "out.onnx")
    refused(proc, dirs, before, (EXIT_BAD_MODEL,), src.name, "../up.data")


@pytest.mark.parametrize(
    "output", ["weights", "weights.data"], ids=["sidecar_onto_input_data", "model_onto_input_data"]
)
def test_output_never_overwrites_the_inputs_external_data(dirs, external, output):
    before = snapshot(dirs.inp)
    proc = run_cli("rewrite", external, "-q", "-o", dirs.inp / output)
    assert snapshot(dirs.inp) == before, "the input's external data was overwritten"
    assert proc.returncode in (EXIT_USAGE, EXIT_WRITE), proc.stdout + proc.stderr
    assert_mentions(error_line(proc), "weights.data")


# ---------------------------------------------------------------------------------------
# A model over 2 GB with external data


BIG_ROWS, BIG_DIM = 540_000, 1024  # one 2.21e9-byte fp32 table: over protobuf's 2 GiB
BIG_BYTES = BIG_ROWS * BIG_DIM * 4
PROTOBUF_LIMIT = 2**31 - 1

# Runs the CLI in this process with onnx.load_external_data_for_model instrumented: it records the
# largest total of raw bytes one ModelProto held after external data was loaded into it.
BIG_DRIVER = r"""
import json, sys
import onnx, onnx.external_data_helper as edh
record = {"max_proto_bytes": 0, "loads": 0}
original = edh.load_external_data_for_model
def instrumented(model, base_dir):
    result = original(model, base_dir)
    held = sum(len(t.raw_data) for t in model.graph.initializer)
    record["loads"] += 1
    record["max_proto_bytes"] = max(record["max_proto_bytes"], held)
    return result
edh.load_external_data_for_model = instrumented
onnx.load_external_data_for_model = instrumented
from hexfuse_onnx.cli import main
try:
    code = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as f:
        json.dump(record, f)
sys.exit(code)
"""


def _mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """One rewrite of a >2 GB model (sparse data file), shared by the tests below; removed after."""
    folder = tmp_path_factory.mktemp("big")
    free = shutil.disk_usage(folder).free
    if free < 3 * BIG_BYTES:
        pytest.skip(f"needs {3 * BIG_BYTES / 1e9:.1f} GB free disk in {folder}, {free / 1e9:.1f} GB free")
    if _mem_available() < 4 * BIG_BYTES:
        pytest.skip(
            f"needs about {4 * BIG_BYTES / 1e9:.0f} GB of available memory (ONNX Runtime loads the weights "
            f"of both models), {_mem_available() / 1e9:.1f} GB available"
        )
    inp, out = folder / "in", folder / "out"
    inp.mkdir()
    out.mkdir()
    try:
        m = zoo()
        table = TensorProto(
            name="embed/table",
            data_type=TensorProto.FLOAT,
            dims=[BIG_ROWS, BIG_DIM],
            data_location=TensorProto.EXTERNAL,
        )
        for k, v in (("location", "big.onnx.data"), ("offset", "0"), ("length", str(BIG_BYTES))):
            e = table.external_data.add()
            e.key, e.value = k, v
        m.graph.initializer.append(table)
        m.graph.input.append(helper.make_tensor_value_info("ids", TensorProto.INT64, [1]))
        m.graph.node.append(helper.make_node("Gather", ["embed/table", "ids"], ["emb"], name="embed/gather"))
        m.graph.output.append(helper.make_tensor_value_info("emb", TensorProto.FLOAT, [1, BIG_DIM]))
        src = inp / "big.onnx"
        onnx.save(m, src)
        with open(inp / "big.onnx.data", "wb") as f:
            f.truncate(BIG_BYTES)  # sparse: reads as zeros, takes no disk
        before = snapshot(inp)
        record = folder / "record.json"
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                BIG_DRIVER,
                str(record),
                "rewrite",
                str(src),
                "-q",
                "-o",
                str(out / "big.fused.onnx"),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        yield {
            "proc": proc,
            "src": src,
            "inp": inp,
            "out": out,
            "before": before,
            "record": json.loads(record.read_text()) if record.exists() else {},
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_over_2gb_model_is_rewritten_with_external_data(big_run):
    proc, out = big_run["proc"], big_run["out"]
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    assert snapshot(big_run["inp"]) == big_run["before"], "the input changed"
    if "no pair qualifies" in proc.stdout:  # a clean decline is allowed; then nothing is written
        assert listing(out) == []
        return
    assert listing(out) == ["big.fused.onnx", "big.fused.onnx.data"]
    model_file, data_file = out / "big.fused.onnx", out / "big.fused.onnx.data"
    assert model_file.stat().st_size < 64 << 20, "the weights were not kept outside the protobuf"
    assert data_file.stat().st_size >= BIG_BYTES
    m = onnx.load(str(model_file), load_external_data=False)
    assert any(t.data_location == TensorProto.EXTERNAL and t.name == "embed/table" for t in m.graph.initializer)
    assert any(n.domain == "hexfuse" for n in m.graph.node)
    onnx.checker.check_model(str(model_file))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(str(model_file), so, providers=["CPUExecutionProvider"])
    feeds = {"x": np.ones((64, 256), np.float32), "ids": np.array([1], np.int64)}
    y, emb = s.run(["y", "emb"], feeds)
    assert y.shape == (64, 768) and np.isfinite(y).all()
    assert emb.shape == (1, BIG_DIM) and not emb.any()  # the sparse table reads as zeros


@pytest.mark.slow
def test_over_2gb_model_is_never_held_in_one_protobuf(big_run):
    assert big_run["proc"].returncode == EXIT_OK, big_run["proc"].stderr
    held = big_run["record"]["max_proto_bytes"]
    assert held <= PROTOBUF_LIMIT, f"one ModelProto held {held} bytes of weights"


# ---------------------------------------------------------------------------------------
# Output folder not writable


def _no_write_prefix(folder: Path) -> list[str] | None:
    """A command prefix under which `folder` (mode 0o500) is really not writable, or None.

    As a normal user chmod is enough. As root it is not (CAP_DAC_OVERRIDE); then the command runs
    with that capability removed from its bounding and inheritable sets (util-linux setpriv), which
    makes root obey the folder's mode like its owner would."""
    probe = folder / ".probe"
    try:
        probe.write_bytes(b"")
    except PermissionError:
        return []
    probe.unlink()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override", "--inh-caps=-dac_override"]
    check = subprocess.run([*prefix, sys.executable, "-c", f"open({str(probe)!r}, 'wb')"], capture_output=True)
    if check.returncode == 0:
        probe.unlink()
        return None
    return prefix


@pytest.fixture
def read_only_out(dirs: Dirs):
    dirs.out.chmod(0o500)
    try:
        prefix = _no_write_prefix(dirs.out)
        if prefix is None:
            pytest.skip(
                "running as root and cannot drop CAP_DAC_OVERRIDE (no setpriv, or it had no effect): "
                "no honest way to make a folder unwritable here"
            )
        yield prefix
    finally:
        dirs.out.chmod(0o755)


def test_output_folder_not_writable(dirs, read_only_out):
    src = dirs.save("two_branch.onnx", zoo())
    before = snapshot(dirs.inp)
    proc = run_cli_process("rewrite", src, "-q", "-o", dirs.out / "out.onnx", prefix=read_only_out)
    refused(proc, dirs, before, (EXIT_WRITE,), str(dirs.out), "not writable")


def test_json_report_folder_not_writable(dirs, read_only_out, tmp_path):
    src = dirs.save("two_branch.onnx", zoo())
    before = snapshot(dirs.inp)
    elsewhere = tmp_path / "models"
    elsewhere.mkdir()
    proc = run_cli_process(
        "rewrite", src, "-q", "-o", elsewhere / "out.onnx", "--json", dirs.out / "report.json", prefix=read_only_out
    )
    refused(proc, dirs, before, (EXIT_WRITE,), "report.json", "not writable")
    assert listing(elsewhere) == [], "the model was written although the report cannot be"


def test_unfuse_into_folder_not_writable(dirs, read_only_out, tmp_path):
    src = dirs.save("two_branch.onnx", zoo())
    fused = tmp_path / "fused.onnx"
    proc = run_cli("rewrite", src, "-q", "-o", fused)
    assert proc.returncode == EXIT_OK, proc.stderr
    before = snapshot(dirs.inp)
    proc = run_cli_process("unfuse", fused, "-o", dirs.out / "restored.onnx", prefix=read_only_out)
    refused(proc, dirs, before, (EXIT_WRITE,), str(dirs.out), "not writable")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc")
def test_output_into_proc_is_refused(dirs):
    """/proc takes no new files, not even from root: an honest unwritable folder everywhere."""
    src = dirs.save("two_branch.onnx", zoo())
    before = snapshot(dirs.inp)
    proc = run_cli("rewrite", src, "-q", "-o", "/proc/hexfuse-test-out.onnx")
    refused(proc, dirs, before, (EXIT_WRITE,), "/proc", "not writable")
    assert not Path("/proc/hexfuse-test-out.onnx").exists()


# ---------------------------------------------------------------------------------------
# Output onto something that is not a regular file


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _char_device(path: Path) -> None:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the numbers of /dev/null
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here: {exc}")


@pytest.mark.parametrize("make", [_fifo, _char_device], ids=["fifo", "char_device"])
def test_output_onto_a_special_file_is_not_replaced(dirs, make):
    src = dirs.save("two_branch.onnx", zoo())
    before = snapshot(dirs.inp)
    target = dirs.out / "special"
    make(target)
    kind = stat.S_IFMT(target.lstat().st_mode)
    proc = run_cli("rewrite", src, "-q", "-o", target)
    assert stat.S_IFMT(target.lstat().st_mode) == kind, "the special file was replaced by a regular file"
    assert snapshot(dirs.inp) == before
    assert proc.returncode == EXIT_WRITE, proc.stdout + proc.stderr
    assert_mentions(error_line(proc), "special")
    assert listing(dirs.out) == ["special"]
