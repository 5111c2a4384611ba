"""The light models of the installed onnx package, made worth fusing for issue 11's acceptance
(benchmarks/shape_acceptance.py runs it on them).

onnx ships `backend/test/data/light/*.onnx`: real architectures (AlexNet, DenseNet-121,
Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512) whose weights are
ConstantOfShape nodes filling 0.02. `prepare` turns each into a model worth fusing: every float
weight becomes seeded random values of its shape (He-scaled for Conv/Gemm weights, BatchNorm
variance positive, the classifier scaled to logits of unit spread), the Reshape shapes copy the
batch instead of fixing it, and the input is declared [N, 3, H, W] (H and W only where the
original runs at another spatial size; fixed pooling before a Gemm does not).
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

SPATIAL_TRIES = (200, 256, 192)  # first the original accepts is the "other spatial size"


def light_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_names() -> list[str]:
    return sorted(p.stem.removeprefix("light_") for p in light_dir().glob("light_*.onnx"))


@dataclass
class Prepared:
    name: str
    path: Path
    input_name: str
    shapes: list[list[int]]  # own shape, batch 2, other spatial size (when accepted)
    spatial_note: str


# --- weights -------------------------------------------------------------------------------------


def _consumers(graph: onnx.GraphProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, i))
    return uses


Role = tuple[onnx.NodeProto | None, int]


def _role(name: str, uses: dict[str, list[tuple[onnx.NodeProto, int]]]) -> Role:
    """The node a weight feeds and at which input, looking through Unsqueeze/Reshape."""
    for node, index in uses.get(name, []):
        if node.op_type in ("Unsqueeze", "Reshape") and index == 0:
            return _role(node.output[0], uses)
        return node, index
    return None, -1


def _fan_in(node: onnx.NodeProto, shape: tuple[int, ...]) -> int:
    if node.op_type == "Conv":
        return int(np.prod(shape[1:]))
    trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
    return shape[1] if trans_b else shape[0]


def _random_weight(shape: tuple[int, ...], role: Role, rng: np.random.Generator) -> np.ndarray:
    node, index = role
    op = node.op_type if node is not None else ""
    if node is not None and op in ("Conv", "Gemm") and index == 1 and len(shape) >= 2:
        return rng.normal(0.0, math.sqrt(2.0 / _fan_in(node, shape)), shape)
    if op == "BatchNormalization" and index in (1, 4):  # scale, variance
        return rng.uniform(0.5, 1.5, shape)
    if op == "Mul":  # the affine scale Caffe2 exports after a BatchNorm
        return rng.uniform(0.5, 1.5, shape)
    return rng.normal(0.0, 0.1, shape)  # biases, BatchNorm mean and shift, Add's shift


def randomize_weights(model: onnx.ModelProto, seed: int) -> None:
    """Float ConstantOfShape weights and float initializers become seeded random initializers."""
    g = model.graph
    rng = np.random.default_rng(seed)
    uses = _consumers(g)
    inits = {t.name: t for t in g.initializer}
    keep, new_inits = [], []
    for node in g.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if node.op_type == "ConstantOfShape" and node.input[0] in inits and (value is None or value.data_type == 1):
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
            data = _random_weight(shape, _role(node.output[0], uses), rng).astype(np.float32)
            new_inits.append(numpy_helper.from_array(data, node.output[0]))
        else:
            keep.append(node)
    for t in g.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            data = _random_weight(tuple(t.dims), _role(t.name, uses), rng).astype(np.float32)
            t.CopyFrom(numpy_helper.from_array(data, t.name))
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(new_inits)
    names = {t.name for t in g.initializer}
    used = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name in used]  # the ConstantOfShape shapes go
    del g.initializer[:]
    g.initializer.extend(kept)
    real_inputs = [v for v in g.input if v.name not in names]  # weights listed as inputs become constants
    del g.input[:]
    g.input.extend(real_inputs)
    model.ir_version = max(model.ir_version, 4)  # IR 3 wants every initializer listed as an input


# Ops between the classifier and Softmax that scale with it: scaling its weight and bias by c > 0
# scales the logits by c.
_HOMOGENEOUS = ("Relu", "Dropout", "Reshape", "Flatten", "AveragePool", "GlobalAveragePool")


def temper_logits(model: onnx.ModelProto, input_name: str, shape: list[int], seed: int) -> None:
    """Scale the classifier so the logits have unit spread: random weights otherwise make the
    final Softmax one-hot, which hides any error of the layers before it."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    softmax = next((n for n in g.node if n.op_type == "Softmax"), None)
    if softmax is None:
        return
    node = producer.get(softmax.input[0])
    while node is not None and node.op_type in _HOMOGENEOUS:
        node = producer.get(node.input[0])
    if node is None or node.op_type not in ("Gemm", "Conv"):
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.add().name = softmax.input[0]
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    spread = float(np.std(session.run([softmax.input[0]], {input_name: x})[0]))
    inits = {t.name: t for t in g.initializer}
    for name in node.input[1:]:
        while name not in inits and name in producer and producer[name].op_type in ("Reshape", "Unsqueeze"):
            name = producer[name].input[0]  # inception_v1 reshapes its classifier weight
        scaled = numpy_helper.to_array(inits[name]) / np.float32(spread)
        inits[name].CopyFrom(numpy_helper.from_array(scaled.astype(np.float32), name))


# --- shapes --------------------------------------------------------------------------------------


def free_batch_in_reshapes(model: onnx.ModelProto) -> None:
    """Reshape targets that fix the batch to 1 copy it instead (0); a flatten to [1, K] becomes Flatten."""
    g = model.graph
    uses = _consumers(g)
    for t in g.initializer:
        if t.data_type != onnx.TensorProto.INT64 or not all(n.op_type == "Reshape" and i == 1 for n, i in uses[t.name]):
            continue
        shape = numpy_helper.to_array(t).copy()
        if shape.size == 2 and shape[0] == 1:
            for node, _ in uses[t.name]:
                node.op_type = "Flatten"
                del node.input[1:]
                node.attribute.append(onnx.helper.make_attribute("axis", 1))
        elif shape.size and shape[0] == 1:
            shape[0] = 0
            t.CopyFrom(numpy_helper.from_array(shape, t.name))


def declare_input(model: onnx.ModelProto, dims: list[int | str]) -> None:
    (inp,) = model.graph.input
    shape = inp.type.tensor_type.shape
    for d, v in zip(shape.dim, dims):
        d.Clear()
        if isinstance(v, str):
            d.dim_param = v
        else:
            d.dim_value = v
    for out in model.graph.output:  # output sizes follow the input now
        for d in out.type.tensor_type.shape.dim:
            d.Clear()
    del model.graph.value_info[:]


def _runs(path: Path, input_name: str, shape: list[int]) -> bool:
    """Whether the model runs at this input shape, asked in a child process: ONNX Runtime (1.32,
    all optimizations on) dies of SIGFPE where a fixed 7x7 AveragePool gets a smaller map, as
    resnet50 at 192x192 and inception_v1 at 200x200 do (its NCHWc pooling)."""
    probe = (
        "import sys, numpy as np, onnxruntime as ort; "
        "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); "
        "s.run(None, {sys.argv[2]: np.zeros([int(d) for d in sys.argv[3:]], np.float32)})"
    )
    child = subprocess.run([sys.executable, "-c", probe, str(path), input_name, *map(str, shape)], capture_output=True)
    return child.returncode == 0


def prepare(name: str, cache: Path, seed: int = 0) -> Prepared:
    model = onnx.load(str(light_dir() / f"light_{name}.onnx"))
    randomize_weights(model, seed)
    free_batch_in_reshapes(model)
    (inp,) = model.graph.input
    own = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    temper_logits(model, inp.name, own, seed)
    path = cache / f"{name}.onnx"
    declare_input(model, ["N", own[1], "H", "W"])
    onnx.save(model, str(path))
    other = next((s for s in SPATIAL_TRIES if _runs(path, inp.name, [2, own[1], s, s])), None)
    if other is None:
        declare_input(model, ["N", *own[1:]])
        onnx.save(model, str(path))
        note = (
            f"spatial size fixed: the original runs at none of {SPATIAL_TRIES} (pooling before Gemm, Reshape of H, W)"
        )
        shapes = [own, [2, *own[1:]], [3, *own[1:]]]
    else:
        note = f"spatial {other}x{other} accepted"
        shapes = [own, [2, *own[1:]], [2, own[1], other, other]]
    onnx.checker.check_model(str(path), full_check=True)
    return Prepared(name, path, inp.name, shapes, note)
