/* Shape rules of the attention group (ops.def): attention, its gradient,
   rms_norm and its gradient. */
#include "graph/attention.h"
#include "graph/builders.h"

/* q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,E] and the mask, 4-D with each dim
   1 or [B,H,Tq,Tk]'s, all f32; else why. */
static kiln_status check_qkv(const kiln_node *n, const kiln_node *mask,
                             char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    kiln_shape q = n->in[0]->shape, k = n->in[1]->shape, v = n->in[2]->shape;
    kiln_status st = kiln_infer_f32(n, 0, 3, why, len);
    if (st != KILN_OK)
        return st;
    if (q.ndim != 4 || k.ndim != 4 || v.ndim != 4 || k.d[0] != q.d[0] ||
        v.d[0] != q.d[0] || k.d[1] != q.d[1] || v.d[1] != q.d[1] ||
        k.d[3] != q.d[3] || v.d[2] != k.d[2])
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "q %s, k %s, v %s: expected [B,H,Tq,D], "
                              "[B,H,Tk,D] and [B,H,Tk,E]",
                              S(q, b1), S(k, b2), S(v, b3));
    if (!mask)
        return KILN_OK;
    kiln_shape m = mask->shape;
    int64_t full[4] = {q.d[0], q.d[1], q.d[2], k.d[2]};
    int ok = mask->dtype == KILN_F32 && m.ndim == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = m.d[i] == 1 || m.d[i] == full[i];
    if (!ok)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "mask %s%s does not broadcast to [%lld,%lld,"
                              "%lld,%lld] (4-D f32, each dim 1 or full)",
                              kiln_dtype_name(mask->dtype), S(m, b1),
                              (long long)full[0], (long long)full[1],
                              (long long)full[2], (long long)full[3]);
    return KILN_OK;
}

/* [B, row] for row = h * per_head, or why not (too large). */
static kiln_status packed_shape(kiln_shape q, int64_t h, int64_t per_head,
                                kiln_shape *s, char *why, size_t len)
{
    kiln_shape t = KILN_SHAPE(q.d[0], h, per_head);
    if (!kiln_shape_valid(t))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "the result [%lld, %lld x %lld] is too large",
                              (long long)q.d[0], (long long)h,
                              (long long)per_head);
    *s = KILN_SHAPE(q.d[0], h * per_head);
    s->sym = q.sym & 1u; /* the batch */
    return KILN_OK;
}

/* A per-head size a * b + c * d, each product and the sum checked. */
static int64_t head_size(int64_t a, int64_t b, int64_t c, int64_t d)
{
    kiln_shape x = KILN_SHAPE(a, b), y = KILN_SHAPE(c, d);
    int64_t sum;
    if (!kiln_shape_valid(x) || !kiln_shape_valid(y) ||
        !kiln_dim_add(a * b, c * d, &sum))
        return -1;
    return sum;
}

kiln_status kiln_infer_attention(const kiln_node *n, kiln_shape *s,
                                 kiln_dtype *dt, char *why, size_t len)
{
    *dt = KILN_F32;
    if (n->n_in != 3 && n->n_in != 4)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "takes q, k, v and an optional mask, not %d "
                              "operands",
                              n->n_in);
    kiln_status st = check_qkv(n, kiln_attn_mask(n), why, len);
    if (st != KILN_OK)
        return st;
    kiln_shape q = n->in[0]->shape;
    int64_t e = n->in[2]->shape.d[3];
    return packed_shape(q, q.d[1], head_size(q.d[2], e, q.d[2], 1), s, why,
                        len);
}

kiln_status kiln_infer_attention_grad(const kiln_node *n, kiln_shape *s,
                                      kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    *dt = KILN_F32;
    if (n->n_in != 5 && n->n_in != 6)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "takes q, k, v, the output, its adjoint and an "
                              "optional mask, not %d operands",
                              n->n_in);
    kiln_status st = check_qkv(n, kiln_attn_mask(n), why, len);
    if (st != KILN_OK)
        return st;
    kiln_attn_dims a = kiln_attn_dims_of(n);
    kiln_shape fwd;
    st = packed_shape(n->in[0]->shape, a.h, head_size(a.tq, a.e, a.tq, 1), &fwd,
                      why, len);
    if (st != KILN_OK)
        return st;
    kiln_shape o = n->in[3]->shape, d = n->in[4]->shape;
    if (!kiln_shape_equal(o, fwd) || !kiln_shape_equal(d, fwd) ||
        kiln_infer_f32(n, 3, 2, why, len) != KILN_OK)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "output %s and adjoint %s: expected f32%s",
                              S(o, b1), S(d, b2), S(fwd, b3));
    int64_t kv = head_size(a.tk, a.d, a.tk, a.e),
            dq = head_size(a.tq, a.d, 0, 0), row;
    if (kv < 0 || dq < 0 || !kiln_dim_add(dq, kv, &row))
        row = -1;
    return packed_shape(n->in[0]->shape, a.h, row, s, why, len);
}

/* x f32, its axes the last 1 to ndim axes. */
static kiln_status check_norm(const kiln_node *n, char *why, size_t len)
{
    kiln_status st = kiln_infer_f32(n, 0, n->n_in, why, len);
    int nd = n->in[0]->shape.ndim, ok = 0;
    for (int k = 1; k <= nd; k++)
        ok |= n->at.axes == ((1u << k) - 1) << (nd - k);
    if (st == KILN_OK && !ok)
        st = kiln_infer_why(why, len, KILN_ERR_ARG,
                            "axes 0x%x of %d dims: expected the last 1 to %d",
                            n->at.axes, nd, nd);
    return st;
}

kiln_status kiln_infer_rms_norm(const kiln_node *n, kiln_shape *s,
                                kiln_dtype *dt, char *why, size_t len)
{
    *s = n->in[0]->shape;
    *dt = KILN_F32;
    return check_norm(n, why, len);
}

kiln_status kiln_infer_rms_norm_grad(const kiln_node *n, kiln_shape *s,
                                     kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    *s = n->in[0]->shape;
    *dt = KILN_F32;
    if (!kiln_shape_equal(n->in[0]->shape, n->in[1]->shape))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE, "x %s and dy %s differ",
                              S(n->in[0]->shape, b1), S(n->in[1]->shape, b2));
    return check_norm(n, why, len);
}
