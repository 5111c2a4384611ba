/*
 * qtest.h - the tiny test harness of the qemu-hexagon test images.
 *
 * Output protocol (parsed by dsp/scripts/run_qemu_tests.sh):
 *   "FAIL <case>: <detail>"   one line per failed case
 *   "ok   <group>: <n> cases"  one line per group of cases
 *   "RESULT <image> passed=<p> failed=<f>"  last line of a test image
 * The image's exit code is 0 only when failed == 0.
 */
#ifndef HEXFUSE_QTEST_H
#define HEXFUSE_QTEST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hx_rt.h"

typedef struct qtest {
    int passed, failed;
    int group_passed, group_failed;
} qtest;

static inline void qt_begin_group(qtest *t)
{
    t->group_passed = 0;
    t->group_failed = 0;
}

static inline void qt_end_group(qtest *t, const char *group)
{
    hx_printf("%s %s: %d cases%s\n", t->group_failed ? "FAIL" : "ok  ", group,
              t->group_passed + t->group_failed, t->group_failed ? " (some failed)" : "");
}

static inline void qt_case(qtest *t, int ok)
{
    if (ok) {
        t->passed++;
        t->group_passed++;
    } else {
        t->failed++;
        t->group_failed++;
    }
}

static inline int qt_result(const qtest *t, const char *image)
{
    hx_printf("RESULT %s passed=%d failed=%d\n", image, t->passed, t->failed);
    return t->failed ? 1 : 0;
}

/* xorshift64* */
typedef struct qt_rng {
    uint64_t s;
} qt_rng;

static inline uint32_t qt_rand(qt_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}

/* uniform in [lo, hi] (hi - lo < 2^32) */
static inline int64_t qt_range(qt_rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    uint64_t x = ((uint64_t)qt_rand(r) << 32 | qt_rand(r));
    return lo + (int64_t)(span ? x % span : x);
}

#endif /* HEXFUSE_QTEST_H */
