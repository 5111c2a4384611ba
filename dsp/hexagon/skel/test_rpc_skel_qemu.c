/*
 * test_rpc_skel_qemu.c - the FastRPC skeleton dispatcher (hexfuse_rpc_skel.c)
 * and its methods (hexfuse_rpc_imp.c) on Hexagon, under qemu-hexagon, with
 * the core on the coop platform. The test plays the FastRPC framework: it
 * marshals remote_arg arrays as hexfuse/rpc_abi.h describes and calls
 * hexfuse_rpc_skel_handle_invoke() directly (loopback; no FastRPC transport).
 *
 * Program: task A  X[8,16] @ W[16,12] -> Relu -> YA[8,12];
 *          task B  XB[4,40] + c[40] -> YB[4,40]
 * with small integers, so the outputs are compared bit for bit.
 * Checked: open (method 0), load, run (outputs, stats), unload, close, and
 * malformed calls: unknown method, wrong buffer counts, short/long/NULL
 * buffers, bad program ids, a NaN share, a corrupt program, a forged or
 * closed handle, a URI without its NUL; each returns its error code and the
 * session still runs afterwards.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hexfuse/hexfuse.h"
#include "hexfuse/rpc_abi.h"
#include "platform.h"
#include "program_builder.h"
#include "qtest.h"

#define M 8
#define K 16
#define N 12
#define MB 4
#define NB 40

static qtest T;
static float xa[M * K], wa[K * N], xb[MB * NB], cb[NB];
static float want_a[M * N], want_b[MB * NB];
/* packed as rpc_abi.h says: tensor i at a 128-byte aligned offset */
static _Alignas(128) unsigned char in_buf[4096], out_buf[4096];
static uint64_t stats[HFX_RPC_STATS];

static void expect(int ok, const char *what)
{
    qt_case(&T, ok);
    if (!ok)
        hx_printf("FAIL %s\n", what);
}

static void expect_rc(int got, int want, const char *what)
{
    char line[160];
    hx_snprintf(line, sizeof line, "%s: got %d, want %d", what, got, want);
    expect(got == want, line);
}

static void make_data(void)
{
    qt_rng r = {777};
    for (int i = 0; i < M * K; i++)
        xa[i] = (float)((int)(qt_rand(&r) % 7) - 3);
    for (int i = 0; i < K * N; i++)
        wa[i] = (float)((int)(qt_rand(&r) % 5) - 2);
    for (int i = 0; i < MB * NB; i++)
        xb[i] = (float)((int)(qt_rand(&r) % 101) - 50);
    for (int i = 0; i < NB; i++)
        cb[i] = (float)((int)(qt_rand(&r) % 9) - 4);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += xa[m * K + k] * wa[k * N + n];
            want_a[m * N + n] = s > 0.0f ? s : 0.0f;
        }
    for (int m = 0; m < MB; m++)
        for (int j = 0; j < NB; j++)
            want_b[m * NB + j] = xb[m * NB + j] + cb[j];
}

static uint8_t *build_program(size_t *size)
{
    hfxb b;
    hfxb_init(&b);
    uint32_t x = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(M, K));
    uint32_t w = hfxb_const(&b, HFX_TASK_A, HFXB_DIMS(K, N), wa);
    uint32_t g = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(M, N));
    uint32_t ya = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(M, N));
    hfxb_gemm(&b, HFX_TASK_A, x, w, HFXB_NONE, g, 0, 0, 1.0f, 0.0f);
    hfxb_unary(&b, HFX_TASK_A, HFX_OP_RELU, g, ya);
    uint32_t x2 = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    uint32_t c = hfxb_const(&b, HFX_TASK_B, HFXB_DIMS(NB), cb);
    uint32_t yb = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(MB, NB));
    hfxb_binary(&b, HFX_TASK_B, HFX_OP_ADD, x2, c, yb);
    uint8_t *bytes = hfxb_encode(&b, size);
    hfxb_free(&b);
    return bytes;
}

static void set_buf(remote_arg *a, void *pv, size_t len)
{
    a->buf.pv = pv;
    a->buf.nLen = len;
}

static int rpc_open(const char *uri, remote_handle64 *h)
{
    uint32_t len = (uint32_t)strlen(uri) + 1;
    remote_arg pra[3];
    set_buf(&pra[0], &len, sizeof len);
    set_buf(&pra[1], (void *)(uintptr_t)uri, len);
    pra[2].h64 = 0;
    int rc = hexfuse_rpc_skel_handle_invoke(0, HFX_RPC_SC_OPEN, pra);
    *h = pra[2].h64;
    return rc;
}

static int rpc_close(remote_handle64 h)
{
    remote_arg pra[1];
    pra[0].h64 = h;
    return hexfuse_rpc_skel_handle_invoke(h, HFX_RPC_SC_CLOSE, pra);
}

static int rpc_load(remote_handle64 h, const void *prog, size_t size, int32_t *id)
{
    hfx_rpc_load_out out = {-1};
    remote_arg pra[2];
    set_buf(&pra[0], (void *)(uintptr_t)prog, size);
    set_buf(&pra[1], &out, sizeof out);
    int rc = hexfuse_rpc_skel_handle_invoke(h, HFX_RPC_SC_LOAD, pra);
    *id = out.program_id;
    return rc;
}

static int rpc_unload(remote_handle64 h, int32_t id)
{
    hfx_rpc_unload_in in = {id};
    remote_arg pra[1];
    set_buf(&pra[0], &in, sizeof in);
    return hexfuse_rpc_skel_handle_invoke(h, HFX_RPC_SC_UNLOAD, pra);
}

#define IN_BYTES (128 * 4 + MB * NB * 4)   /* xa (512 bytes) then xb at 512 */
#define OUT_BYTES (384 + MB * NB * 4)      /* ya (384 bytes) then yb at 384 */

/* A run with the standard buffers, the scalars word and two lengths as given. */
static int rpc_run(remote_handle64 h, int32_t id, float share, uint32_t sc, size_t in_len, size_t stats_len)
{
    hfx_rpc_run_in in = {id, share};
    remote_arg pra[4];
    set_buf(&pra[0], &in, sizeof in);
    set_buf(&pra[1], in_buf, in_len);
    set_buf(&pra[2], out_buf, OUT_BYTES);
    set_buf(&pra[3], stats, stats_len);
    return hexfuse_rpc_skel_handle_invoke(h, sc, pra);
}

static void pack_inputs(void)
{
    memset(in_buf, 0, sizeof in_buf);
    memcpy(in_buf, xa, sizeof xa);
    memcpy(in_buf + hfx_rpc_align(sizeof xa), xb, sizeof xb);
}

static int outputs_match(void)
{
    return memcmp(out_buf, want_a, sizeof want_a) == 0 &&
           memcmp(out_buf + hfx_rpc_align(sizeof want_a), want_b, sizeof want_b) == 0;
}

static void valid_run(remote_handle64 h, int32_t id, const char *what)
{
    memset(out_buf, 0xff, sizeof out_buf);
    memset(stats, 0, sizeof stats);
    expect_rc(rpc_run(h, id, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_SUCCESS, what);
    expect(outputs_match(), "outputs bit for bit");
    expect(stats[HFX_RPC_STAT_ITEMS_A] > 0 && stats[HFX_RPC_STAT_ITEMS_B] > 0, "stats count items of both tasks");
}

static void malformed_calls(remote_handle64 h, int32_t id, uint8_t *prog, size_t size)
{
    int32_t other = -1;
    expect_rc(hexfuse_rpc_skel_handle_invoke(h, REMOTE_SCALARS_MAKEX(0, 9, 0, 0, 0, 0), NULL), HFX_AEE_EUNSUPPORTED,
              "unknown method");
    expect_rc(hexfuse_rpc_skel_handle_invoke(h, HFX_RPC_SC_RUN, NULL), HFX_AEE_EBADPARM, "NULL arguments");
    expect_rc(rpc_run(h, id, 0.5f, REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_RUN, 2, 1, 0, 0), IN_BYTES, sizeof stats),
              HFX_AEE_EBADPARM, "run with 1 output buffer");
    expect_rc(rpc_run(h, id, 0.5f, REMOTE_SCALARS_MAKEX(0, HFX_RPC_METHOD_RUN, 2, 2, 1, 0), IN_BYTES, sizeof stats),
              HFX_AEE_EBADPARM, "run with an extra handle");
    expect_rc(rpc_run(h, id, 0.5f, HFX_RPC_SC_RUN, IN_BYTES - 4, sizeof stats), HFX_AEE_EBADPARM, "short inputs");
    expect_rc(rpc_run(h, id, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats - 8), HFX_AEE_EBADPARM, "short stats");
    expect_rc(rpc_run(h, 17, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_EBADPARM, "unloaded id");
    expect_rc(rpc_run(h, -1, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_EBADPARM, "negative id");
    expect_rc(rpc_run(h, HFX_RPC_MAX_PROGRAMS, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_EBADPARM,
              "id past the table");
    expect_rc(rpc_run(h, id, __builtin_nanf(""), HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_EBADPARM,
              "NaN share");
    expect_rc(rpc_run(h + 64, id, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_EBADSTATE, "forged handle");
    expect_rc(rpc_unload(h, 40), HFX_AEE_EBADPARM, "unload of an empty slot");
    /* load: NULL program with a length, short result buffer, corrupt program */
    hfx_rpc_load_out out;
    remote_arg pra[2];
    set_buf(&pra[0], NULL, 100);
    set_buf(&pra[1], &out, sizeof out);
    expect_rc(hexfuse_rpc_skel_handle_invoke(h, HFX_RPC_SC_LOAD, pra), HFX_AEE_EBADPARM, "load: NULL program");
    set_buf(&pra[0], prog, size);
    set_buf(&pra[1], &out, 2);
    expect_rc(hexfuse_rpc_skel_handle_invoke(h, HFX_RPC_SC_LOAD, pra), HFX_AEE_EBADPARM, "load: short result");
    prog[0] ^= 0xff;
    expect_rc(rpc_load(h, prog, size, &other), HFX_AEE_EBADPARM, "load: corrupt program");
    prog[0] ^= 0xff;
    expect_rc(rpc_load(h, prog, size - 1, &other), HFX_AEE_EBADPARM, "load: truncated program");
    /* open: URI length 0, URI without its NUL */
    uint32_t len = 0;
    char uri[4] = {'a', 'b', 'c', 'd'};
    remote_arg po[3];
    set_buf(&po[0], &len, sizeof len);
    set_buf(&po[1], uri, sizeof uri);
    expect_rc(hexfuse_rpc_skel_handle_invoke(0, HFX_RPC_SC_OPEN, po), HFX_AEE_EBADPARM, "open: empty URI");
    len = 4;
    expect_rc(hexfuse_rpc_skel_handle_invoke(0, HFX_RPC_SC_OPEN, po), HFX_AEE_EBADPARM, "open: URI without NUL");
    len = 8;
    expect_rc(hexfuse_rpc_skel_handle_invoke(0, HFX_RPC_SC_OPEN, po), HFX_AEE_EBADPARM, "open: URI past its buffer");
    expect_rc(rpc_close(h + 64), HFX_AEE_EBADSTATE, "close of a forged handle");
}

int main(void)
{
    hx_printf("hexfuse FastRPC skeleton dispatcher, loopback on the coop platform (\"%s\")\n", hfx_plat_name());
    make_data();
    pack_inputs();
    size_t size = 0;
    uint8_t *prog = build_program(&size);

    qt_begin_group(&T);
    remote_handle64 h = 0;
    expect_rc(rpc_open(HFX_RPC_URI_CDSP, &h), HFX_AEE_SUCCESS, "open");
    expect(h != 0, "open returns a handle");
    int32_t id = -1;
    expect_rc(rpc_load(h, prog, size, &id), HFX_AEE_SUCCESS, "load");
    expect(id >= 0 && id < HFX_RPC_MAX_PROGRAMS, "program id in range");
    valid_run(h, id, "run");
    qt_end_group(&T, "open, load, run through the dispatcher");

    qt_begin_group(&T);
    malformed_calls(h, id, prog, size);
    valid_run(h, id, "run after the malformed calls");
    qt_end_group(&T, "malformed calls return errors");

    qt_begin_group(&T);
    expect_rc(rpc_unload(h, id), HFX_AEE_SUCCESS, "unload");
    expect_rc(rpc_unload(h, id), HFX_AEE_EBADPARM, "second unload");
    expect_rc(rpc_run(h, id, 0.5f, HFX_RPC_SC_RUN, IN_BYTES, sizeof stats), HFX_AEE_EBADPARM, "run of an unloaded id");
    expect_rc(rpc_close(h), HFX_AEE_SUCCESS, "close");
    expect_rc(rpc_close(h), HFX_AEE_EBADSTATE, "second close");
    expect_rc(rpc_load(h, prog, size, &id), HFX_AEE_EBADSTATE, "load on a closed handle");
    free(prog);
    char what[96];
    hx_snprintf(what, sizeof what, "coop heap empty after close (%zu bytes in use)", hfx_plat_coop_heap_in_use());
    expect(hfx_plat_coop_heap_in_use() == 0, what);
    qt_end_group(&T, "unload, close, stale handles");
    return qt_result(&T, "test_rpc_skel");
}
