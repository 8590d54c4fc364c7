/* Shape and dtype rules of the indexing ops (ops.def, issue 12's block):
   PyTorch's checks of index_select, index_add_, gather and scatter_add_,
   with i32 indices.  Index values are checked when the kernel runs
   (cpu/check.c). */
#include "graph/builders.h"
#include "graph/index.h"

static kiln_status check_axis(const kiln_node *n, char *why, size_t len)
{
    kiln_shape x = n->in[0]->shape;
    if (n->at.axis < 0 || n->at.axis >= x.ndim)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "axis %d out of range for %d dims", n->at.axis,
                              x.ndim);
    if (n->in[1]->dtype != KILN_I32)
        return kiln_infer_why(why, len, KILN_ERR_DTYPE,
                              "indices have dtype %s, expected i32",
                              kiln_dtype_name(n->in[1]->dtype));
    return KILN_OK;
}

/* x's dtype is f32 or i32 (a copy of 4-byte values); the adding ops and
   their src take f32. */
static kiln_status check_values(const kiln_node *n, char *why, size_t len)
{
    kiln_dtype dt = n->in[0]->dtype;
    if (n->n_in == 3)
        return kiln_infer_f32(n, 0, 1, why, len) != KILN_OK
                   ? kiln_infer_f32(n, 0, 1, why, len)
                   : kiln_infer_f32(n, 2, 1, why, len);
    if (dt != KILN_F32 && dt != KILN_I32)
        return kiln_infer_why(why, len, KILN_ERR_DTYPE,
                              "operand has dtype %s, expected f32 or i32",
                              kiln_dtype_name(dt));
    return KILN_OK;
}

static kiln_status check_operands(const kiln_node *n, char *why, size_t len)
{
    kiln_status st = check_axis(n, why, len);
    return st != KILN_OK ? st : check_values(n, why, len);
}

/* numpy.take's shape: x's axis replaced by the indices' dims (one for
   index_select's [K], none for 0-d indices). */
static kiln_status selected(const kiln_node *n, kiln_shape *s, char *why,
                            size_t len)
{
    kiln_shape x = n->in[0]->shape, idx = n->in[1]->shape;
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    int a = n->at.axis;
    if (x.ndim - 1 + idx.ndim > KILN_MAX_DIMS)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "indices %s into %s give more than %d dims",
                              S(idx, b1), S(x, b2), KILN_MAX_DIMS);
    *s = (kiln_shape){.ndim = x.ndim - 1 + idx.ndim};
    for (int d = 0; d < s->ndim; d++)
        s->d[d] = d < a              ? x.d[d]
                  : d < a + idx.ndim ? idx.d[d - a]
                                     : x.d[d - idx.ndim + 1];
    return KILN_OK;
}

kiln_status kiln_infer_index_select(const kiln_node *n, kiln_shape *s,
                                    kiln_dtype *dt, char *why, size_t len)
{
    kiln_status st = check_operands(n, why, len);
    *dt = n->in[0]->dtype;
    return st != KILN_OK ? st : selected(n, s, why, len);
}

kiln_status kiln_infer_index_add(const kiln_node *n, kiln_shape *s,
                                 kiln_dtype *dt, char *why, size_t len)
{
    kiln_status st = check_operands(n, why, len);
    kiln_shape want, src = n->in[2]->shape;
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF], b4[SHAPE_BUF];
    *dt = KILN_F32;
    *s = n->in[0]->shape;
    if (st == KILN_OK)
        st = selected(n, &want, why, len);
    if (st == KILN_OK && !kiln_shape_equal(want, src))
        st = kiln_infer_why(why, len, KILN_ERR_SHAPE,
                            "source %s for %s with indices %s along axis %d: "
                            "want %s",
                            S(src, b1), S(*s, b2), S(n->in[1]->shape, b3),
                            n->at.axis, S(want, b4));
    return st;
}

/* idx has x's rank and is no larger than x on the other axes (and no
   larger than src on any, when there is one), as PyTorch requires. */
static kiln_status fits(const kiln_node *n, char *why, size_t len)
{
    kiln_shape x = n->in[0]->shape, idx = n->in[1]->shape;
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    int bad = idx.ndim != x.ndim;
    for (int d = 0; !bad && d < x.ndim; d++)
        bad = (d != n->at.axis && idx.d[d] > x.d[d]) ||
              (n->n_in == 3 && idx.d[d] > n->in[2]->shape.d[d]);
    if (n->n_in == 3 && n->in[2]->shape.ndim != x.ndim)
        bad = 1;
    if (!bad)
        return KILN_OK;
    if (n->n_in == 3)
        return kiln_infer_why(
            why, len, KILN_ERR_SHAPE,
            "indices %s and source %s for %s along axis %d: the indices "
            "need its rank and no larger size than the source on any axis, "
            "nor than the input but on the axis",
            S(idx, b1), S(n->in[2]->shape, b2), S(x, b3), n->at.axis);
    return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                          "indices %s for %s along axis %d: want its rank and "
                          "no larger size on the other axes",
                          S(idx, b1), S(x, b2), n->at.axis);
}

kiln_status kiln_infer_gather(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    kiln_status st = check_operands(n, why, len);
    *dt = n->in[0]->dtype;
    *s = n->in[1]->shape;
    return st != KILN_OK ? st : fits(n, why, len);
}

kiln_status kiln_infer_scatter_add(const kiln_node *n, kiln_shape *s,
                                   kiln_dtype *dt, char *why, size_t len)
{
    kiln_status st = check_operands(n, why, len);
    *dt = KILN_F32;
    *s = n->in[0]->shape;
    return st != KILN_OK ? st : fits(n, why, len);
}
