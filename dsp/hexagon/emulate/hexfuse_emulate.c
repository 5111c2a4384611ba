/*
 * hexfuse_emulate.c - run one FusedHexPair task program under qemu-hexagon:
 * the real parser, planner, scheduler (coop platform: 1 matrix + 3 vector
 * workers interleaved on the one hardware thread) and op kernels as built for
 * Hexagon, on the inputs of a job file. Driven by hexfuse_onnx/tools/emulate.py.
 *
 *   qemu-hexagon hexfuse_emulate.elf JOB RESULT
 *
 * The program runs twice: fused (both tasks claimed by the scheduler at the
 * node's share_a) and forced serial (task A, then task B). Time is qemu's
 * executed-packet counter (qemu_counters.S) installed as the coop clock, so
 * every trace event's start/end is a packet count and an item's packets are
 * end - start (the two clock calls included, a few packets).
 *
 * Job file (little endian; written by emulate.py):
 *   0  u32 magic 0x4a584648 ("HFXJ")     4  u16 version 1     6  u16 header_bytes 24
 *   8  u32 total_bytes (= file size)     12 u32 program_bytes 16 u32 n_inputs (<= 8192)
 *   20 f32 share_a (0..1)                24 u32[n_inputs] byte size of each input
 *   then the program at the next multiple of 128, then each input at the next
 *   multiple of 128 after the previous section; padding bytes are 0; the last
 *   section ends at total_bytes. Inputs are in the node's order (A's first).
 *
 * Result file:
 *   0  u32 magic 0x52584648 ("HFXR")     4  u16 version 1     6  u16 header_bytes 24
 *   8  u32 total_bytes   12 u32 stats_bytes   16 u32 n_outputs   20 u32 0
 *   24 u32[n_outputs] byte size of each output, then the statistics (JSON,
 *   stats_bytes), then the outputs of the fused run back to back.
 *
 * Exit codes: 0 done; 2 usage; 3 bad job file (one line "hexfuse_emulate:
 * bad job: ..."); 4 program refused by the parser (status, byte, message);
 * 5 file I/O; 6 a run failed; 7 out of memory.
 */
#include <stdint.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "hx_rt.h"
#include "platform.h"

#define JOB_MAGIC 0x4a584648u
#define RESULT_MAGIC 0x52584648u
#define FORMAT_VERSION 1u
#define HEADER_BYTES 24u
#define MAX_IO 8192u
#define SECTION_ALIGN 128u

enum { EXIT_USAGE = 2, EXIT_BAD_JOB = 3, EXIT_PROGRAM = 4, EXIT_IO = 5, EXIT_RUN = 6, EXIT_NOMEM = 7 };

#ifndef HFX_EMULATE_HEAP_BYTES
#define HFX_EMULATE_HEAP_BYTES (1024u << 20)
#endif
/* The coop heap: job, program copy, arena, work spaces, outputs. Zero pages cost nothing until touched. */
static _Alignas(128) unsigned char g_heap[HFX_EMULATE_HEAP_BYTES];

uint32_t hx_qemu_packets(void);

/* ---- clock: qemu's packet counter, widened to 64 bits ---------------------------- */

static uint32_t g_last_count;
static uint64_t g_packets;

static uint64_t packet_clock(void)
{
    uint32_t now = hx_qemu_packets();
    g_packets += (uint32_t)(now - g_last_count);
    g_last_count = now;
    return g_packets;
}

/* ---- small helpers ------------------------------------------------------------------ */

__attribute__((noreturn)) static void fail(int code, const char *what, const char *detail)
{
    char line[320];
    int n = hx_snprintf(line, sizeof line, "hexfuse_emulate: %s: %s\n", what, detail);
    hx_sys_write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    hx_exit(code);
}

static uint32_t rd32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static void *alloc_or_die(size_t bytes)
{
    void *p = hfx_plat_alloc(bytes ? bytes : 1, SECTION_ALIGN);
    if (!p) fail(EXIT_NOMEM, "out of memory", "the coop heap (HFX_EMULATE_HEAP_BYTES) is too small for this job");
    return p;
}

static void read_exact(int fd, unsigned char *buf, size_t n, const char *path)
{
    while (n > 0) {
        long r = hx_sys_read(fd, buf, n);
        if (r < 0) fail(EXIT_IO, path, "read failed");
        if (r == 0) fail(EXIT_BAD_JOB, "bad job", "file shorter than its total_bytes");
        buf += r;
        n -= (size_t)r;
    }
}

/* ---- job ------------------------------------------------------------------------------ */

typedef struct job {
    const unsigned char *program;
    uint32_t program_bytes;
    uint32_t n_inputs;
    float share_a;
    const void **inputs;
    uint32_t *input_bytes;
} job;

static unsigned char *read_job_file(const char *path, uint32_t *size)
{
    int fd = hx_sys_open(path, HX_O_RDONLY, 0);
    if (fd < 0) fail(EXIT_IO, path, "cannot open the job file");
    unsigned char head[HEADER_BYTES];
    read_exact(fd, head, sizeof head, path);
    if (rd32(head) != JOB_MAGIC) fail(EXIT_BAD_JOB, "bad job", "magic is not HFXJ");
    if (rd16(head + 4) != FORMAT_VERSION) fail(EXIT_BAD_JOB, "bad job", "unsupported version");
    if (rd16(head + 6) != HEADER_BYTES) fail(EXIT_BAD_JOB, "bad job", "header_bytes is not 24");
    uint32_t total = rd32(head + 8);
    if (total < HEADER_BYTES || total > sizeof g_heap / 2) fail(EXIT_BAD_JOB, "bad job", "total_bytes out of range");
    unsigned char *buf = alloc_or_die(total);
    memcpy(buf, head, sizeof head);
    read_exact(fd, buf + HEADER_BYTES, total - HEADER_BYTES, path);
    unsigned char extra;
    if (hx_sys_read(fd, &extra, 1) != 0) fail(EXIT_BAD_JOB, "bad job", "file longer than its total_bytes");
    hx_sys_close(fd);
    *size = total;
    return buf;
}

static int zero_bytes(const unsigned char *p, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++)
        if (p[i]) return 0;
    return 1;
}

static job parse_job(const unsigned char *buf, uint32_t total)
{
    job j;
    memset(&j, 0, sizeof j);
    j.program_bytes = rd32(buf + 12);
    j.n_inputs = rd32(buf + 16);
    uint32_t share_bits = rd32(buf + 20);
    memcpy(&j.share_a, &share_bits, sizeof j.share_a);
    if (!(j.share_a >= 0.0f && j.share_a <= 1.0f)) fail(EXIT_BAD_JOB, "bad job", "share_a is not within [0, 1]");
    if (j.n_inputs > MAX_IO) fail(EXIT_BAD_JOB, "bad job", "n_inputs over 8192");
    uint64_t table_end = HEADER_BYTES + 4ull * j.n_inputs;
    if (table_end > total) fail(EXIT_BAD_JOB, "bad job", "input size table runs past total_bytes");
    j.inputs = alloc_or_die(sizeof(void *) * (j.n_inputs + 1));
    j.input_bytes = alloc_or_die(sizeof(uint32_t) * (j.n_inputs + 1));
    uint64_t at = align_up(table_end, SECTION_ALIGN);
    if (at + j.program_bytes > total || !zero_bytes(buf, table_end, at))
        fail(EXIT_BAD_JOB, "bad job", "program section out of bounds or padding not zero");
    j.program = buf + at;
    uint64_t end = at + j.program_bytes;
    for (uint32_t i = 0; i < j.n_inputs; i++) {
        j.input_bytes[i] = rd32(buf + HEADER_BYTES + 4 * i);
        at = align_up(end, SECTION_ALIGN);
        if (at + j.input_bytes[i] > total || !zero_bytes(buf, end, at))
            fail(EXIT_BAD_JOB, "bad job", "an input section is out of bounds or its padding not zero");
        j.inputs[i] = buf + at;
        end = at + j.input_bytes[i];
    }
    if (end != total) fail(EXIT_BAD_JOB, "bad job", "bytes after the last section");
    return j;
}

static hfx_program *parse_program(const job *j)
{
    hfx_program *prog = NULL;
    hfx_error err;
    hfx_status st = hfx_program_parse(j->program, j->program_bytes, &prog, &err);
    if (st != HFX_OK) {
        char detail[256];
        hx_snprintf(detail, sizeof detail, "%s at byte %u: %s", hfx_status_name(st), (unsigned)err.byte_offset,
                    err.message);
        fail(EXIT_PROGRAM, "program refused", detail);
    }
    uint32_t n_in = hfx_program_num_inputs(prog, HFX_TASK_A) + hfx_program_num_inputs(prog, HFX_TASK_B);
    if (n_in != j->n_inputs) fail(EXIT_BAD_JOB, "bad job", "input count differs from the program's");
    for (uint32_t i = 0; i < n_in; i++) {
        hfx_tensor_info info;
        hfx_program_input_info(prog, i, &info);
        if (info.bytes != j->input_bytes[i]) fail(EXIT_BAD_JOB, "bad job", "an input's size differs from the program's");
    }
    return prog;
}

/* ---- runs ----------------------------------------------------------------------------- */

typedef struct run_stats {
    int serialized;
    uint64_t call_packets;       /* the whole hfx_run call */
    uint64_t item_packets;       /* sum over items */
    uint64_t items;
    uint64_t engine_packets[HFX_NUM_ENGINES];
    uint64_t *worker_packets;    /* per worker */
    uint64_t *op_packets;        /* per program op */
    uint64_t *op_items;
    uint64_t dropped;
} run_stats;

static void run_once(hfx_pool *pool, const hfx_program *prog, const job *j, void **outputs, size_t n_out,
                     uint32_t flags, hfx_trace_event *trace, size_t trace_cap, run_stats *s)
{
    hfx_run_options opt;
    hfx_run_options_init(&opt);
    opt.share_a = j->share_a;
    opt.flags = flags;
    opt.trace = trace;
    opt.trace_capacity = trace_cap;
    hfx_run_result res;
    uint64_t before = packet_clock();
    hfx_status st = hfx_run(pool, prog, (const void *const *)j->inputs, j->n_inputs, (void *const *)outputs, n_out,
                            &opt, NULL, &res);
    s->call_packets = packet_clock() - before;
    if (st != HFX_OK) fail(EXIT_RUN, "hfx_run failed", hfx_status_name(st));
    s->serialized = res.serialized;
    s->dropped = res.trace_dropped;
    for (size_t i = 0; i < res.trace_events; i++) {
        const hfx_trace_event *e = &trace[i];
        uint64_t pk = e->end_ns - e->start_ns;
        s->item_packets += pk;
        s->items++;
        if (e->engine < HFX_NUM_ENGINES) s->engine_packets[e->engine] += pk;
        s->worker_packets[e->worker] += pk;
        s->op_packets[e->op] += pk;
        s->op_items[e->op]++;
    }
}

/* ---- statistics as JSON -------------------------------------------------------------- */

typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = hx_vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= t->cap - t->len) fail(EXIT_NOMEM, "out of memory", "statistics buffer too small");
    t->len += (size_t)n;
}

static void put_list(text *t, const char *key, const uint64_t *v, size_t n)
{
    put(t, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++) put(t, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    put(t, "]");
}

static void put_run(text *t, const char *name, const run_stats *s, uint32_t n_workers, uint32_t n_ops)
{
    put(t, "\"%s\":{\"serialized\":%d,\"call_packets\":%llu,\"item_packets\":%llu,\"items\":%llu,"
           "\"trace_dropped\":%llu,",
        name, s->serialized, (unsigned long long)s->call_packets, (unsigned long long)s->item_packets,
        (unsigned long long)s->items, (unsigned long long)s->dropped);
    put_list(t, "engine_packets", s->engine_packets, HFX_NUM_ENGINES);
    put(t, ",");
    put_list(t, "worker_packets", s->worker_packets, n_workers);
    put(t, ",");
    put_list(t, "op_packets", s->op_packets, n_ops);
    put(t, ",");
    put_list(t, "op_items", s->op_items, n_ops);
    put(t, "}");
}

static text stats_json(const hfx_pool *pool, const hfx_program *prog, const run_stats *fused,
                       const run_stats *serial, int same)
{
    uint32_t n_workers = hfx_pool_num_workers(pool), n_ops = hfx_program_num_ops(prog);
    text t;
    t.cap = 1024 + (size_t)(n_workers + n_ops) * 2 * 2 * 24 + (size_t)n_ops * 48;
    t.buf = alloc_or_die(t.cap);
    t.len = 0;
    put(&t, "{\"arch\":\"v%d\",\"platform\":\"%s\",\"workers\":[", __HEXAGON_ARCH__, hfx_plat_name());
    for (uint32_t w = 0; w < n_workers; w++) put(&t, "%s%d", w ? "," : "", hfx_pool_worker_engine(pool, w));
    put(&t, "],\"ops\":[");
    for (uint32_t o = 0; o < n_ops; o++) {
        hfx_op_info info;
        hfx_program_op_info(prog, o, &info);
        put(&t, "%s{\"opcode\":%u,\"engine\":%u,\"task\":%u}", o ? "," : "", info.opcode, info.engine, info.task);
    }
    put(&t, "],\"runs\":{");
    put_run(&t, "fused", fused, n_workers, n_ops);
    put(&t, ",");
    put_run(&t, "serial", serial, n_workers, n_ops);
    put(&t, "},\"serial_equals_fused\":%s}", same ? "true" : "false");
    return t;
}

/* ---- result file --------------------------------------------------------------------- */

static void write_all(int fd, const void *p, size_t n, const char *path)
{
    if (n && hx_sys_write(fd, p, n) != (long)n) fail(EXIT_IO, path, "write failed");
}

static void write_result(const char *path, const text *stats, void **outputs, const uint64_t *bytes, size_t n_out)
{
    uint64_t total = HEADER_BYTES + 4ull * n_out + stats->len;
    for (size_t i = 0; i < n_out; i++) total += bytes[i];
    if (total > 0xffffffffull) fail(EXIT_IO, path, "result over 4 GiB");
    unsigned char *head = alloc_or_die(HEADER_BYTES + 4 * n_out);
    wr32(head, RESULT_MAGIC);
    head[4] = FORMAT_VERSION;
    head[5] = 0;
    head[6] = HEADER_BYTES;
    head[7] = 0;
    wr32(head + 8, (uint32_t)total);
    wr32(head + 12, (uint32_t)stats->len);
    wr32(head + 16, (uint32_t)n_out);
    wr32(head + 20, 0);
    for (size_t i = 0; i < n_out; i++) wr32(head + HEADER_BYTES + 4 * i, (uint32_t)bytes[i]);
    int fd = hx_sys_open(path, HX_O_WRONLY | HX_O_CREAT | HX_O_TRUNC, 0644);
    if (fd < 0) fail(EXIT_IO, path, "cannot create the result file");
    write_all(fd, head, HEADER_BYTES + 4 * n_out, path);
    write_all(fd, stats->buf, stats->len, path);
    for (size_t i = 0; i < n_out; i++) write_all(fd, outputs[i], (size_t)bytes[i], path);
    if (hx_sys_close(fd) != 0) fail(EXIT_IO, path, "close failed");
}

/* ---- main ------------------------------------------------------------------------------ */

static void **alloc_outputs(const hfx_program *prog, uint64_t *bytes, size_t n_out)
{
    void **out = alloc_or_die(sizeof(void *) * (n_out + 1));
    for (size_t i = 0; i < n_out; i++) {
        hfx_tensor_info info;
        hfx_program_output_info(prog, (uint32_t)i, &info);
        bytes[i] = info.bytes;
        out[i] = alloc_or_die((size_t)info.bytes);
    }
    return out;
}

static void alloc_stats(run_stats *s, uint32_t n_workers, uint32_t n_ops)
{
    memset(s, 0, sizeof *s);
    s->worker_packets = alloc_or_die(sizeof(uint64_t) * n_workers);
    s->op_packets = alloc_or_die(sizeof(uint64_t) * n_ops);
    s->op_items = alloc_or_die(sizeof(uint64_t) * n_ops);
    memset(s->worker_packets, 0, sizeof(uint64_t) * n_workers);
    memset(s->op_packets, 0, sizeof(uint64_t) * n_ops);
    memset(s->op_items, 0, sizeof(uint64_t) * n_ops);
}

int main(int argc, char **argv)
{
    if (argc != 3) fail(EXIT_USAGE, "usage", "hexfuse_emulate.elf JOB RESULT");
    if (hfx_plat_coop_set_heap(g_heap, sizeof g_heap) != 0) fail(EXIT_NOMEM, "out of memory", "coop heap already set");
    hfx_plat_coop_set_clock(packet_clock);

    uint32_t size;
    unsigned char *buf = read_job_file(argv[1], &size);
    job j = parse_job(buf, size);
    hfx_program *prog = parse_program(&j);

    hfx_pool_config cfg;
    hfx_pool_config_init(&cfg);
    hfx_pool *pool = NULL;
    hfx_status st = hfx_pool_create(&cfg, &pool);
    if (st != HFX_OK) fail(EXIT_RUN, "hfx_pool_create failed", hfx_status_name(st));

    size_t n_out = hfx_program_num_outputs(prog, HFX_TASK_A) + hfx_program_num_outputs(prog, HFX_TASK_B);
    uint64_t *bytes = alloc_or_die(sizeof(uint64_t) * (n_out + 1));
    void **fused_out = alloc_outputs(prog, bytes, n_out);
    void **serial_out = alloc_outputs(prog, bytes, n_out);
    size_t trace_cap = (size_t)(hfx_program_num_items(prog, HFX_TASK_A) + hfx_program_num_items(prog, HFX_TASK_B));
    hfx_trace_event *trace = alloc_or_die(sizeof *trace * (trace_cap + 1));
    uint32_t n_workers = hfx_pool_num_workers(pool), n_ops = hfx_program_num_ops(prog);
    run_stats fused, serial;
    alloc_stats(&fused, n_workers, n_ops);
    alloc_stats(&serial, n_workers, n_ops);

    run_once(pool, prog, &j, fused_out, n_out, 0, trace, trace_cap, &fused);
    run_once(pool, prog, &j, serial_out, n_out, HFX_RUN_FORCE_SERIAL, trace, trace_cap, &serial);
    int same = 1;
    for (size_t i = 0; i < n_out; i++) same &= memcmp(fused_out[i], serial_out[i], (size_t)bytes[i]) == 0;

    text stats = stats_json(pool, prog, &fused, &serial, same);
    write_result(argv[2], &stats, fused_out, bytes, n_out);
    hfx_pool_destroy(pool);
    hfx_program_free(prog);
    return 0;
}
