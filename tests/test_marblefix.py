"""What MarbleNet (models/README.md, "A tenth stranger's models") still broke at an empty input:
small builders reproducing each."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import run_cli
from onnx import helper
from real_support import cached_or_skip
from test_lower import init, vi
from test_program_v2 import needs_plugin, pair_model, v2_program

from hexfuse_onnx import runtime

BIG = np.iinfo(np.int64).max


def _edges_model(path: Path, head: tuple[int, int], tail: tuple[int, int]) -> None:
    """x[..., head] * 2 and x[..., tail] * 3 of a symbolic length L, concatenated: two branches."""
    c = {"hs": head[0], "he": head[1], "ts": tail[0], "te": tail[1], "axis": 2}
    inits = [init(k, np.array([v], np.int64)) for k, v in c.items()]
    inits += [init("two", np.array(2.0, np.float32)), init("three", np.array(3.0, np.float32))]
    nodes = [
        helper.make_node("Slice", ["a", "hs", "he", "axis"], ["head"]),
        helper.make_node("Mul", ["head", "two"], ["head2"]),
        helper.make_node("Slice", ["a", "ts", "te", "axis"], ["tail"]),
        helper.make_node("Mul", ["tail", "three"], ["tail3"]),
        helper.make_node("Concat", ["head2", "tail3"], ["y"], axis=2),
    ]
    g = helper.make_graph(nodes, "g", [vi("a", [1, 1, "L"])], [vi("y", [1, 1, None])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize(
    ("head", "tail"),
    [((0, 1), (1, BIG)), ((-1, BIG), (0, -1)), ((-3, -1), (2, 5))],
    ids=["first-sample", "last-sample", "negative-window"],
)
def test_a_slice_of_a_symbolic_dim_is_exact_at_an_empty_input(tmp_path: Path, head: tuple, tail: tuple) -> None:
    """MarbleNet's STFT concatenates x[..., :1] with the pre-emphasis of x[..., 1:]. ORT's symbolic
    inference takes an input dim to be at least 1 and makes x[..., :1] 1 long (x[..., -1:] 1,
    x[..., -3:-1] 2): at the empty input the pass also verifies at it is 0, the kernel refused the
    SLICE ("output shape does not match the slice") and the pair was dropped (2 of MarbleNet's
    pairs at 0 us, 5 in x2). The pair's program now holds the exact length min(end, L) - start."""
    src, out = tmp_path / "m.onnx", tmp_path / "f.onnx"
    _edges_model(src, head, tail)
    proc = run_cli("rewrite", src, "--shape", "a=1x1x64000", "--verify", "plugin", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "runs with an empty input at L=0" in proc.stderr and "dropping" not in proc.stderr, proc.stderr
    assert [n.op_type for n in onnx.load(out).graph.node] == ["FusedHexPair", "Concat"]


@pytest.mark.parametrize(("elem", "length"), [(onnx.TensorProto.INT16, 16000), (onnx.TensorProto.FLOAT, 128)])
def test_an_int16_input_is_analysed_at_one_second_of_samples(tmp_path: Path, elem: int, length: int) -> None:
    """`inspect` of MarbleNet's file (int16 samples, [1, 1, audio_len]) analysed 128 samples, the
    default of any symbolic dim: 8 ms, one STFT frame of its 1-s figures' 101. An int16 input is
    PCM: its length defaults to 16000 (1 s at 16 kHz) and the report says why."""
    nodes = [
        helper.make_node("Cast", ["a"], ["f"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Relu", ["f"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", [vi("a", [1, 1, "L"], elem)], [vi("y", [1, 1, "L"])])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), src)
    proc = run_cli("inspect", src)
    assert proc.returncode == 0, proc.stderr
    why = "audio input: 1 s of 16 kHz samples; " if length == 16000 else ""
    assert f"symbolic dims analysed at L={length} ({why}--shape to choose)" in proc.stdout, proc.stdout


@needs_plugin
def test_a_refused_shape_names_the_kernel_reason_before_the_shapes(tmp_path: Path) -> None:
    """The drop line quotes 400 characters of ORT's error, and the kernel listed every input shape
    before its reason: MarbleNet x2's pair of 21 inputs lost it ("... [257,1,512] (HFX_ERR_SH").
    The reason now comes first."""
    session = runtime.InferenceSession(pair_model(v2_program(), tmp_path), backend="host")
    feeds = {"x": np.zeros((3, 5), np.float32), "xb": np.zeros((2, 6), np.float32)}
    reason = r"input 0 axis 1: 5 but the program's static dim is 4"
    with pytest.raises(Exception, match=rf"these input shapes \(HFX_ERR_SHAPES at byte \d+: {reason}\): \[3,5\], "):
        session.run(None, feeds)


@pytest.mark.slow
def test_real_marblenet_x2_drops_no_pair_at_an_empty_input(tmp_path: Path) -> None:
    """Two MarbleNet requests at 0 us per call (the suite's): 5 pairs were dropped with r0's audio
    empty (x[..., :1]); none is now, and the pairs hold most of the time (52% when they were dropped;
    12 pairs, 88% at 3c46a1e; 4 longer ones, 89%, since colocq orders each side by QDQ group)."""
    out = tmp_path / "x2.onnx"
    proc = run_cli(
        "colocate",
        cached_or_skip("marblenet_vad"),
        "--requests",
        "2",
        "--shape",
        "audio=1x1x16000",
        "--verify",
        "plugin",
        "-o",
        out,
    )
    assert proc.returncode == 0, proc.stderr
    assert "r0_audio_len=0" in proc.stderr and "dropping" not in proc.stderr, proc.stderr
    assert sum(n.op_type == "FusedHexPair" for n in onnx.load(out).graph.node) >= 1
    share = re.search(r"(\d+)% of the serial time lies inside pairs", proc.stdout + proc.stderr)
    assert share and int(share.group(1)) >= 80, proc.stdout
