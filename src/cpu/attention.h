/* The attention group's kernels: references (attention_ref.c) and fast
   versions (fast_attention.c, fast_rms_norm.c), with what both share. */
#ifndef KILN_CPU_ATTENTION_H
#define KILN_CPU_ATTENTION_H

#include "cpu/kernels.h"
#include "graph/attention.h"

/* Element strides of an attention node's mask over [B,H,Tq,Tk] (0 on its
   size-1 dims), all 0 without a mask. */
static inline void kiln_attn_mask_strides(const kiln_node *n, int64_t *st)
{
    const kiln_node *m = kiln_attn_mask(n);
    int64_t s = 1;
    for (int i = 3; i >= 0; i--) {
        int64_t d = m ? m->shape.d[i] : 1;
        st[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

/* The view of one (batch, head) of an attention or attention_grad node's
   operands and results. */
typedef struct kiln_attn_head {
    kiln_attn_dims a;
    const float *q, *k, *v, *mask; /* mask at [b,h,0,0] (NULL: none) */
    int64_t mst[4];
    float scale;
    int causal;
    /* attention: o [tq,e] and lse [tq] written; attention_grad: read,
       with their adjoints do, dlse, and dq, dk, dv written */
    float *o, *lse, *dq, *dk, *dv;
    const float *o_in, *lse_in, *dout, *dlse;
} kiln_attn_head;

static inline kiln_attn_head kiln_attn_head_of(const kiln_node *n, void *out,
                                               void *const *in, int64_t b,
                                               int64_t h)
{
    kiln_attn_head x = {.a = kiln_attn_dims_of(n),
                        .scale = n->at.value,
                        .causal = n->at.causal};
    kiln_attn_dims a = x.a;
    int64_t bh = b * a.h + h, fwd = b * kiln_attn_out_row(a),
            lse_at = fwd + a.h * a.tq * a.e + h * a.tq,
            o_at = fwd + h * a.tq * a.e;
    int grad = n->op == KILN_OP_ATTENTION_GRAD;
    x.q = (const float *)in[0] + bh * a.tq * a.d;
    x.k = (const float *)in[1] + bh * a.tk * a.d;
    x.v = (const float *)in[2] + bh * a.tk * a.e;
    kiln_attn_mask_strides(n, x.mst);
    if (kiln_attn_mask(n))
        x.mask = (const float *)in[grad ? 5 : 3] + b * x.mst[0] + h * x.mst[1];
    if (!grad) {
        x.o = (float *)out + o_at;
        x.lse = (float *)out + lse_at;
        return x;
    }
    x.o_in = (const float *)in[3] + o_at;
    x.lse_in = (const float *)in[3] + lse_at;
    x.dout = (const float *)in[4] + o_at;
    x.dlse = (const float *)in[4] + lse_at;
    float *g = (float *)out + b * kiln_attn_grad_row(a);
    x.dq = g + h * a.tq * a.d;
    x.dk = g + a.h * a.tq * a.d + h * a.tk * a.d;
    x.dv = g + a.h * (a.tq + a.tk) * a.d + h * a.tk * a.e;
    return x;
}

/* Rows and row length of an rms_norm node's input: its normalised axes
   are the trailing ones. */
static inline void kiln_norm_rows(const kiln_node *n, int64_t *rows,
                                  int64_t *len)
{
    kiln_shape s = n->in[0]->shape;
    *rows = *len = 1;
    for (int i = 0; i < s.ndim; i++)
        *((n->at.axes >> i) & 1u ? len : rows) *= s.d[i];
}

#define KILN_ATTENTION_KERNEL(name)                                            \
    void name(const kiln_node *n, void *out, void *const *in);
KILN_ATTENTION_KERNEL(kiln_ref_attention)
KILN_ATTENTION_KERNEL(kiln_ref_attention_grad)
KILN_ATTENTION_KERNEL(kiln_ref_rms_norm)
KILN_ATTENTION_KERNEL(kiln_ref_rms_norm_grad)
#undef KILN_ATTENTION_KERNEL

#endif
