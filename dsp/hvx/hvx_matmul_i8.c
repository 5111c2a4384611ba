/*
 * hvx_matmul_i8.c - int8 x int8 -> int32 matmul with requantisation to int8.
 *
 * Inner product: Vx.w += vrmpy(Vu.ub, Rt.b): each of the 32 word lanes adds
 * the dot product of 4 unsigned bytes of Vu with the 4 signed bytes of Rt.
 * B (signed) is packed biased by +128 as unsigned bytes, 4 consecutive k of
 * one column per word lane; A (signed) is the scalar: 4 consecutive k of one
 * row in one 32-bit register. Then
 *     sum_k a_k (b_k + 128) = sum_k a_k b_k + 128 * rowsum(a)
 * and the accumulators start at bias - 128 * rowsum(A[m,:]) (rowsum once per
 * row, with vrmpy against a splat of ones). The scalar form
 * of vrmpy needs no vsplat of A (a vsplat takes a multiply slot as a vrmpy
 * does), so the loop is bound by the two multiply units: 2 vrmpy per packet.
 *
 * Register tile: 4 rows x 128 columns = 16 accumulators, 4 B vectors per
 * 4 k; per 4 k: 4 vector loads, 4 scalar word loads, 16 vrmpy. Remaining rows
 * use a 1-row tile.
 *
 * Requantisation per 32 accumulators (exactly ref_requant_i8):
 *     q = vmpye(acc, m.uh) ; q += vmpyo(acc, m.h):<<1:rnd:sat:shift
 *           -> sat32((acc * m + 2^30) >> 31)
 *     r = vasr(vadd_sat(q, 2^(s-1)), s)
 *     pack words -> halfwords (sat), add zero point (sat), pack -> bytes (sat),
 *     clamp to [out_min, out_max].
 */
#include "hvx_kernels.h"
#include "hvx_util.h"

#define PANEL_COLS 128 /* columns per packed panel = 4 vectors of 32 word lanes */
#define PANEL_VECS 4

size_t hvx_matmul_i8_packed_bytes(int K, int N)
{
    if (K < 0 || N <= 0)
        return 0;
    size_t kg = ((size_t)K + 3) / 4;
    size_t np = ((size_t)N + PANEL_COLS - 1) / PANEL_COLS;
    return kg * np * PANEL_VECS * HVX_BYTES;
}

void hvx_matmul_i8_pack_b(const int8_t *B, int ldb, int K, int N, uint8_t *packed)
{
    int kg_n = (K + 3) / 4;
    int np = (N + PANEL_COLS - 1) / PANEL_COLS;
    uint8_t *out = packed;
    for (int p = 0; p < np; p++) {
        for (int g = 0; g < kg_n; g++) {
            for (int v = 0; v < PANEL_VECS; v++) {
                for (int j = 0; j < 32; j++) {
                    int n = p * PANEL_COLS + v * 32 + j;
                    for (int t = 0; t < 4; t++) {
                        int k = 4 * g + t;
                        uint8_t val = 0; /* padding: contributes 0 whatever A holds */
                        if (k < K && n < N)
                            val = (uint8_t)((int)B[(size_t)k * ldb + n] + 128);
                        out[j * 4 + t] = val;
                    }
                }
                out += HVX_BYTES;
            }
        }
    }
}

typedef struct rq_vecs {
    HVX_Vector mult, rnd, zp_h, lo_b, hi_b;
    int shift;
} rq_vecs;

static inline HVX_Vector requant_words(HVX_Vector acc, const rq_vecs *q)
{
    HVX_Vector hi = Q6_Vw_vmpye_VwVuh(acc, q->mult);
    hi = Q6_Vw_vmpyoacc_VwVwVh_s1_rnd_sat_shift(hi, acc, q->mult);
    hi = Q6_Vw_vadd_VwVw_sat(hi, q->rnd);
    return Q6_Vw_vasr_VwR(hi, q->shift);
}

/* 4 word vectors (128 columns, in order) -> 128 int8 */
static inline HVX_Vector requant_panel(HVX_Vector a0, HVX_Vector a1, HVX_Vector a2, HVX_Vector a3,
                                       const rq_vecs *q)
{
    HVX_Vector h0 = Q6_Vh_vpack_VwVw_sat(requant_words(a1, q), requant_words(a0, q));
    HVX_Vector h1 = Q6_Vh_vpack_VwVw_sat(requant_words(a3, q), requant_words(a2, q));
    h0 = Q6_Vh_vadd_VhVh_sat(h0, q->zp_h);
    h1 = Q6_Vh_vadd_VhVh_sat(h1, q->zp_h);
    HVX_Vector b = Q6_Vb_vpack_VhVh_sat(h1, h0);
    b = Q6_Vb_vmax_VbVb(b, q->lo_b);
    return Q6_Vb_vmin_VbVb(b, q->hi_b);
}

static void rq_setup(rq_vecs *q, const hx_requant *rq)
{
    q->mult = Q6_V_vsplat_R(rq->multiplier);
    q->rnd = Q6_V_vsplat_R(rq->shift > 0 ? (int32_t)(1u << (rq->shift - 1)) : 0);
    q->zp_h = Q6_Vh_vsplat_R(rq->zero_point);
    q->lo_b = Q6_Vb_vsplat_R(rq->out_min);
    q->hi_b = Q6_Vb_vsplat_R(rq->out_max);
    q->shift = rq->shift;
}

void hvx_requant_i32_i8(const int32_t *__restrict acc, int8_t *__restrict y, size_t n, const hx_requant *rq)
{
    rq_vecs q;
    rq_setup(&q, rq);
    size_t nb = n / HVX_BYTES, tail = n % HVX_BYTES;
    if (hvx_aligned(acc) && hvx_aligned(y)) {
        const HVX_Vector *restrict va = (const HVX_Vector *)(const void *)acc;
        HVX_Vector *restrict vy = (HVX_Vector *)(void *)y;
        for (size_t i = 0; i < nb; i++, va += 4)
            vy[i] = requant_panel(va[0], va[1], va[2], va[3], &q);
    } else {
        const hvx_uvec *restrict va = (const hvx_uvec *)(const void *)acc;
        hvx_uvec *restrict vy = (hvx_uvec *)(void *)y;
        for (size_t i = 0; i < nb; i++, va += 4)
            vy[i] = requant_panel(va[0], va[1], va[2], va[3], &q);
    }
    if (tail) {
        HVX_Vector t[4] = {Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero(), Q6_V_vzero()};
        memcpy(t, acc + nb * HVX_BYTES, tail * sizeof(int32_t));
        hvx_store_partial(y + nb * HVX_BYTES, requant_panel(t[0], t[1], t[2], t[3], &q), tail);
    }
}

static inline void store_row(int8_t *dst, HVX_Vector v, int cols)
{
    if (cols == PANEL_COLS) {
        if (hvx_aligned(dst))
            *(HVX_Vector *)(void *)dst = v;
        else
            *(hvx_uvec *)(void *)dst = v;
    } else {
        hvx_store_partial(dst, v, (size_t)cols);
    }
}

/* sum of the K signed bytes of a row: vrmpy(Vu.b, Vv.b) against a splat of 1
 * adds 4 bytes per word lane, one vector per 128 bytes; then a log2 tree of
 * rotates and adds brings the 32 lanes together. */
static int32_t rowsum_i8(const int8_t *a, int K)
{
    const HVX_Vector ones = Q6_Vb_vsplat_R(1);
    HVX_Vector acc = Q6_V_vzero();
    int k = 0;
    for (; k + HVX_BYTES <= K; k += HVX_BYTES)
        acc = Q6_Vw_vrmpyacc_VwVbVb(acc, *(const hvx_uvec *)(const void *)(a + k), ones);
    if (k < K)
        acc = Q6_Vw_vrmpyacc_VwVbVb(acc, hvx_load_partial(a + k, (size_t)(K - k)), ones);
    for (int sh = HVX_BYTES / 2; sh >= 4; sh >>= 1)
        acc = Q6_Vw_vadd_VwVw(acc, Q6_V_vror_VR(acc, sh));
    return ((const int32_t *)(const void *)&acc)[0];
}

/* 4 bytes A[k..k+3] of a row as one word; bytes at k >= K read as 0. */
static inline int32_t a_word(const int8_t *row, int k, int K, int fast)
{
    if (fast)
        return *(const int32_t *)(const void *)(row + k);
    uint32_t w = 0;
    for (int t = 0; t < 4; t++)
        if (k + t < K)
            w |= (uint32_t)(uint8_t)row[k + t] << (8 * t);
    return (int32_t)w;
}

#define VRMPY(acc, b, a) (acc) = Q6_Vw_vrmpyacc_VwVubRb((acc), (b), (a))

/* One panel (128 columns) for 4 rows. */
static inline __attribute__((always_inline)) void tile4(const int8_t *A, int lda, const HVX_Vector *bp,
                                                        const HVX_Vector bias[4], const int32_t corr[4],
                                                        int8_t *C, int ldc, int cols, int K, int fast,
                                                        const rq_vecs *q)
{
    const int8_t *r0 = A, *r1 = A + lda, *r2 = A + 2 * (size_t)lda, *r3 = A + 3 * (size_t)lda;
    HVX_Vector c0 = Q6_V_vsplat_R(corr[0]);
    HVX_Vector c1 = Q6_V_vsplat_R(corr[1]);
    HVX_Vector c2 = Q6_V_vsplat_R(corr[2]);
    HVX_Vector c3 = Q6_V_vsplat_R(corr[3]);
    HVX_Vector a00 = Q6_Vw_vadd_VwVw(bias[0], c0), a01 = Q6_Vw_vadd_VwVw(bias[1], c0);
    HVX_Vector a02 = Q6_Vw_vadd_VwVw(bias[2], c0), a03 = Q6_Vw_vadd_VwVw(bias[3], c0);
    HVX_Vector a10 = Q6_Vw_vadd_VwVw(bias[0], c1), a11 = Q6_Vw_vadd_VwVw(bias[1], c1);
    HVX_Vector a12 = Q6_Vw_vadd_VwVw(bias[2], c1), a13 = Q6_Vw_vadd_VwVw(bias[3], c1);
    HVX_Vector a20 = Q6_Vw_vadd_VwVw(bias[0], c2), a21 = Q6_Vw_vadd_VwVw(bias[1], c2);
    HVX_Vector a22 = Q6_Vw_vadd_VwVw(bias[2], c2), a23 = Q6_Vw_vadd_VwVw(bias[3], c2);
    HVX_Vector a30 = Q6_Vw_vadd_VwVw(bias[0], c3), a31 = Q6_Vw_vadd_VwVw(bias[1], c3);
    HVX_Vector a32 = Q6_Vw_vadd_VwVw(bias[2], c3), a33 = Q6_Vw_vadd_VwVw(bias[3], c3);
    int kg_n = (K + 3) / 4; /* counted loop: a hardware loop the pipeliner can schedule */
    for (int g = 0; g < kg_n; g++) {
        int k = 4 * g;
        HVX_Vector b0 = bp[0], b1 = bp[1], b2 = bp[2], b3 = bp[3];
        bp += PANEL_VECS;
        int32_t w0 = a_word(r0, k, K, fast), w1 = a_word(r1, k, K, fast);
        int32_t w2 = a_word(r2, k, K, fast), w3 = a_word(r3, k, K, fast);
        VRMPY(a00, b0, w0); VRMPY(a01, b1, w0); VRMPY(a02, b2, w0); VRMPY(a03, b3, w0);
        VRMPY(a10, b0, w1); VRMPY(a11, b1, w1); VRMPY(a12, b2, w1); VRMPY(a13, b3, w1);
        VRMPY(a20, b0, w2); VRMPY(a21, b1, w2); VRMPY(a22, b2, w2); VRMPY(a23, b3, w2);
        VRMPY(a30, b0, w3); VRMPY(a31, b1, w3); VRMPY(a32, b2, w3); VRMPY(a33, b3, w3);
    }
    store_row(C, requant_panel(a00, a01, a02, a03, q), cols);
    store_row(C + ldc, requant_panel(a10, a11, a12, a13, q), cols);
    store_row(C + 2 * (size_t)ldc, requant_panel(a20, a21, a22, a23, q), cols);
    store_row(C + 3 * (size_t)ldc, requant_panel(a30, a31, a32, a33, q), cols);
}

/* One panel for 1 row. */
static inline __attribute__((always_inline)) void tile1(const int8_t *A, const HVX_Vector *bp,
                                                        const HVX_Vector bias[4], int32_t corr, int8_t *C,
                                                        int cols, int K, int fast, const rq_vecs *q)
{
    HVX_Vector c0 = Q6_V_vsplat_R(corr);
    HVX_Vector a0 = Q6_Vw_vadd_VwVw(bias[0], c0), a1 = Q6_Vw_vadd_VwVw(bias[1], c0);
    HVX_Vector a2 = Q6_Vw_vadd_VwVw(bias[2], c0), a3 = Q6_Vw_vadd_VwVw(bias[3], c0);
    int kg_n = (K + 3) / 4;
    for (int g = 0; g < kg_n; g++) {
        int32_t w = a_word(A, 4 * g, K, fast);
        VRMPY(a0, bp[0], w); VRMPY(a1, bp[1], w); VRMPY(a2, bp[2], w); VRMPY(a3, bp[3], w);
        bp += PANEL_VECS;
    }
    store_row(C, requant_panel(a0, a1, a2, a3, q), cols);
}

/* bias[col0 .. col0+127] as 4 word vectors (zeros past N or without bias) */
static void load_bias(const int32_t *bias, int col0, int N, HVX_Vector bv[4])
{
    for (int v = 0; v < PANEL_VECS; v++) {
        int c = col0 + 32 * v;
        int nb = c >= N ? 0 : (N - c < 32 ? N - c : 32);
        if (bias && nb == 32)
            bv[v] = *(const hvx_uvec *)(const void *)(bias + c);
        else if (bias && nb > 0)
            bv[v] = hvx_load_partial(bias + c, (size_t)nb * sizeof(int32_t));
        else
            bv[v] = Q6_V_vzero();
    }
}

/* Rows [m0, m0+R) across all panels; R = 4 or 1. The +128 correction
 * -128 * rowsum is computed once per row. */
static inline __attribute__((always_inline)) void matmul_rows(int R, const int8_t *A, int lda,
                                                              const uint8_t *packed_b, const int32_t *bias,
                                                              int8_t *C, int ldc, int N, int K, int fast,
                                                              const rq_vecs *q)
{
    int32_t corr[4] = {0, 0, 0, 0};
    for (int r = 0; r < R; r++)
        corr[r] = (int32_t)(0u - 128u * (uint32_t)rowsum_i8(A + (size_t)r * lda, K));
    int kg_n = (K + 3) / 4;
    int np = (N + PANEL_COLS - 1) / PANEL_COLS;
    for (int p = 0; p < np; p++) {
        int col0 = p * PANEL_COLS;
        int cols = N - col0 < PANEL_COLS ? N - col0 : PANEL_COLS;
        HVX_Vector bv[PANEL_VECS];
        load_bias(bias, col0, N, bv);
        const HVX_Vector *bp = (const HVX_Vector *)(const void *)packed_b + (size_t)p * kg_n * PANEL_VECS;
        if (R == 4)
            tile4(A, lda, bp, bv, corr, C + col0, ldc, cols, K, fast, q);
        else
            tile1(A, bp, bv, corr[0], C + col0, cols, K, fast, q);
    }
}

void hvx_matmul_i8(const int8_t *A, int lda, const uint8_t *packed_b, const int32_t *bias,
                   int8_t *C, int ldc, int M, int N, int K, const hx_requant *rq)
{
    if (M <= 0 || N <= 0 || K < 0)
        return;
    rq_vecs q;
    rq_setup(&q, rq);
    int fast = ((uintptr_t)A % 4 == 0) && (lda % 4 == 0) && (K % 4 == 0);
    int m = 0;
    if (fast) {
        for (; m + 4 <= M; m += 4)
            matmul_rows(4, A + (size_t)m * lda, lda, packed_b, bias, C + (size_t)m * ldc, ldc, N, K, 1, &q);
        for (; m < M; m++)
            matmul_rows(1, A + (size_t)m * lda, lda, packed_b, bias, C + (size_t)m * ldc, ldc, N, K, 1, &q);
    } else {
        for (; m + 4 <= M; m += 4)
            matmul_rows(4, A + (size_t)m * lda, lda, packed_b, bias, C + (size_t)m * ldc, ldc, N, K, 0, &q);
        for (; m < M; m++)
            matmul_rows(1, A + (size_t)m * lda, lda, packed_b, bias, C + (size_t)m * ldc, ldc, N, K, 0, &q);
    }
}
