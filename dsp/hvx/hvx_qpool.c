/*
 * hvx_qpool.c - the steps of QMAXPOOL and QGLOBAL_AVGPOOL (hvx_qpool.h).
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
