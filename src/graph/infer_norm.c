/* Shape and dtype rules of the normalisation and dropout ops (ops.def):
   used by their builders (graph/norm.c, graph/dropout.c) and by the
   validator alike. */
#include "graph/builders.h"
#include "graph/norm_view.h"

/* x is f32 with a channel axis and, with groups, C a multiple of them. */
static kiln_status check_view(const kiln_node *n, char *why, size_t len)
{
    kiln_shape x = n->in[0]->shape;
    kiln_norm_attr a = n->at.norm;
    char b[SHAPE_BUF];
    kiln_status st = kiln_infer_f32(n, 0, 1, why, len);
    if (st != KILN_OK)
        return st;
    if (a.axis < 0 || a.axis >= x.ndim)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "input %s has no channel axis %d", S(x, b),
                              a.axis);
    if (a.groups < 0 || (a.groups && x.d[a.axis] % a.groups))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "%lld channels of %s do not split into %d "
                              "groups",
                              (long long)x.d[a.axis], S(x, b), a.groups);
    if (!(a.eps >= 0.0f))
        return kiln_infer_why(why, len, KILN_ERR_ARG, "eps %g is not >= 0",
                              (double)a.eps);
    return KILN_OK;
}

/* The statistics' shape: [2, C], or [2, dims before axis, groups] with the
   symbolic marks of those dims. */
static kiln_shape stats_shape(kiln_shape x, kiln_norm_attr a)
{
    kiln_shape s = {.ndim = 2};
    s.d[0] = 2;
    if (!a.groups) {
        s.d[1] = x.d[a.axis];
        return s;
    }
    s.ndim = a.axis + 2;
    for (int d = 0; d < a.axis; d++)
        s.d[d + 1] = x.d[d];
    s.d[a.axis + 1] = a.groups;
    s.sym = (x.sym & ((1u << a.axis) - 1)) << 1;
    return s;
}

/* Input k of n is dt with shape want (symbolic marks aside). */
static kiln_status check_operand(const kiln_node *n, int k, kiln_dtype dt,
                                 kiln_shape want, const char *what, char *why,
                                 size_t len)
{
    const kiln_node *v = n->in[k];
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    int same = v->shape.ndim == want.ndim;
    for (int d = 0; same && d < want.ndim; d++)
        same = v->shape.d[d] == want.d[d];
    if (v->dtype == dt && same)
        return KILN_OK;
    return kiln_infer_why(
        why, len, v->dtype == dt ? KILN_ERR_SHAPE : KILN_ERR_DTYPE,
        "%s is %s%s, expected %s%s", what, kiln_dtype_name(v->dtype),
        S(v->shape, b1), kiln_dtype_name(dt), S(want, b2));
}

static kiln_shape channels(kiln_shape x, kiln_norm_attr a)
{
    return (kiln_shape){.ndim = 1, .d = {x.d[a.axis]}};
}

kiln_status kiln_infer_norm_stats(const kiln_node *n, kiln_shape *s,
                                  kiln_dtype *dt, char *why, size_t len)
{
    if (n->n_in != 1 && n->n_in != 4)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "takes x, or x, running mean, running variance "
                              "and mode: %d operands",
                              n->n_in);
    kiln_status st = check_view(n, why, len);
    if (st != KILN_OK)
        return st;
    kiln_shape x = n->in[0]->shape;
    if (n->n_in == 4) {
        kiln_shape c = channels(x, n->at.norm);
        if (n->at.norm.groups)
            return kiln_infer_why(why, len, KILN_ERR_ARG,
                                  "running statistics are per channel: "
                                  "groups must be 0");
        if ((st = check_operand(n, 1, KILN_F32, c, "running mean", why, len)) !=
                KILN_OK ||
            (st = check_operand(n, 2, KILN_F32, c, "running variance", why,
                                len)) != KILN_OK ||
            (st = check_operand(n, 3, KILN_I32, KILN_SCALAR, "mode", why,
                                len)) != KILN_OK)
            return st;
    }
    *s = stats_shape(x, n->at.norm);
    *dt = KILN_F32;
    return KILN_OK;
}

/* Operands x, stats (as norm_stats of x gives), then from first on
   channel-sized f32 parameters (count of them), then dy at k_dy (or -1). */
static kiln_status check_norm_operands(const kiln_node *n, int first, int count,
                                       int k_dy, char *why, size_t len)
{
    kiln_status st = check_view(n, why, len);
    if (st != KILN_OK)
        return st;
    kiln_shape x = n->in[0]->shape;
    if ((st = check_operand(n, 1, KILN_F32, stats_shape(x, n->at.norm),
                            "statistics", why, len)) != KILN_OK)
        return st;
    for (int k = first; k < first + count; k++)
        if ((st = check_operand(n, k, KILN_F32, channels(x, n->at.norm),
                                k == first ? "weight" : "bias", why, len)) !=
            KILN_OK)
            return st;
    if (k_dy >= 0)
        st = check_operand(n, k_dy, KILN_F32, x, "output gradient", why, len);
    return st;
}

kiln_status kiln_infer_norm(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                            char *why, size_t len)
{
    *s = n->in[0]->shape;
    *dt = KILN_F32;
    return check_norm_operands(n, 2, 2, -1, why, len);
}

kiln_status kiln_infer_norm_grad(const kiln_node *n, kiln_shape *s,
                                 kiln_dtype *dt, char *why, size_t len)
{
    *s = n->in[0]->shape;
    *dt = KILN_F32;
    if (n->n_in != 5 && n->n_in != 6)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "takes x, stats, weight, dy, mode and maybe "
                              "the parameter gradients: %d operands",
                              n->n_in);
    kiln_status st = check_norm_operands(n, 2, 1, 3, why, len);
    if (st == KILN_OK)
        st = check_operand(n, 4, KILN_I32, KILN_SCALAR, "mode", why, len);
    if (st != KILN_OK || n->n_in == 5)
        return st;
    if (n->at.norm.groups)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "parameter gradients stand for the statistics' "
                              "sums only per channel: groups must be 0");
    kiln_shape p = {.ndim = 2, .d = {2, n->in[0]->shape.d[n->at.norm.axis]}};
    return check_operand(n, 5, KILN_F32, p, "parameter gradients", why, len);
}

kiln_status kiln_infer_norm_param_grad(const kiln_node *n, kiln_shape *s,
                                       kiln_dtype *dt, char *why, size_t len)
{
    kiln_status st = check_norm_operands(n, 2, 0, 2, why, len);
    if (st != KILN_OK)
        return st;
    *s = (kiln_shape){.ndim = 2, .d = {2, n->in[0]->shape.d[n->at.norm.axis]}};
    *dt = KILN_F32;
    return KILN_OK;
}

kiln_status kiln_infer_dropout(const kiln_node *n, kiln_shape *s,
                               kiln_dtype *dt, char *why, size_t len)
{
    kiln_status st = kiln_infer_f32(n, 0, 1, why, len);
    kiln_shape x = n->in[0]->shape;
    char b[SHAPE_BUF];
    *s = x;
    *dt = KILN_F32;
    if (st != KILN_OK ||
        (st = check_operand(n, 1, KILN_I32, KILN_SHAPE(4), "key", why, len)) !=
            KILN_OK ||
        (st = check_operand(n, 2, KILN_I32, KILN_SCALAR, "mode", why, len)) !=
            KILN_OK)
        return st;
    kiln_random_attr r = n->at.random;
    if (!(r.p >= 0.0f && r.p < 1.0f))
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "p = %g is outside [0, 1)", (double)r.p);
    if (r.per_channel && x.ndim < 2)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "input %s has no channel axis", S(x, b));
    return KILN_OK;
}
