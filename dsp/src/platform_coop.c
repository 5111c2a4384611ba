/*
 * platform_coop.c - single-thread cooperative platform.
 *
 * Workers are step functions run interleaved (round robin, one work item per
 * step) on the thread that waits for a job. Freestanding: no libc beyond
 * <string.h>. Memory comes from a first-fit heap over a static buffer
 * (HFX_COOP_HEAP_BYTES, default 64 MiB) or a caller-supplied buffer; time is
 * a virtual clock (+1000 ns per read) unless a clock is installed.
 */
#include "platform.h"

#include <string.h>

#ifndef HFX_COOP_HEAP_BYTES
#define HFX_COOP_HEAP_BYTES (64u << 20)
#endif
#ifndef HFX_COOP_HW_THREADS
#define HFX_COOP_HW_THREADS 4u
#endif

const char *hfx_plat_name(void) { return "coop"; }
uint32_t hfx_plat_hw_threads(void) { return HFX_COOP_HW_THREADS; }

/* ---- heap -------------------------------------------------------------------- */

typedef struct blk {
    size_t size; /* whole block including this header; multiple of 64 */
    size_t used; /* 0 = free */
    size_t pad[6];
} blk; /* 64 bytes */

static _Alignas(64) unsigned char g_static_heap[HFX_COOP_HEAP_BYTES];
static unsigned char *g_heap;
static size_t g_heap_size;
static size_t g_in_use;

static void heap_init(void) {
    if (g_heap) return;
    g_heap = g_static_heap;
    g_heap_size = sizeof g_static_heap;
    blk *b = (blk *)(void *)g_heap;
    b->size = g_heap_size;
    b->used = 0;
}

int hfx_plat_coop_set_heap(void *buf, size_t size) {
    if (g_heap || !buf) return -1;
    uintptr_t a = (uintptr_t)buf;
    uintptr_t s = (a + 63u) & ~(uintptr_t)63u;
    if (size < (s - a) + 4096u) return -1;
    g_heap = (unsigned char *)buf + (s - a);
    g_heap_size = (size - (s - a)) & ~(size_t)63u;
    blk *b = (blk *)(void *)g_heap;
    b->size = g_heap_size;
    b->used = 0;
    return 0;
}

size_t hfx_plat_coop_heap_in_use(void) { return g_in_use; }

static blk *blk_next(blk *b) {
    unsigned char *n = (unsigned char *)b + b->size;
    return n < g_heap + g_heap_size ? (blk *)(void *)n : NULL;
}

void *hfx_plat_alloc(size_t size, size_t align) {
    heap_init();
    if (align < 16) align = 16;
    if ((align & (align - 1)) != 0 || align > 4096) return NULL;
    if (size == 0) size = 1;
    if (size > g_heap_size) return NULL;
    /* payload: back pointer + alignment slack + size, rounded to 64 */
    size_t need = sizeof(blk) + sizeof(void *) + align + size;
    need = (need + 63u) & ~(size_t)63u;
    for (blk *b = (blk *)(void *)g_heap; b; b = blk_next(b)) {
        if (b->used) continue;
        /* coalesce following free blocks */
        for (blk *n = blk_next(b); n && !n->used; n = blk_next(b)) b->size += n->size;
        if (b->size < need) continue;
        if (b->size - need >= 2 * sizeof(blk)) {
            blk *rest = (blk *)(void *)((unsigned char *)b + need);
            rest->size = b->size - need;
            rest->used = 0;
            b->size = need;
        }
        b->used = 1;
        g_in_use += b->size;
        uintptr_t q = (uintptr_t)((unsigned char *)b + sizeof(blk) + sizeof(void *));
        uintptr_t p = (q + align - 1) & ~(uintptr_t)(align - 1);
        memcpy((void *)(p - sizeof(void *)), &b, sizeof b);
        return (void *)p;
    }
    return NULL;
}

void hfx_plat_free(void *ptr) {
    if (!ptr) return;
    blk *b;
    memcpy(&b, (unsigned char *)ptr - sizeof(void *), sizeof b);
    g_in_use -= b->size;
    b->used = 0;
}

/* ---- time -------------------------------------------------------------------- */

static uint64_t (*g_clock)(void);
static uint64_t g_virtual_ns;

void hfx_plat_coop_set_clock(uint64_t (*now_ns)(void)) { g_clock = now_ns; }

uint64_t hfx_plat_now_ns(void) {
    if (g_clock) return g_clock();
    g_virtual_ns += 1000u;
    return g_virtual_ns;
}

/* ---- mutex: nothing to exclude on one thread ------------------------------ */

struct hfx_plat_mutex {
    int unused;
};
static hfx_plat_mutex g_mutex;

hfx_plat_mutex *hfx_plat_mutex_create(void) { return &g_mutex; }
void hfx_plat_mutex_destroy(hfx_plat_mutex *m) { (void)m; }
void hfx_plat_mutex_lock(hfx_plat_mutex *m) { (void)m; }
void hfx_plat_mutex_unlock(hfx_plat_mutex *m) { (void)m; }

/* ---- workers: interleaved on the waiting thread ------------------------------ */

struct hfx_plat_workers {
    uint32_t n;
    hfx_plat_step_fn step;
    void *ctx;
};

hfx_plat_workers *hfx_plat_workers_start(uint32_t n, hfx_plat_step_fn step, void *ctx) {
    if (n == 0 || !step) return NULL;
    hfx_plat_workers *w = hfx_plat_alloc(sizeof *w, 16);
    if (!w) return NULL;
    w->n = n;
    w->step = step;
    w->ctx = ctx;
    return w;
}

/* Coop workers are steps on the waiting thread: nothing to pin. */
int hfx_plat_workers_pin(hfx_plat_workers *w) {
    (void)w;
    return -1;
}

void hfx_plat_workers_notify(hfx_plat_workers *w) { (void)w; }
void hfx_plat_workers_finish(hfx_plat_workers *w) { (void)w; }

int hfx_plat_workers_wait(hfx_plat_workers *w, hfx_plat_done_fn done, void *done_ctx) {
    while (!done(done_ctx)) {
        bool progress = false;
        for (uint32_t i = 0; i < w->n; i++) {
            if (w->step(w->ctx, i) == HFX_STEP_WORKED) progress = true;
        }
        if (!progress && !done(done_ctx)) return -1;
    }
    return 0;
}

void hfx_plat_workers_runnable_ns(hfx_plat_workers *w, uint64_t *out, uint32_t n) {
    (void)w;
    for (uint32_t i = 0; i < n; i++) out[i] = 0; /* one thread: never preempted by another worker */
}

void hfx_plat_workers_stop(hfx_plat_workers *w) { hfx_plat_free(w); }
