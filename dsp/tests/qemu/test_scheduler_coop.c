/*
 * test_scheduler_coop.c - the hexfuse core (program parser, plan, scheduler,
 * arena, trace, op kernels) built with the cooperative platform and run
 * under qemu-hexagon: the persistent "workers" (1 matrix + 3 vector) are
 * step functions interleaved on the one hardware thread.
 *
 * The task program pairs
 *   task A  X[16,32] @ W[32,24] -> Relu -> Transpose -> YA[24,16]
 *           (matrix item, vector items, copy items)
 *   task B  XB[8,64] + c -> * 3 -> Slice cols 8..40 -> Concat with itself
 *           along axis 1 -> Copy -> YB[8,64]    (vector and copy items)
 * with small integer values, so every float result is exact and the outputs
 * are compared bit for bit with a plain C computation of the same graph.
 *
 * Checked: parse errors on corrupt programs, a full run (outputs, items,
 * trace events and their engine/worker classes, both tasks interleaved in
 * the trace), a second run on the same persistent pool, a run forced serial,
 * a partial run resumed through a run state, and that the coop heap is
 * empty again after everything is freed.
 */
#include <stdint.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "platform.h"
#include "program_builder.h"
#include "qtest.h"

#define MA 16
#define KA 32
#define NA 24
#define MB 8
#define NB 64
#define SL0 8
#define SL1 40

static qtest T;

static float x_a[MA * KA], w_a[KA * NA], x_b[MB * NB], c_b[NB], three[1] = {3.0f};
static float want_a[NA * MA], want_b[MB * NB];
static float got_a[NA * MA], got_b[MB * NB];

static void expect(int ok, const char *what)
{
    qt_case(&T, ok);
    if (!ok)
        hx_printf("FAIL %s\n", what);
}

static void make_data(void)
{
    qt_rng r = {12345};
    for (int i = 0; i < MA * KA; i++)
        x_a[i] = (float)((int)(qt_rand(&r) % 9) - 4);
    for (int i = 0; i < KA * NA; i++)
        w_a[i] = (float)((int)(qt_rand(&r) % 7) - 3);
    for (int i = 0; i < MB * NB; i++)
        x_b[i] = (float)((int)(qt_rand(&r) % 201) - 100);
    for (int i = 0; i < NB; i++)
        c_b[i] = (float)((int)(qt_rand(&r) % 11) - 5);
    /* task A: relu(X W), transposed */
    for (int m = 0; m < MA; m++)
        for (int n = 0; n < NA; n++) {
            float s = 0.0f;
            for (int k = 0; k < KA; k++)
                s += x_a[m * KA + k] * w_a[k * NA + n];
            want_a[n * MA + m] = s > 0.0f ? s : 0.0f;
        }
    /* task B: ((x + c) * 3)[:, 8:40] concatenated twice along axis 1 */
    for (int m = 0; m < MB; m++)
        for (int j = 0; j < NB; j++) {
            int src = SL0 + (j % (SL1 - SL0));
            want_b[m * NB + j] = (x_b[m * NB + src] + c_b[src]) * 3.0f;
        }
}

static uint8_t *build_program(size_t *size)
{
    hfxb b;
    hfxb_init(&b);
    /* task A */
    uint32_t xa = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(MA, KA));
    uint32_t wa = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(KA, NA), w_a);
    uint32_t ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(NA, MA));
    uint32_t g = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(MA, NA));
    uint32_t rl = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(MA, NA));
    hfxb_gemm(&b, HFX_TASK_A, xa, wa, HFXB_NONE, g, 0, 0, 1.0f, 0.0f);
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, g, rl);
    const int32_t perm[2] = {1, 0};
    hfxb_transpose(&b, HFX_TASK_A, rl, ya, perm, 2);
    /* task B */
    uint32_t xb = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t cb = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(NB), c_b);
    uint32_t k3 = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(1), three);
    uint32_t yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t s1 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t s2 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t s3 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, SL1 - SL0));
    uint32_t s4 = hfxb_scratch(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    hfxb_binary(&b, HFX_TASK_B, HFX_OP_ADD, xb, cb, s1);
    hfxb_binary(&b, HFX_TASK_B, HFX_OP_MUL, s1, k3, s2);
    const int32_t st[2] = {0, SL0}, en[2] = {MB, SL1}, sp[2] = {1, 1};
    hfxb_slice(&b, HFX_TASK_B, s2, s3, st, en, sp, 2);
    const uint32_t cat[2] = {s3, s3};
    hfxb_concat(&b, HFX_TASK_B, 2, cat, s4, 1);
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_COPY, -1, 1, &s4, yb, NULL);
    uint8_t *bytes = hfxb_encode(&b, size);
    hfxb_free(&b);
    return bytes;
}

static int outputs_match(void)
{
    return memcmp(got_a, want_a, sizeof want_a) == 0 && memcmp(got_b, want_b, sizeof want_b) == 0;
}

static hfx_status run(hfx_pool *pool, const hfx_program *prog, const hfx_run_options *opt, hfx_runstate *rs,
                      hfx_run_result *res)
{
    const void *in[2] = {x_a, x_b};
    void *out[2] = {got_a, got_b};
    return hfx_run(pool, prog, in, 2, out, 2, opt, rs, res);
}

static hfx_trace_event events[4096];

int main(void)
{
    char what[160];
    hx_printf("hexfuse core on the coop platform (\"%s\", workers interleaved on one thread)\n", hfx_plat_name());
    make_data();
    size_t size = 0;
    uint8_t *bytes = build_program(&size);

    /* ---- parser: corrupt programs are rejected ---- */
    qt_begin_group(&T);
    {
        hfx_program *bad = NULL;
        hfx_error err;
        uint8_t saved = bytes[0];
        bytes[0] ^= 0xff;
        expect(hfx_program_parse(bytes, size, &bad, &err) == HFX_ERR_MAGIC && bad == NULL, "bad magic rejected");
        bytes[0] = saved;
        expect(hfx_program_parse(bytes, HFX_HEADER_BYTES - 1, &bad, &err) != HFX_OK && bad == NULL,
               "truncated header rejected");
        expect(hfx_program_parse(bytes, size - 1, &bad, &err) != HFX_OK && bad == NULL,
               "truncated program rejected");
    }
    qt_end_group(&T, "parser errors");

    /* ---- parse ---- */
    qt_begin_group(&T);
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(bytes, size, &prog, &err);
    free(bytes);
    hx_snprintf(what, sizeof what, "parse: %s %s", hfx_status_name(st), st ? err.message : "");
    expect(st == HFX_OK, what);
    if (st != HFX_OK)
        return qt_result(&T, "test_scheduler");
    expect(hfx_program_num_ops(prog) == 8 && hfx_program_num_task_ops(prog, HFX_TASK_A) == 3 &&
               hfx_program_num_task_ops(prog, HFX_TASK_B) == 5,
           "op counts");
    uint64_t items_a = hfx_program_num_items(prog, HFX_TASK_A), items_b = hfx_program_num_items(prog, HFX_TASK_B);
    hx_printf("     program: %zu bytes, %u ops, items A=%llu B=%llu, scratch A=%zu B=%zu bytes\n", size,
              (unsigned)hfx_program_num_ops(prog), (unsigned long long)items_a, (unsigned long long)items_b,
              hfx_program_scratch_bytes(prog, HFX_TASK_A), hfx_program_scratch_bytes(prog, HFX_TASK_B));
    qt_end_group(&T, "parse");

    /* ---- persistent pool: 1 matrix + 3 vector workers ---- */
    qt_begin_group(&T);
    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    cfg.n_vector_workers = 3;
    cfg.n_matrix_workers = 1;
    cfg.arena_bytes = 1u << 20;
    hfx_pool *pool = NULL;
    st = hfx_pool_create(&cfg, &pool);
    expect(st == HFX_OK && pool && hfx_pool_num_workers(pool) == 4, "pool of 4 workers");
    if (st != HFX_OK)
        return qt_result(&T, "test_scheduler");
    expect(hfx_pool_worker_engine(pool, 0) == HFX_ENGINE_MATRIX && hfx_pool_worker_engine(pool, 1) == HFX_ENGINE_VECTOR,
           "worker 0 is the matrix worker");
    qt_end_group(&T, "pool");

    /* ---- full run with a trace ---- */
    qt_begin_group(&T);
    hfx_run_options opt;
    hfx_run_options_init(&opt);
    opt.trace = events;
    opt.trace_capacity = sizeof events / sizeof events[0];
    hfx_run_result res;
    memset(got_a, 0, sizeof got_a);
    memset(got_b, 0, sizeof got_b);
    uint64_t t0 = hx_clock_ns();
    st = run(pool, prog, &opt, NULL, &res);
    uint64_t host_ns = hx_clock_ns() - t0;
    hx_snprintf(what, sizeof what, "run: %s", hfx_status_name(st));
    expect(st == HFX_OK, what);
    expect(outputs_match(), "outputs bit-exact vs plain C (run 1)");
    expect(res.task_done[0] && res.task_done[1] && !res.serialized, "both tasks done, fused");
    expect(res.items_run[0] == items_a && res.items_run[1] == items_b, "every item ran once");
    expect(res.trace_events == items_a + items_b && res.trace_dropped == 0, "one trace event per item");
    int engine_ok = 1, a_first = -1, a_last = -1, b_between = 0;
    for (size_t i = 0; i < res.trace_events; i++) {
        const hfx_trace_event *e = &events[i];
        int weng = hfx_pool_worker_engine(pool, e->worker);
        /* matrix items only on the matrix worker; vector workers never run matrix items */
        if (e->engine == HFX_ENGINE_MATRIX && weng != HFX_ENGINE_MATRIX)
            engine_ok = 0;
        if (e->end_ns < e->start_ns)
            engine_ok = 0;
        if (e->task == HFX_TASK_A) {
            if (a_first < 0)
                a_first = (int)i;
            a_last = (int)i;
        }
    }
    for (int i = a_first; i >= 0 && i <= a_last; i++)
        if (events[i].task == HFX_TASK_B)
            b_between++;
    expect(engine_ok, "trace: engine classes on the right workers, end >= start");
    hx_snprintf(what, sizeof what, "trace: task B items interleaved with task A's (%d between A's first and last)",
                b_between);
    expect(b_between > 0, what);
    hfx_trace_summary sum;
    expect(hfx_trace_summarize(events, res.trace_events, &sum) == HFX_OK && sum.wall_ns > 0, "trace summary");
    hx_printf("     trace: %zu events, wall %llu ns (virtual clock), busy matrix %llu vector %llu copy %llu ns;"
              " emulated run took %llu us of host time\n",
              res.trace_events, (unsigned long long)sum.wall_ns, (unsigned long long)sum.busy_ns[HFX_ENGINE_MATRIX],
              (unsigned long long)sum.busy_ns[HFX_ENGINE_VECTOR], (unsigned long long)sum.busy_ns[HFX_ENGINE_COPY],
              (unsigned long long)(host_ns / 1000u));
    qt_end_group(&T, "fused run");

    /* ---- the pool persists: run again ---- */
    qt_begin_group(&T);
    memset(got_a, 0, sizeof got_a);
    memset(got_b, 0, sizeof got_b);
    st = run(pool, prog, NULL, NULL, &res);
    expect(st == HFX_OK && outputs_match(), "second run on the same pool");
    hfx_run_options_init(&opt);
    opt.flags = HFX_RUN_FORCE_SERIAL;
    memset(got_a, 0, sizeof got_a);
    memset(got_b, 0, sizeof got_b);
    st = run(pool, prog, &opt, NULL, &res);
    expect(st == HFX_OK && res.serialized && outputs_match(), "forced serial run");
    qt_end_group(&T, "reruns");

    /* ---- partial run: first op of each task, then resume ---- */
    qt_begin_group(&T);
    hfx_runstate *rs = NULL;
    st = hfx_runstate_create(pool, prog, &rs);
    expect(st == HFX_OK && rs, "run state");
    if (rs) {
        memset(got_a, 0, sizeof got_a);
        memset(got_b, 0, sizeof got_b);
        hfx_run_options_init(&opt);
        opt.stop_op[0] = 1;
        opt.stop_op[1] = 1;
        st = run(pool, prog, &opt, rs, &res);
        expect(st == HFX_OK && res.ops_done[0] == 1 && res.ops_done[1] == 1 && !hfx_runstate_done(rs),
               "partial run stops after one op per task");
        st = run(pool, prog, NULL, rs, &res);
        expect(st == HFX_OK && hfx_runstate_done(rs) && outputs_match(), "resumed run finishes, outputs exact");
        hfx_runstate_destroy(rs);
    }
    qt_end_group(&T, "partial run");

    /* ---- teardown ---- */
    qt_begin_group(&T);
    hfx_pool_destroy(pool);
    hfx_program_free(prog);
    hx_snprintf(what, sizeof what, "coop heap empty after teardown (%zu bytes in use)", hfx_plat_coop_heap_in_use());
    expect(hfx_plat_coop_heap_in_use() == 0, what);
    qt_end_group(&T, "teardown");
    return qt_result(&T, "test_scheduler");
}
