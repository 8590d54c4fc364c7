/* Reference kernels of the attention group: plain loops that recompute
   each score where they need it (no score matrix, no allocation), in
   double where they sum.  A query that sees no key (every score -inf, or
   no key at all) gets a zero output row and log-sum-exp -inf, and passes
   no gradient. */
#include <math.h>
#include <string.h>

#include "cpu/attention.h"

/* The view of one (batch, head) of an attention node's operands. */
typedef struct head {
    kiln_attn_dims a;
    const float *q, *k, *v, *mask; /* mask at [b,h,0,0] (NULL: none) */
    int64_t mst[4];
    float scale;
    int causal;
} head;

static head head_of(const kiln_node *n, void *const *in, int64_t b, int64_t h)
{
    head x = {.a = kiln_attn_dims_of(n),
              .scale = n->at.value,
              .causal = n->at.causal};
    kiln_attn_dims a = x.a;
    int64_t bh = b * a.h + h;
    x.q = (const float *)in[0] + bh * a.tq * a.d;
    x.k = (const float *)in[1] + bh * a.tk * a.d;
    x.v = (const float *)in[2] + bh * a.tk * a.e;
    kiln_attn_mask_strides(n, x.mst);
    const kiln_node *m = kiln_attn_mask(n);
    if (m)
        x.mask = (const float *)in[n->op == KILN_OP_ATTENTION ? 3 : 5] +
                 b * x.mst[0] + h * x.mst[1];
    return x;
}

/* Score of query i and key j: scale q_i . k_j + mask; -inf when causal
   masking hides key j. */
static double score(const head *x, int64_t i, int64_t j)
{
    if (x->causal && j > i)
        return -INFINITY;
    double s = 0;
    for (int64_t c = 0; c < x->a.d; c++)
        s += (double)x->q[i * x->a.d + c] * x->k[j * x->a.d + c];
    s *= x->scale;
    if (x->mask)
        s += x->mask[i * x->mst[2] + j * x->mst[3]];
    return s;
}

/* The log-sum-exp of query i's scores (-inf when it sees no key). */
static double row_lse(const head *x, int64_t i)
{
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < x->a.tk; j++) {
        double s = score(x, i, j);
        m = s > m ? s : m;
    }
    if (m == -INFINITY)
        return m;
    for (int64_t j = 0; j < x->a.tk; j++)
        sum += exp(score(x, i, j) - m);
    return m + log(sum);
}

void kiln_ref_attention(const kiln_node *n, void *out, void *const *in)
{
    kiln_attn_dims a = kiln_attn_dims_of(n);
    for (int64_t b = 0; b < a.b; b++)
        for (int64_t h = 0; h < a.h; h++) {
            head x = head_of(n, in, b, h);
            float *o = (float *)out + b * kiln_attn_out_row(a) + h * a.tq * a.e,
                  *lse = (float *)out + b * kiln_attn_out_row(a) +
                         a.h * a.tq * a.e + h * a.tq;
            for (int64_t i = 0; i < a.tq; i++) {
                double l = row_lse(&x, i);
                float *oi = o + i * a.e;
                memset(oi, 0, (size_t)a.e * sizeof *oi);
                lse[i] = (float)l;
                for (int64_t j = 0; l != -INFINITY && j < a.tk; j++) {
                    float p = (float)exp(score(&x, i, j) - l);
                    for (int64_t c = 0; c < a.e; c++)
                        oi[c] += p * x.v[j * a.e + c];
                }
            }
        }
}

/* One query's share of the gradient: dq_i, and its terms of dk and dv.
   o, dout: its output row and that row's adjoint, dlse its log-sum-exp's
   adjoint. */
static void query_grad(const head *x, int64_t i, const float *o,
                       const float *dout, float lse, float dlse, float *dq,
                       float *dk, float *dv)
{
    kiln_attn_dims a = x->a;
    double di = 0;
    for (int64_t c = 0; c < a.e; c++)
        di += (double)dout[c] * o[c];
    for (int64_t j = 0; lse != -INFINITY && j < a.tk; j++) {
        double p = exp(score(x, i, j) - lse), dp = 0;
        for (int64_t c = 0; c < a.e; c++)
            dp += (double)dout[c] * x->v[j * a.e + c];
        float ds = (float)(p * (dp - di + dlse) * x->scale);
        for (int64_t c = 0; c < a.e; c++)
            dv[j * a.e + c] += (float)p * dout[c];
        for (int64_t c = 0; c < a.d; c++) {
            dq[c] += ds * x->k[j * a.d + c];
            dk[j * a.d + c] += ds * x->q[i * a.d + c];
        }
    }
}

void kiln_ref_attention_grad(const kiln_node *n, void *out, void *const *in)
{
    kiln_attn_dims a = kiln_attn_dims_of(n);
    memset(out, 0, (size_t)(a.b * kiln_attn_grad_row(a)) * sizeof(float));
    for (int64_t b = 0; b < a.b; b++)
        for (int64_t h = 0; h < a.h; h++) {
            head x = head_of(n, in, b, h);
            int64_t fwd = b * kiln_attn_out_row(a),
                    lse_at = fwd + a.h * a.tq * a.e + h * a.tq;
            const float *o = (const float *)in[3] + fwd + h * a.tq * a.e,
                        *dout = (const float *)in[4] + fwd + h * a.tq * a.e,
                        *lse = (const float *)in[3] + lse_at,
                        *dlse = (const float *)in[4] + lse_at;
            float *g = (float *)out + b * kiln_attn_grad_row(a);
            float *dq = g + h * a.tq * a.d,
                  *dk = g + a.h * a.tq * a.d + h * a.tk * a.d,
                  *dv = g + a.h * (a.tq + a.tk) * a.d + h * a.tk * a.e;
            for (int64_t i = 0; i < a.tq; i++)
                query_grad(&x, i, o + i * a.e, dout + i * a.e, lse[i], dlse[i],
                           dq + i * a.d, dk, dv);
        }
}

/* 1 / sqrt(mean(x^2) + eps) of a row of len. */
static double row_rstd(const float *x, int64_t len, float eps)
{
    double ss = 0;
    for (int64_t j = 0; j < len; j++)
        ss += (double)x[j] * x[j];
    return 1.0 / sqrt(ss / (double)len + eps);
}

void kiln_ref_rms_norm(const kiln_node *n, void *out, void *const *in)
{
    int64_t rows, len;
    kiln_norm_rows(n, &rows, &len);
    const float *x = in[0];
    float *y = out;
    for (int64_t i = 0; i < rows; i++) {
        double r = row_rstd(x + i * len, len, n->at.value);
        for (int64_t j = 0; j < len; j++)
            y[i * len + j] = (float)(x[i * len + j] * r);
    }
}

void kiln_ref_rms_norm_grad(const kiln_node *n, void *out, void *const *in)
{
    int64_t rows, len;
    kiln_norm_rows(n, &rows, &len);
    const float *x = in[0], *dy = in[1];
    float *dx = out;
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * len, *di = dy + i * len;
        double r = row_rstd(xi, len, n->at.value), m = 0;
        for (int64_t j = 0; j < len; j++)
            m += (double)di[j] * xi[j];
        m /= (double)len;
        for (int64_t j = 0; j < len; j++)
            dx[i * len + j] = (float)(r * di[j] - r * r * r * m * xi[j]);
    }
}
