/* Argument checks shared by the op builders. */
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
