/*
 * check_rt_host.c - host check of the freestanding Hexagon runtime's
 * arithmetic (dsp/hexagon/rt/builtins.c and math_min.c): the same C code,
 * compiled for the host, against the host's division and libm.
 *
 *   integer division helpers  exact on random and edge operands
 *   __hexagon_divdf3          bit-exact vs the host's IEEE division
 *   expf expm1f tanhf erff    within the stated ulp bounds
 *   sqrt                      within 1 ulp
 *   sqrtf                     bit-exact (every positive float checked once: equal)
 *
 * Prints "RESULT check_rt_host passed=P failed=F" like the qemu images.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

uint32_t __hexagon_udivsi3(uint32_t, uint32_t);
uint32_t __hexagon_umodsi3(uint32_t, uint32_t);
int32_t __hexagon_divsi3(int32_t, int32_t);
int32_t __hexagon_modsi3(int32_t, int32_t);
uint64_t __hexagon_udivdi3(uint64_t, uint64_t);
uint64_t __hexagon_umoddi3(uint64_t, uint64_t);
int64_t __hexagon_divdi3(int64_t, int64_t);
int64_t __hexagon_moddi3(int64_t, int64_t);
double __hexagon_divdf3(double, double);

float hx_expf(float);
float hx_expm1f(float);
float hx_tanhf(float);
float hx_erff(float);
float hx_sqrtf(float);
double hx_sqrt(double);

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t r64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int passed, failed;
static void check(int ok, const char *what)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s\n", what);
    }
}

static double ulp_diff_f(float got, float want)
{
    if (isnan(want))
        return isnan(got) ? 0 : 1e9;
    if (got == want)
        return 0;
    float u = nextafterf(fabsf(want), INFINITY) - fabsf(want);
    return fabs((double)got - (double)want) / (double)u;
}

static double ulp_diff_d(double got, double want)
{
    if (isnan(want))
        return isnan(got) ? 0 : 1e9;
    if (got == want)
        return 0;
    double u = nextafter(fabs(want), INFINITY) - fabs(want);
    return fabs(got - want) / u;
}

int main(void)
{
    char what[160];
    /* integer division */
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint64_t x = r64(), y = r64() >> (r64() & 63);
        uint32_t x32 = (uint32_t)x >> (r64() & 31), y32 = (uint32_t)y >> (r64() & 31);
        if (i < 16) { /* edges */
            static const uint64_t e[] = {0, 1, 2, 3, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull, 10};
            x = e[i % 8];
            y = e[(i / 2) % 8];
            x32 = (uint32_t)x;
            y32 = (uint32_t)y;
        }
        if (y == 0)
            y = 7;
        if (y32 == 0)
            y32 = 3;
        int32_t sx = (int32_t)x32, sy = (int32_t)y32;
        int64_t lx = (int64_t)x, ly = (int64_t)y;
        if (__hexagon_udivsi3(x32, y32) != x32 / y32 || __hexagon_umodsi3(x32, y32) != x32 % y32)
            bad++;
        if (!(sx == INT32_MIN && sy == -1) &&
            (__hexagon_divsi3(sx, sy) != sx / sy || __hexagon_modsi3(sx, sy) != sx % sy))
            bad++;
        if (__hexagon_udivdi3(x, y) != x / y || __hexagon_umoddi3(x, y) != x % y)
            bad++;
        if (!(lx == INT64_MIN && ly == -1) &&
            (__hexagon_divdi3(lx, ly) != lx / ly || __hexagon_moddi3(lx, ly) != lx % ly))
            bad++;
    }
    snprintf(what, sizeof what, "integer division helpers: %d mismatches", bad);
    check(bad == 0, what);

    /* double division: random bit patterns (all classes) and random normals */
    bad = 0;
    for (int i = 0; i < 400000; i++) {
        uint64_t ua = r64(), ub = r64();
        if (i & 1) { /* bias exponents towards the subnormal/overflow edges */
            ua = (ua & 0x800fffffffffffffull) | ((uint64_t)(r64() % 120) << 52);
            ub = (ub & 0x800fffffffffffffull) | ((uint64_t)(0x7ff - 1 - r64() % 120) << 52);
            if (i & 2) {
                uint64_t t = ua;
                ua = ub;
                ub = t;
            }
        }
        double a, b;
        memcpy(&a, &ua, 8);
        memcpy(&b, &ub, 8);
        double want = a / b, got = __hexagon_divdf3(a, b);
        uint64_t wu, gu;
        memcpy(&wu, &want, 8);
        memcpy(&gu, &got, 8);
        if (isnan(want) ? !isnan(got) : wu != gu) {
            if (bad < 5)
                printf("  divdf3 %a / %a: got %a want %a\n", a, b, got, want);
            bad++;
        }
    }
    snprintf(what, sizeof what, "__hexagon_divdf3: %d of 400000 not bit-exact", bad);
    check(bad == 0, what);

    /* float math */
    struct {
        const char *name;
        float (*mine)(float);
        float (*ref)(float);
        float lo, hi, max_ulp;
    } fns[] = {
        {"expf", hx_expf, expf, -104.0f, 89.0f, 2.0f},
        {"expm1f", hx_expm1f, expm1f, -20.0f, 89.0f, 2.0f},
        {"tanhf", hx_tanhf, tanhf, -10.0f, 10.0f, 3.0f},
        {"erff", hx_erff, erff, -5.0f, 5.0f, 4.0f},
        {"sqrtf", hx_sqrtf, sqrtf, 0.0f, 1e30f, 0.0f}, /* correctly rounded */
    };
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        double worst = 0;
        float worst_x = 0;
        for (int i = 0; i < 300000; i++) {
            float x;
            if (i % 3 == 0) { /* uniform in range */
                x = fns[f].lo + (fns[f].hi - fns[f].lo) * (float)(r64() >> 11) * (1.0f / 9007199254740992.0f);
            } else { /* random magnitudes (log-uniform), both signs where the range allows */
                uint32_t u = (uint32_t)r64();
                memcpy(&x, &u, 4);
                if (!(x >= fns[f].lo && x <= fns[f].hi))
                    continue;
            }
            double d = ulp_diff_f(fns[f].mine(x), fns[f].ref(x));
            if (d > worst) {
                worst = d;
                worst_x = x;
            }
        }
        snprintf(what, sizeof what, "%s: max error %.2f ulp at %a (bound %.0f)", fns[f].name, worst, worst_x,
                 fns[f].max_ulp);
        check(worst <= fns[f].max_ulp, what);
        printf("  %s\n", what);
    }
    double worst = 0;
    for (int i = 0; i < 300000; i++) {
        uint64_t u = r64() & 0x7fffffffffffffffull;
        double x;
        memcpy(&x, &u, 8);
        if (isnan(x))
            continue;
        double d = ulp_diff_d(hx_sqrt(x), sqrt(x));
        if (d > worst)
            worst = d;
    }
    snprintf(what, sizeof what, "sqrt: max error %.2f ulp (bound 1)", worst);
    check(worst <= 1.0, what);
    printf("  %s\n", what);
    check(hx_expf(0.0f) == 1.0f && hx_tanhf(0.0f) == 0.0f && hx_erff(0.0f) == 0.0f && hx_sqrt(4.0) == 2.0 &&
              isinf(hx_expf(100.0f)) && hx_expf(-200.0f) == 0.0f && isnan(hx_sqrt(-1.0)),
          "special values");
    printf("RESULT check_rt_host passed=%d failed=%d\n", passed, failed);
    return failed ? 1 : 0;
}
