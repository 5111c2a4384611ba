/* host_exports.c - libhexfuse_host.so: the dsp/ kernel's C API (hexfuse.h) as a shared
 * library, for Python ctypes. The symbols come whole from libhexfuse.a (hfx_program_specialize
 * included); this file adds what Python needs beyond the public API: the format versions it
 * reads and the shape-expression evaluator (tests cross-check it against shape_expr.run). */
#include "core.h"
#include "hexfuse/hexfuse.h"

unsigned hexfuse_host_program_version(void) { return HFX_PROGRAM_VERSION_MAX; }

/* hfx_expr_eval: 0 and *value, or the fault's number (enum hfx_expr_fault) and its text */
int hexfuse_host_expr_eval(const uint32_t *words, uint32_t n_words, const int64_t *symbols, uint32_t n_symbols,
                           int64_t *value, const char **fault_text) {
    hfx_expr_fault f = hfx_expr_eval(words, n_words, symbols, n_symbols, value);
    if (fault_text) *fault_text = hfx_expr_fault_text(f);
    return (int)f;
}
