/*
 * test_hvx_kernels.c - HVX integer kernels against their C references,
 * bit for bit, under qemu-hexagon (freestanding v67 + HVX-128B image).
 *
 *   test_hvx_kernels              run all cases; exit 1 on any mismatch
 *   test_hvx_kernels --int-only   only the integer kernels (v68/v73 images)
 *   test_hvx_kernels --float-only only the v68+ float kernels (v68/v73 images)
 *   test_hvx_kernels --packets K  run kernel K once on a fixed small size
 *                                 (for dsp/scripts/hvx_packets.py) and print
 *                                 "PACKETS <K> units=<u> unit=<what>"
 *
 * Each case: random inputs with edge values mixed in (type min/max, 0, -1),
 * a length from a list with 0, 1 and lengths that are not multiples of a
 * vector, and one of three layouts: all pointers 128-byte aligned ("al"),
 * all misaligned ("un"), or in place, y == a ("ip"). The bytes after the
 * output (a guard zone) must stay untouched.
 *
 * The v68+ float kernels are built into the v68/v73 images (same source,
 * __HVX_ARCH__ >= 68), which are linked but not run: qemu-hexagon 7.2 does
 * not decode v68 HVX float instructions.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hvx_kernels.h"
#include "hvx_dequant.h"
#include "hvx_im2col.h"
#include "hvx_qpool.h"
#include "hvx_qeltwise.h"
#include "hvx_qgemm.h"
#include "hvx_qresize.h"
#include "hvx_transpose.h"
#include "hvx_util.h"
#include "qtest.h"
#include "ref_kernels.h"
#include "ref_qmatmul.h"
#include "ref_quant.h"

#define POOL_BYTES (96 * 1024)
#define GUARD 256
#define GUARD_BYTE 0xA5

static uint8_t pool_a[POOL_BYTES] __attribute__((aligned(128)));
static uint8_t pool_b[POOL_BYTES] __attribute__((aligned(128)));
static uint8_t pool_y[POOL_BYTES] __attribute__((aligned(128)));
static uint8_t pool_r[POOL_BYTES] __attribute__((aligned(128)));
static uint8_t lut_prepared[256] __attribute__((aligned(128)));

static qtest T;
static qt_rng R = {0x9E3779B97F4A7C15ull};

static const size_t SIZES[] = {0, 1, 2, 3, 31, 32, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 1024, 4099};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])

enum layout { AL = 0, UN = 1, IP = 2 };
static const char *const LAYOUT_NAME[] = {"al", "un", "ip"};

/* ---- inputs --------------------------------------------------------------- */

static void fill_random(void *p, size_t bytes, int elem)
{
    uint8_t *b = (uint8_t *)p;
    for (size_t i = 0; i < bytes; i++)
        b[i] = (uint8_t)qt_rand(&R);
    /* sprinkle edge values: min, max, 0, -1 */
    size_t n = bytes / (size_t)elem;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = qt_rand(&R);
        if ((r & 15u) != 0)
            continue;
        uint8_t *e = b + i * (size_t)elem;
        switch ((r >> 4) & 3u) {
        case 0: /* min: 0x80.. in the top byte, little endian */
            memset(e, 0, (size_t)elem);
            e[elem - 1] = 0x80;
            break;
        case 1: /* max */
            memset(e, 0xff, (size_t)elem);
            e[elem - 1] = 0x7f;
            break;
        case 2:
            memset(e, 0, (size_t)elem);
            break;
        default:
            memset(e, 0xff, (size_t)elem);
            break;
        }
    }
}

/* ---- comparison ---------------------------------------------------------------- */

static int compare(const char *name, const void *got, const void *want, size_t n, int elem)
{
    const uint8_t *g = (const uint8_t *)got, *w = (const uint8_t *)want;
    size_t bytes = n * (size_t)elem;
    for (size_t i = 0; i < bytes; i++) {
        if (g[i] != w[i]) {
            size_t e = i / (size_t)elem;
            int64_t gv = 0, wv = 0;
            if (elem == 1) {
                gv = ((const int8_t *)got)[e];
                wv = ((const int8_t *)want)[e];
            } else if (elem == 2) {
                gv = ((const int16_t *)got)[e];
                wv = ((const int16_t *)want)[e];
            } else {
                gv = ((const int32_t *)got)[e];
                wv = ((const int32_t *)want)[e];
            }
            hx_printf("FAIL %s: element %zu of %zu: got %lld want %lld\n", name, e, n, (long long)gv,
                      (long long)wv);
            return 0;
        }
    }
    for (size_t i = 0; i < GUARD; i++) {
        if (g[bytes + i] != GUARD_BYTE) {
            hx_printf("FAIL %s: wrote past the end (guard byte %zu)\n", name, i);
            return 0;
        }
    }
    return 1;
}

/* ---- elementwise ------------------------------------------------------------- */

typedef void (*bin16_fn)(const int16_t *, const int16_t *, int16_t *, size_t);
typedef void (*un16_fn)(const int16_t *, int16_t *, size_t);
typedef void (*bin32_fn)(const int32_t *, const int32_t *, int32_t *, size_t);
typedef void (*un32_fn)(const int32_t *, int32_t *, size_t);

typedef struct eltwise_kernel {
    const char *name;
    int elem;  /* bytes per element */
    int arity; /* 1 or 2 */
    void (*hvx)(void);
    void (*ref)(void);
} eltwise_kernel;

#define K2(n, e, h, r) {n, e, 2, (void (*)(void))(h), (void (*)(void))(r)}
#define K1(n, e, h, r) {n, e, 1, (void (*)(void))(h), (void (*)(void))(r)}

static const eltwise_kernel ELTWISE[] = {
    K2("add_i16", 2, hvx_add_i16, ref_add_i16),
    K2("add_sat_i16", 2, hvx_add_sat_i16, ref_add_sat_i16),
    K2("mul_i16", 2, hvx_mul_i16, ref_mul_i16),
    K1("relu_i16", 2, hvx_relu_i16, ref_relu_i16),
    K2("add_i32", 4, hvx_add_i32, ref_add_i32),
    K2("add_sat_i32", 4, hvx_add_sat_i32, ref_add_sat_i32),
    K2("mul_i32", 4, hvx_mul_i32, ref_mul_i32),
    K1("relu_i32", 4, hvx_relu_i32, ref_relu_i32),
};
#define N_ELTWISE (sizeof ELTWISE / sizeof ELTWISE[0])

static void call_eltwise(const eltwise_kernel *k, int use_hvx, const void *a, const void *b, void *y, size_t n)
{
    void (*f)(void) = use_hvx ? k->hvx : k->ref;
    if (k->elem == 2) {
        if (k->arity == 2)
            ((bin16_fn)f)((const int16_t *)a, (const int16_t *)b, (int16_t *)y, n);
        else
            ((un16_fn)f)((const int16_t *)a, (int16_t *)y, n);
    } else {
        if (k->arity == 2)
            ((bin32_fn)f)((const int32_t *)a, (const int32_t *)b, (int32_t *)y, n);
        else
            ((un32_fn)f)((const int32_t *)a, (int32_t *)y, n);
    }
}

static void test_eltwise(const eltwise_kernel *k)
{
    char group[48];
    hx_snprintf(group, sizeof group, "hvx_%s", k->name);
    qt_begin_group(&T);
    for (size_t si = 0; si < N_SIZES; si++) {
        for (int lay = AL; lay <= IP; lay++) {
            size_t n = SIZES[si];
            size_t bytes = n * (size_t)k->elem;
            /* misaligned: element aligned, not vector aligned, different per pointer */
            uint8_t *a = pool_a + (lay == UN ? 1 * k->elem : 0);
            uint8_t *b = pool_b + (lay == UN ? 3 * k->elem : 0);
            uint8_t *y = pool_y + (lay == UN ? 2 * k->elem : 0);
            fill_random(a, bytes, k->elem);
            fill_random(b, bytes, k->elem);
            memset(pool_r, GUARD_BYTE, bytes + GUARD);
            call_eltwise(k, 0, a, b, pool_r, n);
            if (lay == IP) {
                y = a; /* y == a: the result replaces a */
                memset(a + bytes, GUARD_BYTE, GUARD);
                call_eltwise(k, 1, a, b, a, n);
            } else {
                memset(y, GUARD_BYTE, bytes + GUARD);
                call_eltwise(k, 1, a, b, y, n);
            }
            char name[96];
            hx_snprintf(name, sizeof name, "%s n=%zu %s", group, n, LAYOUT_NAME[lay]);
            qt_case(&T, compare(name, y, pool_r, n, k->elem));
        }
    }
    qt_end_group(&T, group);
}

/* ---- lookup table ------------------------------------------------------------ */

static void test_lut(void)
{
    int8_t table[256];
    qt_begin_group(&T);
    for (int tab = 0; tab < 3; tab++) {
        for (int i = 0; i < 256; i++) {
            if (tab == 0)
                table[i] = (int8_t)qt_rand(&R); /* random */
            else if (tab == 1)
                table[i] = (int8_t)i; /* identity (index as uint8) */
            else
                table[i] = (int8_t)(255 - i); /* reversed */
        }
        hvx_lut_i8_prepare(table, lut_prepared);
        for (size_t si = 0; si < N_SIZES; si++) {
            for (int lay = AL; lay <= IP; lay++) {
                size_t n = SIZES[si];
                int8_t *x = (int8_t *)(pool_a + (lay == UN ? 5 : 0));
                int8_t *y = (int8_t *)(pool_y + (lay == UN ? 7 : 0));
                fill_random(x, n, 1);
                memset(pool_r, GUARD_BYTE, n + GUARD);
                ref_lut_i8(x, (int8_t *)pool_r, n, table);
                if (lay == IP) {
                    y = x;
                    memset(x + n, GUARD_BYTE, GUARD);
                } else {
                    memset(y, GUARD_BYTE, n + GUARD);
                }
                hvx_lut_i8(x, y, n, lut_prepared);
                char name[96];
                hx_snprintf(name, sizeof name, "hvx_lut_i8 table=%d n=%zu %s", tab, n, LAYOUT_NAME[lay]);
                qt_case(&T, compare(name, y, pool_r, n, 1));
            }
        }
    }
    qt_end_group(&T, "hvx_lut_i8");
}

/* hvx_lut_words (QSOFTMAX's table values): every length of SIZES, x aligned or at an odd offset, random
 * tables (and one of the index itself, so that a byte plane out of place shows), random offsets `add`;
 * y[i] == table[(x[i] + add) & 255] for i < n, and nothing written after n rounded up to 128 words. */
static void test_lut_words(void)
{
    static uint8_t prepared[1024] __attribute__((aligned(128)));
    uint32_t table[256];
    qt_begin_group(&T);
    for (int tab = 0; tab < 2; tab++) {
        for (int i = 0; i < 256; i++)
            table[i] = tab ? (uint32_t)i * 0x01010101u ^ 0x80402010u : qt_rand(&R);
        hvx_lut_words_prepare(table, prepared);
        for (size_t si = 0; si < N_SIZES; si++)
            for (int off = 0; off < 2; off++) {
                size_t n = SIZES[si], room = (n + 127) / 128 * 128 * 4;
                uint8_t *x = pool_a + (off ? 3 : 0), add = (uint8_t)qt_rand(&R);
                fill_random(x, n, 1);
                memset(pool_y, GUARD_BYTE, room + GUARD);
                uint32_t *want = (uint32_t *)(void *)pool_r;
                for (size_t i = 0; i < n; i++)
                    want[i] = table[(uint8_t)(x[i] + add)];
                hvx_lut_words(x, n, add, prepared, (uint32_t *)(void *)pool_y);
                memcpy(pool_y + 4 * n, pool_y + room, GUARD); /* the guard after the room, checked after n */
                char name[96];
                hx_snprintf(name, sizeof name, "hvx_lut_words table=%d n=%zu off=%d add=%u", tab, n, off, add);
                qt_case(&T, compare(name, pool_y, want, n, 4));
            }
    }
    qt_end_group(&T, "hvx_lut_words");
}

/* ---- transpose ------------------------------------------------------------------- */

/* hvx_transpose of elements of 1..64 bytes against the C loop, bit for bit: odd and power-of-two shapes
 * (one tile, many tiles, partial tiles, 1 x n and n x 1), x and y at odd byte offsets or 128-byte
 * aligned, dense or padded strides; every byte of y's span not written by the transpose (the padding
 * between rows and a guard after) must keep its guard value. */
static void test_transpose(void)
{
    static const size_t SHAPES[][2] = {{1, 1},   {1, 7},   {7, 1},   {2, 2},    {3, 5},   {16, 16}, {64, 64}, {64, 4},
                                       {4, 64},  {64, 16}, {17, 129}, {129, 17}, {100, 33}, {200, 96}, {5, 300}};
    static const size_t ES[] = {1, 2, 4, 8, 16, 64};
    qt_begin_group(&T);
    for (size_t ei = 0; ei < sizeof ES / sizeof ES[0]; ei++)
        for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++)
            for (int lay = 0; lay < 4; lay++) {
                size_t es = ES[ei], rows = SHAPES[si][0], cols = SHAPES[si][1];
                size_t pad = lay >= 2 ? 3 : 0, ldx = cols + pad, ldy = rows + 2 * pad;
                size_t xoff = lay & 1 ? 3 : 0, yoff = lay & 1 ? 5 : 0;
                size_t span = ((cols - 1) * ldy + rows) * es; /* y's bytes from the first element to the last */
                if (rows * ldx * es + xoff > POOL_BYTES || span + yoff + GUARD > POOL_BYTES)
                    continue;
                uint8_t *x = pool_a + xoff, *y = pool_y + yoff, *want = pool_b + yoff;
                fill_random(x, rows * ldx * es, 1);
                memset(y, GUARD_BYTE, span + GUARD);
                memset(want, GUARD_BYTE, span + GUARD);
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = 0; c < cols; c++)
                        memcpy(want + (c * ldy + r) * es, x + (r * ldx + c) * es, es);
                hvx_transpose(x, ldx, y, ldy, rows, cols, es, pool_r);
                char name[96];
                hx_snprintf(name, sizeof name, "hvx_transpose es=%zu %zux%zu ldx=%zu ldy=%zu off=%zu", es, rows, cols,
                            ldx, ldy, xoff);
                qt_case(&T, compare(name, y, want, span, 1));
            }
    qt_end_group(&T, "hvx_transpose");
}

/* ---- requantisation ------------------------------------------------------------ */

static void random_requant(hx_requant *rq, int mode)
{
    switch (mode) {
    case 0: /* typical: scale in [0.5, 1) * 2^-shift */
        rq->multiplier = (int32_t)qt_range(&R, 1 << 30, INT32_MAX);
        rq->shift = (int32_t)qt_range(&R, 0, 14);
        break;
    case 1: /* anything */
        rq->multiplier = (int32_t)qt_rand(&R);
        rq->shift = (int32_t)qt_range(&R, 0, 31);
        break;
    case 2: /* saturating corner: INT32_MIN * INT32_MIN */
        rq->multiplier = INT32_MIN;
        rq->shift = 0;
        break;
    default: /* largest multiplier, largest shift */
        rq->multiplier = INT32_MAX;
        rq->shift = 31;
        break;
    }
    rq->zero_point = (int32_t)qt_range(&R, -128, 127);
    int32_t lo = (int32_t)qt_range(&R, -128, 127), hi = (int32_t)qt_range(&R, -128, 127);
    if ((qt_rand(&R) & 3u) == 0) {
        rq->out_min = -128;
        rq->out_max = 127;
    } else {
        rq->out_min = lo < hi ? lo : hi;
        rq->out_max = lo < hi ? hi : lo;
    }
    if (mode >= 2) {
        rq->zero_point = (mode == 2) ? -128 : 127;
        rq->out_min = -128;
        rq->out_max = 127;
    }
}

static void test_requant(void)
{
    static const size_t sizes[] = {0, 1, 5, 127, 128, 129, 300, 1000};
    qt_begin_group(&T);
    for (int mode = 0; mode < 4; mode++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (int lay = AL; lay <= UN; lay++) {
                size_t n = sizes[si];
                hx_requant rq;
                random_requant(&rq, mode);
                int32_t *acc = (int32_t *)(void *)(pool_a + (lay == UN ? 4 : 0));
                int8_t *y = (int8_t *)(pool_y + (lay == UN ? 3 : 0));
                fill_random(acc, n * 4, 4);
                if (mode == 0) /* keep most results off the clamps */
                    for (size_t i = 0; i < n; i++)
                        if ((qt_rand(&R) & 3u) != 0)
                            acc[i] = (int32_t)qt_range(&R, -(1 << 20), 1 << 20);
                memset(pool_r, GUARD_BYTE, n + GUARD);
                memset(y, GUARD_BYTE, n + GUARD);
                ref_requant_i32_i8(acc, (int8_t *)pool_r, n, &rq);
                hvx_requant_i32_i8(acc, y, n, &rq);
                char name[128];
                hx_snprintf(name, sizeof name, "hvx_requant_i32_i8 mode=%d n=%zu %s mult=%d shift=%d zp=%d", mode,
                            n, LAYOUT_NAME[lay], (int)rq.multiplier, (int)rq.shift, (int)rq.zero_point);
                qt_case(&T, compare(name, y, pool_r, n, 1));
            }
        }
    }
    qt_end_group(&T, "hvx_requant_i32_i8");
}

/* ---- matmul ------------------------------------------------------------------ */

typedef struct mm_shape {
    int M, N, K;
} mm_shape;

static const mm_shape MM_SHAPES[] = {
    {1, 1, 1},   {1, 1, 4},    {1, 128, 4},  {4, 128, 64}, {5, 130, 67}, {3, 7, 0},
    {7, 257, 36}, {8, 256, 128}, {2, 33, 5},   {13, 100, 16}, {4, 1, 129}, {9, 384, 12},
};
#define N_MM (sizeof MM_SHAPES / sizeof MM_SHAPES[0])

/* variants: 0 fast path (A aligned, lda % 4 == 0), 1 A misaligned (byte path),
 * 2 padded strides + misaligned C, 3 no bias */
static void test_matmul(void)
{
    qt_begin_group(&T);
    for (size_t si = 0; si < N_MM; si++) {
        for (int var = 0; var < 4; var++) {
            for (int rmode = 0; rmode < 2; rmode++) {
                const mm_shape *s = &MM_SHAPES[si];
                int M = s->M, N = s->N, K = s->K;
                int lda = K + (var == 2 ? 12 : 0);
                int ldb = N + (var == 2 ? 3 : 0);
                int ldc = N + (var == 2 ? 5 : 0);
                int8_t *A = (int8_t *)pool_a + (var == 1 ? 1 : 0);
                int8_t *B = (int8_t *)pool_b;
                int8_t *C = (int8_t *)pool_y + (var == 2 ? 9 : 0);
                int8_t *Cr = (int8_t *)pool_r;
                /* packed B lives after B in pool_b, 128-byte aligned */
                size_t b_bytes = (size_t)(K > 0 ? K : 1) * (size_t)ldb;
                uint8_t *packed = pool_b + ((b_bytes + 127) / 128) * 128;
                int32_t *bias = (int32_t *)(void *)(pool_a + POOL_BYTES / 2 + (var == 2 ? 4 : 0));
                size_t c_bytes = (size_t)M * (size_t)ldc;
                if ((size_t)(packed - pool_b) + hvx_matmul_i8_packed_bytes(K, N) > POOL_BYTES ||
                    (size_t)M * (size_t)lda + 1 > POOL_BYTES / 2 || c_bytes + GUARD + 9 > POOL_BYTES) {
                    hx_printf("FAIL matmul shape %dx%dx%d does not fit the test pools\n", M, N, K);
                    qt_case(&T, 0);
                    continue;
                }
                fill_random(A, (size_t)M * (size_t)lda, 1);
                fill_random(B, b_bytes, 1);
                for (int n = 0; n < N; n++)
                    bias[n] = (int32_t)qt_range(&R, -(1 << 16), 1 << 16);
                hx_requant rq;
                random_requant(&rq, rmode);
                if (rmode == 0)
                    rq.shift = (int32_t)qt_range(&R, 4, 12);
                const int32_t *bias_arg = var == 3 ? NULL : bias;
                memset(Cr, GUARD_BYTE, c_bytes + GUARD);
                memset(C, GUARD_BYTE, c_bytes + GUARD);
                ref_matmul_i8(A, lda, B, ldb, bias_arg, Cr, ldc, M, N, K, &rq);
                hvx_matmul_i8_pack_b(B, ldb, K, N, packed);
                hvx_matmul_i8(A, lda, packed, bias_arg, C, ldc, M, N, K, &rq);
                /* compare row by row (the bytes between rows are not written) */
                char name[128];
                hx_snprintf(name, sizeof name, "hvx_matmul_i8 M=%d N=%d K=%d var=%d rq=%d", M, N, K, var, rmode);
                int ok = 1;
                for (int m = 0; m < M && ok; m++) {
                    if (memcmp(C + (size_t)m * ldc, Cr + (size_t)m * ldc, (size_t)N) != 0) {
                        for (int n = 0; n < N; n++) {
                            int8_t g = C[(size_t)m * ldc + n], w = Cr[(size_t)m * ldc + n];
                            if (g != w) {
                                hx_printf("FAIL %s: C[%d,%d] got %d want %d\n", name, m, n, g, w);
                                break;
                            }
                        }
                        ok = 0;
                    }
                }
                for (size_t g = 0; g < GUARD && ok; g++)
                    if ((uint8_t)C[c_bytes + g] != GUARD_BYTE) {
                        hx_printf("FAIL %s: wrote past the end of C\n", name);
                        ok = 0;
                    }
                qt_case(&T, ok);
            }
        }
    }
    qt_end_group(&T, "hvx_matmul_i8");
}

/* ---- helpers --------------------------------------------------------------------- */

static void test_interleave(void)
{
    qt_begin_group(&T);
    HVX_Vector e, o;
    int32_t *pe = (int32_t *)(void *)&e, *po = (int32_t *)(void *)&o;
    for (int i = 0; i < 32; i++) {
        pe[i] = 2 * i;
        po[i] = 2 * i + 1;
    }
    HVX_VectorPair p = hvx_interleave_words(e, o);
    HVX_Vector lo = Q6_V_lo_W(p), hi = Q6_V_hi_W(p);
    const int32_t *l = (const int32_t *)(const void *)&lo, *h = (const int32_t *)(const void *)&hi;
    int ok = 1;
    for (int i = 0; i < 32; i++)
        if (l[i] != i || h[i] != 32 + i) {
            hx_printf("FAIL hvx_interleave_words: lane %d got %d/%d want %d/%d\n", i, (int)l[i], (int)h[i], i,
                      32 + i);
            ok = 0;
            break;
        }
    qt_case(&T, ok);
    qt_end_group(&T, "hvx_interleave_words");
}

#if defined(__HVX_ARCH__) && __HVX_ARCH__ >= 68
/* Only in the v68/v73 images (linked, not run here). Tolerance: qf32 is not
 * IEEE-rounded; relative error 2^-20 on add/mul, 2^-10 * K on the fp16 matmul. */
static float fabs_f(float x) { return x < 0 ? -x : x; }

static void test_float(void)
{
    qt_begin_group(&T);
    float *a = (float *)(void *)pool_a, *b = (float *)(void *)pool_b;
    float *y = (float *)(void *)pool_y, *r = (float *)(void *)pool_r;
    size_t n = 1000;
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)qt_range(&R, -100000, 100000) / 1024.0f;
        b[i] = (float)qt_range(&R, -100000, 100000) / 1024.0f;
    }
    for (int op = 0; op < 2; op++) {
        if (op == 0) {
            hvx_add_f32(a, b, y, n);
            ref_add_f32(a, b, r, n);
        } else {
            hvx_mul_f32(a, b, y, n);
            ref_mul_f32(a, b, r, n);
        }
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++)
            if (fabs_f(y[i] - r[i]) > 1e-6f * (fabs_f(r[i]) + 1.0f))
                ok = 0;
        qt_case(&T, ok);
    }
    uint16_t *A = (uint16_t *)(void *)pool_a, *B = (uint16_t *)(void *)pool_b;
    int M = 3, N = 100, K = 20;
    for (int i = 0; i < M * K; i++)
        A[i] = ref_f32_to_f16((float)qt_range(&R, -64, 64) / 32.0f);
    for (int i = 0; i < K * N; i++)
        B[i] = ref_f32_to_f16((float)qt_range(&R, -64, 64) / 32.0f);
    hvx_matmul_f16(A, K, B, N, y, N, M, N, K);
    ref_matmul_f16(A, K, B, N, r, N, M, N, K);
    int ok = 1;
    for (int i = 0; i < M * N && ok; i++)
        if (fabs_f(y[i] - r[i]) > 1e-3f * (float)K * (fabs_f(r[i]) + 1.0f))
            ok = 0;
    qt_case(&T, ok);
    qt_end_group(&T, "hvx_float_v68");
}
#endif

/* hvx_qgemm_requant against ref_qmatmul_requant (ORT's f32 requantisation), bit for bit: accumulators
 * over the whole int32 range, small ones and exact ties (x.5 after scaling); scales of every magnitude
 * (2^-60 .. 2^20), negative, 0, subnormal, inf and NaN; per tensor and per column; u8 and i8. */
static float qgemm_scale(qt_rng *r)
{
    static const uint32_t special[8] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu,
                                        0x7f800000u, 0xff800000u, 0x7fc00000u, 0x3f000000u};
    uint32_t bits;
    if (qt_rand(r) % 8 == 0)
        bits = special[qt_rand(r) % 8];
    else
        bits = (uint32_t)qt_range(r, 67, 147) << 23 | (qt_rand(r) & 0x7fffffu) | (qt_rand(r) % 16 == 0) << 31;
    float s;
    memcpy(&s, &bits, 4);
    return s;
}

static void test_qgemm_requant(void)
{
    enum { QN = 3 * 128 + 5 };
    qt_begin_group(&T);
    qt_rng r = {99};
    int32_t *acc = (int32_t *)(void *)pool_a;
    float *sc = (float *)(void *)pool_b;
    for (int t = 0; t < 64; t++) {
        int per_column = t & 1, y_signed = (t >> 1) & 1, kind = (t >> 2) % 4;
        int32_t zy = y_signed ? (int32_t)qt_range(&r, -128, 127) : (int32_t)qt_range(&r, 0, 255);
        float s0 = qgemm_scale(&r);
        for (int i = 0; i < QN; i++) {
            sc[i] = per_column ? qgemm_scale(&r) : s0;
            int64_t v = kind == 0 ? qt_range(&r, INT32_MIN, INT32_MAX) : qt_range(&r, -100000, 100000);
            if (kind == 2) /* ties: an odd integer over a power of two scale */
                sc[i] = per_column ? (qt_rand(&r) % 2 ? 0.5f : 0.25f) : 0.5f, v = v | 1;
            if (kind == 3 && i % 7 == 0)
                v = i % 2 ? INT32_MAX : INT32_MIN;
            acc[i] = (int32_t)v;
        }
        hvx_qgemm_requant(acc, QN, sc, (size_t)per_column, zy, y_signed, pool_y);
        int lo = y_signed ? -128 : 0, hi = y_signed ? 127 : 255, ok = 1;
        for (int i = 0; i < QN && ok; i++) {
            int32_t want = ref_qmatmul_requant(acc[i], sc[i], zy, lo, hi);
            ok = pool_y[i] == (uint8_t)want;
            if (!ok)
                hx_printf("FAIL hvx_qgemm_requant case %d: y[%d] %d, want %d (acc %d)\n", t, i, pool_y[i], want, acc[i]);
        }
        qt_case(&T, ok);
    }
    qt_end_group(&T, "hvx_qgemm_requant");
}

/* hvx_dequant_i8_f32 against ref_dequantize_linear, bit for bit: every byte value, zero points at and
 * between the extremes, scales of every exponent (normal, the edges of the HVX range, and the scalar
 * path's subnormal, 0, inf, NaN), negative scales, u8 and i8, odd lengths, misaligned x and y. */
static void test_dequant(void)
{
    enum { DN = 3 * 128 + 7 };
    qt_begin_group(&T);
    qt_rng r = {1234};
    static const uint32_t special[10] = {0x00000000u, 0x80000000u, 0x00000003u, 0x7f800000u, 0x7fc00000u,
                                         0x00800000u, 0x7a800000u, 0x7affffffu, 0x7b000000u, 0x3b800000u};
    for (int t = 0; t < 96; t++) {
        int x_signed = t & 1, off = (t >> 1) % 3;
        uint8_t *x = pool_a + off;
        float *y = (float *)(void *)(pool_y + 4 * off); /* 4-byte, not 128-byte, aligned */
        uint32_t sbits = t < 20 ? special[t / 2] : (uint32_t)qt_range(&r, 1, 254) << 23 | (qt_rand(&r) & 0x807fffffu);
        float sc;
        memcpy(&sc, &sbits, 4);
        int32_t zp = x_signed ? (t % 5 == 0 ? -128 : t % 5 == 1 ? 127 : (int32_t)qt_range(&r, -128, 127))
                              : (t % 5 == 0 ? 0 : t % 5 == 1 ? 255 : (int32_t)qt_range(&r, 0, 255));
        for (int i = 0; i < DN; i++)
            x[i] = (uint8_t)(i < 256 ? i : qt_rand(&r));
        hvx_dequant_i8_f32(x, DN, x_signed, zp, sc, y);
        int ok = 1;
        for (int i = 0; i < DN && ok; i++) {
            float want = ref_dequantize_linear(x_signed ? (int8_t)x[i] : x[i], sc, zp);
            ok = memcmp(&want, &y[i], 4) == 0;
            if (!ok) {
                uint32_t gb, wb;
                memcpy(&gb, &y[i], 4), memcpy(&wb, &want, 4);
                hx_printf("FAIL hvx_dequant case %d: x[%d] %d zp %d scale %08x: %08x, want %08x\n", t, i, x[i], zp,
                          sbits, gb, wb);
            }
        }
        qt_case(&T, ok);
    }
    qt_end_group(&T, "hvx_dequant_i8_f32");
}

/* hvx_dequant_i16_f32 against ref_dequantize_linear, bit for bit: every 16-bit value once (the first
 * cases), the extremes, zero points at and between the type's ends, scales of every exponent (the
 * edges of the HVX range 237/238, full and single-bit mantissas: rounding carries, ties, and the scalar
 * path's subnormal, 0, inf, NaN), negative scales, u16 and i16, odd lengths, x and y misaligned. */
static void test_dequant16(void)
{
    enum { DN = 5 * 64 + 13, ALL = 16384 };
    qt_begin_group(&T);
    qt_rng r = {4321};
    static const uint32_t special[14] = {0x3f7fffffu, 0x3f800001u, 0xbfffffffu, 0x76800000u, 0x76ffffffu,
                                         0x77000000u, 0x00800000u, 0x00000000u, 0x80000000u, 0x00000003u,
                                         0x7f800000u, 0x7fc00000u, 0x3b800000u, 0x3c000001u};
    for (int t = 0; t < 128; t++) {
        int x_signed = t & 1, off = 2 * ((t >> 1) % 3), n = t < 8 ? ALL : DN;
        uint16_t *x = (uint16_t *)(void *)(pool_a + off);
        float *y = (float *)(void *)(pool_y + 4 * off); /* 4-byte, not 128-byte, aligned */
        uint32_t sbits = t < 28 ? special[t / 2] : (uint32_t)qt_range(&r, 1, 254) << 23 | (qt_rand(&r) & 0x807fffffu);
        float sc;
        memcpy(&sc, &sbits, 4);
        int32_t zp = x_signed ? (t % 5 == 0 ? -32768 : t % 5 == 1 ? 32767 : (int32_t)qt_range(&r, -32768, 32767))
                              : (t % 5 == 0 ? 0 : t % 5 == 1 ? 65535 : (int32_t)qt_range(&r, 0, 65535));
        for (int i = 0; i < n; i++)
            x[i] = (uint16_t)(t < 8 ? (t / 2) * ALL + i : i % 3 == 0 ? (i % 2 ? 0xffffu : i % 7 ? 0x8000u : 0x7fffu)
                                                                    : qt_rand(&r));
        hvx_dequant_i16_f32(x, (size_t)n, x_signed, zp, sc, y);
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            float want = ref_dequantize_linear(x_signed ? (int16_t)x[i] : x[i], sc, zp);
            ok = memcmp(&want, &y[i], 4) == 0;
            if (!ok) {
                uint32_t gb, wb;
                memcpy(&gb, &y[i], 4), memcpy(&wb, &want, 4);
                hx_printf("FAIL hvx_dequant16 case %d: x[%d] %d zp %d scale %08x: %08x, want %08x\n", t, i, x[i], zp,
                          sbits, gb, wb);
            }
        }
        qt_case(&T, ok);
    }
    qt_end_group(&T, "hvx_dequant_i16_f32");
}

/* an x whose quotient by s is near (at, for a power-of-two s) k + 1/2 for k in [lo - zp - 2, hi - zp + 2]:
 * the f32 product moved by up to 3 ulps either way */
static uint32_t quant_near_tie(qt_rng *r, float s, int32_t zp, int32_t lo, int32_t hi)
{
    float x = ((float)(int32_t)qt_range(r, lo - zp - 2, hi - zp + 2) + 0.5f) * s;
    uint32_t u;
    memcpy(&u, &x, 4);
    int32_t d = (int32_t)qt_range(r, -3, 3);
    return (u & 0x7fffffffu) > 3u && (u & 0x7f800000u) != 0x7f800000u ? u + (uint32_t)d : u;
}

/* the x of quantize case: kind 0 near ties, 1 values over the range and a little past it, 2 special
 * values (NaN of both signs and payloads, +-inf, +-0, subnormals, +-FLT_MAX, tiny and huge), 3 random
 * bit patterns; mixed */
static uint32_t quant_x(qt_rng *r, float s, int32_t zp, int32_t lo, int32_t hi)
{
    static const uint32_t special[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                                       0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu,
                                       0xff7fffffu, 0x00800000u, 0x0da24260u, 0x7149f2cau, 0xf149f2cau};
    uint32_t u, kind = qt_rand(r) % 8;
    if (kind < 3)
        return quant_near_tie(r, s, zp, lo, hi);
    if (kind < 6) {
        float t = ((float)qt_rand(r) / 4294967296.0f) * (float)(hi - lo + 8) + (float)(lo - zp - 4), x = t * s;
        memcpy(&u, &x, 4);
        return u;
    }
    return kind == 6 ? special[qt_rand(r) % 15] : qt_rand(r);
}

/* hvx_quant_f32 against ref_quantize_linear, bit for bit: u8, i8, u16, i16; zero points at both ends and
 * between; scales that are powers of two (every k + 1/2 an exact tie) and not, at the edges of the
 * HVX range (exponent fields 3 and 254) and past them (2, subnormal, 0, inf, NaN: the call must
 * return 0 and write nothing), negative; x near every tie of the range, over it and past it, every
 * special kind; every length of SIZES in turn; x and y 128-byte aligned, misaligned (x by 4 bytes, y
 * by 1) and in place. The bytes after y must stay untouched. */
static void test_quant(void)
{
    static const uint32_t scales[] = {0x3e000000u, 0x3f800000u, 0x3c000000u, 0x46800000u, 0x01800000u, 0x76800000u,
                                      0x3cc0c0c1u, 0x3eaaaaabu, 0xbcc0c0c1u, 0x3a8a0a7fu, 0x01000000u, 0x7f7fffffu,
                                      0x00000005u, 0x00000000u, 0x7f800000u, 0x7fc00000u, 0, 0, 0, 0};
    enum { NS = sizeof scales / sizeof scales[0] };
    qt_begin_group(&T);
    qt_rng r = {8642};
    size_t count = 0;
    for (int si = 0; si < NS; si++)
        for (int t = 0; t < 4 * 3; t++, count++) {
            int y_bytes = t % 4 < 2 ? 1 : 2, y_signed = t % 2, lay = t / 4;
            int32_t lo = y_signed ? (y_bytes == 1 ? INT8_MIN : INT16_MIN) : 0;
            int32_t hi = y_bytes == 1 ? (y_signed ? INT8_MAX : UINT8_MAX) : (y_signed ? INT16_MAX : UINT16_MAX);
            int32_t zp = count % 5 == 0 ? lo : count % 5 == 1 ? hi : lo + (int32_t)qt_range(&r, 0, hi - lo);
            uint32_t sb = scales[si] ? scales[si] : (uint32_t)qt_range(&r, 100, 140) << 23 | (qt_rand(&r) & 0x7fffffu);
            float s;
            memcpy(&s, &sb, 4);
            size_t n = SIZES[count % N_SIZES];
            uint8_t *xb = pool_a + (lay == UN ? 4 : 0), *yb = lay == IP ? xb : pool_y + (lay == UN ? 1 : 0);
            for (size_t i = 0; i < n; i++) {
                uint32_t u = quant_x(&r, s, zp, lo, hi);
                memcpy(xb + 4 * i, &u, 4);
            }
            memcpy(pool_b, xb, 4 * n);
            size_t ybytes = n * (size_t)y_bytes;
            if (lay != IP)
                memset(yb, GUARD_BYTE, ybytes + GUARD);
            int es = (int)(sb >> 23 & 0xff), fast = es >= 3 && es <= 254;
            int got = hvx_quant_f32((const float *)(const void *)xb, n, s, zp, y_bytes, y_signed, yb);
            int ok = got == fast;
            for (size_t i = 0; i < n && ok && fast; i++) {
                float v;
                memcpy(&v, pool_b + 4 * i, 4);
                int32_t want = ref_quantize_linear(v, s, zp, lo, hi);
                int32_t q = y_bytes == 1 ? (y_signed ? (int8_t)yb[i] : yb[i])
                                         : (int32_t)(yb[2 * i] | yb[2 * i + 1] << 8);
                if (y_bytes == 2 && y_signed)
                    q = (int16_t)q;
                ok = q == want;
                if (!ok)
                    hx_printf("FAIL hvx_quant_f32 case %u (%d-byte %s, %s) n %u: x[%u] %08x scale %08x zp %d: %d, "
                              "want %d\n",
                              (unsigned)count, y_bytes, y_signed ? "signed" : "unsigned", LAYOUT_NAME[lay],
                              (unsigned)n, (unsigned)i, *(const uint32_t *)(const void *)(pool_b + 4 * i), sb, zp, q,
                              want);
            }
            if (got != fast)
                hx_printf("FAIL hvx_quant_f32 case %u: scale %08x returned %d\n", (unsigned)count, sb, got);
            int kept = 1; /* the guard, and all of y for a refused scale */
            for (size_t i = 0; lay != IP && i < GUARD + (fast ? 0 : ybytes); i++)
                kept = kept && yb[(fast ? ybytes : 0) + i] == GUARD_BYTE;
            if (!kept)
                hx_printf("FAIL hvx_quant_f32 case %u: bytes written past y (or by a refused scale)\n", (unsigned)count);
            ok = ok && kept;
            qt_case(&T, ok);
        }
    qt_end_group(&T, "hvx_quant_f32");
}

/* DYNAMIC_QPARAMS's range: every length of SIZES at byte offsets 0, 1 and 4, values of every kind
 * (random patterns, NaN of both signs and payloads, +-inf, +-0, subnormals, +-FLT_MAX) and runs of
 * one kind (all NaN, all -0, all negative, all positive), against the reference's f32 selects: lo and
 * hi equal (this build's selects give -0 for a range of -0 where the host's keep +0), the scale and
 * zero point of ref_range_qparams bit for bit. */
static void test_range(void)
{
    static const uint32_t special[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x00000000u,
                                       0x80000000u, 0x00000001u, 0x80000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu};
    qt_begin_group(&T);
    qt_rng r = {4321};
    for (size_t si = 0; si < N_SIZES; si++)
        for (int t = 0; t < 3 * 6; t++) {
            size_t n = SIZES[si], off = (size_t)(t % 3 == 2 ? 4 : t % 3);
            int kind = t / 3;
            for (size_t i = 0; i < n; i++) {
                uint32_t u = kind == 0   ? (qt_rand(&r) % 4 == 0 ? special[qt_rand(&r) % 12] : qt_rand(&r))
                             : kind == 1 ? special[qt_rand(&r) % 12]
                             : kind == 2 ? 0x7fc00000u | qt_rand(&r)
                             : kind == 3 ? 0x80000000u
                             : kind == 4 ? 0x80000000u | qt_rand(&r)
                                         : qt_rand(&r) & 0x7fffffffu;
                memcpy(pool_a + off + 4 * i, &u, 4);
            }
            const float *x = (const float *)(const void *)(pool_a + off);
            float lo = 0.0f, hi = 0.0f, glo, ghi, ws, gs;
            for (size_t i = 0; i < n; i++) {
                float v;
                memcpy(&v, pool_a + off + 4 * i, 4);
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            hvx_range_f32(x, n, &glo, &ghi);
            int32_t wz, gz;
            ref_range_qparams(lo, hi, &ws, &wz);
            ref_range_qparams(glo, ghi, &gs, &gz);
            int ok = lo == glo && hi == ghi && memcmp(&ws, &gs, 4) == 0 && wz == gz;
            if (!ok) {
                uint32_t b[4];
                memcpy(b, &glo, 4), memcpy(b + 1, &ghi, 4), memcpy(b + 2, &lo, 4), memcpy(b + 3, &hi, 4);
                hx_printf("FAIL hvx_range_f32 n %u off %u kind %d: lo %08x hi %08x, want %08x %08x\n", (unsigned)n,
                          (unsigned)off, kind, b[0], b[1], b[2], b[3]);
            }
            qt_case(&T, ok);
        }
    qt_end_group(&T, "hvx_range_f32");
}

/* CAST f32 -> i32: every length of SIZES, x and y at byte offsets 0, 1 and 4 (and in place), values
 * of every exponent (random patterns), in range (exponents 100..160 with random mantissas) and
 * the edges: +-0, subnormals, +-0.5, +-1, +-(2^31 - 128), -2^31, just beyond, +-2^31, +-inf, NaN;
 * bit for bit ref_cast_f32_i32. The bytes after y must stay untouched. */
static void test_cast(void)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f000000u, 0xbf000000u,
                                       0x3f800000u, 0xbf800000u, 0x4effffffu, 0xceffffffu, 0xcf000000u, 0xcf000001u,
                                       0x4f000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x3fffffffu, 0xc0200000u};
    qt_begin_group(&T);
    qt_rng r = {777};
    for (size_t si = 0; si < N_SIZES; si++)
        for (int t = 0; t < 4 * 3; t++) {
            size_t n = SIZES[si], xo = (size_t)(t % 4 == 2 ? 4 : t % 4 == 3 ? 0 : t % 4), yo = (size_t)(t % 4 == 1 ? 3 : 0);
            int kind = t / 4, in_place = t % 4 == 3;
            uint8_t *xb = pool_a + xo, *yb = in_place ? xb : pool_y + yo;
            for (size_t i = 0; i < n; i++) {
                uint32_t u = kind == 0   ? (qt_rand(&r) % 3 == 0 ? special[qt_rand(&r) % 18] : qt_rand(&r))
                             : kind == 1 ? (uint32_t)qt_range(&r, 100, 160) << 23 | (qt_rand(&r) & 0x807fffffu)
                                         : special[i % 18];
                memcpy(xb + 4 * i, &u, 4);
            }
            memcpy(pool_b, xb, 4 * n);
            if (!in_place)
                memset(yb + 4 * n, 0xa5, GUARD);
            hvx_cast_f32_i32((const float *)(const void *)xb, n, (int32_t *)(void *)yb);
            int ok = 1;
            for (size_t i = 0; i < n && ok; i++) {
                float v;
                int32_t got;
                memcpy(&v, pool_b + 4 * i, 4), memcpy(&got, yb + 4 * i, 4);
                ok = got == ref_cast_f32_i32(v);
                if (!ok)
                    hx_printf("FAIL hvx_cast_f32_i32 n %u case %d: x[%u] %08x: %d, want %d\n", (unsigned)n, t,
                              (unsigned)i, *(const uint32_t *)(const void *)(pool_b + 4 * i), got, ref_cast_f32_i32(v));
            }
            for (size_t i = 0; ok && !in_place && i < GUARD; i++)
                ok = yb[4 * n + i] == 0xa5;
            qt_case(&T, ok);
        }
    qt_end_group(&T, "hvx_cast_f32_i32");
}

/* ---- packet-count mode -------------------------------------------------------------- */

/* A QMATMUL item as qmatmul_hvx.c runs it (u8 x u8 -> u8, per-tensor zero points): V packed, its
 * column sums, then 4 rows at a time copied, accumulated and requantised; an IMATMUL item (raw: no
 * bias, the int32 accumulators stored as they are, Y of M x N words). */
static void qgemm_item(const uint8_t *A, const uint8_t *B, uint8_t *Y, int M, int K, int N, int raw)
{
    size_t ldc = (size_t)(N + HVX_QGEMM_PANEL - 1) / HVX_QGEMM_PANEL * HVX_QGEMM_PANEL;
    uint8_t *packed = pool_r;
    int32_t *bcol = (int32_t *)(void *)(packed + hvx_qgemm_packed_bytes((size_t)K, (size_t)N));
    int32_t *zvp = bcol + ldc, *vsum = zvp + ldc, *acc = vsum + ldc;
    uint8_t *rows = (uint8_t *)(acc + 4 * ldc);
    hvx_qgemm_pack(B, (size_t)N, 0, (size_t)K, (size_t)N, packed);
    hvx_qgemm_col_sums(packed, (size_t)K, (size_t)N, vsum);
    for (size_t c = 0; c < ldc; c++)
        bcol[c] = (int32_t)c, zvp[c] = 128;
    hvx_qgemm_cols cols = {raw ? NULL : bcol, zvp, vsum};
    int32_t zs[4] = {3, 3, 3, 3}, brow[4] = {0, 0, 0, 0};
    float scale = 0.0123f;
    size_t rb = hvx_qgemm_row_bytes((size_t)K);
    for (int r = 0; r < M; r += 4) {
        for (int i = 0; i < 4; i++)
            hvx_qgemm_copy_row(A + (size_t)(r + i) * K, (size_t)K, rows + i * rb);
        hvx_qgemm_rows(rows, 4, 0, zs, brow, packed, &cols, (size_t)K, (size_t)N, acc);
        for (int i = 0; i < 4; i++)
            if (raw)
                hvx_qgemm_store_words(acc + i * ldc, (size_t)N, Y + (size_t)(r + i) * N * 4);
            else
                hvx_qgemm_requant(acc + i * ldc, (size_t)N, &scale, 0, 7, 0, Y + (size_t)(r + i) * N);
    }
}

/* An ICONV2D item as qmatmul_hvx.c runs it (u8 X and W, per-tensor zero points): the im2col rows of its np
 * pixels, packed, their column sums, then 4 output channels at a time copied, accumulated and stored as
 * int32 (Y: M rows of np words). */
static void iconv_item(const uint8_t *X, const uint8_t *W, uint8_t *Y, const hvx_conv_geom *g, int M, size_t np)
{
    size_t kk = (size_t)(g->cg * g->kh * g->kw), ldc = (np + HVX_QGEMM_PANEL - 1) / HVX_QGEMM_PANEL * HVX_QGEMM_PANEL;
    size_t ld = hvx_im2col_ld(np), rb = hvx_qgemm_row_bytes(kk);
    uint8_t *t = pool_y, *packed = pool_r;
    int32_t *zvp = (int32_t *)(void *)(packed + hvx_qgemm_packed_bytes(kk, np)), *vsum = zvp + ldc;
    int32_t *acc = vsum + ldc;
    uint8_t *rows = (uint8_t *)(acc + 4 * ldc);
    hvx_im2col_rows(X, X + g->cg * g->H * g->W, g, 0, np, 5, t, ld);
    hvx_qgemm_pack(t, ld, 0, kk, np, packed);
    hvx_qgemm_col_sums(packed, kk, np, vsum);
    for (size_t c = 0; c < ldc; c++)
        zvp[c] = 5;
    hvx_qgemm_cols cols = {NULL, zvp, vsum};
    int32_t zs[4] = {3, 3, 3, 3}, brow[4] = {0, 0, 0, 0};
    for (int m = 0; m < M; m += 4) {
        for (int i = 0; i < 4; i++)
            hvx_qgemm_copy_row(W + (size_t)(m + i) * kk, kk, rows + i * rb);
        hvx_qgemm_rows(rows, 4, 0, zs, brow, packed, &cols, kk, np, acc);
        for (int i = 0; i < 4; i++)
            hvx_qgemm_store_words(acc + i * ldc, np, Y + (size_t)(m + i) * np * 4);
    }
}

/* Fixed small sizes, 128-byte aligned buffers; the caller counts the packets
 * executed inside the kernel under qemu -singlestep -d exec. */
static int run_packets(const char *kernel)
{
    int32_t bias[256];
    hx_requant rq = {1518500250, 8, 3, -128, 127};
    /* cheap fill (the log records every packet of the run; values do not
     * change the kernels' control flow) */
    uint32_t x = 12345u;
    for (size_t i = 0; i < 64 * HVX_BYTES * 4 / 4; i++) {
        x = x * 1664525u + 1013904223u;
        ((uint32_t *)(void *)pool_a)[i] = x;
        ((uint32_t *)(void *)pool_b)[i] = x ^ 0x5a5a5a5au;
    }
    for (size_t i = 0; i < N_ELTWISE; i++) {
        const eltwise_kernel *k = &ELTWISE[i];
        char full[48];
        hx_snprintf(full, sizeof full, "hvx_%s", k->name);
        if (strcmp(kernel, full) == 0) {
            size_t n = 64 * HVX_BYTES / (size_t)k->elem; /* 64 vectors */
            call_eltwise(k, 1, pool_a, pool_b, pool_y, n);
            hx_printf("PACKETS %s units=64 unit=vector\n", kernel);
            return 0;
        }
    }
    if (strcmp(kernel, "hvx_lut_i8") == 0) {
        int8_t table[256];
        for (int i = 0; i < 256; i++)
            table[i] = (int8_t)(i * 7);
        hvx_lut_i8_prepare(table, lut_prepared);
        hvx_lut_i8((const int8_t *)pool_a, (int8_t *)pool_y, 64 * HVX_BYTES, lut_prepared);
        hx_printf("PACKETS %s units=64 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_requant_i32_i8") == 0) {
        hvx_requant_i32_i8((const int32_t *)(const void *)pool_a, (int8_t *)pool_y, 16 * HVX_BYTES, &rq);
        hx_printf("PACKETS %s units=16 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_matmul_i8") == 0) {
        /* M=8, N=256, K=128: 8 * (256/32) * (128/4) = 2048 vrmpy (128 MACs each) */
        int M = 8, N = 256, K = 128;
        for (int i = 0; i < N; i++)
            bias[i] = i;
        hvx_matmul_i8_pack_b((const int8_t *)pool_b, N, K, N, pool_r);
        hvx_matmul_i8((const int8_t *)pool_a, K, pool_r, bias, (int8_t *)pool_y, N, M, N, K, &rq);
        hx_printf("PACKETS %s units=%d unit=vrmpy\n", kernel, M * (N / 32) * (K / 4));
        return 0;
    }
    if (strcmp(kernel, "hvx_dequant_i8_f32") == 0) {
        hvx_dequant_i8_f32(pool_a, 16 * HVX_BYTES, 0, 3, 0.0123f, (float *)(void *)pool_y); /* 64 f32 vectors */
        hx_printf("PACKETS %s units=64 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_dequant_i16_f32") == 0) {
        hvx_dequant_i16_f32((const uint16_t *)(const void *)pool_a, 8 * HVX_BYTES, 0, 3, 0.0123f,
                            (float *)(void *)pool_y); /* 32 f32 vectors */
        hx_printf("PACKETS %s units=32 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_quant_f32") == 0) {
        /* 64 vectors of f32 over u8's range and a little past it (x / 0.02 from -3 to 258 in steps of
         * 1 / 1024 + 2^-20, so that few lanes are near a tie) */
        float *x = (float *)(void *)pool_a;
        for (int i = 0; i < 16 * HVX_BYTES; i++)
            x[i] = ((float)(((uint32_t *)(void *)pool_a)[i] % 267264u) * 0.0009775162f - 3.0f) * 0.02f;
        hvx_quant_f32(x, 16 * HVX_BYTES, 0.02f, 3, 1, 0, pool_y);
        hx_printf("PACKETS %s units=64 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_qgemm") == 0 || strcmp(kernel, "hvx_imatmul") == 0) {
        int M = 8, N = 256, K = 128; /* as hvx_matmul_i8: 2048 vrmpy */
        qgemm_item(pool_a, pool_b, pool_y, M, K, N, kernel[4] == 'i');
        hx_printf("PACKETS %s units=%d unit=vrmpy\n", kernel, M * (N / 32) * (K / 4));
        return 0;
    }
    if (strcmp(kernel, "hvx_iconv") == 0) {
        /* 32 -> 64 channels, 3x3 padded, 4 x 32 pixels (a mid-sized conv of ddddocr_ocr_int8): K = 288,
         * N = 128 as 64 x (128/32) x (288/4) vrmpy; W, then Y at 32 KiB in pool_b */
        hvx_conv_geom g = {32, 3, 3, 4, 32, 32, 1, 1, 1, 1, 1, 1};
        int M = 64, np = 4 * 32;
        iconv_item(pool_a, pool_b, pool_b + 32 * 1024, &g, M, (size_t)np);
        hx_printf("PACKETS %s units=%d unit=vrmpy\n", kernel, M * (np / 32) * (32 * 9 / 4));
        return 0;
    }
    if (strcmp(kernel, "hvx_qresize") == 0) {
        /* QRESIZE's HVX rows on one plane of an FPN upsample, u8 60 x 80 -> 120 x 160 (x2 both ways): the
         * table prepared, then each source row through it once and spread into its two output rows (the
         * core's row loop not counted); 150 output vectors */
        enum { H = 60, W = 80 };
        hvx_qresize r;
        hvx_qresize_init(&r, pool_r, W, 2 * W, pool_b, 0, 2);
        for (int i = 0; i < H; i++)
            hvx_qresize_rows(&r, pool_a + i * W, 2, pool_y + i * 4 * W);
        hx_printf("PACKETS %s units=%d unit=vector\n", kernel, 4 * H * W / HVX_BYTES);
        return 0;
    }
    if (strcmp(kernel, "hvx_transpose") == 0) {
        /* TRANSPOSE's HVX kernel on whisper_encoder's attention transposes, u8 [64, 64] -> [64, 64] dense:
         * 6 vdeal passes over one 4 KiB tile, read and written in place; 32 output vectors */
        hvx_transpose(pool_a, 64, pool_y, 64, 64, 64, 1, pool_r);
        hx_printf("PACKETS %s units=32 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_transpose_narrow") == 0) {
        /* layout_cdla's head transposes, u8 [10, 3200] -> [3200, 10]: 25 tiles of 16 x 128 staged in the work
         * space, output rows of 10 bytes; 250 output vectors */
        hvx_transpose(pool_a, 3200, pool_y, 10, 10, 3200, 1, pool_r);
        hx_printf("PACKETS %s units=250 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_maxpool") == 0) {
        /* QMAXPOOL's HVX row path, 3x3 stride 1 on rows of 130 u8: 16 output rows of 128 */
        for (int r = 0; r < 16; r++) {
            hvx_maxpool_rows(pool_a + r * 130, 130, 3, 130, 0, pool_a + POOL_BYTES, pool_r);
            hvx_maxpool_taps(pool_r, 128, 1, 3, 1, 0, NULL, pool_y + r * 128);
        }
        hx_printf("PACKETS %s units=16 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_avgpool") == 0) {
        /* QAVGPOOL's HVX row path, 3x3 stride 1 on u8 rows of 130: 16 output rows of 128, each the window
         * rows' column sums, the taps' sums, then the outputs in fixed point (s_x / (9 s_y) = 0.1333:
         * mul 0x8889 >> 18, flags and all) */
        uint16_t *sums = (uint16_t *)(void *)(pool_b + 512);
        for (int r = 0; r < 16; r++) {
            hvx_avgpool_rows(pool_a + r * 130, 130, 3, 130, 0, pool_a + POOL_BYTES, (uint16_t *)(void *)pool_r);
            hvx_avgpool_taps((const uint16_t *)(const void *)pool_r, 128, 1, 3, sums);
            hvx_avgpool_finish(sums, 128, 9 * 3, 0x8889, 18, 4000, 0, 0, pool_y + r * 128, pool_b);
        }
        hx_printf("PACKETS %s units=16 unit=vector\n", kernel);
        return 0;
    }
    if (strcmp(kernel, "hvx_qadd") == 0 || strcmp(kernel, "hvx_qmul") == 0) {
        /* QADD / QMUL blocks of 128 u8 outputs, same-shape operands (ties and all: the block's cost) */
        int mul = kernel[5] == 'm';
        hvx_qbin q;
        hvx_qbin_init(&q, mul, 0, 0, mul ? 0.0123f : 0.75f, 0.5f, 3, 200, 17, 0, 255);
        for (int v = 0; v < 64; v++)
            hvx_qbin_block(&q, pool_a + v * HVX_BYTES, 1, pool_b + v * HVX_BYTES, 1, pool_y + v * HVX_BYTES, pool_r);
        hx_printf("PACKETS %s units=64 unit=vector\n", kernel);
        return 0;
    }
    hx_printf("unknown kernel %s\n", kernel);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--packets") == 0)
        return run_packets(argv[2]);
    int ints = !(argc >= 2 && strcmp(argv[1], "--float-only") == 0);
    int floats = !(argc >= 2 && strcmp(argv[1], "--int-only") == 0);
    hx_printf("hvx kernels vs C references (HVX v%d, %d-byte vectors; integer kernels must be bit-exact)\n",
              __HVX_ARCH__, __HVX_LENGTH__);
    if (ints) {
        for (size_t i = 0; i < N_ELTWISE; i++)
            test_eltwise(&ELTWISE[i]);
        test_lut();
        test_lut_words();
        test_transpose();
        test_requant();
        test_matmul();
        test_qgemm_requant();
        test_dequant();
        test_dequant16();
        test_quant();
        test_range();
        test_cast();
        test_interleave();
    }
#if defined(__HVX_ARCH__) && __HVX_ARCH__ >= 68
    if (floats)
        test_float();
#else
    (void)floats;
#endif
    return qt_result(&T, "test_hvx_kernels");
}
