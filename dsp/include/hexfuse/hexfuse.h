/*
 * hexfuse.h - public API of the persistent-worker FusedHexPair kernel.
 *
 *   hfx_program_parse   validate a task program (two tasks A and B)
 *   hfx_pool_create     start the persistent workers (once, reused)
 *   hfx_run             run both tasks fused on the pool (thread safe)
 *   hfx_runstate_*      partial runs: run k ops / some items, resume later
 *   hfx_trace_*         per-engine busy time and overlap from a trace
 *
 * All functions return an hfx_status (0 = OK). See dsp/README.md.
 */
#ifndef HEXFUSE_HEXFUSE_H
#define HEXFUSE_HEXFUSE_H

#include <stddef.h>
#include <stdint.h>

#include "hexfuse/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hfx_status {
    HFX_OK = 0,
    HFX_ERR_ARG = 1,        /* bad argument to an API function */
    HFX_ERR_NOMEM = 2,      /* allocation failed */
    HFX_ERR_TRUNCATED = 3,  /* program shorter than its header/tables say */
    HFX_ERR_MAGIC = 4,      /* not a task program */
    HFX_ERR_VERSION = 5,    /* unsupported format version */
    HFX_ERR_HEADER = 6,     /* bad header field (sizes, offsets, counts, flags) */
    HFX_ERR_TENSOR = 7,     /* bad tensor record (role, task, rank, dims, io index) */
    HFX_ERR_DTYPE = 8,      /* unknown or unsupported dtype */
    HFX_ERR_SIZE = 9,       /* byte size overflow or over the limit */
    HFX_ERR_OP = 10,        /* bad op record (opcode, engine, task, ids, counts) */
    HFX_ERR_PARAM = 11,     /* bad op param */
    HFX_ERR_SHAPE = 12,     /* op shapes inconsistent */
    HFX_ERR_GRAPH = 13,     /* dataflow: unwritten scratch read, double write, ... */
    HFX_ERR_BUDGET = 14,    /* a task's scratch does not fit the on-chip budget */
    HFX_ERR_PLATFORM = 15,  /* thread creation etc. failed */
    HFX_ERR_STATE = 16,     /* run state does not belong to this program/pool */
    HFX_ERR_SHAPES = 17,    /* v2 shape section: bad record or expression, or a shape it cannot specialize to */
    HFX_ERR_QUANT = 18      /* an integer op's quantization operands disagree with the v2 quantization section */
} hfx_status;

/* Name of a status code ("HFX_ERR_SHAPE"). */
const char *hfx_status_name(hfx_status s);

/* Parse error details. */
typedef struct hfx_error {
    hfx_status status;
    uint32_t byte_offset; /* offset of the offending field in the program */
    char message[160];    /* NUL terminated */
} hfx_error;

/* ---- program ------------------------------------------------------------------ */

typedef struct hfx_program hfx_program;

/* Validates `bytes` completely and builds the executable program (the bytes
 * are copied; the caller may free them). On error returns the status, sets
 * *out = NULL and fills *err (err may be NULL). Never reads out of bounds. */
hfx_status hfx_program_parse(const void *bytes, size_t size, hfx_program **out, hfx_error *err);
void hfx_program_free(hfx_program *p);

/* From now on every op of the program sums as the Hexagon builds do: a float Conv/Gemm/MatMul in their
 * sgemm's order instead of the host BLAS's (or of ORT's MLAS where a QUANTIZE_LINEAR reads the result),
 * every other op on their code path too: bit for bit what the Hexagon build computes (`emulate`'s host
 * reference), at several times the BLAS's time. */
void hfx_program_sum_in_hexagon_order(hfx_program *p);

typedef struct hfx_tensor_info {
    uint8_t dtype, role, task, rank;
    uint32_t io_index;
    uint32_t dims[HFX_MAX_RANK];
    uint64_t numel;
    uint64_t bytes;
} hfx_tensor_info;

typedef struct hfx_op_info {
    uint16_t opcode;
    uint8_t engine, task;
    uint32_t n_inputs, n_outputs;
    uint32_t inputs[HFX_MAX_OP_INPUTS];
    uint32_t outputs[HFX_MAX_OP_OUTPUTS];
    uint32_t task_index; /* index of the op within its task */
    uint32_t n_items;    /* work items the op is cut into */
} hfx_op_info;

uint32_t hfx_program_num_tensors(const hfx_program *p);
uint32_t hfx_program_num_ops(const hfx_program *p);
/* Per task (HFX_TASK_A / HFX_TASK_B). */
uint32_t hfx_program_num_task_ops(const hfx_program *p, int task);
uint32_t hfx_program_num_inputs(const hfx_program *p, int task);
uint32_t hfx_program_num_outputs(const hfx_program *p, int task);
uint64_t hfx_program_num_items(const hfx_program *p, int task);
/* Arena bytes the task's scratch needs (after lifetime-based reuse). */
size_t hfx_program_scratch_bytes(const hfx_program *p, int task);
/* Work-space bytes one worker needs (e.g. im2col of a conv). */
size_t hfx_program_workspace_bytes(const hfx_program *p);
hfx_status hfx_program_tensor_info(const hfx_program *p, uint32_t tensor, hfx_tensor_info *out);
/* io_index counts over both tasks: A's inputs first, then B's. */
hfx_status hfx_program_input_info(const hfx_program *p, uint32_t io_index, hfx_tensor_info *out);
hfx_status hfx_program_output_info(const hfx_program *p, uint32_t io_index, hfx_tensor_info *out);
hfx_status hfx_program_op_info(const hfx_program *p, uint32_t op, hfx_op_info *out);
/* Format version of the parsed bytes (1 or 2). */
uint32_t hfx_program_version(const hfx_program *p);
/* Symbols of the v2 shape section (0: none; the program then runs at its own shapes only). */
uint32_t hfx_program_num_symbols(const hfx_program *p);

/* Given the actual dims of every node input (task A's then B's, as in hfx_run), writes into
 * `out` (same size as the program) the program specialized to those shapes: symbols bound from
 * the inputs' dims, every patch of the shape section evaluated and stored, CRC recomputed. The
 * result is again a valid v2 program with the same shape section (it can be specialized again).
 * The program is parsed first (its own errors are returned as hfx_program_parse gives them).
 * Errors (HFX_ERR_SHAPES, message naming the input and axis): an input rank that differs, a
 * static dim that differs, a dim out of 1 .. 2^31-1, an expression that fails or gives a value
 * out of its field's range (dims 1 .. 2^31-1; params i32). A v1 program or one without a shape
 * section specializes only to its own shapes. n_inputs must be the program's input count
 * (HFX_ERR_ARG). `out` may be `bytes` (in place) but must not overlap it otherwise; on an error
 * its contents are unspecified. Parse the result with hfx_program_parse: it validates every op at
 * the new shapes. */
hfx_status hfx_program_specialize(const void *bytes, size_t size, const int64_t *const *input_dims,
                                  const uint32_t *input_ranks, uint32_t n_inputs, void *out, hfx_error *err);

/* ---- pool ------------------------------------------------------------------- */

typedef struct hfx_pool hfx_pool;

#define HFX_POOL_MATRIX_TAKES_VECTOR 1u /* idle matrix worker runs vector/copy items (default on) */
#define HFX_POOL_VECTOR_TAKES_MATRIX 2u /* idle vector workers run matrix items (host only; default off) */
/* Bind worker i to the i-th CPU the process may use (host: only when there are no more workers
 * than CPUs; elsewhere ignored). Without it a woken worker can wait in the run queue of a busy
 * CPU while another CPU idles, and one worker ends up running the whole job. */
#define HFX_POOL_PIN_WORKERS 4u

typedef struct hfx_pool_config {
    uint32_t n_vector_workers; /* default: hardware threads - 1 (at least 1) */
    uint32_t n_matrix_workers; /* 0 or 1; default 1 */
    size_t arena_bytes;        /* on-chip budget arena; default 8 MiB */
    uint32_t flags;            /* HFX_POOL_*; default HFX_POOL_MATRIX_TAKES_VECTOR */
} hfx_pool_config;

void hfx_pool_config_init(hfx_pool_config *cfg);
hfx_status hfx_pool_create(const hfx_pool_config *cfg, hfx_pool **out);
/* Stops the workers. No hfx_run may be in progress. NULL ok. */
void hfx_pool_destroy(hfx_pool *pool);
uint32_t hfx_pool_num_workers(const hfx_pool *pool);
/* The flags in effect: HFX_POOL_PIN_WORKERS is cleared when the platform could not pin. */
uint32_t hfx_pool_flags(const hfx_pool *pool);
/* Worker ids: the matrix worker (if any) is 0; vector workers follow. */
int hfx_pool_worker_engine(const hfx_pool *pool, uint32_t worker); /* HFX_ENGINE_MATRIX/VECTOR */

/* ---- trace -------------------------------------------------------------------- */

typedef struct hfx_trace_event {
    uint16_t worker;
    uint8_t engine; /* enum hfx_engine of the item */
    uint8_t task;
    uint32_t op;   /* program op index */
    uint32_t item; /* item index within the op */
    uint32_t reserved;
    uint64_t start_ns, end_ns;
} hfx_trace_event;

typedef struct hfx_trace_summary {
    uint64_t wall_ns;                      /* first start .. last end */
    uint64_t busy_ns[HFX_NUM_ENGINES];     /* union of intervals per engine class */
    uint64_t task_busy_ns[HFX_NUM_TASKS];  /* union of intervals per task */
    uint64_t work_ns[HFX_NUM_ENGINES];     /* sum of item durations per class */
    uint64_t matrix_vector_overlap_ns;     /* MATRIX busy while VECTOR or COPY busy */
    uint64_t task_overlap_ns;              /* both tasks had an item running */
} hfx_trace_summary;

/* Union length of the intervals whose engine bit (1 << engine) is in mask. */
uint64_t hfx_trace_busy_ns(const hfx_trace_event *ev, size_t n, uint32_t engine_mask);
/* Time during which an engine of mask_a and an engine of mask_b were both busy. */
uint64_t hfx_trace_overlap_ns(const hfx_trace_event *ev, size_t n, uint32_t mask_a, uint32_t mask_b);
hfx_status hfx_trace_summarize(const hfx_trace_event *ev, size_t n, hfx_trace_summary *out);

/* ---- run ---------------------------------------------------------------------- */

#define HFX_ALL_OPS 0xffffffffu

#define HFX_RUN_FORCE_SERIAL 1u /* run task A then task B even if both fit */
#define HFX_RUN_CALLER_ONLY 2u  /* only worker 0 (the hfx_run caller) claims items; the pool's
                                   threads sit out the call (the in-process serial baseline) */

typedef struct hfx_run_options {
    float share_a;          /* share of vector/copy work for task A while both have some; default 0.5 */
    float matrix_share_a;   /* same for matrix work; default 0.5 */
    size_t budget_bytes;    /* on-chip budget for both tasks; 0 = the pool's arena size */
    uint32_t stop_op[HFX_NUM_TASKS];     /* run task ops with task index < stop_op; default HFX_ALL_OPS */
    uint64_t max_items[HFX_NUM_TASKS];   /* at most this many items per task in this call; 0 = no limit */
    float item_fraction[HFX_NUM_TASKS];  /* at most ceil(f * task items) items in this call; 0 = no limit */
    uint32_t flags;                      /* HFX_RUN_* */
    hfx_trace_event *trace;              /* optional caller buffer */
    size_t trace_capacity;
} hfx_run_options;

#define HFX_RUN_MAX_WORKERS 8

typedef struct hfx_run_result {
    int serialized;      /* 1: both tasks did not fit the budget together (or FORCE_SERIAL): A ran, then B */
    int task_done[HFX_NUM_TASKS];        /* task finished all its ops */
    uint32_t ops_done[HFX_NUM_TASKS];    /* ops of the task finished so far (run state) */
    uint64_t items_run[HFX_NUM_TASKS];   /* items executed in this call */
    uint64_t wall_ns;
    size_t trace_events;                 /* events written */
    size_t trace_dropped;                /* events that did not fit */
    size_t arena_used;                   /* arena bytes used by the placement */
    /* With a trace buffer only: per worker (0: the caller), the time its thread spent runnable but
     * not running during the call (Linux: /proc schedstat's run delay; 0 elsewhere and for workers
     * past HFX_RUN_MAX_WORKERS): the call's time taken by other processes. */
    uint64_t runnable_ns[HFX_RUN_MAX_WORKERS];
} hfx_run_result;

void hfx_run_options_init(hfx_run_options *opt);

typedef struct hfx_runstate hfx_runstate;

/* A run state keeps the progress and the scratch of a partially run program.
 * It owns its own scratch memory so that other runs can use the pool in between. */
hfx_status hfx_runstate_create(hfx_pool *pool, const hfx_program *prog, hfx_runstate **out);
void hfx_runstate_destroy(hfx_runstate *rs);
/* Forget progress: the next run starts from the first op. */
void hfx_runstate_reset(hfx_runstate *rs);
/* 1 when both tasks have finished. */
int hfx_runstate_done(const hfx_runstate *rs);

/* Runs the program on the pool. inputs[i] / outputs[i] point to the node's
 * i-th input / output (task A's first), dense row-major, dtype as in the
 * program. With rs == NULL the run is complete (options' partial limits are
 * then an error). With rs, the run continues where rs stopped; pass the same
 * input/output buffers on every call of one run state. opt and res may be
 * NULL. Safe to call from several threads on one pool: calls are serialized. */
hfx_status hfx_run(hfx_pool *pool, const hfx_program *prog,
                   const void *const *inputs, size_t n_inputs,
                   void *const *outputs, size_t n_outputs,
                   const hfx_run_options *opt, hfx_runstate *rs, hfx_run_result *res);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_HEXFUSE_H */
