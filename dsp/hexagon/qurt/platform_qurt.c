/*
 * platform_qurt.c - the hexfuse platform layer (dsp/src/platform.h) on QuRT,
 * for the cDSP build with the Hexagon SDK (HEXAGON_SDK_ROOT).
 *
 * NOT BUILT in this repository's CI: there is no Hexagon SDK here. It is
 * compiled only by dsp/hexagon/sdk.cmake when HEXAGON_SDK_ROOT is given,
 * and has not been compiled or run against a real SDK yet.
 *
 * Same model as platform_posix.c: one QuRT thread per worker loops on
 * step(); an idle worker sleeps on a condition variable until notify()
 * bumps the generation counter. Each worker holds an HVX context
 * (qurt_hvx_lock, 128-byte mode) for its lifetime, so HVX kernels run on
 * any worker. The matrix worker would also reserve HMX (HAP_compute_res);
 * there is no HMX kernel in this tree yet, so it does not.
 */
#include "platform.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "HAP_perf.h"
#include "qurt.h"
#include "qurt_hvx.h"

#ifndef HFX_QURT_HW_THREADS
#define HFX_QURT_HW_THREADS 4u /* HVX contexts of the v68/v73 cDSP */
#endif
#ifndef HFX_QURT_STACK_BYTES
#define HFX_QURT_STACK_BYTES (16u * 1024u)
#endif
#ifndef HFX_QURT_PRIORITY
#define HFX_QURT_PRIORITY 100
#endif

const char *hfx_plat_name(void) { return "qurt"; }

uint32_t hfx_plat_hw_threads(void) { return HFX_QURT_HW_THREADS; }

/* ---- memory: malloc with the alignment done by hand ----------------------------- */

void *hfx_plat_alloc(size_t size, size_t align)
{
    if (size == 0)
        size = 1;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if ((align & (align - 1)) != 0 || align > 4096)
        return NULL;
    if (size > SIZE_MAX - align - sizeof(void *))
        return NULL;
    unsigned char *raw = malloc(size + align + sizeof(void *));
    if (!raw)
        return NULL;
    uintptr_t p = ((uintptr_t)(raw + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)p)[-1] = raw;
    return (void *)p;
}

void hfx_plat_free(void *ptr)
{
    if (ptr)
        free(((void **)ptr)[-1]);
}

uint64_t hfx_plat_now_ns(void) { return HAP_perf_get_time_us() * 1000ull; }

/* ---- mutex -------------------------------------------------------------------------- */

struct hfx_plat_mutex {
    qurt_mutex_t m;
};

hfx_plat_mutex *hfx_plat_mutex_create(void)
{
    hfx_plat_mutex *m = malloc(sizeof *m);
    if (!m)
        return NULL;
    qurt_mutex_init(&m->m);
    return m;
}

void hfx_plat_mutex_destroy(hfx_plat_mutex *m)
{
    if (!m)
        return;
    qurt_mutex_destroy(&m->m);
    free(m);
}

void hfx_plat_mutex_lock(hfx_plat_mutex *m) { qurt_mutex_lock(&m->m); }
void hfx_plat_mutex_unlock(hfx_plat_mutex *m) { qurt_mutex_unlock(&m->m); }

/* ---- workers -------------------------------------------------------------------- */

struct worker_slot {
    struct hfx_plat_workers *w;
    uint32_t id;
    qurt_thread_t tid;
    void *stack;
};

struct hfx_plat_workers {
    qurt_mutex_t mu;
    qurt_cond_t cv;      /* workers: claimable work may have changed */
    qurt_cond_t cv_done; /* the waiter: the job is done (a finished op does not wake it) */
    atomic_uint_fast64_t gen;
    atomic_bool stop;
    hfx_plat_step_fn step;
    void *ctx;
    uint32_t n, started;
    struct worker_slot *slots;
};

static void worker_main(void *arg)
{
    struct worker_slot *s = arg;
    struct hfx_plat_workers *w = s->w;
    int hvx = qurt_hvx_lock(QURT_HVX_MODE_128B) == QURT_EOK;
    for (;;) {
        uint_fast64_t g = atomic_load(&w->gen);
        if (atomic_load(&w->stop))
            break;
        if (w->step(w->ctx, s->id) == HFX_STEP_WORKED)
            continue;
        qurt_mutex_lock(&w->mu);
        while (atomic_load(&w->gen) == g && !atomic_load(&w->stop))
            qurt_cond_wait(&w->cv, &w->mu);
        qurt_mutex_unlock(&w->mu);
    }
    if (hvx)
        qurt_hvx_unlock();
    qurt_thread_exit(QURT_EOK);
}

/* QuRT schedules software threads onto hardware threads itself; HVX contexts are claimed per
 * worker (qurt_hvx_lock), so there is nothing to pin. */
int hfx_plat_workers_pin(hfx_plat_workers *w)
{
    (void)w;
    return -1;
}

hfx_plat_workers *hfx_plat_workers_start(uint32_t n, hfx_plat_step_fn step, void *ctx)
{
    if (n == 0 || !step)
        return NULL;
    struct hfx_plat_workers *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->slots = calloc(n, sizeof *w->slots);
    if (!w->slots) {
        free(w);
        return NULL;
    }
    qurt_mutex_init(&w->mu);
    qurt_cond_init(&w->cv);
    qurt_cond_init(&w->cv_done);
    atomic_init(&w->gen, 0);
    atomic_init(&w->stop, false);
    w->step = step;
    w->ctx = ctx;
    w->n = n;
    for (uint32_t i = 0; i < n; i++) {
        struct worker_slot *s = &w->slots[i];
        s->w = w;
        s->id = i;
        s->stack = malloc(HFX_QURT_STACK_BYTES);
        if (!s->stack) {
            hfx_plat_workers_stop(w);
            return NULL;
        }
        char name[16] = "hfx_worker";
        name[10] = (char)('0' + (i / 10) % 10);
        name[11] = (char)('0' + i % 10);
        name[12] = 0;
        qurt_thread_attr_t attr;
        qurt_thread_attr_init(&attr);
        qurt_thread_attr_set_name(&attr, name);
        qurt_thread_attr_set_stack_addr(&attr, s->stack);
        qurt_thread_attr_set_stack_size(&attr, HFX_QURT_STACK_BYTES);
        qurt_thread_attr_set_priority(&attr, HFX_QURT_PRIORITY);
        if (qurt_thread_create(&s->tid, &attr, worker_main, s) != QURT_EOK) {
            free(s->stack);
            s->stack = NULL;
            hfx_plat_workers_stop(w);
            return NULL;
        }
        w->started++;
    }
    return w;
}

void hfx_plat_workers_notify(hfx_plat_workers *w)
{
    qurt_mutex_lock(&w->mu);
    atomic_fetch_add(&w->gen, 1);
    qurt_cond_broadcast(&w->cv);
    qurt_mutex_unlock(&w->mu);
}

void hfx_plat_workers_finish(hfx_plat_workers *w)
{
    qurt_mutex_lock(&w->mu);
    qurt_cond_broadcast(&w->cv_done);
    qurt_mutex_unlock(&w->mu);
}

int hfx_plat_workers_wait(hfx_plat_workers *w, hfx_plat_done_fn done, void *done_ctx)
{
    qurt_mutex_lock(&w->mu);
    while (!done(done_ctx))
        qurt_cond_wait(&w->cv_done, &w->mu);
    qurt_mutex_unlock(&w->mu);
    return 0;
}

void hfx_plat_workers_runnable_ns(hfx_plat_workers *w, uint64_t *out, uint32_t n)
{
    (void)w;
    for (uint32_t i = 0; i < n; i++)
        out[i] = 0; /* not counted on the cDSP */
}

void hfx_plat_workers_stop(hfx_plat_workers *w)
{
    if (!w)
        return;
    qurt_mutex_lock(&w->mu);
    atomic_store(&w->stop, true);
    atomic_fetch_add(&w->gen, 1);
    qurt_cond_broadcast(&w->cv);
    qurt_mutex_unlock(&w->mu);
    for (uint32_t i = 0; i < w->started; i++) {
        int status = 0;
        qurt_thread_join(w->slots[i].tid, &status);
    }
    for (uint32_t i = 0; i < w->n; i++)
        free(w->slots[i].stack);
    qurt_cond_destroy(&w->cv);
    qurt_cond_destroy(&w->cv_done);
    qurt_mutex_destroy(&w->mu);
    free(w->slots);
    free(w);
}

/* Coop-only knobs: not available on this platform. */
int hfx_plat_coop_set_heap(void *buf, size_t size)
{
    (void)buf;
    (void)size;
    return -1;
}
void hfx_plat_coop_set_clock(uint64_t (*now_ns)(void)) { (void)now_ns; }
size_t hfx_plat_coop_heap_in_use(void) { return 0; }
