/* Axes as values, and kiln_ax construction: leaves, wrapping, alignment. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "axes/axes.h"

kiln_axis kiln_axis_make(const char *name, int64_t length, int batch)
{
    kiln_axis a = {.length = length, .batch = batch != 0};
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= KILN_AXIS_NAME_MAX || length < 0) {
        a.length = -1;
        snprintf(a.name, sizeof a.name, "%.*s", KILN_AXIS_NAME_MAX - 1,
                 name ? name : "");
        return a;
    }
    memcpy(a.name, name, n + 1);
    return a;
}

kiln_axis kiln_axis_dual(kiln_axis a, int offset)
{
    if ((offset > 0 && a.dual > INT_MAX - offset) ||
        (offset < 0 && a.dual < INT_MIN - offset))
        a.length = -1; /* no such position: an invalid axis */
    else
        a.dual += offset;
    return a;
}

int kiln_axis_same(kiln_axis a, kiln_axis b)
{
    return a.dual == b.dual && strcmp(a.name, b.name) == 0;
}

int kiln_axes_find(const kiln_axes *axes, kiln_axis a)
{
    for (int i = 0; i < axes->n; i++)
        if (kiln_axis_same(axes->a[i], a))
            return i;
    return -1;
}

char *kiln_axes_str(kiln_axes axes, char *buf, size_t n)
{
    if (!buf || !n)
        return buf;
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < axes.n && i < KILN_MAX_DIMS && used < n; i++) {
        const kiln_axis *a = &axes.a[i];
        char dual[16] = "";
        if (a->dual)
            snprintf(dual, sizeof dual, "%+d", a->dual);
        used += (size_t)snprintf(buf + used, n - used, "%s%s%s:%lld%s",
                                 i ? ", " : "", a->name, dual,
                                 (long long)a->length, a->batch ? "*" : "");
    }
    if (used < n)
        snprintf(buf + used, n - used, ")");
    return buf;
}

kiln_ax *kiln_ax_make(kiln_graph *g, kiln_node *node, kiln_axes axes,
                      kiln_ax *const *args, int n_args)
{
    kiln_ax *t = kiln_graph_alloc(g, sizeof *t);
    kiln_ax **a =
        n_args ? kiln_graph_alloc(g, (size_t)n_args * sizeof *a) : NULL;
    if (!t || (n_args && !a)) {
        kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_ax: out of memory");
        return NULL;
    }
    t->node = node;
    if (node->op != KILN_OP_ERROR) {
        t->axes = axes;
        t->n_args = n_args;
        t->args = a;
        if (n_args)
            memcpy(a, args, (size_t)n_args * sizeof *a);
    }
    return t;
}

kiln_ax *kiln_ax_poison(kiln_graph *g)
{
    return g ? kiln_ax_make(g, &g->poison, KILN_NO_AXES, NULL, 0) : NULL;
}

int kiln_ax_check(kiln_graph *g, const char *fn, const kiln_ax *t)
{
    if (g->status != KILN_OK)
        return 0;
    if (!t) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: operand is NULL", fn);
        return 0;
    }
    return kiln_graph_check(g, fn, t->node);
}

/* Checks that every axis is valid and appears once. */
static int check_axes(kiln_graph *g, const char *fn, const kiln_axes *axes)
{
    if (axes->n < 0 || axes->n > KILN_MAX_DIMS) {
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %d axes (at most %d)", fn,
                        axes->n, KILN_MAX_DIMS);
        return 0;
    }
    for (int i = 0; i < axes->n; i++) {
        const kiln_axis *a = &axes->a[i];
        if (a->length < 0 || !a->name[0]) {
            kiln_graph_fail(g, KILN_ERR_ARG,
                            "%s: axis %d ('%s') is invalid: it needs a name of "
                            "1 to %d characters and a length >= 0",
                            fn, i, a->name, KILN_AXIS_NAME_MAX - 1);
            return 0;
        }
        if (kiln_axes_find(axes, *a) != i) {
            char b[256];
            kiln_graph_fail(g, KILN_ERR_ARG,
                            "%s: axis '%s' appears twice in %s", fn, a->name,
                            kiln_axes_str(*axes, b, sizeof b));
            return 0;
        }
    }
    return 1;
}

static kiln_shape axes_shape(const kiln_axes *axes)
{
    kiln_shape s = {.ndim = axes->n};
    for (int i = 0; i < axes->n; i++)
        s.d[i] = axes->a[i].length;
    return s;
}

kiln_ax *kiln_ax_placeholder(kiln_graph *g, const char *name, kiln_axes axes)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (g->status || !check_axes(g, "kiln_ax_placeholder", &axes))
        return kiln_ax_poison(g);
    kiln_node *n = kiln_input(g, name, KILN_F32, axes_shape(&axes));
    return kiln_ax_make(g, n, axes, NULL, 0);
}

kiln_ax *kiln_ax_variable(kiln_graph *g, const char *name, kiln_axes axes,
                          kiln_init init)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (g->status || !check_axes(g, "kiln_ax_variable", &axes))
        return kiln_ax_poison(g);
    kiln_node *n = kiln_variable(g, name, KILN_F32, axes_shape(&axes), init);
    kiln_ax *t = kiln_ax_make(g, n, axes, NULL, 0);
    if (t)
        t->is_variable = n->op == KILN_OP_VARIABLE;
    return t;
}

kiln_ax *kiln_ax_scalar(kiln_graph *g, float v)
{
    if (!g)
        return kiln_null_graph(__func__);
    return kiln_ax_make(g, kiln_scalar(g, v), KILN_NO_AXES, NULL, 0);
}

kiln_ax *kiln_ax_wrap(kiln_graph *g, kiln_node *n, kiln_axes axes)
{
    const char *fn = "kiln_ax_wrap";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, n) || !check_axes(g, fn, &axes))
        return kiln_ax_poison(g);
    if (!kiln_shape_equal(n->shape, axes_shape(&axes))) {
        char b1[96], b2[256];
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: node %%%d is %s, axes are %s",
                        fn, n->id, kiln_shape_str(n->shape, b1, sizeof b1),
                        kiln_axes_str(axes, b2, sizeof b2));
        return kiln_ax_poison(g);
    }
    return kiln_ax_make(g, n, axes, NULL, 0);
}

kiln_ax *kiln_ax_named(kiln_ax *t, const char *name)
{
    if (t)
        kiln_node_set_name(t->node, name);
    return t;
}

kiln_node *kiln_ax_node(const kiln_ax *t)
{
    return t ? t->node : NULL;
}

kiln_axes kiln_ax_axes(const kiln_ax *t)
{
    return t ? t->axes : KILN_NO_AXES;
}

kiln_node *kiln_ax_align(kiln_graph *g, const kiln_ax *x, const kiln_axes *out)
{
    int perm[KILN_MAX_DIMS], k = 0, identity = 1;
    kiln_shape s = {.ndim = out->n};
    for (int i = 0; i < out->n; i++) {
        int j = kiln_axes_find(&x->axes, out->a[i]);
        s.d[i] = j < 0 ? 1 : out->a[i].length;
        if (j >= 0) {
            identity &= j == k;
            perm[k++] = j;
        }
    }
    kiln_node *n = x->node;
    if (!identity)
        n = kiln_permute(g, n, perm);
    if (!kiln_shape_equal(n->shape, s))
        n = kiln_reshape(g, n, s);
    return n;
}
