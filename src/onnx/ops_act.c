/* Converters of activations and normalisations that ONNX defines as
   functions of other ops: HardSwish, Celu, MeanVarianceNormalization and
   LRN, each built from Kiln ops (so differentiable). */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* x * clamp(x / 6 + 1/2, 0, 1) */
static int conv_hard_swish(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_node *s = kiln_clamp(
        g, kiln_add(g, kiln_scale(g, x, 1.0f / 6), kiln_scalar(g, 0.5f)), 0, 1);
    ox_out(c, n, kiln_mul(g, x, s), OX_FLOAT);
    return 0;
}

/* max(0, x) + min(0, alpha (e^(x / alpha) - 1)) */
static int conv_celu(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    float alpha;
    if (ox_attr_float(c, n, "alpha", 1.0f, &alpha))
        return -1;
    if (!(alpha != 0 && isfinite(alpha)))
        return ox_problem(c, n, KILN_ERR_ARG, "alpha must be finite, not 0"),
               -1;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_node *neg =
        kiln_scale(g, kiln_expm1(g, kiln_scale(g, x, 1.0f / alpha)), alpha);
    ox_out(c, n,
           kiln_add(g, kiln_relu(g, x), kiln_min(g, neg, kiln_scalar(g, 0))),
           OX_FLOAT);
    return 0;
}

/* (x - mean) / sqrt(var + 1e-9) over axes (default 0, 2, 3), the variance
   biased, as ONNX's function body computes it. */
static int conv_mvn(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    const int64_t *axes;
    int64_t count;
    static const int64_t def[] = {0, 2, 3};
    if (ox_attr_ints(c, n, "axes", &axes, &count))
        return -1;
    if (!axes) {
        axes = def;
        count = 3;
    }
    kiln_node *x = ox_f32(c, n, 0);
    unsigned mask = 0;
    for (int64_t k = 0; k < count; k++) {
        int a = ox_axis(c, n, axes[k], kiln_node_shape(x).ndim);
        if (a < 0)
            return -1;
        mask |= KILN_AXIS(a);
    }
    kiln_node *d = kiln_sub(g, x, kiln_mean(g, x, mask, 1));
    kiln_node *var = kiln_mean(g, kiln_mul(g, d, d), mask, 1);
    kiln_node *sd = kiln_sqrt(g, kiln_add(g, var, kiln_scalar(g, 1e-9f)));
    ox_out(c, n, kiln_div(g, d, sd), OX_FLOAT);
    return 0;
}

/* x / (bias + alpha / size * sum of x^2 over a window of size channels)^beta,
   the window from c - floor((size-1)/2) to c + ceil((size-1)/2).  Parts of
   the window outside the channels add nothing, so the zero padding is cut
   at C - 1 on each side (and a hostile size costs no more than C slices). */
#define LRN_MAX_WINDOW 4096

static int conv_lrn(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    float alpha, beta, bias;
    int64_t size;
    if (ox_attr_float(c, n, "alpha", 1e-4f, &alpha) ||
        ox_attr_float(c, n, "beta", 0.75f, &beta) ||
        ox_attr_float(c, n, "bias", 1.0f, &bias) ||
        ox_attr_int(c, n, "size", 0, &size))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    if (size < 1 || s.ndim < 3 || s.d[1] < 1)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "size must be at least 1 and X [N, C, ...] with C "
                          "at least 1"),
               -1;
    int64_t ch = s.d[1], lo = (size - 1) / 2, hi = size - 1 - lo;
    int64_t plo[KILN_MAX_DIMS] = {0}, phi[KILN_MAX_DIMS] = {0};
    plo[1] = lo < ch - 1 ? lo : ch - 1;
    phi[1] = hi < ch - 1 ? hi : ch - 1;
    if (plo[1] + phi[1] >= LRN_MAX_WINDOW) /* one slice per channel of it */
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a window of %lld channels (at most %d)",
                          (long long)(plo[1] + phi[1] + 1), LRN_MAX_WINDOW),
               -1;
    kiln_node *sq = kiln_pad(g, kiln_mul(g, x, x), plo, phi, 0);
    kiln_node *sum = NULL;
    int64_t start[KILN_MAX_DIMS] = {0}, stop[KILN_MAX_DIMS];
    for (int k = 0; k < s.ndim; k++)
        stop[k] = s.d[k];
    for (int64_t k = 0; k <= plo[1] + phi[1]; k++) {
        start[1] = k;
        stop[1] = k + ch;
        kiln_node *part = kiln_slice(g, sq, start, stop);
        sum = sum ? kiln_add(g, sum, part) : part;
    }
    kiln_node *base = kiln_add(g, kiln_scale(g, sum, alpha / (float)size),
                               kiln_scalar(g, bias));
    ox_out(c, n, kiln_div(g, x, kiln_pow(g, base, kiln_scalar(g, beta))),
           OX_FLOAT);
    return 0;
}

const ox_op ox_act_ops[] = {
    {"HardSwish", conv_hard_swish, ""},
    {"Celu", conv_celu, "alpha"},
    {"MeanVarianceNormalization", conv_mvn, "axes"},
    {"LRN", conv_lrn, "alpha,beta,bias,size"},
    {NULL, NULL, NULL},
};
