/* Fast rms_norm and its gradient: the reference's sums (in double, so
   that long rows keep the reference's accuracy) in vectorised lanes, rows
   split over the thread pool; each row is summed by one share in one
   order, so results do not depend on the thread count. */
#include <math.h>

#include "cpu/attention.h"
#include "cpu/fast.h"
#include "cpu/pool.h"

enum { LANES = 8 };

/* Σ x y over a row */
KILN_CLONES static double row_dot(const float *x, const float *y, int64_t n)
{
    double acc[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int u = 0; u < LANES; u++)
            acc[u] += (double)x[j + u] * y[j + u];
    for (; j < n; j++)
        acc[0] += (double)x[j] * y[j];
    double sum = 0;
    for (int u = 0; u < LANES; u++)
        sum += acc[u];
    return sum;
}

/* out = a x + b y (y NULL: a x) */
KILN_CLONES static void row_axpby(float *out, float a, const float *x, float b,
                                  const float *y, int64_t n)
{
    if (!y)
        for (int64_t j = 0; j < n; j++)
            out[j] = a * x[j];
    else
        for (int64_t j = 0; j < n; j++)
            out[j] = a * x[j] + b * y[j];
}

typedef struct rms_job {
    const kiln_node *n;
    int64_t len;
    void *const *in;
    float *out;
} rms_job;

static void rows(void *ctx, int64_t lo, int64_t hi)
{
    const rms_job *j = ctx;
    int64_t len = j->len;
    float eps = j->n->at.value;
    for (int64_t i = lo; i < hi; i++) {
        const float *x = (const float *)j->in[0] + i * len;
        double r = 1.0 / sqrt(row_dot(x, x, len) / (double)len + eps);
        if (j->n->op == KILN_OP_RMS_NORM) {
            row_axpby(j->out + i * len, (float)r, x, 0.0f, NULL, len);
            continue;
        }
        const float *dy = (const float *)j->in[1] + i * len;
        double m = row_dot(dy, x, len) / (double)len;
        /* dx = r dy - r^3 mean(dy x) x */
        row_axpby(j->out + i * len, (float)r, dy, (float)(-r * r * r * m), x,
                  len);
    }
}

static void run(const kiln_node *n, void *out, void *const *in)
{
    int64_t n_rows;
    rms_job j = {.n = n, .in = in, .out = out};
    kiln_norm_rows(n, &n_rows, &j.len);
    kiln_par_for(n_rows, j.len * (n->op == KILN_OP_RMS_NORM ? 2 : 4), rows, &j);
}

void kiln_fast_RMS_NORM(const kiln_node *n, void *out, void *const *in)
{
    run(n, out, in);
}

void kiln_fast_RMS_NORM_GRAD(const kiln_node *n, void *out, void *const *in)
{
    run(n, out, in);
}
