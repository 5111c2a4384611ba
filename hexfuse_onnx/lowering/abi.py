"""The numbers of the task-program ABI, as dsp/include/hexfuse/ops.h defines them.

`C_PREFIX[enum]` plus a member's name is its C name (`Opcode.GEMM` is `HFX_OP_GEMM`);
tests/test_lower.py checks every member against the header. Parameter ids are one enum per op
family, since families reuse the same parameter slots.
"""

from __future__ import annotations

from enum import IntEnum


class Layout(IntEnum):
    """Sizes and limits of the program format."""

    PROGRAM_MAGIC = 0x50584648
    PROGRAM_VERSION = 1
    PROGRAM_FLAG_CRC32 = 1
    PROGRAM_CRC_BYTES = 4
    HEADER_BYTES = 48
    TENSOR_RECORD_BYTES = 48
    OP_RECORD_BYTES = 176
    MAX_RANK = 8
    MAX_OP_INPUTS = 8
    MAX_OP_OUTPUTS = 2
    OP_PARAMS = 32
    MAX_TENSORS = 65535
    MAX_OPS = 4096
    MAX_IO = 4096
    MAX_TENSOR_BYTES = 0x7FFFFFFF
    CONST_ALIGN = 64
    NO_TENSOR = 0xFFFFFFFF


class Task(IntEnum):
    A = 0
    B = 1


class Engine(IntEnum):
    """The kernel worker an op runs on."""

    MATRIX = 0
    VECTOR = 1
    COPY = 2


class Dtype(IntEnum):
    F32 = 1
    F16 = 2
    I32 = 3
    I64 = 4
    I8 = 5
    U8 = 6
    U16 = 7  # format v2 programs only
    I16 = 8  # format v2 programs only
    BOOL = 9  # format v2 programs only: one byte, 0 or 1


class Role(IntEnum):
    INPUT = 1
    OUTPUT = 2
    CONSTANT = 3
    SCRATCH = 4


class Opcode(IntEnum):
    GEMM = 1
    CONV2D = 2
    QMATMUL = 3  # QDQ MatMul in integers: dsp/ref/ref_qmatmul.h
    QCONV2D = 4  # QDQ Conv in integers: the same, CONV2D's params
    IMATMUL = 5  # ONNX MatMulInteger: QMATMUL's int32 accumulators, no requantisation
    ICONV2D = 6  # ONNX ConvInteger: QCONV2D's int32 accumulators, no requantisation
    MATMUL_NBITS = 7  # com.microsoft MatMulNBits: 4/8-bit blockwise weights, f32 A and Y
    ADD = 10
    SUB = 11
    MUL = 12
    DIV = 13  # f32, i32 or i64: the quotient or a remainder (DivParam.MODE)
    MAX = 14  # a NaN of either input propagates
    MIN = 15
    LOG = 16
    REPLACE_NAN = 17  # Where(IsNaN(x), c, x): x, or c where x is NaN
    ERF = 18
    SQRT = 19
    RELU = 20
    SIGMOID = 21
    TANH = 22
    GELU = 23
    SILU = 24
    EXP = 25
    HARDSIGMOID = 26
    HARDSWISH = 27
    CLIP = 28
    NEG = 29
    SOFTMAX = 30
    LAYERNORM = 31
    RMSNORM = 32
    FLOOR = 33  # unary
    CAST = 34  # f32 -> i32 as ONNX Runtime on x86 (toward zero, NaN/inf/out of range INT32_MIN); f16 <-> f32
    ABS = 35  # unary
    SIN = 36  # unary, ONNX Runtime's bits (Eigen's packet sin, the C library's over the last numel % 4)
    COS = 37  # unary, the same
    COMPARE = 38  # X, Y of f32, i32, i64 or bool -> bool (CompareParam.MODE); Not = EQUAL to false
    INSTANCENORM = 39  # X [N, C, ...], scale [C], bias [C]: over the axes [2, rank), ONNX Runtime's sums
    REDUCE_MEAN = 40
    REDUCE_SUM = 41
    REDUCE_MAX = 42
    REDUCE_MIN = 43
    WHERE = 44  # cond bool, X, Y of one dtype (any), numpy broadcast of the three
    ARGMAX = 45  # X f32, i32 or i64 -> i64 index along one axis (ArgParam), as ORT's CPU kernel
    ARGMIN = 46
    LOG_SOFTMAX = 47  # (x - max) - log(sum exp(x - max)) along one axis (Param.AXIS), as ORT's MLAS
    SOFTPLUS = 48  # unary, ORT's formula: x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))
    ROUND = 49  # unary, the nearest integer, ties to even
    TRANSPOSE = 50
    CONCAT = 51
    SLICE = 52
    COPY = 53
    RESIZE = 54
    GATHER_ROWS = 55  # ONNX Gather on axis 0 with run-time int32/int64 indices
    EXPAND = 56  # X (any dtype) broadcast to the output's dims: a fill from one element (ConstantOfShape, Pad's slabs)
    RANGE = 57  # start, delta (one element each, Y's f32/i32/i64) -> Y [n], n Y's: ONNX Range as a running sum
    TRILU = 58  # X (any dtype, rank >= 2) with the elements outside a triangle of its last two axes zero
    MAXPOOL = 60
    AVGPOOL = 61
    GLOBAL_AVGPOOL = 62
    GLOBAL_MAXPOOL = 63  # each channel's max from -FLT_MAX as ORT's MLAS, its NaNs too (dsp/src/ops/pool.c)
    QUANTIZE_LINEAR = 70
    DEQUANTIZE_LINEAR = 71
    DYNAMIC_QPARAMS = 72  # DynamicQuantizeLinear's scale and zero point (two outputs)
    QADD = 80  # QDQ Add in integers: dsp/ref/ref_qeltwise.h
    QMUL = 81  # QDQ Mul in integers
    QLUT = 82  # a QDQ unary group as a 256-entry table
    QGLOBAL_AVGPOOL = 83  # QDQ GlobalAveragePool in integers: dsp/ref/ref_qpool.h
    QMAXPOOL = 84  # QDQ MaxPool in integers: POOL params, then QPoolParam
    QCONCAT = 85  # QDQ Concat: each input through its requantisation table
    QAVGPOOL = 86  # QDQ AveragePool (2-D): ORT's QLinearAveragePool, POOL params then QPoolParam
    QRESIZE = 87  # QDQ nearest Resize: RESIZE params; each source byte through a requantisation table
    QSOFTMAX = 88  # QDQ Softmax (8-bit): ORT's QLinearSoftmax with its exp table (dsp/ref/ref_qsoftmax.h)


class Param(IntEnum):
    """Parameter slots shared by several ops."""

    AXIS = 0  # SOFTMAX, LAYERNORM, RMSNORM, CONCAT; INSTANCENORM: 2
    EPSILON = 1  # LAYERNORM, RMSNORM, INSTANCENORM (f32 bits)
    NORM_SKIP = 2  # RMSNORM: 1 for a SkipSimplifiedLayerNormalization's norm (ORT's skip kernel's order)
    PERM = 0  # TRANSPOSE: params[0..rank)


class GemmParam(IntEnum):
    TRANS_A = 0
    TRANS_B = 1
    ALPHA = 2
    BETA = 3
    NBITS = 4  # 1: ORT runs it as MatMulNBits (`qmatmul.ort_nbits`)


class NbitsParam(IntEnum):
    BITS = 0  # 4 or 8
    BLOCK = 1  # block size along K: a power of two >= 16
    INT8 = 2  # 1: A quantized to int8 per block (ORT's accuracy_level 4), 0: f32


class ConvParam(IntEnum):
    PAD_TOP = 0
    PAD_LEFT = 1
    PAD_BOTTOM = 2
    PAD_RIGHT = 3
    STRIDE_H = 4
    STRIDE_W = 5
    DILATION_H = 6
    DILATION_W = 7
    GROUP = 8
    TRANSPOSED = 9  # CONV2D: 1, a ConvTranspose's W^T X whose W ORT does not pre-pack (MLAS: A transposed)


class PoolParam(IntEnum):
    PAD_TOP = 0
    PAD_LEFT = 1
    PAD_BOTTOM = 2
    PAD_RIGHT = 3
    STRIDE_H = 4
    STRIDE_W = 5
    DILATION_H = 6
    DILATION_W = 7
    KERNEL_H = 8
    KERNEL_W = 9
    CEIL_MODE = 10
    COUNT_INCLUDE_PAD = 11


class ReduceParam(IntEnum):
    AXES_MASK = 0
    KEEPDIMS = 1
    ORT_PERM = 2  # REDUCE_SUM / REDUCE_MEAN: x = Transpose(T, perm), perm[k] in bits 4k..4k+3: summed as ORT sums T


class ArgParam(IntEnum):
    AXIS = 0  # in [-rank, rank)
    KEEPDIMS = 1  # 0 or 1
    SELECT_LAST = 2  # ONNX select_last_index: 0 or 1


class SliceParam(IntEnum):
    STARTS = 0  # params[0..8)
    ENDS = 8  # params[8..16)
    STEPS = 16  # params[16..24)


class HardSigmoidParam(IntEnum):
    ALPHA = 0
    BETA = 1


class TriluParam(IntEnum):
    K = 0  # the diagonal: 0 the main one, > 0 above it
    UPPER = 1  # 1: the upper triangle kept (j - i >= k), 0: the lower one (j - i <= k)


class ClipParam(IntEnum):
    MIN = 0  # f32 bits
    MAX = 1  # f32 bits


class ReplaceNanParam(IntEnum):
    VALUE = 0  # f32 bits


class CompareParam(IntEnum):
    MODE = 0  # CompareMode


class CompareMode(IntEnum):
    EQUAL = 0
    LESS = 1
    GREATER = 2
    LESS_EQUAL = 3
    GREATER_EQUAL = 4
    NOT_EQUAL = 5  # Xor of bools; IsNaN as x != x; Cast to bool as x != 0


class DivParam(IntEnum):
    MODE = 0  # DivMode


class DivMode(IntEnum):
    QUOTIENT = 0  # f32 x / y; i32, i64 truncated toward zero
    MOD = 1  # i32, i64: the divisor's sign (ONNX Mod fmod=0)
    FMOD = 2  # f32, i32: C fmod, the dividend's sign (ONNX Mod fmod=1)


class QuantParam(IntEnum):
    AXIS = 0  # per axis: the axis; per tensor: 0


class QBinaryParam(IntEnum):
    """QADD, QMUL (ratios as f32 bits)"""

    RATIO_A = 0
    RATIO_B = 1
    ZERO_A = 2
    ZERO_B = 3
    ZERO_Y = 4
    LO = 5
    HI = 6


class QGapParam(IntEnum):
    """QGLOBAL_AVGPOOL (the scale as f32 bits)"""

    SCALE = 0
    ZERO_X = 1
    ZERO_Y = 2


class QPoolParam(IntEnum):
    """QMAXPOOL and QAVGPOOL, after PoolParam's slots (scales as f32 bits)"""

    SCALE_X = 12
    ZERO_X = 13
    SCALE_Y = 14
    ZERO_Y = 15


class QSoftmaxParam(IntEnum):
    """QSOFTMAX, after Param.AXIS (the scale as f32 bits)"""

    SCALE = 1  # floor(1 / y_scale)
    ZERO_Y = 2


class ResizeParam(IntEnum):
    MODE = 0
    COORD = 1
    NEAREST_MODE = 2
    SCALE_H = 3  # f32 bits; 0: f32(out) / f32(in) of the dims the kernel runs at (a Resize by `sizes`)
    SCALE_W = 4  # the same along W


class ResizeMode(IntEnum):
    NEAREST = 0
    LINEAR = 1


class ResizeCoord(IntEnum):
    HALF_PIXEL = 0
    ASYMMETRIC = 1
    ALIGN_CORNERS = 2
    PYTORCH_HALF_PIXEL = 3
    HALF_PIXEL_SYMMETRIC = 4


class ResizeNearest(IntEnum):
    ROUND_PREFER_FLOOR = 0
    ROUND_PREFER_CEIL = 1
    FLOOR = 2
    CEIL = 3


C_PREFIX: dict[type[IntEnum], str] = {
    Layout: "HFX_",
    Task: "HFX_TASK_",
    Engine: "HFX_ENGINE_",
    Dtype: "HFX_DTYPE_",
    Role: "HFX_ROLE_",
    Opcode: "HFX_OP_",
    Param: "HFX_P_",
    GemmParam: "HFX_P_GEMM_",
    ConvParam: "HFX_P_CONV_",
    NbitsParam: "HFX_P_NBITS_",
    PoolParam: "HFX_P_POOL_",
    ReduceParam: "HFX_P_REDUCE_",
    ArgParam: "HFX_P_ARG_",
    SliceParam: "HFX_P_SLICE_",
    HardSigmoidParam: "HFX_P_HARDSIGMOID_",
    TriluParam: "HFX_P_TRILU_",
    ClipParam: "HFX_P_CLIP_",
    ReplaceNanParam: "HFX_P_REPLACE_NAN_",
    CompareParam: "HFX_P_COMPARE_",
    CompareMode: "HFX_COMPARE_",
    DivParam: "HFX_P_DIV_",
    DivMode: "HFX_DIV_",
    QuantParam: "HFX_P_QUANT_",
    QBinaryParam: "HFX_P_QBIN_",
    QGapParam: "HFX_P_QGAP_",
    QPoolParam: "HFX_P_QPOOL_",
    ResizeParam: "HFX_P_RESIZE_",
    ResizeMode: "HFX_RESIZE_",
    ResizeCoord: "HFX_RESIZE_COORD_",
    ResizeNearest: "HFX_RESIZE_NEAREST_",
}
