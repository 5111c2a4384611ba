/*
 * malloc_min.c - malloc/calloc/realloc/free/abort/exit for the freestanding
 * test images. First-fit over a static heap (HX_RT_HEAP_BYTES, default
 * 8 MiB) with 16-byte headers; free blocks are merged with their free
 * successors on allocation. Single threaded (the test images are).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hx_rt.h"

#ifndef HX_RT_HEAP_BYTES
#define HX_RT_HEAP_BYTES (8u << 20)
#endif

typedef struct hdr {
    size_t size; /* whole block incl. header, multiple of 16 */
    size_t used;
    size_t pad[2];
} hdr;

static _Alignas(16) unsigned char heap[HX_RT_HEAP_BYTES];
static int heap_ready;

static hdr *next_blk(hdr *h)
{
    unsigned char *n = (unsigned char *)h + h->size;
    return n < heap + sizeof heap ? (hdr *)(void *)n : NULL;
}

void *malloc(size_t size)
{
    if (!heap_ready) {
        hdr *h = (hdr *)(void *)heap;
        h->size = sizeof heap;
        h->used = 0;
        heap_ready = 1;
    }
    if (size > sizeof heap)
        return NULL;
    size_t need = (sizeof(hdr) + size + 15u) & ~(size_t)15u;
    for (hdr *h = (hdr *)(void *)heap; h; h = next_blk(h)) {
        if (h->used)
            continue;
        for (hdr *n = next_blk(h); n && !n->used; n = next_blk(h))
            h->size += n->size;
        if (h->size < need)
            continue;
        if (h->size - need >= 2 * sizeof(hdr)) {
            hdr *rest = (hdr *)(void *)((unsigned char *)h + need);
            rest->size = h->size - need;
            rest->used = 0;
            h->size = need;
        }
        h->used = 1;
        return h + 1;
    }
    return NULL;
}

void free(void *ptr)
{
    if (ptr)
        ((hdr *)ptr - 1)->used = 0;
}

void *calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *realloc(void *ptr, size_t size)
{
    if (!ptr)
        return malloc(size);
    size_t old = ((hdr *)ptr - 1)->size - sizeof(hdr);
    if (size <= old)
        return ptr;
    void *p = malloc(size);
    if (p) {
        memcpy(p, ptr, old);
        free(ptr);
    }
    return p;
}

void abort(void)
{
    hx_puts("abort()");
    hx_exit(134);
}

void exit(int code)
{
    hx_exit(code);
}
