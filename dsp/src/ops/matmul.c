/* matmul.c - GEMM / batched MatMul on the host matrix engine (OpenBLAS,
 * one BLAS thread per worker). An item is a block of rows (or columns) of
 * one batch: Y[b][r0:r1, :] = alpha * op(A[b]) op(B[b]) + beta * C. */
#include <cblas.h>
#include <string.h>

#include "kernels.h"
#include "sgemm_mlas.h"
#include "sgemm_ordered.h"

#define GEMM_MIN_ROWS 64u

typedef struct gemm_plan {
    uint64_t batch, m, n, k;
    uint64_t split_cols; /* 0: blocks of rows, 1: blocks of columns */
    uint64_t block;      /* rows or columns per item */
    uint64_t blocks;     /* items per batch */
} gemm_plan;

void hfx_kernels_init(void) { scipy_openblas_set_num_threads(1); }

hfx_status hfx_validate_gemm(hfx_vctx *v, hfx_op *op) {
    const hfx_program *p = v->p;
    const hfx_tensor *x = &p->tensors[op->in[0]], *b = &p->tensors[op->in[1]], *y = &p->tensors[op->out[0]];
    int32_t ta = op->params[HFX_P_GEMM_TRANS_A], tb = op->params[HFX_P_GEMM_TRANS_B];
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, ta != 0 && ta != 1 ? 0 : 1),
                         "op %u: transA/transB must be 0 or 1", v->index);
    if (op->params[HFX_P_GEMM_NBITS] != 0 && (op->params[HFX_P_GEMM_NBITS] != 1 || ta || tb))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_GEMM_NBITS),
                         "op %u: nbits must be 0, or 1 with transA and transB 0", v->index);
    if (!hfx_finite_f32(op->params[HFX_P_GEMM_ALPHA]) || !hfx_finite_f32(op->params[HFX_P_GEMM_BETA]))
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_GEMM_ALPHA), "op %u: alpha/beta not finite",
                         v->index);
    if (op->n_in == 2 && op->params[HFX_P_GEMM_BETA] != 0)
        return hfx_vfail(v, HFX_ERR_PARAM, HFX_PARAM_OFF(v, HFX_P_GEMM_BETA), "op %u: beta set without C", v->index);
    if (x->rank < 2 || b->rank < 2)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, x->rank < 2 ? 0 : 1), "op %u: Gemm operands need rank >= 2",
                         v->index);
    uint32_t m = ta ? x->dims[x->rank - 1] : x->dims[x->rank - 2];
    uint32_t ka = ta ? x->dims[x->rank - 2] : x->dims[x->rank - 1];
    uint32_t kb = tb ? b->dims[b->rank - 1] : b->dims[b->rank - 2];
    uint32_t n = tb ? b->dims[b->rank - 2] : b->dims[b->rank - 1];
    if (ka != kb)
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u: Gemm K mismatch %u vs %u", v->index, ka, kb);
    uint32_t od[HFX_MAX_RANK * 2], orank = 0;
    if (!hfx_broadcast2(x->dims, x->rank - 2u, b->dims, b->rank - 2u, od, &orank))
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 1), "op %u: Gemm batch dims do not broadcast", v->index);
    if (orank + 2 > HFX_MAX_RANK) return hfx_shape_err(v, "Gemm (rank too high)");
    od[orank++] = m;
    od[orank++] = n;
    if (!hfx_same_shape(y, od, orank)) return hfx_shape_err(v, "Gemm");
    if (op->n_in == 3 && !hfx_broadcastable_to(&p->tensors[op->in[2]], od, orank))
        return hfx_vfail(v, HFX_ERR_SHAPE, HFX_IN_OFF(v, 2), "op %u: Gemm C does not broadcast to the output",
                         v->index);
    return HFX_OK;
}

/* Blocks of at least GEMM_MIN_ROWS rows (a multiple of 16) of about HFX_GEMM_ITEM_FLOPS each, evened
 * out; a short wide GEMM is cut into blocks of columns (a multiple of 64) instead. */
hfx_status hfx_plan_gemm(const hfx_program *p, hfx_op *op) {
    const hfx_tensor *x = &p->tensors[op->in[0]], *y = &p->tensors[op->out[0]];
    gemm_plan pl = {0};
    pl.m = y->dims[y->rank - 2];
    pl.n = y->dims[y->rank - 1];
    pl.k = op->params[HFX_P_GEMM_TRANS_A] ? x->dims[x->rank - 2] : x->dims[x->rank - 1];
    pl.batch = y->numel / (pl.m * pl.n);
    if (pl.m >= 2 * GEMM_MIN_ROWS || pl.n < 512) {
        uint64_t block = hfx_per_item_for(2 * pl.n * pl.k, HFX_GEMM_ITEM_FLOPS);
        if (block < GEMM_MIN_ROWS) block = GEMM_MIN_ROWS;
        block = hfx_ceil_div(block, 16) * 16;
        if (block >= pl.m) block = pl.m;
        else {
            uint64_t nb = hfx_ceil_div(pl.m, block); /* even out the blocks */
            block = hfx_ceil_div(hfx_ceil_div(pl.m, nb), 16) * 16;
            if (block > pl.m) block = pl.m;
        }
        pl.block = block;
        pl.blocks = hfx_ceil_div(pl.m, block);
    } else {
        uint64_t block = hfx_per_item_for(2 * pl.m * pl.k, HFX_GEMM_ITEM_FLOPS);
        if (block < 256) block = 256;
        block = hfx_ceil_div(block, 64) * 64;
        if (block > pl.n) block = pl.n;
        pl.split_cols = 1;
        pl.block = block;
        pl.blocks = hfx_ceil_div(pl.n, block);
    }
    HFX_PLAN_STORE(op, pl);
    return hfx_plan_set_items(op, pl.batch * pl.blocks);
}

/* offset of batch b of t (a matrix stack) within the broadcast batch dims of y */
static uint64_t batch_offset(const hfx_tensor *t, const hfx_tensor *y, uint64_t b) {
    uint32_t yb = y->rank - 2u, tb = t->rank - 2u;
    uint64_t mat = (uint64_t)t->dims[t->rank - 2] * t->dims[t->rank - 1];
    uint64_t off = 0, stride = mat;
    for (uint32_t i = yb; i-- > 0;) {
        uint64_t idx = b % y->dims[i];
        b /= y->dims[i];
        if (i + tb < yb) continue;
        uint32_t d = t->dims[i + tb - yb];
        if (d != 1) off += idx * stride;
        stride *= d;
    }
    return off;
}

/* Fill rows [r0,r1) x cols [c0,c1) of output batch b with beta * C (broadcast). */
static void fill_bias(const hfx_tensor *ct, const float *c, const hfx_tensor *y, uint64_t b, float beta, float *out,
                      uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1) {
    uint64_t st[HFX_MAX_RANK];
    hfx_bcast_strides(ct, y->rank, st);
    uint64_t n = y->dims[y->rank - 1];
    uint64_t base = 0;
    for (uint32_t i = y->rank - 2u; i-- > 0;) {
        base += (b % y->dims[i]) * st[i];
        b /= y->dims[i];
    }
    uint64_t sm = st[y->rank - 2], sn = st[y->rank - 1];
    for (uint64_t r = r0; r < r1; r++) {
        const float *crow = c + base + r * sm;
        float *orow = out + r * n;
        if (sn == 0) {
            float v = beta * crow[0];
            for (uint64_t k = c0; k < c1; k++) orow[k] = v;
        } else {
            for (uint64_t k = c0; k < c1; k++) orow[k] = beta * crow[k];
        }
    }
}

/* y[0:cols) (+)= alpha x op(B)[:, 0:cols): one row of A (x, stride incx), B's rows ldb apart, y already
 * holding the bias when add. In C, not OpenBLAS's sgemm: for one row it packs B first, which costs as
 * much as the product once B leaves the cache (a 1x768 by 768x3072 MatMul took 3.2x this loop's time; a
 * 256x512 B, in cache, is faster through sgemm). Here B is read once, row by row (or a dot per column of
 * a transposed B). */
#define GEMV_MIN_B_FLOATS (1u << 18) /* 1 MiB of B */
static inline void gemv(const float *x, uint64_t incx, const float *B, uint64_t ldb, int tb, uint64_t k,
                        uint64_t cols, float alpha, int add, float *y) {
    if (!tb) {
        if (!add) memset(y, 0, cols * sizeof(float));
        uint64_t i = 0;
        for (; i + 4 <= k; i += 4) { /* four rows of B per pass over y */
            float x0 = alpha * x[i * incx], x1 = alpha * x[(i + 1) * incx];
            float x2 = alpha * x[(i + 2) * incx], x3 = alpha * x[(i + 3) * incx];
            const float *b0 = B + i * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            for (uint64_t j = 0; j < cols; j++) y[j] += (x0 * b0[j] + x1 * b1[j]) + (x2 * b2[j] + x3 * b3[j]);
        }
        for (; i < k; i++) {
            float xa = alpha * x[i * incx];
            const float *brow = B + i * ldb;
            for (uint64_t j = 0; j < cols; j++) y[j] += xa * brow[j];
        }
        return;
    }
    for (uint64_t j = 0; j < cols; j++) {
        const float *bcol = B + j * ldb;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        uint64_t i = 0;
        for (; i + 8 <= k && incx == 1; i += 8)
            for (int l = 0; l < 8; l++) acc[l] += bcol[i + (uint64_t)l] * x[i + (uint64_t)l];
        for (; i < k; i++) acc[0] += bcol[i] * x[i * incx];
        float dot = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        y[j] = add ? y[j] + alpha * dot : alpha * dot;
    }
}

/* The rows of the product MLAS runs: ORT's MatMul folds A's batch dims into M when B has none. */
static uint64_t mlas_m(const hfx_tensor *at, const hfx_tensor *bt, uint64_t m, int ta) {
    if (bt->rank != 2 || ta) return m;
    for (uint32_t d = 0; d + 2 < at->rank; d++) m *= at->dims[d];
    return m;
}

/* Y[r0:r1, c0:c1] (+)= alpha op(A) op(B) as ORT's MLAS sums it (sgemm_mlas.h), which picks a kernel by
 * the whole product's shape: its 1-row kernels for M = 1 (rows: M as MLAS sees it, this batch's rows
 * starting at `fold` of them) or for N = 1 with B a column (A and B swapped), else the blocked sgemm
 * on the item's operands `as` and `bs` (hfx_run_gemm's). `nbits` (HFX_P_GEMM_NBITS): ORT runs it as
 * MatMulNBits, with B transposed: one row takes the kernel for a transposed B, N = 1 the blocked sgemm. */
static void gemm_ort(const float *A, const float *B, hfx_strided as, hfx_strided bs, uint64_t m, uint64_t n, uint64_t k,
                     int ta, int tb, float alpha, uint64_t rows, uint64_t fold, uint64_t r0, uint64_t r1, uint64_t c0,
                     uint64_t c1, bool add, bool nbits, float *Y) {
    if (alpha == 1.0f && rows == 1 && !ta) {
        if (tb) hfx_dot_rows_mlas(A, B, k, k, c0, c1, n, add, Y + c0, 1);
        else if (nbits) hfx_dot_cols_mlas(A, B, n, k, c0, c1, n, add, Y + c0);
        else hfx_sgemv_mlas(A, B + c0, n, k, c1 - c0, add, Y + c0);
        return;
    }
    if (alpha == 1.0f && n == 1 && !tb && !nbits) { /* B a column: ldb = ldc = 1 */
        if (ta) hfx_sgemv_mlas(B, A + r0, m, k, r1 - r0, add, Y + r0);
        else hfx_dot_rows_mlas(B, A - fold * k, k, k, fold + r0, fold + r1, rows, add, Y + r0, 1);
        return;
    }
    hfx_sgemm_mlas(r1 - r0, c1 - c0, k, alpha, as, bs, add, Y + r0 * n + c0, n, hfx_mlas_stride_k(n, k, ta));
}

HFX_VECTOR_KERNEL
void hfx_run_gemm(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_program *p = a->prog;
    const hfx_tensor *at = &p->tensors[op->in[0]], *bt = &p->tensors[op->in[1]];
    const hfx_tensor *y = &p->tensors[op->out[0]];
    gemm_plan pl;
    HFX_PLAN_LOAD(pl, op);
    uint64_t m = pl.m, n = pl.n, k = pl.k, split = pl.split_cols, block = pl.block, blocks = pl.blocks;
    uint64_t b = item / blocks, blk = item % blocks;
    int ta = op->params[HFX_P_GEMM_TRANS_A], tb = op->params[HFX_P_GEMM_TRANS_B];
    float alpha = hfx_f32_from_bits(op->params[HFX_P_GEMM_ALPHA]);
    float beta = hfx_f32_from_bits(op->params[HFX_P_GEMM_BETA]);
    float *Y = (float *)a->out[0] + b * m * n;
    uint64_t r0 = 0, r1 = m, c0 = 0, c1 = n;
    if (split == 0) {
        r0 = blk * block;
        r1 = r0 + block < m ? r0 + block : m;
    } else {
        c0 = blk * block;
        c1 = c0 + block < n ? c0 + block : n;
    }
    float gb = 0.0f;
    if (op->n_in == 3) {
        fill_bias(&p->tensors[op->in[2]], (const float *)a->in[2], y, b, beta, Y, r0, r1, c0, c1);
        gb = 1.0f;
    }
    if (k == 0) { /* A and B are empty (maybe without a buffer): Y = beta C, or 0 */
        if (op->n_in != 3)
            for (uint64_t r = r0; r < r1; r++) memset(Y + r * n + c0, 0, (c1 - c0) * sizeof(float));
        return;
    }
    const float *A = (const float *)a->in[0] + batch_offset(at, y, b);
    const float *B = (const float *)a->in[1] + batch_offset(bt, y, b);
    const float *Ab = ta ? A + r0 : A + r0 * k;
    const float *Bb = tb ? B + c0 * k : B + c0;
    hfx_strided as = ta ? (hfx_strided){Ab, 1, m} : (hfx_strided){Ab, k, 1};
    hfx_strided bs = tb ? (hfx_strided){Bb, 1, k} : (hfx_strided){Bb, n, 1};
    if (op->sum_order == HFX_SUM_ORT) {
        uint64_t rows = mlas_m(at, bt, m, ta);
        gemm_ort(A, B, as, bs, m, n, k, ta, tb, alpha, rows, rows == m ? 0 : b * m, r0, r1, c0, c1, gb != 0.0f,
                 op->params[HFX_P_GEMM_NBITS] != 0, Y);
        return;
    }
    if (r1 - r0 == 1 && k * (c1 - c0) >= GEMV_MIN_B_FLOATS) { /* the Hexagon builds' too: before their order */
        gemv(Ab, ta ? m : 1, Bb, tb ? k : n, tb, k, c1 - c0, alpha, gb != 0.0f, Y + r0 * n + c0);
        return;
    }
    if (op->sum_order == HFX_SUM_HEXAGON) {
        hfx_sgemm_ordered(r1 - r0, c1 - c0, k, alpha, as, bs, gb != 0.0f, Y + r0 * n + c0, n);
        return;
    }
    scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)(r1 - r0),
                      (blasint)(c1 - c0), (blasint)k, alpha, Ab, (blasint)(ta ? m : k), Bb, (blasint)(tb ? k : n), gb,
                      Y + r0 * n + c0, (blasint)n);
}
