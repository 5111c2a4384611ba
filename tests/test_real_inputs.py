"""models.real.realistic_inputs: the seeded inputs benchmarks and tests feed a zoo model, a real model's
integer inputs drawn from its entry's int_ranges (a sample rate, token ids) where random ones are 0 or 1,
and its control inputs set to its fixed_inputs (Kokoro's speed) where random ones are N(0, 1); the same
control inputs where `rewrite` verifies a zoo name and where models/quantized.py calibrates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import run_cli
from onnx import TensorProto, helper, numpy_helper
from real_support import cached_or_skip

import models
from hexfuse_onnx import verify
from models import quantized, real

RANGED = [name for name, m in real.MODELS.items() if m.int_ranges]
FIXED = [name for name, m in real.MODELS.items() if m.fixed_inputs]
SCALED = [name for name, m in real.MODELS.items() if m.input_scales]


def _identities(ints: list[str], shape: list[int], floats: dict[str, list[int]] | None = None) -> ort.InferenceSession:
    """A session of `_identities_model`."""
    return verify.session(_identities_model(ints, shape, floats).SerializeToString())


def _identities_model(ints: list[str], shape: list[int], floats: dict[str, list[int]] | None = None) -> onnx.ModelProto:
    """A model passing int64 inputs `ints` of `shape` and float ones `floats` (name: shape) through
    Identity nodes."""
    typed = [(n, TensorProto.INT64, shape) for n in ints]
    typed += [(n, TensorProto.FLOAT, s) for n, s in (floats or {}).items()]
    args = [helper.make_tensor_value_info(n, t, s) for n, t, s in typed]
    outs = [helper.make_tensor_value_info(f"{n}_out", t, s) for n, t, s in typed]
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n, _, _ in typed]
    g = helper.make_graph(nodes, "identities", args, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _entry_session(m: real.RealModel, shape: list[int]) -> ort.InferenceSession:
    """Identities of the inputs entry `m` names: its ranged ones int64 of `shape`, its fixed ones float
    ([1] for a scalar value, as Kokoro's speed), its scaled ones float of `shape`."""
    floats = {arg: list(np.shape(v)) or [1] for arg, v in m.fixed_inputs.items()}
    return _identities(list(m.int_ranges), shape, floats | {arg: shape for arg in m.input_scales})


@pytest.mark.parametrize("name", RANGED)
def test_integer_inputs_are_drawn_from_the_entry_ranges(name: str) -> None:
    """Every ranged input in [low, high), and spread over it where random 0 or 1 would not be (a
    vocabulary of 30522 ids, silero_vad's one sample rate 16000)."""
    ranges = real.MODELS[name].int_ranges
    feeds = real.realistic_inputs(_entry_session(real.MODELS[name], [2, 64]), name, seed=3)
    for arg, (low, high) in ranges.items():
        got = feeds[arg]
        assert low <= got.min() and got.max() < high, f"{name} {arg}: {got.min()}..{got.max()} not in [{low}, {high})"
        assert len(np.unique(got)) >= min(high - low, 8), f"{name} {arg}: {np.unique(got)[:10]}"


@pytest.mark.parametrize("name", FIXED)
def test_control_inputs_take_the_entry_values(name: str) -> None:
    """Kokoro's speed 1 (N(0, 1) drew 0.348: 8.1 s of audio, 23 s a run), Piper's three scales."""
    m = real.MODELS[name]
    for seed in (0, 3):
        feeds = real.realistic_inputs(_entry_session(m, [1, 8]), name, seed=seed)
        for arg, value in m.fixed_inputs.items():
            got = feeds[arg]
            assert got.dtype == np.float32 and (got == np.float32(value)).all(), f"{name} {arg}: {got}"


@pytest.mark.parametrize("name", SCALED)
def test_float_inputs_take_the_entry_scale(name: str) -> None:
    """terrain_unet's noise N(0, 80^2), as the package draws it at sigma_max 80, where the random N(0, 1)
    is 1/80 of the noise its sigma input says."""
    m = real.MODELS[name]
    session = _entry_session(m, [2, 64])
    feeds = real.realistic_inputs(session, name, seed=3)
    plain = verify.random_inputs(session, seed=3)
    for arg, scale in m.input_scales.items():
        assert feeds[arg].dtype == plain[arg].dtype and np.allclose(feeds[arg], plain[arg] * scale), arg
        assert scale / 2 < feeds[arg].std() < scale * 2, f"{name} {arg}: std {feeds[arg].std()}"


@pytest.mark.parametrize("field", ["int_ranges", "fixed_inputs", "input_scales"])
def test_an_entry_naming_an_input_the_model_lacks_is_an_error(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt name would leave that input random: it is said, with the model's inputs."""
    m = real.get("kokoro_ja_int8")
    misspelt = {"int_ranges": {"token": (1, 178)}, "fixed_inputs": {"sped": 1.0}, "input_scales": {"styl": 2.0}}[field]
    monkeypatch.setitem(real.MODELS, m.name, dataclasses.replace(m, **{field: misspelt}))
    session = _identities(["tokens"], [1, 8], {"style": [1, 256], "speed": [1]})
    with pytest.raises(ValueError, match=rf"kokoro_ja_int8: the zoo entry names input '{next(iter(misspelt))}'; "):
        real.realistic_inputs(session, m.name)


def test_a_builder_gets_the_seeded_random_inputs() -> None:
    session = _identities(["input_ids"], [1, 16])
    got = real.realistic_inputs(session, "two_branch", seed=5)["input_ids"]
    assert np.array_equal(got, verify.random_inputs(session, seed=5)["input_ids"])
    assert set(np.unique(got)) <= {0, 1}


@pytest.mark.slow  # loads each cached model's graph
@pytest.mark.parametrize("name", sorted(set(RANGED) | set(FIXED) | set(SCALED)))
def test_every_named_input_is_an_input_of_the_model(name: str) -> None:
    """A misspelt int_ranges, fixed_inputs or input_scales name would leave that input random
    unnoticed; a fixed value must fill its input's static shape."""
    m = real.MODELS[name]
    graph = onnx.load(str(cached_or_skip(name)), load_external_data=False).graph
    inputs = {v.name: v for v in graph.input if v.name not in {t.name for t in graph.initializer}}
    assert {*m.int_ranges, *m.fixed_inputs, *m.input_scales} <= set(inputs), sorted(inputs)
    for arg, value in m.fixed_inputs.items():
        dims = [d.dim_value or 1 for d in inputs[arg].type.tensor_type.shape.dim]
        assert np.broadcast_to(np.float32(value), dims).shape == tuple(dims), f"{arg}: {value} into {dims}"


def _speed_gated_two_branch() -> onnx.ModelProto:
    """two_branch (one pair) with a control input `speed` [1] that picks a row of x, (speed * 64 - 64)
    * 64 (ints): the model runs at speed 1 only (row 0); a random N(0, 1) speed's row is out of range."""
    m = models.build("two_branch")
    g = m.graph
    g.input.append(helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1]))
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array([64.0], np.float32), "rows"),
            numpy_helper.from_array(np.array([64], np.int64), "rows_int"),
        ]
    )
    g.node.extend(
        [
            helper.make_node("Mul", ["speed", "rows"], ["speed_rows"]),
            helper.make_node("Cast", ["speed_rows"], ["speed_rows_int"], to=TensorProto.INT64),
            helper.make_node("Sub", ["speed_rows_int", "rows_int"], ["off_by"]),
            helper.make_node("Mul", ["off_by", "rows_int"], ["row"]),
            helper.make_node("Gather", ["x", "row"], ["gated"], axis=0),
        ]
    )
    g.output.append(helper.make_tensor_value_info("gated", TensorProto.FLOAT, [1, 256]))
    return m


def _cached_speed_gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> real.RealModel:
    """A cached real model entry, speed_gated, that runs at speed 1 only (its fixed_inputs)."""
    entry = real.RealModel(
        "speed_gated",
        package="speed-gated",
        version="0",
        onnx_path="model.onnx",
        kind="speech",
        what="two_branch with a speed",
        license="-",
        onnx_bytes=0,
        wheel_bytes=0,
        sha256=None,
        ci=False,
        fixed_inputs={"speed": 1.0},
        input_scales={"x": 2.0},
    )
    monkeypatch.setitem(real.MODELS, entry.name, entry)
    monkeypatch.setenv(real.ENV_CACHE, str(tmp_path / "cache"))
    folder = real.package_dir(entry)
    folder.mkdir(parents=True)
    onnx.save(_speed_gated_two_branch(), folder / entry.onnx_path)
    (folder / real._COMPLETE).touch()  # as fetch marks a package installed whole
    return entry


def test_rewrite_of_a_zoo_name_verifies_on_its_control_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rewrite NAME` without --inputs sets the entry's fixed_inputs as --inputs would (random inputs
    elsewhere): a cached real model that runs at speed 1 only is rewritten, where a random speed
    failed it (exit 3, "the original model fails on seeded random inputs")."""
    entry = _cached_speed_gated(tmp_path, monkeypatch)
    out = tmp_path / "fused.onnx"
    proc = run_cli("rewrite", entry.name, "-o", out, "--target", "host")
    assert proc.returncode == 0 and out.is_file(), proc.stderr
    said = "speed_gated: verifying on its control inputs as its users set them (speed 1.0; x scaled by 2)"
    assert said in proc.stderr


def test_quantized_calibration_sets_the_control_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """models/quantized.sample_feeds (a real model's QDQ versions are calibrated on it) sets the base
    entry's fixed_inputs, as realistic_inputs does, and draws its int_ranges."""
    name = next(n for n, q in quantized.MODELS.items() if q.is_real and quantized.image_range(n) is None)
    base = real.MODELS[quantized.get(name).base]
    controlled = dataclasses.replace(base, int_ranges={"ids": (5, 9)}, fixed_inputs={"speed": 1.0})
    monkeypatch.setitem(real.MODELS, base.name, controlled)
    feeds = quantized.sample_feeds(name, _identities_model(["ids"], [2, 16], {"speed": [1]}), seed=3)
    assert feeds["speed"].dtype == np.float32 and feeds["speed"].tolist() == [1.0]
    assert feeds["ids"].min() >= 5 and feeds["ids"].max() < 9


def test_other_shapes_keep_the_given_control_values(tmp_path: Path) -> None:
    """Verification at the other bindings of symbolic dims draws random inputs at their shapes, but
    an input given with --inputs whose shape does not change there keeps its given value: a random
    speed failed the original at every other batch (progress "does not run at N=...; not verifying
    there"), so the pairs were proven at the --inputs' batch alone."""
    m = _speed_gated_two_branch()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "M"
    model, given, out = tmp_path / "gated.onnx", tmp_path / "inputs.npz", tmp_path / "fused.onnx"
    onnx.save(m, model)
    rng = np.random.default_rng(0)
    np.savez(given, x=rng.standard_normal((3, 256)).astype(np.float32), speed=np.array([1.0], np.float32))
    proc = run_cli("rewrite", model, "-o", out, "--inputs", given, "--target", "host")
    assert proc.returncode == 0 and out.is_file(), proc.stderr
    assert "does not run at" not in proc.stderr, proc.stderr


def test_colocate_of_a_zoo_name_verifies_on_its_control_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`colocate NAME --requests 2` without --inputs verifies each request on the entry's inputs as
    `rewrite NAME` does, seeded per request: random ones set the speed at N(0, 1) and the model
    failed (exit 3)."""
    entry = _cached_speed_gated(tmp_path, monkeypatch)
    out = tmp_path / "two.onnx"
    proc = run_cli("colocate", entry.name, "--requests", "2", "-o", out, "--target", "host")
    assert proc.returncode == 0 and out.is_file(), proc.stderr
    assert "speed_gated: verifying on its control inputs as its users set them" in proc.stderr
