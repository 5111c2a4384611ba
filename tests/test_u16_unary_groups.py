"""u16 QDQ groups of Sigmoid and Tanh: DequantizeLinear -> the f32 op -> QuantizeLinear on the host
kernel against ONNX Runtime's own run of the same group, bit for bit on every u16 code.

ORT has no 16-bit QLinearSigmoid, so it runs such a group in f32 with MLAS's rational polynomials
(MlasComputeLogistic / MlasComputeTanh); the kernel computes them step for step (dsp/src/ops/vmath.h).
With 1 / (1 + exp(-x)) and a tanh of its own fit, 65-122 of the 65537 codes of each case below came
out one step off (0-90 for Tanh), and two steps downstream (dtln_stage2_qdq_u16u8's activation_3)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import runtime
from hexfuse_onnx.lowering.abi import Dtype, Engine, Opcode, QuantParam, Role, Task
from hexfuse_onnx.lowering.program import Op, Program, Tensor

pytestmark = pytest.mark.skipif(
    not (runtime.LIB_DIR / runtime.HOST_NAME).is_file(),
    reason=f"{runtime.LIB_DIR / runtime.HOST_NAME} not built: run `bash custom_ops/build.sh`",
)

CODES = np.arange(65536, dtype=np.uint16)
# (input scale, input zero point, output scale, output zero point): dtln_stage2's Sigmoid groups'
# kind, a wide input that reaches the +-18 / +-9 clamps, and an output zero point mid-range (Tanh)
GROUPS = [
    (3.1e-4, 32768, 1.0 / 65535, 0),
    (6.5e-4, 20000, 1.53e-5, 0),
    (1.2e-5, 65535, 1.0 / 65535, 0),
    (1.0e-4, 0, 3.05e-5, 32768),
]
OPS = {"Sigmoid": Opcode.SIGMOID, "Tanh": Opcode.TANH}


def _ort_group(op: str, x: np.ndarray, group: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The group on ORT: the f32 op's output and the QuantizeLinear's."""
    si, zi, so, zo = group
    inits = [
        numpy_helper.from_array(np.array(si, np.float32), "si"),
        numpy_helper.from_array(np.array(zi, np.uint16), "zi"),
        numpy_helper.from_array(np.array(so, np.float32), "so"),
        numpy_helper.from_array(np.array(zo, np.uint16), "zo"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "si", "zi"], ["d"]),
        helper.make_node(op, ["d"], ["f"]),
        helper.make_node("QuantizeLinear", ["f", "so", "zo"], ["q"]),
    ]
    g = helper.make_graph(
        nodes,
        "group",
        [helper.make_tensor_value_info("x", TensorProto.UINT16, list(x.shape))],
        [
            helper.make_tensor_value_info("f", TensorProto.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("q", TensorProto.UINT16, list(x.shape)),
        ],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    f, q = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return f, q


def _kernel_group(op: str, x: np.ndarray, group: tuple) -> list[np.ndarray]:
    """The same group as a v2 program: DEQUANTIZE_LINEAR, the op, QUANTIZE_LINEAR."""
    si, zi, so, zo = group
    p = Program()
    shape = list(x.shape)
    ids = [p.add(Tensor(dt, Role.INPUT, Task.A, s, io=i)) for i, (dt, s) in enumerate(
        [(Dtype.U16, shape), (Dtype.F32, []), (Dtype.U16, []), (Dtype.F32, []), (Dtype.U16, [])]
    )]  # fmt: skip
    d = p.add(Tensor(Dtype.F32, Role.SCRATCH, Task.A, shape))
    f = p.add(Tensor(Dtype.F32, Role.OUTPUT, Task.A, shape, io=0))
    q = p.add(Tensor(Dtype.U16, Role.OUTPUT, Task.A, shape, io=1))
    param = [0] * 32
    param[QuantParam.AXIS] = 0
    p.ops.append(Op(Opcode.DEQUANTIZE_LINEAR, Engine.VECTOR, Task.A, ids[:3], d, list(param)))
    p.ops.append(Op(OPS[op], Engine.VECTOR, Task.A, [d], f, [0] * 32))
    p.ops.append(Op(Opcode.QUANTIZE_LINEAR, Engine.VECTOR, Task.A, [f, ids[3], ids[4]], q, list(param)))
    p.n_io = [5, 0, 2, 0]
    scalars = [np.array(si, np.float32), np.array(zi, np.uint16), np.array(so, np.float32), np.array(zo, np.uint16)]
    return runtime.HostKernel(workers=1).run(p.encode(), [x, *scalars])


@pytest.mark.parametrize("group", GROUPS, ids=[f"s{g[0]:g}z{g[1]}" for g in GROUPS])
@pytest.mark.parametrize("op", sorted(OPS))
def test_u16_group_equals_onnxruntime_on_every_code(op: str, group: tuple) -> None:
    """Odd length (8 * 8192 + 1 codes: the FMA3 kernel's masked tail), both clamps, code 0 and 65535."""
    x = np.concatenate([CODES, CODES[-1:]])
    f_ref, q_ref = _ort_group(op, x, group)
    f, q = _kernel_group(op, x, group)
    assert np.array_equal(f.view(np.uint32), f_ref.view(np.uint32)), np.flatnonzero(f != f_ref)[:5]
    assert q.dtype == np.uint16 and np.array_equal(q, q_ref)
