/* Reference kernels of the attention group: plain loops that recompute
   each score where they need it (no score matrix, no allocation), in
   double where they sum.  A query that sees no key (every score -inf, or
   no key at all) gets a zero output row and log-sum-exp -inf, and passes
   no gradient. */
#include <math.h>
#include <string.h>

#include "cpu/attention.h"

/* Score of query i and key j: scale q_i . k_j + mask; -inf when causal
   masking hides key j. */
static double score(const kiln_attn_head *x, int64_t i, int64_t j)
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
static double row_lse(const kiln_attn_head *x, int64_t i)
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
            kiln_attn_head x = kiln_attn_head_of(n, out, in, b, h);
            for (int64_t i = 0; i < a.tq; i++) {
                double l = row_lse(&x, i);
                float *oi = x.o + i * a.e;
                memset(oi, 0, (size_t)a.e * sizeof *oi);
                x.lse[i] = (float)l;
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
static void query_grad(const kiln_attn_head *x, int64_t i, const float *o,
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
            kiln_attn_head x = kiln_attn_head_of(n, out, in, b, h);
            for (int64_t i = 0; i < a.tq; i++)
                query_grad(&x, i, x.o_in + i * a.e, x.dout + i * a.e,
                           x.lse_in[i], x.dlse[i], x.dq + i * a.d, x.dk, x.dv);
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
