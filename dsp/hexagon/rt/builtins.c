/*
 * builtins.c - the compiler helper functions a Hexagon image needs.
 *
 * Hexagon has no integer divide instruction: clang emits calls to
 * __hexagon_{u,}{div,mod}{si,di}3 (normal C calling convention). They live in
 * compiler-rt's Hexagon builtins, which Debian does not ship, so the
 * freestanding test images get these shift-subtract versions. Written without
 * '/' and '%' (which would call themselves). Integer division by zero
 * returns 0 (the hardware has no trap for it; callers never divide by zero).
 *
 * Float division is inlined by clang (reciprocal estimate + refinement);
 * double division calls __hexagon_divdf3, implemented here with IEEE-754
 * round-to-nearest-even, subnormals, infinities and NaNs (checked against the
 * host's division by dsp/tests/qemu/check_rt_host.c).
 */
#include <stdint.h>

static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *rem)
{
    if (d == 0) {
        *rem = 0;
        return 0;
    }
    if (n < d) {
        *rem = n;
        return 0;
    }
    int shift = __builtin_clzll(d) - __builtin_clzll(n);
    d <<= shift;
    uint64_t q = 0;
    for (int i = 0; i <= shift; i++) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1;
        }
        d >>= 1;
    }
    *rem = n;
    return q;
}

static uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *rem)
{
    if (d == 0) {
        *rem = 0;
        return 0;
    }
    if (n < d) {
        *rem = n;
        return 0;
    }
    int shift = __builtin_clz(d) - __builtin_clz(n);
    d <<= shift;
    uint32_t q = 0;
    for (int i = 0; i <= shift; i++) {
        q <<= 1;
        if (n >= d) {
            n -= d;
            q |= 1;
        }
        d >>= 1;
    }
    *rem = n;
    return q;
}

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d);
uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d);
int32_t __hexagon_divsi3(int32_t n, int32_t d);
int32_t __hexagon_modsi3(int32_t n, int32_t d);
uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d);
uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d);
int64_t __hexagon_divdi3(int64_t n, int64_t d);
int64_t __hexagon_moddi3(int64_t n, int64_t d);

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d)
{
    uint32_t r;
    return udivmod32(n, d, &r);
}

uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d)
{
    uint32_t r;
    (void)udivmod32(n, d, &r);
    return r;
}

int32_t __hexagon_divsi3(int32_t n, int32_t d)
{
    uint32_t un = n < 0 ? 0u - (uint32_t)n : (uint32_t)n;
    uint32_t ud = d < 0 ? 0u - (uint32_t)d : (uint32_t)d;
    uint32_t r;
    uint32_t q = udivmod32(un, ud, &r);
    return (int32_t)(((n < 0) != (d < 0)) ? 0u - q : q);
}

int32_t __hexagon_modsi3(int32_t n, int32_t d)
{
    uint32_t un = n < 0 ? 0u - (uint32_t)n : (uint32_t)n;
    uint32_t ud = d < 0 ? 0u - (uint32_t)d : (uint32_t)d;
    uint32_t r;
    (void)udivmod32(un, ud, &r);
    return (int32_t)(n < 0 ? 0u - r : r);
}

uint64_t __hexagon_udivdi3(uint64_t n, uint64_t d)
{
    uint64_t r;
    return udivmod64(n, d, &r);
}

uint64_t __hexagon_umoddi3(uint64_t n, uint64_t d)
{
    uint64_t r;
    (void)udivmod64(n, d, &r);
    return r;
}

int64_t __hexagon_divdi3(int64_t n, int64_t d)
{
    uint64_t un = n < 0 ? 0u - (uint64_t)n : (uint64_t)n;
    uint64_t ud = d < 0 ? 0u - (uint64_t)d : (uint64_t)d;
    uint64_t r;
    uint64_t q = udivmod64(un, ud, &r);
    return (int64_t)(((n < 0) != (d < 0)) ? 0u - q : q);
}

int64_t __hexagon_moddi3(int64_t n, int64_t d)
{
    uint64_t un = n < 0 ? 0u - (uint64_t)n : (uint64_t)n;
    uint64_t ud = d < 0 ? 0u - (uint64_t)d : (uint64_t)d;
    uint64_t r;
    (void)udivmod64(un, ud, &r);
    return (int64_t)(n < 0 ? 0u - r : r);
}

/* ---- double division ------------------------------------------------------ */

double __hexagon_divdf3(double a, double b);

#define D_SIGN 0x8000000000000000ull
#define D_FRAC 0x000fffffffffffffull
#define D_IMPL 0x0010000000000000ull
#define D_INF 0x7ff0000000000000ull
#define D_QNAN 0x7ff8000000000000ull

static uint64_t d2u(double d)
{
    uint64_t u;
    __builtin_memcpy(&u, &d, 8);
    return u;
}

static double u2d(uint64_t u)
{
    double d;
    __builtin_memcpy(&d, &u, 8);
    return d;
}

double __hexagon_divdf3(double a, double b)
{
    uint64_t ua = d2u(a), ub = d2u(b);
    uint64_t sign = (ua ^ ub) & D_SIGN;
    int ea = (int)((ua >> 52) & 0x7ff), eb = (int)((ub >> 52) & 0x7ff);
    uint64_t ma = ua & D_FRAC, mb = ub & D_FRAC;
    if (ea == 0x7ff && ma)
        return u2d(ua | D_QNAN); /* NaN in: quiet it */
    if (eb == 0x7ff && mb)
        return u2d(ub | D_QNAN);
    if (ea == 0x7ff)
        return u2d(eb == 0x7ff ? D_QNAN : sign | D_INF); /* inf/inf, inf/x */
    if (eb == 0x7ff)
        return u2d(sign); /* x/inf */
    int a_zero = ea == 0 && ma == 0, b_zero = eb == 0 && mb == 0;
    if (b_zero)
        return u2d(a_zero ? D_QNAN : sign | D_INF);
    if (a_zero)
        return u2d(sign);
    /* normalise to [2^52, 2^53) */
    if (ea == 0) {
        while (!(ma & D_IMPL)) {
            ma <<= 1;
            ea--;
        }
        ea++;
    } else {
        ma |= D_IMPL;
    }
    if (eb == 0) {
        while (!(mb & D_IMPL)) {
            mb <<= 1;
            eb--;
        }
        eb++;
    } else {
        mb |= D_IMPL;
    }
    int e = ea - eb + 1023;
    if (ma < mb) {
        ma <<= 1;
        e--;
    }
    /* 55 quotient bits: 1 integer bit, 52 fraction bits, guard, round */
    uint64_t q = 0, r = ma;
    for (int i = 0; i < 55; i++) {
        q <<= 1;
        if (r >= mb) {
            r -= mb;
            q |= 1;
        }
        r <<= 1;
    }
    int sticky = r != 0;
    if (e >= 0x7ff)
        return u2d(sign | D_INF);
    int s = e >= 1 ? 2 : 3 - e; /* bits of q to drop */
    uint64_t m, dropped, half;
    if (s >= 64) {
        m = 0;
        dropped = q;
        half = (uint64_t)1 << 63;
        if (s > 64) { /* everything is below half of the smallest subnormal */
            sticky = sticky || dropped != 0;
            dropped = 0;
        }
    } else {
        m = q >> s;
        dropped = q & (((uint64_t)1 << s) - 1);
        half = (uint64_t)1 << (s - 1);
    }
    if (dropped > half || (dropped == half && (sticky || (m & 1))))
        m++;
    if (e >= 1) {
        if (m == ((uint64_t)1 << 53)) {
            m >>= 1;
            e++;
            if (e >= 0x7ff)
                return u2d(sign | D_INF);
        }
        return u2d(sign | ((uint64_t)e << 52) | (m & D_FRAC));
    }
    return u2d(sign | m); /* subnormal; m == 2^52 rounds up to the smallest normal */
}

/* ---- memcpy variant ---------------------------------------------------------
 * clang's Hexagon backend calls this for copies it knows are 8-byte aligned,
 * at least 32 bytes and a multiple of 8 bytes long (normal C ABI). */
void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst, const void *src, unsigned int n);

void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst, const void *src, unsigned int n)
{
    uint64_t *d = (uint64_t *)dst;
    const uint64_t *s = (const uint64_t *)src;
    for (unsigned int i = 0; i < n / 8u; i++)
        d[i] = s[i];
    return dst;
}
