/* Branch-free float exp, log and tanh that compilers vectorise
   inside simd loops.  Within 2 ulp of libm over the whole range (checked
   against the reference kernels in tests/test_kernels.c); infinities and
   NaN behave as in libm. */
#ifndef KILN_CPU_VMATH_H
#define KILN_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float vm_bits_to_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t vm_f_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* exp: x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-7 polynomial, 2^n
   applied in two halves so results down to the denormal range stay right. */
static inline float vm_expf(float x)
{
    const float hi = 88.72283935546875f, lo = -103.97208f;
    /* NaN is clamped too (to 0): converting it to an integer below is
       undefined; the result is x itself anyway. */
    float xc = x > hi ? hi : x < lo ? lo : x == x ? x : 0.0f;
    float n = rintf(xc * 1.44269504088896341f);
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni = (int32_t)n;
    int32_t n1 = ni / 2, n2 = ni - n1;
    float s1 = vm_bits_to_f((uint32_t)(n1 + 127) << 23);
    float s2 = vm_bits_to_f((uint32_t)(n2 + 127) << 23);
    float y = p * s1 * s2;
    y = x > hi ? INFINITY : y;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* exp of a non-positive x (a softmax's score less its maximum, a
   sigmoid's -|z|): vm_expf's reduction and polynomial with fused
   multiply-adds (GCC forms none in ISO C) and without its care for results
   outside the normal floats, which took as many instructions as the rest:
   below -87.3 it gives 0 (vm_expf a denormal under 1.2e-38), above 88
   e^88 (vm_expf inf). */
static inline float vm_expf_neg(float x)
{
    float xc = x > 88.0f ? 88.0f : x >= -87.3f ? x : -87.3f;
    float n = rintf(xc * 1.44269504088896341f);
    float r = fmaf(n, -0.693145751953125f, xc);
    r = fmaf(n, -1.428606765330187045e-06f, r);
    float p = 1.0f / 5040;
    p = fmaf(p, r, 1.0f / 720);
    p = fmaf(p, r, 1.0f / 120);
    p = fmaf(p, r, 1.0f / 24);
    p = fmaf(p, r, 1.0f / 6);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    float y = p * vm_bits_to_f((uint32_t)((int32_t)n + 127) << 23);
    y = x >= -87.3f ? y : 0.0f;
    return x != x ? x : y;
}

/* log (fdlibm's logf): x = 2^e m with m in [sqrt(2)/2, sqrt(2)), log(m) =
   log(1+f) from s = f/(2+f). */
static inline float vm_logf(float x)
{
    int denorm = x < 1.17549435e-38f;
    float xs = denorm ? x * 8388608.0f : x; /* 2^23 */
    uint32_t u = vm_f_to_bits(xs);
    /* move the mantissa into [sqrt(2)/2, sqrt(2)) */
    u += 0x3f800000u - 0x3f3504f3u;
    int32_t e = (int32_t)(u >> 23) - 127 - (denorm ? 23 : 0);
    u = (u & 0x007fffffu) + 0x3f3504f3u;
    float f = vm_bits_to_f(u) - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s, w = z * z;
    float t1 = w * (0.40000972152f + w * 0.24279078841f);
    float t2 = z * (0.66666662693f + w * 0.28498786688f);
    float R = t2 + t1, hfsq = 0.5f * f * f;
    float fe = (float)e;
    float y = fe * 6.9313812256e-01f +
              (f - (hfsq - (s * (hfsq + R) + fe * 9.0580006145e-06f)));
    y = x == 0.0f ? -INFINITY : y;
    y = x < 0.0f ? NAN : y;
    y = x == INFINITY ? INFINITY : y;
    return x != x ? x : y;
}

/* tanh: an odd Taylor polynomial near 0, 1 - 2/(exp(2|x|)+1) beyond. */
static inline float vm_tanhf(float x)
{
    float a = fabsf(x);
    float z = x * x;
    float p = -0.0035921280365724811f; /* x^15 */
    p = p * z + 0.0088632355299021966f;
    p = p * z - 0.021869488536155203f;
    p = p * z + 0.053968253968253968f;
    p = p * z - 0.13333333333333333f;
    p = p * z + 0.33333333333333333f;
    float small = x - x * z * p;
    float e = vm_expf(2.0f * (a < 20.0f ? a : 20.0f));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = copysignf(big, x);
    float y = a < 0.4f ? small : big;
    return x != x ? x : y;
}

#endif
