"""Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual) to bool, Not/And/Or of bools, Concat of bools,
Abs, Sin, Cos and InstanceNormalization, lowered onto the kernel and run on the real host kernel against ONNX
Runtime: every output bit for bit (bools as bools; Sin/Cos/InstanceNormalization as ORT's CPU kernels compute them
on x86-64)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from test_lower import HostKernel, init, needs_host, pair_model, program_inputs, vi
from test_lower_exporter_ops import opcodes

from hexfuse_onnx import runtime
from hexfuse_onnx.lowering import LoweringError, attach_programs, lower_pair
from hexfuse_onnx.lowering.abi import Opcode

RNG = np.random.default_rng(22)
BOOL, F32, F16 = TensorProto.BOOL, TensorProto.FLOAT, TensorProto.FLOAT16
I32, I64 = TensorProto.INT32, TensorProto.INT64
NP = {BOOL: np.bool_, F32: np.float32, F16: np.float16, I32: np.int32, I64: np.int64}


def task_b(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    """A pair whose task A is one Relu and task B the given nodes."""
    a = [helper.make_node("Relu", ["x"], ["ya"], name="relu")]
    extra = [vi(t.name, list(t.dims), t.data_type) for t in inits]
    return pair_model(a, nodes, [vi("x", [2, 4])], inputs + extra, [vi("ya", [2, 4])], outputs, list(inits), opset)


def values(dtype: int, shape: list[int]) -> np.ndarray:
    """Few distinct values, so that equal ones occur; float32 with NaN, +-inf, +-0 among them."""
    if dtype == BOOL:
        return np.asarray(RNG.integers(0, 2, shape)).astype(np.bool_)
    if dtype in (F32, F16):
        pool = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.5, 0.5, 1.0, 2.0], NP[dtype])
        return np.asarray(RNG.choice(pool, shape))
    return np.asarray(RNG.integers(-3, 4, shape) * (1 << 33 if dtype == I64 else 1)).astype(NP[dtype])


def run_both(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list, list]:
    feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32), **feeds}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the ops as written
    ref = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = HostKernel().run(lower_pair(m, m.graph.node[0]), program_inputs(m, m.graph.node[0], feeds))
    return ref, got


def assert_same_bits(ref: list, got: list) -> None:
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
        assert r.tobytes() == g.tobytes(), np.argwhere(r.view(np.uint8) != g.view(np.uint8))[:5]


COMPARISONS = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
SHAPES = [([3, 5, 7], [3, 5, 7]), ([3, 5, 7], [7]), ([1, 5, 1], [3, 1, 7]), ([4097], [])]


@needs_host
@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", [F32, F16, I32, I64], ids=["f32", "f16", "i32", "i64"])
def test_comparison_equals_ort(op: str, dtype: int) -> None:
    """Every mode on every operand type, with broadcasting; NaN compares false, -0 equals +0."""
    for xs, ys in SHAPES:
        out = list(np.broadcast_shapes(tuple(xs), tuple(ys)))
        m = task_b([helper.make_node(op, ["p", "q"], ["yb"], name="cmp")], [vi("p", xs, dtype), vi("q", ys, dtype)],
                   [vi("yb", out, BOOL)])  # fmt: skip
        assert opcodes(m) == [Opcode.RELU] + ([Opcode.CAST] * 2 if dtype == F16 else []) + [Opcode.COMPARE]
        assert_same_bits(*run_both(m, {"p": values(dtype, xs), "q": values(dtype, ys)}))


def mask_pair() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A mask as decoders build it: Not(Equal(a, b)) And (c Or d), each intermediate a pair output too; and
    its bool feeds."""
    shape = [2, 9, 33]
    nodes = [
        helper.make_node("Equal", ["a", "b"], ["eq"], name="eq"),
        helper.make_node("Not", ["eq"], ["ne"], name="not"),
        helper.make_node("Or", ["c", "d"], ["either"], name="or"),
        helper.make_node("And", ["ne", "either"], ["yb"], name="and"),
    ]
    inputs = [vi("a", shape, BOOL), vi("b", shape, BOOL), vi("c", [1, 9, 1], BOOL), vi("d", [33], BOOL)]
    m = task_b(nodes, inputs, [vi("yb", shape, BOOL), vi("ne", shape, BOOL), vi("either", [1, 9, 33], BOOL)])
    feeds = {v.name: values(BOOL, [d.dim_value for d in v.type.tensor_type.shape.dim]) for v in inputs}
    return m, feeds


@needs_host
def test_equal_of_bools_and_not_and_or_equal_ort() -> None:
    m, feeds = mask_pair()
    assert opcodes(m) == [Opcode.RELU, Opcode.COMPARE, Opcode.COMPARE, Opcode.MAX, Opcode.MIN]
    assert_same_bits(*run_both(m, feeds))


@needs_host
def test_xor_and_isnan_are_one_compare_each() -> None:
    """Xor of bools and IsNaN (here a pair output) are each one COMPARE NOT_EQUAL (x != x for IsNaN)."""
    nodes = [
        helper.make_node("IsNaN", ["z"], ["nan"], name="isnan"),
        helper.make_node("Xor", ["nan", "a"], ["yb"], name="xor"),
    ]
    m = task_b(nodes, [vi("z", [3, 7]), vi("a", [7], BOOL)], [vi("yb", [3, 7], BOOL), vi("nan", [3, 7], BOOL)])
    assert opcodes(m) == [Opcode.RELU, Opcode.COMPARE, Opcode.COMPARE]
    assert_same_bits(*run_both(m, {"z": values(F32, [3, 7]), "a": values(BOOL, [7])}))


@pytest.mark.slow  # plugin sessions, as tests/test_plugin.py's
@pytest.mark.skipif(not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="the plugin is not built")
def test_bools_cross_the_plugin() -> None:
    """Through ONNX Runtime and the plugin, ONNX bool pair inputs and outputs are the program's BOOL: the
    outputs equal stock ORT's, and with the body's And made an Or after lowering, the plugin still gives the
    program's (the kernel ran), stock ORT the altered body's."""
    m, feeds = mask_pair()
    feeds["x"] = RNG.standard_normal((2, 4)).astype(np.float32)
    fused, failed = attach_programs(m)
    assert failed == {}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for n in fused.functions[0].node:
        n.op_type = "Or" if n.op_type == "And" else n.op_type
    altered = fused.SerializeToString()
    so = runtime.session_options(backend="host")
    assert_same_bits(ref, ort.InferenceSession(altered, so, providers=["CPUExecutionProvider"]).run(None, feeds))
    stock = ort.InferenceSession(altered, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert stock[1].tobytes() != ref[1].tobytes()


@needs_host
def test_bools_are_moved_as_they_are() -> None:
    """A comparison's mask transposed, sliced and reshaped (TRANSPOSE, SLICE, COPY of bools), then Or-ed."""
    nodes = [
        helper.make_node("Less", ["p", "q"], ["lt"], name="lt"),
        helper.make_node("Transpose", ["lt"], ["tr"], name="tr", perm=[2, 0, 1]),
        helper.make_node("Slice", ["tr", "starts", "ends"], ["sl"], name="sl"),
        helper.make_node("Reshape", ["sl", "shape"], ["rs"], name="rs"),
        helper.make_node("Or", ["rs", "rs"], ["yb"], name="or"),
    ]
    inits = [init("starts", np.array([1], np.int64)), init("ends", np.array([4], np.int64)),
             init("shape", np.array([3, 15], np.int64))]  # fmt: skip
    m = task_b(nodes, [vi("p", [3, 5, 7]), vi("q", [7])], [vi("yb", [3, 15], BOOL)], inits, opset=13)
    assert opcodes(m) == [Opcode.RELU, Opcode.COMPARE, Opcode.TRANSPOSE, Opcode.SLICE, Opcode.COPY, Opcode.MAX]
    assert_same_bits(*run_both(m, {"p": values(F32, [3, 5, 7]), "q": values(F32, [7])}))


@needs_host
@pytest.mark.parametrize("n_masks", [2, 11], ids=["one-op", "grouped"])
def test_masks_are_concatenated_as_they_are(n_masks: int) -> None:
    """Concat of comparisons' masks (CONCAT of bools; 11 inputs: groups of 8 into a bool scratch first) along the
    middle axis, and of int64 lengths."""
    nodes = [helper.make_node("Less", ["p", f"q{k}"], [f"m{k}"], name=f"lt{k}") for k in range(n_masks)]
    nodes += [
        helper.make_node("Concat", [f"m{k}" for k in range(n_masks)], ["yb"], name="cat", axis=1),
        helper.make_node("Concat", ["w", "w"], ["ww"], name="cat_lengths", axis=0),
    ]
    inputs = [vi("p", [3, 1, 7]), vi("w", [4], I64)] + [vi(f"q{k}", [1, k + 1, 7]) for k in range(n_masks)]
    rows = n_masks * (n_masks + 1) // 2
    m = task_b(nodes, inputs, [vi("yb", [3, rows, 7], BOOL), vi("ww", [8], I64)])
    assert opcodes(m).count(Opcode.CONCAT) == (2 if n_masks <= 8 else 4)
    feeds = {"p": values(F32, [3, 1, 7]), "w": values(I64, [4])}
    feeds |= {f"q{k}": values(F32, [1, k + 1, 7]) for k in range(n_masks)}
    assert_same_bits(*run_both(m, feeds))


WHERES = {
    "data": (  # a decoder's Where on data: Where(Equal(z, 0), z, 0)
        [helper.make_node("Equal", ["z", "zero"], ["c"], name="eq"), helper.make_node("Where", ["c", "z", "zero"],
                                                                                      ["yb"], name="where")],
        {"z": [3, 5]}, [init("zero", np.float32(0.0))], ("yb", [3, 5], F32),
    ),
    "mask": (  # a bool mask input broadcast over the scores, -inf elsewhere
        [helper.make_node("Where", ["m", "z", "lowest"], ["yb"], name="where")],
        {"m": [1, 5], "z": [3, 4, 5]}, [init("lowest", np.float32(-np.inf))], ("yb", [3, 4, 5], F32),
    ),
    "int64": (
        [helper.make_node("Less", ["p", "q"], ["c"], name="lt"), helper.make_node("Where", ["c", "p", "q"], ["yb"],
                                                                                  name="where")],
        {"p": [3, 1, 7], "q": [5, 1]}, [], ("yb", [3, 5, 7], I64),
    ),
    "isnan_of_another_tensor": (  # IsNaN as COMPARE: x != x
        [helper.make_node("IsNaN", ["z"], ["nan"], name="isnan"), helper.make_node("Where", ["nan", "c", "w"], ["yb"],
                                                                                  name="where")],
        {"z": [3, 5], "w": [3, 5]}, [init("c", np.float32(0.0))], ("yb", [3, 5], F32),
    ),
    "isnan_value_computed": (
        [helper.make_node("IsNaN", ["z"], ["nan"], name="isnan"), helper.make_node("Where", ["nan", "w", "z"], ["yb"],
                                                                                  name="where")],
        {"z": [3, 5], "w": [3, 5]}, [], ("yb", [3, 5], F32),
    ),
    "casts": (  # bool -> float32 and float16, float32 -> bool (NaN true, -0 false)
        [helper.make_node("Cast", ["z"], ["b"], name="to_bool", to=BOOL), helper.make_node("Cast", ["b"], ["yb"],
         name="to_float", to=F32), helper.make_node("Cast", ["b"], ["h"], name="to_half", to=F16)],
        {"z": [4, 9]}, [], ("yb", [4, 9], F32), ("h", [4, 9], F16), ("b", [4, 9], BOOL),
    ),
    "bool_to_ints": (  # slovorez's mask arithmetic: bool -> int32 and int64, WHERE(x, 1, 0)
        [helper.make_node("Cast", ["m"], ["mi"], name="to_int32", to=I32), helper.make_node("Cast", ["m"], ["ml"],
                                                                                     name="to_int64", to=I64)],
        {"m": [3, 5]}, [], ("mi", [3, 5], I32), ("ml", [3, 5], I64),
    ),
    "int_casts": (  # int64 and int32 -> bool: x != 0
        [helper.make_node("Cast", ["p"], ["pb"], name="p_bool", to=BOOL), helper.make_node("Cast", ["k"], ["kb"],
                                                                                    name="k_bool", to=BOOL)],
        {"p": [3, 5], "k": [5]}, [], ("pb", [3, 5], BOOL), ("kb", [5], BOOL),
    ),
}  # fmt: skip
TYPES = {"m": BOOL, "p": I64, "q": I64, "k": I32}


@needs_host
@pytest.mark.parametrize("case", WHERES)
def test_where_isnan_and_casts_of_bools_equal_ort(case: str) -> None:
    """WHERE picks X's or Y's bytes by a bool condition (the three broadcast): a Where on data, a mask, int64;
    IsNaN outside Where(IsNaN(x), c, x) is x != x; Cast between bool and float, and of integers to bool."""
    nodes, shapes, inits, *outs = WHERES[case]
    inputs = [vi(name, dims, TYPES.get(name, F32)) for name, dims in shapes.items()]
    m = task_b(nodes, inputs, [vi(*o) for o in outs], inits)
    assert Opcode.WHERE in opcodes(m) or Opcode.COMPARE in opcodes(m)
    assert_same_bits(*run_both(m, {name: values(TYPES.get(name, F32), dims) for name, dims in shapes.items()}))


@needs_host
def test_int64_to_float_rounds_as_ort() -> None:
    """Cast int64 -> float32 (CAST, to nearest, ties to even) and -> float16 (through float32, as ORT), of every
    magnitude: ties at 2^24 + 1, the extremes."""
    nodes = [helper.make_node("Cast", ["p"], ["yb"], name="to_float", to=F32),
             helper.make_node("Cast", ["p"], ["h"], name="to_half", to=F16)]  # fmt: skip
    m = task_b(nodes, [vi("p", [4099], I64)], [vi("yb", [4099], F32), vi("h", [4099], F16)])
    assert opcodes(m) == [Opcode.RELU] + [Opcode.CAST] * 5  # to float16: CAST to f32, to f16, back; the output's
    wide = RNG.integers(-(2**63), 2**63 - 1, 4099, dtype=np.int64, endpoint=True) >> RNG.integers(0, 64, 4099)
    wide[:5] = [2**24 + 1, 2**24 + 3, -(2**63), 2**63 - 1, 65520]
    assert_same_bits(*run_both(m, {"p": wide}))


@needs_host
def test_a_comparison_of_a_computed_float_feeds_a_logic_op() -> None:
    """Greater(Relu(z), 0.5) And Less(z, 1): comparisons of a float the pair computes and of a constant."""
    nodes = [
        helper.make_node("Relu", ["z"], ["r"], name="r"),
        helper.make_node("Greater", ["r", "half"], ["big"], name="gt"),
        helper.make_node("LessOrEqual", ["z", "one"], ["small"], name="le"),
        helper.make_node("And", ["big", "small"], ["yb"], name="and"),
    ]
    inits = [init("half", np.array(0.5, np.float32)), init("one", np.array([1.0], np.float32))]
    m = task_b(nodes, [vi("z", [5, 131])], [vi("yb", [5, 131], BOOL)], inits)
    assert_same_bits(*run_both(m, {"z": RNG.standard_normal((5, 131)).astype(np.float32)}))


@pytest.mark.parametrize("types", [(TensorProto.UINT8,) * 2, (TensorProto.INT8,) * 2, (F32, I32)])
def test_a_comparison_of_mixed_or_unsupported_types_is_refused(types: tuple[int, int]) -> None:
    """8-bit operands (COMPARE takes none), and float32 with int32 (not valid ONNX: checked all the same)."""
    inputs = [vi("p", [4], types[0]), vi("q", [4], types[1])]
    m = task_b([helper.make_node("Less", ["p", "q"], ["yb"], name="lt")], inputs, [vi("yb", [4], BOOL)])
    with pytest.raises(LoweringError, match="only two float32, int32, int64 or bool"):
        lower_pair(m, m.graph.node[0])


@needs_host
def test_abs_equals_ort() -> None:
    """Abs clears the sign bit: -0 gives +0, NaN stays NaN, infinities and denormals exact."""
    special = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, -3.4e38, 2.5, -2.5]
    z = np.concatenate([special, RNG.standard_normal(401 - len(special)) * 100]).astype(np.float32)
    m = task_b([helper.make_node("Abs", ["z"], ["yb"], name="abs")], [vi("z", [401])], [vi("yb", [401])])
    assert_same_bits(*run_both(m, {"z": z}))


def test_an_integer_abs_is_refused() -> None:
    m = task_b([helper.make_node("Abs", ["z"], ["yb"], name="abs")], [vi("z", [4], I32)], [vi("yb", [4], I32)])
    with pytest.raises(LoweringError, match="not float32"):
        lower_pair(m, m.graph.node[0])


@needs_host
@pytest.mark.parametrize("op", ["Sin", "Cos"])
@pytest.mark.parametrize("n", [1, 3, 4, 7, 4099, 40003])
def test_sin_cos_equal_ort(op: str, n: int) -> None:
    """ORT's Sin/Cos are Eigen's packet sin/cos, 4 elements a packet, and the C library's over the last n % 4:
    the kernel gives the same bits at every length, for values near 0, of a timestep embedding (up to 1e4),
    above the thresholds of Eigen's large-argument reduction (18838 for cos, 25966 for sin), of every
    exponent, and the special ones."""
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 18838.0, 25966.0, -3.4e38, 3.14159265, 1.5707964]
    parts = [RNG.uniform(-10, 10, n), RNG.uniform(-1e4, 1e4, n), RNG.uniform(-3e4, 3e4, n)]
    parts.append(np.exp(RNG.uniform(-20, 88, n)) * RNG.choice([-1, 1], n))
    pool = RNG.permutation(np.concatenate([special, *parts]))
    z = (pool if n < len(special) else np.concatenate([special, pool]))[:n].astype(np.float32)
    m = task_b([helper.make_node(op, ["z"], ["yb"], name=op.lower())], [vi("z", [n])], [vi("yb", [n])])
    assert_same_bits(*run_both(m, {"z": z}))


INSTANCE_SHAPES = [[1, 4, 8, 8], [2, 3, 9, 13], [1, 2, 3], [2, 5, 7], [1, 3, 1, 1], [1, 8, 33, 17], [1, 2, 1001],
                   [2, 3, 2, 3, 5]]  # fmt: skip


@needs_host
@pytest.mark.parametrize("shape", INSTANCE_SHAPES, ids=["x".join(map(str, s)) for s in INSTANCE_SHAPES])
@pytest.mark.parametrize("computed", [False, True], ids=["input", "computed"])
def test_instance_normalization_equals_ort(shape: list[int], computed: bool) -> None:
    """ORT's CPU kernel: each row's mean by Eigen's vectorized sum (from the row's first 16-byte boundary:
    rows of a length not a multiple of 4 start elsewhere), the squared deviations from the row's start,
    y = x s + (b - mean s): the kernel's bits equal ORT's, on a pair input and on a tensor the pair computes."""
    c = shape[1]
    inits = [init("s", RNG.standard_normal(c).astype(np.float32)), init("b", RNG.standard_normal(c).astype(np.float32))]
    nodes = [helper.make_node("InstanceNormalization", ["h" if computed else "z", "s", "b"], ["yb"], name="in",
                              epsilon=1e-3)]  # fmt: skip
    if computed:
        nodes.insert(0, helper.make_node("Mul", ["z", "z"], ["h"], name="square"))
    m = task_b(nodes, [vi("z", shape)], [vi("yb", shape)], inits)
    assert opcodes(m)[-1] == Opcode.INSTANCENORM
    z = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    assert_same_bits(*run_both(m, {"z": z}))
