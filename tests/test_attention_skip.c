/* The fast attention forward's skipped key tiles (cpu/attention_skip.c):
   under a mask with a tail far below each row's largest value (PyTorch's
   causal -1e9), the fast kernel, which skips the tail, gives the
   reference kernel's values (which computes every key); where skipping
   would not be exact (scores large enough to reach past the gap, an
   infinite or NaN value, a NaN in the mask) it computes every key and
   still agrees, NaN for NaN. */
#include "test_helpers.h"

typedef struct skip_case {
    int64_t b, h, t, d, e;
    float gap;     /* the mask's tail: gap below the visible values */
    float qk_amp;  /* q and k in [-amp, amp) */
    int per_batch; /* mask [B,1,T,T] (each batch its own diagonal offset)
                      instead of [T,T] */
    int bad;       /* 1: v infinite at a hidden key, 2: a NaN in the mask,
                      3: q all amp, k all amp but key 0's -amp: row 0's
                      hidden keys outweigh its one visible key */
} skip_case;

/* Keys j > i + off of row i hidden by -gap, the rest in [-1, 1). */
static kiln_node *tail_mask(kiln_graph *g, const skip_case *c, kiln_rng *r)
{
    int64_t nb = c->per_batch ? c->b : 1, t = c->t;
    float *m = malloc((size_t)(nb * t * t) * sizeof *m);
    assert_non_null(m);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = 0; j < t; j++)
                m[(b * t + i) * t + j] =
                    j > i + b ? -c->gap : (float)(2 * kiln_rng_uniform(r) - 1);
    if (c->bad == 2)
        m[(t - 1) / 2 * t] = NAN;
    kiln_shape s = c->per_batch ? KILN_SHAPE(nb, 1, t, t) : KILN_SHAPE(t, t);
    kiln_node *n = kiln_constant(g, KILN_F32, s, m);
    free(m);
    return n;
}

/* softmax(q k^T / sqrt(d) + mask) v on the fast or reference kernels. */
static kiln_tensor *run(const skip_case *c, int reference)
{
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sq = KILN_SHAPE(c->b, c->h, c->t, c->d),
               sv = KILN_SHAPE(c->b, c->h, c->t, c->e);
    kiln_node *in[3] = {kiln_input(g, "q", KILN_F32, sq),
                        kiln_input(g, "k", KILN_F32, sq),
                        kiln_input(g, "v", KILN_F32, sv)};
    kiln_tensor *feed[3] = {th_rand(&r, sq, -c->qk_amp, c->qk_amp),
                            th_rand(&r, sq, -c->qk_amp, c->qk_amp),
                            th_rand(&r, sv, -2, 2)};
    if (c->bad == 1) /* key t - 1 is hidden from every row but the last */
        kiln_tensor_f32(feed[2])[(c->t - 1) * c->e] = INFINITY;
    for (int64_t i = 0; c->bad == 3 && i < kiln_shape_numel(sq); i++) {
        kiln_tensor_f32(feed[0])[i] = c->qk_amp;
        kiln_tensor_f32(feed[1])[i] =
            i % (c->t * c->d) < c->d ? -c->qk_amp : c->qk_amp;
    }
    kiln_node *y = kiln_scaled_dot_product_attention(g, in[0], in[1], in[2],
                                                     tail_mask(g, c, &r), NULL);
    th_assert_graph_ok(g);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_set_reference_kernels(s, reference), KILN_OK);
    kiln_tensor *out = NULL;
    th_run(s, g, &y, 1, in, feed, 3, &out);
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(feed[i]);
    kiln_session_free(s);
    kiln_graph_free(g);
    return out;
}

static void check(const skip_case *c, const char *what, double tol)
{
    kiln_tensor *fast = run(c, 0), *ref = run(c, 1);
    th_assert_outputs_close_free(what, &fast, &ref, 1, tol, tol / 10);
}

static void test_causal_tail_skipped_exactly(void **state)
{
    (void)state;
    const skip_case cases[] = {
        {1, 4, 128, 32, 32, 1e9f, 2, 0, 0}, /* the GPT's */
        {2, 3, 33, 5, 7, 1e9f, 2, 0, 0},    {1, 1, 1, 1, 1, 1e9f, 2, 0, 0},
        {1, 2, 130, 8, 4, 1e4f, 1, 0, 0},   {3, 2, 70, 16, 9, 1e9f, 2, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check(&cases[i], "skipped tail", 1e-4);
}

static void test_unsafe_tail_computed(void **state)
{
    (void)state;
    /* the bound on |q.k| / sqrt(d), 128 * 22 * 22 / 11.3 = 5.5e3, is over
       half the gap of 1.05e4 */
    check(&(skip_case){1, 2, 64, 128, 16, 1.05e4f, 22, 0, 0}, "large scores",
          1e-4);
    /* scores of +-64 * 40 * 40 / 8 = +-12800, exact in float: row 0's
       hidden keys (-7200) outweigh its visible one (-12800), and its output
       is their values' mean, not key 0's value (the reference's float
       log-sum-exp near 12800 is off by 1e-3: a loose tolerance) */
    check(&(skip_case){1, 2, 64, 64, 16, 2e4f, 40, 0, 3}, "hidden keys win",
          2e-3);
    check(&(skip_case){1, 2, 40, 8, 8, 1e9f, 2, 0, 1}, "infinite v", 1e-4);
    check(&(skip_case){2, 1, 40, 8, 8, 1e9f, 2, 0, 2}, "NaN in the mask", 1e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal_tail_skipped_exactly),
        cmocka_unit_test(test_unsafe_tail_computed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
