/* Small helpers shared by the op and gradient tests: random tensors,
   tolerant comparison, compile-and-run of one output. */
#ifndef KILN_TEST_HELPERS_H
#define KILN_TEST_HELPERS_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln.h"

/* Fills t (f32) uniformly in [lo, hi); with away set, |x| is in [lo, hi)
   and the sign is random (keeps values off kinks at 0). */
static inline void th_fill(kiln_rng *r, kiln_tensor *t, double lo, double hi,
                           int away)
{
    float *p = kiln_tensor_f32(t);
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++) {
        double v = lo + (hi - lo) * kiln_rng_uniform(r);
        p[i] = (float)(away && kiln_rng_uniform(r) < 0.5 ? -v : v);
    }
}

static inline kiln_tensor *th_rand(kiln_rng *r, kiln_shape s, double lo,
                                   double hi)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, s);
    assert_non_null(t);
    th_fill(r, t, lo, hi, 0);
    return t;
}

/* A constant of shape s with standard normal values from r (the weights
   of a test loss sum(y * c), so each element counts differently). */
static inline kiln_node *th_normal_const(kiln_graph *g, kiln_rng *r,
                                         kiln_shape s)
{
    int64_t n = kiln_shape_numel(s);
    float *v = malloc((size_t)n * sizeof *v + 4);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)kiln_rng_normal(r);
    kiln_node *c = kiln_constant(g, KILN_F32, s, v);
    free(v);
    return c;
}

/* Asserts |got - want| <= atol + rtol |want| elementwise (NaN matches NaN,
   infinities must match exactly); names the first bad element. */
static inline void th_assert_close(const char *what, const float *got,
                                   const double *want, int64_t n, double rtol,
                                   double atol)
{
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        int ok = isnan(w)   ? isnan(g)
                 : isinf(w) ? g == w
                            : fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok)
            fail_msg("%s: element %lld: got %.9g, want %.9g (diff %.3g)", what,
                     (long long)i, g, w, fabs(g - w));
    }
}

/* The same against a float array. */
static inline void th_assert_close_f(const char *what, const float *got,
                                     const float *want, int64_t n, double rtol,
                                     double atol)
{
    double *w = malloc(((size_t)n + 1) * sizeof *w);
    assert_non_null(w);
    for (int64_t i = 0; i < n; i++)
        w[i] = want[i];
    th_assert_close(what, got, w, n, rtol, atol);
    free(w);
}

static inline void th_assert_shape(kiln_shape got, kiln_shape want)
{
    char b1[96], b2[96];
    int eq = got.ndim == want.ndim;
    for (int i = 0; eq && i < got.ndim; i++)
        eq = got.d[i] == want.d[i];
    if (!eq)
        fail_msg("shape %s, want %s", kiln_shape_str(got, b1, sizeof b1),
                 kiln_shape_str(want, b2, sizeof b2));
}

/* Asserts got[i] has want[i]'s shape and values within rtol, atol for i
   < n (naming "<what> out <i>"), then frees both. */
static inline void th_assert_outputs_close_free(const char *what,
                                                kiln_tensor **got,
                                                kiln_tensor **want, int n,
                                                double rtol, double atol)
{
    for (int i = 0; i < n; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s out %d", what, i);
        th_assert_shape(kiln_tensor_shape(got[i]), kiln_tensor_shape(want[i]));
        th_assert_close_f(name, kiln_tensor_f32(got[i]),
                          kiln_tensor_f32(want[i]), kiln_tensor_numel(want[i]),
                          rtol, atol);
        kiln_tensor_free(got[i]);
        kiln_tensor_free(want[i]);
    }
}

/* Asserts the graph built without error (printing the message if not). */
static inline void th_assert_graph_ok(const kiln_graph *g)
{
    if (kiln_graph_status(g) != KILN_OK)
        fail_msg("graph error: %s", kiln_graph_error(g));
}

/* Compiles n_out outputs of g fed by n_in inputs, runs it once and returns
   new output tensors in out[]. */
static inline void th_run(kiln_session *s, kiln_graph *g,
                          kiln_node *const *outs, int n_out,
                          kiln_node *const *ins, kiln_tensor *const *feeds,
                          int n_in, kiln_tensor **out)
{
    th_assert_graph_ok(g);
    kiln_function *f = kiln_compile(s, g, outs, n_out, ins, n_in);
    if (!f)
        fail_msg("kiln_compile: %s", kiln_session_error(s));
    for (int i = 0; i < n_out; i++)
        assert_non_null(out[i] = kiln_function_new_output(f, i));
    if (kiln_run(f, feeds, out) != KILN_OK)
        fail_msg("kiln_run: %s", kiln_session_error(s));
    kiln_function_free(f);
}

/* th_run on the dynamic path: feeds the n_in inputs, runs kiln_forward
   and returns the values of the n_out outputs in out[]. */
static inline void th_forward(kiln_session *s, kiln_graph *g,
                              kiln_node *const *outs, int n_out,
                              kiln_node *const *ins, kiln_tensor *const *feeds,
                              int n_in, kiln_tensor **out)
{
    th_assert_graph_ok(g);
    for (int i = 0; i < n_in; i++)
        assert_int_equal(kiln_feed(s, ins[i], feeds[i]), KILN_OK);
    if (kiln_forward(s, g) != KILN_OK)
        fail_msg("kiln_forward: %s", kiln_session_error(s));
    for (int i = 0; i < n_out; i++)
        assert_non_null(out[i] = kiln_node_value(s, outs[i]));
}

/* One output, no inputs: returns its value as a new tensor. */
static inline kiln_tensor *th_eval(kiln_session *s, kiln_graph *g, kiln_node *y)
{
    kiln_tensor *t = NULL;
    th_run(s, g, &y, 1, NULL, NULL, 0, &t);
    return t;
}

/* The graph failed, with a message containing needle. */
static inline void th_expect_graph_error(kiln_graph *g, const char *needle)
{
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    if (!strstr(kiln_graph_error(g), needle))
        fail_msg("error '%s' lacks '%s'", kiln_graph_error(g), needle);
}

/* Writes n raw bytes to path (a test file, corrupt on purpose or not). */
static inline void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

#endif
