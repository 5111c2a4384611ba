/*
 * hexfuse/ops.h - numbers shared by the host kernel, the DSP kernel and the
 * Python lowering (which mirrors every value here). Changing a value is a
 * task-program format change: bump HFX_PROGRAM_VERSION.
 *
 * The byte layout of a task program is documented in dsp/README.md.
 */
#ifndef HEXFUSE_OPS_H
#define HEXFUSE_OPS_H

#include <stdint.h>

/* ---- task program container ---------------------------------------------- */

#define HFX_PROGRAM_MAGIC 0x50584648u /* bytes 'H' 'F' 'X' 'P' read as LE u32 */
#define HFX_PROGRAM_VERSION 1u    /* the v1 layout (48-byte header), still what the lowering writes */
#define HFX_PROGRAM_VERSION_V2 2u /* 64-byte header + shape and quantization sections */
#define HFX_PROGRAM_VERSION_MAX 2u /* the newest version this build reads */
/* Header flag: the program ends with a CRC-32 (IEEE 802.3, the zlib one) of every byte before
 * it, and total_bytes counts those 4 bytes. The lowering always sets it, so a corrupted
 * attribute is refused instead of running with, say, a flipped alpha. */
#define HFX_PROGRAM_FLAG_CRC32 1u
#define HFX_PROGRAM_CRC_BYTES 4u

#define HFX_HEADER_BYTES 48u    /* v1 */
#define HFX_HEADER_BYTES_V2 64u /* v2 */
#define HFX_TENSOR_RECORD_BYTES 48u
#define HFX_OP_RECORD_BYTES 176u

/* Byte offsets of the fields within the header (all little-endian) */
#define HFX_HDR_MAGIC 0         /* u32 */
#define HFX_HDR_VERSION 4       /* u16 */
#define HFX_HDR_HEADER_BYTES 6  /* u16 */
#define HFX_HDR_TOTAL_BYTES 8   /* u32, CRC included */
#define HFX_HDR_FLAGS 12        /* u32 */
#define HFX_HDR_N_TENSORS 16    /* u32 */
#define HFX_HDR_N_OPS 20        /* u32 */
#define HFX_HDR_N_IO 24         /* u16[4]: inputs A, inputs B, outputs A, outputs B */
#define HFX_HDR_TENSORS_OFFSET 32 /* u32 */
#define HFX_HDR_OPS_OFFSET 36   /* u32 */
#define HFX_HDR_DATA_OFFSET 40  /* u32 */
#define HFX_HDR_DATA_BYTES 44   /* u32 (v2: multiple of 4) */
/* v2 only */
#define HFX_HDR_SHAPES_BYTES 48 /* u32, multiple of 4; 0: no shape section */
#define HFX_HDR_QUANT_BYTES 52  /* u32, multiple of 4; 0: no quantization section */
#define HFX_HDR_RESERVED 56     /* u32[2], 0 */

/* v2 layout: [header][tensors][ops][pad to 64][data][shape section][quant section][CRC-32] */

/* ---- v2 shape section (offsets from the section start) ------------------------
 *   u32 n_symbols; n_symbols x {u32 io_index, u32 axis}; u32 n_patches; n_patches x patch */
#define HFX_SHP_N_SYMBOLS 0 /* u32, 1 .. HFX_MAX_SYMBOLS */
#define HFX_SHP_SYMBOLS 4   /* symbol records */
#define HFX_SYM_RECORD_BYTES 8u
#define HFX_SYM_IO_INDEX 0 /* u32: a node input */
#define HFX_SYM_AXIS 4     /* u32: < that input's rank */
/* after the symbols: u32 n_patches (0 .. HFX_MAX_PATCHES), then the patch records */
#define HFX_PATCH_TARGET 0   /* u8: enum hfx_patch_target */
#define HFX_PATCH_RESERVED 1 /* u8, 0 */
#define HFX_PATCH_N_WORDS 2  /* u16: 1 .. HFX_MAX_EXPR_WORDS */
#define HFX_PATCH_ID 4       /* u32: tensor id / op index */
#define HFX_PATCH_SLOT 8     /* u32: axis / param slot */
#define HFX_PATCH_CODE 12    /* u32[n_words] */
#define HFX_PATCH_HEAD_BYTES 12u

#define HFX_MAX_SYMBOLS 64u
#define HFX_MAX_PATCHES 65535u
#define HFX_MAX_EXPR_WORDS 64u
#define HFX_EXPR_STACK 16u

enum hfx_patch_target { HFX_PATCH_TENSOR_DIM = 1, HFX_PATCH_OP_PARAM = 2 };

/* Shape expression instructions: the low 8 bits of a word (postfix over int64). */
enum hfx_expr_code {
    HFX_EXPR_CONST = 1,    /* push the next word (i32, sign-extended) */
    HFX_EXPR_SYM = 2,      /* push symbol word >> 8 */
    HFX_EXPR_ADD = 3,      /* a b -> a + b */
    HFX_EXPR_SUB = 4,      /* a b -> a - b */
    HFX_EXPR_MUL = 5,      /* a b -> a * b */
    HFX_EXPR_FLOORDIV = 6, /* a b -> floor(a / b) */
    HFX_EXPR_CEILDIV = 7,  /* a b -> ceil(a / b) */
    HFX_EXPR_MOD = 8,      /* a b -> a - b floor(a / b) */
    HFX_EXPR_MIN = 9,
    HFX_EXPR_MAX = 10
};

/* ---- v2 quantization section ---------------------------------------------------
 *   u32 n_entries; n_entries x {u32 tensor, u32 scale_tensor, u32 zero_point_tensor, i32 axis} */
#define HFX_QNT_N_ENTRIES 0 /* u32 */
#define HFX_QNT_ENTRIES 4
#define HFX_QREC_BYTES 16u
#define HFX_QREC_TENSOR 0     /* u32: an integer tensor, quantized at most once */
#define HFX_QREC_SCALE 4      /* u32: constant f32, numel 1 (axis -1) or dims[axis] */
#define HFX_QREC_ZERO_POINT 8 /* u32: HFX_NO_TENSOR (zero) or a constant of the tensor's dtype, scale's numel */
#define HFX_QREC_AXIS 12      /* i32: -1 per tensor, else the channel axis < rank */

/* ... within a tensor record */
#define HFX_TREC_DTYPE 0      /* u8 */
#define HFX_TREC_ROLE 1       /* u8 */
#define HFX_TREC_TASK 2       /* u8 */
#define HFX_TREC_RANK 3       /* u8 */
#define HFX_TREC_IO_INDEX 4   /* u32 */
#define HFX_TREC_DIMS 8       /* u32[HFX_MAX_RANK] */
#define HFX_TREC_DATA_OFFSET 40 /* u32, constants: from the data section start */
#define HFX_TREC_DATA_BYTES 44  /* u32 */

/* ... within an op record */
#define HFX_OREC_OPCODE 0   /* u16 */
#define HFX_OREC_ENGINE 2   /* u8 */
#define HFX_OREC_TASK 3     /* u8 */
#define HFX_OREC_N_IN 4     /* u8 */
#define HFX_OREC_N_OUT 5    /* u8 */
#define HFX_OREC_RESERVED 6 /* u16, 0 */
#define HFX_OREC_INPUTS 8   /* u32[HFX_MAX_OP_INPUTS] tensor ids */
#define HFX_OREC_OUTPUTS 40 /* u32[HFX_MAX_OP_OUTPUTS] tensor ids */
#define HFX_OREC_PARAMS 48  /* i32[HFX_OP_PARAMS] */

#define HFX_MAX_RANK 8u
#define HFX_MAX_OP_INPUTS 8u
#define HFX_MAX_OP_OUTPUTS 2u
#define HFX_OP_PARAMS 32u

#define HFX_MAX_TENSORS 65535u
#define HFX_MAX_OPS 4096u
#define HFX_MAX_IO 4096u                 /* per task and direction */
#define HFX_MAX_TENSOR_BYTES 0x7fffffffu /* < 2 GiB, fits 32-bit size_t */
#define HFX_CONST_ALIGN 64u              /* constants' file offsets */
#define HFX_ARENA_ALIGN 128u             /* scratch offsets in the arena */
#define HFX_NO_TENSOR 0xffffffffu        /* unused op input/output slot */

/* ---- enumerations ---------------------------------------------------------- */

enum hfx_task { HFX_TASK_A = 0, HFX_TASK_B = 1, HFX_NUM_TASKS = 2 };

/* Engine classes. A matrix worker owns the matrix engine (HMX on Hexagon,
 * BLAS on the host). Vector workers run VECTOR and COPY items. An op's
 * allowed classes are a mask of HFX_ENGINE_BIT()s in ops.def. */
enum hfx_engine {
    HFX_ENGINE_MATRIX = 0,
    HFX_ENGINE_VECTOR = 1,
    HFX_ENGINE_COPY = 2, /* DMA / memory movement */
    HFX_NUM_ENGINES = 3
};
#define HFX_ENGINE_BIT(e) (1u << HFX_ENGINE_##e)

enum hfx_dtype {
    HFX_DTYPE_F32 = 1,
    HFX_DTYPE_F16 = 2,
    HFX_DTYPE_I32 = 3,
    HFX_DTYPE_I64 = 4,
    HFX_DTYPE_I8 = 5,
    HFX_DTYPE_U8 = 6,
    HFX_DTYPE_U16 = 7, /* v2 programs only */
    HFX_DTYPE_I16 = 8, /* v2 programs only */
    HFX_DTYPE_BOOL = 9 /* v2 programs only: one byte, 0 or 1 (ONNX bool) */
    /* Every op takes and gives F32 only, except the ops.def HFX_OP_TYPED rows (the quantization
     * ops, CAST, ADD/SUB/MUL/DIV/MAX/MIN and COPY on integers, CONCAT, COMPARE, MAX/MIN of bools,
     * ARGMAX/ARGMIN), whose validation checks their own dtypes; other dtypes are HFX_ERR_DTYPE. */
};

enum hfx_role {
    HFX_ROLE_INPUT = 1,    /* io_index = index among the node's inputs */
    HFX_ROLE_OUTPUT = 2,   /* io_index = index among the node's outputs */
    HFX_ROLE_CONSTANT = 3, /* bytes inline in the data section */
    HFX_ROLE_SCRATCH = 4   /* intermediate, placed in the on-chip arena */
};

/* Opcodes: the numbers of the program format. Each has exactly one row in
 * hexfuse/ops.def (its arity, engines and family functions); the compiler
 * checks that (a generated switch without default, -Wswitch-enum). */
enum hfx_opcode {
    /* matrix */
    HFX_OP_GEMM = 1,   /* MatMul and Gemm: in A, B [, C]; batched, numpy broadcast of batch dims */
    HFX_OP_CONV2D = 2, /* in X[N,C,H,W], W[M,C/g,kh,kw] [, B[M]] */
    HFX_OP_QMATMUL = 3, /* QDQ MatMul, integer: in A[..., K], B[K, N], zp_a, zp_b, scale, zp_y [, bias i32 [N]] */
    HFX_OP_QCONV2D = 4, /* QDQ Conv, integer: in X[N,C,H,W], W[M,C/g,kh,kw], zp_x, zp_w, scale, zp_y [, bias i32 [M]] */
    HFX_OP_IMATMUL = 5, /* ONNX MatMulInteger: in A u8/i8 [..., K], B u8/i8 [K, N], zp_a, zp_b -> Y i32 [..., N] */
    HFX_OP_ICONV2D = 6, /* ONNX ConvInteger: in X u8/i8 [N,C,H,W], W u8/i8 [M,C/g,kh,kw], zp_x, zp_w -> Y i32; CONV2D's params */
    HFX_OP_MATMUL_NBITS = 7, /* com.microsoft MatMulNBits: in A f32 [..., K], B u8 [N, ...] (N * blocks * block_size *
                                bits / 8 bytes), scales f32 (N * blocks), zero points u8 [N, blocks] [, bias f32 [N]]
                                -> Y f32 [..., N] */
    /* elementwise binary, numpy broadcasting; ADD, SUB, MUL also on i32 or i64 (all three tensors one
     * type), wrapping as ONNX Runtime's integer Add/Sub/Mul */
    HFX_OP_ADD = 10,
    HFX_OP_SUB = 11,
    HFX_OP_MUL = 12,
    HFX_OP_DIV = 13, /* f32, i32 or i64 (all three tensors one type): the quotient or a remainder, param
                      * HFX_P_DIV_MODE (ONNX Div and Mod) */
    HFX_OP_MAX = 14, /* a NaN of either input propagates (Max of two tensors, Clip by a computed bound); MAX, MIN
                      * also of i32, i64 (an integer Clip) and bool (Or, And) */
    HFX_OP_MIN = 15,
    HFX_OP_LOG = 16,         /* unary: natural logarithm (x < 0 or NaN: NaN, +-0: -inf) */
    HFX_OP_REPLACE_NAN = 17, /* unary: x, or the param value where x is NaN (ONNX Where(IsNaN(x), c, x)) */
    HFX_OP_ERF = 18,  /* unary: erf(x), the Gauss error function; numbered here because 20..29 is full */
    HFX_OP_SQRT = 19, /* unary, numbered here because 20..29 is full */
    /* unary activations */
    HFX_OP_RELU = 20,
    HFX_OP_SIGMOID = 21,
    HFX_OP_TANH = 22,
    HFX_OP_GELU = 23, /* erf form: 0.5 x (1 + erf(x / sqrt 2)) */
    HFX_OP_SILU = 24, /* x * sigmoid(x) */
    HFX_OP_EXP = 25,
    HFX_OP_HARDSIGMOID = 26, /* max(0, min(1, alpha x + beta)) */
    HFX_OP_HARDSWISH = 27,   /* x max(0, min(1, x / 6 + 1 / 2)) */
    HFX_OP_CLIP = 28,        /* min(max(x, lo), hi): ONNX Clip, ReLU6 */
    HFX_OP_NEG = 29,         /* -x */
    /* row-wise */
    HFX_OP_SOFTMAX = 30,   /* in X; any axis */
    HFX_OP_LAYERNORM = 31, /* in X, scale [, bias]; normalizes axes [axis, rank) */
    HFX_OP_RMSNORM = 32,   /* in X, scale; normalizes axes [axis, rank) */
    HFX_OP_FLOOR = 33,     /* unary: floor(x) (NaN, +-inf, +-0 as they are); numbered here because 10..29 is full */
    HFX_OP_CAST = 34,      /* X f32 -> Y i32: ONNX Cast as ONNX Runtime on x86 (toward zero; NaN, +-inf and x outside
                              [-2^31, 2^31) give INT32_MIN); X f16 -> Y f32 (exact) and X f32 -> Y f16 (to nearest,
                              ties to even): a float16 network's tensors at a pair's boundary; dsp/ref/ref_quant.h;
                              X i64 -> Y f32 (to nearest, ties to even, as C converts) */
    HFX_OP_ABS = 35,       /* unary: |x| (the sign bit cleared: NaN stays NaN, -0 gives +0) */
    HFX_OP_SIN = 36,       /* unary: sin(x) as ONNX Runtime's CPU kernel (activation.c: Eigen's psin_float) */
    HFX_OP_COS = 37,       /* unary: cos(x), the same */
    HFX_OP_COMPARE = 38,   /* in X, Y (one dtype: f32, i32, i64 or bool), numpy broadcast -> bool: ONNX Equal, Less,
                            * Greater, LessOrEqual, GreaterOrEqual, and Xor, IsNaN as x != x (param HFX_P_COMPARE_MODE;
                            * a NaN compares false but for NOT_EQUAL). Not is EQUAL to a false; And and Or are MIN and
                            * MAX of bools */
    HFX_OP_INSTANCENORM = 39, /* in X [N, C, ...] (rank >= 3), scale [C], bias [C]: ONNX InstanceNormalization
                               * over the axes [2, rank), as ONNX Runtime's CPU kernel sums (norm.c) */
    /* reductions */
    HFX_OP_REDUCE_MEAN = 40,
    HFX_OP_REDUCE_SUM = 41,
    HFX_OP_REDUCE_MAX = 42, /* a NaN propagates; over no element: -inf */
    HFX_OP_REDUCE_MIN = 43, /* a NaN propagates; over no element: +inf */
    HFX_OP_WHERE = 44,      /* in cond bool, X, Y of one dtype (any), numpy broadcast of the three -> X's dtype: ONNX
                             * Where (a bool byte != 0 reads true; a float X of -0 picked gives +0, as ORT's);
                             * numbered here because 10..39 is full */
    HFX_OP_ARGMAX = 45,     /* in X f32, i32 or i64 -> Y i64: the index of the largest element along one axis
                             * (params HFX_P_ARG_*), as ONNX Runtime's CPU kernel: the row's first element, then each
                             * one above it (>, or >= with select_last_index); so of ties the first (the last), a NaN
                             * at index 0 gives 0 and a NaN elsewhere is passed over */
    HFX_OP_ARGMIN = 46,     /* the same for the smallest (<, or <=) */
    HFX_OP_LOG_SOFTMAX = 47, /* in X; any axis (SOFTMAX's param): (x - max) - log(sum exp(x - max)), as ONNX Runtime's
                              * MlasComputeSoftmax; numbered here because 30..39 is full */
    HFX_OP_SOFTPLUS = 48, /* unary: log(1 + exp(x)) as ONNX Runtime writes it, x > 0: x + log1p(exp(-x)), else
                           * log1p(exp(x)); numbered here because 20..29 is full */
    HFX_OP_ROUND = 49,    /* unary: the nearest integer, ties to even (ONNX Round; NaN, +-inf, +-0 as they are) */
    /* memory */
    HFX_OP_TRANSPOSE = 50,
    HFX_OP_CONCAT = 51, /* 1..8 inputs of one dtype (any: a mask's bools), the output's */
    HFX_OP_SLICE = 52,
    HFX_OP_COPY = 53, /* identity / reshape: same element count, any shape; any dtype (X's and Y's equal) */
    HFX_OP_RESIZE = 54, /* nearest / linear resize of the last two axes (ONNX Resize) */
    HFX_OP_GATHER_ROWS = 55, /* in X [R, ...] (any dtype, Y's), indices i32/i64 (or f32 integers): ONNX Gather
                                axis 0; an index that is not an integer in [-R, R) gives a row of NaN (f32 X)
                                or of zeros (integer X), where ONNX Runtime fails the run */
    HFX_OP_EXPAND = 56, /* in X (any dtype, Y's) of rank <= Y's, each axis Y's or 1 (numpy, aligned at the end): X
                           broadcast to Y's dims, ONNX Expand; one element filling Y: ConstantOfShape, a Pad's
                           constant slabs (Y's dims may follow the input shapes, a constant's cannot) */
    HFX_OP_RANGE = 57,  /* in start, delta (one element each, Y's dtype: f32, i32 or i64) -> Y [n]: ONNX Range,
                           y[i] the running sum start + delta + ... as ONNX Runtime adds it; n is Y's (the shape section
                           makes it follow the input shapes), not read from a limit; numbered here: a generator */
    HFX_OP_TRILU = 58,  /* in X (any dtype, Y's; rank >= 2) -> Y, X's shape: ONNX Trilu, X with the elements of its last two
                           axes outside the upper triangle (j - i < k) or the lower one (j - i > k) zero (params
                           HFX_P_TRILU_*); a causal mask's -inf above the diagonal */
    /* pooling, NCHW */
    HFX_OP_MAXPOOL = 60,        /* 2-D, in X[N,C,H,W] */
    HFX_OP_AVGPOOL = 61,        /* 2-D, in X[N,C,H,W] */
    HFX_OP_GLOBAL_AVGPOOL = 62, /* in X[N,C,spatial...] (rank >= 3) -> [N,C,1,...] */
    HFX_OP_GLOBAL_MAXPOOL = 63, /* the same, each channel's max from -FLT_MAX as ORT's MLAS (pool.c: its NaNs) */
    /* quantization (ONNX QuantizeLinear / DequantizeLinear), per tensor or per axis */
    HFX_OP_QUANTIZE_LINEAR = 70,  /* in X f32, scale f32 [, zero point]: y = sat(rint(x / scale) + zp) */
    HFX_OP_DEQUANTIZE_LINEAR = 71, /* in X int, scale f32 [, zero point]: y = f32(x - zp) * scale */
    HFX_OP_DYNAMIC_QPARAMS = 72,   /* in X f32 -> scale f32, zero point u8 (one element each): ONNX
                                      DynamicQuantizeLinear's, dsp/ref/ref_quant.h; QUANTIZE_LINEAR then quantizes */
    /* integer elementwise ops of QDQ groups (80..99), dsp/ref/ref_qeltwise.h */
    HFX_OP_QADD = 80, /* in A, B u8/i8 (one dtype), numpy broadcast: ONNX Runtime's QLinearAdd */
    HFX_OP_QMUL = 81, /* in A, B u8/i8 (one dtype), numpy broadcast: ONNX Runtime's QLinearMul */
    HFX_OP_QLUT = 82, /* in X u8/i8, table[256] u8/i8: y = table[x - the type's minimum] */
    /* integer pooling of QDQ groups, dsp/ref/ref_qpool.h */
    HFX_OP_QGLOBAL_AVGPOOL = 83, /* in X u8/i8 [N,C,...]: ONNX Runtime's QLinearGlobalAveragePool */
    HFX_OP_QMAXPOOL = 84,        /* in X u8/i8 [N,C,H,W]: MaxPool, requantised (exact) */
    HFX_OP_QCONCAT = 85,         /* in X1..Xk u8/i8, tables [k, 256]: Concat, each input through its table */
    HFX_OP_QAVGPOOL = 86,        /* in X u8/i8 [N,C,H,W]: ONNX Runtime's QLinearAveragePool */
    HFX_OP_QRESIZE = 87,         /* in X u8/i8, table [256] of Y's type: nearest RESIZE, each byte through the table */
    HFX_OP_QSOFTMAX = 88         /* in X u8/i8, exp table f32 [256]: ONNX Runtime's QLinearSoftmax */
};

/* RESIZE modes (param HFX_P_RESIZE_MODE) */
enum hfx_resize_mode { HFX_RESIZE_NEAREST = 0, HFX_RESIZE_LINEAR = 1 };

/* RESIZE coordinate transformation (param HFX_P_RESIZE_COORD), ONNX names; x_out is
 * the output index, s the scale, L_in / L_out the axis lengths (f32 arithmetic) */
enum hfx_resize_coord {
    HFX_RESIZE_COORD_HALF_PIXEL = 0,           /* (x_out + 0.5) / s - 0.5 */
    HFX_RESIZE_COORD_ASYMMETRIC = 1,           /* x_out / s */
    HFX_RESIZE_COORD_ALIGN_CORNERS = 2,        /* x_out (L_in - 1) / (L_out - 1), 0 if L_out = 1 */
    HFX_RESIZE_COORD_PYTORCH_HALF_PIXEL = 3,   /* half_pixel, 0 if L_out = 1 */
    HFX_RESIZE_COORD_HALF_PIXEL_SYMMETRIC = 4  /* half_pixel + L_in / 2 (1 - L_out / (s L_in)) */
};

/* RESIZE nearest rounding (param HFX_P_RESIZE_NEAREST_MODE; 0 for LINEAR) */
enum hfx_resize_nearest_mode {
    HFX_RESIZE_NEAREST_ROUND_PREFER_FLOOR = 0,
    HFX_RESIZE_NEAREST_ROUND_PREFER_CEIL = 1,
    HFX_RESIZE_NEAREST_FLOOR = 2,
    HFX_RESIZE_NEAREST_CEIL = 3
};

/* ---- op params: index into the op record's int32 params[32] ---------------
 * Floats are stored as their IEEE-754 bit pattern. Unused params must be 0. */

/* GEMM: Y = alpha * op(A) @ op(B) + beta * C, op(X) = X or X^T on the last two axes */
#define HFX_P_GEMM_TRANS_A 0 /* 0 or 1 */
#define HFX_P_GEMM_TRANS_B 1 /* 0 or 1 */
#define HFX_P_GEMM_ALPHA 2   /* f32 bits (MatMul: 1.0f = 0x3f800000) */
#define HFX_P_GEMM_BETA 3    /* f32 bits; must be 0 when there is no C */
#define HFX_P_GEMM_NBITS 4   /* 0, or 1: ONNX Runtime runs it as MatMulNBits, B dequantized and transposed
                              * (the host sums one row of A so where a QUANTIZE_LINEAR reads Y) */

/* CONV2D (ONNX order) */
#define HFX_P_CONV_PAD_TOP 0
#define HFX_P_CONV_PAD_LEFT 1
#define HFX_P_CONV_PAD_BOTTOM 2
#define HFX_P_CONV_PAD_RIGHT 3
#define HFX_P_CONV_STRIDE_H 4 /* >= 1 */
#define HFX_P_CONV_STRIDE_W 5
#define HFX_P_CONV_DILATION_H 6 /* >= 1 */
#define HFX_P_CONV_DILATION_W 7
#define HFX_P_CONV_GROUP 8 /* >= 1 */
/* CONV2D only, 0 or 1: a ConvTranspose's W^T X whose W is not a constant ORT pre-packs (a DequantizeLinear's
 * output): ORT's MLAS sums it with A transposed */
#define HFX_P_CONV_TRANSPOSED 9

/* SOFTMAX, LOG_SOFTMAX, LAYERNORM, RMSNORM, CONCAT: axis in [-rank, rank) */
#define HFX_P_AXIS 0
/* LAYERNORM, RMSNORM: epsilon as f32 bits (> 0) */
#define HFX_P_EPSILON 1
/* INSTANCENORM: HFX_P_AXIS is 2, HFX_P_EPSILON as LAYERNORM's */
/* RMSNORM, 0 or 1: 1 for a SkipSimplifiedLayerNormalization's norm (ORT's skip kernel sums it otherwise) */
#define HFX_P_NORM_SKIP 2

/* REDUCE_*: bit i set = reduce axis i (mask != 0, only bits < rank) */
#define HFX_P_REDUCE_AXES_MASK 0
#define HFX_P_REDUCE_KEEPDIMS 1 /* 0 or 1 */
/* REDUCE_SUM / REDUCE_MEAN: 0, or x is Transpose(T, perm), perm[k] in bits [4 k, 4 k + 4): the host build sums
 * in the order ORT's CPU kernel sums T in (its optimizer moves the Transpose below the reduction) */
#define HFX_P_REDUCE_ORT_PERM 2

/* ARGMAX, ARGMIN: one axis in [-rank, rank) (normalized by the parser; HFX_P_AXIS's slot) */
#define HFX_P_ARG_AXIS 0
#define HFX_P_ARG_KEEPDIMS 1    /* 0 or 1 */
#define HFX_P_ARG_SELECT_LAST 2 /* 0 or 1: ONNX select_last_index */

/* TRANSPOSE: perm[i] for i < rank (a permutation of 0..rank-1) */
#define HFX_P_PERM 0

/* SLICE (ONNX semantics per axis i < rank, negative values count from the
 * end, clamped as ONNX does; step != 0). An axis not sliced has
 * start 0, end INT32_MAX, step 1. */
#define HFX_P_SLICE_STARTS 0 /* params[0..7] */
#define HFX_P_SLICE_ENDS 8   /* params[8..15] */
#define HFX_P_SLICE_STEPS 16 /* params[16..23] */

/* TRILU: the diagonal k (any i32: 0 the main one, > 0 above it) and which triangle is kept (1 upper, 0 lower) */
#define HFX_P_TRILU_K 0
#define HFX_P_TRILU_UPPER 1

/* HARDSIGMOID: y = max(0, min(1, alpha * x + beta)); f32 bits, finite */
#define HFX_P_HARDSIGMOID_ALPHA 0
#define HFX_P_HARDSIGMOID_BETA 1

/* CLIP: y = min(max(x, min), max) as ONNX Runtime (min > max gives max);
 * f32 bits, not NaN (+-inf: no bound) */
#define HFX_P_CLIP_MIN 0
#define HFX_P_CLIP_MAX 1

/* REPLACE_NAN: y = isnan(x) ? value : x; f32 bits, any value */
#define HFX_P_REPLACE_NAN_VALUE 0

/* COMPARE: y = x OP y, OP one of enum hfx_compare_mode */
#define HFX_P_COMPARE_MODE 0
enum hfx_compare_mode {
    HFX_COMPARE_EQUAL = 0,
    HFX_COMPARE_LESS = 1,
    HFX_COMPARE_GREATER = 2,
    HFX_COMPARE_LESS_EQUAL = 3,
    HFX_COMPARE_GREATER_EQUAL = 4,
    HFX_COMPARE_NOT_EQUAL = 5
};

/* DIV: y = x OP y, OP one of enum hfx_div_mode. An integer y of 0 gives 0, where ONNX Runtime fails the run
 * ("Integer division by zero"), and MIN / -1 gives MIN (its remainders 0), where its process dies (SIGFPE) */
#define HFX_P_DIV_MODE 0
enum hfx_div_mode {
    HFX_DIV_QUOTIENT = 0, /* f32: x / y; i32, i64: truncated toward zero (ONNX Div) */
    HFX_DIV_MOD = 1,      /* i32, i64: x - y floor(x / y), the divisor's sign (ONNX Mod fmod=0, as ORT) */
    HFX_DIV_FMOD = 2      /* f32, i32: C fmod, exact, the dividend's sign (ONNX Mod fmod=1; f32: y = 0, x +-inf or
                           * a NaN give NaN as ONNX Runtime's x86-64 build: a NaN operand made quiet (of two, the larger significand, on a
                           * tie the positive one), else 0xffc00000) */
};

/* MAXPOOL, AVGPOOL (2-D, NCHW; pads/strides/dilations in CONV2D's order) */
#define HFX_P_POOL_PAD_TOP 0      /* 0 .. kernel - 1 */
#define HFX_P_POOL_PAD_LEFT 1
#define HFX_P_POOL_PAD_BOTTOM 2
#define HFX_P_POOL_PAD_RIGHT 3
#define HFX_P_POOL_STRIDE_H 4     /* 1 .. 65535 */
#define HFX_P_POOL_STRIDE_W 5
#define HFX_P_POOL_DILATION_H 6   /* 1 .. 65535 */
#define HFX_P_POOL_DILATION_W 7
#define HFX_P_POOL_KERNEL_H 8     /* 1 .. 65535 */
#define HFX_P_POOL_KERNEL_W 9
#define HFX_P_POOL_CEIL_MODE 10   /* 0 or 1 */
#define HFX_P_POOL_COUNT_INCLUDE_PAD 11 /* AVGPOOL: 0 or 1; MAXPOOL: 0 */

/* RESIZE */
#define HFX_P_RESIZE_MODE 0         /* enum hfx_resize_mode */
#define HFX_P_RESIZE_COORD 1        /* enum hfx_resize_coord */
#define HFX_P_RESIZE_NEAREST_MODE 2 /* enum hfx_resize_nearest_mode; 0 for LINEAR */
/* A scale is f32 bits, finite > 0, or 0: f32(L_out) / f32(L_in) of the run's dims, as ONNX Runtime
 * derives it from a Resize's `sizes` (a program whose dims follow symbolic input dims: one constant
 * scale holds at some input shapes only, 16 -> 31 is no x2) */
#define HFX_P_RESIZE_SCALE_H 3 /* scale of axis rank-2 */
#define HFX_P_RESIZE_SCALE_W 4 /* scale of axis rank-1 */

/* QUANTIZE_LINEAR, DEQUANTIZE_LINEAR: scale and zero point have one element (per tensor; the
 * param is 0) or are 1-D with X.dims[axis] elements (per axis). The zero point has the integer
 * type (Q: the output's, DQ: the input's). */
#define HFX_P_QUANT_AXIS 0 /* per axis: in [-rank, rank), normalized; per tensor: 0 */

/* MATMUL_NBITS: B holds each column's K weights in blocks of block_size along K (blocks = ceil(K /
 * block_size), the last one padded), `bits` per weight, little end first (4 bits: the even k in the low
 * nibble); w[k, n] = (q - zp[n, block]) * scale[n, block]. INT8 0: y = A x w in f32 (ONNX Runtime's
 * accuracy_level 0/1); INT8 1: each row of A quantized per block to int8 as ONNX Runtime's accuracy_level 4
 * (scale amax / 127, q = round half to even of a * (127 / amax)), y = sum over blocks of the integer dot
 * times both scales. */
#define HFX_P_NBITS_BITS 0  /* 4 or 8 */
#define HFX_P_NBITS_BLOCK 1 /* a power of two >= 16 */
#define HFX_P_NBITS_INT8 2  /* 0 or 1 */
enum hfx_nbits_slot { HFX_NB_A, HFX_NB_B, HFX_NB_SCALES, HFX_NB_ZP, HFX_NB_BIAS };

/* QMATMUL / QCONV2D operand slots */
enum hfx_qmm_slot { HFX_QMM_A, HFX_QMM_B, HFX_QMM_ZA, HFX_QMM_ZB, HFX_QMM_SCALE, HFX_QMM_ZY, HFX_QMM_BIAS };

/* QMATMUL (no params): A u8/i8, B u8/i8 [K, N], zp_a (A's type) and zp_y (Y's type) one element,
 * zp_b (B's type) and scale (f32, = f32(f32(s_a * s_b) / s_y)) one element or N; Y u8/i8
 * [..., N]. Integer semantics: dsp/ref/ref_qmatmul.h.
 * QCONV2D: the same inputs with M (W.dims[0]) for N, and CONV2D's params (HFX_P_CONV_*); padding
 * reads X's zero point. */

/* QADD, QMUL: Y u8/i8; the ratios are f32 bits (finite), the zero points in their tensors' ranges,
 * lo <= hi within Y's range (Y's range, narrowed by a Relu/Clip folded into the group).
 *   QADD  t = fma(a, ra, fma(b, rb, zy - fma(za, ra, rb * zb))), ra = s_a / s_y, rb = s_b / s_y,
 *         A and B (with their ratios and zero points) swapped when A is broadcast along the
 *         innermost output axis longer than 1 and B is not (ONNX Runtime's scalar span)
 *   QMUL  t = f32(f32((a - za)(b - zb)) * ra) + zy, ra = f32(s_a * s_b) / s_y, rb = 0
 *   y = min(max(cvt(t), lo), hi), cvt rounding half to even (NaN, |t| >= 2^31: lo)
 * Bit for bit: dsp/ref/ref_qeltwise.h. */
#define HFX_P_QBIN_RATIO_A 0
#define HFX_P_QBIN_RATIO_B 1
#define HFX_P_QBIN_ZERO_A 2
#define HFX_P_QBIN_ZERO_B 3
#define HFX_P_QBIN_ZERO_Y 4
#define HFX_P_QBIN_LO 5
#define HFX_P_QBIN_HI 6

/* QGLOBAL_AVGPOOL: acc = sum of the spatial elements - zx * count (int32), then QMATMUL's
 * requantisation with the scale f32(s_x / f32(s_y * f32(count))) (dsp/ref/ref_qpool.h) */
#define HFX_P_QGAP_SCALE 0 /* f32 bits, finite */
#define HFX_P_QGAP_ZERO_X 1
#define HFX_P_QGAP_ZERO_Y 2

/* QMAXPOOL: MAXPOOL's params (HFX_P_POOL_*, count_include_pad 0), then y = Q(DQ(max of the
 * window)) with these (a window without a tap inside X gives Y's minimum) */
#define HFX_P_QPOOL_SCALE_X 12 /* f32 bits, finite > 0 */
#define HFX_P_QPOOL_ZERO_X 13
#define HFX_P_QPOOL_SCALE_Y 14 /* f32 bits, finite > 0 */
#define HFX_P_QPOOL_ZERO_Y 15

/* QRESIZE: RESIZE's params (mode nearest); y = table[x at RESIZE's nearest source - the minimum of
 * X's type]: the requantisation Q_y(DQ_x(x)) of a DQ -> Resize -> Q group, the identity when the
 * parameters are equal (ONNX Runtime then drops the Q/DQ and copies the bytes) */

/* QSOFTMAX: HFX_P_AXIS as SOFTMAX's, then floor(1 / s_y) and zy; Y of X's type; the table as
 * dsp/ref/ref_qsoftmax.h builds it */
#define HFX_P_QSOFTMAX_SCALE 1 /* f32 bits: floor(1 / s_y), finite >= 0 */
#define HFX_P_QSOFTMAX_ZERO_Y 2

/* QAVGPOOL: AVGPOOL's params (HFX_P_POOL_*, dilations 1), then HFX_P_QPOOL_*: ONNX Runtime's
 * QLinearAveragePool, bit for bit (dsp/ref/ref_qpool.h) */

/* QCONCAT: HFX_P_AXIS; the last input holds one 256-entry table of Y's dtype per input, indexed
 * by x - the minimum of x's type (the requantisation Q_y(DQ_x(x)), the identity when the
 * parameters are equal: ONNX Runtime's QLinearConcat) */

/* QLUT (no params): the table is 256 elements of Y's dtype, indexed by x - the minimum of X's
 * type; the lowering builds it from the float function between the group's DequantizeLinear and
 * QuantizeLinear. */

#endif /* HEXFUSE_OPS_H */
