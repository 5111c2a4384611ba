/*
 * shapes.c - the v2 shape section: the expression evaluator (hexfuse_onnx/shape_expr.run is
 * its reference), the parser's checks of the section, and hfx_program_specialize.
 * Freestanding like the rest of the core.
 */
#include "core.h"
#include "platform.h"

#define DIM_MAX 0x7fffffff

/* ---- the evaluator ------------------------------------------------------------------- */

/* floor / ceil of a / b, b != 0; false when the result leaves int64 (INT64_MIN / -1) */
static bool div_rounded(int64_t a, int64_t b, bool ceil, int64_t *q) {
    if (b == -1 && a == INT64_MIN) return false;
    int64_t t = a / b, r = a % b;
    bool negative = (r < 0) != (b < 0);
    if (r != 0 && !ceil && negative) t--;
    if (r != 0 && ceil && !negative) t++;
    *q = t;
    return true;
}

/* a - b floor(a / b), b != 0: always within int64 */
static int64_t floor_mod(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

static hfx_expr_fault apply(uint32_t op, int64_t a, int64_t b, int64_t *out) {
    bool ok = true;
    if ((op == HFX_EXPR_FLOORDIV || op == HFX_EXPR_CEILDIV || op == HFX_EXPR_MOD) && b == 0) return HFX_EXPR_DIV_ZERO;
    switch (op) {
    case HFX_EXPR_ADD: ok = !__builtin_add_overflow(a, b, out); break;
    case HFX_EXPR_SUB: ok = !__builtin_sub_overflow(a, b, out); break;
    case HFX_EXPR_MUL: ok = !__builtin_mul_overflow(a, b, out); break;
    case HFX_EXPR_FLOORDIV: ok = div_rounded(a, b, false, out); break;
    case HFX_EXPR_CEILDIV: ok = div_rounded(a, b, true, out); break;
    case HFX_EXPR_MOD: *out = floor_mod(a, b); break;
    case HFX_EXPR_MIN: *out = a < b ? a : b; break;
    default: *out = a > b ? a : b; break; /* HFX_EXPR_MAX: the caller checked the range */
    }
    return ok ? HFX_EXPR_OK : HFX_EXPR_INT_OVERFLOW;
}

static int64_t i32_word(uint32_t w) { return (w & 0x80000000u) ? (int64_t)w - ((int64_t)1 << 32) : (int64_t)w; }

hfx_expr_fault hfx_expr_eval(const uint32_t *words, uint32_t n_words, const int64_t *symbols, uint32_t n_symbols,
                             int64_t *value) {
    int64_t stack[HFX_EXPR_STACK];
    uint32_t sp = 0;
    for (uint32_t i = 0; i < n_words;) {
        uint32_t op = words[i] & 0xffu, arg = words[i] >> 8;
        i++;
        if (op == HFX_EXPR_CONST || op == HFX_EXPR_SYM) {
            if (op == HFX_EXPR_CONST && i >= n_words) return HFX_EXPR_NO_CONST_VALUE;
            if (op == HFX_EXPR_SYM && arg >= n_symbols) return HFX_EXPR_BAD_SYMBOL;
            if (sp == HFX_EXPR_STACK) return HFX_EXPR_STACK_FULL;
            stack[sp++] = op == HFX_EXPR_CONST ? i32_word(words[i++]) : symbols[arg];
            continue;
        }
        if (op < HFX_EXPR_ADD || op > HFX_EXPR_MAX) return HFX_EXPR_BAD_CODE;
        if (sp < 2) return HFX_EXPR_UNDERFLOW;
        hfx_expr_fault f = apply(op, stack[sp - 2], stack[sp - 1], &stack[sp - 2]);
        if (f) return f;
        sp--;
    }
    if (sp != 1) return HFX_EXPR_LEFT;
    *value = stack[0];
    return HFX_EXPR_OK;
}

const char *hfx_expr_fault_text(hfx_expr_fault f) {
    switch (f) {
    case HFX_EXPR_OK: return "ok";
    case HFX_EXPR_NO_CONST_VALUE: return "CONST without its value";
    case HFX_EXPR_BAD_SYMBOL: return "symbol index out of range";
    case HFX_EXPR_BAD_CODE: return "unknown instruction";
    case HFX_EXPR_UNDERFLOW: return "stack underflow";
    case HFX_EXPR_STACK_FULL: return "stack overflow";
    case HFX_EXPR_DIV_ZERO: return "division by zero";
    case HFX_EXPR_INT_OVERFLOW: return "int64 overflow";
    case HFX_EXPR_LEFT: return "not exactly one value left";
    }
    return "?";
}

/* ---- reading the section ------------------------------------------------------------- */

typedef struct section {
    const hfx_program *p;
    const uint8_t *b; /* section start */
    size_t off;       /* its offset in the program (error offsets) */
    uint32_t size;
    uint32_t n_symbols, n_patches;
    uint32_t sym_io[HFX_MAX_SYMBOLS], sym_axis[HFX_MAX_SYMBOLS];
    uint32_t cursor; /* next patch record, from the section start */
} section;

typedef struct patch {
    uint32_t index, at; /* patch number; record offset from the section start */
    uint32_t target, n_words, id, slot;
    uint32_t code[HFX_MAX_EXPR_WORDS];
} patch;

#define SFAIL(at, ...)                                            \
    do {                                                          \
        hfx_error_set(err, HFX_ERR_SHAPES, (at), __VA_ARGS__);    \
        return HFX_ERR_SHAPES;                                    \
    } while (0)

static const hfx_tensor *input_tensor(const hfx_program *p, uint32_t io) {
    return &p->tensors[p->input_tensor[io]];
}

static hfx_status read_symbol(section *s, uint32_t k, hfx_error *err) {
    uint32_t at = HFX_SHP_SYMBOLS + k * HFX_SYM_RECORD_BYTES;
    uint32_t io = hfx_rd_u32(s->b + at + HFX_SYM_IO_INDEX), axis = hfx_rd_u32(s->b + at + HFX_SYM_AXIS);
    const hfx_program *p = s->p;
    if (io >= p->n_inputs[0] + p->n_inputs[1])
        SFAIL(s->off + at + HFX_SYM_IO_INDEX, "shape symbol %u: io index %u is not a node input", k, io);
    if (axis >= input_tensor(p, io)->rank)
        SFAIL(s->off + at + HFX_SYM_AXIS, "shape symbol %u: axis %u not below input %u's rank %u", k, axis, io,
              input_tensor(p, io)->rank);
    for (uint32_t j = 0; j < k; j++)
        if (s->sym_io[j] == io && s->sym_axis[j] == axis)
            SFAIL(s->off + at, "shape symbol %u names input %u axis %u, as symbol %u does", k, io, axis, j);
    s->sym_io[k] = io;
    s->sym_axis[k] = axis;
    return HFX_OK;
}

/* counts and symbols; s->cursor at the first patch */
static hfx_status open_section(const hfx_program *p, section *s, hfx_error *err) {
    memset(s, 0, sizeof *s);
    s->p = p;
    s->b = p->blob + p->shapes_off;
    s->off = p->shapes_off;
    s->size = p->shapes_bytes;
    if (s->size < 4) SFAIL(s->off, "shape section of %u bytes has no symbol count", s->size);
    s->n_symbols = hfx_rd_u32(s->b + HFX_SHP_N_SYMBOLS);
    if (s->n_symbols < 1 || s->n_symbols > HFX_MAX_SYMBOLS)
        SFAIL(s->off + HFX_SHP_N_SYMBOLS, "shape section: %u symbols, expected 1 .. %u", s->n_symbols,
              HFX_MAX_SYMBOLS);
    uint32_t count_at = HFX_SHP_SYMBOLS + s->n_symbols * HFX_SYM_RECORD_BYTES;
    if (count_at + 4 > s->size) SFAIL(s->off + s->size, "shape section ends inside its symbol table");
    for (uint32_t k = 0; k < s->n_symbols; k++) {
        hfx_status st = read_symbol(s, k, err);
        if (st) return st;
    }
    s->n_patches = hfx_rd_u32(s->b + count_at);
    if (s->n_patches > HFX_MAX_PATCHES)
        SFAIL(s->off + count_at, "shape section: %u patches, at most %u", s->n_patches, HFX_MAX_PATCHES);
    s->cursor = count_at + 4;
    return HFX_OK;
}

/* the next patch record's fields and code (bounds and counts checked) */
static hfx_status next_patch(section *s, uint32_t index, patch *q, hfx_error *err) {
    q->index = index;
    q->at = s->cursor;
    if (q->at + HFX_PATCH_HEAD_BYTES > s->size) SFAIL(s->off + s->size, "shape section ends inside patch %u", index);
    const uint8_t *r = s->b + q->at;
    q->target = r[HFX_PATCH_TARGET];
    q->n_words = hfx_rd_u16(r + HFX_PATCH_N_WORDS);
    q->id = hfx_rd_u32(r + HFX_PATCH_ID);
    q->slot = hfx_rd_u32(r + HFX_PATCH_SLOT);
    if (q->target != HFX_PATCH_TENSOR_DIM && q->target != HFX_PATCH_OP_PARAM)
        SFAIL(s->off + q->at + HFX_PATCH_TARGET, "shape patch %u: unknown target %u", index, q->target);
    if (r[HFX_PATCH_RESERVED] != 0)
        SFAIL(s->off + q->at + HFX_PATCH_RESERVED, "shape patch %u: reserved byte must be 0", index);
    if (q->n_words < 1 || q->n_words > HFX_MAX_EXPR_WORDS)
        SFAIL(s->off + q->at + HFX_PATCH_N_WORDS, "shape patch %u: %u code words, expected 1 .. %u", index,
              q->n_words, HFX_MAX_EXPR_WORDS);
    uint32_t end = q->at + HFX_PATCH_HEAD_BYTES + 4 * q->n_words;
    if (end > s->size) SFAIL(s->off + s->size, "shape section ends inside patch %u's code", index);
    for (uint32_t i = 0; i < q->n_words; i++) q->code[i] = hfx_rd_u32(r + HFX_PATCH_CODE + 4 * i);
    s->cursor = end;
    return HFX_OK;
}

/* byte offset (in the program) of the field a patch targets */
static size_t target_offset(const hfx_program *p, const patch *q) {
    if (q->target == HFX_PATCH_TENSOR_DIM)
        return hfx_rd_u32(p->blob + HFX_HDR_TENSORS_OFFSET) + (size_t)q->id * HFX_TENSOR_RECORD_BYTES +
               HFX_TREC_DIMS + 4u * q->slot;
    return hfx_rd_u32(p->blob + HFX_HDR_OPS_OFFSET) + (size_t)q->id * HFX_OP_RECORD_BYTES + HFX_OREC_PARAMS +
           4u * q->slot;
}

/* "tensor 3 dim 1" / "op 2 param 4" */
static const char *target_kind(const patch *q) { return q->target == HFX_PATCH_TENSOR_DIM ? "tensor" : "op"; }
static const char *slot_kind(const patch *q) { return q->target == HFX_PATCH_TENSOR_DIM ? "dim" : "param"; }

/* ---- the parser's checks ------------------------------------------------------------- */

/* what the parser checks beyond the record: the target exists, is patched once, and an input
 * dim is patched by the lone SYM of its own symbol */
static hfx_status check_target(const section *s, const patch *q, uint8_t *dim_seen, uint32_t *param_seen,
                               hfx_error *err) {
    const hfx_program *p = s->p;
    size_t at = s->off + q->at;
    if (q->target == HFX_PATCH_OP_PARAM) {
        if (q->id >= p->n_ops) SFAIL(at + HFX_PATCH_ID, "shape patch %u: op %u out of range", q->index, q->id);
        if (q->slot >= HFX_OP_PARAMS)
            SFAIL(at + HFX_PATCH_SLOT, "shape patch %u: param slot %u >= %u", q->index, q->slot, HFX_OP_PARAMS);
        if (param_seen[q->id] & (1u << q->slot))
            SFAIL(at, "shape patch %u: op %u param %u patched twice", q->index, q->id, q->slot);
        param_seen[q->id] |= 1u << q->slot;
        return HFX_OK;
    }
    if (q->id >= p->n_tensors) SFAIL(at + HFX_PATCH_ID, "shape patch %u: tensor %u out of range", q->index, q->id);
    const hfx_tensor *T = &p->tensors[q->id];
    if (q->slot >= T->rank)
        SFAIL(at + HFX_PATCH_SLOT, "shape patch %u: axis %u not below tensor %u's rank %u", q->index, q->slot, q->id,
              T->rank);
    if (T->role == HFX_ROLE_CONSTANT)
        SFAIL(at + HFX_PATCH_ID, "shape patch %u: tensor %u is a constant, whose dims are fixed", q->index, q->id);
    if (dim_seen[q->id] & (1u << q->slot))
        SFAIL(at, "shape patch %u: tensor %u dim %u patched twice", q->index, q->id, q->slot);
    dim_seen[q->id] |= (uint8_t)(1u << q->slot);
    if (T->role != HFX_ROLE_INPUT) return HFX_OK;
    uint32_t k = q->code[0] >> 8;
    bool own = q->n_words == 1 && (q->code[0] & 0xffu) == HFX_EXPR_SYM && k < s->n_symbols &&
               s->sym_io[k] == T->io_index && s->sym_axis[k] == q->slot;
    if (!own)
        SFAIL(at + HFX_PATCH_CODE, "shape patch %u: input %u axis %u must be patched by the lone SYM of its symbol",
              q->index, T->io_index, q->slot);
    return HFX_OK;
}

/* the value the template stores in the patch's target */
static int64_t stored_value(const hfx_program *p, const patch *q) {
    uint32_t raw = hfx_rd_u32(p->blob + target_offset(p, q));
    return q->target == HFX_PATCH_TENSOR_DIM ? (int64_t)raw : i32_word(raw);
}

static hfx_status check_patch(const section *s, const patch *q, const int64_t *sym, hfx_error *err) {
    int64_t v = 0;
    hfx_expr_fault f = hfx_expr_eval(q->code, q->n_words, sym, s->n_symbols, &v);
    size_t at = s->off + q->at + HFX_PATCH_CODE;
    if (f)
        SFAIL(at, "shape patch %u (%s %u %s %u): %s", q->index, target_kind(q), q->id, slot_kind(q), q->slot,
              hfx_expr_fault_text(f));
    int64_t want = stored_value(s->p, q);
    if (v != want)
        SFAIL(at, "shape patch %u (%s %u %s %u): gives %D at the representative shapes, the program holds %D",
              q->index, target_kind(q), q->id, slot_kind(q), q->slot, v, want);
    return HFX_OK;
}

static hfx_status check_patches(section *s, const int64_t *sym, uint8_t *dim_seen, uint32_t *param_seen,
                                hfx_error *err) {
    patch q;
    for (uint32_t i = 0; i < s->n_patches; i++) {
        hfx_status st = next_patch(s, i, &q, err);
        if (!st) st = check_target(s, &q, dim_seen, param_seen, err);
        if (!st) st = check_patch(s, &q, sym, err);
        if (st) return st;
    }
    if (s->cursor != s->size)
        SFAIL(s->off + s->cursor, "shape section: %u bytes after the last patch", s->size - s->cursor);
    return HFX_OK;
}

hfx_status hfx_shapes_check(hfx_program *p, hfx_error *err) {
    section s;
    hfx_status st = open_section(p, &s, err);
    if (st) return st;
    int64_t sym[HFX_MAX_SYMBOLS];
    for (uint32_t k = 0; k < s.n_symbols; k++) sym[k] = input_tensor(p, s.sym_io[k])->dims[s.sym_axis[k]];
    size_t dim_bytes = p->n_tensors, param_bytes = (size_t)p->n_ops * sizeof(uint32_t);
    uint32_t *param_seen = hfx_plat_alloc(param_bytes + dim_bytes, 64);
    if (!param_seen) {
        hfx_error_set(err, HFX_ERR_NOMEM, 0, "out of memory");
        return HFX_ERR_NOMEM;
    }
    memset(param_seen, 0, param_bytes + dim_bytes);
    st = check_patches(&s, sym, (uint8_t *)param_seen + param_bytes, param_seen, err);
    hfx_plat_free(param_seen);
    if (!st) p->n_symbols = s.n_symbols;
    return st;
}

/* ---- specialization -------------------------------------------------------------------- */

/* patched[io] bit a: input io's axis a is patched (so follows its symbol) */
static void patched_inputs(const section *s, uint8_t *patched) {
    const hfx_program *p = s->p;
    section walk = *s;
    patch q;
    hfx_error ignored; /* the section was validated by the parse */
    for (uint32_t i = 0; i < s->n_patches && !next_patch(&walk, i, &q, &ignored); i++)
        if (q.target == HFX_PATCH_TENSOR_DIM && p->tensors[q.id].role == HFX_ROLE_INPUT)
            patched[p->tensors[q.id].io_index] |= (uint8_t)(1u << q.slot);
}

static hfx_status check_input(const hfx_program *p, uint32_t io, const int64_t *dims, uint32_t rank, uint8_t patched,
                              hfx_error *err) {
    const hfx_tensor *T = input_tensor(p, io);
    size_t at = hfx_rd_u32(p->blob + HFX_HDR_TENSORS_OFFSET) + (size_t)p->input_tensor[io] * HFX_TENSOR_RECORD_BYTES;
    if (rank != T->rank)
        SFAIL(at + HFX_TREC_RANK, "input %u: rank %u but the program's input has rank %u", io, rank, T->rank);
    for (uint32_t a = 0; a < T->rank; a++) {
        int64_t d = dims[a];
        if (d < 0 || d > DIM_MAX)
            SFAIL(at + HFX_TREC_DIMS + 4 * a, "input %u axis %u: %D is not a dim (0 .. 2147483647)", io, a, d);
        if (!(patched & (1u << a)) && d != (int64_t)T->dims[a])
            SFAIL(at + HFX_TREC_DIMS + 4 * a, "input %u axis %u: %D but the program's static dim is %u", io, a, d,
                  T->dims[a]);
    }
    return HFX_OK;
}

/* rank and range of every actual dim, and the static (unpatched) input dims */
static hfx_status check_inputs(const section *s, const int64_t *const *dims, const uint32_t *ranks, hfx_error *err) {
    const hfx_program *p = s->p;
    uint32_t n = p->n_inputs[0] + p->n_inputs[1];
    uint8_t *patched = hfx_plat_alloc(n ? n : 1, 64);
    if (!patched) {
        hfx_error_set(err, HFX_ERR_NOMEM, 0, "out of memory");
        return HFX_ERR_NOMEM;
    }
    memset(patched, 0, n ? n : 1);
    if (s->n_symbols) patched_inputs(s, patched);
    hfx_status st = HFX_OK;
    for (uint32_t io = 0; io < n && !st; io++) st = check_input(p, io, dims[io], ranks[io], patched[io], err);
    hfx_plat_free(patched);
    return st;
}

/* evaluates every patch at `sym` and stores the value into `out` */
static hfx_status write_patches(section *s, const int64_t *sym, uint8_t *out, hfx_error *err) {
    patch q;
    for (uint32_t i = 0; i < s->n_patches; i++) {
        hfx_status st = next_patch(s, i, &q, err);
        if (st) return st;
        int64_t v = 0;
        hfx_expr_fault f = hfx_expr_eval(q.code, q.n_words, sym, s->n_symbols, &v);
        size_t at = s->off + q.at + HFX_PATCH_CODE;
        if (f)
            SFAIL(at, "shape patch %u (%s %u %s %u): %s at these input shapes", i, target_kind(&q), q.id,
                  slot_kind(&q), q.slot, hfx_expr_fault_text(f));
        bool dim = q.target == HFX_PATCH_TENSOR_DIM;
        if (dim ? (v < 0 || v > DIM_MAX) : (v < INT32_MIN || v > INT32_MAX))
            SFAIL(at, "shape patch %u (%s %u %s %u): %D at these input shapes is out of the field's range", i,
                  target_kind(&q), q.id, slot_kind(&q), q.slot, v);
        hfx_wr_u32(out + target_offset(s->p, &q), (uint32_t)v);
    }
    return HFX_OK;
}

static hfx_status specialize_parsed(const hfx_program *p, const int64_t *const *dims, const uint32_t *ranks,
                                    uint8_t *out, hfx_error *err) {
    section s;
    memset(&s, 0, sizeof s);
    s.p = p;
    hfx_status st = p->shapes_bytes ? open_section(p, &s, err) : HFX_OK;
    if (!st) st = check_inputs(&s, dims, ranks, err);
    if (st || !p->shapes_bytes) return st;
    int64_t sym[HFX_MAX_SYMBOLS];
    for (uint32_t k = 0; k < s.n_symbols; k++) sym[k] = dims[s.sym_io[k]][s.sym_axis[k]];
    st = write_patches(&s, sym, out, err);
    uint32_t flags = hfx_rd_u32(out + HFX_HDR_FLAGS);
    if (!st && (flags & HFX_PROGRAM_FLAG_CRC32)) {
        size_t n = p->blob_size - HFX_PROGRAM_CRC_BYTES;
        hfx_wr_u32(out + n, hfx_crc32(out, n));
    }
    return st;
}

hfx_status hfx_program_specialize(const void *bytes, size_t size, const int64_t *const *input_dims,
                                  const uint32_t *input_ranks, uint32_t n_inputs, void *out, hfx_error *err) {
    hfx_error local;
    if (!err) err = &local;
    memset(err, 0, sizeof *err);
    if (!bytes || !out || (n_inputs && (!input_dims || !input_ranks))) {
        hfx_error_set(err, HFX_ERR_ARG, 0, "null argument");
        return HFX_ERR_ARG;
    }
    for (uint32_t i = 0; i < n_inputs; i++)
        if (!input_dims[i] && input_ranks[i]) {
            hfx_error_set(err, HFX_ERR_ARG, 0, "input %u: null dims", i);
            return HFX_ERR_ARG;
        }
    hfx_program *p = NULL;
    hfx_status st = hfx_program_parse(bytes, size, &p, err);
    if (st) return st;
    if (n_inputs != p->n_inputs[0] + p->n_inputs[1]) {
        hfx_error_set(err, HFX_ERR_ARG, 0, "%u input shapes given, the program has %u inputs", n_inputs,
                      p->n_inputs[0] + p->n_inputs[1]);
        hfx_program_free(p);
        return HFX_ERR_ARG;
    }
    if (out != bytes) memcpy(out, bytes, size);
    st = specialize_parsed(p, input_dims, input_ranks, out, err);
    hfx_program_free(p);
    return st;
}
