/* The fast fused kernels against the reference ones (cpu/fused.c): the
   vector loops of tanh and exp chains (a tanh gelu on a biased input), row
   broadcasts read in place or across block ends, and the vector row
   reductions of a masked softmax (its max and sum over the last axis),
   on random shapes including odd, size-1 and longer-than-a-block rows,
   with a NaN among the scores. */
#include "test_helpers.h"

/* One run of outputs ys of g fed x: the fast kernels after the default
   passes (which fuse the elementwise chains), or the reference kernels of
   the unfused primitives. */
static void run(kiln_graph *g, kiln_node *x, kiln_node **ys, int n_y,
                kiln_tensor *feed, int reference, kiln_tensor **out)
{
    kiln_session_options so = {.threads = 2,
                               .reference_kernels = reference ? 1 : -1};
    kiln_session *s = kiln_session_new(&so);
    assert_non_null(s);
    kiln_compile_options o = kiln_compile_defaults();
    o.fuse = !reference;
    kiln_function *f = kiln_compile_ex(s, g, ys, n_y, &x, 1, &o);
    if (!f)
        fail_msg("kiln_compile: %s", kiln_session_error(s));
    for (int i = 0; i < n_y; i++)
        assert_non_null(out[i] = kiln_function_new_output(f, i));
    assert_int_equal(kiln_run(f, &feed, out), KILN_OK);
    kiln_session_free(s);
}

static void check_shape(kiln_rng *r, int64_t a, int64_t t, int64_t c)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(a, t, c));
    kiln_node *bias = th_normal_const(g, r, KILN_SHAPE(c));
    kiln_node *mask = th_normal_const(g, r, KILN_SHAPE(t, c));
    kiln_node *ys[2] = {
        kiln_gelu(g, kiln_add(g, x, bias)),
        kiln_softmax(g, kiln_add(g, kiln_scale(g, x, 3.0f), mask), -1)};
    th_assert_graph_ok(g);
    kiln_tensor *feed = th_rand(r, KILN_SHAPE(a, t, c), -4, 4);
    if (a * t * c > 7)
        kiln_tensor_f32(feed)[7] = NAN; /* the max keeps it */
    kiln_tensor *fast[2], *ref[2];
    run(g, x, ys, 2, feed, 0, fast);
    run(g, x, ys, 2, feed, 1, ref);
    char what[96];
    for (int i = 0; i < 2; i++) {
        snprintf(what, sizeof what, "%s [%lld,%lld,%lld]",
                 i ? "softmax" : "gelu", (long long)a, (long long)t,
                 (long long)c);
        th_assert_close_f(what, kiln_tensor_f32(fast[i]),
                          kiln_tensor_f32(ref[i]), kiln_tensor_numel(ref[i]),
                          1e-5, 1e-6);
        kiln_tensor_free(fast[i]);
        kiln_tensor_free(ref[i]);
    }
    kiln_tensor_free(feed);
    kiln_graph_free(g);
}

static void test_fast_matches_reference(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    static const int64_t fixed[][3] = {
        {1, 1, 1}, {1, 128, 128}, {2, 3, 600}, {1, 5, 512}, {3, 1, 17}};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        check_shape(&r, fixed[i][0], fixed[i][1], fixed[i][2]);
    for (int k = 0; k < 6; k++)
        check_shape(&r, 1 + (int64_t)(kiln_rng_u32(&r) % 3),
                    1 + (int64_t)(kiln_rng_u32(&r) % 40),
                    1 + (int64_t)(kiln_rng_u32(&r) % 700));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
