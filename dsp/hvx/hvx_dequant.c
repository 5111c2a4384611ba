/*
 * hvx_dequant.c - DequantizeLinear u8/i8 -> f32 (hvx_dequant.h).
 */
#include "hvx_dequant.h"

#include "hvx_requant.h"
#include "hvx_util.h"
#include "ref_qsoftmax.h"
#include "ref_quant.h"

typedef struct dq_consts {
    HVX_Vector zp, mant, sign_s, exp8;
} dq_consts;

static inline HVX_Vector splat_w(int32_t v) { return Q6_V_vsplat_R(v); }

/* the f32 bits of p 2^s (p: 32 bits, 0..8 leading zeros; s: 0 unless p's top bit is set) times scale's
 * 2^e, rounded to 24 bits (ties to even; bit 0 of p may hold the sticky bit of what lies below it),
 * negated where neg; a zero of scale's sign where a (|x - zp|) is 0 */
static inline HVX_Vector dq_bits(HVX_Vector p, HVX_Vector s, HVX_Vector a, HVX_VectorPred neg, const dq_consts *k)
{
    HVX_Vector zero = Q6_V_vzero();
    HVX_Vector lz = Q6_Vuw_vcl0_Vuw(p);
    HVX_Vector nrm = Q6_Vw_vasl_VwVw(p, lz);
    HVX_Vector m24 = Q6_Vuw_vlsr_VuwR(nrm, 8), rest = Q6_V_vand_VV(nrm, splat_w(0xff));
    HVX_VectorPred up = Q6_Q_vcmp_gt_VwVw(rest, splat_w(0x80));
    up = Q6_Q_or_QQ(up, Q6_Q_and_QQ(Q6_Q_vcmp_eq_VwVw(rest, splat_w(0x80)),
                                    Q6_Q_vcmp_eq_VwVw(Q6_V_vand_VV(m24, splat_w(1)), splat_w(1))));
    m24 = Q6_Vw_vadd_VwVw(m24, Q6_V_vmux_QVV(up, splat_w(1), zero));
    HVX_VectorPred carry = Q6_Q_vcmp_eq_VwVw(m24, splat_w(1 << 24));
    m24 = Q6_V_vmux_QVV(carry, splat_w(1 << 23), m24);
    HVX_Vector e = Q6_Vw_vsub_VwVw(Q6_Vw_vadd_VwVw(k->exp8, s), lz);
    e = Q6_Vw_vadd_VwVw(e, Q6_V_vmux_QVV(carry, splat_w(1), zero));
    HVX_Vector bits = Q6_V_vor_VV(Q6_Vw_vasl_VwR(e, 23), Q6_V_vand_VV(m24, splat_w(0x7fffff)));
    HVX_Vector sign = Q6_V_vxor_VV(k->sign_s, Q6_V_vmux_QVV(neg, splat_w((int32_t)0x80000000u), zero));
    bits = Q6_V_vor_VV(bits, sign);
    return Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(a, zero), k->sign_s, bits); /* 0 * scale: a zero of scale's sign */
}

/* 32 words x - zp (|x - zp| <= 255) -> the f32 bits of f32(x - zp) * scale */
static inline HVX_Vector dq_words(HVX_Vector xw, const dq_consts *k)
{
    HVX_Vector zero = Q6_V_vzero();
    HVX_Vector q = Q6_Vw_vsub_VwVw(xw, k->zp);
    HVX_VectorPred neg = Q6_Q_vcmp_gt_VwVw(zero, q);
    HVX_Vector a = Q6_V_vmux_QVV(neg, Q6_Vw_vsub_VwVw(zero, q), q);
    /* |q| * mantissa < 2^32: the low 32 bits of the product are all of it */
    HVX_Vector p = Q6_Vw_vmpyieacc_VwVwVuh(Q6_Vw_vmpyieo_VhVh(a, k->mant), a, k->mant);
    return dq_bits(p, zero, a, neg, k);
}

/* 32 words x - zp (|x - zp| < 2^16) -> the f32 bits of f32(x - zp) * scale. The product P = |q| m
 * (< 2^40) as hi 2^16 + lo (mantissa m = mh 2^16 + ml: hi = |q| mh + (|q| ml >> 16), lo its low 16
 * bits), then shifted right by s = max(0, bits(P) - 32) into 32 bits, what falls off ORed into bit 0 */
static inline HVX_Vector dq_words16(HVX_Vector xw, HVX_Vector mh, HVX_Vector ml, const dq_consts *k)
{
    HVX_Vector zero = Q6_V_vzero();
    HVX_Vector q = Q6_Vw_vsub_VwVw(xw, k->zp);
    HVX_VectorPred neg = Q6_Q_vcmp_gt_VwVw(zero, q);
    HVX_Vector a = Q6_V_vmux_QVV(neg, Q6_Vw_vsub_VwVw(zero, q), q);
    HVX_Vector pl = Q6_Vw_vmpyie_VwVuh(a, ml); /* < 2^32 as unsigned */
    HVX_Vector hi = Q6_Vw_vadd_VwVw(Q6_Vw_vmpyie_VwVuh(a, mh), Q6_Vuw_vlsr_VuwR(pl, 16));
    HVX_Vector lo = Q6_V_vand_VV(pl, splat_w(0xffff));
    HVX_Vector s = Q6_Vw_vmax_VwVw(Q6_Vw_vsub_VwVw(splat_w(16), Q6_Vuw_vcl0_Vuw(hi)), zero); /* 0..8 */
    HVX_Vector p = Q6_V_vor_VV(Q6_Vw_vasl_VwVw(hi, Q6_Vw_vsub_VwVw(splat_w(16), s)), Q6_Vw_vlsr_VwVw(lo, s));
    HVX_Vector below = Q6_V_vand_VV(lo, Q6_Vw_vsub_VwVw(Q6_Vw_vasl_VwVw(splat_w(1), s), splat_w(1)));
    p = Q6_V_vor_VV(p, Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(below, zero), splat_w(1), zero));
    return dq_bits(p, s, a, neg, k);
}

void hvx_dequant_i8_f32(const uint8_t *x, size_t n, int x_signed, int32_t zp, float scale, float *y)
{
    uint32_t sb;
    memcpy(&sb, &scale, 4);
    int32_t es = (int32_t)(sb >> 23 & 0xff);
    size_t i = 0;
    if (es >= 1 && es <= 245) {
        dq_consts k = {splat_w(zp), splat_w((int32_t)(sb & 0x7fffff) | 0x800000),
                       splat_w((int32_t)(sb & 0x80000000u)), splat_w(es + 8)};
        for (; i + HVX_BYTES <= n; i += HVX_BYTES) {
            HVX_Vector v = *(const hvx_uvec *)(const void *)(x + i);
            HVX_VectorPair h = x_signed ? Q6_Wh_vunpack_Vb(v) : Q6_Wuh_vunpack_Vub(v);
            HVX_VectorPair w0 = x_signed ? Q6_Ww_vunpack_Vh(Q6_V_lo_W(h)) : Q6_Wuw_vunpack_Vuh(Q6_V_lo_W(h));
            HVX_VectorPair w1 = x_signed ? Q6_Ww_vunpack_Vh(Q6_V_hi_W(h)) : Q6_Wuw_vunpack_Vuh(Q6_V_hi_W(h));
            hvx_uvec *out = (hvx_uvec *)(void *)(y + i);
            out[0] = dq_words(Q6_V_lo_W(w0), &k);
            out[1] = dq_words(Q6_V_hi_W(w0), &k);
            out[2] = dq_words(Q6_V_lo_W(w1), &k);
            out[3] = dq_words(Q6_V_hi_W(w1), &k);
        }
    }
    for (; i < n; i++) {
        int32_t xi = x_signed ? (int8_t)x[i] : x[i];
        y[i] = (float)(int32_t)((uint32_t)xi - (uint32_t)zp) * scale;
    }
}

void hvx_dequant_i16_f32(const uint16_t *x, size_t n, int x_signed, int32_t zp, float scale, float *y)
{
    uint32_t sb;
    memcpy(&sb, &scale, 4);
    int32_t es = (int32_t)(sb >> 23 & 0xff), m = (int32_t)(sb & 0x7fffff) | 0x800000;
    const uint8_t *p = (const uint8_t *)(const void *)x;
    size_t i = 0;
    if (es >= 1 && es <= 237) {
        dq_consts k = {splat_w(zp), splat_w(m), splat_w((int32_t)(sb & 0x80000000u)), splat_w(es + 8)};
        HVX_Vector mh = splat_w(m >> 16), ml = splat_w(m & 0xffff);
        for (; i + HVX_BYTES / 2 <= n; i += HVX_BYTES / 2) {
            HVX_Vector v = *(const hvx_uvec *)(const void *)(p + 2 * i);
            HVX_VectorPair w = x_signed ? Q6_Ww_vunpack_Vh(v) : Q6_Wuw_vunpack_Vuh(v);
            hvx_uvec *out = (hvx_uvec *)(void *)(y + i);
            out[0] = dq_words16(Q6_V_lo_W(w), mh, ml, &k);
            out[1] = dq_words16(Q6_V_hi_W(w), mh, ml, &k);
        }
    }
    for (; i < n; i++) {
        int32_t xi = x_signed ? (int16_t)x[i] : x[i];
        y[i] = (float)(int32_t)((uint32_t)xi - (uint32_t)zp) * scale;
    }
}

/* QuantizeLinear (hvx_dequant.h): a lane within (h >> 23) + QUANT_SLACK units of h from a tie takes the
 * reference. An f32 quotient within an ulp of the exact one (correctly rounded: half that) is within
 * 2^-23 H <= (h + 2) / 2^23 units of it, the estimate within 2: QUANT_SLACK 4 covers both. */
#define QUANT_SLACK 4

typedef struct q_consts {
    HVX_Vector recip, c, sbits, zp;
} q_consts;

/* 32 f32 bit patterns -> y as words (the packs saturate); near-tie, inf and NaN lanes 1 in *bad */
static inline HVX_Vector q_words(HVX_Vector b, const q_consts *k, HVX_Vector *bad)
{
    HVX_Vector zero = Q6_V_vzero(), one = splat_w(1);
    HVX_Vector e = Q6_V_vand_VV(Q6_Vuw_vlsr_VuwR(b, 23), splat_w(0xff));
    HVX_Vector a = Q6_Vw_vasl_VwR(Q6_V_vor_VV(Q6_V_vand_VV(b, splat_w(0x7fffff)), splat_w(0x800000)), 7);
    HVX_Vector h = Q6_Vw_vmpye_VwVuh(a, k->recip);
    h = Q6_Vw_vmpyoacc_VwVwVh_s1_rnd_sat_shift(h, a, k->recip); /* (a R + 2^30) >> 31 */
    HVX_Vector sh = Q6_Vw_vsub_VwVw(k->c, e);
    h = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(sh, splat_w(31)), zero, h);          /* < 1/4: 0 */
    h = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(splat_w(12), sh), splat_w(1 << 29), h); /* 2^17: saturates */
    sh = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(sh, splat_w(12)), splat_w(31));
    HVX_Vector half = Q6_Vw_vasl_VwVw(one, Q6_Vw_vsub_VwVw(sh, one));
    HVX_Vector mask = Q6_Vw_vsub_VwVw(Q6_Vw_vadd_VwVw(half, half), one);
    HVX_Vector d = Q6_Vw_vsub_VwVw(Q6_V_vand_VV(h, mask), half);
    HVX_Vector m = Q6_Vw_vadd_VwVw(Q6_Vw_vasr_VwR(h, 23), splat_w(QUANT_SLACK + 1)); /* the margin + 1 */
    HVX_VectorPred near = Q6_Q_and_QQ(Q6_Q_vcmp_gt_VwVw(m, d), Q6_Q_vcmp_gt_VwVw(d, Q6_Vw_vsub_VwVw(zero, m)));
    near = Q6_Q_or_QQ(near, Q6_Q_vcmp_eq_VwVw(e, splat_w(255))); /* inf, NaN: the reference */
    *bad = Q6_V_vmux_QVV(near, one, zero);
    HVX_Vector r = Q6_Vw_vasr_VwVw(Q6_Vw_vadd_VwVw(h, half), sh);
    HVX_VectorPred neg = Q6_Q_vcmp_gt_VwVw(zero, Q6_V_vxor_VV(b, k->sbits));
    r = Q6_V_vmux_QVV(neg, Q6_Vw_vsub_VwVw(zero, r), r);
    return Q6_Vw_vadd_VwVw(r, k->zp);
}

/* the `bytes` (> 0) bytes at p as a vector, the rest of it p's neighbours; 0 when bytes == 0 */
static inline HVX_Vector load_block_part(const uint8_t *p, size_t bytes)
{
    if (bytes >= HVX_BYTES)
        return *(const hvx_uvec *)(const void *)p;
    return bytes ? hvx_load_upto(p, bytes) : Q6_V_vzero();
}

/* the outputs of 128 elements: out[0] (8-bit) or out[0, 1] (16-bit); flags in fl[4] */
static inline void q_block(const uint8_t *p, size_t bytes, const q_consts *k, int y_bytes, int y_signed,
                           HVX_Vector out[2], HVX_Vector fl[4])
{
    HVX_Vector w[4];
    for (int j = 0; j < 4; j++) {
        size_t at = (size_t)j * HVX_BYTES;
        w[j] = q_words(load_block_part(p + at, bytes > at ? bytes - at : 0), k, &fl[j]);
    }
    if (y_bytes == 2) {
        out[0] = y_signed ? Q6_Vh_vpack_VwVw_sat(w[1], w[0]) : Q6_Vuh_vpack_VwVw_sat(w[1], w[0]);
        out[1] = y_signed ? Q6_Vh_vpack_VwVw_sat(w[3], w[2]) : Q6_Vuh_vpack_VwVw_sat(w[3], w[2]);
        return;
    }
    HVX_Vector h0 = Q6_Vh_vpack_VwVw_sat(w[1], w[0]), h1 = Q6_Vh_vpack_VwVw_sat(w[3], w[2]);
    out[0] = y_signed ? Q6_Vb_vpack_VhVh_sat(h1, h0) : Q6_Vub_vpack_VhVh_sat(h1, h0);
}

/* the bits of 32 words of 0 or 1 (bit i: word i) */
static inline uint32_t lane_bits(HVX_Vector f)
{
    static const int32_t index[32] __attribute__((aligned(128))) = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                                                    11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                                                    22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
    HVX_Vector v = Q6_Vw_vasl_VwVw(f, *(const HVX_Vector *)(const void *)index);
    for (int sh = HVX_BYTES / 2; sh >= 4; sh >>= 1)
        v = Q6_V_vor_VV(v, Q6_V_vror_VR(v, sh));
    uint32_t w;
    memcpy(&w, &v, 4);
    return w;
}

/* the reference's output for one lane near a tie */
typedef int32_t (*q_ref_fn)(float x, const void *ctx);

typedef struct q_lane_ref {
    q_ref_fn fn;
    const void *ctx;
} q_lane_ref;

/* the lanes of a block flagged near a tie, by the reference (into out, before it is stored: in place,
 * x is still whole) */
static void q_fix(const float *x, size_t cnt, const q_lane_ref *ref, int y_bytes, HVX_Vector out[2],
                  const HVX_Vector fl[4])
{
    uint8_t *o = (uint8_t *)(void *)out;
    for (size_t j = 0; j < 4; j++)
        for (uint32_t m = lane_bits(fl[j]); m; m &= m - 1) {
            size_t i = 32 * j + (size_t)__builtin_ctz(m);
            if (i >= cnt)
                return;
            uint32_t q = (uint32_t)ref->fn(x[i], ref->ctx);
            o[(size_t)y_bytes * i] = (uint8_t)q;
            if (y_bytes == 2)
                o[2 * i + 1] = (uint8_t)(q >> 8);
        }
}

static void q_store(uint8_t *y, const HVX_Vector out[2], size_t bytes)
{
    for (int j = 0; j < 2 && bytes; j++) {
        size_t part = bytes < HVX_BYTES ? bytes : HVX_BYTES;
        if (part == HVX_BYTES)
            *(hvx_uvec *)(void *)(y + (size_t)j * HVX_BYTES) = out[j];
        else
            hvx_store_first(y + (size_t)j * HVX_BYTES, out[j], part);
        bytes -= part;
    }
}

/* floor(num / d) for num < 2^54, d in [2^23, 2^24), a quotient below 2^31: an f32 estimate, one
 * correction from the remainder, then exact steps (Hexagon has no integer divide: the 64-bit helper
 * subtracts bit by bit, a few hundred packets a line of QSOFTMAX) */
static uint32_t div_floor(uint64_t num, uint64_t d)
{
    int64_t q = (int64_t)((float)num / (float)d), rem = (int64_t)num - q * (int64_t)d;
    q += (int64_t)((float)rem / (float)d);
    rem = (int64_t)num - q * (int64_t)d;
    for (; rem < 0; rem += (int64_t)d)
        q--;
    for (; rem >= (int64_t)d; rem -= (int64_t)d)
        q++;
    return (uint32_t)q;
}

/* the constants of y = x * num / den: R = floor(mn 2^k / md) in (2^29, 2^30] (k = 30, or 29 when mn >
 * md), c = k + 126 - en + ed, so that x num / den = ((mx << 7) R / 2^31) 2^(ex - c); 0 when num or den
 * is not normal or c < 32 (from 32 on, subnormal lanes give 0) */
static int q_consts_of(float num, float den, int32_t zp, q_consts *k)
{
    uint32_t nb, db;
    memcpy(&nb, &num, 4), memcpy(&db, &den, 4);
    int32_t en = (int32_t)(nb >> 23 & 0xff), ed = (int32_t)(db >> 23 & 0xff);
    if (en == 0 || en == 255 || ed == 0 || ed == 255)
        return 0;
    uint64_t mn = (nb & 0x7fffffu) | 0x800000u, md = (db & 0x7fffffu) | 0x800000u;
    int32_t sh = mn > md ? 29 : 30, c = sh + 126 - en + ed;
    if (c < 32)
        return 0;
    k->recip = splat_w((int32_t)div_floor(mn << sh, md));
    k->c = splat_w(c);
    k->sbits = splat_w((int32_t)((nb ^ db) & 0x80000000u));
    k->zp = splat_w(zp);
    return 1;
}

/* inlined into each caller: the constants stay in registers (called, the loop reloads them: 10% more
 * packets) */
static inline __attribute__((always_inline)) void q_run(const float *x, size_t n, const q_consts *k,
                                                        const q_lane_ref *ref, int y_bytes, int y_signed, void *y)
{
    const uint8_t *p = (const uint8_t *)(const void *)x;
    uint8_t *q = (uint8_t *)y;
    for (size_t i = 0; i < n; i += HVX_BYTES) {
        size_t cnt = n - i < HVX_BYTES ? n - i : HVX_BYTES;
        HVX_Vector out[2], fl[4];
        q_block(p + i * 4, cnt * 4, k, y_bytes, y_signed, out, fl);
        if (hvx_any_lane(Q6_V_vor_VV(Q6_V_vor_VV(fl[0], fl[1]), Q6_V_vor_VV(fl[2], fl[3]))))
            q_fix(x + i, cnt, ref, y_bytes, out, fl);
        q_store(q + i * (size_t)y_bytes, out, cnt * (size_t)y_bytes);
    }
}

typedef struct quant_ctx {
    float scale;
    int32_t zp, lo, hi;
} quant_ctx;

static int32_t quant_ref(float x, const void *ctx)
{
    const quant_ctx *c = (const quant_ctx *)ctx;
    return ref_quantize_linear(x, c->scale, c->zp, c->lo, c->hi);
}

int hvx_quant_f32(const float *x, size_t n, float scale, int32_t zp, int y_bytes, int y_signed, void *y)
{
    q_consts k;
    if (!q_consts_of(1.0f, scale, zp, &k))
        return 0;
    quant_ctx c = {scale, zp, y_bytes == 1 ? (y_signed ? INT8_MIN : 0) : (y_signed ? INT16_MIN : 0),
                   y_bytes == 1 ? (y_signed ? INT8_MAX : UINT8_MAX) : (y_signed ? INT16_MAX : UINT16_MAX)};
    q_lane_ref ref = {quant_ref, &c};
    q_run(x, n, &k, &ref, y_bytes, y_signed, y);
    return 1;
}

typedef struct qsoftmax_ctx {
    float sum, y_scale;
    int32_t zy, is_u8;
} qsoftmax_ctx;

static int32_t qsoftmax_ref(float t, const void *ctx)
{
    const qsoftmax_ctx *c = (const qsoftmax_ctx *)ctx;
    return ref_qsoftmax_out(t, c->sum, c->y_scale, c->zy, c->is_u8);
}

int hvx_qsoftmax_out(const float *t, size_t n, float sum, float y_scale, int32_t zy, int is_u8, uint8_t *y)
{
    q_consts k;
    if (!q_consts_of(y_scale, sum, zy, &k))
        return 0;
    qsoftmax_ctx c = {sum, y_scale, zy, is_u8};
    q_lane_ref ref = {qsoftmax_ref, &c};
    q_run(t, n, &k, &ref, 1, !is_u8, y);
    return 1;
}

/* the order key of 32 f32 bit patterns: NaN -> +0, a negative pattern ^ 0x7fffffff (so that signed
 * word order is f32 order, -0 just below +0) */
static inline HVX_Vector order_key(HVX_Vector b)
{
    HVX_Vector abs_mask = Q6_V_vsplat_R(0x7fffffff);
    HVX_VectorPred nan = Q6_Q_vcmp_gt_VwVw(Q6_V_vand_VV(b, abs_mask), Q6_V_vsplat_R(0x7f800000));
    b = Q6_V_vmux_QVV(nan, Q6_V_vzero(), b);
    return Q6_V_vxor_VV(b, Q6_V_vand_VV(Q6_Vw_vasr_VwR(b, 31), abs_mask));
}

static inline float float_of_key(int32_t k)
{
    uint32_t u = (uint32_t)(k < 0 ? k ^ 0x7fffffff : k);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void hvx_range_f32(const float *x, size_t n, float *lo, float *hi)
{
    const uint8_t *p = (const uint8_t *)(const void *)x;
    size_t bytes = n * sizeof(float), i = 0;
    HVX_Vector mn = Q6_V_vzero(), mx = Q6_V_vzero(); /* the keys of +0: the reference's start */
    for (; i + HVX_BYTES <= bytes; i += HVX_BYTES) {
        HVX_Vector k = order_key(*(const hvx_uvec *)(const void *)(p + i));
        mn = Q6_Vw_vmin_VwVw(mn, k), mx = Q6_Vw_vmax_VwVw(mx, k);
    }
    if (i < bytes) { /* the tail, the lanes past it +0 */
        HVX_Vector v = hvx_load_upto(p + i, bytes - i);
        HVX_Vector k = order_key(Q6_V_vmux_QVV(Q6_Q_vsetq_R((int32_t)(bytes - i)), v, Q6_V_vzero()));
        mn = Q6_Vw_vmin_VwVw(mn, k), mx = Q6_Vw_vmax_VwVw(mx, k);
    }
    for (int sh = HVX_BYTES / 2; sh >= 4; sh >>= 1) {
        mn = Q6_Vw_vmin_VwVw(mn, Q6_V_vror_VR(mn, sh));
        mx = Q6_Vw_vmax_VwVw(mx, Q6_V_vror_VR(mx, sh));
    }
    int32_t kmin = ((const int32_t *)(const void *)&mn)[0], kmax = ((const int32_t *)(const void *)&mx)[0];
    *lo = float_of_key(kmin == -1 ? 0 : kmin); /* -0 is not below 0: the reference keeps +0 */
    *hi = float_of_key(kmax);
}

/* 32 f32 bit patterns to int32 toward zero (INT32_MIN outside [-2^31, 2^31), for inf and NaN) */
static inline HVX_Vector cast_words(HVX_Vector b)
{
    HVX_Vector e = Q6_V_vand_VV(Q6_Vuw_vlsr_VuwR(b, 23), Q6_V_vsplat_R(0xff)), zero = Q6_V_vzero();
    HVX_Vector mant = Q6_V_vor_VV(Q6_V_vand_VV(b, Q6_V_vsplat_R(0x7fffff)), Q6_V_vsplat_R(0x800000));
    HVX_Vector left = Q6_Vw_vsub_VwVw(e, Q6_V_vsplat_R(150)), right = Q6_Vw_vsub_VwVw(Q6_V_vsplat_R(150), e);
    HVX_Vector lo_amount = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(right, zero), Q6_V_vsplat_R(31)); /* e < 127: 0 */
    HVX_Vector v = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(left, zero),
                                 Q6_Vw_vasl_VwVw(mant, Q6_Vw_vmin_VwVw(left, Q6_V_vsplat_R(31))),
                                 Q6_Vw_vlsr_VwVw(mant, lo_amount));
    v = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(zero, b), Q6_Vw_vsub_VwVw(zero, v), v);
    return Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(e, Q6_V_vsplat_R(157)), Q6_V_vsplat_R((int32_t)0x80000000u), v);
}

void hvx_cast_f32_i32(const float *x, size_t n, int32_t *y)
{
    const uint8_t *p = (const uint8_t *)(const void *)x;
    uint8_t *q = (uint8_t *)(void *)y;
    size_t bytes = n * sizeof(float);
    for (size_t i = 0; i < bytes; i += HVX_BYTES) {
        if (bytes - i >= HVX_BYTES) {
            *(hvx_uvec *)(void *)(q + i) = cast_words(*(const hvx_uvec *)(const void *)(p + i));
        } else {
            hvx_store_first(q + i, cast_words(hvx_load_upto(p + i, bytes - i)), bytes - i);
        }
    }
}
