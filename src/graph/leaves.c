/* Builders of leaves (inputs, constants, variables) and of the state ops
   (assign, doall). */
#include <stdlib.h>
#include <string.h>

#include "graph/builders.h"

/* ---------------------------------------------------------------- leaves */

/* The sizes a graph is built at stand for the symbolic size, one for every
   symbolic axis: a size of 0 would leave a mean's count nothing to follow. */
static int check_sym_axes(kiln_graph *g, const char *fn, kiln_shape s,
                          unsigned sym)
{
    char b[SHAPE_BUF];
    if (sym >> s.ndim) {
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "%s: symbolic axes 0x%x beyond the %d dims of %s", fn,
                        sym, s.ndim, S(s, b));
        return 0;
    }
    int first = sym ? __builtin_ctz(sym) : 0;
    for (int i = first; i < s.ndim; i++) {
        if (!(sym >> i & 1u))
            continue;
        if (s.d[i] == s.d[first] && s.d[i] > 0)
            continue;
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: symbolic axes of %s must have one size >= 1 "
                        "when the graph is built (axis %d)",
                        fn, S(s, b), i);
        return 0;
    }
    return 1;
}

kiln_node *kiln_input_sym(kiln_graph *g, const char *name, kiln_dtype dt,
                          kiln_shape shape, unsigned sym_axes)
{
    const char *fn = sym_axes ? "kiln_input_sym" : "kiln_input";
    if (!g || g->status)
        return g ? &g->poison : kiln_null_graph(fn);
    if (!check_dtype(g, fn, dt) || !check_shape(g, fn, shape) ||
        !check_sym_axes(g, fn, shape, sym_axes))
        return &g->poison;
    shape.sym = sym_axes;
    kiln_node *n = kiln_node_make(g, KILN_OP_INPUT, dt, shape, NULL, 0);
    return kiln_node_set_name(n, name);
}

kiln_node *kiln_input(kiln_graph *g, const char *name, kiln_dtype dt,
                      kiln_shape shape)
{
    return kiln_input_sym(g, name, dt, shape, shape.sym);
}

kiln_node *kiln_constant(kiln_graph *g, kiln_dtype dt, kiln_shape shape,
                         const void *data)
{
    if (!g || g->status)
        return g ? &g->poison : kiln_null_graph(__func__);
    if (!check_dtype(g, "kiln_constant", dt) ||
        !check_shape(g, "kiln_constant", shape))
        return &g->poison;
    size_t bytes = (size_t)kiln_shape_numel(shape) * kiln_dtype_size(dt);
    if (!data && bytes)
        return kiln_graph_fail(g, KILN_ERR_ARG, "kiln_constant: data is NULL");
    void *copy = kiln_graph_alloc(g, bytes);
    if (!copy)
        return kiln_graph_fail(g, KILN_ERR_MEMORY,
                               "kiln_constant: out of memory");
    if (bytes)
        memcpy(copy, data, bytes);
    shape.sym = 0; /* its values have one size; kiln_fill's follow any */
    kiln_node *n = kiln_node_make(g, KILN_OP_CONSTANT, dt, shape, NULL, 0);
    n->at.data = copy;
    return n;
}

kiln_node *kiln_fill(kiln_graph *g, kiln_shape shape, float v)
{
    if (!g || g->status)
        return g ? &g->poison : kiln_null_graph(__func__);
    if (!check_shape(g, "kiln_fill", shape))
        return &g->poison;
    int64_t numel = kiln_shape_numel(shape);
    float *data = kiln_graph_alloc(g, (size_t)numel * sizeof(float));
    if (!data)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_fill: out of memory");
    for (int64_t i = 0; i < numel; i++)
        data[i] = v;
    kiln_node *n =
        kiln_node_make(g, KILN_OP_CONSTANT, KILN_F32, shape, NULL, 0);
    n->at.data = data;
    return n;
}

kiln_node *kiln_scalar(kiln_graph *g, float v)
{
    return kiln_fill(g, KILN_SCALAR, v);
}

kiln_node *kiln_zeros_like(kiln_graph *g, kiln_node *x)
{
    return kiln_fill(g, x->shape, 0.0f);
}

kiln_node *kiln_splat(kiln_graph *g, kiln_shape s, float v)
{
    int64_t numel = kiln_shape_numel(s);
    if (numel >= 0 && numel <= KILN_SPLAT_INLINE)
        return kiln_fill(g, s, v);
    return kiln_broadcast_to(g, kiln_scalar(g, v), s);
}

kiln_node *kiln_variable(kiln_graph *g, const char *name, kiln_dtype dt,
                         kiln_shape shape, kiln_init init)
{
    const char *fn = "kiln_variable";
    if (!g || g->status)
        return g ? &g->poison : kiln_null_graph(__func__);
    if (!name || !*name)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: a variable needs a name",
                               fn);
    if (!check_dtype(g, fn, dt) || !check_shape(g, fn, shape))
        return &g->poison;
    if ((unsigned)init.kind > KILN_INIT_GLOROT_UNIFORM)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s '%s': unknown initialiser %d", fn, name,
                               (int)init.kind);
    /* The initialiser's parameters (ranges, deviations), checked by
       kiln_init_fill itself on no elements. */
    if (kiln_init_fill(init, KILN_SHAPE(0), NULL, NULL) != KILN_OK ||
        (dt == KILN_I32 && kiln_init_check_i32(init) != KILN_OK))
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s '%s': %s", fn, name,
                               kiln_last_error());
    if (init.kind == KILN_INIT_VALUES) {
        size_t bytes = (size_t)kiln_shape_numel(shape) * sizeof(float);
        if (!init.values && bytes)
            return kiln_graph_fail(g, KILN_ERR_ARG, "%s '%s': values is NULL",
                                   fn, name);
        float *copy = kiln_graph_alloc(g, bytes);
        if (!copy)
            return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        if (bytes)
            memcpy(copy, init.values, bytes);
        init.values = copy;
    }
    for (int i = 0; i < g->n_vars; i++) {
        kiln_node *v = g->vars[i];
        if (strcmp(v->name, name) != 0)
            continue;
        if (v->dtype != dt || !kiln_shape_equal(v->shape, shape)) {
            char b1[SHAPE_BUF], b2[SHAPE_BUF];
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: '%s' already in this graph as %s%s, not "
                "%s%s",
                fn, name, kiln_dtype_name(v->dtype), S(v->shape, b1),
                kiln_dtype_name(dt), S(shape, b2));
        }
        return v; /* one node per variable, so gradients accumulate */
    }
    if (g->n_vars == g->cap_vars) {
        int cap = g->cap_vars ? 2 * g->cap_vars : 16;
        kiln_node **vars = realloc(g->vars, (size_t)cap * sizeof *vars);
        if (!vars)
            return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        g->vars = vars;
        g->cap_vars = cap;
    }
    shape.sym = 0; /* a variable's storage has one size */
    kiln_node *n = kiln_node_make(g, KILN_OP_VARIABLE, dt, shape, NULL, 0);
    if (n->op != KILN_OP_VARIABLE)
        return n;
    g->vars[g->n_vars++] = n;
    n->at.init = init;
    n->at.trainable = dt == KILN_F32;
    return kiln_node_set_name(n, name);
}

/* ---------------------------------------------------------------- state */

kiln_node *kiln_assign(kiln_graph *g, kiln_node *variable, kiln_node *value)
{
    const char *fn = "kiln_assign";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, variable) || !kiln_graph_check(g, fn, value))
        return &g->poison;
    kiln_node *in[2] = {variable, value};
    kiln_node p = {.op = KILN_OP_ASSIGN, .n_in = 2, .in = in};
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_doall(kiln_graph *g, kiln_node *const *xs, int n)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (g->status)
        return &g->poison;
    if (!xs || n < 1)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "kiln_doall: needs at least one node");
    for (int i = 0; i < n; i++)
        if (!kiln_graph_check(g, "kiln_doall", xs[i]))
            return &g->poison;
    return kiln_node_make(g, KILN_OP_DOALL, KILN_F32, KILN_SCALAR, xs, n);
}
