"""`python -m hexfuse_onnx zoo` and `bench`: the real CLI in a subprocess, the real plugin and ORT.
Timings are not asserted (they are noise here); what is checked is that every configuration ran,
agreed with the original, and got figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest
from cli_support import ERROR_PREFIX, run_cli_process

from hexfuse_onnx import runtime
from hexfuse_onnx.pipeline import rewrite

pytestmark = pytest.mark.slow  # bench and zoo --analyse time real sessions

PLUGIN_BUILT = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()
FAST = ("--runs", "3", "--rounds", "1", "--warmup", "0", "-q")


def test_zoo_lists_every_builder_and_real_model() -> None:
    import models
    from models import real

    r = run_cli_process("zoo")
    assert r.returncode == 0, r.stderr
    names = {line.split()[0] for line in r.stdout.splitlines()[1:] if line.strip()}
    assert set(models.BUILDERS) <= names
    assert set(real.MODELS) <= names


def test_zoo_analyse_reports_pairs_by_kind() -> None:
    r = run_cli_process("zoo", "--analyse", "--cache-dir", "/nonexistent-cache", timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    two = lines.index(next(line for line in lines if line.startswith("two_branch ")))
    assert "branches 1" in lines[two + 1] and "(modelled)" in lines[two + 1]
    chain = lines.index(next(line for line in lines if line.startswith("sequential_chain ")))
    assert "no pair qualifies" in lines[chain + 1]
    # real models are not fetched in that cache: no analysis line for them
    assert "not fetched" in next(line for line in lines if line.startswith("centerface "))


@pytest.mark.skipif(not PLUGIN_BUILT, reason="plugin not built (bash custom_ops/build.sh)")
def test_bench_zoo_name_measures_every_configuration(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    r = run_cli_process("bench", "two_branch", *FAST, "--json", report, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(report.read_text())
    assert doc["fused_pairs"] == 1
    hexfuse = ("hexfuse", "hexfuse-2t", "hexfuse-fused", "hexfuse-serial")
    for label in ("ort-seq", "ort-seq-2t", "ort-par", "fallback", "auto", *hexfuse):
        cfg = doc["configs"][label]
        assert cfg["check"] == "ok", (label, cfg["check"])
        assert cfg["relative_error"] <= 1e-4
        assert len(cfg["samples_us"]) == 3 and cfg["median_us"] > 0
    assert set(doc["hexfuse_over"]) == {"ort-seq", "ort-seq-2t", "ort-par"}
    assert doc["hexfuse_best"] in ("hexfuse", "hexfuse-2t")
    assert "(the faster hexfuse configuration) / baseline:" in r.stdout
    assert doc["auto_over_best_ort"] > 0 and doc["best_ort"] in ("ort-seq", "ort-seq-2t", "ort-par")
    assert "auto (default session options) / best ORT mode" in r.stdout
    assert set(doc["over_serial"]) == {"hexfuse", "hexfuse-fused"} and "/ hexfuse-serial" in r.stdout


@pytest.mark.skipif(not PLUGIN_BUILT, reason="plugin not built (bash custom_ops/build.sh)")
def test_bench_rewritten_model_runs_its_unfused_original(zoo_dir: Path, tmp_path: Path) -> None:
    fused = rewrite(zoo_dir / "mha_encoder.onnx", tmp_path / "m.fused.onnx").output
    assert fused is not None
    report = tmp_path / "bench.json"
    r = run_cli_process("bench", fused, *FAST, "--baseline", "ort-seq", "--json", report, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(report.read_text())
    assert doc["note"] == "the baselines run its unfused original"
    ok = [c for c, v in doc["configs"].items() if v["check"] == "ok"]
    assert ok == ["ort-seq", "fallback", "auto", "hexfuse", "hexfuse-fused", "hexfuse-serial"]


def test_bench_model_without_pairs_times_the_baselines_only(zoo_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "chain.onnx"
    shutil.copy(zoo_dir / "sequential_chain.onnx", model)
    r = run_cli_process("bench", model, *FAST, "--baseline", "ort-seq,ort-par", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "no pair qualifies" in r.stdout
    assert "hexfuse" not in r.stdout.split("no pair qualifies")[1].split("CPU use")[0].replace("hexfuse not timed", "")
    assert list(tmp_path.iterdir()) == [model]  # nothing written beside the input


@pytest.mark.parametrize(
    "args, message",
    [
        (("bench", "two_branch", "--baseline", "ort-fast"), "--baseline: unknown ort-fast"),
        (("bench", "no_such_model"), "neither a model file nor a zoo model"),
        (("bench", "two_branch", "--runs", "0"), "--runs and --rounds must be >= 1"),
    ],
)
def test_bench_bad_command_lines_exit_2(args: tuple[str, ...], message: str) -> None:
    r = run_cli_process(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines()[-1].startswith(ERROR_PREFIX) and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_bench_missing_file_exits_3(tmp_path: Path) -> None:
    r = run_cli_process("bench", tmp_path / "absent.onnx")
    assert r.returncode == 3 and "file not found" in r.stderr, r.stderr


def test_bench_refuses_a_report_onto_the_model(zoo_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(zoo_dir / "two_branch.onnx", model)
    before = model.read_bytes()
    r = run_cli_process("bench", model, "--json", model)
    assert r.returncode == 2 and "would overwrite" in r.stderr, r.stderr
    assert model.read_bytes() == before
    onnx.checker.check_model(str(model))


def test_bench_without_pairs_times_a_symbolic_model_where_the_pass_analysed_it(tmp_path: Path) -> None:
    """With no pair, bench ran g2p-id's decoder at 1x1x32 where the rewrite analysed 1x128x32 (a stranger's
    report): the dims the pass analyses at (`pipeline.runnable_inputs`), as with pairs."""
    from onnx import TensorProto, helper

    from hexfuse_onnx.graph import DEFAULT_SYMBOLIC_DIM

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 16])
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Sigmoid", ["h"], ["y"])]
    model = tmp_path / "chain.onnx"
    onnx.save(
        helper.make_model(helper.make_graph(nodes, "chain", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]),
        model,
    )
    r = run_cli_process("bench", model, *FAST, "--baseline", "ort-seq", timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"inputs x=1x{DEFAULT_SYMBOLIC_DIM}x16" in r.stdout
