/*
 * hvx_qgemm.c - int32 accumulators of a u8/i8 GEMM with zero points (hvx_qgemm.h).
 *
 * Inner loop as hvx_matmul_i8: Vx.w += vrmpy(Vu.ub, Rt.b) (S signed) or Vx.uw += vrmpy(Vu.ub, Rt.ub)
 * (S unsigned), 4 rows x 128 columns = 16 accumulators, 4 packed vectors and 4 scalar words per 4 k.
 * The accumulators start at the zero-point terms, so the loop is the plain vrmpy one.
 */
#include "hvx_qgemm.h"

#include "hvx_requant.h"
#include "hvx_util.h"

#define PANEL_VECS 4
#define ONES_B 0x01010101

size_t hvx_qgemm_packed_bytes(size_t K, size_t N)
{
    return (K + 3) / 4 * ((N + HVX_QGEMM_PANEL - 1) / HVX_QGEMM_PANEL) * PANEL_VECS * HVX_BYTES;
}

size_t hvx_qgemm_row_bytes(size_t K) { return (K + HVX_BYTES - 1) / HVX_BYTES * HVX_BYTES; }

void hvx_qgemm_copy_row(const uint8_t *s, size_t K, uint8_t *row)
{
    HVX_Vector *out = (HVX_Vector *)(void *)row;
    size_t nb = K / HVX_BYTES, tail = K % HVX_BYTES;
    for (size_t i = 0; i < nb; i++)
        out[i] = *(const hvx_uvec *)(const void *)(s + i * HVX_BYTES);
    if (tail)
        out[nb] = hvx_load_partial(s + nb * HVX_BYTES, tail);
}

/* 128 bytes of V row k from column c (fewer past N, 0 past K), +voff */
static inline HVX_Vector v_row(const uint8_t *V, size_t ld, size_t k, size_t K, size_t c, size_t N, HVX_Vector off)
{
    if (k >= K)
        return Q6_V_vzero();
    const uint8_t *p = V + k * ld + c;
    HVX_Vector v = N - c >= HVX_BYTES ? *(const hvx_uvec *)(const void *)p : hvx_load_partial(p, N - c);
    return Q6_V_vxor_VV(v, off);
}

/* 4 rows of 128 columns -> 4 vectors of 32 columns x 4 k: bytes then halfwords interleaved */
void hvx_qgemm_pack(const uint8_t *V, size_t ld, int v_signed, size_t K, size_t N, uint8_t *packed)
{
    HVX_Vector off = Q6_Vb_vsplat_R(v_signed ? 0x80 : 0);
    HVX_Vector *out = (HVX_Vector *)(void *)packed;
    size_t kg_n = (K + 3) / 4;
    for (size_t c = 0; c < N; c += HVX_QGEMM_PANEL)
        for (size_t g = 0; g < kg_n; g++, out += PANEL_VECS) {
            size_t k = 4 * g;
            HVX_Vector r0 = v_row(V, ld, k, K, c, N, off), r1 = v_row(V, ld, k + 1, K, c, N, off);
            HVX_Vector r2 = v_row(V, ld, k + 2, K, c, N, off), r3 = v_row(V, ld, k + 3, K, c, N, off);
            HVX_VectorPair p01 = Q6_W_vshuff_VVR(r1, r0, -1), p23 = Q6_W_vshuff_VVR(r3, r2, -1);
            HVX_VectorPair lo = Q6_W_vshuff_VVR(Q6_V_lo_W(p23), Q6_V_lo_W(p01), -2);
            HVX_VectorPair hi = Q6_W_vshuff_VVR(Q6_V_hi_W(p23), Q6_V_hi_W(p01), -2);
            out[0] = Q6_V_lo_W(lo);
            out[1] = Q6_V_hi_W(lo);
            out[2] = Q6_V_lo_W(hi);
            out[3] = Q6_V_hi_W(hi);
        }
}

void hvx_qgemm_col_sums(const uint8_t *packed, size_t K, size_t N, int32_t *vsum)
{
    const HVX_Vector *bp = (const HVX_Vector *)(const void *)packed;
    HVX_Vector *out = (HVX_Vector *)(void *)vsum;
    size_t kg_n = (K + 3) / 4;
    for (size_t c = 0; c < N; c += HVX_QGEMM_PANEL, out += PANEL_VECS) {
        HVX_Vector s0 = Q6_V_vzero(), s1 = Q6_V_vzero(), s2 = Q6_V_vzero(), s3 = Q6_V_vzero();
        for (size_t g = 0; g < kg_n; g++, bp += PANEL_VECS) {
            s0 = Q6_Vuw_vrmpyacc_VuwVubRub(s0, bp[0], ONES_B);
            s1 = Q6_Vuw_vrmpyacc_VuwVubRub(s1, bp[1], ONES_B);
            s2 = Q6_Vuw_vrmpyacc_VuwVubRub(s2, bp[2], ONES_B);
            s3 = Q6_Vuw_vrmpyacc_VuwVubRub(s3, bp[3], ONES_B);
        }
        out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
    }
}

/* sum of a copied row's bytes (zero padded), signed or not */
static int32_t qgemm_row_sum(const uint8_t *row, size_t K, int s_signed)
{
    const HVX_Vector *v = (const HVX_Vector *)(const void *)row;
    HVX_Vector acc = Q6_V_vzero(), ones = Q6_Vb_vsplat_R(1);
    for (size_t i = 0; i < hvx_qgemm_row_bytes(K) / HVX_BYTES; i++)
        acc = s_signed ? Q6_Vw_vrmpyacc_VwVbVb(acc, v[i], ones) : Q6_Vuw_vrmpyacc_VuwVubRub(acc, v[i], ONES_B);
    for (int sh = HVX_BYTES / 2; sh >= 4; sh >>= 1)
        acc = Q6_Vw_vadd_VwVw(acc, Q6_V_vror_VR(acc, sh));
    return ((const int32_t *)(const void *)&acc)[0];
}

/* low 32 bits of a * splat(x), per word lane */
static inline HVX_Vector mul_w(HVX_Vector a, int32_t x)
{
    HVX_Vector b = Q6_V_vsplat_R(x);
    return Q6_Vw_vmpyieacc_VwVwVuh(Q6_Vw_vmpyieo_VhVh(a, b), a, b);
}

/* the start of row i's accumulators of panel vector v: bcol + brow + zv' (K zs - rowsum) - zs vsum */
static inline HVX_Vector qgemm_acc_start(const hvx_qgemm_cols *cols, size_t at, int32_t brow, int32_t zs, int32_t zk)
{
    HVX_Vector b = cols->bcol ? *(const HVX_Vector *)(const void *)(cols->bcol + at) : Q6_V_vzero();
    b = Q6_Vw_vadd_VwVw(b, Q6_V_vsplat_R(brow));
    b = Q6_Vw_vadd_VwVw(b, mul_w(*(const HVX_Vector *)(const void *)(cols->zvp + at), zk));
    return Q6_Vw_vsub_VwVw(b, mul_w(*(const HVX_Vector *)(const void *)(cols->vsum + at), zs));
}

#define VRMPY_S(acc, v, w) (acc) = Q6_Vw_vrmpyacc_VwVubRb((acc), (v), (w))
#define VRMPY_U(acc, v, w) (acc) = Q6_Vuw_vrmpyacc_VuwVubRub((acc), (v), (w))

/* R rows (4 or 1) of one panel: acc[i][v] for i < R; VR is the vrmpy form of S's signedness */
#define QGEMM_TILE(name, R, VR)                                                                            \
    static void name(const int32_t *const *w, const HVX_Vector *bp, size_t kg_n, HVX_Vector acc[4][4])     \
    {                                                                                                      \
        HVX_Vector a[4][4];                                                                                \
        for (int i = 0; i < R; i++)                                                                        \
            for (int v = 0; v < 4; v++)                                                                    \
                a[i][v] = acc[i][v];                                                                       \
        for (size_t g = 0; g < kg_n; g++, bp += PANEL_VECS) {                                              \
            HVX_Vector b0 = bp[0], b1 = bp[1], b2 = bp[2], b3 = bp[3];                                     \
            for (int i = 0; i < R; i++) {                                                                  \
                int32_t s = w[i][g];                                                                       \
                VR(a[i][0], b0, s);                                                                        \
                VR(a[i][1], b1, s);                                                                        \
                VR(a[i][2], b2, s);                                                                        \
                VR(a[i][3], b3, s);                                                                        \
            }                                                                                              \
        }                                                                                                  \
        for (int i = 0; i < R; i++)                                                                        \
            for (int v = 0; v < 4; v++)                                                                    \
                acc[i][v] = a[i][v];                                                                       \
    }
QGEMM_TILE(qgemm_tile4_s, 4, VRMPY_S)
QGEMM_TILE(qgemm_tile1_s, 1, VRMPY_S)
QGEMM_TILE(qgemm_tile4_u, 4, VRMPY_U)
QGEMM_TILE(qgemm_tile1_u, 1, VRMPY_U)

void hvx_qgemm_rows(const uint8_t *s, int rows, int s_signed, const int32_t *zs, const int32_t *brow,
                    const uint8_t *packed, const hvx_qgemm_cols *cols, size_t K, size_t N, int32_t *acc)
{
    size_t rb = hvx_qgemm_row_bytes(K), kg_n = (K + 3) / 4;
    size_t ldacc = (N + HVX_QGEMM_PANEL - 1) / HVX_QGEMM_PANEL * HVX_QGEMM_PANEL;
    const int32_t *w[4];
    int32_t zk[4];
    for (int i = 0; i < rows; i++) {
        w[i] = (const int32_t *)(const void *)(s + i * rb);
        zk[i] = (int32_t)((uint32_t)K * (uint32_t)zs[i] - (uint32_t)qgemm_row_sum(s + i * rb, K, s_signed));
    }
    for (size_t c = 0; c < N; c += HVX_QGEMM_PANEL) {
        HVX_Vector a[4][4];
        for (int i = 0; i < rows; i++)
            for (int v = 0; v < PANEL_VECS; v++)
                a[i][v] = qgemm_acc_start(cols, c + 32 * (size_t)v, brow[i], zs[i], zk[i]);
        const HVX_Vector *bp = (const HVX_Vector *)(const void *)packed + c / HVX_QGEMM_PANEL * kg_n * PANEL_VECS;
        if (rows == 4)
            (s_signed ? qgemm_tile4_s : qgemm_tile4_u)(w, bp, kg_n, a);
        else
            for (int i = 0; i < rows; i++)
                (s_signed ? qgemm_tile1_s : qgemm_tile1_u)(w + i, bp, kg_n, a + i);
        for (int i = 0; i < rows; i++) {
            HVX_Vector *out = (HVX_Vector *)(void *)(acc + (size_t)i * ldacc + c);
            for (int v = 0; v < PANEL_VECS; v++)
                out[v] = a[i][v];
        }
    }
}

void hvx_qgemm_store_words(const int32_t *acc, size_t n, uint8_t *y)
{
    const HVX_Vector *v = (const HVX_Vector *)(const void *)acc;
    size_t bytes = n * sizeof(int32_t), i = 0;
    for (; i + HVX_BYTES <= bytes; i += HVX_BYTES)
        *(hvx_uvec *)(void *)(y + i) = v[i / HVX_BYTES];
    if (i < bytes)
        hvx_store_first(y + i, v[i / HVX_BYTES], bytes - i);
}

/* One output, exactly ref_qmatmul_requant; the convert rounds to nearest, ties to even (the USR mode). */
static inline uint8_t requant_one(int32_t acc, float scale, int32_t zy, float tlo, float thi)
{
    float t = (float)acc * scale;
    t = t > tlo ? t : tlo; /* NaN: the lower bound, as the reference */
    t = t < thi ? t : thi;
    return (uint8_t)(Q6_R_convert_sf2w_R(t) + zy);
}

void hvx_qgemm_requant(const int32_t *acc, size_t n, const float *scale, size_t scale_step, int32_t zy, int y_signed,
                       uint8_t *y)
{
    int32_t lo = y_signed ? INT8_MIN : 0, hi = y_signed ? INT8_MAX : UINT8_MAX;
    float tlo = (float)(lo - zy), thi = (float)(hi - zy);
    HVX_Vector vtlo = Q6_V_vsplat_R(lo - zy), vthi = Q6_V_vsplat_R(hi - zy), vzy = Q6_V_vsplat_R(zy);
    size_t i = 0;
    if (hvx_aligned(acc)) {
        uint32_t s0;
        memcpy(&s0, scale, 4);
        HVX_Vector splat = Q6_V_vsplat_R((int32_t)s0);
        for (; i + HVX_BYTES <= n; i += HVX_BYTES) {
            const HVX_Vector *va = (const HVX_Vector *)(const void *)(acc + i);
            HVX_Vector w[4], bad = Q6_V_vzero();
            for (int v = 0; v < 4; v++) {
                HVX_Vector sb = scale_step ? *(const hvx_uvec *)(const void *)(scale + i + 32 * (size_t)v) : splat;
                w[v] = hvx_requant_words32(va[v], sb, vtlo, vthi, vzy, &bad);
            }
            if (hvx_any_lane(bad)) {
                for (size_t j = i; j < i + HVX_BYTES; j++)
                    y[j] = requant_one(acc[j], scale[j * scale_step], zy, tlo, thi);
                continue;
            }
            HVX_Vector h0 = Q6_Vh_vpack_VwVw_sat(w[1], w[0]), h1 = Q6_Vh_vpack_VwVw_sat(w[3], w[2]);
            HVX_Vector b = y_signed ? Q6_Vb_vpack_VhVh_sat(h1, h0) : Q6_Vub_vpack_VhVh_sat(h1, h0);
            *(hvx_uvec *)(void *)(y + i) = b;
        }
    }
    for (; i < n; i++)
        y[i] = requant_one(acc[i], scale[i * scale_step], zy, tlo, thi);
}
