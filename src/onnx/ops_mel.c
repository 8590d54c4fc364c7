/* MelWeightMatrix (opset 17): the [dft_length / 2 + 1, num_mel_bins]
   matrix of triangular mel filters, computed while loading from inputs
   known then and kept as a constant.  The band edges follow ONNX's
   reference: num_mel_bins + 2 points evenly spaced in mel (2595
   log10(1 + f / 700), in float as the reference computes it from its
   float inputs), back to hertz and to the DFT bin floor((dft_length + 1)
   f / sample_rate); filter i rises over [edge i, edge i+1] and falls
   over [edge i+1, edge i+2). */
#include <math.h>
#include <stdlib.h>

#include "onnx/onnx_internal.h"

/* The filter matrix is at most this many elements. */
#define MEL_MAX ((int64_t)1 << 24)

/* Input i as one number known while loading; -1 recorded otherwise. */
static int known_scalar(ox_ctx *c, const ox_node *n, int i, double *v)
{
    const ox_value *in = i < n->n_in ? n->in[i] : NULL;
    const ox_host *h = in ? in->known : NULL;
    if (!h || h->numel != 1)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "input %d must be a scalar known while loading", i),
               -1;
    *v = h->f ? (double)h->f[0] : (double)h->i[0];
    return 0;
}

/* The DFT bin of each of the mels + 2 band edges. */
static void edges(int64_t mels, double dft, double rate, float lo, float hi,
                  double *bin)
{
    float lo_mel = 2595.0f * log10f(1.0f + lo / 700.0f);
    float hi_mel = 2595.0f * log10f(1.0f + hi / 700.0f);
    float step = (hi_mel - lo_mel) / (float)(mels + 2);
    for (int64_t k = 0; k < mels + 2; k++) {
        double f = (double)k * step + lo_mel;
        f = 700 * (pow(10, f / 2595) - 1);
        bin[k] = floor((dft + 1) * f / rate);
    }
}

/* Writes w[j, i] = v when j is a bin of the matrix; 0 when it is not. */
static int put(float *w, int64_t bins, int64_t mels, double j, int64_t i,
               double v)
{
    if (!(j >= 0 && j < (double)bins))
        return 0;
    w[(int64_t)j * mels + i] = (float)v;
    return 1;
}

/* Filter i of the edges l <= m <= r (a point at m when l = m). */
static int filter(float *w, int64_t bins, int64_t mels, int64_t i,
                  const double *e)
{
    double l = e[i], m = e[i + 1], r = e[i + 2];
    /* each loop stops at the first bin outside the matrix, so hostile
       edges cost no more than the matrix */
    int ok = isfinite(l) && isfinite(m) && isfinite(r);
    if (ok && m == l)
        ok = put(w, bins, mels, m, i, 1);
    for (double j = l; ok && m > l && j <= m; j++)
        ok = put(w, bins, mels, j, i, (j - l) / (m - l));
    for (double j = m; ok && r > m && j < r; j++)
        ok = put(w, bins, mels, j, i, (r - j) / (r - m));
    return ok;
}

static int conv_mel(ox_ctx *c, ox_node *n)
{
    double v[5];
    int64_t dtype;
    for (int k = 0; k < 5; k++)
        if (known_scalar(c, n, k, &v[k]))
            return -1;
    if (ox_attr_int(c, n, "output_datatype", OX_FLOAT, &dtype))
        return -1;
    /* converted once in range: a double past int64 (or NaN) is undefined */
    int in_range = v[0] >= 1 && v[1] >= 1 && v[0] <= MEL_MAX &&
                   v[1] <= 2 * MEL_MAX && v[2] > 0 && isfinite(v[2]);
    int64_t mels = in_range ? (int64_t)v[0] : 0;
    int64_t bins = in_range ? (int64_t)v[1] / 2 + 1 : 0;
    if (!in_range || mels * bins > MEL_MAX || !ox_type_supported((int)dtype))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "num_mel_bins %g, dft_length %g, sample_rate %g or "
                          "output_datatype %lld out of range",
                          v[0], v[1], v[2], (long long)dtype),
               -1;
    float *w = calloc((size_t)(mels * bins), sizeof *w);
    double *e = malloc((size_t)(mels + 2) * sizeof *e);
    int ok = w && e;
    if (ok)
        edges(mels, (double)(int64_t)v[1], v[2], (float)v[3], (float)v[4], e);
    for (int64_t i = 0; ok && i < mels; i++)
        ok = filter(w, bins, mels, i, e);
    if (ok)
        ox_out(c, n, kiln_constant(c->g, KILN_F32, KILN_SHAPE(bins, mels), w),
               (int)dtype);
    else if (w && e)
        ox_problem(c, n, KILN_ERR_ARG,
                   "the mel bands between %g and %g Hz leave the %lld DFT "
                   "bins",
                   v[3], v[4], (long long)bins);
    else
        ox_problem(c, n, KILN_ERR_MEMORY, "out of memory");
    free(w);
    free(e);
    return ok ? 0 : -1;
}

const ox_op ox_mel_ops[] = {
    {"MelWeightMatrix", conv_mel, "output_datatype"},
    {NULL, NULL, NULL},
};
