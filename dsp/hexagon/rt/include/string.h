/*
 * string.h - the subset of <string.h> the freestanding Hexagon test images
 * provide (implemented in dsp/hexagon/rt/libc_min.c). Only for the qemu test
 * build, which has no libc; device builds use the Hexagon SDK's libc.
 */
#ifndef HEXFUSE_RT_STRING_H
#define HEXFUSE_RT_STRING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
void *memchr(const void *s, int c, size_t n);
size_t strlen(const char *s);
size_t strnlen(const char *s, size_t max);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
char *strchr(const char *s, int c);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_RT_STRING_H */
