/*
 * trace.c - per-engine busy time and engine overlap from a run's trace.
 *
 * Busy time of a set of engines = length of the union of its items'
 * [start, end) intervals; overlap of two sets = length of the intersection
 * of their unions.
 */
#include "core.h"
#include "platform.h"

typedef struct ival {
    uint64_t s, e;
} ival;

static void sift(ival *a, size_t root, size_t n) {
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && a[c + 1].s > a[c].s) c++;
        if (a[root].s >= a[c].s) return;
        ival t = a[root];
        a[root] = a[c];
        a[c] = t;
        root = c;
    }
}

static void heap_sort(ival *a, size_t n) {
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift(a, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        ival t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(a, 0, end);
    }
}

/* filter: engine mask and task mask; returns the number of disjoint intervals */
static size_t union_of(const hfx_trace_event *ev, size_t n, uint32_t engine_mask, uint32_t task_mask, ival *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(engine_mask & (1u << ev[i].engine)) || !(task_mask & (1u << ev[i].task))) continue;
        if (ev[i].end_ns <= ev[i].start_ns) continue;
        out[m].s = ev[i].start_ns;
        out[m].e = ev[i].end_ns;
        m++;
    }
    heap_sort(out, m);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && out[i].s <= out[k - 1].e) {
            if (out[i].e > out[k - 1].e) out[k - 1].e = out[i].e;
        } else {
            out[k++] = out[i];
        }
    }
    return k;
}

static uint64_t length(const ival *a, size_t n) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += a[i].e - a[i].s;
    return sum;
}

static uint64_t intersect(const ival *a, size_t na, const ival *b, size_t nb) {
    uint64_t sum = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint64_t s = a[i].s > b[j].s ? a[i].s : b[j].s;
        uint64_t e = a[i].e < b[j].e ? a[i].e : b[j].e;
        if (e > s) sum += e - s;
        if (a[i].e < b[j].e) i++;
        else j++;
    }
    return sum;
}

static ival *tmp_alloc(size_t n) { return hfx_plat_alloc(sizeof(ival) * (n ? n : 1), 64); }

uint64_t hfx_trace_busy_ns(const hfx_trace_event *ev, size_t n, uint32_t engine_mask) {
    if (!ev || !n) return 0;
    ival *a = tmp_alloc(n);
    if (!a) return 0;
    uint64_t r = length(a, union_of(ev, n, engine_mask, 3u, a));
    hfx_plat_free(a);
    return r;
}

uint64_t hfx_trace_overlap_ns(const hfx_trace_event *ev, size_t n, uint32_t mask_a, uint32_t mask_b) {
    if (!ev || !n) return 0;
    ival *a = tmp_alloc(n), *b = tmp_alloc(n);
    uint64_t r = 0;
    if (a && b) {
        size_t na = union_of(ev, n, mask_a, 3u, a);
        size_t nb = union_of(ev, n, mask_b, 3u, b);
        r = intersect(a, na, b, nb);
    }
    hfx_plat_free(a);
    hfx_plat_free(b);
    return r;
}

hfx_status hfx_trace_summarize(const hfx_trace_event *ev, size_t n, hfx_trace_summary *out) {
    if (!out || (n && !ev)) return HFX_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!n) return HFX_OK;
    ival *a = tmp_alloc(n), *b = tmp_alloc(n);
    if (!a || !b) {
        hfx_plat_free(a);
        hfx_plat_free(b);
        return HFX_ERR_NOMEM;
    }
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].start_ns < first) first = ev[i].start_ns;
        if (ev[i].end_ns > last) last = ev[i].end_ns;
        if (ev[i].engine < HFX_NUM_ENGINES && ev[i].end_ns > ev[i].start_ns)
            out->work_ns[ev[i].engine] += ev[i].end_ns - ev[i].start_ns;
    }
    out->wall_ns = last > first ? last - first : 0;
    for (uint32_t e = 0; e < HFX_NUM_ENGINES; e++) out->busy_ns[e] = length(a, union_of(ev, n, 1u << e, 3u, a));
    for (uint32_t t = 0; t < HFX_NUM_TASKS; t++)
        out->task_busy_ns[t] = length(a, union_of(ev, n, 7u, 1u << t, a));
    size_t na = union_of(ev, n, 1u << HFX_ENGINE_MATRIX, 3u, a);
    size_t nb = union_of(ev, n, (1u << HFX_ENGINE_VECTOR) | (1u << HFX_ENGINE_COPY), 3u, b);
    out->matrix_vector_overlap_ns = intersect(a, na, b, nb);
    na = union_of(ev, n, 7u, 1u, a);
    nb = union_of(ev, n, 7u, 2u, b);
    out->task_overlap_ns = intersect(a, na, b, nb);
    hfx_plat_free(a);
    hfx_plat_free(b);
    return HFX_OK;
}
