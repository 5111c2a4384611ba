"""The host kernel's Conv against ONNX Runtime's, as a pair of two conv branches (VGG-style blocks).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/conv_blocks.py [--rounds 20] [--blocks 512x7x3,...]

Each block (CxSxK: C channels over an SxS map, KxK kernels, padded to keep the map) is two branches of
two Conv + Relu from one input, rewritten at --target host with the branches fused as one pair (the call
counted free). In one process, alternating every round: the original on ORT sequential at 1 and 2 threads
(ort-seq, ort-seq-2t, ORT's default optimizations: NCHWc convs), and the pair on the plugin with each call's
tasks one after the other on the calling thread (HEXFUSE_SCHEDULE=serial) and both at once on the pool
(fused). Printed: the minimum and median of each, and the ratios serial / ort-seq (one thread each) and
fused / ort-seq-2t (two each). A block with many filters over few pixels is cut into filter blocks
(dsp/src/ops/conv.c conv_filters_per_item); before that, 512x7x3 ran 19.8x ort-seq on the caller.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hexfuse_onnx import costmodel, ort_modes, pipeline, runtime  # noqa: E402

BLOCKS = "512x7x3,256x14x3,128x28x3,64x56x3,1024x7x1,256x14x1"


def block_model(channels: int, size: int, kernel: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    nodes, weights = [], []
    for branch in "ab":
        x = "x"
        for i in range(2):
            w = rng.standard_normal((channels, channels, kernel, kernel)) / np.sqrt(kernel * kernel * channels)
            weights += [numpy_helper.from_array(w.astype(np.float32), f"{branch}w{i}")]
            weights += [numpy_helper.from_array(np.zeros(channels, np.float32), f"{branch}b{i}")]
            nodes.append(
                helper.make_node(
                    "Conv", [x, f"{branch}w{i}", f"{branch}b{i}"], [f"{branch}c{i}"], pads=[kernel // 2] * 4
                )
            )
            nodes.append(helper.make_node("Relu", [f"{branch}c{i}"], [f"{branch}{i}"]))
            x = f"{branch}{i}"
    dims = [1, channels, size, size]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info(f"{b}1", TensorProto.FLOAT, dims) for b in "ab"],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def sessions(original: Path, fused: Path) -> dict[str, object]:
    return {
        "ort-seq": ort.InferenceSession(
            str(original), ort_modes.options("ort-seq"), providers=["CPUExecutionProvider"]
        ),
        "ort-seq-2t": ort.InferenceSession(
            str(original), ort_modes.options("ort-seq-2t"), providers=["CPUExecutionProvider"]
        ),
        "serial": runtime.InferenceSession(fused, backend="host", schedule="serial"),
        "fused": runtime.InferenceSession(fused, backend="host", schedule="fused"),
    }


def timed(runs: dict[str, object], feeds: dict[str, np.ndarray], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in runs}
    for s in runs.values():
        s.run(None, feeds)  # type: ignore[attr-defined]
    for r in range(rounds):
        for k in list(runs)[r % len(runs) :] + list(runs)[: r % len(runs)]:
            t0 = time.perf_counter()
            runs[k].run(None, feeds)  # type: ignore[attr-defined]
            times[k].append((time.perf_counter() - t0) * 1e3)
    return times


def block_line(spec: str, rounds: int, folder: Path) -> str:
    channels, size, kernel = (int(v) for v in spec.split("x"))
    original, fused = folder / f"{spec}.onnx", folder / f"{spec}.fused.onnx"
    block_model(channels, size, kernel, original)
    result = pipeline.rewrite(original, fused, ["branches"], "host", -1.0)
    if result.output is None:
        return f"{spec}: no pair"
    feeds = {"x": np.random.default_rng(1).standard_normal((1, channels, size, size)).astype(np.float32)}
    times = timed(sessions(original, fused), feeds, rounds)
    low = {k: min(v) for k, v in times.items()}
    figures = "  ".join(f"{k} {low[k]:.2f}/{np.median(v):.2f}" for k, v in times.items())
    return (
        f"{spec:>10}  {figures}  serial/ort-seq {low['serial'] / low['ort-seq']:.2f}x"
        f"  fused/ort-seq-2t {low['fused'] / low['ort-seq-2t']:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--blocks", default=BLOCKS, help=f"CxSxK, comma-separated (default {BLOCKS})")
    args = parser.parse_args()
    os.environ[costmodel.CALL_OVERHEAD_ENV] = "0"  # the pair qualifies whatever a call costs
    print("block CxSxK: min/median ms of ort-seq, ort-seq-2t, plugin serial, plugin fused; ratios of minima")
    with tempfile.TemporaryDirectory(prefix="hexfuse-conv-") as folder:
        for spec in args.blocks.split(","):
            print(block_line(spec, args.rounds, Path(folder)), flush=True)


if __name__ == "__main__":
    main()
