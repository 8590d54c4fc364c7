/* Builders of the indexing ops: PyTorch's index_select, index_add, gather
   and scatter_add with i32 indices, and the embedding lookup on
   index_select.  Shapes are checked here (graph/infer_index.c); index
   values when the kernel runs (cpu/check.c). */
#include "graph/builders.h"
#include "graph/index.h"

kiln_node *kiln_index_op(kiln_graph *g, kiln_op op, kiln_node *x, int axis,
                         kiln_node *idx, kiln_node *src, const char *fn)
{
    kiln_node *in[3] = {x, idx, src};
    kiln_node p = {.op = op, .n_in = src ? 3 : 2, .in = in};
    p.at.axis = axis;
    return kiln_node_build(g, fn, &p);
}

/* The public checks, then the op along the normalised axis. */
static kiln_node *build(kiln_graph *g, const char *fn, kiln_op op, kiln_node *x,
                        int axis, kiln_node *idx, kiln_node *src)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !kiln_graph_check(g, fn, idx) ||
        (src && !kiln_graph_check(g, fn, src)))
        return &g->poison;
    int a = norm_axis(g, fn, axis, x->shape.ndim);
    if (a < 0)
        return &g->poison;
    char b[SHAPE_BUF];
    if (op == KILN_OP_INDEX_SELECT || op == KILN_OP_INDEX_ADD) {
        if (idx->shape.ndim > 1)
            return kiln_graph_fail(g, KILN_ERR_SHAPE,
                                   "%s: indices %s must have at most one dim",
                                   fn, S(idx->shape, b));
        /* PyTorch keeps the axis for a 0-d index: one slice */
        if (idx->shape.ndim == 0)
            idx = kiln_reshape(g, idx, KILN_SHAPE(1));
    }
    return kiln_index_op(g, op, x, a, idx, src, fn);
}

kiln_node *kiln_index_select(kiln_graph *g, kiln_node *x, int axis,
                             kiln_node *idx)
{
    return build(g, "kiln_index_select", KILN_OP_INDEX_SELECT, x, axis, idx,
                 NULL);
}

kiln_node *kiln_index_add(kiln_graph *g, kiln_node *x, int axis, kiln_node *idx,
                          kiln_node *src)
{
    const char *fn = "kiln_index_add";
    return src || !g ? build(g, fn, KILN_OP_INDEX_ADD, x, axis, idx, src)
                     : kiln_graph_fail(g, KILN_ERR_ARG, "%s: src is NULL", fn);
}

kiln_node *kiln_gather(kiln_graph *g, kiln_node *x, int axis, kiln_node *idx)
{
    return build(g, "kiln_gather", KILN_OP_GATHER, x, axis, idx, NULL);
}

kiln_node *kiln_scatter_add(kiln_graph *g, kiln_node *x, int axis,
                            kiln_node *idx, kiln_node *src)
{
    const char *fn = "kiln_scatter_add";
    return src || !g ? build(g, fn, KILN_OP_SCATTER_ADD, x, axis, idx, src)
                     : kiln_graph_fail(g, KILN_ERR_ARG, "%s: src is NULL", fn);
}

/* The table's rows at ids of any shape, one index_select taking ids as
   they are (numpy.take), so a symbolic batch axis of ids stays one. */
kiln_node *kiln_embedding(kiln_graph *g, kiln_node *table, kiln_node *ids)
{
    const char *fn = "kiln_embedding";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, table) || !kiln_graph_check(g, fn, ids))
        return &g->poison;
    char b[SHAPE_BUF];
    if (table->shape.ndim != 2)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: table %s must be [num_embeddings, dim]", fn,
                               S(table->shape, b));
    return kiln_index_op(g, KILN_OP_INDEX_SELECT, table, 0, ids, NULL, fn);
}

int kiln_index_sym(const kiln_node *n, unsigned *sym)
{
    unsigned x = n->in[0]->shape.sym;
    int a = n->at.axis;
    switch (n->op) {
    case KILN_OP_INDEX_SELECT: {
        int k = n->in[1]->shape.ndim;
        unsigned low = (1u << a) - 1;
        *sym = (x & low) | n->in[1]->shape.sym << a | (x >> (a + 1)) << (a + k);
        return 1;
    }
    case KILN_OP_GATHER:
        *sym = n->in[1]->shape.sym;
        return 1;
    case KILN_OP_TOPK:
        *sym = x & ~(1u << a);
        return 1;
    default:
        return 0;
    }
}
