/* Argument checks shared by the op builders. */
#include <stdlib.h>

#include "graph/builders.h"

int kiln_graph_check_f32(kiln_graph *g, const char *fn, kiln_node *x)
{
    if (x->dtype == KILN_F32)
        return 1;
    kiln_graph_fail(
        g, KILN_ERR_DTYPE,
        "%s: operand %%%d has dtype %s, expected f32 (use kiln_cast)", fn,
        x->id, kiln_dtype_name(x->dtype));
    return 0;
}

int kiln_graph_norm_axis(kiln_graph *g, const char *fn, int axis, int ndim)
{
    if (axis < -ndim || axis >= ndim) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: axis %d out of range for %d dims",
                        fn, axis, ndim);
        return -1;
    }
    return axis < 0 ? axis + ndim : axis;
}

int kiln_graph_check_shape(kiln_graph *g, const char *fn, kiln_shape s)
{
    char b[SHAPE_BUF];
    const char *why = kiln_shape_size(s, 0, NULL, NULL);
    if (!why)
        return 1;
    if (s.ndim < 0 || s.ndim > KILN_MAX_DIMS)
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %d dims (at most %d)", fn,
                        s.ndim, KILN_MAX_DIMS);
    else
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: invalid shape %s: it %s", fn,
                        S(s, b), why);
    return 0;
}

int kiln_graph_check_dtype(kiln_graph *g, const char *fn, kiln_dtype dt)
{
    if (kiln_dtype_supported(dt))
        return 1;
    kiln_graph_fail(g, KILN_ERR_DTYPE, "%s: dtype %s is not supported", fn,
                    kiln_dtype_name(dt));
    return 0;
}

int kiln_graph_find_double_assign(const kiln_graph *g, int first,
                                  const unsigned char *live,
                                  const kiln_node **var)
{
    int n_assigns = 0;
    for (int id = first; id < g->n_nodes; id++)
        n_assigns += g->nodes[id]->op == KILN_OP_ASSIGN && (!live || live[id]);
    if (n_assigns < 2)
        return 0;
    unsigned char *seen = calloc((size_t)g->n_nodes, 1);
    if (!seen)
        return -1;
    int found = 0;
    for (int id = first; id < g->n_nodes && !found; id++) {
        const kiln_node *n = g->nodes[id];
        if (n->op != KILN_OP_ASSIGN || (live && !live[id]))
            continue;
        found = seen[n->in[0]->id];
        seen[n->in[0]->id] = 1;
        *var = n->in[0];
    }
    free(seen);
    return found;
}
