/* matmul.c - GEMM / batched MatMul on the host matrix engine (OpenBLAS,
 * one BLAS thread per worker). An item is a block of rows (or columns) of
 * one batch: Y[b][r0:r1, :] = alpha * op(A[b]) op(B[b]) + beta * C. */
#include <cblas.h>

#include "kernels.h"

void hfx_kernels_init(void) { scipy_openblas_set_num_threads(1); }

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
static void fill_bias(const hfx_tensor *ct, const float *c, const hfx_tensor *y, uint64_t b, float beta,
                      float *out, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1) {
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

void hfx_k_gemm(const hfx_kernel_args *a, uint32_t item) {
    const hfx_op *op = a->op;
    const hfx_program *p = a->prog;
    const hfx_tensor *at = &p->tensors[op->in[0]], *bt = &p->tensors[op->in[1]];
    const hfx_tensor *y = &p->tensors[op->out[0]];
    const uint64_t *v = op->plan.v;
    uint64_t m = v[1], n = v[2], k = v[3], split = v[4], block = v[5], blocks = v[6];
    uint64_t b = item / blocks, blk = item % blocks;
    int ta = op->params[HFX_P_GEMM_TRANS_A], tb = op->params[HFX_P_GEMM_TRANS_B];
    float alpha = hfx_f32_from_bits(op->params[HFX_P_GEMM_ALPHA]);
    float beta = hfx_f32_from_bits(op->params[HFX_P_GEMM_BETA]);
    const float *A = (const float *)a->in[0] + batch_offset(at, y, b);
    const float *B = (const float *)a->in[1] + batch_offset(bt, y, b);
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
    const float *Ab = ta ? A + r0 : A + r0 * k;
    const float *Bb = tb ? B + c0 * k : B + c0;
    scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                      (blasint)(r1 - r0), (blasint)(c1 - c0), (blasint)k, alpha, Ab, (blasint)(ta ? m : k), Bb,
                      (blasint)(tb ? k : n), gb, Y + r0 * n + c0, (blasint)n);
}
