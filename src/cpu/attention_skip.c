/* Key tiles the fast attention forward may skip under an additive mask
   (PyTorch's causal mask of -1e9 above the diagonal, as bench/gpt.py
   builds it and its ONNX export keeps): a key j whose mask value lies so
   far below the row's largest that exp(s_ij + m_ij - max_j (s_ij + m_ij))
   is exactly 0 in float adds exactly nothing to the row's sum or output.

   The scores are bounded per (batch, head), |s_ij| <= B = |scale| D
   max|q| max|k| (with slack for the float products; one pass over q and
   k, where the rows' norms took as long as the skipped work),
   so key j of row i is skipped only when its mask value lies more than 2B
   + 128 below the row's largest (and the rounding of the sums): the exponent is
   then below -128, where vm_expf (and expf) give exactly 0.  With a NaN or
   infinite q, k or v (0 times inf is NaN), or a NaN in the mask row, nothing is
   skipped. */
#include <math.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/attention_skip.h"
#include "cpu/fast.h"

enum { MARGIN = 128 };

/* Mask values this far below the row's largest start a skippable tail;
   whether the tail may be skipped is decided per head by its bound. */
#define TAIL_GAP 1e4f

/* The mask rows the node's mask really has (its size-1 axes of [B,H,Tq]
   broadcast): [rows of batch, of head, of query]. */
static void mask_rows(const kiln_node *n, const int64_t *mst, int64_t *r)
{
    kiln_attn_dims a = kiln_attn_dims_of(n);
    r[0] = mst[0] ? a.b : 1;
    r[1] = mst[1] ? a.h : 1;
    r[2] = mst[2] ? a.tq : 1;
}

int kiln_attn_skip_applies(const kiln_node *n)
{
    int64_t mst[4];
    kiln_attn_mask_strides(n, mst);
    return n->op == KILN_OP_ATTENTION && kiln_attn_mask(n) && !n->at.causal &&
           mst[3] == 1;
}

size_t kiln_attn_skip_bytes(const kiln_node *n, int64_t qtiles)
{
    if (!kiln_attn_skip_applies(n))
        return 0;
    int64_t mst[4], r[3];
    kiln_attn_mask_strides(n, mst);
    mask_rows(n, mst, r);
    kiln_attn_dims a = kiln_attn_dims_of(n);
    int64_t rows = r[0] * r[1] * r[2];
    return (size_t)(rows + a.b * a.h * qtiles) * sizeof(int64_t) +
           (size_t)rows * sizeof(float);
}

/* The largest of n values, and whether any is NaN (x - x is NaN for a NaN
   or an infinity: float reductions, which vectorise where a flag's did
   not). */
KILN_CLONES static float top_of(const float *m, int64_t n, int *nan)
{
    float top = -INFINITY, nan_sum = 0;
    _Pragma(
        "omp simd reduction(max : top) reduction(+ : nan_sum)") for (int64_t j =
                                                                         0;
                                                                     j < n; j++)
    {
        top = m[j] > top ? m[j] : top;
        nan_sum += m[j] != m[j] ? m[j] : 0.0f;
    }
    *nan = nan_sum != nan_sum;
    return top;
}

/* 1 past the last of m[0..n) at or above thr (0: none), in blocks from
   the end: a causal mask's tail is most of the row. */
KILN_CLONES static int64_t last_above(const float *m, int64_t n, float thr)
{
    enum { W = 16 };
    int64_t j = n;
    for (; j >= W; j -= W) {
        int any = 0;
        _Pragma("omp simd reduction(| : any)") for (int64_t c = j - W; c < j;
                                                    c++) any |= m[c] >= thr;
        if (any)
            break;
    }
    while (j > 0 && m[j - 1] < thr)
        j--;
    return j;
}

/* Row m of tk mask values: the end of its keys that matter (1 past the
   last within TAIL_GAP of its largest) and how far below its largest
   the rest lie (inf when nothing is left), less the rounding of adding a
   score to either (3e-7 of their magnitudes). */
static void row_tail(const float *m, int64_t tk, int64_t *end, float *gap)
{
    int nan;
    float top = top_of(m, tk, &nan);
    *end = tk;
    *gap = INFINITY;
    if (nan || top == -INFINITY)
        return;
    *end = last_above(m, tk, top - TAIL_GAP);
    float tail = *end < tk ? top_of(m + *end, tk - *end, &nan) : -INFINITY;
    if (tail > -INFINITY)
        *gap = (float)((double)top - tail -
                       3e-7 * (fabs((double)top) + fabs((double)tail)));
}

/* The largest |x| of n floats; NaN when one is NaN or infinite. */
KILN_CLONES static float max_abs(const float *x, int64_t n)
{
    float top = 0, bad = 0;
    _Pragma("omp simd reduction(max : top) reduction(+ : bad)") for (int64_t i =
                                                                         0;
                                                                     i < n; i++)
    {
        float a = fabsf(x[i]);
        top = a > top ? a : top;
        bad += x[i] - x[i];
    }
    return bad == 0.0f ? top : NAN;
}

/* The key end of each query tile (ends[qtiles]) of the head whose q, k, v
   start at in[0..2] + its offsets qkv; row_end and row_gap over its mask
   rows, one per query when per_query. */
static void head_ends(const kiln_node *n, void *const *in, const int64_t *qkv,
                      int64_t br, int64_t qtiles, int per_query,
                      const int64_t *row_end, const float *row_gap,
                      int64_t *ends)
{
    kiln_attn_dims a = kiln_attn_dims_of(n);
    const float *q = (const float *)in[0] + qkv[0],
                *k = (const float *)in[1] + qkv[1],
                *v = (const float *)in[2] + qkv[2];
    double bound = fabs((double)n->at.value) * (double)a.d *
                   max_abs(q, a.tq * a.d) * max_abs(k, a.tk * a.d) * (1 + 1e-3);
    float vmax = max_abs(v, a.tk * a.e);
    int ok = bound == bound && !isinf(bound) && vmax == vmax && !isinf(vmax);
    for (int64_t t = 0; t < qtiles; t++) {
        int64_t i0 = t * br, i1 = i0 + br < a.tq ? i0 + br : a.tq, end = 0;
        for (int64_t i = i0; ok && i < i1; i++) {
            int64_t r = per_query ? i : 0;
            if (row_end[r] < a.tk && !(2 * bound + MARGIN < row_gap[r]))
                end = a.tk;
            end = row_end[r] > end ? row_end[r] : end;
        }
        ends[t] = ok ? end : a.tk;
    }
}

int64_t *kiln_attn_skip_plan(const kiln_node *n, void *const *in, int64_t br,
                             int64_t qtiles, void *mem)
{
    if (!kiln_attn_skip_applies(n))
        return NULL;
    kiln_attn_dims a = kiln_attn_dims_of(n);
    int64_t mst[4], r[3];
    kiln_attn_mask_strides(n, mst);
    mask_rows(n, mst, r);
    int64_t rows = r[0] * r[1] * r[2];
    int64_t *ends = mem, *row_end = ends + a.b * a.h * qtiles;
    float *row_gap = (float *)(row_end + rows);
    const float *mask = in[3];
    for (int64_t b = 0; b < r[0]; b++)
        for (int64_t h = 0; h < r[1]; h++)
            for (int64_t i = 0; i < r[2]; i++) {
                int64_t at = (b * r[1] + h) * r[2] + i;
                row_tail(mask + b * mst[0] + h * mst[1] + i * mst[2], a.tk,
                         &row_end[at], &row_gap[at]);
            }
    for (int64_t b = 0; b < a.b; b++)
        for (int64_t h = 0; h < a.h; h++) {
            int64_t bh = b * a.h + h;
            int64_t qkv[3] = {bh * a.tq * a.d, bh * a.tk * a.d,
                              bh * a.tk * a.e};
            int64_t at = ((mst[0] ? b : 0) * r[1] + (mst[1] ? h : 0)) * r[2];
            head_ends(n, in, qkv, br, qtiles, mst[2] != 0, row_end + at,
                      row_gap + at, ends + bh * qtiles);
        }
    return ends;
}
