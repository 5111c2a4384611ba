/*
 * quant.c - the v2 quantization section: per-tensor or per-channel scale and zero point of
 * integer tensors. Validated here; integer ops will read it (issue 12).
 */
#include "core.h"
#include "platform.h"

#define QFAIL(st, at, ...)                          \
    do {                                            \
        hfx_error_set(err, (st), (at), __VA_ARGS__); \
        return (st);                                \
    } while (0)

static bool quantizable(uint32_t dtype) {
    return dtype == HFX_DTYPE_U8 || dtype == HFX_DTYPE_I8 || dtype == HFX_DTYPE_U16 || dtype == HFX_DTYPE_I16 ||
           dtype == HFX_DTYPE_I32;
}

/* a constant parameter tensor (scale or zero point) of `dtype` with `numel` elements */
static hfx_status check_param_tensor(const hfx_program *p, uint32_t e, const char *what, uint32_t id, uint32_t dtype,
                                     uint64_t numel, size_t at, hfx_error *err) {
    if (id >= p->n_tensors) QFAIL(HFX_ERR_TENSOR, at, "quant entry %u: %s tensor %u out of range", e, what, id);
    const hfx_tensor *T = &p->tensors[id];
    if (T->role != HFX_ROLE_CONSTANT)
        QFAIL(HFX_ERR_TENSOR, at, "quant entry %u: %s tensor %u is not a constant", e, what, id);
    if (T->dtype != dtype)
        QFAIL(HFX_ERR_DTYPE, at, "quant entry %u: %s tensor %u has dtype %u, expected %u", e, what, id, T->dtype,
              dtype);
    if (T->numel != numel)
        QFAIL(HFX_ERR_TENSOR, at, "quant entry %u: %s tensor %u has %U elements, expected %U", e, what, id, T->numel,
              numel);
    return HFX_OK;
}

static hfx_status check_entry(const hfx_program *p, uint32_t e, size_t at, uint8_t *seen, hfx_error *err) {
    const uint8_t *r = p->blob + at;
    uint32_t id = hfx_rd_u32(r + HFX_QREC_TENSOR), scale = hfx_rd_u32(r + HFX_QREC_SCALE);
    uint32_t zp = hfx_rd_u32(r + HFX_QREC_ZERO_POINT);
    int32_t axis = (int32_t)hfx_rd_u32(r + HFX_QREC_AXIS);
    if (id >= p->n_tensors) QFAIL(HFX_ERR_TENSOR, at + HFX_QREC_TENSOR, "quant entry %u: tensor %u out of range", e, id);
    const hfx_tensor *T = &p->tensors[id];
    if (!quantizable(T->dtype))
        QFAIL(HFX_ERR_DTYPE, at + HFX_QREC_TENSOR, "quant entry %u: tensor %u has dtype %u, not an integer type", e, id,
              T->dtype);
    if (seen[id]) QFAIL(HFX_ERR_TENSOR, at + HFX_QREC_TENSOR, "quant entry %u: tensor %u quantized twice", e, id);
    seen[id] = 1;
    if (axis < -1 || axis >= (int32_t)T->rank)
        QFAIL(HFX_ERR_TENSOR, at + HFX_QREC_AXIS, "quant entry %u: axis %d, expected -1 or below rank %u", e, (int)axis,
              T->rank);
    uint64_t numel = axis < 0 ? 1 : T->dims[axis];
    hfx_status st = check_param_tensor(p, e, "scale", scale, HFX_DTYPE_F32, numel, at + HFX_QREC_SCALE, err);
    if (!st && zp != HFX_NO_TENSOR)
        st = check_param_tensor(p, e, "zero point", zp, T->dtype, numel, at + HFX_QREC_ZERO_POINT, err);
    return st;
}

hfx_status hfx_quant_check(const hfx_program *p, hfx_error *err) {
    size_t off = p->quant_off;
    if (p->quant_bytes < 4) QFAIL(HFX_ERR_HEADER, off, "quantization section of %u bytes has no count", p->quant_bytes);
    uint32_t n = hfx_rd_u32(p->blob + off + HFX_QNT_N_ENTRIES);
    if ((uint64_t)n * HFX_QREC_BYTES + HFX_QNT_ENTRIES != p->quant_bytes)
        QFAIL(HFX_ERR_HEADER, off + HFX_QNT_N_ENTRIES, "quantization section: %u entries need %U bytes, it has %u", n,
              (uint64_t)n * HFX_QREC_BYTES + HFX_QNT_ENTRIES, p->quant_bytes);
    uint8_t *seen = hfx_plat_alloc(p->n_tensors, 64);
    if (!seen) QFAIL(HFX_ERR_NOMEM, 0, "out of memory");
    memset(seen, 0, p->n_tensors);
    hfx_status st = HFX_OK;
    for (uint32_t e = 0; e < n && !st; e++) st = check_entry(p, e, off + HFX_QNT_ENTRIES + (size_t)e * HFX_QREC_BYTES, seen, err);
    hfx_plat_free(seen);
    return st;
}
