/* Fused softmax cross-entropy, forward and gradient: one pass per row
   (max, exp-sum, log, pick) instead of the eight kernels of the
   decomposition, vectorised within rows and threaded over them.  Sums
   accumulate in double like the reference; exp is vmath's polynomial. */
#include <math.h>

#include "cpu/fast.h"
#include "cpu/fast_reduce.h"
#include "cpu/pool.h"
#include "cpu/vmath.h"

/* The loss sums per-chunk partial sums in chunk order, so the result does
   not depend on the thread count. */
enum { CHUNKS = 64 };

/* sum of exp(x - m) over the row, each exp also stored in e when not NULL */
KILN_CLONES static float row_expsum(const float *x, float *e, int64_t c,
                                    float m)
{
    double s = 0;
    if (e) {
        _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < c; j++)
        {
            float v = vm_expf(x[j] - m);
            e[j] = v;
            s += (double)v;
        }
    } else {
        _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < c; j++)
            s += (double)vm_expf(x[j] - m);
    }
    return (float)s;
}

typedef struct ce_job {
    const float *x;
    const int32_t *lab;
    float *out;
    int64_t rows, c, chunk;
    float k;
    double part[CHUNKS];
} ce_job;

/* Rows shorter than this go through exp a block of rows at a time, as one
   flat vector loop: a row of 10 classes alone would fill no vector. */
enum { FLAT = 2048 };

/* e[i*c + j] = exp(x[i*c + j] - m[i]) for rows [0, rows), rows * c <= FLAT,
   m[i] the row maxima. */
KILN_CLONES static void exp_rows(const float *x, float *e, float *m,
                                 int64_t rows, int64_t c)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * c;
        float mi = -INFINITY;
        int nan = 0;
        for (int64_t j = 0; j < c; j++) {
            mi = mi > xi[j] ? mi : xi[j];
            nan |= xi[j] != xi[j];
        }
        m[i] = nan ? NAN : mi;
        for (int64_t j = 0; j < c; j++)
            e[i * c + j] = xi[j] - m[i];
    }
    _Pragma("omp simd") for (int64_t k = 0; k < rows * c; k++) e[k] =
        vm_expf(e[k]);
}

static float sum_double(const float *e, int64_t c)
{
    double s = 0;
    for (int64_t j = 0; j < c; j++)
        s += (double)e[j];
    return (float)s;
}

/* Loss terms of rows [r0, r1): a block of short rows at a time, or one
   long row at a time. */
static double loss_rows(const ce_job *j, int64_t r0, int64_t r1)
{
    double acc = 0;
    int64_t c = j->c;
    if (c <= FLAT / 8) {
        float e[FLAT], m[FLAT];
        int64_t per = FLAT / c;
        for (int64_t b = r0; b < r1; b += per) {
            int64_t rows = r1 - b < per ? r1 - b : per;
            const float *x = j->x + b * c;
            exp_rows(x, e, m, rows, c);
            for (int64_t i = 0; i < rows; i++) {
                int32_t l = j->lab[b + i];
                if (l >= 0 && l < c)
                    acc +=
                        (x[i * c + l] - m[i]) - logf(sum_double(e + i * c, c));
            }
        }
        return acc;
    }
    for (int64_t i = r0; i < r1; i++) {
        const float *x = j->x + i * c;
        int32_t l = j->lab[i];
        if (l < 0 || l >= c)
            continue;
        float m = kiln_row_max(x, c);
        acc += (x[l] - m) - logf(row_expsum(x, NULL, c, m));
    }
    return acc;
}

static void ce_chunks(void *ctx, int64_t lo, int64_t hi)
{
    ce_job *j = ctx;
    for (int64_t ch = lo; ch < hi; ch++) {
        int64_t r0 = ch * j->chunk,
                r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
        j->part[ch] = loss_rows(j, r0, r1);
    }
}

void kiln_fast_SOFTMAX_CE(const kiln_node *n, void *o, void *const *in)
{
    ce_job j;
    j.x = in[0];
    j.lab = in[1];
    j.rows = n->in[0]->shape.d[0];
    j.c = n->in[0]->shape.d[1];
    if (j.rows == 0 || j.c == 0) { /* the mean of no rows; no classes */
        *(float *)o = NAN;
        return;
    }
    int64_t chunks = j.rows < CHUNKS ? j.rows : CHUNKS;
    j.chunk = chunks ? (j.rows + chunks - 1) / chunks : 0;
    chunks = j.chunk ? (j.rows + j.chunk - 1) / j.chunk : 0;
    kiln_par_for(chunks, j.chunk * (j.c + 4) * 4, ce_chunks, &j);
    double acc = 0;
    for (int64_t ch = 0; ch < chunks; ch++)
        acc += j.part[ch];
    *(float *)o = (float)acc * (-1.0f / (float)j.rows);
}

/* out = (softmax(x) - onehot(label)) * k, written as the reference does. */
KILN_CLONES static void grad_row(const float *x, float *out, int64_t c,
                                 int32_t l, float k)
{
    float m = kiln_row_max(x, c), s = row_expsum(x, out, c, m);
    _Pragma("omp simd") for (int64_t j = 0; j < c; j++) out[j] =
        (out[j] / s - (j == l ? 1.0f : 0.0f)) * k;
}

/* out = (e / s - onehot) * k for rows of exps e already in out. */
KILN_CLONES static void scale_rows(float *out, const int32_t *lab, int64_t rows,
                                   int64_t c, float k)
{
    for (int64_t i = 0; i < rows; i++) {
        float *o = out + i * c, s = sum_double(o, c);
        int32_t l = lab[i];
        for (int64_t j = 0; j < c; j++)
            o[j] = (o[j] / s - (j == l ? 1.0f : 0.0f)) * k;
    }
}

static void grad_rows(void *ctx, int64_t lo, int64_t hi)
{
    ce_job *j = ctx;
    int64_t c = j->c;
    if (c <= FLAT / 8) {
        float m[FLAT];
        int64_t per = FLAT / c;
        for (int64_t b = lo; b < hi; b += per) {
            int64_t rows = hi - b < per ? hi - b : per;
            exp_rows(j->x + b * c, j->out + b * c, m, rows, c);
            scale_rows(j->out + b * c, j->lab + b, rows, c, j->k);
        }
        return;
    }
    for (int64_t i = lo; i < hi; i++)
        grad_row(j->x + i * c, j->out + i * c, c, j->lab[i], j->k);
}

void kiln_fast_SOFTMAX_CE_GRAD(const kiln_node *n, void *o, void *const *in)
{
    ce_job j;
    j.x = in[0];
    j.lab = in[1];
    j.out = o;
    j.rows = n->shape.d[0];
    j.c = n->shape.d[1];
    j.k = *(const float *)in[2] * (j.rows ? 1.0f / (float)j.rows : 0.0f);
    if (j.c == 0) /* [N, 0]: nothing to write, and no rows per block */
        return;
    kiln_par_for(j.rows, (j.c + 4) * 4, grad_rows, &j);
}
