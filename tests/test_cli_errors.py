"""The command line end to end: in this process through `cli.main([...])` (cli_support.run_cli),
and through a real `python -m hexfuse_onnx` subprocess for --help and one full rewrite.

Every bad input must end with one clear line on stderr that names the cause, a specific
non-zero exit code, no output file (and no stray staging folder) in the output directory,
and the input file byte-identical afterwards. The good paths check what is written.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import REPO, Dirs, assert_mentions, error_line, listing, run_cli, run_cli_process, sha256
from onnx import TensorProto, helper

import models

EXIT_OK, EXIT_USAGE, EXIT_BAD_MODEL, EXIT_VERIFY, EXIT_WRITE, EXIT_INTERNAL = 0, 2, 3, 4, 5, 70


# ---------------------------------------------------------------------------------------
# Helpers


@pytest.fixture(scope="module")
def zoo_bytes() -> dict[str, bytes]:
    names = ["two_branch", "gpt_decode_step", "gpt_decode_step_contrib", "sequential_chain"]
    return {n: models.build(n).SerializeToString() for n in names}


def _vi(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])


def _graph_model(
    nodes: list[onnx.NodeProto], inputs: list[str], outputs: list[str], extra_opsets: tuple[tuple[str, int], ...] = ()
) -> bytes:
    """A model built with onnx.helper and never passed through the checker."""
    g = helper.make_graph(nodes, "bad", [_vi(i) for i in inputs], [_vi(o) for o in outputs])
    opsets = [helper.make_opsetid("", 18)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 10
    return m.SerializeToString()


@pytest.fixture(scope="module")
def fused_two_branch(tmp_path_factory, zoo_bytes) -> bytes:
    """two_branch as written by `rewrite` (one CLI run shared by the tests that need it)."""
    folder = tmp_path_factory.mktemp("fused")
    src, out = folder / "two_branch.onnx", folder / "fused.onnx"
    src.write_bytes(zoo_bytes["two_branch"])
    proc = run_cli("rewrite", src, "-q", "-o", out)
    assert proc.returncode == EXIT_OK, proc.stderr
    return out.read_bytes()


def symbolic_two_branch() -> bytes:
    """two_branch with its batch dim symbolic ('N'), so no node can be profiled."""
    m = models.build("two_branch")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    return m.SerializeToString()


def random_feeds(session: ort.InferenceSession, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    kinds = {
        "tensor(float)": np.float32,
        "tensor(double)": np.float64,
        "tensor(float16)": np.float16,
        "tensor(int64)": np.int64,
        "tensor(int32)": np.int32,
        "tensor(bool)": np.bool_,
    }
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in arg.shape]
        dtype = kinds[arg.type]
        if np.issubdtype(dtype, np.floating):
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


# ---------------------------------------------------------------------------------------
# Bad input models


def _missing(d: Dirs, zoo: dict[str, bytes]) -> Path:
    return d.inp / "missing.onnx"


def _directory(d: Dirs, zoo: dict[str, bytes]) -> Path:
    p = d.inp / "model_dir.onnx"
    p.mkdir()
    return p


def _empty(d: Dirs, zoo: dict[str, bytes]) -> Path:
    return d.write("empty.onnx", b"")


def _random_bytes(d: Dirs, zoo: dict[str, bytes]) -> Path:
    return d.write("random.onnx", random.Random(0).randbytes(4096))


def _truncated(d: Dirs, zoo: dict[str, bytes]) -> Path:
    data = zoo["two_branch"]
    return d.write("truncated.onnx", data[: len(data) // 2])


def _cycle(d: Dirs, zoo: dict[str, bytes]) -> Path:
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="node_a"),
        helper.make_node("Relu", ["a"], ["b"], name="node_b"),
    ]
    return d.write("cycle.onnx", _graph_model(nodes, ["x"], ["a"]))


def _dangling(d: Dirs, zoo: dict[str, bytes]) -> Path:
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="node_add")]
    return d.write("dangling.onnx", _graph_model(nodes, ["x"], ["y"]))


def _unknown_domain(d: Dirs, zoo: dict[str, bytes]) -> Path:
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="node_frob", domain="com.acme.secret")]
    return d.write("unknown_domain.onnx", _graph_model(nodes, ["x"], ["y"], (("com.acme.secret", 1),)))


def _duplicate_producer(d: Dirs, zoo: dict[str, bytes]) -> Path:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="first_producer"),
        helper.make_node("Sigmoid", ["x"], ["y"], name="second_producer"),
    ]
    return d.write("duplicate.onnx", _graph_model(nodes, ["x"], ["y"]))


# (id, builder, words the error line must contain besides the file name)
BAD_MODELS = [
    ("missing", _missing, ["not found"]),
    ("directory", _directory, ["directory"]),
    ("empty", _empty, ["empty"]),
    ("random_bytes", _random_bytes, ["not a valid ONNX model"]),
    ("truncated", _truncated, ["not a valid ONNX model"]),
    ("cycle", _cycle, ["cycle", "node_a"]),
    ("dangling", _dangling, ["dangling", "ghost", "node_add"]),
    ("unknown_domain", _unknown_domain, ["unknown domain", "com.acme.secret", "Frobnicate"]),
    ("duplicate_producer", _duplicate_producer, ["produced twice", "'y'"]),
]
FILE_LEVEL = {"missing", "directory", "empty", "random_bytes", "truncated"}


# rewrite for every case; inspect too for the graph-level ones (file-level reading is shared
# code, also covered through unfuse below).
BAD_RUNS = [("rewrite", *c) for c in BAD_MODELS] + [("inspect", *c) for c in BAD_MODELS if c[0] not in FILE_LEVEL]


@pytest.mark.parametrize("command,case,builder,words", BAD_RUNS, ids=[f"{r[0]}-{r[1]}" for r in BAD_RUNS])
def test_bad_model_is_refused_cleanly(dirs, zoo_bytes, command, case, builder, words):
    src = builder(dirs, zoo_bytes)
    before = sha256(src) if src.is_file() else None
    in_before = listing(dirs.inp)
    out = dirs.out / "out.onnx"
    report = dirs.out / "report.json"
    args = [command, src, "-q", "--json", report] + (["-o", out] if command == "rewrite" else [])

    proc = run_cli(*args)

    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert_mentions(error_line(proc), src.name, *words)
    assert listing(dirs.out) == [], "something was written to the output folder"
    assert listing(dirs.inp) == in_before, "the input folder changed"
    if before is not None:
        assert sha256(src) == before


@pytest.mark.parametrize(
    "case,builder,words",
    [c for c in BAD_MODELS if c[0] in FILE_LEVEL],
    ids=[c[0] for c in BAD_MODELS if c[0] in FILE_LEVEL],
)
def test_unfuse_of_unreadable_file_is_refused(dirs, zoo_bytes, case, builder, words):
    src = builder(dirs, zoo_bytes)
    before = sha256(src) if src.is_file() else None
    proc = run_cli("unfuse", src, "-o", dirs.out / "restored.onnx")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert_mentions(error_line(proc), src.name, *words)
    assert listing(dirs.out) == []
    if before is not None:
        assert sha256(src) == before


# Regression: unfuse used to read without validating, ending as exit 4 "rewritten model fails
# onnx.checker" instead of naming the cycle / dangling input.
@pytest.mark.parametrize(
    "case,builder,words", [c for c in BAD_MODELS if c[0] in ("cycle", "dangling")], ids=["cycle", "dangling"]
)
def test_unfuse_of_invalid_graph_names_the_cause(dirs, zoo_bytes, case, builder, words):
    src = builder(dirs, zoo_bytes)
    proc = run_cli("unfuse", src, "-o", dirs.out / "restored.onnx")
    assert listing(dirs.out) == []
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert_mentions(error_line(proc), src.name, *words)


# ---------------------------------------------------------------------------------------
# Unknown shapes and --shape


def test_symbolic_dims_rewrite_keeps_them(dirs):
    src = dirs.write("symbolic.onnx", symbolic_two_branch())
    before = sha256(src)
    proc = run_cli("rewrite", src, "-q", "-o", dirs.out / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "symbolic dims analysed at N=1" in proc.stdout
    assert "at x=1x256; x=2x256" in proc.stdout  # verified at two shapes
    written = onnx.load(str(dirs.out / "out.onnx"))
    assert written.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert sha256(src) == before


def test_symbolic_dims_inspect_shows_the_binding(dirs):
    src = dirs.write("symbolic.onnx", symbolic_two_branch())
    in_before = listing(dirs.inp)
    proc = run_cli("inspect", src, "-q")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "not profiled" not in proc.stdout
    assert "symbolic dims analysed at N=1 (--shape to choose); symbolic in the output" in proc.stdout
    assert "chosen: 1" in proc.stdout
    assert listing(dirs.inp) == in_before


def test_symbolic_dims_with_shape_override_finds_the_pair(dirs):
    src = dirs.write("symbolic.onnx", symbolic_two_branch())
    before = sha256(src)
    proc = run_cli("inspect", src, "-q", "--shape", "x=64x256")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "not profiled" not in proc.stdout
    assert "chosen: 1" in proc.stdout
    assert "serial us" in proc.stdout and "branches" in proc.stdout

    out = dirs.out / "fused.onnx"
    proc = run_cli("rewrite", src, "-q", "--shape", "x=64x256", "-o", out)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "verified" in proc.stdout
    assert listing(dirs.out) == ["fused.onnx"]
    assert sha256(src) == before


BAD_SHAPE_SPECS = [
    ("x=64xab", ["bad --shape", "x=64xab"]),
    ("x", ["bad --shape"]),
    ("x=64x-1", ["bad --shape"]),
]


def test_shape_given_twice_is_usage_error(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    proc = run_cli("rewrite", src, "-q", "--shape", "x=64x256", "--shape", "x=32x256", "-o", dirs.out / "o.onnx")
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(error_line(proc), "bad --shape", "given twice")
    assert listing(dirs.out) == []


@pytest.mark.parametrize("spec,words", BAD_SHAPE_SPECS, ids=[s for s, _ in BAD_SHAPE_SPECS])
def test_bad_shape_spec(dirs, zoo_bytes, spec, words):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    proc = run_cli("rewrite", src, "-q", "--shape", spec, "-o", dirs.out / "out.onnx")
    # A command-line error (regression: it used to be exit 3, "bad input model").
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(error_line(proc), *words)
    assert listing(dirs.out) == []
    assert sha256(src) == before


# A name no input has is a bad command line (exit 2), as colocate says of a merged name; a dim that
# does not fit the model may be either, what matters is a clear refusal.
def test_shape_naming_no_input(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    proc = run_cli("rewrite", src, "-q", "--shape", "nosuch_input=1x2", "-o", dirs.out / "out.onnx")
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(error_line(proc), "nosuch_input", "no graph input", "inputs: x")
    assert listing(dirs.out) == []
    assert sha256(src) == before


def test_shape_of_wrong_rank(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    proc = run_cli("inspect", src, "-q", "--shape", "x=64")
    assert proc.returncode in (EXIT_USAGE, EXIT_BAD_MODEL), proc.stderr
    assert_mentions(error_line(proc), "rank")


# ---------------------------------------------------------------------------------------
# Output paths


def test_output_in_missing_directory(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    out = dirs.out / "no_such_dir" / "out.onnx"
    proc = run_cli("rewrite", src, "-q", "-o", out)
    assert proc.returncode == EXIT_WRITE, proc.stderr
    assert_mentions(error_line(proc), "no_such_dir", "does not exist")
    assert listing(dirs.out) == []
    assert sha256(src) == before


def test_output_is_a_directory(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    target = dirs.out / "a_directory"
    target.mkdir()
    proc = run_cli("rewrite", src, "-q", "-o", target)
    assert proc.returncode == EXIT_WRITE, proc.stderr
    assert_mentions(error_line(proc), "a_directory", "is a directory")
    assert listing(dirs.out) == ["a_directory"]
    assert sha256(src) == before


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
def test_output_equal_to_input_is_refused(dirs, zoo_bytes, spelling):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    if spelling == "same":
        out = str(src)
    elif spelling == "dotted":
        out = f"{dirs.inp}/../{dirs.inp.name}/./{src.name}"
    else:
        link = dirs.inp / "link.onnx"
        link.symlink_to(src)
        out = str(link)
    before = sha256(src)
    in_before = listing(dirs.inp)
    proc = run_cli("rewrite", src, "-q", "-o", out)
    assert proc.returncode == EXIT_WRITE, proc.stderr
    assert_mentions(error_line(proc), "overwrite the input")
    assert sha256(src) == before
    assert listing(dirs.inp) == in_before
    if spelling == "symlink":
        assert (dirs.inp / "link.onnx").is_symlink()


# ---------------------------------------------------------------------------------------
# Command-line errors


# Regression: an unknown kind used to exit 70 ("internal error").
@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_unknown_kind_is_refused(dirs, zoo_bytes, command):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    args = ["-o", dirs.out / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, src, "-q", "--kinds", "branches,bogus_kind", *args)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(
        error_line(proc), "unknown pair kind", "bogus_kind", "branches, colocate, microbatch, prefill_decode"
    )
    assert listing(dirs.out) == []
    assert sha256(src) == before


@pytest.mark.parametrize(
    "args,word",
    [
        (["rewrite", "{src}", "--target", "no-such-target"], "unknown target 'no-such-target'"),
        (["rewrite", "{src}", "--target", "{src}"], "unknown target"),
        (["rewrite", "{src}", "--min-gain", "lots"], "invalid float"),
        (["inspect"], "required"),
        (["unfuse", "{src}"], "-o/--output"),
        (["transmogrify", "{src}"], "invalid choice"),
    ],
    ids=["target", "target_not_json", "min_gain", "no_model", "unfuse_no_output", "no_such_command"],
)
def test_argparse_usage_errors(dirs, zoo_bytes, args, word):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    proc = run_cli(*[a.format(src=src) for a in args])
    assert proc.returncode == EXIT_USAGE
    assert word in proc.stderr
    assert sha256(src) == before
    assert listing(dirs.inp) == ["two_branch.onnx"]


@pytest.mark.parametrize(
    "command", [[], ["rewrite"], ["inspect"], ["unfuse"], ["tune"]], ids=["top", "rewrite", "inspect", "unfuse", "tune"]
)
def test_help(command):
    proc = run_cli(*command, "--help")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert proc.stdout.startswith("usage:")
    assert "exit codes" in proc.stdout


def test_python_dash_m_runs_the_cli():
    proc = run_cli_process("--help")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert proc.stdout.startswith("usage:") and "exit codes" in proc.stdout


# ---------------------------------------------------------------------------------------
# Good paths


def test_rewrite_writes_verified_model_and_json(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    out, report = dirs.out / "fused.onnx", dirs.out / "report.json"
    proc = run_cli_process("rewrite", src, "-o", out, "--json", report)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "[hexfuse" in proc.stderr  # progress without -q goes to stderr, not stdout
    for header in ("kind", "nodes A+B", "serial us", "fused us", "gain"):
        assert header in proc.stdout
    assert "branches" in proc.stdout
    assert "verified" in proc.stdout
    assert f"wrote {out}" in proc.stdout
    assert listing(dirs.out) == ["fused.onnx", "report.json"]  # no staging leftovers
    assert sha256(src) == before

    fused = onnx.load(str(out))
    assert any(n.domain == "hexfuse" and n.op_type == "FusedHexPair" for n in fused.graph.node)
    onnx.checker.check_model(str(out), full_check=True)

    data = json.loads(report.read_text())
    assert data["output"] == str(out)
    assert data["nodes"] == 9
    assert data["verification"]["outputs"] == 1
    assert data["verification"]["plugin_verified"] is False  # stock ORT only, without --verify plugin
    assert len(data["pairs"]) >= 1
    for pair in data["pairs"]:
        assert pair["kind"] == "branches"
        t = pair["predicted_us"]
        assert isinstance(t["serial"], float) and isinstance(t["fused"], float)
        assert 0 < t["fused"] < t["serial"]
        assert pair["task_a"]["nodes"] and pair["task_b"]["nodes"]
    # the model's node-after-node modelled time: what the pairs' serial time is a share of
    assert sum(p["predicted_us"]["serial"] for p in data["pairs"]) <= data["modelled_us"] * 1.001


def test_rewrite_default_output_beside_input(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    proc = run_cli("rewrite", src, "-q")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert listing(dirs.inp) == ["two_branch.fused.onnx", "two_branch.onnx"]


def test_inspect_writes_nothing(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    proc = run_cli("inspect", src, "-q")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "serial us" in proc.stdout and "branches" in proc.stdout
    assert "verified" not in proc.stdout and "wrote" not in proc.stdout
    assert listing(dirs.inp) == ["two_branch.onnx"]
    assert sha256(src) == before

    report = dirs.out / "inspect.json"
    proc = run_cli("inspect", src, "-q", "--json", report)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert listing(dirs.out) == ["inspect.json"]
    assert listing(dirs.inp) == ["two_branch.onnx"]
    data = json.loads(report.read_text())
    assert data["pairs"] and "output" not in data


def test_sequential_chain_has_no_pair(dirs, zoo_bytes):
    src = dirs.write("sequential_chain.onnx", zoo_bytes["sequential_chain"])
    before = sha256(src)
    proc = run_cli("rewrite", src, "-q", "-o", dirs.out / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "no pair qualifies" in proc.stdout
    assert "wrote" not in proc.stdout
    assert listing(dirs.out) == []
    proc = run_cli("rewrite", src, "-q")  # the default output is not written either
    assert proc.returncode == EXIT_OK, proc.stderr
    assert listing(dirs.inp) == ["sequential_chain.onnx"]
    assert sha256(src) == before


@pytest.mark.parametrize("name", ["two_branch", "gpt_decode_step", "gpt_decode_step_contrib"])
def test_unfuse_round_trip(dirs, zoo_bytes, name):
    src = dirs.write(f"{name}.onnx", zoo_bytes[name])
    before = sha256(src)
    fused, restored = dirs.out / "fused.onnx", dirs.out / "restored.onnx"
    proc = run_cli("rewrite", src, "-q", "-o", fused)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "wrote" in proc.stdout
    fused_sha = sha256(fused)

    proc = run_cli("unfuse", fused, "-o", restored)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert listing(dirs.out) == ["fused.onnx", "restored.onnx"]
    assert sha256(fused) == fused_sha
    assert sha256(src) == before

    onnx.checker.check_model(str(restored), full_check=True)
    model = onnx.load(str(restored))
    assert not any(n.domain == "hexfuse" for n in model.graph.node)
    assert not any(f.domain == "hexfuse" for f in model.functions)

    ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    got = ort.InferenceSession(str(restored), providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    assert [o.name for o in got.get_outputs()] == names
    feeds = random_feeds(ref)
    for n, a, b in zip(names, ref.run(names, feeds), got.run(names, feeds)):
        np.testing.assert_array_equal(b, a, err_msg=f"output {n}")


# ---------------------------------------------------------------------------------------
# Regressions: the input (or the verified output) must never be overwritten by a report or
# by unfuse (all of these used to overwrite silently), and a broken FusedHexPair is a bad model.


@pytest.mark.parametrize("command", ["rewrite", "inspect"])
def test_json_report_onto_input_is_refused(dirs, zoo_bytes, command):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    before = sha256(src)
    args = ["-o", dirs.out / "out.onnx"] if command == "rewrite" else []
    proc = run_cli(command, src, "-q", "--json", src, *args)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(error_line(proc), "two_branch.onnx", "overwrite")
    assert sha256(src) == before
    assert listing(dirs.inp) == ["two_branch.onnx"]
    assert listing(dirs.out) == []


@pytest.mark.parametrize("explicit", [True, False], ids=["explicit_output", "default_output"])
def test_json_report_onto_output_is_refused(dirs, zoo_bytes, explicit):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    out = dirs.out / "out.onnx" if explicit else dirs.inp / "two_branch.fused.onnx"
    args = ["-o", out] if explicit else []
    proc = run_cli("rewrite", src, "-q", "--json", out, *args)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert_mentions(error_line(proc), out.name, "overwrite")
    assert not out.exists()
    assert listing(dirs.out) == []


def test_unfuse_onto_input_is_refused(dirs, fused_two_branch):
    fused = dirs.write("fused.onnx", fused_two_branch)
    before = sha256(fused)
    proc = run_cli("unfuse", fused, "-o", fused)
    assert proc.returncode in (EXIT_USAGE, EXIT_WRITE), proc.stderr  # rewrite says 5 for the same mistake
    assert_mentions(error_line(proc), "fused.onnx", "overwrite")
    assert sha256(fused) == before
    assert listing(dirs.inp) == ["fused.onnx"]


def test_unfuse_without_function_body_is_a_bad_model(dirs, fused_two_branch):
    model = onnx.load_from_string(fused_two_branch)
    del model.functions[:]
    broken = dirs.write("no_body.onnx", model.SerializeToString())
    proc = run_cli("unfuse", broken, "-o", dirs.out / "restored.onnx")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert_mentions(error_line(proc), "no function body")
    assert listing(dirs.out) == []


def test_unwritable_json_report_writes_nothing(dirs, zoo_bytes):
    src = dirs.write("two_branch.onnx", zoo_bytes["two_branch"])
    out = dirs.out / "out.onnx"
    proc = run_cli("rewrite", src, "-q", "-o", out, "--json", dirs.out / "no_such_dir" / "r.json")
    assert proc.returncode == EXIT_WRITE, proc.stderr
    assert_mentions(error_line(proc), "r.json")
    assert listing(dirs.out) == []


@pytest.mark.parametrize("command", [["profile", "-o", "trace.json"], ["bench"]])
@pytest.mark.parametrize(("content", "words"), [(None, "file not found"), (b"not onnx", "not a valid ONNX model")])
def test_profile_and_bench_refuse_a_bad_file_as_a_bad_model(dirs, command, content, words):
    src = dirs.inp / "bad.onnx"
    if content is not None:
        src.write_bytes(content)
    proc = run_cli(command[0], src, *[dirs.out / a if a.endswith(".json") else a for a in command[1:]])
    assert proc.returncode == 3, proc.stderr
    assert words in error_line(proc)


@pytest.mark.parametrize("module", ["hexfuse_onnx", "models"])
def test_closed_stdout_ends_quietly(dirs, module):
    """`... | head`: the reader has gone before the first line; exit 141 (128 + SIGPIPE), no traceback."""
    model = dirs.inp / "two_branch.onnx"
    onnx.save_model(models.build("two_branch"), model)
    argv = ["inspect", str(model)] if module == "hexfuse_onnx" else ["quantized", "list", "--cache-dir", str(dirs.inp)]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, *argv],
            cwd=REPO,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
