/* For the convolution tests: a node's fast kernel (with its scratch)
   against its reference kernel on random values. */
#ifndef KILN_TEST_CONV_CHECK_H
#define KILN_TEST_CONV_CHECK_H

#include "test_helpers.h"

#include "cpu/dispatch.h"
#include "graph/conv.h"

static inline float *random_values(kiln_rng *r, kiln_shape s)
{
    int64_t n = kiln_shape_numel(s);
    float *v = malloc(((size_t)n + 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)kiln_rng_uniform(r) * 2 - 1;
    return v;
}

/* n's fast kernel (with its scratch) against its reference kernel. */
static inline void fast_matches_reference(kiln_rng *r, const kiln_node *n)
{
    void *in[3] = {random_values(r, n->in[0]->shape),
                   random_values(r, n->in[1]->shape),
                   n->n_in > 2 ? random_values(r, n->in[2]->shape) : NULL};
    int64_t len = kiln_shape_numel(n->shape);
    float *want = calloc((size_t)len + 1, sizeof *want);
    float *got = calloc((size_t)len + 1, sizeof *got);
    assert_true(want && got);
    assert_int_equal(kiln_cpu_run_reference(n, want, in), KILN_OK);
    assert_int_equal(kiln_cpu_exec(n, got, in, NULL, 0), KILN_OK);
    char line[512];
    kiln_node_format(n, NULL, 0, line, sizeof line);
    th_assert_close_f(line, got, want, len, 1e-4, 1e-4);
    free(in[0]);
    free(in[1]);
    free(in[2]);
    free(want);
    free(got);
}

/* ops[0] = y, a conv of x under win, and its input and weight gradients
   of an input dy (with the output padding that gives x's dims back). */
static inline void conv_and_grads(kiln_graph *g, kiln_node *x, kiln_node *w,
                                  kiln_node *y, kiln_window win,
                                  kiln_node *ops[3])
{
    win.flags = 0;
    kiln_node *dy = kiln_input(g, "dy", KILN_F32, kiln_node_shape(y));
    kiln_window t =
        kiln_conv_window_to(&win, kiln_node_shape(x), kiln_node_shape(y));
    ops[0] = y;
    ops[1] = kiln_conv_op(g, KILN_OP_CONV_TRANSPOSE, dy, w, &t, NULL);
    ops[2] = kiln_conv_op(g, KILN_OP_CONV_WGRAD, x, dy, &win, NULL);
}

#endif
