/*
 * platform.h - everything the hexfuse core needs from the system.
 *
 * The core (program.c, plan.c, scheduler.c, arena.c, trace.c) includes only
 * <stddef.h>, <stdint.h>, <stdbool.h>, <string.h> (memcpy/memset/memcmp) and
 * <stdatomic.h>, plus this header. Threads, time and allocation live behind
 * the functions below. Implementations:
 *
 *   platform_posix.c  host: pthreads, clock_gettime, posix_memalign.
 *   platform_coop.c   single thread, cooperative: the "workers" are step
 *                     functions run interleaved (round robin, one work item
 *                     each) on the thread that waits. No libc beyond
 *                     <string.h>; a built-in heap and a virtual clock. Used by
 *                     the qemu-hexagon test build and tested on the host.
 *   (Hexagon SDK builds may add a QuRT implementation of the same functions.)
 *
 * Worker model. The scheduler provides a step function that claims and runs
 * at most one work item for worker `worker` and returns HFX_STEP_WORKED, or
 * HFX_STEP_IDLE if nothing is claimable right now. The platform decides how
 * steps are driven:
 *   - posix: worker 0 is the thread in hfx_plat_workers_wait() (the caller of
 *     hfx_run), workers 1..n-1 are threads that loop on step(); when a step
 *     returns IDLE the thread sleeps until notify() or finish().
 *   - coop: hfx_plat_workers_wait() itself calls step(ctx, 0..n-1) round
 *     robin until done(ctx) returns true.
 * The scheduler calls notify() whenever the set of claimable items may have
 * grown (a job was published, an op finished) and when a job completes
 * (so that the waiter wakes up).
 */
#ifndef HEXFUSE_PLATFORM_H
#define HEXFUSE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- identity ---------------------------------------------------------- */

/* Short name of the platform: "posix", "coop", ... */
const char *hfx_plat_name(void);

/* Number of hardware threads worth using as workers (>= 1). */
uint32_t hfx_plat_hw_threads(void);

/* ---- memory -------------------------------------------------------------- */

/* Aligned allocation. `align` is a power of two, at most 4096. Contents are
 * unspecified. Returns NULL on failure or when size == 0 overflows. */
void *hfx_plat_alloc(size_t size, size_t align);
/* Frees memory from hfx_plat_alloc. NULL is a no-op. */
void hfx_plat_free(void *ptr);

/* ---- time ---------------------------------------------------------------- */

/* Monotonic time in nanoseconds (coop: a virtual clock unless a clock was
 * installed with hfx_plat_coop_set_clock). */
uint64_t hfx_plat_now_ns(void);

/* ---- mutex --------------------------------------------------------------- */

typedef struct hfx_plat_mutex hfx_plat_mutex;

/* Returns NULL on allocation failure. */
hfx_plat_mutex *hfx_plat_mutex_create(void);
void hfx_plat_mutex_destroy(hfx_plat_mutex *m);
void hfx_plat_mutex_lock(hfx_plat_mutex *m);
void hfx_plat_mutex_unlock(hfx_plat_mutex *m);

/* ---- workers ------------------------------------------------------------- */

enum { HFX_STEP_IDLE = 0, HFX_STEP_WORKED = 1 };

/* Claim and run at most one work item as worker `worker`. Must be safe to
 * call at any time, also when no job is active (then it returns IDLE). */
typedef int (*hfx_plat_step_fn)(void *ctx, uint32_t worker);
/* True when the job the waiter waits for is finished. Must be cheap and
 * thread safe (read an atomic). */
typedef bool (*hfx_plat_done_fn)(void *ctx);

typedef struct hfx_plat_workers hfx_plat_workers;

/* Starts n >= 1 workers that call step(ctx, i), i in [0, n). Returns NULL on
 * failure (nothing left running). Where worker 0 is the waiter (posix), step(ctx, 0)
 * runs only inside hfx_plat_workers_wait. */
hfx_plat_workers *hfx_plat_workers_start(uint32_t n, hfx_plat_step_fn step, void *ctx);

/* Binds each worker thread to its own CPU where the platform can (host: pthread affinity,
 * when n <= the process's CPUs; worker 0, the caller's thread, is left free and the first
 * allowed CPU to it). Returns 0 when pinned, -1 when not (nothing changed). */
int hfx_plat_workers_pin(hfx_plat_workers *w);

/* The claimable work may have changed: wake sleeping workers (not the waiter). */
void hfx_plat_workers_notify(hfx_plat_workers *w);

/* The job the waiter waits for is done (done() now returns true): wake the waiter. */
void hfx_plat_workers_finish(hfx_plat_workers *w);

/* Returns when done(done_ctx) is true: 0. The coop platform drives the steps
 * here and returns -1 if no worker can make progress while done() is still
 * false (a scheduler bug; never happens with a correct scheduler). */
int hfx_plat_workers_wait(hfx_plat_workers *w, hfx_plat_done_fn done, void *done_ctx);

/* Per worker (out[i], i < n; the waiter is worker 0, the calling thread): the nanoseconds its
 * thread has spent so far runnable but not running (waiting for a CPU another thread held), as
 * the OS counts them; 0 where the platform cannot tell. */
void hfx_plat_workers_runnable_ns(hfx_plat_workers *w, uint64_t *out, uint32_t n);

/* Stops and joins all workers. No step runs after it returns. NULL ok. */
void hfx_plat_workers_stop(hfx_plat_workers *w);

/* ---- coop-only knobs (defined only by platform_coop.c) --------------------- */

/* Use `buf` (size bytes) as the heap instead of the built-in static heap.
 * Only valid before the first hfx_plat_alloc. Returns 0 on success. */
int hfx_plat_coop_set_heap(void *buf, size_t size);
/* Install a clock; NULL restores the virtual clock (advances 1000 ns per
 * call of hfx_plat_now_ns). */
void hfx_plat_coop_set_clock(uint64_t (*now_ns)(void));
/* Bytes currently allocated from the coop heap (leak checks in tests). */
size_t hfx_plat_coop_heap_in_use(void);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_PLATFORM_H */
