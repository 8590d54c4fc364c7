/* Builders of the attention group: scaled dot-product attention on the
   fused attention op, the multi-head reshapes, rms_norm, and the nodes
   their gradient rules build. */
#include <float.h>
#include <math.h>

#include "graph/attention.h"
#include "graph/builders.h"

/* The mask as the op takes it: f32 additive, 4-D, broadcasting to
   [B,H,Tq,Tk] (full); 3-D inputs (three_d) take a mask of [B,Tq,Tk]. */
static kiln_node *attention_mask(kiln_graph *g, const char *fn, kiln_node *m,
                                 const int64_t *full, int three_d)
{
    char b[SHAPE_BUF];
    kiln_shape s = m->shape;
    int nd = three_d ? 3 : 4;
    if (m->dtype != KILN_F32 && m->dtype != KILN_I32)
        return kiln_graph_fail(g, KILN_ERR_DTYPE,
                               "%s: mask has dtype %s, expected f32 (added) "
                               "or i32 (boolean)",
                               fn, kiln_dtype_name(m->dtype));
    kiln_shape s4 = {.ndim = 4, .d = {1, 1, 1, 1}};
    int ok = s.ndim <= nd;
    for (int i = 0; ok && i < s.ndim; i++) {
        int at = 4 - s.ndim + i; /* right-aligned against [B,H,Tq,Tk] */
        if (three_d && i == 0 && s.ndim == 3)
            at = 0; /* [B,Tq,Tk]: the batch skips the head axis */
        s4.d[at] = s.d[i];
        ok = s.d[i] == 1 || s.d[i] == full[at];
    }
    if (!ok)
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE,
            "%s: mask %s does not broadcast to [B,H,Tq,Tk] = "
            "[%lld,%lld,%lld,%lld]",
            fn, S(s, b), (long long)full[0], (long long)full[1],
            (long long)full[2], (long long)full[3]);
    if (m->dtype == KILN_I32)
        m = kiln_select(g, kiln_cast(g, m, KILN_F32), kiln_scalar(g, 0.0f),
                        kiln_scalar(g, -INFINITY));
    return kiln_reshape(g, m, s4);
}

/* q, k, v f32 and all 3-D or all 4-D; else records why. */
static int check_qkv(kiln_graph *g, const char *fn, kiln_node *q, kiln_node *k,
                     kiln_node *v)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    if (!kiln_graph_check(g, fn, q) || !kiln_graph_check(g, fn, k) ||
        !kiln_graph_check(g, fn, v) || !check_f32(g, fn, q) ||
        !check_f32(g, fn, k) || !check_f32(g, fn, v))
        return 0;
    int nd = q->shape.ndim;
    if ((nd != 3 && nd != 4) || k->shape.ndim != nd || v->shape.ndim != nd) {
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: q %s, k %s, v %s: expected all 4-D [B,H,T,D] "
                        "or all 3-D [B,T,D]",
                        fn, S(q->shape, b1), S(k->shape, b2), S(v->shape, b3));
        return 0;
    }
    return 1;
}

/* x with a head axis of 1 inserted after the batch. */
static kiln_node *add_head_axis(kiln_graph *g, kiln_node *x)
{
    kiln_shape s = KILN_SHAPE(x->shape.d[0], 1, x->shape.d[1], x->shape.d[2]);
    return kiln_reshape(g, x, s);
}

kiln_node *kiln_scaled_dot_product_attention(kiln_graph *g, kiln_node *q,
                                             kiln_node *k, kiln_node *v,
                                             kiln_node *mask,
                                             const kiln_attention_options *opt)
{
    const char *fn = "kiln_scaled_dot_product_attention";
    if (!g)
        return kiln_null_graph(fn);
    if (!check_qkv(g, fn, q, k, v) || (mask && !kiln_graph_check(g, fn, mask)))
        return &g->poison;
    if (opt && !isfinite(opt->scale))
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: scale %g is not finite",
                               fn, (double)opt->scale);
    int three_d = q->shape.ndim == 3;
    kiln_node *in[4] = {q, k, v, NULL};
    if (three_d)
        for (int i = 0; i < 3; i++)
            in[i] = add_head_axis(g, in[i]);
    kiln_shape s = in[0]->shape;
    int64_t full[4] = {s.d[0], s.d[1], s.d[2], in[1]->shape.d[2]};
    if (mask && !(in[3] = attention_mask(g, fn, mask, full, three_d)))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_ATTENTION, .n_in = mask ? 4 : 3, .in = in};
    float scale = opt ? opt->scale : 0.0f;
    p.at.value = scale != 0.0f ? scale : 1.0f / sqrtf((float)s.d[3]);
    p.at.causal = opt && opt->causal;
    kiln_node *out = kiln_node_build(g, fn, &p);
    if (g->status != KILN_OK)
        return &g->poison;
    kiln_attn_dims a = kiln_attn_dims_of(out);
    kiln_shape os =
        three_d ? KILN_SHAPE(a.b, a.tq, a.e) : KILN_SHAPE(a.b, a.h, a.tq, a.e);
    return kiln_attention_unpack(g, out, 0, a.h * a.tq * a.e, os);
}

kiln_node *kiln_split_heads(kiln_graph *g, kiln_node *x, int heads)
{
    const char *fn = "kiln_split_heads";
    char b[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    kiln_shape s = x->shape;
    if (s.ndim != 3 || heads < 1 || s.d[2] % heads)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: x %s: expected [B,T,H*D] with H = %d", fn,
                               S(s, b), heads);
    kiln_node *r =
        kiln_reshape(g, x, KILN_SHAPE(s.d[0], s.d[1], heads, s.d[2] / heads));
    return kiln_permute(g, r, (const int[]){0, 2, 1, 3});
}

kiln_node *kiln_merge_heads(kiln_graph *g, kiln_node *x)
{
    const char *fn = "kiln_merge_heads";
    char b[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    kiln_shape s = x->shape;
    if (s.ndim != 4)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: x %s: expected [B,H,T,D]", fn, S(s, b));
    kiln_node *p = kiln_permute(g, x, (const int[]){0, 2, 1, 3});
    return kiln_reshape(g, p, KILN_SHAPE(s.d[0], s.d[2], s.d[1] * s.d[3]));
}

kiln_node *kiln_rms_norm(kiln_graph *g, kiln_node *x, int ndims,
                         kiln_node *weight, float eps)
{
    const char *fn = "kiln_rms_norm";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x) ||
        (weight &&
         (!kiln_graph_check(g, fn, weight) || !check_f32(g, fn, weight))))
        return &g->poison;
    /* a negative eps asks for the default; NaN or inf would make every
       output NaN or 0 */
    if (!isfinite(eps))
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: eps %g is not finite", fn,
                               (double)eps);
    int nd = x->shape.ndim;
    if (ndims < 1 || ndims > nd)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: x %s: ndims %d outside [1, %d]", fn,
                               S(x->shape, b1), ndims, nd);
    if (weight) {
        int ok = weight->shape.ndim == ndims;
        for (int i = 0; ok && i < ndims; i++)
            ok = weight->shape.d[i] == x->shape.d[nd - ndims + i];
        if (!ok)
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE, "%s: weight %s is not x %s's last %d dims",
                fn, S(weight->shape, b1), S(x->shape, b2), ndims);
    }
    kiln_node p = {.op = KILN_OP_RMS_NORM, .n_in = 1, .in = &x};
    p.at.axes = ((1u << ndims) - 1) << (nd - ndims);
    p.at.value = eps < 0 ? FLT_EPSILON : eps;
    kiln_node *y = kiln_node_build(g, fn, &p);
    return weight ? kiln_mul(g, y, weight) : y;
}

/* ------------------------------------------------ for the gradient rules */

kiln_node *kiln_attention_grad_node(kiln_graph *g, const kiln_node *n,
                                    kiln_node *adj)
{
    kiln_node *in[6] = {n->in[0], n->in[1],
                        n->in[2], (kiln_node *)n,
                        adj,      n->n_in > 3 ? n->in[3] : NULL};
    kiln_node p = {.op = KILN_OP_ATTENTION_GRAD, .n_in = n->n_in + 2, .in = in};
    p.at.value = n->at.value;
    p.at.causal = n->at.causal;
    return kiln_node_build(g, "grad", &p);
}

kiln_node *kiln_attention_unpack(kiln_graph *g, kiln_node *packed, int64_t lo,
                                 int64_t len, kiln_shape s)
{
    int64_t b = packed->shape.d[0];
    kiln_node *part = kiln_slice(g, packed, (const int64_t[]){0, lo},
                                 (const int64_t[]){b, lo + len});
    return kiln_reshape(g, part, s);
}

kiln_node *kiln_rms_norm_grad_node(kiln_graph *g, const kiln_node *n,
                                   kiln_node *x, kiln_node *dy)
{
    kiln_node *in[2] = {x, dy};
    kiln_node p = {.op = KILN_OP_RMS_NORM_GRAD, .n_in = 2, .in = in};
    p.at.axes = n->at.axes;
    p.at.value = n->at.value;
    return kiln_node_build(g, "grad", &p);
}
