/*
 * hx_print.c - a small vsnprintf for the freestanding test images.
 * Integers and strings only (%d %i %u %x %X %c %s %p %%, l/ll/z/h modifiers,
 * width, '-' and '0' flags). Output through the write syscall.
 */
#include <stdint.h>
#include <string.h>

#include "hx_rt.h"

typedef struct out {
    char *buf;
    size_t size, len;
} out;

static void put(out *o, char c)
{
    if (o->len + 1 < o->size)
        o->buf[o->len] = c;
    o->len++;
}

static void put_padded(out *o, const char *s, size_t n, int width, int left, char pad)
{
    int fill = width > (int)n ? width - (int)n : 0;
    if (!left) {
        /* keep a leading '-' before zero padding */
        if (pad == '0' && n > 0 && s[0] == '-') {
            put(o, '-');
            s++;
            n--;
        }
        while (fill-- > 0)
            put(o, pad);
    }
    for (size_t i = 0; i < n; i++)
        put(o, s[i]);
    if (left)
        while (fill-- > 0)
            put(o, ' ');
}

/* Digits of v in `base` without using division (shift-subtract for base 10),
 * so that printing needs no 64-bit division helper. */
static size_t utoa(uint64_t v, unsigned base, int upper, char *tmp)
{
    const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    size_t n = 0;
    if (v == 0)
        tmp[n++] = '0';
    while (v != 0) {
        unsigned d;
        if (base == 16) {
            d = (unsigned)(v & 15u);
            v >>= 4;
        } else {
            /* v = 10 q + d via binary long division */
            uint64_t q = 0, r = 0;
            for (int bit = 63; bit >= 0; bit--) {
                r = (r << 1) | ((v >> bit) & 1u);
                if (r >= 10) {
                    r -= 10;
                    q |= (uint64_t)1 << bit;
                }
            }
            d = (unsigned)r;
            v = q;
        }
        tmp[n++] = dig[d];
    }
    /* reverse */
    for (size_t i = 0; i < n / 2; i++) {
        char t = tmp[i];
        tmp[i] = tmp[n - 1 - i];
        tmp[n - 1 - i] = t;
    }
    return n;
}

int hx_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
    out o = {buf, size, 0};
    char tmp[24];
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            put(&o, *p);
            continue;
        }
        p++;
        int left = 0;
        char pad = ' ';
        for (;; p++) {
            if (*p == '-')
                left = 1;
            else if (*p == '0')
                pad = '0';
            else
                break;
        }
        int width = 0;
        while (*p >= '0' && *p <= '9')
            width = width * 10 + (*p++ - '0');
        int lng = 0; /* 0 int, 1 long, 2 long long, 3 size_t */
        if (*p == 'h') {
            p++;
            if (*p == 'h')
                p++;
        } else if (*p == 'l') {
            p++;
            lng = 1;
            if (*p == 'l') {
                p++;
                lng = 2;
            }
        } else if (*p == 'z') {
            p++;
            lng = 3;
        }
        switch (*p) {
        case 'd':
        case 'i': {
            int64_t v = lng == 2 ? va_arg(ap, long long)
                      : lng == 1 ? va_arg(ap, long)
                      : lng == 3 ? (int64_t)va_arg(ap, size_t)
                                 : va_arg(ap, int);
            uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
            size_t n = 0;
            if (v < 0)
                tmp[n++] = '-';
            n += utoa(u, 10, 0, tmp + n);
            put_padded(&o, tmp, n, width, left, pad);
            break;
        }
        case 'u':
        case 'x':
        case 'X': {
            uint64_t v = lng == 2 ? va_arg(ap, unsigned long long)
                       : lng == 1 ? va_arg(ap, unsigned long)
                       : lng == 3 ? va_arg(ap, size_t)
                                  : va_arg(ap, unsigned);
            size_t n = utoa(v, *p == 'u' ? 10 : 16, *p == 'X', tmp);
            put_padded(&o, tmp, n, width, left, pad);
            break;
        }
        case 'p': {
            uintptr_t v = (uintptr_t)va_arg(ap, void *);
            tmp[0] = '0';
            tmp[1] = 'x';
            size_t n = 2 + utoa(v, 16, 0, tmp + 2);
            put_padded(&o, tmp, n, width, left, ' ');
            break;
        }
        case 'c':
            tmp[0] = (char)va_arg(ap, int);
            put_padded(&o, tmp, 1, width, left, ' ');
            break;
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s)
                s = "(null)";
            put_padded(&o, s, strlen(s), width, left, ' ');
            break;
        }
        case '%':
            put(&o, '%');
            break;
        case 0:
            p--;
            break;
        default:
            put(&o, '%');
            put(&o, *p);
            break;
        }
    }
    if (size > 0)
        buf[o.len < size ? o.len : size - 1] = 0;
    return (int)o.len;
}

int hx_snprintf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = hx_vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

int hx_printf(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = hx_vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    hx_sys_write(1, buf, len);
    return n;
}

void hx_puts(const char *s)
{
    hx_sys_write(1, s, strlen(s));
    hx_sys_write(1, "\n", 1);
}
