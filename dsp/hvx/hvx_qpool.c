/*
 * hvx_qpool.c - the steps of QMAXPOOL, QGLOBAL_AVGPOOL and QAVGPOOL (hvx_qpool.h).
 */
#include "hvx_qpool.h"

#include "hvx_util.h"

static inline HVX_Vector vmax(HVX_Vector a, HVX_Vector b, int is_signed)
{
    return is_signed ? Q6_Vb_vmax_VbVb(a, b) : Q6_Vub_vmax_VubVub(a, b);
}

/* 128 bytes at p, of which the first `need` matter: a full load unless it would reach x_end */
static inline HVX_Vector load_upto(const uint8_t *p, size_t need, const uint8_t *x_end)
{
    if ((size_t)(x_end - p) >= HVX_BYTES)
        return *(const hvx_uvec *)(const void *)p;
    return hvx_load_upto(p, need < HVX_BYTES ? need : HVX_BYTES);
}

void hvx_maxpool_rows(const uint8_t *row0, size_t step, int nrows, size_t n, int is_signed, const uint8_t *x_end,
                      uint8_t *t)
{
    for (size_t q = 0; q < n; q += HVX_BYTES) {
        size_t need = n - q;
        HVX_Vector m = load_upto(row0 + q, need, x_end);
        for (int r = 1; r < nrows; r++)
            m = vmax(m, load_upto(row0 + (size_t)r * step + q, need, x_end), is_signed);
        if (need >= HVX_BYTES)
            *(hvx_uvec *)(void *)(t + q) = m;
        else
            hvx_store_first(t + q, m, need);
    }
}

/* the max over the taps of 128 consecutive window starts p[0, 128) */
static inline HVX_Vector taps_max(const uint8_t *p, int taps, int dilation, int is_signed)
{
    HVX_Vector m = *(const hvx_uvec *)(const void *)p;
    for (int j = 1; j < taps; j++)
        m = vmax(m, *(const hvx_uvec *)(const void *)(p + (size_t)j * (size_t)dilation), is_signed);
    return m;
}

void hvx_maxpool_taps(const uint8_t *t, size_t n, int stride, int taps, int dilation, int is_signed,
                      const uint8_t *lut, uint8_t *y)
{
    HVX_Vector t0 = Q6_V_vzero(), t1 = Q6_V_vzero();
    if (lut) {
        t0 = ((const HVX_Vector *)(const void *)lut)[0];
        t1 = ((const HVX_Vector *)(const void *)lut)[1];
    }
    for (size_t o = 0; o < n; o += HVX_BYTES) {
        const uint8_t *p = t + o * (size_t)stride;
        HVX_Vector m = taps_max(p, taps, dilation, is_signed);
        if (stride == 2) /* the even bytes of the window starts 2o .. 2o + 255 */
            m = Q6_Vb_vpacke_VhVh(taps_max(p + HVX_BYTES, taps, dilation, is_signed), m);
        if (lut)
            m = hvx_lut256(m, t0, t1);
        if (n - o >= HVX_BYTES)
            *(hvx_uvec *)(void *)(y + o) = m;
        else
            hvx_store_first(y + o, m, n - o);
    }
}

void hvx_avgpool_rows(const uint8_t *row0, size_t step, int nrows, size_t n, int is_signed, const uint8_t *x_end,
                      uint16_t *t)
{
    HVX_Vector flip = Q6_V_vsplat_R(is_signed ? (int32_t)0x80808080u : 0);
    for (size_t q = 0; q < n; q += HVX_BYTES) {
        size_t need = n - q;
        HVX_VectorPair acc = Q6_W_vcombine_VV(Q6_V_vzero(), Q6_V_vzero()); /* even, odd columns */
        for (int r = 0; r < nrows; r++) {
            HVX_Vector v = Q6_V_vxor_VV(load_upto(row0 + (size_t)r * step + q, need, x_end), flip);
            acc = Q6_Wuh_vmpyacc_WuhVubRub(acc, v, 0x01010101u);
        }
        HVX_VectorPair s = Q6_W_vshuff_VVR(Q6_V_hi_W(acc), Q6_V_lo_W(acc), -2); /* column order */
        uint8_t *out = (uint8_t *)(void *)(t + q);
        if (need >= HVX_BYTES) {
            *(hvx_uvec *)(void *)out = Q6_V_lo_W(s);
            *(hvx_uvec *)(void *)(out + HVX_BYTES) = Q6_V_hi_W(s);
        } else if (need > HVX_BYTES / 2) {
            *(hvx_uvec *)(void *)out = Q6_V_lo_W(s);
            hvx_store_first(out + HVX_BYTES, Q6_V_hi_W(s), 2 * need - HVX_BYTES);
        } else {
            hvx_store_first(out, Q6_V_lo_W(s), 2 * need);
        }
    }
}

/* the sums over the taps of 64 consecutive window starts p[0, 64) */
static inline HVX_Vector taps_sum(const uint16_t *p, int taps)
{
    HVX_Vector s = *(const hvx_uvec *)(const void *)p;
    for (int j = 1; j < taps; j++)
        s = Q6_Vh_vadd_VhVh(s, *(const hvx_uvec *)(const void *)(p + j));
    return s;
}

void hvx_avgpool_taps(const uint16_t *t, size_t n, int stride, int taps, uint16_t *y)
{
    for (size_t o = 0; o < n; o += HVX_BYTES / 2) {
        const uint16_t *p = t + o * (size_t)stride;
        HVX_Vector s = taps_sum(p, taps);
        if (stride == 2) /* the even halfwords of the window starts 2o .. 2o + 127 */
            s = Q6_Vh_vpacke_VwVw(taps_sum(p + HVX_BYTES / 2, taps), s);
        if (n - o >= HVX_BYTES / 2)
            *(hvx_uvec *)(void *)(y + o) = s;
        else
            hvx_store_first((uint8_t *)(void *)(y + o), s, 2 * (n - o));
    }
}

/* the words q of 32 outputs and their near-tie flags (words of 0 or 1) */
typedef struct avg_words {
    HVX_Vector q, f;
} avg_words;

typedef struct avg_consts {
    HVX_Vector bias, mul, half, mask, lo_edge, hi_edge, zy, one;
    int shift;
} avg_consts;

static inline avg_words avg_finish_words(HVX_Vector u, const avg_consts *k)
{
    HVX_Vector s = Q6_Vw_vsub_VwVw(u, k->bias);
    HVX_Vector p = Q6_Vw_vasl_VwR(Q6_Vw_vmpyio_VwVh(s, k->mul), 16); /* S * mul: |P| < 2^30, exact */
    p = Q6_Vw_vmpyieacc_VwVwVuh(p, s, k->mul);
    HVX_Vector x = Q6_Vw_vadd_VwVw(p, k->half), frac = Q6_V_vand_VV(x, k->mask);
    HVX_VectorPred near = Q6_Q_or_QQ(Q6_Q_vcmp_gt_VwVw(k->lo_edge, frac), Q6_Q_vcmp_gt_VwVw(frac, k->hi_edge));
    avg_words w = {Q6_Vw_vadd_VwVw(Q6_Vw_vasr_VwR(x, k->shift), k->zy), Q6_V_vmux_QVV(near, k->one, Q6_V_vzero())};
    return w;
}

/* 128 bytes of four word vectors in order, saturated to u8 or i8 */
static inline HVX_Vector pack_words(HVX_Vector w0, HVX_Vector w1, HVX_Vector w2, HVX_Vector w3, int is_signed)
{
    HVX_Vector h0 = Q6_Vh_vpack_VwVw_sat(w1, w0), h1 = Q6_Vh_vpack_VwVw_sat(w3, w2);
    return is_signed ? Q6_Vb_vpack_VhVh_sat(h1, h0) : Q6_Vub_vpack_VhVh_sat(h1, h0);
}

void hvx_avgpool_finish(const uint16_t *u, size_t n, int32_t bias, int32_t mul, int shift, int32_t margin, int32_t zy,
                        int is_signed, uint8_t *y, uint8_t *flag)
{
    avg_consts k = {Q6_V_vsplat_R(bias),
                    Q6_V_vsplat_R(mul),
                    Q6_V_vsplat_R(1 << (shift - 1)),
                    Q6_V_vsplat_R((int32_t)((1u << shift) - 1u)),
                    Q6_V_vsplat_R(margin + 1),
                    Q6_V_vsplat_R((int32_t)((1u << shift) - 1u) - margin),
                    Q6_V_vsplat_R(zy),
                    Q6_V_vsplat_R(1),
                    shift};
    for (size_t o = 0; o < n; o += HVX_BYTES) {
        HVX_VectorPair a = Q6_Wuw_vunpack_Vuh(*(const hvx_uvec *)(const void *)(u + o));
        HVX_VectorPair b = Q6_Wuw_vunpack_Vuh(*(const hvx_uvec *)(const void *)(u + o + HVX_BYTES / 2));
        avg_words w0 = avg_finish_words(Q6_V_lo_W(a), &k), w1 = avg_finish_words(Q6_V_hi_W(a), &k);
        avg_words w2 = avg_finish_words(Q6_V_lo_W(b), &k), w3 = avg_finish_words(Q6_V_hi_W(b), &k);
        HVX_Vector q = pack_words(w0.q, w1.q, w2.q, w3.q, is_signed);
        HVX_Vector f = pack_words(w0.f, w1.f, w2.f, w3.f, 0);
        if (n - o >= HVX_BYTES) {
            *(hvx_uvec *)(void *)(y + o) = q;
            *(hvx_uvec *)(void *)(flag + o) = f;
        } else {
            hvx_store_first(y + o, q, n - o);
            hvx_store_first(flag + o, f, n - o);
        }
    }
}

uint32_t hvx_sum_bytes(const uint8_t *x, size_t n, int is_signed)
{
    /* i8: the bytes ^ 0x80 are x + 128 as u8, so the sum is theirs minus 128 n */
    HVX_Vector flip = Q6_V_vsplat_R(is_signed ? (int32_t)0x80808080u : 0), acc = Q6_V_vzero();
    size_t i = 0;
    for (; i + HVX_BYTES <= n; i += HVX_BYTES) {
        HVX_Vector v = Q6_V_vxor_VV(*(const hvx_uvec *)(const void *)(x + i), flip);
        acc = Q6_Vuw_vrmpyacc_VuwVubRub(acc, v, 0x01010101u);
    }
    if (i < n) {
        HVX_Vector v = Q6_V_vxor_VV(hvx_load_upto(x + i, n - i), flip);
        v = Q6_V_vmux_QVV(Q6_Q_vsetq_R((int32_t)(n - i)), v, Q6_V_vzero());
        acc = Q6_Vuw_vrmpyacc_VuwVubRub(acc, v, 0x01010101u);
    }
    for (int sh = HVX_BYTES / 2; sh >= 4; sh >>= 1)
        acc = Q6_Vw_vadd_VwVw(acc, Q6_V_vror_VR(acc, sh));
    return ((const uint32_t *)(const void *)&acc)[0] - (is_signed ? 128u * (uint32_t)n : 0u);
}

int32_t hvx_max_bytes(const uint8_t *x, size_t n, int is_signed)
{
    HVX_Vector lowest = Q6_V_vsplat_R(is_signed ? (int32_t)0x80808080u : 0), m = lowest;
    size_t i = 0;
    for (; i + HVX_BYTES <= n; i += HVX_BYTES)
        m = vmax(m, *(const hvx_uvec *)(const void *)(x + i), is_signed);
    if (i < n)
        m = vmax(m, Q6_V_vmux_QVV(Q6_Q_vsetq_R((int32_t)(n - i)), hvx_load_upto(x + i, n - i), lowest), is_signed);
    for (int sh = HVX_BYTES / 2; sh >= 1; sh >>= 1)
        m = vmax(m, Q6_V_vror_VR(m, sh), is_signed);
    uint8_t b;
    memcpy(&b, &m, 1);
    return is_signed ? (int8_t)b : b;
}
