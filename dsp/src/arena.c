/*
 * arena.c - on-chip budget arena: placement of each task's scratch tensors
 * and the op dependencies that follow from the dataflow and from memory reuse.
 *
 * Each task's scratch is placed in its own region [0, scratch_bytes[t]):
 * tensors whose lifetimes (producer op .. last reader op, in task order) do not
 * overlap may share bytes (first fit, HFX_ARENA_ALIGN). At run time the
 * scheduler puts A's region at 0 and B's right after it when both fit the
 * budget, or both at 0 and runs B after A when they do not.
 *
 * Dependencies of op j (always on earlier ops of the same task):
 *   RAW  j reads a tensor that op i writes;
 *   WAR  j writes scratch whose bytes overlap a tensor op i reads;
 *   WAW  j writes scratch whose bytes overlap a tensor op i writes.
 * So an op waits for its producers (and for the readers of memory it reuses),
 * never for the other task.
 */
#include "core.h"
#include "platform.h"

static size_t align_up(size_t v) { return (v + HFX_ARENA_ALIGN - 1) & ~(size_t)(HFX_ARENA_ALIGN - 1); }

static bool lifetimes_overlap(const hfx_tensor *a, const hfx_tensor *b) {
    return !(a->last_use < b->first_use || b->last_use < a->first_use);
}

static bool bytes_overlap(const hfx_tensor *a, const hfx_tensor *b) {
    size_t ae = a->arena_offset + align_up(a->bytes), be = b->arena_offset + align_up(b->bytes);
    return a->arena_offset < be && b->arena_offset < ae;
}

static hfx_status place_task(hfx_program *p, int task, uint32_t *order, uint32_t *tmp) {
    uint32_t n = 0;
    /* scratch of this task in producer order (ops are in task order) */
    for (uint32_t k = 0; k < p->n_task_ops[task]; k++) {
        const hfx_op *op = &p->ops[p->task_ops[task][k]];
        for (uint32_t i = 0; i < op->n_out; i++)
            if (p->tensors[op->out[i]].role == HFX_ROLE_SCRATCH) order[n++] = op->out[i];
    }
    size_t high = 0;
    for (uint32_t s = 0; s < n; s++) {
        hfx_tensor *t = &p->tensors[order[s]];
        size_t size = align_up(t->bytes);
        /* live neighbours, sorted by offset (insertion sort) */
        uint32_t m = 0;
        for (uint32_t q = 0; q < s; q++) {
            const hfx_tensor *u = &p->tensors[order[q]];
            if (!lifetimes_overlap(t, u)) continue;
            uint32_t pos = m++;
            while (pos > 0 && p->tensors[tmp[pos - 1]].arena_offset > u->arena_offset) {
                tmp[pos] = tmp[pos - 1];
                pos--;
            }
            tmp[pos] = order[q];
        }
        size_t off = 0;
        for (uint32_t q = 0; q < m; q++) {
            const hfx_tensor *u = &p->tensors[tmp[q]];
            if (u->arena_offset >= off + size) break;
            size_t end = u->arena_offset + align_up(u->bytes);
            if (end > off) off = end;
        }
        t->arena_offset = off;
        if (off + size > high) high = off + size;
        if (high > (size_t)HFX_MAX_TENSOR_BYTES * 2u) return HFX_ERR_SIZE;
    }
    p->scratch_bytes[task] = high;
    return HFX_OK;
}

static bool touches_overlap(const hfx_program *p, const hfx_op *op, const hfx_tensor *s) {
    for (uint32_t i = 0; i < op->n_in; i++) {
        const hfx_tensor *u = &p->tensors[op->in[i]];
        if (u->role == HFX_ROLE_SCRATCH && u != s && bytes_overlap(u, s)) return true;
    }
    for (uint32_t i = 0; i < op->n_out; i++) {
        const hfx_tensor *u = &p->tensors[op->out[i]];
        if (u->role == HFX_ROLE_SCRATCH && u != s && bytes_overlap(u, s)) return true;
    }
    return false;
}

typedef struct dep_list {
    uint32_t *v;
    uint32_t n, cap;
} dep_list;

static hfx_status dep_push(dep_list *d, uint32_t op) {
    if (d->n == d->cap) {
        if (d->cap > 0x3fffffffu) return HFX_ERR_SIZE;
        uint32_t ncap = d->cap ? d->cap * 2u : 64u;
        uint32_t *nv = hfx_plat_alloc(sizeof(uint32_t) * ncap, 64);
        if (!nv) return HFX_ERR_NOMEM;
        if (d->n) memcpy(nv, d->v, sizeof(uint32_t) * d->n);
        hfx_plat_free(d->v);
        d->v = nv;
        d->cap = ncap;
    }
    d->v[d->n++] = op;
    return HFX_OK;
}

hfx_status hfx_arena_place(hfx_program *p, hfx_error *err) {
    hfx_status st = HFX_OK;
    uint32_t nt = p->n_tensors;
    uint32_t *order = hfx_plat_alloc(sizeof(uint32_t) * nt, 64);
    uint32_t *tmp = hfx_plat_alloc(sizeof(uint32_t) * nt, 64);
    uint32_t *mark = hfx_plat_alloc(sizeof(uint32_t) * p->n_ops, 64);
    dep_list d = {NULL, 0, 0};
    if (!order || !tmp || !mark) {
        st = HFX_ERR_NOMEM;
        hfx_error_set(err, st, 0, "out of memory");
        goto done;
    }
    for (int t = 0; t < 2 && !st; t++) {
        st = place_task(p, t, order, tmp);
        if (st) hfx_error_set(err, st, 0, "task %d scratch too large", t);
    }
    if (st) goto done;
    for (uint32_t o = 0; o < p->n_ops; o++) mark[o] = HFX_NO_TENSOR;
    for (uint32_t o = 0; o < p->n_ops && !st; o++) {
        hfx_op *op = &p->ops[o];
        op->dep_begin = d.n;
        /* RAW */
        for (uint32_t i = 0; i < op->n_in && !st; i++) {
            uint32_t prod = p->tensors[op->in[i]].producer;
            if (prod == HFX_NO_TENSOR || mark[prod] == o) continue;
            mark[prod] = o;
            st = dep_push(&d, prod);
        }
        /* WAR / WAW through reused bytes */
        for (uint32_t i = 0; i < op->n_out && !st; i++) {
            const hfx_tensor *s = &p->tensors[op->out[i]];
            if (s->role != HFX_ROLE_SCRATCH) continue;
            for (uint32_t k = 0; k < op->task_index && !st; k++) {
                uint32_t other = p->task_ops[op->task][k];
                if (mark[other] == o || !touches_overlap(p, &p->ops[other], s)) continue;
                mark[other] = o;
                st = dep_push(&d, other);
            }
        }
        op->n_deps = d.n - op->dep_begin;
    }
    if (st) {
        hfx_error_set(err, st, 0, "cannot build the op dependencies");
        goto done;
    }
    p->deps = d.v;
    p->n_deps_total = d.n;
    d.v = NULL;
done:
    hfx_plat_free(order);
    hfx_plat_free(tmp);
    hfx_plat_free(mark);
    hfx_plat_free(d.v);
    return st;
}
