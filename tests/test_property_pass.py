"""Property test of the whole pass on random valid ONNX DAGs (hypothesis).

The generator builds small fp32 opset-18 graphs: matrix ops (MatMul with initializer weights or
with another activation, Gemm, Conv on NCHW), vector ops (Add/Mul with broadcasting, Relu,
Sigmoid, Tanh, Softmax, LayerNormalization, ReduceMean), memory ops (Transpose, Concat, Slice,
Reshape), with fan-out, fan-in, several graph inputs and outputs, and sometimes a symbolic batch
dim (then half of the time a `shapes=` override fixes it).

For every graph `pipeline.rewrite` must either decline cleanly (output None, or a HexfuseError
subclass with a one-line message; never any other exception, and nothing written), or write a
model that passes the full checker, matches the original on stock ONNX Runtime on inputs of
another seed than the pass used, and (plugin built) matches with the FusedHexPair plugin within
1e-4. The input file stays byte-identical either way.

Profiles: CI (default) runs 300 derandomized examples (about 15 s here);
`HEXFUSE_PROPERTY_EXAMPLES=5000 python -m pytest -s tests/test_property_pass.py` runs thousands
with a random seed (any value above 500 switches to that profile). With -s a summary line gives
the counts (rewrote, declined, pairs by kind); `--hypothesis-show-statistics` shows the same as
hypothesis events.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import models
from hexfuse_onnx import contract as C
from hexfuse_onnx import pipeline, runtime, verify
from hexfuse_onnx.errors import HexfuseError

OPSET = 18
IR_VERSION = 10
PLUGIN_RTOL = 1e-4
COMPARE_SEED = 11  # the pass verifies with seed 0
PLUGIN_BUILT = (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file()

EXAMPLES = int(os.environ.get("HEXFUSE_PROPERTY_EXAMPLES", "300"))
ON_DEMAND = "HEXFUSE_PROPERTY_EXAMPLES" in os.environ and EXAMPLES > 500
settings.register_profile(
    "hexfuse-ci",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "hexfuse-deep",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
PROFILE = settings.get_profile("hexfuse-deep" if ON_DEMAND else "hexfuse-ci")

STATS: Counter[str] = Counter()

# ---------------------------------------------------------------------------------------
# The generator


BATCH = "N"  # the symbolic batch dim's name


@dataclass
class Val:
    name: str
    shape: tuple[int, ...]  # concrete shape (axis 0 is the batch when the model is symbolic)
    mag: float = 1.0  # rough typical magnitude: keeps products of activations finite


# An op whose output magnitude estimate exceeds this is replaced by a Tanh: chains such as
# ((x @ x) @ (x @ x))^2 overflow fp32 to inf on some inputs, and inf - inf = NaN in any comparison.
MAG_LIMIT = 1e6


@dataclass
class Spec:
    """A generated model plus what the test needs to run the pass on it."""

    model: onnx.ModelProto
    symbolic: bool
    shapes: dict[str, list[int]] | None
    kinds: list[str] | None
    target: str
    min_gain: float
    verify_plugin: bool = False
    ops: Counter[str] = field(default_factory=Counter)

    def describe(self) -> str:
        return (
            f"{len(self.model.graph.node)} nodes, {len(self.model.graph.input)} inputs, "
            f"{len(self.model.graph.output)} outputs, symbolic={self.symbolic}, shapes={self.shapes}, "
            f"kinds={self.kinds}, target={self.target}, min_gain={self.min_gain}, "
            f"verify_plugin={self.verify_plugin}"
        )


class _Builder:
    def __init__(self, draw, symbolic: bool, seed: int) -> None:
        self.draw = draw
        self.symbolic = symbolic
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.pool: list[Val] = []
        self.consumed: set[str] = set()
        self.inputs: list[Val] = []
        self.k = 0
        self.ops: Counter[str] = Counter()

    # -- names and tensors --
    def fresh(self, stem: str) -> str:
        self.k += 1
        return f"{stem}{self.k}"

    def _const(self, arr: np.ndarray, stem: str) -> str:
        """An initializer, or sometimes a Constant node (the pass must handle both)."""
        name = self.fresh(stem)
        tensor = numpy_helper.from_array(arr, name)
        if self.draw(st.integers(0, 7)) == 0:
            self.nodes.append(helper.make_node("Constant", [], [name], name=f"const_{name}", value=tensor))
            self.ops["Constant"] += 1
        else:
            self.inits.append(tensor)
        return name

    def weight(self, shape: tuple[int, ...], scale: float | None = None, offset: float = 0.0) -> str:
        fan_in = shape[0] if len(shape) >= 1 and shape[0] else 1
        s = scale if scale is not None else 1.0 / np.sqrt(max(1, fan_in))
        return self._const((self.rng.standard_normal(shape) * s + offset).astype(np.float32), "w")

    def ints(self, values: list[int]) -> str:
        return self._const(np.asarray(values, dtype=np.int64), "i")

    def node(
        self, op: str, inputs: list[str], shape: tuple[int, ...], n_outputs: int = 1, mag: float = 1.0, **attrs
    ) -> Val:
        out = self.fresh("t")
        outputs = [out] + [self.fresh("t") for _ in range(n_outputs - 1)]
        # Node names: usually unique names, sometimes none at all (the pass falls back to the output).
        name = "" if self.draw(st.integers(0, 9)) == 0 else f"n{self.k}_{op.lower()}"
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        self.consumed.update(i for i in inputs if i)
        self.ops[op] += 1
        v = Val(out, tuple(int(d) for d in shape), mag)
        self.pool.append(v)
        return v

    def pick(self, ok=lambda v: True) -> Val | None:
        cands = [v for v in self.pool if ok(v)]
        if not cands:
            return None
        # Prefer recent values (deeper chains) but reach back for fan-out.
        i = self.draw(st.integers(0, len(cands) - 1))
        return cands[len(cands) - 1 - i]

    def axis_ok(self, axis: int, rank: int) -> bool:
        """In a symbolic model no op may change or move axis 0 (the batch)."""
        return not (self.symbolic and axis % rank == 0)

    # -- ops --
    def unary(self) -> None:
        x = self.pick()
        op = self.draw(st.sampled_from(["Relu", "Sigmoid", "Tanh"]))
        self.node(op, [x.name], x.shape, mag=x.mag if op == "Relu" else 1.0)

    def too_big(self, x: Val, mag: float) -> bool:
        """True (and a Tanh of x emitted instead) when the op would make too large values."""
        if mag <= MAG_LIMIT:
            return False
        self.node("Tanh", [x.name], x.shape, mag=1.0)
        return True

    def binary(self) -> None:
        x = self.pick()
        op = self.draw(st.sampled_from(["Add", "Mul"]))
        mode = self.draw(st.sampled_from(["value", "const", "const"]))
        other: str | None = None
        shape = x.shape
        if mode == "value":

            def compatible(v: Val) -> bool:
                if self.symbolic and len(v.shape) != len(x.shape):
                    return False  # axis 0 (the batch) must meet axis 0
                try:
                    out = np.broadcast_shapes(x.shape, v.shape)
                except ValueError:
                    return False
                return len(out) <= 4 and int(np.prod(out)) <= 4096

            y = self.pick(compatible)
            if y is not None:
                mag = x.mag + y.mag if op == "Add" else x.mag * y.mag
                if self.too_big(x, mag):
                    return
                other, shape = y.name, tuple(np.broadcast_shapes(x.shape, y.shape))
        if other is None:
            # A broadcastable constant: a suffix of x's shape with some dims set to 1 (never the
            # batch axis in a symbolic model), or a scalar.
            lo = 1 if self.symbolic else 0
            start = self.draw(st.integers(lo, len(x.shape)))
            cshape = list(x.shape[start:])
            for i in range(len(cshape)):
                if self.draw(st.booleans()):
                    cshape[i] = 1
            other = self.weight(tuple(cshape), scale=0.5, offset=1.0 if op == "Mul" else 0.0)  # Mul: near 1
            mag = x.mag + 1.0 if op == "Add" else x.mag * 1.5
        ins = [x.name, other] if self.draw(st.booleans()) else [other, x.name]
        self.node(op, ins, shape, mag=mag)

    def matmul(self) -> None:
        x = self.pick(lambda v: len(v.shape) >= 2)
        if x is None:
            return self.unary()
        k = x.shape[-1]
        if self.draw(st.integers(0, 3)) == 0 and (len(x.shape) >= 3 or not self.symbolic):
            # activation x activation: y [..., K, M] with the same leading dims
            y = self.pick(lambda v: len(v.shape) == len(x.shape) and v.shape[:-2] == x.shape[:-2] and v.shape[-2] == k)
            if y is not None:
                if not self.too_big(x, x.mag * y.mag * np.sqrt(k)):
                    self.node("MatMul", [x.name, y.name], x.shape[:-1] + (y.shape[-1],), mag=x.mag * y.mag * np.sqrt(k))
                return
        n = self.draw(st.sampled_from([4, 8, 16, 32]))
        if not self.too_big(x, x.mag * 1.5):
            self.node("MatMul", [x.name, self.weight((k, n))], x.shape[:-1] + (n,), mag=x.mag * 1.5)

    def gemm(self) -> None:
        x = self.pick(lambda v: len(v.shape) == 2)
        if x is None:
            return self.matmul()
        trans_a = 0 if self.symbolic else self.draw(st.integers(0, 1))
        m, k = (x.shape[1], x.shape[0]) if trans_a else x.shape
        n = self.draw(st.sampled_from([4, 8, 16, 32]))
        trans_b = self.draw(st.integers(0, 1))
        w = self.weight((n, k) if trans_b else (k, n), scale=1.0 / np.sqrt(k))
        ins = [x.name, w]
        c_kind = self.draw(st.sampled_from(["none", "row", "row2", "full", "scalar"]))
        if c_kind == "full" and self.symbolic:
            c_kind = "row"
        if c_kind != "none":
            cshape = {"row": (n,), "row2": (1, n), "full": (m, n), "scalar": ()}[c_kind]
            ins.append(self.weight(cshape, scale=0.5))
        alpha = self.draw(st.sampled_from([1.0, 0.5, 2.0]))
        beta = self.draw(st.sampled_from([1.0, 0.25]))
        if not self.too_big(x, x.mag * 1.5 * alpha + 1.0):
            self.node(
                "Gemm",
                ins,
                (m, n),
                mag=x.mag * 1.5 * alpha + 1.0,
                alpha=alpha,
                beta=beta,
                transA=trans_a,
                transB=trans_b,
            )

    def conv(self) -> None:
        x = self.pick(lambda v: len(v.shape) == 4)
        if x is None:
            return self.binary()
        n_, c, h, w = x.shape
        group = 1
        m = self.draw(st.sampled_from([1, 2, 4, 8]))
        if c > 1 and self.draw(st.integers(0, 3)) == 0:  # depthwise
            group, m = c, c
        k = self.draw(st.sampled_from([1, 3]))
        stride = self.draw(st.sampled_from([1, 1, 2]))
        dil = self.draw(st.sampled_from([1, 1, 1, 2]))
        pad_mode = self.draw(st.sampled_from(["pads", "pads", "SAME_UPPER", "VALID"]))
        if pad_mode == "SAME_UPPER":
            dil = 1  # ONNX Runtime: "Dilation not supported for AutoPadType::SAME_UPPER"
        attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "dilations": [dil, dil], "group": group}
        span = dil * (k - 1) + 1
        if pad_mode == "pads":
            p = self.draw(st.integers(0, 1))
            attrs["pads"] = [p, p, p, p]
            oh, ow = (h + 2 * p - span) // stride + 1, (w + 2 * p - span) // stride + 1
        elif pad_mode == "SAME_UPPER":
            attrs["auto_pad"] = "SAME_UPPER"
            oh, ow = -(-h // stride), -(-w // stride)
        else:
            attrs["auto_pad"] = "VALID"
            oh, ow = (h - span) // stride + 1, (w - span) // stride + 1
        if oh < 1 or ow < 1:
            return self.unary()
        ins = [x.name, self.weight((m, c // group, k, k), scale=1.0 / np.sqrt(c // group * k * k))]
        if self.draw(st.booleans()):
            ins.append(self.weight((m,), scale=0.1))
        if not self.too_big(x, x.mag * 1.5 + 0.5):
            self.node("Conv", ins, (n_, m, oh, ow), mag=x.mag * 1.5 + 0.5, **attrs)

    def softmax(self) -> None:
        x = self.pick()
        r = len(x.shape)
        axis = self.draw(st.integers(-r, r - 1))
        self.node("Softmax", [x.name], x.shape, axis=axis)

    def layernorm(self) -> None:
        x = self.pick()
        r = len(x.shape)
        axes = [a for a in range(-r, r) if self.axis_ok(a, r)]
        if not axes:
            return self.unary()
        axis = self.draw(st.sampled_from(axes))
        norm = x.shape[axis % r :]
        ins = [x.name, self.weight(norm, scale=1.0)]
        if self.draw(st.booleans()):
            ins.append(self.weight(norm, scale=0.1))
        eps = self.draw(st.sampled_from([1e-5, 1e-3]))
        extra = 3 if self.draw(st.integers(0, 7)) == 0 else 1  # Mean and InvStdDev too, unused
        self.node("LayerNormalization", ins, x.shape, n_outputs=extra, mag=3.0, axis=axis, epsilon=eps)

    def reduce_mean(self) -> None:
        x = self.pick()
        r = len(x.shape)
        allowed = [a for a in range(r) if self.axis_ok(a, r)]
        if not allowed:
            return self.unary()
        axes = self.draw(st.lists(st.sampled_from(allowed), min_size=1, max_size=len(allowed), unique=True))
        keep = 1 if self.symbolic or r - len(axes) < 1 else self.draw(st.sampled_from([1, 1, 1, 0]))
        spelled = [a - r if self.draw(st.booleans()) else a for a in axes]
        ins = [x.name, self.ints(spelled)]
        if keep:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        self.node("ReduceMean", ins, shape, mag=x.mag, keepdims=keep)

    def transpose(self) -> None:
        x = self.pick(lambda v: len(v.shape) >= 2)
        if x is None:
            return self.unary()
        r = len(x.shape)
        if not self.symbolic and self.draw(st.integers(0, 4)) == 0:
            self.node("Transpose", [x.name], x.shape[::-1], mag=x.mag)  # default perm: reverse
            return
        first = [0] if self.symbolic else []
        rest = self.draw(st.permutations([i for i in range(r) if i not in first]))
        perm = first + list(rest)
        self.node("Transpose", [x.name], tuple(x.shape[p] for p in perm), mag=x.mag, perm=perm)

    def concat(self) -> None:
        x = self.pick()
        r = len(x.shape)
        axes = [a for a in range(r) if self.axis_ok(a, r)]
        if not axes:
            return self.unary()
        axis = self.draw(st.sampled_from(axes))
        parts = [x]
        for _ in range(self.draw(st.integers(1, 2))):
            y = self.pick(lambda v: len(v.shape) == r and all(v.shape[i] == x.shape[i] for i in range(r) if i != axis))
            parts.append(y if y is not None else x)  # x itself: fan-out into one node
        total = sum(p.shape[axis] for p in parts)
        if total > 256:
            return self.unary()
        shape = tuple(total if i == axis else d for i, d in enumerate(x.shape))
        self.node(
            "Concat",
            [p.name for p in parts],
            shape,
            mag=max(p.mag for p in parts),
            axis=axis if self.draw(st.booleans()) else axis - r,
        )

    def slice(self) -> None:
        x = self.pick()
        r = len(x.shape)
        allowed = [a for a in range(r) if self.axis_ok(a, r) and x.shape[a] > 1]
        if not allowed:
            return self.unary()
        axes = self.draw(st.lists(st.sampled_from(allowed), min_size=1, max_size=min(2, len(allowed)), unique=True))
        starts, ends, steps = [], [], []
        shape = list(x.shape)
        for a in axes:
            d = x.shape[a]
            step = self.draw(st.sampled_from([1, 1, 2, -1]))
            if step > 0:
                s = self.draw(st.integers(0, d - 1))
                e = self.draw(st.integers(s + 1, d))
                if e == d and self.draw(st.booleans()):
                    e = 2**63 - 1  # "to the end"
                if self.draw(st.booleans()):
                    s -= d  # the same start, spelled negative
            else:
                s = self.draw(st.integers(1, d - 1))
                e = self.draw(st.integers(-d - 1, s - d - 1))  # negative: counts from the end
            n = len(range(d)[slice(s, e if e < 2**62 else None, step)])
            if n < 1:
                return self.unary()
            starts.append(s)
            ends.append(e)
            steps.append(step)
            shape[a] = n
        ins = [x.name, self.ints(starts), self.ints(ends)]
        spelled_axes = [a - r if self.draw(st.booleans()) else a for a in axes]
        if steps != [1] * len(steps) or axes != list(range(len(axes))) or self.draw(st.booleans()):
            ins.append(self.ints(spelled_axes))
            if steps != [1] * len(steps) or self.draw(st.booleans()):
                ins.append(self.ints(steps))
        self.node("Slice", ins, tuple(shape), mag=x.mag)

    def reshape(self) -> None:
        x = self.pick()
        r = len(x.shape)
        lead = 1 if self.symbolic else 0
        body = list(x.shape[lead:])
        numel = int(np.prod(body)) if body else 1
        choice = self.draw(st.sampled_from(["flatten", "merge", "split", "expand"]))
        new = list(body)
        if choice == "flatten" or len(body) < 2 and choice == "merge":
            new = [numel]
        elif choice == "merge":
            i = self.draw(st.integers(0, len(body) - 2))
            new = body[:i] + [body[i] * body[i + 1]] + body[i + 2 :]
        elif choice == "split" and body:
            i = self.draw(st.integers(0, len(body) - 1))
            d = body[i]
            f = next((f for f in (2, 3) if d % f == 0 and d > f), None)
            new = body[:i] + ([f, d // f] if f else [d, 1]) + body[i + 1 :]
        else:
            new = body + [1]
        if lead + len(new) > 4:
            new = [numel]
        spelled: list[int] = list(new)
        if spelled and self.draw(st.booleans()):
            spelled[self.draw(st.integers(0, len(spelled) - 1))] = -1
        if self.symbolic:
            spelled = [0] + spelled
            shape = (x.shape[0], *new)
        else:
            shape = tuple(new)
            if r >= 1 and len(new) >= 1 and new[0] == x.shape[0] and self.draw(st.booleans()) and spelled[0] != -1:
                spelled[0] = 0  # "copy this dim"
        self.node("Reshape", [x.name, self.ints(spelled)], shape, mag=x.mag)


OP_WEIGHTS = [
    ("matmul", 5),
    ("gemm", 2),
    ("conv", 3),
    ("binary", 5),
    ("unary", 4),
    ("softmax", 2),
    ("layernorm", 2),
    ("reduce_mean", 2),
    ("transpose", 2),
    ("concat", 3),
    ("slice", 2),
    ("reshape", 2),
]
OP_CHOICES = [name for name, w in OP_WEIGHTS for _ in range(w)]


def _input_shape(draw, batch: int) -> tuple[int, ...]:
    family = draw(st.sampled_from(["2d", "2d", "3d", "4d", "4d"]))
    if family == "2d":
        return (batch, draw(st.sampled_from([4, 8, 16, 32, 64])))
    if family == "3d":
        return (batch, draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from([4, 8, 16, 32])))
    return (
        batch,
        draw(st.sampled_from([1, 2, 3, 4, 8])),
        draw(st.sampled_from([4, 5, 8])),
        draw(st.sampled_from([4, 5, 8])),
    )


@st.composite
def dags(draw) -> Spec:
    symbolic = draw(st.integers(0, 3)) == 0
    batch = draw(st.sampled_from([1, 2, 4, 8] if not symbolic else [2, 4, 8]))
    seed = draw(st.integers(0, 2**16))
    b = _Builder(draw, symbolic, seed)
    n_inputs = draw(st.integers(1, 3))
    shared = _input_shape(draw, batch)
    for i in range(n_inputs):
        # Inputs often share a shape, so that separate input towers can meet again.
        shape = shared if i and draw(st.booleans()) else _input_shape(draw, batch)
        v = Val(f"in{i}", shape, 3.0)
        b.inputs.append(v)
        b.pool.append(v)
    for _ in range(draw(st.integers(1, 14))):
        getattr(b, draw(st.sampled_from(OP_CHOICES)))()
    if not b.nodes:
        b.unary()

    produced = [v for v in b.pool if v not in b.inputs]
    sinks = [v for v in produced if v.name not in b.consumed]
    outputs = list(sinks)
    for v in produced:  # sometimes an intermediate is an output too (fan-out to the graph)
        if v not in outputs and draw(st.integers(0, 5)) == 0:
            outputs.append(v)
    outputs = list(draw(st.permutations(outputs)))

    def vi(v: Val, declare_shape: bool = True) -> onnx.ValueInfoProto:
        if not declare_shape:  # rank only, every dim unknown
            return helper.make_tensor_value_info(v.name, TensorProto.FLOAT, [None] * len(v.shape))
        dims: list[int | str] = list(v.shape)
        if symbolic:
            dims[0] = BATCH
        return helper.make_tensor_value_info(v.name, TensorProto.FLOAT, dims)

    graph_inputs = [vi(v) for v in b.inputs]
    graph_outputs = [vi(v, declare_shape=draw(st.integers(0, 4)) > 0) for v in outputs]
    if b.inits and draw(st.integers(0, 9)) == 0:  # initializers listed as (overridable) graph inputs
        graph_inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in b.inits]
    value_info = []
    if draw(st.integers(0, 4)) == 0:  # an exporter that writes value_info for intermediates
        value_info = [vi(v) for v in produced if v not in outputs]
    graph = helper.make_graph(
        b.nodes, "property", graph_inputs, graph_outputs, initializer=b.inits, value_info=value_info
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="hexfuse property test",
    )
    shapes = None
    if symbolic and seed % 2:  # half of the symbolic models get a shapes= override
        shapes = {v.name: list(v.shape) for v in b.inputs}
    kinds = draw(
        st.sampled_from([None, None, ["branches"], ["microbatch"], ["branches", "microbatch"], ["prefill_decode"]])
    )
    target = draw(st.sampled_from(["hexagon-v73", "hexagon-v73", "host"]))
    min_gain = draw(st.sampled_from([pipeline.DEFAULT_MIN_GAIN, 0.0]))
    verify_plugin = PLUGIN_BUILT and draw(st.integers(0, 3)) == 0  # the pass's own --verify plugin
    return Spec(model, symbolic, shapes, kinds, target, min_gain, verify_plugin, b.ops)


# ---------------------------------------------------------------------------------------
# The property


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _check_one(spec: Spec) -> None:
    note(spec.describe())
    note(onnx.printer.to_text(spec.model.graph)[:6000])
    with tempfile.TemporaryDirectory(prefix="hexfuse-prop-") as tmp:
        src_dir, out_dir = Path(tmp, "in"), Path(tmp, "out")
        src_dir.mkdir()
        out_dir.mkdir()
        src, out = src_dir / "model.onnx", out_dir / "model.fused.onnx"
        onnx.save(spec.model, src)
        # The generator's own contract: the input is valid and runs on stock ORT.
        onnx.checker.check_model(str(src), full_check=True)
        sess = verify.session(src)
        for value in sess.run(None, verify.random_inputs(sess, spec.shapes, seed=COMPARE_SEED)):
            assert np.isfinite(value).all(), "generator: the input model itself overflows"
        before = _sha(src)

        STATS["cases"] += 1
        event(f"symbolic={spec.symbolic} override={spec.shapes is not None}")
        try:
            result = pipeline.rewrite(
                src,
                out,
                kinds=spec.kinds,
                target=spec.target,
                min_gain=spec.min_gain,
                shapes=spec.shapes,
                verify_plugin=spec.verify_plugin,
            )
        except HexfuseError as exc:
            message = exc.message
            assert message and "\n" not in message.strip(), f"not a one-line message: {message!r}"
            assert _listing(out_dir) == [], "a declined rewrite left files behind"
            kind = type(exc).__name__
            STATS[f"declined:{kind}"] += 1
            STATS[f"declined:{kind}:{message.replace(str(src), '<model>')[:90]}"] += 1
            event(f"declined with {kind}")
            note(f"declined: {kind}: {message}")
        else:
            if result.output is None:
                assert _listing(out_dir) == [], "nothing qualified but something was written"
                STATS["declined:no pair"] += 1
                event("declined: no pair qualifies")
                for r in result.analysis.rejected:
                    why = r.reason.split(":")[0].split(" below")[0].removesuffix("%").rstrip("-.0123456789% ")
                    if why == "does not lower":
                        why = r.reason.split(":")[1].strip().split(" node")[0]
                    STATS[f"rejected:{why}"] += 1
            else:
                _check_written(spec, src, out, out_dir, result)
        assert _sha(src) == before, "the input model was modified"
        assert _listing(src_dir) == ["model.onnx"], "something was written beside the input"


def _check_written(spec: Spec, src: Path, out: Path, out_dir: Path, result: pipeline.RewriteResult) -> None:
    assert result.output == out
    assert _listing(out_dir) == [out.name], f"staging leftovers: {_listing(out_dir)}"
    onnx.checker.check_model(str(out), full_check=True)
    fused = onnx.load(str(out))
    pair_nodes = [n for n in fused.graph.node if n.domain == C.DOMAIN and n.op_type == C.OP_TYPE]
    assert len(pair_nodes) == len(result.analysis.pairs) >= 1
    STATS["rewrote"] += 1
    event("rewrote")
    for p in result.analysis.pairs:
        STATS[f"pair:{p.kind}"] += 1
        event(f"pair:{p.kind}")
    # Stock ORT on inputs the pass did not see.
    verify.compare(src, out, spec.shapes, seed=COMPARE_SEED)
    if PLUGIN_BUILT:
        with_program = sum(any(a.name == C.ATTR_PROGRAM for a in n.attribute) for n in pair_nodes)
        STATS["pairs with a program"] += with_program
        verify.compare(
            src, out, spec.shapes, PLUGIN_RTOL, rewritten_options=runtime.session_options("host"), seed=COMPARE_SEED
        )
        STATS["plugin verified"] += 1


@pytest.fixture(scope="module", autouse=True)
def _summary():
    STATS.clear()
    yield
    pairs = ", ".join(f"{k.split(':', 1)[1]} {v}" for k, v in sorted(STATS.items()) if k.startswith("pair:"))
    declined = {k.split(":", 1)[1]: v for k, v in STATS.items() if k.startswith("declined:") and k.count(":") == 1}
    print(
        f"\n[property] {STATS['cases']} graphs: rewrote {STATS['rewrote']}, "
        f"declined {sum(declined.values())} ({', '.join(f'{k} {v}' for k, v in sorted(declined.items()))}); "
        f"pairs: {pairs or 'none'}; plugin-verified models {STATS['plugin verified']}"
        f"{'' if PLUGIN_BUILT else ' (plugin not built)'}"
    )
    reasons = {k.split(":", 2)[2]: v for k, v in STATS.items() if k.startswith("declined:") and k.count(":") >= 2}
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"[property]   declined {n}: {reason}")
    rejected = {k.split(":", 1)[1]: v for k, v in STATS.items() if k.startswith("rejected:")}
    if rejected:
        print(
            "[property]   candidates rejected: "
            + ", ".join(f"{k} {v}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1]))
        )


@pytest.mark.slow
@PROFILE
@given(spec=dags())
def test_rewrite_declines_cleanly_or_writes_a_verified_model(spec: Spec) -> None:
    _check_one(spec)


# ---------------------------------------------------------------------------------------
# The generator itself: it must produce valid models of every op family, or the property
# above proves little.


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=dags())
def test_generator_makes_valid_models(spec: Spec) -> None:
    onnx.checker.check_model(spec.model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(spec.model, strict_mode=True)
    assert len(inferred.graph.node) >= 1
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(spec.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for seed in range(3):
        for out in sess.run(None, verify.random_inputs(sess, spec.shapes, seed=seed)):
            assert np.isfinite(out).all()


# ---------------------------------------------------------------------------------------
# Found while building the generator: the comparison itself must not reject equal outputs.


def test_equal_infinite_outputs_compare_equal(tmp_path: Path) -> None:
    a = np.array([np.inf, 1.0, -np.inf, 0.5], np.float32)
    assert verify.relative_error(a, a.copy()) == 0.0
    m = models.build("two_branch")
    m.graph.node.extend(
        [
            helper.make_node("Relu", ["x"], ["r"], name="extra/relu"),
            helper.make_node("Log", ["r"], ["logr"], name="extra/log"),
        ]
    )  # -inf where x <= 0
    m.graph.output.append(helper.make_tensor_value_info("logr", TensorProto.FLOAT, [64, 256]))
    src = tmp_path / "log.onnx"
    onnx.save(m, src)
    r = pipeline.rewrite(src, tmp_path / "out.onnx")
    assert r.output is not None
