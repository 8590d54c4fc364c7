/* Named-axes ops lowered onto primitives: element-wise ops align by axis
   identity, dot pairs dual axes, reductions spare the batch axes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "axes/axes.h"

#define AXES_BUF 256

/* ---------------------------------------------------------------- element-wise
 */

/* a's axes followed by b's axes that a lacks; 0 (error recorded) when an
   axis has two lengths or the union has too many dims. */
static int axes_union(kiln_graph *g, const char *fn, const kiln_axes *a,
                      const kiln_axes *b, kiln_axes *out)
{
    char b1[AXES_BUF], b2[AXES_BUF];
    *out = *a;
    for (int i = 0; i < b->n; i++) {
        int j = kiln_axes_find(a, b->a[i]);
        if (j >= 0 && a->a[j].length != b->a[i].length) {
            kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: axis '%s' has length %lld in %s and %lld in %s", fn,
                b->a[i].name, (long long)a->a[j].length,
                kiln_axes_str(*a, b1, sizeof b1), (long long)b->a[i].length,
                kiln_axes_str(*b, b2, sizeof b2));
            return 0;
        }
        if (j >= 0)
            continue;
        if (out->n == KILN_MAX_DIMS) {
            kiln_graph_fail(g, KILN_ERR_SHAPE,
                            "%s: %s and %s give more than %d axes", fn,
                            kiln_axes_str(*a, b1, sizeof b1),
                            kiln_axes_str(*b, b2, sizeof b2), KILN_MAX_DIMS);
            return 0;
        }
        out->a[out->n++] = b->a[i];
    }
    return 1;
}

static kiln_ax *binary(kiln_graph *g, const char *fn,
                       kiln_node *(*op)(kiln_graph *, kiln_node *, kiln_node *),
                       kiln_ax *a, kiln_ax *b)
{
    if (!g)
        return kiln_null_graph(fn);
    kiln_axes out;
    if (!kiln_ax_check(g, fn, a) || !kiln_ax_check(g, fn, b) ||
        !axes_union(g, fn, &a->axes, &b->axes, &out))
        return kiln_ax_poison(g);
    kiln_node *n = op(g, kiln_ax_align(g, a, &out), kiln_ax_align(g, b, &out));
    kiln_ax *args[2] = {a, b};
    return kiln_ax_make(g, n, out, args, 2);
}

kiln_ax *kiln_ax_add(kiln_graph *g, kiln_ax *a, kiln_ax *b)
{
    return binary(g, "kiln_ax_add", kiln_add, a, b);
}

kiln_ax *kiln_ax_sub(kiln_graph *g, kiln_ax *a, kiln_ax *b)
{
    return binary(g, "kiln_ax_sub", kiln_sub, a, b);
}

kiln_ax *kiln_ax_mul(kiln_graph *g, kiln_ax *a, kiln_ax *b)
{
    return binary(g, "kiln_ax_mul", kiln_mul, a, b);
}

kiln_ax *kiln_ax_div(kiln_graph *g, kiln_ax *a, kiln_ax *b)
{
    return binary(g, "kiln_ax_div", kiln_div, a, b);
}

kiln_ax *kiln_ax_apply(kiln_graph *g,
                       kiln_node *(*op)(kiln_graph *, kiln_node *), kiln_ax *x)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!op) {
        kiln_graph_fail(g, KILN_ERR_ARG, "kiln_ax_apply: op is NULL");
        return kiln_ax_poison(g);
    }
    if (!kiln_ax_check(g, "kiln_ax_apply", x))
        return kiln_ax_poison(g);
    kiln_node *n = op(g, x->node);
    if (n && n->op != KILN_OP_ERROR &&
        !kiln_shape_equal(n->shape, x->node->shape)) {
        kiln_graph_fail(
            g, KILN_ERR_SHAPE,
            "kiln_ax_apply: %s changed the shape; wrap the result with "
            "kiln_ax_wrap instead",
            kiln_node_op_name(n));
        return kiln_ax_poison(g);
    }
    return kiln_ax_make(g, n ? n : &g->poison, x->axes, &x, 1);
}

kiln_ax *kiln_ax_neg(kiln_graph *g, kiln_ax *x)
{
    return kiln_ax_apply(g, kiln_neg, x);
}
kiln_ax *kiln_ax_exp(kiln_graph *g, kiln_ax *x)
{
    return kiln_ax_apply(g, kiln_exp, x);
}
kiln_ax *kiln_ax_log(kiln_graph *g, kiln_ax *x)
{
    return kiln_ax_apply(g, kiln_log, x);
}

kiln_ax *kiln_ax_sigmoid(kiln_graph *g, kiln_ax *x)
{
    return kiln_ax_apply(g, kiln_sigmoid, x);
}

/* ---------------------------------------------------------------- dot */

/* How dot splits the axes of a and b: shared (same axis in both, kept as a
   batch of products), contracted pairs (a's axis, b's axis one dual position
   higher), and the free axes of each. */
typedef struct dot_plan {
    int shared_a[KILN_MAX_DIMS], shared_b[KILN_MAX_DIMS], n_shared;
    int con_a[KILN_MAX_DIMS], con_b[KILN_MAX_DIMS], n_con;
    int free_a[KILN_MAX_DIMS], n_free_a, free_b[KILN_MAX_DIMS], n_free_b;
} dot_plan;

static int plan_dot(kiln_graph *g, const kiln_axes *A, const kiln_axes *B,
                    dot_plan *p)
{
    const char *fn = "kiln_ax_dot";
    char b1[AXES_BUF], b2[AXES_BUF];
    int used_b[KILN_MAX_DIMS] = {0};
    memset(p, 0, sizeof *p);
    for (int i = 0; i < A->n; i++) {
        int j = kiln_axes_find(B, kiln_axis_dual(A->a[i], 1));
        int k = kiln_axes_find(B, A->a[i]);
        if (j >= 0 && k >= 0) {
            kiln_graph_fail(g, KILN_ERR_ARG,
                            "%s: axis '%s' of %s both pairs with and equals an "
                            "axis of %s",
                            fn, A->a[i].name, kiln_axes_str(*A, b1, sizeof b1),
                            kiln_axes_str(*B, b2, sizeof b2));
            return 0;
        }
        int m = j >= 0 ? j : k;
        if (m >= 0 && A->a[i].length != B->a[m].length) {
            kiln_graph_fail(g, KILN_ERR_SHAPE,
                            "%s: %s . %s: axis '%s' has length %lld, its match "
                            "%lld",
                            fn, kiln_axes_str(*A, b1, sizeof b1),
                            kiln_axes_str(*B, b2, sizeof b2), A->a[i].name,
                            (long long)A->a[i].length,
                            (long long)B->a[m].length);
            return 0;
        }
        if (j >= 0) {
            p->con_a[p->n_con] = i;
            p->con_b[p->n_con++] = j;
        } else if (k >= 0) {
            p->shared_a[p->n_shared] = i;
            p->shared_b[p->n_shared++] = k;
        } else {
            p->free_a[p->n_free_a++] = i;
        }
        if (m >= 0)
            used_b[m] = 1;
    }
    for (int j = 0; j < B->n; j++)
        if (!used_b[j])
            p->free_b[p->n_free_b++] = j;
    if (p->n_con == 0) {
        /* with nothing to contract the matmul would be an elementwise (or
           outer) product: almost always a missing dual offset */
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "%s: %s . %s contracts no axis: give the first "
                        "operand the dual C - 1 (kiln_axis_dual(C, -1)) of "
                        "an axis C of the second, or use kiln_ax_mul for a "
                        "product without contraction",
                        fn, kiln_axes_str(*A, b1, sizeof b1),
                        kiln_axes_str(*B, b2, sizeof b2));
        return 0;
    }
    if (p->n_shared + p->n_free_a + p->n_free_b > KILN_MAX_DIMS) {
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %s . %s has more than %d axes",
                        fn, kiln_axes_str(*A, b1, sizeof b1),
                        kiln_axes_str(*B, b2, sizeof b2), KILN_MAX_DIMS);
        return 0;
    }
    return 1;
}

/* x permuted to the axis order idx[0..n-1] (no node when already in it). */
static kiln_node *permute_to(kiln_graph *g, kiln_node *x, const int *idx, int n)
{
    for (int i = 0; i < n; i++)
        if (idx[i] != i)
            return kiln_permute(g, x, idx);
    return x;
}

static int64_t product(const kiln_axes *axes, const int *idx, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= axes->a[idx[i]].length;
    return p;
}

static int concat_idx(int *dst, const int *a, int na, const int *b, int nb,
                      const int *c, int nc)
{
    memcpy(dst, a, (size_t)na * sizeof *dst);
    memcpy(dst + na, b, (size_t)nb * sizeof *dst);
    memcpy(dst + na + nb, c, (size_t)nc * sizeof *dst);
    return na + nb + nc;
}

kiln_ax *kiln_ax_dot(kiln_graph *g, kiln_ax *a, kiln_ax *b)
{
    const char *fn = "kiln_ax_dot";
    dot_plan p;
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_ax_check(g, fn, a) || !kiln_ax_check(g, fn, b) ||
        !plan_dot(g, &a->axes, &b->axes, &p))
        return kiln_ax_poison(g);
    /* a as [S, M, K] and b as [S, K, N], then one (batched) matmul. */
    int ia[KILN_MAX_DIMS], ib[KILN_MAX_DIMS];
    concat_idx(ia, p.shared_a, p.n_shared, p.free_a, p.n_free_a, p.con_a,
               p.n_con);
    concat_idx(ib, p.shared_b, p.n_shared, p.con_b, p.n_con, p.free_b,
               p.n_free_b);
    int64_t S = product(&a->axes, p.shared_a, p.n_shared);
    int64_t M = product(&a->axes, p.free_a, p.n_free_a);
    int64_t K = product(&a->axes, p.con_a, p.n_con);
    int64_t N = product(&b->axes, p.free_b, p.n_free_b);
    kiln_node *na = permute_to(g, a->node, ia, a->axes.n);
    kiln_node *nb = permute_to(g, b->node, ib, b->axes.n);
    kiln_node *mm;
    if (p.n_shared)
        mm = kiln_matmul(g, kiln_reshape(g, na, KILN_SHAPE(S, M, K)),
                         kiln_reshape(g, nb, KILN_SHAPE(S, K, N)), 0, 0);
    else
        mm = kiln_matmul(g, kiln_reshape(g, na, KILN_SHAPE(M, K)),
                         kiln_reshape(g, nb, KILN_SHAPE(K, N)), 0, 0);
    kiln_axes out = {0};
    for (int i = 0; i < p.n_shared; i++)
        out.a[out.n++] = a->axes.a[p.shared_a[i]];
    for (int i = 0; i < p.n_free_a; i++)
        out.a[out.n++] = a->axes.a[p.free_a[i]];
    for (int i = 0; i < p.n_free_b; i++)
        out.a[out.n++] = b->axes.a[p.free_b[i]];
    kiln_shape s = {.ndim = out.n};
    for (int i = 0; i < out.n; i++)
        s.d[i] = out.a[i].length;
    kiln_ax *args[2] = {a, b};
    return kiln_ax_make(g, kiln_reshape(g, mm, s), out, args, 2);
}

/* ---------------------------------------------------------------- reductions
 */

static kiln_ax *reduce(kiln_graph *g, const char *fn, kiln_ax *x,
                       const kiln_axes *out_axes, int mean)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_ax_check(g, fn, x))
        return kiln_ax_poison(g);
    kiln_axes keep = {0};
    if (out_axes) {
        keep = *out_axes;
        for (int i = 0; i < keep.n; i++) {
            int j = kiln_axes_find(&x->axes, keep.a[i]);
            if (j < 0 || x->axes.a[j].length != keep.a[i].length ||
                kiln_axes_find(&keep, keep.a[i]) != i) {
                char b1[AXES_BUF], b2[AXES_BUF];
                kiln_graph_fail(g, KILN_ERR_ARG,
                                "%s: out_axes %s are not distinct axes of %s",
                                fn, kiln_axes_str(keep, b1, sizeof b1),
                                kiln_axes_str(x->axes, b2, sizeof b2));
                return kiln_ax_poison(g);
            }
        }
    } else {
        for (int i = 0; i < x->axes.n; i++)
            if (x->axes.a[i].batch)
                keep.a[keep.n++] = x->axes.a[i];
    }
    unsigned mask = 0;
    kiln_ax remaining = {.node = x->node};
    int64_t count = 1;
    for (int i = 0; i < x->axes.n; i++) {
        if (kiln_axes_find(&keep, x->axes.a[i]) < 0) {
            mask |= 1u << i;
            count *= x->axes.a[i].length;
        } else {
            remaining.axes.a[remaining.axes.n++] = x->axes.a[i];
        }
    }
    if (mask)
        remaining.node = kiln_sum(g, x->node, mask, 0);
    kiln_node *n = kiln_ax_align(g, &remaining, &keep);
    if (mean)
        n = kiln_scale(g, n, count ? 1.0f / (float)count : NAN);
    return kiln_ax_make(g, n, keep, &x, 1);
}

kiln_ax *kiln_ax_sum(kiln_graph *g, kiln_ax *x, const kiln_axes *out_axes)
{
    return reduce(g, "kiln_ax_sum", x, out_axes, 0);
}

kiln_ax *kiln_ax_mean(kiln_graph *g, kiln_ax *x, const kiln_axes *out_axes)
{
    return reduce(g, "kiln_ax_mean", x, out_axes, 1);
}

static kiln_ax *size_of(kiln_graph *g, const char *fn, kiln_ax *x,
                        int batch_only)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_ax_check(g, fn, x))
        return kiln_ax_poison(g);
    int64_t n = 1;
    for (int i = 0; i < x->axes.n; i++)
        if (!batch_only || x->axes.a[i].batch)
            n *= x->axes.a[i].length;
    return kiln_ax_scalar(g, (float)n);
}

kiln_ax *kiln_ax_batch_size(kiln_graph *g, kiln_ax *x)
{
    return size_of(g, "kiln_ax_batch_size", x, 1);
}

kiln_ax *kiln_ax_tensor_size(kiln_graph *g, kiln_ax *x)
{
    return size_of(g, "kiln_ax_tensor_size", x, 0);
}

/* ---------------------------------------------------------------- losses */

/* ngraph's safelog: log(max(x, e^-50)). */
static kiln_ax *safelog(kiln_graph *g, kiln_ax *x)
{
    return kiln_ax_log(g, binary(g, "kiln_ax_cross_entropy_binary", kiln_max, x,
                                 kiln_ax_scalar(g, expf(-50.0f))));
}

kiln_ax *kiln_ax_cross_entropy_binary(kiln_graph *g, kiln_ax *y_hat, kiln_ax *y,
                                      const kiln_axes *out_axes)
{
    const char *fn = "kiln_ax_cross_entropy_binary";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_ax_check(g, fn, y_hat) || !kiln_ax_check(g, fn, y))
        return kiln_ax_poison(g);
    kiln_ax *one = kiln_ax_scalar(g, 1.0f);
    kiln_ax *ce = kiln_ax_neg(
        g, kiln_ax_add(g, kiln_ax_mul(g, y, safelog(g, y_hat)),
                       kiln_ax_mul(g, kiln_ax_sub(g, one, y),
                                   safelog(g, kiln_ax_sub(g, one, y_hat)))));
    if (y_hat->node->op == KILN_OP_SIGMOID) {
        /* As ngraph does for a sigmoid, the gradient with respect to the
           logits z is y_hat - y exactly, also where the clipped logs
           saturate: the value stays ce, the gradient comes from d * z. */
        kiln_ax *z =
            kiln_ax_make(g, y_hat->node->in[0], y_hat->axes, &y_hat, 1);
        kiln_ax *d =
            kiln_ax_sub(g, kiln_ax_apply(g, kiln_stop_gradient, y_hat), y);
        kiln_ax *dz = kiln_ax_mul(g, d, z);
        ce = kiln_ax_add(
            g, kiln_ax_apply(g, kiln_stop_gradient, kiln_ax_sub(g, ce, dz)),
            dz);
    }
    return kiln_ax_sum(g, ce, out_axes);
}

/* ---------------------------------------------------------------- training */

kiln_ax *kiln_ax_deriv(kiln_graph *g, kiln_ax *loss, kiln_ax *v)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_ax_check(g, "kiln_ax_deriv", loss) ||
        !kiln_ax_check(g, "kiln_ax_deriv", v))
        return kiln_ax_poison(g);
    kiln_ax *args[2] = {loss, v};
    return kiln_ax_make(g, kiln_grad(g, loss->node, v->node), v->axes, args, 2);
}

kiln_ax *kiln_ax_assign(kiln_graph *g, kiln_ax *v, kiln_ax *value)
{
    const char *fn = "kiln_ax_assign";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_ax_check(g, fn, v) || !kiln_ax_check(g, fn, value))
        return kiln_ax_poison(g);
    int same = v->axes.n == value->axes.n;
    for (int i = 0; same && i < value->axes.n; i++) {
        int j = kiln_axes_find(&v->axes, value->axes.a[i]);
        same = j >= 0 && v->axes.a[j].length == value->axes.a[i].length;
    }
    if (!same) {
        char b1[AXES_BUF], b2[AXES_BUF];
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: variable %s, value %s: axes differ", fn,
                        kiln_axes_str(v->axes, b1, sizeof b1),
                        kiln_axes_str(value->axes, b2, sizeof b2));
        return kiln_ax_poison(g);
    }
    kiln_node *n = kiln_assign(g, v->node, kiln_ax_align(g, value, &v->axes));
    kiln_ax *args[2] = {v, value};
    return kiln_ax_make(g, n, v->axes, args, 2);
}

kiln_ax *kiln_ax_doall(kiln_graph *g, kiln_ax *const *xs, int n)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!xs || n < 1) {
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "kiln_ax_doall: needs at least one op");
        return kiln_ax_poison(g);
    }
    kiln_node **nodes = calloc((size_t)n, sizeof *nodes);
    if (!nodes) {
        kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_ax_doall: out of memory");
        return kiln_ax_poison(g);
    }
    int ok = 1;
    for (int i = 0; i < n && ok; i++)
        if ((ok = kiln_ax_check(g, "kiln_ax_doall", xs[i])))
            nodes[i] = xs[i]->node;
    kiln_ax *r =
        ok ? kiln_ax_make(g, kiln_doall(g, nodes, n), KILN_NO_AXES, xs, n)
           : kiln_ax_poison(g);
    free(nodes);
    return r;
}

/* Depth-first over the operands, recording each variable node once. */
static void collect_variables(const kiln_ax *x, kiln_ax **out, int max,
                              int *count, const void ***seen, int *n_seen,
                              int *cap_seen)
{
    const void *key = x->is_variable ? (const void *)x->node : (const void *)x;
    for (int i = 0; i < *n_seen; i++)
        if ((*seen)[i] == key)
            return;
    if (*n_seen == *cap_seen) {
        int cap = *cap_seen ? 2 * *cap_seen : 64;
        const void **s = realloc((void *)*seen, (size_t)cap * sizeof *s);
        if (!s)
            return;
        *seen = s;
        *cap_seen = cap;
    }
    (*seen)[(*n_seen)++] = key;
    if (x->is_variable) {
        if (*count < max)
            out[*count] = (kiln_ax *)x;
        ++*count;
        return;
    }
    for (int i = 0; i < x->n_args; i++)
        collect_variables(x->args[i], out, max, count, seen, n_seen, cap_seen);
}

int kiln_ax_variables(const kiln_ax *x, kiln_ax **out, int max)
{
    if (!x || x->node->op == KILN_OP_ERROR || (!out && max > 0))
        return 0;
    const void **seen = NULL;
    int count = 0, n_seen = 0, cap_seen = 0;
    collect_variables(x, out, max < 0 ? 0 : max, &count, &seen, &n_seen,
                      &cap_seen);
    free((void *)seen);
    return count;
}
