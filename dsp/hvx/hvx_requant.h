/*
 * hvx_requant.h - ORT's float requantisation of int32 values in HVX fixed point (hvx_qgemm.h tells
 * why it is exact away from ties), shared by the integer GEMM and the integer elementwise kernels.
 */
#ifndef HEXFUSE_HVX_REQUANT_H
#define HEXFUSE_HVX_REQUANT_H

#include "hvx_util.h"

/* round(a * 2^16 * s) for 32 lanes, s = mant * 2^(e - 150) from the f32 bits, in fixed point:
 * M = mant << 7, L = e - 110, R = (sat(a, 2^(31-L)) << L) * M / 2^31 for L >= 0, else a * M / 2^31
 * rounded right by -L. The lanes whose scale is not a normal below 2^15 come back in *bad. */
static inline HVX_Vector hvx_fixed16_mul(HVX_Vector a, HVX_Vector sbits, HVX_Vector *bad)
{
    HVX_Vector e = Q6_V_vand_VV(Q6_Vuw_vlsr_VuwR(sbits, 23), Q6_V_vsplat_R(0xff));
    HVX_Vector mant = Q6_V_vor_VV(Q6_V_vand_VV(sbits, Q6_V_vsplat_R(0x7fffff)), Q6_V_vsplat_R(0x800000));
    HVX_Vector m = Q6_Vw_vasl_VwR(mant, 7), l = Q6_Vw_vsub_VwVw(e, Q6_V_vsplat_R(110));
    m = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(Q6_V_vzero(), sbits), Q6_Vw_vsub_VwVw(Q6_V_vzero(), m), m);
    *bad = Q6_V_vor_VV(*bad, Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(e, Q6_V_vzero()), Q6_V_vsplat_R(1), Q6_V_vzero()));
    *bad = Q6_V_vor_VV(*bad, Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(e, Q6_V_vsplat_R(141)), Q6_V_vsplat_R(1),
                                           Q6_V_vzero()));
    HVX_Vector zero = Q6_V_vzero(), l31 = Q6_V_vsplat_R(31);
    HVX_Vector lpos = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(l, zero), l31);
    HVX_Vector lneg = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(Q6_Vw_vsub_VwVw(zero, l), zero), l31);
    HVX_Vector bound = Q6_Vw_vsub_VwVw(Q6_Vw_vasl_VwVw(Q6_V_vsplat_R(1), Q6_Vw_vsub_VwVw(l31, lpos)),
                                       Q6_V_vsplat_R(1)); /* 2^(31 - L) - 1; L = 0: INT32_MAX */
    a = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(a, Q6_Vw_vsub_VwVw(zero, bound)), bound);
    a = Q6_Vw_vasl_VwVw(a, lpos);
    HVX_Vector r = Q6_Vw_vmpye_VwVuh(a, m);
    r = Q6_Vw_vmpyoacc_VwVwVh_s1_rnd_sat_shift(r, a, m);
    HVX_Vector rnd = Q6_Vuw_vlsr_VuwR(Q6_Vw_vasl_VwVw(Q6_V_vsplat_R(1), lneg), 1);
    return Q6_Vw_vasr_VwVw(Q6_Vw_vadd_VwVw_sat(r, rnd), lneg);
}

/* 32 outputs as words from R = 2^16 x the value: (R + 2^15) >> 16 clamped to [tlo, thi], + zy; lanes
 * whose R is within `margin` units of a tie are marked in *bad. */
static inline HVX_Vector hvx_round16(HVX_Vector r, int32_t margin, HVX_Vector tlo, HVX_Vector thi, HVX_Vector zy,
                                     HVX_Vector *bad)
{
    HVX_Vector d = Q6_Vw_vsub_VwVw(Q6_V_vand_VV(r, Q6_V_vsplat_R(0xffff)), Q6_V_vsplat_R(0x8000));
    HVX_VectorPred tie = Q6_Q_and_QQ(Q6_Q_vcmp_gt_VwVw(Q6_V_vsplat_R(margin + 1), d),
                                     Q6_Q_vcmp_gt_VwVw(d, Q6_V_vsplat_R(-margin - 1)));
    *bad = Q6_V_vor_VV(*bad, Q6_V_vmux_QVV(tie, Q6_V_vsplat_R(1), Q6_V_vzero()));
    HVX_Vector y = Q6_Vw_vasr_VwR(Q6_Vw_vadd_VwVw_sat(r, Q6_V_vsplat_R(0x8000)), 16);
    y = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(y, tlo), thi);
    return Q6_Vw_vadd_VwVw(y, zy);
}

/* ref_qmatmul_requant of 32 accumulators with the scales' bits sbits, tlo = lo - zy, thi = hi - zy:
 * lanes within 8 units of a tie (where f32's own rounding of the product could decide) in *bad */
static inline HVX_Vector hvx_requant_words32(HVX_Vector acc, HVX_Vector sbits, HVX_Vector tlo, HVX_Vector thi,
                                             HVX_Vector zy, HVX_Vector *bad)
{
    return hvx_round16(hvx_fixed16_mul(acc, sbits, bad), 8, tlo, thi, zy, bad);
}

static inline int hvx_any_lane(HVX_Vector v)
{
    for (int sh = HVX_BYTES / 2; sh >= 4; sh >>= 1)
        v = Q6_V_vor_VV(v, Q6_V_vror_VR(v, sh));
    return ((const int32_t *)(const void *)&v)[0] != 0;
}

#endif /* HEXFUSE_HVX_REQUANT_H */
