/* Scalar formulas of the ops whose C spelling is easy to get wrong, shared
   by the reference kernels (ref.c), the fast kernels (fast_*.c) and the
   fused-program interpreter (fused.c), so that every implementation of an
   op computes the same thing.

   NaN propagates as in PyTorch: max, min and relu of a NaN are NaN (a plain
   x >= y ? x : y returns y when either is NaN).  Each is a branch-free
   select, so the loops that call them still vectorise. */
#ifndef KILN_CPU_SCALAR_H
#define KILN_CPU_SCALAR_H

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

#endif
