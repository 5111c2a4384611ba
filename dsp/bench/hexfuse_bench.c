/*
 * hexfuse_bench - host benchmark of the persistent-worker kernel.
 *
 *   1. single-thread GEMM GFLOP/s (128x512x512, 256x1024x1024): OpenBLAS
 *      called directly, and the same GEMM run through hfx_run on a pool with
 *      one matrix worker only.
 *   2. a matrix-heavy task A (chain of 4 x (Gemm+bias 256x1024x1024, Relu))
 *      and a vector-heavy task B (LayerNorm / Gelu / Softmax / Add chain on
 *      a 2048x1024 tensor), run
 *        (a) one after the other (A then B; every worker helps each task),
 *        (b) fused at share 1:1 and at the best share of a sweep.
 *      Prints median times, ratios vs serial, per-engine busy time and the
 *      matrix/vector overlap from the trace.
 *
 * Run with the OpenBLAS tuning variables unset (they slow OpenBLAS down):
 *   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build/dsp-host/bench/hexfuse_bench
 * Options: --reps N (default 11), --quick (fewer reps, smaller sweep).
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hexfuse/hexfuse.h"
#include "program_builder.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float *rand_buf(size_t n, float scale) {
    float *p = malloc(n * sizeof(float));
    uint32_t s = 12345u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = scale * ((float)(s >> 8) / 16777216.0f - 0.5f);
    }
    return p;
}

static hfx_program *parse_or_die(hfxb *b) {
    size_t n;
    uint8_t *bytes = hfxb_encode(b, &n);
    hfx_program *p;
    hfx_error e;
    if (hfx_program_parse(bytes, n, &p, &e) != HFX_OK) {
        fprintf(stderr, "parse: %s\n", e.message);
        exit(1);
    }
    free(bytes);
    return p;
}

static void check(hfx_status st, const char *what) {
    if (st != HFX_OK) {
        fprintf(stderr, "%s: %s\n", what, hfx_status_name(st));
        exit(1);
    }
}

/* ---- 1. GEMM throughput ---------------------------------------------------------- */

static void bench_gemm(int reps) {
    static const uint32_t shapes[][3] = {{128, 512, 512}, {256, 1024, 1024}};
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    cfg.n_matrix_workers = 1;
    cfg.n_vector_workers = 0; /* one worker: single-thread */
    hfx_pool *pool;
    check(hfx_pool_create(&cfg, &pool), "pool");
    printf("== single-thread GEMM (M x N x K), fp32, median of %d ==\n", reps);
    for (int s = 0; s < 2; s++) {
        uint32_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = rand_buf((size_t)m * k, 1), *b = rand_buf((size_t)k * n, 1), *c = malloc((size_t)m * n * 4);
        double flops = 2.0 * m * n * k, t[64];
        scipy_openblas_set_num_threads(1);
        for (int r = -2; r < reps; r++) {
            double t0 = now_s();
            scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f, a,
                              (blasint)k, b, (blasint)n, 0.0f, c, (blasint)n);
            if (r >= 0) t[r] = now_s() - t0;
        }
        double direct = flops / median(t, reps) / 1e9;
        hfxb pb;
        hfxb_init(&pb);
        uint32_t x = hfxb_input(&pb, 0, HFXB_DIMS(m, k));
        uint32_t w = hfxb_const(&pb, 0, HFXB_DIMS(k, n), b);
        uint32_t y = hfxb_output(&pb, 0, HFXB_DIMS(m, n));
        hfxb_gemm(&pb, 0, x, w, HFXB_NONE, y, 0, 0, 1.0f, 0.0f);
        hfx_program *p = parse_or_die(&pb);
        const void *in[1] = {a};
        void *out[1] = {c};
        for (int r = -2; r < reps; r++) {
            double t0 = now_s();
            check(hfx_run(pool, p, in, 1, out, 1, NULL, NULL, NULL), "run");
            if (r >= 0) t[r] = now_s() - t0;
        }
        double via = flops / median(t, reps) / 1e9;
        printf("gemm %4ux%4ux%4u  OpenBLAS direct %6.1f GFLOP/s   via hfx_run (1 matrix worker, %u items) %6.1f GFLOP/s\n",
               m, n, k, direct, (unsigned)hfx_program_num_items(p, 0), via);
        hfx_program_free(p);
        hfxb_free(&pb);
        free(a), free(b), free(c);
    }
    hfx_pool_destroy(pool);
}

/* ---- 2. fused pair ------------------------------------------------------------------ */

#define GM 256u
#define GK 1024u
#define N_GEMM 4
#define VR 2048u
#define VC 1024u

typedef struct pair {
    hfx_program *prog;
    float *w, *x, *v, *res, *scale, *bias, *ya, *yb;
} pair;

static void build_pair(pair *pp) {
    hfxb b;
    hfxb_init(&b);
    pp->w = rand_buf((size_t)GK * GK, 2.0f / 32.0f);
    pp->scale = rand_buf(VC, 1.0f);
    pp->bias = rand_buf(VC, 1.0f);
    /* task A: x -> (Gemm + bias -> Relu) x N_GEMM, the last Relu writes the output */
    uint32_t cur = hfxb_input(&b, 0, HFXB_DIMS(GM, GK));
    uint32_t w = hfxb_const(&b, 0, HFXB_DIMS(GK, GK), pp->w);
    uint32_t gb = hfxb_const(&b, 0, HFXB_DIMS(GK), pp->bias);
    for (int i = 0; i < N_GEMM; i++) {
        uint32_t g = hfxb_scratch(&b, 0, HFXB_DIMS(GM, GK));
        uint32_t a = i == N_GEMM - 1 ? hfxb_output(&b, 0, HFXB_DIMS(GM, GK)) : hfxb_scratch(&b, 0, HFXB_DIMS(GM, GK));
        hfxb_gemm(&b, 0, cur, w, gb, g, 0, 0, 1.0f, 1.0f);
        hfxb_unary(&b, 0, HFX_OP_RELU, g, a);
        cur = a;
    }
    /* task B: v -> LayerNorm -> Gelu -> Softmax -> Add(res) -> LayerNorm -> Mul(res) -> out */
    uint32_t v = hfxb_input(&b, 1, HFXB_DIMS(VR, VC));
    uint32_t res = hfxb_input(&b, 1, HFXB_DIMS(VR, VC));
    uint32_t sc = hfxb_const(&b, 1, HFXB_DIMS(VC), pp->scale);
    uint32_t bi = hfxb_const(&b, 1, HFXB_DIMS(VC), pp->bias);
    uint32_t t1 = hfxb_scratch(&b, 1, HFXB_DIMS(VR, VC)), t2 = hfxb_scratch(&b, 1, HFXB_DIMS(VR, VC));
    uint32_t t3 = hfxb_scratch(&b, 1, HFXB_DIMS(VR, VC)), t4 = hfxb_scratch(&b, 1, HFXB_DIMS(VR, VC));
    uint32_t t5 = hfxb_scratch(&b, 1, HFXB_DIMS(VR, VC));
    uint32_t yb = hfxb_output(&b, 1, HFXB_DIMS(VR, VC));
    hfxb_norm(&b, 1, HFX_OP_LAYERNORM, v, sc, bi, t1, -1, 1e-5f);
    hfxb_unary(&b, 1, HFX_OP_GELU, t1, t2);
    hfxb_softmax(&b, 1, t2, t3, -1);
    hfxb_binary(&b, 1, HFX_OP_ADD, t3, res, t4);
    hfxb_norm(&b, 1, HFX_OP_LAYERNORM, t4, sc, bi, t5, -1, 1e-5f);
    hfxb_binary(&b, 1, HFX_OP_MUL, t5, res, yb);
    pp->prog = parse_or_die(&b);
    hfxb_free(&b);
    pp->x = rand_buf((size_t)GM * GK, 1.0f);
    pp->v = rand_buf((size_t)VR * VC, 4.0f);
    pp->res = rand_buf((size_t)VR * VC, 1.0f);
    pp->ya = malloc((size_t)GM * GK * 4);
    pp->yb = malloc((size_t)VR * VC * 4);
}

static hfx_trace_event g_ev[1 << 16];

typedef struct result {
    double median_s;
    hfx_trace_summary sum;
    int serialized;
} result;

/* one run of the pair; fills the trace summary */
static double run_once(hfx_pool *pool, pair *pp, float share, uint32_t flags, hfx_trace_summary *sum, int *serialized) {
    const void *in[3] = {pp->x, pp->v, pp->res};
    void *out[2] = {pp->ya, pp->yb};
    hfx_run_options o;
    hfx_run_options_init(&o);
    o.share_a = share;
    o.flags = flags;
    o.trace = g_ev;
    o.trace_capacity = sizeof g_ev / sizeof g_ev[0];
    hfx_run_result res;
    double t0 = now_s();
    check(hfx_run(pool, pp->prog, in, 3, out, 2, &o, NULL, &res), "run pair");
    double dt = now_s() - t0;
    if (sum) hfx_trace_summarize(g_ev, res.trace_events, sum);
    if (serialized) *serialized = res.serialized;
    return dt;
}

typedef struct config {
    const char *name;
    float share;
    uint32_t flags;
    double t[64];
    result r;
} config;

/* runs the configs interleaved (rep by rep) so that machine noise hits all alike */
static void run_configs(hfx_pool *pool, pair *pp, config *c, int n, int reps) {
    for (int i = 0; i < n; i++) (void)run_once(pool, pp, c[i].share, c[i].flags, NULL, NULL); /* warm up */
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++)
            c[i].t[r] = run_once(pool, pp, c[i].share, c[i].flags, r == reps - 1 ? &c[i].r.sum : NULL,
                                 &c[i].r.serialized);
    for (int i = 0; i < n; i++) c[i].r.median_s = median(c[i].t, reps);
}

static void print_result(const char *name, const result *r, double serial) {
    const hfx_trace_summary *s = &r->sum;
    printf("%-30s %8.2f ms  x%.3f vs serial | busy ms: matrix %6.2f vector %6.2f copy %5.2f | matrix&vector overlap %6.2f ms | A&B overlap %6.2f ms\n",
           name, r->median_s * 1e3, serial / r->median_s, (double)s->busy_ns[0] * 1e-6, (double)s->busy_ns[1] * 1e-6,
           (double)s->busy_ns[2] * 1e-6, (double)s->matrix_vector_overlap_ns * 1e-6, (double)s->task_overlap_ns * 1e-6);
}

static void compare(hfx_pool *pool, pair *pp, int reps, int quick, const char *title) {
    printf("%s\n", title);
    /* share sweep */
    static const float sweep_full[] = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f};
    static const float sweep_quick[] = {0.0f, 0.5f, 1.0f};
    const float *sw = quick ? sweep_quick : sweep_full;
    int nsw = quick ? 3 : 11;
    config c[11];
    memset(c, 0, sizeof c);
    for (int i = 0; i < nsw; i++) c[i].share = sw[i];
    run_configs(pool, pp, c, nsw, reps);
    int best = 0;
    printf("  share sweep (median ms):");
    for (int i = 0; i < nsw; i++) {
        printf(" %.1f:%.2f", (double)sw[i], c[i].r.median_s * 1e3);
        if (c[i].r.median_s < c[best].r.median_s) best = i;
    }
    printf("\n");
    /* final comparison, interleaved */
    config f[3];
    memset(f, 0, sizeof f);
    f[0].name = "(a) serial: A then B";
    f[0].share = 0.5f;
    f[0].flags = HFX_RUN_FORCE_SERIAL;
    f[1].name = "(b) fused, share_a 0.50";
    f[1].share = 0.5f;
    char best_name[64];
    snprintf(best_name, sizeof best_name, "(b) fused, best share %.2f", (double)sw[best]);
    f[2].name = best_name;
    f[2].share = sw[best];
    run_configs(pool, pp, f, 3, reps);
    for (int i = 0; i < 3; i++) print_result(f[i].name, &f[i].r, f[0].r.median_s);
}

static void bench_pair(int reps, int quick) {
    pair pp;
    build_pair(&pp);
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    cfg.arena_bytes = 64u << 20;
    /* host pool: every worker may help either engine class when its own has no
     * work, so that the serial baseline uses all cores for each task */
    cfg.flags = HFX_POOL_MATRIX_TAKES_VECTOR | HFX_POOL_VECTOR_TAKES_MATRIX;
    hfx_pool *pool;
    check(hfx_pool_create(&cfg, &pool), "pool");
    printf("\n== fused pair: A = %d x (Gemm+bias %ux%ux%u, Relu), B = LayerNorm/Gelu/Softmax/Add/LayerNorm/Mul on %ux%u ==\n",
           N_GEMM, GM, GK, GK, VR, VC);
    printf("pool: %u workers (1 matrix + %u vector), items: A %llu, B %llu; median of %d, configs interleaved\n",
           hfx_pool_num_workers(pool), cfg.n_vector_workers, (unsigned long long)hfx_program_num_items(pp.prog, 0),
           (unsigned long long)hfx_program_num_items(pp.prog, 1), reps);
    compare(pool, &pp, reps, quick, "host pool (MATRIX_TAKES_VECTOR | VECTOR_TAKES_MATRIX):");
    hfx_pool_destroy(pool);
    /* the hardware model: only the matrix worker runs GEMM items */
    cfg.flags = HFX_POOL_MATRIX_TAKES_VECTOR;
    check(hfx_pool_create(&cfg, &pool), "pool");
    compare(pool, &pp, reps, quick, "hardware-model pool (MATRIX_TAKES_VECTOR only: vector workers never run GEMM):");
    hfx_pool_destroy(pool);
    hfx_program_free(pp.prog);
    free(pp.w), free(pp.x), free(pp.v), free(pp.res), free(pp.scale), free(pp.bias), free(pp.ya), free(pp.yb);
}

int main(int argc, char **argv) {
    int reps = 11, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "usage: %s [--reps N] [--quick]\n", argv[0]);
            return 2;
        }
    }
    if (quick && reps > 3) reps = 3;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (getenv("OPENBLAS_CORETYPE") || getenv("OPENBLAS_L2_SIZE"))
        printf("warning: OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are set; OpenBLAS runs slower. "
               "Use: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE %s\n", argv[0]);
    bench_gemm(reps);
    bench_pair(reps, quick);
    return 0;
}
