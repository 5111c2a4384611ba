"""Task program v2 through the host library (ctypes): the C shape-expression evaluator against the
reference `shape_expr.run`, and the C specializer (`HostKernel.specialize`) on a v2 program."""

from __future__ import annotations

import json
import os
import random
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from hexfuse_onnx import contract as C
from hexfuse_onnx import runtime
from hexfuse_onnx import shape_expr as S
from hexfuse_onnx.errors import HexfuseError
from hexfuse_onnx.lowering.abi import Opcode
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR, HostKernel

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    not (LIB_DIR / HOST_NAME).is_file(), reason=f"{HOST_NAME} not built (run `bash custom_ops/build.sh`)"
)

# shape_expr.run's messages -> the C evaluator's fault texts (hfx_expr_fault_text)
FAULTS = {
    "CONST without its value": "CONST without its value",
    "is not defined": "symbol index out of range",
    "unknown instruction": "unknown instruction",
    "stack underflow": "stack underflow",
    "stack overflow": "stack overflow",
    "int64 overflow": "int64 overflow",
    "division by zero": "division by zero",
    "values left": "not exactly one value left",
}
EDGES = [0, 1, -1, 2, -2, 3, 7, 2**31 - 1, -(2**31), 2**32, 2**62, -(2**62), 2**63 - 1, -(2**63)]


@pytest.fixture(scope="module")
def kernel() -> HostKernel:
    return HostKernel(workers=1)


def _value(rng: random.Random) -> int:
    return rng.choice(EDGES) if rng.random() < 0.5 else rng.randint(-1000, 1000)


def _well_formed(rng: random.Random, n_symbols: int) -> list[int]:
    """A random postfix expression that keeps the stack valid (values may still fault)."""
    words: list[int] = []
    depth = 0
    for _ in range(rng.randint(1, 24)):
        if depth >= 2 and rng.random() < 0.5:
            words.append(rng.choice(list(S._BINARY)))
            depth -= 1
        elif rng.random() < 0.5:
            words.append(S.Code.SYM | (rng.randrange(n_symbols) << 8))
            depth += 1
        else:
            words += [S.Code.CONST, _value(rng) & 0xFFFFFFFF]
            depth += 1
    while depth > 1:
        words.append(rng.choice(list(S._BINARY)))
        depth -= 1
    return words


def _soup(rng: random.Random, n_symbols: int) -> list[int]:
    """Any words: unknown codes, bits above 8, symbols out of range, CONST at the end."""
    words = []
    for _ in range(rng.randint(0, 40)):
        op = rng.choice([*range(12), 255])
        arg = rng.choice([0, rng.randrange(n_symbols + 2), rng.getrandbits(24)])
        words.append(op | (arg << 8) if rng.random() < 0.8 else rng.getrandbits(32))
    return words


def _outcome(run: Callable[[list[int], list[int]], int], words: list[int], symbols: list[int]) -> tuple[str, int | str]:
    try:
        return ("value", run(words, symbols))
    except (S.ShapeExprError, HexfuseError) as e:
        text = str(e)
        kind = next((c for p, c in FAULTS.items() if p in text), text)
        return ("fault", kind)


def test_c_evaluator_equals_shape_expr_run(kernel: HostKernel) -> None:
    rng = random.Random(20261130)
    kinds: dict[str, int] = {}
    for i in range(4000):
        n_symbols = rng.randint(0, 5)
        symbols = [_value(rng) for _ in range(n_symbols)]
        words = _well_formed(rng, max(1, n_symbols)) if i % 3 else _soup(rng, n_symbols)
        want = _outcome(S.run, words, symbols)
        got = _outcome(kernel.eval_shape_expr, words, symbols)
        assert got == want, f"words {words} symbols {symbols}: C {got}, Python {want}"
        kind = str(want[1]) if want[0] == "fault" else "value"
        kinds[kind] = kinds.get(kind, 0) + 1
    # the random cases reach values and every fault
    assert set(kinds) >= {"value", *FAULTS.values()}, kinds


# ---- a v2 program written here: task A x[N,4] -> Relu -> s -> Neg -> y; task B softmax xb[2,T] --


def _tensor(role: int, task: int, io: int, dims: list[int]) -> bytes:
    return struct.pack("<BBBBI8III", 1, role, task, len(dims), io, *dims, *[0] * (8 - len(dims)), 0, 0)


def _op(opcode: int, task: int, x: int, y: int, params: dict[int, int]) -> bytes:
    p = [params.get(i, 0) for i in range(32)]
    return struct.pack("<HBBBBH8I2I32i", opcode, 1, task, 1, 1, 0, x, *[0xFFFFFFFF] * 7, y, 0xFFFFFFFF, *p)


def v2_program(n: int = 3, t: int = 6) -> bytes:
    input_, output, scratch = 1, 2, 4
    tensors = b"".join(
        [
            _tensor(input_, 0, 0, [n, 4]),
            _tensor(scratch, 0, 0, [n, 4]),
            _tensor(output, 0, 0, [n, 4]),
            _tensor(input_, 1, 1, [2, t]),
            _tensor(output, 1, 1, [2, t]),
        ]
    )
    ops = _op(Opcode.RELU, 0, 0, 1, {}) + _op(Opcode.NEG, 0, 1, 2, {}) + _op(Opcode.SOFTMAX, 1, 3, 4, {0: -1})
    sym_n, sym_t = (S.Code.SYM | (0 << 8),), (S.Code.SYM | (1 << 8),)
    dims = [(0, 0, sym_n), (1, 0, sym_n), (2, 0, sym_n), (3, 1, sym_t), (4, 1, sym_t)]
    section = S.encode_section(
        [S.Symbol("N", 0, 0), S.Symbol("T", 1, 1)], [S.Patch(S.Target.TENSOR_DIM, *d) for d in dims]
    )
    ops_off = 64 + len(tensors)
    data_off = (ops_off + len(ops) + 63) // 64 * 64
    total = data_off + len(section) + 4
    header = struct.pack(
        "<IHHIIII4HIIIIII2I", 0x50584648, 2, 64, total, 1, 5, 3, 1, 1, 1, 1, 64, ops_off, data_off, 0, len(section), 0,
        0, 0,
    )  # fmt: skip
    body = (header + tensors + ops).ljust(data_off, b"\0") + section
    return body + struct.pack("<I", zlib.crc32(body))


def _softmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_specialize_runs_at_new_shapes(kernel: HostKernel) -> None:
    template = v2_program()
    assert kernel.specialize(template, [(3, 4), (2, 6)]) == template
    rng = np.random.default_rng(0)
    for n, t in [(1, 1), (7, 33), (64, 1000)]:
        program = kernel.specialize(template, [(n, 4), (2, t)])
        assert program == v2_program(n, t)  # the same bytes as a program written at these shapes
        assert kernel.specialize(program, [(5, 4), (2, 9)]) == kernel.specialize(template, [(5, 4), (2, 9)])
        x, xb = rng.standard_normal((n, 4), dtype=np.float32), rng.standard_normal((2, t), dtype=np.float32)
        y, yb = kernel.run(program, [x, xb])
        np.testing.assert_array_equal(y, -np.maximum(x, 0))
        np.testing.assert_allclose(yb, _softmax(xb), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "shapes, message",
    [
        ([(3, 5), (2, 6)], "input 0 axis 1: 5 but the program's static dim is 4"),
        ([(3, 4), (2, 6, 1)], "input 1: rank 3 but the program's input has rank 2"),
        ([(-1, 4), (2, 6)], "input 0 axis 0: -1 is not a dim"),
        ([(3, 4)], "1 input shapes given, the program has 2 inputs"),
    ],
)
def test_specialize_errors_name_the_input(kernel: HostKernel, shapes: list[tuple[int, ...]], message: str) -> None:
    with pytest.raises(HexfuseError, match=message):
        kernel.specialize(v2_program(), shapes)


# ---- the plugin: a FusedHexPair node whose program has a shape section --------------------------


def pair_model(program: bytes, folder: Path) -> Path:
    """One FusedHexPair node (fallback body: Relu, Neg | Softmax) with symbolic input dims."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "M"])
    xb = helper.make_tensor_value_info("xb", TensorProto.FLOAT, [2, "T"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])
    yb = helper.make_tensor_value_info("yb", TensorProto.FLOAT, [2, "T"])
    body = [
        helper.make_node("Relu", ["x"], ["s"]),
        helper.make_node("Neg", ["s"], ["y"]),
        helper.make_node("Softmax", ["xb"], ["yb"], axis=-1),
    ]
    fn = helper.make_function(
        C.DOMAIN, C.OP_TYPE, ["x", "xb"], ["y", "yb"], body, [helper.make_opsetid("", 17)],
        attributes=list(C.NODE_ATTRIBUTES),
    )  # fmt: skip
    fn.overload = "pair0"
    node = helper.make_node(
        C.OP_TYPE, ["x", "xb"], ["y", "yb"], name="hexfuse/pair0", domain=C.DOMAIN, num_inputs_a=1,
        num_outputs_a=1, num_nodes_a=2, share_a=0.5, kind="branches", program=program, program_version=2,
    )  # fmt: skip
    node.overload = "pair0"
    graph = helper.make_graph([node], "g", [x, xb], [y, yb])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(C.DOMAIN, 1)], functions=[fn],
        ir_version=10,
    )  # fmt: skip
    path = folder / "pair.onnx"
    path.write_bytes(model.SerializeToString())
    return path


needs_plugin = pytest.mark.skipif(
    not (LIB_DIR / runtime.PLUGIN_NAME).is_file(), reason="plugin not built (run `bash custom_ops/build.sh`)"
)


def _check(session: ort.InferenceSession, n: int, t: int, rng: np.random.Generator) -> None:
    x, xb = rng.standard_normal((n, 4), dtype=np.float32), rng.standard_normal((2, t), dtype=np.float32)
    y, yb = session.run(None, {"x": x, "xb": xb})
    np.testing.assert_array_equal(y, -np.maximum(x, 0))
    np.testing.assert_allclose(yb, _softmax(xb), rtol=1e-5, atol=1e-6)


@needs_plugin
def test_plugin_runs_every_shape_the_program_specializes_to(tmp_path: Path) -> None:
    session = runtime.InferenceSession(pair_model(v2_program(), tmp_path), backend="host")
    rng = np.random.default_rng(1)
    # the template's own shapes, then more distinct shapes than the cache keeps, then old ones again
    for n, t in [(3, 6), *[(k, 2 * k + 1) for k in range(1, 12)], (2, 5), (1, 3), (3, 6)]:
        _check(session, n, t, rng)


@needs_plugin
def test_plugin_runs_zero_size_inputs(tmp_path: Path) -> None:
    """An empty input (a dim of 0, as ONNX allows) empties the ops it reaches; the other task runs."""
    session = runtime.InferenceSession(pair_model(v2_program(), tmp_path), backend="host")
    rng = np.random.default_rng(5)
    for n, t in [(0, 6), (3, 0), (0, 0), (3, 6)]:
        _check(session, n, t, rng)


@needs_plugin
def test_plugin_runs_tasks_one_after_the_other_beyond_the_arena(tmp_path: Path) -> None:
    """At N = 600,000 task A's scratch (9.6 MB) exceeds the pool's 8 MiB arena: the plugin runs the
    tasks one after the other with a heap arena instead of failing."""
    trace = tmp_path / "trace.json"
    session = runtime.InferenceSession(pair_model(v2_program(), tmp_path), backend="host", trace=trace)
    _check(session, 600_000, 7, np.random.default_rng(2))
    assert json.loads(trace.read_text())["serialized"] == 1


@needs_plugin
def test_plugin_names_the_node_input_and_reason(tmp_path: Path) -> None:
    session = runtime.InferenceSession(pair_model(v2_program(), tmp_path), backend="host")
    feeds = {"x": np.zeros((3, 5), np.float32), "xb": np.zeros((2, 6), np.float32)}
    with pytest.raises(Exception, match=r"node 'hexfuse/pair0'.*input 0 axis 1: 5 but the program's static dim is 4"):
        session.run(None, feeds)
    # the session keeps working
    _check(session, 4, 4, np.random.default_rng(3))


@needs_plugin
def test_hexagon_backend_specializes_on_the_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The hexagon backend (on the loopback stand-in for libcdsprpc.so) loads the specialized bytes."""
    name = "libhexfuse_rpc_loopback.so"  # beside the host library, or (older builds) in the build folder
    build = Path(os.environ.get("HEXFUSE_BUILD_DIR", ROOT / "build" / "custom_ops"))
    loopback = next((d / name for d in (LIB_DIR, build) if (d / name).is_file()), None)
    assert loopback is not None, f"{name} is not built: run `bash custom_ops/build.sh`"
    monkeypatch.setenv(runtime.ENV_CDSPRPC_LIB, str(loopback))
    session = runtime.InferenceSession(pair_model(v2_program(), tmp_path), backend="hexagon")
    rng = np.random.default_rng(4)
    for n, t in [(3, 6), (10, 20), (1, 1), (10, 20), (0, 6), (3, 0)]:
        _check(session, n, t, rng)
