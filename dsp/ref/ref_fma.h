/* a * b + c with one rounding, the same bits on every build: the Hexagon build's fused sfmpy
 * accumulate, elsewhere fmaf (an instruction where the target has FMA, else a libm call). Shared by
 * the references (ref_qeltwise.h) and the vector math of the kernels (src/ops/vmath.h). */
#ifndef HEXFUSE_REF_FMA_H
#define HEXFUSE_REF_FMA_H

static inline float ref_fmaf(float a, float b, float c) {
#if defined(__hexagon__)
    __asm__("%0 += sfmpy(%1, %2)" : "+r"(c) : "r"(a), "r"(b));
    return c;
#else
    return __builtin_fmaf(a, b, c);
#endif
}

#endif
