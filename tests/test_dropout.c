/* Dropout and the counter-based generator behind it: Philox4x32-10's known
   answers, the mask's keep rate against the binomial, the same mask
   whatever the thread count and in two sessions seeded alike, a fresh mask
   at every run, the identity in evaluation, gradients through the same
   mask, dropout2d's whole planes, PyTorch's scaling, and the errors. */
#include "norm_refs.h"

#include "base/philox.h"

/* Random123's known-answer vectors for philox4x32 with 10 rounds. */
static void test_philox_known_answers(void **state)
{
    (void)state;
    const struct {
        uint32_t c[4], k[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0},
         {0, 0},
         {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof *kat; i++) {
        kiln_philox_out o = kiln_philox4x32(kat[i].c, kat[i].k[0], kat[i].k[1]);
        for (int j = 0; j < 4; j++)
            assert_int_equal(o.v[j], kat[i].want[j]);
    }
}

/* y = dropout(x, p) for x [len] of ones (or x2d [4, 8, 5, 5]), compiled. */
typedef struct drop {
    kiln_graph *g;
    kiln_node *x, *y, *dx;
    kiln_function *f;
    kiln_tensor *in, *out[2];
} drop;

static drop drop_new(kiln_session *s, kiln_shape shape, float p, int planes)
{
    drop d = {.g = kiln_graph_new()};
    d.x = kiln_input(d.g, "x", KILN_F32, shape);
    d.y = planes ? kiln_dropout2d(d.g, d.x, p) : kiln_dropout(d.g, d.x, p);
    /* the gradient of sum(y * 3): 3 * mask * scale */
    kiln_node *loss =
        kiln_sum(d.g, kiln_scale(d.g, d.y, 3.0f), KILN_ALL_AXES, 0);
    d.dx = kiln_grad(d.g, loss, d.x);
    th_assert_graph_ok(d.g);
    kiln_node *outs[2] = {d.y, d.dx};
    assert_non_null(d.f = kiln_compile(s, d.g, outs, 2, &d.x, 1));
    d.in = kiln_tensor_new(KILN_F32, shape);
    float *x = kiln_tensor_f32(d.in);
    for (int64_t i = 0; i < kiln_tensor_numel(d.in); i++)
        x[i] = 1.0f + (float)(i % 7) / 8.0f;
    for (int i = 0; i < 2; i++)
        d.out[i] = kiln_function_new_output(d.f, i);
    return d;
}

static const float *drop_run(drop *d)
{
    assert_int_equal(kiln_run(d->f, &d->in, d->out), KILN_OK);
    return kiln_tensor_f32(d->out[0]);
}

static void drop_free(drop *d)
{
    kiln_tensor_free(d->in);
    kiln_tensor_free(d->out[0]);
    kiln_tensor_free(d->out[1]);
    kiln_graph_free(d->g);
}

/* Elements kept in y (non-zero), checking each kept one is x / (1 - p)
   and the gradient 3 * that scale where kept, 0 elsewhere. */
static int64_t count_kept(const drop *d, float p)
{
    const float *x = kiln_tensor_f32(d->in), *y = kiln_tensor_f32(d->out[0]);
    const float *dx = kiln_tensor_f32(d->out[1]);
    float scale = 1.0f / (1.0f - p);
    int64_t kept = 0;
    for (int64_t i = 0; i < kiln_tensor_numel(d->in); i++) {
        if (y[i] != 0.0f) {
            kept++;
            assert_true(y[i] == x[i] * scale);
            assert_true(dx[i] == 3.0f * scale);
        } else {
            assert_true(dx[i] == 0.0f);
        }
    }
    return kept;
}

/* The kept count of n draws is binomial(n, 1 - p): within 6 standard
   deviations but for a chance below 1e-8. */
static void test_keep_rate_is_binomial(void **state)
{
    (void)state;
    const int64_t n = 200000;
    const float ps[] = {0.1f, 0.5f, 0.9f};
    kiln_session *s = kiln_session_new(NULL);
    for (int i = 0; i < 3; i++) {
        drop d = drop_new(s, KILN_SHAPE(n), ps[i], 0);
        for (int run = 0; run < 3; run++) {
            drop_run(&d);
            double mean = (double)n * (1.0 - ps[i]);
            double sd = sqrt((double)n * ps[i] * (1.0 - ps[i]));
            double kept = (double)count_kept(&d, ps[i]);
            if (fabs(kept - mean) > 6 * sd)
                fail_msg("p %g: kept %g of %lld, expected %g +- %g",
                         (double)ps[i], kept, (long long)n, mean, 6 * sd);
        }
        drop_free(&d);
    }
    kiln_session_free(s);
}

static float *copy_out(const drop *d)
{
    size_t bytes = (size_t)kiln_tensor_numel(d->out[0]) * sizeof(float);
    float *c = malloc(bytes);
    assert_non_null(c);
    memcpy(c, kiln_tensor_f32(d->out[0]), bytes);
    return c;
}

/* Same seed and step: the same mask with 1 and 2 threads and in two
   sessions; the next run draws another; kiln_session_set_seed restarts. */
static void test_mask_reproducible_and_fresh(void **state)
{
    (void)state;
    kiln_session_options o1 = {.seed = 7, .threads = 1};
    kiln_session_options o2 = {.seed = 7, .threads = 2};
    kiln_session *s1 = kiln_session_new(&o1), *s2 = kiln_session_new(&o2);
    kiln_shape shape = KILN_SHAPE(300, 301); /* threaded: 90300 elements */
    drop a = drop_new(s1, shape, 0.5f, 0), b = drop_new(s2, shape, 0.5f, 0);
    int64_t n = 300 * 301;
    drop_run(&a);
    float *first = copy_out(&a);
    assert_int_equal(kiln_session_rng_step(s1), 1);
    assert_memory_equal(first, drop_run(&b), (size_t)n * 4);
    /* a second run: another mask, in both sessions alike */
    drop_run(&a);
    assert_memory_not_equal(first, kiln_tensor_f32(a.out[0]), (size_t)n * 4);
    assert_memory_equal(kiln_tensor_f32(a.out[0]), drop_run(&b), (size_t)n * 4);
    /* the seed restarts the steps */
    assert_int_equal(kiln_session_set_seed(s1, 7), KILN_OK);
    assert_memory_equal(first, drop_run(&a), (size_t)n * 4);
    assert_int_equal(kiln_session_set_seed(s1, 8), KILN_OK);
    assert_memory_not_equal(first, drop_run(&a), (size_t)n * 4);
    free(first);
    drop_free(&a);
    drop_free(&b);
    kiln_session_free(s1);
    kiln_session_free(s2);
}

static void test_evaluation_is_identity(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    drop d = drop_new(s, KILN_SHAPE(5, 7), 0.6f, 0);
    assert_int_equal(kiln_session_training(s), 1);
    assert_int_equal(kiln_session_set_training(s, 0), KILN_OK);
    assert_int_equal(kiln_session_training(s), 0);
    assert_memory_equal(drop_run(&d), kiln_tensor_f32(d.in), 35 * 4);
    const float *dx = kiln_tensor_f32(d.out[1]);
    for (int i = 0; i < 35; i++)
        assert_true(dx[i] == 3.0f);
    assert_int_equal(kiln_session_set_training(s, 1), KILN_OK);
    assert_memory_not_equal(drop_run(&d), kiln_tensor_f32(d.in), 35 * 4);
    drop_free(&d);
    /* p = 0 is x itself */
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    assert_ptr_equal(kiln_dropout(g, x, 0.0f), x);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* dropout2d zeroes whole (sample, channel) planes. */
static void test_dropout2d_planes(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    drop d = drop_new(s, KILN_SHAPE(40, 50, 3, 3), 0.5f, 1);
    const float *y = drop_run(&d);
    int kept_planes = 0;
    for (int plane = 0; plane < 2000; plane++) {
        int kept = 0;
        for (int j = 0; j < 9; j++)
            kept += y[plane * 9 + j] != 0.0f;
        assert_true(kept == 0 || kept == 9);
        kept_planes += kept == 9;
    }
    assert_int_equal(count_kept(&d, 0.5f), kept_planes * 9);
    /* binomial(2000, 0.5): sd 22.4 */
    assert_true(abs(kept_planes - 1000) < 135);
    drop_free(&d);
    kiln_session_free(s);
}

/* The dynamic path: kiln_forward draws at the next step after a feed and
   keeps the mask otherwise; the gradient uses the forward's mask. */
static void test_dynamic_masks(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(64));
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(64), kiln_init_ones());
    kiln_node *y = kiln_dropout(g, kiln_mul(g, x, w), 0.5f);
    kiln_node *loss = kiln_sum(g, y, KILN_ALL_AXES, 0);
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(64));
    for (int i = 0; i < 64; i++)
        kiln_tensor_f32(xt)[i] = 1.0f;
    float a[64];
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    assert_int_equal(kiln_backprop(s, g, loss), KILN_OK);
    memcpy(a, kiln_node_value_f32(s, y), sizeof a);
    const float *dx = kiln_node_grad_f32(s, w);
    if (!dx)
        fail_msg("no gradient: %s", kiln_session_error(s));
    for (int i = 0; i < 64; i++)
        assert_true(dx[i] == a[i]); /* x = w = 1: mask times scale */
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_memory_equal(a, kiln_node_value_f32(s, y), sizeof a);
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_memory_not_equal(a, kiln_node_value_f32(s, y), sizeof a);
    /* evaluation recomputes without a feed */
    kiln_session_set_training(s, 0);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_memory_equal(kiln_tensor_f32(xt), kiln_node_value_f32(s, y),
                        sizeof a);
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Kept values are PyTorch's float32 x / (1 - p) exactly. */
static void test_scaling_matches_pytorch(void **state)
{
    (void)state;
    ref_case c;
    ref_load("dropout_scale", &c);
    const ref_entry *x = ref_need(&c, "x"), *want = ref_need(&c, "y");
    float p = (float)ref_attr(&c, "p");
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *xn = kiln_input(g, "x", KILN_F32, x->shape);
    kiln_node *y = kiln_dropout(g, xn, p);
    kiln_tensor *xt = kiln_tensor_wrap(KILN_F32, x->shape, x->f), *yt = NULL;
    th_run(s, g, &y, 1, &xn, &xt, 1, &yt);
    const float *got = kiln_tensor_f32(yt);
    int both = 0;
    for (int64_t i = 0; i < x->numel; i++)
        if (got[i] != 0.0f && want->f[i] != 0.0f) {
            assert_true(got[i] == want->f[i]);
            both++;
        }
    assert_true(both > x->numel / 3);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
    kiln_graph_free(g);
    kiln_session_free(s);
    ref_free(&c);
}

static void test_errors(void **state)
{
    (void)state;
    const float bad[] = {1.0f, -0.1f, NAN, 2.0f};
    for (int i = 0; i < 4; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
        kiln_dropout(g, x, bad[i]);
        th_expect_graph_error(g, "is outside [0, 1)");
        kiln_graph_free(g);
    }
    kiln_graph *g = kiln_graph_new();
    kiln_dropout(g, NULL, 0.5f);
    th_expect_graph_error(g, "kiln_dropout");
    kiln_graph_free(g);
    g = kiln_graph_new();
    kiln_dropout2d(g, kiln_input(g, "x", KILN_F32, KILN_SHAPE(3)), 0.5f);
    th_expect_graph_error(g, "has no channel axis");
    kiln_graph_free(g);
    g = kiln_graph_new();
    kiln_dropout(g, kiln_input(g, "l", KILN_I32, KILN_SHAPE(3)), 0.5f);
    th_expect_graph_error(g, "kiln_dropout");
    kiln_graph_free(g);
    assert_null(kiln_dropout(NULL, NULL, 0.5f));
    assert_int_equal(kiln_session_set_seed(NULL, 1), KILN_ERR_ARG);
    assert_int_equal(kiln_session_set_training(NULL, 1), KILN_ERR_ARG);
    assert_int_equal(kiln_session_training(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_keep_rate_is_binomial),
        cmocka_unit_test(test_mask_reproducible_and_fresh),
        cmocka_unit_test(test_evaluation_is_identity),
        cmocka_unit_test(test_dropout2d_planes),
        cmocka_unit_test(test_dynamic_masks),
        cmocka_unit_test(test_scaling_matches_pytorch),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
