/*
 * math_min.c - libm-free float math for the freestanding Hexagon builds.
 *
 *   expf, expm1f  range reduction x = n ln2 + r, |r| <= ln2/2, degree-7
 *                 polynomial for e^r - 1; max error about 1 ulp
 *   tanhf         from expm1f (no cancellation near 0); about 2 ulp
 *   erff          odd Taylor series (to x^21) for |x| < 1, Abramowitz-Stegun
 *                 7.1.26 (abs error <= 1.5e-7) above; within 4 ulp
 *   sqrtf, sqrt   reciprocal square root by Newton steps (no division),
 *                 then one correction step; sqrt correctly rounded in most
 *                 cases, within 1 ulp always; sqrtf (sqrt rounded to float)
 *                 correctly rounded: equal to the host's for every float
 *
 * HX_RT_PREFIX lets dsp/tests/qemu/check_rt_host.c build this file on the
 * host with prefixed names and compare it with the host libm.
 */
#include <stdint.h>
#include <string.h>

#ifdef HX_RT_PREFIX
#define HXM(name) hx_##name
#else
#define HXM(name) name
#include <math.h>
#endif

float HXM(fabsf)(float x);
double HXM(fabs)(double x);
float HXM(fmaxf)(float a, float b);
float HXM(fminf)(float a, float b);
float HXM(expf)(float x);
float HXM(expm1f)(float x);
float HXM(tanhf)(float x);
float HXM(erff)(float x);
float HXM(sqrtf)(float x);
double HXM(sqrt)(double x);

static inline uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

float HXM(fabsf)(float x) { return bitsf(fbits(x) & 0x7fffffffu); }
double HXM(fabs)(double x) { return bitsd(dbits(x) & 0x7fffffffffffffffull); }

float HXM(fmaxf)(float a, float b)
{
    if (a != a)
        return b;
    if (b != b)
        return a;
    return a > b ? a : b;
}

float HXM(fminf)(float a, float b)
{
    if (a != a)
        return b;
    if (b != b)
        return a;
    return a < b ? a : b;
}

/* 2^n as a float for -149 <= n <= 127 */
static float pow2i(int n)
{
    if (n >= -126)
        return bitsf((uint32_t)(n + 127) << 23);
    return bitsf(1u << (n + 149)); /* subnormal */
}

/* e^r - 1 for |r| <= ln2/2 (Taylor to r^8; truncation < 3e-10 relative) */
static float expm1_core(float r)
{
    float p = 1.0f / 40320.0f;
    p = p * r + 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    return r + r * r * p;
}

/* x = n ln2 + r */
static int reduce_ln2(float x, float *r)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f; /* 16 bits: n * ln2_hi exact */
    const float ln2_lo = 1.42860682030941723212e-6f;
    float t = x * log2e;
    int n = (int)(t < 0 ? t - 0.5f : t + 0.5f);
    *r = (x - (float)n * ln2_hi) - (float)n * ln2_lo;
    return n;
}

float HXM(expf)(float x)
{
    if (x != x)
        return x;
    if (x > 88.7228393554688f)
        return __builtin_inff();
    if (x < -103.972084045410f)
        return 0.0f;
    float r;
    int n = reduce_ln2(x, &r);
    float p = 1.0f + expm1_core(r);
    /* scale in two steps so that results near the subnormal range stay exact */
    if (n < -125)
        return p * pow2i(n + 64) * pow2i(-64);
    if (n > 127)
        return p * pow2i(n - 1) * 2.0f;
    return p * pow2i(n);
}

float HXM(expm1f)(float x)
{
    if (x != x)
        return x;
    if (x > 88.7228393554688f)
        return __builtin_inff();
    if (x < -17.0f)
        return -1.0f;
    float r;
    int n = reduce_ln2(x, &r);
    float q = expm1_core(r);
    if (n == 0)
        return q;
    float s = pow2i(n);
    return (s - 1.0f) + s * q;
}

float HXM(tanhf)(float x)
{
    float ax = HXM(fabsf)(x);
    if (x != x)
        return x;
    if (ax > 9.0f)
        return x > 0 ? 1.0f : -1.0f;
    if (ax < 1e-4f)
        return x;
    float e = HXM(expm1f)(2.0f * ax); /* tanh = e / (e + 2) */
    float t = e / (e + 2.0f);
    return x < 0 ? -t : t;
}

float HXM(erff)(float x)
{
    float ax = HXM(fabsf)(x);
    if (x != x)
        return x;
    float y;
    if (ax < 1.0f) {
        /* 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)), n <= 10 */
        float z = ax * ax;
        float p = 1.0f / 76204800.0f;
        p = p * z - 1.0f / 6894720.0f;
        p = p * z + 1.0f / 685440.0f;
        p = p * z - 1.0f / 75600.0f;
        p = p * z + 1.0f / 9360.0f;
        p = p * z - 1.0f / 1320.0f;
        p = p * z + 1.0f / 216.0f;
        p = p * z - 1.0f / 42.0f;
        p = p * z + 1.0f / 10.0f;
        p = p * z - 1.0f / 3.0f;
        y = 1.12837916709551257f * ax + 1.12837916709551257f * ax * (p * z);
    } else if (ax >= 4.0f) {
        y = 1.0f;
    } else {
        /* A&S 7.1.26 */
        const float p = 0.3275911f;
        float t = 1.0f / (1.0f + p * ax);
        float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
        y = 1.0f - poly * HXM(expf)(-ax * ax);
    }
    return x < 0 ? -y : y;
}

double HXM(sqrt)(double x)
{
    if (x != x || x == 0.0 || x == __builtin_inf())
        return x;
    if (x < 0)
        return __builtin_nan("");
    /* scale into [2^-2, 2^2) by an even power of two */
    uint64_t u = dbits(x);
    int e = (int)((u >> 52) & 0x7ff);
    double scale_back = 1.0;
    if (e == 0) { /* subnormal: multiply by 2^54 first */
        x *= 18014398509481984.0;
        u = dbits(x);
        e = (int)((u >> 52) & 0x7ff);
        scale_back = 1.0 / 134217728.0; /* 2^-27 */
    }
    int k = (e - 1023) / 2; /* x = m * 4^k with m in [2^-1, 2^2) roughly */
    double m = bitsd((u & 0x800fffffffffffffull) | ((uint64_t)(e - 2 * k) << 52));
    /* rsqrt seed from float bits, then Newton: r = r (1.5 - 0.5 m r^2) */
    float mf = (float)m;
    float rf = bitsf(0x5f3759dfu - (fbits(mf) >> 1));
    double r = rf;
    for (int i = 0; i < 5; i++)
        r = r * (1.5 - 0.5 * m * r * r);
    double y = m * r;
    y = y + 0.5 * r * (m - y * y); /* one correction step */
    double s = bitsd((uint64_t)(1023 + k) << 52);
    return y * s * scale_back;
}

float HXM(sqrtf)(float x)
{
    return (float)HXM(sqrt)((double)x);
}
