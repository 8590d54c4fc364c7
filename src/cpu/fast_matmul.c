/* Fast matmul: one GEMM call per product with transposes passed as flags.
   A batch against a shared right operand folds into one taller GEMM; other
   batches of products too small to be split themselves (gemm.c) are spread
   over the pool, a product per work item.  The accumulating product of the
   gemm_acc pass is one GEMM with beta = 1. */
#include <string.h>

#include "cpu/fast.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"

typedef struct mm_job {
    int ta, tb;
    int64_t m, n, k, asz, bsz;
    int nd;
    int64_t bdim[KILN_MAX_DIMS], sta[KILN_MAX_DIMS], stb[KILN_MAX_DIMS];
    const float *a, *b, *packed;
    float *o;
} mm_job;

static void mm_range(void *ctx, int64_t lo, int64_t hi)
{
    mm_job *j = ctx;
    for (int64_t i = lo; i < hi; i++) {
        int64_t oa = 0, ob = 0, r = i;
        for (int d = j->nd - 1; d >= 0; d--) {
            int64_t x = r % j->bdim[d];
            r /= j->bdim[d];
            oa += x * j->sta[d];
            ob += x * j->stb[d];
        }
        kiln_cpu_gemm_packed(j->ta, j->tb, j->m, j->n, j->k, j->a + oa * j->asz,
                             j->b + ob * j->bsz, j->packed,
                             j->o + i * j->m * j->n);
    }
}

/* The product with op(b), when it is one matrix shared by every batch,
   also packed once (kiln_cpu_gemm_pack_b) in packed, else NULL. */
static void matmul(const kiln_node *n, void *o, void *const *in,
                   const float *packed)
{
    kiln_shape sa = n->in[0]->shape, sb = n->in[1]->shape, so = n->shape;
    mm_job j = {0};
    j.ta = n->at.trans_a;
    j.tb = n->at.trans_b;
    j.m = so.d[so.ndim - 2];
    j.n = so.d[so.ndim - 1];
    j.k = sa.d[sa.ndim - (j.ta ? 2 : 1)];
    j.asz = sa.d[sa.ndim - 1] * sa.d[sa.ndim - 2];
    j.bsz = sb.d[sb.ndim - 1] * sb.d[sb.ndim - 2];
    j.a = in[0];
    j.b = in[1];
    j.o = o;
    j.packed = packed;
    kiln_shape ba = sa, bb = sb, bo = so;
    ba.ndim -= 2;
    bb.ndim -= 2;
    bo.ndim -= 2;
    int64_t batches = kiln_shape_numel(bo);
    if (batches == 0)
        return;
    if (batches == 1) {
        kiln_cpu_gemm_packed(j.ta, j.tb, j.m, j.n, j.k, j.a, j.b, packed, j.o);
        return;
    }
    kiln_broadcast_strides(ba, bo, j.sta);
    kiln_broadcast_strides(bb, bo, j.stb);
    int a_full = kiln_shape_numel(ba) == batches,
        b_shared = kiln_shape_numel(bb) == 1;
    if (a_full && b_shared && !j.ta) {
        /* [batch, m, k] x [k, n]: rows of every batch are one matrix */
        kiln_cpu_gemm_packed(0, j.tb, batches * j.m, j.n, j.k, j.a, j.b, packed,
                             j.o);
        return;
    }
    j.nd = bo.ndim;
    for (int d = 0; d < bo.ndim; d++)
        j.bdim[d] = bo.d[d];
    double mnk = (double)j.m * (double)j.n * (double)j.k;
    if (mnk <= KILN_GEMM_SPLIT_MIN)
        kiln_par_for(batches, j.m * j.n * (j.k > 0 ? j.k : 1), mm_range, &j);
    else
        mm_range(&j, 0, batches);
}

void kiln_fast_MATMUL(const kiln_node *n, void *o, void *const *in)
{
    matmul(n, o, in, NULL);
}

int64_t kiln_fast_matmul_rows(const kiln_node *n)
{
    kiln_shape sa = n->in[0]->shape, so = n->shape;
    int64_t m = so.d[so.ndim - 2], batches = 1, abatches = 1;
    for (int d = 0; d < so.ndim - 2; d++)
        batches *= so.d[d];
    for (int d = 0; d < sa.ndim - 2; d++)
        abatches *= sa.d[d];
    /* matmul's fold: a batch of A against one B is one taller product */
    return !n->at.trans_a && abatches == batches ? batches * m : m;
}

void kiln_fast_matmul_packed(const kiln_node *n, void *o, void *const *in,
                             const float *packed)
{
    matmul(n, o, in, packed);
}

/* out = c + alpha op(a) op(b), 2-D: c is copied into out unless the memory
   plan put out in c's buffer (an update written over its variable), then
   one GEMM accumulates into it.  The plan never gives out a's or b's
   buffer. */
void kiln_fast_MATMUL_ACC(const kiln_node *n, void *o, void *const *in)
{
    kiln_shape sa = n->in[1]->shape;
    int ta = n->at.trans_a, tb = n->at.trans_b;
    int64_t m = n->shape.d[0], nn = n->shape.d[1], k = sa.d[ta ? 0 : 1];
    float alpha = *(const float *)in[3]; /* read before out is written */
    if (o != in[0] && m * nn > 0)
        memcpy(o, in[0], (size_t)(m * nn) * sizeof(float));
    kiln_cpu_gemm_acc(ta, tb, m, nn, k, alpha, in[1], in[2], o);
}
