/* platform_posix.c - host platform: pthreads, clock_gettime, posix_memalign. */
#define _GNU_SOURCE /* pthread_setname_np */

#include "platform.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

const char *hfx_plat_name(void) { return "posix"; }

uint32_t hfx_plat_hw_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    if (n > 1024) return 1024;
    return (uint32_t)n;
}

void *hfx_plat_alloc(size_t size, size_t align) {
    if (size == 0) size = 1;
    if (align < sizeof(void *)) align = sizeof(void *);
    if ((align & (align - 1)) != 0 || align > 4096) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0) return NULL;
    return p;
}

void hfx_plat_free(void *ptr) { free(ptr); }

uint64_t hfx_plat_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

struct hfx_plat_mutex {
    pthread_mutex_t m;
};

hfx_plat_mutex *hfx_plat_mutex_create(void) {
    hfx_plat_mutex *m = malloc(sizeof *m);
    if (!m) return NULL;
    if (pthread_mutex_init(&m->m, NULL) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

void hfx_plat_mutex_destroy(hfx_plat_mutex *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->m);
    free(m);
}

/* Tries this many times, a pause apart, before sleeping on the mutex: the scheduler's critical sections
 * (claim an item, record it) take well under a microsecond, and a contended pthread mutex sleeps in the
 * kernel at once, for a wake-up that costs microseconds on a VM: two workers finishing items together
 * left both idle 3.5 us in a traced gpt_decode_step call. */
#define HFX_MUTEX_SPINS 256u

void hfx_plat_mutex_lock(hfx_plat_mutex *m) {
    for (unsigned k = 0; k < HFX_MUTEX_SPINS; k++) {
        if (pthread_mutex_trylock(&m->m) == 0) return;
        cpu_relax();
    }
    pthread_mutex_lock(&m->m);
}
void hfx_plat_mutex_unlock(hfx_plat_mutex *m) { pthread_mutex_unlock(&m->m); }

/* ---- workers ---------------------------------------------------------------- */

/* Worker 0 is the thread that waits (the hfx_run caller): it is awake and on a CPU already, so
 * it starts on the work at once and sees the end of the job without a wake-up; workers 1..n-1
 * are threads of their own. On this project's VMs a cross-CPU wake-up costs tens of
 * microseconds, and a call used to pay two (start and end). Everyone idle sleeps on one
 * condition variable, and notify sends a wake-up only when someone sleeps: `sleeping` and `gen`
 * are seq_cst atomics, so a notifier either sees the sleeper or the sleeper sees the new gen
 * before it waits (and a sleeper re-checks gen under the mutex notify takes to broadcast). */

struct worker_slot {
    struct hfx_plat_workers *w;
    uint32_t id;
    pthread_t thread;
    atomic_int tid; /* the thread's Linux id once it runs (0 before, and elsewhere) */
};

struct hfx_plat_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint_fast64_t gen; /* bumped by notify and finish */
    atomic_uint sleeping;     /* threads in (or entering) pthread_cond_wait */
    atomic_bool stop;
    hfx_plat_step_fn step;
    void *ctx;
    uint32_t n;       /* workers, the waiter included */
    uint32_t started; /* threads started: workers 1..started */
    cpu_set_t allowed; /* the process's CPUs when pinned */
    bool pinned;
    int caller_cpu; /* the CPU the threads were pinned around (-1: none yet) */
    struct worker_slot *slots;
};

/* Spin this long for new work (or the job's end) before sleeping: a wake-up costs about 35 us
 * here (10 of them on the caller, before its first item), more than most gaps between an op and
 * its successor, and than the other nodes ONNX Runtime runs between two calls of a small model.
 * Measured against 50 us (alternating processes, ORT 1 thread): gpt_decode_step_contrib 285 ->
 * 214 us, two_branch 632 -> 552 us per run. */
#define HFX_SPIN_NS 200000u

/* Waits until gen moves past g (or `until` holds, or stop): spins, then sleeps. */
static void sleep_past(struct hfx_plat_workers *w, uint_fast64_t g, hfx_plat_done_fn until, void *until_ctx) {
    uint64_t deadline = hfx_plat_now_ns() + HFX_SPIN_NS;
    for (unsigned k = 0;; k++) {
        if (atomic_load(&w->gen) != g || atomic_load(&w->stop) || (until && until(until_ctx))) return;
        if ((k & 63u) == 63u && hfx_plat_now_ns() > deadline) break;
        cpu_relax();
    }
    pthread_mutex_lock(&w->mu);
    atomic_fetch_add(&w->sleeping, 1);
    while (atomic_load(&w->gen) == g && !atomic_load(&w->stop) && !(until && until(until_ctx)))
        pthread_cond_wait(&w->cv, &w->mu);
    atomic_fetch_sub(&w->sleeping, 1);
    pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg) {
    struct worker_slot *s = arg;
    struct hfx_plat_workers *w = s->w;
#ifdef __linux__
    atomic_store(&s->tid, (int)gettid());
#endif
    for (;;) {
        uint_fast64_t g = atomic_load(&w->gen);
        if (atomic_load(&w->stop)) break;
        if (w->step(w->ctx, s->id) == HFX_STEP_WORKED) continue;
        sleep_past(w, g, NULL, NULL);
    }
    return NULL;
}

hfx_plat_workers *hfx_plat_workers_start(uint32_t n, hfx_plat_step_fn step, void *ctx) {
    if (n == 0 || !step) return NULL;
    struct hfx_plat_workers *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->slots = calloc(n, sizeof *w->slots);
    if (!w->slots) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    atomic_init(&w->sleeping, 0);
    atomic_init(&w->gen, 0);
    atomic_init(&w->stop, false);
    w->step = step;
    w->ctx = ctx;
    w->n = n;
    for (uint32_t i = 1; i < n; i++) {
        w->slots[i].w = w;
        w->slots[i].id = i;
        if (pthread_create(&w->slots[i].thread, NULL, worker_main, &w->slots[i]) != 0) {
            hfx_plat_workers_stop(w);
            return NULL;
        }
        char name[16];
        snprintf(name, sizeof name, "hexfuse-w%u", (unsigned)(i % 100000u)); /* top -H, perf, gdb */
        pthread_setname_np(w->slots[i].thread, name);
        w->started = i;
    }
    return w;
}

/* Binds worker threads 1..started to the allowed CPUs other than `avoid`, one each. */
static int pin_around(struct hfx_plat_workers *w, int avoid) {
    int cpu = -1;
    for (uint32_t i = 1; i <= w->started; i++) {
        do cpu++;
        while (!CPU_ISSET(cpu, &w->allowed) || cpu == avoid);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (pthread_setaffinity_np(w->slots[i].thread, sizeof one, &one) != 0) return -1;
    }
    return 0;
}

int hfx_plat_workers_pin(hfx_plat_workers *w) {
    if (!w || sched_getaffinity(0, sizeof w->allowed, &w->allowed) != 0) return -1;
    /* the waiter (worker 0) is the caller's thread: not ours to pin. The threads keep off the
     * caller's CPU (re-checked at each call, see follow_caller); until the first call, off the
     * first allowed one. */
    if ((uint32_t)CPU_COUNT(&w->allowed) < w->n) return -1; /* oversubscribed: let them migrate */
    int first = 0;
    while (!CPU_ISSET(first, &w->allowed)) first++;
    if (pin_around(w, first) != 0) return -1;
    w->pinned = true;
    w->caller_cpu = first;
    return 0;
}

/* A pinned thread on the caller's CPU would wait there while another CPU idles (the caller is
 * busy running items), so the threads move when the caller has moved. sched_getcpu is a vDSO
 * call; the re-pinning happens only when the caller changed CPU. */
static void follow_caller(struct hfx_plat_workers *w) {
    if (!w->pinned) return;
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu == w->caller_cpu || !CPU_ISSET(cpu, &w->allowed)) return;
    if (pin_around(w, cpu) == 0) w->caller_cpu = cpu;
}

void hfx_plat_workers_notify(hfx_plat_workers *w) {
    atomic_fetch_add(&w->gen, 1);
    if (atomic_load(&w->sleeping) == 0) return;
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The waiter sleeps on the workers' condition variable (it is worker 0). */
void hfx_plat_workers_finish(hfx_plat_workers *w) { hfx_plat_workers_notify(w); }

int hfx_plat_workers_wait(hfx_plat_workers *w, hfx_plat_done_fn done, void *done_ctx) {
    follow_caller(w);
    for (;;) {
        uint_fast64_t g = atomic_load(&w->gen);
        if (done(done_ctx)) return 0;
        if (w->step(w->ctx, 0) == HFX_STEP_WORKED) continue;
        sleep_past(w, g, done, done_ctx);
    }
}

/* The second field of a thread's schedstat: nanoseconds spent on a runqueue waiting for a CPU. */
static uint64_t run_delay_ns(const char *path) {
    uint64_t running = 0, waiting = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%" SCNu64 " %" SCNu64, &running, &waiting) != 2) waiting = 0;
    fclose(f);
    return waiting;
}

void hfx_plat_workers_runnable_ns(hfx_plat_workers *w, uint64_t *out, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        out[i] = 0;
#ifdef __linux__
        char path[64];
        int tid = i == 0 ? 0 : i < w->n ? atomic_load(&w->slots[i].tid) : 0;
        if (i == 0) snprintf(path, sizeof path, "/proc/thread-self/schedstat");
        else if (tid > 0) snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
        else continue;
        out[i] = run_delay_ns(path);
#else
        (void)w;
#endif
    }
}

void hfx_plat_workers_stop(hfx_plat_workers *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, true);
    atomic_fetch_add(&w->gen, 1);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (uint32_t i = 1; i <= w->started; i++) pthread_join(w->slots[i].thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->slots);
    free(w);
}

/* Coop-only knobs: not available on this platform. */
int hfx_plat_coop_set_heap(void *buf, size_t size) {
    (void)buf;
    (void)size;
    return -1;
}
void hfx_plat_coop_set_clock(uint64_t (*now_ns)(void)) { (void)now_ns; }
size_t hfx_plat_coop_heap_in_use(void) { return 0; }
