"""A float MatMul or Gemm whose B is an 8-bit DequantizeLinear and whose result a QuantizeLinear reads
(a u16u8 model's group) is rewritten by ONNX Runtime into com.microsoft MatMulNBits
(`qmatmul.ort_nbits`). At accuracy level 1 (verify.EXACT_QDQ_CONFIG) that is MLAS's sgemm with B
dequantized and transposed, the bias in C: for one row, SgemmKernelM1TransposeBAvx's 8 lane sums, not
the 1-row kernel a MatMul runs; for N = 1, the blocked sgemm, not the 1-row kernel with A and B swapped.
The lowering marks such a GEMM (GemmParam.NBITS) and the host sums it so.

The f32 result is no output here (ORT does not rewrite a Gemm whose result is a graph output too): its
u16 quantization, about 400-1700 f32 ulps a step, shows a difference now and then. Over 50 inputs each,
the one-row cases and the column were 1-17 steps apart before the host knew (GemmParam.NBITS 0); the
other cases were equal and stay so."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_lower import init, needs_host, pair_model, program_inputs, vi

from hexfuse_onnx.graph import index_model
from hexfuse_onnx.lowering import lower_pair
from hexfuse_onnx.lowering.qmatmul import GraphBody, ort_nbits
from hexfuse_onnx.runtime import HostKernel
from hexfuse_onnx.verify import EXACT_QDQ_CONFIG

RNG = np.random.default_rng(8)
Y_SCALE = np.float32(2e-4)  # |y| up to about 6: 256 to 1024 ulps a step


@dataclass
class Group:
    """DQ(u8 B [k, n]) -> op(a, B [, c]) -> u16 Q (yq), `a` [*rows, k] an input."""

    nodes: list[onnx.NodeProto]
    consts: dict[str, np.ndarray]
    rows: list[int]
    k: int
    n: int
    also_out: list[str] = field(default_factory=list)  # plain(): more graph outputs
    a_dtype: int = TensorProto.FLOAT  # UINT16: the input is `aq`, dequantized to a

    @property
    def a(self) -> str:
        return "a" if self.a_dtype == TensorProto.FLOAT else "aq"

    def plain(self) -> onnx.ModelProto:
        inputs = [vi(self.a, [*self.rows, self.k], self.a_dtype)]
        out = [vi("yq", [*self.rows, self.n], TensorProto.UINT16)] + [vi(o, None) for o in self.also_out]
        inits = [init(name, v) for name, v in self.consts.items()]
        graph = helper.make_graph(self.nodes, "group", inputs, out, inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])

    def pair(self) -> onnx.ModelProto:
        """Task A a Relu, task B the group."""
        b_inputs = [vi(self.a, [*self.rows, self.k], self.a_dtype)] + [
            vi(name, list(np.shape(v)), _elem(v)) for name, v in self.consts.items()
        ]
        relu = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
        out = [vi("yq", [*self.rows, self.n], TensorProto.UINT16)]
        inits = [init(name, v) for name, v in self.consts.items()]
        return pair_model(relu, self.nodes, [vi("x", [2, 4])], b_inputs, [vi("ya", [2, 4])], out, inits, 21)


def float_weight_group(rows: list[int], k: int, n: int) -> Group:
    """A Gemm of a float W and bias on a u16 DequantizeLinear: ORT quantizes W to int8 (`qbias`), then
    rewrites the Gemm into MatMulNBits."""
    consts = {
        "w": (RNG.standard_normal([k, n]) / np.sqrt(k)).astype(np.float32),
        "c": RNG.standard_normal([n]).astype(np.float32),
        "as": np.asarray(np.float32(1e-4)),
        "az": np.asarray(np.uint16(32768)),
        "ys": np.asarray(Y_SCALE),
        "yz": np.asarray(np.uint16(32768)),
    }
    nodes = [
        helper.make_node("DequantizeLinear", ["aq", "as", "az"], ["a"], name="dqa"),
        helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="op"),
        helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"], name="q"),
    ]
    return Group(nodes, consts, rows, k, n, a_dtype=TensorProto.UINT16)


def group(
    rows: list[int], k: int, n: int, op: str = "Gemm", bias: bool = True, op_attrs: dict | None = None, **dq: object
) -> Group:
    """`dq`: the weight DequantizeLinear's scale `ws` and zero point `wz` (per tensor by default),
    axis, block_size; `op_attrs`: the Gemm's."""
    ws = dq.pop("ws", np.float32(0.02 / np.sqrt(k)))
    wz = dq.pop("wz", np.uint8(131))
    consts = {"wq": RNG.integers(0, 256, [k, n]).astype(np.uint8), "ws": ws, "wz": wz}
    consts |= {"ys": Y_SCALE, "yz": np.uint16(32768)}
    inputs = ["a", "w"]
    if bias:
        consts["c"] = RNG.standard_normal([n]).astype(np.float32)
        inputs.append("c")
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dqw", **dq),
        helper.make_node(op, inputs, ["y"], name="op", **(op_attrs or {})),
        helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"], name="q"),
    ]
    return Group(nodes, {name: np.asarray(v) for name, v in consts.items()}, rows, k, n)


def also_read(g: Group, name: str) -> Group:
    """g with `name` read by a Relu too."""
    g.nodes.append(helper.make_node("Relu", [name], [name + "_relu"], name="relu_" + name))
    g.also_out.append(name + "_relu")
    return g


def _elem(v: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(v.dtype)


def ort_session(m: onnx.ModelProto) -> ort.InferenceSession:
    """As verification runs ORT: its default optimizations, EXACT_QDQ_CONFIG, 1 thread."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    for key, value in EXACT_QDQ_CONFIG.items():
        so.add_session_config_entry(key, value)
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_rewrites(m: onnx.ModelProto, tmp_path: Path) -> bool:
    """ORT's optimized model (its extended level) has a MatMulNBits."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    for key, value in EXACT_QDQ_CONFIG.items():
        so.add_session_config_entry(key, value)
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return any(n.op_type == "MatMulNBits" for n in onnx.load(so.optimized_model_filepath).graph.node)


def steps_apart(g: Group, runs: int = 50) -> int:
    """u16 elements of the host's result unequal to ORT's, over `runs` random inputs."""
    m = g.pair()
    ref, node = ort_session(m), m.graph.node[0]
    program = lower_pair(m, node)
    apart = 0
    for _ in range(runs):
        if g.a_dtype == TensorProto.FLOAT:
            a = RNG.standard_normal([*g.rows, g.k]).astype(np.float32)
        else:
            a = RNG.integers(22768, 42768, [*g.rows, g.k]).astype(np.uint16)
        feeds = {"x": RNG.standard_normal([2, 4]).astype(np.float32), g.a: a}
        got = HostKernel().run(program, program_inputs(m, node, feeds))[1]
        apart += int((got != ref.run(None, feeds)[1]).sum())
    return apart


CASES = {
    # M = 1 (MLAS's 1-row kernel with B transposed), K = 512 as vietcombank's digits, N odd (blocks of 4, 2, 1)
    "gemm_one_row_bias": lambda: group([1], 512, 203),
    "matmul_one_row": lambda: group([1], 333, 77, op="MatMul", bias=False),
    # N = 530: the host's chunks of 512 outputs, then 2 (MLAS's block of 2)
    "matmul_one_row_wide": lambda: group([1], 64, 530, op="MatMul", bias=False),
    # A's batch dims folded into M = 1
    "matmul_folded_one_row": lambda: group([1, 1], 130, 95, op="MatMul", bias=False),
    "gemm_one_row_per_column": lambda: group(
        [1],
        200,
        41,
        ws=RNG.uniform(1e-3, 2e-3, 41).astype(np.float32),
        wz=RNG.integers(100, 150, 41).astype(np.uint8),
        axis=1,
    ),
    # M > 1: the blocked sgemm, whose sums B's layout does not change (equal before too)
    "gemm_rows_bias": lambda: group([7], 300, 33),
    "matmul_folded_rows": lambda: group([2, 5], 129, 9, op="MatMul", bias=False),
    "gemm_rows_one_column": lambda: group([64], 200, 1),
    # a float weight ORT quantizes to int8 first
    "gemm_one_row_float_weight": lambda: float_weight_group([1], 300, 150),
}


@needs_host
@pytest.mark.parametrize("name", sorted(CASES))
def test_nbits_group_equals_ort(name: str, tmp_path: Path) -> None:
    global RNG  # noqa: PLW0603 - each case its own draws, whichever cases run
    RNG = np.random.default_rng(zlib.crc32(name.encode()))
    g = CASES[name]()
    assert ort_rewrites(g.plain(), tmp_path)
    assert steps_apart(g) == 0


@pytest.mark.parametrize(
    ("model", "rewritten"),
    [
        (lambda: group([1], 64, 8), True),
        (lambda: group([1], 64, 8, ws=np.full([1], 0.01, np.float32), wz=np.full([1], 3, np.uint8)), False),
        (lambda: group([1], 64, 8, ws=np.full([8], 0.01, np.float32), wz=np.full([8], 3, np.uint8), axis=-1), False),
        (
            lambda: group(
                [1], 64, 8, ws=np.full([2, 8], 0.01, np.float32), wz=np.full([2, 8], 3, np.uint8), axis=0, block_size=32
            ),
            True,
        ),
        (
            lambda: group(
                [1], 64, 8, ws=np.full([4, 8], 0.01, np.float32), wz=np.full([4, 8], 3, np.uint8), axis=0, block_size=16
            ),
            True,
        ),
        (lambda: group([1], 64, 64, op_attrs={"transB": 1}), False),
        (lambda: group([1], 64, 8, op_attrs={"alpha": 0.5}), False),
        (lambda: group([1], 64, 8, op_attrs={"beta": 0.5}), False),
        (lambda: group([1], 64, 8, op="MatMul", bias=False), True),
        (lambda: also_read(group([1], 64, 8), "y"), False),
        (lambda: also_read(group([1], 64, 8), "w"), False),
        (lambda: float_weight_group([1], 64, 8), True),
    ],
)
def test_ort_nbits_says_what_ort_rewrites(model: Callable[[], Group], rewritten: bool, tmp_path: Path) -> None:
    """Per tensor (rank-0 scale), per column (axis 1, not -1) and blockwise weights as ORT 1.32 takes
    them; a [1] scale is neither per tensor nor per column to it."""
    m = model().plain()
    assert ort_rewrites(m, tmp_path) == rewritten
    g = index_model(m)
    assert ort_nbits(GraphBody(g), next(n for n in g.nodes if n.name == "op")) == rewritten
