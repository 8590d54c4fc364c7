/* Scalar formulas of the ops whose C spelling is easy to get wrong, shared
   by the reference kernels (ref.c), the fast kernels (fast_*.c) and the
   fused-program interpreter (fused.c), so that every implementation of an
   op computes the same thing.

   NaN propagates as in PyTorch: max, min and relu of a NaN are NaN (a plain
   x >= y ? x : y returns y when either is NaN).  Each is a branch-free
   select, so the loops that call them still vectorise. */
#ifndef KILN_CPU_SCALAR_H
#define KILN_CPU_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float kiln_s_max(float x, float y)
{
    return (x >= y || x != x) ? x : y;
}

static inline float kiln_s_min(float x, float y)
{
    return (x <= y || x != x) ? x : y;
}

/* torch.relu: NaN stays NaN and -0 stays -0 (only x < 0 becomes 0). */
static inline float kiln_s_relu(float x)
{
    return x < 0.0f ? 0.0f : x;
}

/* sigmoid from e = exp(-|x|) (any exp, so that reference and fast kernels
   share the formula): 1/(1+e) for x >= 0, e/(1+e) below, never
   overflowing; NaN stays NaN. */
static inline float kiln_s_sigmoid(float x, float e)
{
    float r = 1.0f / (1.0f + e);
    return x >= 0 ? r : e * r;
}

/* 1 when v is a better candidate than the best so far for argmax: larger,
   or NaN (the first NaN wins, as in torch.argmax). */
static inline int kiln_s_argmax_better(float v, float best)
{
    return best == best && (v > best || v != v);
}

/* x rounded to IEEE half precision (float16) and held in f32: to nearest,
   ties to even, as numpy's and torch's casts; half's subnormals (quantum
   2^-24) below 2^-14, +-inf from 65520 up, NaN kept. */
static inline float kiln_s_round_f16(float x)
{
    float a = fabsf(x);
    if (!(a < 65520.0f))
        return a == a ? copysignf(INFINITY, x) : x;
    if (a < 6.103515625e-05f)
        return copysignf(rintf(a * 16777216.0f) * 5.9604644775390625e-08f, x);
    uint32_t u;
    memcpy(&u, &a, sizeof u);
    /* drop the 13 low mantissa bits, adding half of them less one plus the
       kept last bit: ties go to the even neighbour */
    u = (u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
    memcpy(&a, &u, sizeof a);
    return copysignf(a, x);
}

/* x rounded to bfloat16 (f32's 8 high mantissa bits) and held in f32: to
   nearest, ties to even, as torch's casts; overflow to +-inf comes out of
   the carry, NaN is kept (its payload may sit in the dropped bits). */
static inline float kiln_s_round_bf16(float x)
{
    if (x != x)
        return x;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
