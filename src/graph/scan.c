/* Builders and shape rules of cumsum, prod and topk (PyTorch's
   torch.cumsum, torch.prod over axes, torch.topk with largest and sorted
   set). */
#include "graph/builders.h"
#include "graph/index.h"

kiln_status kiln_infer_cumsum(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    *s = n->in[0]->shape;
    *dt = KILN_F32;
    if (n->at.axis < 0 || n->at.axis >= s->ndim)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "axis %d out of range for %d dims", n->at.axis,
                              s->ndim);
    return kiln_infer_f32(n, 0, 1, why, len);
}

kiln_status kiln_infer_topk(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                            char *why, size_t len)
{
    kiln_status st = kiln_infer_cumsum(n, s, dt, why, len);
    char b[SHAPE_BUF];
    *dt = KILN_I32;
    if (st != KILN_OK)
        return st;
    if (n->at.depth < 0 || n->at.depth > s->d[n->at.axis])
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "k = %d is outside [0, %lld] (axis %d of %s)",
                              n->at.depth, (long long)s->d[n->at.axis],
                              n->at.axis, S(*s, b));
    s->d[n->at.axis] = n->at.depth;
    return KILN_OK;
}

kiln_node *kiln_cumsum_op(kiln_graph *g, kiln_node *x, int axis)
{
    kiln_node p = {.op = KILN_OP_CUMSUM, .n_in = 1, .in = &x};
    p.at.axis = axis;
    return kiln_node_build(g, "kiln_cumsum", &p);
}

kiln_node *kiln_cumsum(kiln_graph *g, kiln_node *x, int axis)
{
    const char *fn = "kiln_cumsum";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    int a = norm_axis(g, fn, axis, x->shape.ndim);
    return a < 0 ? &g->poison : kiln_cumsum_op(g, x, a);
}

kiln_node *kiln_prod(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims)
{
    const char *fn = "kiln_prod";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    return kiln_reduce_op(g, KILN_OP_PROD, x, axes, keepdims, fn);
}

kiln_status kiln_topk(kiln_graph *g, kiln_node *x, int k, int axis,
                      kiln_node **values, kiln_node **indices)
{
    const char *fn = "kiln_topk";
    if (!g)
        return kiln_null_arg(fn, "graph");
    if (!values || !indices) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: values or indices is NULL", fn);
        return g->status;
    }
    *values = *indices = &g->poison;
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return g->status;
    int a = norm_axis(g, fn, axis, x->shape.ndim);
    if (a < 0)
        return g->status;
    kiln_node p = {.op = KILN_OP_TOPK, .n_in = 1, .in = &x};
    p.at.axis = a;
    p.at.depth = k;
    kiln_node *idx = kiln_node_build(g, fn, &p);
    kiln_node *v = kiln_index_op(g, KILN_OP_GATHER, x, a, idx, NULL, fn);
    if (g->status == KILN_OK) {
        *values = v;
        *indices = idx;
    }
    return g->status;
}
