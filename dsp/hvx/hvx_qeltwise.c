/*
 * hvx_qeltwise.c - QADD and QMUL blocks (hvx_qeltwise.h).
 */
#include "hvx_qeltwise.h"

#include "hvx_requant.h"
#include "hvx_util.h"

/* |r| a normal float below limit */
static int normal_below(float r, float limit)
{
    float m = r < 0.0f ? -r : r;
    return m >= 0x1p-126f && m < limit;
}

int hvx_qbin_init(hvx_qbin *q, int mul, int x_signed, int y_signed, float ra, float rb, int32_t za, int32_t zb,
                  int32_t zy, int32_t lo, int32_t hi)
{
    float s = 510.0f * ((ra < 0.0f ? -ra : ra) + (rb < 0.0f ? -rb : rb)) + 256.0f;
    q->mul = mul, q->x_signed = x_signed, q->y_signed = y_signed;
    q->za = za, q->zb = zb, q->zy = zy, q->lo = lo, q->hi = hi;
    q->margin = mul ? 8 : (int32_t)(5.0f * s / 256.0f) + 4;
    memcpy(&q->ra_bits, &ra, 4);
    memcpy(&q->rb_bits, &rb, 4);
    return mul ? normal_below(ra, 0x1p15f) : normal_below(ra, 0x1p6f) && normal_below(rb, 0x1p6f);
}

/* 128 inputs minus their zero point, as two vectors of halfwords (elements 0..63, 64..127) */
static inline HVX_VectorPair centred(const uint8_t *p, int step, int x_signed, int32_t z)
{
    HVX_Vector v = step ? *(const hvx_uvec *)(const void *)p : Q6_Vb_vsplat_R(*p);
    HVX_VectorPair h = x_signed ? Q6_Wh_vunpack_Vb(v) : Q6_Wuh_vunpack_Vub(v);
    HVX_Vector zh = Q6_Vh_vsplat_R(z);
    return Q6_W_vcombine_VV(Q6_Vh_vsub_VhVh(Q6_V_hi_W(h), zh), Q6_Vh_vsub_VhVh(Q6_V_lo_W(h), zh));
}

/* 4 vectors of 32 words (elements 0..127 in order) as 128 bytes, saturated to Y's type */
static inline HVX_Vector pack_words(const HVX_Vector w[4], int y_signed)
{
    HVX_Vector h0 = Q6_Vh_vpack_VwVw_sat(w[1], w[0]), h1 = Q6_Vh_vpack_VwVw_sat(w[3], w[2]);
    return y_signed ? Q6_Vb_vpack_VhVh_sat(h1, h0) : Q6_Vub_vpack_VhVh_sat(h1, h0);
}

int hvx_qbin_block(const hvx_qbin *q, const uint8_t *a, int a_step, const uint8_t *b, int b_step, uint8_t *y,
                   uint8_t near_tie[128])
{
    HVX_VectorPair qa = centred(a, a_step, q->x_signed, q->za), qb = centred(b, b_step, q->x_signed, q->zb);
    HVX_Vector tlo = Q6_V_vsplat_R(q->lo - q->zy), thi = Q6_V_vsplat_R(q->hi - q->zy), zy = Q6_V_vsplat_R(q->zy);
    HVX_Vector ra = Q6_V_vsplat_R((int32_t)q->ra_bits), rb = Q6_V_vsplat_R((int32_t)q->rb_bits);
    HVX_Vector w[4], bad[4]; /* element 32 v + j in lane j of w[v]; its tie flag in bad[v] */
    for (int v = 0; v < 4; v++)
        bad[v] = Q6_V_vzero();
    for (int half = 0; half < 2; half++) {
        HVX_Vector ha = half ? Q6_V_hi_W(qa) : Q6_V_lo_W(qa), hb = half ? Q6_V_hi_W(qb) : Q6_V_lo_W(qb);
        if (q->mul) {
            HVX_VectorPair p = Q6_Ww_vmpy_VhVh(ha, hb); /* even elements, odd elements */
            HVX_VectorPair pw = hvx_interleave_words(Q6_V_lo_W(p), Q6_V_hi_W(p));
            w[2 * half] = hvx_requant_words32(Q6_V_lo_W(pw), ra, tlo, thi, zy, &bad[2 * half]);
            w[2 * half + 1] = hvx_requant_words32(Q6_V_hi_W(pw), ra, tlo, thi, zy, &bad[2 * half + 1]);
            continue;
        }
        HVX_VectorPair wa = Q6_Ww_vunpack_Vh(ha), wb = Q6_Ww_vunpack_Vh(hb);
        for (int part = 0; part < 2; part++) {
            int v = 2 * half + part;
            HVX_Vector xa = part ? Q6_V_hi_W(wa) : Q6_V_lo_W(wa), xb = part ? Q6_V_hi_W(wb) : Q6_V_lo_W(wb);
            HVX_Vector r = Q6_Vw_vadd_VwVw(hvx_fixed16_mul(xa, ra, &bad[v]), hvx_fixed16_mul(xb, rb, &bad[v]));
            w[v] = hvx_round16(r, q->margin, tlo, thi, zy, &bad[v]);
        }
    }
    *(hvx_uvec *)(void *)y = pack_words(w, q->y_signed);
    HVX_Vector any = Q6_V_vor_VV(Q6_V_vor_VV(bad[0], bad[1]), Q6_V_vor_VV(bad[2], bad[3]));
    if (!hvx_any_lane(any))
        return 0;
    *(hvx_uvec *)(void *)near_tie = pack_words(bad, 0);
    return 1;
}
