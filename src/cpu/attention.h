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
