/*
 * stdlib.h - the subset of <stdlib.h> the freestanding Hexagon test images
 * provide (dsp/hexagon/rt/malloc_min.c): a first-fit heap over a static
 * buffer for test code (e.g. dsp/tests/program_builder.h). The hexfuse core
 * itself allocates only through hfx_plat_alloc.
 */
#ifndef HEXFUSE_RT_STDLIB_H
#define HEXFUSE_RT_STDLIB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *malloc(size_t size);
void *calloc(size_t n, size_t size);
void *realloc(void *ptr, size_t size);
void free(void *ptr);
__attribute__((noreturn)) void abort(void);
__attribute__((noreturn)) void exit(int code);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_RT_STDLIB_H */
