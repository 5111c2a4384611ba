/* core_link_check.c - the core, the op families and the coop platform link
 * and run without pthread (the freestanding Hexagon images check the same
 * sources without the host's libm and BLAS). */
#include <stdio.h>

#include "core.h"
#include "platform.h"
#include "hexfuse/hexfuse.h"
#include "program_builder.h"

int main(void) {
    enum { N = 100000 };
    static float x[N], y[N], out_a[N], out_b[N];
    for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = 2.0f * (float)i;
    hfxb b;
    hfxb_init(&b);
    uint32_t xa = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(N));
    uint32_t ya = hfxb_input(&b, HFX_TASK_A, HFXB_DIMS(N));
    uint32_t sa = hfxb_scratch(&b, HFX_TASK_A, HFXB_DIMS(N));
    uint32_t oa = hfxb_output(&b, HFX_TASK_A, HFXB_DIMS(N));
    hfxb_binary(&b, HFX_TASK_A, HFX_OP_ADD, xa, ya, sa);
    hfxb_op_add(&b, HFX_TASK_A, HFX_OP_COPY, -1, 1, &sa, oa, NULL);
    uint32_t xb = hfxb_input(&b, HFX_TASK_B, HFXB_DIMS(N));
    uint32_t ob = hfxb_output(&b, HFX_TASK_B, HFXB_DIMS(N));
    hfxb_op_add(&b, HFX_TASK_B, HFX_OP_COPY, -1, 1, &xb, ob, NULL);
    size_t n;
    uint8_t *bytes = hfxb_encode(&b, &n);
    hfx_program *p;
    hfx_error err;
    if (hfx_program_parse(bytes, n, &p, &err) != HFX_OK) {
        printf("parse failed: %s\n", err.message);
        return 1;
    }
    hfx_pool *pool;
    if (hfx_pool_create(NULL, &pool) != HFX_OK) return 1;
    const void *in[3] = {x, y, x};
    void *out[2] = {out_a, out_b};
    hfx_run_result res;
    if (hfx_run(pool, p, in, 3, out, 2, NULL, NULL, &res) != HFX_OK) return 1;
    for (int i = 0; i < N; i++) {
        if (out_a[i] != 3.0f * (float)i || out_b[i] != (float)i) {
            printf("mismatch at %d\n", i);
            return 1;
        }
    }
    hfx_pool_destroy(pool);
    hfx_program_free(p);
    free(bytes);
    hfxb_free(&b);
    printf("core link check: ok (platform %s, no pthread)\n", hfx_plat_name());
    return 0;
}
