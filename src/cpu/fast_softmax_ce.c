/* Fused softmax cross-entropy, forward and gradient: one pass per row
   (max, exp-sum, log, pick) instead of the eight kernels of the
   decomposition, vectorised within rows and threaded over them.  Sums
   accumulate in double like the reference; exp is vmath's polynomial. */
#include <math.h>

#include "cpu/fast.h"
#include "cpu/vmath.h"

/* The loss sums per-chunk partial sums in chunk order, so the result does
   not depend on the thread count. */
enum { CHUNKS = 64 };

KILN_CLONES static float row_max(const float *x, int64_t c)
{
    float m = -INFINITY;
    int nan = 0;
    _Pragma("omp simd reduction(max : m) reduction(| : nan)") for (int64_t j =
                                                                       0;
                                                                   j < c; j++)
    {
        float v = x[j];
        m = m > v ? m : v;
        nan |= v != v;
    }
    return nan ? NAN : m;
}

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

static void ce_chunks(void *ctx, int64_t lo, int64_t hi)
{
    ce_job *j = ctx;
    for (int64_t ch = lo; ch < hi; ch++) {
        int64_t r0 = ch * j->chunk,
                r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
        double acc = 0;
        for (int64_t i = r0; i < r1; i++) {
            const float *x = j->x + i * j->c;
            int32_t l = j->lab[i];
            if (l < 0 || l >= j->c)
                continue;
            float m = row_max(x, j->c);
            acc += (x[l] - m) - logf(row_expsum(x, NULL, j->c, m));
        }
        j->part[ch] = acc;
    }
}

void kiln_fast_SOFTMAX_CE(const kiln_node *n, void *o, void *const *in)
{
    ce_job j;
    j.x = in[0];
    j.lab = in[1];
    j.rows = n->in[0]->shape.d[0];
    j.c = n->in[0]->shape.d[1];
    int64_t chunks = j.rows < CHUNKS ? j.rows : CHUNKS;
    j.chunk = chunks ? (j.rows + chunks - 1) / chunks : 0;
    chunks = j.chunk ? (j.rows + j.chunk - 1) / j.chunk : 0;
    kiln_par_for(chunks, j.chunk * (j.c + 4) * 4, ce_chunks, &j);
    double acc = 0;
    for (int64_t ch = 0; ch < chunks; ch++)
        acc += j.part[ch];
    *(float *)o = (float)acc * (j.rows ? -1.0f / (float)j.rows : 0.0f);
}

/* out = (softmax(x) - onehot(label)) * k, written as the reference does. */
KILN_CLONES static void grad_row(const float *x, float *out, int64_t c,
                                 int32_t l, float k)
{
    float m = row_max(x, c), s = row_expsum(x, out, c, m);
    _Pragma("omp simd") for (int64_t j = 0; j < c; j++)
        out[j] = (out[j] / s - (j == l ? 1.0f : 0.0f)) * k;
}

static void grad_rows(void *ctx, int64_t lo, int64_t hi)
{
    ce_job *j = ctx;
    for (int64_t i = lo; i < hi; i++)
        grad_row(j->x + i * j->c, j->out + i * j->c, j->c, j->lab[i], j->k);
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
    kiln_par_for(j.rows, (j.c + 4) * 4, grad_rows, &j);
}
