/*
 * hvx_qresize.h - QRESIZE's rows on HVX: a nearest Resize of u8/i8 codes, each byte through a
 * 256-entry table (vlut32, hvx_lut_i8.c). One output row is
 *   a copy of the row before it      when both read the same source row (vector copies),
 *   the source row through the table then spread along W
 *                                    when the column map is q -> q / f for an integer f <= 16
 *                                    (f = 2: vshuff; f >= 3: vlut32 over per-phase indices),
 *   gathered byte by byte, then through the table in place and copied by vector (any other
 *                                    column map, and f = 1).
 * Exact byte moves: bit for bit the scalar loop of dsp/src/ops/resize.c.
 */
#ifndef HEXFUSE_HVX_QRESIZE_H
#define HEXFUSE_HVX_QRESIZE_H

#include <stddef.h>
#include <stdint.h>

#define HVX_QRESIZE_MAX_FACTOR 16

/* The work space of one worker (laid out by hvx_qresize_init): ncols, the column map's length (ow
 * when f is 0, else 0) */
size_t hvx_qresize_ws_bytes(size_t w, size_t ncols);

typedef struct hvx_qresize {
    const uint8_t *lut; /* the table prepared for vlut32, the i8 flip folded in */
    uint8_t *idx;       /* f >= 3: f vectors, idx[128 r + i] = (r + i) / f */
    uint8_t *t;         /* one source row through the table, 128 bytes of slack after it */
    uint32_t *cols;     /* f == 0: the source column of each output column (the caller fills it) */
    size_t w, ow;
    int f; /* the source of output column q is q / f (0: the map in cols) */
} hvx_qresize;

/* Lays ws (128-byte aligned, hvx_qresize_ws_bytes) out: the prepared table (table indexed by the
 * byte ^ flip), f's indices; f: 1..HVX_QRESIZE_MAX_FACTOR, or 0 and the caller fills r->cols. */
void hvx_qresize_init(hvx_qresize *r, void *ws, size_t w, size_t ow, const uint8_t table[256], uint8_t flip, int f);

/* `reps` (>= 1) output rows at y, y + ow, ...: each y[q] = table[src[cols[q]]], src one source row of
 * w bytes. y: any alignment, nothing written past the last row. */
void hvx_qresize_rows(const hvx_qresize *r, const uint8_t *src, size_t reps, uint8_t *y);

#endif /* HEXFUSE_HVX_QRESIZE_H */
