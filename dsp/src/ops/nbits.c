/* nbits.c - MATMUL_NBITS: com.microsoft MatMulNBits (weight-only 4/8-bit blockwise quantized MatMul) as
 * ONNX Runtime's CPU kernel computes it (hexfuse/ops.h HFX_P_NBITS_*). An item is a block of rows of A
 * times a block of columns: each column's weights are unpacked once per item, into f32 (INT8 0: f32
 * dot products) or int16 q - zp (INT8 1: the item's rows of A quantized per block to int8 first, then
 * an int32 dot per block scaled by both scales). Portable C: on Hexagon too (no HVX kernel yet). */
#include <string.h>

#include "kernels.h"

#define NB_ROWS_MAX 64u /* rows of A per item: bounds the work space of the quantized rows */

typedef struct nbits_plan {
    uint64_t rows, k, n, blocks, block;
    uint64_t rows_per_item, row_blocks, cols_per_item;
} nbits_plan;

static hfx_status want_dtype(hfx_vctx *v, const hfx_op *op, uint32_t slot, uint32_t dtype, const char *what) {
    uint32_t id = slot == 99 ? op->out[0] : op->in[slot];
    if (v->p->tensors[id].dtype == dtype) return HFX_OK;
    return hfx_vfail(v, HFX_ERR_DTYPE, slot == 99 ? HFX_OUT_OFF(v, 0) : HFX_IN_OFF(v, slot),
                     "op %u (%s): tensor %u must be %s", v->index, op->desc->label, id, what);
}

static hfx_status validate_dtypes(hfx_vctx *v, const hfx_op *op) {
    hfx_status st = want_dtype(v, op, HFX_NB_A, HFX_DTYPE_F32, "f32 (A)");
    if (!st) st = want_dtype(v, op, HFX_NB_B, HFX_DTYPE_U8, "u8 (the packed weights)");
    if (!st) st = want_dtype(v, op, HFX_NB_SCALES, HFX_DTYPE_F32, "f32 (the scales)");
    if (!st) st = want_dtype(v, op, HFX_NB_ZP, HFX_DTYPE_U8, "u8 (the zero points, one per block)");
    if (!st && op->n_in > HFX_NB_BIAS) st = want_dtype(v, op, HFX_NB_BIAS, HFX_DTYPE_F32, "f32 (the bias)");
    return st ? st : want_dtype(v, op, 99, HFX_DTYPE_F32, "f32");
}

static hfx_status validate_params(hfx_vctx *v, const hfx_op *op) {
    int32_t bits = op->params[HFX_P_NBITS_BITS], block = op->params[HFX_P_NBITS_BLOCK];
    int32_t int8 = op->params[HFX_P_NBITS_INT8];
    if (bits != 4 && bits != 8)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_NBITS_BITS), "op %u (%s): bits %d, not 4 or 8",
                         v->index, op->desc->label, bits);
    if (block < 16 || (block & (block - 1)))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_NBITS_BLOCK),
                         "op %u (%s): block size %d, not a power of two >= 16", v->index, op->desc->label, block);
    if (int8 != 0 && int8 != 1)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_NBITS_INT8), "op %u (%s): int8 %d, not 0 or 1",
                         v->index, op->desc->label, int8);
    return HFX_OK;
}

hfx_status hfx_validate_nbits(hfx_vctx *v, hfx_op *op) {
    hfx_status st = validate_dtypes(v, op);
    if (!st) st = validate_params(v, op);
    if (st) return st;
    const hfx_tensor *t = v->p->tensors, *a = &t[op->in[HFX_NB_A]], *b = &t[op->in[HFX_NB_B]];
    const hfx_tensor *zp = &t[op->in[HFX_NB_ZP]], *sc = &t[op->in[HFX_NB_SCALES]];
    uint64_t bits = (uint64_t)op->params[HFX_P_NBITS_BITS], block = (uint64_t)op->params[HFX_P_NBITS_BLOCK];
    if (a->rank < 1 || zp->rank != 2)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, HFX_NB_ZP),
                         "op %u (%s): needs A[..., K] and zero points [N, blocks]", v->index, op->desc->label);
    uint64_t k = a->dims[a->rank - 1], n = zp->dims[0], blocks = hfx_ceil_div(k, block);
    if (zp->dims[1] != blocks || b->rank < 2 || b->dims[0] != n || b->numel != n * blocks * block * bits / 8 ||
        sc->numel != n * blocks ||
        (op->n_in > HFX_NB_BIAS && (t[op->in[HFX_NB_BIAS]].rank != 1 || t[op->in[HFX_NB_BIAS]].dims[0] != n)))
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, HFX_NB_B),
                         "op %u (%s): needs B [N, ...] of N * ceil(K / block) * block * bits / 8 bytes, scales of "
                         "N * ceil(K / block), zero points [N, ceil(K / block)], bias [N] (K = %U)",
                         v->index, op->desc->label, k);
    uint32_t od[HFX_MAX_RANK];
    for (uint32_t i = 0; i + 1 < a->rank; i++) od[i] = a->dims[i];
    od[a->rank - 1] = (uint32_t)n;
    if (!hfx_same_shape(&t[op->out[0]], od, a->rank)) return hfx_shape_err(v, "MatMulNBits");
    return hfx_no_empty_input(v, op);
}

/* the work space of an item: one column unpacked (f32 or int16), and the item's rows quantized (int8 1) */
static size_t nbits_ws(const nbits_plan *pl, bool int8) {
    uint64_t kp = pl->blocks * pl->block;
    if (!int8) return (size_t)(kp * sizeof(float));
    return (size_t)(kp * sizeof(int16_t) + pl->rows_per_item * (kp + pl->blocks * sizeof(float)));
}

hfx_status hfx_plan_nbits(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *a = &p->tensors[op->in[HFX_NB_A]], *zp = &p->tensors[op->in[HFX_NB_ZP]];
    nbits_plan pl = {0};
    pl.k = a->dims[a->rank - 1];
    pl.n = zp->dims[0];
    pl.block = (uint64_t)op->params[HFX_P_NBITS_BLOCK];
    pl.blocks = hfx_ceil_div(pl.k, pl.block);
    pl.rows = a->numel / pl.k;
    pl.rows_per_item = pl.rows < NB_ROWS_MAX ? pl.rows : NB_ROWS_MAX;
    pl.row_blocks = hfx_ceil_div(pl.rows, pl.rows_per_item);
    pl.cols_per_item = hfx_per_item_for(2 * pl.k * pl.rows_per_item, HFX_GEMM_ITEM_FLOPS);
    if (pl.cols_per_item > pl.n) pl.cols_per_item = pl.n;
    op->plan.ws_bytes = nbits_ws(&pl, op->params[HFX_P_NBITS_INT8] != 0);
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, pl.row_blocks * hfx_ceil_div(pl.n, pl.cols_per_item));
}

typedef struct nbits_io {
    const float *a, *scales, *bias;
    const uint8_t *b, *zp;
    float *y;
    uint32_t bits;
} nbits_io;

/* the q of weight i of a column's packed bytes */
static inline int32_t nbits_q(const uint8_t *col, uint32_t bits, uint64_t i) {
    return bits == 8 ? col[i] : (col[i >> 1] >> ((i & 1) * 4)) & 15;
}

/* column n's weights, (q - zp) * scale in f32 (int8 0) or q - zp as int16 (int8 1), padded to whole blocks */
static void unpack_col(const nbits_io *io, const nbits_plan *pl, uint64_t n, float *wf, int16_t *wi) {
    const uint8_t *col = io->b + n * (pl->blocks * pl->block * io->bits / 8);
    for (uint64_t blk = 0; blk < pl->blocks; blk++) {
        int32_t zp = io->zp[n * pl->blocks + blk];
        float s = io->scales[n * pl->blocks + blk];
        for (uint64_t i = blk * pl->block; i < (blk + 1) * pl->block; i++) {
            int32_t d = nbits_q(col, io->bits, i) - zp;
            if (wf) wf[i] = (float)d * s;
            else wi[i] = (int16_t)d;
        }
    }
}

/* sum of a[i] * w[i], i < k, in 16 running sums (vectorizable) */
HFX_VECTOR_KERNEL static float dot_f32(const float *a, const float *w, uint64_t k) {
    float acc[16] = {0};
    uint64_t i = 0;
    for (; i + 16 <= k; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += a[i + (uint64_t)j] * w[i + (uint64_t)j];
    float s = 0.0f;
    for (; i < k; i++) s += a[i] * w[i];
    for (int j = 0; j < 16; j++) s += acc[j];
    return s;
}

HFX_VECTOR_KERNEL static int32_t dot_i8_i16(const int8_t *a, const int16_t *w, uint64_t k) {
    int32_t s = 0;
    for (uint64_t i = 0; i < k; i++) s += (int32_t)a[i] * w[i];
    return s;
}

/* round half to even of |x| < 2^22 in the default rounding mode, without libm (the Hexagon runtime) */
static inline float round_even(float x) { return (x + 12582912.0f) - 12582912.0f; }

/* row r of A quantized per block: q[blocks * block] int8 (the padding 0), s[blocks] = amax / 127 */
static void quantize_row(const float *a, const nbits_plan *pl, int8_t *q, float *s) {
    for (uint64_t blk = 0; blk < pl->blocks; blk++) {
        uint64_t k0 = blk * pl->block, k1 = k0 + pl->block < pl->k ? k0 + pl->block : pl->k;
        float amax = 0.0f;
        for (uint64_t i = k0; i < k1; i++) {
            float m = a[i] < 0 ? -a[i] : a[i];
            amax = m > amax ? m : amax;
        }
        s[blk] = amax / 127.0f;
        float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (uint64_t i = k0; i < k1; i++) q[i] = (int8_t)(int32_t)round_even(a[i] * inv);
        for (uint64_t i = k1; i < k0 + pl->block; i++) q[i] = 0;
    }
}

static void run_f32(const nbits_io *io, const nbits_plan *pl, void *ws, uint64_t r0, uint64_t r1, uint64_t c0,
                    uint64_t c1) {
    float *w = ws;
    for (uint64_t c = c0; c < c1; c++) {
        unpack_col(io, pl, c, w, NULL);
        float bias = io->bias ? io->bias[c] : 0.0f;
        for (uint64_t r = r0; r < r1; r++) io->y[r * pl->n + c] = dot_f32(io->a + r * pl->k, w, pl->k) + bias;
    }
}

static void run_int8(const nbits_io *io, const nbits_plan *pl, void *ws, uint64_t r0, uint64_t r1, uint64_t c0,
                     uint64_t c1) {
    uint64_t kp = pl->blocks * pl->block;
    int16_t *w = ws;
    float *sa = (float *)(w + kp);
    int8_t *qa = (int8_t *)(sa + pl->rows_per_item * pl->blocks);
    for (uint64_t r = r0; r < r1; r++)
        quantize_row(io->a + r * pl->k, pl, qa + (r - r0) * kp, sa + (r - r0) * pl->blocks);
    for (uint64_t c = c0; c < c1; c++) {
        unpack_col(io, pl, c, NULL, w);
        const float *sb = io->scales + c * pl->blocks;
        for (uint64_t r = r0; r < r1; r++) {
            const int8_t *q = qa + (r - r0) * kp;
            const float *s = sa + (r - r0) * pl->blocks;
            float acc = 0.0f;
            for (uint64_t blk = 0; blk < pl->blocks; blk++) {
                int32_t d = dot_i8_i16(q + blk * pl->block, w + blk * pl->block, pl->block);
                acc += (float)d * (s[blk] * sb[blk]);
            }
            io->y[r * pl->n + c] = acc + (io->bias ? io->bias[c] : 0.0f);
        }
    }
}

void hfx_run_nbits(const hfx_kernel_args *a, uint32_t item) {
    nbits_plan pl;
    HFX_PLAN_LOAD(pl, a->op);
    nbits_io io = {a->in[HFX_NB_A],
                   a->in[HFX_NB_SCALES],
                   a->op->n_in > HFX_NB_BIAS ? a->in[HFX_NB_BIAS] : NULL,
                   a->in[HFX_NB_B],
                   a->in[HFX_NB_ZP],
                   a->out[0],
                   (uint32_t)a->op->params[HFX_P_NBITS_BITS]};
    uint64_t r0, r1, c0 = (item / pl.row_blocks) * pl.cols_per_item;
    uint64_t c1 = c0 + pl.cols_per_item < pl.n ? c0 + pl.cols_per_item : pl.n;
    hfx_plan_range(pl.rows, pl.rows_per_item, item % (uint32_t)pl.row_blocks, &r0, &r1);
    if (a->op->params[HFX_P_NBITS_INT8]) run_int8(&io, &pl, a->ws, r0, r1, c0, c1);
    else run_f32(&io, &pl, a->ws, r0, r1, c0, c1);
}
