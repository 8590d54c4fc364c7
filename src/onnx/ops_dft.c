/* DFT and STFT (opset 17) as products with twiddle matrices computed while
   loading: along the transformed axis a signal of L points times C [L, K]
   (cos) and S [L, K] (-sin forward, +sin inverse) gives the K bins' real
   and imaginary parts, (re + i im)(C + i S).  Complex values are ONNX's
   last dim of 2 (real input: 1).  Products differentiate like any, so the
   transforms do too.  O(L K) work, not an FFT: fine for the frame lengths
   of spectrogram front ends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* C11 has no M_PI. */
#define TWO_PI 6.283185307179586476925

/* The largest twiddle matrix (L x K floats). */
#define OX_MAX_TWIDDLE ((int64_t)1 << 22)

/* x [..., n, ...] cut or zero-padded to L points on axis a. */
static kiln_node *fit(ox_ctx *c, kiln_node *x, int a, int64_t len)
{
    kiln_shape s = kiln_node_shape(x);
    if (s.d[a] == len)
        return x;
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS] = {0};
    if (s.d[a] < len) {
        hi[a] = len - s.d[a];
        return kiln_pad(c->g, x, lo, hi, 0);
    }
    memcpy(hi, s.d, sizeof hi);
    hi[a] = len;
    return kiln_slice(c->g, x, lo, hi);
}

/* The twiddles [L, K]: cos, or sign * sin, of 2 pi n k / L, times scale. */
static kiln_node *twiddle(ox_ctx *c, const ox_node *n, int64_t len,
                          int64_t bins, int is_sin, double sign, double scale)
{
    float *w = malloc((size_t)(len * bins) * sizeof *w + 1);
    if (!w)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    for (int64_t t = 0; t < len; t++)
        for (int64_t k = 0; k < bins; k++) {
            /* the angle's turn reduced first: exact for any t k */
            double turn = (double)((t * k) % len) / (double)len;
            double v = is_sin ? sign * sin(TWO_PI * turn) : cos(TWO_PI * turn);
            w[t * bins + k] = (float)(v * scale);
        }
    kiln_node *y = kiln_constant(c->g, KILN_F32, KILN_SHAPE(len, bins), w);
    free(w);
    return y;
}

/* Part p (0 real, 1 imaginary) of x's last dim, that dim removed. */
static kiln_node *part(ox_ctx *c, kiln_node *x, int p)
{
    kiln_shape s = kiln_node_shape(x), r = s;
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS];
    if (s.ndim < 1) /* poisoned: the graph holds the error */
        return x;
    memcpy(hi, s.d, sizeof hi);
    lo[s.ndim - 1] = p;
    hi[s.ndim - 1] = p + 1;
    r.ndim = s.ndim - 1;
    return kiln_reshape(c->g, kiln_slice(c->g, x, lo, hi), r);
}

/* The DFT of x ([..., 1 or 2]) along axis a over len points (the signal
   fitted to it), onesided keeping bins 0 .. len / 2; [..., K, ..., 2]. */
static kiln_node *dft(ox_ctx *c, const ox_node *n, kiln_node *x, int a,
                      int64_t len, int onesided, int inverse)
{
    kiln_graph *g = c->g;
    kiln_shape s = kiln_node_shape(x);
    int nd = s.ndim - 1; /* without the complex dim */
    int64_t bins = onesided ? len / 2 + 1 : len;
    if (kiln_graph_status(g) != KILN_OK) /* x poisoned: the graph's error */
        return x;
    if (nd < 1 || a >= nd)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "a signal of %d dims: want [..., 1 or 2] with the "
                          "axis before the last",
                          s.ndim),
               NULL;
    if (s.d[nd] != 1 && s.d[nd] != 2)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "the last dim must be 1 (real) or 2 (complex), not "
                          "%lld",
                          (long long)s.d[nd]),
               NULL;
    if (len < 1 || len > OX_MAX_TWIDDLE / bins)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a transform of %lld points (at most %lld twiddles)",
                          (long long)len, (long long)OX_MAX_TWIDDLE),
               NULL;
    int perm[KILN_MAX_DIMS], back[KILN_MAX_DIMS];
    for (int k = 0, at = 0; k < nd; k++)
        if (k != a)
            perm[at++] = k;
    perm[nd - 1] = a;
    for (int k = 0; k < nd; k++)
        back[perm[k]] = k;
    kiln_node *re = fit(c, part(c, x, 0), a, len);
    kiln_node *im = s.d[nd] == 2 ? fit(c, part(c, x, 1), a, len) : NULL;
    kiln_shape t = kiln_node_shape(kiln_permute(g, re, perm));
    int64_t rows = kiln_shape_numel(t) / len;
    double scale = inverse ? 1.0 / (double)len : 1;
    kiln_node *cw = twiddle(c, n, len, bins, 0, 0, scale);
    kiln_node *sw = twiddle(c, n, len, bins, 1, inverse ? 1 : -1, scale);
    if (!cw || !sw)
        return NULL;
    kiln_node *r2 =
        kiln_reshape(g, kiln_permute(g, re, perm), KILN_SHAPE(rows, len));
    kiln_node *yr = kiln_matmul(g, r2, cw, 0, 0);
    kiln_node *yi = kiln_matmul(g, r2, sw, 0, 0);
    if (im) {
        kiln_node *i2 =
            kiln_reshape(g, kiln_permute(g, im, perm), KILN_SHAPE(rows, len));
        yr = kiln_sub(g, yr, kiln_matmul(g, i2, sw, 0, 0));
        yi = kiln_add(g, yi, kiln_matmul(g, i2, cw, 0, 0));
    }
    t.d[nd - 1] = bins;
    kiln_shape one = s;
    one.d[a] = bins;
    one.d[nd] = 1;
    kiln_node *parts[2] = {
        kiln_reshape(g, kiln_permute(g, kiln_reshape(g, yr, t), back), one),
        kiln_reshape(g, kiln_permute(g, kiln_reshape(g, yi, t), back), one)};
    return kiln_concat(g, parts, 2, nd);
}

/* A known scalar integer input i (absent: def); -1 (recorded) when it is
   not known or not positive. */
static int64_t known_count(ox_ctx *c, const ox_node *n, int i, int64_t def)
{
    if (i >= n->n_in || !n->in[i])
        return def;
    const ox_host *h = ox_known_ints(c, n, i);
    if (!h)
        return -1;
    if (h->numel != 1 || h->i[0] < 1)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "input %d must be one positive integer", i),
               -1;
    return h->i[0];
}

static int conv_dft(ox_ctx *c, ox_node *n)
{
    int64_t axis, inverse, onesided;
    if (ox_attr_int(c, n, "axis", 1, &axis) ||
        ox_attr_int(c, n, "inverse", 0, &inverse) ||
        ox_attr_int(c, n, "onesided", 0, &onesided))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    int nd = kiln_node_shape(x).ndim;
    int a = ox_axis(c, n, axis, nd);
    if (a < 0)
        return -1;
    if (a == nd - 1 || (onesided && inverse))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          a == nd - 1 ? "axis %lld is the complex dim"
                                      : "axis %lld: onesided inverse",
                          (long long)axis),
               -1;
    int64_t len = known_count(c, n, 1, kiln_node_shape(x).d[a]);
    kiln_node *y =
        len < 0 ? NULL : dft(c, n, x, a, len, onesided != 0, inverse != 0);
    if (!y)
        return -1;
    ox_out(c, n, y, OX_FLOAT);
    return 0;
}

/* STFT: frames of frame_length points every frame_step of signal [B, N, 1
   or 2], each times the window (when given), transformed: [B, frames, K,
   2]. */
static int conv_stft(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    int64_t onesided;
    if (ox_attr_int(c, n, "onesided", 1, &onesided))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    kiln_node *win = n->n_in > 2 && n->in[2] ? ox_f32(c, n, 2) : NULL;
    int64_t wlen = win ? kiln_shape_numel(kiln_node_shape(win)) : -1;
    if (n->n_in < 2 || !n->in[1] || (wlen < 0 && (n->n_in < 4 || !n->in[3])))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "frame_step and a window or frame_length are "
                          "needed"),
               -1;
    int64_t step = known_count(c, n, 1, 1), flen = known_count(c, n, 3, wlen);
    if (step < 0 || flen < 0)
        return -1;
    if (s.ndim != 3 || s.d[1] < flen || (win && wlen != flen) ||
        (onesided && s.d[2] == 2))
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "signal [B, N >= %lld, 1 (or 2 when not onesided)] "
                          "and a window of frame_length points",
                          (long long)flen),
               -1;
    int64_t frames = (s.d[1] - flen) / step + 1;
    if (frames > OX_MAX_TWIDDLE / flen)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "%lld frames",
                          (long long)frames),
               -1;
    int32_t *idx = malloc((size_t)(frames * flen) * sizeof *idx);
    if (!idx)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t f = 0; f < frames; f++)
        for (int64_t j = 0; j < flen; j++)
            idx[f * flen + j] = (int32_t)(f * step + j);
    kiln_node *at = kiln_constant(g, KILN_I32, KILN_SHAPE(frames * flen), idx);
    free(idx);
    kiln_node *fr = kiln_reshape(g, kiln_index_select(g, x, 1, at),
                                 KILN_SHAPE(s.d[0], frames, flen, s.d[2]));
    if (win)
        fr = kiln_mul(g, fr, kiln_reshape(g, win, KILN_SHAPE(1, 1, flen, 1)));
    kiln_node *y = dft(c, n, fr, 2, flen, onesided != 0, 0);
    if (!y)
        return -1;
    ox_out(c, n, y, OX_FLOAT);
    return 0;
}

const ox_op ox_dft_ops[] = {
    {"DFT", conv_dft, "axis,inverse,onesided"},
    {"STFT", conv_stft, "onesided"},
    {NULL, NULL, NULL},
};
