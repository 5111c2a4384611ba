/*
 * scheduler.c - the persistent-worker pool and the fused run of two tasks.
 *
 * Workers are started once per pool (platform layer) and loop on
 * worker_step(): claim one work item, run it, record it. Worker 0 is the
 * matrix worker (when the pool has one); it claims MATRIX items of both tasks
 * and, when none is claimable and HFX_POOL_MATRIX_TAKES_VECTOR is set, vector
 * and copy items. Vector workers claim VECTOR and COPY items of both tasks
 * (and MATRIX items only with HFX_POOL_VECTOR_TAKES_MATRIX).
 *
 * Sync domains: an op becomes claimable when all its dependencies (earlier
 * ops of the same task, see arena.c) are done. Nothing ever depends on the
 * other task, except in serialized mode (the tasks' scratch does not fit the
 * budget together), where task B starts when task A is done.
 *
 * Quotas: when both tasks have a claimable item for a worker's engine group,
 * the task that is below its share of the group's time so far in this call
 * is chosen (share_a for vector/copy, matrix_share_a for matrix). When only
 * one task has work, it gets every worker: a task that finishes early hands
 * its workers to the other.
 *
 * Partial runs: items of an op are claimed in order and a call ends only when
 * no item is in flight, so a run state is a per-op count of done items. Limits
 * (stop_op, max_items, item_fraction) only stop claiming.
 *
 * Concurrency: one mutex guards the scheduler state (claims and completions
 * are short; items run outside it). hfx_run calls are serialized by run_mu.
 */
#include <stdatomic.h>

#include "core.h"
#include "platform.h"

#define LOOKAHEAD 32u /* ops scanned past a task's first unfinished op */
#define GROUP_MATRIX 0
#define GROUP_VECTOR 1
#define MASK_MATRIX (1u << HFX_ENGINE_MATRIX)
#define MASK_VECTOR ((1u << HFX_ENGINE_VECTOR) | (1u << HFX_ENGINE_COPY))
#define MASK_ALL (MASK_MATRIX | MASK_VECTOR)

struct hfx_runstate {
    hfx_pool *pool;
    const hfx_program *prog;
    uint32_t *items_done; /* per op */
    uint8_t *op_done;     /* per op */
    uint8_t *ready;       /* per op: deps done (cache) */
    uint32_t ops_done[HFX_NUM_TASKS];
    uint32_t cursor[HFX_NUM_TASKS]; /* first task op index not done */
    uint32_t cap_ops;
    int placed, serialized;
    size_t b_offset, arena_used;
    uint8_t *arena; /* own memory (user run states) */
    size_t arena_size;
    bool internal; /* the pool's run state for complete runs */
};

typedef struct job {
    hfx_runstate *rs;
    const hfx_program *prog;
    void **tptr;         /* per tensor: resolved data pointer */
    uint32_t *next_item; /* per op: next item to claim */
    uint64_t seq;        /* the pool's hfx_run calls up to this one */
    uint32_t stop[HFX_NUM_TASKS];
    uint64_t budget[HFX_NUM_TASKS]; /* items left to claim in this call */
    uint64_t items_run[HFX_NUM_TASKS];
    uint64_t used_ns[2][HFX_NUM_TASKS]; /* per engine group, per task */
    float share[2];                     /* task A's share per engine group */
    bool caller_only;                   /* HFX_RUN_CALLER_ONLY */
    uint32_t inflight;
    hfx_trace_event *trace;
    size_t trace_cap, trace_n, trace_dropped;
} job;

typedef struct ws_owner {
    uint64_t job;
    uint32_t op;
} ws_owner;

struct hfx_pool {
    hfx_pool_config cfg;
    uint32_t n_workers;
    hfx_plat_workers *workers;
    hfx_plat_mutex *mu;     /* scheduler state */
    hfx_plat_mutex *run_mu; /* serializes hfx_run */
    uint8_t *arena;
    void **ws; /* per worker work space */
    size_t ws_size;
    ws_owner *ws_owners; /* per worker: the op and job of its last item (what its work space holds) */
    uint64_t jobs;       /* hfx_run calls so far */
    hfx_runstate internal;
    /* per-program job arrays, grown as needed */
    void **tptr;
    uint32_t cap_tensors;
    uint32_t *next_item;
    uint32_t cap_ops;
    job job;
    atomic_bool job_active;
    atomic_bool job_done;
};

static void *xalloc(size_t n, size_t size) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX / size) return NULL;
    void *p = hfx_plat_alloc(n * size, 64);
    if (p) memset(p, 0, n * size);
    return p;
}

/* ---- claiming (pool->mu held) ------------------------------------------------ */

static bool task_complete(const hfx_runstate *rs, int t) { return rs->ops_done[t] == rs->prog->n_task_ops[t]; }

static bool op_ready(const hfx_program *p, hfx_runstate *rs, uint32_t o) {
    if (rs->ready[o]) return true;
    const hfx_op *op = &p->ops[o];
    for (uint32_t i = 0; i < op->n_deps; i++)
        if (!rs->op_done[p->deps[op->dep_begin + i]]) return false;
    rs->ready[o] = 1;
    return true;
}

static void advance_cursor(hfx_runstate *rs, int t) {
    const hfx_program *p = rs->prog;
    while (rs->cursor[t] < p->n_task_ops[t] && rs->op_done[p->task_ops[t][rs->cursor[t]]]) rs->cursor[t]++;
}

static void mark_op_done(hfx_runstate *rs, uint32_t o, int t) {
    rs->op_done[o] = 1;
    rs->ops_done[t]++;
    advance_cursor(rs, t);
}

/* The earliest ready op of task t with an unclaimed item for `mask`. On the way it marks done every
 * ready op without work items (empty outputs), so that its dependents become ready. */
static uint32_t find_claimable(job *j, int t, uint32_t mask) {
    hfx_runstate *rs = j->rs;
    const hfx_program *p = j->prog;
    if (t == HFX_TASK_B && rs->serialized && !task_complete(rs, HFX_TASK_A)) return HFX_NO_TENSOR;
    uint32_t end = p->n_task_ops[t];
    if (j->stop[t] < end) end = j->stop[t];
    for (uint32_t k = rs->cursor[t]; k < end && k < rs->cursor[t] + LOOKAHEAD; k++) {
        uint32_t o = p->task_ops[t][k];
        if (rs->op_done[o]) continue;
        const hfx_op *op = &p->ops[o];
        if (op->plan.n_items == 0) {
            if (op_ready(p, rs, o)) mark_op_done(rs, o, t);
            continue;
        }
        if (j->budget[t] == 0 || !(mask & (1u << op->engine))) continue;
        if (j->next_item[o] >= op->plan.n_items) continue;
        if (!op_ready(p, rs, o)) continue;
        return o;
    }
    return HFX_NO_TENSOR;
}

static bool pick_a(const job *j, int group) {
    float s = j->share[group];
    if (s <= 0.0f) return false;
    if (s >= 1.0f) return true;
    float ua = (float)j->used_ns[group][HFX_TASK_A], ub = (float)j->used_ns[group][HFX_TASK_B];
    return ua * (1.0f - s) <= ub * s;
}

/* Returns the op claimed (item in *item) or HFX_NO_TENSOR. */
static uint32_t claim(hfx_pool *pool, uint32_t worker, uint32_t *item) {
    job *j = &pool->job;
    if (j->caller_only && worker != 0) return HFX_NO_TENSOR;
    bool matrix_worker = pool->cfg.n_matrix_workers == 1 && worker == 0;
    /* engine groups this worker serves, in order of preference */
    int groups[2], n = 0;
    if (j->caller_only) {
        groups[n++] = GROUP_MATRIX;
        groups[n++] = GROUP_VECTOR;
    } else if (matrix_worker) {
        groups[n++] = GROUP_MATRIX;
        if (pool->cfg.flags & HFX_POOL_MATRIX_TAKES_VECTOR) groups[n++] = GROUP_VECTOR;
    } else {
        groups[n++] = GROUP_VECTOR;
        if (pool->cfg.flags & HFX_POOL_VECTOR_TAKES_MATRIX) groups[n++] = GROUP_MATRIX;
    }
    for (int g = 0; g < n; g++) {
        uint32_t mask = groups[g] == GROUP_MATRIX ? MASK_MATRIX : MASK_VECTOR;
        uint32_t oa = find_claimable(j, HFX_TASK_A, mask);
        uint32_t ob = find_claimable(j, HFX_TASK_B, mask);
        uint32_t o = HFX_NO_TENSOR;
        if (oa != HFX_NO_TENSOR && ob != HFX_NO_TENSOR) o = pick_a(j, groups[g]) ? oa : ob;
        else o = oa != HFX_NO_TENSOR ? oa : ob;
        if (o == HFX_NO_TENSOR) continue;
        int t = j->prog->ops[o].task;
        *item = j->next_item[o]++;
        j->inflight++;
        j->budget[t]--;
        j->items_run[t]++;
        return o;
    }
    return HFX_NO_TENSOR;
}

static bool anything_claimable(job *j) {
    return find_claimable(j, HFX_TASK_A, MASK_ALL) != HFX_NO_TENSOR ||
           find_claimable(j, HFX_TASK_B, MASK_ALL) != HFX_NO_TENSOR;
}

enum { WAKE_WORKERS = 1, WAKE_WAITER = 2 };

/* Records a finished item. Returns whom to wake: WAKE_WORKERS when an op finished (its
 * dependents may be ready, or the other task, serialized), WAKE_WAITER when the job is done. */
static int complete(hfx_pool *pool, uint32_t worker, uint32_t o, uint32_t item, uint64_t t0, uint64_t t1) {
    job *j = &pool->job;
    hfx_runstate *rs = j->rs;
    const hfx_program *p = j->prog;
    const hfx_op *op = &p->ops[o];
    int t = op->task;
    int wake = 0;
    j->inflight--;
    j->used_ns[op->engine == HFX_ENGINE_MATRIX ? GROUP_MATRIX : GROUP_VECTOR][t] += t1 - t0;
    if (j->trace) {
        if (j->trace_n < j->trace_cap) {
            hfx_trace_event *e = &j->trace[j->trace_n++];
            e->worker = (uint16_t)worker;
            e->engine = op->engine;
            e->task = (uint8_t)t;
            e->op = o;
            e->item = item;
            e->reserved = 0;
            e->start_ns = t0;
            e->end_ns = t1;
        } else {
            j->trace_dropped++;
        }
    }
    if (++rs->items_done[o] == op->plan.n_items) {
        mark_op_done(rs, o, t);
        wake = WAKE_WORKERS;
    }
    if (j->inflight == 0 && !anything_claimable(j)) {
        atomic_store(&pool->job_done, true);
        wake = WAKE_WAITER;
    }
    return wake;
}

static int worker_step(void *ctx, uint32_t worker) {
    hfx_pool *pool = ctx;
    if (!atomic_load(&pool->job_active)) return HFX_STEP_IDLE;
    uint32_t item = 0;
    hfx_plat_mutex_lock(pool->mu);
    uint32_t o = atomic_load(&pool->job_active) ? claim(pool, worker, &item) : HFX_NO_TENSOR;
    hfx_plat_mutex_unlock(pool->mu);
    if (o == HFX_NO_TENSOR) return HFX_STEP_IDLE;

    job *j = &pool->job;
    const hfx_program *p = j->prog;
    const hfx_op *op = &p->ops[o];
    hfx_kernel_args a;
    memset(&a, 0, sizeof a);
    a.prog = p;
    a.op = op;
    for (uint32_t i = 0; i < op->n_in; i++) a.in[i] = j->tptr[op->in[i]];
    for (uint32_t i = 0; i < op->n_out; i++) a.out[i] = j->tptr[op->out[i]];
    a.ws = pool->ws ? pool->ws[worker] : NULL;
    a.ws_bytes = pool->ws_size;
    ws_owner *owner = &pool->ws_owners[worker]; /* this worker's alone */
    a.ws_kept = owner->job == j->seq && owner->op == o;
    owner->job = j->seq;
    owner->op = o;

    uint64_t t0 = hfx_plat_now_ns();
    hfx_kernel_run_item(&a, item);
    uint64_t t1 = hfx_plat_now_ns();

    hfx_plat_mutex_lock(pool->mu);
    int wake = complete(pool, worker, o, item, t0, t1);
    hfx_plat_mutex_unlock(pool->mu);
    if (j->caller_only) return HFX_STEP_WORKED; /* the caller is the only worker and the waiter */
    if (wake & WAKE_WORKERS) hfx_plat_workers_notify(pool->workers);
    /* worker 0 runs on the waiter's thread (every platform): it sees the end itself, and a wake-up
     * would only rouse sleeping workers to spin for nothing */
    if ((wake & WAKE_WAITER) && worker != 0) hfx_plat_workers_finish(pool->workers);
    return HFX_STEP_WORKED;
}

static bool job_is_done(void *ctx) { return atomic_load(&((hfx_pool *)ctx)->job_done); }

/* ---- pool ------------------------------------------------------------------------ */

void hfx_pool_config_init(hfx_pool_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    uint32_t hw = hfx_plat_hw_threads();
    cfg->n_matrix_workers = 1;
    cfg->n_vector_workers = hw > 1 ? hw - 1 : 1;
    cfg->arena_bytes = (size_t)8 << 20;
    cfg->flags = HFX_POOL_MATRIX_TAKES_VECTOR;
}

static void runstate_free_arrays(hfx_runstate *rs) {
    hfx_plat_free(rs->items_done);
    hfx_plat_free(rs->op_done);
    hfx_plat_free(rs->ready);
    rs->items_done = NULL;
    rs->op_done = NULL;
    rs->ready = NULL;
    rs->cap_ops = 0;
}

void hfx_pool_destroy(hfx_pool *pool) {
    if (!pool) return;
    hfx_plat_workers_stop(pool->workers);
    if (pool->ws) {
        for (uint32_t i = 0; i < pool->n_workers; i++) hfx_plat_free(pool->ws[i]);
        hfx_plat_free(pool->ws);
    }
    hfx_plat_free(pool->ws_owners);
    runstate_free_arrays(&pool->internal);
    hfx_plat_free(pool->tptr);
    hfx_plat_free(pool->next_item);
    hfx_plat_free(pool->arena);
    if (pool->mu) hfx_plat_mutex_destroy(pool->mu);
    if (pool->run_mu) hfx_plat_mutex_destroy(pool->run_mu);
    hfx_plat_free(pool);
}

hfx_status hfx_pool_create(const hfx_pool_config *cfg_in, hfx_pool **out) {
    if (!out) return HFX_ERR_ARG;
    *out = NULL;
    hfx_pool_config cfg;
    if (cfg_in) cfg = *cfg_in;
    else hfx_pool_config_init(&cfg);
    if (cfg.n_matrix_workers > 1 || cfg.n_vector_workers > 1024 || cfg.n_matrix_workers + cfg.n_vector_workers == 0)
        return HFX_ERR_ARG;
    if (cfg.flags & ~(HFX_POOL_MATRIX_TAKES_VECTOR | HFX_POOL_VECTOR_TAKES_MATRIX | HFX_POOL_PIN_WORKERS))
        return HFX_ERR_ARG;
    if (cfg.n_matrix_workers == 0) cfg.flags |= HFX_POOL_VECTOR_TAKES_MATRIX;
    if (cfg.n_vector_workers == 0) cfg.flags |= HFX_POOL_MATRIX_TAKES_VECTOR;
    hfx_kernels_init();
    hfx_pool *pool = xalloc(1, sizeof *pool);
    if (!pool) return HFX_ERR_NOMEM;
    pool->cfg = cfg;
    pool->n_workers = cfg.n_matrix_workers + cfg.n_vector_workers;
    atomic_init(&pool->job_active, false);
    atomic_init(&pool->job_done, false);
    pool->internal.pool = pool;
    pool->internal.internal = true;
    pool->mu = hfx_plat_mutex_create();
    pool->run_mu = hfx_plat_mutex_create();
    pool->ws = xalloc(pool->n_workers, sizeof(void *));
    pool->ws_owners = xalloc(pool->n_workers, sizeof(ws_owner));
    if (cfg.arena_bytes) pool->arena = hfx_plat_alloc(cfg.arena_bytes, HFX_ARENA_ALIGN);
    if (!pool->mu || !pool->run_mu || !pool->ws || !pool->ws_owners || (cfg.arena_bytes && !pool->arena)) {
        hfx_pool_destroy(pool);
        return HFX_ERR_NOMEM;
    }
    pool->workers = hfx_plat_workers_start(pool->n_workers, worker_step, pool);
    if (!pool->workers) {
        hfx_pool_destroy(pool);
        return HFX_ERR_PLATFORM;
    }
    if ((cfg.flags & HFX_POOL_PIN_WORKERS) && hfx_plat_workers_pin(pool->workers) != 0)
        pool->cfg.flags &= ~HFX_POOL_PIN_WORKERS; /* not pinned: hfx_pool_flags says so */
    *out = pool;
    return HFX_OK;
}

uint32_t hfx_pool_num_workers(const hfx_pool *pool) { return pool ? pool->n_workers : 0; }
uint32_t hfx_pool_flags(const hfx_pool *pool) { return pool ? pool->cfg.flags : 0; }

int hfx_pool_worker_engine(const hfx_pool *pool, uint32_t worker) {
    if (!pool || worker >= pool->n_workers) return -1;
    return (pool->cfg.n_matrix_workers == 1 && worker == 0) ? HFX_ENGINE_MATRIX : HFX_ENGINE_VECTOR;
}

/* ---- run state ------------------------------------------------------------------- */

static hfx_status runstate_size(hfx_runstate *rs, uint32_t n_ops) {
    if (rs->cap_ops < n_ops) {
        runstate_free_arrays(rs);
        rs->items_done = xalloc(n_ops, sizeof(uint32_t));
        rs->op_done = xalloc(n_ops, 1);
        rs->ready = xalloc(n_ops, 1);
        if (!rs->items_done || !rs->op_done || !rs->ready) {
            runstate_free_arrays(rs);
            return HFX_ERR_NOMEM;
        }
        rs->cap_ops = n_ops;
    }
    return HFX_OK;
}

static void runstate_clear(hfx_runstate *rs) {
    if (rs->cap_ops) {
        memset(rs->items_done, 0, sizeof(uint32_t) * rs->cap_ops);
        memset(rs->op_done, 0, rs->cap_ops);
        memset(rs->ready, 0, rs->cap_ops);
    }
    rs->ops_done[0] = rs->ops_done[1] = 0;
    rs->cursor[0] = rs->cursor[1] = 0;
    rs->placed = 0;
    rs->serialized = 0;
    rs->b_offset = 0;
    rs->arena_used = 0;
}

hfx_status hfx_runstate_create(hfx_pool *pool, const hfx_program *prog, hfx_runstate **out) {
    if (!out) return HFX_ERR_ARG;
    *out = NULL;
    if (!pool || !prog) return HFX_ERR_ARG;
    hfx_runstate *rs = xalloc(1, sizeof *rs);
    if (!rs) return HFX_ERR_NOMEM;
    rs->pool = pool;
    rs->prog = prog;
    if (runstate_size(rs, prog->n_ops) != HFX_OK) {
        hfx_plat_free(rs);
        return HFX_ERR_NOMEM;
    }
    runstate_clear(rs);
    *out = rs;
    return HFX_OK;
}

void hfx_runstate_destroy(hfx_runstate *rs) {
    if (!rs) return;
    runstate_free_arrays(rs);
    hfx_plat_free(rs->arena);
    hfx_plat_free(rs);
}

void hfx_runstate_reset(hfx_runstate *rs) {
    if (rs) runstate_clear(rs);
}

int hfx_runstate_done(const hfx_runstate *rs) {
    return rs && task_complete(rs, HFX_TASK_A) && task_complete(rs, HFX_TASK_B);
}

/* ---- run --------------------------------------------------------------------------- */

void hfx_run_options_init(hfx_run_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->share_a = 0.5f;
    opt->matrix_share_a = 0.5f;
    opt->stop_op[0] = opt->stop_op[1] = HFX_ALL_OPS;
}

static bool valid_share(float s) { return s >= 0.0f && s <= 1.0f; }

/* Decides the layout of the two tasks' scratch and gets memory for it. */
static hfx_status place(hfx_pool *pool, hfx_runstate *rs, const hfx_run_options *opt) {
    const hfx_program *p = rs->prog;
    size_t sa = p->scratch_bytes[0], sb = p->scratch_bytes[1];
    size_t budget = opt->budget_bytes ? opt->budget_bytes : pool->cfg.arena_bytes;
    if (rs->internal && budget > pool->cfg.arena_bytes) budget = pool->cfg.arena_bytes;
    size_t big = sa > sb ? sa : sb;
    if (big > budget) return HFX_ERR_BUDGET;
    bool fused = !(opt->flags & HFX_RUN_FORCE_SERIAL) && sa <= budget - sb;
    rs->serialized = !fused;
    rs->b_offset = fused ? sa : 0;
    rs->arena_used = fused ? sa + sb : big;
    if (!rs->internal && rs->arena_size < rs->arena_used) {
        hfx_plat_free(rs->arena);
        rs->arena_size = 0;
        rs->arena = hfx_plat_alloc(rs->arena_used, HFX_ARENA_ALIGN);
        if (!rs->arena) return HFX_ERR_NOMEM;
        rs->arena_size = rs->arena_used;
    }
    rs->placed = 1;
    return HFX_OK;
}

static hfx_status ensure_job_arrays(hfx_pool *pool, const hfx_program *p) {
    if (pool->cap_tensors < p->n_tensors) {
        hfx_plat_free(pool->tptr);
        pool->cap_tensors = 0;
        pool->tptr = xalloc(p->n_tensors, sizeof(void *));
        if (!pool->tptr) return HFX_ERR_NOMEM;
        pool->cap_tensors = p->n_tensors;
    }
    if (pool->cap_ops < p->n_ops) {
        hfx_plat_free(pool->next_item);
        pool->cap_ops = 0;
        pool->next_item = xalloc(p->n_ops, sizeof(uint32_t));
        if (!pool->next_item) return HFX_ERR_NOMEM;
        pool->cap_ops = p->n_ops;
    }
    if (pool->ws_size < p->ws_bytes) {
        for (uint32_t i = 0; i < pool->n_workers; i++) {
            hfx_plat_free(pool->ws[i]);
            pool->ws[i] = NULL;
        }
        pool->ws_size = 0;
        for (uint32_t i = 0; i < pool->n_workers; i++) {
            pool->ws[i] = hfx_plat_alloc(p->ws_bytes, 128);
            if (!pool->ws[i]) return HFX_ERR_NOMEM;
        }
        pool->ws_size = p->ws_bytes;
    }
    return HFX_OK;
}

static hfx_status run_locked(hfx_pool *pool, const hfx_program *p, const void *const *inputs, void *const *outputs,
                             const hfx_run_options *opt, hfx_runstate *rs, hfx_run_result *res) {
    hfx_status st;
    if (rs->internal) {
        if ((st = runstate_size(rs, p->n_ops)) != HFX_OK) return st;
        rs->prog = p;
        runstate_clear(rs);
    }
    if (!rs->placed && (st = place(pool, rs, opt)) != HFX_OK) return st;
    if ((st = ensure_job_arrays(pool, p)) != HFX_OK) return st;

    uint8_t *arena = rs->internal ? pool->arena : rs->arena;
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        const hfx_tensor *T = &p->tensors[t];
        void *ptr = NULL;
        switch (T->role) {
        case HFX_ROLE_INPUT: ptr = (void *)(uintptr_t)inputs[T->io_index]; break;
        case HFX_ROLE_OUTPUT: ptr = outputs[T->io_index]; break;
        case HFX_ROLE_CONSTANT: ptr = p->blob + T->const_offset; break;
        default: ptr = arena + (T->task == HFX_TASK_B ? rs->b_offset : 0) + T->arena_offset; break;
        }
        pool->tptr[t] = ptr;
    }

    job *j = &pool->job;
    hfx_plat_mutex_lock(pool->mu);
    memset(j, 0, sizeof *j);
    j->rs = rs;
    j->prog = p;
    j->tptr = pool->tptr;
    j->next_item = pool->next_item;
    j->seq = ++pool->jobs;
    for (uint32_t o = 0; o < p->n_ops; o++) j->next_item[o] = rs->items_done[o];
    for (int t = 0; t < 2; t++) {
        j->stop[t] = opt->stop_op[t];
        uint64_t b = UINT64_MAX;
        if (opt->max_items[t]) b = opt->max_items[t];
        if (opt->item_fraction[t] > 0.0f) {
            float f = opt->item_fraction[t] * (float)p->task_items[t];
            uint64_t fb = (uint64_t)f;
            if ((float)fb < f) fb++;
            if (fb < b) b = fb;
        }
        j->budget[t] = b;
    }
    j->share[GROUP_VECTOR] = opt->share_a;
    j->share[GROUP_MATRIX] = opt->matrix_share_a;
    j->caller_only = (opt->flags & HFX_RUN_CALLER_ONLY) != 0;
    j->trace = opt->trace;
    j->trace_cap = opt->trace ? opt->trace_capacity : 0;
    bool nothing = !anything_claimable(j);
    atomic_store(&pool->job_done, nothing);
    atomic_store(&pool->job_active, !nothing);
    hfx_plat_mutex_unlock(pool->mu);

    uint64_t runnable0[HFX_RUN_MAX_WORKERS] = {0}, runnable1[HFX_RUN_MAX_WORKERS] = {0};
    uint32_t counted = pool->n_workers < HFX_RUN_MAX_WORKERS ? pool->n_workers : HFX_RUN_MAX_WORKERS;
    if (opt->trace) hfx_plat_workers_runnable_ns(pool->workers, runnable0, counted); /* outside the timed call */
    uint64_t t0 = hfx_plat_now_ns();
    int wr = 0;
    if (!nothing) {
        if (!j->caller_only) hfx_plat_workers_notify(pool->workers);
        wr = hfx_plat_workers_wait(pool->workers, job_is_done, pool);
    }
    uint64_t t1 = hfx_plat_now_ns();
    if (opt->trace) hfx_plat_workers_runnable_ns(pool->workers, runnable1, counted);

    hfx_plat_mutex_lock(pool->mu);
    atomic_store(&pool->job_active, false);
    if (res) {
        res->serialized = rs->serialized;
        for (int t = 0; t < 2; t++) {
            res->task_done[t] = task_complete(rs, t);
            res->ops_done[t] = rs->ops_done[t];
            res->items_run[t] = j->items_run[t];
        }
        res->wall_ns = t1 - t0;
        res->trace_events = j->trace_n;
        res->trace_dropped = j->trace_dropped;
        res->arena_used = rs->arena_used;
        for (uint32_t i = 0; i < counted; i++) res->runnable_ns[i] = runnable1[i] - runnable0[i];
    }
    j->rs = NULL;
    hfx_plat_mutex_unlock(pool->mu);
    return wr == 0 ? HFX_OK : HFX_ERR_PLATFORM;
}

hfx_status hfx_run(hfx_pool *pool, const hfx_program *p, const void *const *inputs, size_t n_inputs,
                   void *const *outputs, size_t n_outputs, const hfx_run_options *opt_in, hfx_runstate *rs,
                   hfx_run_result *res) {
    if (res) memset(res, 0, sizeof *res);
    if (!pool || !p) return HFX_ERR_ARG;
    if (n_inputs != (size_t)p->n_inputs[0] + p->n_inputs[1] || n_outputs != (size_t)p->n_outputs[0] + p->n_outputs[1])
        return HFX_ERR_ARG;
    if ((n_inputs && !inputs) || (n_outputs && !outputs)) return HFX_ERR_ARG;
    for (size_t i = 0; i < n_inputs; i++)
        if (!inputs[i] && p->tensors[p->input_tensor[i]].bytes) return HFX_ERR_ARG;
    for (size_t i = 0; i < n_outputs; i++)
        if (!outputs[i] && p->tensors[p->output_tensor[i]].bytes) return HFX_ERR_ARG;
    hfx_run_options opt;
    if (opt_in) opt = *opt_in;
    else hfx_run_options_init(&opt);
    if (!valid_share(opt.share_a) || !valid_share(opt.matrix_share_a)) return HFX_ERR_ARG;
    if (opt.flags & ~(HFX_RUN_FORCE_SERIAL | HFX_RUN_CALLER_ONLY)) return HFX_ERR_ARG;
    if (opt.trace && !opt.trace_capacity) opt.trace = NULL;
    for (int t = 0; t < 2; t++)
        if (!(opt.item_fraction[t] >= 0.0f && opt.item_fraction[t] <= 1.0f)) return HFX_ERR_ARG;
    if (rs) {
        if (rs->pool != pool || rs->prog != p) return HFX_ERR_STATE;
    } else {
        for (int t = 0; t < 2; t++)
            if (opt.stop_op[t] != HFX_ALL_OPS || opt.max_items[t] || opt.item_fraction[t] > 0.0f) return HFX_ERR_ARG;
    }
    hfx_plat_mutex_lock(pool->run_mu);
    hfx_status st = run_locked(pool, p, inputs, outputs, &opt, rs ? rs : &pool->internal, res);
    hfx_plat_mutex_unlock(pool->run_mu);
    return st;
}
