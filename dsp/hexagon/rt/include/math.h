/*
 * math.h - the few <math.h> functions the hexfuse core uses, for the
 * freestanding Hexagon builds (no libc/libm for Hexagon here). Implemented
 * in dsp/hexagon/rt/math_min.c; accuracy is stated there and checked
 * against the host libm by dsp/tests/qemu/check_rt_host.c.
 */
#ifndef HEXFUSE_RT_MATH_H
#define HEXFUSE_RT_MATH_H

#ifdef __cplusplus
extern "C" {
#endif

#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
#define HUGE_VALF (__builtin_inff())
#define HUGE_VAL (__builtin_inf())
#define isnan(x) __builtin_isnan(x)
#define isinf(x) __builtin_isinf(x)
#define isfinite(x) __builtin_isfinite(x)
#define signbit(x) __builtin_signbit(x)

float expf(float x);
float expm1f(float x);
float tanhf(float x);
float erff(float x);
float sqrtf(float x);
double sqrt(double x);
float fabsf(float x);
double fabs(double x);
float fmaxf(float a, float b);
float fminf(float a, float b);

#ifdef __cplusplus
}
#endif

#endif /* HEXFUSE_RT_MATH_H */
