"""Shape-polymorphic fusion: symbolic input dims stay symbolic, programs carry a shape section
(format v2) proven at a second shape, verification runs at several shapes (real ORT, no mocks)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_support import error_line, run_cli

import models
from hexfuse_onnx import contract as C
from hexfuse_onnx import graph as graph_mod
from hexfuse_onnx import pipeline, runtime, shape_expr, verify
from hexfuse_onnx.errors import EXIT_BAD_MODEL, EXIT_OK
from hexfuse_onnx.lowering import attach_programs
from hexfuse_onnx.lowering.abi import Dtype, Engine, Opcode, Role, Task
from hexfuse_onnx.lowering.program import Op, Program, Tensor, layout_of, read_section, specialize, tensor_records
from models.graph_builder import GraphBuilder

C_IN = 16
SHAPES = [(1, C_IN, 64, 64), (2, C_IN, 96, 160), (3, C_IN, 30, 50)]  # three input shapes, one with odd dims


def conv_two_branch(path: Path, dequantized: bool = False) -> Path:
    """Two conv branches of x[batch, 16, height, width] joined by Add (one strided, one pooled);
    `dequantized`: conv_b1's weight a DequantizeLinear of int8 values (a QDQ model's)."""
    b = GraphBuilder("symbolic_two_branch", seed=1)
    x = b.input("x", ["batch", C_IN, "height", "width"])
    a = b.op("Conv", [x, b.weight("wa1", [C_IN, C_IN, 3, 3]), b.bias("ba1", C_IN)], "conv_a1", pads=[1, 1, 1, 1])
    a = b.op("Relu", [a], "relu_a")
    a = b.op(
        "Conv", [a, b.weight("wa2", [C_IN, C_IN, 3, 3]), b.bias("ba2", C_IN)], "conv_a2", pads=[1] * 4, strides=[2, 2]
    )
    wb1 = b.weight("wb1", [C_IN, C_IN, 1, 1])  # drawn either way: the weights after it stay the same
    if dequantized:
        q = np.random.default_rng(1).integers(-127, 128, (C_IN, C_IN, 1, 1)).astype(np.int8)
        wb1 = b.op("DequantizeLinear", [b.const("wb1_q", q), b.scalar("wb1_scale", 0.01)], "dq_wb1")
    c = b.op("Conv", [x, wb1, b.bias("bb1", C_IN)], "conv_b1")
    c = b.op("Sigmoid", [c], "sigmoid_b")
    c = b.op("MaxPool", [c], "pool_b", kernel_shape=[2, 2], strides=[2, 2])
    b.op("Add", [a, c], "join", outputs=["y"])
    b.output("y", ["batch", C_IN, "h2", "w2"])
    onnx.save(b.model(), path)
    return path


def _with_pooled_branch(b: GraphBuilder, x: str, ya_dims: list[int | str], path: Path) -> Path:
    """Branch b beside branch a (output ya): x pooled by 2 and convolved (yb), the model saved at `path`."""
    p = b.op("MaxPool", [x], "pool_b", kernel_shape=[2, 2], strides=[2, 2])
    b.op("Conv", [p, b.weight("wb", [C_IN, C_IN, 3, 3]), b.bias("bb", C_IN)], "conv_b", pads=[1] * 4, outputs=["yb"])
    b.output("ya", ya_dims)
    b.output("yb", [1, C_IN, "h2", "w2"])
    onnx.save(b.model(), path)
    return path


def resize_pair(path: Path) -> Path:
    """A pair whose Resize scale follows the input shape (constant `sizes`): the kernel derives it from the dims."""
    b = GraphBuilder("symbolic_resize", seed=2)
    x = b.input("x", [1, C_IN, "height", "width"])
    r = b.op("Resize", [x, "", "", b.ints("sizes", [1, C_IN, 32, 32])], "resize_a", mode="linear")
    b.op("Conv", [r, b.weight("wa", [C_IN, C_IN, 3, 3]), b.bias("ba", C_IN)], "conv_a", pads=[1] * 4, outputs=["ya"])
    return _with_pooled_branch(b, x, [1, C_IN, 32, 32], path)


def sized_by_shape_pair(path: Path) -> Path:
    """SLANet's CSP-PAN in small: a stride-2 feature resized to the size of the one before it, `sizes` folded from
    their Shapes: x2 at every input side the bindings take (128, 192), 23 -> 45 at 90 (the kernel refused it)."""
    b = GraphBuilder("symbolic_resize_by_shape", seed=4)
    x = b.input("x", [1, C_IN, "height", "width"])
    c1 = b.op(
        "Conv", [x, b.weight("w1", [C_IN, C_IN, 3, 3]), b.bias("b1", C_IN)], "conv_a1", pads=[1] * 4, strides=[2, 2]
    )
    c2 = b.op(
        "Conv", [c1, b.weight("w2", [C_IN, C_IN, 3, 3]), b.bias("b2", C_IN)], "conv_a2", pads=[1] * 4, strides=[2, 2]
    )
    lead = b.op("Shape", [c2], "shape_a2", end=2)
    side = b.op("Shape", [c1], "shape_a1", start=2)
    sizes = b.op("Concat", [lead, side], "sizes_a", axis=0)
    up = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    r = b.op("Resize", [c2, "", "", sizes], "resize_a", **up)
    b.op("Add", [c1, r], "join_a", outputs=["ya"])
    return _with_pooled_branch(b, x, [1, C_IN, "h2", "w2"], path)


def same_pads_pair(path: Path) -> Path:
    """Stride-2 auto_pad SAME_* windows over x[1, 16, height, width] (PP-OCRv6's, MTCNN's): SAME_UPPER Convs in
    branch a, a SAME_LOWER MaxPool then Conv in branch b, each output ceil(ceil(x/2)/2) long. Each window's pads
    follow its side mod 2; the second ones' side is itself ceil(x/2)."""
    b = GraphBuilder("symbolic_same_pads", seed=6)
    x = b.input("x", [1, C_IN, "height", "width"])
    upper, lower = dict(auto_pad="SAME_UPPER", strides=[2, 2]), dict(auto_pad="SAME_LOWER", strides=[2, 2])
    a = b.op("Conv", [x, b.weight("wa1", [C_IN, C_IN, 3, 3]), b.bias("ba1", C_IN)], "conv_a1", **upper)
    a = b.op("Relu", [a], "relu_a")
    b.op("Conv", [a, b.weight("wa2", [C_IN, C_IN, 3, 3]), b.bias("ba2", C_IN)], "conv_a2", **upper, outputs=["ya"])
    p = b.op("MaxPool", [x], "pool_b", kernel_shape=[3, 3], **lower)
    b.op("Conv", [p, b.weight("wb", [C_IN, C_IN, 3, 3]), b.bias("bb", C_IN)], "conv_b", **lower, outputs=["yb"])
    b.output("ya", [1, C_IN, "h4", "w4"])
    b.output("yb", [1, C_IN, "h4", "w4"])
    onnx.save(b.model(), path)
    return path


def computed_slice_pair(path: Path, end: bool = False) -> Path:
    """A pair whose Slice start follows the input length (x[:, :, height // 2 :], the start folded from a Shape):
    no expression for it. With `end`, its end does (x[:, :, : height // 2]): the start plus the output's length."""
    b = GraphBuilder("symbolic_slice", seed=5)
    x = b.input("x", [1, C_IN, "height", "width"])
    half = b.op("Div", [b.op("Shape", [x], "shape_a", start=2, end=3), b.ints("two", [2])], "half_a")
    bounds = [b.ints("zero", [0]), half] if end else [half, b.ints("last", [2**62])]
    a = b.op("Slice", [x, *bounds, b.ints("axis", [2])], "slice_a")
    b.op("Conv", [a, b.weight("wa", [C_IN, C_IN, 1, 1]), b.bias("ba", C_IN)], "conv_a", outputs=["ya"])
    return _with_pooled_branch(b, x, [1, C_IN, "h2", "width"], path)


def scratch_branches(path: Path) -> Path:
    """Two branches over x[batch, 16, height, width] whose lowerings make scratch tensors: an
    unfolded BatchNormalization (MUL, ADD) and a three-input Sum (two ADDs), then an x**3."""
    b = GraphBuilder("symbolic_scratch", seed=3)
    x = b.input("x", ["batch", C_IN, "height", "width"])
    a = b.op("Conv", [x, b.weight("wa", [C_IN, C_IN, 3, 3]), b.bias("ba", C_IN)], "conv_a", pads=[1] * 4)
    a = b.op("Relu", [a], "relu_a")  # keeps the BatchNormalization from folding into the Conv
    var = b.const("var", np.linspace(0.5, 1.5, C_IN, dtype=np.float32))
    bn = [b.bias("gamma", C_IN, 1.0), b.bias("beta", C_IN), b.bias("mean", C_IN), var]
    a = b.op("BatchNormalization", [a, *bn], "bn_a")
    c = b.op("Conv", [x, b.weight("wb", [C_IN, C_IN, 1, 1]), b.bias("bb", C_IN)], "conv_b")
    c = b.op("Sigmoid", [c], "sigmoid_b")
    c = b.op("Sum", [c, x, c], "sum_b")
    c = b.op("Pow", [c, b.scalar("three", 3.0)], "cube_b")
    b.op("Add", [a, c], "join", outputs=["y"])
    b.output("y", ["batch", C_IN, "height", "width"])
    onnx.save(b.model(), path)
    return path


def state_expanded_pair(path: Path) -> Path:
    """paddle2onnx's GRU state (lac): a tensor Expanded to a shape built from the input's batch through Identity
    and a Reshape of [batch] to a scalar, then Mul and Sigmoid; beside it a Transpose and Tanh. ORT's inference
    dropped the shape at the Identity, then at the Reshape, and the pair had no expression for its batch dim."""
    b = GraphBuilder("symbolic_expanded_state", seed=7)
    x = b.input("x", ["batch", C_IN, C_IN])
    batch = b.op("Identity", [b.op("Shape", [x], "shape_a")], "shape_copy_a")
    batch = b.op("Slice", [batch, b.ints("zero", [0]), b.ints("one", [1])], "batch_slice_a")
    batch = b.op("Squeeze", [batch, b.ints("axis0", [0])], "batch_squeeze_a")
    batch = b.op("Reshape", [batch, b.ints("scalar", [])], "batch_scalar_a")
    batch = b.op("Unsqueeze", [batch, b.ints("axis0_u", [0])], "batch_unsqueeze_a")
    side = b.ints("side", [C_IN])
    shape = b.op("Identity", [b.op("Concat", [batch, side, side], "state_shape_a", axis=0)], "state_shape_copy_a")
    state = b.op("Expand", [b.scalar("half", 0.5), shape], "state_a", outputs=["state"])
    b.op("Sigmoid", [b.op("Mul", [x, state], "mul_a")], "sigmoid_a", outputs=["ya"])
    b.op("Tanh", [b.op("Transpose", [x], "transpose_b", perm=[0, 2, 1])], "tanh_b", outputs=["yb"])
    b.output("ya", ["batch", C_IN, C_IN])
    b.output("yb", ["batch", C_IN, C_IN])
    onnx.save(b.model(), path)
    return path


def input_dims(model: onnx.ModelProto) -> list[list[int | str]]:
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input]


def programs(model: onnx.ModelProto) -> list[bytes]:
    return [a.s for n in model.graph.node if n.domain == C.DOMAIN for a in n.attribute if a.name == C.ATTR_PROGRAM]


def max_error_at(original: Path, fused: Path, shape: tuple[int, ...], options: ort.SessionOptions | None = None):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    want = verify.session(original).run(None, {"x": x})
    got = verify.session(fused, options).run(None, {"x": x})
    return max(verify.relative_error(w, g) for w, g in zip(want, got))


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> tuple[Path, Path, pipeline.RewriteResult]:
    folder = tmp_path_factory.mktemp("symbolic")
    src = conv_two_branch(folder / "model.onnx")
    result = pipeline.rewrite(src, folder / "model.fused.onnx", target="host", min_gain=-1.0)
    assert result.output is not None
    return src, result.output, result


def test_rewrite_without_shape_keeps_symbolic_inputs(rewritten) -> None:
    src, out, result = rewritten
    fused = onnx.load(str(out))
    assert len(result.analysis.pairs) >= 1
    assert input_dims(fused) == [["batch", C_IN, "height", "width"]]
    assert [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in fused.graph.output] == [
        ["batch", C_IN, "h2", "w2"]
    ]
    assert result.analysis.graph.binding is not None
    assert result.analysis.graph.binding.symbols == {"batch": 1, "height": 128, "width": 128}
    # verified at the representative binding and a second one
    assert result.comparison is not None
    assert result.comparison.shapes == ["x=1x16x128x128", "x=2x16x192x192"]


def test_bindings_are_recorded_and_unfuse_drops_them(rewritten) -> None:
    from hexfuse_onnx.rewrite import unfuse

    fused = onnx.load(str(rewritten[1]))
    assert any(p.key == C.METADATA_BINDINGS for p in fused.metadata_props)
    assert not any(p.key == C.METADATA_BINDINGS for p in unfuse(fused).metadata_props)


def test_cli_unfuse_restores_the_symbolic_inputs(rewritten, tmp_path: Path) -> None:
    """`unfuse` wrote the model the pass had analysed (input dims fixed at the binding, 128x128), so the
    restored model refused every other shape (a user-quantised trueocr_det: 'index: 2 Got: 64
    Expected: 128'); it restores the file's own graph."""
    src, out, _ = rewritten
    restored = tmp_path / "restored.onnx"
    proc = run_cli("unfuse", out, "-o", restored)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert input_dims(onnx.load(str(restored))) == [["batch", C_IN, "height", "width"]]
    assert max_error_at(src, restored, SHAPES[2]) == 0.0


def test_rewritten_model_matches_at_three_shapes_on_stock_ort(rewritten) -> None:
    src, out, _ = rewritten
    for shape in SHAPES:
        assert max_error_at(src, out, shape) <= 1e-5, shape


def test_programs_are_v2_with_a_shape_section(rewritten) -> None:
    _, out, _ = rewritten
    progs = programs(onnx.load(str(out)))
    assert progs
    for prog in progs:
        lay = layout_of(prog)
        assert (lay.version, lay.tensors_off, lay.data_bytes % 4) == (2, 64, 0)
        assert struct.unpack_from("<H", prog, 6)[0] == 64
        total, crc = struct.unpack_from("<I", prog, 8)[0], struct.unpack_from("<I", prog, len(prog) - 4)[0]
        assert total == len(prog) == lay.shapes_off + lay.shapes_bytes + 4
        assert crc == zlib.crc32(prog[:-4])
        section = read_section(prog)
        assert section is not None and (0, 0) in section.symbols and (0, 2) in section.symbols


def test_specialized_program_holds_the_actual_shapes(rewritten) -> None:
    """The program specialized to another input shape has every tensor dim the body has there."""
    _, out, _ = rewritten
    prog = programs(onnx.load(str(out)))[0]
    inputs = [dims for role, _, dims in sorted(tensor_records(prog), key=lambda r: r[1]) if role == Role.INPUT]
    given = [[3, d[1], 30, 50] if len(d) == 4 and d[0] == 1 else d for d in inputs]
    dims = [d for role, _, d in tensor_records(specialize(prog, given)) if role == Role.OUTPUT]
    assert sorted(map(tuple, dims)) == [(3, C_IN, 15, 25)] * 2  # conv_a2 (stride 2) and pool_b (2x2)


def test_freeze_shapes_fixes_the_inputs(tmp_path: Path) -> None:
    src = conv_two_branch(tmp_path / "model.onnx")
    result = pipeline.rewrite(
        src, tmp_path / "frozen.onnx", target="host", min_gain=-1.0, shapes={"x": [1, C_IN, 64, 64]}, freeze_shapes=True
    )
    assert result.output is not None
    fused = onnx.load(str(result.output))
    assert input_dims(fused) == [[1, C_IN, 64, 64]]
    assert {layout_of(p).version for p in programs(fused)} == {1}
    assert result.comparison is not None and result.comparison.shapes == ["x=1x16x64x64"]


def test_safety_net_refuses_a_shape_dependent_param(tmp_path: Path) -> None:
    src = computed_slice_pair(tmp_path / "model.onnx")
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0)
    reasons = [r.reason for r in result.analysis.rejected]
    assert any("Slice 'slice_a' param STARTS[2] depends on the input shape" in r for r in reasons), reasons


def test_a_slice_end_folded_from_a_shape_runs_at_every_shape(tmp_path: Path) -> None:
    """Refused before by the safety net (its end held the representative height // 2): now the start plus the
    output's length, which the shape section patches, at odd heights too."""
    src = computed_slice_pair(tmp_path / "model.onnx", end=True)
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    g = result.analysis.graph
    assert any(g.nodes[i].name == "slice_a" for p in result.analysis.pairs for i in p.candidate.nodes)
    plugin = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()
    for shape in [(1, C_IN, 90, 150), (1, C_IN, 64, 64), (1, C_IN, 31, 50)]:
        assert max_error_at(src, result.output, shape) <= 1e-5, shape
        if plugin:
            assert max_error_at(src, result.output, shape, runtime.session_options("host")) <= 1e-4, shape


@pytest.mark.parametrize("build", [resize_pair, sized_by_shape_pair])
def test_a_resize_by_sizes_runs_at_every_shape(tmp_path: Path, build) -> None:
    """A Resize by `sizes` leaves its scale to the kernel, f32(out) / f32(in) of the dims it runs at, as ONNX Runtime:
    a scale fixed when lowering was refused (constant `sizes`) or, folded from Shapes, held at the bindings only and
    failed the run at SLANet's 488 x 488 (HFX_ERR_SHAPE: output shape does not match floor(input * scale))."""
    src = build(tmp_path / "model.onnx")
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    g = result.analysis.graph
    assert any(g.nodes[i].op_type == "Resize" for p in result.analysis.pairs for i in p.candidate.nodes)
    plugin = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()
    for shape in [(1, C_IN, 90, 150), (1, C_IN, 64, 64), (1, C_IN, 30, 50)]:
        assert max_error_at(src, result.output, shape) <= 1e-5, shape
        if plugin:
            assert max_error_at(src, result.output, shape, runtime.session_options("host")) <= 1e-4, shape


@pytest.mark.skipif(not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="plugin not built")
def test_same_pads_follow_the_side_the_plugin_runs_at(tmp_path: Path) -> None:
    """A stride-2 SAME window's pads depend on its side mod 2. With them fixed at the representative 128 and ORT's
    symbolic inference taking the side for a multiple of 2, the plugin wrote floor(x/2) rows where ONNX Runtime
    writes ceil(x/2): 11x7 for 12x8 at 45x31. Both follow the side now, and the pass verifies at an odd side (193)
    besides 128, where neither the proof nor the verification saw one."""
    src = same_pads_pair(tmp_path / "model.onnx")
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    g = result.analysis.graph
    fused = {g.nodes[i].name for p in result.analysis.pairs for i in p.candidate.nodes}
    assert {"conv_a1", "pool_b"} <= fused, fused
    assert result.comparison is not None and result.comparison.shapes == ["x=1x16x128x128", "x=1x16x193x193"]
    for shape in [(1, C_IN, 45, 31), (1, C_IN, 30, 50), (1, C_IN, 1, 3)]:
        assert max_error_at(src, result.output, shape) <= 1e-5, shape
        assert max_error_at(src, result.output, shape, runtime.session_options("host")) <= 1e-4, shape


@pytest.mark.skipif(not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="plugin not built")
def test_same_pads_of_a_static_model_at_an_odd_side(tmp_path: Path) -> None:
    src = same_pads_pair(tmp_path / "model.onnx")
    shape = (1, C_IN, 45, 31)
    result = pipeline.rewrite(
        src, tmp_path / "out.onnx", target="host", min_gain=-1.0, shapes={"x": list(shape)}, freeze_shapes=True
    )
    assert result.output is not None and result.analysis.pairs, [r.reason for r in result.analysis.rejected]
    assert max_error_at(src, result.output, shape, runtime.session_options("host")) <= 1e-4


def test_cli_reports_the_binding_and_the_verified_shapes(tmp_path: Path) -> None:
    src = conv_two_branch(tmp_path / "model.onnx")
    proc = run_cli("rewrite", src, "-q", "--target", "host", "--min-gain", "-1", "-o", tmp_path / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "symbolic dims analysed at batch=1, height=128, width=128 (--shape to choose)" in proc.stdout
    assert "at x=1x16x128x128; x=2x16x192x192" in proc.stdout


def test_cli_says_the_dims_given_by_shape_are_not_to_choose(tmp_path: Path) -> None:
    """--freeze-shapes --shape: the stranger was still told to choose them with --shape."""
    src = conv_two_branch(tmp_path / "model.onnx")
    args = ["-q", "--target", "host", "--min-gain", "-1", "--freeze-shapes", "--shape", "x=1x16x64x64"]
    proc = run_cli("rewrite", src, *args, "-o", tmp_path / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    line = "symbolic dims analysed at batch=1, height=64, width=64 (as given); fixed in the output (--freeze-shapes)"
    assert line in proc.stdout


def test_cli_names_a_static_models_verified_shape_once(tmp_path: Path) -> None:
    """A static QDQ model is verified on two seeded input sets of one shape: said once."""
    src = conv_two_branch(tmp_path / "model.onnx", dequantized=True)
    args = ["-q", "--target", "host", "--min-gain", "-1", "--freeze-shapes", "--shape", "x=1x16x64x64"]
    proc = run_cli("rewrite", src, *args, "-o", tmp_path / "out.onnx")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "at x=1x16x64x64 (2 input sets)\n" in proc.stdout


def test_inputs_npz_are_verified_on(tmp_path: Path) -> None:
    src = conv_two_branch(tmp_path / "model.onnx")
    np.savez(tmp_path / "data.npz", x=np.ones((2, C_IN, 40, 24), np.float32))
    args = ["-q", "--target", "host", "--min-gain", "-1", "-o", tmp_path / "out.onnx"]
    proc = run_cli("rewrite", src, *args, "--inputs", tmp_path / "data.npz")
    assert proc.returncode == EXIT_OK, proc.stderr
    # analysed at the inputs' shape; verified there on random data too, and at two other shapes
    assert "at --inputs (x=2x16x40x24); x=2x16x40x24; x=4x16x64x32; x=2x16x20x12" in proc.stdout


def test_inputs_shapes_are_analysed_at_and_stay_symbolic(tmp_path: Path) -> None:
    """Without --shape, the pass analyses (pairs, costs) at the shapes of the --inputs; the written
    model still takes every shape the original does."""
    src = conv_two_branch(tmp_path / "model.onnx")
    feeds = {"x": np.ones((2, C_IN, 40, 24), np.float32)}
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0, inputs=feeds)
    assert result.output is not None
    assert result.analysis.graph.binding is not None
    assert result.analysis.graph.binding.symbols == {"batch": 2, "height": 40, "width": 24}
    assert input_dims(onnx.load(result.output)) == [["batch", C_IN, "height", "width"]]
    for shape in SHAPES:
        assert max_error_at(src, result.output, shape) <= verify.DEFAULT_RTOL, shape


def test_inputs_with_an_empty_dim_leave_the_default_binding(tmp_path: Path) -> None:
    """An empty input (a first step's past) costs nothing: the pass analyses at the defaults."""
    src = conv_two_branch(tmp_path / "model.onnx")
    assert pipeline.inputs_shapes(src, {"x": np.ones((1, C_IN, 0, 8), np.float32)}) is None
    assert pipeline.inputs_shapes(src, {"x": np.ones((1, C_IN, 8, 6), np.float32)}) == {"x": [1, C_IN, 8, 6]}


def test_inputs_the_original_fails_on_exit_3(tmp_path: Path) -> None:
    src = conv_two_branch(tmp_path / "model.onnx")
    np.save(tmp_path / "x.npy", np.ones((1, C_IN, 9, 8), np.float32))  # odd H: the branches disagree
    proc = run_cli("rewrite", src, "-q", "--inputs", f"x:{tmp_path / 'x.npy'}", "-o", tmp_path / "out.onnx")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert "the original model fails on the --inputs" in error_line(proc)
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.onnx").exists()


def test_inconsistent_shape_is_one_line_exit_3(tmp_path: Path) -> None:
    src = conv_two_branch(tmp_path / "model.onnx")
    proc = run_cli("rewrite", src, "-q", "--shape", "x=1x16x64x63", "-o", tmp_path / "out.onnx")
    assert proc.returncode == EXIT_BAD_MODEL, proc.stderr
    assert "does not run at --shape batch=1, height=64, width=63" in error_line(proc)
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="plugin not built")
def test_plugin_matches_at_three_shapes(rewritten) -> None:
    src, out, _ = rewritten
    for shape in SHAPES:
        assert max_error_at(src, out, shape, runtime.session_options("host")) <= 1e-4, shape


def test_scratch_tensors_follow_the_symbolic_dims(tmp_path: Path) -> None:
    """BatchNormalization, Sum and Pow lower through scratch tensors: they take the dims'
    expressions of the tensor they derive from, so the pair is polymorphic (it was refused)."""
    src = scratch_branches(tmp_path / "model.onnx")
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    (pair,) = result.analysis.pairs
    fused = {result.analysis.graph.nodes[i].op_type for i in pair.candidate.nodes}
    assert fused >= {"BatchNormalization", "Sum", "Pow"}
    fused_model = onnx.load(str(result.output))
    assert input_dims(fused_model) == [["batch", C_IN, "height", "width"]]
    (program,) = programs(fused_model)
    assert read_section(program) is not None
    for shape in SHAPES:
        assert max_error_at(src, result.output, shape) <= 1e-5, shape
        if (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file():
            assert max_error_at(src, result.output, shape, runtime.session_options("host")) <= 1e-4, shape


def test_attach_programs_relowers_the_v2_programs(rewritten, tmp_path: Path) -> None:
    """A polymorphic model's pairs lower again to the programs the pass wrote (emulate, tune and
    calibrate lower the pairs of a written model); without the programs the model still runs."""
    src, out, _ = rewritten
    written = onnx.load(str(out))
    stripped = onnx.ModelProto()
    stripped.CopyFrom(written)
    for n in stripped.graph.node:
        kept = [a for a in n.attribute if a.name not in (C.ATTR_PROGRAM, C.ATTR_PROGRAM_VERSION)]
        del n.attribute[:]
        n.attribute.extend(kept)
    again, failed = attach_programs(stripped)
    assert failed == {}
    assert programs(again) == programs(written)
    assert all(read_section(p) is not None for p in programs(again))
    scratch = scratch_branches(tmp_path / "scratch.onnx")
    result = pipeline.rewrite(scratch, tmp_path / "scratch.fused.onnx", target="host", min_gain=-1.0)
    assert result.output is not None
    written = onnx.load(str(result.output))
    again, failed = attach_programs(written)
    assert failed == {} and programs(again) == programs(written)


# ---- the Python specializer against hand-made programs


def relu_program(section: bytes | None, rows: int = 4) -> bytes:
    """x[rows, 8] -> Relu -> y[rows, 8]; with `section`, dim 0 of both follows x's dim 0."""
    p = Program()
    x = p.add(Tensor(Dtype.F32, Role.INPUT, Task.A, [rows, 8], io=0))
    y = p.add(Tensor(Dtype.F32, Role.OUTPUT, Task.A, [rows, 8], io=0))
    p.ops.append(Op(Opcode.RELU, Engine.VECTOR, Task.A, [x], y))
    p.n_io = [1, 0, 1, 0]
    return p.encode(section or b"")


def rows_section(expr_for_y: list[int]) -> bytes:
    sym0 = int(shape_expr.Code.SYM)
    patches = [
        shape_expr.Patch(shape_expr.Target.TENSOR_DIM, 0, 0, (sym0,)),
        shape_expr.Patch(shape_expr.Target.TENSOR_DIM, 1, 0, tuple(expr_for_y)),
    ]
    return shape_expr.encode_section([shape_expr.Symbol("rows", 0, 0)], patches)


def test_specializer_patches_dims_and_recomputes_the_crc() -> None:
    prog = relu_program(rows_section([int(shape_expr.Code.SYM)]))
    out = specialize(prog, [[7, 8]])
    assert [d for _, _, d in tensor_records(out)] == [[7, 8], [7, 8]]
    assert struct.unpack_from("<I", out, len(out) - 4)[0] == zlib.crc32(out[:-4])
    assert specialize(out, [[4, 8]]) == prog  # the result is again a template


def test_specializer_evaluates_expressions() -> None:
    code = shape_expr.compile_expr(shape_expr.parse_dim("floor(r/2 - 1/2) + 1"), {"r": 0})
    prog = relu_program(rows_section(code), rows=4)
    # (the y dim at the representative 4 is not floor(4/2-1/2)+1 = 2: the spec's parser refuses such a
    # template; the specializer only evaluates)
    assert [d for _, _, d in tensor_records(specialize(prog, [[9, 8]]))] == [[9, 8], [5, 8]]


@pytest.mark.parametrize(
    ("dims", "why"),
    [([[4, 9]], "static"), ([[4, 8, 1]], "rank"), ([[0, 8]], "evaluates to 0")],
)
def test_specializer_refuses_what_the_program_cannot_take(dims: list[list[int]], why: str) -> None:
    with pytest.raises(shape_expr.ShapeExprError, match=why):
        specialize(relu_program(rows_section([int(shape_expr.Code.SYM)])), dims)


def test_v1_program_specializes_only_to_its_own_shapes() -> None:
    prog = relu_program(None)
    assert layout_of(prog).version == 1 and len(prog) == 48 + 2 * 48 + 176 + 4  # header, records (64-aligned), crc
    assert specialize(prog, [[4, 8]]) == prog
    with pytest.raises(shape_expr.ShapeExprError, match="static"):
        specialize(prog, [[5, 8]])


def test_microbatch_over_a_symbolic_batch_is_refused(tmp_path: Path) -> None:
    model = models.build("mlp_chain")
    concrete = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    for v in list(model.graph.input) + list(model.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(model, tmp_path / "model.onnx")
    name = model.graph.input[0].name
    result = pipeline.rewrite(tmp_path / "model.onnx", tmp_path / "out.onnx", ["microbatch"], shapes={name: concrete})
    assert result.output is None
    assert any(
        f"the micro-batch axis 0 of '{name}' is symbolic (--freeze-shapes fixes it)" in r.reason
        for r in result.analysis.rejected
    )
    frozen = pipeline.rewrite(
        tmp_path / "model.onnx", tmp_path / "frozen.onnx", ["microbatch"], shapes={name: concrete}, freeze_shapes=True
    )
    assert frozen.output is not None


def test_a_microbatch_over_a_symbolic_length_lowers_again_from_the_file(tmp_path: Path) -> None:
    """The parts a micro-batch pair reads are made by the Split the pass placed, which the unfused
    graph the re-lowering indexes has not: over a symbolic dim (not the split axis) they had no
    rank there, and emulate, tune and calibrate could not lower the written pair again."""
    model = models.build("mlp_chain")
    for v in list(model.graph.input) + list(model.graph.output):
        v.type.tensor_type.shape.dim[1].dim_param = "length"
    onnx.save(model, tmp_path / "model.onnx")
    result = pipeline.rewrite(tmp_path / "model.onnx", tmp_path / "out.onnx", ["microbatch"])
    assert result.output is not None
    written = onnx.load(str(result.output))
    assert graph_mod.input_dims(written)["x"][1] == "length"
    again, failed = attach_programs(written)
    assert failed == {} and programs(again) == programs(written) != []


def test_recorded_shapes_take_the_bound_input_symbols(tmp_path: Path) -> None:
    """An Expand to a shape no inference can know (here a graph input; in voicefilter_lite a Where
    after a contrib LSTM) keeps the exporter's value_info [batch, 4]; it gets batch's bound value,
    so the node is profiled."""
    from hexfuse_onnx import graph
    from hexfuse_onnx.profile import profile_graph

    h = onnx.helper
    inputs = [
        h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4]),
        h.make_tensor_value_info("to", onnx.TensorProto.INT64, [2]),
    ]
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    nodes = [h.make_node("Expand", ["row", "to"], ["e"]), h.make_node("Add", ["e", "x"], ["y"])]
    row = onnx.numpy_helper.from_array(np.ones((1, 4), np.float32), "row")
    recorded = [h.make_tensor_value_info("e", onnx.TensorProto.FLOAT, ["batch", 4])]
    graph_proto = h.make_graph(nodes, "g", inputs, [y], [row], value_info=recorded)
    onnx.save(h.make_model(graph_proto, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "expand.onnx")
    g = graph.load(tmp_path / "expand.onnx", {"x": [3, 4]})
    assert g.info("e").shape == (3, 4)
    expand = next(i for i, n in enumerate(g.nodes) if n.op_type == "Expand")
    assert expand not in profile_graph(g).unprofiled
    written = onnx.load(tmp_path / "expand.onnx").graph.value_info[0].type.tensor_type.shape.dim[0]
    assert written.dim_param == "batch"  # the file is never modified


def test_ort_symbolic_inference_runs_once_per_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A computed dim ('unk__0' of ONNX's inference) takes ORT's symbolic inference of the whole model:
    two loads of one model (a rewrite with and one without --shape) run it once and read the same dims."""
    from onnx import TensorProto, helper

    from hexfuse_onnx import graph

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])
    nodes = [helper.make_node("Flatten", ["x"], ["flat"], axis=2), helper.make_node("Relu", ["flat"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "flatten", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, tmp_path / "flatten.onnx")
    loads = [graph.load(tmp_path / "flatten.onnx") for _ in range(2)]
    assert all(g.symbolic["flat"][0].startswith(graph.COMPUTED_DIM_PREFIX) for g in loads)
    runs: list[str] = []
    run = graph._run_symbolic_inference
    monkeypatch.setattr(graph, "_SYMBOLIC_SHAPES", {})
    monkeypatch.setattr(graph, "_run_symbolic_inference", lambda m, *a: runs.append(m.graph.name) or run(m, *a))
    first, second = (g.symbolic_dims("flat") for g in loads)
    assert runs == ["flatten"]
    assert first == second and first is not None and not str(first[0]).startswith(graph.COMPUTED_DIM_PREFIX)


def test_ort_symbolic_inference_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that rewrites many models keeps only the newest few models' shapes: with room for one,
    a second model evicts the first, which is then inferred again."""
    from onnx import TensorProto, helper

    from hexfuse_onnx import graph

    def flatten_model(width: int) -> onnx.ModelProto:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", width])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", width])
        nodes = [helper.make_node("Flatten", ["x"], ["flat"], axis=2), helper.make_node("Relu", ["flat"], ["y"])]
        graph_proto = helper.make_graph(nodes, f"flatten{width}", [x], [y])
        return helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])

    runs: list[str] = []
    run = graph._run_symbolic_inference
    monkeypatch.setattr(graph, "_SYMBOLIC_SHAPES", {})
    monkeypatch.setattr(graph, "SYMBOLIC_SHAPES_KEPT", 1)
    monkeypatch.setattr(graph, "_run_symbolic_inference", lambda m, *a: runs.append(m.graph.name) or run(m, *a))
    for width in (64, 32, 64):
        onnx.save(flatten_model(width), tmp_path / "m.onnx")
        assert graph.load(tmp_path / "m.onnx").symbolic_dims("flat") is not None
    assert runs == ["flatten64", "flatten32", "flatten64"] and len(graph._SYMBOLIC_SHAPES) == 1


def test_a_large_weight_added_elementwise_leaves_no_shape_unknown(tmp_path: Path) -> None:
    """ORT's symbolic inference folds an Add of two known values; the light copy of a model strips its
    large weights, so it read an empty [64, 64] and gave up on the whole model (whisper's encoder:
    positions added to the conv output; beside a decoder, 142 nodes went unprofiled). Positions made
    by Range (which ONNX's own inference leaves unknown) must come out sized."""
    h = onnx.helper
    seq = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "pos")
    nodes = [
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        h.make_node("Range", ["zero", "length", "one"], ["positions"]),
        h.make_node("Cast", ["positions"], ["positions_f"], to=onnx.TensorProto.FLOAT),
        h.make_node("Unsqueeze", ["positions_f", "axes"], ["column"]),
        h.make_node("Add", ["x", "pos"], ["embedded"]),
        h.make_node("Mul", ["embedded", "column"], ["y"]),
    ]
    scalars = [h.make_tensor(n, onnx.TensorProto.INT64, [], [v]) for n, v in (("zero", 0), ("one", 1))]
    graph = h.make_graph(
        nodes,
        "large_weight_add",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 64, 64])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 64, 64])],
        [seq, *scalars, h.make_tensor("axes", onnx.TensorProto.INT64, [1], [1])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), path)
    assert seq.ByteSize() > 4096  # stripped from the light copy
    g = graph_mod.load(path)
    assert g.info("positions").shape == (64,)
    assert g.info("y").shape == (1, 64, 64)


def tile_over_a_constant_if(path: Path) -> Path:
    """torch's `repeat` over a size it cannot prove: Tile(tok, If(Greater(2 - Size(rep), 0))) where
    rep = [batch, 1] has 2 elements at every batch (svtrv2_captcha's decoder), beside a Sigmoid."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
        for n, s in (("w", (64, 64)), ("w2", (64, 64)), ("tok", (1, 64)))
    ]
    ints = [
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in (("zero", 0), ("axes0", [0]), ("one", [1]), ("two", 2))
    ]
    out = lambda name: [helper.make_tensor_value_info(name, TensorProto.INT64, None)]  # noqa: E731
    then = helper.make_graph([helper.make_node("Concat", ["one", "rep"], ["rep3"], axis=0)], "then", [], out("rep3"))
    other = helper.make_graph([helper.make_node("Identity", ["rep"], ["rep2"])], "else", [], out("rep2"))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Shape", ["h"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["b"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["bu"], name="unsqueeze"),
        helper.make_node("Concat", ["bu", "one"], ["rep"], name="concat", axis=0),
        helper.make_node("Size", ["rep"], ["n"], name="size"),
        helper.make_node("Sub", ["two", "n"], ["d"], name="sub"),
        helper.make_node("Greater", ["d", "zero"], ["cond"], name="greater"),
        helper.make_node("If", ["cond"], ["reps"], name="if", then_branch=then, else_branch=other),
        helper.make_node("Tile", ["tok", "reps"], ["t"], name="tile"),
        helper.make_node("MatMul", ["t", "w2"], ["u"], name="mm2"),
        helper.make_node("Sigmoid", ["h"], ["v"], name="sigmoid"),
        helper.make_node("Add", ["u", "v"], ["y"], name="join"),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 64]) for n in ("x", "y")]
    graph = helper.make_graph(nodes, "tile_if", io[:1], io[1:], weights + ints)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_if_on_constant_size_arithmetic_leaves_no_node_unprofiled(tmp_path: Path) -> None:
    """svtrv2_captcha without --freeze-shapes: 11 nodes from its decoder's Tile on were not profiled
    (the If's output had no shape at the analysed binding); --freeze-shapes inlined the If."""
    a = pipeline.analyse(tile_over_a_constant_if(tmp_path / "m.onnx"), target="host", min_gain=-1.0)
    g = a.graph
    assert g.source is not None and any(n.op_type == "If" for n in g.nodes)  # analysed symbolic, nothing folded
    assert a.profile.unprofiled == {}
    tile = next(i for i, n in enumerate(g.nodes) if n.name == "tile")
    assert g.info(g.nodes[tile].output[0]).shape == (1, 64)


def test_an_if_on_a_dim_value_is_not_inlined_for_shapes(tmp_path: Path) -> None:
    """An If on the batch's value (Silero VAD's nested Ifs test its input's length) is known at one
    binding only: its branch's shapes must not be taken there (a pair typed from them was lowered for
    one shape and refused the next), while the If on Size arithmetic, the same at every batch, is."""
    from hexfuse_onnx import graph as graph_module

    model = onnx.load(tile_over_a_constant_if(tmp_path / "m.onnx"))
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for d in fixed.graph.input[0].type.tensor_type.shape.dim[:1]:
        d.Clear()
        d.dim_value = 1
    assert graph_module._ifs_known_at_every_binding(fixed) == {"reps"}
    on_value = next(n for n in fixed.graph.node if n.name == "sub")
    on_value.input[1] = "b"  # 2 - batch: 1 at batch 1, -2 at batch 4
    assert graph_module._ifs_known_at_every_binding(fixed) == set()


def test_resize_by_scales_gets_the_dims_ort_runs_at() -> None:
    """graph._resize_rule: ORT's Resize rule without its sympy.simplify of each dim (ppocr_det's 31
    Resize dims: 20 s of the 22 s of its symbolic inference). Two stride-2 Convs, then Resizes by 2
    and by 1.5 (of dims that may be odd) over symbolic h, w: each dim, evaluated, is the one ONNX
    Runtime's run makes, at sizes where the floors round."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    scales = {k: numpy_helper.from_array(np.float32([1, 1, v, v]), k) for k, v in (("two", 2.0), ("half3", 1.5))}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "w"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["c2", "", "two"], ["r1"], mode="nearest"),
        helper.make_node("Resize", ["c2", "", "half3"], ["r2"], mode="nearest"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", "w"])
    outs = [helper.make_tensor_value_info(t, TensorProto.FLOAT, None) for t in ("r1", "r2")]
    graph = helper.make_graph(nodes, "resized", [x], outs, [w, *scales.values()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    dims = graph_mod._ort_symbolic_shapes(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for h, width in ((37, 50), (64, 3), (9, 11)):
        got = session.run(None, {"x": np.zeros((1, 1, h, width), np.float32)})
        for name, value in zip(("r1", "r2"), got):
            at = [
                d if isinstance(d, int) else shape_expr.evaluate(shape_expr.parse_dim(d), {"h": h, "w": width})
                for d in dims[name]
            ]
            assert at == list(value.shape), (name, dims[name], h, width)


def twin_layers(path: Path) -> Path:
    """Two layers alike but for their names and weights, each an attention-like branch beside an elementwise
    one over x[1, seq, 64]; the second reads the first's sum, so each layer pairs its own two branches."""
    b = GraphBuilder("twins", seed=3)
    x = b.input("x", [1, "seq", 64])
    for k in "12":
        a = b.op("Softmax", [b.op("MatMul", [x, b.weight(f"w{k}", [64, 64])], f"mm{k}")], f"sm{k}", axis=-1)
        c = b.op("Sigmoid", [b.op("Tanh", [x], f"tanh{k}")], f"sig{k}")
        x = b.op("Add", [a, c], f"add{k}", outputs=["y"] if k == "2" else 1)
    b.output("y", [1, "seq", 64])
    onnx.save(b.model(), path)
    return path


def test_a_body_alike_but_for_names_is_inferred_once(tmp_path: Path, monkeypatch) -> None:
    """ORT's symbolic inference of a pair's body is kept by the body with its tensors renamed: the second
    layer's pair reuses the first's (moonshine_tiny_decoder at 0 us: 165 inferences of 59 bodies, 6 s),
    and the rewrite with both verifies (on the plugin where built) at every shape it checks."""
    from hexfuse_onnx.lowering import shapes

    asked: list[onnx.ModelProto] = []
    infer = shapes._run_symbolic_inference
    monkeypatch.setattr(shapes, "_INFERRED", {})  # none kept from another test
    monkeypatch.setattr(shapes, "_run_symbolic_inference", lambda m, **k: asked.append(m) or infer(m, **k))
    src = twin_layers(tmp_path / "model.onnx")
    plugin = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0, verify_plugin=plugin)
    assert result.output is not None and result.comparison is not None
    pairs = {frozenset(result.analysis.graph.nodes[i].name for i in p.candidate.nodes) for p in result.analysis.pairs}
    assert pairs == {frozenset({"mm1", "sm1", "tanh1", "sig1"}), frozenset({"mm2", "sm2", "tanh2", "sig2"})}
    assert len(asked) == 1 and len(result.comparison.shapes) >= 2


def test_a_shape_built_through_identity_and_a_scalar_reshape_follows_the_batch(tmp_path: Path) -> None:
    src = state_expanded_pair(tmp_path / "model.onnx")
    g = graph_mod.load(src)
    assert g.symbolic_dims("state") == ("batch", C_IN, C_IN)
    result = pipeline.rewrite(src, tmp_path / "out.onnx", target="host", min_gain=-1.0)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    assert any(g.nodes[i].name == "state_a" for p in result.analysis.pairs for i in p.candidate.nodes)
    plugin = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()
    for batch in (1, 3, 8):
        assert max_error_at(src, result.output, (batch, C_IN, C_IN)) <= 1e-5, batch
        if plugin:
            assert max_error_at(src, result.output, (batch, C_IN, C_IN), runtime.session_options("host")) <= 1e-4, batch
